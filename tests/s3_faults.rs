//! The object store's fault matrix, against two independent S3-compatible
//! servers started here on 127.0.0.1: s3s-fs (tests/s3/server.rs, its data
//! in a folder, so that it survives a kill) and moto (tests/s3/moto.rs, in
//! memory). The library talks to each through a fault-injecting proxy
//! (tests/s3/proxy.rs). The faults:
//! - the server killed at random moments: during create, during PUTs,
//!   between the parts of a multipart upload, during a `zarr.json` update,
//!   during the flush. s3s-fs is killed for real (SIGKILL) and started
//!   again on its folder; moto would lose every object with its process, so
//!   for moto the proxy dies instead (every connection cut, the port
//!   refused), which is what the client sees of a killed server;
//! - a server that takes connections and never answers (the proxy stalls);
//! - intermittent 503 SlowDown and 500 answers, which pass after retries;
//! - a server that comes back within the retry budget;
//! - the answer to a multipart upload's completion lost on the way back
//!   (the server completed it; the client's retry finds the upload gone).
//!
//! Every case must end within its bound; leave every shard that reached the
//! server decodable and bit-exact; leave `zarr.json`'s extent over complete
//! shard rows only; leave no multipart upload with parts once the server is
//! back; and, when the stream fails, say so naming an object of the store.
//! Each case picks its moment at random: the seed is printed, and
//! TZ_FAULT_SEED replays it (with TZ_FAULT_CASE naming the case).

#[path = "s3/faults.rs"]
mod faults;
mod support;

use faults::proxy::Proxy;
use faults::*;
use std::path::Path;
use std::time::{Duration, Instant};
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{DType, Stream};

/// A case's end after the server died at `killed`: the flush returns the
/// failure within the bound, the server comes back, destroy returns within
/// the bound, and the store is checked.
fn after_the_fault(
    b: &mut Backend,
    prefix: &str,
    tmp: &Path,
    mut s: Stream,
    killed: Instant,
    g: &Generator,
    dtype: DType,
) {
    let flush = Instant::now();
    let e = s
        .finish()
        .expect_err("the flush of a stream whose server died");
    let (since_kill, took) = (killed.elapsed(), flush.elapsed());
    eprintln!("{}: {prefix}: flush failed {took:.2?} after it began, {since_kill:.2?} after the fault: {e}", b.name);
    assert!(
        since_kill < b.bound(),
        "{}: the flush returned {since_kill:?} after the fault",
        b.name
    );
    check_failure(b, prefix, &e);
    b.back();
    let destroy = Instant::now();
    drop(s);
    assert!(
        destroy.elapsed() < b.bound(),
        "{}: destroy took {:?}",
        b.name,
        destroy.elapsed()
    );
    let rows = check_store(b, prefix, tmp, g, dtype);
    eprintln!("{}: {prefix}: {rows} complete shard rows intact", b.name);
}

fn kill_during_create(b: &mut Backend, tmp: &Path) {
    let mut rng = Rng::new("kill during create");
    let prefix = "create.zarr";
    let c = config("uint16", SMALL, &b.store(prefix, ""));
    let t = Instant::now();
    let creating = std::thread::spawn(move || Stream::new(&c, None));
    std::thread::sleep(Duration::from_micros(rng.range(0, 30_000)));
    b.kill();
    let killed = Instant::now();
    let created = creating.join().unwrap();
    assert!(
        t.elapsed() < b.bound(),
        "{}: create took {:?}",
        b.name,
        t.elapsed()
    );
    let g = Generator::new(Pattern::Random, DType::Uint16, &FRAME, 3);
    match created {
        Err(e) => {
            eprintln!(
                "{}: create failed {:.2?} after the fault: {e}",
                b.name,
                killed.elapsed()
            );
            check_failure(b, prefix, &e);
            b.back();
            let left = b.uploads_with_parts(prefix);
            assert!(left.is_empty(), "{left:?}");
        }
        Ok(mut s) => {
            let mut frame = vec![0u8; g.frame_bytes()];
            for p in 0..8 {
                g.fill_frame(p, &mut frame);
                if s.try_write(&frame).is_err() {
                    break;
                }
            }
            after_the_fault(b, prefix, tmp, s, killed, &g, DType::Uint16);
        }
    }
}

fn kill_during_puts(b: &mut Backend, tmp: &Path) {
    let mut rng = Rng::new("kill during PUTs");
    let prefix = "puts.zarr";
    let s = Stream::new(&config("uint16", SMALL, &b.store(prefix, "")), None).unwrap();
    let g = Generator::new(Pattern::Random, DType::Uint16, &FRAME, 5);
    let cam = Camera::start(s, g.clone(), 1200, 400, rng.next());
    std::thread::sleep(Duration::from_millis(rng.range(200, 2000)));
    b.kill();
    let killed = Instant::now();
    let (s, planes, _) = cam.join();
    eprintln!("{}: killed after {planes} planes", b.name);
    after_the_fault(b, prefix, tmp, s, killed, &g, DType::Uint16);
}

fn kill_between_parts(b: &mut Backend, tmp: &Path) {
    let mut rng = Rng::new("kill between the parts of a multipart upload");
    let prefix = "parts.zarr";
    let g = Generator::new(Pattern::Random, DType::Uint32, &BIG_FRAME, 7);
    // Parts of 8 MiB, up to 16 at once, take longer than attempts of 5 / 3
    // s on two loaded cores: given up and sent again, they pile up.
    b.timeout_s = 15;
    let s = Stream::new(&config("uint32", BIG, &b.store(prefix, "")), None).unwrap();
    // A few shards in, then down the moment an upload's parts are all in
    // and its completion is asked for: the upload holds every part.
    let completions = rng.range(0, 4);
    b.die_on(is_completion, completions);
    let cam = Camera::start(s, g.clone(), 40, 0, rng.next());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !b.proxy.triggered() {
        if Instant::now() > deadline {
            let (_, planes, e) = cam.join();
            panic!(
                "{}: no completion of a multipart upload seen ({:?} requests, injected \
                 errors); the camera wrote {planes} planes, its error: {e:?}",
                b.name,
                b.proxy.counts()
            );
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let killed = Instant::now();
    let held = b.uploads_with_parts(prefix);
    assert!(!held.is_empty(), "{}: no upload holds parts", b.name);
    b.kill();
    let (s, _, _) = cam.join();
    after_the_fault(b, prefix, tmp, s, killed, &g, DType::Uint32);
}

fn kill_during_metadata_update(b: &mut Backend, tmp: &Path) {
    let mut rng = Rng::new("kill during a zarr.json update");
    let prefix = "meta.zarr";
    let s = Stream::new(&config("uint16", SMALL, &b.store(prefix, "")), None).unwrap();
    // The first zarr.json is create's; let a few updates pass.
    let pass = rng.range(1, 6);
    let zarr_json = |line: &str| line.starts_with("PUT ") && line.contains("/zarr.json ");
    b.die_on(zarr_json, pass);
    let g = Generator::new(Pattern::Random, DType::Uint16, &FRAME, 9);
    let cam = Camera::start(s, g.clone(), 400, 400, rng.next());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !b.proxy.triggered() {
        assert!(
            Instant::now() < deadline,
            "{}: no zarr.json update seen",
            b.name
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let killed = Instant::now();
    b.kill();
    let (s, _, _) = cam.join();
    after_the_fault(b, prefix, tmp, s, killed, &g, DType::Uint16);
}

fn kill_during_flush(b: &mut Backend, tmp: &Path) {
    let mut rng = Rng::new("kill during the flush");
    let prefix = "flush.zarr";
    let mut s = Stream::new(&config("uint16", SMALL, &b.store(prefix, "")), None).unwrap();
    let g = Generator::new(Pattern::Random, DType::Uint16, &FRAME, 11);
    write_planes(&mut s, &g, 800);
    let flushing = std::thread::spawn(move || {
        let r = s.finish();
        (s, r, Instant::now())
    });
    std::thread::sleep(Duration::from_millis(rng.range(0, 60)));
    b.kill();
    let killed = Instant::now();
    let (s, r, ended) = flushing.join().unwrap();
    match r {
        Ok(_) => {
            eprintln!("{}: the flush completed before the fault", b.name);
            b.back();
            drop(s);
            assert_eq!(check_store(b, prefix, tmp, &g, DType::Uint16), 200);
        }
        Err(e) => {
            let since = ended.saturating_duration_since(killed);
            eprintln!("{}: flush failed {since:.2?} after the fault: {e}", b.name);
            assert!(
                since < b.bound(),
                "{}: the flush returned {since:?} after the fault",
                b.name
            );
            check_failure(b, prefix, &e);
            b.back();
            drop(s);
            check_store(b, prefix, tmp, &g, DType::Uint16);
        }
    }
}

fn stall_mid_stream(b: &mut Backend, tmp: &Path) {
    let mut rng = Rng::new("a server that stops answering");
    let prefix = "stall.zarr";
    let s = Stream::new(&config("uint16", SMALL, &b.store(prefix, "")), None).unwrap();
    let g = Generator::new(Pattern::Random, DType::Uint16, &FRAME, 13);
    let cam = Camera::start(s, g.clone(), 800, 400, rng.next());
    std::thread::sleep(Duration::from_millis(rng.range(200, 1500)));
    b.proxy.stall();
    let stalled = Instant::now();
    let (s, _, _) = cam.join();
    // `back` lets it answer again (after the flush has returned).
    after_the_fault(b, prefix, tmp, s, stalled, &g, DType::Uint16);
}

fn flaky_answers_pass_after_retries(b: &mut Backend, tmp: &Path) {
    let _ = Rng::new("intermittent 503 and 500 answers");
    for (prefix, dtype, dims, frame, planes) in [
        ("flaky.zarr", DType::Uint16, SMALL, &FRAME[..], 200),
        ("flaky-big.zarr", DType::Uint32, BIG, &BIG_FRAME[..], 4),
    ] {
        b.proxy.flaky(100);
        let mut s = Stream::new(&config(dtype.name(), dims, &b.store(prefix, "")), None).unwrap();
        let g = Generator::new(Pattern::Random, dtype, frame, 15);
        write_planes(&mut s, &g, planes);
        s.finish()
            .unwrap_or_else(|e| panic!("{}: {prefix} under 10% injected errors: {e}", b.name));
        drop(s);
        let (requests, faults) = b.proxy.counts();
        b.proxy.flaky(0);
        eprintln!(
            "{}: {prefix}: {faults} of {requests} requests answered 503/500, store whole",
            b.name
        );
        assert!(faults > 0, "no error was injected");
        let rows = check_store(b, prefix, tmp, &g, dtype);
        let per_row = if dims == BIG { 1 } else { 4 };
        assert_eq!(rows * per_row, planes, "{}: {prefix}", b.name);
    }
}

fn comes_back_within_the_budget(b: &mut Backend, tmp: &Path) {
    let mut rng = Rng::new("a server that comes back within the retry budget");
    let prefix = "back.zarr";
    // A longer bound: the retries outlast the outage.
    let s = Stream::new(&config("uint16", SMALL, &b.store(prefix, "")), None).unwrap();
    let g = Generator::new(Pattern::Random, DType::Uint16, &FRAME, 17);
    let cam = Camera::start(s, g.clone(), 600, 400, rng.next());
    std::thread::sleep(Duration::from_millis(rng.range(200, 1000)));
    b.kill();
    std::thread::sleep(Duration::from_millis(rng.range(100, 700)));
    b.back();
    let (mut s, planes, e) = cam.thread.join().unwrap();
    assert!(e.is_none(), "{}: the stream failed: {e:?}", b.name);
    s.finish()
        .unwrap_or_else(|e| panic!("{}: the server came back, yet: {e}", b.name));
    drop(s);
    assert_eq!(planes, 600);
    let rows = check_store(b, prefix, tmp, &g, DType::Uint16);
    assert_eq!(rows, 150, "{}: the store is not whole", b.name);
    eprintln!("{}: came back: the store is whole", b.name);
}

fn a_completion_whose_answer_is_lost(b: &mut Backend, tmp: &Path) {
    let mut rng = Rng::new("a completion whose answer is lost");
    let prefix = "lost.zarr";
    // Planes of 25 MB of random uint32, each a shard: multipart uploads.
    let g = Generator::new(Pattern::Random, DType::Uint32, &BIG_FRAME, 19);
    b.timeout_s = 15; // as for the kill between parts
    b.proxy.lose_answer_on(is_completion, rng.range(0, 4));
    let mut s = Stream::new(&config("uint32", BIG, &b.store(prefix, "")), None).unwrap();
    let planes = 6;
    write_planes(&mut s, &g, planes);
    s.finish()
        .unwrap_or_else(|e| panic!("{}: a completion whose answer was lost: {e}", b.name));
    drop(s);
    assert_eq!(b.proxy.answers_lost(), 1, "{}: no answer was lost", b.name);
    let rows = check_store(b, prefix, tmp, &g, DType::Uint32);
    assert_eq!(rows, planes, "{}: {prefix}", b.name);
    eprintln!("{}: a lost completion answer: the store is whole", b.name);
}

fn matrix(mut b: Backend, tmp: &Path) {
    type Case = fn(&mut Backend, &Path);
    let cases: [(&str, Case); 9] = [
        ("kill during create", kill_during_create),
        ("kill during PUTs", kill_during_puts),
        ("kill between parts", kill_between_parts),
        (
            "kill during a zarr.json update",
            kill_during_metadata_update,
        ),
        ("kill during the flush", kill_during_flush),
        ("stalled server", stall_mid_stream),
        ("503/500 answers", flaky_answers_pass_after_retries),
        ("back within the budget", comes_back_within_the_budget),
        (
            "a lost completion answer",
            a_completion_whose_answer_is_lost,
        ),
    ];
    let only = std::env::var("TZ_FAULT_CASE").ok();
    for (name, case) in cases {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let t = Instant::now();
        // Each case starts from the short bound; one may raise it for its
        // own stores.
        b.timeout_s = TIMEOUT_S;
        case(&mut b, tmp);
        b.proxy.disarm();
        b.back();
        eprintln!("=== {}: {name}: {:.2?}", b.name, t.elapsed());
    }
}

#[test]
fn fault_matrix_against_s3s_fs() {
    let tmp = tempfile::tempdir().unwrap();
    if let Some(b) = Backend::s3fs("fault_matrix_against_s3s_fs", &tmp.path().join("srv")) {
        matrix(b, tmp.path());
    }
}

#[test]
fn fault_matrix_against_moto() {
    let tmp = tempfile::tempdir().unwrap();
    if let Some(b) = Backend::moto("fault_matrix_against_moto") {
        matrix(b, tmp.path());
    }
}

/// A listener that takes connections and never answers, as the store's
/// endpoint: create reports it within seconds (the default bounds), with
/// nothing else to wait for.
#[test]
fn a_black_hole_is_reported_at_create_within_seconds() {
    let hole = Proxy::black_hole();
    let store = format!(
        r#"{{"url": "s3://faults/hole.zarr", "endpoint": "{}"}}"#,
        hole.endpoint()
    );
    let t = Instant::now();
    let e = Stream::new(&config("uint16", SMALL, &store), None)
        .err()
        .expect("create against a black hole fails");
    let took = t.elapsed();
    eprintln!("black hole: create failed after {took:.2?}: {e}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert!(e.to_string().contains("s3://faults/hole.zarr"), "{e}");
}
