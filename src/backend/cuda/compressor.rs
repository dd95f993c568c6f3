//! One stream's batched compressor: the GPU codec, its temp buffer, and
//! the per-chunk pointer and size tables it reads, with
//! the one rule nvCOMP imposes on reuse (a temp buffer must be cleared when
//! the batch's shape changes).

use super::chunk_order::Arrangement;
use super::codec::{Batch, GpuCodec, Pools};
use super::driver::{DeviceBuffer, Stream};
use super::kernels::Kernels;
use crate::error::Result;
use std::ffi::c_void;

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
    /// A call in another order than the tiles' (`chunk_order.rs`).
    pub rearranged: Rearranged,
}

/// The device tables of a call in another order than the tiles': the
/// rankings (smallest first, largest first), the call's own pointer
/// tables, and what nvCOMP writes per entry of the call before it is put
/// back in tile order.
pub struct Rearranged {
    pub orders: [DeviceBuffer; 2],
    pub tile_ptrs: DeviceBuffer,
    pub chunk_ptrs: DeviceBuffer,
    pub sizes: DeviceBuffer,
    pub statuses: DeviceBuffer,
}

impl Rearranged {
    /// The tables for batches of `chunks` tiles.
    pub fn new(chunks: usize) -> Result<Rearranged> {
        let order = || DeviceBuffer::new(chunks * 4, "a chunk order");
        Ok(Rearranged {
            orders: [order()?, order()?],
            tile_ptrs: DeviceBuffer::new(chunks * 8, "chunk pointers")?,
            chunk_ptrs: DeviceBuffer::new(chunks * 8, "chunk pointers")?,
            sizes: DeviceBuffer::new(chunks * 8, "compressed sizes")?,
            statuses: DeviceBuffer::new(chunks * 4, "chunk statuses")?,
        })
    }

    /// Device bytes of the tables for batches of `chunks` tiles.
    pub fn bytes(chunks: usize) -> usize {
        chunks * (2 * 4 + 3 * 8 + 4)
    }
}

/// One compress call of a batch: the tiles of batch pool `from` (filtered
/// there by [`Compressor::enqueue_filter`] before) into the chunk slots of
/// pool `into`, in the order `arrangement` names (its ranking copied to
/// the device before).
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub from: usize,
    pub into: usize,
    pub arrangement: Arrangement,
}

impl Compressor {
    /// Enqueues the codec's filter of a batch on `s` (the input stream,
    /// after the scatter).
    pub fn enqueue_filter(&self, pools: &Pools, kernels: &Kernels, s: &Stream) -> Result<()> {
        // SAFETY: the pools were sized at build time for a whole batch, as
        // the codec's sizes asked; the caller made the context current.
        unsafe { self.codec.before_compress(pools, kernels, s) }
    }

    /// Enqueues one batch on `s`: the batched compress call `call`
    /// describes over the first `pools.chunks` tiles (their sizes into
    /// `pools.sizes`), and the codec's framing. The temp buffer is cleared
    /// first when the shape differs from the last call's: nvCOMP faults
    /// otherwise.
    pub fn enqueue(
        &mut self,
        call: Call,
        pools: &Pools,
        kernels: &Kernels,
        s: &Stream,
        stage: &'static str,
    ) -> Result<()> {
        let Call {
            from,
            into,
            arrangement,
        } = call;
        let shape = (pools.chunks, pools.tile_bytes);
        if self.last_shape != Some(shape) {
            self.temp
                .zero_async(self.temp.bytes, s, "clearing nvCOMP's temp buffer")?;
            self.last_shape = Some(shape);
        }
        let order = match arrangement {
            Arrangement::AsTiled => None,
            Arrangement::SmallestFirst => Some(self.rearranged.orders[0].ptr),
            Arrangement::LargestFirst => Some(self.rearranged.orders[1].ptr),
        }
        .filter(|_| self.codec.compresses());
        let r = &self.rearranged;
        let (tile_ptrs, chunk_ptrs, sizes, statuses) = match order {
            None => (
                self.in_ptrs[from].ptr,
                self.out_ptrs[into].ptr,
                pools.sizes,
                &self.statuses,
            ),
            Some(order) => {
                // SAFETY: the parameters match tz_order_tables; the order
                // holds a permutation of the batch's `chunks` tiles and
                // every table `chunks` entries (built for a whole batch).
                unsafe {
                    launch_order(
                        &kernels.order_tables,
                        [
                            order,
                            self.in_ptrs[from].ptr,
                            self.out_ptrs[into].ptr,
                            r.tile_ptrs.ptr,
                            r.chunk_ptrs.ptr,
                        ],
                        pools.chunks,
                        s,
                        "ordering the chunk tables",
                    )?;
                }
                (r.tile_ptrs.ptr, r.chunk_ptrs.ptr, r.sizes.ptr, &r.statuses)
            }
        };
        // A codec may write no stream (blosc at level 0 stores every chunk
        // as it is): its statuses must then read as success, not as what
        // the buffer held.
        statuses.zero_async(pools.chunks * 4, s, "clearing chunk statuses")?;
        let batch = Batch {
            tile_ptrs,
            tile_sizes: self.in_sizes.ptr,
            max_tile_bytes: pools.tile_bytes,
            chunks: pools.chunks,
            temp: self.temp.ptr,
            temp_bytes: self.temp.bytes,
            chunk_ptrs,
            chunk_sizes: sizes,
            statuses: statuses.ptr,
        };
        // SAFETY: every table and pool was sized at build time for a whole
        // batch of chunks of this tile size (`chunks` is at most that), as
        // the codec's sizes asked; the temp buffer was asked of nvCOMP for
        // it and is cleared above when the shape changes, and the caller
        // made the context current.
        unsafe {
            self.codec.compress_async(&batch, s, stage)?;
            if let Some(order) = order {
                // SAFETY: the parameters match tz_unorder_results; as above.
                launch_order(
                    &kernels.unorder_results,
                    [
                        order,
                        r.sizes.ptr,
                        r.statuses.ptr,
                        pools.sizes,
                        self.statuses.ptr,
                    ],
                    pools.chunks,
                    s,
                    "putting the chunk sizes back in tile order",
                )?;
            }
            self.codec.after_compress(pools, kernels, s)
        }
    }
}

/// Launches one of kernels/order.cu's two kernels, whose parameters are
/// five device pointers then the entry count `n`.
///
/// # Safety
/// The context is current, `kernel` takes those parameters, and each
/// pointer names a buffer of at least `n` entries of the kernel's type.
unsafe fn launch_order(
    kernel: &super::driver::Kernel,
    ptrs: [u64; 5],
    n: usize,
    s: &Stream,
    stage: &'static str,
) -> Result<()> {
    let mut args = [ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], n as u64];
    let mut params = args.each_mut().map(|a| a as *mut u64 as *mut c_void);
    let grid = (n as u64).div_ceil(256).clamp(1, 65535) as u32;
    // SAFETY: forwarded to the caller's contract; `args` outlives the call,
    // which copies the parameters.
    unsafe { kernel.launch(grid, 256, s, &mut params, stage) }
}
