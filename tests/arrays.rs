//! Streams of several arrays: positions of a time-lapse, a plate's fields,
//! two cameras.
//!
//! * A property test against a model that writes each array alone: random
//!   numbers of arrays, shapes, codecs and interleavings of their frames;
//!   every shard of every array must be the one a stream of that array
//!   alone emits, byte for byte (index included).
//! * Three stores written through the C API with frames interleaved as an
//!   acquisition produces them (a collection of positions visited in turn,
//!   a plate's fields, two cameras of different shapes), each left with its
//!   configuration and each array's raw input for
//!   `tests/readback/check_arrays.py` (zarr-python, tensorstore, the
//!   OME-NGFF validators, ome-zarr-py) when `TZ_ARRAYS_DIR` is set.
//! * Bad input: an array that does not exist, a full bounded array, a key
//!   that names no array.
//! * The staging a writer that waits takes in a stream of many arrays.

mod support;

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tiledzarr::config::{ArraysConfig, StreamConfig};
use tiledzarr::ffi::*;
use tiledzarr::shard::Shard;
use tiledzarr::Stream;

/// Shard files by (array, level, coordinate).
type Shards = BTreeMap<(u32, u32, Vec<u64>), Vec<u8>>;

fn collector() -> (Arc<Mutex<Shards>>, Box<dyn tiledzarr::sink::ShardSink>) {
    let all = Arc::new(Mutex::new(Shards::new()));
    let into = all.clone();
    let sink = move |s: &Shard<'_>| -> tiledzarr::Result<()> {
        let bytes = s.parts().concat();
        let old = into
            .lock()
            .unwrap()
            .insert((s.array, s.level, s.coord.to_vec()), bytes);
        assert!(
            old.is_none(),
            "shard {:?} of array {} emitted twice",
            s.coord,
            s.array
        );
        Ok(())
    };
    (all, Box::new(sink))
}

/// Deterministic, somewhat compressible bytes for array `array`.
fn bytes_of(array: usize, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            let x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (array as u64 * 7919);
            if i % 3 == 0 {
                (x >> 59) as u8
            } else {
                (i / 5 + array * 31) as u8
            }
        })
        .collect()
}

#[path = "arrays/alone.rs"]
mod alone;

// ---- the C API: three acquisitions, read back by other readers ----

/// The backend the acquisitions run on: `TZ_TEST_BACKEND` (cpu by default;
/// a GPU machine runs them on gpu and its stores are read back as these).
fn backend() -> String {
    std::env::var("TZ_TEST_BACKEND").unwrap_or_else(|_| "cpu".into())
}

struct Fixture {
    name: &'static str,
    config: serde_json::Value,
    /// The writes in acquisition order: (key, frames of that write, whether
    /// they are skipped: dropped frames, read as the fill value).
    writes: Vec<(String, usize, bool)>,
}

fn dims(t: u64, t_tile: u64, extra: &[(&str, u64, u64, u64)]) -> serde_json::Value {
    let mut d =
        vec![serde_json::json!({"name": "t", "size": t, "tile": t_tile, "tiles_per_shard": 2})];
    for &(n, size, tile, tps) in extra {
        d.push(serde_json::json!({"name": n, "size": size, "tile": tile, "tiles_per_shard": tps}));
    }
    serde_json::Value::Array(d)
}

fn fixtures() -> Vec<Fixture> {
    let yx = [("y", 64, 32, 2), ("x", 48, 16, 3)];
    // Four positions, two channels, visited in turn for five time points.
    let positions: Vec<String> = (0..4).map(|p| format!("Pos{p}")).collect();
    let mut arrays = Vec::new();
    for (i, key) in positions.iter().enumerate() {
        let mut a = serde_json::json!({"key": key, "dtype": "uint16",
            "dimensions": dims(0, 2, &[("c", 2, 1, 2), yx[0], yx[1]])});
        if i == 1 {
            a["multiscale"] = serde_json::json!({"levels": 2});
        }
        if i == 0 {
            a["frame_metadata"] = serde_json::json!({"max_bytes": 96});
        }
        arrays.push(a);
    }
    let mut writes = Vec::new();
    for t in 0..5 {
        for key in &positions {
            // Both channels of one time point; the position with a pyramid
            // drops time point 1 (half an epoch: filled in staging).
            writes.push((key.clone(), 2, t == 1 && key == "Pos1"));
        }
    }
    let collection = Fixture {
        name: "positions",
        config: serde_json::json!({"arrays": arrays, "collection": "bioformats2raw",
                                   "backend": backend(), "max_latency_ms": 20}),
        writes,
    };
    // A plate: two rows, three columns, three wells, four fields.
    let fields = ["A/1/0", "A/1/1", "A/2/0", "B/3/0"];
    let arrays: Vec<_> = fields
        .iter()
        .map(|k| {
            let mut a = serde_json::json!({"key": k, "dtype": "uint16", "dimensions": dims(3, 1, &yx),
                                    "codec": {"name": "blosc", "cname": "lz4", "level": 5}});
            if *k == "A/1/0" {
                a["frame_metadata"] = serde_json::json!({"max_bytes": 128});
            }
            a
        })
        .collect();
    let mut writes = Vec::new();
    for t in 0..3 {
        for k in fields {
            // One field's camera drops its second frame (a whole epoch).
            writes.push((k.to_string(), 1, t == 1 && k == "A/2/0"));
        }
    }
    let plate = Fixture {
        name: "plate",
        config: serde_json::json!({"arrays": arrays, "backend": backend(), "plate": {
            "name": "screen", "rows": ["A", "B"], "columns": ["1", "2", "3"],
            "wells": [{"row": "A", "column": "1", "fields": ["A/1/0", "A/1/1"]},
                      {"row": "A", "column": "2", "fields": ["A/2/0"]},
                      {"row": "B", "column": "3", "fields": ["B/3/0"]}],
            "acquisitions": [{"id": 0, "name": "first"}]}}),
        writes,
    };
    // Two cameras of different shapes and types, one an OME image, the
    // other a plain array in a nested group; the second bounded.
    let cameras = Fixture {
        name: "cameras",
        config: serde_json::json!({"arrays": [
            {"key": "left", "dtype": "uint16", "ome": true,
             "dimensions": dims(0, 4, &[("y", 96, 32, 2), ("x", 80, 40, 1)])},
            {"key": "views/right", "dtype": "uint8",
             "codec": {"name": "gzip", "level": 3},
             "dimensions": dims(9, 2, &[("y", 40, 16, 2), ("x", 64, 64, 1)])}],
            "backend": backend()}),
        // The left camera drops frames 4 to 7 at once (a whole epoch: its
        // chunks stay empty) and frame 9 (a part of an epoch).
        writes: (0..9)
            .flat_map(|t| {
                let left = match t {
                    4 => ("left".to_string(), 4, true),
                    5..=7 => ("left".to_string(), 0, false),
                    _ => ("left".to_string(), 1, false),
                };
                [left, ("views/right".to_string(), 1, false)]
            })
            .chain([
                ("left".to_string(), 1, true),
                ("left".to_string(), 2, false),
            ])
            .collect(),
    };
    vec![collection, plate, cameras]
}

/// The calling thread's last error message.
fn last_error() -> String {
    let p = tz_last_error();
    if p.is_null() {
        return String::new();
    }
    // SAFETY: tz_last_error returns a NUL-terminated string (not NULL:
    // checked) that lives until the thread's next call.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

fn frame_bytes(array: &serde_json::Value) -> usize {
    let elem = if array["dtype"] == "uint8" { 1 } else { 2 };
    array["dimensions"].as_array().unwrap()[1..]
        .iter()
        .map(|d| d["size"].as_u64().unwrap() as usize)
        .product::<usize>()
        * elem
}

/// Writes `f` through the C API into `dir/<name>.zarr`, its raw inputs into
/// `dir/<name>.raw/<i>.raw`; returns the manifest line.
fn write_fixture(f: &Fixture, dir: &Path) -> String {
    let store = dir.join(format!("{}.zarr", f.name));
    let raw_dir = dir.join(format!("{}.raw", f.name));
    std::fs::create_dir_all(&raw_dir).unwrap();
    let mut config = f.config.clone();
    config["store"] = serde_json::json!({"path": store, "overwrite": true});
    let config_path = dir.join(format!("{}.json", f.name));
    std::fs::write(&config_path, config.to_string()).unwrap();
    let json = CString::new(config.to_string()).unwrap();
    let mut s: *mut tz_stream = std::ptr::null_mut();
    assert_eq!(
        tz_create_json(json.as_ptr(), None, std::ptr::null_mut(), &mut s),
        0
    );
    let arrays = config["arrays"].as_array().unwrap();
    let mut raws: Vec<Vec<u8>> = vec![Vec::new(); arrays.len()];
    // Each frame's metadata where its array keeps it (null: none given).
    let mut metadata: Vec<Vec<serde_json::Value>> = vec![Vec::new(); arrays.len()];
    for (key, frames, skipped) in &f.writes {
        let key_c = CString::new(key.as_str()).unwrap();
        let mut index = u32::MAX;
        assert_eq!(tz_array_index(s, key_c.as_ptr(), &mut index), 0);
        let i = index as usize;
        assert_eq!(arrays[i]["key"], key.as_str());
        let n = frame_bytes(&arrays[i]) * frames;
        let at = raws[i].len();
        let data = if *skipped {
            vec![0; n]
        } else {
            bytes_of(i, at + n)[at..].to_vec()
        };
        let written = if *skipped {
            // Non-blocking, as tz_write: the caller comes back for the rest.
            let mut done = 0;
            while done < n as i64 {
                let took = tz_skip(s, index, n as u64 - done as u64);
                assert!(took >= 0, "{}: {key}: tz_skip {took}", f.name);
                if took == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                done += took;
            }
            done
        } else {
            tz_write_all_to(s, index, data.as_ptr() as *const c_void, n, -1)
        };
        assert_eq!(written, n as i64, "{}: {key}", f.name);
        raws[i].extend_from_slice(&data);
        if arrays[i].get("frame_metadata").is_some() {
            for _ in 0..*frames {
                let frame = metadata[i].len() as u64;
                // A dropped frame gets metadata too: when it was due.
                let m = serde_json::json!({"frame": frame, "time_s": frame as f64 * 0.25,
                                           "stage": {"x_um": 10.5, "y_um": -3.0}, "dropped": skipped});
                let text = CString::new(m.to_string()).unwrap();
                let status = tz_frame_metadata(s, index, frame, text.as_ptr());
                assert_eq!(status, 0, "{}: {key}: {}", f.name, last_error());
                metadata[i].push(m);
            }
        }
    }
    assert_eq!(tz_flush(s), 0, "{}", f.name);
    tz_destroy(s);
    for (i, raw) in raws.iter().enumerate() {
        std::fs::write(raw_dir.join(format!("{i}.raw")), raw).unwrap();
        if !metadata[i].is_empty() {
            let path = raw_dir.join(format!("{i}.frame_metadata.json"));
            std::fs::write(
                path,
                serde_json::Value::from(metadata[i].clone()).to_string(),
            )
            .unwrap();
        }
    }
    format!(
        "{}\t{}\t{}",
        store.display(),
        config_path.display(),
        raw_dir.display()
    )
}

#[test]
fn acquisitions_through_the_c_api_leave_stores_for_the_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("TZ_ARRAYS_DIR").map_or(tmp.path().to_path_buf(), Into::into);
    std::fs::create_dir_all(&dir).unwrap();
    let mut manifest = std::fs::File::create(dir.join("manifest.tsv")).unwrap();
    for f in fixtures() {
        let line = write_fixture(&f, &dir);
        writeln!(manifest, "{line}").unwrap();
        let store = dir.join(format!("{}.zarr", f.name));
        assert!(
            store.join("zarr.json").is_file(),
            "{}: no root group",
            f.name
        );
    }
}

#[test]
fn bad_arrays_are_refused_and_the_stream_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"arrays": [
        {"key": "a", "dtype": "uint8", "dimensions": dims(2, 1, &[("y", 4, 4, 1), ("x", 4, 4, 1)])},
        {"key": "b", "dtype": "uint8", "dimensions": dims(0, 1, &[("y", 4, 4, 1), ("x", 4, 4, 1)])}],
        "backend": "cpu", "store": {"path": tmp.path().join("s.zarr")}});
    let json = CString::new(config.to_string()).unwrap();
    let mut s: *mut tz_stream = std::ptr::null_mut();
    assert_eq!(
        tz_create_json(json.as_ptr(), None, std::ptr::null_mut(), &mut s),
        0
    );
    let frame = [7u8; 16];
    let invalid = -(tz_status::TZ_ERR_INVALID_ARGUMENT as i64);
    assert_eq!(
        tz_write_to(s, 2, frame.as_ptr() as *const c_void, 16),
        invalid
    );
    let msg = unsafe { std::ffi::CStr::from_ptr(tz_stream_last_error(s)) }.to_string_lossy();
    assert!(msg.contains("array 2 does not exist"), "{msg}");
    let mut index = 9;
    let nope = CString::new("c").unwrap();
    assert_eq!(
        tz_array_index(s, nope.as_ptr(), &mut index),
        tz_status::TZ_ERR_INVALID_ARGUMENT as i32
    );
    let mut count = 0;
    assert_eq!(tz_array_count(s, &mut count), 0);
    assert_eq!(count, 2);
    // Array a holds two frames; the third is refused, b takes more.
    for _ in 0..2 {
        assert_eq!(
            tz_write_all_to(s, 0, frame.as_ptr() as *const c_void, 16, -1),
            16
        );
    }
    let overflow = -(tz_status::TZ_ERR_OVERFLOW as i64);
    assert_eq!(
        tz_write_to(s, 0, frame.as_ptr() as *const c_void, 16),
        overflow
    );
    for _ in 0..3 {
        assert_eq!(
            tz_write_all_to(s, 1, frame.as_ptr() as *const c_void, 16, -1),
            16
        );
    }
    assert_eq!(tz_flush(s), 0);
    tz_destroy(s);
    let b: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("s.zarr/b/zarr.json")).unwrap())
            .unwrap();
    assert_eq!(b["shape"][0], 3);
}

#[test]
fn a_bad_layout_is_refused_naming_the_rule() {
    let bad = serde_json::json!({"arrays": [
        {"key": "A/1/0", "dtype": "uint8", "dimensions": dims(1, 1, &[("y", 4, 4, 1), ("x", 4, 4, 1)])}],
        "plate": {"rows": ["A"], "columns": ["1"],
                  "wells": [{"row": "B", "column": "1", "fields": ["A/1/0"]}]}});
    let e = StreamConfig::from_json(&bad.to_string())
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(e.field, "plate.wells[0].row");
    let json = CString::new(bad.to_string()).unwrap();
    let mut s: *mut tz_stream = std::ptr::null_mut();
    let rc = tz_create_json(json.as_ptr(), None, std::ptr::null_mut(), &mut s);
    assert_eq!(rc, tz_status::TZ_ERR_CONFIG as i32);
    assert!(s.is_null());
}

#[test]
fn arrays_holding_partial_epochs_get_staging_past_the_budget() {
    // Twelve arrays of one shape share a lane whose staging budget holds a
    // few epochs; each is written a frame at a time, in turn, with epochs
    // of two frames: all twelve hold a partial epoch at once.
    let arrays: Vec<_> = (0..12)
        .map(|i| {
            serde_json::json!({"key": format!("p{i}"), "dtype": "uint8", "dimensions": [
                {"name": "t", "size": 0, "tile": 2, "tiles_per_shard": 1},
                {"name": "y", "size": 64, "tile": 32, "tiles_per_shard": 2},
                {"name": "x", "size": 64, "tile": 64, "tiles_per_shard": 1}]})
        })
        .collect();
    let cfg = serde_json::json!({"arrays": arrays, "backend": "cpu",
                                 "staging_bytes": 4 * 2 * 64 * 64});
    let multi = ArraysConfig::from_json(&cfg.to_string()).unwrap();
    let (got, sink) = collector();
    let mut s = Stream::with_arrays(&multi, Some(sink)).unwrap();
    let wait = Some(std::time::Duration::from_secs(30));
    for t in 0..6 {
        for a in 0..12 {
            let frame = vec![(a * 16 + t) as u8; 64 * 64];
            let n = s.write_blocking_to(a, &frame, wait).unwrap();
            assert_eq!(n, frame.len(), "array {a}, frame {t}: no staging came");
        }
    }
    s.finish().unwrap();
    // Each array: three epochs, each a shard row of one shard.
    assert_eq!(got.lock().unwrap().len(), 12 * 3);
}

#[test]
fn frame_metadata_that_cannot_be_kept_is_refused_and_the_stream_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let array = |key: &str, metadata: Option<u32>, ome: bool| {
        let mut a = serde_json::json!({"key": key, "dtype": "uint8", "ome": ome, "dimensions": [
            {"name": "t", "size": 0, "tile": 2, "tiles_per_shard": 1},
            {"name": "y", "size": 16, "tile": 16, "tiles_per_shard": 1},
            {"name": "x", "size": 16, "tile": 16, "tiles_per_shard": 1}]});
        if let Some(m) = metadata {
            a["frame_metadata"] = serde_json::json!({"max_bytes": m});
        }
        a
    };
    let create = |arrays: Vec<serde_json::Value>, store: bool| {
        let mut cfg = serde_json::json!({"arrays": arrays, "backend": "cpu"});
        if store {
            cfg["store"] =
                serde_json::json!({"path": tmp.path().join("s.zarr"), "overwrite": true});
        }
        let config = StreamConfig::from_json(&cfg.to_string()).map_err(|e| e.to_string())?;
        Stream::create(&config, Some(collector().1)).map_err(|e| e.to_string())
    };
    // Refused at create: where it cannot go.
    let e = create(vec![array("a", Some(64), false)], true)
        .err()
        .unwrap();
    assert!(
        e.contains("frame_metadata") && e.contains("OME image"),
        "{e}"
    );
    let e = create(vec![array("a", Some(0), true)], true).err().unwrap();
    assert!(e.contains("frame_metadata.max_bytes"), "{e}");
    let e = create(vec![array("a", Some(64), true)], false)
        .err()
        .unwrap();
    assert!(e.contains("store"), "{e}");

    let mut s = create(
        vec![array("a", Some(64), true), array("b", None, true)],
        true,
    )
    .unwrap();
    let frame = vec![7u8; 256];
    s.write_blocking_to(0, &frame, None).unwrap();
    s.frame_metadata(0, 0, r#"{"t": 0.5}"#).unwrap();
    let refused = |e: tiledzarr::Error, what: &str| {
        assert!(matches!(e, tiledzarr::Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains(what), "{e}");
    };
    refused(s.frame_metadata(0, 1, "{}").unwrap_err(), "never written");
    refused(s.frame_metadata(0, 0, "[1, 2]").unwrap_err(), "JSON object");
    refused(s.frame_metadata(0, 0, "{oops").unwrap_err(), "not JSON");
    let long = format!(r#"{{"note": "{}"}}"#, "x".repeat(64));
    refused(s.frame_metadata(0, 0, &long).unwrap_err(), "max_bytes");
    s.write_blocking_to(1, &frame, None).unwrap();
    refused(
        s.frame_metadata(1, 0, "{}").unwrap_err(),
        "keeps no per-frame metadata",
    );
    refused(s.frame_metadata(2, 0, "{}").unwrap_err(), "does not exist");
    // Rows of two frames (one epoch each): the batch of frames 2 and 3
    // hands row 0 on; frames 4 to 6 wait in a buffer of two epochs.
    for _ in 0..5 {
        s.write_blocking_to(0, &frame, None).unwrap();
    }
    refused(s.frame_metadata(0, 1, "{}").unwrap_err(), "too late");
    s.frame_metadata(0, 5, r#"{"t": 5}"#).unwrap();
    s.finish().unwrap();
    let rows = std::fs::read(tmp.path().join("s.zarr/a/frame_metadata/c/0/0")).unwrap();
    assert_eq!(&rows[..10], b"{\"t\":0.5}\0");
    let rows = std::fs::read(tmp.path().join("s.zarr/a/frame_metadata/c/2/0")).unwrap();
    assert_eq!(rows.len(), 2 * 64);
    assert_eq!(&rows[64..71], br#"{"t":5}"#);
    let doc =
        std::fs::read_to_string(tmp.path().join("s.zarr/a/frame_metadata/zarr.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["shape"], serde_json::json!([6, 64]));
}

#[path = "arrays/c_structures.rs"]
mod c_structures;

#[path = "arrays/staging.rs"]
mod staging;
