//! The stages of one batch on the GPU, each enqueued on its stream: the
//! copy in, level 1 of a pyramid and the scatter (input stream), the
//! codec and the aggregation by shard (compute stream), and the copy out
//! with the hand-over of the batch's epochs (`collect`).
//!
//! The aggregation follows the batch's compression on the compute stream,
//! so the next batch's compression waits for it. On a stream of its own it
//! gained at most 1% (0.6 ms a batch), and once a batch's compression no
//! longer waited for any pool of the previous batch (blosc's shuffle in the
//! scatter) it ran behind the next batch's compression, even at a higher
//! priority: 10-14 ms a batch, and the next batches' copies in waited for
//! the pools it frees.

use super::chunk_order::Arrangement;
use super::compressor::Call;
use super::driver::gpu_err;
use super::pools::Roles;
use super::timeline::{mark, Step};
use super::{codec, faults, CudaBackend, Pending};
use crate::backend::Level1Job;
use crate::error::{Error, Result};
use crate::metrics::{Metrics, Stage};
use crate::shard::{CompressedEpoch, EpochData};
use std::ffi::c_void;
use std::time::Instant;

impl CudaBackend {
    /// The pools of a batch of `chunks` tiles, as a codec's kernels see
    /// them.
    pub(super) fn codec_pools(&self, roles: &Roles, chunks: usize) -> codec::Pools {
        codec::Pools {
            tiles: self.pools.ptr(roles.tiles),
            tile_stride: self.tile_stride as u64,
            tiles_filter: self.scatter_filter,
            scratch: roles.filtered.map_or(0, |p| self.pools.ptr(p)),
            slots: roles.chunks.map_or(0, |p| self.pools.ptr(p)),
            slot_stride: self.chunk_stride as u64,
            sizes: self.d_sizes.ptr,
            chunks,
            tile_bytes: self.layout.tile_bytes(),
        }
    }

    /// Whether the armed `fault` strikes the batch being enqueued.
    pub(super) fn strikes(&self, fault: faults::Fault) -> bool {
        self.fault == fault && self.batches == faults::STRIKES_ON_BATCH
    }

    /// Input stream: the H2D copy of `input` into a landing pool, level 1
    /// of the pyramid when asked, the scatter into a tile pool and the
    /// codec's filter. Returns the batch's pools.
    pub(super) fn enqueue_scatter(
        &mut self,
        slot: usize,
        input: &[&[u8]],
        bytes: usize,
        level1: Option<Level1Job<'_>>,
    ) -> Result<Roles> {
        let epochs = bytes / self.layout.epoch_bytes().max(1) as usize;
        let chunks = epochs * self.layout.tiles_per_epoch() as usize;
        let s = &self.input;
        let sl = &self.slots[slot];
        let land = self.pools.take(s)?;
        let batch = self.batches;
        mark(&mut self.timeline, s, batch, Step::LandingReady);
        sl.h2d_start.record(s, "H2D copy")?;
        // The runs (one staging buffer each) land back to back: the batch
        // is whole epochs from there on.
        let mut at = 0;
        for run in input {
            let run = &run[..run.len().min(bytes - at)];
            self.pools
                .buffer(land)
                .upload_at_async(at, run, s, "H2D copy")?;
            at += run.len();
        }
        sl.h2d_end.record(s, "H2D copy")?;
        mark(&mut self.timeline, s, batch, Step::H2dDone);
        // Beside the scatter; the compute stream, which writes over the
        // landing pool next, waits for it (`enqueue_compress`).
        if let (Some(l1), Some(job)) = (&mut self.level1, level1) {
            l1.enqueue(&self.kernels, self.pools.buffer(land), &sl.h2d_end, job)?;
        }
        let tiles = self.pools.take(s)?;
        mark(&mut self.timeline, s, batch, Step::TilesReady);
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
        let mut filter = self.scatter_filter as u32;
        // One warp per input row (a run along the last dimension), eight
        // warps a block; the kernel strides over any rows past the grid.
        let width = self.geometry.extent[self.layout.rank() - 1].max(1);
        let rows = epochs as u64 * self.layout.epoch_elems() / width;
        let grid = rows.div_ceil(8).clamp(1, 1 << 20) as u32;
        // SAFETY: the parameters match tz_scatter(const void*, void*,
        // tz_geometry, uint64_t, uint32_t); both pools hold a whole batch;
        // a filter only where the geometry allows it (`Sizes`).
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
                    &mut filter as *mut _ as *mut c_void,
                ],
                "scatter",
            )?;
        }
        // The codec's filter (blosc's shuffle), where the scatter did not
        // apply it, on this stream too: it then overlaps the previous
        // batch's compression where the pools allow.
        if let Some(c) = &self.compressor {
            c.enqueue_filter(&self.codec_pools(&roles, chunks), &self.kernels, s)?;
        }
        sl.scattered.record(s, "scatter")?;
        mark(&mut self.timeline, s, batch, Step::Scattered);
        Ok(roles)
    }

    /// Compute stream: compress the batch's tiles into its chunk pool and
    /// copy the chunk statuses back.
    pub(super) fn enqueue_compress(
        &mut self,
        slot: usize,
        roles: &mut Roles,
        epochs: usize,
    ) -> Result<()> {
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
        mark(&mut self.timeline, s, self.batches, Step::CompressGo);
        sl.arrangement = None;
        if let Some(c) = &mut self.compressor {
            let from = roles.filtered.unwrap_or(roles.tiles);
            let into = roles
                .chunks
                .ok_or_else(|| Error::Internal("a compressed batch without a chunk pool".into()))?;
            if c.codec.compresses() {
                sl.arrangement = self.chunk_order.choose(chunks);
            }
            if let Some((smallest, largest)) = self.chunk_order.take_changed() {
                // On this stream: the calls enqueued before read the
                // rankings before they change.
                let r = &c.rearranged;
                r.orders[0].upload_async(smallest, s, "copying the chunk order")?;
                r.orders[1].upload_async(largest, s, "copying the chunk order")?;
                self.orders_copied.record(s, "copying the chunk order")?;
            }
            sl.compress_start.record(s, "compress")?;
            let call = Call {
                from,
                into,
                arrangement: sl.arrangement.unwrap_or(Arrangement::AsTiled),
            };
            c.enqueue(call, &pools, &self.kernels, s, "compress")?;
            mark(&mut self.timeline, s, self.batches, Step::NvcompDone);
            c.statuses
                .download_async(&mut sl.h_statuses.as_i32s_mut()[..chunks], s, "compress")?;
        }
        sl.compressed.record(s, "compress")?;
        mark(&mut self.timeline, s, self.batches, Step::Compressed);
        Ok(())
    }

    /// After a batch's compression: its timing to the chunk order, and
    /// its chunk sizes when the order asks for them (from the shard
    /// offsets: the size of tile `i` of epoch `k` is that of its position).
    fn inform_chunk_order(&mut self, slot: usize, epochs: usize) -> Result<()> {
        let sl = &mut self.slots[slot];
        if let Some(a) = sl.arrangement.take() {
            let seconds = sl
                .compress_start
                .seconds_until(&sl.compressed, "compress")?;
            self.chunk_order.record(a, seconds);
        }
        let m = self.layout.tiles_per_epoch() as usize;
        if !self.chunk_order.wants_sizes(epochs * m) {
            return Ok(());
        }
        // The host's rankings may still be being copied to the device.
        self.orders_copied.sync("copying the chunk order")?;
        let len = self.layout.shard_major_len() as usize;
        let offsets = sl.h_offsets.as_u64s();
        let perm = &self.perm;
        self.chunk_order.rank(|i| {
            let at = (i / m) * len + perm[i % m] as usize;
            offsets[at + 1] - offsets[at]
        });
        Ok(())
    }

    /// Compute stream, after the compression of the batch: aggregate by
    /// shard into its aggregated pool, copy the offsets back, and give back
    /// the batch's other pools.
    pub(super) fn enqueue_aggregate(
        &mut self,
        slot: usize,
        batch: u64,
        roles: &Roles,
        epochs: usize,
    ) -> Result<()> {
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
        mark(&mut self.timeline, s, batch, Step::AggregateStart);
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
        mark(&mut self.timeline, s, batch, Step::AggregateEnd);
        for p in roles.before_aggregate() {
            self.pools.give_back(p, s)?;
        }
        Ok(())
    }

    /// Waits for a pending batch, copies its bytes out (output stream) and
    /// hands its epochs on.
    pub(super) fn collect(
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
            self.inform_chunk_order(p.slot, p.epochs)?;
        }
        let sl = &mut self.slots[p.slot];
        let positions = p.epochs * len;
        let total = sl.h_offsets.as_u64s()[positions] as usize;
        let t = Instant::now();
        let aggregated = self.pools.buffer(p.roles.aggregated);
        let shared = if total <= self.outputs.buffer_bytes() {
            let mut host = self.outputs.take()?;
            mark(&mut self.timeline, &self.output, p.batch, Step::D2hStart);
            aggregated.download_async(
                &mut host.as_mut_slice()[..total],
                &self.output,
                "D2H copy",
            )?;
            self.d2h_done.record(&self.output, "D2H copy")?;
            mark(&mut self.timeline, &self.output, p.batch, Step::D2hEnd);
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
            mark(&mut self.timeline, &self.output, p.batch, Step::D2hStart);
            aggregated.download_async(&mut host, &self.output, "D2H copy")?;
            self.d2h_done.record(&self.output, "D2H copy")?;
            mark(&mut self.timeline, &self.output, p.batch, Step::D2hEnd);
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

fn secs(s: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(s.max(0.0))
}
