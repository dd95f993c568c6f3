//! Durability: with `fsync` (the default) every shard file and `zarr.json`,
//! and the folder each lies in, is flushed to the disk before the shard
//! counts as written; with it off, nothing is. A binary of its own: the
//! count of fsync calls is per process.

mod common;

use common::*;
use std::path::Path;
use tiledzarr::ffi::*;

fn stream(path: &Path, fsync: Option<bool>) -> (u64, u64) {
    let fsync = fsync.map_or(String::new(), |f| format!(r#", "fsync": {f}"#));
    let json = format!(
        r#"{{"dtype": "uint16", "backend": "cpu", "dimensions": [
            {{"size": 0, "tile": 2, "tiles_per_shard": 1}},
            {{"size": 16, "tile": 4, "tiles_per_shard": 2}}],
          "store": {{"path": {:?}{fsync}}}}}"#,
        path.to_str().unwrap()
    );
    let before = tiledzarr::sink::fs_sync_calls();
    let s = create_json(&json, None).unwrap();
    write_in_pieces(s, &Rng(12).bytes(6 * 16 * 2), &mut || 64).unwrap();
    assert_eq!(tz_flush(s), tz_status::TZ_OK as i32);
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), tz_status::TZ_OK as i32);
    tz_destroy(s);
    let shards = unsafe { m.assume_init() }.shards_emitted;
    (shards, tiledzarr::sink::fs_sync_calls() - before)
}

#[test]
fn shards_and_metadata_are_fsynced_unless_asked_not_to() {
    let dir = tempfile::tempdir().unwrap();
    // Three shard rows of two shards; zarr.json written at creation, at
    // the first row's extent and at the end (rows in between move the
    // extent at most every 100 ms).
    let (shards, syncs) = stream(&dir.path().join("default.zarr"), None);
    assert_eq!(shards, 6);
    // Each shard file, and the folder of each row's shards once the row
    // is complete; each zarr.json and its folder.
    let (rows, documents) = (3, 3);
    assert!(
        syncs >= shards + rows + 2 * documents,
        "{syncs} fsync calls for {shards} shards"
    );
    let (_, syncs) = stream(&dir.path().join("on.zarr"), Some(true));
    assert!(syncs >= shards + rows + 2 * documents, "{syncs}");
    let (_, syncs) = stream(&dir.path().join("off.zarr"), Some(false));
    assert_eq!(syncs, 0);
    // The C configuration: fsync unless `store_skip_fsync` is set.
    for skip in [0, 1] {
        let path = cstring(dir.path().join(format!("c-{skip}.zarr")).to_str().unwrap());
        let dims = [c_dim(0, 2, 1), c_dim(16, 4, 2)];
        let mut c = std::mem::MaybeUninit::<tz_config>::uninit();
        assert_eq!(tz_config_init(c.as_mut_ptr()), 0);
        let mut c = unsafe { c.assume_init() };
        assert_eq!(c.store_skip_fsync, 0, "on by default");
        c.rank = 2;
        c.dimensions = dims.as_ptr();
        c.backend = tz_backend::TZ_BACKEND_CPU as u32;
        c.store_path = path.as_ptr();
        c.store_skip_fsync = skip;
        let before = tiledzarr::sink::fs_sync_calls();
        let mut s = std::ptr::null_mut();
        assert_eq!(tz_create(&c, &mut s), 0, "{}", last_error());
        write_in_pieces(s, &Rng(13).bytes(2 * 16 * 2), &mut || 64).unwrap();
        assert_eq!(tz_flush(s), 0);
        tz_destroy(s);
        let syncs = tiledzarr::sink::fs_sync_calls() - before;
        assert_eq!(syncs == 0, skip == 1, "skip {skip}: {syncs} fsync calls");
    }
}
