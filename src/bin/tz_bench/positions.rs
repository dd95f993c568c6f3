//! `--positions N`: a multi-position time-lapse as one stream of N arrays
//! (each position 2048 x 2048 uint16 frames, 2 channels; at each time point
//! the stage visits every position in turn and both channels of it are
//! written), beside one stream of the named configuration (cam-32) of the
//! same bytes, in the same run. Both write into a discarding sink: the
//! figure is the pipeline's, as the protocol's default.
//!
//! What it reports, best of `--reps` after one untimed warm-up each: ingest
//! (first write to the end of `finish`), stream creation, the device and
//! page-locked bytes the GPU backend held after the flush, the growth of
//! the process's resident memory over the stream's life, and the memory
//! plan (`tz_estimate_memory_json`) of the N-array stream beside that of
//! one position alone.

use super::args::Options;
use super::data::{self, Frames};
use super::stream::{self, Progress, Target};
use super::{protocol, record};
use serde_json::{json, Value};
use std::time::Instant;
use tiledzarr::config::StreamConfig;
use tiledzarr::memory::MemoryPlan;
use tiledzarr::sink::Discard;
use tiledzarr::synth::Generator;
use tiledzarr::{DType, Stream};

const SIDE: u64 = 2048;
const CHANNELS: u64 = 2;
const GIB: u64 = 1 << 30;

/// The JSON of a stream of `n` positions with `base`'s shared keys and
/// codec.
fn positions_json(base: &Value, n: usize) -> Value {
    let mut shared = base.as_object().cloned().unwrap_or_default();
    let codec = shared.remove("codec").unwrap_or(Value::Null);
    for k in [
        "dimensions",
        "dtype",
        "multiscale",
        "ome",
        "storage_order",
        "attributes",
        "store",
    ] {
        shared.remove(k);
    }
    // A tile of both channels, 128 x 128 (64 KiB, cam-32's tile bytes);
    // one time point per epoch and per shard row, so that a position's
    // shards are written at each visit and nothing waits on the host for
    // the next one.
    let arrays: Vec<Value> = (0..n)
        .map(|p| {
            json!({"key": format!("Pos{p}"), "dtype": "uint16", "codec": codec,
                "dimensions": [
                    {"name": "t", "size": 0, "tile": 1, "tiles_per_shard": 1},
                    {"name": "c", "size": CHANNELS, "tile": CHANNELS, "tiles_per_shard": 1},
                    {"name": "y", "size": SIDE, "tile": 128, "tiles_per_shard": 16},
                    {"name": "x", "size": SIDE, "tile": 128, "tiles_per_shard": 16}]})
        })
        .collect();
    shared.insert("arrays".into(), Value::Array(arrays));
    shared.insert("collection".into(), json!("bioformats2raw"));
    Value::Object(shared)
}

fn memory(config: &Value) -> Result<(String, MemoryPlan), String> {
    let plan = StreamConfig::from_json(&config.to_string())
        .map_err(|e| e.to_string())?
        .validate()
        .map_err(|e| e.to_string())?;
    let (kind, m) = tiledzarr::pipeline::estimate(&plan).map_err(|e| e.to_string())?;
    Ok((format!("{kind:?}"), m))
}

fn memory_json(m: &MemoryPlan) -> Value {
    json!({"device_bytes": m.device_bytes, "pinned_bytes": m.pinned_bytes,
           "host_bytes": m.host_bytes})
}

struct Rep {
    seconds: f64,
    create_seconds: f64,
    device_bytes: u64,
    pinned_bytes: u64,
    rss_growth_bytes: Option<u64>,
}

/// One stream of the positions: `times` time points of every position.
fn run_positions(
    config: &StreamConfig,
    frames: &Frames,
    n: usize,
    times: u64,
) -> Result<Rep, String> {
    let rss_before = stream::resident_bytes();
    let t = Instant::now();
    let mut s = Stream::create(config, Some(Box::new(Discard))).map_err(|e| e.to_string())?;
    let create_seconds = t.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut i = 0;
    for _ in 0..times {
        for p in 0..n {
            for _ in 0..CHANNELS {
                s.write_blocking_to(p, frames.frame(i), None)
                    .map_err(|e| format!("writing position {p}: {e}"))?;
                i += 1;
            }
        }
    }
    s.finish().map_err(|e| format!("finishing: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let (device_bytes, pinned_bytes) = tiledzarr::backend::cuda::allocated();
    let rss_growth_bytes = rss_before
        .zip(stream::resident_bytes())
        .map(|(before, after)| after.saturating_sub(before));
    drop(s);
    Ok(Rep {
        seconds,
        create_seconds,
        device_bytes,
        pinned_bytes,
        rss_growth_bytes,
    })
}

fn best(reps: &[Rep]) -> Value {
    let by = |f: fn(&Rep) -> f64| reps.iter().map(f).fold(f64::INFINITY, f64::min);
    json!({"seconds": by(|r| r.seconds),
           "seconds_all": reps.iter().map(|r| r.seconds).collect::<Vec<_>>(),
           "create_seconds": by(|r| r.create_seconds),
           "create_seconds_all": reps.iter().map(|r| r.create_seconds).collect::<Vec<_>>(),
           "device_bytes": reps.iter().map(|r| r.device_bytes).max(),
           "pinned_bytes": reps.iter().map(|r| r.pinned_bytes).max(),
           "rss_growth_bytes": reps.iter().filter_map(|r| r.rss_growth_bytes).max()})
}

pub fn bench(o: &Options, n: usize) -> Result<(), String> {
    if n == 0 {
        return Err("--positions must be at least 1".into());
    }
    let (label, mut one) = protocol::load(&o.config)?;
    protocol::apply(&mut one, o, o.codecs.first().copied());
    let one_json: Value = serde_json::from_str(&one.to_json()).map_err(|e| e.to_string())?;
    let many_json = positions_json(&one_json, n);
    let many = StreamConfig::from_json(&many_json.to_string()).map_err(|e| e.to_string())?;
    let (kind, many_memory) = memory(&many_json)?;
    let (_, position_memory) = memory(&positions_json(&one_json, 1))?;
    let (_, one_memory) = memory(&one_json)?;
    let frame_bytes = SIDE * SIDE * 2;
    let visit = n as u64 * CHANNELS * frame_bytes;
    let default_bytes = if kind == "Gpu" { 8 * GIB } else { 2 * GIB };
    let times = (o.bytes.unwrap_or(default_bytes) / visit).max(2);
    let total_frames = times * n as u64 * CHANNELS;
    // The one stream takes the same frames, rounded down to its epochs.
    let v = one.validate().map_err(|e| format!("configuration: {e}"))?;
    let gen = Generator::new(o.pattern, DType::Uint16, &[SIDE, SIDE], o.seed);
    let epoch = v.layout.epoch_planes();
    let pool = data::pool_frames_for(total_frames, frame_bytes, epoch.max(2 * CHANNELS));
    let frames = Frames::new(gen, total_frames, pool);
    let one_frames = Frames::new(
        Generator::new(o.pattern, DType::Uint16, &[SIDE, SIDE], o.seed),
        data::frames_for(total_frames * frame_bytes, frame_bytes, epoch, None),
        pool,
    );
    eprintln!(
        "{n} positions x {CHANNELS} channels x {times} time points = {:.2} GB ({kind}); one {label} stream beside it",
        (total_frames * frame_bytes) as f64 / 1e9
    );
    let mut progress = Progress::new();
    let mut many_reps = Vec::new();
    let mut one_reps = Vec::new();
    // Alternated, each after an untimed warm-up, so that neither gets the
    // machine's better minutes.
    for rep in 0..=o.reps {
        let r = run_positions(&many, &frames, n, times)?;
        eprintln!(
            "positions rep {rep}: {:.3} GB/s, created in {:.3} s",
            frames.bytes() as f64 / 1e9 / r.seconds,
            r.create_seconds
        );
        progress.start(format!("{label} rep {rep}"));
        let s = stream::run(&one, &Target::Discard, &one_frames, o.ingest, &mut progress)?;
        if rep > 0 {
            many_reps.push(r);
            one_reps.push(Rep {
                seconds: s.seconds,
                create_seconds: s.lifecycle.create_seconds,
                device_bytes: s.lifecycle.device_bytes,
                pinned_bytes: s.lifecycle.pinned_bytes,
                rss_growth_bytes: s.lifecycle.rss_growth_bytes,
            });
        }
    }
    let gbps =
        |f: &Frames, r: &Value| f.bytes() as f64 / 1e9 / r["seconds"].as_f64().unwrap_or(f64::NAN);
    let (many_best, one_best) = (best(&many_reps), best(&one_reps));
    let (many_gbps, one_gbps) = (gbps(&frames, &many_best), gbps(&one_frames, &one_best));
    let mut device = record::device();
    if kind == "Gpu" {
        (device.gpu, device.gpu_driver) = record::gpu(one.device);
    }
    let out = json!({
        "tool": "tz-bench --positions",
        "date": record::now_utc().0,
        "commit": record::commit(&super::peers::repo_root()),
        "device": device,
        "backend": kind,
        "positions": {"count": n, "channels": CHANNELS, "frame": [SIDE, SIDE],
                      "time_points": times, "bytes": frames.bytes(), "gbps": many_gbps,
                      "best": many_best, "memory_plan": memory_json(&many_memory),
                      "memory_plan_one_position": memory_json(&position_memory),
                      "configuration": many_json},
        "one_stream": {"name": label, "bytes": one_frames.bytes(), "gbps": one_gbps,
                       "best": one_best, "memory_plan": memory_json(&one_memory)},
        "ingest_ratio": many_gbps / one_gbps,
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
    );
    if let Some(path) = &o.out {
        std::fs::write(path, serde_json::to_string_pretty(&out).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
