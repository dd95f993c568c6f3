//! Zero-copy ingest (tz_reserve / tz_commit, `Stream::reserve`): the
//! contract's bad inputs, each refused with a clear status and message and
//! nothing written lost, and the Rust API's reservation.

mod common;
mod support;

use common::*;
use std::ffi::c_void;
use support::decode::{self, decode_array};
use tiledzarr::ffi::*;
use tiledzarr::{Config, Stream};

/// u16, planes of 16 x 24, epochs of 2 planes; staging of 3 epochs per
/// buffer (the backend of the test run).
fn json(size0: u64) -> String {
    format!(
        r#"{{"dtype": "uint16", "dimensions": [{{"size": {size0}, "tile": 2, "tiles_per_shard": 1}},
            {{"size": 16, "tile": 8, "tiles_per_shard": 2}}, {{"size": 24, "tile": 8, "tiles_per_shard": 3}}],
            "codec": {{"name": "zstd", "level": 1}}, "backend": "{}",
            "staging_bytes": {}}}"#,
        test_backend(),
        6 * 2 * 16 * 24 * 2
    )
}

const PLANE: usize = 16 * 24 * 2;

fn reserve(s: *mut tz_stream) -> (i32, *mut u8, usize) {
    let mut ptr = std::ptr::null_mut::<c_void>();
    let mut len = 0usize;
    let rc = tz_reserve(s, &mut ptr, &mut len);
    (rc, ptr as *mut u8, len)
}

/// A reservation of some bytes: none is free while the staging buffers
/// are busy or still being allocated, so it asks again (as a caller does).
fn reserve_some(s: *mut tz_stream) -> (i32, *mut u8, usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let got = reserve(s);
        if got.0 != 0 || got.2 > 0 || std::time::Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn decode(planes: u64, sink: &Collected) -> Vec<u8> {
    let c = Config::from_json(&json(0)).unwrap();
    let v = c.validate().unwrap();
    decode_array(
        &support::decode_dims(&v.layout, planes),
        2,
        decode::Codec::Zstd,
        decode::IndexLocation::End,
        &sink.shards.lock().unwrap(),
    )
    .unwrap()
}

#[test]
fn misuse_of_a_reservation_is_refused_and_loses_nothing() {
    let sink = Collected::default();
    let s = create_json(&json(0), Some(&sink)).unwrap();
    let data = Rng(3).bytes(5 * PLANE);

    // A commit without a reservation.
    assert_eq!(tz_commit(s, 10), tz_status::TZ_ERR_INVALID_ARGUMENT as i32);
    assert!(
        stream_error(s).contains("without a reservation"),
        "{}",
        stream_error(s)
    );

    // The stream's first buffer is handed on after its first epoch.
    let (rc, ptr, len) = reserve(s);
    assert_eq!(rc, 0, "{}", stream_error(s));
    assert_eq!(len, 2 * PLANE, "the first reservation spans one epoch");
    assert_eq!(
        ptr as usize % 4096,
        0,
        "the first reservation starts a page"
    );
    let dst = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
    dst[..PLANE].copy_from_slice(&data[..PLANE]);

    // A second reservation, a write, a commit of more than reserved: each
    // refused, and the reservation stays.
    assert_eq!(reserve(s).0, tz_status::TZ_ERR_INVALID_ARGUMENT as i32);
    assert!(
        stream_error(s).contains("already outstanding"),
        "{}",
        stream_error(s)
    );
    let w = tz_write(s, data.as_ptr() as *const c_void, 8);
    assert_eq!(w, -(tz_status::TZ_ERR_INVALID_ARGUMENT as i64));
    assert!(
        stream_error(s).contains("reservation is outstanding"),
        "{}",
        stream_error(s)
    );
    assert_eq!(
        tz_commit(s, len + 1),
        tz_status::TZ_ERR_INVALID_ARGUMENT as i32
    );
    assert!(
        stream_error(s).contains(&format!("holds {len}")),
        "{}",
        stream_error(s)
    );
    // The bytes written there are still committed, fewer than reserved.
    assert_eq!(tz_commit(s, PLANE), 0, "{}", stream_error(s));
    assert_eq!(tz_commit(s, 0), tz_status::TZ_ERR_INVALID_ARGUMENT as i32);

    // The rest: a write, then a reservation outstanding at the flush,
    // which gives it up.
    let rest = &data[PLANE..];
    assert_eq!(
        tz_write_all(s, rest.as_ptr() as *const c_void, rest.len(), -1),
        rest.len() as i64
    );
    let (rc, ptr, len) = reserve_some(s);
    assert_eq!(rc, 0);
    assert!(len > 0);
    unsafe { std::slice::from_raw_parts_mut(ptr, len) }.fill(0xEE);
    assert_eq!(tz_flush(s), 0, "{}", stream_error(s));

    // After the flush.
    assert_eq!(tz_commit(s, 1), tz_status::TZ_ERR_FINISHED as i32);
    assert_eq!(reserve(s).0, tz_status::TZ_ERR_FINISHED as i32);
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), 0);
    assert_eq!(unsafe { m.assume_init() }.bytes_in, data.len() as u64);
    tz_destroy(s);
    assert_eq!(decode(5, &sink), data);
}

#[test]
fn null_arguments_and_a_bounded_array_end() {
    let mut ptr = std::ptr::null_mut::<c_void>();
    let mut len = 0usize;
    assert_eq!(
        tz_reserve(std::ptr::null_mut(), &mut ptr, &mut len),
        tz_status::TZ_ERR_NULL_ARGUMENT as i32
    );
    assert_eq!(
        tz_commit(std::ptr::null_mut(), 0),
        tz_status::TZ_ERR_NULL_ARGUMENT as i32
    );
    let sink = Collected::default();
    // Three planes: a reservation never spans past the array's end.
    let s = create_json(&json(3), Some(&sink)).unwrap();
    assert_eq!(
        tz_reserve(s, std::ptr::null_mut(), &mut len),
        tz_status::TZ_ERR_NULL_ARGUMENT as i32
    );
    assert_eq!(
        tz_reserve(s, &mut ptr, std::ptr::null_mut()),
        tz_status::TZ_ERR_NULL_ARGUMENT as i32
    );
    let data = Rng(4).bytes(3 * PLANE);
    // The first epoch, then the last plane: the second reservation ends
    // at the array's end, within an epoch.
    for (planes, range) in [(2, 0..2 * PLANE), (1, 2 * PLANE..3 * PLANE)] {
        let (rc, p, len) = reserve_some(s);
        assert_eq!(rc, 0);
        assert_eq!(len, planes * PLANE, "a reservation of {len} bytes");
        unsafe { std::slice::from_raw_parts_mut(p, len) }.copy_from_slice(&data[range]);
        assert_eq!(tz_commit(s, len), 0);
    }
    assert_eq!(reserve(s).0, tz_status::TZ_ERR_OVERFLOW as i32);
    assert_eq!(tz_flush(s), 0, "{}", stream_error(s));
    tz_destroy(s);
    let mut expected = data;
    expected.resize(4 * PLANE, 0); // the last epoch's padding
    assert_eq!(decode(4, &sink)[..3 * PLANE], expected[..3 * PLANE]);
}

#[test]
fn destroying_a_stream_with_a_reservation_outstanding_is_safe() {
    let sink = Collected::default();
    let s = create_json(&json(0), Some(&sink)).unwrap();
    let (rc, ptr, len) = reserve(s);
    assert_eq!(rc, 0);
    unsafe { std::slice::from_raw_parts_mut(ptr, len) }.fill(1);
    tz_destroy(s);
}

#[test]
fn the_rust_reservation_commits_or_counts_nothing() {
    let config = Config::from_json(&json(0)).unwrap();
    let shards = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let into = shards.clone();
    let sink = move |s: &tiledzarr::shard::Shard<'_>| -> tiledzarr::Result<()> {
        into.lock()
            .unwrap()
            .insert(s.coord.to_vec(), [s.data, s.index].concat());
        Ok(())
    };
    let mut s = Stream::new(&config, Some(Box::new(sink))).unwrap();
    let data = Rng(5).bytes(7 * PLANE + 100);
    let mut done = 0;
    let mut k = 0;
    while done < data.len() {
        let mut r = s.reserve().unwrap();
        let n = r.len().min(data.len() - done).min(PLANE + 17 * k);
        r[..n].copy_from_slice(&data[done..done + n]);
        if k % 3 == 2 {
            drop(r); // given up: counts nothing
        } else {
            r.commit(n).unwrap();
            done += n;
        }
        k += 1;
    }
    // Too much is refused.
    let r = s.reserve().unwrap();
    let too_many = r.len() + 1;
    let e = r.commit(too_many).unwrap_err();
    assert!(e.to_string().contains("reservation holds"), "{e}");
    let summary = s.finish().unwrap();
    assert_eq!(summary.metrics.bytes_in, data.len() as u64);
    let sink = Collected {
        shards: std::sync::Mutex::new(shards.lock().unwrap().clone()),
        ..Default::default()
    };
    let mut expected = data;
    expected.resize(8 * PLANE, 0);
    assert_eq!(decode(8, &sink), expected);
}

#[test]
fn bad_options_are_refused_naming_the_field() {
    let base = json(0);
    for (extra, field) in [
        (r#""max_latency_ms": 0"#, "max_latency_ms"),
        (r#""max_latency_ms": 86400001"#, "max_latency_ms"),
        (r#""device_bytes": 0"#, "device_bytes"),
    ] {
        let j = base.replacen('{', &format!("{{{extra}, "), 1);
        let (rc, msg) = create_json(&j, None).map(|_| ()).unwrap_err();
        assert_eq!(rc, tz_status::TZ_ERR_CONFIG as i32, "{extra}: {msg}");
        assert!(msg.contains(field), "{extra}: {msg}");
    }
    let mut o = std::mem::MaybeUninit::<tz_options>::uninit();
    assert_eq!(tz_options_init(o.as_mut_ptr()), 0);
    let mut o = unsafe { o.assume_init() };
    assert_eq!(o.struct_size, std::mem::size_of::<tz_options>());
    assert_eq!(o.struct_size, 40);
    assert_eq!(o.store_timeout_s, 0);
    let mut c = std::mem::MaybeUninit::<tz_config>::uninit();
    assert_eq!(tz_config_init(c.as_mut_ptr()), 0);
    let mut c = unsafe { c.assume_init() };
    let dims = [c_dim(0, 2, 1), c_dim(64, 32, 2)];
    c.rank = 2;
    c.dimensions = dims.as_ptr();
    c.sink = Some(collect);
    let sink = Collected::default();
    c.sink_user_data = &sink as *const Collected as *mut c_void;
    o.max_latency_ms = 86_400_001;
    assert_refused(
        create_with(&c, &o),
        tz_status::TZ_ERR_CONFIG,
        "max_latency_ms",
    );
    o.struct_size = 8;
    assert_refused(
        create_with(&c, &o),
        tz_status::TZ_ERR_INVALID_ARGUMENT,
        "options.struct_size",
    );
    o.struct_size = std::mem::size_of::<tz_options>();
    o.max_latency_ms = 250;
    // A store's bound on a stream without a store.
    o.store_timeout_s = 5;
    assert_refused(
        create_with(&c, &o),
        tz_status::TZ_ERR_CONFIG,
        "options.store_timeout_s",
    );
    // A program built against 0.5 to 0.8 passes 24 bytes: what lies past
    // them is not read.
    o.struct_size = 24;
    flush_and_destroy(create_with(&c, &o));
    // With a store, the bound is judged as the JSON form's.
    let dir = tempfile::tempdir().unwrap();
    let path = cstring(dir.path().join("s.zarr").to_str().unwrap());
    c.sink = None;
    c.store_path = path.as_ptr();
    o.struct_size = std::mem::size_of::<tz_options>();
    o.store_timeout_s = 3601;
    assert_refused(
        create_with(&c, &o),
        tz_status::TZ_ERR_CONFIG,
        "store.timeout_s",
    );
    o.store_timeout_s = 5;
    flush_and_destroy(create_with(&c, &o));
}

/// `made` was refused with `status`, its message naming `field`.
fn assert_refused(made: Result<*mut tz_stream, (i32, String)>, status: tz_status, field: &str) {
    let (rc, message) = made.map(|_| ()).expect_err(field);
    assert_eq!(rc, status as i32, "{message}");
    assert!(message.contains(field), "{message}");
}

fn flush_and_destroy(made: Result<*mut tz_stream, (i32, String)>) {
    let s = made.unwrap_or_else(|(_, message)| panic!("{message}"));
    assert_eq!(tz_flush(s), 0, "{}", last_error());
    tz_destroy(s);
}
