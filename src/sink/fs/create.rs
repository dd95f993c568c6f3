//! Making a folder store: its folders, its lock, the clearing of an old
//! store, the first `zarr.json` files; on a thread of its own, so that a
//! disk that stalls fails the create after `store.timeout_s`.

use super::flusher::Flusher;
use super::folders::{create_folders, remove_empty_folders};
use super::lock::StoreLock;
use super::{
    ownership, sync_folder, FsStore, ShardFiles, StoreFolder, Unbuffered, Writers, PATIENCE,
};
use crate::config::{Plan, Store};
use crate::error::{Error, Result};
use crate::sink::images::Images;
use crate::sink::stall::{on_own_thread, Task};
use crate::sink::{SharedAttributes, StallWatch};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

impl FsStore {
    /// Creates the store at the configured path. An existing path is
    /// refused unless `overwrite` is set, and even then only a folder whose
    /// every entry this library wrote is cleared (a symbolic link to such a
    /// folder is followed). On failure nothing this call created remains.
    ///
    /// The disk's work runs on a thread of its own, so that a disk that
    /// stalls fails the create after `store.timeout_s` (see
    /// `on_own_thread`); a store still made after that is removed.
    pub fn create(plan: &Plan) -> Result<FsStore> {
        let store = plan.store()?;
        let watch = Arc::new(StallWatch::new(
            Duration::from_secs(store.timeout_s.unwrap_or(crate::sink::DEFAULT_TIMEOUT_S)),
            store.path.clone(),
        ));
        let (plan, theirs) = (plan.clone(), watch.clone());
        let task = Task {
            thread: "tz-store-create",
            what: "creating the store",
            outcome: "the store was not created; what the create wrote before the stall is \
                      removed once the disk answers",
        };
        on_own_thread(
            &watch,
            task,
            move || FsStore::create_here(&plan, theirs),
            |(late, created): (FsStore, Option<PathBuf>)| {
                let root = late.folder.root.clone();
                let _ = ownership::clear_old_store(&root, &late.watch);
                drop(late);
                if let Some(top) = created {
                    remove_empty_folders(&root, &top);
                }
            },
        )
        .map(|(store, _)| store)
    }

    /// [`Self::create`] on the calling thread; also returns the topmost
    /// folder it created, if any.
    fn create_here(plan: &Plan, watch: Arc<StallWatch>) -> Result<(FsStore, Option<PathBuf>)> {
        let store = plan.store()?;
        let root = store.path.clone();
        let existed = match fs::metadata(&root) {
            Ok(m) if m.is_dir() => true,
            Ok(_) => {
                return Err(Error::Exists {
                    path: root,
                    reason: "it is a file, not a folder; refusing to replace it".into(),
                })
            }
            Err(_) if root.is_symlink() => {
                return Err(Error::Exists {
                    path: root,
                    reason: "it is a symbolic link to nothing; refusing to replace it".into(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io("reading", &root, e)),
        };
        if existed && !store.overwrite {
            return Err(Error::Exists {
                path: root,
                reason: "refusing to write into it (set store.overwrite to replace it)".into(),
            });
        }
        let created = if existed {
            None
        } else {
            Some(create_folders(&root)?)
        };
        watch.answered();
        match FsStore::open(plan, &root, existed, store, watch) {
            Ok(s) => Ok((s, created)),
            Err(e) => {
                if let Some(top) = created {
                    // Only folders this call made, and only when empty again.
                    remove_empty_folders(&root, &top);
                }
                Err(e)
            }
        }
    }

    /// Locks the folder, clears an old store, writes every `zarr.json`.
    fn open(
        plan: &Plan,
        root: &Path,
        existed: bool,
        store: &Store,
        watch: Arc<StallWatch>,
    ) -> Result<FsStore> {
        let fsync = store.fsync;
        let lock = StoreLock::acquire(root)?;
        watch.answered();
        if existed {
            ownership::clear_old_store(root, &watch)?;
        }
        let folder = Arc::new(StoreFolder::at(root)?);
        let mut images = Images::new(plan);
        let docs = images.take_initial();
        let mut s = FsStore {
            files: ShardFiles {
                flusher: if fsync {
                    Some(Flusher::new(watch.clone(), folder.clone())?)
                } else {
                    None
                },
                fsync,
                unbuffered: Unbuffered::for_folder(root, store.shard_files_around_page_cache()),
                watch: watch.clone(),
            },
            folder,
            writers: Writers::default(),
            watch,
            images,
            attributes: Arc::new(SharedAttributes::new(
                plan.shared().image.attributes.clone(),
            )),
            attributes_seen: 0,
            last_folder: PathBuf::new(),
            metadata_patience: PATIENCE,
            extents_due: Vec::new(),
            extents_moved: None,
            lock: Some(lock),
        };
        let written = docs.iter().try_for_each(|d| {
            s.write_document(d)?;
            s.watch.answered();
            Ok(())
        });
        if let Err(e) = written {
            // What this call wrote goes again: the store is left empty.
            let _ = ownership::clear_old_store(root, &s.watch);
            return Err(e);
        }
        if fsync {
            // The store folder's own entry in its parent.
            if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_folder(parent)?;
            }
        }
        Ok(s)
    }
}
