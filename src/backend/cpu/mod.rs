//! The CPU backend: per tile, gather from the epoch's row-major input and
//! compress, on a pool of worker threads; then group by shard.

pub mod downsample;
/// Public for the criterion benchmark of the scatter.
pub mod gather;

use super::{Backend, EpochJob};
use crate::codec::ChunkCompressor;
use crate::config::{Codec, Validated};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::memory::MemoryPlan;
use crate::memory::{try_filled, try_reserve};
use crate::metrics::Stage;
use crate::shard::{CompressedEpoch, ShardAssembler};
use gather::{gather_row, row_tasks, scratch_stride, task_tiles, RowTask};
use rayon::prelude::*;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// Host memory a CPU stream needs: staging and what its backend holds
/// for level 0's layout (see [`backend_bytes`]).
pub fn plan(v: &Validated) -> MemoryPlan {
    let staging = v.staging_buffers as u64 * v.epochs_per_buffer * v.layout.epoch_bytes();
    MemoryPlan {
        device_bytes: 0,
        pinned_bytes: 0,
        host_bytes: staging.saturating_add(backend_bytes(v, &v.layout)),
    }
}

/// What the CPU backend holds for `layout`: the per-tile chunk buffers, the
/// compressed epochs in flight (up to four: being aggregated, queued,
/// being delivered, spare) with their offsets, each worker's gather
/// scratch, the tables of the shard-major order, and the shard assembler.
fn backend_bytes(v: &Validated, layout: &Layout) -> u64 {
    let chunk = crate::codec::max_chunk_bytes(v.config.codec, layout.tile_bytes()) as u64;
    let tiles = layout.tiles_per_epoch();
    let positions = layout.shard_major_len();
    let epoch_out = tiles * chunk + (positions + 1) * 8;
    let scratch = v.threads as u64
        * task_tiles(layout, v.threads)
        * scratch_stride(layout.tile_bytes()) as u64;
    let tables = positions * std::mem::size_of::<Option<u64>>() as u64
        + tiles * std::mem::size_of::<Vec<u8>>() as u64;
    let assembler = ShardAssembler::memory_bytes(layout, chunk);
    [4 * epoch_out, scratch, tables, assembler]
        .iter()
        .fold(0u64, |sum, &b| sum.saturating_add(b))
}

/// Host memory of a pyramid's levels 1..: per level, the CPU backend's
/// buffers and shard state for its layout (for level 1 only when it is
/// compressed on the CPU: `level1_on_gpu` false), the planes waiting for a
/// whole epoch (one epoch and a staging buffer's share), the carried
/// planes, and level 1's planes from the GPU (two batches' worth).
pub fn pyramid_host_bytes(v: &Validated, level1_on_gpu: bool) -> u64 {
    let levels = &v.image.levels;
    let buffer0 = v.epochs_per_buffer * v.layout.epoch_bytes();
    let mut total = 0u64;
    for (k, layout) in levels.iter().enumerate().skip(1) {
        // A level's planes are at most as large as level 0's.
        let share = buffer0 * layout.plane_bytes() / v.layout.plane_bytes().max(1);
        let pending = layout.epoch_bytes() + share;
        let carry = 2 * levels[k - 1].plane_bytes();
        let from_gpu = if k == 1 { 2 * share } else { 0 };
        let backend = if k == 1 && level1_on_gpu {
            0
        } else {
            backend_bytes(v, layout)
        };
        total = [backend, pending, carry, from_gpu]
            .iter()
            .fold(total, |sum, &b| sum.saturating_add(b));
    }
    total
}

pub struct CpuBackend {
    layout: Layout,
    codec: Codec,
    pool: Arc<rayon::ThreadPool>,
    tasks: Vec<RowTask>,
    /// The pool slot at each shard-major position (None: no tile there).
    order: Vec<Option<u64>>,
    /// One encoded chunk per pool slot, reused from epoch to epoch and
    /// left to the process's next stream.
    chunks: Vec<Vec<u8>>,
    /// The most an epoch's chunks take.
    epoch_bound: usize,
}

impl CpuBackend {
    pub fn new(v: &Validated) -> Result<CpuBackend> {
        CpuBackend::with_pool(v, &v.layout, worker_pool(v.threads)?)
    }

    /// A backend for `layout` (a pyramid level of `v`) on worker threads
    /// it shares.
    pub fn with_pool(
        v: &Validated,
        layout: &Layout,
        pool: Arc<rayon::ThreadPool>,
    ) -> Result<CpuBackend> {
        let layout = layout.clone();
        let tasks = row_tasks(&layout, task_tiles(&layout, v.threads))?;
        let mut order = try_filled(layout.shard_major_len() as usize, None, "the shard order")?;
        for (j, slot) in order.iter_mut().enumerate() {
            *slot = layout.slot_at_position(j as u64);
        }
        let tiles = layout.tiles_per_epoch() as usize;
        let max_chunk = crate::codec::max_chunk_bytes(v.config.codec, layout.tile_bytes());
        let chunks = match crate::memory::take_spare_chunks(tiles, max_chunk) {
            Some(kept) => kept,
            None => try_filled(tiles, Vec::new(), "chunk buffers")?,
        };
        Ok(CpuBackend {
            epoch_bound: chunks.len().saturating_mul(max_chunk),
            layout,
            codec: v.config.codec,
            pool,
            tasks,
            order,
            chunks,
        })
    }
}

impl Drop for CpuBackend {
    /// The chunk buffers go to the process's next stream.
    fn drop(&mut self) {
        crate::memory::give_spare_chunks(std::mem::take(&mut self.chunks));
    }
}

/// `threads` worker threads for the CPU backend's tasks.
pub fn worker_pool(threads: usize) -> Result<Arc<rayon::ThreadPool>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tz-cpu-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| Error::Internal(format!("starting worker threads: {e}")))
}

impl Backend for CpuBackend {
    fn compress_epoch(&mut self, job: EpochJob<'_>, out: &mut CompressedEpoch) -> Result<()> {
        let layout = &self.layout;
        let tile_bytes = layout.tile_bytes();
        let stride = scratch_stride(tile_bytes);
        let codec = self.codec;
        let elem = layout.elem_size();
        // Hand each task its own slice of the chunk outputs.
        let mut outputs = Vec::with_capacity(self.tasks.len());
        let mut rest = &mut self.chunks[..];
        for task in &self.tasks {
            let (mine, tail) = rest.split_at_mut(task.count as usize);
            outputs.push((task, mine));
            rest = tail;
        }
        self.pool.install(|| {
            outputs.into_par_iter().try_for_each_init(
                || (ChunkCompressor::new(codec, elem), Vec::new()),
                |(compressor, scratch), (task, chunks)| -> Result<()> {
                    if job.cancel.load(Relaxed) {
                        return Ok(());
                    }
                    let t0 = Instant::now();
                    let need = task.count as usize * stride;
                    try_reserve(
                        scratch,
                        need.saturating_sub(scratch.len()),
                        "gather scratch",
                    )?;
                    scratch.resize(need, 0);
                    gather_row(layout, task, job.input, scratch);
                    let t1 = Instant::now();
                    let compressor = compressor
                        .as_mut()
                        .map_err(|e| Error::Internal(format!("creating compressor: {e}")))?;
                    let tiles = scratch.chunks(stride).map(|s| &s[..tile_bytes]);
                    for (k, (tile, chunk)) in tiles.zip(chunks).enumerate() {
                        compressor.compress(tile, chunk).map_err(|e| {
                            let what = format!("compressing tile {}", task.first_slot + k as u64);
                            match e.kind() {
                                std::io::ErrorKind::OutOfMemory => {
                                    Error::OutOfMemory(format!("{what}: {e}"))
                                }
                                _ => Error::Internal(format!("{what}: {e}")),
                            }
                        })?;
                    }
                    job.metrics.add_time(Stage::Scatter, t1 - t0);
                    job.metrics.add_time(Stage::Compress, t1.elapsed());
                    Ok(())
                },
            )
        })?;
        job.metrics.time(Stage::Aggregate, || {
            aggregate(&self.order, &self.chunks, self.epoch_bound, out, &self.pool)
        })?;
        out.epoch = job.epoch;
        Ok(())
    }
}

/// Positions whose chunks one task of the aggregation copies.
const AGGREGATE_POSITIONS: usize = 64;

/// Packs the chunks densely in shard-major order. sharding.md's three
/// passes (permute sizes, exclusive scan, gather) collapse on the CPU into
/// a walk over the positions in order for the offsets, then the copies on
/// the pool: an epoch's bytes (130 MB of cam-32 at zstd's ratio) take one
/// thread about 20 ms, while the other workers would wait.
fn aggregate(
    order: &[Option<u64>],
    chunks: &[Vec<u8>],
    bound: usize,
    out: &mut CompressedEpoch,
    pool: &rayon::ThreadPool,
) -> Result<()> {
    out.offsets.clear();
    try_reserve(&mut out.offsets, order.len() + 1, "an epoch's offsets")?;
    out.offsets.push(0);
    let mut total = 0usize;
    for slot in order {
        if let Some(slot) = slot {
            total += chunks[*slot as usize].len();
        }
        out.offsets.push(total as u64);
    }
    let data = out.data.owned_mut();
    // The vector comes back epoch after epoch, or from an earlier stream
    // of the process (a fresh one's pages are faulted in on first touch):
    // only growth is filled, on the pool.
    if data.capacity() < total {
        if let Some(kept) = crate::memory::take_spare_bytes(total) {
            crate::memory::give_spare_bytes(std::mem::replace(data, kept));
        }
    }
    if data.len() < total {
        // Room for epochs a little larger than this one, so that the
        // vector serves them too, here and in a later stream.
        let room = total.saturating_add(total / 16).min(bound).max(total);
        try_reserve(data, room - data.len(), "an epoch's compressed bytes")?;
        let grow = total - data.len();
        pool.install(|| data.par_extend(rayon::iter::repeat_n(0u8, grow)));
    } else {
        data.truncate(total);
    }
    let mut pieces = Vec::with_capacity(order.len().div_ceil(AGGREGATE_POSITIONS));
    let mut rest = &mut data[..];
    for (k, slots) in order.chunks(AGGREGATE_POSITIONS).enumerate() {
        let first = k * AGGREGATE_POSITIONS;
        let bytes = (out.offsets[first + slots.len()] - out.offsets[first]) as usize;
        let (mine, tail) = rest.split_at_mut(bytes);
        pieces.push((mine, slots));
        rest = tail;
    }
    pool.install(|| {
        pieces.into_par_iter().for_each(|(dst, slots)| {
            let mut at = 0;
            for slot in slots.iter().flatten() {
                let chunk = &chunks[*slot as usize];
                dst[at..at + chunk.len()].copy_from_slice(chunk);
                at += chunk.len();
            }
        })
    });
    Ok(())
}
