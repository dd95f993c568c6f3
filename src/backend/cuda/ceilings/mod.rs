//! The GPU ceilings of the benchmark protocol, measured apart from the
//! pipeline on the same device: the pinned host-to-device copy and the
//! codec's nvCOMP batched compressor alone on tiles already on the device
//! (filtered first, on the host, where the codec filters them). Each run is timed
//! with CUDA events around the work on one stream, after an untimed
//! warm-up run; the caller picks the best (and the median) of the runs.

use super::chunk_order::{Arrangement, ChunkOrder};
use super::driver::{self, gpu_err, Context, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::config::Codec;
use crate::error::{Error, Result};
use nvcomp_sys::{Algorithm, CompressBatch, CompressOpts, Nvcomp};

/// Seconds of each timed run (warm-up excluded) and the bytes of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Timings {
    pub seconds: Vec<f64>,
    pub bytes: u64,
}

impl Timings {
    /// GB/s (1e9 bytes) of the fastest run.
    pub fn best_gbps(&self) -> f64 {
        let best = self.seconds.iter().copied().fold(f64::INFINITY, f64::min);
        self.bytes as f64 / best / 1e9
    }

    /// GB/s of the median run (the mean of the middle two for an even count).
    pub fn median_gbps(&self) -> f64 {
        let mut s = self.seconds.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => s[n / 2],
            _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
        };
        self.bytes as f64 / median / 1e9
    }
}

/// The pinned host-to-device copy.
#[derive(Debug, Clone)]
pub struct H2dCeiling {
    pub device_name: String,
    pub timings: Timings,
}

/// An nvCOMP batched compressor on tiles already on the device.
#[derive(Debug, Clone)]
pub struct NvcompCeiling {
    pub device_name: String,
    /// The compressor, and what it was given: e.g. "zstd (default
    /// options) on byte-shuffled tiles".
    pub algorithm: Algorithm,
    pub what: String,
    /// nvCOMP's (major, minor, patch).
    pub nvcomp_version: (u32, u32, u32),
    /// Chunks per compress call (every tile given, one call).
    pub tiles: usize,
    pub tile_bytes: usize,
    /// nvCOMP's temp buffer for this batch shape.
    pub temp_bytes: usize,
    /// Sum of the compressed chunk sizes of the last run, read back.
    pub compressed_bytes: u64,
    /// The order of the chunks in the fastest call (`timings`), and the
    /// best GB/s of each order tried.
    pub arrangement: Arrangement,
    pub by_arrangement: Vec<(Arrangement, f64)>,
    /// `bytes` is `tiles * tile_bytes`, the uncompressed input of one call.
    pub timings: Timings,
}

impl NvcompCeiling {
    /// Uncompressed bytes per compressed byte (chunks only, no index).
    pub fn ratio(&self) -> f64 {
        self.timings.bytes as f64 / self.compressed_bytes.max(1) as f64
    }
}

/// Times `reps` copies of `bytes` from page-locked host memory to device
/// memory (one `cuMemcpyHtoDAsync` each, on one stream, between two CUDA
/// events), after one untimed copy.
pub fn h2d_pinned(device: u32, bytes: usize, reps: usize) -> Result<H2dCeiling> {
    copy_ceiling("the H2D ceiling", device, bytes, reps, |ctx| {
        let stream = Stream::new()?;
        let host = patterned_pinned(ctx, bytes)?;
        let dev = DeviceBuffer::new(bytes, "the H2D ceiling")?;
        let (start, stop) = (Event::new()?, Event::new()?);
        timed_rounds(reps, "H2D ceiling", |stage| {
            start.record(&stream, stage)?;
            dev.upload_async(host.as_slice(), &stream, stage)?;
            stop.record(&stream, stage)?;
            stop.sync(stage)?;
            start.seconds_until(&stop, stage)
        })
    })
}

/// Times `reps` rounds of `bytes` copied to the device and `bytes` copied
/// back at the same time (one `cuMemcpyHtoDAsync` and one
/// `cuMemcpyDtoHAsync` on two streams, between CUDA events), after one
/// untimed round: what a stream without compression moves over PCIe, its
/// input in and its tiles out. The figure is bytes per second each way.
pub fn pcie_duplex(device: u32, bytes: usize, reps: usize) -> Result<H2dCeiling> {
    copy_ceiling("the PCIe duplex ceiling", device, bytes, reps, |ctx| {
        let (up, down) = (Stream::new()?, Stream::new()?);
        let host_in = patterned_pinned(ctx, bytes)?;
        let mut host_out = PinnedBuffer::new(ctx, bytes)?;
        let dev_in = DeviceBuffer::new(bytes, "the duplex ceiling's input")?;
        let dev_out = DeviceBuffer::new(bytes, "the duplex ceiling's output")?;
        let (start, down_done, stop) = (Event::new()?, Event::new()?, Event::new()?);
        timed_rounds(reps, "PCIe duplex ceiling", |stage| {
            start.record(&up, stage)?;
            down.wait(&start, stage)?;
            dev_in.upload_async(host_in.as_slice(), &up, stage)?;
            dev_out.download_async(host_out.as_mut_slice(), &down, stage)?;
            down_done.record(&down, stage)?;
            up.wait(&down_done, stage)?;
            stop.record(&up, stage)?;
            stop.sync(stage)?;
            start.seconds_until(&stop, stage)
        })
    })
}

/// A copy ceiling of `bytes`, `reps` timed rounds: `measure` gets the
/// device's context and returns each round's seconds.
fn copy_ceiling(
    what: &str,
    device: u32,
    bytes: usize,
    reps: usize,
    measure: impl FnOnce(&Context) -> Result<Vec<f64>>,
) -> Result<H2dCeiling> {
    if bytes == 0 || reps == 0 {
        return Err(Error::InvalidArgument(format!(
            "{what} needs a non-empty copy and at least one run"
        )));
    }
    guarded(what, || {
        driver::driver_present().map_err(Error::BackendUnavailable)?;
        // Outlives every buffer `measure` allocates.
        let ctx = Context::new(device)?;
        let seconds = measure(&ctx)?;
        Ok(H2dCeiling {
            device_name: ctx.name.clone(),
            timings: Timings {
                seconds,
                bytes: bytes as u64,
            },
        })
    })
}

/// Page-locked memory holding a non-constant pattern: the copies do not
/// look at the bytes, but they are not left constant all the same.
fn patterned_pinned(ctx: &Context, bytes: usize) -> Result<PinnedBuffer> {
    let mut host = PinnedBuffer::new(ctx, bytes)?;
    for (i, w) in host.as_mut_slice().chunks_mut(8).enumerate() {
        let v = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes();
        w.copy_from_slice(&v[..w.len()]);
    }
    Ok(host)
}

/// One untimed round, then `reps` timed ones: their seconds.
fn timed_rounds(
    reps: usize,
    stage: &'static str,
    mut round: impl FnMut(&'static str) -> Result<f64>,
) -> Result<Vec<f64>> {
    round(stage)?;
    (0..reps).map(|_| round(stage)).collect()
}

mod host_copy;

pub use super::codec::nvcomp_compressor;
pub use host_copy::{host_copy_then_h2d, host_to_pinned, HostCopy, Ring};

/// Times the nvCOMP compressor of `codec` over `tiles` (back to back,
/// `tile_bytes` each, of elements of `elem_size` bytes) as the GPU backend
/// runs it on a batch: blosc's filter applied first (on the host, untimed:
/// the ceiling is the compressor alone), all tiles in one batched call. The
/// tiles are uploaded once (each at nvCOMP's input alignment), the temp
/// buffer is zeroed once, one call runs untimed, then `reps` calls are
/// timed each between two CUDA events on the stream, in each order the
/// GPU backend may take a batch's chunks in (`chunk_order.rs`, ranked by
/// the untimed call's sizes); the fastest order's runs are the ceiling.
/// Every chunk's status is checked after the warm-up and after each
/// order's runs; the last run's compressed sizes are read back.
pub fn nvcomp_codec(
    device: u32,
    codec: Codec,
    elem_size: usize,
    tiles: &[u8],
    tile_bytes: usize,
    reps: usize,
) -> Result<NvcompCeiling> {
    let Some((algorithm, deflate)) = nvcomp_compressor(codec) else {
        return Err(Error::InvalidArgument(
            "codec none: no compressor to time".into(),
        ));
    };
    if tile_bytes == 0 || tiles.is_empty() || !tiles.len().is_multiple_of(tile_bytes) || reps == 0 {
        return Err(Error::InvalidArgument(format!(
            "the nvCOMP ceiling needs whole tiles and at least one run: {} bytes in tiles of {tile_bytes}, {reps} runs",
            tiles.len()
        )));
    }
    if let Some((max, limit)) = super::codec::max_tile_bytes(codec) {
        if tile_bytes > max {
            return Err(Error::InvalidArgument(format!(
                "a tile of {tile_bytes} bytes exceeds {limit} of {max} bytes"
            )));
        }
    }
    let (filtered, what) = match codec {
        Codec::Blosc { shuffle, .. } => {
            let mut out = Vec::new();
            out.try_reserve_exact(tiles.len())
                .map_err(|e| Error::OutOfMemory(format!("filtering the ceiling's tiles: {e}")))?;
            for tile in tiles.chunks(tile_bytes) {
                out.extend_from_slice(&crate::codec::blosc_block::filtered(
                    tile, shuffle, elem_size,
                ));
            }
            (Some(out), format!("{algorithm:?} on {shuffle:?}-shuffled tiles (the blosc filter, applied on the host)"))
        }
        _ => (None, format!("{algorithm:?}")),
    };
    let tiles = filtered.as_deref().unwrap_or(tiles);
    guarded("the nvCOMP ceiling", || {
        driver::driver_present().map_err(Error::BackendUnavailable)?;
        let n = tiles.len() / tile_bytes;
        // Declared first so that it is dropped last, after every buffer.
        let ctx = Context::new(device)?;
        let stream = Stream::new()?;
        let nvcomp = Nvcomp::load(None).map_err(|e| Error::BackendUnavailable(e.to_string()))?;
        let opts = CompressOpts::with_deflate_algorithm(algorithm, deflate);
        let compressor = nvcomp
            .compressor(algorithm, opts)
            .map_err(|e| Error::BackendUnavailable(e.to_string()))?;
        let align = compressor
            .alignments()
            .map_err(|e| gpu_err("nvCOMP alignments", e))?;
        let tile_stride = tile_bytes.next_multiple_of(align.input.max(8));
        let max_out = compressor
            .max_output_chunk_bytes(tile_bytes)
            .map_err(|e| gpu_err("nvCOMP output size", e))?;
        let chunk_stride = max_out.next_multiple_of(align.output.max(8));
        let temp_bytes = compressor
            .temp_bytes(n, tile_bytes, tiles.len())
            .map_err(|e| gpu_err("nvCOMP temp size", e))?;

        let d_tiles = DeviceBuffer::new(n * tile_stride, "the nvCOMP ceiling's tiles")?;
        let d_chunks = DeviceBuffer::new(n * chunk_stride, "the nvCOMP ceiling's chunks")?;
        let temp = DeviceBuffer::new(temp_bytes, "nvCOMP's temp buffer")?;
        let in_ptrs = DeviceBuffer::new(n * 8, "chunk pointers")?;
        let in_sizes = DeviceBuffer::new(n * 8, "chunk sizes")?;
        let out_ptrs = DeviceBuffer::new(n * 8, "chunk pointers")?;
        let out_sizes = DeviceBuffer::new(n * 8, "compressed sizes")?;
        let statuses = DeviceBuffer::new(n * 4, "chunk statuses")?;

        let stage = "nvCOMP ceiling (upload)";
        if tile_stride == tile_bytes {
            d_tiles.upload_async(tiles, &stream, stage)?;
            stream.sync(stage)?;
        } else {
            let mut padded = vec![0u8; n * tile_stride];
            for (dst, src) in padded.chunks_mut(tile_stride).zip(tiles.chunks(tile_bytes)) {
                dst[..tile_bytes].copy_from_slice(src);
            }
            d_tiles.upload_async(&padded, &stream, stage)?;
            stream.sync(stage)?;
        }
        let ins: Vec<u64> = (0..n as u64)
            .map(|i| d_tiles.ptr + i * tile_stride as u64)
            .collect();
        let outs: Vec<u64> = (0..n as u64)
            .map(|i| d_chunks.ptr + i * chunk_stride as u64)
            .collect();
        let sizes = vec![tile_bytes as u64; n];
        in_ptrs.upload_async(&ins, &stream, stage)?;
        in_sizes.upload_async(&sizes, &stream, stage)?;
        out_ptrs.upload_async(&outs, &stream, stage)?;
        temp.zero_async(temp.bytes, &stream, "clearing nvCOMP's temp buffer")?;
        stream.sync(stage)?;

        let batch = CompressBatch {
            uncompressed_ptrs: in_ptrs.ptr,
            uncompressed_bytes: in_sizes.ptr,
            max_uncompressed_chunk_bytes: tile_bytes,
            num_chunks: n,
            temp: temp.ptr,
            temp_bytes: temp.bytes,
            compressed_ptrs: out_ptrs.ptr,
            compressed_bytes: out_sizes.ptr,
            statuses: statuses.ptr,
        };
        let compress = |stage: &'static str| -> Result<()> {
            // SAFETY: the context is current on this thread and owns every
            // buffer; the pointer and size tables hold `n` entries naming
            // `n` aligned tiles of `tile_bytes` and `n` aligned outputs of
            // nvCOMP's maximum chunk size; the temp buffer was sized by
            // nvCOMP for exactly this shape and zeroed before the first
            // call; all of them outlive the stream's work (synchronised
            // below before anything is dropped).
            unsafe { compressor.compress_async(&batch, stream.0 as _) }
                .map_err(|e| gpu_err(stage, e))
        };
        let mut h_statuses = vec![0i32; n];
        let check = |h_statuses: &mut [i32], stage: &'static str| -> Result<()> {
            statuses.download_async(h_statuses, &stream, stage)?;
            stream.sync(stage)?;
            match h_statuses.iter().position(|&s| s != 0) {
                Some(bad) => Err(gpu_err(
                    stage,
                    format!("nvCOMP status {} on tile {bad}", h_statuses[bad]),
                )),
                None => Ok(()),
            }
        };

        compress("nvCOMP ceiling (warm-up)")?;
        check(&mut h_statuses, "nvCOMP ceiling (warm-up)")?;
        // The chunks in each order the GPU backend may compress a batch in
        // (`chunk_order.rs`), ranked by the warm-up call's sizes.
        let mut h_sizes = vec![0u64; n];
        out_sizes.download_async(&mut h_sizes, &stream, "nvCOMP ceiling (sizes)")?;
        stream.sync("nvCOMP ceiling (sizes)")?;
        let mut order = ChunkOrder::new(n, String::new())?;
        order.rank(|i| h_sizes[i]);
        let (smallest, largest) = order
            .take_changed()
            .map(|(a, d)| (a.to_vec(), d.to_vec()))
            .ok_or_else(|| Error::Internal("the chunk rankings".into()))?;
        let (start, stop) = (Event::new()?, Event::new()?);
        let mut arrangements = Vec::with_capacity(3);
        for (arrangement, ranking) in [
            (Arrangement::AsTiled, None),
            (Arrangement::SmallestFirst, Some(&smallest)),
            (Arrangement::LargestFirst, Some(&largest)),
        ] {
            let pick = |table: &[u64]| -> Vec<u64> {
                match ranking {
                    Some(r) => r.iter().map(|&i| table[i as usize]).collect(),
                    None => table.to_vec(),
                }
            };
            let (k_ins, k_outs) = (pick(&ins), pick(&outs));
            in_ptrs.upload_async(&k_ins, &stream, stage)?;
            out_ptrs.upload_async(&k_outs, &stream, stage)?;
            stream.sync(stage)?;
            let mut seconds = Vec::with_capacity(reps);
            for _ in 0..reps {
                start.record(&stream, "nvCOMP ceiling")?;
                compress("nvCOMP ceiling")?;
                stop.record(&stream, "nvCOMP ceiling")?;
                stop.sync("nvCOMP ceiling")?;
                seconds.push(start.seconds_until(&stop, "nvCOMP ceiling")?);
            }
            check(&mut h_statuses, "nvCOMP ceiling")?;
            arrangements.push((arrangement, seconds));
        }
        out_sizes.download_async(&mut h_sizes, &stream, "nvCOMP ceiling (sizes)")?;
        stream.sync("nvCOMP ceiling (sizes)")?;
        let best = |s: &[f64]| s.iter().copied().fold(f64::INFINITY, f64::min);
        let (arrangement, seconds) = arrangements
            .iter()
            .min_by(|x, y| best(&x.1).total_cmp(&best(&y.1)))
            .cloned()
            .ok_or_else(|| Error::Internal("no arrangement timed".into()))?;
        Ok(NvcompCeiling {
            device_name: ctx.name.clone(),
            algorithm,
            what,
            nvcomp_version: nvcomp.version(),
            tiles: n,
            tile_bytes,
            temp_bytes,
            compressed_bytes: h_sizes.iter().sum(),
            arrangement,
            by_arrangement: arrangements
                .iter()
                .map(|(a, s)| (*a, tiles.len() as f64 / best(s) / 1e9))
                .collect(),
            timings: Timings {
                seconds,
                bytes: tiles.len() as u64,
            },
        })
    })
}

/// Runs `f`, turning a panic (cudarc panics where a driver entry point is
/// missing) into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(Error::from_panic(what, &*p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_and_median_rates() {
        let t = Timings {
            seconds: vec![0.5, 0.25, 1.0, 2.0],
            bytes: 1_000_000_000,
        };
        assert_eq!(t.best_gbps(), 4.0);
        assert!((t.median_gbps() - 4.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn bad_arguments_fail_before_touching_a_gpu() {
        let zstd = Codec::Zstd { level: 1 };
        assert!(matches!(
            nvcomp_codec(0, zstd, 1, &[0; 10], 4, 1),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            nvcomp_codec(0, zstd, 1, &[], 4, 1),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            nvcomp_codec(0, Codec::None, 1, &[0; 8], 4, 1),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            h2d_pinned(0, 1 << 20, 0),
            Err(Error::InvalidArgument(_))
        ));
    }
}
