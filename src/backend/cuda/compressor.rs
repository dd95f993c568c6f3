//! One stream's batched compressor: the GPU codec, its temp buffer and the
//! per-chunk pointer and size tables it reads, with the one rule nvCOMP
//! imposes on reuse (a temp buffer must be cleared when the batch's shape
//! changes).

use super::codec::{Batch, GpuCodec};
use super::driver::{DeviceBuffer, Stream};
use crate::error::Result;

pub struct Compressor {
    pub codec: Box<dyn GpuCodec>,
    pub temp: DeviceBuffer,
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
    /// Enqueues one batched compress call on `s`: `chunks` tiles of
    /// `tile_bytes` from tile-pool slot `slot`, their sizes into `sizes`.
    /// The temp buffer is cleared first when the shape differs from the
    /// last call's: nvCOMP faults otherwise.
    pub fn enqueue(
        &mut self,
        slot: usize,
        chunks: usize,
        tile_bytes: usize,
        sizes: u64,
        s: &Stream,
        stage: &'static str,
    ) -> Result<()> {
        let shape = (chunks, tile_bytes);
        if self.last_shape != Some(shape) {
            self.temp
                .zero_async(self.temp.bytes, s, "clearing nvCOMP's temp buffer")?;
            self.last_shape = Some(shape);
        }
        let batch = Batch {
            tile_ptrs: self.in_ptrs[slot].ptr,
            tile_sizes: self.in_sizes.ptr,
            max_tile_bytes: tile_bytes,
            chunks,
            temp: self.temp.ptr,
            temp_bytes: self.temp.bytes,
            chunk_ptrs: self.out_ptrs.ptr,
            chunk_sizes: sizes,
            statuses: self.statuses.ptr,
        };
        // SAFETY: every table and pool was sized at build time for a whole
        // batch of chunks of this tile size (`chunks` is at most that), the
        // temp buffer was asked of nvCOMP for it and is cleared above when
        // the shape changes, and the caller made the context current.
        unsafe { self.codec.compress_async(&batch, s, stage) }
    }
}
