//! The backend-agnostic driver: staging buffers and the non-blocking write
//! path, epoch hand-off to the backend, the delivery thread, flush, metrics
//! and backend selection.
//!
//! `write` only copies into free staging memory. A staging buffer holds a
//! batch of whole epochs of input; when it is full it goes to the compute
//! thread, which hands it back once the backend has read it. When no buffer
//! is free, `write` returns 0 (busy) at once.

mod batches;
mod delivery;
mod handles;
mod intake;
mod join;
mod lanes;
mod latency;
mod pyramid;
mod shared;
mod skipped;
mod start;
mod waiting;
mod workers;

pub use crate::metrics::{Metrics, Snapshot, Stage};

use crate::backend::{Backend, BackendKind};
use crate::config::{ArraysConfig, Config, Plan, StreamConfig, Validated};
use crate::error::{Error, Result};
use crate::sink::{FsStore, S3Store, ShardSink, StallWatch, Tee};
pub use handles::{Reservation, StreamStats};
pub use intake::Lease;
use intake::{Intake, Writer};
pub use lanes::estimate;
use parking_lot::Mutex;
use shared::Shared;
pub use start::copy_threads;
use start::Parts;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use workers::Job;

/// A stream of row-major bytes into a sharded Zarr array, or into several
/// (see [`ArraysConfig`]): each array is addressed by its index, in the
/// order of the configuration's `arrays`; the calls without one write to
/// array 0.
///
/// [`std::io::Write::write`] follows the non-blocking contract of the
/// design: `Ok(0)` for a non-empty buffer means busy, call again later; it is
/// not an error and not the end of the stream. (`write_all` from the standard
/// library treats `Ok(0)` as an error: use [`Stream::write_blocking`].)
pub struct Stream {
    /// Array 0's validated configuration (the settings all arrays share).
    config: Validated,
    plan: Plan,
    shared: Arc<Shared>,
    /// The write side, shared with the latency timer.
    intake: Arc<Mutex<Intake>>,
    threads: Vec<JoinHandle<()>>,
    timer: Option<JoinHandle<()>>,
    finished: Option<Result<Summary>>,
    /// Threads that share large copies into staging memory.
    copy_pool: rayon::ThreadPool,
    /// The backend, handed back by the compute thread when the stream is
    /// complete, freed with the stream.
    _retired: Receiver<Box<dyn Backend>>,
    /// The sink, handed back by the delivery thread at its end and freed
    /// with the stream (a store tries then once more what it could not
    /// finish: aborting uploads on a server that is back).
    _retired_sink: Receiver<Box<dyn ShardSink>>,
    /// Whether the store's disk still answers: the flush and destroy wait
    /// for the threads no longer than its bound once it does not.
    stall: Option<Arc<StallWatch>>,
}

/// What a finished stream did.
#[derive(Debug, Clone)]
pub struct Summary {
    pub metrics: Snapshot,
    /// Planes written along dimension 0 (the final extent) of array 0.
    pub planes: u64,
    /// The same for every array.
    pub array_planes: Vec<u64>,
    pub backend: BackendKind,
    pub backend_reason: String,
    /// Seconds from the first write to the end of `finish`.
    pub seconds: f64,
}

impl Stream {
    /// A stream writing to the store the config names (if any) and to `sink`
    /// (if any); at least one of the two is required.
    ///
    /// The store is created last, once the backend, its memory and the
    /// shard state exist: a configuration refused for any reason leaves
    /// nothing on disk.
    pub fn new(config: &Config, sink: Option<Box<dyn ShardSink>>) -> Result<Stream> {
        Stream::with_plan(Plan::single(config.validate()?), sink)
    }

    /// A stream of several arrays (see [`Stream::new`] for the rest).
    pub fn with_arrays(config: &ArraysConfig, sink: Option<Box<dyn ShardSink>>) -> Result<Stream> {
        Stream::with_plan(config.validate()?, sink)
    }

    /// A stream of either form of configuration.
    pub fn create(config: &StreamConfig, sink: Option<Box<dyn ShardSink>>) -> Result<Stream> {
        Stream::with_plan(config.validate()?, sink)
    }

    fn with_plan(plan: Plan, sink: Option<Box<dyn ShardSink>>) -> Result<Stream> {
        let no_store = plan.shared().config.store.is_none();
        if let Some(v) = plan
            .arrays
            .iter()
            .find(|v| v.config.frame_metadata.is_some())
        {
            if no_store {
                return Err(Error::InvalidArgument(format!(
                    "array {:?} keeps per-frame metadata, which goes to a store: give the stream a store (a callback gets shards only)",
                    v.key
                )));
            }
        }
        if sink.is_none() && no_store {
            return Err(Error::InvalidArgument(
                "nothing would keep the data: give a sink or a store in the config".into(),
            ));
        }
        let parts = Parts::prepare(plan)?;
        let mut sinks: Vec<Box<dyn ShardSink>> = Vec::new();
        if let Some(sink) = sink {
            sinks.push(sink);
        }
        match &parts.plan.shared().config.store {
            Some(store) if store.url.is_some() => {
                sinks.push(Box::new(S3Store::create(&parts.plan)?))
            }
            Some(_) => sinks.push(Box::new(FsStore::create(&parts.plan)?)),
            None => {}
        }
        let sink: Box<dyn ShardSink> = match sinks.len() {
            1 => sinks.pop().expect("one sink"),
            _ => Box::new(Tee(sinks)),
        };
        let stall = sink.stall_watch();
        let mut stream = parts.start(sink)?;
        stream.stall = stall;
        Ok(stream)
    }

    /// Array 0's validated configuration.
    pub fn config(&self) -> &Validated {
        &self.config
    }

    /// Every array's validated configuration and how they are laid out.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The index of the array with `key` (`""`: the only array of a stream
    /// of one).
    pub fn array_index(&self, key: &str) -> Result<usize> {
        self.plan.index_of(key).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "no array has the key {key:?}; the stream's arrays are {:?}",
                self.plan.arrays.iter().map(|v| &v.key).collect::<Vec<_>>()
            ))
        })
    }

    /// Copies as much of `data` as free staging memory takes, without
    /// waiting. Returns the bytes taken: 0 (for non-empty `data`) when busy.
    pub fn try_write(&mut self, data: &[u8]) -> Result<usize> {
        self.try_write_to(0, data)
    }

    /// [`Stream::try_write`] to array `array`.
    pub fn try_write_to(&mut self, array: usize, data: &[u8]) -> Result<usize> {
        self.write_now(array, data, Writer::CannotWait)
    }

    /// What fits of `data` now, for a `writer` that waits or cannot.
    fn write_now(&mut self, array: usize, data: &[u8], writer: Writer) -> Result<usize> {
        self.check_open()?;
        self.intake
            .lock()
            .try_write(array, data, &self.copy_pool, writer)
    }

    /// Advances array `array` by `nbytes` bytes of whole frames without
    /// data (frames a camera dropped), without waiting: they read as the
    /// fill value. Chunks that hold only skipped frames stay empty in their
    /// shard's index and cost no copy and no compression (on an array
    /// without a pyramid; with one, skipped frames are reduced and
    /// compressed as fill-value frames). Returns the bytes skipped: fewer
    /// than `nbytes` when staging memory is busy, as [`Stream::try_write`]
    /// does; an error for a part of a frame or past a bounded array's end.
    pub fn skip_to(&mut self, array: usize, nbytes: usize) -> Result<usize> {
        self.check_open()?;
        self.intake.lock().skip(array, nbytes, Writer::CannotWait)
    }

    /// Records `json`, a JSON object (a time stamp, a stage position, an
    /// exposure...), as frame `frame`'s metadata of array `array`: the
    /// index along dimension 0, from 0, of a frame already written or
    /// skipped. The array's configuration must ask for it
    /// (`frame_metadata`); it lands in the image's `frame_metadata` array
    /// with the shard rows of its frames. Refused (the stream goes on) for
    /// a frame not written yet, text past `max_bytes`, or a frame whose
    /// shard row was handed on with the next row's frames.
    pub fn frame_metadata(&mut self, array: usize, frame: u64, json: &str) -> Result<()> {
        self.check_open()?;
        let text = intake::compact_object(frame, json)?;
        self.intake.lock().frame_metadata(array, frame, &text)
    }

    /// Hands the caller the free part of a staging buffer to write into
    /// itself (a camera SDK's or frame grabber's DMA, a decoder's output),
    /// saving the copy of [`Stream::try_write`]. Non-blocking: the
    /// reservation is empty when no staging memory is free.
    ///
    /// It spans the rest of one staging buffer up to where the buffer is
    /// handed on (whole epochs: a stream's first buffers after one epoch,
    /// one, two, four..., later ones when full; so after writes of whole
    /// frames it starts and ends on frame boundaries), at most what a
    /// bounded array still takes; staging
    /// buffers start on a page boundary. One reservation at a time: the
    /// stream is borrowed until [`Reservation::commit`], and a reservation
    /// dropped without it counts no bytes.
    pub fn reserve(&mut self) -> Result<Reservation<'_>> {
        self.reserve_to(0)
    }

    /// [`Stream::reserve`] for array `array`.
    pub fn reserve_to(&mut self, array: usize) -> Result<Reservation<'_>> {
        let lease = self.lease_to(array)?;
        Ok(Reservation::new(self, lease))
    }

    /// The lease behind [`Stream::reserve`], for callers that hold it
    /// apart from the stream (the C ABI): give it back with
    /// [`Stream::commit`] or [`Stream::cancel`]. A second lease before
    /// that is refused.
    pub fn lease(&mut self) -> Result<Option<Lease>> {
        self.lease_to(0)
    }

    /// [`Stream::lease`] for array `array`.
    pub fn lease_to(&mut self, array: usize) -> Result<Option<Lease>> {
        self.check_open()?;
        self.intake.lock().lease(array)
    }

    /// Passes on the first `n` bytes written into the lease in `lease`
    /// and ends it. Refused without a lease, and for more than the lease
    /// holds: the lease then stays where it is, nothing written into it is
    /// lost.
    pub fn commit(&mut self, lease: &mut Option<Lease>, n: usize) -> Result<()> {
        let Some(held) = lease.as_ref() else {
            // After the flush, that is what the caller needs to hear.
            self.check_open()?;
            return Err(Error::InvalidArgument(format!(
                "commit of {n} bytes without a reservation: reserve first \
                 (a reservation of 0 bytes holds none)"
            )));
        };
        if n > held.len() {
            return Err(Error::InvalidArgument(format!(
                "commit of {n} bytes, but the reservation holds {}",
                held.len()
            )));
        }
        let held = lease.take().expect("checked above");
        if let Err(e) = self.check_open() {
            self.intake.lock().cancel(held);
            return Err(e);
        }
        self.intake.lock().commit(held, n)
    }

    /// Gives a lease back without passing any of its bytes on.
    pub fn cancel(&mut self, lease: Lease) {
        self.intake.lock().cancel(lease);
    }

    /// Completes the stream: pads and sends the last partial epoch, waits for
    /// every shard to be emitted and the metadata to be final. Terminal: a
    /// second call returns the same result.
    pub fn finish(&mut self) -> Result<Summary> {
        if let Some(done) = &self.finished {
            return done.clone();
        }
        if self.intake.lock().is_leased() {
            // Not terminal: the stream stays open for the lease to come back.
            return Err(Error::InvalidArgument(
                "a reservation is outstanding: commit or cancel it before the flush".into(),
            ));
        }
        let result = self.finish_inner();
        self.finished = Some(result.clone());
        result
    }

    fn finish_inner(&mut self) -> Result<Summary> {
        if self.shared.is_poisoned() {
            // Stop as a drop would, so that the sink winds down (within its
            // bounds) and has said what the failure cost before this returns.
            self.stop();
            self.shared.check()?;
        }
        let (jobs, bytes_in, started) = {
            let mut intake = self.intake.lock();
            let bytes_in: Vec<u64> = (0..self.plan.arrays.len())
                .map(|a| intake.bytes_in(a))
                .collect();
            (intake.close()?, bytes_in, intake.started)
        };
        // The timer ends with its wake-up channel, closed with the queue.
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
        // A trailing partial element or plane is padded: the extent counts it.
        let array_planes: Vec<u64> = self
            .plan
            .arrays
            .iter()
            .zip(&bytes_in)
            .map(|(v, &bytes)| match v.layout.is_unbounded() {
                true => bytes.div_ceil(v.layout.plane_bytes()),
                false => v.layout.dims()[0].size,
            })
            .collect();
        if let Some(jobs) = jobs {
            let planes = self
                .plan
                .arrays
                .iter()
                .zip(&array_planes)
                .map(|(v, &p)| crate::metadata::level_planes(v, p))
                .collect();
            let _ = jobs.send(Job::Finish { planes });
        }
        let threads = std::mem::take(&mut self.threads);
        join::join_threads(&self.shared, threads, self.stall.as_deref());
        self.shared.check()?;
        let sel = &self.shared.selection;
        Ok(Summary {
            metrics: self.shared.metrics.snapshot(),
            planes: array_planes[0],
            array_planes,
            backend: sel.kind,
            backend_reason: sel.reason.clone(),
            seconds: started.map_or(0.0, |t| t.elapsed().as_secs_f64()),
        })
    }

    /// Replaces the user's attributes (a JSON object without the key
    /// `ome`): the store writes them at its next metadata update and at
    /// the flush. Refused once the stream is flushed.
    pub fn set_attributes(&mut self, attributes: &serde_json::Value) -> Result<()> {
        if self.finished.is_some() {
            return Err(Error::Finished);
        }
        self.shared.check()?;
        if self.plan.arrays.len() > 1 {
            return Err(Error::InvalidArgument(
                "a stream of several arrays takes each array's attributes in its \
                 configuration; they are not replaced while it runs"
                    .into(),
            ));
        }
        let map = crate::config::check_attributes(attributes)?;
        self.shared.attributes.set(map);
        Ok(())
    }

    /// Live counters.
    pub fn metrics(&self) -> Snapshot {
        self.shared.metrics.snapshot()
    }

    /// The backend running this stream and why it was chosen.
    pub fn backend(&self) -> (BackendKind, &str) {
        (self.shared.selection.kind, &self.shared.selection.reason)
    }

    /// A handle on the counters that other threads can read while this
    /// stream is busy (in a blocking write or in `finish`).
    pub fn stats(&self) -> StreamStats {
        StreamStats(self.shared.clone())
    }

    /// Discards queued data and stops the threads (a sink call under way
    /// completes, no other starts).
    fn stop(&mut self) {
        self.shared.cancel.store(true, Relaxed);
        self.intake.lock().abandon();
        let threads = std::mem::take(&mut self.threads);
        join::join_threads(&self.shared, threads, self.stall.as_deref());
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
    }

    fn check_open(&self) -> Result<()> {
        if let Some(done) = &self.finished {
            // A stream that failed in finish keeps answering with that failure.
            return Err(done.clone().err().unwrap_or(Error::Finished));
        }
        self.shared.check()
    }
}

impl Drop for Stream {
    /// Without `finish`, queued data is discarded and delivery stops at
    /// once (a sink call under way completes, no other starts): no partial
    /// shard is written; shards already emitted stay as they are.
    fn drop(&mut self) {
        self.stop();
    }
}
