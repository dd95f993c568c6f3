//! The object store against a second S3-compatible server, moto's
//! standalone server (tests/s3/moto.rs), which keeps its objects in memory:
//! a store written through the public API is read back through S3 calls
//! and decoded, a shard above the single-PUT size goes up as a multipart
//! upload, and no upload is left on the server. Without TZ_MOTO_PYTHON the
//! test is skipped with a loud message.

mod common;
#[path = "s3/faults.rs"]
mod faults;
mod support;

use faults::moto::{self, Moto};
use std::ffi::c_void;
use std::path::Path;
use std::time::{Duration, Instant};
use tiledzarr::ffi::*;
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Stream};

fn config(dtype: &str, dims: &str, codec: &str, url: &str, endpoint: &str) -> Config {
    let json = format!(
        r#"{{"dtype": "{dtype}", "dimensions": {dims}, "codec": {codec}, "backend": "cpu",
            "store": {{"url": "{url}", "endpoint": "{endpoint}"}}}}"#
    );
    Config::from_json(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// Streams `data` with `try_write` (as a camera would: what the stream
/// does not take now is offered again) and finishes.
fn write_store(c: &Config, data: &[u8]) -> tiledzarr::Summary {
    let mut s = Stream::new(c, None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut at = 0;
    while at < data.len() {
        assert!(Instant::now() < deadline, "the stream stalled at {at}");
        match s.try_write(&data[at..]).unwrap() {
            0 => std::thread::sleep(Duration::from_millis(1)),
            n => at += n,
        }
    }
    s.finish().unwrap()
}

/// Copies every object under `prefix` into `dir` (keys become paths) and
/// returns the keys relative to `prefix`.
fn download(srv: &Moto, bucket: &str, prefix: &str, dir: &Path) -> Vec<String> {
    let keys = srv.list(bucket, prefix);
    keys.iter()
        .map(|key| {
            let body = srv
                .get(bucket, key)
                .unwrap_or_else(|| panic!("{key} was listed, then not found"));
            let rel = key.strip_prefix(prefix).unwrap();
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
            rel.to_string()
        })
        .collect()
}

#[test]
fn stores_round_trip_through_moto() {
    let Some(py) = moto::python("stores_round_trip_through_moto") else {
        return;
    };
    let t = Instant::now();
    let srv = Moto::start(&py);
    eprintln!("moto answered after {:?}", t.elapsed());
    srv.create_bucket("acq");
    let tmp = tempfile::tempdir().unwrap();

    // Small shards, one PUT each: 2 x 2 x 2 shards of an unbounded array
    // with a trailing partial plane.
    let dims = r#"[{"size": 0, "tile": 4, "tiles_per_shard": 2},
        {"size": 45, "tile": 16, "tiles_per_shard": 2}, {"size": 70, "tile": 32, "tiles_per_shard": 2}]"#;
    let data = support::frames(DType::Uint16, &[45, 70], 13, 40, Pattern::Microscopy);
    let c = config(
        "uint16",
        dims,
        r#"{"name": "zstd", "level": 1}"#,
        "s3://acq/runs/small.zarr",
        &srv.endpoint(),
    );
    let summary = write_store(&c, &data);
    assert_eq!(summary.planes, 14);
    assert_eq!(summary.metrics.uploads_in_flight, 0);
    let dir = tmp.path().join("small.zarr");
    let mut keys = download(&srv, "acq", "runs/small.zarr/", &dir);
    keys.sort();
    let mut want = vec!["zarr.json".to_string()];
    for r in 0..2 {
        for y in 0..2 {
            for x in 0..2 {
                want.push(format!("c/{r}/{y}/{x}"));
            }
        }
    }
    want.sort();
    assert_eq!(keys, want);
    let meta: serde_json::Value =
        serde_json::from_slice(&srv.get("acq", "runs/small.zarr/zarr.json").unwrap()).unwrap();
    assert_eq!(meta["shape"], serde_json::json!([14, 45, 70]));
    assert_eq!(srv.get("acq", "runs/small.zarr/nothing"), None);
    support::check_store(&dir, &[14, 45, 70], DType::Uint16, &data);
    assert_eq!(srv.list_multipart_uploads("acq"), vec![]);

    // One plane per shard of 4096 x 2048 uint32, uncompressed: 32 MiB
    // shards, above the single-PUT size, each a multipart upload.
    let dims = r#"[{"size": 2, "tile": 1, "tiles_per_shard": 1},
        {"size": 4096, "tile": 1024, "tiles_per_shard": 4}, {"size": 2048, "tile": 1024, "tiles_per_shard": 2}]"#;
    let data = support::frames(DType::Uint32, &[4096, 2048], 2, 0, Pattern::Random);
    let c = config(
        "uint32",
        dims,
        r#"{"name": "none"}"#,
        "s3://acq/big.zarr",
        &srv.endpoint(),
    );
    let t = Instant::now();
    let summary = write_store(&c, &data);
    eprintln!("64 MiB in 2 multipart uploads: {:?}", t.elapsed());
    assert_eq!(summary.metrics.uploads_in_flight, 0);
    let dir = tmp.path().join("big.zarr");
    let mut keys = download(&srv, "acq", "big.zarr/", &dir);
    keys.sort();
    assert_eq!(keys, ["c/0/0/0", "c/1/0/0", "zarr.json"]);
    support::check_store(&dir, &[2, 4096, 2048], DType::Uint32, &data);
    assert_eq!(srv.list_multipart_uploads("acq"), vec![]);
    // The server saw multipart uploads (CreateMultipartUpload is a POST
    // with `?uploads`), not single PUTs.
    let log = srv.log();
    assert!(
        log.contains("POST /acq/big.zarr/c/0/0/0?uploads"),
        "no multipart upload in the server's log:\n{log}"
    );
}

/// The writer of the C API case: frames of 300 x 200 u16 in `tz_write`
/// calls of random sizes, until `planes` are in or the stream fails; returns
/// the status of the failure, if any.
fn write_frames(s: *mut tz_stream, g: &Generator, planes: u64, seed: u64) -> Option<i64> {
    let mut rng = faults::Rng(seed | 1);
    let mut frame = vec![0u8; g.frame_bytes()];
    for p in 0..planes {
        g.fill_frame(p, &mut frame);
        let mut at = 0;
        while at < frame.len() {
            let n = (rng.range(1, 3 * frame.len() as u64 / 2) as usize).min(frame.len() - at);
            let r = tz_write(s, frame[at..].as_ptr() as *const c_void, n);
            match r {
                r if r < 0 => return Some(r),
                0 => std::thread::sleep(Duration::from_micros(200)),
                r => at += r as usize,
            }
        }
    }
    None
}

/// A server that dies two seconds into a 240 MB stream of 128 KiB shards,
/// through the C API with the default bounds: `tz_flush` returns the
/// object store's status within the documented bound, naming the object,
/// `tz_destroy` returns too, and every shard complete before the death
/// reads back bit-exact. moto loses its objects with its process, so here
/// the server dies as its clients see it (the proxy in front of it cuts
/// every connection and refuses new ones); the next test kills moto itself.
#[test]
fn c_api_flush_returns_when_the_server_dies_mid_stream() {
    let name = "c_api_flush_returns_when_the_server_dies_mid_stream";
    let Some(mut b) = faults::Backend::moto(name) else {
        return;
    };
    b.moto.as_ref().unwrap().create_bucket("acq");
    b.bucket = "acq".into();
    let prefix = "run3/img.zarr";
    let json = format!(
        r#"{{"dtype": "uint16", "dimensions": {}, "codec": {{"name": "zstd", "level": 1}},
            "backend": "cpu", "store": {{"url": "s3://acq/{prefix}", "endpoint": "{}"}}}}"#,
        faults::SMALL,
        b.proxy.endpoint()
    );
    let s = common::create_json(&json, None).unwrap();
    let g = Generator::new(Pattern::Random, DType::Uint16, &faults::FRAME, 21);
    let killed = std::sync::Mutex::new(None);
    let failed = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            b.proxy.down();
            *killed.lock().unwrap() = Some(Instant::now());
        });
        write_frames(s, &g, 2000, 0x5eed)
    });
    let killed = killed.into_inner().unwrap().unwrap();
    let flush = Instant::now();
    let rc = tz_flush(s);
    let (since, took) = (killed.elapsed(), flush.elapsed());
    let message = common::stream_error(s);
    eprintln!("tz_write: {failed:?}; tz_flush: {rc} after {took:.2?}, {since:.2?} after the death: {message}");
    assert_eq!(rc, tz_status::TZ_ERR_OBJECT_STORE as i32, "{message}");
    // The documented bound with the default store.timeout_s.
    let bound = faults::bound_for(60);
    assert!(
        since < bound,
        "tz_flush returned {since:?} after the server died"
    );
    assert!(message.contains("s3://acq/run3/img.zarr/"), "{message}");
    b.back();
    let destroy = Instant::now();
    tz_destroy(s);
    assert!(
        destroy.elapsed() < bound,
        "tz_destroy took {:?}",
        destroy.elapsed()
    );
    let tmp = tempfile::tempdir().unwrap();
    let rows = faults::check_store(&b, prefix, tmp.path(), &g, DType::Uint16);
    eprintln!("{rows} complete shard rows read back bit-exact");
    assert!(rows > 0, "nothing was complete after two seconds");
}

/// moto itself killed (SIGKILL) mid-stream, through the C API: the flush
/// returns the object store's status within the bound, naming the object
/// and the lost shards. (Its objects died with it: nothing to read back.)
#[test]
fn c_api_flush_returns_when_moto_is_killed() {
    let name = "c_api_flush_returns_when_moto_is_killed";
    let Some(mut b) = faults::Backend::moto(name) else {
        return;
    };
    let json = format!(
        r#"{{"dtype": "uint16", "dimensions": {}, "codec": {{"name": "zstd", "level": 1}},
            "backend": "cpu", "store": {{"url": "s3://faults/killed.zarr", "endpoint": "{}"}}}}"#,
        faults::SMALL,
        b.moto.as_ref().unwrap().endpoint()
    );
    let s = common::create_json(&json, None).unwrap();
    let g = Generator::new(Pattern::Random, DType::Uint16, &faults::FRAME, 23);
    let killed = std::sync::Mutex::new(None);
    let moto = b.moto.as_mut().unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            moto.kill();
            *killed.lock().unwrap() = Some(Instant::now());
        });
        write_frames(s, &g, 2000, 0xdead)
    });
    let killed = killed.into_inner().unwrap().unwrap();
    let rc = tz_flush(s);
    let since = killed.elapsed();
    let message = common::stream_error(s);
    eprintln!("tz_flush: {rc} {since:.2?} after the kill: {message}");
    assert_eq!(rc, tz_status::TZ_ERR_OBJECT_STORE as i32, "{message}");
    assert!(since < faults::bound_for(60), "{since:?}");
    assert!(message.contains("s3://faults/killed.zarr/"), "{message}");
    let destroy = Instant::now();
    tz_destroy(s);
    assert!(destroy.elapsed() < faults::bound_for(60));
}
