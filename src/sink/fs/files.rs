//! Writing one file of a store: through a temporary file beside it,
//! renamed into place, flushed to the disk where asked.

use super::flusher::Flusher;
use super::unbuffered::Unbuffered;
use super::{PATIENCE, SYNC_CALLS};
use crate::error::{Error, Result};
use crate::platform;
use crate::shard::Shard;
use crate::sink::StallWatch;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Writes `shard` at `key` (its folder exists): through the flush threads
/// with `fsync`, else renamed into place at once; a reader's hold on the
/// old file that refuses the rename is an answer of the disk to the
/// store's watch.
pub fn write_shard(key: &Path, shard: &Shard<'_>, store: &ShardFiles) -> Result<()> {
    let (file, tmp) = write_temporary(key, &shard.parts(), store.unbuffered.as_ref())?;
    match &store.flusher {
        Some(flusher) => flusher.submit(file, tmp, key.to_path_buf()),
        None => put_in_place(file, &tmp, key, store.fsync, PATIENCE, &store.watch),
    }
}

/// How a store writes its shard files; a field of its own, apart from the
/// threads that write a row's shards, so that those threads can borrow it.
pub struct ShardFiles {
    /// With `fsync`: the threads that flush and rename them.
    pub flusher: Option<Flusher>,
    pub fsync: bool,
    /// Around the page cache, where the store does so.
    pub unbuffered: Option<Unbuffered>,
    /// The store's watch.
    pub watch: Arc<StallWatch>,
}

/// Writes `parts` to `path` through a temporary file renamed into place;
/// with `fsync`, the file's bytes and then its folder's entry reach the
/// disk before this returns. `watch` as in [`put_in_place`].
pub fn write_atomically(
    path: &Path,
    parts: &[&[u8]],
    fsync: bool,
    patience: Duration,
    watch: &StallWatch,
) -> Result<()> {
    let (f, tmp) = write_temporary(path, parts, None)?;
    put_in_place(f, &tmp, path, fsync, patience, watch)?;
    match path.parent() {
        Some(folder) if fsync => sync_folder(folder),
        _ => Ok(()),
    }
}

/// Renames the temporary file `tmp` (open as `file`) to `path`, with
/// `fsync` after flushing its bytes to the disk, waiting up to `patience`
/// for a reader that holds `path` (see [`platform::replace_file`]; each
/// refusal is an answer of the disk to `watch`); on failure the temporary
/// file is removed.
pub fn put_in_place(
    file: fs::File,
    tmp: &Path,
    path: &Path,
    fsync: bool,
    patience: Duration,
    watch: &StallWatch,
) -> Result<()> {
    let synced = if fsync {
        SYNC_CALLS.fetch_add(1, Ordering::Relaxed);
        file.sync_all()
    } else {
        Ok(())
    };
    drop(file);
    let placed = synced
        .map_err(|e| Error::io("writing", path, e))
        .and_then(|()| {
            platform::replace_file(tmp, path, patience, &|| watch.answered())
                .map_err(|e| Error::io("renaming into place", path, e))
        });
    if placed.is_err() {
        let _ = fs::remove_file(tmp);
    }
    placed
}

/// Writes `parts` to a temporary file beside `path` (`path.partial`),
/// around the page cache where `unbuffered` says so, removed again on
/// failure; the open file and its path.
pub fn write_temporary(
    path: &Path,
    parts: &[&[u8]],
    unbuffered: Option<&Unbuffered>,
) -> Result<(fs::File, PathBuf)> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<fs::File> {
        if let Some(f) = unbuffered.map_or(Ok(None), |u| u.write(&tmp, parts))? {
            return Ok(f);
        }
        let mut f = fs::File::create(&tmp)?;
        for p in parts {
            f.write_all(p)?;
        }
        Ok(f)
    };
    match write() {
        Ok(f) => Ok((f, tmp)),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(Error::io("writing", path, e))
        }
    }
}

/// Flushes a folder's entries (a rename or a new file in it) to the disk.
pub fn sync_folder(folder: &Path) -> Result<()> {
    SYNC_CALLS.fetch_add(1, Ordering::Relaxed);
    platform::sync_folder(folder).map_err(|e| Error::io("syncing folder", folder, e))
}
