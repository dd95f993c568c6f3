//! State the caller's thread and the pipeline's threads share.

use super::Metrics;
use crate::backend::Selection;
use crate::error::Error;
use crate::sink::SharedAttributes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Runs of skipped epochs the job queue holds at most (room kept for them
/// beside every staging buffer).
pub const SKIPS_QUEUED: usize = 16;

pub struct Shared {
    pub metrics: Metrics,
    pub selection: Selection,
    /// Set when the stream is dropped without `finish`: skip queued work.
    pub cancel: AtomicBool,
    /// The user's attributes, replaceable until the flush.
    pub attributes: Arc<SharedAttributes>,
    /// Each array's key (for messages).
    pub keys: Vec<String>,
    /// Runs of skipped epochs queued for the compute thread and not yet
    /// taken: at most [`SKIPS_QUEUED`], so that they never fill the job
    /// queue a write hands its buffers to.
    pub skips_queued: AtomicUsize,
    poisoned: AtomicBool,
    poison: Mutex<Option<Error>>,
}

impl Shared {
    pub fn new(selection: Selection, attributes: SharedAttributes, keys: Vec<String>) -> Shared {
        Shared {
            metrics: Metrics::default(),
            selection,
            cancel: AtomicBool::new(false),
            attributes: Arc::new(attributes),
            keys,
            skips_queued: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
            poison: Mutex::new(None),
        }
    }

    /// Records the first failure; later ones are dropped, since the first
    /// is the cause.
    pub fn poison(&self, e: Error) {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(e);
            self.poisoned.store(true, Ordering::Release);
        }
    }

    /// Adds `note` to the message of the failure that poisoned the stream.
    pub fn note(&self, note: &str) {
        let mut p = self.poison.lock();
        if let Some(e) = p.take() {
            *p = Some(e.with_note(note));
        }
    }

    /// The failure that poisoned the stream, if any.
    pub fn check(&self) -> Result<(), Error> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(self
            .poison
            .lock()
            .clone()
            .expect("poisoned implies an error"))
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }
}
