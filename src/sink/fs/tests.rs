//! The extent of a growing array in a folder store moves at most every
//! [`EXTENT_INTERVAL`], and rows put off are covered by the next tick
//! after it, when the stream is given up and at the end.

use super::*;
use crate::config::{Config, Plan};
use std::fs;

/// A store for an unbounded array of 4 x 4 u8 planes, one plane per row.
fn store(dir: &Path) -> FsStore {
    let json = format!(
        r#"{{"dtype": "uint8", "dimensions": [
            {{"size": 0, "tile": 1, "tiles_per_shard": 1}},
            {{"size": 4, "tile": 4, "tiles_per_shard": 1}}],
            "store": {{"path": {:?}, "fsync": false}}}}"#,
        dir.join("s.zarr").to_str().unwrap()
    );
    let v = Config::from_json(&json).unwrap().validate().unwrap();
    FsStore::create(&Plan::single(v)).unwrap()
}

/// Dimension 0 of the array in its `zarr.json`.
fn extent(s: &FsStore) -> u64 {
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(s.root().join("zarr.json")).unwrap()).unwrap();
    doc["shape"][0].as_u64().unwrap()
}

#[test]
fn rows_in_quick_succession_move_the_extent_once_then_at_a_tick() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = store(dir.path());
    assert_eq!(extent(&s), 0);
    // The first row moves it at once; the next 99, within microseconds,
    // wait for the interval.
    for planes in 1..=100 {
        s.progress(0, 0, planes).unwrap();
    }
    let first = extent(&s);
    assert!((1..100).contains(&first), "moved to {first} by 100 rows");
    s.tick().unwrap();
    let ticked = extent(&s);
    assert!(ticked == first || ticked == 100, "{ticked}");
    std::thread::sleep(EXTENT_INTERVAL);
    s.tick().unwrap();
    assert_eq!(
        extent(&s),
        100,
        "a tick after the interval covers the rows put off"
    );
    // After the interval a row moves it at once again.
    std::thread::sleep(EXTENT_INTERVAL);
    s.progress(0, 0, 101).unwrap();
    assert_eq!(extent(&s), 101);
    // A stream given up keeps the extent of every row it emitted.
    s.progress(0, 0, 102).unwrap();
    s.abandon();
    assert_eq!(extent(&s), 102);
}

#[test]
fn the_end_writes_the_final_extent_over_rows_put_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = store(dir.path());
    for planes in 1..=10 {
        s.progress(0, 0, planes).unwrap();
    }
    s.finish(&[vec![10]]).unwrap();
    assert_eq!(extent(&s), 10);
    std::thread::sleep(EXTENT_INTERVAL);
    s.tick().unwrap();
    assert_eq!(extent(&s), 10, "nothing due after the end");
}
