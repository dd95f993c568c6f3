//! Ceilings measured in the same run on the same tiles: how fast the
//! hardware could go, so that a figure reads as a fraction of a limit.
//!
//! Each ceiling is a [`Ceiling`]; one that cannot be measured here is
//! recorded as absent (`gbps: null`), never as zero, with the reason.

mod gpu;

use super::data::Frames;
use rayon::prelude::*;
use serde::Serialize;
use std::ops::Range;
use std::time::Instant;
use tiledzarr::codec::ChunkCompressor;
use tiledzarr::config::{Codec, Shuffle, Validated};
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

/// Every ceiling of the protocol, in the order of the table: the CPU
/// compressor's from `cpu` (its runs so far, topped up here), then the
/// GPU's.
pub fn measure(v: &Validated, frames: &Frames, cpu: &mut CpuCeiling) -> Vec<Ceiling> {
    let layout = &v.layout;
    let stream_epochs = (frames.frames() / layout.epoch_planes()).max(1);
    let gpu = gpu::plan(v, stream_epochs, frames.pool_frames());
    let gpu_epochs = match (&gpu, v.config.codec) {
        (_, Codec::None) | (Err(_), _) => 0,
        (Ok(p), _) => p.epochs,
    };
    let mut out = vec![cpu.finish()];
    // The CPU ceiling's tiles are the GPU's first ones: only the epochs
    // beyond them are gathered.
    if gpu_epochs > cpu.epochs {
        let (have, want) = (cpu.epochs, gpu_epochs);
        let mut tiles = std::mem::take(&mut cpu.tiles);
        cpu.in_pool(|| gather_epochs(layout, frames, have..want, &mut tiles));
        cpu.tiles = tiles;
    }
    out.extend(gpu::measure(v, gpu, &cpu.tiles, frames));
    out
}

/// Names of the ceilings `measure` would report, marked absent: what the
/// record holds under `--no-ceilings`.
pub fn skipped(v: &Validated) -> Vec<Ceiling> {
    let name = format!("cpu-{}", inner_name(v.config.codec));
    let mut out = vec![Ceiling::absent(&name, "not measured (--no-ceilings)")];
    out.extend(gpu::skipped(v));
    out
}

/// The compressor that does the work: zstd, lz4, zlib or gzip ("none"
/// without one), which names the ceilings.
fn inner_name(c: Codec) -> &'static str {
    match c {
        Codec::None => "none",
        Codec::Zstd { .. } => "zstd",
        Codec::Gzip { .. } => "gzip",
        Codec::Blosc { cname, .. } => tiledzarr::codec::blosc_cname(cname).name(),
    }
}

/// The stream's own codec (libzstd, Blosc1 frames with c-blosc's filters
/// and its compressor inside, or zlib-rs for gzip) at its level on all the
/// pipeline's worker threads, over the tiles of the stream's first epochs,
/// gathered exactly as the library tiles them. Named after the compressor
/// inside ("cpu-zstd" for zstd and blosc-zstd alike). Its runs are taken
/// between the stream's runs ([`CpuCeiling::run_between`]): a shared
/// machine's speed drifts over seconds, and a ceiling measured after all
/// of the stream's runs would be compared with a machine in another state.
pub struct CpuCeiling {
    name: String,
    /// What is compressed, for the notes; the reason when the ceiling
    /// cannot be measured here.
    what: Result<String, String>,
    codec: Codec,
    elem: usize,
    tile_bytes: usize,
    epochs: u64,
    /// Input bytes of one run.
    bytes: u64,
    tiles: Vec<u8>,
    pool: Result<rayon::ThreadPool, String>,
    threads: usize,
    seconds: Vec<f64>,
    out_bytes: usize,
    failure: Option<String>,
    /// Whether runs were taken between the stream's runs.
    interleaved: bool,
}

impl CpuCeiling {
    /// Gathers the tiles of the stream's first epochs (up to
    /// [`CEILING_BYTES`]) on `threads` threads.
    pub fn prepare(v: &Validated, frames: &Frames, threads: usize) -> CpuCeiling {
        let layout = &v.layout;
        let pool_epochs = (frames.pool_frames() / layout.epoch_planes()).max(1);
        let epochs = (CEILING_BYTES / layout.epoch_bytes())
            .max(1)
            .min(pool_epochs);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| format!("no thread pool: {e}"));
        let mut c = CpuCeiling {
            name: format!("cpu-{}", inner_name(v.config.codec)),
            what: compressor_description(v),
            codec: v.config.codec,
            elem: layout.elem_size(),
            tile_bytes: layout.tile_bytes(),
            epochs,
            // Counted as the pipeline counts: input bytes, not tile bytes
            // (edge tiles' padding is compressed but was never written).
            bytes: epochs * layout.epoch_bytes(),
            tiles: Vec::new(),
            pool,
            threads,
            seconds: Vec::new(),
            out_bytes: 0,
            failure: None,
            interleaved: false,
        };
        if c.what.is_ok() {
            let mut tiles = Vec::new();
            c.in_pool(|| gather_epochs(layout, frames, 0..epochs, &mut tiles));
            c.tiles = tiles;
        }
        c
    }

    /// `f` on the ceiling's threads (on this one without them).
    fn in_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Ok(p) => p.install(f),
            Err(_) => f(),
        }
    }

    /// Runs taken after one of the stream's `reps` runs: at least one,
    /// then more while this call has taken less than its share of
    /// [`MIN_SECONDS`], up to its share of [`MAX_RUNS`].
    pub fn run_between(&mut self, reps: usize) {
        self.interleaved = true;
        let reps = reps.max(1);
        let (budget, most) = (MIN_SECONDS / reps as f64, MAX_RUNS.div_ceil(reps));
        let t = Instant::now();
        for _ in 0..most {
            if !self.run_once() || t.elapsed().as_secs_f64() >= budget {
                break;
            }
        }
    }

    /// One timed run over every tile; false when none can run.
    fn run_once(&mut self) -> bool {
        if self.what.is_err() || self.pool.is_err() || self.failure.is_some() {
            return false;
        }
        let (codec, elem, tile_bytes) = (self.codec, self.elem, self.tile_bytes);
        let tiles = &self.tiles;
        let t = Instant::now();
        let r: std::io::Result<usize> = self.in_pool(|| {
            tiles
                .par_chunks(tile_bytes)
                .map_init(
                    || (ChunkCompressor::new(codec, elem), Vec::new()),
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
        self.seconds.push(t.elapsed().as_secs_f64());
        match r {
            Ok(n) => self.out_bytes = n,
            Err(e) => self.failure = Some(e.to_string()),
        }
        self.failure.is_none()
    }

    /// The ceiling: the runs so far, topped up to [`MIN_RUNS`] and
    /// [`MIN_SECONDS`] (at most [`MAX_RUNS`]).
    pub fn finish(&mut self) -> Ceiling {
        let what = match (&self.what, &self.pool) {
            (Err(why), _) | (_, Err(why)) => return Ceiling::absent(&self.name, why),
            (Ok(what), Ok(_)) => what.clone(),
        };
        while self.seconds.len() < MAX_RUNS
            && (self.seconds.len() < MIN_RUNS || self.seconds.iter().sum::<f64>() < MIN_SECONDS)
        {
            if !self.run_once() {
                break;
            }
        }
        if let Some(e) = &self.failure {
            return Ceiling::absent(&self.name, &format!("compression failed: {e}"));
        }
        let (best, median) = best_and_median(&self.seconds);
        let bytes = self.bytes;
        let when = if self.interleaved {
            "runs taken between the stream's runs"
        } else {
            "runs taken after the stream's runs"
        };
        Ceiling {
            name: self.name.clone(),
            gbps: Some(bytes as f64 / best / 1e9),
            median_gbps: Some(bytes as f64 / median / 1e9),
            compression_ratio: Some(bytes as f64 / self.out_bytes.max(1) as f64),
            bytes: Some(bytes),
            seconds: self.seconds.clone(),
            tiledzarr_over_ceiling: None,
            notes: format!(
                "{what} via the library's ChunkCompressor on {} threads (rayon), {} tiles of {} \
                 bytes from the stream's first {} epoch(s), best of the runs ({when})",
                self.threads,
                self.tiles.len() / self.tile_bytes,
                self.tile_bytes,
                self.epochs,
            ),
        }
    }
}

/// The CPU ceiling's compressor in words; the reason for codec none.
fn compressor_description(v: &Validated) -> Result<String, String> {
    Ok(match v.config.codec {
        Codec::Zstd { level } => format!("libzstd level {level}"),
        Codec::Gzip { level } => format!("gzip members (flate2 on zlib-rs) level {level}"),
        Codec::Blosc {
            level,
            shuffle,
            cname,
        } => format!(
            "Blosc1 frames (c-blosc {}'s filters, {} inside, the library's frame writer) level {level}, {} shuffle, typesize {}",
            blosc1::c_blosc_version(),
            tiledzarr::codec::blosc_cname(cname).name(),
            match shuffle {
                Shuffle::Byte => "byte",
                Shuffle::Bit => "bit",
                Shuffle::None => "no",
            },
            v.layout.elem_size()
        ),
        Codec::None => return Err("codec none: no compressor to bound".into()),
    })
}

/// Bytes of one epoch's tiles, padding included.
fn epoch_tile_bytes(layout: &Layout) -> usize {
    layout.tiles_per_epoch() as usize * layout.tile_bytes()
}

/// Appends to `tiles` the tiles of the stream's epochs `epochs` (`tiles`
/// holds those before them), back to back in pool-slot order,
/// `tile_bytes` each, parts outside the array left at the fill value
/// (zero).
fn gather_epochs(layout: &Layout, frames: &Frames, epochs: Range<u64>, tiles: &mut Vec<u8>) {
    let epoch_frames = layout.epoch_planes();
    let elem = layout.elem_size();
    let tile_bytes = layout.tile_bytes();
    let per_epoch = epoch_tile_bytes(layout);
    let at = tiles.len();
    tiles.resize(at + per_epoch * (epochs.end - epochs.start) as usize, 0);
    if epochs.is_empty() {
        return;
    }
    let mut input = vec![0u8; layout.epoch_bytes() as usize];
    for (e, epoch_tiles) in epochs.zip(tiles[at..].chunks_mut(per_epoch)) {
        for (k, chunk) in input.chunks_mut(frames.frame_bytes()).enumerate() {
            chunk.copy_from_slice(frames.frame(e * epoch_frames + k as u64));
        }
        let input = &input;
        epoch_tiles
            .par_chunks_mut(tile_bytes)
            .enumerate()
            .for_each(|(i, tile)| {
                let plan = layout.tile_gather(i as u64);
                let run = plan.run_len() as usize * elem;
                plan.for_each_run(|src, dst| {
                    let (s, d) = (src as usize * elem, dst as usize * elem);
                    tile[d..d + run].copy_from_slice(&input[s..s + run]);
                });
            });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(best_and_median(&[3.0, 1.0, 2.0]), (1.0, 2.0));
        assert_eq!(best_and_median(&[4.0, 1.0, 2.0, 3.0]), (1.0, 2.5));
    }
}
