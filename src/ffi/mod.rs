//! The C ABI and nothing else: pointer checks, the panic boundary, status
//! codes, conversion to the safe core. Every function here checks its
//! arguments, calls one safe function and maps the result.

#![allow(non_camel_case_types)]
// These functions are the C ABI: their pointer arguments are the C caller's
// promise (documented per function), checked for NULL here. Rust code uses
// the safe `Stream` API instead.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod array_list;
mod arrays;
mod callback_sink;
mod convert;
mod creation;
mod guard;
mod metrics;
mod options;
mod recovery;
mod reserve;
mod status;
mod types;

pub use array_list::*;
pub use arrays::*;
pub use metrics::*;
pub use options::*;
pub use recovery::*;
pub use reserve::*;
pub use status::tz_status;
pub use types::*;

use crate::config::StreamConfig;
use crate::error::Error;
use crate::pipeline::{Lease, Stream, StreamStats};
use crate::sink::ShardSink;
use crate::Config;
use creation::{backend_code, config_of, create, create_image_impl, estimate, estimate_image_impl};
use guard::{guard, record, ErrorSlot};
use parking_lot::Mutex;
use std::ffi::{c_char, c_void};
use std::time::Duration;

/// An open stream (opaque to C).
pub struct tz_stream {
    /// Tells this stream's own sink callbacks apart (see `guard::in_sink`).
    id: u64,
    stream: Mutex<Open>,
    /// Counters readable without waiting for the stream's lock.
    stats: StreamStats,
    errors: ErrorSlot,
}

/// A stream and the staging memory handed out by tz_reserve.
struct Open {
    /// First, so that it is freed before the stream and its backend.
    lease: Option<Lease>,
    stream: Stream,
}

fn status_of(e: &Error) -> i32 {
    tz_status::from(e) as i32
}

/// Fills `config` with the defaults: uint16, zstd level 1, backend auto,
/// index at the end, no store, no sink, default threads and staging. The
/// caller then sets `rank`, `dimensions` and a store path or sink.
#[no_mangle]
pub extern "C" fn tz_config_init(config: *mut tz_config) -> i32 {
    guard("tz_config_init", None, status_of, || {
        if config.is_null() {
            return Err(Error::NullArgument("config"));
        }
        let c = tz_config {
            dtype: tz_dtype::TZ_DTYPE_UINT16 as u32,
            rank: 0,
            dimensions: std::ptr::null(),
            codec: tz_codec::TZ_CODEC_ZSTD as u32,
            level: 1,
            backend: tz_backend::TZ_BACKEND_AUTO as u32,
            index_location: tz_index_location::TZ_INDEX_END as u32,
            store_path: std::ptr::null(),
            overwrite: 0,
            sink: None,
            sink_user_data: std::ptr::null_mut(),
            threads: 0,
            staging_bytes: 0,
            device: 0,
            store_skip_fsync: 0,
        };
        // SAFETY: non-NULL; the caller provides writable memory for a tz_config.
        unsafe { config.write(c) };
        Ok(tz_status::TZ_OK as i32)
    })
}

/// Fills `image` with the defaults, a plain Zarr array in acquisition
/// order (no axes, no storage order, no pyramid, no OME, no attributes),
/// as 0.4 defined it: it writes 0.4's 56 bytes (on 64-bit platforms) with
/// `struct_size` 56, and never more, so that a program built against an
/// older header keeps its memory. Programs built against this header
/// reach tz_image_init_sized instead (the macro `tz_image_init` at the end
/// of the header). Since 0.4.
#[no_mangle]
pub extern "C" fn tz_image_init(image: *mut tz_image) -> i32 {
    guard("tz_image_init", None, status_of, || {
        if image.is_null() {
            return Err(Error::NullArgument("image"));
        }
        // SAFETY: non-NULL; the caller provides writable memory for 0.4's
        // tz_image, the smallest.
        unsafe { convert::write_image_defaults(image, convert::TZ_IMAGE_0_4_SIZE) };
        Ok(tz_status::TZ_OK as i32)
    })
}

/// Fills the first `struct_size` bytes of `image` with the defaults (as
/// tz_image_init) and sets its `struct_size`: `sizeof(tz_image)` as the
/// caller compiled it, from 0.4's 56 bytes to this library's. Any other
/// size is TZ_ERR_INVALID_ARGUMENT and nothing is written. The header's
/// macro `tz_image_init(&image)` calls it with `sizeof image`. Since 0.8.
#[no_mangle]
pub extern "C" fn tz_image_init_sized(image: *mut tz_image, struct_size: usize) -> i32 {
    guard("tz_image_init_sized", None, status_of, || {
        if image.is_null() {
            return Err(Error::NullArgument("image"));
        }
        convert::check_image_size(struct_size)?;
        // SAFETY: non-NULL; the caller provides `struct_size` writable bytes,
        // at most a whole tz_image (checked above).
        unsafe { convert::write_image_defaults(image, struct_size) };
        Ok(tz_status::TZ_OK as i32)
    })
}

/// Creates a stream from a `tz_config`. On success `*out` holds the stream;
/// on failure it is NULL and `tz_last_error()` says why. A folder store
/// whose disk answers nothing for `store.timeout_s` (default 60 s; C:
/// `tz_options.store_timeout_s` through tz_create_with) while it is made
/// fails with `TZ_ERR_IO`; what was made is removed once the disk answers.
#[no_mangle]
pub extern "C" fn tz_create(config: *const tz_config, out: *mut *mut tz_stream) -> i32 {
    create_image_impl("tz_create", config, std::ptr::null(), out)
}

/// tz_create with the image settings of `image` (see `tz_image`; NULL: as
/// tz_create, a plain array). A bad `image.struct_size` is
/// TZ_ERR_INVALID_ARGUMENT; a bad field TZ_ERR_CONFIG naming it
/// (`image.attributes_json`, `image.axes[1].kind`, ...). Since 0.4.
#[no_mangle]
pub extern "C" fn tz_create_image(
    config: *const tz_config,
    image: *const tz_image,
    out: *mut *mut tz_stream,
) -> i32 {
    create_image_impl("tz_create_image", config, image, out)
}

/// Creates a stream from the JSON configuration (see README), with an
/// optional shard callback (`sink` may be NULL when the JSON names a store).
#[no_mangle]
pub extern "C" fn tz_create_json(
    config_json: *const c_char,
    sink: tz_shard_sink_fn,
    sink_user_data: *mut c_void,
    out: *mut *mut tz_stream,
) -> i32 {
    guard("tz_create_json", None, status_of, || {
        if out.is_null() {
            return Err(Error::NullArgument("out"));
        }
        // SAFETY: non-NULL, points to the caller's `tz_stream*`.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: NULL or a NUL-terminated string, by the C contract.
        let json = unsafe { convert::read_str(config_json, "config_json") }?
            .ok_or(Error::NullArgument("config_json"))?;
        let cfg = StreamConfig::from_json(&json).map_err(Error::from);
        create(cfg, sink, sink_user_data, out)
    })
}

/// The memory a stream of this configuration would take and the backend it
/// would run on, computed without creating it (nothing is allocated; the
/// GPU is asked for nothing but nvCOMP's sizes). A stream created from the
/// same configuration allocates this within 10%.
#[no_mangle]
pub extern "C" fn tz_estimate_memory(config: *const tz_config, out: *mut tz_memory_plan) -> i32 {
    estimate_image_impl("tz_estimate_memory", config, std::ptr::null(), out)
}

/// tz_estimate_memory with the image settings of `image` (NULL: none), the
/// pyramid's levels included; refused as tz_create_image refuses. Since 0.4.
#[no_mangle]
pub extern "C" fn tz_estimate_memory_image(
    config: *const tz_config,
    image: *const tz_image,
    out: *mut tz_memory_plan,
) -> i32 {
    estimate_image_impl("tz_estimate_memory_image", config, image, out)
}

/// tz_estimate_memory for the JSON form of the configuration.
#[no_mangle]
pub extern "C" fn tz_estimate_memory_json(
    config_json: *const c_char,
    out: *mut tz_memory_plan,
) -> i32 {
    guard("tz_estimate_memory_json", None, status_of, || {
        // SAFETY: NULL or a NUL-terminated string, by the C contract.
        let json = unsafe { convert::read_str(config_json, "config_json") }?
            .ok_or(Error::NullArgument("config_json"))?;
        estimate(StreamConfig::from_json(&json).map_err(Error::from), out)
    })
}

/// Runs `f` on the stream behind `s`, at the C boundary.
fn with_stream<T>(
    what: &str,
    s: *const tz_stream,
    on_err: impl Fn(&Error) -> T,
    f: impl FnOnce(&mut Stream) -> Result<T, Error>,
) -> T {
    with_open(what, s, on_err, |open| f(&mut open.stream))
}

/// Runs `f` on the stream behind `s` and its reservation, at the C boundary.
fn with_open<T>(
    what: &str,
    s: *const tz_stream,
    on_err: impl Fn(&Error) -> T,
    f: impl FnOnce(&mut Open) -> Result<T, Error>,
) -> T {
    // SAFETY: NULL is checked; otherwise `s` came from tz_create* and has not
    // been destroyed (the C contract).
    let Some(h) = (unsafe { s.as_ref() }) else {
        let e = Error::NullArgument("stream");
        record(None, &e);
        return on_err(&e);
    };
    guard(what, Some(&h.errors), on_err, || {
        if let Some(e) = h.errors.broken() {
            return Err(e);
        }
        refuse_from_own_sink(what, h)?;
        f(&mut h.stream.lock())
    })
}

/// A sink callback runs on the thread that the stream's flush (or write)
/// waits for: a call on its own stream from there would wait for itself.
fn refuse_from_own_sink(what: &str, h: &tz_stream) -> Result<(), Error> {
    if guard::in_sink(h.id) {
        return Err(Error::InvalidArgument(format!(
            "{what} was called from this stream's own sink callback, which may not call \
             tz_write, tz_write_all, tz_flush, tz_set_attributes or tz_destroy on its stream"
        )));
    }
    Ok(())
}

/// Copies what fits of `data` into free staging memory, never waiting.
/// Returns the bytes taken (0: busy, call again), or a negated status.
/// While such writes outrun the pipeline, staging grows up to
/// `staging_bytes` to absorb them. A
/// write may end mid-element; the next continues the byte stream. After the
/// end of a bounded array: `-TZ_ERR_OVERFLOW`; after tz_flush:
/// `-TZ_ERR_FINISHED`; after a failure: the failure's status, every time.
#[no_mangle]
pub extern "C" fn tz_write(s: *mut tz_stream, data: *const c_void, nbytes: usize) -> i64 {
    write_impl("tz_write", s, 0, data, nbytes, None)
}

/// Like tz_write, but waits for staging memory until all `nbytes` are taken
/// or `timeout_ms` passes (negative: no limit). A writer that waits is
/// given no more staging than keeps the pipeline busy (two buffers, a third
/// once the writer and the pipeline have each waited for the other, and one
/// more per other array holding a partial epoch), not the whole
/// `staging_bytes`: more would hold only a backlog. Returns the bytes taken:
/// `nbytes`, or fewer when the time ran out or the end of a bounded array
/// was reached (the next call then returns `-TZ_ERR_OVERFLOW`, as tz_write
/// does); a negated status on error.
#[no_mangle]
pub extern "C" fn tz_write_all(
    s: *mut tz_stream,
    data: *const c_void,
    nbytes: usize,
    timeout_ms: i64,
) -> i64 {
    let timeout = (timeout_ms >= 0).then(|| Duration::from_millis(timeout_ms as u64));
    write_impl("tz_write_all", s, 0, data, nbytes, Some(timeout))
}

fn write_impl(
    what: &str,
    s: *mut tz_stream,
    array: u32,
    data: *const c_void,
    nbytes: usize,
    blocking: Option<Option<Duration>>,
) -> i64 {
    let on_err = |e: &Error| -(status_of(e) as i64);
    with_stream(what, s, on_err, |stream| {
        if nbytes == 0 {
            // Still answers for a finished or poisoned stream.
            return stream.try_write_to(array as usize, &[]).map(|n| n as i64);
        }
        if data.is_null() {
            return Err(Error::NullArgument("data"));
        }
        if nbytes > isize::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "nbytes {nbytes} is too large"
            )));
        }
        // SAFETY: non-NULL and, by the C contract, `nbytes` readable bytes
        // that the caller does not change during the call.
        let bytes = unsafe { std::slice::from_raw_parts(data as *const u8, nbytes) };
        let n = match blocking {
            None => stream.try_write_to(array as usize, bytes)?,
            Some(timeout) => stream.write_blocking_to(array as usize, bytes, timeout)?,
        };
        Ok(n as i64)
    })
}

/// Blocks until every byte written is emitted in complete shards (the last
/// partial epoch padded with the fill value) and the store's metadata is
/// final. Terminal: later tz_write calls return `-TZ_ERR_FINISHED`; a second
/// tz_flush returns the first one's status again. A reservation still
/// outstanding (tz_reserve without tz_commit) is given up first: its bytes
/// are not part of the stream. A folder store's disk that answers nothing
/// for `store.timeout_s` (default 60 s; C: `tz_options.store_timeout_s`)
/// ends the wait with `TZ_ERR_IO` (an object store's server: see its
/// `timeout_s`).
#[no_mangle]
pub extern "C" fn tz_flush(s: *mut tz_stream) -> i32 {
    with_open("tz_flush", s, status_of, |open| {
        if let Some(lease) = open.lease.take() {
            open.stream.cancel(lease);
        }
        open.stream.finish()?;
        Ok(tz_status::TZ_OK as i32)
    })
}

/// Replaces the user's attributes (`tz_image.attributes_json`, JSON
/// `"attributes"`) with `json`, a JSON object. The store writes them into
/// the group's zarr.json beside `ome` (the array's zarr.json without OME) at
/// its next metadata update and at tz_flush; a stream without a store
/// writes no metadata. Callable until tz_flush.
///
/// Returns TZ_OK; TZ_ERR_NULL_ARGUMENT for a NULL stream or `json`;
/// TZ_ERR_INVALID_ARGUMENT for text that is not JSON (the message says where
/// it breaks) or a call from the stream's own sink callback (as tz_write);
/// TZ_ERR_CONFIG for JSON that is not an object or holds the key "ome" (the
/// message names `attributes`); TZ_ERR_FINISHED after tz_flush; a poisoned
/// stream's status. The attributes are unchanged on failure. Since 0.4.
#[no_mangle]
pub extern "C" fn tz_set_attributes(s: *mut tz_stream, json: *const c_char) -> i32 {
    with_stream("tz_set_attributes", s, status_of, |stream| {
        if json.is_null() {
            return Err(Error::NullArgument("json"));
        }
        // SAFETY: non-NULL and NUL-terminated by the C contract.
        let text = unsafe { std::ffi::CStr::from_ptr(json) }
            .to_str()
            .map_err(|e| {
                Error::InvalidArgument(format!("tz_set_attributes: json is not UTF-8: {e}"))
            })?;
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            Error::InvalidArgument(format!(
                "tz_set_attributes: json is not valid JSON ({e}): give a JSON object"
            ))
        })?;
        stream.set_attributes(&value)?;
        Ok(tz_status::TZ_OK as i32)
    })
}

/// Frees the stream. Without a prior tz_flush, delivery stops at once: the
/// sink call under way (if any) completes, no further shard is emitted, no
/// partial shard is written; shards already emitted stay, and a store's
/// zarr.json keeps the extent of the emitted shard rows; a sink call held
/// by a folder store's disk that answers nothing for `store.timeout_s` is
/// left to end on its own. NULL is fine.
/// Called from the stream's own sink callback it does nothing (the stream
/// stays open; tz_last_error says why).
#[no_mangle]
pub extern "C" fn tz_destroy(s: *mut tz_stream) {
    // SAFETY: NULL is checked; otherwise a live stream (C contract).
    let Some(h) = (unsafe { s.as_ref() }) else {
        return;
    };
    if let Err(e) = refuse_from_own_sink("tz_destroy", h) {
        record(Some(&h.errors), &e);
        return;
    }
    // SAFETY: `s` came from Box::into_raw in tz_create* and is destroyed once.
    let handle = unsafe { Box::from_raw(s) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(handle)));
}

/// The last failure of this stream, NUL-terminated ("" if none). Valid until
/// the next failing call on the stream or tz_destroy. NULL stream: "".
#[no_mangle]
pub extern "C" fn tz_stream_last_error(s: *const tz_stream) -> *const c_char {
    // SAFETY: NULL is checked; otherwise a live stream (C contract).
    match unsafe { s.as_ref() } {
        Some(h) => h.errors.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// The last failure of any tz_ call on this thread (tz_create* failures
/// included), NUL-terminated ("" if none). Valid until the next failing call
/// on this thread.
#[no_mangle]
pub extern "C" fn tz_last_error() -> *const c_char {
    guard::thread_last_error()
}

/// A static description of a status code (negated codes accepted).
#[no_mangle]
pub extern "C" fn tz_status_string(status: i32) -> *const c_char {
    let code = status.unsigned_abs() as usize;
    match tz_status::ALL.get(code) {
        Some(s) => s.describe().as_ptr() as *const c_char,
        None => c"unknown status".as_ptr(),
    }
}

/// The library version, "MAJOR.MINOR.PATCH" (also TZ_VERSION_* in the header).
#[no_mangle]
pub extern "C" fn tz_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}
