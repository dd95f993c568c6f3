//! Object store throughput beside the filesystem store, in one run, and
//! the longest `write` call while the server is slow.
//!
//!     cargo run --release --example s3_bench -- --endpoint http://127.0.0.1:9000 \
//!         --bucket bench --frames 256 --delay-ms 500 --dir /tmp/bench
//!
//! Streams the same cam-32 frames (2048 x 2048 uint16 microscopy, 32-frame
//! epochs, 512 x 512 x 32 shards, zstd 1, CPU backend) three times: into a
//! folder under `--dir`, into `s3://BUCKET/direct.zarr`, and into
//! `s3://BUCKET/throttled.zarr` through a proxy on 127.0.0.1 that holds every
//! answer of the server for `--delay-ms` (a throttled server). Each run
//! writes with the non-blocking `try_write` (0 = busy, retried after 1 ms)
//! and reports GB/s from the first write to the end of `finish`, and the
//! longest single `try_write` call. Credentials from the environment.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Stream};

struct Args {
    endpoint: String,
    bucket: String,
    frames: u64,
    delay_ms: u64,
    dir: std::path::PathBuf,
}

fn args() -> Args {
    let mut a = Args {
        endpoint: String::new(),
        bucket: "bench".into(),
        frames: 256,
        delay_ms: 500,
        dir: std::env::temp_dir(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--endpoint" => a.endpoint = v,
            "--bucket" => a.bucket = v,
            "--frames" => a.frames = v.parse().expect("--frames N"),
            "--delay-ms" => a.delay_ms = v.parse().expect("--delay-ms N"),
            "--dir" => a.dir = v.into(),
            _ => panic!("unknown argument {k}"),
        }
    }
    assert!(
        !a.endpoint.is_empty(),
        "--endpoint http://host:port is required"
    );
    a
}

fn config(store: &str) -> Config {
    let json = format!(
        r#"{{"dtype": "uint16", "backend": "cpu", "codec": {{"name": "zstd", "level": 1}},
            "dimensions": [{{"name": "z", "size": 0, "tile": 32, "tiles_per_shard": 1}},
                {{"name": "y", "size": 2048, "tile": 32, "tiles_per_shard": 16}},
                {{"name": "x", "size": 2048, "tile": 32, "tiles_per_shard": 16}}],
            "store": {store}}}"#
    );
    Config::from_json(&json).expect("the benchmark's configuration parses")
}

/// Streams `frames` frames (cycling through `ring`); returns (GB/s, the
/// longest try_write in ms, objects uploaded).
fn run(config: &Config, ring: &[Vec<u8>], frames: u64) -> (f64, f64, u64) {
    let mut s = Stream::new(config, None).expect("the stream starts");
    let start = Instant::now();
    let mut longest = Duration::ZERO;
    for i in 0..frames {
        let frame = &ring[(i as usize) % ring.len()];
        let mut at = 0;
        while at < frame.len() {
            let t = Instant::now();
            let n = s.try_write(&frame[at..]).expect("write");
            longest = longest.max(t.elapsed());
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            at += n;
        }
    }
    let summary = s.finish().expect("finish");
    let secs = start.elapsed().as_secs_f64();
    let bytes = frames as f64 * ring[0].len() as f64;
    (
        bytes / secs / 1e9,
        longest.as_secs_f64() * 1e3,
        summary.metrics.objects_uploaded,
    )
}

/// A TCP proxy to `upstream` that holds each answer for `delay` before
/// passing it on: every request takes at least that long.
fn slow_proxy(upstream: String, delay: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&upstream) else {
                continue;
            };
            let asked = Arc::new(AtomicBool::new(false));
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let flag = asked.clone();
            std::thread::spawn(move || {
                pump(&mut c_in, &mut s_out, |_| {
                    flag.store(true, Ordering::Relaxed)
                })
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                pump(&mut s_in, &mut c_out, |_| {
                    if asked.swap(false, Ordering::Relaxed) {
                        std::thread::sleep(delay);
                    }
                })
            });
        }
    });
    port
}

fn pump(from: &mut TcpStream, to: &mut TcpStream, before: impl Fn(usize)) {
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        before(n);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

fn main() {
    let a = args();
    let g = Generator::new(Pattern::Microscopy, DType::Uint16, &[2048, 2048], 1);
    let ring: Vec<Vec<u8>> = (0..64)
        .map(|i| {
            let mut f = vec![0u8; g.frame_bytes()];
            g.fill_frame(i, &mut f);
            f
        })
        .collect();
    let upstream = a
        .endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let proxy = slow_proxy(upstream, Duration::from_millis(a.delay_ms));
    let fs_store = a.dir.join("s3-bench-fs.zarr");
    let gb = a.frames as f64 * g.frame_bytes() as f64 / 1e9;
    println!(
        "cam-32, CPU backend, zstd 1, {} frames ({gb:.2} GB) per run",
        a.frames
    );
    println!("| sink | GB/s | longest try_write (ms) | objects uploaded |");
    println!("| --- | --- | --- | --- |");
    let runs = [
        (
            "filesystem (fsync)",
            format!(r#"{{"path": {:?}, "overwrite": true}}"#, fs_store),
        ),
        (
            "S3 server, direct",
            format!(
                r#"{{"url": "s3://{}/direct.zarr", "endpoint": "{}", "overwrite": true}}"#,
                a.bucket, a.endpoint
            ),
        ),
        (
            "S3 server, each answer held",
            format!(
                r#"{{"url": "s3://{}/throttled.zarr", "endpoint": "http://127.0.0.1:{proxy}", "overwrite": true}}"#,
                a.bucket
            ),
        ),
    ];
    for (name, store) in runs {
        let (gbps, longest, objects) = run(&config(&store), &ring, a.frames);
        let name = if name.ends_with("held") {
            format!("{name} {} ms", a.delay_ms)
        } else {
            name.to_string()
        };
        println!("| {name} | {gbps:.3} | {longest:.1} | {objects} |");
    }
    let _ = std::fs::remove_dir_all(&fs_store);
}
