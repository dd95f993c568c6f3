//! Level 0's batches on the compute thread: a staging buffer's epochs
//! handed to its lane's backend, or, for arrays without a pyramid, the
//! buffers of several arrays of one lane that wait in the queue gathered
//! into one batch (a time-lapse of many positions hands on an epoch per
//! position and visit: one at a time, a GPU would spend its time starting
//! batches). Each epoch a backend hands on is tagged with its array and
//! epoch from the lane's queue of what it owes.

use super::delivery::Delivery;
use super::workers::{guarded, send, ComputeThread, Job};
use crate::backend::cpu::downsample::PlaneReduction;
use crate::backend::{BatchJob, Level1Job, StagingBuffer};
use crate::shard::CompressedEpoch;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::SyncSender;

/// Epochs a lane's backend was given and has not handed on yet: `left`
/// epochs of array `array` from `epoch` on.
#[derive(Debug, Clone, Copy)]
pub struct Owed {
    array: u32,
    epoch: u64,
    left: usize,
}

/// A staging buffer holding `valid` bytes of array `array`'s epochs from
/// `first_epoch` on.
pub struct Batch {
    pub array: u32,
    pub first_epoch: u64,
    pub buf: StagingBuffer,
    pub valid: usize,
}

impl ComputeThread {
    /// Compresses `first` with the buffers of its lane's other arrays
    /// without a pyramid that wait in the queue right behind it, as one
    /// batch (up to what the backend takes), and gives the buffers back.
    pub(super) fn compress_gathered(&mut self, first: Batch) {
        let lane = self.lane_of[first.array as usize];
        let epoch_bytes = self.layouts[first.array as usize].epoch_bytes().max(1) as usize;
        let most = self.backends[lane].max_batch_epochs().max(1);
        let mut epochs = first.valid.div_ceil(epoch_bytes);
        let mut group = vec![first];
        while self.peeked.is_none() {
            let Ok(job) = self.jobs.try_recv() else { break };
            match job {
                Job::Batch(b)
                    if self.lane_of[b.array as usize] == lane
                        && self.pyramid_less(b.array)
                        && epochs + b.valid.div_ceil(epoch_bytes) <= most =>
                {
                    epochs += b.valid.div_ceil(epoch_bytes);
                    group.push(b);
                }
                // Metadata goes straight on: the batch gathers on.
                Job::FrameMetadata { array, rows } => {
                    let _ = self
                        .deliveries
                        .send(Delivery::FrameMetadata { array, rows });
                }
                other => self.peeked = Some(other),
            }
        }
        if !(self.shared.is_poisoned() || self.shared.cancel.load(Relaxed)) {
            let owed = &mut self.owed[lane];
            let mut runs: Vec<&[u8]> = Vec::with_capacity(group.len());
            for g in &mut group {
                let n = g.valid.div_ceil(epoch_bytes);
                // The tail of the last epoch is padding: fill value.
                g.buf[g.valid..n * epoch_bytes].fill(0);
                owed.push_back(Owed {
                    array: g.array,
                    epoch: g.first_epoch,
                    left: n,
                });
            }
            for g in &group {
                runs.push(&g.buf[..g.valid.div_ceil(epoch_bytes) * epoch_bytes]);
            }
            let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
            let shared = &self.shared;
            let backend = &mut self.backends[lane];
            guarded(shared, "compute", || {
                let job = BatchJob {
                    first_epoch: group[0].first_epoch,
                    input: &runs,
                    epochs,
                    cancel: &shared.cancel,
                    metrics: &shared.metrics,
                    level1: None,
                };
                backend.compress_batch(
                    job,
                    &mut || spares.lock().try_recv().unwrap_or_default(),
                    &mut |out| send_owed(deliveries, owed, out),
                )
            });
        }
        let free = &self.free_staging[lane];
        for g in group {
            // The receivers are gone only when the stream is dropped.
            let _ = free.send(g.buf);
        }
    }

    /// Compresses the epochs holding data and passes them on, unless the
    /// stream is poisoned or abandoned; returns the bytes of whole planes
    /// holding data (what the pyramid takes). With `level1` (the stream's
    /// first reduction, while the backend does it), the backend reduces
    /// this batch too when it holds whole pairs of planes.
    pub(super) fn compress(
        &mut self,
        array: u32,
        first_epoch: u64,
        buf: &mut [u8],
        valid: usize,
        level1: Option<&(PlaneReduction, bool)>,
    ) -> usize {
        let layout = &self.layouts[array as usize];
        let plane_bytes = layout.plane_bytes() as usize;
        let planes = valid.div_ceil(plane_bytes.max(1));
        let level1 =
            level1
                .filter(|(_, pairs)| whole_pairs(*pairs, planes))
                .map(|(reduction, pairs)| Level1Job {
                    reduction,
                    planes,
                    pairs: *pairs,
                });
        if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
            return planes * plane_bytes;
        }
        let epoch_bytes = layout.epoch_bytes() as usize;
        let epochs = valid.div_ceil(epoch_bytes);
        // The tail of the last epoch is padding: fill value.
        buf[valid..epochs * epoch_bytes].fill(0);
        let lane = self.lane_of[array as usize];
        let owed = &mut self.owed[lane];
        owed.push_back(Owed {
            array,
            epoch: first_epoch,
            left: epochs,
        });
        let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
        let shared = &self.shared;
        let backend = &mut self.backends[lane];
        guarded(shared, "compute", || {
            let job = BatchJob {
                first_epoch,
                input: &[&buf[..epochs * epoch_bytes]],
                epochs,
                cancel: &shared.cancel,
                metrics: &shared.metrics,
                level1,
            };
            backend.compress_batch(
                job,
                &mut || spares.lock().try_recv().unwrap_or_default(),
                &mut |out| send_owed(deliveries, owed, out),
            )
        });
        planes * plane_bytes
    }
}

/// Whether a batch of `planes` planes is whole windows of level 1 along
/// dimension 0 (pairs of planes when it is halved): only then does the
/// backend reduce it.
pub(super) fn whole_pairs(pairs: bool, planes: usize) -> bool {
    !pairs || planes.is_multiple_of(2)
}

/// Hands `out`, the next epoch a lane's backend hands on, to the delivery
/// thread as the array's and epoch its queue `owed` says (false: the
/// delivery thread is gone).
pub(super) fn send_owed(
    deliveries: &SyncSender<Delivery>,
    owed: &mut VecDeque<Owed>,
    mut out: CompressedEpoch,
) -> bool {
    let Some(next) = owed.front_mut() else {
        debug_assert!(false, "a backend handed on an epoch it was not given");
        return send(deliveries, 0, 0, out);
    };
    let array = next.array;
    out.epoch = next.epoch;
    next.epoch += 1;
    next.left -= 1;
    if next.left == 0 {
        owed.pop_front();
    }
    send(deliveries, array, 0, out)
}
