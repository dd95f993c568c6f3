//! The GPU backend (pipeline.md, sharding.md): per staging buffer of whole
//! epochs, H2D copy, the scatter kernel into a tile pool, the codec over
//! every tile of the batch (nvCOMP's batched compressor, with the codec's
//! own kernels around it), the aggregate-by-shard kernels
//! (permute sizes, exclusive scan, gather), and D2H of the shard-major
//! bytes and offsets into pinned host memory.
//!
//! Three streams overlap neighbouring batches: while the compressor works on
//! batch n (compute stream, with the batch's aggregation right after it:
//! `stages.rs` says why), batch n+1 is copied in and scattered (input
//! stream) and batch n-1's bytes are copied out (output stream). Events
//! chain the stages; a few device pools rotate through the roles of a batch
//! (`pools.rs`) so that no stage overwrites what another still reads.
//! `stages.rs` enqueues a batch's stages; `plan.rs` sizes what a stream
//! allocates (`sizes.rs` per buffer) before anything is; `chunk_order.rs`
//! picks the order of a batch's chunks in its compress call.

pub mod ceilings;
pub mod chunk_order;
mod codec;
mod compressor;
mod driver;
#[doc(hidden)]
pub mod faults;
mod host_copy;
mod kernels;
mod outputs;
mod pinned_cache;
mod plan;
mod pools;
mod pyramid;
mod sizes;
mod stages;
mod timeline;

use chunk_order::{Arrangement, ChunkOrder};
use compressor::Rearranged;
pub use driver::PinnedBuffer;
pub use host_copy::copy_streaming;
use plan::{check_fits, host_bytes, level1_lane};
pub use plan::{gpu_plan, level1_on_gpu, plan};

use super::{Backend, BatchJob, EpochJob, StagingBuffer};
use crate::config::Validated;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::metrics::Metrics;
use crate::shard::CompressedEpoch;
use compressor::Compressor;
use driver::{Context, DeviceBuffer, Event, Stream};
use kernels::{Geometry, Kernels};
use outputs::OutputPool;
use pools::{Pools, Roles};
use sizes::Sizes;

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
    /// Compute stream: compression started and done, offsets and statuses
    /// copied back.
    compress_start: Event,
    compressed: Event,
    offsets_ready: Event,
    /// How the batch's chunks were ordered in its compress call, when it
    /// is timed for [`ChunkOrder`].
    arrangement: Option<Arrangement>,
}

/// A batch whose compression is under way; its results are collected on
/// the next call (or by `drain`).
struct Pending {
    slot: usize,
    /// The batch's number in the stream (for the timeline).
    batch: u64,
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
    /// The codec's shuffle where the scatter applies it.
    scatter_filter: codec::Filter,
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
    /// The host's copy of `d_perm`: each tile's shard-major position.
    perm: Vec<u64>,
    /// The order of a batch's chunks in its compress call, and the mark
    /// after the last copy of its rankings to the device (whose host
    /// tables must not change before).
    chunk_order: ChunkOrder,
    orders_copied: Event,
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
    /// Each batch's steps, when `TZ_GPU_TIMELINE` asks for them.
    timeline: Option<timeline::Timeline>,
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
                rearranged: Rearranged::new(chunks)?,
            }),
        };
        let (tile_stride, chunk_stride) = (z.tile_stride, z.chunk_stride);
        let scatter_filter = z.scatter_filter;
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
                compress_start: Event::new()?,
                compressed: Event::new()?,
                offsets_ready: Event::new()?,
                arrangement: None,
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
            scatter_filter,
            chunk_lead: z.chunk_lead,
            chunk_start: z.chunk_start,
            geometry,
            has_edges,
            pools,
            level1: pyramid::Level1::new(v, epochs as u64)?,
            d_sizes: DeviceBuffer::new(chunks * 8, "chunk sizes")?,
            d_perm: DeviceBuffer::new(m * 8, "the shard permutation")?,
            perm,
            chunk_order: ChunkOrder::new(
                chunks,
                format!(
                    "{:?} on device {}, {chunks} tiles of {} bytes",
                    v.config.codec,
                    v.config.device,
                    layout.tile_bytes()
                ),
            )?,
            orders_copied: Event::new()?,
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
            timeline: timeline::Timeline::from_env(),
            device_name,
            layout,
            ctx,
        };
        b.d_perm
            .upload_async(&b.perm, &b.compute, "uploading the permutation")?;
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
        let call = compressor::Call {
            from: 0,
            into: 1,
            arrangement: Arrangement::AsTiled,
        };
        c.enqueue(call, &pools, &self.kernels, s, "warming up the compressor")?;
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
}

impl Drop for CudaBackend {
    /// Work in flight finishes before any buffer it uses is freed.
    fn drop(&mut self) {
        let _ = self.ctx.bind();
        let _ = self.input.sync("shutdown");
        let _ = self.compute.sync("shutdown");
        let _ = self.output.sync("shutdown");
        if let Some(t) = &self.timeline {
            t.finish();
        }
        if let Some(l) = &self.level1 {
            let _ = l.sync("shutdown");
        }
    }
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
        let mut roles = self.enqueue_scatter(slot, job.input, epochs * epoch_bytes, job.level1)?;
        self.enqueue_compress(slot, &mut roles, epochs)?;
        let batch = self.batches;
        self.batches += 1;
        let previous = self.pending.replace(Pending {
            slot,
            batch,
            roles,
            first_epoch: job.first_epoch,
            epochs,
        });
        // While this batch compresses, the previous one is copied out, once
        // this batch's compression has started. A copy out begun while the
        // compute stream still waited for this batch's scatter held that
        // stream until the copy ended (H100, zstd: 4.7 ms of each 75 ms
        // batch; 7.16 GB/s without the wait, 7.58 with it).
        let collected = match previous {
            Some(p) => {
                if self.compressor.is_some() {
                    self.output
                        .wait(&self.slots[slot].compress_start, "D2H copy")?;
                }
                self.collect(p, job.metrics, spare, done).map(|_| ())
            }
            None => Ok(()),
        };
        self.enqueue_aggregate(slot, batch, &roles, epochs)?;
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
