//! Every buffer the GPU backend allocates, sized before anything is
//! allocated: the backend allocates exactly these, and the memory plan
//! (`tz_estimate_memory`) adds them up.

use super::codec::GpuCodec;
use crate::config::Validated;
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
    /// One of the codec's two scratch pools (its filtered tiles), 0 when
    /// it has none.
    pub scratch: usize,
    /// Stride of the chunks the aggregation reads (the tiles themselves
    /// without compression).
    pub out_stride: usize,
    pub temp: usize,
    pub shard_positions: usize,
    pub input: usize,
}

impl Sizes {
    /// `codec` is the stream's GPU codec (`None`: tiles stored as they are).
    pub fn new(v: &Validated, codec: Option<&dyn GpuCodec>) -> Result<Sizes> {
        let layout = &v.layout;
        let epochs = v.epochs_per_buffer as usize;
        let chunks = epochs * layout.tiles_per_epoch() as usize;
        let tile_bytes = layout.tile_bytes();
        let (tile_stride, chunk_stride, temp, chunk_lead, chunk_start, filters) = match codec {
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
        let scratch = if filters { chunks * tile_stride } else { 0 };
        let compressed = codec.is_some();
        let out_stride = if compressed {
            chunk_stride
        } else {
            tile_stride
        };
        Ok(Sizes {
            compressed,
            epochs,
            chunks,
            tile_stride,
            chunk_stride,
            chunk_lead,
            chunk_start,
            scratch,
            out_stride,
            temp,
            shard_positions: epochs * layout.shard_major_len() as usize,
            input: epochs * layout.epoch_bytes() as usize,
        })
    }

    /// Device memory: input, two tile pools with their offsets, compressed
    /// chunks, per-chunk tables, one aggregated output, the permutation,
    /// nvCOMP's temp buffer and the codec's two scratch pools.
    pub fn device_bytes(&self, tiles_per_epoch: usize) -> u64 {
        let c = self.chunks;
        let tables = if self.compressed {
            4 * c * 8 + c * 4
        } else {
            0
        };
        let chunks = if self.compressed {
            c * self.chunk_stride
        } else {
            0
        };
        let per_slot = c * self.tile_stride + (self.shard_positions + 1) * 8;
        (self.input
            + 2 * per_slot
            + c * self.out_stride
            + chunks
            + c * 8
            + tiles_per_epoch * 8
            + tables
            + self.temp
            + 2 * self.scratch) as u64
    }

    /// Page-locked host memory of the backend itself (staging excluded):
    /// two output buffers with their offsets and statuses.
    pub fn pinned_bytes(&self) -> u64 {
        (2 * ((self.shard_positions + 1) * 8 + self.chunks * 4 + self.chunks * self.out_stride))
            as u64
    }
}
