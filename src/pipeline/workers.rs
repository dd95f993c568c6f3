//! The compute thread: it runs the backend on each filled staging buffer,
//! hands the buffer back and passes the compressed epochs on to the
//! delivery thread (`delivery.rs`). Channels carry the work in order, and
//! their bounds are the back-pressure that finally makes `write` busy.

use super::delivery::Delivery;
use super::pyramid::{Outlet, Pyramid};
use super::{Metrics, Shared};
use crate::backend::cpu::downsample::PlaneReduction;
use crate::backend::{Backend, BatchJob, Level1Job, StagingBuffer};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::shard::CompressedEpoch;
use parking_lot::Mutex;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Where a backend takes output objects from, and hands epochs to.
type Spare<'a> = &'a mut dyn FnMut() -> CompressedEpoch;
type Done<'a> = &'a mut dyn FnMut(CompressedEpoch) -> bool;

/// How often the compute thread, while no batch comes, looks for a
/// batch's results the backend holds (the latency bound).
const IDLE_POLL: std::time::Duration = std::time::Duration::from_millis(5);
/// How long it sleeps while the backend holds nothing (woken at once by a
/// batch).
const IDLE_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

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

/// Runs `f`, turning a panic into a poisoned stream.
pub(super) fn guarded(shared: &Shared, what: &str, f: impl FnOnce() -> Result<()>) {
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
    /// Output objects the delivery thread is done with (shared with the
    /// pyramid's thread, so that what both take and give back balances).
    pub spare_epochs: Arc<Mutex<Receiver<CompressedEpoch>>>,
    /// Pyramid levels 1.., when the stream has them: handed to their own
    /// thread when the compute thread starts.
    pub pyramid: Option<Pyramid>,
    /// Where the backend goes when the stream is complete: to the stream
    /// itself, which frees it when it is destroyed. Freeing gigabytes of
    /// device and page-locked memory takes long enough that `finish` should
    /// not wait for it.
    pub retired: Sender<Box<dyn Backend>>,
}

/// Work for the pyramid's thread.
enum PyramidJob {
    /// A staging buffer whose first `bytes` are whole planes of level 0;
    /// the buffer goes back to the write path once they are reduced.
    Planes {
        buf: StagingBuffer,
        bytes: usize,
    },
    /// Level 1's planes, reduced by the backend from `below` planes of
    /// level 0; the buffer goes back to the compute thread for reuse.
    Level1 {
        planes: Vec<u8>,
        below: u64,
    },
    Finish,
}

/// The pyramid's levels run on a thread of their own, beside level 0's
/// backend: it reduces a staging buffer's planes, hands the buffer back,
/// then compresses the levels' whole epochs.
struct PyramidThread {
    shared: Arc<Shared>,
    pyramid: Pyramid,
    jobs: Receiver<PyramidJob>,
    free_staging: Sender<StagingBuffer>,
    deliveries: SyncSender<Delivery>,
    spare_epochs: Arc<Mutex<Receiver<CompressedEpoch>>>,
    /// Level 1's buffers, back to the compute thread.
    level1_free: Sender<Vec<u8>>,
}

impl PyramidThread {
    /// Returns the pyramid, whose backends the stream holds until it goes.
    fn run(mut self) -> Pyramid {
        while let Ok(job) = self.jobs.recv() {
            let live = !(self.shared.is_poisoned() || self.shared.cancel.load(Relaxed));
            let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
            let shared = &self.shared;
            let pyramid = &mut self.pyramid;
            let mut outlet = |f: &mut dyn FnMut(&mut Pyramid, &mut Outlet<'_>) -> Result<()>| {
                guarded(shared, "pyramid", || {
                    f(
                        pyramid,
                        &mut Outlet {
                            cancel: &shared.cancel,
                            metrics: &shared.metrics,
                            spare: &mut || spares.lock().try_recv().unwrap_or_default(),
                            done: &mut |level, out| send(deliveries, level, out),
                        },
                    )
                })
            };
            match job {
                PyramidJob::Planes { buf, bytes } => {
                    if live {
                        outlet(&mut |p, _| p.reduce(&buf[..bytes], &shared.metrics));
                    }
                    let _ = self.free_staging.send(buf);
                    if live {
                        outlet(&mut |p, out| p.compress_whole(out));
                    }
                }
                PyramidJob::Level1 { planes, below } => {
                    let mut planes = Some(planes);
                    let mut back = Vec::new();
                    if live {
                        outlet(&mut |p, _| {
                            let taken = planes.take().unwrap_or_default();
                            back = p.take_level1(taken, below, &shared.metrics)?;
                            Ok(())
                        });
                    }
                    let _ = self.level1_free.send(planes.unwrap_or(back));
                    if live {
                        outlet(&mut |p, out| p.compress_whole(out));
                    }
                }
                PyramidJob::Finish => {
                    if live {
                        outlet(&mut |p, out| p.finish(out));
                    }
                    break;
                }
            }
        }
        self.pyramid
    }
}

/// The compute thread's end of the pyramid's thread.
struct PyramidLink {
    jobs: SyncSender<PyramidJob>,
    thread: JoinHandle<Pyramid>,
    /// Level 1's reduction when the backend does it, while every batch so
    /// far held whole pairs of planes (after one that does not, the
    /// pyramid's thread pairs planes itself).
    level1: Option<(PlaneReduction, bool)>,
    level1_free: Receiver<Vec<u8>>,
}

impl ComputeThread {
    pub fn run(mut self) {
        let link = match self.pyramid.take() {
            Some(pyramid) => match self.start_pyramid(pyramid) {
                Ok(link) => Some(link),
                Err(e) => {
                    self.shared.poison(e);
                    None
                }
            },
            None => None,
        };
        let link = self.work(link);
        if let Some(link) = link {
            drop(link.jobs);
            self.join_pyramid(link.thread);
        }
        // The receiver lives as long as the stream; when it is already
        // gone, the backend is freed here.
        let _ = self.retired.send(self.backend);
    }

    /// Waits for the pyramid's thread; its backends go where level 0's
    /// goes, to be freed with the stream.
    fn join_pyramid(&self, thread: JoinHandle<Pyramid>) {
        match thread.join() {
            Ok(pyramid) => {
                for b in pyramid.into_backends() {
                    let _ = self.retired.send(b);
                }
            }
            Err(_) => self
                .shared
                .poison(Error::Internal("the pyramid's thread panicked".into())),
        }
    }

    fn start_pyramid(&self, pyramid: Pyramid) -> Result<PyramidLink> {
        // One buffer may wait while another is reduced: then the compute
        // thread waits, and with it, in time, the write path.
        let (jobs, rx) = mpsc::sync_channel(1);
        let (level1_tx, level1_free) = mpsc::channel();
        let level1 = Some(pyramid.first_reduction());
        let worker = PyramidThread {
            shared: self.shared.clone(),
            pyramid,
            jobs: rx,
            free_staging: self.free_staging.clone(),
            deliveries: self.deliveries.clone(),
            spare_epochs: self.spare_epochs.clone(),
            level1_free: level1_tx,
        };
        let thread = std::thread::Builder::new()
            .name("tz-pyramid".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::Internal(format!("starting thread tz-pyramid: {e}")))?;
        Ok(PyramidLink {
            jobs,
            thread,
            level1,
            level1_free,
        })
    }

    /// Runs the jobs; returns the pyramid's link (its thread still to join).
    fn work(&mut self, mut link: Option<PyramidLink>) -> Option<PyramidLink> {
        loop {
            // Only a backend holding a batch has anything to poll for.
            let wait = if self.backend.holds_batch() {
                IDLE_POLL
            } else {
                IDLE_WAIT
            };
            let job = match self.jobs.recv_timeout(wait) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.collect_ready();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return link,
            };
            match job {
                Job::Batch {
                    first_epoch,
                    mut buf,
                    valid,
                } => {
                    let level1 = link.as_ref().and_then(|l| l.level1.as_ref());
                    let bytes = self.compress(first_epoch, &mut buf, valid, level1);
                    // The receivers are gone only when the stream is dropped.
                    let Some(l) = &mut link else {
                        let _ = self.free_staging.send(buf);
                        continue;
                    };
                    let job = match self.level1_on_backend(l, bytes) {
                        Some(job) => {
                            let _ = self.free_staging.send(buf);
                            job
                        }
                        None => PyramidJob::Planes { buf, bytes },
                    };
                    if let Err(mpsc::SendError(PyramidJob::Planes { buf, .. })) = l.jobs.send(job) {
                        let _ = self.free_staging.send(buf);
                    }
                }
                Job::Finish { planes } => {
                    self.drain();
                    if let Some(l) = link {
                        let _ = l.jobs.send(PyramidJob::Finish);
                        self.join_pyramid(l.thread);
                    }
                    let _ = self.deliveries.send(Delivery::Finish { planes });
                    return None;
                }
            }
        }
    }

    /// Hands on a batch the backend holds whose results are back.
    fn collect_ready(&mut self) {
        self.hand_on_held(|b, m, spare, done| b.collect_ready(m, spare, done));
    }

    /// Runs `f` (the backend's `collect_ready` or `drain`) with the
    /// delivery thread's spares and queue, unless the stream is poisoned
    /// or abandoned.
    fn hand_on_held(
        &mut self,
        f: impl FnOnce(&mut dyn Backend, &Metrics, Spare, Done) -> Result<()>,
    ) {
        if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
            return;
        }
        let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
        let shared = &self.shared;
        let backend = &mut *self.backend;
        guarded(shared, "compute", || {
            f(
                backend,
                &shared.metrics,
                &mut || spares.lock().try_recv().unwrap_or_default(),
                &mut |out| send(deliveries, 0, out),
            )
        });
    }

    /// Level 1 of the batch just compressed (`bytes` of whole planes), by
    /// the backend while the batch is on the device; `None` where it does
    /// not (the CPU backend, a batch of an odd number of planes, a failure,
    /// which poisons the stream).
    fn level1_on_backend(&mut self, l: &mut PyramidLink, bytes: usize) -> Option<PyramidJob> {
        let (r, pairs) = l.level1.as_ref()?;
        if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
            return None;
        }
        let planes = bytes / r.src_plane_bytes().max(1);
        if !whole_pairs(*pairs, planes) {
            // From here on the pyramid's thread pairs planes itself.
            l.level1 = None;
            return None;
        }
        let out_planes = if *pairs { planes / 2 } else { planes };
        let mut out = l.level1_free.try_recv().unwrap_or_default();
        let mut reduced = false;
        guarded(&self.shared, "compute", || {
            let len = out_planes * r.out_plane_bytes();
            out.try_reserve(len.saturating_sub(out.len()))
                .map_err(|_| {
                    Error::OutOfMemory(format!("{len} bytes for a batch of pyramid level 1"))
                })?;
            out.resize(len, 0);
            reduced = self.backend.fetch_level1(planes, &mut out)?;
            Ok(())
        });
        if !reduced {
            l.level1 = None;
            return None;
        }
        Some(PyramidJob::Level1 {
            planes: out,
            below: planes as u64,
        })
    }

    /// Collects what the backend still holds at the end of the stream.
    fn drain(&mut self) {
        self.hand_on_held(|b, m, spare, done| b.drain(m, spare, done));
    }

    /// Compresses the epochs holding data and passes them on, unless the
    /// stream is poisoned or abandoned; returns the bytes of whole planes
    /// holding data (what the pyramid takes). With `level1` (the stream's
    /// first reduction, while the backend does it), the backend reduces
    /// this batch too when it holds whole pairs of planes.
    fn compress(
        &mut self,
        first_epoch: u64,
        buf: &mut [u8],
        valid: usize,
        level1: Option<&(PlaneReduction, bool)>,
    ) -> usize {
        let plane_bytes = self.layout.plane_bytes() as usize;
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
        let epoch_bytes = self.layout.epoch_bytes() as usize;
        let epochs = valid.div_ceil(epoch_bytes);
        // The tail of the last epoch is padding: fill value.
        buf[valid..epochs * epoch_bytes].fill(0);
        let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
        let shared = &self.shared;
        let backend = &mut self.backend;
        guarded(shared, "compute", || {
            let job = BatchJob {
                first_epoch,
                input: &buf[..epochs * epoch_bytes],
                epochs,
                cancel: &shared.cancel,
                metrics: &shared.metrics,
                level1,
            };
            backend.compress_batch(
                job,
                &mut || spares.lock().try_recv().unwrap_or_default(),
                &mut |out| send(deliveries, 0, out),
            )
        });
        planes * plane_bytes
    }
}

/// Whether a batch of `planes` planes is whole windows of level 1 along
/// dimension 0 (pairs of planes when it is halved): only then does the
/// backend reduce it.
fn whole_pairs(pairs: bool, planes: usize) -> bool {
    !pairs || planes.is_multiple_of(2)
}

/// Hands an epoch of level `level` to the delivery thread (false: it is gone).
fn send(deliveries: &SyncSender<Delivery>, level: u32, mut out: CompressedEpoch) -> bool {
    out.level = level;
    deliveries.send(Delivery::Epoch(out)).is_ok()
}
