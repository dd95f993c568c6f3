//! Bad input through the C API: every case returns a clear status and a
//! message naming the problem, never crashes, and never leaves behind a
//! shard that claims to be complete when it is not.

mod common;

use common::*;
use std::ffi::{c_void, CStr};
use std::path::Path;
use tiledzarr::ffi::*;

const OK: i32 = tz_status::TZ_OK as i32;

/// A small valid unbounded u16 config, with `extra` JSON members appended.
fn json_with(extra: &str) -> String {
    format!(
        r#"{{"dtype": "uint16", "dimensions": [
            {{"size": 0, "tile": 2, "tiles_per_shard": 2}},
            {{"size": 8, "tile": 4, "tiles_per_shard": 2}}]{extra}}}"#
    )
}

fn store_json(path: &Path, overwrite: bool) -> String {
    json_with(&format!(
        r#", "store": {{"path": {:?}, "overwrite": {overwrite}}}"#,
        path.to_str().unwrap()
    ))
}

fn assert_create_fails(json: &str, status: tz_status, words: &[&str]) {
    let (rc, msg) = create_json(json, Some(&Collected::default())).unwrap_err();
    assert_eq!(rc, code(status), "{json}: {msg}");
    for w in words {
        assert!(msg.contains(w), "message {msg:?} should name {w:?}");
    }
}

#[test]
fn null_pointers_are_refused_by_every_entry_point() {
    let null = std::ptr::null_mut();
    let mut s: *mut tz_stream = std::ptr::null_mut();
    let nul = code(tz_status::TZ_ERR_NULL_ARGUMENT);
    assert_eq!(tz_config_init(std::ptr::null_mut()), nul);
    assert!(last_error().contains("config is NULL"));
    assert_eq!(tz_create(std::ptr::null(), &mut s), nul);
    assert!(last_error().contains("config is NULL"));
    let mut cfg = std::mem::MaybeUninit::<tz_config>::uninit();
    assert_eq!(tz_config_init(cfg.as_mut_ptr()), OK);
    assert_eq!(tz_create(cfg.as_ptr(), std::ptr::null_mut()), nul);
    assert!(last_error().contains("out is NULL"));
    assert_eq!(tz_create_json(std::ptr::null(), None, null, &mut s), nul);
    assert!(last_error().contains("config_json is NULL"));
    assert_eq!(
        tz_write(std::ptr::null_mut(), b"ab".as_ptr() as _, 2),
        -(nul as i64)
    );
    assert!(last_error().contains("stream is NULL"));
    assert_eq!(
        tz_write_all(std::ptr::null_mut(), b"ab".as_ptr() as _, 2, 10),
        -(nul as i64)
    );
    assert_eq!(tz_flush(std::ptr::null_mut()), nul);
    assert_eq!(tz_get_metrics(std::ptr::null(), std::ptr::null_mut()), nul);
    assert_eq!(
        tz_get_staging_metrics(std::ptr::null(), std::ptr::null_mut()),
        nul
    );
    tz_destroy(std::ptr::null_mut());
    assert_eq!(
        unsafe { CStr::from_ptr(tz_stream_last_error(std::ptr::null())) }.to_bytes(),
        b""
    );

    // A live stream with NULL data or output pointers.
    let sink = Collected::default();
    let s = create_json(&json_with(""), Some(&sink)).unwrap();
    assert_eq!(tz_write(s, std::ptr::null(), 4), -(nul as i64));
    assert!(stream_error(s).contains("data is NULL"));
    assert_eq!(tz_write(s, std::ptr::null(), 0), 0, "nbytes = 0 is fine");
    assert_eq!(tz_get_metrics(s, std::ptr::null_mut()), nul);
    assert!(stream_error(s).contains("out is NULL"));
    assert_eq!(tz_get_staging_metrics(s, std::ptr::null_mut()), nul);
    assert!(stream_error(s).contains("out is NULL"));
    // The stream still works after refused calls.
    assert_eq!(tz_write(s, [1u8; 16].as_ptr() as _, 16), 16);
    assert_eq!(tz_flush(s), OK);
    let mut m = std::mem::MaybeUninit::<tz_staging_metrics>::uninit();
    assert_eq!(tz_get_staging_metrics(s, m.as_mut_ptr()), OK);
    // SAFETY: filled by the call above.
    let m = unsafe { m.assume_init() };
    assert!(m.staging_bytes > 0 && m.staging_peak_bytes >= m.staging_bytes);
    assert_eq!(m.busy_writes, 0, "nothing was refused for want of staging");
    tz_destroy(s);
    assert_eq!(sink.shards.lock().unwrap().len(), 1);
}

#[test]
fn bad_configurations_name_the_field_and_rule() {
    use tz_status::TZ_ERR_CONFIG as C;
    let cases: Vec<(String, &[&str])> = vec![
        (r#"{"dtype": "uint16", "dimensions": [{"size": 4, "tile": 2}"#.into(), &["malformed JSON"]),
        (json_with(r#", "colour": "red""#), &["colour"]),
        // Text after the configuration is refused, not silently dropped.
        (r#"{"dtype": "uint8", "dimensions": [{"size": 4, "tile": 2}]} garbage"#.into(), &["json", "text after the configuration"]),
        (format!("{} {}", json_with(""), json_with("")), &["json", "text after the configuration"]),
        (r#"{"dtype": "uint12", "dimensions": [{"size": 4, "tile": 2}]}"#.into(), &["dtype", "uint12"]),
        (json_with(r#", "codec": {"name": "lz4"}"#), &["codec", "lz4"]),
        (json_with(r#", "backend": "fpga""#), &["backend", "fpga"]),
        (r#"{"dtype": "uint8", "dimensions": []}"#.into(), &["rank", "got 0"]),
        (
            format!(r#"{{"dtype": "uint8", "dimensions": [{}]}}"#, vec![r#"{"size": 1, "tile": 1}"#; 33].join(",")),
            &["rank", "got 33"],
        ),
        (r#"{"dtype": "uint8", "dimensions": [{"size": 4, "tile": 2}, {"size": 0, "tile": 2}]}"#.into(), &["dimensions[1].size"]),
        (r#"{"dtype": "uint8", "dimensions": [{"size": 4, "tile": 2}, {"size": 4, "tile": 0}]}"#.into(), &["dimensions[1].tile", "at least 1"]),
        (json_with(r#", "codec": {"name": "zstd", "level": 23}"#), &["codec.level", "23"]),
        (json_with(r#", "codec": {"name": "zstd", "level": -8}"#), &["codec.level", "-8"]),
        (json_with(r#", "codec": {"name": "blosc", "level": 10}"#), &["codec.level", "0 to 9", "10"]),
        (json_with(r#", "codec": {"name": "blosc", "level": -1}"#), &["codec.level", "-1"]),
        (json_with(r#", "codec": {"name": "blosc", "shuffle": "nibble"}"#), &["codec", "nibble"]),
        (json_with(r#", "codec": {"name": "blosc", "cname": "snappy"}"#), &["codec", "snappy"]),
        (json_with(r#", "codec": {"name": "gzip", "level": 10}"#), &["codec.level", "0 to 9", "10"]),
        (json_with(r#", "codec": {"name": "gzip", "level": -1}"#), &["codec.level", "-1"]),
        (json_with(r#", "codec": {"name": "gzip", "shuffle": "byte"}"#), &["codec", "shuffle"]),
        (json_with(r#", "codec": {"name": "zstd", "cname": "lz4"}"#), &["codec", "cname"]),
        (
            r#"{"dtype": "uint8", "dimensions": [{"size": 4294967296, "tile": 1}, {"size": 2147483648, "tile": 1}, {"size": 4, "tile": 1}]}"#.into(),
            &["dimensions[2].size", "element count", "overflows"],
        ),
        (
            r#"{"dtype": "uint64", "dimensions": [{"size": 4294967296, "tile": 1}, {"size": 1073741824, "tile": 1}]}"#.into(),
            &["dimensions[1].size", "byte count", "overflows"],
        ),
        (
            r#"{"dtype": "uint8", "dimensions": [{"size": 0, "tile": 65536, "tiles_per_shard": 1}, {"size": 65536, "tile": 65536}]}"#.into(),
            &["dimensions[1].tile", "2^31-1"],
        ),
        (r#"{"dtype": "uint8", "dimensions": [{"size": 0, "tile": 2, "tiles_per_shard": 0}]}"#.into(), &["tiles_per_shard", "unbounded"]),
        (json_with(r#", "staging_bytes": 10"#), &["staging_bytes", "two epochs"]),
        (r#"{"dimensions": [{"size": 4, "tile": 2}]}"#.into(), &["dtype"]),
    ];
    for (json, words) in cases {
        assert_create_fails(&json, C, words);
    }
}

#[test]
fn a_tz_config_is_checked_like_json() {
    let mut cfg = std::mem::MaybeUninit::<tz_config>::uninit();
    assert_eq!(tz_config_init(cfg.as_mut_ptr()), OK);
    let mut cfg = unsafe { cfg.assume_init() };
    let mut s = std::ptr::null_mut();
    // rank 0
    assert_eq!(tz_create(&cfg, &mut s), code(tz_status::TZ_ERR_CONFIG));
    assert!(last_error().contains("rank"), "{}", last_error());
    let dims = [c_dim(0, 4, 1), c_dim(16, 0, 1)];
    cfg.rank = 2;
    cfg.dimensions = std::ptr::null();
    assert_eq!(
        tz_create(&cfg, &mut s),
        code(tz_status::TZ_ERR_NULL_ARGUMENT)
    );
    assert!(last_error().contains("dimensions is NULL"));
    cfg.dimensions = dims.as_ptr();
    assert_eq!(tz_create(&cfg, &mut s), code(tz_status::TZ_ERR_CONFIG));
    assert!(
        last_error().contains("dimensions[1].tile"),
        "{}",
        last_error()
    );
    cfg.dtype = 99;
    assert_eq!(tz_create(&cfg, &mut s), code(tz_status::TZ_ERR_CONFIG));
    assert!(last_error().contains("dtype"));
    cfg.dtype = tz_dtype::TZ_DTYPE_UINT16 as u32;
    cfg.codec = 7;
    assert_eq!(tz_create(&cfg, &mut s), code(tz_status::TZ_ERR_CONFIG));
    assert!(last_error().contains("codec"));
    cfg.codec = 0;
    cfg.backend = 5;
    assert_eq!(tz_create(&cfg, &mut s), code(tz_status::TZ_ERR_CONFIG));
    assert!(last_error().contains("backend"));
    cfg.backend = 0;
    let dims = [c_dim(0, 4, 1), c_dim(16, 4, 1)];
    cfg.dimensions = dims.as_ptr();
    // Blosc takes levels 0 to 9 from the same field as zstd.
    cfg.codec = tz_codec::TZ_CODEC_BLOSC as u32;
    cfg.level = 12;
    assert_eq!(tz_create(&cfg, &mut s), code(tz_status::TZ_ERR_CONFIG));
    assert!(last_error().contains("codec.level"), "{}", last_error());
    // So does gzip.
    cfg.codec = tz_codec::TZ_CODEC_GZIP as u32;
    assert_eq!(tz_create(&cfg, &mut s), code(tz_status::TZ_ERR_CONFIG));
    assert!(last_error().contains("codec.level"), "{}", last_error());
    cfg.level = 1;
    // Neither store nor sink: nothing would keep the data.
    assert_eq!(
        tz_create(&cfg, &mut s),
        code(tz_status::TZ_ERR_INVALID_ARGUMENT)
    );
    assert!(last_error().contains("sink or a store"));
    assert!(s.is_null());
}

#[path = "c_api_errors/backends.rs"]
mod backends;

#[test]
fn store_paths_that_cannot_be_created_or_exist_already() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let under_file = file.join("store.zarr");
    assert_create_fails(
        &store_json(&under_file, false),
        tz_status::TZ_ERR_IO,
        &[under_file.to_str().unwrap()],
    );
    let existing = dir.path().join("existing.zarr");
    std::fs::create_dir(&existing).unwrap();
    std::fs::write(existing.join("keep.txt"), b"precious").unwrap();
    assert_create_fails(
        &store_json(&existing, false),
        tz_status::TZ_ERR_EXISTS,
        &[existing.to_str().unwrap(), "overwrite"],
    );
    // overwrite never deletes a folder that is not a store.
    assert_create_fails(
        &store_json(&existing, true),
        tz_status::TZ_ERR_EXISTS,
        &["keep.txt", "not written by TiledZarr"],
    );
    assert!(existing.join("keep.txt").exists());
    // ...but does replace a store.
    std::fs::remove_file(existing.join("keep.txt")).unwrap();
    std::fs::write(existing.join("zarr.json"), br#"{"zarr_format": 3}"#).unwrap();
    let s = create_json(&store_json(&existing, true), None).unwrap();
    assert_eq!(tz_flush(s), OK);
    tz_destroy(s);
    let meta = std::fs::read_to_string(existing.join("zarr.json")).unwrap();
    assert!(meta.contains("sharding_indexed"));
}

#[test]
fn writing_past_the_end_keeps_everything_before() {
    // 3 x 8 u16 = 48 bytes.
    let json = r#"{"dtype": "uint16", "dimensions": [{"size": 3, "tile": 2}, {"size": 8, "tile": 4, "tiles_per_shard": 2}]}"#;
    let sink = Collected::default();
    let s = create_json(json, Some(&sink)).unwrap();
    let data: Vec<u8> = (0..60u8).collect();
    // tz_write takes what is free (the stream's first staging buffer is
    // handed on after one epoch), tz_write_all the rest of what fits.
    let first = tz_write(s, data.as_ptr() as _, 60);
    assert!((1..=48).contains(&first), "{first}");
    if first < 48 {
        let rest = &data[first as usize..];
        assert_eq!(
            first + tz_write_all(s, rest.as_ptr() as _, rest.len(), -1),
            48
        );
    }
    let ovf = -(code(tz_status::TZ_ERR_OVERFLOW) as i64);
    assert_eq!(tz_write(s, data.as_ptr() as _, 1), ovf);
    assert!(stream_error(s).contains("past the end"));
    assert_eq!(tz_write(s, data.as_ptr() as _, 1), ovf);
    assert_eq!(tz_flush(s), OK);
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), OK);
    let m = unsafe { m.assume_init() };
    assert_eq!(m.bytes_in, 48);
    tz_destroy(s);
    // Two shard rows of one shard each; the data before the end is intact.
    let shards = sink.shards.lock().unwrap();
    assert_eq!(shards.len(), 2);
    let decoded = decode_u16_rows(&shards, 3, 8);
    assert_eq!(decoded, data[..48]);
}

/// Decodes the tiny 2-D array of `writing_past_the_end_keeps_everything_before`
/// (tile 2x4, 1x2 tiles per shard, index at the end) by hand.
fn decode_u16_rows(
    shards: &std::collections::HashMap<Vec<u64>, Vec<u8>>,
    rows: usize,
    cols: usize,
) -> Vec<u8> {
    let mut out = vec![0u8; rows * cols * 2];
    for (coord, file) in shards {
        let (data, index) = file.split_at(file.len() - (2 * 16 + 4));
        assert_eq!(crc32c::crc32c(&index[..32]).to_le_bytes(), index[32..]);
        for chunk in 0..2 {
            let off =
                u64::from_le_bytes(index[chunk * 16..chunk * 16 + 8].try_into().unwrap()) as usize;
            let n = u64::from_le_bytes(index[chunk * 16 + 8..chunk * 16 + 16].try_into().unwrap())
                as usize;
            let tile = zstd::bulk::decompress(&data[off..off + n], 16).unwrap();
            for r in 0..2 {
                let row = coord[0] as usize * 2 + r;
                if row < rows {
                    let col = chunk * 4;
                    out[(row * cols + col) * 2..(row * cols + col + 4) * 2]
                        .copy_from_slice(&tile[r * 8..r * 8 + 8]);
                }
            }
        }
    }
    out
}

#[test]
fn writes_after_flush_are_finished_and_a_second_flush_repeats_the_first() {
    let sink = Collected::default();
    let s = create_json(&json_with(""), Some(&sink)).unwrap();
    assert_eq!(tz_write_all(s, [7u8; 40].as_ptr() as _, 40, -1), 40);
    assert_eq!(tz_flush(s), OK);
    let fin = -(code(tz_status::TZ_ERR_FINISHED) as i64);
    assert_eq!(tz_write(s, [7u8; 4].as_ptr() as _, 4), fin);
    assert!(stream_error(s).contains("finished"));
    assert_eq!(tz_write(s, std::ptr::null(), 0), fin, "even an empty write");
    assert_eq!(tz_write_all(s, [7u8; 4].as_ptr() as _, 4, 0), fin);
    assert_eq!(tz_flush(s), OK);
    tz_destroy(s);
}

#[test]
fn a_failing_sink_poisons_the_stream_and_keeps_earlier_shards() {
    // One shard per shard row; fail on the second call (row 1).
    let sink = Collected {
        fail_from: Some((2, 42)),
        ..Default::default()
    };
    let s = create_json(&json_with(""), Some(&sink)).unwrap();
    let row_bytes = 4 * 8 * 2; // tps0 (2) x tile0 (2) planes of 8 u16
    let data: Vec<u8> = Rng(5).bytes(row_bytes * 3);
    let sink_err = -(code(tz_status::TZ_ERR_SINK) as i64);
    let r = write_in_pieces(s, &data, &mut || 24);
    // The failure shows up in a later write or in the flush.
    let flush = tz_flush(s);
    assert!(
        r == Err(sink_err) || flush == code(tz_status::TZ_ERR_SINK),
        "{r:?} {flush}"
    );
    assert_eq!(tz_flush(s), code(tz_status::TZ_ERR_SINK));
    assert_eq!(tz_write(s, data.as_ptr() as _, 2), sink_err);
    let msg = stream_error(s);
    assert!(msg.contains("[1, 0]") && msg.contains("42"), "{msg}");
    tz_destroy(s);
    let shards = sink.shards.lock().unwrap();
    assert_eq!(shards.keys().collect::<Vec<_>>(), [&vec![0, 0]]);
    let file = &shards[&vec![0, 0]];
    let index = &file[file.len() - 68..];
    assert_eq!(crc32c::crc32c(&index[..64]).to_le_bytes(), index[64..]);
}

#[test]
fn disk_full_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("full.zarr");
    let s = create_json(&store_json(&store, false), None).unwrap();
    // The first shard's temporary file leads to a device that is always full.
    std::fs::create_dir_all(store.join("c/0")).unwrap();
    std::os::unix::fs::symlink("/dev/full", store.join("c/0/0.partial")).unwrap();
    let data = Rng(1).bytes(4 * 8 * 2);
    let _ = write_in_pieces(s, &data, &mut || 64);
    assert_eq!(tz_flush(s), code(tz_status::TZ_ERR_IO));
    let msg = stream_error(s);
    assert!(
        msg.contains("c/0/0") && msg.contains("No space left"),
        "{msg}"
    );
    tz_destroy(s);
    assert!(
        !store.join("c/0/0").exists(),
        "no shard claims to be complete"
    );
}

#[test]
fn a_read_only_store_folder_is_permission_denied() {
    if unsafe { libc::geteuid() } == 0 {
        // root ignores file modes; the ENOSPC and unwritable-path tests cover
        // the same I/O error path.
        eprintln!("skipped: running as root, permissions are not enforced");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("ro.zarr");
    let s = create_json(&store_json(&store, false), None).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o555)).unwrap();
    let data = Rng(1).bytes(4 * 8 * 2);
    let _ = write_in_pieces(s, &data, &mut || 64);
    assert_eq!(tz_flush(s), code(tz_status::TZ_ERR_IO));
    let msg = stream_error(s);
    assert!(
        msg.contains(store.to_str().unwrap()) && msg.contains("ermission denied"),
        "{msg}"
    );
    tz_destroy(s);
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn destroy_without_flush_is_prompt_and_writes_no_partial_shard() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("abandoned.zarr");
    // Staging of one shard row per buffer, so that rows are handed on.
    let json = store_json(&store, false).replace(r#""store""#, r#""staging_bytes": 128, "store""#);
    let s = create_json(&json, None).unwrap();
    // Two full shard rows, then half of a third (never complete).
    let row_bytes = 2 * 2 * 8 * 2;
    let data = Rng(3).bytes(2 * row_bytes + row_bytes / 2);
    write_in_pieces(s, &data, &mut || 16).unwrap();
    // Let the pipeline emit at least the first row (the GPU backend hands
    // a batch on when the next one arrives, the CPU backend at once).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
        assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), OK);
        if unsafe { m.assume_init() }.shards_emitted >= 1 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let t = std::time::Instant::now();
    tz_destroy(s);
    assert!(t.elapsed() < std::time::Duration::from_secs(2));
    let files: Vec<_> = walk(&store.join("c"));
    assert!(!files.is_empty() && files.len() <= 2, "{files:?}");
    for (row, f) in files.iter().enumerate() {
        assert!(f.starts_with(store.join(format!("c/{row}"))), "{files:?}");
        // Each file is a complete shard: its index checks out.
        let bytes = std::fs::read(f).unwrap();
        let index = &bytes[bytes.len() - 68..];
        assert_eq!(crc32c::crc32c(&index[..64]).to_le_bytes(), index[64..]);
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(
        meta["shape"][0],
        4 * files.len(),
        "the extent of the emitted shard rows only"
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[path = "c_api_errors/status.rs"]
mod status;
