//! CUDA events: what a stream has done, for waiting and timing.

use super::{gpu_err, Stream};
use crate::error::Error;
use cudarc::driver::{result, sys};

/// A CUDA event with timing enabled, for timing work on a stream. Waiting
/// on one sleeps instead of spinning: the waits are a batch long, and the
/// cores are better spent on the copies into staging memory.
pub struct Event(pub(super) sys::CUevent);

// SAFETY: events are usable from any thread with the context current.
unsafe impl Send for Event {}

impl Event {
    pub fn new() -> Result<Event, Error> {
        result::event::create(sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC)
            .map(Event)
            .map_err(|e| gpu_err("creating an event", e))
    }

    /// Captures the work enqueued on `stream` so far.
    pub fn record(&self, stream: &Stream, stage: &'static str) -> Result<(), Error> {
        // SAFETY: a live event and a live stream of the current context.
        unsafe { result::event::record(self.0, stream.0) }.map_err(|e| gpu_err(stage, e))
    }

    /// Whether the captured work has finished, without waiting.
    pub fn is_complete(&self, stage: &'static str) -> Result<bool, Error> {
        // SAFETY: a live event of the current context.
        match unsafe { result::event::query(self.0) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(gpu_err(stage, e)),
        }
    }

    /// Waits until the captured work has finished.
    pub fn sync(&self, stage: &'static str) -> Result<(), Error> {
        // SAFETY: a live event of the current context.
        unsafe { result::event::synchronize(self.0) }.map_err(|e| gpu_err(stage, e))
    }

    /// Seconds from `self` to `end`, both recorded and complete.
    pub fn seconds_until(&self, end: &Event, stage: &'static str) -> Result<f64, Error> {
        // SAFETY: both events were created by `new`, are live, and the
        // caller recorded them (the driver reports an error otherwise).
        unsafe { result::event::elapsed(self.0, end.0) }
            .map(|ms| f64::from(ms) / 1e3)
            .map_err(|e| gpu_err(stage, e))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { result::event::destroy(self.0) };
    }
}
