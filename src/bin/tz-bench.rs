//! `tz-bench`: the ingest throughput of TiledZarr as the benchmark protocol
//! defines it, with its ceilings and peers measured in the same run, printed
//! as a table and kept as a JSON record. `bench/README.md` says how to run
//! it and what each figure means; `tz-bench --help` lists the options.

mod tz_bench;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tiledzarr::backend::BackendKind;
use tiledzarr::pipeline::Stage;
use tiledzarr::synth::Generator;
use tz_bench::args::{self, Options, Parsed, SinkKind};
use tz_bench::ceilings::{self, best_and_median};
use tz_bench::data::{self, Frames};
use tz_bench::record::{self, Record};
use tz_bench::stream::{self, Progress, Target};
use tz_bench::{peers, positions, protocol, table, workdir::WorkDir};

const GIB: u64 = 1 << 30;

fn main() -> ExitCode {
    let o = match args::parse(std::env::args().skip(1)) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line: the whole usage text would push the reason off the
            // screen.
            eprintln!("tz-bench: {e} (see tz-bench --help)");
            return ExitCode::from(2);
        }
    };
    match bench(&o) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tz-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench(o: &Options) -> Result<ExitCode, String> {
    if let Some(n) = o.positions {
        return positions::bench(o, n).map(|()| ExitCode::SUCCESS);
    }
    let root = peers::repo_root();
    // The record is written last: a destination that cannot take it fails
    // now, not after minutes of measuring.
    match &o.out {
        Some(out) => record::check_file(out).map_err(|e| format!("--out: {e}"))?,
        None => record::check_folder(&results_dir(o, &root))
            .map_err(|e| format!("{e} (--out names another place for the record)"))?,
    }
    let (label, base) = protocol::load(&o.config)?;
    // The sweep's codecs; the first decides the backend and data size.
    let codecs: Vec<Option<args::CodecArg>> = match o.codecs.as_slice() {
        [] => vec![None],
        list => list.iter().copied().map(Some).collect(),
    };
    let mut config = base.clone();
    protocol::apply(&mut config, o, codecs[0]);
    let v = config
        .validate()
        .map_err(|e| format!("configuration: {e}"))?;
    // Learn the backend up front, without allocating it: a GPU request that
    // cannot run fails before minutes of data generation, and the default
    // size depends on it.
    let (kind, _) = tiledzarr::backend::estimate(&v).map_err(|e| format!("backend: {e}"))?;
    let default_bytes = match kind {
        BackendKind::Cpu => 2 * GIB,
        BackendKind::Gpu => 8 * GIB,
    };
    let layout = &v.layout;
    let frame_shape: Vec<u64> = layout.dims()[1..].iter().map(|d| d.size).collect();
    let bounded = (!layout.is_unbounded()).then(|| layout.dims()[0].size);
    let epoch_frames = layout.epoch_planes();
    let n = data::frames_for(
        o.bytes.unwrap_or(default_bytes),
        layout.plane_bytes(),
        epoch_frames,
        bounded,
    );
    let pool = data::pool_frames_for(n, layout.plane_bytes(), epoch_frames);
    // Before generating the frames, which takes a while: a store folder
    // that cannot be created fails now.
    let work = if o.sink == SinkKind::Fs || o.peers {
        let dir = WorkDir::create(o.store_dir.as_deref());
        Some(dir.map_err(|e| match o.store_dir {
            Some(_) => format!("--store-dir: {e}"),
            None => e,
        })?)
    } else {
        None
    };
    // Generating a pool of gigabytes takes seconds to a minute: say what
    // runs before it does.
    eprintln!(
        "tz-bench: {label}: generating {pool} distinct {} frames ({:.2} GB)",
        o.pattern,
        (pool * layout.plane_bytes()) as f64 / 1e9
    );
    let t = Instant::now();
    let gen = Generator::new(o.pattern, config.dtype, &frame_shape, o.seed);
    let frames = Frames::new(gen, n, pool);
    eprintln!(
        "tz-bench: {label}: generated {pool} distinct {} frames ({:.2} GB) in {:.1} s; \
         streaming {n} frames ({:.2} GB) per run",
        o.pattern,
        (pool * layout.plane_bytes()) as f64 / 1e9,
        t.elapsed().as_secs_f64(),
        frames.bytes() as f64 / 1e9
    );

    let mut failed = false;
    let mut rows = Vec::new();
    for arg in codecs.iter().copied() {
        let mut config = base.clone();
        protocol::apply(&mut config, o, arg);
        let v = config
            .validate()
            .map_err(|e| format!("configuration ({}): {e}", protocol::label(config.codec)))?;
        let run = Setup {
            root: &root,
            label: &label,
            frames: &frames,
            work: work.as_ref(),
            n,
            sweep: codecs.len() > 1,
        };
        let (rec, bad) = measure(o, &run, &config, &v)?;
        failed |= bad;
        rows.push(rec);
    }
    if rows.len() > 1 {
        print!("\n{}", table::sweep(&rows));
    }
    drop(work);
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// What every codec of a sweep shares.
struct Setup<'a> {
    root: &'a std::path::Path,
    label: &'a str,
    frames: &'a Frames,
    work: Option<&'a WorkDir>,
    /// Frames streamed per run.
    n: u64,
    /// Several codecs: records are named by codec.
    sweep: bool,
}

/// Runs, ceilings and peers of one codec: its record, written and printed,
/// and whether anything failed.
fn measure(
    o: &Options,
    run: &Setup<'_>,
    config: &tiledzarr::Config,
    v: &tiledzarr::config::Validated,
) -> Result<(Record, bool), String> {
    let (root, label, frames, n) = (run.root, run.label, run.frames, run.n);
    let layout = &v.layout;
    let frame_shape: Vec<u64> = layout.dims()[1..].iter().map(|d| d.size).collect();
    let store = run.work.map(|w| w.path().join("store.zarr"));
    let target = match (&o.sink, &store) {
        (SinkKind::Fs, Some(path)) => Target::Fs(
            path,
            stream::FsChoices {
                fsync: o.fsync,
                page_cache: o.page_cache,
            },
        ),
        _ => Target::Discard,
    };

    let mut device = record::device();
    device.load_before = record::load_average();
    let cpu_before = record::cpu_times();
    let mut progress = Progress::new();
    if o.ingest == args::Ingest::Dma {
        eprintln!("tz-bench: writing the frames into reservations (untimed)");
        stream::fill_reservations(config, frames)?;
    }
    // The CPU compressor's ceiling is measured between the stream's runs
    // (see `ceilings::CpuCeiling`).
    let mut cpu_ceiling = o
        .ceilings
        .then(|| ceilings::CpuCeiling::prepare(v, frames, v.threads));
    let mut notes = Vec::new();
    let mut failed = false;
    // The peers' reps alternate with the stream's (see `peers`).
    let mut peer_run = None;
    if o.peers {
        if o.sink == SinkKind::Discard {
            notes.push(
                "the peers write a store: compare them with the fs-sink figure \
                 (this run discarded its shards)"
                    .into(),
            );
        }
        match peers::unsupported(v) {
            Some(why) => notes.push(format!("peers not run: {why}")),
            None => {
                let req = peers::Request {
                    root,
                    python: o.python.as_deref(),
                    work: run.work.expect("created for --peers").path(),
                    reps: o.reps,
                    threads: o.threads,
                };
                match peers::start(&req, v, frames) {
                    Ok(p) => peer_run = Some(p),
                    Err(e) => {
                        notes.push(format!("peers failed: {e}"));
                        failed = true;
                    }
                }
            }
        }
    }
    let mut runs = Vec::new();
    let unbuffered_before = tiledzarr::sink::fs_unbuffered_files();
    for rep in 1..=o.reps {
        progress.start(format!("rep {rep}/{}", o.reps));
        runs.push(stream::run(
            config,
            &target,
            frames,
            o.ingest,
            &mut progress,
        )?);
        if let Some(c) = &mut cpu_ceiling {
            c.run_between(o.reps);
        }
        if let Some(p) = &mut peer_run {
            progress.start(format!("peers' rep {rep}/{}", o.reps));
            if let Err(e) = p.rep() {
                notes.push(format!("peers failed: {e}"));
                failed = true;
            }
        }
    }
    let unbuffered_files = tiledzarr::sink::fs_unbuffered_files() - unbuffered_before;
    let seconds: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    let (best_s, median_s) = best_and_median(&seconds);
    let best = runs
        .iter()
        .find(|r| r.seconds == best_s)
        .expect("the best run is one of the runs");
    let m = best.summary.metrics;
    let bytes = frames.bytes() as f64;
    let best_gbps = bytes / best_s / 1e9;

    let mut ceilings = match &mut cpu_ceiling {
        Some(cpu) => {
            eprintln!("tz-bench: measuring ceilings");
            ceilings::measure(v, frames, cpu)
        }
        None => ceilings::skipped(v),
    };
    // Its tiles (up to 256 MiB, more for a GPU batch) are not kept for the
    // peers.
    drop(cpu_ceiling);
    for c in &mut ceilings {
        c.tiledzarr_over_ceiling = c.gbps.map(|g| best_gbps / g);
    }

    let codec_label = protocol::label(config.codec);
    let (mut peer_list, mut peers_setup) = (Vec::new(), serde_json::Value::Null);
    if let Some(p) = peer_run {
        match p.finish() {
            Ok(out) => {
                peer_list = out.peers;
                peers_setup = out.setup;
            }
            Err(e) => {
                notes.push(format!("peers failed: {e}"));
                failed = true;
            }
        }
    }
    for p in &mut peer_list {
        let over = p["best_gbps"].as_f64().map(|g| best_gbps / g);
        p["tiledzarr_over_peer"] = over.into();
        failed |= p["status"] == "failed";
    }
    device.load_after = record::load_average();
    device.steal_fraction = cpu_before
        .zip(record::cpu_times())
        .and_then(|(before, after)| record::steal_since(before, after));
    if best.summary.backend == BackendKind::Gpu {
        (device.gpu, device.gpu_driver) = record::gpu(v.config.device);
    }

    let stage_seconds: BTreeMap<String, f64> = Stage::ALL
        .iter()
        .map(|&s| (s.name().to_string(), m.seconds(s)))
        .collect();
    let stage_gbps = stage_seconds
        .iter()
        .map(|(k, &s)| (k.clone(), (s > 0.0).then(|| m.bytes_in as f64 / s / 1e9)))
        .collect();
    let (date, stamp) = record::now_utc();
    let fs = o.sink == SinkKind::Fs;
    let rec = Record {
        tool: format!("tz-bench {}", env!("CARGO_PKG_VERSION")),
        date,
        commit: record::commit(root),
        device,
        configuration: record::Configuration {
            name: label.to_string(),
            json: json(&v.config),
            tile_shape: layout.tile_shape(),
            shard_shape: layout.shard_shape(),
            threads: v.threads,
        },
        data: record::Data {
            pattern: o.pattern.name().into(),
            seed: o.seed,
            dtype: config.dtype.name().into(),
            frame_shape,
            frame_bytes: layout.plane_bytes(),
            frames: n,
            bytes: frames.bytes(),
            distinct_frames: frames.pool_frames(),
        },
        backend: record::Backend {
            requested: json(&v.config.backend).as_str().unwrap_or("?").into(),
            kind: best.summary.backend.name().into(),
            reason: best.summary.backend_reason.clone(),
        },
        sink: record::Sink {
            kind: o.sink.name().into(),
            dir: fs.then(|| store_base(o).display().to_string()),
            filesystem: fs.then(|| record::filesystem(&store_base(o))).flatten(),
            fsync: fs.then_some(o.fsync),
            page_cache: fs.then(|| {
                let choice = o
                    .page_cache
                    .map_or("auto", |p| if p { "on" } else { "off" });
                choice.to_string()
            }),
            unbuffered_files: fs.then_some(unbuffered_files),
        },
        figures: record::Figures {
            best_gbps,
            median_gbps: bytes / median_s / 1e9,
            seconds,
            compression_ratio: m.compression_ratio(),
            bytes_out: m.bytes_out,
            shards: m.shards,
            epochs: m.epochs,
            stage_seconds,
            stage_gbps,
            ingest: o.ingest.name().into(),
            lifecycle: runs.iter().map(|r| r.lifecycle).collect(),
            memory_plan: tiledzarr::backend::estimate(v)
                .ok()
                .map(|(_, p)| [p.device_bytes, p.pinned_bytes, p.host_bytes]),
        },
        ceilings,
        peers: peer_list,
        peers_setup,
        notes,
    };
    let out = o.out.clone().unwrap_or_else(|| {
        // Runs without fsync keep a record of their own beside those with.
        let nofsync = if fs && !o.fsync { "-nofsync" } else { "" };
        let codec = if run.sweep {
            format!("-{codec_label}")
        } else {
            String::new()
        };
        let name = format!(
            "{stamp}-{label}{codec}-{}-{}{nofsync}.json",
            rec.backend.kind,
            o.sink.name()
        );
        results_dir(o, root).join(name)
    });
    rec.write(&out)?;
    print!("{}", table::render(&rec));
    println!("\nrecord: {}", display(&out));
    Ok((rec, failed))
}

/// Where records go without --out.
fn results_dir(o: &Options, root: &std::path::Path) -> PathBuf {
    o.results
        .clone()
        .unwrap_or_else(|| root.join("bench/results"))
}

/// The folder the store's scratch folder went under (the disk measured).
fn store_base(o: &Options) -> PathBuf {
    o.store_dir.clone().unwrap_or_else(std::env::temp_dir)
}

/// A path relative to the working directory when it lies under it.
fn display(p: &std::path::Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    p.strip_prefix(&cwd).unwrap_or(p).display().to_string()
}

fn json<T: serde::Serialize>(x: &T) -> serde_json::Value {
    serde_json::to_value(x).expect("serializes")
}
