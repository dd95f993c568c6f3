//! Frames an array advances by without data (a camera dropped them): they
//! read as the fill value. Whole epochs of them go on as epochs without
//! data, whose chunks stay empty in the shard index: no staging memory, no
//! copy, no compression. Frames that share an epoch with written ones are
//! filled in staging.

use super::{Intake, Writer};
use crate::error::{Error, Result};
use crate::pipeline::shared::SKIPS_QUEUED;
use crate::pipeline::workers::Job;
use std::sync::atomic::Ordering::AcqRel;
use std::sync::mpsc::TrySendError;
use std::time::Instant;

impl Intake {
    /// Advances array `array` by `len` bytes of whole frames without data,
    /// without waiting; returns the bytes skipped: fewer than `len` when no
    /// staging memory is free for frames that share an epoch with written
    /// ones, or the queue of skipped runs is full (as a write takes what
    /// fits). `writer` says whether the caller waits for memory when this
    /// takes less than all.
    pub fn skip(&mut self, array: usize, len: usize, writer: Writer) -> Result<usize> {
        self.cursor(array)?;
        let plane_bytes = self.cursors[array].plan.plane_bytes;
        if !len.is_multiple_of(plane_bytes.max(1)) {
            return Err(Error::InvalidArgument(format!(
                "a skip is whole frames: {len} bytes is not a multiple of array {:?}'s frame of {plane_bytes} bytes",
                self.shared.keys[array]
            )));
        }
        if self.leased.is_some() && len > 0 {
            return Err(Error::InvalidArgument(
                "a reservation is outstanding: commit it (tz_commit) before skipping".into(),
            ));
        }
        let take = self.room(array, len)?;
        self.started.get_or_insert_with(Instant::now);
        let mut done = 0;
        while done < take {
            let left = take - done;
            let c = &self.cursors[array];
            let epoch_bytes = c.plan.epoch_bytes;
            let into_epoch = (c.bytes_in % epoch_bytes as u64) as usize;
            if c.plan.empty_epochs && into_epoch == 0 && left >= epoch_bytes {
                let epochs = left / epoch_bytes;
                if !self.send_empty(array, epochs)? {
                    break;
                }
                done += epochs * epoch_bytes;
                continue;
            }
            if self.cursors[array].staging.is_none() && !self.take_free_buffer(array, writer)? {
                break;
            }
            let c = &mut self.cursors[array];
            let mut n = left.min(c.hand_on_bytes() - c.filled);
            if c.plan.empty_epochs {
                // Up to the epoch's end: from there whole epochs go on empty.
                n = n.min(epoch_bytes - into_epoch);
            }
            let buf = c.staging.as_mut().expect("a buffer is in hand");
            buf[c.filled..c.filled + n].fill(0);
            self.advance(array, n)?;
            done += n;
        }
        if done < take && writer == Writer::CannotWait {
            self.shared.metrics.write_was_busy();
        }
        Ok(done)
    }

    /// Hands `epochs` epochs of array `array` on without data, after the
    /// whole epochs its buffer in hand holds; false when the queue of
    /// skipped runs is full.
    fn send_empty(&mut self, array: usize, epochs: usize) -> Result<bool> {
        let shared = self.shared.clone();
        let queued = &shared.skips_queued;
        if queued.fetch_add(1, AcqRel) >= SKIPS_QUEUED {
            queued.fetch_sub(1, AcqRel);
            return Ok(false);
        }
        let filled = self.cursors[array].filled;
        if filled > 0 {
            // Whole epochs (the array is at an epoch's end): they go first.
            if let Err(e) = self.submit(array, filled) {
                queued.fetch_sub(1, AcqRel);
                return Err(e);
            }
        }
        let c = &mut self.cursors[array];
        let job = Job::Skip {
            array: array as u32,
            first_epoch: c.epoch,
            epochs: epochs as u64,
        };
        let jobs = self.jobs.as_ref().ok_or(Error::Finished)?;
        match jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                // The queue keeps room for every queued run: not reached.
                queued.fetch_sub(1, AcqRel);
                return Ok(false);
            }
            Err(TrySendError::Disconnected(_)) => {
                queued.fetch_sub(1, AcqRel);
                return Err(self.pipeline_gone());
            }
        }
        // A buffer in hand is empty now: its first epoch moves on.
        let c = &mut self.cursors[array];
        let first_epoch = c.epoch;
        c.epoch += epochs as u64;
        c.bytes_in += (epochs * c.plan.epoch_bytes) as u64;
        self.hand_on_metadata_before(array, first_epoch)?;
        Ok(true)
    }
}
