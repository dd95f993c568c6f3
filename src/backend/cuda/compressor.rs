//! One stream's batched compressor: the GPU codec, its temp buffer and
//! scratch pool, and the per-chunk pointer and size tables it reads, with
//! the one rule nvCOMP imposes on reuse (a temp buffer must be cleared when
//! the batch's shape changes).

use super::codec::{Batch, GpuCodec, Pools};
use super::driver::{DeviceBuffer, Stream};
use super::kernels::Kernels;
use crate::error::Result;

pub struct Compressor {
    pub codec: Box<dyn GpuCodec>,
    pub temp: DeviceBuffer,
    /// The codec's filtered tiles, one pool per tile-pool slot (empty when
    /// it filters nothing): the filter of batch n + 1 runs on the input
    /// stream while batch n is compressed.
    pub scratch: [DeviceBuffer; 2],
    /// (chunks, chunk bytes) of the last call on `temp`: nvCOMP faults when
    /// its temp buffer holds what a call of another shape left there.
    pub last_shape: Option<(usize, usize)>,
    /// Chunk pointer tables, one per tile-pool slot.
    pub in_ptrs: [DeviceBuffer; 2],
    pub in_sizes: DeviceBuffer,
    pub out_ptrs: DeviceBuffer,
    pub statuses: DeviceBuffer,
}

impl Compressor {
    /// Enqueues the codec's filter of a batch on `s` (the input stream,
    /// after the scatter).
    pub fn enqueue_filter(&self, pools: &Pools, kernels: &Kernels, s: &Stream) -> Result<()> {
        // SAFETY: the pools were sized at build time for a whole batch, as
        // the codec's sizes asked; the caller made the context current.
        unsafe { self.codec.before_compress(pools, kernels, s) }
    }

    /// Enqueues one batch on `s`: batched compress calls over the first
    /// `pools.chunks` tiles of tile-pool slot `slot` (filtered by
    /// [`Compressor::enqueue_filter`] before; their sizes into
    /// `pools.sizes`), at most [`super::sizes::chunks_per_call`] each, and
    /// the codec's framing. The temp buffer is cleared before a call whose
    /// shape differs from the last call's: nvCOMP faults otherwise.
    pub fn enqueue(
        &mut self,
        slot: usize,
        pools: &Pools,
        kernels: &Kernels,
        s: &Stream,
        stage: &'static str,
    ) -> Result<()> {
        // A codec may write no stream (blosc at level 0 stores every chunk
        // as it is): its statuses must then read as success, not as what
        // the buffer held.
        self.statuses
            .zero_async(pools.chunks * 4, s, "clearing chunk statuses")?;
        let per_call = super::sizes::chunks_per_call().max(1);
        let mut first = 0;
        while first < pools.chunks {
            let chunks = per_call.min(pools.chunks - first);
            let shape = (chunks, pools.tile_bytes);
            if self.last_shape != Some(shape) {
                self.temp
                    .zero_async(self.temp.bytes, s, "clearing nvCOMP's temp buffer")?;
                self.last_shape = Some(shape);
            }
            // The tables' entries from `first` on: 8-byte pointers and
            // sizes, 4-byte statuses.
            let at = |table: u64, width: usize| table + (first * width) as u64;
            let batch = Batch {
                tile_ptrs: at(self.in_ptrs[slot].ptr, 8),
                tile_sizes: at(self.in_sizes.ptr, 8),
                max_tile_bytes: pools.tile_bytes,
                chunks,
                temp: self.temp.ptr,
                temp_bytes: self.temp.bytes,
                chunk_ptrs: at(self.out_ptrs.ptr, 8),
                chunk_sizes: at(pools.sizes, 8),
                statuses: at(self.statuses.ptr, 4),
            };
            // SAFETY: every table and pool was sized at build time for a
            // whole batch of chunks of this tile size (`first + chunks` is
            // at most that), as the codec's sizes asked; the temp buffer was
            // asked of nvCOMP for calls of at most `per_call` tiles and is
            // cleared above when the shape changes, and the caller made the
            // context current.
            unsafe { self.codec.compress_async(&batch, s, stage)? };
            first += chunks;
        }
        // SAFETY: as above, over the whole batch.
        unsafe { self.codec.after_compress(pools, kernels, s) }
    }
}
