//! The compute thread: it runs the backend on each filled staging buffer,
//! hands the buffer back and passes the compressed epochs on to the
//! delivery thread (`delivery.rs`). Channels carry the work in order, and
//! their bounds are the back-pressure that finally makes `write` busy.

use super::batches::{send_owed, whole_pairs, Batch, Owed};
use super::delivery::Delivery;
use super::pyramid::{Outlet, Pyramid};
use super::{Metrics, Shared};
use crate::backend::cpu::downsample::PlaneReduction;
use crate::backend::{Backend, StagingBuffer};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::shard::CompressedEpoch;
use parking_lot::Mutex;
use std::collections::VecDeque;
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
    /// A staging buffer of epochs.
    Batch(Batch),
    /// `epochs` epochs of array `array` from `first_epoch` on that hold
    /// no data (skipped frames): their chunks stay empty.
    Skip {
        array: u32,
        first_epoch: u64,
        epochs: u64,
    },
    /// Rows of array `array`'s per-frame metadata, for its store.
    FrameMetadata {
        array: u32,
        rows: Vec<crate::pipeline::intake::MetadataRow>,
    },
    /// The stream is complete with `planes[a][k]` planes along dimension
    /// 0 on array `a`'s level `k`.
    Finish { planes: Vec<Vec<u64>> },
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
    /// One backend per lane: the arrays of one shape and codec share it.
    pub backends: Vec<Box<dyn Backend>>,
    /// Each array's lane.
    pub lane_of: Vec<usize>,
    /// Each array's level-0 layout.
    pub layouts: Vec<Layout>,
    /// Per lane, the arrays of the epochs its backend still owes, in
    /// order, with how many: a backend that overlaps batches hands one
    /// batch's epochs on while it takes the next.
    pub owed: Vec<VecDeque<Owed>>,
    /// A job taken from the queue while gathering a batch that did not
    /// join it: the next one to run.
    pub peeked: Option<Job>,
    pub jobs: Receiver<Job>,
    /// Each lane's pool of free staging buffers.
    pub free_staging: Vec<Sender<StagingBuffer>>,
    pub deliveries: SyncSender<Delivery>,
    /// Output objects the delivery thread is done with (shared with the
    /// pyramid's thread, so that what both take and give back balances).
    pub spare_epochs: Arc<Mutex<Receiver<CompressedEpoch>>>,
    /// Each array's pyramid levels 1.., where it has them: handed to
    /// their own thread when the compute thread starts.
    pub pyramids: Vec<Option<Pyramid>>,
    /// Whether each array has a pyramid.
    pub has_pyramid: Vec<bool>,
    /// Where the backend goes when the stream is complete: to the stream
    /// itself, which frees it when it is destroyed. Freeing gigabytes of
    /// device and page-locked memory takes long enough that `finish` should
    /// not wait for it.
    pub retired: Sender<Box<dyn Backend>>,
}

/// Work for the pyramid's thread.
enum PyramidJob {
    /// A staging buffer whose first `bytes` are whole planes of array
    /// `array`'s level 0; the buffer goes back to the write path once they
    /// are reduced.
    Planes {
        array: u32,
        buf: StagingBuffer,
        bytes: usize,
    },
    /// Level 1's planes, reduced by the backend from `below` planes of
    /// level 0 (a stream of one array); the buffer goes back to the
    /// compute thread for reuse.
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
    /// Each array's levels 1.. (`None`: it has no pyramid).
    pyramids: Vec<Option<Pyramid>>,
    jobs: Receiver<PyramidJob>,
    /// Each lane's free staging buffers, and each array's lane.
    free_staging: Vec<Sender<StagingBuffer>>,
    lane_of: Vec<usize>,
    deliveries: SyncSender<Delivery>,
    spare_epochs: Arc<Mutex<Receiver<CompressedEpoch>>>,
    /// Level 1's buffers, back to the compute thread.
    level1_free: Sender<Vec<u8>>,
}

impl PyramidThread {
    /// Returns the pyramids, whose backends the stream holds until it goes.
    fn run(mut self) -> Vec<Option<Pyramid>> {
        while let Ok(job) = self.jobs.recv() {
            let live = !(self.shared.is_poisoned() || self.shared.cancel.load(Relaxed));
            let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
            let shared = &self.shared;
            let array = match &job {
                PyramidJob::Planes { array, .. } => *array,
                PyramidJob::Level1 { .. } | PyramidJob::Finish => 0,
            };
            let arrays = self.pyramids.len() as u32;
            let pyramids = &mut self.pyramids;
            let mut on =
                |a: u32, f: &mut dyn FnMut(&mut Pyramid, &mut Outlet<'_>) -> Result<()>| {
                    let Some(pyramid) = pyramids[a as usize].as_mut() else {
                        return;
                    };
                    guarded(shared, "pyramid", || {
                        f(
                            pyramid,
                            &mut Outlet {
                                cancel: &shared.cancel,
                                metrics: &shared.metrics,
                                spare: &mut || spares.lock().try_recv().unwrap_or_default(),
                                done: &mut |level, out| send(deliveries, a, level, out),
                            },
                        )
                    })
                };
            let mut outlet =
                |f: &mut dyn FnMut(&mut Pyramid, &mut Outlet<'_>) -> Result<()>| on(array, f);
            match job {
                PyramidJob::Planes { buf, bytes, .. } => {
                    if live {
                        outlet(&mut |p, _| p.reduce(&buf[..bytes], &shared.metrics));
                    }
                    let _ = self.free_staging[self.lane_of[array as usize]].send(buf);
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
                        for a in 0..arrays {
                            on(a, &mut |p, out| p.finish(out));
                        }
                    }
                    break;
                }
            }
        }
        self.pyramids
    }
}

/// The compute thread's end of the pyramid's thread.
struct PyramidLink {
    jobs: SyncSender<PyramidJob>,
    thread: JoinHandle<Vec<Option<Pyramid>>>,
    /// Level 1's reduction when the backend does it (a stream of one
    /// array), while every batch so far held whole pairs of planes (after
    /// one that does not, the pyramid's thread pairs planes itself).
    level1: Option<(PlaneReduction, bool)>,
    level1_free: Receiver<Vec<u8>>,
}

impl ComputeThread {
    pub fn run(mut self) {
        let pyramids = std::mem::take(&mut self.pyramids);
        let link = match pyramids.iter().any(Option::is_some) {
            true => match self.start_pyramid(pyramids) {
                Ok(link) => Some(link),
                Err(e) => {
                    self.shared.poison(e);
                    None
                }
            },
            false => None,
        };
        let link = self.work(link);
        if let Some(link) = link {
            drop(link.jobs);
            self.join_pyramid(link.thread);
        }
        // The receiver lives as long as the stream; when it is already
        // gone, the backends are freed here.
        for b in std::mem::take(&mut self.backends) {
            let _ = self.retired.send(b);
        }
    }

    /// Waits for the pyramid's thread; its backends go where level 0's
    /// go, to be freed with the stream.
    fn join_pyramid(&self, thread: JoinHandle<Vec<Option<Pyramid>>>) {
        match thread.join() {
            Ok(pyramids) => {
                for b in pyramids
                    .into_iter()
                    .flatten()
                    .flat_map(Pyramid::into_backends)
                {
                    let _ = self.retired.send(b);
                }
            }
            Err(_) => self
                .shared
                .poison(Error::Internal("the pyramid's thread panicked".into())),
        }
    }

    fn start_pyramid(&self, pyramids: Vec<Option<Pyramid>>) -> Result<PyramidLink> {
        // One buffer may wait while another is reduced: then the compute
        // thread waits, and with it, in time, the write path.
        let (jobs, rx) = mpsc::sync_channel(1);
        let (level1_tx, level1_free) = mpsc::channel();
        let level1 = match pyramids.as_slice() {
            [Some(only)] => Some(only.first_reduction()),
            _ => None,
        };
        let worker = PyramidThread {
            shared: self.shared.clone(),
            pyramids,
            jobs: rx,
            free_staging: self.free_staging.clone(),
            lane_of: self.lane_of.clone(),
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
            let wait = if self.backends.iter().any(|b| b.holds_batch()) {
                IDLE_POLL
            } else {
                IDLE_WAIT
            };
            let job = match self
                .peeked
                .take()
                .map_or_else(|| self.jobs.recv_timeout(wait), Ok)
            {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.collect_ready();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return link,
            };
            match job {
                Job::Batch(b) if self.pyramid_less(b.array) => self.compress_gathered(b),
                Job::Batch(Batch {
                    array,
                    first_epoch,
                    mut buf,
                    valid,
                }) => {
                    let free = self.free_staging[self.lane_of[array as usize]].clone();
                    let level1 = link.as_ref().and_then(|l| l.level1.as_ref());
                    let bytes = self.compress(array, first_epoch, &mut buf, valid, level1);
                    // The receivers are gone only when the stream is dropped.
                    let Some(l) = &mut link else {
                        let _ = free.send(buf);
                        continue;
                    };
                    if self.pyramid_less(array) {
                        let _ = free.send(buf);
                        continue;
                    }
                    let job = match self.level1_on_backend(l, bytes) {
                        Some(job) => {
                            let _ = free.send(buf);
                            job
                        }
                        None => PyramidJob::Planes { array, buf, bytes },
                    };
                    if let Err(mpsc::SendError(PyramidJob::Planes { buf, .. })) = l.jobs.send(job) {
                        let _ = free.send(buf);
                    }
                }
                Job::Skip {
                    array,
                    first_epoch,
                    epochs,
                } => self.skip(array, first_epoch, epochs),
                Job::FrameMetadata { array, rows } => {
                    let _ = self
                        .deliveries
                        .send(Delivery::FrameMetadata { array, rows });
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

    /// Runs `f` (a backend's `collect_ready` or `drain`) on every lane's
    /// backend with the delivery thread's spares and queue, unless the
    /// stream is poisoned or abandoned.
    fn hand_on_held(&mut self, f: impl Fn(&mut dyn Backend, &Metrics, Spare, Done) -> Result<()>) {
        for lane in 0..self.backends.len() {
            if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
                return;
            }
            let (spares, deliveries) = (&self.spare_epochs, &self.deliveries);
            let shared = &self.shared;
            let backend = &mut *self.backends[lane];
            let owed = &mut self.owed[lane];
            guarded(shared, "compute", || {
                f(
                    backend,
                    &shared.metrics,
                    &mut || spares.lock().try_recv().unwrap_or_default(),
                    &mut |out| send_owed(deliveries, owed, out),
                )
            });
        }
    }

    /// Whether array `array` has no pyramid (its staging buffer is free
    /// once compressed).
    pub(super) fn pyramid_less(&self, array: u32) -> bool {
        !self.has_pyramid[array as usize]
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
            reduced = self.backends[0].fetch_level1(planes, &mut out)?;
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
    pub(super) fn drain(&mut self) {
        self.hand_on_held(|b, m, spare, done| b.drain(m, spare, done));
    }
}

/// Hands an epoch of array `array`'s level `level` to the delivery thread
/// (false: it is gone).
pub(super) fn send(
    deliveries: &SyncSender<Delivery>,
    array: u32,
    level: u32,
    mut out: CompressedEpoch,
) -> bool {
    out.array = array;
    out.level = level;
    deliveries.send(Delivery::Epoch(out)).is_ok()
}
