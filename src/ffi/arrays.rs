//! Streams of several arrays across the C boundary: writing to an array by
//! its index, and finding the index of a key. A stream of several arrays
//! is created from the JSON form (tz_create_json with `arrays`).

use super::{status_of, tz_stream, with_stream, write_impl};
use crate::error::Error;
use std::ffi::{c_char, c_void};
use std::time::Duration;

/// tz_write to array `array` of a stream of several arrays: the index of
/// its entry in the configuration's `arrays` (tz_write writes to array 0).
/// Frames of different arrays may interleave at any frame boundary; a
/// bounded array that is full returns `-TZ_ERR_OVERFLOW` and the others
/// take more. `-TZ_ERR_INVALID_ARGUMENT` for an array that does not exist
/// (the stream stays usable). Since 0.6.
#[no_mangle]
pub extern "C" fn tz_write_to(
    s: *mut tz_stream,
    array: u32,
    data: *const c_void,
    nbytes: usize,
) -> i64 {
    write_impl("tz_write_to", s, array, data, nbytes, None)
}

/// tz_write_all to array `array` (see tz_write_to). Since 0.6.
#[no_mangle]
pub extern "C" fn tz_write_all_to(
    s: *mut tz_stream,
    array: u32,
    data: *const c_void,
    nbytes: usize,
    timeout_ms: i64,
) -> i64 {
    let timeout = (timeout_ms >= 0).then(|| Duration::from_millis(timeout_ms as u64));
    write_impl("tz_write_all_to", s, array, data, nbytes, Some(timeout))
}

/// Advances array `array` by `nbytes` bytes of whole frames without data
/// (frames the camera dropped): they read as the fill value. Chunks that
/// hold only skipped frames stay empty in their shard's index, costing no
/// copy and no compression (on an array without a pyramid; with one,
/// skipped frames are compressed as fill-value frames). Non-blocking, as
/// tz_write: returns the bytes skipped, fewer than `nbytes` when staging
/// memory is busy; `-TZ_ERR_INVALID_ARGUMENT` when `nbytes` is not whole
/// frames or the array does not exist; `-TZ_ERR_OVERFLOW` past a bounded
/// array's end. Since 0.7.
#[no_mangle]
pub extern "C" fn tz_skip(s: *mut tz_stream, array: u32, nbytes: u64) -> i64 {
    let on_err = |e: &Error| -(status_of(e) as i64);
    with_stream("tz_skip", s, on_err, |stream| {
        let n = usize::try_from(nbytes)
            .ok()
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| Error::InvalidArgument(format!("nbytes {nbytes} is too large")))?;
        Ok(stream.skip_to(array as usize, n)? as i64)
    })
}

/// Records `json`, a NUL-terminated JSON object (a time stamp, a stage
/// position, an exposure...), as frame `frame`'s metadata of array
/// `array`: the index along the first dimension, from 0, of a frame
/// already written or skipped. The array's configuration asks for it
/// (`"frame_metadata": {"max_bytes": N}`, an OME image, a store); it lands
/// in the image's `frame_metadata` array with its frames' shard rows.
/// `TZ_ERR_INVALID_ARGUMENT` (the stream goes on) for an array without it,
/// a frame not written yet, text that is not a JSON object or is longer
/// than `max_bytes`, or a frame whose shard row was handed on with the
/// next row's frames. Since 0.7.
#[no_mangle]
pub extern "C" fn tz_frame_metadata(
    s: *mut tz_stream,
    array: u32,
    frame: u64,
    json: *const c_char,
) -> i32 {
    with_stream("tz_frame_metadata", s, status_of, |stream| {
        // SAFETY: NULL or a NUL-terminated string, by the C contract.
        let json = unsafe { super::convert::read_str(json, "json") }?
            .ok_or(Error::NullArgument("json"))?;
        stream.frame_metadata(array as usize, frame, &json)?;
        Ok(super::tz_status::TZ_OK as i32)
    })
}

/// The index of the array whose key is `key` (as in the configuration's
/// `arrays`), in `*index`. TZ_ERR_INVALID_ARGUMENT, naming the stream's
/// keys, when no array has it; a stream of one array has the key "".
/// Since 0.6.
#[no_mangle]
pub extern "C" fn tz_array_index(s: *const tz_stream, key: *const c_char, index: *mut u32) -> i32 {
    with_stream("tz_array_index", s, status_of, |stream| {
        if index.is_null() {
            return Err(Error::NullArgument("index"));
        }
        // SAFETY: NULL or a NUL-terminated string, by the C contract.
        let key =
            unsafe { super::convert::read_str(key, "key") }?.ok_or(Error::NullArgument("key"))?;
        let i = stream.array_index(&key)?;
        // SAFETY: non-NULL (checked) and writable by the C contract.
        unsafe { *index = i as u32 };
        Ok(super::tz_status::TZ_OK as i32)
    })
}

/// How many arrays the stream writes, in `*count`. Since 0.6.
#[no_mangle]
pub extern "C" fn tz_array_count(s: *const tz_stream, count: *mut u32) -> i32 {
    with_stream("tz_array_count", s, status_of, |stream| {
        if count.is_null() {
            return Err(Error::NullArgument("count"));
        }
        // SAFETY: non-NULL (checked) and writable by the C contract.
        unsafe { *count = stream.plan().arrays.len() as u32 };
        Ok(super::tz_status::TZ_OK as i32)
    })
}
