//! The backend-agnostic driver: staging buffers and the non-blocking write
//! path, epoch hand-off to the backend, the delivery thread, flush, metrics
//! and backend selection.
//!
//! `write` only copies into free staging memory. A staging buffer holds a
//! batch of whole epochs of input; when it is full it goes to the compute
//! thread, which hands it back once the backend has read it. When no buffer
//! is free, `write` returns 0 (busy) at once.

mod pyramid;
mod shared;
mod workers;

pub use crate::metrics::{Metrics, Snapshot, Stage};

use crate::backend::{self, Backend, BackendKind, StagingBuffer};
use crate::config::{Config, Validated};
use crate::error::{Error, Result};
use crate::shard::ShardAssembler;
use crate::sink::{FsStore, S3Store, ShardSink, SharedAttributes, StreamHooks, Tee};
use pyramid::Pyramid;
use shared::Shared;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use workers::{ComputeThread, DeliveryThread, Job};

/// A stream of row-major bytes into a sharded Zarr array.
///
/// [`std::io::Write::write`] follows the non-blocking contract of the
/// design: `Ok(0)` for a non-empty buffer means busy, call again later; it is
/// not an error and not the end of the stream. (`write_all` from the standard
/// library treats `Ok(0)` as an error: use [`Stream::write_blocking`].)
pub struct Stream {
    config: Validated,
    shared: Arc<Shared>,
    /// The buffer being filled, and how many bytes it holds.
    staging: Option<StagingBuffer>,
    filled: usize,
    /// The first epoch of the staging buffer in hand.
    epoch: u64,
    bytes_in: u64,
    buffer_bytes: usize,
    free_staging: Receiver<StagingBuffer>,
    jobs: Option<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
    finished: Option<Result<Summary>>,
    started: Option<Instant>,
    /// Threads that share large copies into staging memory.
    copy_pool: rayon::ThreadPool,
    /// The backend, handed back by the compute thread when the stream is
    /// complete, freed with the stream.
    _retired: Receiver<Box<dyn Backend>>,
}

/// Threads that share a large write's copy into staging memory. Feeding a
/// GPU takes all of the host's memory bandwidth the cores can draw, and the
/// writing thread sleeps while they copy, so the GPU backend gets one per
/// core (at most 16); the CPU backend's compressor needs the cores, so it
/// gets half of them (at most 8).
pub fn copy_threads(kind: BackendKind) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match kind {
        BackendKind::Gpu => cores.clamp(1, 16),
        BackendKind::Cpu => (cores / 2).clamp(1, 8),
    }
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
        let capacity = self.config.layout.array_bytes();
        let mut take = data.len();
        if let Some(cap) = capacity {
            let left = cap - self.bytes_in;
            if left == 0 && take > 0 {
                return Err(Error::Overflow { capacity: cap });
            }
            take = take.min(left as usize);
        }
        self.started.get_or_insert_with(Instant::now);
        let t = Instant::now();
        let mut done = 0;
        while done < take {
            if self.staging.is_none() && !self.take_free_buffer()? {
                break;
            }
            let buf = self.staging.as_mut().expect("a buffer is in hand");
            let n = (take - done).min(self.buffer_bytes - self.filled);
            let copier = buf.copier();
            crate::memory::parallel_copy(
                &self.copy_pool,
                &mut buf[self.filled..self.filled + n],
                &data[done..done + n],
                copier,
            );
            self.filled += n;
            done += n;
            self.bytes_in += n as u64;
            // A full buffer, or the (possibly shorter) end of the array.
            if self.filled == self.buffer_bytes || Some(self.bytes_in) == capacity {
                self.submit()?;
            }
        }
        self.shared.metrics.add_time(Stage::Copy, t.elapsed());
        self.shared.metrics.add_in(done as u64);
        Ok(done)
    }

    /// Writes all of `data`, waiting for staging memory as needed, at most
    /// `timeout` (for ever with `None`). Returns the bytes taken: fewer than
    /// `data.len()` only when the timeout expired.
    pub fn write_blocking(&mut self, data: &[u8], timeout: Option<Duration>) -> Result<usize> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let capacity = self.config.layout.array_bytes();
        let mut done = 0;
        loop {
            done += self.try_write(&data[done..])?;
            // At the end of a bounded array, what was taken is reported now
            // and the overflow on the next call, as `try_write` does.
            if done == data.len() || (done > 0 && Some(self.bytes_in) == capacity) {
                return Ok(done);
            }
            // Busy: wait for the compute thread to hand a buffer back.
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            match self.free_staging.recv_timeout(wait) {
                Ok(buf) => self.start_buffer(buf),
                Err(RecvTimeoutError::Timeout) if deadline.is_some() => return Ok(done),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(self.pipeline_gone()),
            }
        }
    }

    /// Completes the stream: pads and sends the last partial epoch, waits for
    /// every shard to be emitted and the metadata to be final. Terminal: a
    /// second call returns the same result.
    pub fn finish(&mut self) -> Result<Summary> {
        if let Some(done) = &self.finished {
            return done.clone();
        }
        let result = self.finish_inner();
        self.finished = Some(result.clone());
        result
    }

    fn finish_inner(&mut self) -> Result<Summary> {
        self.shared.check()?;
        if self.filled > 0 {
            self.submit()?;
        }
        let layout = &self.config.layout;
        // A trailing partial element or plane is padded: the extent counts it.
        let planes = if layout.is_unbounded() {
            self.bytes_in.div_ceil(layout.plane_bytes())
        } else {
            layout.dims()[0].size
        };
        if let Some(jobs) = self.jobs.take() {
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
            seconds: self.started.map_or(0.0, |t| t.elapsed().as_secs_f64()),
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

    fn check_open(&self) -> Result<()> {
        if let Some(done) = &self.finished {
            // A stream that failed in finish keeps answering with that failure.
            return Err(done.clone().err().unwrap_or(Error::Finished));
        }
        self.shared.check()
    }

    fn take_free_buffer(&mut self) -> Result<bool> {
        match self.free_staging.try_recv() {
            Ok(buf) => {
                self.start_buffer(buf);
                Ok(true)
            }
            Err(TryRecvError::Empty) => Ok(false),
            Err(TryRecvError::Disconnected) => Err(self.pipeline_gone()),
        }
    }

    fn start_buffer(&mut self, buf: StagingBuffer) {
        debug_assert!(self.staging.is_none());
        self.staging = Some(buf);
        self.filled = 0;
    }

    fn submit(&mut self) -> Result<()> {
        let buf = self.staging.take().expect("a buffer is in hand");
        let job = Job::Batch {
            first_epoch: self.epoch,
            buf,
            valid: self.filled,
        };
        self.epoch += self.config.epochs_per_buffer;
        self.filled = 0;
        let jobs = self.jobs.as_ref().expect("open stream");
        jobs.send(job).map_err(|_| self.pipeline_gone())
    }

    fn pipeline_gone(&self) -> Error {
        self.shared.check().err().unwrap_or_else(|| {
            let e = Error::Internal("the pipeline's compute thread stopped".into());
            self.shared.poison(e.clone());
            e
        })
    }
}

/// Everything a stream allocates before its store exists: the backend,
/// the staging buffers and the shard state.
struct Parts {
    v: Validated,
    backend: Box<dyn Backend>,
    selection: backend::Selection,
    staging: Vec<StagingBuffer>,
    /// One per pyramid level.
    assemblers: Vec<ShardAssembler>,
    pyramid: Option<Pyramid>,
}

impl Parts {
    fn prepare(mut v: Validated) -> Result<Parts> {
        let (backend, selection) = backend::select(&mut v)?;
        let buffer_bytes = (v.layout.epoch_bytes() * v.epochs_per_buffer) as usize;
        let max_chunk = crate::codec::max_chunk_bytes(v.config.codec, v.layout.tile_bytes());
        let assemblers = v
            .image
            .levels
            .iter()
            .enumerate()
            .map(|(k, l)| {
                ShardAssembler::new(l, v.config.index_location, max_chunk as u64)
                    .map(|a| a.for_level(k as u32))
            })
            .collect::<Result<_>>()?;
        let pyramid = Pyramid::new(&v)?;
        let staging = (0..v.staging_buffers)
            .map(|_| backend.alloc_staging(buffer_bytes))
            .collect::<Result<_>>()?;
        Ok(Parts {
            v,
            backend,
            selection,
            staging,
            assemblers,
            pyramid,
        })
    }

    /// Starts the pipeline's threads on `sink`.
    fn start(self, mut sink: Box<dyn ShardSink>) -> Result<Stream> {
        let Parts {
            v,
            backend,
            selection,
            staging,
            assemblers,
            pyramid,
        } = self;
        let copy_threads = copy_threads(selection.kind);
        let attributes = SharedAttributes::new(v.image.attributes.clone());
        let shared = Arc::new(Shared::new(selection, attributes));
        let poisoned = Arc::downgrade(&shared);
        sink.attach(&StreamHooks {
            poison: Arc::new(move |e| {
                if let Some(s) = poisoned.upgrade() {
                    s.poison(e)
                }
            }),
            uploads: shared.metrics.uploads.clone(),
            attributes: shared.attributes.clone(),
        });
        let buffer_bytes = (v.layout.epoch_bytes() * v.epochs_per_buffer) as usize;
        let n = staging.len();
        let (free_tx, free_rx) = mpsc::channel();
        for buf in staging {
            free_tx.send(buf).expect("receiver alive");
        }
        // Every staging buffer plus the finish message fits: sends never block.
        let (job_tx, job_rx) = mpsc::sync_channel(n + 1);
        let (del_tx, del_rx) = mpsc::sync_channel(1);
        let (spare_tx, spare_rx) = mpsc::channel();
        let (retired_tx, retired_rx) = mpsc::channel();
        let compute = ComputeThread {
            retired: retired_tx,
            shared: shared.clone(),
            backend,
            layout: v.layout.clone(),
            jobs: job_rx,
            free_staging: free_tx,
            deliveries: del_tx,
            spare_epochs: Arc::new(parking_lot::Mutex::new(spare_rx)),
            pyramid,
        };
        let delivery = DeliveryThread {
            shared: shared.clone(),
            layouts: v.image.levels.clone(),
            assemblers,
            sink,
            deliveries: del_rx,
            spare_epochs: spare_tx,
        };
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| Error::Internal(format!("starting thread {name}: {e}")))
        };
        let threads = vec![
            spawn("tz-compute", Box::new(move || compute.run()))?,
            spawn("tz-delivery", Box::new(move || delivery.run()))?,
        ];
        let copy_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(copy_threads)
            .thread_name(|i| format!("tz-copy-{i}"))
            .build()
            .map_err(|e| Error::Internal(format!("starting copy threads: {e}")))?;
        Ok(Stream {
            _retired: retired_rx,
            copy_pool,
            config: v,
            shared,
            staging: None,
            filled: 0,
            epoch: 0,
            bytes_in: 0,
            buffer_bytes,
            free_staging: free_rx,
            jobs: Some(job_tx),
            threads,
            finished: None,
            started: None,
        })
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
        self.shared.cancel.store(true, Relaxed);
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
