//! Counters every stage updates as it goes; read at any time without
//! stopping the stream.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The stages of the pipeline, in data order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The caller's copy into staging memory, inside `write`.
    Copy,
    /// Host to device copy (GPU).
    H2d,
    /// Row-major input into tiles.
    Scatter,
    /// Tile compression.
    Compress,
    /// Grouping compressed tiles by shard.
    Aggregate,
    /// Device to host copy (GPU).
    D2h,
    /// Shard assembly and the sink's calls.
    Sink,
}

impl Stage {
    pub const ALL: [Stage; 7] = [
        Stage::Copy,
        Stage::H2d,
        Stage::Scatter,
        Stage::Compress,
        Stage::Aggregate,
        Stage::D2h,
        Stage::Sink,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Stage::Copy => "copy",
            Stage::H2d => "h2d",
            Stage::Scatter => "scatter",
            Stage::Compress => "compress",
            Stage::Aggregate => "aggregate",
            Stage::D2h => "d2h",
            Stage::Sink => "sink",
        }
    }
}

/// Live counters of one stream.
#[derive(Debug, Default)]
pub struct Metrics {
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    shards: AtomicU64,
    epochs: AtomicU64,
    /// Nanoseconds per stage, summed over every thread that ran it (GPU
    /// stages: device time between CUDA events).
    stage_ns: [AtomicU64; 7],
    /// Staging memory the stream holds (see [`Snapshot::staging_bytes`]).
    staging: AtomicU64,
    /// The most it held at once.
    staging_peak: AtomicU64,
    /// Writes that found staging full (see [`Snapshot::busy_writes`]).
    busy_writes: AtomicU64,
    /// What an object store sink has sent (zero for other sinks).
    pub uploads: Arc<UploadCounters>,
}

/// An object store's uploads, counted by its own threads.
#[derive(Debug, Default)]
pub struct UploadCounters {
    /// Bytes of objects (shards, parts, `zarr.json`) the server accepted.
    bytes: AtomicU64,
    /// Objects complete (a multipart object counts once).
    objects: AtomicU64,
    /// Object uploads started and not yet complete or failed.
    in_flight: AtomicU64,
}

impl UploadCounters {
    pub fn started(&self) {
        self.in_flight.fetch_add(1, Relaxed);
    }
    /// A part or a whole object of `bytes` was accepted.
    pub fn add_bytes(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Relaxed);
    }
    /// Adds what `other` counted (a store's uploads before it joined a
    /// stream).
    pub fn absorb(&self, other: &UploadCounters) {
        self.bytes.fetch_add(other.bytes.load(Relaxed), Relaxed);
        self.objects.fetch_add(other.objects.load(Relaxed), Relaxed);
    }
    /// An upload ended: `complete` or failed.
    pub fn ended(&self, complete: bool) {
        self.in_flight.fetch_sub(1, Relaxed);
        if complete {
            self.objects.fetch_add(1, Relaxed);
        }
    }
}

impl Metrics {
    pub fn add_in(&self, n: u64) {
        self.bytes_in.fetch_add(n, Relaxed);
    }
    pub fn add_shard(&self, bytes: u64) {
        self.bytes_out.fetch_add(bytes, Relaxed);
        self.shards.fetch_add(1, Relaxed);
    }
    pub fn add_epoch(&self) {
        self.epochs.fetch_add(1, Relaxed);
    }
    pub fn add_time(&self, stage: Stage, d: Duration) {
        self.stage_ns[stage as usize].fetch_add(d.as_nanos() as u64, Relaxed);
    }
    /// A staging buffer of `bytes` came to the stream.
    pub fn staging_grew(&self, bytes: u64) {
        let now = self.staging.fetch_add(bytes, Relaxed).saturating_add(bytes);
        self.staging_peak.fetch_max(now, Relaxed);
    }
    /// A staging buffer of `bytes` left it (it stayed free too long).
    pub fn staging_shrank(&self, bytes: u64) {
        self.staging.fetch_sub(bytes, Relaxed);
    }
    /// A write found staging full and returned with less than it was
    /// given (see [`Snapshot::busy_writes`]).
    pub fn write_was_busy(&self) {
        self.busy_writes.fetch_add(1, Relaxed);
    }
    /// Runs `f` and counts its time under `stage`.
    pub fn time<T>(&self, stage: Stage, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        self.add_time(stage, t.elapsed());
        r
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            bytes_in: self.bytes_in.load(Relaxed),
            bytes_out: self.bytes_out.load(Relaxed),
            shards: self.shards.load(Relaxed),
            epochs: self.epochs.load(Relaxed),
            stage_seconds: std::array::from_fn(|i| self.stage_ns[i].load(Relaxed) as f64 * 1e-9),
            bytes_uploaded: self.uploads.bytes.load(Relaxed),
            objects_uploaded: self.uploads.objects.load(Relaxed),
            uploads_in_flight: self.uploads.in_flight.load(Relaxed),
            staging_bytes: self.staging.load(Relaxed),
            staging_peak_bytes: self.staging_peak.load(Relaxed),
            busy_writes: self.busy_writes.load(Relaxed),
        }
    }
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    /// Bytes taken by `write`.
    pub bytes_in: u64,
    /// Bytes emitted in shards, indexes included.
    pub bytes_out: u64,
    pub shards: u64,
    /// Epochs compressed.
    pub epochs: u64,
    /// Cumulative seconds per [`Stage`], indexed by `Stage as usize`.
    pub stage_seconds: [f64; 7],
    /// Object store sinks: bytes the server accepted, objects complete,
    /// uploads under way.
    pub bytes_uploaded: u64,
    pub objects_uploaded: u64,
    pub uploads_in_flight: u64,
    /// Staging memory the stream holds, host or page-locked: it grows
    /// while the writer outruns the pipeline and shrinks after a pause
    /// (see `staging_bytes` in the configuration guide); after the end,
    /// what it held at the end.
    pub staging_bytes: u64,
    /// The most staging memory the stream held at once: beside the
    /// configuration's `staging_bytes`, how close the stream came to it.
    pub staging_peak_bytes: u64,
    /// Writes that found staging memory full and returned having taken
    /// less than they were given: `try_write` (`tz_write`), `skip_to`
    /// (`tz_skip`) returning fewer bytes than asked (0 included),
    /// `reserve` (`tz_reserve`) returning an empty reservation, and
    /// `write_blocking` (`tz_write_all`) and `skip_blocking_to` returning
    /// at their timeout. Each is a moment the writer outran the pipeline;
    /// a waiting writer's waits within its timeout are not counted.
    pub busy_writes: u64,
}

impl Snapshot {
    pub fn seconds(&self, stage: Stage) -> f64 {
        self.stage_seconds[stage as usize]
    }
    /// Input bytes per output byte (0 before the first shard).
    pub fn compression_ratio(&self) -> f64 {
        if self.bytes_out == 0 {
            0.0
        } else {
            self.bytes_in as f64 / self.bytes_out as f64
        }
    }
}
