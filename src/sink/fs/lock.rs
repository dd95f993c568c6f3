//! Exclusive ownership of a store while a stream (or a recovery) works on
//! it: an advisory lock on a lock file inside the store (`flock` on unix, a
//! byte-range lock on Windows), holding the owner's process id so that a
//! refused second writer can name it.

use crate::error::{Error, Result};
use crate::platform::{self, FileId};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name in the store folder. Zarr readers ignore it.
pub const LOCK_FILE: &str = ".tiledzarr.lock";

/// Whether `name` is what a FUSE file system (`.fuse_hidden*`) or NFS
/// (`.nfs*`) keeps of a file removed while open, as the lock file is
/// (see [`StoreLock`]'s drop), until it drops it a moment after the close.
pub fn is_lock_remnant(name: &str) -> bool {
    name.starts_with(".fuse_hidden") || name.starts_with(".nfs")
}

/// A held lock; released (and its file removed) on drop.
pub struct StoreLock {
    file: File,
    path: PathBuf,
}

impl StoreLock {
    /// Takes the lock of the store at `root` (a folder that exists), or
    /// refuses with the holder's process id. Never waits.
    pub fn acquire(root: &Path) -> Result<StoreLock> {
        let path = root.join(LOCK_FILE);
        // The holder removes the file when it lets go: a lock taken on a
        // file that was removed meanwhile is no lock, so try again.
        for _ in 0..8 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io("opening the store's lock file", &path, e))?;
            if !platform::try_lock(&file).map_err(|e| Error::io("locking the store", &path, e))? {
                return Err(Error::Exists {
                    path: root.to_path_buf(),
                    reason: format!(
                        "the store is in use by another stream ({}, lock file {LOCK_FILE})",
                        holder(file)
                    ),
                });
            }
            let still_there = FileId::of_file(&file).is_ok_and(|held| held.is_at(&path));
            if still_there {
                let mut lock = StoreLock { file, path };
                lock.record_pid()?;
                return Ok(lock);
            }
        }
        Err(Error::Exists {
            path: root.to_path_buf(),
            reason: "its lock file keeps being replaced by another process".into(),
        })
    }

    fn record_pid(&mut self) -> Result<()> {
        let pid = std::process::id();
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.rewind()?;
            writeln!(f, "{pid}")
        };
        write(&mut self.file).map_err(|e| Error::io("writing the store's lock file", &self.path, e))
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // Removed while still held, so that no one locks the old file.
        let _ = fs::remove_file(&self.path);
    }
}

/// "process 1234" from a held lock file, or what is known without it.
fn holder(mut file: File) -> String {
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    match text.trim().parse::<u32>() {
        Ok(pid) if pid == std::process::id() => format!("this process, {pid}"),
        Ok(pid) => format!("process {pid}"),
        Err(_) => "a process that is starting it".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = StoreLock::acquire(dir.path()).unwrap();
        let e = StoreLock::acquire(dir.path()).err().expect("refused");
        let text = e.to_string();
        assert!(text.contains(&std::process::id().to_string()), "{text}");
        assert!(matches!(e, Error::Exists { .. }));
        drop(first);
        assert!(!dir.path().join(LOCK_FILE).exists());
        let again = StoreLock::acquire(dir.path()).unwrap();
        drop(again);
    }
}
