//! tz_recover on stores of several arrays: an OME-Zarr collection of
//! positions with a pyramid recovered whole from its root, one array inside
//! a store recovered alone, and neither while a stream holds the store.

mod common;
mod support;

use common::*;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use tiledzarr::ffi::*;

/// Two positions of unbounded time points of 2 x 24 x 20 uint16 (one time
/// point per shard row, so each row is one frame), position 1 with a
/// second level; at `path`.
fn collection_json(path: &Path) -> String {
    let dims = r#"[{"name": "t", "size": 0, "tile": 1},
                   {"name": "c", "size": 2, "tile": 1, "tiles_per_shard": 2},
                   {"name": "y", "size": 24, "tile": 8, "tiles_per_shard": 2},
                   {"name": "x", "size": 20, "tile": 8, "tiles_per_shard": 1}]"#;
    format!(
        r#"{{"arrays": [{{"key": "P0", "dtype": "uint16", "dimensions": {dims}}},
                        {{"key": "P1", "dtype": "uint16", "dimensions": {dims},
                          "multiscale": {{"levels": 2}}}}],
            "collection": "bioformats2raw", "backend": "cpu",
            "store": {{"path": {:?}}}}}"#,
        path.to_str().unwrap()
    )
}

const FRAME_BYTES: usize = 2 * 24 * 20 * 2;

/// The arrays of the collection, as folders under its root.
const ARRAYS: [&str; 3] = ["P0/0", "P1/0", "P1/1"];

/// Streams `frames` time points into both positions, in turn; flushed
/// when `flush`, else the stream is returned open.
fn write_collection(path: &Path, frames: u64, flush: bool) -> *mut tz_stream {
    let s = create_json(&collection_json(path), None).unwrap();
    let mut rng = Rng(7);
    for _ in 0..frames {
        for array in 0..2 {
            let frame = rng.bytes(FRAME_BYTES);
            let n = tz_write_all_to(
                s,
                array,
                frame.as_ptr() as *const c_void,
                frame.len(),
                10_000,
            );
            assert_eq!(n, FRAME_BYTES as i64, "{}", stream_error(s));
        }
    }
    if flush {
        assert_eq!(tz_flush(s), 0, "{}", stream_error(s));
        tz_destroy(s);
        return std::ptr::null_mut();
    }
    s
}

/// The status and message of a recovery that must fail.
fn refused(path: &Path) -> (i32, String) {
    match recover_store(path) {
        Ok(r) => panic!(
            "{} recovered: {} partial files removed",
            path.display(),
            r.partial_files_removed
        ),
        Err(e) => e,
    }
}

/// The extent along dimension 0 that `array`'s zarr.json records, after
/// setting it to `to` when given.
fn extent(array: &Path, to: Option<u64>) -> u64 {
    let path = array.join("zarr.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    if let Some(to) = to {
        doc["shape"][0] = to.into();
        std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    }
    doc["shape"][0].as_u64().unwrap()
}

fn decoded(array: &Path) -> (Vec<u64>, Vec<u8>) {
    let (shape, _, bytes) = support::decode::decode_store(array).unwrap();
    (shape, bytes)
}

/// A file a killed stream leaves mid-write, inside `array`'s chunks.
fn plant_partial(array: &Path) -> PathBuf {
    let dir = array.join("c/9");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("0.partial");
    std::fs::write(&file, b"half a shard").unwrap();
    file
}

#[test]
fn a_collection_with_a_pyramid_is_recovered_whole_from_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("positions.zarr");
    write_collection(&root, 5, true);
    let whole: Vec<_> = ARRAYS.iter().map(|a| decoded(&root.join(a))).collect();
    // What a kill leaves: each array's extent behind its complete rows (by
    // a different number of rows each), a write cut short in each, and the
    // stream's lock file.
    let mut before = 0;
    let mut after = 0;
    let mut partials = Vec::new();
    for (k, a) in ARRAYS.iter().enumerate() {
        let array = root.join(a);
        after += extent(&array, None);
        before += extent(&array, Some(k as u64 + 1));
        partials.push(plant_partial(&array));
    }
    std::fs::write(root.join("zarr.json.partial"), b"{\"zarr").unwrap();
    std::fs::write(root.join(tiledzarr::sink::LOCK_FILE), b"4242\n").unwrap();

    let r = recover_store(&root).unwrap();
    assert_eq!(r.partial_files_removed, ARRAYS.len() as u64 + 1);
    assert_eq!((r.planes_before, r.planes_after), (before, after));
    assert_eq!(r.shards_beyond, 0);
    assert!(partials.iter().all(|p| !p.exists()));
    assert!(!root.join(tiledzarr::sink::LOCK_FILE).exists());
    for (a, whole) in ARRAYS.iter().zip(&whole) {
        std::fs::remove_dir(root.join(a).join("c/9")).unwrap();
        assert!(decoded(&root.join(a)) == *whole, "{a} decodes otherwise");
    }
    // A sound store is left as it is.
    let again = recover_store(&root).unwrap();
    assert_eq!((again.planes_before, again.planes_after), (after, after));
}

#[test]
fn an_array_inside_a_store_is_recovered_alone_but_not_while_a_stream_holds_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("live.zarr");
    let s = write_collection(&root, 3, false);
    let level = root.join("P1/1");
    let partial = plant_partial(&level);
    for path in [&root, &level, &root.join("P1")] {
        let (rc, message) = refused(path);
        assert_eq!(rc, code(tz_status::TZ_ERR_EXISTS), "{message}");
        assert!(message.contains("in use"), "{message}");
    }
    assert!(partial.exists(), "a stream's file removed under it");
    assert_eq!(tz_flush(s), 0, "{}", stream_error(s));
    tz_destroy(s);

    // Once the stream is gone: that array only.
    let elsewhere = plant_partial(&root.join("P0/0"));
    let r = recover_store(&level).unwrap();
    assert_eq!(r.partial_files_removed, 1);
    assert!(!partial.exists() && elsewhere.exists());
    assert_eq!(r.planes_before, r.planes_after);
}

#[test]
fn a_node_that_is_no_zarr_document_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("broken.zarr");
    write_collection(&root, 1, true);
    std::fs::create_dir(root.join("P2")).unwrap();
    std::fs::write(root.join("P2/zarr.json"), b"{\"zarr_format\": 3,").unwrap();
    let (rc, message) = refused(&root);
    assert_eq!(rc, code(tz_status::TZ_ERR_INVALID_ARGUMENT), "{message}");
    assert!(message.contains("P2"), "{message}");
    // Another writer's node beside ours (no array of this library's
    // layout) is left as it is.
    std::fs::write(
        root.join("P2/zarr.json"),
        br#"{"zarr_format": 3, "node_type": "array", "shape": [4]}"#,
    )
    .unwrap();
    let r = recover_store(&root).unwrap();
    assert_eq!(r.planes_before, r.planes_after);
}

/// tz_recover_with reads its bound from `tz_options.store_timeout_s`: a
/// bad struct or a bound out of range is refused before the store is
/// touched; NULL options or a bound in range recover as tz_recover does.
/// (That the bound ends the wait on a stalled disk: `tests/disk_stall.rs`.)
#[test]
fn recovery_with_options_checks_them_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("positions.zarr");
    write_collection(&root, 5, true);
    let array = root.join(ARRAYS[0]);
    let after = extent(&array, None);
    let before = extent(&array, Some(1));
    let partial = plant_partial(&array);
    // The array alone: the report is then its own.
    let defaults = default_options();
    let refused = [
        (
            tz_options {
                store_timeout_s: 3601,
                ..defaults
            },
            tz_status::TZ_ERR_CONFIG,
            "options.store_timeout_s",
        ),
        (
            tz_options {
                struct_size: 8,
                ..defaults
            },
            tz_status::TZ_ERR_INVALID_ARGUMENT,
            "options.struct_size",
        ),
    ];
    for (o, status, names) in refused {
        let Err((rc, message)) = recover_store_with(&array, Some(&o)) else {
            panic!("recovered with {names} out of range");
        };
        assert_eq!(rc, status as i32);
        assert!(message.contains(names), "{message}");
        assert!(partial.exists(), "the store was touched");
        assert_eq!(extent(&array, None), before);
    }
    let bounded = tz_options {
        store_timeout_s: 5,
        ..defaults
    };
    let r = recover_store_with(&array, Some(&bounded)).unwrap();
    assert_eq!(r.partial_files_removed, 1);
    assert_eq!((r.planes_before, r.planes_after), (before, after));
    assert!(!partial.exists());
    // NULL options (and no report): the defaults; a sound store stays as
    // it is.
    let path = cstring(array.to_str().unwrap());
    assert_eq!(
        tz_recover_with(path.as_ptr(), std::ptr::null(), std::ptr::null_mut()),
        0
    );
    assert_eq!(extent(&array, None), after);
}
