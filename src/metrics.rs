//! Counters every stage updates as it goes; read at any time without
//! stopping the stream.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
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
