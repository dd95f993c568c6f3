//! Host shard accumulation and emission (sharding.md, "Host-side shard
//! accumulation"): epochs of compressed tiles in shard-major order go in,
//! complete shards with their crc32c-protected index come out.

mod assembler;
mod index;

pub use assembler::ShardAssembler;
pub use index::{ShardIndex, EMPTY};

use std::ops::Range;
use std::sync::Arc;

/// One epoch of compressed tiles, grouped by shard: the output of a
/// backend. Position `j` of the shard-major order (see
/// [`crate::layout::Layout::shard_position`]) holds
/// `data[offsets[j]..offsets[j + 1]]`; positions with no tile are empty.
#[derive(Debug, Default, Clone)]
pub struct CompressedEpoch {
    pub epoch: u64,
    /// The pyramid level (0 without a pyramid).
    pub level: u32,
    pub data: EpochData,
    /// `shard_major_len + 1` entries, the last one the total.
    pub offsets: Vec<u64>,
}

/// An epoch's bytes: its own, or a range of a larger buffer that several
/// epochs share (a GPU batch's page-locked output, handed on without a
/// copy). A shared buffer goes back to its owner when the last epoch
/// holding it lets go: see [`EpochData::release`].
#[derive(Clone)]
pub enum EpochData {
    Owned(Vec<u8>),
    Shared {
        buffer: Arc<dyn AsRef<[u8]> + Send + Sync>,
        range: Range<usize>,
    },
}

impl EpochData {
    /// The bytes as a vector to fill, emptied; a shared range is let go.
    pub fn owned_mut(&mut self) -> &mut Vec<u8> {
        if let EpochData::Shared { .. } = self {
            *self = EpochData::Owned(Vec::new());
        }
        match self {
            EpochData::Owned(v) => v,
            EpochData::Shared { .. } => unreachable!("replaced above"),
        }
    }

    /// Lets go of a shared buffer, keeping an owned vector's allocation
    /// for reuse.
    pub fn release(&mut self) {
        if let EpochData::Shared { .. } = self {
            *self = EpochData::Owned(Vec::new());
        }
    }
}

impl Drop for EpochData {
    /// A large owned vector waits for the process's next stream
    /// ([`crate::memory::give_spare_bytes`]) rather than being unmapped.
    fn drop(&mut self) {
        if let EpochData::Owned(v) = self {
            crate::memory::give_spare_bytes(std::mem::take(v));
        }
    }
}

impl Default for EpochData {
    fn default() -> EpochData {
        EpochData::Owned(Vec::new())
    }
}

impl std::ops::Deref for EpochData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            EpochData::Owned(v) => v,
            EpochData::Shared { buffer, range } => &(**buffer).as_ref()[range.clone()],
        }
    }
}

impl std::fmt::Debug for EpochData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            EpochData::Owned(_) => "owned",
            EpochData::Shared { .. } => "shared",
        };
        write!(f, "EpochData({kind}, {} bytes)", self.len())
    }
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
    /// The pyramid level (0 without a pyramid).
    pub level: u32,
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
