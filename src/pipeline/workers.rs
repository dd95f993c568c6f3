//! The pipeline's two threads. The compute thread runs the backend on each
//! filled staging buffer and hands the buffer back; the delivery thread
//! assembles shards and calls the sink. Channels carry the work in order,
//! and their bounds are the back-pressure that finally makes `write` busy.

use super::pyramid::{Outlet, Pyramid};
use super::{Shared, Stage};
use crate::backend::{Backend, BatchJob, StagingBuffer};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::shard::{CompressedEpoch, Shard, ShardAssembler};
use crate::sink::ShardSink;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::Arc;

/// Work for the compute thread.
pub enum Job {
    /// A staging buffer holding `valid` bytes of the epochs from
    /// `first_epoch` on.
    Batch {
        first_epoch: u64,
        buf: StagingBuffer,
        valid: usize,
    },
    /// The stream is complete with `planes[k]` planes along dimension 0
    /// on level `k`.
    Finish { planes: Vec<u64> },
}

/// Work for the delivery thread.
pub enum Delivery {
    Epoch(CompressedEpoch),
    Finish { planes: Vec<u64> },
}

/// Runs `f`, turning a panic into a poisoned stream.
fn guarded(shared: &Shared, what: &str, f: impl FnOnce() -> Result<()>) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => shared.poison(e),
        Err(panic) => shared.poison(Error::from_panic(what, &*panic)),
    }
}

pub struct ComputeThread {
    pub shared: Arc<Shared>,
    pub backend: Box<dyn Backend>,
    pub layout: Layout,
    pub jobs: Receiver<Job>,
    pub free_staging: Sender<StagingBuffer>,
    pub deliveries: SyncSender<Delivery>,
    pub spare_epochs: Receiver<CompressedEpoch>,
    /// Pyramid levels 1.., when the stream has them.
    pub pyramid: Option<Pyramid>,
    /// Where the backend goes when the stream is complete: to the stream
    /// itself, which frees it when it is destroyed. Freeing gigabytes of
    /// device and page-locked memory takes long enough that `finish` should
    /// not wait for it.
    pub retired: Sender<Box<dyn Backend>>,
}

impl ComputeThread {
    pub fn run(mut self) {
        self.work();
        // The receiver lives as long as the stream; when it is already
        // gone, the backend is freed here.
        let _ = self.retired.send(self.backend);
    }

    fn work(&mut self) {
        while let Ok(job) = self.jobs.recv() {
            match job {
                Job::Batch {
                    first_epoch,
                    mut buf,
                    valid,
                } => {
                    self.compress(first_epoch, &mut buf, valid);
                    // The receiver is gone only when the stream is dropped.
                    let _ = self.free_staging.send(buf);
                }
                Job::Finish { planes } => {
                    self.drain();
                    let _ = self.deliveries.send(Delivery::Finish { planes });
                    return;
                }
            }
        }
    }

    /// Collects what the backend still holds at the end of the stream,
    /// then the pyramid's last epochs.
    fn drain(&mut self) {
        if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
            return;
        }
        let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
        let shared = &self.shared;
        let backend = &mut self.backend;
        let pyramid = &mut self.pyramid;
        guarded(shared, "compute", || {
            backend.drain(
                &shared.metrics,
                &mut || spares.try_recv().unwrap_or_default(),
                &mut |out| send(deliveries, 0, out),
            )?;
            match pyramid {
                Some(p) => p.finish(&mut Outlet {
                    cancel: &shared.cancel,
                    metrics: &shared.metrics,
                    spare: &mut || spares.try_recv().unwrap_or_default(),
                    done: &mut |level, out| send(deliveries, level, out),
                }),
                None => Ok(()),
            }
        });
    }

    /// Compresses the epochs holding data and passes them on, unless the
    /// stream is poisoned or abandoned; the planes holding data go on to
    /// the pyramid.
    fn compress(&mut self, first_epoch: u64, buf: &mut [u8], valid: usize) {
        if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
            return;
        }
        let epoch_bytes = self.layout.epoch_bytes() as usize;
        let epochs = valid.div_ceil(epoch_bytes);
        // The tail of the last epoch is padding: fill value.
        buf[valid..epochs * epoch_bytes].fill(0);
        let plane_bytes = self.layout.plane_bytes() as usize;
        let planes = valid.div_ceil(plane_bytes.max(1));
        let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
        let shared = &self.shared;
        let backend = &mut self.backend;
        let pyramid = &mut self.pyramid;
        guarded(shared, "compute", || {
            let job = BatchJob {
                first_epoch,
                input: &buf[..epochs * epoch_bytes],
                epochs,
                cancel: &shared.cancel,
                metrics: &shared.metrics,
            };
            backend.compress_batch(
                job,
                &mut || spares.try_recv().unwrap_or_default(),
                &mut |out| send(deliveries, 0, out),
            )?;
            match pyramid {
                Some(p) => p.push(
                    &buf[..planes * plane_bytes],
                    &mut Outlet {
                        cancel: &shared.cancel,
                        metrics: &shared.metrics,
                        spare: &mut || spares.try_recv().unwrap_or_default(),
                        done: &mut |level, out| send(deliveries, level, out),
                    },
                ),
                None => Ok(()),
            }
        });
    }
}

/// Hands an epoch of level `level` to the delivery thread (false: it is gone).
fn send(deliveries: &SyncSender<Delivery>, level: u32, mut out: CompressedEpoch) -> bool {
    out.level = level;
    deliveries.send(Delivery::Epoch(out)).is_ok()
}

pub struct DeliveryThread {
    pub shared: Arc<Shared>,
    /// Per pyramid level (one without a pyramid): its layout and shards.
    pub layouts: Vec<Layout>,
    pub assemblers: Vec<ShardAssembler>,
    pub sink: Box<dyn ShardSink>,
    pub deliveries: Receiver<Delivery>,
    pub spare_epochs: Sender<CompressedEpoch>,
}

impl DeliveryThread {
    pub fn run(mut self) {
        while let Ok(d) = self.deliveries.recv() {
            if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
                continue; // drain, so that the compute thread never blocks
            }
            let shared = self.shared.clone();
            match d {
                Delivery::Epoch(mut epoch) => {
                    guarded(&shared, "delivery", || self.deliver(&epoch));
                    // A shared output buffer goes back to the backend now,
                    // not when this spare is next filled.
                    epoch.data.release();
                    let _ = self.spare_epochs.send(epoch);
                }
                Delivery::Finish { planes } => {
                    guarded(&shared, "delivery", || self.finish(&planes));
                    return;
                }
            }
        }
    }

    fn deliver(&mut self, epoch: &CompressedEpoch) -> Result<()> {
        let t = std::time::Instant::now();
        let k = epoch.level as usize;
        let assembler = &mut self.assemblers[k];
        let row_done = assembler.push(epoch, &mut counted(&mut *self.sink, &self.shared))?;
        if row_done {
            let planes = self.layouts[k].planes_in_shard_rows(assembler.rows_emitted());
            self.sink.progress(epoch.level, planes)?;
        }
        self.shared.metrics.add_time(Stage::Sink, t.elapsed());
        Ok(())
    }

    fn finish(&mut self, planes: &[u64]) -> Result<()> {
        for a in &mut self.assemblers {
            a.finish(&mut counted(&mut *self.sink, &self.shared))?;
        }
        self.sink.finish(planes)
    }
}

/// Emits a shard through `sink`, counting it in the metrics. A stream
/// destroyed without its flush stops here, between two shards of a row:
/// only the sink call under way when it was destroyed completes.
fn counted<'a>(
    sink: &'a mut dyn ShardSink,
    shared: &'a Shared,
) -> impl FnMut(Shard<'_>) -> Result<()> + 'a {
    move |shard| {
        if shared.cancel.load(Relaxed) {
            return Err(Error::Internal(
                "the stream was destroyed before its flush".into(),
            ));
        }
        sink.emit(&shard)?;
        shared
            .metrics
            .add_shard((shard.data.len() + shard.index.len()) as u64);
        Ok(())
    }
}
