//! The store's folders: the store folder that must stay the one created,
//! the folders of shard keys below it, and the folders a failed create
//! leaves as it found them.

use super::files::sync_folder;
use super::lock::is_lock_remnant;
use super::FsStore;
use crate::error::{Error, Result};
use crate::platform::FileId;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The store folder: its path and the identity (device, inode) of the
/// folder the stream created there. The store and its flush threads share
/// it to check that the folder is still that one: writing on into a new
/// folder at the same path would make a store without metadata.
pub(super) struct StoreFolder {
    pub root: PathBuf,
    identity: FileId,
}

impl StoreFolder {
    /// The folder now at `root`.
    pub fn at(root: &Path) -> Result<StoreFolder> {
        let identity = FileId::of_path(root).map_err(|e| Error::io("reading", root, e))?;
        Ok(StoreFolder {
            root: root.to_path_buf(),
            identity,
        })
    }

    /// The folder at the path must still be the one created.
    pub fn check(&self) -> Result<()> {
        if self.identity.is_at(&self.root) {
            return Ok(());
        }
        Err(Error::io(
            "the store folder vanished or was replaced during the stream",
            &self.root,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the folder the stream created is no longer at this path",
            ),
        ))
    }

    /// After files were written or renamed at `paths`: where the folder
    /// was replaced meanwhile they went into the new one, and are taken
    /// back out of it; the check's answer either way.
    pub fn check_or_take_back<'p>(&self, paths: impl Iterator<Item = &'p Path>) -> Result<()> {
        let gone = self.check();
        if gone.is_err() {
            for path in paths {
                let _ = fs::remove_file(path);
            }
        }
        gone
    }
}

impl FsStore {
    /// Creates the folder a shard's file goes in.
    pub(super) fn create_folder_of(&mut self, key: &Path) -> Result<()> {
        match key.parent() {
            Some(folder) => self.create_shard_folder(folder),
            None => Ok(()),
        }
    }

    /// Creates the folders of a shard key below the store folder (never
    /// the store folder itself: a vanished store must not be re-created).
    pub(super) fn create_shard_folder(&mut self, folder: &Path) -> Result<()> {
        if folder == self.last_folder {
            return Ok(());
        }
        let below = folder.strip_prefix(&self.folder.root).unwrap_or(folder);
        let mut at = self.folder.root.clone();
        for part in below.components() {
            let parent = at.clone();
            at.push(part);
            match fs::create_dir(&at) {
                Ok(()) if self.files.fsync => sync_folder(&parent)?,
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("creating folder", &at, e)),
            }
        }
        self.last_folder = folder.to_path_buf();
        Ok(())
    }
}

/// Creates `root` and any missing parents; returns the topmost folder it
/// created.
pub(super) fn create_folders(root: &Path) -> Result<PathBuf> {
    let mut top = root.to_path_buf();
    while let Some(parent) = top.parent() {
        if parent.as_os_str().is_empty() || parent.exists() {
            break;
        }
        top = parent.to_path_buf();
    }
    fs::create_dir_all(root).map_err(|e| Error::io("creating store", root, e))?;
    Ok(top)
}

/// Removes `root` and its parents up to `top`, each only if empty.
pub(super) fn remove_empty_folders(root: &Path, top: &Path) {
    let mut at = Some(root);
    while let Some(dir) = at {
        if !remove_if_empty(dir) || dir == top {
            break;
        }
        at = dir.parent();
    }
}

/// How long a folder that holds only lock remnants is tried again (see
/// [`remove_if_empty`]).
const REMNANTS_PATIENCE: Duration = Duration::from_millis(500);

/// Removes `dir` if it is empty. The store's lock file is removed while
/// still open; FUSE file systems and NFS keep such a file under another
/// name ([`is_lock_remnant`]) and drop it a moment after the close, on
/// their own time: a folder that holds nothing else is tried again for a
/// short while.
fn remove_if_empty(dir: &Path) -> bool {
    let until = Instant::now() + REMNANTS_PATIENCE;
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return true,
            Err(_) if Instant::now() < until && holds_only_lock_remnants(dir) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(_) => return false,
        }
    }
}

/// Whether every entry of `dir` (none included) is a lock remnant.
fn holds_only_lock_remnants(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    entries
        .into_iter()
        .all(|e| e.is_ok_and(|e| is_lock_remnant(&e.file_name().to_string_lossy())))
}
