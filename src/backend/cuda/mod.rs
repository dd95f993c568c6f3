//! The GPU backend (pipeline.md, sharding.md): per staging buffer of whole
//! epochs, H2D copy, the scatter kernel into a tile pool, the codec over
//! every tile of the batch (nvCOMP's batched compressor, with the codec's
//! own kernels around it), the aggregate-by-shard kernels
//! (permute sizes, exclusive scan, gather), and D2H of the shard-major
//! bytes and offsets into pinned host memory.
//!
//! Three streams overlap neighbouring batches: while the compressor works on
//! batch n (compute stream), batch n+1 is copied in and scattered (input
//! stream) and batch n-1's bytes are copied out (output stream). Events
//! chain the stages; a few device pools rotate through the roles of a batch
//! (`pools.rs`) so that no stage overwrites what another still reads.

pub mod ceilings;
mod codec;
mod compressor;
mod driver;
#[doc(hidden)]
pub mod faults;
mod host_copy;
mod kernels;
mod outputs;
mod pinned_cache;
mod pools;
mod pyramid;
mod sizes;

pub use driver::PinnedBuffer;
pub use host_copy::copy_streaming;

use super::{Backend, BatchJob, EpochJob, Level1Job, StagingBuffer};
use crate::config::Validated;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::memory::MemoryPlan;
use crate::metrics::{Metrics, Stage};
use crate::shard::{CompressedEpoch, EpochData};
use compressor::Compressor;
use driver::{gpu_err, Context, DeviceBuffer, Event, Stream};
use kernels::{Geometry, Kernels};
use outputs::OutputPool;
use pools::{Pools, Roles};
use sizes::Sizes;
use std::ffi::c_void;
use std::time::Instant;

/// The GPU backend's plan for `v` (its GPU staging plan applied, under
/// its `device_bytes` cap).
pub fn plan(v: &Validated) -> Result<MemoryPlan> {
    probe(v).map_err(Error::BackendUnavailable)?;
    stream_plan(&gpu_plan(v)?)
}

/// Level 0's backend and, with a pyramid, the backend that compresses
/// level 1 ([`level1_lane`]).
fn stream_plan(v: &Validated) -> Result<MemoryPlan> {
    let mut plan = backend_plan(v)?;
    if let Some((_, more)) = level1_lane(v)? {
        plan.device_bytes += more.device_bytes;
        plan.pinned_bytes += more.pinned_bytes;
        plan.host_bytes += more.host_bytes;
    }
    Ok(plan)
}

/// The configuration and plan of the backend that compresses pyramid
/// level 1 of `v` ([`pyramid::lane_config`]), unless `v` has no pyramid
/// or a `device_bytes` cap leaves no room for it beside level 0's
/// batches (its nvCOMP temp buffer alone takes about a gigabyte): level 1
/// is then compressed on the host's threads rather than level 0's
/// batches made smaller.
fn level1_lane(v: &Validated) -> Result<Option<(Validated, MemoryPlan)>> {
    let Some(lane) = pyramid::lane_config(v) else {
        return Ok(None);
    };
    let plan = backend_plan(&lane)?;
    if let Some(cap) = v.config.device_bytes {
        if backend_plan(v)?.device_bytes + plan.device_bytes > cap {
            return Ok(None);
        }
    }
    Ok(Some((lane, plan)))
}

/// Whether a GPU stream of `v` compresses pyramid level 1 on the GPU.
pub fn level1_on_gpu(v: &Validated) -> bool {
    gpu_plan(v)
        .and_then(|p| level1_lane(&p))
        .is_ok_and(|lane| lane.is_some())
}

/// What one [`CudaBackend`] built for `v` allocates.
fn backend_plan(v: &Validated) -> Result<MemoryPlan> {
    let gpu_codec = codec::load(v.config.codec, v.layout.elem_size())?;
    let z = Sizes::new(v, gpu_codec.as_deref())?;
    let (pinned_bytes, host_bytes) = host_bytes(v, &z);
    Ok(MemoryPlan {
        device_bytes: device_bytes(v, &z),
        pinned_bytes,
        host_bytes,
    })
}

/// Device bytes of a stream with batches of `z.epochs` epochs.
fn device_bytes(v: &Validated, z: &Sizes) -> u64 {
    z.device_bytes(v.layout.tiles_per_epoch() as usize)
        + pyramid::device_bytes(v, z.epochs as u64) as u64
}

/// `v` with the GPU's staging plan, its batches made small enough for its
/// `device_bytes` cap (the largest batch that fits, the staging buffers
/// as many as before); refused with the numbers when one epoch per batch
/// does not fit.
pub fn gpu_plan(v: &Validated) -> Result<Validated> {
    let mut v = v.with_gpu_staging()?;
    let Some(cap) = v.config.device_bytes else {
        return Ok(v);
    };
    let need = |v: &Validated| -> Result<u64> { Ok(stream_plan(v)?.device_bytes) };
    let first = need(&v)?;
    if first <= cap {
        return Ok(v);
    }
    // Device memory grows with the batch: the largest batch that fits.
    let (mut lo, mut hi) = (0u64, v.epochs_per_buffer);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        v.epochs_per_buffer = mid;
        if need(&v)? <= cap {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo == 0 {
        v.epochs_per_buffer = 1;
        let smallest = need(&v)?;
        return Err(Error::OutOfMemory(format!(
            "device_bytes is {cap}, but the GPU backend needs {smallest} bytes of device memory \
             for its smallest batch (one epoch of {} bytes, {} tiles; {first} for the default \
             batch): raise device_bytes, or make epochs smaller (tile[0], the frame size)",
            v.layout.epoch_bytes(),
            v.layout.tiles_per_epoch()
        )));
    }
    v.epochs_per_buffer = lo;
    Ok(v)
}

/// Page-locked bytes (staging and the backend's own buffers) and ordinary
/// host bytes (the shard state and the host copy of the permutation and
/// chunk tables) of a GPU stream.
fn host_bytes(v: &Validated, z: &Sizes) -> (u64, u64) {
    let staging = v.staging_buffers as u64 * v.epochs_per_buffer * v.layout.epoch_bytes();
    let max_chunk = crate::codec::max_chunk_bytes(v.config.codec, v.layout.tile_bytes()) as u64;
    let assembler = crate::shard::ShardAssembler::memory_bytes(&v.layout, max_chunk);
    // Offsets of the epochs in flight (three), the tables built once, and
    // a batch too large for the page-locked output buffers.
    let tables = 3 * (v.layout.shard_major_len() + 1) * 8 + 2 * z.chunks as u64 * 8;
    let host = assembler
        .saturating_add(tables)
        .saturating_add(z.fallback_bytes as u64);
    (z.pinned_bytes() + staging, host)
}

/// Device and page-locked bytes the GPU backend holds right now, all
/// streams of the process together (page-locked buffers kept for the next
/// stream excluded: see [`cached_pinned_bytes`]).
pub fn allocated() -> (u64, u64) {
    let (device, pinned) = driver::allocated();
    (device, pinned.saturating_sub(pinned_cache::cached_bytes()))
}

/// Page-locked bytes kept for the process's next stream.
pub fn cached_pinned_bytes() -> u64 {
    pinned_cache::cached_bytes()
}

/// Frees the page-locked buffers kept for the process's next stream (they
/// are freed anyway after 30 s unused); returns the bytes freed.
pub fn release_cached_memory() -> u64 {
    pinned_cache::release()
}

/// Refuses a configuration whose buffers do not fit in the device's free
/// memory, before allocating any of them.
fn check_fits(z: &Sizes, tiles_per_epoch: usize, pyramid: usize) -> Result<()> {
    let need = z.device_bytes(tiles_per_epoch) + pyramid as u64;
    let (free, total) =
        cudarc::driver::result::mem_get_info().map_err(|e| gpu_err("reading free memory", e))?;
    if need > free as u64 {
        return Err(Error::OutOfMemory(format!(
            "the GPU backend needs {need} bytes of device memory for batches of {} epochs ({} tiles), \
             but {free} of {total} are free; lower staging_bytes or the tile count per epoch",
            z.epochs, z.chunks
        )));
    }
    Ok(())
}

/// Whether this build carries the CUDA kernels (nvcc was found at build time).
pub fn kernels_built() -> bool {
    kernels::built_in()
}

/// Why the GPU backend cannot run, checked without allocating anything
/// large: the codec's tile limit (first, so that the reason is the same
/// on every machine), driver, kernels.
pub fn probe(v: &Validated) -> std::result::Result<(), String> {
    if let Some((max, limit)) = codec::max_tile_bytes(v.config.codec) {
        if v.layout.tile_bytes() > max {
            return Err(format!(
                "a tile of {} bytes exceeds {limit} of {max} bytes",
                v.layout.tile_bytes()
            ));
        }
    }
    driver::driver_present()?;
    if !kernels::built_in() {
        return Err(
            "this library was built without its CUDA kernels (nvcc was not found at build time)"
                .into(),
        );
    }
    Ok(())
}

/// What each of two batches in flight has of its own: the aggregated
/// output's offsets (on the device and the host), the chunk statuses, and
/// the events that mark its stages.
struct Slot {
    d_offsets: DeviceBuffer,
    /// Page-locked, so that copies into them do not block the host.
    h_offsets: PinnedBuffer,
    h_statuses: PinnedBuffer,
    /// Input stream: before the H2D copy, after it, after the scatter.
    h2d_start: Event,
    h2d_end: Event,
    scattered: Event,
    /// Compute stream: compression done, offsets and statuses copied back.
    compressed: Event,
    offsets_ready: Event,
}

/// A batch whose compression is under way; its results are collected on
/// the next call (or by `drain`).
struct Pending {
    slot: usize,
    roles: Roles,
    first_epoch: u64,
    epochs: usize,
}

pub struct CudaBackend {
    layout: Layout,
    epochs_per_batch: usize,
    /// Bytes between tiles in the tile pool and between chunks in the
    /// compressed pool (the alignments nvCOMP requires).
    tile_stride: usize,
    chunk_stride: usize,
    /// Where the compressor writes in a chunk's slot, and where the
    /// finished chunk starts.
    chunk_lead: usize,
    chunk_start: usize,
    geometry: Geometry,
    has_edges: bool,
    compressor: Option<Compressor>,
    /// Where a batch's frames, tiles, chunks and shard-major bytes live.
    pools: Pools,
    /// Pyramid level 1 of a batch, when the stream has a pyramid.
    level1: Option<pyramid::Level1>,
    d_sizes: DeviceBuffer,
    d_perm: DeviceBuffer,
    slots: [Slot; 2],
    next_slot: usize,
    /// Where batches' shard-major bytes land on the host: two buffers, one
    /// being filled while the delivery thread reads the other.
    outputs: OutputPool,
    pending: Option<Pending>,
    /// Batches enqueued so far, and the fault a test armed for this stream.
    batches: u64,
    fault: faults::Fault,
    kernels: Kernels,
    input: Stream,
    compute: Stream,
    output: Stream,
    /// Marks the end of a batch's D2H copy on the output stream.
    d2h_done: Event,
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

    /// The backend that compresses pyramid level 1 of `v` (a stream planned
    /// for the GPU), or `None` where the host's threads do.
    pub fn for_level1(v: &Validated) -> Result<Option<CudaBackend>> {
        level1_lane(v)?
            .map(|(lane, _)| CudaBackend::new(&lane))
            .transpose()
    }

    fn build(v: &Validated) -> Result<CudaBackend> {
        let layout = v.layout.clone();
        let ctx = Context::new(v.config.device)?;
        let device_name = ctx.name.clone();
        let kernels = Kernels::load()?;
        let m = layout.tiles_per_epoch() as usize;
        let gpu_codec = codec::load(v.config.codec, layout.elem_size())?;
        let z = Sizes::new(v, gpu_codec.as_deref())?;
        check_fits(&z, m, pyramid::device_bytes(v, z.epochs as u64))?;
        let host = host_bytes(v, &z);
        crate::memory::check_available(host.0 + host.1, "this stream (GPU backend)")?;
        let (epochs, chunks) = (z.epochs, z.chunks);
        let tables = || -> Result<Vec<DeviceBuffer>> {
            (0..z.pools)
                .map(|_| DeviceBuffer::new(chunks * 8, "chunk pointers"))
                .collect()
        };
        let compressor = match gpu_codec {
            None => None,
            Some(codec) => Some(Compressor {
                codec,
                temp: DeviceBuffer::new(z.temp, "nvCOMP's temp buffer")?,
                last_shape: None,
                in_ptrs: tables()?,
                in_sizes: DeviceBuffer::new(chunks * 8, "chunk sizes")?,
                out_ptrs: tables()?,
                statuses: DeviceBuffer::new(chunks * 4, "chunk statuses")?,
            }),
        };
        let (tile_stride, chunk_stride) = (z.tile_stride, z.chunk_stride);
        let pools = Pools::new(z.pools, z.pool_bytes, z.usage)?;
        let tile_bytes = layout.tile_bytes();
        let elem = layout.elem_size();
        let geometry = Geometry::new(&layout, (tile_stride / elem) as u64);
        let has_edges = (1..layout.rank())
            .any(|d| !layout.dims()[d].size.is_multiple_of(layout.dims()[d].tile))
            || tile_stride != tile_bytes;
        let positions = z.shard_positions;
        let slot = || -> Result<Slot> {
            Ok(Slot {
                d_offsets: DeviceBuffer::new((positions + 1) * 8, "shard offsets")?,
                h_offsets: PinnedBuffer::new(&ctx, (positions + 1) * 8)?,
                h_statuses: PinnedBuffer::new(&ctx, chunks * 4)?,
                h2d_start: Event::new()?,
                h2d_end: Event::new()?,
                scattered: Event::new()?,
                compressed: Event::new()?,
                offsets_ready: Event::new()?,
            })
        };
        let slots = [slot()?, slot()?];
        let mut perm = crate::memory::try_filled(m, 0u64, "the shard permutation")?;
        for (i, p) in perm.iter_mut().enumerate() {
            *p = layout.shard_position(i as u64);
        }
        let mut b = CudaBackend {
            epochs_per_batch: epochs,
            tile_stride,
            chunk_stride,
            chunk_lead: z.chunk_lead,
            chunk_start: z.chunk_start,
            geometry,
            has_edges,
            pools,
            level1: pyramid::Level1::new(v, epochs as u64)?,
            d_sizes: DeviceBuffer::new(chunks * 8, "chunk sizes")?,
            d_perm: DeviceBuffer::new(m * 8, "the shard permutation")?,
            slots,
            next_slot: 0,
            outputs: OutputPool::new(&ctx, 2, z.output_bytes)?,
            pending: None,
            batches: 0,
            fault: faults::take(),
            compressor,
            kernels,
            input: Stream::new()?,
            compute: Stream::new_high_priority()?,
            output: Stream::new()?,
            d2h_done: Event::new()?,
            device_name,
            layout,
            ctx,
        };
        b.d_perm
            .upload_async(&perm, &b.compute, "uploading the permutation")?;
        b.upload_chunk_tables()?;
        b.compute.sync("uploading tables")?;
        b.warm_up()?;
        Ok(b)
    }

    /// One compress call on a single tile at creation: nvCOMP loads its
    /// kernels on first use, a cost the first batch of the acquisition
    /// would otherwise pay.
    fn warm_up(&mut self) -> Result<()> {
        // Whatever pools 0 and 1 hold: only the call matters.
        let mut roles = self.pools.roles(0, 0);
        roles.chunks = Some(1);
        let pools = self.codec_pools(&roles, 1);
        let s = &self.compute;
        let Some(c) = &mut self.compressor else {
            return Ok(());
        };
        c.enqueue(0, 1, &pools, &self.kernels, s, "warming up the compressor")?;
        s.sync("warming up the compressor")
    }

    /// The per-chunk pointer and size arrays nvCOMP reads, for each pool it
    /// may read tiles from or write chunks into: fixed for the life of the
    /// stream, since the pools never move.
    fn upload_chunk_tables(&self) -> Result<()> {
        let chunks = self.epochs_per_batch * self.layout.tiles_per_epoch() as usize;
        let tile_bytes = self.layout.tile_bytes() as u64;
        let sizes = crate::memory::try_filled(chunks, tile_bytes, "chunk tables")?;
        let s = &self.compute;
        let Some(c) = &self.compressor else {
            // Without compression every chunk is a whole tile.
            return self
                .d_sizes
                .upload_async(&sizes, s, "uploading chunk tables");
        };
        let table = |base: u64, stride: usize| -> Result<Vec<u64>> {
            let mut t = crate::memory::try_filled(chunks, 0u64, "chunk tables")?;
            for (i, p) in t.iter_mut().enumerate() {
                *p = base + (i * stride) as u64;
            }
            Ok(t)
        };
        for k in 0..self.pools.count() {
            let base = self.pools.ptr(k);
            let ins = table(base, self.tile_stride)?;
            c.in_ptrs[k].upload_async(&ins, s, "uploading chunk tables")?;
            let outs = table(base + self.chunk_lead as u64, self.chunk_stride)?;
            c.out_ptrs[k].upload_async(&outs, s, "uploading chunk tables")?;
            // The host tables must outlive the copies: wait for them here.
            s.sync("uploading chunk tables")?;
        }
        c.in_sizes
            .upload_async(&sizes, s, "uploading chunk tables")?;
        s.sync("uploading chunk tables")
    }

    /// The pools of a batch of `chunks` tiles, as a codec's kernels see
    /// them.
    fn codec_pools(&self, roles: &Roles, chunks: usize) -> codec::Pools {
        codec::Pools {
            tiles: self.pools.ptr(roles.tiles),
            tile_stride: self.tile_stride as u64,
            scratch: roles.filtered.map_or(0, |p| self.pools.ptr(p)),
            slots: roles.chunks.map_or(0, |p| self.pools.ptr(p)),
            slot_stride: self.chunk_stride as u64,
            sizes: self.d_sizes.ptr,
            chunks,
            tile_bytes: self.layout.tile_bytes(),
        }
    }

    /// Whether the armed `fault` strikes the batch being enqueued.
    fn strikes(&self, fault: faults::Fault) -> bool {
        self.fault == fault && self.batches == faults::STRIKES_ON_BATCH
    }

    /// Input stream: the H2D copy of `input` into a landing pool, level 1
    /// of the pyramid when asked, the scatter into a tile pool and the
    /// codec's filter. Returns the batch's pools.
    fn enqueue_scatter(
        &mut self,
        slot: usize,
        input: &[u8],
        epochs: usize,
        level1: Option<Level1Job<'_>>,
    ) -> Result<Roles> {
        let chunks = epochs * self.layout.tiles_per_epoch() as usize;
        let s = &self.input;
        let sl = &self.slots[slot];
        let land = self.pools.take(s)?;
        sl.h2d_start.record(s, "H2D copy")?;
        self.pools.buffer(land).upload_async(input, s, "H2D copy")?;
        sl.h2d_end.record(s, "H2D copy")?;
        // Beside the scatter; the compute stream, which writes over the
        // landing pool next, waits for it (`enqueue_compress`).
        if let (Some(l1), Some(job)) = (&mut self.level1, level1) {
            l1.enqueue(&self.kernels, self.pools.buffer(land), &sl.h2d_end, job)?;
        }
        let tiles = self.pools.take(s)?;
        let roles = self.pools.roles(land, tiles);
        if self.has_edges {
            self.pools.buffer(tiles).zero_async(
                chunks * self.tile_stride,
                s,
                "clearing the tile pool",
            )?;
        }
        let mut geometry = self.geometry;
        let mut epochs_arg = epochs as u64;
        let mut in_ptr = self.pools.ptr(land);
        if self.strikes(faults::Fault::ScatterIllegalAddress) {
            in_ptr = 8; // never mapped: the kernel faults on its first load
        }
        let mut tiles_ptr = self.pools.ptr(tiles);
        // One warp per input row (a run along the last dimension), eight
        // warps a block; the kernel strides over any rows past the grid.
        let width = self.geometry.extent[self.layout.rank() - 1].max(1);
        let rows = epochs as u64 * self.layout.epoch_elems() / width;
        let grid = rows.div_ceil(8).clamp(1, 1 << 20) as u32;
        // SAFETY: the parameters match tz_scatter(const void*, void*,
        // tz_geometry, uint64_t); both pools hold a whole batch.
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
        // The codec's filter (blosc's shuffle) on this stream too: it then
        // overlaps the previous batch's compression where the pools allow.
        if let Some(c) = &self.compressor {
            c.enqueue_filter(&self.codec_pools(&roles, chunks), &self.kernels, s)?;
        }
        sl.scattered.record(s, "scatter")?;
        Ok(roles)
    }

    /// Compute stream: compress the batch's tiles into its chunk pool and
    /// copy the chunk statuses back.
    fn enqueue_compress(&mut self, slot: usize, roles: &mut Roles, epochs: usize) -> Result<()> {
        let chunks = epochs * self.layout.tiles_per_epoch() as usize;
        if self.strikes(faults::Fault::CompressFails) {
            return Err(gpu_err("compress", "injected failure (a test armed it)"));
        }
        let s = &self.compute;
        self.pools.take_chunks(roles, s)?;
        let pools = self.codec_pools(roles, chunks);
        let sl = &mut self.slots[slot];
        s.wait(&sl.scattered, "compress")?;
        if let Some(reduced) = self.level1.as_ref().and_then(|l| l.reduced()) {
            s.wait(reduced, "compress")?;
        }
        if let Some(c) = &mut self.compressor {
            let from = roles.filtered.unwrap_or(roles.tiles);
            let into = roles
                .chunks
                .ok_or_else(|| Error::Internal("a compressed batch without a chunk pool".into()))?;
            c.enqueue(from, into, &pools, &self.kernels, s, "compress")?;
            c.statuses
                .download_async(&mut sl.h_statuses.as_i32s_mut()[..chunks], s, "compress")?;
        }
        sl.compressed.record(s, "compress")
    }

    /// Compute stream, after the compression of the batch: aggregate by
    /// shard into its aggregated pool, copy the offsets back, and give back
    /// the batch's other pools.
    fn enqueue_aggregate(&mut self, slot: usize, roles: &Roles, epochs: usize) -> Result<()> {
        let m = self.layout.tiles_per_epoch() as usize;
        let chunks = epochs * m;
        let len = self.layout.shard_major_len() as usize;
        let (pool, pool_stride) = match roles.chunks {
            // The gather reads each finished chunk from its start.
            Some(p) => (
                self.pools.ptr(p) + self.chunk_start as u64,
                self.chunk_stride as u64,
            ),
            None => (self.pools.ptr(roles.tiles), self.tile_stride as u64),
        };
        let s = &self.compute;
        let sl = &mut self.slots[slot];
        let positions = epochs * len;
        sl.d_offsets
            .zero_async((positions + 1) * 8, s, "aggregate")?;
        let (mut sizes, mut perm, mut offsets, mut out) = (
            self.d_sizes.ptr,
            self.d_perm.ptr,
            sl.d_offsets.ptr,
            self.pools.ptr(roles.aggregated),
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
        sl.d_offsets.download_async(
            &mut sl.h_offsets.as_u64s_mut()[..positions + 1],
            s,
            "D2H copy",
        )?;
        sl.offsets_ready.record(s, "aggregate")?;
        for p in roles.before_aggregate() {
            self.pools.give_back(p, s)?;
        }
        Ok(())
    }

    /// Waits for a pending batch, copies its bytes out (output stream) and
    /// hands its epochs on.
    fn collect(
        &mut self,
        p: Pending,
        metrics: &Metrics,
        spare: &mut dyn FnMut() -> CompressedEpoch,
        done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<bool> {
        let len = self.layout.shard_major_len() as usize;
        let chunks = p.epochs * self.layout.tiles_per_epoch() as usize;
        let sl = &mut self.slots[p.slot];
        // A fault in any of the batch's kernels (or in nvCOMP) surfaces at
        // this wait, which cannot tell which one it was.
        sl.offsets_ready
            .sync("the batch's H2D copy, scatter, compress or aggregate")?;
        if self.compressor.is_some() {
            let statuses = &sl.h_statuses.as_i32s()[..chunks];
            if let Some(bad) = statuses.iter().position(|&st| st != 0) {
                return Err(gpu_err(
                    "compress",
                    format!("nvCOMP status {} on tile {bad}", statuses[bad]),
                ));
            }
        }
        let positions = p.epochs * len;
        let total = sl.h_offsets.as_u64s()[positions] as usize;
        let t = Instant::now();
        let aggregated = self.pools.buffer(p.roles.aggregated);
        let shared = if total <= self.outputs.buffer_bytes() {
            let mut host = self.outputs.take()?;
            aggregated.download_async(
                &mut host.as_mut_slice()[..total],
                &self.output,
                "D2H copy",
            )?;
            self.d2h_done.record(&self.output, "D2H copy")?;
            self.d2h_done.sync("D2H copy")?;
            // The epochs share the page-locked buffer: a copy out of it on
            // the host would cost as much as the whole GPU round trip.
            self.outputs.share(host)
        } else {
            // A batch that hardly compressed: through ordinary memory.
            let mut host = crate::memory::try_filled(
                total,
                0u8,
                "a batch's shard-major bytes, larger than the page-locked output buffers",
            )?;
            aggregated.download_async(&mut host, &self.output, "D2H copy")?;
            self.d2h_done.record(&self.output, "D2H copy")?;
            self.d2h_done.sync("D2H copy")?;
            std::sync::Arc::new(host)
        };
        self.pools.give_back(p.roles.aggregated, &self.output)?;
        metrics.add_time(Stage::D2h, t.elapsed());
        metrics.add_time(
            Stage::H2d,
            secs(sl.h2d_start.seconds_until(&sl.h2d_end, "H2D copy")?),
        );
        metrics.add_time(
            Stage::Scatter,
            secs(sl.h2d_end.seconds_until(&sl.scattered, "scatter")?),
        );
        metrics.add_time(
            Stage::Compress,
            secs(
                sl.scattered
                    .seconds_until(&sl.compressed, "compress")
                    .unwrap_or(0.0),
            ),
        );
        metrics.add_time(
            Stage::Aggregate,
            secs(
                sl.compressed
                    .seconds_until(&sl.offsets_ready, "aggregate")?,
            ),
        );

        let offsets_all = sl.h_offsets.as_u64s();
        for k in 0..p.epochs {
            let offsets = &offsets_all[k * len..=(k + 1) * len];
            let base = offsets[0];
            let mut out = spare();
            out.epoch = p.first_epoch + k as u64;
            out.offsets.clear();
            out.offsets.extend(offsets.iter().map(|o| o - base));
            out.data = EpochData::Shared {
                buffer: shared.clone(),
                range: base as usize..offsets[len] as usize,
            };
            metrics.add_epoch();
            if !done(out) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Drop for CudaBackend {
    /// Work in flight finishes before any buffer it uses is freed.
    fn drop(&mut self) {
        let _ = self.ctx.bind();
        let _ = self.input.sync("shutdown");
        let _ = self.compute.sync("shutdown");
        let _ = self.output.sync("shutdown");
        if let Some(l) = &self.level1 {
            let _ = l.sync("shutdown");
        }
    }
}

fn secs(s: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(s.max(0.0))
}

impl Backend for CudaBackend {
    fn staging_allocator(&self) -> Result<super::StagingAllocator> {
        let alloc = driver::PinnedAllocator::new(&self.ctx)?;
        Ok(Box::new(move |bytes| {
            Ok(StagingBuffer::Pinned(alloc.recycled(bytes)?))
        }))
    }

    fn compress_epoch(&mut self, _job: EpochJob<'_>, _out: &mut CompressedEpoch) -> Result<()> {
        unreachable!("the GPU backend works on whole batches")
    }

    /// Enqueues this batch, then collects the previous one while the GPU
    /// compresses this one; returns once this batch's input has been copied
    /// to the device, so that its staging buffer can be refilled.
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
        let slot = self.next_slot;
        self.next_slot ^= 1;
        let mut roles =
            self.enqueue_scatter(slot, &job.input[..epochs * epoch_bytes], epochs, job.level1)?;
        self.enqueue_compress(slot, &mut roles, epochs)?;
        self.batches += 1;
        let previous = self.pending.replace(Pending {
            slot,
            roles,
            first_epoch: job.first_epoch,
            epochs,
        });
        // While this batch compresses, the previous one is copied out.
        let collected = match previous {
            Some(p) => self.collect(p, job.metrics, spare, done).map(|_| ()),
            None => Ok(()),
        };
        self.enqueue_aggregate(slot, &roles, epochs)?;
        collected?;
        self.slots[slot].h2d_end.sync("H2D copy")
    }

    fn max_batch_epochs(&self) -> usize {
        self.epochs_per_batch
    }

    fn fetch_level1(&mut self, planes: usize, out: &mut [u8]) -> Result<bool> {
        let Some(level1) = &mut self.level1 else {
            return Ok(false);
        };
        self.ctx.bind()?;
        // Reduced by `compress_batch` when its job asked for it.
        level1.fetch(planes, out)
    }

    fn holds_batch(&self) -> bool {
        self.pending.is_some()
    }

    fn collect_ready(
        &mut self,
        metrics: &Metrics,
        spare: &mut dyn FnMut() -> CompressedEpoch,
        done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        let Some(p) = &self.pending else {
            return Ok(());
        };
        self.ctx.bind()?;
        if !self.slots[p.slot]
            .offsets_ready
            .is_complete("polling a batch")?
        {
            return Ok(());
        }
        let p = self.pending.take().expect("a pending batch");
        self.collect(p, metrics, spare, done).map(|_| ())
    }

    fn drain(
        &mut self,
        metrics: &Metrics,
        spare: &mut dyn FnMut() -> CompressedEpoch,
        done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        self.ctx.bind()?;
        if let Some(p) = self.pending.take() {
            self.collect(p, metrics, spare, done)?;
        }
        // What the stream holds is final at its flush.
        self.outputs.wait_allocated();
        Ok(())
    }
}
