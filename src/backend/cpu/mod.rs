//! The CPU backend: per task (a run of tiles of one row), gather from the
//! epoch's row-major input, compress, and append each shard's chunks to
//! its output in order, on a pool of worker threads. Small epochs go to
//! the workers in groups (one queue of tasks for several epochs), so that
//! they meet once per group, not once per epoch.

pub mod downsample;
/// Public for the criterion benchmark of the scatter.
pub mod gather;
mod pack;

use super::{Backend, BatchJob, EpochJob};
use crate::codec::ChunkCompressor;
use crate::config::{Codec, Validated};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::memory::MemoryPlan;
use crate::memory::{try_filled, try_reserve};
use crate::metrics::{Metrics, Stage};
use crate::shard::{CompressedEpoch, ShardAssembler};
use gather::{gather_row, group_epochs, row_tasks, scratch_stride, task_tiles, RowTask};
use pack::{EpochOut, Packer, Piece, PieceBuf};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// Host memory a CPU stream needs: staging and what its backend holds
/// for level 0's layout (see `backend_bytes`).
pub fn plan(v: &Validated) -> MemoryPlan {
    let staging = v.staging_buffers as u64 * v.epochs_per_buffer * v.layout.epoch_bytes();
    MemoryPlan {
        device_bytes: 0,
        pinned_bytes: 0,
        host_bytes: staging.saturating_add(backend_bytes(v, &v.layout)),
    }
}

/// Pieces per worker thread that may wait for their turn in a buffer of
/// their own (see [`pack`]) before a worker waits instead.
const WAITING_PER_THREAD: usize = 2;

/// The most epochs of a batch given to the workers at once.
const MAX_GROUP_EPOCHS: u64 = 64;

/// Epochs of a batch the workers take at once for `layout`: at most a
/// staging buffer's ([`group_epochs`]).
fn group_of(v: &Validated, layout: &Layout) -> u64 {
    group_epochs(layout, v.threads, v.epochs_per_buffer.min(MAX_GROUP_EPOCHS))
}

/// What the CPU backend holds for `layout`: the compressed epochs in
/// flight (a group being packed, a group queued for the sink, a group
/// being delivered and one spare), each with room for every shard's chunks and their offsets,
/// each worker's gather scratch and piece buffer, the pieces that may
/// wait, the tables of positions and pieces, and the shard assembler.
fn backend_bytes(v: &Validated, layout: &Layout) -> u64 {
    let chunk = crate::codec::max_chunk_bytes(v.config.codec, layout.tile_bytes()) as u64;
    let tiles = layout.tiles_per_epoch();
    let positions = layout.shard_major_len();
    let epoch_out = positions * chunk + (positions + 1) * 8;
    let task = task_tiles(layout, v.threads);
    let threads = v.threads as u64;
    let scratch = threads * task * scratch_stride(layout.tile_bytes()) as u64;
    let pieces = threads * (1 + WAITING_PER_THREAD as u64) * task * (chunk + 8);
    let tables = group_of(v, layout) * positions * 8
        + tiles * (std::mem::size_of::<Piece>() + std::mem::size_of::<Vec<Piece>>()) as u64;
    let assembler = ShardAssembler::memory_bytes(layout, chunk);
    let in_flight = (3 * group_of(v, layout) + 1).saturating_mul(epoch_out);
    [in_flight, scratch, pieces, tables, assembler]
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
    pool: Arc<rayon::ThreadPool>,
    tasks: Vec<RowTask>,
    /// Each task's pieces (see [`pack`]).
    pieces: Vec<Vec<Piece>>,
    /// One per pool thread: its compressor and buffers, kept from epoch
    /// to epoch.
    workers: Vec<Mutex<Worker>>,
    /// Epochs of a batch given to the workers at once.
    group: usize,
    /// Chunk bytes of each shard-major position, for each epoch of the
    /// group being packed.
    sizes: Vec<Vec<u64>>,
    /// The most bytes one shard's chunks of an epoch take.
    shard_bound: usize,
    /// Buffers for pieces that wait for their turn.
    spare: Vec<PieceBuf>,
    may_wait: usize,
}

/// A worker thread's state.
struct Worker {
    codec: Codec,
    elem_size: usize,
    /// Made on the worker's first task.
    compressor: Option<ChunkCompressor>,
    scratch: Vec<u8>,
    piece: PieceBuf,
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
        let pieces = pack::pieces(&layout, &tasks)?;
        let threads = pool.current_num_threads();
        let mut workers = Vec::new();
        try_reserve(&mut workers, threads, "worker state")?;
        for _ in 0..threads {
            workers.push(Mutex::new(Worker {
                codec: v.config.codec,
                elem_size: layout.elem_size(),
                compressor: None,
                scratch: Vec::new(),
                piece: PieceBuf::default(),
            }));
        }
        let max_chunk = crate::codec::max_chunk_bytes(v.config.codec, layout.tile_bytes());
        let per_shard = layout.chunks_per_shard_epoch() as usize;
        let group = group_of(v, &layout) as usize;
        let mut sizes = Vec::new();
        try_reserve(&mut sizes, group, "chunk sizes")?;
        for _ in 0..group {
            sizes.push(try_filled(
                layout.shard_major_len() as usize,
                0,
                "chunk sizes",
            )?);
        }
        Ok(CpuBackend {
            group,
            sizes,
            shard_bound: per_shard.saturating_mul(max_chunk),
            layout,
            pool,
            tasks,
            pieces,
            workers,
            spare: Vec::new(),
            may_wait: WAITING_PER_THREAD * threads,
        })
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

impl CpuBackend {
    /// Gathers, compresses and packs the epochs `inputs` (the first one
    /// epoch `first_epoch`) into `outs`, one each, in one pass of the
    /// workers over every epoch's tasks.
    fn compress_group(
        &mut self,
        first_epoch: u64,
        inputs: &[&[u8]],
        outs: &mut [CompressedEpoch],
        cancel: &AtomicBool,
        metrics: &Metrics,
    ) -> Result<()> {
        let layout = &self.layout;
        let shards = layout.shards_per_row() as usize;
        let per_shard = layout.chunks_per_shard_epoch() as usize;
        while self.sizes.len() < outs.len() {
            try_reserve(&mut self.sizes, 1, "chunk sizes")?;
            let sizes = try_filled(layout.shard_major_len() as usize, 0, "chunk sizes")?;
            self.sizes.push(sizes);
        }
        let mut targets: Vec<EpochOut<'_>> = Vec::new();
        try_reserve(&mut targets, outs.len(), "a group's outputs")?;
        for (out, sizes) in outs.iter_mut().zip(self.sizes.iter_mut()) {
            let data = out.data.per_shard_mut();
            if data.len() != shards {
                if data.is_empty() {
                    if let Some(kept) = crate::memory::take_spare_set(shards, self.shard_bound) {
                        *data = kept;
                    }
                }
                try_reserve(data, shards.saturating_sub(data.len()), "shard outputs")?;
                data.resize_with(shards, Vec::new);
            }
            targets.push((&mut data[..], &mut sizes[..]));
        }
        let packer = Packer::new(
            targets,
            per_shard,
            self.shard_bound,
            std::mem::take(&mut self.spare),
            self.may_wait,
        )?;
        // Tasks go out in order, epoch after epoch, so that a shard's next
        // piece is usually the next to finish.
        let next = AtomicUsize::new(0);
        let failure = Mutex::new(None);
        let (tasks, pieces, workers) = (&self.tasks, &self.pieces, &self.workers);
        let per_epoch = tasks.len().max(1);
        let total = tasks.len() * inputs.len();
        self.pool.broadcast(|ctx| {
            let mut worker = workers[ctx.index()].lock();
            loop {
                let t = next.fetch_add(1, Relaxed);
                if t >= total || packer.is_stopped() {
                    return;
                }
                if cancel.load(Relaxed) {
                    packer.stop();
                    return;
                }
                let (e, k) = (t / per_epoch, t % per_epoch);
                let epoch = Epoch {
                    index: e,
                    input: inputs[e],
                    packer: &packer,
                    metrics,
                };
                if let Err(err) = worker.run(layout, &tasks[k], &pieces[k], &epoch) {
                    failure.lock().get_or_insert(err);
                    packer.stop();
                    return;
                }
            }
        });
        self.spare = packer.finish()?;
        if let Some(e) = failure.into_inner() {
            return Err(e);
        }
        for (k, (out, sizes)) in outs.iter_mut().zip(&self.sizes).enumerate() {
            out.offsets.clear();
            try_reserve(&mut out.offsets, sizes.len() + 1, "an epoch's offsets")?;
            out.offsets.push(0);
            let mut total = 0u64;
            for size in sizes {
                total += size;
                out.offsets.push(total);
            }
            out.epoch = first_epoch + k as u64;
        }
        Ok(())
    }
}

impl Backend for CpuBackend {
    fn compress_epoch(&mut self, job: EpochJob<'_>, out: &mut CompressedEpoch) -> Result<()> {
        let outs = std::slice::from_mut(out);
        self.compress_group(job.epoch, &[job.input], outs, job.cancel, job.metrics)
    }

    fn epochs_handed_together(&self) -> usize {
        self.group
    }

    /// The batch's epochs in groups (see the module's comment), each
    /// group's epochs handed on in order once the group is done.
    fn compress_batch(
        &mut self,
        job: BatchJob<'_>,
        spare: &mut dyn FnMut() -> CompressedEpoch,
        done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        // A group's inputs at a time: a batch of tiny epochs may hold
        // millions of them.
        let group = self.group.max(1);
        let mut epochs = job.epoch_inputs();
        let mut inputs: Vec<&[u8]> = Vec::new();
        try_reserve(&mut inputs, group, "a group's inputs")?;
        let mut outs: Vec<CompressedEpoch> = Vec::new();
        try_reserve(&mut outs, group, "a group's outputs")?;
        let mut first = job.first_epoch;
        loop {
            inputs.clear();
            inputs.extend(epochs.by_ref().take(group));
            if inputs.is_empty() || job.cancel.load(Relaxed) {
                break;
            }
            outs.extend((0..inputs.len()).map(|_| spare()));
            self.compress_group(first, &inputs, &mut outs, job.cancel, job.metrics)?;
            first += inputs.len() as u64;
            for out in outs.drain(..) {
                job.metrics.add_epoch();
                if !done(out) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// One epoch of a group, as a worker sees it.
struct Epoch<'a, 'p> {
    /// Its place in the group.
    index: usize,
    input: &'a [u8],
    packer: &'a Packer<'p>,
    metrics: &'a Metrics,
}

impl Worker {
    /// Gathers `task`'s tiles from `epoch`'s input, compresses them piece
    /// by piece and hands each piece to the epoch's packer.
    fn run(
        &mut self,
        layout: &Layout,
        task: &RowTask,
        pieces: &[Piece],
        epoch: &Epoch<'_, '_>,
    ) -> Result<()> {
        let t0 = Instant::now();
        let tile_bytes = layout.tile_bytes();
        let stride = scratch_stride(tile_bytes);
        let need = task.count as usize * stride;
        let scratch = &mut self.scratch;
        try_reserve(
            scratch,
            need.saturating_sub(scratch.len()),
            "gather scratch",
        )?;
        scratch.resize(need.max(scratch.len()), 0);
        gather_row(layout, task, epoch.input, scratch);
        let metrics = epoch.metrics;
        metrics.add_time(Stage::Scatter, t0.elapsed());
        if self.compressor.is_none() {
            let made = ChunkCompressor::new(self.codec, self.elem_size)
                .map_err(|e| Error::Internal(format!("creating compressor: {e}")))?;
            self.compressor = Some(made);
        }
        let compressor = self.compressor.as_mut().expect("made above");
        for piece in pieces {
            let t1 = Instant::now();
            let buf = &mut self.piece;
            buf.clear();
            try_reserve(&mut buf.lens, piece.count, "chunk lengths")?;
            for k in piece.first_tile..piece.first_tile + piece.count {
                let tile = &scratch[k * stride..k * stride + tile_bytes];
                let len = compressor
                    .compress_append(tile, &mut buf.bytes)
                    .map_err(|e| compress_error(task.first_slot + k as u64, e))?;
                buf.lens.push(len as u64);
            }
            let t2 = Instant::now();
            metrics.add_time(Stage::Compress, t2 - t1);
            epoch.packer.commit(epoch.index, piece, buf);
            metrics.add_time(Stage::Aggregate, t2.elapsed());
        }
        Ok(())
    }
}

fn compress_error(slot: u64, e: std::io::Error) -> Error {
    let what = format!("compressing tile {slot}");
    match e.kind() {
        std::io::ErrorKind::OutOfMemory => Error::OutOfMemory(format!("{what}: {e}")),
        _ => Error::Internal(format!("{what}: {e}")),
    }
}

#[cfg(test)]
mod tests;
