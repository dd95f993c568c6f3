//! Epochs without data (skipped frames) on the compute thread: handed to
//! the delivery thread as epochs of empty chunks, in their place among the
//! array's compressed epochs, without the backend.

use super::workers::{guarded, send, ComputeThread};
use crate::memory::try_filled;
use crate::shard::{CompressedEpoch, EpochData};
use std::sync::atomic::Ordering::{AcqRel, Relaxed};

impl ComputeThread {
    /// Hands on `epochs` empty epochs of array `array` from `first_epoch`.
    pub(super) fn skip(&mut self, array: u32, first_epoch: u64, epochs: u64) {
        self.shared.skips_queued.fetch_sub(1, AcqRel);
        if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
            return;
        }
        // A backend that overlaps batches may still hold the array's
        // epochs before these: they go first.
        if self.backends[self.lane_of[array as usize]].holds_batch() {
            self.drain();
        }
        let positions = self.layouts[array as usize].shard_major_len() as usize;
        let (shared, deliveries) = (&self.shared, &self.deliveries);
        guarded(shared, "compute", || {
            for epoch in first_epoch..first_epoch + epochs {
                let out = CompressedEpoch {
                    array,
                    epoch,
                    level: 0,
                    data: EpochData::Owned(Vec::new()),
                    offsets: try_filled(positions + 1, 0, "an empty epoch's offsets")?,
                };
                if !send(deliveries, array, 0, out) || shared.cancel.load(Relaxed) {
                    break;
                }
            }
            Ok(())
        });
    }
}
