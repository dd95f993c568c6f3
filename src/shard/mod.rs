//! Host shard accumulation and emission (sharding.md, "Host-side shard
//! accumulation"): epochs of compressed tiles in shard-major order go in,
//! complete shards with their crc32c-protected index come out.

mod assembler;
mod index;

pub use assembler::ShardAssembler;
pub use index::{ShardIndex, EMPTY};

/// One epoch of compressed tiles, grouped by shard: the output of a
/// backend. Position `j` of the shard-major order (see
/// [`crate::layout::Layout::shard_position`]) holds
/// `data[offsets[j]..offsets[j + 1]]`; positions with no tile are empty.
#[derive(Debug, Default, Clone)]
pub struct CompressedEpoch {
    pub epoch: u64,
    pub data: Vec<u8>,
    /// `shard_major_len + 1` entries, the last one the total.
    pub offsets: Vec<u64>,
}

/// A complete shard, borrowed for the duration of the sink call.
#[derive(Debug, Clone, Copy)]
pub struct Shard<'a> {
    /// Shard grid coordinate, dimension 0 first.
    pub coord: &'a [u64],
    /// The chunks, concatenated.
    pub data: &'a [u8],
    /// `(offset, nbytes)` u64 LE pairs then the crc32c (u32 LE). Offsets are
    /// relative to the start of the shard file: with the index at the start
    /// they already count the index's own bytes.
    pub index: &'a [u8],
    /// Where the index goes in the shard file.
    pub index_at_start: bool,
}

impl Shard<'_> {
    /// The shard file's bytes in order.
    pub fn parts(&self) -> [&[u8]; 2] {
        if self.index_at_start {
            [self.index, self.data]
        } else {
            [self.data, self.index]
        }
    }
}
