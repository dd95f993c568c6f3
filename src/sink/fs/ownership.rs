//! What a store written by this library consists of, so that `overwrite`
//! removes exactly that and nothing else: `zarr.json` files, `c/` trees of
//! shard files named by their coordinates, folders holding a `zarr.json`
//! of their own (levels `0`, `1`, ...; the groups and images of a stream
//! of several arrays), the lock file, and the `*.partial` files a crash
//! leaves behind. Anything else in the folder (another array, a
//! notes file, a symbolic link) makes `overwrite` refuse, naming it.

use super::lock::{is_lock_remnant, LOCK_FILE};
use crate::error::{Error, Result};
use crate::sink::StallWatch;
use std::fs;
use std::path::{Path, PathBuf};

const METADATA: &str = "zarr.json";
const PARTIAL: &str = ".partial";

/// What an entry of a store folder is.
enum Entry {
    /// A file the library writes.
    File,
    /// The `c/` tree of shard files.
    Chunks,
    /// A level folder with an array (or group) of its own.
    Node,
    /// The lock file, or what a FUSE file system or NFS keeps of one
    /// removed while open until it drops it: left alone here.
    Lock,
}

/// Checks that everything under `root` was written by the library, then
/// removes it (the lock file and `root` itself stay). Nothing is removed
/// when anything is not ours. Each entry checked or removed tells `watch`
/// that the disk answers: an old store of many files takes long on a slow
/// disk without the disk stalling.
pub fn clear_old_store(root: &Path, watch: &StallWatch) -> Result<()> {
    check_node(root, true, watch)?;
    remove_node(root, true, watch)
}

fn foreign(path: &Path, why: &str) -> Error {
    Error::Exists {
        path: path.to_path_buf(),
        reason: format!(
            "{why}; it was not written by TiledZarr, so overwrite refuses to delete the store \
             around it (move it away or choose another path)"
        ),
    }
}

fn entries(dir: &Path) -> Result<Vec<(PathBuf, fs::FileType)>> {
    let read = fs::read_dir(dir).map_err(|e| Error::io("reading the old store", dir, e))?;
    let mut out = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| Error::io("reading the old store", dir, e))?;
        let kind = entry
            .file_type()
            .map_err(|e| Error::io("reading the old store", entry.path(), e))?;
        out.push((entry.path(), kind));
    }
    Ok(out)
}

/// A name the library gives a folder of its own (an array's key is made
/// of such names).
fn is_node_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_coordinate(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

/// Classifies an entry of a store (or level) folder.
fn classify(path: &Path, kind: fs::FileType, root: bool) -> Result<Entry> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if kind.is_symlink() {
        return Err(foreign(path, "a symbolic link"));
    }
    if kind.is_file() {
        return match name {
            METADATA => check_metadata(path).map(|()| Entry::File),
            n if n == format!("{METADATA}{PARTIAL}") => Ok(Entry::File),
            LOCK_FILE if root => Ok(Entry::Lock),
            n if root && is_lock_remnant(n) => Ok(Entry::Lock),
            _ => Err(foreign(path, "an unknown file")),
        };
    }
    if kind.is_dir() {
        if name == "c" {
            return Ok(Entry::Chunks);
        }
        if is_node_name(name) && path.join(METADATA).is_file() {
            return Ok(Entry::Node);
        }
    }
    Err(foreign(path, "an unknown folder or special file"))
}

/// A `zarr.json` must be a Zarr v3 document: another format's metadata is
/// someone else's store.
fn check_metadata(path: &Path) -> Result<()> {
    let text = fs::read(path).map_err(|e| Error::io("reading the old store", path, e))?;
    let doc: serde_json::Value =
        serde_json::from_slice(&text).map_err(|_| foreign(path, "not a Zarr v3 document"))?;
    match doc.get("zarr_format").and_then(|v| v.as_u64()) {
        Some(3) => Ok(()),
        _ => Err(foreign(path, "not a Zarr v3 document")),
    }
}

fn check_node(dir: &Path, root: bool, w: &StallWatch) -> Result<()> {
    for (path, kind) in entries(dir)? {
        w.answered();
        match classify(&path, kind, root)? {
            Entry::Chunks => check_chunks(&path, w)?,
            Entry::Node => check_node(&path, false, w)?,
            Entry::File | Entry::Lock => {}
        }
    }
    Ok(())
}

/// A `c/` tree holds folders and shard files named by coordinates only.
fn check_chunks(dir: &Path, w: &StallWatch) -> Result<()> {
    for (path, kind) in entries(dir)? {
        w.answered();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if kind.is_dir() && is_coordinate(name) {
            check_chunks(&path, w)?;
        } else if !(kind.is_file()
            && (is_coordinate(name) || name.strip_suffix(PARTIAL).is_some_and(is_coordinate)))
        {
            return Err(foreign(&path, "not a shard file of this store"));
        }
    }
    Ok(())
}

/// Removes what [`check_node`] accepted, entry by entry: something that
/// appeared in between is left alone and reported.
fn remove_node(dir: &Path, root: bool, w: &StallWatch) -> Result<()> {
    for (path, kind) in entries(dir)? {
        match classify(&path, kind, root)? {
            Entry::File => remove_file(&path)?,
            Entry::Chunks => remove_chunks(&path, w)?,
            Entry::Node => {
                remove_node(&path, false, w)?;
                remove_dir(&path)?;
            }
            Entry::Lock => {}
        }
        w.answered();
    }
    Ok(())
}

fn remove_chunks(dir: &Path, w: &StallWatch) -> Result<()> {
    check_chunks(dir, w)?;
    for (path, kind) in entries(dir)? {
        if kind.is_dir() {
            remove_chunks(&path, w)?;
        } else {
            remove_file(&path)?;
        }
        w.answered();
    }
    remove_dir(dir)
}

fn remove_file(path: &Path) -> Result<()> {
    fs::remove_file(path).map_err(|e| Error::io("removing the old store's file", path, e))
}

fn remove_dir(path: &Path) -> Result<()> {
    // `remove_dir`, never `remove_dir_all`: a folder that is not empty now
    // holds something that was not checked.
    fs::remove_dir(path).map_err(|e| Error::io("removing the old store's folder", path, e))
}

/// Every `*.partial` file under `dir` (a crash's leftovers), removed; how
/// many there were.
pub fn remove_partials(dir: &Path, w: &StallWatch) -> Result<u64> {
    let mut removed = 0;
    for (path, kind) in entries(dir)? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if kind.is_dir() {
            removed += remove_partials(&path, w)?;
        } else if kind.is_file() && name.ends_with(PARTIAL) {
            remove_file(&path)?;
            removed += 1;
        }
        w.answered();
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> StallWatch {
        StallWatch::new(std::time::Duration::from_secs(60), "s.zarr".into())
    }

    fn store(dir: &Path) {
        fs::write(
            dir.join("zarr.json"),
            r#"{"zarr_format": 3, "node_type": "array"}"#,
        )
        .unwrap();
        fs::create_dir_all(dir.join("c/0/1")).unwrap();
        fs::write(dir.join("c/0/1/2"), b"shard").unwrap();
        fs::write(dir.join("c/0/1/3.partial"), b"half").unwrap();
    }

    #[test]
    fn our_own_files_are_removed_and_the_folder_stays() {
        let dir = tempfile::tempdir().unwrap();
        store(dir.path());
        fs::create_dir(dir.path().join("1")).unwrap();
        store(&dir.path().join("1"));
        clear_old_store(dir.path(), &watch()).unwrap();
        assert!(dir.path().is_dir());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn anything_else_is_refused_by_name_and_nothing_is_removed() {
        type AddStranger = fn(&Path);
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut cases: Vec<(&str, AddStranger)> = vec![
            ("notes.txt", |d| {
                fs::write(d.join("notes.txt"), b"x").unwrap()
            }),
            ("labels", |d| fs::create_dir(d.join("labels")).unwrap()),
            ("c/0/raw.tif", |d| {
                fs::write(d.join("c/0/raw.tif"), b"x").unwrap()
            }),
            ("zarr.json", |d| {
                fs::write(d.join("zarr.json"), b"{\"zarr_format\": 2}").unwrap()
            }),
        ];
        // A symbolic link (Windows lets only privileged processes make one).
        #[cfg(unix)]
        cases.push(("link", |d| {
            std::os::unix::fs::symlink("/tmp", d.join("link")).unwrap()
        }));
        for (name, add) in cases {
            let dir = tempfile::tempdir().unwrap();
            store(dir.path());
            add(dir.path());
            let e = clear_old_store(dir.path(), &watch()).unwrap_err();
            assert!(matches!(e, Error::Exists { .. }), "{name}: {e}");
            // The message names the path as the system writes it.
            let native = name.replace('/', std::path::MAIN_SEPARATOR_STR);
            assert!(e.to_string().contains(&native), "{name}: {e}");
            assert!(
                dir.path().join("c/0/1/2").is_file(),
                "{name}: a shard was removed"
            );
        }
    }

    #[test]
    fn a_lock_remnant_is_left_where_the_lock_is_and_refused_elsewhere() {
        // A stream's lock just let go on a FUSE file system or NFS.
        let dir = tempfile::tempdir().unwrap();
        store(dir.path());
        fs::write(dir.path().join(".fuse_hidden0000000200000001"), b"").unwrap();
        clear_old_store(dir.path(), &watch()).unwrap();
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
        // Deeper down, no lock ever was.
        let dir = tempfile::tempdir().unwrap();
        store(dir.path());
        fs::write(dir.path().join("c/0/.nfs000000000001"), b"").unwrap();
        let e = clear_old_store(dir.path(), &watch()).unwrap_err();
        assert!(e.to_string().contains(".nfs000000000001"), "{e}");
    }

    #[test]
    fn partial_files_are_found_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        store(dir.path());
        fs::write(dir.path().join("zarr.json.partial"), b"{").unwrap();
        assert_eq!(remove_partials(dir.path(), &watch()).unwrap(), 2);
        assert!(dir.path().join("c/0/1/2").is_file());
        assert_eq!(remove_partials(dir.path(), &watch()).unwrap(), 0);
    }
}
