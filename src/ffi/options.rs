//! `tz_options` (creating and estimating a stream with the latency bound
//! and the device memory cap) and the page-locked memory kept between
//! streams (tz_release_cached_memory).

use super::types::{tz_config, tz_image, tz_memory_plan, tz_options};
use super::tz_stream;
use super::{config_of, convert, create, estimate, guard, status_of, tz_status};
use crate::config::StreamConfig;
use crate::error::Error;

/// Fills `options` with the defaults (every field 0: the latency bound of
/// 1000 ms, no device memory cap, a store's waits bounded at 60 s) and
/// `struct_size` with `sizeof(tz_options)` of this version (32 bytes),
/// never writing more. Since 0.5.
#[no_mangle]
pub extern "C" fn tz_options_init(options: *mut tz_options) -> i32 {
    guard("tz_options_init", None, status_of, || {
        if options.is_null() {
            return Err(Error::NullArgument("options"));
        }
        // SAFETY: non-NULL; the caller provides writable memory for a tz_options.
        unsafe { options.write(convert::options_defaults()) };
        Ok(tz_status::TZ_OK as i32)
    })
}

/// tz_create_image with `options` (NULL: the defaults); `image` may be
/// NULL too (a plain array). A bad `options.struct_size` is
/// TZ_ERR_INVALID_ARGUMENT; a bad field TZ_ERR_CONFIG naming it
/// (`max_latency_ms`, `device_bytes`, `store.timeout_s`, or
/// `options.store_timeout_s` without a store). Since 0.5.
#[no_mangle]
pub extern "C" fn tz_create_with(
    config: *const tz_config,
    image: *const tz_image,
    options: *const tz_options,
    out: *mut *mut tz_stream,
) -> i32 {
    guard("tz_create_with", None, status_of, || {
        if out.is_null() {
            return Err(Error::NullArgument("out"));
        }
        // SAFETY: non-NULL, points to the caller's `tz_stream*`.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: NULL is checked; otherwise the caller passes a valid tz_config.
        let c = unsafe { config.as_ref() }.ok_or(Error::NullArgument("config"))?;
        // SAFETY: the caller's structs are valid (see their docs).
        let cfg = unsafe { config_with(c, image, options) };
        create(cfg.map(StreamConfig::from), c.sink, c.sink_user_data, out)
    })
}

/// tz_estimate_memory_image with `options` (NULL: the defaults): under a
/// `device_bytes` cap, the memory of the batches that fit it. Since 0.5.
#[no_mangle]
pub extern "C" fn tz_estimate_memory_with(
    config: *const tz_config,
    image: *const tz_image,
    options: *const tz_options,
    out: *mut tz_memory_plan,
) -> i32 {
    guard("tz_estimate_memory_with", None, status_of, || {
        // SAFETY: NULL is checked; otherwise the caller passes a valid tz_config.
        let c = unsafe { config.as_ref() }.ok_or(Error::NullArgument("config"))?;
        // SAFETY: the caller's structs are valid (see their docs).
        estimate(
            unsafe { config_with(c, image, options) }.map(StreamConfig::from),
            out,
        )
    })
}

/// # Safety
/// `image` and `options` are NULL or valid (see their docs).
unsafe fn config_with(
    c: &tz_config,
    image: *const tz_image,
    options: *const tz_options,
) -> Result<crate::Config, Error> {
    // SAFETY: passed on from the caller.
    let mut cfg = unsafe { config_of(c, image) }?;
    // SAFETY: passed on from the caller.
    if let Some(o) = unsafe { convert::options_from_c(options) }? {
        convert::apply_options(&mut cfg, &o)?;
    }
    Ok(cfg)
}

/// Frees the memory the process keeps for its next stream: when a GPU
/// stream is destroyed its page-locked staging and output buffers are kept
/// for 30 s, so that a stream created meanwhile with buffers of the same
/// sizes starts without allocating them (about a second per GiB); a CPU
/// stream's staging and buffers of compressed epochs are kept the same way (a fresh one's pages are faulted in as it is first
/// written). Call it when no
/// stream follows soon and the memory is needed elsewhere. Returns the
/// bytes freed. Since 0.5.
#[no_mangle]
pub extern "C" fn tz_release_cached_memory() -> u64 {
    std::panic::catch_unwind(crate::release_cached_memory).unwrap_or(0)
}
