//! A stream of several arrays from C structures: `tz_create_arrays` and
//! `tz_estimate_memory_arrays` take a `tz_array` per array (its key, its
//! `tz_config`, its `tz_image`), the arrays in a root group. A collection
//! or a plate is the JSON form's (tz_create_json).

use super::convert;
use super::creation::{config_of, create, estimate};
use super::guard::guard;
use super::status_of;
use super::types::{tz_array, tz_config, tz_memory_plan, tz_options};
use super::tz_stream;
use crate::config::{ArrayConfig, ArraysConfig, ConfigError, StreamConfig, MAX_ARRAYS};
use crate::error::Error;

/// Creates a stream of `count` arrays, `arrays[i]` the array of index `i`
/// (tz_write_to), in a root group; `options` (NULL: the defaults) applies
/// to the stream. The stream's shared settings come from
/// `arrays[0].config` (its sink and store included); in the other arrays'
/// configs each of them is 0 (NULL) or the same, else TZ_ERR_CONFIG names
/// it (`arrays[2].config.threads`). A collection, a plate and per-frame
/// metadata need the JSON form (tz_create_json). Since 0.7.
#[no_mangle]
pub extern "C" fn tz_create_arrays(
    arrays: *const tz_array,
    count: u32,
    options: *const tz_options,
    out: *mut *mut tz_stream,
) -> i32 {
    guard("tz_create_arrays", None, status_of, || {
        if out.is_null() {
            return Err(Error::NullArgument("out"));
        }
        // SAFETY: non-NULL, points to the caller's `tz_stream*`.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: `arrays` holds `count` valid entries (checked non-NULL).
        let list = unsafe { array_list(arrays, count) }?;
        let first = first_config(list)?;
        // SAFETY: the caller's structures are valid (see tz_array).
        let config = unsafe { arrays_config(list, options) };
        create(config, first.sink, first.sink_user_data, out)
    })
}

/// tz_estimate_memory for the stream tz_create_arrays would create. Since
/// 0.7.
#[no_mangle]
pub extern "C" fn tz_estimate_memory_arrays(
    arrays: *const tz_array,
    count: u32,
    options: *const tz_options,
    out: *mut tz_memory_plan,
) -> i32 {
    guard("tz_estimate_memory_arrays", None, status_of, || {
        // SAFETY: `arrays` holds `count` valid entries (checked non-NULL).
        let list = unsafe { array_list(arrays, count) }?;
        // SAFETY: the caller's structures are valid (see tz_array).
        estimate(unsafe { arrays_config(list, options) }, out)
    })
}

/// The caller's `count` entries.
///
/// # Safety
/// `arrays` is NULL or points to `count` tz_array.
unsafe fn array_list<'a>(arrays: *const tz_array, count: u32) -> Result<&'a [tz_array], Error> {
    if arrays.is_null() {
        return Err(Error::NullArgument("arrays"));
    }
    if count == 0 || count as usize > MAX_ARRAYS {
        return Err(Error::InvalidArgument(format!(
            "count is {count}: a stream has 1 to {MAX_ARRAYS} arrays"
        )));
    }
    // SAFETY: non-NULL (checked), `count` entries by the C contract.
    Ok(unsafe { std::slice::from_raw_parts(arrays, count as usize) })
}

fn first_config(list: &[tz_array]) -> Result<&tz_config, Error> {
    // SAFETY: NULL or a valid tz_config, by the C contract.
    unsafe { list[0].config.as_ref() }.ok_or(Error::NullArgument("arrays[0].config"))
}

/// The JSON form's configuration of `list`, with `options`.
///
/// # Safety
/// Every entry's pointers are NULL or valid; `options` NULL or valid.
unsafe fn arrays_config(
    list: &[tz_array],
    options: *const tz_options,
) -> Result<StreamConfig, Error> {
    let first = first_config(list)?;
    let mut arrays = Vec::new();
    crate::memory::try_reserve(&mut arrays, list.len(), "the arrays' configurations")?;
    let mut shared = None;
    for (i, a) in list.iter().enumerate() {
        // SAFETY: NULL or valid, by the C contract.
        let c = unsafe { a.config.as_ref() }
            .ok_or_else(|| Error::InvalidArgument(format!("arrays[{i}].config is NULL")))?;
        same_shared(first, c, i)?;
        // SAFETY: NULL or a NUL-terminated string, by the C contract.
        let key = unsafe { convert::read_str(a.key, "key") }?
            .ok_or_else(|| Error::InvalidArgument(format!("arrays[{i}].key is NULL")))?;
        // SAFETY: valid tz_config (checked non-NULL) and tz_image or NULL.
        let cfg = unsafe { config_of(c, a.image) }.map_err(|e| in_array(e, i))?;
        arrays.push(ArrayConfig {
            key,
            dtype: cfg.dtype,
            dimensions: cfg.dimensions.clone(),
            codec: cfg.codec,
            storage_order: cfg.storage_order.clone(),
            multiscale: cfg.multiscale,
            ome: cfg.ome.clone(),
            attributes: cfg.attributes.clone(),
            frame_metadata: None,
        });
        shared.get_or_insert(cfg);
    }
    let mut cfg = shared.expect("a stream has an array");
    // SAFETY: NULL or a valid tz_options, by the C contract.
    if let Some(o) = unsafe { convert::options_from_c(options) }? {
        convert::apply_options(&mut cfg, &o)?;
    }
    Ok(StreamConfig::Many(Box::new(ArraysConfig {
        arrays,
        collection: None,
        plate: None,
        backend: cfg.backend,
        store: cfg.store,
        index_location: cfg.index_location,
        threads: cfg.threads,
        staging_bytes: cfg.staging_bytes,
        device: cfg.device,
        device_bytes: cfg.device_bytes,
        max_latency_ms: cfg.max_latency_ms,
    })))
}

/// A configuration error of array `i`'s structures, named as such.
fn in_array(e: Error, i: usize) -> Error {
    match e {
        Error::Config(c) => {
            Error::Config(ConfigError::new(format!("arrays[{i}].{}", c.field), c.rule))
        }
        e => e,
    }
}

/// Refuses a shared setting of array `i`'s config that is neither 0
/// (NULL) nor the first array's.
fn same_shared(first: &tz_config, c: &tz_config, i: usize) -> Result<(), Error> {
    let fields: [(&str, bool, bool); 8] = [
        ("backend", c.backend == 0, c.backend == first.backend),
        (
            "index_location",
            c.index_location == 0,
            c.index_location == first.index_location,
        ),
        (
            "store_path",
            c.store_path.is_null(),
            c.store_path == first.store_path || same_text(c.store_path, first.store_path),
        ),
        (
            "overwrite",
            c.overwrite == 0,
            c.overwrite == first.overwrite,
        ),
        (
            "sink",
            c.sink.is_none(),
            c.sink.map(|f| f as usize) == first.sink.map(|f| f as usize),
        ),
        ("threads", c.threads == 0, c.threads == first.threads),
        (
            "staging_bytes",
            c.staging_bytes == 0,
            c.staging_bytes == first.staging_bytes,
        ),
        ("device", c.device == 0, c.device == first.device),
    ];
    let fsync = c.store_skip_fsync == 0 || c.store_skip_fsync == first.store_skip_fsync;
    for (name, zero, same) in fields {
        if !zero && !same {
            return Err(Error::Config(ConfigError::new(
                format!("arrays[{i}].config.{name}"),
                "a setting of the whole stream: 0 (NULL) or arrays[0].config's",
            )));
        }
    }
    if !fsync {
        return Err(Error::Config(ConfigError::new(
            format!("arrays[{i}].config.store_skip_fsync"),
            "a setting of the whole stream: 0 or arrays[0].config's",
        )));
    }
    Ok(())
}

/// Whether two NUL-terminated strings (either may be NULL) are equal.
fn same_text(a: *const std::ffi::c_char, b: *const std::ffi::c_char) -> bool {
    // SAFETY: NULL or NUL-terminated strings, by the C contract.
    match unsafe {
        (
            convert::read_str(a, "store_path"),
            convert::read_str(b, "store_path"),
        )
    } {
        (Ok(Some(a)), Ok(Some(b))) => a == b,
        _ => false,
    }
}
