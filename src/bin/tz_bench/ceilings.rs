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

/// Every ceiling of the protocol, in the order of the table.
pub fn measure(v: &Validated, frames: &Frames, threads: usize) -> Vec<Ceiling> {
    let layout = &v.layout;
    let pool_epochs = (frames.pool_frames() / layout.epoch_planes()).max(1);
    let cpu_epochs = (CEILING_BYTES / layout.epoch_bytes())
        .max(1)
        .min(pool_epochs);
    let stream_epochs = (frames.frames() / layout.epoch_planes()).max(1);
    let gpu = gpu::plan(v, stream_epochs, frames.pool_frames());
    // One gather serves both compressor ceilings: the first epochs of the
    // stream, as many as the larger of the two asks for.
    let compressed = v.config.codec != Codec::None;
    let gpu_epochs = gpu.as_ref().map_or(0, |p| p.epochs);
    let epochs = if compressed {
        cpu_epochs.max(gpu_epochs)
    } else {
        0
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
    let tiles = match &pool {
        Ok(p) => p.install(|| gather_epochs(layout, frames, epochs)),
        Err(_) => gather_epochs(layout, frames, epochs),
    };
    let mut out = vec![cpu_zstd(v, &tiles, cpu_epochs, &pool, threads)];
    out.extend(gpu::measure(v, gpu, &tiles, frames));
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
/// pipeline's worker threads, over the tiles of the stream's first `epochs` epochs (the start of
/// `tiles`), gathered exactly as the library tiles them. Named after the
/// compressor inside ("cpu-zstd" for zstd and blosc-zstd alike).
fn cpu_zstd(
    v: &Validated,
    tiles: &[u8],
    epochs: u64,
    pool: &Result<rayon::ThreadPool, rayon::ThreadPoolBuildError>,
    threads: usize,
) -> Ceiling {
    let name = &format!("cpu-{}", inner_name(v.config.codec));
    let what = match v.config.codec {
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
        Codec::None => return Ceiling::absent(name, "codec none: no compressor to bound"),
    };
    let layout = &v.layout;
    let pool = match pool {
        Ok(p) => p,
        Err(e) => return Ceiling::absent(name, &format!("no thread pool: {e}")),
    };
    let tile_bytes = layout.tile_bytes();
    let tiles = &tiles[..epoch_tile_bytes(layout) * epochs as usize];
    // Counted as the pipeline counts: input bytes, not tile bytes (edge
    // tiles' padding is compressed but was never written).
    let bytes = epochs * layout.epoch_bytes();
    let codec = v.config.codec;
    let elem = layout.elem_size();
    let mut seconds = Vec::new();
    let mut out_bytes = 0;
    let mut failure = None;
    while seconds.len() < MAX_RUNS
        && (seconds.len() < MIN_RUNS || seconds.iter().sum::<f64>() < MIN_SECONDS)
    {
        let t = Instant::now();
        let r: std::io::Result<usize> = pool.install(|| {
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
            "{what} via the library's ChunkCompressor on {threads} threads (rayon), \
             {} tiles of {tile_bytes} bytes from the stream's first {epochs} epoch(s), best of the runs",
            tiles.len() / tile_bytes,
        ),
    }
}

/// Bytes of one epoch's tiles, padding included.
fn epoch_tile_bytes(layout: &Layout) -> usize {
    layout.tiles_per_epoch() as usize * layout.tile_bytes()
}

/// The tiles of the stream's first `epochs` epochs, back to back in
/// pool-slot order, `tile_bytes` each, parts outside the array left at the
/// fill value (zero).
fn gather_epochs(layout: &Layout, frames: &Frames, epochs: u64) -> Vec<u8> {
    let epoch_frames = layout.epoch_planes();
    let elem = layout.elem_size();
    let tile_bytes = layout.tile_bytes();
    let per_epoch = epoch_tile_bytes(layout);
    let mut tiles = vec![0u8; per_epoch * epochs as usize];
    if epochs == 0 {
        return tiles;
    }
    let mut input = vec![0u8; layout.epoch_bytes() as usize];
    for (e, epoch_tiles) in tiles.chunks_mut(per_epoch).enumerate() {
        for (k, chunk) in input.chunks_mut(frames.frame_bytes()).enumerate() {
            chunk.copy_from_slice(frames.frame(e as u64 * epoch_frames + k as u64));
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

/// GPU ceilings: the pinned host-to-device copy of 1 GiB and the codec's
/// nvCOMP batched compressor alone on the same tiles (shuffled first where
/// the codec shuffles), already on the device, measured when the
/// stream runs on a GPU (backend "gpu", or "auto" with a usable GPU) and
/// recorded as absent, with the reason, otherwise.
mod gpu {
    use super::{epoch_tile_bytes, Ceiling, Frames};
    use tiledzarr::backend::cuda::{self, ceilings as cc};
    use tiledzarr::backend::BackendKind;
    use tiledzarr::config::{BackendChoice, Codec, Validated};

    const H2D: &str = "h2d-pinned";
    /// Without compression the stream's bytes cross PCIe both ways at once.
    const DUPLEX: &str = "pcie-duplex";
    const HOST_COPY: &str = "host-copy";
    /// Thread counts and methods the host-copy notes compare.
    const COPY_SWEEP: [usize; 6] = [1, 4, 8, 12, 14, 16];

    /// The nvCOMP ceiling's name: the compressor the codec runs.
    fn nvcomp_name(v: &Validated) -> String {
        match cc::nvcomp_compressor(v.config.codec) {
            Some((a, _)) => format!("nvcomp-{}", format!("{a:?}").to_lowercase()),
            None => "nvcomp".into(),
        }
    }
    const H2D_BYTES: usize = 1 << 30;
    /// Timed runs of each GPU ceiling, after one untimed run.
    const RUNS: usize = 10;

    /// What the GPU ceilings measure: the device, and how many epochs of
    /// tiles one compress call of the stream's GPU batch takes.
    pub struct Plan {
        device: u32,
        /// The stream's first batch: its GPU batch, or the whole stream
        /// when that is shorter.
        pub epochs: u64,
        batch_epochs: u64,
        /// Distinct frames: the stream cycles through them.
        pool_frames: u64,
    }

    /// Whether the stream runs on a GPU here, and the first batch it
    /// compresses (of `stream_epochs` epochs streamed per run).
    pub fn plan(v: &Validated, stream_epochs: u64, pool_frames: u64) -> Result<Plan, String> {
        if v.config.backend == BackendChoice::Cpu {
            return Err("the stream ran on the CPU (backend \"cpu\")".into());
        }
        cuda::probe(v).map_err(|why| format!("no usable GPU: {why}"))?;
        let gpu = cuda::gpu_plan(v).map_err(|e| format!("no GPU staging plan: {e}"))?;
        Ok(Plan {
            device: v.config.device,
            epochs: gpu.epochs_per_buffer.min(stream_epochs),
            batch_epochs: gpu.epochs_per_buffer,
            pool_frames,
        })
    }

    pub fn measure(
        v: &Validated,
        plan: Result<Plan, String>,
        tiles: &[u8],
        frames: &Frames,
    ) -> Vec<Ceiling> {
        let plan = match plan {
            Ok(p) => p,
            Err(why) => {
                return vec![
                    Ceiling::absent(H2D, &format!("pinned H2D copy of 1 GiB; {why}")),
                    Ceiling::absent(
                        HOST_COPY,
                        &format!("frames copied into page-locked memory; {why}"),
                    ),
                    Ceiling::absent(
                        &nvcomp_name(v),
                        &format!("nvCOMP's compressor alone on the same tiles; {why}"),
                    ),
                ]
            }
        };
        let mut out = vec![
            h2d(&plan),
            host_copy(&plan, frames),
            nvcomp(v, &plan, tiles),
        ];
        if v.config.codec == Codec::None {
            out.push(duplex(&plan));
        }
        out
    }

    fn duplex(plan: &Plan) -> Ceiling {
        match cc::pcie_duplex(plan.device, H2D_BYTES, RUNS) {
            Ok(c) => from_timings(
                DUPLEX,
                &c.timings,
                c.timings.bytes,
                format!(
                    "{H2D_BYTES} bytes copied to the device and {H2D_BYTES} back at once (two \
                     streams) on {}: GB/s each way, timed with CUDA events, best of {RUNS} after \
                     one warm-up round; a stream without compression moves its bytes both ways",
                    c.device_name
                ),
            ),
            Err(e) => Ceiling::absent(DUPLEX, &format!("PCIe duplex copy failed: {e}")),
        }
    }

    pub fn skipped(v: &Validated) -> Vec<Ceiling> {
        let mut out = vec![
            Ceiling::absent(
                H2D,
                "not measured (--no-ceilings); pinned H2D copy of 1 GiB",
            ),
            Ceiling::absent(
                HOST_COPY,
                "not measured (--no-ceilings); frames copied into page-locked memory",
            ),
            Ceiling::absent(
                &nvcomp_name(v),
                "not measured (--no-ceilings); nvCOMP's compressor alone on the same tiles",
            ),
        ];
        if v.config.codec == Codec::None {
            out.push(Ceiling::absent(
                DUPLEX,
                "not measured (--no-ceilings); 1 GiB to the device and back at once",
            ));
        }
        out
    }

    fn from_timings(name: &str, t: &cc::Timings, bytes: u64, notes: String) -> Ceiling {
        let (best, median) = super::best_and_median(&t.seconds);
        Ceiling {
            name: name.into(),
            gbps: Some(bytes as f64 / best / 1e9),
            median_gbps: Some(bytes as f64 / median / 1e9),
            compression_ratio: None,
            bytes: Some(bytes),
            seconds: t.seconds.clone(),
            tiledzarr_over_ceiling: None,
            notes,
        }
    }

    fn h2d(plan: &Plan) -> Ceiling {
        match cc::h2d_pinned(plan.device, H2D_BYTES, RUNS) {
            Ok(c) => from_timings(
                H2D,
                &c.timings,
                c.timings.bytes,
                format!(
                    "cuMemcpyHtoDAsync of {H2D_BYTES} bytes from page-locked host memory on {}, \
                     timed with CUDA events, best of {RUNS} after one warm-up copy",
                    c.device_name
                ),
            ),
            Err(e) => Ceiling::absent(H2D, &format!("pinned H2D copy of 1 GiB failed: {e}")),
        }
    }

    /// The write path's copy alone: the stream's frames into 1 GiB of
    /// page-locked memory, as `tz_write` copies them (same method, same
    /// threads); the notes add the other methods and thread counts.
    fn host_copy(plan: &Plan, frames: &Frames) -> Ceiling {
        let threads = tiledzarr::pipeline::copy_threads(BackendKind::Gpu);
        let pool = frames.pool_frames().max(1);
        let frame = |i: u64| frames.frame(i % pool);
        let time =
            |threads, how| cc::host_to_pinned(plan.device, H2D_BYTES, &frame, threads, how, RUNS);
        let t = match time(threads, cc::HostCopy::Streaming) {
            Ok(t) => t,
            Err(e) => {
                return Ceiling::absent(
                    HOST_COPY,
                    &format!("frames copied into page-locked memory failed: {e}"),
                )
            }
        };
        let mut sweep = Vec::new();
        for how in [cc::HostCopy::Memcpy, cc::HostCopy::Streaming] {
            for n in COPY_SWEEP {
                let gbps = time(n, how).map_or(f64::NAN, |t| t.best_gbps());
                sweep.push(format!("{how:?} x{n}: {gbps:.1}"));
            }
        }
        from_timings(
            HOST_COPY,
            &t,
            t.bytes,
            format!(
                "the stream's frames ({} bytes each) copied into {H2D_BYTES} bytes of page-locked \
                 memory as tz_write copies them: streaming stores on {threads} threads, host wall \
                 clock, best of {RUNS} after one untimed fill; best GB/s by method and threads: {}",
                frames.frame_bytes(),
                sweep.join(", ")
            ),
        )
    }

    fn nvcomp(v: &Validated, plan: &Plan, tiles: &[u8]) -> Ceiling {
        let name = &nvcomp_name(v);
        if let Codec::None = v.config.codec {
            return Ceiling::absent(name, "codec none: no compressor to bound");
        }
        let layout = &v.layout;
        let tile_bytes = layout.tile_bytes();
        let tiles = &tiles[..epoch_tile_bytes(layout) * plan.epochs as usize];
        let elem = layout.elem_size();
        let c = match cc::nvcomp_codec(plan.device, v.config.codec, elem, tiles, tile_bytes, RUNS) {
            Ok(c) => c,
            Err(e) => {
                return Ceiling::absent(
                    name,
                    &format!("nvCOMP's compressor alone on the same tiles failed: {e}"),
                )
            }
        };
        // Counted as the pipeline and the CPU ceiling count: input bytes of
        // the epochs (edge tiles' padding is compressed but never written).
        let bytes = plan.epochs * layout.epoch_bytes();
        let (major, minor, patch) = c.nvcomp_version;
        let short = if plan.epochs < plan.batch_epochs {
            format!(
                " (a batch holds {} epochs; the stream has {})",
                plan.batch_epochs, plan.epochs
            )
        } else {
            String::new()
        };
        let repeats = if plan.epochs * layout.epoch_planes() > plan.pool_frames {
            format!(
                " (the stream's frames repeat every {} frames)",
                plan.pool_frames
            )
        } else {
            String::new()
        };
        let mut ceiling = from_timings(
            name,
            &c.timings,
            bytes,
            format!(
                "nvCOMP {major}.{minor}.{patch} batched {} on {}: \
                 {} tiles of {tile_bytes} bytes of the stream's first {} epoch(s){repeats}, one \
                 compress call as the GPU backend makes per batch{short}, tiles already on the \
                 device, temp buffer ({} bytes) zeroed once; each call timed with CUDA events, \
                 best of {RUNS} after one warm-up call; ratio from the compressed sizes read back",
                c.what, c.device_name, c.tiles, plan.epochs, c.temp_bytes
            ),
        );
        ceiling.compression_ratio = Some(bytes as f64 / c.compressed_bytes.max(1) as f64);
        ceiling
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
