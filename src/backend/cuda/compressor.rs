//! One stream's batched compressor: the GPU codec, its temp buffer, and
//! the per-chunk pointer and size tables it reads, with
//! the one rule nvCOMP imposes on reuse (a temp buffer must be cleared when
//! the batch's shape changes).

use super::codec::{Batch, GpuCodec, Pools};
use super::driver::{DeviceBuffer, Stream};
use super::kernels::Kernels;
use crate::error::Result;

pub struct Compressor {
    pub codec: Box<dyn GpuCodec>,
    pub temp: DeviceBuffer,
    /// (chunks, chunk bytes) of the last call on `temp`: nvCOMP faults when
    /// its temp buffer holds what a call of another shape left there.
    pub last_shape: Option<(usize, usize)>,
    /// Chunk pointer tables, one per batch pool each way: tiles read from
    /// a pool, chunks written into one.
    pub in_ptrs: Vec<DeviceBuffer>,
    pub in_sizes: DeviceBuffer,
    pub out_ptrs: Vec<DeviceBuffer>,
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

    /// Enqueues one batch on `s`: the batched compress call over the first
    /// `pools.chunks` tiles of batch pool `from` (filtered there by
    /// [`Compressor::enqueue_filter`] before) into the chunk slots of pool
    /// `into` (their sizes into `pools.sizes`), and the codec's framing. The temp
    /// buffer is cleared first when the shape differs from the last call's:
    /// nvCOMP faults otherwise.
    pub fn enqueue(
        &mut self,
        from: usize,
        into: usize,
        pools: &Pools,
        kernels: &Kernels,
        s: &Stream,
        stage: &'static str,
    ) -> Result<()> {
        let shape = (pools.chunks, pools.tile_bytes);
        if self.last_shape != Some(shape) {
            self.temp
                .zero_async(self.temp.bytes, s, "clearing nvCOMP's temp buffer")?;
            self.last_shape = Some(shape);
        }
        // A codec may write no stream (blosc at level 0 stores every chunk
        // as it is): its statuses must then read as success, not as what
        // the buffer held.
        self.statuses
            .zero_async(pools.chunks * 4, s, "clearing chunk statuses")?;
        let batch = Batch {
            tile_ptrs: self.in_ptrs[from].ptr,
            tile_sizes: self.in_sizes.ptr,
            max_tile_bytes: pools.tile_bytes,
            chunks: pools.chunks,
            temp: self.temp.ptr,
            temp_bytes: self.temp.bytes,
            chunk_ptrs: self.out_ptrs[into].ptr,
            chunk_sizes: pools.sizes,
            statuses: self.statuses.ptr,
        };
        // SAFETY: every table and pool was sized at build time for a whole
        // batch of chunks of this tile size (`chunks` is at most that), as
        // the codec's sizes asked; the temp buffer was asked of nvCOMP for
        // it and is cleared above when the shape changes, and the caller
        // made the context current.
        unsafe {
            self.codec.compress_async(&batch, s, stage)?;
            self.codec.after_compress(pools, kernels, s)
        }
    }
}
