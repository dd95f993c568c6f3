//! Where complete shards go: the [`ShardSink`] trait, the filesystem Zarr v3
//! store, a sink that discards (benchmarks), and a fan-out.

mod fs;
mod zarr_json;

#[doc(hidden)]
pub use fs::sync_calls as fs_sync_calls;
pub use fs::{recover, FsStore, Recovery, LOCK_FILE};
pub use zarr_json::zarr_json;

use crate::error::Result;
use crate::shard::Shard;

/// Receives complete shards, one call at a time, in completion order, on a
/// library thread.
pub trait ShardSink: Send {
    /// Takes one complete shard; the bytes are borrowed for this call only.
    fn emit(&mut self, shard: &Shard<'_>) -> Result<()>;

    /// Every plane along dimension 0 below `planes` now lies in emitted
    /// shards (called after each complete shard row).
    fn progress(&mut self, _planes: u64) -> Result<()> {
        Ok(())
    }

    /// The stream is complete: `planes` planes were written along dimension 0.
    fn finish(&mut self, _planes: u64) -> Result<()> {
        Ok(())
    }
}

/// Drops every shard: measures the pipeline without the disk.
#[derive(Debug, Default)]
pub struct Discard;

impl ShardSink for Discard {
    fn emit(&mut self, _shard: &Shard<'_>) -> Result<()> {
        Ok(())
    }
}

/// Hands every call to each sink in turn (a callback and a store, say).
pub struct Tee(pub Vec<Box<dyn ShardSink>>);

impl ShardSink for Tee {
    fn emit(&mut self, shard: &Shard<'_>) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.emit(shard))
    }
    fn progress(&mut self, planes: u64) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.progress(planes))
    }
    fn finish(&mut self, planes: u64) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.finish(planes))
    }
}

impl<F> ShardSink for F
where
    F: FnMut(&Shard<'_>) -> Result<()> + Send,
{
    fn emit(&mut self, shard: &Shard<'_>) -> Result<()> {
        self(shard)
    }
}
