//! The stream's counters through the C API: read without waiting for the
//! stream, from any thread.

use super::guard::{guard, record};
use super::{
    backend_code, status_of, tz_metrics, tz_staging_metrics, tz_status, tz_stream,
    tz_upload_metrics,
};
use crate::error::Error;
use crate::pipeline::Stage;
use std::ffi::c_char;

/// Checks `s` and `out`, then writes what `read` takes from the stream's
/// counters into `out`, never waiting for the stream's lock.
fn read_counters<T>(
    what: &str,
    s: *const tz_stream,
    out: *mut T,
    read: impl FnOnce(&tz_stream) -> T,
) -> i32 {
    // SAFETY: NULL is checked; otherwise a live stream (C contract).
    let Some(h) = (unsafe { s.as_ref() }) else {
        let e = Error::NullArgument("stream");
        record(None, &e);
        return status_of(&e);
    };
    guard(what, Some(&h.errors), status_of, || {
        if out.is_null() {
            return Err(Error::NullArgument("out"));
        }
        let counters = read(h);
        // SAFETY: non-NULL; the caller provides writable memory for a `T`
        // (tz_metrics, tz_upload_metrics or tz_staging_metrics, by the
        // function's signature).
        unsafe { out.write(counters) };
        Ok(tz_status::TZ_OK as i32)
    })
}

/// Fills `out` with the stream's counters. Never waits: safe to call from
/// any thread, also while another is in tz_flush or tz_write_all.
#[no_mangle]
pub extern "C" fn tz_get_metrics(s: *const tz_stream, out: *mut tz_metrics) -> i32 {
    read_counters("tz_get_metrics", s, out, |h| {
        let m = h.stats.snapshot();
        let (kind, reason) = h.stats.backend();
        let mut backend_reason = [0 as c_char; 256];
        for (dst, &b) in backend_reason
            .iter_mut()
            .zip(reason.as_bytes().iter().take(255))
        {
            *dst = b as c_char;
        }
        tz_metrics {
            bytes_in: m.bytes_in,
            bytes_out: m.bytes_out,
            shards_emitted: m.shards,
            epochs_completed: m.epochs,
            seconds_copy: m.seconds(Stage::Copy),
            seconds_h2d: m.seconds(Stage::H2d),
            seconds_scatter: m.seconds(Stage::Scatter),
            seconds_compress: m.seconds(Stage::Compress),
            seconds_aggregate: m.seconds(Stage::Aggregate),
            seconds_d2h: m.seconds(Stage::D2h),
            seconds_sink: m.seconds(Stage::Sink),
            backend: backend_code(kind),
            backend_reason,
        }
    })
}

/// Fills `out` with the object store's upload counters (all zero for a
/// stream writing to a folder or a callback). Never waits, like
/// tz_get_metrics. Since 0.3.
#[no_mangle]
pub extern "C" fn tz_get_upload_metrics(s: *const tz_stream, out: *mut tz_upload_metrics) -> i32 {
    read_counters("tz_get_upload_metrics", s, out, |h| {
        let m = h.stats.snapshot();
        tz_upload_metrics {
            bytes_uploaded: m.bytes_uploaded,
            objects_uploaded: m.objects_uploaded,
            uploads_in_flight: m.uploads_in_flight,
        }
    })
}

/// Fills `out` with the stream's staging memory: what it holds, the most it
/// held, and the writes that found it full. Never waits, like
/// tz_get_metrics. Since 0.11.
#[no_mangle]
pub extern "C" fn tz_get_staging_metrics(s: *const tz_stream, out: *mut tz_staging_metrics) -> i32 {
    read_counters("tz_get_staging_metrics", s, out, |h| {
        let m = h.stats.snapshot();
        tz_staging_metrics {
            staging_bytes: m.staging_bytes,
            staging_peak_bytes: m.staging_peak_bytes,
            busy_writes: m.busy_writes,
        }
    })
}
