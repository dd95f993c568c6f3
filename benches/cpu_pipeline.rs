//! The CPU pipeline on the benchmark protocol's cam-32 configuration
//! (uint16, z ∞/32/1, y 2048/32/16, x 2048/32/16) with microscopy data, one
//! frame per write: with shards discarded (the pipeline alone) and with the
//! filesystem store (end to end).
//!
//! `cargo bench -p tiledzarr-benches --bench cpu_pipeline`; `TZ_BENCH_FRAMES` sets the frames per
//! iteration (default 256 = 2 GiB, eight epochs, the protocol's CPU size).
//!
//! The small-chunk path: cam-1k (`bench/configs/cam-1k.json`), 128 frames of
//! 1024 x 1024 (four epochs, 64 KiB tiles, 16 shards of 32 x 512 x 512), a
//! short acquisition whose figure counts the stream's creation too.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::{Duration, Instant};
use tiledzarr::sink::Discard;
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Stream};

const CAM32: &str = r#"{"dtype": "uint16", "backend": "cpu", "dimensions": [
    {"name": "z", "size": 0, "tile": 32, "tiles_per_shard": 1},
    {"name": "y", "size": 2048, "tile": 32, "tiles_per_shard": 16},
    {"name": "x", "size": 2048, "tile": 32, "tiles_per_shard": 16}],
    "codec": {"name": "zstd", "level": 1}}"#;

const CAM1K: &str = include_str!("../bench/configs/cam-1k.json");

fn frames() -> Vec<Vec<u8>> {
    let n: u64 = std::env::var("TZ_BENCH_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    frames_of(2048, n)
}

fn frames_of(side: u64, n: u64) -> Vec<Vec<u8>> {
    let gen = Generator::new(Pattern::Microscopy, DType::Uint16, &[side, side], 1);
    (0..n)
        .map(|i| {
            let mut f = vec![0u8; gen.frame_bytes()];
            gen.fill_frame(i, &mut f);
            f
        })
        .collect()
}

/// Streams the frames `iters` times; times each from the first write to
/// the end of `finish`, as the benchmark protocol defines the figure (stream
/// creation, which allocates and pre-faults staging memory, is excluded).
fn run(config: &Config, frames: &[Vec<u8>], discard: bool, iters: u64) -> Duration {
    run_timed(config, frames, discard, iters, false)
}

/// As [`run`], with the stream's creation inside the time when `create`.
fn run_timed(
    config: &Config,
    frames: &[Vec<u8>],
    discard: bool,
    iters: u64,
    create: bool,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let sink = discard.then(|| Box::new(Discard) as Box<dyn tiledzarr::sink::ShardSink>);
        let created = Instant::now();
        let mut s = Stream::new(config, sink).expect("stream");
        let t = if create { created } else { Instant::now() };
        for f in frames {
            s.write_blocking(f, None).expect("write");
        }
        s.finish().expect("finish");
        total += t.elapsed();
    }
    total
}

fn cam32(c: &mut Criterion) {
    let frames = frames();
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    let mut g = c.benchmark_group("cam-32");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(30))
        .throughput(Throughput::Bytes(bytes));
    let discard = Config::from_json(CAM32).unwrap();
    g.bench_function("cpu/discard", |b| {
        b.iter_custom(|n| run(&discard, &frames, true, n))
    });
    let dir = tempfile::tempdir().unwrap();
    let mut store = discard.clone();
    store.store = Some(tiledzarr::config::Store {
        path: dir.path().join("bench.zarr"),
        overwrite: true,
        fsync: true,
        ..Default::default()
    });
    g.bench_function("cpu/filesystem", |b| {
        b.iter_custom(|n| run(&store, &frames, false, n))
    });
    g.finish();
}

fn cam1k(c: &mut Criterion) {
    let frames = frames_of(1024, 128);
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    let mut g = c.benchmark_group("cam-1k");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Bytes(bytes));
    let mut config = Config::from_json(CAM1K).unwrap();
    config.backend = tiledzarr::config::BackendChoice::Cpu;
    g.bench_function("cpu/discard, with create", |b| {
        b.iter_custom(|n| run_timed(&config, &frames, true, n, true))
    });
    g.finish();
}

criterion_group!(benches, cam32, cam1k);
criterion_main!(benches);
