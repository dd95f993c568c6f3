//! Ceilings measured in the same run on the same tiles: how fast the
//! hardware could go, so that a figure reads as a fraction of a limit.
//!
//! Each ceiling is a [`Ceiling`]; one that cannot be measured here is
//! recorded as absent (`gbps: null`), never as zero, with the reason.

use super::data::Frames;
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;
use tiledzarr::codec::ChunkCompressor;
use tiledzarr::config::{Codec, Validated};
use tiledzarr::layout::Layout;

/// Tiles the CPU zstd ceiling compresses per run: whole epochs, at least
/// one, up to this much (or what the frame pool holds).
const CEILING_BYTES: u64 = 256 << 20;
/// Runs of the CPU ceiling: at least `MIN_RUNS`, more while under
/// `MIN_SECONDS` in all, at most `MAX_RUNS`; the best counts.
const MIN_RUNS: usize = 3;
const MAX_RUNS: usize = 10;
const MIN_SECONDS: f64 = 2.0;

#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    pub name: String,
    /// Best of the runs; `None` when not measured (absent, not zero).
    pub gbps: Option<f64>,
    pub median_gbps: Option<f64>,
    /// Input bytes per output byte, for compressor ceilings.
    pub compression_ratio: Option<f64>,
    /// Input bytes of one run (the epochs whose tiles were compressed).
    pub bytes: Option<u64>,
    pub seconds: Vec<f64>,
    /// TiledZarr's best GB/s over this ceiling's best: the fraction of the
    /// limit reached (filled once both are known).
    pub tiledzarr_over_ceiling: Option<f64>,
    pub notes: String,
}

impl Ceiling {
    fn absent(name: &str, why: &str) -> Ceiling {
        Ceiling {
            name: name.into(),
            gbps: None,
            median_gbps: None,
            compression_ratio: None,
            bytes: None,
            seconds: Vec::new(),
            tiledzarr_over_ceiling: None,
            notes: why.into(),
        }
    }
}

/// Every ceiling of the protocol, in the order of the table.
pub fn measure(v: &Validated, frames: &Frames, threads: usize) -> Vec<Ceiling> {
    let mut out = vec![cpu_zstd(v, frames, threads)];
    out.extend(gpu::ceilings(v));
    out
}

/// Names of the ceilings `measure` would report, marked absent: what the
/// record holds under `--no-ceilings`.
pub fn skipped(v: &Validated) -> Vec<Ceiling> {
    let mut out = vec![Ceiling::absent("cpu-zstd", "not measured (--no-ceilings)")];
    out.extend(gpu::ceilings(v).into_iter().map(|c| Ceiling {
        notes: format!("not measured (--no-ceilings); {}", c.notes),
        ..c
    }));
    out
}

/// libzstd at the pipeline's level on all its worker threads, over the tiles
/// of the stream's first epochs, gathered exactly as the library tiles them.
fn cpu_zstd(v: &Validated, frames: &Frames, threads: usize) -> Ceiling {
    let name = "cpu-zstd";
    let level = match v.config.codec {
        Codec::Zstd { level } => level,
        Codec::None => return Ceiling::absent(name, "codec none: no compressor to bound"),
    };
    let layout = &v.layout;
    let epoch_frames = layout.epoch_planes();
    let epochs = (CEILING_BYTES / layout.epoch_bytes())
        .max(1)
        .min(frames.pool_frames() / epoch_frames)
        .max(1);
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => return Ceiling::absent(name, &format!("no thread pool: {e}")),
    };
    let tiles = pool.install(|| gather_epochs(layout, frames, epochs));
    // Counted as the pipeline counts: input bytes, not tile bytes (edge
    // tiles' padding is compressed but was never written).
    let bytes = epochs * layout.epoch_bytes();
    let codec = v.config.codec;
    let mut seconds = Vec::new();
    let mut out_bytes = 0;
    let mut failure = None;
    while seconds.len() < MAX_RUNS
        && (seconds.len() < MIN_RUNS || seconds.iter().sum::<f64>() < MIN_SECONDS)
    {
        let t = Instant::now();
        let r: std::io::Result<usize> = pool.install(|| {
            tiles
                .par_iter()
                .map_init(
                    || (ChunkCompressor::new(codec), Vec::new()),
                    |(z, out), tile| {
                        let z = z
                            .as_mut()
                            .map_err(|e| std::io::Error::other(e.to_string()))?;
                        z.compress(tile, out)?;
                        Ok(out.len())
                    },
                )
                .sum()
        });
        seconds.push(t.elapsed().as_secs_f64());
        match r {
            Ok(n) => out_bytes = n,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if let Some(e) = failure {
        return Ceiling::absent(name, &format!("compression failed: {e}"));
    }
    let (best, median) = best_and_median(&seconds);
    Ceiling {
        name: name.into(),
        gbps: Some(bytes as f64 / best / 1e9),
        median_gbps: Some(bytes as f64 / median / 1e9),
        compression_ratio: Some(bytes as f64 / out_bytes.max(1) as f64),
        bytes: Some(bytes),
        seconds,
        tiledzarr_over_ceiling: None,
        notes: format!(
            "libzstd level {level} via the library's ChunkCompressor on {threads} threads (rayon), \
             {} tiles of {} bytes from the stream's first {epochs} epoch(s), best of the runs",
            tiles.len(),
            layout.tile_bytes()
        ),
    }
}

/// The tiles of the stream's first `epochs` epochs, one `Vec` per tile, in
/// pool-slot order, parts outside the array left at the fill value (zero).
fn gather_epochs(layout: &Layout, frames: &Frames, epochs: u64) -> Vec<Vec<u8>> {
    let epoch_frames = layout.epoch_planes();
    let elem = layout.elem_size();
    let mut input = vec![0u8; layout.epoch_bytes() as usize];
    let mut tiles = Vec::new();
    for e in 0..epochs {
        for (k, chunk) in input.chunks_mut(frames.frame_bytes()).enumerate() {
            chunk.copy_from_slice(frames.frame(e * epoch_frames + k as u64));
        }
        let input = &input;
        let epoch_tiles: Vec<Vec<u8>> = (0..layout.tiles_per_epoch())
            .into_par_iter()
            .map(|i| {
                let plan = layout.tile_gather(i);
                let mut tile = vec![0u8; layout.tile_bytes()];
                let run = plan.run_len() as usize * elem;
                plan.for_each_run(|src, dst| {
                    let (s, d) = (src as usize * elem, dst as usize * elem);
                    tile[d..d + run].copy_from_slice(&input[s..s + run]);
                });
                tile
            })
            .collect();
        tiles.extend(epoch_tiles);
    }
    tiles
}

/// Best (smallest) and median seconds.
pub fn best_and_median(seconds: &[f64]) -> (f64, f64) {
    let mut s = seconds.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    (s[0], median)
}

/// GPU ceilings: the pinned host-to-device copy of 1 GiB and nvCOMP batched
/// zstd alone on the same tiles, already on the device.
///
/// PLUG-IN POINT: not measured yet, so both are recorded as absent. To add
/// one, measure it here (the tiles of `gather_epochs`, the pipeline's level,
/// `v.config.device`) and fill `gbps`, `median_gbps`, `seconds`; the record
/// and the table pick it up unchanged.
mod gpu {
    use super::Ceiling;
    use tiledzarr::config::Validated;

    const WHY: &str = "not measured: tz-bench has no GPU ceiling code yet";

    pub fn ceilings(_v: &Validated) -> Vec<Ceiling> {
        vec![
            Ceiling::absent("h2d-pinned", &format!("pinned H2D copy of 1 GiB; {WHY}")),
            Ceiling::absent(
                "nvcomp-zstd",
                &format!("nvCOMP batched zstd alone on the same tiles; {WHY}"),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(best_and_median(&[3.0, 1.0, 2.0]), (1.0, 2.0));
        assert_eq!(best_and_median(&[4.0, 1.0, 2.0, 3.0]), (1.0, 2.5));
    }
}
