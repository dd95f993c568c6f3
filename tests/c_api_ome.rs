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

/// The input: PLANES planes of random u16, little endian.
fn input() -> Vec<u8> {
    Rng(0x0e0e).bytes((PLANES * plane_elems() * 2) as usize)
}

fn as_u16(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for d in (0..shape.len() - 1).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

fn coords(mut i: u64, shape: &[u64]) -> Vec<u64> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d];
        i /= shape[d];
    }
    c
}

/// One level down, by the max of each window {2i, 2i+1} along the halved
/// dimensions (acquisition order).
fn max_down(a: &[u16], shape: &[u64]) -> (Vec<u16>, Vec<u64>) {
    let out_shape: Vec<u64> = shape
        .iter()
        .zip(HALVED)
        .map(|(&s, h)| if h { s.div_ceil(2) } else { s })
        .collect();
    let st = strides(&out_shape);
    let mut out = vec![0u16; out_shape.iter().product::<u64>() as usize];
    for (i, &v) in a.iter().enumerate() {
        let c = coords(i as u64, shape);
        let o: u64 = (0..shape.len())
            .map(|d| if HALVED[d] { c[d] / 2 } else { c[d] } * st[d])
            .sum();
        out[o as usize] = out[o as usize].max(v);
    }
    (out, out_shape)
}

/// `a` (acquisition order, `shape`) in the storage order, as LE bytes.
fn stored(a: &[u16], shape: &[u64]) -> (Vec<u8>, Vec<u64>) {
    let st = strides(shape);
    let out_shape: Vec<u64> = ORDER.iter().map(|&d| shape[d]).collect();
    let mut out = Vec::with_capacity(a.len() * 2);
    for i in 0..a.len() as u64 {
        let c = coords(i, &out_shape);
        let src: u64 = (0..shape.len()).map(|d| c[d] * st[ORDER[d]]).sum();
        out.extend(a[src as usize].to_le_bytes());
    }
    (out, out_shape)
}

/// Every level in the storage order: (bytes, shape), level 0 first.
fn reference(data: &[u8]) -> Vec<(Vec<u8>, Vec<u64>)> {
    let mut shape: Vec<u64> = DIMS.iter().map(|d| d.0).collect();
    shape[0] = PLANES;
    let mut a = as_u16(data);
    let mut out = Vec::new();
    for k in 0..LEVELS {
        if k > 0 {
            (a, shape) = max_down(&a, &shape);
        }
        out.push(stored(&a, &shape));
    }
    out
}

/// The decoder's dimensions of a level of `shape` (storage order).
fn decodedims(shape: &[u64]) -> Vec<decode::Dim> {
    ORDER
        .iter()
        .zip(shape)
        .map(|(&a, &size)| decode::Dim {
            size,
            tile: DIMS[a].1,
            tiles_per_shard: DIMS[a].2,
        })
        .collect()
}

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

#[test]
#[cfg(target_pointer_width = "64")]
fn config_keeps_its_layout_and_the_image_has_its_own_struct() {
    use std::mem::{offset_of, size_of};
    // tz_config is 0.3's, byte for byte: store_skip_fsync at 84, 88 bytes.
    assert_eq!(offset_of!(tz_config, store_skip_fsync), 84);
    assert_eq!(size_of::<tz_config>(), 88);
    // tz_image: its size first, then the image's fields.
    assert_eq!(offset_of!(tz_image, struct_size), 0);
    assert_eq!(offset_of!(tz_image, axes), 8);
    assert_eq!(offset_of!(tz_image, storage_order), 16);
    assert_eq!(offset_of!(tz_image, multiscale_levels), 24);
    assert_eq!(offset_of!(tz_image, multiscale_method), 28);
    assert_eq!(offset_of!(tz_image, multiscale), 32);
    assert_eq!(offset_of!(tz_image, ome), 36);
    assert_eq!(offset_of!(tz_image, ome_name), 40);
    assert_eq!(offset_of!(tz_image, attributes_json), 48);
    assert_eq!(IMAGE_0_4_SIZE, 56);
    // 0.8 added omero_json at the end.
    assert_eq!(offset_of!(tz_image, omero_json), 56);
    assert_eq!(size_of::<tz_image>(), IMAGE_SIZE);
    // tz_shard (written by the library, read by the callback) keeps its
    // first 44 bytes; the level follows them.
    assert_eq!(offset_of!(tz_shard, index_bytes), 40);
    assert_eq!(offset_of!(tz_shard, level), 48);
    // tz_dimension, an array element, did not grow.
    assert_eq!(size_of::<tz_dimension>(), 32);
    assert_eq!(size_of::<tz_axis>(), 40);
}

/// sizeof(tz_image) in 0.4 on 64-bit platforms: the smallest a caller may
/// pass.
const IMAGE_0_4_SIZE: usize = 56;
/// sizeof(tz_image) since 0.8.
const IMAGE_SIZE: usize = 64;

/// Whether `p` holds the default tz_image in its first `size` bytes.
fn assert_defaults(p: *const tz_image, size: usize) {
    // SAFETY: the caller's buffer holds a whole tz_image.
    let img = unsafe { p.read() };
    assert_eq!(img.struct_size, size);
    assert!(img.axes.is_null());
    assert!(img.storage_order.is_null());
    assert_eq!(img.multiscale_levels, 0);
    assert_eq!(
        img.multiscale_method,
        tz_downsample_method::TZ_DOWNSAMPLE_MEAN as u32
    );
    assert_eq!(img.multiscale, 0);
    assert_eq!(img.ome, 0);
    assert!(img.ome_name.is_null());
    assert!(img.attributes_json.is_null());
    if size > std::mem::offset_of!(tz_image, omero_json) {
        assert!(img.omero_json.is_null());
    }
}

#[test]
fn image_init_fills_the_defaults_and_writes_nothing_past_the_struct() {
    const GARBAGE: u64 = 0xA5A5_A5A5_A5A5_A5A5;
    let untouched_after = |buf: &[u64], size: usize| {
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert!(
            bytes[size..].iter().all(|&b| b == 0xA5),
            "wrote past {size}"
        );
    };
    // tz_image_init, which programs built against 0.4 to 0.7 call: 0.4's
    // 56 bytes, whatever this library's struct is. Garbage in every byte,
    // which it must overwrite, and after them, which it must not touch.
    let mut buf = [GARBAGE; 2 * IMAGE_SIZE / 8];
    let p = buf.as_mut_ptr() as *mut tz_image;
    assert_eq!(tz_image_init(p), OK);
    untouched_after(&buf, IMAGE_0_4_SIZE);
    assert_defaults(p, IMAGE_0_4_SIZE);
    assert_eq!(tz_image_init(std::ptr::null_mut()), ERR_NULL);
    // tz_image_init_sized (the header's tz_image_init): exactly the size
    // given, 0.4's to this library's.
    for size in [IMAGE_0_4_SIZE, IMAGE_SIZE] {
        let mut buf = [GARBAGE; 2 * IMAGE_SIZE / 8];
        let p = buf.as_mut_ptr() as *mut tz_image;
        assert_eq!(tz_image_init_sized(p, size), OK, "{}", last_error());
        untouched_after(&buf, size);
        assert_defaults(p, size);
    }
    for size in [0, 8, IMAGE_0_4_SIZE - 1, IMAGE_SIZE + 1, 4096] {
        let mut buf = [GARBAGE; 2 * IMAGE_SIZE / 8];
        let p = buf.as_mut_ptr() as *mut tz_image;
        assert_eq!(tz_image_init_sized(p, size), ERR_INVALID, "{size}");
        assert!(last_error().contains(&format!("struct_size is {size}")));
        untouched_after(&buf, 0);
    }
    assert_eq!(
        tz_image_init_sized(std::ptr::null_mut(), IMAGE_SIZE),
        ERR_NULL
    );

    // tz_config_init writes a tz_config of 0.3's size, and nothing after.
    let size = std::mem::size_of::<tz_config>();
    let mut buf = vec![0xA5A5_A5A5_A5A5_A5A5u64; 2 * size / 8];
    assert_eq!(tz_config_init(buf.as_mut_ptr() as *mut tz_config), OK);
    assert!(buf[size / 8..].iter().all(|&w| w == 0xA5A5_A5A5_A5A5_A5A5));
}

/// Two pages, the second one inaccessible: bytes placed at the end of the
/// first are followed by a fault.
struct GuardedPage {
    base: *mut u8,
    page: usize,
}

impl GuardedPage {
    fn new() -> Self {
        // SAFETY: plain anonymous mappings, unmapped in drop.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let base = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            let base = base as *mut u8;
            assert_eq!(
                libc::mprotect(base.add(page) as *mut c_void, page, libc::PROT_NONE),
                0
            );
            GuardedPage { base, page }
        }
    }

    /// The first `n` bytes of `img` at the very end of the readable page.
    fn place(&mut self, img: &tz_image, n: usize) -> *const tz_image {
        // SAFETY: n <= the page; the destination lies in the readable page.
        unsafe {
            let dst = self.base.add(self.page - n);
            std::ptr::copy_nonoverlapping(img as *const tz_image as *const u8, dst, n);
            dst as *const tz_image
        }
    }
}

impl Drop for GuardedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new.
        unsafe { libc::munmap(self.base as *mut c_void, 2 * self.page) };
    }
}

#[test]
fn image_struct_size_is_checked_before_anything_past_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sized.zarr");
    let mut guard = GuardedPage::new();
    let invalid = |image: *const tz_image, what: &str| {
        let c = ome_config(Some(&path));
        let mut s = std::ptr::null_mut();
        assert_eq!(
            tz_create_image(&c.cfg, image, &mut s),
            ERR_INVALID,
            "{what}"
        );
        assert!(s.is_null());
        let e = last_error();
        assert!(e.contains("image.struct_size"), "{what}: {e}");
        let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
        assert_eq!(
            tz_estimate_memory_image(&c.cfg, image, plan.as_mut_ptr()),
            ERR_INVALID,
            "{what}"
        );
        assert!(last_error().contains("image.struct_size"), "{what}");
        assert!(!path.exists(), "{what}");
    };

    // Smaller than any tz_image: refused from the struct_size alone, the
    // struct ending where the caller says (any further read would fault).
    for small in [0usize, 8, 16, IMAGE_0_4_SIZE - 8, IMAGE_0_4_SIZE - 1] {
        let mut c = ome_config(None);
        c.img.struct_size = small;
        let p = guard.place(&c.img, small.max(8));
        invalid(p, &format!("struct_size {small}"));
        let e = last_error();
        assert!(
            e.contains(&small.to_string()) && e.contains("tz_image_init"),
            "{e}"
        );
    }

    // Larger than this library's (a program built against a newer header,
    // its fields past ours set or not): refused.
    for large in [IMAGE_SIZE + 8, 4096] {
        let c = ome_config(None);
        let mut newer = vec![0u64; large.div_ceil(8)];
        // SAFETY: `newer` holds at least `large` >= IMAGE_SIZE bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                &c.img as *const tz_image as *const u8,
                newer.as_mut_ptr() as *mut u8,
                IMAGE_SIZE,
            )
        };
        newer[0] = large as u64;
        invalid(
            newer.as_ptr() as *const tz_image,
            &format!("struct_size {large}"),
        );
        let e = last_error();
        assert!(e.contains(&large.to_string()) && e.contains("newer"), "{e}");
    }

    // Exactly 0.4's, ending at the guard page: accepted, nothing past the
    // struct read (its omero_json, set here, lies past the 56 bytes placed).
    let mut c = ome_config(Some(&path));
    c.img.struct_size = IMAGE_0_4_SIZE;
    let p = guard.place(&c.img, IMAGE_0_4_SIZE);
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    assert_eq!(
        tz_estimate_memory_image(&c.cfg, p, plan.as_mut_ptr()),
        OK,
        "{}",
        last_error()
    );
    let mut s = std::ptr::null_mut();
    assert_eq!(tz_create_image(&c.cfg, p, &mut s), OK, "{}", last_error());
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    tz_destroy(s);
    let group = read_json(&path.join("zarr.json"));
    assert_eq!(
        group["attributes"]["ome"]["multiscales"][0]["name"],
        "c-abi"
    );
    assert!(group["attributes"]["ome"].get("omero").is_none());
}

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

/// Creates from `c`, expects TZ_ERR_CONFIG with a message holding every
/// one of `words`, and no store at `path`.
fn refused(c: &mut CConfig, path: &Path, words: &[&str]) {
    c.refresh();
    let (rc, message) = match create(c) {
        Ok(s) => {
            tz_destroy(s);
            panic!("created despite {words:?}");
        }
        Err(e) => e,
    };
    assert_eq!(rc, ERR_CONFIG, "{message}");
    for w in words {
        assert!(message.contains(w), "{words:?} not all in: {message}");
    }
    assert!(!path.exists(), "{} was made ({message})", path.display());
    let msg = unsafe { CStr::from_ptr(tz_status_string(rc)) };
    assert!(!msg.to_bytes().is_empty());
}

#[test]
fn bad_new_fields_are_refused_naming_them_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("never.zarr");
    let fresh = || ome_config(Some(&path));

    let mut c = fresh();
    c.axes[1].kind = 9;
    refused(&mut c, &path, &["image.axes[1].kind", "9"]);

    let mut c = fresh();
    c.img.multiscale_method = 7;
    refused(&mut c, &path, &["image.multiscale_method", "7"]);

    let mut c = fresh();
    c.img.attributes_json = c.string(r#"{"instrument": "#);
    refused(&mut c, &path, &["image.attributes_json", "JSON"]);

    let mut c = fresh();
    c.img.attributes_json = c.string("[1, 2]");
    refused(&mut c, &path, &["attributes", "object"]);

    let mut c = fresh();
    c.img.attributes_json = c.string(r#"{"ome": 1}"#);
    refused(&mut c, &path, &["attributes", "\"ome\""]);

    let mut c = fresh();
    c.order[2] = c.string("q");
    refused(&mut c, &path, &["storage_order", "\"q\""]);

    let mut c = fresh();
    c.order[2] = std::ptr::null();
    refused(&mut c, &path, &["image.storage_order[2]", "NULL"]);

    // Time before space is fine, space before channel is not (OME-NGFF).
    let mut c = fresh();
    c.order.swap(1, 2);
    refused(&mut c, &path, &["storage_order", "channel"]);

    let mut c = fresh();
    c.axes[0].downsample = 2;
    refused(&mut c, &path, &["image.axes[0].downsample", "2"]);

    let mut c = fresh();
    c.axes[3].unit = c.string("second");
    refused(&mut c, &path, &["dimensions[3].unit", "second"]);

    let mut c = fresh();
    c.axes[4].scale = -0.5;
    refused(&mut c, &path, &["dimensions[4].scale"]);

    let mut c = fresh();
    c.axes[3].translation = f64::NAN;
    refused(&mut c, &path, &["dimensions[3].translation"]);

    let mut c = fresh();
    c.img.multiscale_levels = 40;
    refused(&mut c, &path, &["multiscale.levels"]);

    // Pyramid settings without a pyramid, a name without an image.
    let mut c = fresh();
    c.img.multiscale = 0;
    refused(&mut c, &path, &["image.multiscale_levels", "multiscale"]);

    let mut c = fresh();
    c.img.multiscale = 0;
    c.img.multiscale_levels = 0;
    c.img.multiscale_method = tz_downsample_method::TZ_DOWNSAMPLE_MEDIAN as u32;
    refused(&mut c, &path, &["image.multiscale_method"]);

    let mut c = fresh();
    c.img.multiscale = 0;
    c.img.multiscale_levels = 0;
    c.img.multiscale_method = 0;
    c.img.ome = 0;
    refused(&mut c, &path, &["image.ome_name"]);

    let mut c = fresh();
    c.img.multiscale = 0;
    c.img.multiscale_levels = 0;
    c.img.multiscale_method = 0;
    c.img.ome = 0;
    c.img.ome_name = std::ptr::null();
    refused(&mut c, &path, &["image.omero_json", "ome"]);

    // The omero block: not JSON, and a channel too few.
    let mut c = fresh();
    c.img.omero_json = c.string("{\"channels\": [");
    refused(&mut c, &path, &["image.omero_json", "JSON"]);

    let mut c = fresh();
    let mut one = OMERO.clone();
    one["channels"].as_array_mut().unwrap().pop();
    c.img.omero_json = c.string(&one.to_string());
    refused(&mut c, &path, &["ome.omero.channels", "\"c\" has 2"]);

    let mut c = fresh();
    let mut bad = OMERO.clone();
    bad["channels"][1]["color"] = json!("green");
    c.img.omero_json = c.string(&bad.to_string());
    refused(&mut c, &path, &["ome.omero.channels[1].color"]);

    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
