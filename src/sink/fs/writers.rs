//! The shards of a row written on several threads at once.
//!
//! Writing a shard file copies its bytes into the page cache at a few GB/s
//! per thread, and with a fast codec that one thread bounded the stream: a
//! GPU stream of cam-32 at zstd on an H100 machine kept the thread that
//! writes shards busy 95% of its run (4.4 GB of shards in 1.68 s), and so
//! did the CPU backend's blosc-lz4 on 16 cores. The shards of a row are
//! independent files, so a folder store writes them on a few threads of
//! its own while the thread that delivers them waits (their bytes are
//! borrowed for that call only). The threads start with the first row of
//! several shards: a stream that never writes one starts none.

use crate::error::Result;
use rayon::prelude::*;

/// The most threads a store writes on: a cam-32 shard row is 16 files.
pub(super) const THREADS: usize = 8;

#[derive(Default)]
pub struct Writers {
    /// None until the first row; then None inside on one core or where
    /// the threads could not start (rows are written on the calling
    /// thread, as they were before).
    pool: Option<Option<rayon::ThreadPool>>,
}

impl Writers {
    /// Runs `write(i)` for every `i` below `n` on the store's threads,
    /// and returns each one's result; `None` without them.
    pub fn run<F>(&mut self, n: usize, write: F) -> Option<Vec<Result<()>>>
    where
        F: Fn(usize) -> Result<()> + Sync,
    {
        let pool = self.pool.get_or_insert_with(start).as_ref()?;
        Some(pool.install(|| (0..n).into_par_iter().map(&write).collect()))
    }
}

/// Threads a store writes a row's shards on, on this machine: one per
/// core up to [`THREADS`], none on one core.
pub(super) fn threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match cores.min(THREADS) {
        0 | 1 => 0,
        n => n,
    }
}

fn start() -> Option<rayon::ThreadPool> {
    let threads = threads();
    if threads == 0 {
        return None;
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tz-write-{i}"))
        .build()
        .ok()
}
