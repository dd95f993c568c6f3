//! Helpers for driving the library through its C API from Rust tests.
#![allow(dead_code)]

pub mod child;

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::Mutex;
use tiledzarr::ffi::*;

/// An unnamed dimension of a `tz_config`.
pub fn c_dim(size: u64, tile: u64, tiles_per_shard: u64) -> tz_dimension {
    tz_dimension {
        name: std::ptr::null(),
        size,
        tile,
        tiles_per_shard,
    }
}

/// Shards received by the collecting callback: coordinate -> shard file bytes.
#[derive(Default)]
pub struct Collected {
    pub shards: Mutex<HashMap<Vec<u64>, Vec<u8>>>,
    pub calls: Mutex<u64>,
    /// Fail (return this value) from the call with this 1-based number on.
    pub fail_from: Option<(u64, i32)>,
    /// Where the index goes in the assembled file.
    pub index_at_start: bool,
}

/// A `tz_shard_sink_fn` collecting into a `Collected` passed as user data.
pub unsafe extern "C" fn collect(user: *mut c_void, shard: *const tz_shard) -> i32 {
    let c = &*(user as *const Collected);
    let s = &*shard;
    let mut calls = c.calls.lock().unwrap();
    *calls += 1;
    if let Some((from, rc)) = c.fail_from {
        if *calls >= from {
            return rc;
        }
    }
    let coord = std::slice::from_raw_parts(s.coord, s.rank as usize).to_vec();
    let data = std::slice::from_raw_parts(s.data, s.data_bytes);
    let index = std::slice::from_raw_parts(s.index, s.index_bytes);
    let file = if c.index_at_start {
        [index, data].concat()
    } else {
        [data, index].concat()
    };
    let old = c.shards.lock().unwrap().insert(coord.clone(), file);
    assert!(old.is_none(), "shard {coord:?} emitted twice");
    0
}

pub fn cstring(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// A status as the C functions return it.
pub fn code(s: tz_status) -> i32 {
    s as i32
}

/// tz_recover of `path`: the report, or the status and the message.
pub fn recover_store(path: &std::path::Path) -> Result<tz_recovery, (i32, String)> {
    recover_store_with(path, None)
}

/// tz_recover_with of `path` and `options` (`None`: NULL).
pub fn recover_store_with(
    path: &std::path::Path,
    options: Option<&tz_options>,
) -> Result<tz_recovery, (i32, String)> {
    let c = cstring(path.to_str().unwrap());
    let mut r = tz_recovery {
        partial_files_removed: 0,
        planes_before: 0,
        planes_after: 0,
        shards_beyond: 0,
    };
    let o = options.map_or(std::ptr::null(), |o| o as *const tz_options);
    match tz_recover_with(c.as_ptr(), o, &mut r) {
        0 => Ok(r),
        rc => Err((rc, last_error())),
    }
}

/// `tz_options` as tz_options_init fills them.
pub fn default_options() -> tz_options {
    let mut o = std::mem::MaybeUninit::<tz_options>::uninit();
    assert_eq!(tz_options_init(o.as_mut_ptr()), 0);
    // SAFETY: initialised by tz_options_init.
    unsafe { o.assume_init() }
}

/// tz_create_with `c` and `o` (no image): the stream, or the status and
/// the message.
pub fn create_with(c: &tz_config, o: &tz_options) -> Result<*mut tz_stream, (i32, String)> {
    let mut s = std::ptr::null_mut();
    match tz_create_with(c, std::ptr::null(), o, &mut s) {
        0 => Ok(s),
        rc => Err((rc, last_error())),
    }
}

/// Creates a stream from JSON with an optional collecting callback.
pub fn create_json(json: &str, sink: Option<&Collected>) -> Result<*mut tz_stream, (i32, String)> {
    let json = cstring(json);
    let mut s = std::ptr::null_mut();
    let (f, user): (tz_shard_sink_fn, *mut c_void) = match sink {
        Some(c) => (Some(collect), c as *const Collected as *mut c_void),
        None => (None, std::ptr::null_mut()),
    };
    let rc = tz_create_json(json.as_ptr(), f, user, &mut s);
    if rc != 0 {
        assert!(s.is_null());
        return Err((rc, last_error()));
    }
    assert!(!s.is_null());
    Ok(s)
}

pub fn last_error() -> String {
    unsafe { CStr::from_ptr(tz_last_error()) }
        .to_string_lossy()
        .into_owned()
}

pub fn stream_error(s: *const tz_stream) -> String {
    unsafe { CStr::from_ptr(tz_stream_last_error(s)) }
        .to_string_lossy()
        .into_owned()
}

/// Writes all of `data` with tz_write in pieces whose sizes come from
/// `sizes` (cycled), retrying while busy. Returns the first error.
pub fn write_in_pieces(
    s: *mut tz_stream,
    data: &[u8],
    sizes: &mut dyn FnMut() -> usize,
) -> Result<(), i64> {
    let mut done = 0;
    while done < data.len() {
        let n = sizes().clamp(1, data.len() - done);
        let mut piece = &data[done..done + n];
        while !piece.is_empty() {
            let r = tz_write(s, piece.as_ptr() as *const c_void, piece.len());
            if r < 0 {
                return Err(r);
            }
            if r == 0 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            piece = &piece[r as usize..];
            done += r as usize;
        }
    }
    Ok(())
}

/// Writes all of `data` mixing tz_write with tz_reserve/tz_commit: each
/// turn either writes a piece of `sizes()` bytes or reserves and commits a
/// random part of the reservation (all of it, some of it, or nothing),
/// retrying while busy. Returns the first error, and how many bytes went
/// through reservations.
pub fn write_mixed(
    s: *mut tz_stream,
    data: &[u8],
    rng: &mut Rng,
    sizes: &mut dyn FnMut(&mut Rng) -> usize,
) -> Result<usize, i64> {
    let mut done = 0;
    let mut reserved_bytes = 0;
    while done < data.len() {
        if rng.range(0, 2) == 0 {
            let n = sizes(rng).clamp(1, data.len() - done);
            let r = tz_write(s, data[done..].as_ptr() as *const c_void, n);
            if r < 0 {
                return Err(r);
            }
            done += r as usize;
            if r == 0 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            continue;
        }
        let mut ptr = std::ptr::null_mut();
        let mut len = 0usize;
        let rc = tz_reserve(s, &mut ptr, &mut len);
        if rc != 0 {
            return Err(-(rc as i64));
        }
        if len == 0 {
            assert!(ptr.is_null());
            std::thread::sleep(std::time::Duration::from_micros(200));
            continue;
        }
        let left = data.len() - done;
        let n = match rng.range(0, 3) {
            0 => len.min(left),
            1 => 0,
            _ => (rng.range(1, len as u64) as usize).min(left),
        };
        // SAFETY: the library handed out `len` writable bytes at `ptr`.
        let dst = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) };
        dst[..n].copy_from_slice(&data[done..done + n]);
        if n < len {
            // Bytes past the commit are not part of the stream.
            dst[n..].fill(0xA5);
        }
        let rc = tz_commit(s, n);
        if rc != 0 {
            return Err(-(rc as i64));
        }
        done += n;
        reserved_bytes += n;
    }
    Ok(reserved_bytes)
}

/// A small deterministic generator (splitmix64) for test data and sizes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi].
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// The backend the C-API tests run on: `TZ_TEST_BACKEND` (cpu by default;
/// scripts/gpu-run.sh sets gpu, and then a missing GPU fails the tests).
pub fn test_backend() -> String {
    std::env::var("TZ_TEST_BACKEND").unwrap_or_else(|_| "cpu".into())
}

/// Waits until `s` has emitted at least `n` shards (30 s at most).
pub fn wait_for_shards(s: *mut tz_stream, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
        assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), 0);
        if unsafe { m.assume_init() }.shards_emitted >= n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "no shards emitted");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}
