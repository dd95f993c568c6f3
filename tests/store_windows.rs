//! The filesystem store's Windows rules, run under Wine by
//! scripts/test-windows.sh (on other systems this file holds no tests):
//! names Windows cannot hold are refused naming the part, paths longer
//! than 260 characters work, and a reader watching the stream may hold
//! `zarr.json` open while its extent grows, longer than `store.timeout_s`
//! too.
#![cfg(windows)]

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::windows::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tiledzarr::{Config, Stream};

/// C's `fopen` and Python's `open`: others may read and write, not delete.
const FILE_SHARE_READ_WRITE: u32 = 0x1 | 0x2;

/// An unbounded u16 stream of 32 x 32 frames, one frame per shard row, each
/// row out within 10 ms.
fn config(store: &Path) -> Config {
    config_with(store, "")
}

/// [`config`] with `more` in the store's settings.
fn config_with(store: &Path, more: &str) -> Config {
    Config::from_json(&format!(
        r#"{{"dtype": "uint16", "dimensions": [
            {{"size": 0, "tile": 1, "tiles_per_shard": 1}},
            {{"size": 32, "tile": 16, "tiles_per_shard": 2}},
            {{"size": 32, "tile": 16, "tiles_per_shard": 2}}],
            "codec": {{"name": "zstd", "level": 1}}, "max_latency_ms": 10,
            "store": {{"path": {:?}, "fsync": false{more}}}}}"#,
        store.to_str().unwrap()
    ))
    .unwrap()
}

fn frame(i: usize) -> Vec<u8> {
    (0..32 * 32 * 2).map(|b| (b * 7 + i * 13) as u8).collect()
}

/// Opens `path` for reading as C's `fopen` and Python's `open` do.
fn open_as_c_does(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ_WRITE)
        .open(path)
        .unwrap()
}

/// Dimension 0 of the array in `zarr.json`.
fn extent(zarr_json: &[u8]) -> Option<u64> {
    let doc: serde_json::Value = serde_json::from_slice(zarr_json).ok()?;
    doc["shape"][0].as_u64()
}

fn extent_on_disk(store: &Path) -> u64 {
    extent(&std::fs::read(store.join("zarr.json")).unwrap()).unwrap()
}

#[test]
fn names_windows_cannot_hold_are_refused_naming_the_part() {
    let base = tempfile::tempdir().unwrap();
    for name in ["CON", "nul.zarr", "COM1", "run:1", "run.", "run ", "what?"] {
        let path = base.path().join(name).join("inner");
        let err = Stream::new(&config(&path), None).err().unwrap_or_else(|| {
            panic!("{path:?} was accepted");
        });
        let msg = err.to_string();
        assert!(
            msg.contains("store.path") && msg.contains(&format!("`{name}`")),
            "{name}: {msg}"
        );
    }
}

#[test]
fn a_store_deeper_than_260_characters_is_written() {
    let base = tempfile::tempdir().unwrap();
    let mut store: PathBuf = base.path().to_path_buf();
    while store.as_os_str().len() < 300 {
        store.push("a-folder-with-a-long-name-to-pass-max-path");
    }
    store.push("run.zarr");
    let mut s = Stream::new(&config(&store), None).unwrap();
    for i in 0..5 {
        assert_eq!(s.write_blocking(&frame(i), None).unwrap(), 2048);
    }
    s.finish().unwrap();
    assert_eq!(extent_on_disk(&store), 5);
    assert!(store.join("c/4/0/0").is_file());
}

/// Reads `zarr.json` as `open()` in C or Python does, holding it `hold`
/// before letting go, until `stop`; the extents it saw, in order.
fn watch(zarr_json: PathBuf, hold: Duration, stop: Arc<AtomicBool>) -> Vec<u64> {
    let mut seen = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(mut f) = OpenOptions::new()
            .read(true)
            .share_mode(FILE_SHARE_READ_WRITE)
            .open(&zarr_json)
        {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).unwrap();
            // A reader never sees a half-written document.
            let e = extent(&bytes).unwrap_or_else(|| panic!("torn zarr.json: {bytes:?}"));
            if seen.last() != Some(&e) {
                seen.push(e);
            }
            std::thread::sleep(hold);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    seen
}

/// Writes 40 frames, a row every 15 ms, while `watch` reads `zarr.json`
/// as C and Python do (holding it 5 ms each time); the extents it saw.
fn stream_watched(store: &Path) -> Vec<u64> {
    let mut s = Stream::new(&config(store), None).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (path, stop) = (store.join("zarr.json"), stop.clone());
        std::thread::spawn(move || watch(path, Duration::from_millis(5), stop))
    };
    for i in 0..40 {
        assert_eq!(s.write_blocking(&frame(i), None).unwrap(), 2048);
        std::thread::sleep(Duration::from_millis(15));
    }
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    s.finish().unwrap();
    assert_eq!(extent_on_disk(store), 40);
    seen
}

#[test]
fn zarr_json_grows_while_a_reader_reads_it_again_and_again() {
    let base = tempfile::tempdir().unwrap();
    let seen = stream_watched(&base.path().join("watched.zarr"));
    assert!(
        seen.len() >= 3 && seen.windows(2).all(|w| w[0] < w[1]),
        "the watcher saw the extent grow: {seen:?}"
    );
}

/// A reader that keeps its handle open with delete sharing (as Rust's
/// `File::open`, .NET's `FileShare.Delete`) for the whole stream: the
/// standard library's rename replaces the file under it with POSIX
/// semantics (NTFS, Windows 10 1607 and later). Wine 8 has no POSIX
/// rename: scripts/test-windows.sh leaves this test out by name.
#[test]
fn zarr_json_is_replaced_under_a_handle_kept_with_delete_sharing() {
    let base = tempfile::tempdir().unwrap();
    let store = base.path().join("kept.zarr");
    let mut s = Stream::new(&config(&store), None).unwrap();
    let mut kept = File::open(store.join("zarr.json")).unwrap();
    for i in 0..10 {
        assert_eq!(s.write_blocking(&frame(i), None).unwrap(), 2048);
    }
    s.finish().unwrap();
    assert_eq!(extent_on_disk(&store), 10);
    // The kept handle still reads the whole document it opened.
    let mut bytes = Vec::new();
    kept.read_to_end(&mut bytes).unwrap();
    assert_eq!(extent(&bytes), Some(0));
}

#[test]
fn a_reader_holding_zarr_json_delays_the_extent_until_it_lets_go() {
    let base = tempfile::tempdir().unwrap();
    let store = base.path().join("held.zarr");
    let mut s = Stream::new(&config(&store), None).unwrap();
    let zarr_json = store.join("zarr.json");
    let held = open_as_c_does(&zarr_json);
    for i in 0..10 {
        assert_eq!(s.write_blocking(&frame(i), None).unwrap(), 2048);
    }
    // Rows went out meanwhile; their extent waits for the reader and the
    // stream goes on.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(extent_on_disk(&store), 0);
    drop(held);
    for i in 10..12 {
        assert_eq!(s.write_blocking(&frame(i), None).unwrap(), 2048);
    }
    s.finish().unwrap();
    assert_eq!(extent_on_disk(&store), 12);
}

#[test]
fn a_reader_holding_zarr_json_through_the_end_fails_the_flush_naming_it() {
    let base = tempfile::tempdir().unwrap();
    let store = base.path().join("stuck.zarr");
    let mut s = Stream::new(&config(&store), None).unwrap();
    let zarr_json = store.join("zarr.json");
    let _held = open_as_c_does(&zarr_json);
    for i in 0..3 {
        assert_eq!(s.write_blocking(&frame(i), None).unwrap(), 2048);
    }
    let msg = s.finish().unwrap_err().to_string();
    assert!(
        msg.contains("zarr.json") && msg.contains("holds it open"),
        "{msg}"
    );
    // Every shard is there; only the extent is behind.
    assert!(store.join("c/2/0/0").is_file());
}

#[test]
fn a_reader_holding_zarr_json_longer_than_store_timeout_s_is_no_stalled_disk() {
    // Each refused rename is an answer of the disk: a reader that holds
    // zarr.json past `store.timeout_s`, and lets go within the rename's
    // patience (2 s), leaves the flush to succeed.
    let base = tempfile::tempdir().unwrap();
    let store = base.path().join("slow-reader.zarr");
    let mut s = Stream::new(&config_with(&store, r#", "timeout_s": 1"#), None).unwrap();
    let held = open_as_c_does(&store.join("zarr.json"));
    for i in 0..3 {
        assert_eq!(s.write_blocking(&frame(i), None).unwrap(), 2048);
    }
    let reader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1600));
        drop(held);
    });
    s.finish().unwrap();
    reader.join().unwrap();
    assert_eq!(extent_on_disk(&store), 3);
}
