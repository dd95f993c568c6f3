//! The filesystem Zarr v3 store: `zarr.json` at the root, one file per shard
//! under `c/` (default chunk key encoding with `/`).
//!
//! Every file is written under a temporary name and renamed into place, so a
//! reader (or a crash) never sees a shard or a `zarr.json` half written.

use super::{zarr_json, ShardSink};
use crate::config::Validated;
use crate::error::{Error, Result};
use crate::shard::Shard;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct FsStore {
    root: PathBuf,
    config: Validated,
    /// The dimension-0 extent last written to `zarr.json`.
    planes_written: u64,
    key: PathBuf,
}

impl FsStore {
    /// Creates the store at the configured path: refuses an existing path
    /// unless `overwrite` is set, and even then deletes only an empty folder
    /// or one that holds a `zarr.json`.
    pub fn create(v: &Validated) -> Result<FsStore> {
        let store = v
            .config
            .store
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("the configuration names no store".into()))?;
        let root = store.path.clone();
        if root.exists() || root.is_symlink() {
            if !store.overwrite {
                return Err(Error::Exists {
                    path: root,
                    reason: "refusing to write into it (set store.overwrite to replace it)".into(),
                });
            }
            remove_old_store(&root)?;
        }
        fs::create_dir_all(&root).map_err(|e| Error::io("creating store", &root, e))?;
        let planes = if v.layout.is_unbounded() {
            0
        } else {
            v.layout.dims()[0].size
        };
        let mut s = FsStore {
            root,
            config: v.clone(),
            planes_written: u64::MAX,
            key: PathBuf::new(),
        };
        s.write_metadata(planes)?;
        Ok(s)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn write_metadata(&mut self, planes: u64) -> Result<()> {
        if planes == self.planes_written {
            return Ok(());
        }
        let doc = zarr_json(&self.config, planes);
        write_atomically(&self.root.join("zarr.json"), &[doc.as_bytes()])?;
        self.planes_written = planes;
        Ok(())
    }
}

impl ShardSink for FsStore {
    fn emit(&mut self, shard: &Shard<'_>) -> Result<()> {
        self.key.clear();
        self.key.push(&self.root);
        self.key.push("c");
        let (file, dirs) = shard.coord.split_last().expect("rank >= 1");
        for c in dirs {
            self.key.push(c.to_string());
        }
        fs::create_dir_all(&self.key).map_err(|e| Error::io("creating folder", &self.key, e))?;
        self.key.push(file.to_string());
        write_atomically(&self.key, &shard.parts())
    }

    fn progress(&mut self, planes: u64) -> Result<()> {
        if self.config.layout.is_unbounded() {
            self.write_metadata(planes)?;
        }
        Ok(())
    }

    fn finish(&mut self, planes: u64) -> Result<()> {
        if self.config.layout.is_unbounded() {
            self.write_metadata(planes)?;
        }
        Ok(())
    }
}

/// Writes `parts` to `path` through a temporary file renamed into place.
fn write_atomically(path: &Path, parts: &[&[u8]]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        for p in parts {
            f.write_all(p)?;
        }
        f.flush()
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io("writing", path, e));
    }
    fs::rename(&tmp, path).map_err(|e| Error::io("renaming into place", path, e))
}

fn remove_old_store(root: &Path) -> Result<()> {
    let is_empty_dir = fs::read_dir(root)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false);
    let is_store = root.join("zarr.json").is_file();
    if !(root.is_dir() && (is_empty_dir || is_store)) {
        return Err(Error::Exists {
            path: root.to_path_buf(),
            reason:
                "it is not a Zarr store (no zarr.json) nor an empty folder; refusing to delete it"
                    .into(),
        });
    }
    fs::remove_dir_all(root).map_err(|e| Error::io("removing old store", root, e))
}
