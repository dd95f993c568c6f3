//! The filesystem Zarr v3 store: `zarr.json` at the root, one file per shard
//! under `c/` (default chunk key encoding with `/`); for an OME-Zarr image
//! the root is a group and level `k` the array under `k/`; a stream of
//! several arrays has each under its key (see [`crate::metadata`]).
//!
//! Every file is written under a temporary name and renamed into place, so a
//! reader (or a crash) never sees a shard or a `zarr.json` half written;
//! with `fsync` (the default) the file and its folder are flushed to the
//! disk before the shard counts as written. The store owns exactly what it
//! created: it holds a lock while the stream lives, `overwrite` removes only
//! an earlier store's own files, a failed create removes what it made, and a
//! store folder that vanishes or is replaced poisons the stream.

mod create;
mod files;
mod flusher;
mod folders;
mod lock;
mod ownership;
mod recover;
mod unbuffered;
mod writers;

pub use lock::LOCK_FILE;
pub use recover::{recover, recover_within, Recovery};
pub use unbuffered::files_written as unbuffered_files;

use super::images::Images;
use super::{ShardProgress, ShardSink, SharedAttributes, StallWatch, StreamHooks};
use crate::error::{Error, Result};
use crate::memory::try_reserve;
use crate::metadata::Document;
use crate::shard::Shard;
use files::{sync_folder, write_atomically, write_shard, ShardFiles};
use folders::StoreFolder;
use lock::StoreLock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use unbuffered::{Unbuffered, BUFFER_BYTES as UNBUFFERED_BUFFER_BYTES};
use writers::Writers;

/// fsync calls made by every store of this process: how a test sees that
/// durability is asked of the disk (or not) without tracing system calls.
static SYNC_CALLS: AtomicU64 = AtomicU64::new(0);

/// How long a file's replacement waits for a reader that holds the old one
/// (Windows; see [`crate::platform::replace_file`]): shards, and `zarr.json` at
/// create and at the end.
const PATIENCE: Duration = Duration::from_secs(2);
/// The same for a `zarr.json` update while streaming, which a later move
/// tries again: a reader holds the file for the moment it reads it, and
/// the sink thread must not stall behind one that holds it longer.
const STREAMING_PATIENCE: Duration = Duration::from_millis(100);

/// The least time between two moves of a growing array's extent while
/// streaming. Each move rewrites `zarr.json`, after waiting for the rows'
/// shard files to be flushed where `fsync` asks; a stream of small shard
/// rows (one 2048 x 2048 frame of 128 x 128 tiles per row, 250 rows a
/// second on 16 cores) kept its delivery thread busy with that nearly all
/// its run. A reader sees a row in `zarr.json` at most this much later.
const EXTENT_INTERVAL: Duration = Duration::from_millis(100);

/// Host memory a folder store holds beyond its shards: the buffers its
/// threads (one per core up to `writers::THREADS`, and the delivery
/// thread) copy shard files through to write them around the page cache.
/// None for an object store or one whose shard files go through the page
/// cache.
pub fn buffer_bytes(store: &crate::config::Store) -> u64 {
    if store.url.is_some() || !store.shard_files_around_page_cache() {
        return 0;
    }
    let buffer = (UNBUFFERED_BUFFER_BYTES + crate::platform::UNBUFFERED_ALIGN) as u64;
    (writers::threads() as u64 + 1) * buffer
}

#[doc(hidden)]
pub fn sync_calls() -> u64 {
    SYNC_CALLS.load(Ordering::Relaxed)
}

pub struct FsStore {
    /// Where the store is, shared with its flush threads.
    folder: Arc<StoreFolder>,
    /// How it writes shard files: flushed (with threads of its own for
    /// that) or not, around the page cache or through it.
    files: ShardFiles,
    /// Writes the shards of a row on threads of its own.
    writers: Writers,
    /// Each call into the store and each answer of its disk, for the
    /// stream to give up on a disk that stalls.
    watch: Arc<StallWatch>,
    /// The arrays, and each level's dimension-0 extent last written to
    /// its `zarr.json`.
    images: Images,
    /// The user's attributes, and the replacement last written.
    attributes: Arc<SharedAttributes>,
    attributes_seen: u64,
    /// The folder of the last shard written: the next shard of a row
    /// usually shares it, so it need not be created again.
    last_folder: PathBuf,
    /// How long the next `zarr.json` replacement may wait for a reader:
    /// none while an earlier update waits for one to let go.
    metadata_patience: Duration,
    /// Extents reached since the last move, the latest per array and
    /// level: (array, level, planes).
    extents_due: Vec<(u32, u32, u64)>,
    /// When the extents last moved (none yet: the first row's moves at
    /// once).
    extents_moved: Option<Instant>,
    /// Released last, once everything above is done (see `drop`).
    lock: Option<StoreLock>,
}

impl Drop for FsStore {
    /// The flush threads end and the lock goes inside a call: on a disk
    /// that stalls they wait on it, and the stream must see that.
    fn drop(&mut self) {
        let _call = self.watch.call();
        self.files.flusher = None;
        self.lock = None;
    }
}

impl FsStore {
    pub fn root(&self) -> &Path {
        &self.folder.root
    }

    /// Writes `doc` under the store folder (creating its level folder).
    fn write_document(&mut self, doc: &Document) -> Result<()> {
        self.folder.check()?;
        let path = self.folder.root.join(&doc.key);
        if let Some(folder) = path.parent() {
            self.create_shard_folder(folder)?;
        }
        write_atomically(
            &path,
            &[doc.json.as_bytes()],
            self.files.fsync,
            self.metadata_patience,
            &self.watch,
        )
        .map_err(|e| self.folder.check().err().unwrap_or(e))
    }

    /// Rewrites level `level`'s `zarr.json` for `planes` planes (when that
    /// changed), and the attributes' document when they were replaced.
    ///
    /// While streaming (`Update::WhenFree`) a `zarr.json` that a reader
    /// holds open beyond [`STREAMING_PATIENCE`] (Windows, a reader without
    /// delete sharing: see [`crate::platform::replace_file`]) keeps its old extent
    /// and is tried again, once, at each next move; at the end it must be
    /// replaced within [`PATIENCE`].
    fn update_metadata(&mut self, array: u32, level: u32, planes: u64, when: Update) -> Result<()> {
        if planes != self.images.planes(array, level) {
            let attrs = self.attributes.get();
            let doc = self.images.level_document(array, level, planes, &attrs);
            self.metadata_patience = match (when, self.metadata_patience) {
                (Update::Now, _) => PATIENCE,
                (Update::WhenFree, Duration::ZERO) => Duration::ZERO,
                (Update::WhenFree, _) => STREAMING_PATIENCE,
            };
            match self.write_document(&doc) {
                Err(Error::Io {
                    kind: std::io::ErrorKind::ResourceBusy,
                    ..
                }) if when == Update::WhenFree => {
                    self.metadata_patience = Duration::ZERO;
                    return Ok(());
                }
                written => written?,
            }
            self.metadata_patience = PATIENCE;
            self.images.set_planes(array, level, planes);
        }
        let attributes = self.attributes.changed_since(&mut self.attributes_seen);
        if let Some(attrs) = attributes {
            let doc = self.images.attributes_document(&attrs);
            self.write_document(&doc)?;
        }
        Ok(())
    }

    /// Moves the extents due, once their rows' shards are on the disk. An
    /// extent whose `zarr.json` a reader held stays due, and the next row
    /// or tick tries again at once: waiting out the interval after a
    /// refusal would leave a reader that holds the file most of the time
    /// (Windows) an extent that never moves.
    fn move_extents(&mut self) -> Result<()> {
        let _call = self.watch.call();
        self.wait_for_shards()?;
        let mut due = std::mem::take(&mut self.extents_due);
        for &(array, level, planes) in &due {
            self.update_metadata(array, level, planes, Update::WhenFree)?;
        }
        due.retain(|&(array, level, planes)| self.images.planes(array, level) != planes);
        self.extents_moved = due.is_empty().then(Instant::now);
        self.extents_due = due;
        Ok(())
    }

    /// Waits until the shards handed to the flush threads are on the
    /// disk, their folders flushed; a failure because the store folder
    /// went away meanwhile says so.
    fn wait_for_shards(&self) -> Result<()> {
        if let Some(flusher) = &self.files.flusher {
            flusher
                .wait()
                .map_err(|e| self.folder.check().err().unwrap_or(e))?;
        }
        self.folder.check()
    }

    /// The path of `shard`'s file.
    fn shard_key(&self, shard: &Shard<'_>) -> PathBuf {
        let mut key = self
            .folder
            .root
            .join(self.images.chunks_key(shard.array, shard.level));
        let (file, dirs) = shard.coord.split_last().expect("rank >= 1");
        for c in dirs {
            key.push(c.to_string());
        }
        key.push(file.to_string());
        key
    }

    /// After shards were written at their keys: a failure because the
    /// folder went away meanwhile says so, and the shards that landed in a
    /// folder put in the store's place are taken back out of it.
    fn after_writing<'k>(
        &self,
        written: impl Iterator<Item = (&'k PathBuf, &'k Result<()>)>,
    ) -> Result<()> {
        let landed = written
            .filter(|(_, w)| w.is_ok())
            .map(|(key, _)| key.as_path());
        self.folder.check_or_take_back(landed)
    }
}

impl ShardSink for FsStore {
    fn emit(&mut self, shard: &Shard<'_>) -> Result<()> {
        let _call = self.watch.call();
        self.folder.check()?;
        let key = self.shard_key(shard);
        let written = self
            .create_folder_of(&key)
            .and_then(|()| write_shard(&key, shard, &self.files));
        self.after_writing(std::iter::once((&key, &written)))?;
        written
    }

    fn emit_rows(&mut self, shards: &[Shard<'_>], progress: &dyn ShardProgress) -> Result<()> {
        let _call = self.watch.call();
        self.folder.check()?;
        // The keys and folders here (the shards of a row share a few
        // folders), the files on the store's threads.
        let mut keys = Vec::new();
        try_reserve(&mut keys, shards.len(), "a shard row's paths")?;
        for shard in shards {
            let key = self.shard_key(shard);
            self.create_folder_of(&key)
                .map_err(|e| self.folder.check().err().unwrap_or(e))?;
            keys.push(key);
        }
        let files = &self.files;
        let write = |i: usize| -> Result<()> {
            progress.proceed()?;
            write_shard(&keys[i], &shards[i], files)?;
            files.watch.answered();
            progress.written(&shards[i]);
            Ok(())
        };
        // A row of one shard starts no threads.
        let on_threads = (shards.len() > 1)
            .then(|| self.writers.run(shards.len(), write))
            .flatten();
        let written = match on_threads {
            Some(written) => written,
            // No threads: one after another, up to the first failure.
            None => {
                let mut written = Vec::new();
                try_reserve(&mut written, shards.len(), "a shard row's results")?;
                for i in 0..shards.len() {
                    written.push(write(i));
                    if written[i].is_err() {
                        break;
                    }
                }
                written
            }
        };
        self.after_writing(keys.iter().zip(&written))?;
        written.into_iter().collect()
    }

    fn attach(&mut self, hooks: &StreamHooks) {
        self.attributes = hooks.attributes.clone();
    }

    fn stall_watch(&self) -> Option<Arc<StallWatch>> {
        Some(self.watch.clone())
    }

    fn documents(&mut self, docs: Vec<Document>) -> Result<()> {
        let _call = self.watch.call();
        // After the shards before them, as every document.
        self.wait_for_shards()?;
        docs.iter().try_for_each(|d| self.write_document(d))
    }

    /// Moves a growing array's extent at most every `EXTENT_INTERVAL`:
    /// a row in between is covered by the next move (a later row's or
    /// [`ShardSink::tick`]'s), the end or [`ShardSink::abandon`].
    fn progress(&mut self, array: u32, level: u32, planes: u64) -> Result<()> {
        if !self.images.is_unbounded(array, level) {
            return Ok(());
        }
        let due = self
            .extents_due
            .iter_mut()
            .find(|d| (d.0, d.1) == (array, level));
        match due {
            Some(due) => due.2 = planes,
            None => {
                try_reserve(&mut self.extents_due, 1, "an extent")?;
                self.extents_due.push((array, level, planes));
            }
        }
        if self
            .extents_moved
            .is_some_and(|t| t.elapsed() < EXTENT_INTERVAL)
        {
            return Ok(());
        }
        self.move_extents()
    }

    /// The rows put off, once the interval has passed, whether more rows
    /// come or not.
    fn tick(&mut self) -> Result<()> {
        if self.extents_due.is_empty()
            || self
                .extents_moved
                .is_some_and(|t| t.elapsed() < EXTENT_INTERVAL)
        {
            return Ok(());
        }
        self.move_extents()
    }

    /// A stream given up keeps the extent of the rows it emitted: those
    /// not covered yet are.
    fn abandon(&mut self) {
        if !self.extents_due.is_empty() {
            let _ = self.move_extents();
        }
    }

    fn finish(&mut self, planes: &[Vec<u64>]) -> Result<()> {
        let _call = self.watch.call();
        self.extents_due.clear(); // the final extents cover them
        self.wait_for_shards()?;
        for (a, levels) in planes.iter().enumerate() {
            for (k, &p) in levels.iter().enumerate() {
                let (a, k) = (a as u32, k as u32);
                let p = self.images.final_planes(a, k, p);
                self.update_metadata(a, k, p, Update::Now)?;
            }
        }
        self.folder.check()
    }
}

/// Whether a `zarr.json` update may wait for a reader to let go of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Update {
    /// While streaming: a later row tries again.
    WhenFree,
    /// At the end: it must land now.
    Now,
}

#[cfg(test)]
mod tests;
