//! Recovery of a store whose stream was killed (kill -9, power cut): the
//! temporary `*.partial` files are removed, and when the array grows along
//! an unbounded dimension 0, its extent in `zarr.json` is moved up to cover
//! every complete shard row on disk (the stream updates it only after each
//! row, so a crash can leave whole rows past the extent).

use super::files::write_atomically;
use super::lock::StoreLock;
use super::ownership::remove_partials;
use super::PATIENCE;
use crate::error::{Error, Result};
use crate::sink::stall::{on_own_thread, Task};
use crate::sink::StallWatch;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// What [`recover`] did.
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
}

fn invalid(path: &Path, why: &str) -> Error {
    Error::InvalidArgument(format!(
        "{} is not a store this library can recover: {why}",
        path.display()
    ))
}

/// Recovers the store at `root` (see the module documentation). Refused
/// while a stream holds the store. The disk's work runs on a thread of its
/// own: on a disk that answers nothing for the default `store.timeout_s`
/// (60 s), the call returns an error and the recovery goes on once the disk
/// answers.
pub fn recover(root: &Path) -> Result<Recovery> {
    let watch = Arc::new(StallWatch::with_default_bound(root.to_path_buf()));
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
    let meta_path = root.join("zarr.json");
    let text = std::fs::read(&meta_path).map_err(|e| Error::io("reading", &meta_path, e))?;
    let mut doc: Value =
        serde_json::from_slice(&text).map_err(|e| invalid(root, &format!("zarr.json: {e}")))?;
    let _lock = StoreLock::acquire(root)?;
    let removed = remove_partials(root, watch)?;
    let geometry = Geometry::read(&doc)
        .ok_or_else(|| invalid(root, "zarr.json is not an array of this library's layout"))?;
    let before = geometry.shape[0];
    let (rows, beyond) = geometry.complete_rows(root, watch);
    let complete = rows.saturating_mul(geometry.shard[0]);
    // A stream mid-way always leaves a whole number of shard rows as the
    // extent; any other extent is final (a bounded array, or a flushed one).
    let after = if before % geometry.shard[0] == 0 && complete > before {
        complete
    } else {
        before
    };
    if after != before {
        doc["shape"][0] = after.into();
        let body = serde_json::to_string_pretty(&doc).expect("a document serializes") + "\n";
        write_atomically(&meta_path, &[body.as_bytes()], true, PATIENCE, watch)?;
    }
    Ok(Recovery {
        partial_files_removed: removed,
        planes_before: before,
        planes_after: after,
        shards_beyond: beyond,
    })
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
        if doc.get("node_type")?.as_str()? != "array" {
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
