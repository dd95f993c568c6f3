//! Zero-copy ingest across the C boundary: tz_reserve hands the caller
//! page-locked staging memory to write into, tz_commit passes it on.

use super::{status_of, tz_status, tz_stream, with_open};
use crate::error::Error;
use std::ffi::c_void;

/// Hands the caller free staging memory to write the next bytes of the
/// stream into itself (a camera SDK's or frame grabber's DMA target, a
/// decoder's output), saving tz_write's copy: `*ptr` and `*nbytes` get
/// its address and length. Never waits: when no staging memory is free,
/// `*ptr` is NULL, `*nbytes` 0 and no reservation is held (call again, as
/// after a tz_write that returns 0).
///
/// A reservation spans the rest of one staging buffer up to where the
/// buffer is handed on (whole epochs, `tile[0]` planes of dimension 0: a
/// stream's first buffers after one epoch, one, two, four..., later ones
/// when full), at most what a bounded array still takes. Staging buffers
/// start on a page boundary, so after writes and commits of whole frames a
/// reservation starts and ends on frame boundaries; otherwise it starts
/// where the last byte ended and a frame may straddle two reservations. On the GPU backend the memory is
/// page-locked (the device's DMA reads it directly).
///
/// One reservation at a time: tz_reserve again, tz_write or tz_write_all
/// before tz_commit are refused (TZ_ERR_INVALID_ARGUMENT); the reservation
/// holds back the latency bound's hand-off of its buffer until the commit.
/// tz_flush gives up a reservation still outstanding (its bytes do not
/// count) and tz_destroy frees it. Returns TZ_OK, TZ_ERR_NULL_ARGUMENT,
/// TZ_ERR_OVERFLOW past the end of a bounded array, TZ_ERR_FINISHED after
/// tz_flush, or a poisoned stream's status. Since 0.5.
#[no_mangle]
pub extern "C" fn tz_reserve(s: *mut tz_stream, ptr: *mut *mut c_void, nbytes: *mut usize) -> i32 {
    reserve_impl("tz_reserve", s, 0, ptr, nbytes)
}

/// tz_reserve for array `array` of a stream of several arrays (the index
/// of its entry in the configuration's `arrays`; see tz_array_index); a
/// reservation holds back writes to every array until its tz_commit.
/// TZ_ERR_INVALID_ARGUMENT for an array that does not exist. Since 0.6.
#[no_mangle]
pub extern "C" fn tz_reserve_to(
    s: *mut tz_stream,
    array: u32,
    ptr: *mut *mut c_void,
    nbytes: *mut usize,
) -> i32 {
    reserve_impl("tz_reserve_to", s, array, ptr, nbytes)
}

fn reserve_impl(
    what: &str,
    s: *mut tz_stream,
    array: u32,
    ptr: *mut *mut c_void,
    nbytes: *mut usize,
) -> i32 {
    with_open(what, s, status_of, |open| {
        if ptr.is_null() {
            return Err(Error::NullArgument("ptr"));
        }
        if nbytes.is_null() {
            return Err(Error::NullArgument("nbytes"));
        }
        // SAFETY: both non-NULL (checked) and writable by the C contract.
        unsafe {
            *ptr = std::ptr::null_mut();
            *nbytes = 0;
        }
        if open.lease.is_some() {
            return Err(Error::InvalidArgument(
                "a reservation is already outstanding: tz_commit it before tz_reserve".into(),
            ));
        }
        if let Some(mut lease) = open.stream.lease_to(array as usize)? {
            // SAFETY: as above; the lease's memory stays put until it is
            // committed, given up at the flush or freed with the stream.
            unsafe {
                *ptr = lease.as_mut_ptr() as *mut c_void;
                *nbytes = lease.len();
            }
            open.lease = Some(lease);
        }
        Ok(tz_status::TZ_OK as i32)
    })
}

/// Passes on the first `nbytes` bytes written into the reservation of the
/// last tz_reserve, and ends it (0 gives it up). Returns TZ_OK;
/// TZ_ERR_INVALID_ARGUMENT for more bytes than the reservation holds (the
/// reservation stays, nothing in it is lost: commit again) or without a
/// reservation; TZ_ERR_FINISHED after tz_flush; a poisoned stream's
/// status. Since 0.5.
#[no_mangle]
pub extern "C" fn tz_commit(s: *mut tz_stream, nbytes: usize) -> i32 {
    with_open("tz_commit", s, status_of, |open| {
        open.stream.commit(&mut open.lease, nbytes)?;
        Ok(tz_status::TZ_OK as i32)
    })
}
