//! The latency bound (`max_latency_ms`): a staging buffer goes to the
//! compressor when it is full or when its oldest whole epoch has waited
//! that long, whichever comes first, so that a slow stream's data reaches
//! the sink in bounded time instead of when a gigabyte has arrived.
//!
//! The clock starts when the buffer in hand first holds a whole epoch (the
//! write path wakes this thread then); when it runs out, the thread hands
//! the buffer's whole epochs on and moves a partial epoch to a free buffer.

use super::intake::Intake;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Starts the timer of `intake`; it ends when the write path drops its
/// end of `wake` (at the flush, or with the stream).
pub fn start(
    intake: &Arc<Mutex<Intake>>,
    max_latency: Duration,
    wake: Receiver<()>,
) -> Result<JoinHandle<()>> {
    let intake = Arc::downgrade(intake);
    std::thread::Builder::new()
        .name("tz-latency".into())
        .spawn(move || run(intake, max_latency, wake))
        .map_err(|e| Error::Internal(format!("starting thread tz-latency: {e}")))
}

fn run(intake: Weak<Mutex<Intake>>, max_latency: Duration, wake: Receiver<()>) {
    let mut wait = None;
    loop {
        let woken = match wait {
            Some(w) => wake.recv_timeout(w),
            None => wake.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        if let Err(RecvTimeoutError::Disconnected) = woken {
            return;
        }
        let Some(intake) = intake.upgrade() else {
            return;
        };
        let due = intake.lock().hand_on_due(max_latency);
        match due {
            Ok(next) => wait = next,
            // The stream is poisoned or finished: the write path reports it.
            Err(_) => return,
        }
    }
}
