//! The backend-agnostic driver: staging buffers and the non-blocking write
//! path, epoch hand-off to the backend, the delivery thread, flush, metrics
//! and backend selection.
//!
//! `write` only copies into free staging memory. A staging buffer holds a
//! batch of whole epochs of input; when it is full it goes to the compute
//! thread, which hands it back once the backend has read it. When no buffer
//! is free, `write` returns 0 (busy) at once.

mod delivery;
mod intake;
mod latency;
mod pyramid;
mod shared;
mod start;
mod workers;

pub use crate::metrics::{Metrics, Snapshot, Stage};

use crate::backend::{Backend, BackendKind};
use crate::config::{Config, Validated};
use crate::error::{Error, Result};
use crate::sink::{FsStore, S3Store, ShardSink, Tee};
use intake::Intake;
pub use intake::Lease;
use parking_lot::Mutex;
use shared::Shared;
pub use start::copy_threads;
use start::Parts;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use workers::Job;

/// A stream of row-major bytes into a sharded Zarr array.
///
/// [`std::io::Write::write`] follows the non-blocking contract of the
/// design: `Ok(0)` for a non-empty buffer means busy, call again later; it is
/// not an error and not the end of the stream. (`write_all` from the standard
/// library treats `Ok(0)` as an error: use [`Stream::write_blocking`].)
pub struct Stream {
    config: Validated,
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
}

/// What a finished stream did.
#[derive(Debug, Clone)]
pub struct Summary {
    pub metrics: Snapshot,
    /// Planes written along dimension 0 (the final extent).
    pub planes: u64,
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
        let v = config.validate()?;
        if sink.is_none() && v.config.store.is_none() {
            return Err(Error::InvalidArgument(
                "nothing would keep the data: give a sink or a store in the config".into(),
            ));
        }
        let parts = Parts::prepare(v)?;
        let mut sinks: Vec<Box<dyn ShardSink>> = Vec::new();
        if let Some(sink) = sink {
            sinks.push(sink);
        }
        match &parts.v.config.store {
            Some(store) if store.url.is_some() => sinks.push(Box::new(S3Store::create(&parts.v)?)),
            Some(_) => sinks.push(Box::new(FsStore::create(&parts.v)?)),
            None => {}
        }
        let sink: Box<dyn ShardSink> = match sinks.len() {
            1 => sinks.pop().expect("one sink"),
            _ => Box::new(Tee(sinks)),
        };
        parts.start(sink)
    }

    /// The validated configuration.
    pub fn config(&self) -> &Validated {
        &self.config
    }

    /// Copies as much of `data` as free staging memory takes, without
    /// waiting. Returns the bytes taken: 0 (for non-empty `data`) when busy.
    pub fn try_write(&mut self, data: &[u8]) -> Result<usize> {
        self.check_open()?;
        self.intake.lock().try_write(data, &self.copy_pool)
    }

    /// Writes all of `data`, waiting for staging memory as needed, at most
    /// `timeout` (for ever with `None`, or a timeout too long for the
    /// clock, such as `Duration::MAX`). Returns the bytes taken: fewer than
    /// `data.len()` only when the timeout expired.
    pub fn write_blocking(&mut self, data: &[u8], timeout: Option<Duration>) -> Result<usize> {
        // A timeout past what the clock can represent (`Duration::MAX` for
        // "forever") has no deadline.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let capacity = self.config.layout.array_bytes();
        let mut done = 0;
        loop {
            done += self.try_write(&data[done..])?;
            // At the end of a bounded array, what was taken is reported now
            // and the overflow on the next call, as `try_write` does.
            let at_end = Some(self.intake.lock().bytes_in) == capacity;
            if done == data.len() || (done > 0 && at_end) {
                return Ok(done);
            }
            // Busy: wait for the compute thread to hand a buffer back, in
            // short turns that leave the write side to the latency timer.
            let turn = Duration::from_millis(50);
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(turn),
                None => turn,
            };
            let got = self.intake.lock().wait_for_buffer(wait)?;
            if !got && deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(done);
            }
        }
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
        let lease = self.lease()?;
        Ok(Reservation {
            stream: self,
            lease,
        })
    }

    /// The lease behind [`Stream::reserve`], for callers that hold it
    /// apart from the stream (the C ABI): give it back with
    /// [`Stream::commit`] or [`Stream::cancel`]. A second lease before
    /// that is refused.
    pub fn lease(&mut self) -> Result<Option<Lease>> {
        self.check_open()?;
        self.intake.lock().lease()
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
            (intake.close()?, intake.bytes_in, intake.started)
        };
        // The timer ends with its wake-up channel, closed with the queue.
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
        let layout = &self.config.layout;
        // A trailing partial element or plane is padded: the extent counts it.
        let planes = if layout.is_unbounded() {
            bytes_in.div_ceil(layout.plane_bytes())
        } else {
            layout.dims()[0].size
        };
        if let Some(jobs) = jobs {
            let planes = crate::metadata::level_planes(&self.config, planes);
            let _ = jobs.send(Job::Finish { planes });
        }
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                self.shared
                    .poison(Error::Internal("a pipeline thread panicked".into()));
            }
        }
        self.shared.check()?;
        let sel = &self.shared.selection;
        Ok(Summary {
            metrics: self.shared.metrics.snapshot(),
            planes,
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
        for t in self.threads.drain(..).chain(self.timer.take()) {
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

/// Free staging memory handed to the caller ([`Stream::reserve`]); it
/// dereferences to the bytes to write.
pub struct Reservation<'a> {
    stream: &'a mut Stream,
    lease: Option<Lease>,
}

impl Reservation<'_> {
    /// Passes on the first `n` bytes written (at most the reservation's
    /// length).
    pub fn commit(mut self, n: usize) -> Result<()> {
        if self.lease.is_none() && n == 0 {
            return Ok(());
        }
        self.stream.commit(&mut self.lease, n)
    }
}

impl std::ops::Deref for Reservation<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.lease.as_ref().map_or(&[], |l| l.bytes_ref())
    }
}

impl std::ops::DerefMut for Reservation<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.lease {
            Some(l) => l.bytes(),
            None => &mut [],
        }
    }
}

impl Drop for Reservation<'_> {
    /// Without a commit, no byte of the reservation counts.
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.stream.cancel(lease);
        }
    }
}

/// Read-only access to a stream's counters from any thread.
#[derive(Clone)]
pub struct StreamStats(Arc<Shared>);

impl StreamStats {
    pub fn snapshot(&self) -> Snapshot {
        self.0.metrics.snapshot()
    }
    pub fn backend(&self) -> (BackendKind, &str) {
        (self.0.selection.kind, &self.0.selection.reason)
    }
}

impl std::io::Write for Stream {
    /// Non-blocking: `Ok(0)` means busy (see [`Stream`]).
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.try_write(buf).map_err(std::io::Error::other)
    }
    /// Data goes out in whole shards; only [`Stream::finish`] completes it.
    fn flush(&mut self) -> std::io::Result<()> {
        self.shared.check().map_err(std::io::Error::other)
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
