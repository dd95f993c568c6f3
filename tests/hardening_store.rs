//! The filesystem store owns exactly what it wrote: overwrite beside other
//! people's files, two writers on one path (in one process and in two), a
//! symbolic link as the store path, a create that fails half-way, the store
//! folder removed under a live stream, a configuration refused for its
//! backend, and a stream killed with SIGKILL then recovered.

mod common;
mod support;

use common::child::{self, Limits};
use common::*;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tiledzarr::ffi::*;

const OK: i32 = tz_status::TZ_OK as i32;

/// u16, 4 planes per shard row, a row of 2 x 3 shards; `extra` appended.
fn json(path: &Path, overwrite: bool, extra: &str) -> String {
    format!(
        r#"{{"dtype": "uint16", "backend": "cpu", "staging_bytes": 1536, "dimensions": [
            {{"size": 0, "tile": 2, "tiles_per_shard": 2}},
            {{"size": 16, "tile": 4, "tiles_per_shard": 2}},
            {{"size": 12, "tile": 4, "tiles_per_shard": 1}}],
          "store": {{"path": {:?}, "overwrite": {overwrite}}}{extra}}}"#,
        path.to_str().unwrap()
    )
}

const PLANE_BYTES: usize = 16 * 12 * 2;
const ROW_PLANES: u64 = 4;

/// Plane `p` of the test acquisition.
fn plane(p: u64) -> Vec<u8> {
    Rng(1000 + p).bytes(PLANE_BYTES)
}

fn planes(n: u64) -> Vec<u8> {
    (0..n).flat_map(plane).collect()
}

/// Streams `n` planes into a new store at `path` and flushes.
fn write_store(path: &Path, overwrite: bool, n: u64) {
    let s = create_json(&json(path, overwrite, ""), None).unwrap();
    write_in_pieces(s, &planes(n), &mut || 700).unwrap();
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    tz_destroy(s);
}

/// Every file under `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(read) = std::fs::read_dir(dir) {
        for e in read {
            let p = e.unwrap().path();
            if p.is_dir() && !p.is_symlink() {
                out.extend(files(&p));
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The store decodes to the first `n` planes of the acquisition.
fn assert_holds(path: &Path, n: u64) {
    let (shape, _, bytes) = support::decode::decode_store(path).unwrap();
    assert_eq!(shape, [n, 16, 12]);
    assert!(bytes == planes(n), "{} holds other data", path.display());
}

#[test]
fn overwrite_removes_only_what_a_store_of_ours_holds() {
    let dir = tempfile::tempdir().unwrap();
    // A Zarr group with someone's array in it and a notes file.
    let group = dir.path().join("group.zarr");
    std::fs::create_dir_all(group.join("raw/c/0")).unwrap();
    std::fs::write(
        group.join("zarr.json"),
        br#"{"zarr_format":3,"node_type":"group"}"#,
    )
    .unwrap();
    std::fs::write(
        group.join("raw/zarr.json"),
        br#"{"zarr_format":3,"node_type":"array"}"#,
    )
    .unwrap();
    std::fs::write(group.join("raw/c/0/0"), b"someone's shard").unwrap();
    std::fs::write(group.join("notes.txt"), b"precious").unwrap();
    let before = files(&group);
    let (rc, msg) = create_json(&json(&group, true, ""), None).unwrap_err();
    assert_eq!(rc, code(tz_status::TZ_ERR_EXISTS), "{msg}");
    assert!(msg.contains("notes.txt") || msg.contains("raw"), "{msg}");
    assert_eq!(files(&group), before, "nothing was removed");

    // A store of ours with a stranger's file inside its chunk tree.
    let store = dir.path().join("ours.zarr");
    write_store(&store, false, 8);
    std::fs::write(store.join("c/0/0/README"), b"mine").unwrap();
    let before = files(&store);
    let (rc, msg) = create_json(&json(&store, true, ""), None).unwrap_err();
    assert_eq!(rc, code(tz_status::TZ_ERR_EXISTS), "{msg}");
    assert!(msg.contains("README"), "{msg}");
    assert_eq!(files(&store), before);

    // Without it, the old store is replaced; what lies beside it stays.
    std::fs::remove_file(store.join("c/0/0/README")).unwrap();
    std::fs::write(dir.path().join("beside.txt"), b"x").unwrap();
    write_store(&store, true, 4);
    assert_holds(&store, 4);
    assert!(dir.path().join("beside.txt").exists());
    assert!(!store.join("c/1").exists(), "the old rows are gone");
}

#[test]
fn child_holds_a_store() {
    if child::role().as_deref() != Some("holder") {
        return;
    }
    let path = PathBuf::from(std::env::var("TZ_TEST_STORE").unwrap());
    let s = create_json(&json(&path, false, ""), None).unwrap();
    write_in_pieces(s, &planes(4), &mut || 700).unwrap();
    println!("ready");
    // Holds the stream until the parent closes stdin.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    tz_destroy(s);
}

#[test]
fn a_store_in_use_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    // In this process.
    let path = dir.path().join("one.zarr");
    let first = create_json(&json(&path, false, ""), None).unwrap();
    let (rc, msg) = create_json(&json(&path, true, ""), None).unwrap_err();
    assert_eq!(rc, code(tz_status::TZ_ERR_EXISTS), "{msg}");
    assert!(msg.contains(&std::process::id().to_string()), "{msg}");
    write_in_pieces(first, &planes(6), &mut || 700).unwrap();
    assert_eq!(tz_flush(first), OK);
    tz_destroy(first);
    assert_holds(&path, 6);
    assert!(!path.join(tiledzarr::sink::LOCK_FILE).exists());

    // In another process.
    let path = dir.path().join("two.zarr");
    let env = [("TZ_TEST_STORE", path.to_str().unwrap().to_string())];
    let mut holder = child::command("child_holds_a_store", "holder", &env, Limits::default())
        .spawn()
        .unwrap();
    // The child says "ready" once its stream holds the store.
    let mut out = std::io::BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended early"
        );
    }
    let (rc, msg) = create_json(&json(&path, true, ""), None).unwrap_err();
    assert_eq!(rc, code(tz_status::TZ_ERR_EXISTS), "{msg}");
    assert!(msg.contains(&format!("process {}", holder.id())), "{msg}");
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    assert_holds(&path, 4);
}

#[test]
fn a_symlinked_store_path_is_followed_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("disk/acq.zarr");
    write_store(&target, false, 8);
    let link = dir.path().join("link.zarr");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    write_store(&link, true, 4);
    assert!(link.is_symlink(), "the link is still a link");
    assert_holds(&target, 4);
    // A link to nothing is refused and left as it is.
    let dangling = dir.path().join("dangling.zarr");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let (rc, msg) = create_json(&json(&dangling, true, ""), None).unwrap_err();
    assert_eq!(rc, code(tz_status::TZ_ERR_EXISTS), "{msg}");
    assert!(dangling.is_symlink() && !dir.path().join("nowhere").exists());
}

#[test]
fn child_cannot_write_files() {
    if child::role().as_deref() != Some("no-space") {
        return;
    }
    let path = PathBuf::from(std::env::var("TZ_TEST_STORE").unwrap());
    let (rc, msg) = create_json(&json(&path, false, ""), None).unwrap_err();
    println!("refused {rc}: {msg}");
}

#[test]
fn a_failed_create_leaves_nothing_so_that_a_retry_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new/deeper/acq.zarr");
    let env = [("TZ_TEST_STORE", path.to_str().unwrap().to_string())];
    // No file may grow past 16 bytes: the lock file's process id fits,
    // zarr.json does not.
    let limits = Limits {
        file_size: Some(16),
        ..Limits::default()
    };
    let out = child::run("child_cannot_write_files", "no-space", &env, limits);
    assert!(
        out.contains(&format!("refused {}", code(tz_status::TZ_ERR_IO))),
        "{out}"
    );
    assert!(out.contains("zarr.json"), "{out}");
    assert!(
        !dir.path().join("new").exists(),
        "the folders it created are removed"
    );
    write_store(&path, false, 4);
    assert_holds(&path, 4);
}

#[test]
fn a_store_folder_removed_or_replaced_during_the_stream_poisons_it() {
    for replace in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acq.zarr");
        let s = create_json(&json(&path, false, ""), None).unwrap();
        write_in_pieces(s, &planes(8), &mut || 700).unwrap();
        wait_for_shards(s, 6);
        if replace {
            std::fs::rename(&path, dir.path().join("moved.zarr")).unwrap();
            std::fs::create_dir(&path).unwrap();
        } else {
            // The stream may add or rename a file while the folder is
            // emptied.
            while path.exists() {
                if let Err(e) = std::fs::remove_dir_all(&path) {
                    use std::io::ErrorKind::{DirectoryNotEmpty, NotFound};
                    assert!(matches!(e.kind(), DirectoryNotEmpty | NotFound), "{e}");
                }
            }
        }
        let _ = write_in_pieces(s, &planes(8), &mut || 700);
        assert_eq!(tz_flush(s), code(tz_status::TZ_ERR_IO));
        // The message names the store: the folder found gone or replaced,
        // or (when a write raced the removal, the folder still there) the
        // file or folder inside it that could not be written.
        let msg = stream_error(s);
        assert!(msg.contains(path.to_str().unwrap()), "{msg}");
        assert!(
            msg.contains("vanished or was replaced") || msg.contains("No such file"),
            "{msg}"
        );
        tz_destroy(s);
        assert_eq!(files(&path), Vec::<PathBuf>::new(), "nothing re-created");
    }
}

#[test]
fn a_configuration_refused_for_its_backend_creates_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acq.zarr");
    // A tile past nvCOMP's zstd chunk limit (16 MiB) is refused by the GPU
    // backend on any machine.
    let gpu = format!(
        r#"{{"dtype": "uint16", "backend": "gpu", "dimensions": [{{"size": 0, "tile": 1}},
            {{"size": 4096, "tile": 4096}}, {{"size": 2049, "tile": 2049}}],
            "store": {{"path": {:?}}}}}"#,
        path.to_str().unwrap()
    );
    let (rc, msg) = create_json(&gpu, None).unwrap_err();
    assert_eq!(rc, code(tz_status::TZ_ERR_BACKEND_UNAVAILABLE), "{msg}");
    assert!(msg.contains("zstd chunk limit"), "{msg}");
    assert!(!path.exists(), "no store folder");
    // A store on the CPU at that path, without overwrite.
    let cpu = json(&path, false, r#", "codec": {"name": "blosc"}"#);
    let s = create_json(&cpu, None).unwrap();
    write_in_pieces(s, &planes(4), &mut || 700).unwrap();
    assert_eq!(tz_flush(s), OK);
    tz_destroy(s);
    assert_holds(&path, 4);
}

#[test]
fn child_streams_until_killed() {
    if child::role().as_deref() != Some("killed") {
        return;
    }
    let path = PathBuf::from(std::env::var("TZ_TEST_STORE").unwrap());
    let s = create_json(&json(&path, false, ""), None).unwrap();
    for p in 0.. {
        write_in_pieces(s, &plane(p), &mut || PLANE_BYTES).unwrap();
        std::thread::sleep(Duration::from_micros(300));
    }
}

fn recover(path: &Path) -> tz_recovery {
    recover_store(path).unwrap()
}

/// A copy of the store without the shard rows past its extent (a crash
/// may leave an incomplete one there), for a reader that wants a grid.
fn visible_copy(path: &Path, to: &Path, planes: u64) {
    for f in files(path) {
        let rel = f.strip_prefix(path).unwrap();
        let row = rel
            .iter()
            .nth(1)
            .and_then(|r| r.to_str()?.parse::<u64>().ok());
        if rel.starts_with("c") && row.is_some_and(|r| r * ROW_PLANES >= planes) {
            continue;
        }
        std::fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&f, to.join(rel)).unwrap();
    }
}

#[test]
fn a_stream_killed_at_any_moment_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen_partial = 0;
    for (k, shards) in [1usize, 5, 9, 14, 20, 27, 33, 40].into_iter().enumerate() {
        let path = dir.path().join(format!("killed-{k}.zarr"));
        let env = [("TZ_TEST_STORE", path.to_str().unwrap().to_string())];
        let mut c = child::command(
            "child_streams_until_killed",
            "killed",
            &env,
            Limits::default(),
        )
        .spawn()
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while files(&path.join("c")).len() < shards && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
        let leftovers = files(&path);
        seen_partial += leftovers
            .iter()
            .filter(|f| f.to_str().unwrap().ends_with(".partial"))
            .count();
        let r = recover(&path);
        println!(
            "kill {k}: {} partial files removed, extent {} -> {}, {} shards beyond",
            r.partial_files_removed, r.planes_before, r.planes_after, r.shards_beyond
        );
        let after = files(&path);
        assert!(
            after
                .iter()
                .all(|f| !f.to_str().unwrap().ends_with(".partial")
                    && !f.ends_with(tiledzarr::sink::LOCK_FILE)),
            "{after:?}"
        );
        assert!(r.planes_after >= r.planes_before);
        assert_eq!(r.planes_after % ROW_PLANES, 0);
        // Every shard row inside the extent is complete and holds the
        // acquisition's planes.
        let copy = dir.path().join(format!("visible-{k}.zarr"));
        visible_copy(&path, &copy, r.planes_after);
        assert_holds(&copy, r.planes_after);
        // And a new stream may take the crashed store over.
        write_store(&path, true, 4);
        assert_holds(&path, 4);
    }
    println!("{seen_partial} partial files seen over the kills");
}

#[test]
fn recovery_removes_partial_files_and_shows_complete_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crashed.zarr");
    write_store(&path, false, 3 * ROW_PLANES);
    // What a crash after the third row's shards, before its zarr.json, and
    // during the next row's first shard leaves.
    let meta_path = path.join("zarr.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["shape"][0] = (2 * ROW_PLANES).into();
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    std::fs::create_dir_all(path.join("c/3/0")).unwrap();
    std::fs::write(path.join("c/3/0/0.partial"), b"half a shard").unwrap();
    std::fs::write(path.join("zarr.json.partial"), b"{\"zarr").unwrap();
    std::fs::write(path.join(tiledzarr::sink::LOCK_FILE), b"4242\n").unwrap();
    let r = recover(&path);
    assert_eq!(r.partial_files_removed, 2);
    assert_eq!(r.planes_before, 2 * ROW_PLANES);
    assert_eq!(r.planes_after, 3 * ROW_PLANES);
    assert_eq!(r.shards_beyond, 0);
    std::fs::remove_dir(path.join("c/3/0")).unwrap();
    std::fs::remove_dir(path.join("c/3")).unwrap();
    assert_holds(&path, 3 * ROW_PLANES);
    // Recovering a sound store changes nothing.
    let again = recover(&path);
    assert_eq!((again.planes_before, again.planes_after), (12, 12));
    // A store in use is not touched.
    let live = dir.path().join("live.zarr");
    let s = create_json(&json(&live, false, ""), None).unwrap();
    let c = cstring(live.to_str().unwrap());
    assert_eq!(
        tz_recover(c.as_ptr(), std::ptr::null_mut()),
        code(tz_status::TZ_ERR_EXISTS)
    );
    assert!(last_error().contains("in use"), "{}", last_error());
    tz_destroy(s);
}
