//! Every buffer the GPU backend allocates, sized before anything is
//! allocated: the backend allocates exactly these, and the memory plan
//! (`tz_estimate_memory`) adds them up.

use super::codec::{Filter, GpuCodec};
use super::kernels::Geometry;
use super::pools::{pool_count, Usage};
use crate::config::{Cname, Codec, Shuffle, Validated};
use crate::error::Result;

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// Byte sizes of one GPU stream's buffers (`epochs` epochs per batch).
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Compressed on the GPU (else the tiles are stored as they are).
    pub compressed: bool,
    pub epochs: usize,
    pub chunks: usize,
    /// Bytes between tiles in a tile pool, and between compressed chunks:
    /// the alignments nvCOMP requires.
    pub tile_stride: usize,
    pub chunk_stride: usize,
    /// Where the compressor writes in a chunk's slot, and where the
    /// finished chunk starts (a codec's header goes between).
    pub chunk_lead: usize,
    pub chunk_start: usize,
    pub temp: usize,
    /// The codec's filter where the scatter applies it (no scratch pool
    /// then), else `Filter::None`.
    pub scatter_filter: Filter,
    pub shard_positions: usize,
    /// The batch pools (see `pools.rs`): how many, and the bytes of each
    /// (the largest of a batch's input, tiles and chunks).
    pub usage: Usage,
    pub pools: usize,
    pub pool_bytes: usize,
    /// Each page-locked output buffer: room for a batch compressed to
    /// [`OUTPUT_FRACTION`] of its chunks' bound (all of it without
    /// compression). A batch that compresses less comes back through
    /// ordinary memory, slower: `fallback_bytes` of it.
    pub output_bytes: usize,
    pub fallback_bytes: usize,
}

/// The page-locked output buffers hold a batch of chunks up to this
/// fraction (numerator, denominator) of their bound: a compressor that
/// shrinks tiles by less than a quarter is rare on instrument data, and
/// the page-locked memory saved is a third of a batch.
const OUTPUT_FRACTION: (usize, usize) = (3, 4);

/// Whether `codec`'s compressor is slow enough beside the scatter (nvCOMP's
/// zstd: ~8 GB/s against the scatter's hundreds) that the next batch's
/// scatter may wait for this batch's compression, saving a pool.
fn lean_by_default(codec: Codec) -> bool {
    matches!(
        codec,
        Codec::Zstd { .. }
            | Codec::Blosc {
                cname: Cname::Zstd,
                shuffle: Shuffle::None,
                ..
            }
    )
}

impl Sizes {
    /// `codec` is the stream's GPU codec (`None`: tiles stored as they are).
    pub fn new(v: &Validated, codec: Option<&dyn GpuCodec>) -> Result<Sizes> {
        let layout = &v.layout;
        let epochs = v.epochs_per_buffer as usize;
        let chunks = epochs * layout.tiles_per_epoch() as usize;
        let tile_bytes = layout.tile_bytes();
        let (tile_stride, chunk_stride, temp, chunk_lead, chunk_start, scratch) = match codec {
            None => (
                round_up(tile_bytes, 8),
                round_up(tile_bytes, 8),
                0,
                0,
                0,
                false,
            ),
            Some(c) => {
                let z = c.sizes(chunks, tile_bytes)?;
                (
                    round_up(tile_bytes, z.input_align.max(8)),
                    round_up(z.slot_bytes, z.slot_align.max(8)),
                    z.temp,
                    z.lead,
                    z.start,
                    z.scratch,
                )
            }
        };
        let elem = layout.elem_size();
        let in_scatter = codec.map_or(Filter::None, |c| c.scatter_filter());
        let scatter_filter = if in_scatter != Filter::None
            && Geometry::new(layout, (tile_stride / elem) as u64).can_filter()
        {
            in_scatter
        } else {
            Filter::None
        };
        let filters = scratch && scatter_filter == Filter::None;
        let compressed = codec.is_some();
        let out_stride = if compressed {
            chunk_stride
        } else {
            tile_stride
        };
        let input = epochs * layout.epoch_bytes() as usize;
        let usage = Usage {
            compressed,
            filtered: filters,
        };
        let pool_bytes =
            input
                .max(chunks * tile_stride)
                .max(if compressed { chunks * chunk_stride } else { 0 });
        let mut z = Sizes {
            compressed,
            epochs,
            chunks,
            tile_stride,
            chunk_stride,
            chunk_lead,
            chunk_start,
            temp,
            scatter_filter,
            shard_positions: epochs * layout.shard_major_len() as usize,
            usage,
            pools: pool_count(usage, lean_by_default(v.config.codec)),
            pool_bytes,
            output_bytes: if compressed {
                round_up(
                    chunks * out_stride * OUTPUT_FRACTION.0 / OUTPUT_FRACTION.1,
                    4096,
                )
            } else {
                chunks * out_stride
            },
            fallback_bytes: if compressed { chunks * out_stride } else { 0 },
        };
        // Under a cap, a pool fewer before a smaller batch.
        let m = layout.tiles_per_epoch() as usize;
        if let Some(cap) = v.config.device_bytes {
            let level1 = super::pyramid::device_bytes(v, epochs as u64) as u64;
            if z.device_bytes(m) + level1 > cap {
                z.pools = pool_count(usage, true);
            }
        }
        Ok(z)
    }

    /// Device memory: the batch pools, the shard offsets of two batches,
    /// the chunk sizes, the permutation, the compressor's tables (a pointer
    /// table per pool each way, sizes, statuses, those of a call in another
    /// order) and nvCOMP's temp buffer.
    pub fn device_bytes(&self, tiles_per_epoch: usize) -> u64 {
        let c = self.chunks;
        let tables = if self.compressed {
            2 * self.pools * c * 8 + c * 8 + c * 4 + super::compressor::Rearranged::bytes(c)
        } else {
            0
        };
        (self.pools * self.pool_bytes
            + 2 * (self.shard_positions + 1) * 8
            + c * 8
            + tiles_per_epoch * 8
            + tables
            + self.temp) as u64
    }

    /// Page-locked host memory of the backend itself (staging excluded):
    /// two output buffers with their offsets and statuses.
    pub fn pinned_bytes(&self) -> u64 {
        (2 * ((self.shard_positions + 1) * 8 + self.chunks * 4 + self.output_bytes)) as u64
    }
}
