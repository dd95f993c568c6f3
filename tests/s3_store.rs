//! The object store against a real S3-compatible server (s3s-fs on
//! 127.0.0.1, see tests/s3/server.rs): round trips decoded from what the
//! server stored, a multipart shard, the server killed mid-stream, and bad
//! input refused at create with nothing written. Without a server (no
//! TZ_S3FS_BIN) the tests that need one are skipped with a loud message;
//! scripts/test.sh always provides one and checks that they ran.

mod common;
#[path = "s3/server.rs"]
mod server;
mod support;

use common::c_dim;
use server::Server;
use std::path::Path;
use std::time::{Duration, Instant};
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Error, Stream};

fn config(dtype: &str, dims: &str, codec: &str, store: &str) -> Config {
    let json = format!(
        r#"{{"dtype": "{dtype}", "dimensions": {dims}, "codec": {codec}, "backend": "cpu",
            "store": {store}}}"#
    );
    Config::from_json(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

fn s3(url: &str, endpoint: &str, extra: &str) -> String {
    format!(r#"{{"url": "{url}", "endpoint": "{endpoint}"{extra}}}"#)
}

fn stream_all(s: &mut Stream, data: &[u8]) {
    for piece in data.chunks(1 << 20) {
        assert_eq!(s.write_blocking(piece, None).unwrap(), piece.len());
    }
}

#[test]
fn round_trips_decode_from_the_server() {
    let Some(bin) = server::binary("round_trips_decode_from_the_server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let srv = Server::start(&bin, tmp.path());
    let bucket = srv.bucket("acq");
    // Unbounded, ragged, a trailing partial plane: small shards, one PUT each.
    let dims = r#"[{"size": 0, "tile": 4, "tiles_per_shard": 2},
        {"size": 45, "tile": 16, "tiles_per_shard": 2}, {"size": 70, "tile": 32, "tiles_per_shard": 2}]"#;
    let data = support::frames(DType::Uint16, &[45, 70], 13, 40, Pattern::Microscopy);
    let c = config(
        "uint16",
        dims,
        r#"{"name": "zstd", "level": 1}"#,
        &s3("s3://acq/runs/small.zarr", &srv.endpoint(), ""),
    );
    let mut s = Stream::new(&c, None).unwrap();
    stream_all(&mut s, &data);
    let summary = s.finish().unwrap();
    let m = summary.metrics;
    // Every object complete when finish returns: the shards, zarr.json at
    // create and at each extent.
    assert_eq!(m.uploads_in_flight, 0);
    assert!(m.objects_uploaded > m.shards, "{m:?}");
    assert!(m.bytes_uploaded > m.bytes_out, "{m:?}");
    support::check_store(
        &bucket.join("runs/small.zarr"),
        &[14, 45, 70],
        DType::Uint16,
        &data,
    );

    // A shard of 32 MiB: a multipart upload, parts in parallel.
    let dims = r#"[{"size": 3, "tile": 1, "tiles_per_shard": 1},
        {"size": 4096, "tile": 1024, "tiles_per_shard": 4}, {"size": 2048, "tile": 1024, "tiles_per_shard": 2}]"#;
    let data = support::frames(DType::Uint32, &[4096, 2048], 3, 0, Pattern::Random);
    let c = config(
        "uint32",
        dims,
        r#"{"name": "none"}"#,
        &s3("s3://acq/big.zarr", &srv.endpoint(), ""),
    );
    let mut s = Stream::new(&c, None).unwrap();
    stream_all(&mut s, &data);
    s.finish().unwrap();
    support::check_store(
        &bucket.join("big.zarr"),
        &[3, 4096, 2048],
        DType::Uint32,
        &data,
    );
    assert!(
        srv.incomplete_uploads().is_empty(),
        "{:?}",
        srv.incomplete_uploads()
    );
}

#[test]
fn overwrite_follows_the_filesystem_store_rules() {
    let Some(bin) = server::binary("overwrite_follows_the_filesystem_store_rules") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let srv = Server::start(&bin, tmp.path());
    let bucket = srv.bucket("own");
    let dims = r#"[{"size": 0, "tile": 2}, {"size": 8, "tile": 4}]"#;
    let zstd = r#"{"name": "zstd", "level": 1}"#;
    let make = |overwrite: bool| {
        let extra = format!(r#", "overwrite": {overwrite}"#);
        config(
            "uint8",
            dims,
            zstd,
            &s3("s3://own/a.zarr", &srv.endpoint(), &extra),
        )
    };
    let first = support::frames(DType::Uint8, &[8], 6, 0, Pattern::Random);
    let mut s = Stream::new(&make(false), None).unwrap();
    stream_all(&mut s, &first);
    s.finish().unwrap();
    // A second stream without overwrite: refused, naming what is there.
    match Stream::new(&make(false), None) {
        Err(Error::Exists { reason, .. }) => assert!(reason.contains("zarr.json"), "{reason}"),
        other => panic!("expected Exists, got {:?}", other.err()),
    }
    // With overwrite: the old store is replaced (its 3 shard rows go).
    let second = support::frames(DType::Uint8, &[8], 2, 0, Pattern::Microscopy);
    let mut s = Stream::new(&make(true), None).unwrap();
    stream_all(&mut s, &second);
    s.finish().unwrap();
    support::check_store(&bucket.join("a.zarr"), &[2, 8], DType::Uint8, &second);
    // A file the library does not write: overwrite refuses, removes nothing.
    std::fs::write(bucket.join("a.zarr/notes.txt"), "mine").unwrap();
    match Stream::new(&make(true), None) {
        Err(Error::Exists { reason, .. }) => assert!(reason.contains("notes.txt"), "{reason}"),
        other => panic!("expected Exists, got {:?}", other.err()),
    }
    support::check_store(&bucket.join("a.zarr"), &[2, 8], DType::Uint8, &second);
}

#[test]
fn bad_input_is_refused_at_create_with_nothing_written() {
    let dims = r#"[{"size": 0, "tile": 2}, {"size": 8, "tile": 4}]"#;
    let zstd = r#"{"name": "zstd", "level": 1}"#;
    // No server needed: the URL itself is wrong.
    for (url, says) in [
        ("gs://bucket/x.zarr", "unknown scheme"),
        ("s3://Bad_Bucket/x.zarr", "bucket"),
        ("s3:/bucket", "not a URL"),
    ] {
        let json =
            format!(r#"{{"dtype": "uint8", "dimensions": {dims}, "store": {{"url": "{url}"}}}}"#);
        let e = Config::from_json(&json).unwrap().validate().unwrap_err();
        assert_eq!(e.field, "store.url");
        assert!(e.rule.contains(says), "{url}: {e}");
    }
    let Some(bin) = server::binary("bad_input_is_refused_at_create_with_nothing_written") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // A server that knows other credentials than the environment's.
    let other = Server::start_with_keys(
        &bin,
        &tmp.path().join("other"),
        "someone-else",
        "x".repeat(24).as_str(),
    );
    let bucket = other.bucket("data");
    let c = config(
        "uint8",
        dims,
        zstd,
        &s3("s3://data/a.zarr", &other.endpoint(), ""),
    );
    match Stream::new(&c, None) {
        Err(e @ Error::AccessDenied { .. }) => {
            let text = e.to_string();
            assert!(text.contains("s3://data/a.zarr"), "{text}");
            assert!(
                !text.contains(server::SECRET),
                "a secret in a message: {text}"
            );
        }
        other => panic!("expected AccessDenied, got {:?}", other.err()),
    }
    assert_eq!(
        std::fs::read_dir(&bucket).unwrap().count(),
        0,
        "something was written"
    );

    let srv = Server::start(&bin, &tmp.path().join("ours"));
    let c = config(
        "uint8",
        dims,
        zstd,
        &s3("s3://no-such-bucket/a.zarr", &srv.endpoint(), ""),
    );
    match Stream::new(&c, None) {
        Err(e @ Error::ObjectStore { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("s3://no-such-bucket/a.zarr")
                    && text.contains("bucket does not exist"),
                "{text}"
            );
        }
        other => panic!("expected ObjectStore, got {:?}", other.err()),
    }
    // Nothing listens there: refused within seconds, naming the store.
    let nowhere = format!("http://127.0.0.1:{}", server::free_port());
    let c = config("uint8", dims, zstd, &s3("s3://data/a.zarr", &nowhere, ""));
    let t = Instant::now();
    match Stream::new(&c, None) {
        Err(e @ Error::ObjectStore { .. }) => {
            let text = e.to_string();
            assert!(text.contains("s3://data/a.zarr"), "{text}");
            assert!(text.to_lowercase().contains("connect"), "{text}");
        }
        other => panic!("expected ObjectStore, got {:?}", other.err()),
    }
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert!(std::fs::read_dir(srv.root.join(".")).unwrap().all(|e| {
        let n = e.unwrap().file_name();
        n != "no-such-bucket"
    }));
}

/// Copies the store's complete shard rows from row 0 on (those past the
/// extent of `zarr.json` too: complete objects that the extent had not
/// reached yet) with a `zarr.json` whose extent covers them; returns it.
fn copy_complete_rows(store: &Path, to: &Path) -> u64 {
    let meta = std::fs::read_to_string(store.join("zarr.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&meta).unwrap();
    let extent = doc["shape"][0].as_u64().unwrap();
    let mut rows = 0;
    while store.join(format!("c/{rows}/0/0")).exists() {
        let dest = to.join(format!("c/{rows}/0"));
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::copy(store.join(format!("c/{rows}/0/0")), dest.join("0")).unwrap();
        rows += 1;
    }
    assert!(
        rows >= extent,
        "zarr.json covers {extent} planes, {rows} shard rows are there"
    );
    doc["shape"][0] = rows.into();
    std::fs::write(to.join("zarr.json"), doc.to_string()).unwrap();
    rows
}

#[test]
fn server_killed_mid_stream_poisons_naming_the_key_and_leaves_no_upload() {
    let name = "server_killed_mid_stream_poisons_naming_the_key_and_leaves_no_upload";
    let Some(bin) = server::binary(name) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut srv = Server::start(&bin, &tmp.path().join("srv"));
    let bucket = srv.bucket("live");
    // One 32 MiB shard per plane: every shard is a multipart upload.
    let dims = r#"[{"size": 0, "tile": 1, "tiles_per_shard": 1},
        {"size": 4096, "tile": 1024, "tiles_per_shard": 4}, {"size": 2048, "tile": 1024, "tiles_per_shard": 2}]"#;
    let c = config(
        "uint32",
        dims,
        r#"{"name": "none"}"#,
        &s3("s3://live/run.zarr", &srv.endpoint(), ""),
    );
    let mut s = Stream::new(&c, None).unwrap();
    let g = Generator::new(Pattern::Random, DType::Uint32, &[4096, 2048], 11);
    let store = bucket.join("run.zarr");
    // The camera: frames as fast as the stream takes them, until it fails.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let writer = std::thread::spawn(move || {
        let mut frame = vec![0u8; g.frame_bytes()];
        let deadline = Instant::now() + Duration::from_secs(240);
        for plane in 0.. {
            g.fill_frame(plane, &mut frame);
            let mut at = 0;
            while at < frame.len() {
                if Instant::now() > deadline || stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    return (s, None);
                }
                match s.try_write(&frame[at..]) {
                    Ok(0) => std::thread::sleep(Duration::from_millis(2)),
                    Ok(n) => at += n,
                    Err(e) => return (s, Some(e)),
                }
            }
        }
        unreachable!()
    });
    // Once four shard rows are in the store, freeze the server at a moment
    // when it holds a multipart upload under way, then kill it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let under_way = loop {
        assert!(
            Instant::now() < deadline,
            "no multipart upload caught under way"
        );
        // Shards complete out of order (parts go up in parallel): wait for
        // the first four rows themselves, not only the fourth.
        let four_rows = (0..4).all(|r| store.join(format!("c/{r}/0/0")).exists());
        if four_rows && !srv.incomplete_uploads_with_parts().is_empty() {
            srv.freeze(true);
            let held = srv.incomplete_uploads_with_parts();
            if !held.is_empty() {
                srv.kill();
                break held;
            }
            srv.freeze(false);
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    eprintln!("killed the server holding uploads {under_way:?}");
    let (mut s, error) = writer.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let error = error.expect("the stream was poisoned after the server died");
    let text = error.to_string();
    eprintln!("poisoned: {text}");
    assert!(matches!(error, Error::ObjectStore { .. }), "{text}");
    // The first upload to fail: a shard, or zarr.json (a row that was
    // complete before the server died, its extent written after).
    assert!(
        text.contains("s3://live/run.zarr/c/") || text.contains("s3://live/run.zarr/zarr.json"),
        "the message names no object of the store: {text}"
    );
    assert!(
        text.contains("Connection refused"),
        "the message lacks the cause: {text}"
    );
    // The server comes back: the uploads that could not be aborted while
    // it was gone are aborted now (at flush, and again at destroy).
    srv.restart();
    assert!(s.finish().is_err());
    drop(s);
    let left = srv.incomplete_uploads_with_parts();
    assert!(left.is_empty(), "uploads left behind: {left:?}");
    let empty = srv.incomplete_uploads();
    if !empty.is_empty() {
        eprintln!("uploads without parts whose creation was never answered: {empty:?}");
    }
    for id in &under_way {
        let id = id.trim_start_matches(".upload-").trim_end_matches(".json");
        let parts: Vec<_> = srv
            .part_files()
            .into_iter()
            .filter(|p| p.contains(id))
            .collect();
        assert!(
            parts.is_empty(),
            "parts of aborted upload {id} stayed: {parts:?}"
        );
    }
    // Every shard uploaded before is intact and readable.
    let copy = tmp.path().join("copy");
    let planes = copy_complete_rows(&store, &copy);
    assert!(planes >= 4, "{planes} shard rows");
    let g = Generator::new(Pattern::Random, DType::Uint32, &[4096, 2048], 11);
    let mut data = vec![0u8; g.frame_bytes() * planes as usize];
    g.fill_frames(0, &mut data);
    support::check_store(&copy, &[planes, 4096, 2048], DType::Uint32, &data);
}

#[path = "s3_store/readback.rs"]
mod readback;

#[path = "s3_store/c_api.rs"]
mod c_api;

#[test]
fn frame_metadata_lands_on_the_server() {
    let Some(bin) = server::binary("frame_metadata_lands_on_the_server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let srv = Server::start(&bin, tmp.path());
    let bucket = srv.bucket("meta");
    let json = format!(
        r#"{{"dtype": "uint8", "ome": true, "frame_metadata": {{"max_bytes": 32}},
            "dimensions": [{{"name": "t", "size": 0, "tile": 2, "tiles_per_shard": 1}},
                {{"name": "y", "size": 24, "tile": 8, "tiles_per_shard": 3}},
                {{"name": "x", "size": 16, "tile": 16, "tiles_per_shard": 1}}],
            "backend": "cpu", "store": {}}}"#,
        s3("s3://meta/m.zarr", &srv.endpoint(), "")
    );
    let c = Config::from_json(&json).unwrap();
    let mut s = Stream::new(&c, None).unwrap();
    let data = support::frames(DType::Uint8, &[24, 16], 5, 0, Pattern::Microscopy);
    for (f, frame) in data.chunks(24 * 16).enumerate() {
        assert_eq!(s.write_blocking(frame, None).unwrap(), frame.len());
        s.frame_metadata(0, f as u64, &format!(r#"{{"f": {f}}}"#))
            .unwrap();
    }
    s.finish().unwrap();
    support::check_store(&bucket.join("m.zarr/0"), &[5, 24, 16], DType::Uint8, &data);
    let doc = std::fs::read_to_string(bucket.join("m.zarr/frame_metadata/zarr.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["shape"], serde_json::json!([5, 32]));
    for f in 0..5u64 {
        let chunk =
            std::fs::read(bucket.join(format!("m.zarr/frame_metadata/c/{}/0", f / 2))).unwrap();
        let row = &chunk[(f % 2) as usize * 32..][..32];
        let want = format!(r#"{{"f":{f}}}"#);
        assert_eq!(&row[..want.len()], want.as_bytes(), "frame {f}");
        assert!(row[want.len()..].iter().all(|&b| b == 0), "frame {f}");
    }
}
