//! The GPU backend (pipeline.md, sharding.md): per staging buffer of whole
//! epochs, H2D copy, the scatter kernel into a tile pool, nvCOMP batched
//! zstd over every tile of the batch, the aggregate-by-shard kernels
//! (permute sizes, exclusive scan, gather), and D2H of the shard-major
//! bytes and offsets into pinned host memory.
//!
//! This first version runs the stages of one batch in order on one stream;
//! the next batch's H2D does not yet overlap this one's compression.

mod driver;
mod kernels;

pub use driver::PinnedBuffer;

use super::{Backend, BatchJob, EpochJob, StagingBuffer};
use crate::config::{Codec, Validated};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::pipeline::Stage;
use crate::shard::CompressedEpoch;
use driver::{gpu_err, Context, DeviceBuffer, Stream};
use kernels::{Geometry, Kernels};
use nvcomp_sys::{Nvcomp, ZstdCompressBatch, ZstdCompressOpts};
use std::ffi::c_void;
use std::time::Instant;

/// nvCOMP's zstd takes chunks of at most 16 MiB.
const MAX_NVCOMP_CHUNK: usize = 16 << 20;

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// Whether this build carries the CUDA kernels (nvcc was found at build time).
pub fn kernels_built() -> bool {
    kernels::built_in()
}

/// Why the GPU backend cannot run, checked without allocating anything
/// large: driver, device, kernels, nvCOMP.
pub fn probe(v: &Validated) -> std::result::Result<(), String> {
    driver::driver_present()?;
    if !kernels::built_in() {
        return Err(
            "this library was built without its CUDA kernels (nvcc was not found at build time)"
                .into(),
        );
    }
    if matches!(v.config.codec, Codec::Zstd { .. }) && v.layout.tile_bytes() > MAX_NVCOMP_CHUNK {
        return Err(format!(
            "a tile of {} bytes exceeds nvCOMP's zstd chunk limit of {MAX_NVCOMP_CHUNK} bytes",
            v.layout.tile_bytes()
        ));
    }
    Ok(())
}

struct Compressor {
    nvcomp: Nvcomp,
    opts: ZstdCompressOpts,
    temp: DeviceBuffer,
    /// (chunks, chunk bytes) of the last call on `temp`: nvCOMP faults when
    /// its temp buffer holds what a call of another shape left there.
    last_shape: Option<(usize, usize)>,
    in_ptrs: DeviceBuffer,
    in_sizes: DeviceBuffer,
    out_ptrs: DeviceBuffer,
    statuses: DeviceBuffer,
}

pub struct CudaBackend {
    layout: Layout,
    epochs_per_batch: usize,
    /// Bytes between tiles in the tile pool and between chunks in the
    /// compressed pool (the alignments nvCOMP requires).
    tile_stride: usize,
    chunk_stride: usize,
    geometry: Geometry,
    has_edges: bool,
    compressor: Option<Compressor>,
    d_input: DeviceBuffer,
    d_tiles: DeviceBuffer,
    d_chunks: DeviceBuffer,
    d_sizes: DeviceBuffer,
    d_perm: DeviceBuffer,
    d_offsets: DeviceBuffer,
    d_aggregated: DeviceBuffer,
    h_offsets: Vec<u64>,
    h_aggregated: PinnedBuffer,
    h_statuses: Vec<i32>,
    kernels: Kernels,
    stream: Stream,
    pub device_name: String,
    // Last: everything above is freed before the context goes.
    ctx: Context,
}

impl CudaBackend {
    pub fn new(v: &Validated) -> Result<CudaBackend> {
        probe(v).map_err(Error::BackendUnavailable)?;
        // cudarc panics where a driver entry point is missing: keep that
        // from crossing into the caller.
        std::panic::catch_unwind(|| CudaBackend::build(v))
            .unwrap_or_else(|p| Err(Error::from_panic("CUDA initialisation", &*p)))
    }

    fn build(v: &Validated) -> Result<CudaBackend> {
        let layout = v.layout.clone();
        let ctx = Context::new(v.config.device)?;
        let device_name = ctx.name.clone();
        let kernels = Kernels::load()?;
        let stream = Stream::new()?;
        let epochs = v.epochs_per_buffer as usize;
        let m = layout.tiles_per_epoch() as usize;
        let chunks = epochs * m;
        let tile_bytes = layout.tile_bytes();
        let (compressor, tile_stride, chunk_stride) = match v.config.codec {
            Codec::None => (None, round_up(tile_bytes, 8), round_up(tile_bytes, 8)),
            Codec::Zstd { .. } => {
                let nvcomp =
                    Nvcomp::load(None).map_err(|e| Error::BackendUnavailable(e.to_string()))?;
                let opts = ZstdCompressOpts::default();
                let align = nvcomp
                    .zstd_compress_alignments(&opts)
                    .map_err(|e| gpu_err("nvCOMP alignments", e))?;
                let tile_stride = round_up(tile_bytes, align.input.max(8));
                let max_out = nvcomp
                    .zstd_compress_max_output_chunk_bytes(tile_bytes, &opts)
                    .map_err(|e| gpu_err("nvCOMP output size", e))?;
                let chunk_stride = round_up(max_out, align.output.max(8));
                let temp_bytes = nvcomp
                    .zstd_compress_temp_bytes(chunks, tile_bytes, chunks * tile_bytes, &opts)
                    .map_err(|e| gpu_err("nvCOMP temp size", e))?;
                let temp = DeviceBuffer::new(temp_bytes, "nvCOMP's temp buffer")?;
                let c = Compressor {
                    nvcomp,
                    opts,
                    temp,
                    last_shape: None,
                    in_ptrs: DeviceBuffer::new(chunks * 8, "chunk pointers")?,
                    in_sizes: DeviceBuffer::new(chunks * 8, "chunk sizes")?,
                    out_ptrs: DeviceBuffer::new(chunks * 8, "chunk pointers")?,
                    statuses: DeviceBuffer::new(chunks * 4, "chunk statuses")?,
                };
                (Some(c), tile_stride, chunk_stride)
            }
        };
        let elem = layout.elem_size();
        let geometry = Geometry::new(&layout, (tile_stride / elem) as u64);
        let has_edges = (1..layout.rank())
            .any(|d| layout.dims()[d].size % layout.dims()[d].tile != 0)
            || tile_stride != tile_bytes;
        let len = layout.shard_major_len() as usize;
        let d_tiles = DeviceBuffer::new(chunks * tile_stride, "the tile pool")?;
        let d_chunks = match compressor {
            Some(_) => DeviceBuffer::new(chunks * chunk_stride, "compressed chunks")?,
            None => DeviceBuffer::new(0, "compressed chunks")?,
        };
        let perm: Vec<u64> = (0..m as u64).map(|i| layout.shard_position(i)).collect();
        let d_perm = DeviceBuffer::new(m * 8, "the shard permutation")?;
        let mut b = CudaBackend {
            epochs_per_batch: epochs,
            tile_stride,
            chunk_stride,
            geometry,
            has_edges,
            d_input: DeviceBuffer::new(epochs * layout.epoch_bytes() as usize, "staged input")?,
            d_tiles,
            d_chunks,
            d_sizes: DeviceBuffer::new(chunks * 8, "chunk sizes")?,
            d_perm,
            d_offsets: DeviceBuffer::new((epochs * len + 1) * 8, "shard offsets")?,
            d_aggregated: DeviceBuffer::new(chunks * chunk_stride, "shard-major chunks")?,
            h_offsets: vec![0; epochs * len + 1],
            h_aggregated: PinnedBuffer::new(chunks * chunk_stride)?,
            h_statuses: vec![0; chunks],
            compressor,
            kernels,
            stream,
            device_name,
            layout,
            ctx,
        };
        b.d_perm
            .upload_async(&perm, &b.stream, "uploading the permutation")?;
        b.upload_chunk_tables()?;
        b.stream.sync("uploading tables")?;
        Ok(b)
    }

    /// The per-chunk pointer and size arrays nvCOMP reads: fixed for the
    /// life of the stream, since the pools never move.
    fn upload_chunk_tables(&mut self) -> Result<()> {
        let chunks = self.epochs_per_batch * self.layout.tiles_per_epoch() as usize;
        let tile_bytes = self.layout.tile_bytes() as u64;
        let ins: Vec<u64> = (0..chunks as u64)
            .map(|i| self.d_tiles.ptr + i * self.tile_stride as u64)
            .collect();
        let outs: Vec<u64> = (0..chunks as u64)
            .map(|i| self.d_chunks.ptr + i * self.chunk_stride as u64)
            .collect();
        let sizes = vec![tile_bytes; chunks];
        match &self.compressor {
            Some(c) => {
                c.in_ptrs
                    .upload_async(&ins, &self.stream, "uploading chunk tables")?;
                c.in_sizes
                    .upload_async(&sizes, &self.stream, "uploading chunk tables")?;
                c.out_ptrs
                    .upload_async(&outs, &self.stream, "uploading chunk tables")?;
                self.stream.sync("uploading chunk tables")
            }
            // Without compression every chunk is a whole tile.
            None => {
                self.d_sizes
                    .upload_async(&sizes, &self.stream, "uploading chunk tables")?;
                self.stream.sync("uploading chunk tables")
            }
        }
    }

    /// Runs one batch of `epochs` epochs from `input` through every stage,
    /// leaving shard-major bytes in `h_aggregated` and offsets in `h_offsets`.
    fn run_batch(&mut self, input: &[u8], epochs: usize, job: &BatchJob<'_>) -> Result<()> {
        let m = self.layout.tiles_per_epoch() as usize;
        let chunks = epochs * m;
        let len = self.layout.shard_major_len() as usize;
        let s = &self.stream;
        let t0 = Instant::now();
        self.d_input.upload_async(input, s, "H2D copy")?;
        if self.has_edges {
            self.d_tiles
                .zero_async(chunks * self.tile_stride, s, "clearing the tile pool")?;
        }
        let mut geometry = self.geometry;
        let mut epochs_arg = epochs as u64;
        let mut in_ptr = self.d_input.ptr;
        let mut tiles_ptr = self.d_tiles.ptr;
        let total = epochs as u64 * self.layout.epoch_elems();
        let grid = total.div_ceil(256).min(65535 * 16) as u32;
        // SAFETY: the parameters match tz_scatter(const void*, void*,
        // tz_geometry, uint64_t); the buffers hold `epochs` epochs and pools.
        unsafe {
            self.kernels.scatter.launch(
                grid,
                256,
                s,
                &mut [
                    &mut in_ptr as *mut _ as *mut c_void,
                    &mut tiles_ptr as *mut _ as *mut c_void,
                    &mut geometry as *mut _ as *mut c_void,
                    &mut epochs_arg as *mut _ as *mut c_void,
                ],
                "scatter",
            )?;
        }
        s.sync("scatter")?;
        let t1 = Instant::now();
        job.metrics.add_time(Stage::Scatter, t1 - t0);

        let (pool, pool_stride) = match &mut self.compressor {
            Some(c) => {
                let shape = (chunks, self.layout.tile_bytes());
                if c.last_shape != Some(shape) {
                    c.temp
                        .zero_async(c.temp.bytes, s, "clearing nvCOMP's temp buffer")?;
                    c.last_shape = Some(shape);
                }
                let batch = ZstdCompressBatch {
                    uncompressed_ptrs: c.in_ptrs.ptr,
                    uncompressed_bytes: c.in_sizes.ptr,
                    max_uncompressed_chunk_bytes: self.layout.tile_bytes(),
                    num_chunks: chunks,
                    temp: c.temp.ptr,
                    temp_bytes: c.temp.bytes,
                    compressed_ptrs: c.out_ptrs.ptr,
                    compressed_bytes: self.d_sizes.ptr,
                    statuses: c.statuses.ptr,
                };
                // SAFETY: every table and pool was sized for
                // `epochs_per_batch` epochs of chunks at build time, the
                // temp buffer was asked of nvCOMP for that shape (and is
                // cleared when the shape changes), the context is current.
                unsafe { c.nvcomp.zstd_compress_async(&batch, &c.opts, s.0 as _) }
                    .map_err(|e| gpu_err("compress", e))?;
                c.statuses
                    .download_async(&mut self.h_statuses[..chunks], s, "compress")?;
                s.sync("compress")?;
                if let Some(bad) = self.h_statuses[..chunks].iter().position(|&st| st != 0) {
                    return Err(gpu_err(
                        "compress",
                        format!("nvCOMP status {} on tile {bad}", self.h_statuses[bad]),
                    ));
                }
                (self.d_chunks.ptr, self.chunk_stride as u64)
            }
            None => (self.d_tiles.ptr, self.tile_stride as u64),
        };
        let t2 = Instant::now();
        job.metrics.add_time(Stage::Compress, t2 - t1);

        let positions = epochs * len;
        self.d_offsets
            .zero_async((positions + 1) * 8, s, "aggregate")?;
        let (mut sizes, mut perm, mut offsets, mut out) = (
            self.d_sizes.ptr,
            self.d_perm.ptr,
            self.d_offsets.ptr,
            self.d_aggregated.ptr,
        );
        let (mut m_arg, mut len_arg, mut count) = (m as u64, len as u64, chunks as u64);
        let (mut pool_ptr, mut stride) = (pool, pool_stride);
        let mut n_positions = positions as u64;
        let grid = (chunks as u64).div_ceil(256).min(65535) as u32;
        // SAFETY: the parameters match the three kernels of
        // kernels/aggregate.cu; every buffer holds `epochs_per_batch` epochs.
        unsafe {
            self.kernels.permute_sizes.launch(
                grid,
                256,
                s,
                &mut [
                    &mut sizes as *mut _ as *mut c_void,
                    &mut perm as *mut _ as *mut c_void,
                    &mut offsets as *mut _ as *mut c_void,
                    &mut m_arg as *mut _ as *mut c_void,
                    &mut len_arg as *mut _ as *mut c_void,
                    &mut count as *mut _ as *mut c_void,
                ],
                "aggregate (permute sizes)",
            )?;
            self.kernels.exclusive_scan.launch(
                1,
                1024,
                s,
                &mut [
                    &mut offsets as *mut _ as *mut c_void,
                    &mut n_positions as *mut _ as *mut c_void,
                ],
                "aggregate (scan)",
            )?;
            self.kernels.gather_chunks.launch(
                (chunks as u32).min(65535),
                256,
                s,
                &mut [
                    &mut pool_ptr as *mut _ as *mut c_void,
                    &mut stride as *mut _ as *mut c_void,
                    &mut sizes as *mut _ as *mut c_void,
                    &mut perm as *mut _ as *mut c_void,
                    &mut offsets as *mut _ as *mut c_void,
                    &mut out as *mut _ as *mut c_void,
                    &mut m_arg as *mut _ as *mut c_void,
                    &mut len_arg as *mut _ as *mut c_void,
                    &mut count as *mut _ as *mut c_void,
                ],
                "aggregate (gather)",
            )?;
        }
        self.d_offsets
            .download_async(&mut self.h_offsets[..positions + 1], s, "D2H copy")?;
        s.sync("aggregate")?;
        let total = self.h_offsets[positions] as usize;
        self.d_aggregated.download_async(
            &mut self.h_aggregated.as_mut_slice()[..total],
            s,
            "D2H copy",
        )?;
        s.sync("D2H copy")?;
        job.metrics.add_time(Stage::Aggregate, t2.elapsed());
        Ok(())
    }
}

impl Backend for CudaBackend {
    fn alloc_staging(&self, bytes: usize) -> Result<StagingBuffer> {
        self.ctx.bind()?;
        Ok(StagingBuffer::Pinned(PinnedBuffer::new(bytes)?))
    }

    fn compress_epoch(&mut self, _job: EpochJob<'_>, _out: &mut CompressedEpoch) -> Result<()> {
        unreachable!("the GPU backend works on whole batches")
    }

    fn compress_batch(
        &mut self,
        job: BatchJob<'_>,
        spare: &mut dyn FnMut() -> CompressedEpoch,
        done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        self.ctx.bind()?;
        let epoch_bytes = self.layout.epoch_bytes() as usize;
        let epochs = job.epochs;
        debug_assert!(epochs <= self.epochs_per_batch);
        self.run_batch(&job.input[..epochs * epoch_bytes], epochs, &job)?;
        let len = self.layout.shard_major_len() as usize;
        let data = self.h_aggregated.as_slice();
        for k in 0..epochs {
            let offsets = &self.h_offsets[k * len..=(k + 1) * len];
            let base = offsets[0];
            let mut out = spare();
            out.epoch = job.first_epoch + k as u64;
            out.offsets.clear();
            out.offsets.extend(offsets.iter().map(|o| o - base));
            out.data.clear();
            out.data
                .extend_from_slice(&data[base as usize..offsets[len] as usize]);
            job.metrics.add_epoch();
            if !done(out) {
                break;
            }
        }
        Ok(())
    }
}
