//! Host shard accumulation and emission (sharding.md, "Host-side shard
//! accumulation"): epochs of compressed tiles in shard-major order go in,
//! complete shards with their crc32c-protected index come out.

mod assembler;
mod batch;
mod index;

pub use assembler::ShardAssembler;
pub use batch::{RowBatch, EXTRA_DESCRIPTION_BYTES};
pub use index::{ShardIndex, EMPTY};

use std::ops::Range;
use std::sync::Arc;

/// One epoch of compressed tiles, grouped by shard: the output of a
/// backend. Position `j` of the shard-major order (see
/// [`crate::layout::Layout::shard_position`]) holds
/// `offsets[j + 1] - offsets[j]` bytes; positions with no tile are empty.
/// Each active shard's chunks lie back to back in position order: in one
/// buffer for the whole epoch at `offsets[j]`, or in a buffer per shard
/// (see [`EpochData`]); [`CompressedEpoch::shard_data`] finds them.
#[derive(Debug, Default, Clone)]
pub struct CompressedEpoch {
    /// The array of the stream it belongs to (0 in a stream of one).
    pub array: u32,
    pub epoch: u64,
    /// The pyramid level (0 without a pyramid).
    pub level: u32,
    pub data: EpochData,
    /// `shard_major_len + 1` entries, the last one the total.
    pub offsets: Vec<u64>,
}

impl CompressedEpoch {
    /// The chunks of active shard `k` (positions `k * per_shard` on),
    /// back to back.
    pub fn shard_data(&self, k: usize, per_shard: usize) -> &[u8] {
        let first = k * per_shard;
        let (begin, end) = (
            self.offsets[first] as usize,
            self.offsets[first + per_shard] as usize,
        );
        match &self.data {
            EpochData::PerShard(shards) => {
                debug_assert_eq!(shards[k].len(), end - begin);
                &shards[k]
            }
            data => &data.whole()[begin..end],
        }
    }

    /// The whole epoch's chunks in shard-major order, copied into one
    /// vector (for comparisons in tests and benchmarks).
    pub fn packed(&self) -> Vec<u8> {
        let total = self.offsets.last().copied().unwrap_or(0) as usize;
        match &self.data {
            EpochData::PerShard(shards) => shards.concat(),
            data => data.whole()[..total].to_vec(),
        }
    }
}

/// An epoch's bytes: its own, a range of a larger buffer that several
/// epochs share (a GPU batch's page-locked output, handed on without a
/// copy), or one buffer per active shard (the CPU backend packs each
/// shard's chunks where its workers compress them). A shared buffer goes
/// back to its owner when the last epoch holding it lets go: see
/// [`EpochData::release`].
#[derive(Clone)]
pub enum EpochData {
    Owned(Vec<u8>),
    Shared {
        buffer: Arc<dyn AsRef<[u8]> + Send + Sync>,
        range: Range<usize>,
    },
    PerShard(Vec<Vec<u8>>),
}

impl EpochData {
    /// The bytes as a vector to fill, emptied; a shared range is let go.
    pub fn owned_mut(&mut self) -> &mut Vec<u8> {
        if !matches!(self, EpochData::Owned(_)) {
            *self = EpochData::Owned(Vec::new());
        }
        match self {
            EpochData::Owned(v) => v,
            _ => unreachable!("replaced above"),
        }
    }

    /// The buffers per shard to fill, as they were left (their allocations
    /// reused); other data is let go.
    pub fn per_shard_mut(&mut self) -> &mut Vec<Vec<u8>> {
        if !matches!(self, EpochData::PerShard(_)) {
            *self = EpochData::PerShard(Vec::new());
        }
        match self {
            EpochData::PerShard(v) => v,
            _ => unreachable!("replaced above"),
        }
    }

    /// Lets go of a shared buffer, keeping an owned vector's allocation
    /// for reuse.
    pub fn release(&mut self) {
        if let EpochData::Shared { .. } = self {
            *self = EpochData::Owned(Vec::new());
        }
    }

    /// The one buffer of the whole epoch (a shared range: that range);
    /// empty for buffers per shard.
    fn whole(&self) -> &[u8] {
        match self {
            EpochData::Owned(v) => v,
            EpochData::Shared { buffer, range } => &(**buffer).as_ref()[range.clone()],
            EpochData::PerShard(_) => &[],
        }
    }

    /// Bytes held (a shared range: its length).
    pub fn len(&self) -> usize {
        match self {
            EpochData::Owned(v) => v.len(),
            EpochData::Shared { range, .. } => range.len(),
            EpochData::PerShard(shards) => shards.iter().map(Vec::len).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for EpochData {
    /// Large owned vectors wait for the process's next stream
    /// ([`crate::memory::give_spare_bytes`]) rather than being unmapped.
    fn drop(&mut self) {
        match self {
            EpochData::Owned(v) => crate::memory::give_spare_bytes(std::mem::take(v)),
            EpochData::PerShard(v) => crate::memory::give_spare_set(std::mem::take(v)),
            EpochData::Shared { .. } => {}
        }
    }
}

impl Default for EpochData {
    fn default() -> EpochData {
        EpochData::Owned(Vec::new())
    }
}

impl std::fmt::Debug for EpochData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            EpochData::Owned(_) => "owned",
            EpochData::Shared { .. } => "shared",
            EpochData::PerShard(_) => "per shard",
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
    /// The array of the stream it belongs to (0 in a stream of one).
    pub array: u32,
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
