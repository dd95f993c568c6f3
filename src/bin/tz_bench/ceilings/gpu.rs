//! GPU ceilings: the pinned host-to-device copy of 1 GiB and the codec's
//! nvCOMP batched compressor alone on the same tiles (shuffled first where
//! the codec shuffles), already on the device, measured when the
//! stream runs on a GPU (backend "gpu", or "auto" with a usable GPU) and
//! recorded as absent, with the reason, otherwise.

use super::{epoch_tile_bytes, Ceiling, Frames};
use tiledzarr::backend::cuda::{self, ceilings as cc};
use tiledzarr::backend::BackendKind;
use tiledzarr::config::{BackendChoice, Codec, Validated};

const H2D: &str = "h2d-pinned";
/// Without compression the stream's bytes cross PCIe both ways at once.
const DUPLEX: &str = "pcie-duplex";
const HOST_COPY: &str = "host-copy";
/// The write path's copy into page-locked memory and the H2D copy, together.
const COPY_H2D: &str = "copy-h2d";
/// The ring of the copy-h2d figure: a staging buffer's size.
const COPY_H2D_RING_MIB: usize = 512;
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
                    COPY_H2D,
                    &format!("frames copied into page-locked memory and to the device; {why}"),
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
        copy_h2d(&plan, frames, v.config.codec),
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
            COPY_H2D,
            "not measured (--no-ceilings); frames copied into page-locked memory and to the device",
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

/// The write path's host work together: the frames copied into
/// page-locked memory as `tz_write` copies them and each sent to the
/// device once in, through a ring as large as a staging buffer (the
/// figure); the notes add smaller rings, which stay in the processor's
/// cache, and plain `memcpy`.
fn copy_h2d(plan: &Plan, frames: &Frames, codec: Codec) -> Ceiling {
    let threads = tiledzarr::pipeline::copy_threads(BackendKind::Gpu);
    let pool = frames.pool_frames().max(1);
    let frame = |i: u64| frames.frame(i % pool);
    let time = |how, mib: usize, copy_back| {
        let ring = cc::Ring {
            how,
            bytes: mib << 20,
            copy_back,
        };
        cc::host_copy_then_h2d(plan.device, H2D_BYTES, &frame, threads, ring, RUNS)
    };
    let t = match time(cc::HostCopy::Streaming, COPY_H2D_RING_MIB, false) {
        Ok(t) => t,
        Err(e) => {
            return Ceiling::absent(
                COPY_H2D,
                &format!("frames copied into page-locked memory and on to the device failed: {e}"),
            )
        }
    };
    let mut sweep = Vec::new();
    for how in [cc::HostCopy::Streaming, cc::HostCopy::Memcpy] {
        for mib in [512, 128, 64, 32, 16] {
            let gbps = time(how, mib, false).map_or(f64::NAN, |t| t.best_gbps());
            sweep.push(format!("{how:?} ring {mib} MiB: {gbps:.1}"));
        }
    }
    // Without compression every byte also comes back: what a stream
    // through `write` moves at the least, with either ring.
    if codec == Codec::None {
        for (how, mib) in [(cc::HostCopy::Streaming, 512), (cc::HostCopy::Memcpy, 64)] {
            let gbps = time(how, mib, true).map_or(f64::NAN, |t| t.best_gbps());
            sweep.push(format!(
                "{how:?} ring {mib} MiB, copied back too: {gbps:.1}"
            ));
        }
    }
    from_timings(
        COPY_H2D,
        &t,
        t.bytes,
        format!(
            "the stream's frames ({} bytes each) copied into a ring of {COPY_H2D_RING_MIB} MiB of page-locked \
             memory as tz_write copies them (streaming stores on {threads} threads), each frame \
             sent to the device (cuMemcpyHtoDAsync) once in and its place reused once sent; host \
             wall clock to the last transfer's end, best of {RUNS} after one untimed round; best \
             GB/s by method and ring: {}",
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
    let orders = c
        .by_arrangement
        .iter()
        .map(|(a, gbps)| format!("{a:?} {gbps:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut ceiling = from_timings(
        name,
        &c.timings,
        bytes,
        format!(
            "nvCOMP {major}.{minor}.{patch} batched {} on {}: \
             {} tiles of {tile_bytes} bytes of the stream's first {} epoch(s){repeats}, one \
             compress call as the GPU backend makes per batch{short}, tiles already on the \
             device, temp buffer ({} bytes) zeroed once; each call timed with CUDA events, \
             best of {RUNS} after one warm-up call in each order of the chunks the backend \
             may take (ranked by the warm-up call's compressed sizes; GB/s {orders}), the \
             fastest ({:?}) the ceiling; ratio from the compressed sizes read back",
            c.what, c.device_name, c.tiles, plan.epochs, c.temp_bytes, c.arrangement
        ),
    );
    ceiling.compression_ratio = Some(bytes as f64 / c.compressed_bytes.max(1) as f64);
    ceiling
}
