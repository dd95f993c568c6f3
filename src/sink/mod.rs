//! Where complete shards go: the [`ShardSink`] trait, the filesystem Zarr v3
//! store, the object store (S3 and compatible), a sink that discards
//! (benchmarks), and a fan-out.

mod attributes;
mod fs;
mod images;
mod object;
mod stall;

/// Whether a folder store in this folder writes its shard files around
/// the page cache (unless asked not to).
pub use crate::platform::unbuffered_writes_suit;
pub use attributes::SharedAttributes;
pub use fs::buffer_bytes as folder_store_buffer_bytes;
#[doc(hidden)]
pub use fs::sync_calls as fs_sync_calls;
#[doc(hidden)]
pub use fs::unbuffered_files as fs_unbuffered_files;
pub use fs::{recover, recover_within, FsStore, Recovery, LOCK_FILE};
pub use object::S3Store;
pub use stall::StallWatch;

use crate::error::{Error, Result};
use crate::metadata::Document;
use crate::metrics::UploadCounters;
use crate::shard::Shard;
use std::sync::Arc;

/// What a sink may use of the stream it serves: a sink whose work goes on
/// after `emit` returns (uploads) reports a failure and its counters here.
#[derive(Clone)]
pub struct StreamHooks {
    /// Poisons the stream (the first failure wins).
    pub poison: Arc<dyn Fn(Error) + Send + Sync>,
    /// Adds to the message of the failure that poisoned the stream (what
    /// else it cost, found later: shards lost with it).
    pub note: Arc<dyn Fn(&str) + Send + Sync>,
    pub uploads: Arc<UploadCounters>,
    /// The user's attributes, replaceable while the stream runs.
    pub attributes: Arc<SharedAttributes>,
}

/// What the pipeline asks around each shard of a row that a sink writes,
/// on whichever thread writes it.
pub trait ShardProgress: Sync {
    /// Before each shard: an error (the stream is being destroyed) stops
    /// the row there, and the sink returns it.
    fn proceed(&self) -> Result<()>;
    /// After each shard is written.
    fn written(&self, shard: &Shard<'_>);
}

/// `store.timeout_s` when the configuration does not give it: how long a
/// store waits on its server, or on its disk, for an answer.
pub const DEFAULT_TIMEOUT_S: u64 = 60;

/// How often the delivery thread calls [`ShardSink::tick`], epochs coming
/// or not.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// Receives complete shards, one call at a time, in completion order, on a
/// library thread.
pub trait ShardSink: Send {
    /// Takes one complete shard; the bytes are borrowed for this call only.
    fn emit(&mut self, shard: &Shard<'_>) -> Result<()>;

    /// Takes the complete shards of one row, or of several rows in order
    /// (rows that epochs waiting together made whole: see
    /// [`crate::shard::RowBatch`]), which are independent of each other;
    /// the bytes are borrowed for this call only. `progress` is
    /// asked before and told after each shard. The default emits them one
    /// after another and stops at the first error; a sink that writes
    /// several at once (a folder store) does so here.
    fn emit_rows(&mut self, shards: &[Shard<'_>], progress: &dyn ShardProgress) -> Result<()> {
        for shard in shards {
            progress.proceed()?;
            self.emit(shard)?;
            progress.written(shard);
        }
        Ok(())
    }

    /// Every plane along dimension 0 of array `array`'s level `level`
    /// below `planes` now lies in emitted shards (called after each
    /// complete shard row).
    fn progress(&mut self, _array: u32, _level: u32, _planes: u64) -> Result<()> {
        Ok(())
    }

    /// Called every [`TICK`] or so while the stream lives: what the sink
    /// put off (a folder store's extent, which moves at most every so
    /// often) is done once due, whether more rows come or not.
    fn tick(&mut self) -> Result<()> {
        Ok(())
    }

    /// The stream is complete: array `a`'s level `k` holds `planes[a][k]`
    /// planes along dimension 0. Returns once everything the sink was
    /// given is stored.
    fn finish(&mut self, _planes: &[Vec<u64>]) -> Result<()> {
        Ok(())
    }

    /// Writes `docs` beside the shards (per-frame metadata: its chunks and
    /// its array's `zarr.json`), after every shard emitted so far. Only a
    /// store keeps them: a stream with per-frame metadata needs one.
    fn documents(&mut self, _docs: Vec<Document>) -> Result<()> {
        Ok(())
    }

    /// Called once before the first shard, with the stream's hooks.
    fn attach(&mut self, _hooks: &StreamHooks) {}

    /// The stream failed or is being destroyed: no more shards come. Ends
    /// what is under way within the sink's bounds and reports what it cost
    /// through the hooks before returning.
    fn abandon(&mut self) {}

    /// Something is left that the sink may still finish later (aborting
    /// uploads on a server that is away): then it is kept until the stream
    /// is destroyed, and tries once more when dropped.
    fn has_work_left(&self) -> bool {
        false
    }

    /// A store that waits on a disk: how the stream sees whether the disk
    /// still answers, so that its flush and destroy give up on one that
    /// stalls (see [`StallWatch`]). A sink whose every wait has a bound of
    /// its own (an object store), or that runs the caller's code, has none.
    fn stall_watch(&self) -> Option<Arc<StallWatch>> {
        None
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
    /// The row to each sink in turn (a store among them writes it on its
    /// threads); the last one's shards are the ones counted.
    fn emit_rows(&mut self, shards: &[Shard<'_>], progress: &dyn ShardProgress) -> Result<()> {
        let Some((last, first)) = self.0.split_last_mut() else {
            return Ok(());
        };
        for sink in first {
            sink.emit_rows(shards, &Uncounted(progress))?;
        }
        last.emit_rows(shards, progress)
    }
    fn progress(&mut self, array: u32, level: u32, planes: u64) -> Result<()> {
        self.0
            .iter_mut()
            .try_for_each(|s| s.progress(array, level, planes))
    }
    fn tick(&mut self) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.tick())
    }
    fn finish(&mut self, planes: &[Vec<u64>]) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.finish(planes))
    }
    fn documents(&mut self, docs: Vec<Document>) -> Result<()> {
        self.0
            .iter_mut()
            .try_for_each(|s| s.documents(docs.clone()))
    }
    fn attach(&mut self, hooks: &StreamHooks) {
        self.0.iter_mut().for_each(|s| s.attach(hooks))
    }
    fn abandon(&mut self) {
        self.0.iter_mut().for_each(|s| s.abandon())
    }
    fn has_work_left(&self) -> bool {
        self.0.iter().any(|s| s.has_work_left())
    }
    fn stall_watch(&self) -> Option<Arc<StallWatch>> {
        self.0.iter().find_map(|s| s.stall_watch())
    }
}

/// Asks as `0` does before each shard, and counts nothing.
struct Uncounted<'a>(&'a dyn ShardProgress);

impl ShardProgress for Uncounted<'_> {
    fn proceed(&self) -> Result<()> {
        self.0.proceed()
    }
    fn written(&self, _shard: &Shard<'_>) {}
}

impl<F> ShardSink for F
where
    F: FnMut(&Shard<'_>) -> Result<()> + Send,
{
    fn emit(&mut self, shard: &Shard<'_>) -> Result<()> {
        self(shard)
    }
}
