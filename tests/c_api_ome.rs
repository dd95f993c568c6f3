//! OME-Zarr through the C ABI: a `tz_image` with every field set (axes
//! with kinds, units, scales, translations and downsampling, a storage
//! order, a pyramid, the image's name, attributes, the omero block) beside a `tz_config`
//! written to a store and decoded by `support::decode` (which shares no code with the
//! library) level by level against a pyramid computed here; the same
//! configuration through a callback, which must see every shard of every
//! level with its `level`; `tz_set_attributes` before and after the flush
//! and from the stream's own sink; bad values of every new field refused
//! at create with a message naming the field, leaving nothing on disk;
//! `tz_config` keeps 0.3's layout and `tz_image.struct_size` is checked
//! before anything past it is read.

mod common;
mod support;

use common::*;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;
use support::decode::{self, decode_array, decode_store};
use tiledzarr::ffi::*;

const OK: i32 = tz_status::TZ_OK as i32;
const ERR_NULL: i32 = tz_status::TZ_ERR_NULL_ARGUMENT as i32;
const ERR_INVALID: i32 = tz_status::TZ_ERR_INVALID_ARGUMENT as i32;
const ERR_CONFIG: i32 = tz_status::TZ_ERR_CONFIG as i32;
const ERR_FINISHED: i32 = tz_status::TZ_ERR_FINISHED as i32;

/// The acquisition, dimension 0 first: t (unbounded), z, c, y, x.
const NAMES: [&str; 5] = ["t", "z", "c", "y", "x"];
/// (size, tile, tiles_per_shard) per dimension.
const DIMS: [(u64, u64, u64); 5] = [(0, 2, 1), (3, 2, 1), (2, 1, 1), (20, 8, 2), (18, 8, 2)];
/// Planes streamed along t: the last epoch is half full.
const PLANES: u64 = 5;
/// Stored t, c, z, y, x: stored dimension d is acquired dimension ORDER[d].
const ORDER: [usize; 5] = [0, 2, 1, 3, 4];
/// Which acquired dimensions the levels halve: z (asked for), y and x
/// (space, by default); not t (time) nor c (asked not to).
const HALVED: [bool; 5] = [false, true, false, true, true];
const LEVELS: u32 = 3;

/// The image's `omero` block: one entry per channel (c has 2).
static OMERO: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    let window = json!({"start": 100, "end": 4000, "min": 0, "max": 65535});
    json!({"channels": [
        {"label": "DAPI", "color": "0000FF", "window": window, "active": true},
        {"label": "GFP", "color": "00FF00", "window": window, "family": "linear"}],
        "rdefs": {"defaultZ": 1, "model": "color"}})
});

/// A `tz_config`, a `tz_image` and everything their pointers point into.
struct CConfig {
    cfg: tz_config,
    img: tz_image,
    strings: Vec<CString>,
    dims: Vec<tz_dimension>,
    axes: Vec<tz_axis>,
    order: Vec<*const c_char>,
}

impl CConfig {
    fn string(&mut self, s: &str) -> *const c_char {
        let c = cstring(s);
        let p = c.as_ptr();
        self.strings.push(c);
        p
    }

    /// Points `img.axes` and `img.storage_order` at the (possibly edited)
    /// vectors again.
    fn refresh(&mut self) {
        self.img.axes = self.axes.as_ptr();
        self.img.storage_order = if self.order.is_empty() {
            std::ptr::null()
        } else {
            self.order.as_ptr()
        };
    }
}

fn backend_code() -> u32 {
    match test_backend().as_str() {
        "gpu" => tz_backend::TZ_BACKEND_GPU as u32,
        "auto" => tz_backend::TZ_BACKEND_AUTO as u32,
        _ => tz_backend::TZ_BACKEND_CPU as u32,
    }
}

fn plane_elems() -> u64 {
    DIMS[1..].iter().map(|d| d.0).product()
}

/// Every field of the image set: the t-z-c-y-x acquisition stored t-c-z-y-x as
/// an OME-Zarr image named "c-abi" with a 3-level max pyramid.
fn ome_config(store: Option<&Path>) -> CConfig {
    let mut c = CConfig {
        // SAFETY: all-zero is a valid tz_config and tz_image (NULL
        // pointers, no sink); tz_config_init and tz_image_init_sized fill
        // them below.
        cfg: unsafe { std::mem::zeroed() },
        img: unsafe { std::mem::zeroed() },
        strings: Vec::new(),
        dims: Vec::new(),
        axes: Vec::new(),
        order: Vec::new(),
    };
    assert_eq!(tz_config_init(&mut c.cfg), OK);
    assert_eq!(tz_image_init_sized(&mut c.img, IMAGE_SIZE), OK);
    let names: Vec<*const c_char> = NAMES.iter().map(|n| c.string(n)).collect();
    c.dims = DIMS
        .iter()
        .zip(&names)
        .map(|(&(size, tile, tiles_per_shard), &name)| tz_dimension {
            name,
            size,
            tile,
            tiles_per_shard,
        })
        .collect();
    let ms = c.string("millisecond");
    let um = c.string("micrometer");
    let axis = |kind: tz_axis_kind, unit, scale, translation, downsample| tz_axis {
        kind: kind as u32,
        unit,
        scale,
        translation,
        downsample,
    };
    c.axes = vec![
        axis(tz_axis_kind::TZ_AXIS_TIME, ms, 40.0, 0.0, -1),
        axis(tz_axis_kind::TZ_AXIS_DEFAULT, um, 2.0, 1.0, 1),
        axis(tz_axis_kind::TZ_AXIS_CHANNEL, std::ptr::null(), 0.0, 0.0, 0),
        axis(tz_axis_kind::TZ_AXIS_SPACE, um, 0.5, 3.0, -1),
        axis(tz_axis_kind::TZ_AXIS_DEFAULT, um, 0.5, 0.0, -1),
    ];
    c.order = ORDER.iter().map(|&a| names[a]).collect();
    let epoch = DIMS[0].1 * plane_elems() * 2;
    let ome_name = c.string("c-abi");
    let attributes = c.string(r#"{"instrument": "bench-1", "n": 3}"#);
    let omero = c.string(&OMERO.to_string());
    let store_path = store.map(|p| c.string(p.to_str().unwrap()));
    let cfg = &mut c.cfg;
    cfg.dtype = tz_dtype::TZ_DTYPE_UINT16 as u32;
    cfg.rank = NAMES.len() as u32;
    cfg.dimensions = c.dims.as_ptr();
    cfg.backend = backend_code();
    cfg.threads = 2;
    cfg.staging_bytes = 3 * epoch;
    if let Some(p) = store_path {
        cfg.store_path = p;
        cfg.store_skip_fsync = 1;
    }
    let img = &mut c.img;
    img.multiscale = 1;
    img.multiscale_levels = LEVELS;
    img.multiscale_method = tz_downsample_method::TZ_DOWNSAMPLE_MAX as u32;
    img.ome = 1;
    img.ome_name = ome_name;
    img.attributes_json = attributes;
    img.omero_json = omero;
    c.refresh();
    c
}

fn create(c: &CConfig) -> Result<*mut tz_stream, (i32, String)> {
    let mut s = std::ptr::null_mut();
    let rc = tz_create_image(&c.cfg, &c.img, &mut s);
    if rc != OK {
        assert!(s.is_null());
        return Err((rc, last_error()));
    }
    Ok(s)
}

#[path = "c_api_ome/pyramid.rs"]
mod pyramid;
use pyramid::*;

fn stream_all(s: *mut tz_stream, data: &[u8]) {
    let mut k = 0usize;
    write_in_pieces(s, data, &mut || {
        k += 1;
        [777, 4096, 13, 9000][k % 4]
    })
    .unwrap_or_else(|e| panic!("write: {e}: {}", stream_error(s)));
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn set_attributes(s: *mut tz_stream, json: &str) -> i32 {
    let j = cstring(json);
    tz_set_attributes(s, j.as_ptr())
}

/// sizeof(tz_image) in 0.4 on 64-bit platforms: the smallest a caller may
/// pass.
const IMAGE_0_4_SIZE: usize = 56;
/// sizeof(tz_image) since 0.8.
const IMAGE_SIZE: usize = 64;

#[path = "c_api_ome/layout.rs"]
mod layout;

#[test]
fn without_an_image_the_config_makes_a_plain_array() {
    let dir = tempfile::tempdir().unwrap();
    // tz_create, and tz_create_image with a NULL image: one plain array.
    for (k, with_image_call) in [false, true].into_iter().enumerate() {
        let path = dir.path().join(format!("plain{k}.zarr"));
        let c = ome_config(Some(&path));
        let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
        let mut s = std::ptr::null_mut();
        if with_image_call {
            assert_eq!(
                tz_estimate_memory_image(&c.cfg, std::ptr::null(), plan.as_mut_ptr()),
                OK
            );
            assert_eq!(tz_create_image(&c.cfg, std::ptr::null(), &mut s), OK);
        } else {
            assert_eq!(tz_estimate_memory(&c.cfg, plan.as_mut_ptr()), OK);
            assert_eq!(tz_create(&c.cfg, &mut s), OK, "{}", last_error());
        }
        stream_all(s, &input());
        assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
        tz_destroy(s);
        let doc = read_json(&path.join("zarr.json"));
        assert_eq!(doc["node_type"], "array");
        assert_eq!(doc["dimension_names"], json!(NAMES));
        assert!(!path.join("0").exists());
    }
    let c = ome_config(None);
    let mut s = std::ptr::null_mut();
    assert_eq!(tz_create_image(std::ptr::null(), &c.img, &mut s), ERR_NULL);
    assert_eq!(
        tz_create_image(&c.cfg, &c.img, std::ptr::null_mut()),
        ERR_NULL
    );
}

#[test]
fn ome_store_with_every_field_decodes_level_by_level() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.zarr");
    let c = ome_config(Some(&path));
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    assert_eq!(
        tz_estimate_memory_image(&c.cfg, &c.img, plan.as_mut_ptr()),
        OK,
        "{}",
        last_error()
    );
    let s = create(&c).unwrap_or_else(|e| panic!("tz_create: {e:?}"));
    let data = input();
    stream_all(s, &data);
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    tz_destroy(s);

    let want = reference(&data);
    for (k, (bytes, shape)) in want.iter().enumerate() {
        let (got_shape, dtype, got) =
            decode_store(&path.join(k.to_string())).unwrap_or_else(|e| panic!("level {k}: {e}"));
        assert_eq!(dtype, "uint16");
        assert_eq!(&got_shape, shape, "level {k}");
        assert!(got == *bytes, "level {k}: decoded data differ");
        let doc = read_json(&path.join(k.to_string()).join("zarr.json"));
        assert_eq!(doc["dimension_names"], json!(["t", "c", "z", "y", "x"]));
    }
    assert_eq!(want[1].1, [5, 2, 2, 10, 9]);
    assert!(!path.join(LEVELS.to_string()).exists());

    let group = read_json(&path.join("zarr.json"));
    assert_eq!(group["node_type"], "group");
    let attrs = &group["attributes"];
    assert_eq!(attrs["instrument"], "bench-1");
    assert_eq!(attrs["n"], 3);
    let ome = &attrs["ome"];
    assert_eq!(ome["version"], "0.5");
    assert_eq!(ome["omero"], *OMERO);
    let ms = &ome["multiscales"][0];
    assert_eq!(ms["name"], "c-abi");
    assert_eq!(ms["type"], "max");
    assert_eq!(
        ms["axes"],
        json!([
            {"name": "t", "type": "time", "unit": "millisecond"},
            {"name": "c", "type": "channel"},
            {"name": "z", "type": "space", "unit": "micrometer"},
            {"name": "y", "type": "space", "unit": "micrometer"},
            {"name": "x", "type": "space", "unit": "micrometer"},
        ])
    );
    let datasets = ms["datasets"].as_array().unwrap();
    assert_eq!(datasets.len(), LEVELS as usize);
    // Level 1: z, y and x twice as coarse, centred on their windows.
    assert_eq!(datasets[1]["path"], "1");
    assert_eq!(
        datasets[1]["coordinateTransformations"],
        json!([
            {"type": "scale", "scale": [40.0, 1.0, 4.0, 1.0, 1.0]},
            {"type": "translation", "translation": [0.0, 0.0, 2.0, 3.25, 0.25]},
        ])
    );
}

/// A shard's pyramid level and grid coordinate.
type Key = (u32, Vec<u64>);

/// Shards by (level, coordinate), as the callback received them.
#[derive(Default)]
struct Levels {
    shards: Mutex<HashMap<Key, Vec<u8>>>,
    /// Set when a shard came twice (a sink may not panic).
    twice: Mutex<Vec<Key>>,
}

unsafe extern "C" fn collect_levels(user: *mut c_void, shard: *const tz_shard) -> i32 {
    let l = &*(user as *const Levels);
    let s = &*shard;
    let coord = std::slice::from_raw_parts(s.coord, s.rank as usize).to_vec();
    let data = std::slice::from_raw_parts(s.data, s.data_bytes);
    let index = std::slice::from_raw_parts(s.index, s.index_bytes);
    let key = (s.level, coord);
    let old = l
        .shards
        .lock()
        .unwrap()
        .insert(key.clone(), [data, index].concat());
    if old.is_some() {
        l.twice.lock().unwrap().push(key);
    }
    0
}

#[test]
fn callback_receives_every_shard_of_every_level() {
    let sink = Levels::default();
    let mut c = ome_config(None);
    c.cfg.sink = Some(collect_levels);
    c.cfg.sink_user_data = &sink as *const Levels as *mut c_void;
    let s = create(&c).unwrap_or_else(|e| panic!("tz_create: {e:?}"));
    let data = input();
    stream_all(s, &data);
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    tz_destroy(s);
    assert!(sink.twice.lock().unwrap().is_empty());

    let shards = sink.shards.into_inner().unwrap();
    let levels: BTreeSet<u32> = shards.keys().map(|k| k.0).collect();
    assert_eq!(levels, (0..LEVELS).collect());
    for (k, (bytes, shape)) in reference(&data).iter().enumerate() {
        let dims = decodedims(shape);
        // Every shard of the level's grid, and no other.
        let grid: Vec<u64> = dims
            .iter()
            .map(|d| d.size.div_ceil(d.tile).div_ceil(d.tiles_per_shard))
            .collect();
        let level: HashMap<Vec<u64>, Vec<u8>> = shards
            .iter()
            .filter(|(key, _)| key.0 == k as u32)
            .map(|(key, v)| (key.1.clone(), v.clone()))
            .collect();
        assert_eq!(
            level.len() as u64,
            grid.iter().product::<u64>(),
            "level {k}: shards {:?}",
            level.keys().collect::<Vec<_>>()
        );
        assert!(level
            .keys()
            .all(|c| c.iter().zip(&grid).all(|(i, n)| i < n)));
        let got = decode_array(
            &dims,
            2,
            decode::Codec::Zstd,
            decode::IndexLocation::End,
            &level,
        )
        .unwrap_or_else(|e| panic!("level {k}: {e}"));
        assert!(got == *bytes, "level {k}: decoded data differ");
    }
}

/// A sink that calls tz_set_attributes on its own stream.
struct SelfCall {
    stream: AtomicPtr<tz_stream>,
    statuses: Mutex<Vec<i32>>,
}

unsafe extern "C" fn set_from_sink(user: *mut c_void, _shard: *const tz_shard) -> i32 {
    let sc = &*(user as *const SelfCall);
    let s = sc.stream.load(Ordering::SeqCst);
    let rc = tz_set_attributes(s, c"{\"from\": \"sink\"}".as_ptr());
    sc.statuses.lock().unwrap().push(rc);
    0
}

#[test]
fn set_attributes_replaces_them_until_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("attrs.zarr");
    let own = SelfCall {
        stream: AtomicPtr::new(std::ptr::null_mut()),
        statuses: Mutex::new(Vec::new()),
    };
    let mut c = ome_config(Some(&path));
    c.cfg.sink = Some(set_from_sink);
    c.cfg.sink_user_data = &own as *const SelfCall as *mut c_void;
    let s = create(&c).unwrap_or_else(|e| panic!("tz_create: {e:?}"));
    own.stream.store(s, Ordering::SeqCst);

    // Refused, leaving the attributes as they were.
    assert_eq!(
        tz_set_attributes(std::ptr::null_mut(), c"{}".as_ptr()),
        ERR_NULL
    );
    assert_eq!(tz_set_attributes(s, std::ptr::null()), ERR_NULL);
    assert!(stream_error(s).contains("json"), "{}", stream_error(s));
    assert_eq!(set_attributes(s, r#"{"a": "#), ERR_INVALID);
    assert!(
        stream_error(s).contains("not valid JSON"),
        "{}",
        stream_error(s)
    );
    assert_eq!(set_attributes(s, "[1, 2]"), ERR_CONFIG);
    let e = stream_error(s);
    assert!(e.contains("attributes") && e.contains("object"), "{e}");
    assert_eq!(set_attributes(s, r#"{"ome": {}}"#), ERR_CONFIG);
    assert!(stream_error(s).contains("\"ome\""), "{}", stream_error(s));

    let data = input();
    let half = data.len() / 2;
    stream_all(s, &data[..half]);
    assert_eq!(
        set_attributes(s, r#"{"instrument": "bench-2", "exposure_ms": 10}"#),
        OK,
        "{}",
        stream_error(s)
    );
    stream_all(s, &data[half..]);
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    assert_eq!(set_attributes(s, r#"{"late": true}"#), ERR_FINISHED);
    tz_destroy(s);

    // From its own sink: refused, every time, without a deadlock.
    let statuses = own.statuses.into_inner().unwrap();
    assert!(!statuses.is_empty());
    assert!(statuses.iter().all(|&rc| rc == ERR_INVALID), "{statuses:?}");

    let attrs = &read_json(&path.join("zarr.json"))["attributes"];
    let mut user = attrs.as_object().unwrap().clone();
    assert_eq!(user.remove("ome").unwrap()["version"], "0.5");
    assert_eq!(
        Value::Object(user),
        json!({"instrument": "bench-2", "exposure_ms": 10})
    );
}

#[test]
fn set_attributes_on_a_plain_array() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.zarr");
    let json = format!(
        r#"{{"dtype": "uint8", "backend": "{}", "threads": 2,
            "dimensions": [{{"name": "t", "size": 0, "tile": 2}}, {{"name": "x", "size": 16, "tile": 8}}],
            "attributes": {{"before": 1}},
            "store": {{"path": {:?}, "fsync": false}}}}"#,
        test_backend(),
        path.to_str().unwrap()
    );
    let s = create_json(&json, None).unwrap_or_else(|e| panic!("{e:?}"));
    write_in_pieces(s, &[7u8; 16 * 5], &mut || 24).unwrap();
    assert_eq!(set_attributes(s, r#"{"after": [1, 2]}"#), OK);
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    tz_destroy(s);
    let doc = read_json(&path.join("zarr.json"));
    assert_eq!(doc["node_type"], "array");
    assert_eq!(doc["attributes"], json!({"after": [1, 2]}));
}

#[path = "c_api_ome/refused.rs"]
mod refused;
