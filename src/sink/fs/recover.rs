//! Recovery of a store whose stream was killed (kill -9, power cut): the
//! temporary `*.partial` files are removed, and every array that grows
//! along an unbounded dimension 0 has its extent in `zarr.json` moved up to
//! cover every complete shard row on disk (the stream updates it only after
//! each row, so a crash can leave whole rows past the extent). A store of
//! several arrays (an OME-Zarr image's levels, the images of a collection
//! or a plate) is recovered whole from its root; a folder inside a store is
//! recovered alone, but never while a stream holds the store around it.

use super::files::write_atomically;
use super::lock::{StoreLock, LOCK_FILE};
use super::ownership::remove_partials;
use super::PATIENCE;
use crate::error::{Error, Result};
use crate::sink::stall::{on_own_thread, Task};
use crate::sink::StallWatch;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What [`recover`] did; for a store of several arrays, the sums over
/// its arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recovery {
    /// `*.partial` files removed.
    pub partial_files_removed: u64,
    /// The extent along dimension 0 before and after.
    pub planes_before: u64,
    pub planes_after: u64,
    /// Shard files in rows past the complete ones, left as they are (their
    /// row stays hidden: some of its shards never reached the disk).
    pub shards_beyond: u64,
    /// The arrays found and recovered.
    pub arrays: u64,
}

fn invalid(path: &Path, why: &str) -> Error {
    Error::InvalidArgument(format!(
        "{} is not a store this library can recover: {why}",
        path.display()
    ))
}

/// Recovers the store at `root` (see the module documentation): an array,
/// or a group and every array beneath it. Refused while a stream holds the
/// store or one around it. The disk's work runs on a thread of its own: on
/// a disk that answers nothing for the default `store.timeout_s` (60 s),
/// the call returns an error and the recovery goes on once the disk
/// answers.
pub fn recover(root: &Path) -> Result<Recovery> {
    recover_within(root, None)
}

/// [`recover`], giving up on a disk that answers nothing for `bound` (a
/// store's `store.timeout_s`; `None`: the default).
pub fn recover_within(root: &Path, bound: Option<Duration>) -> Result<Recovery> {
    let store = root.to_path_buf();
    let watch = Arc::new(match bound {
        Some(bound) => StallWatch::new(bound, store),
        None => StallWatch::with_default_bound(store),
    });
    let (root, theirs) = (root.to_path_buf(), watch.clone());
    let task = Task {
        thread: "tz-store-repair",
        what: "recovering the store",
        outcome: "the call gave up on the disk; the recovery goes on once the disk answers \
                  (call tz_recover again then to see what it did)",
    };
    on_own_thread(&watch, task, move || recover_here(&root, &theirs), |_| {})
}

/// [`recover`] on the calling thread; each file found or removed tells
/// `watch` that the disk answers.
fn recover_here(root: &Path, watch: &StallWatch) -> Result<Recovery> {
    let doc = read_node(root)?;
    let _around = lock_stores_around(root)?;
    let _lock = StoreLock::acquire(root)?;
    let mut done = Recovery {
        partial_files_removed: remove_partials(root, watch)?,
        ..Recovery::default()
    };
    match node_type(&doc) {
        Some("array") => {
            let geometry = Geometry::read(&doc).ok_or_else(|| {
                invalid(root, "zarr.json is not an array of this library's layout")
            })?;
            recover_array(root, doc, geometry, watch, &mut done)?;
        }
        Some("group") => recover_group(root, watch, &mut done)?,
        _ => return Err(invalid(root, "zarr.json is neither an array nor a group")),
    }
    Ok(done)
}

/// `dir`'s `zarr.json`, parsed.
fn read_node(dir: &Path) -> Result<Value> {
    let path = dir.join("zarr.json");
    let text = std::fs::read(&path).map_err(|e| Error::io("reading", &path, e))?;
    serde_json::from_slice(&text).map_err(|e| invalid(dir, &format!("{}: {e}", path.display())))
}

fn node_type(doc: &Value) -> Option<&str> {
    doc.get("node_type")?.as_str()
}

/// The locks of the stores that hold `dir` (its parent folders up to the
/// last one with a `zarr.json`) where a stream left its lock file: a
/// stream on such a store writes into `dir` too, so its lock refuses the
/// recovery, naming it.
fn lock_stores_around(dir: &Path) -> Result<Vec<StoreLock>> {
    let mut held = Vec::new();
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io("resolving", dir, e))?;
    let mut around = dir.parent();
    while let Some(store) = around.filter(|d| d.join("zarr.json").is_file()) {
        if store.join(LOCK_FILE).is_file() {
            held.push(StoreLock::acquire(store)?);
        }
        around = store.parent();
    }
    Ok(held)
}

/// Every array beneath the group at `dir`: its sub-folders with a
/// `zarr.json`, groups descended into, in name order.
fn recover_group(dir: &Path, watch: &StallWatch, done: &mut Recovery) -> Result<()> {
    for sub in node_folders(dir)? {
        let doc = read_node(&sub)?;
        watch.answered();
        match node_type(&doc) {
            Some("group") => recover_group(&sub, watch, done)?,
            // An array of another layout (another writer's) has no shard
            // rows of this library's to show: left as it is.
            Some("array") => match Geometry::read(&doc) {
                Some(geometry) => recover_array(&sub, doc, geometry, watch, done)?,
                None => continue,
            },
            _ => return Err(invalid(&sub, "zarr.json is neither an array nor a group")),
        }
    }
    Ok(())
}

/// The sub-folders of `dir` that hold a `zarr.json` (symbolic links not
/// followed), sorted.
fn node_folders(dir: &Path) -> Result<Vec<PathBuf>> {
    let read = std::fs::read_dir(dir).map_err(|e| Error::io("reading", dir, e))?;
    let mut out = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| Error::io("reading", dir, e))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && entry.path().join("zarr.json").is_file() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// Moves the extent of the array at `dir` up to its complete shard rows.
fn recover_array(
    dir: &Path,
    mut doc: Value,
    geometry: Geometry,
    watch: &StallWatch,
    done: &mut Recovery,
) -> Result<()> {
    let before = geometry.shape[0];
    let (rows, beyond) = geometry.complete_rows(dir, watch);
    let complete = rows.saturating_mul(geometry.shard[0]);
    // A stream mid-way always leaves a whole number of shard rows as the
    // extent; any other extent is final (a bounded array, or a flushed one).
    let after = if before.is_multiple_of(geometry.shard[0]) && complete > before {
        complete
    } else {
        before
    };
    if after != before {
        doc["shape"][0] = after.into();
        let body = serde_json::to_string_pretty(&doc).expect("a document serializes") + "\n";
        let meta_path = dir.join("zarr.json");
        write_atomically(&meta_path, &[body.as_bytes()], true, PATIENCE, watch)?;
    }
    done.planes_before += before;
    done.planes_after += after;
    done.shards_beyond += beyond;
    done.arrays += 1;
    Ok(())
}

/// The array's shape and shard shape, as `zarr.json` records them.
struct Geometry {
    shape: Vec<u64>,
    shard: Vec<u64>,
}

impl Geometry {
    fn read(doc: &Value) -> Option<Geometry> {
        let list =
            |v: &Value| -> Option<Vec<u64>> { v.as_array()?.iter().map(Value::as_u64).collect() };
        if node_type(doc)? != "array" {
            return None;
        }
        let shape = list(doc.get("shape")?)?;
        let shard = list(doc.pointer("/chunk_grid/configuration/chunk_shape")?)?;
        let ok = !shape.is_empty() && shape.len() == shard.len() && shard.iter().all(|&s| s > 0);
        ok.then_some(Geometry { shape, shard })
    }

    /// Shard rows 0..n along dimension 0 with every shard file on disk, and
    /// how many shard files lie in rows past those.
    fn complete_rows(&self, root: &Path, watch: &StallWatch) -> (u64, u64) {
        let inner: Vec<u64> = (1..self.shape.len())
            .map(|d| self.shape[d].div_ceil(self.shard[d]))
            .collect();
        let per_row: u64 = inner.iter().product();
        let mut rows = 0;
        while per_row > 0 && self.count_row(root, rows, &inner, watch) == per_row {
            rows += 1;
        }
        let mut beyond = 0;
        let mut row = rows;
        loop {
            let n = self.count_row(root, row, &inner, watch);
            // Rows arrive in order: a gap ends what a crash can have left.
            if n == 0 {
                break;
            }
            beyond += n;
            row += 1;
        }
        (rows, beyond)
    }

    /// Shard files of shard row `row` present on disk.
    fn count_row(&self, root: &Path, row: u64, inner: &[u64], watch: &StallWatch) -> u64 {
        let per_row: u64 = inner.iter().product();
        let mut coord = vec![0u64; inner.len()];
        let mut present = 0;
        for k in 0..per_row {
            crate::layout::unravel(k, inner, &mut coord);
            let mut key = root.join("c");
            key.push(row.to_string());
            for c in &coord {
                key.push(c.to_string());
            }
            if key.is_file() {
                present += 1;
            }
            watch.answered();
        }
        present
    }
}
