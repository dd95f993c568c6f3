//! The table on stdout, printed from the record so that the two never
//! disagree.

use super::record::Record;
use std::fmt::Write;
use tiledzarr::pipeline::Stage;

pub fn render(r: &Record) -> String {
    let mut t = String::new();
    let c = &r.configuration;
    let d = &r.data;
    let dims = |s: &[u64]| s.iter().map(u64::to_string).collect::<Vec<_>>().join("x");
    let codec = codec_name(r);
    let _ = writeln!(
        t,
        "config   {} ({}, frame {}, tile {}, shard {}, {codec})",
        c.name,
        d.dtype,
        dims(&d.frame_shape),
        dims(&c.tile_shape),
        dims(&c.shard_shape)
    );
    let _ = writeln!(
        t,
        "data     {} seed {}, {} frames = {:.3} GB per run, {} distinct frames",
        d.pattern,
        d.seed,
        d.frames,
        d.bytes as f64 / 1e9,
        d.distinct_frames
    );
    let _ = writeln!(
        t,
        "backend  {} ({}), {} thread{}; sink {}",
        r.backend.kind,
        r.backend.reason,
        c.threads,
        if c.threads == 1 { "" } else { "s" },
        r.sink.kind
    );
    if let Some(fs) = &r.sink.filesystem {
        let dir = r.sink.dir.as_deref().unwrap_or("?");
        let _ = writeln!(t, "store    under {dir} ({fs})");
    }
    let load = |l: Option<f64>| l.map_or("?".into(), |l| format!("{l:.2}"));
    let steal = r.device.steal_fraction.map_or(String::new(), |f| {
        format!(
            "; {:.1}% of the CPU time stolen by the hypervisor",
            f * 100.0
        )
    });
    let _ = writeln!(
        t,
        "machine  {}, {} cores; load average {} before, {} after{steal}",
        r.device.cpu,
        r.device.cores,
        load(r.device.load_before),
        load(r.device.load_after)
    );
    let dirty = match r.commit.dirty {
        Some(true) => " (dirty)",
        _ => "",
    };
    let _ = writeln!(t, "commit   {}{dirty}", r.commit.hash);
    let _ = writeln!(t, "date     {}", r.date);
    let f = &r.figures;
    let secs = |x: &dyn Fn(&super::stream::Lifecycle) -> f64| {
        f.lifecycle
            .iter()
            .map(|l| format!("{:.3}", x(l)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        t,
        "streams  ingest {}; create s {}; destroy s {}",
        f.ingest,
        secs(&|l| l.create_seconds),
        secs(&|l| l.destroy_seconds)
    );
    let gb = |b: u64| b as f64 / 1e9;
    if let (Some(l), Some([dev, pin, _])) = (f.lifecycle.first(), f.memory_plan) {
        let _ = writeln!(
            t,
            "memory   device {:.2} GB, page-locked {:.2} GB after the first flush; \
             planned {:.2} GB, {:.2} GB",
            gb(l.device_bytes),
            gb(l.pinned_bytes),
            gb(dev),
            gb(pin)
        );
    }
    t.push('\n');

    let header = format!(
        "{:<30} {:>10} {:>12} {:>12} {:>15}",
        "figure", "best GB/s", "median GB/s", "compression", "TZ best / this"
    );
    let _ = writeln!(t, "{header}");
    let _ = writeln!(t, "{}", "-".repeat(header.len()));
    let tz = f.best_gbps;
    let row = |t: &mut String,
               name: &str,
               best: Option<f64>,
               median: Option<f64>,
               ratio: Option<f64>,
               vs: bool| {
        let Some(best) = best else {
            let _ = writeln!(t, "{name:<30} {:>10}", "absent");
            return;
        };
        let num = |x: Option<f64>, p: usize| x.map_or("-".into(), |x| format!("{x:.p$}"));
        let over = if vs {
            num(Some(tz / best), 2)
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "{name:<30} {:>10} {:>12} {:>12} {over:>15}",
            num(Some(best), 3),
            num(median, 3),
            ratio.map_or("-".into(), |x| format!("{x:.2}x"))
        );
    };
    row(
        &mut t,
        &format!("TiledZarr ingest ({})", r.sink.kind),
        Some(tz),
        Some(f.median_gbps),
        Some(f.compression_ratio),
        false,
    );
    for c in &r.ceilings {
        row(
            &mut t,
            &format!("ceiling {}", c.name),
            c.gbps,
            c.median_gbps,
            c.compression_ratio,
            true,
        );
    }
    for p in &r.peers {
        let name = format!("peer {}", p["name"].as_str().unwrap_or("?"));
        match p["best_gbps"].as_f64() {
            Some(best) => row(
                &mut t,
                &name,
                Some(best),
                p["median_gbps"].as_f64(),
                p["ratio"].as_f64(),
                true,
            ),
            None => {
                let status = p["status"].as_str().unwrap_or("no figure");
                let _ = writeln!(t, "{name:<30} {status:>10}");
            }
        }
    }
    t.push('\n');

    let secs: Vec<String> = f.seconds.iter().map(|s| format!("{s:.3}")).collect();
    let _ = writeln!(t, "runs (s): {}", secs.join(" "));
    let _ = writeln!(
        t,
        "stages of the best run (s summed over threads; GB/s = bytes in / those s):"
    );
    // In data order, not the record's alphabetical one.
    for stage in Stage::ALL.map(Stage::name) {
        let s = f.stage_seconds.get(stage).copied().unwrap_or(0.0);
        let gbps = f.stage_gbps.get(stage).copied().flatten();
        let gbps = gbps.map_or("-".into(), |g| format!("{g:.3}"));
        let _ = writeln!(t, "  {stage:<10} {s:>9.3} s {gbps:>9} GB/s");
    }
    let notes = r
        .ceilings
        .iter()
        .map(|c| (format!("ceiling {}", c.name), c.notes.clone()))
        .chain(r.peers.iter().map(|p| {
            let name = p["name"].as_str().unwrap_or("?");
            let notes = p["notes"].as_str().unwrap_or("");
            (format!("peer {name}"), notes.to_string())
        }));
    t.push('\n');
    for (name, note) in notes {
        let _ = writeln!(t, "{name}: {note}");
    }
    for n in &r.notes {
        let _ = writeln!(t, "note: {n}");
    }
    t
}

/// The record's codec in words: `zstd 1`, `blosc lz4 5, bit shuffle`.
fn codec_name(r: &Record) -> String {
    match r.configuration.json.get("codec") {
        Some(v) if v["name"] == "blosc" => format!(
            "blosc {} {}, {} shuffle",
            v["cname"].as_str().unwrap_or("zstd"),
            v["level"],
            v["shuffle"].as_str().unwrap_or("byte")
        ),
        Some(v) if v["name"] != "none" => {
            format!("{} {}", v["name"].as_str().unwrap_or("?"), v["level"])
        }
        _ => "no compression".into(),
    }
}

/// A codec sweep in one table: per codec, TiledZarr's ratio and GB/s, and
/// each ceiling measured with it (the compressor alone on the same tiles,
/// and on a GPU the H2D copy) with the fraction of it reached, best
/// against best, and median against median where both runs have one (on a
/// machine whose speed drifts, the best of many short ceiling runs and
/// the best of a few long stream runs come from different moments).
pub fn sweep(records: &[Record]) -> String {
    let mut t = String::new();
    let header = format!(
        "{:<34} {:>7} {:>7} {:>9}  {}",
        "codec (backend)", "ratio", "GB/s", "ceilings", "(GB/s, TZ / ceiling: best, median)"
    );
    let _ = writeln!(t, "{header}");
    let _ = writeln!(t, "{}", "-".repeat(header.len() + 10));
    for r in records {
        let f = &r.figures;
        let ceilings: Vec<String> = r
            .ceilings
            .iter()
            .filter_map(|c| {
                let g = c.gbps?;
                let ratio = c
                    .compression_ratio
                    .map_or(String::new(), |x| format!(", {x:.2}x"));
                let medians = c
                    .median_gbps
                    .filter(|&m| m > 0.0)
                    .map_or(String::new(), |m| {
                        format!(", median {:.2}", f.median_gbps / m)
                    });
                Some(format!(
                    "{} {g:.2}{ratio} ({:.2}{medians})",
                    c.name,
                    f.best_gbps / g
                ))
            })
            .collect();
        let _ = writeln!(
            t,
            "{:<34} {:>6.2}x {:>7.2}  {}",
            format!("{} ({})", codec_name(r), r.backend.kind),
            f.compression_ratio,
            f.best_gbps,
            ceilings.join("; ")
        );
    }
    t
}
