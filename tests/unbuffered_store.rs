//! Shard files around the page cache: a folder store on a local disk
//! writes them so with `fsync` (the default) and through the page cache
//! without, unless `store.page_cache` (JSON) or
//! `tz_options.store_page_cache` (C) says otherwise; a folder in memory
//! (tmpfs) goes through it; and the files are byte for byte the same every
//! way. A binary of its own: the count of files written around the page
//! cache is per process.

mod common;
mod support;

use common::*;
use std::path::Path;
use std::sync::Mutex;
use tiledzarr::ffi::*;

/// Held by each test: the count of files is the process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Frames of 100 x 96 uint16 in 8 x 16 tiles, 4 x 2 tiles per shard
/// (12 shards per row of 2 frames), of lengths that are no multiple of 4 KiB.
const DIMENSIONS: &str = r#"[{"size": 0, "tile": 2, "tiles_per_shard": 1},
    {"size": 100, "tile": 8, "tiles_per_shard": 4},
    {"size": 96, "tile": 16, "tiles_per_shard": 2}]"#;
const FRAME_BYTES: usize = 100 * 96 * 2;
const FRAMES: usize = 6;
/// 3 rows of 4 x 3 shards (100 / 32 rounds up to 4; 96 / 32 is 3).
const SHARDS: u64 = 3 * 4 * 3;

/// A folder on the disk that holds the build (`/tmp` may be memory).
fn on_disk() -> tempfile::TempDir {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&target).unwrap();
    tempfile::tempdir_in(target).unwrap()
}

/// Frames that compress to shards of many lengths.
fn frames() -> Vec<u8> {
    let mut rng = Rng(41);
    let mut data = rng.bytes(FRAMES * FRAME_BYTES);
    for (i, b) in data.iter_mut().enumerate() {
        // Some tiles' bytes vary little, others much.
        if (i / 300) % 3 != 0 {
            *b &= 0x07;
        }
    }
    data
}

/// Streams the frames into `path` (JSON `store` fields `extra`): the
/// shards emitted and the files written around the page cache meanwhile.
fn stream_json(path: &Path, extra: &str) -> (u64, u64) {
    let json = format!(
        r#"{{"dtype": "uint16", "backend": "cpu", "codec": {{"name": "zstd", "level": 3}},
          "dimensions": {DIMENSIONS},
          "store": {{"path": {:?}{extra}}}}}"#,
        path.to_str().unwrap()
    );
    let before = tiledzarr::sink::fs_unbuffered_files();
    let s = create_json(&json, None).unwrap_or_else(|(_, m)| panic!("{m}"));
    finish(s, before)
}

/// Writes the frames into `s`, flushes and destroys it: the shards
/// emitted and the files written around the page cache since `before`.
fn finish(s: *mut tz_stream, before: u64) -> (u64, u64) {
    write_in_pieces(s, &frames(), &mut || 5000).unwrap();
    assert_eq!(tz_flush(s), 0, "{}", stream_error(s));
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), 0);
    tz_destroy(s);
    let shards = unsafe { m.assume_init() }.shards_emitted;
    (shards, tiledzarr::sink::fs_unbuffered_files() - before)
}

/// The files written around the page cache where `folder`'s disk takes
/// them: every shard; elsewhere none.
fn expected_around(folder: &Path) -> u64 {
    if tiledzarr::sink::unbuffered_writes_suit(folder) {
        SHARDS
    } else {
        eprintln!(
            "{}: its file system takes no writes around the page cache",
            folder.display()
        );
        0
    }
}

#[test]
fn a_local_disk_store_writes_shards_around_the_page_cache_and_the_same_bytes() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = on_disk();
    let around = expected_around(dir.path());
    let reference = dir.path().join("page-cache.zarr");
    assert_eq!(
        stream_json(&reference, r#", "page_cache": true"#),
        (SHARDS, 0)
    );
    let reference = support::store_files(&reference);
    assert_eq!(reference.len() as u64, SHARDS + 1, "shards and zarr.json");
    for (name, extra, expected) in [
        ("default.zarr", "", around),
        ("fsync.zarr", r#", "fsync": true"#, around),
        ("no-fsync.zarr", r#", "fsync": false"#, 0),
        (
            "no-fsync-around.zarr",
            r#", "fsync": false, "page_cache": false"#,
            around,
        ),
        (
            "fsync-through.zarr",
            r#", "fsync": true, "page_cache": true"#,
            0,
        ),
    ] {
        let path = dir.path().join(name);
        assert_eq!(stream_json(&path, extra), (SHARDS, expected), "{name}");
        assert!(support::store_files(&path) == reference, "{name} differs");
    }
    // A folder in memory (Linux's tmpfs): through the page cache, with
    // the same bytes.
    if Path::new("/dev/shm").is_dir() {
        let memory = tempfile::tempdir_in("/dev/shm").unwrap();
        let path = memory.path().join("memory.zarr");
        let around = expected_around(memory.path());
        assert_eq!(stream_json(&path, ""), (SHARDS, around));
        assert!(
            support::store_files(&path) == reference,
            "the store in memory differs"
        );
    }
    let bad = dir.path().join("bad.zarr");
    let json = format!(
        r#"{{"dtype": "uint16", "dimensions": {DIMENSIONS},
          "store": {{"path": {:?}, "page_cache": "yes"}}}}"#,
        bad.to_str().unwrap()
    );
    let (rc, message) = create_json(&json, None).map(|_| ()).unwrap_err();
    assert_eq!(rc, tz_status::TZ_ERR_CONFIG as i32, "{message}");
    assert!(message.contains("page_cache"), "{message}");
}

#[test]
fn the_c_options_choose_the_page_cache() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = on_disk();
    let around = expected_around(dir.path());
    let mut o = default_options();
    assert_eq!(o.struct_size, 40);
    let default = tz_page_cache::TZ_PAGE_CACHE_DEFAULT as u32;
    let through = tz_page_cache::TZ_PAGE_CACHE_THROUGH as u32;
    let around_it = tz_page_cache::TZ_PAGE_CACHE_AROUND as u32;
    assert_eq!(o.store_page_cache, default);
    let mut c = std::mem::MaybeUninit::<tz_config>::uninit();
    assert_eq!(tz_config_init(c.as_mut_ptr()), 0);
    let mut c = unsafe { c.assume_init() };
    let dims = [c_dim(0, 2, 1), c_dim(100, 8, 4), c_dim(96, 16, 2)];
    c.rank = 3;
    c.dimensions = dims.as_ptr();
    c.level = 3;
    c.backend = tz_backend::TZ_BACKEND_CPU as u32;
    // A stream without a store has no files to choose for.
    let collected = Collected::default();
    c.sink = Some(collect);
    c.sink_user_data = &collected as *const Collected as *mut std::ffi::c_void;
    for choice in [through, around_it] {
        o.store_page_cache = choice;
        let (rc, message) = create_with(&c, &o).map(|_| ()).unwrap_err();
        assert_eq!(rc, tz_status::TZ_ERR_CONFIG as i32, "{message}");
        assert!(message.contains("options.store_page_cache"), "{message}");
    }
    c.sink = None;
    c.sink_user_data = std::ptr::null_mut();
    // The default follows fsync; a caller built against 0.9 to 0.11 (32
    // bytes: the field unread) has the default.
    let mut stores = Vec::new();
    for (name, page_cache, skip_fsync, size, expected) in [
        ("default.zarr", default, 0, 40, around),
        ("default-no-fsync.zarr", default, 1, 40, 0),
        ("through.zarr", through, 0, 40, 0),
        ("around-no-fsync.zarr", around_it, 1, 40, around),
        ("older.zarr", through, 0, 32, around),
        ("older-no-fsync.zarr", around_it, 1, 32, 0),
    ] {
        let path = dir.path().join(name);
        let c_path = cstring(path.to_str().unwrap());
        c.store_path = c_path.as_ptr();
        c.store_skip_fsync = skip_fsync;
        o.store_page_cache = page_cache;
        o.struct_size = size;
        let before = tiledzarr::sink::fs_unbuffered_files();
        let s = create_with(&c, &o).unwrap_or_else(|(_, m)| panic!("{name}: {m}"));
        assert_eq!(finish(s, before), (SHARDS, expected), "{name}");
        stores.push(support::store_files(&path));
    }
    assert!(stores.iter().all(|s| *s == stores[0]), "the stores differ");
    // The estimate counts the buffers where shard files go around the
    // page cache: one per writing thread (one per core, eight at most,
    // none on one core) and the delivery thread's, 1 MiB and room to
    // align each.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let writing = if cores < 2 { 0 } else { cores.min(8) as u64 };
    let path = cstring(dir.path().join("estimated.zarr").to_str().unwrap());
    c.store_path = path.as_ptr();
    c.store_skip_fsync = 0;
    o.struct_size = 40;
    let mut host = Vec::new();
    for choice in [through, around_it, default] {
        o.store_page_cache = choice;
        let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
        let rc = tz_estimate_memory_with(&c, std::ptr::null(), &o, plan.as_mut_ptr());
        assert_eq!(rc, 0, "{}", last_error());
        host.push(unsafe { plan.assume_init() }.host_bytes);
    }
    assert_eq!(host[1] - host[0], (writing + 1) * ((1 << 20) + 4096));
    assert_eq!(host[2], host[1], "the default with fsync goes around it");
    // A value outside the enum names the field, with a store too.
    let path = cstring(dir.path().join("bad.zarr").to_str().unwrap());
    c.store_path = path.as_ptr();
    o.struct_size = 40;
    o.store_page_cache = 3;
    let (rc, message) = create_with(&c, &o).map(|_| ()).unwrap_err();
    assert_eq!(rc, tz_status::TZ_ERR_CONFIG as i32, "{message}");
    assert!(message.contains("options.store_page_cache"), "{message}");
    assert!(
        message.contains("unknown tz_page_cache value 3"),
        "{message}"
    );
}
