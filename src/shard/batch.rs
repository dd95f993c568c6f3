//! Shard rows of several epochs described together, to be handed to the
//! sink in one call.
//!
//! When each epoch is a whole shard row, its shards are emitted from the
//! epoch's own bytes, and epochs that wait for the delivery thread together
//! (a CPU backend hands small epochs on in groups) can go to the sink at
//! once. A folder store writes a call's shards on several threads and waits
//! for them all: one call per row of four small shards woke its writers and
//! waited for them 250 times a second beside sixteen busy compression
//! threads, which kept the delivery thread busy most of a run of
//! 2048 x 2048 frames of 128 x 128 tiles.

use super::{CompressedEpoch, Shard};
use crate::error::Result;
use crate::memory::try_reserve;

/// Bytes of shard descriptions (indexes and coordinates) a batch holds
/// beyond its first row: the memory plan counts them (see
/// [`super::ShardAssembler::memory_bytes`]).
pub const EXTRA_DESCRIPTION_BYTES: usize = 1 << 20;

/// The shards of the rows described so far, in order, each borrowing its
/// chunks from the epoch it came from.
#[derive(Default)]
pub struct RowBatch {
    pub(super) coords: Vec<u64>,
    pub(super) indexes: Vec<u8>,
    pub(super) shards: Vec<BatchedShard>,
}

/// Where one shard of a batch lies: its epoch in the batch, its place in
/// that epoch, and its description in the batch.
pub(super) struct BatchedShard {
    pub epoch: usize,
    pub k: usize,
    pub per_shard: usize,
    pub coords: std::ops::Range<usize>,
    pub index: std::ops::Range<usize>,
    pub index_at_start: bool,
    pub level: u32,
    pub array: u32,
}

impl RowBatch {
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// Whether a row of `bytes` more description still fits: a first row
    /// always does (as much as one assembler's own row takes), later ones
    /// while the batch holds at most [`EXTRA_DESCRIPTION_BYTES`].
    pub fn has_room_for(&self, bytes: usize) -> bool {
        self.is_empty() || self.description_bytes().saturating_add(bytes) <= EXTRA_DESCRIPTION_BYTES
    }

    /// What [`super::ShardAssembler::row_description_bytes`] counts of
    /// the rows in the batch.
    fn description_bytes(&self) -> usize {
        let per_shard = std::mem::size_of::<BatchedShard>() + std::mem::size_of::<Shard<'_>>();
        self.indexes.len() + self.coords.len() * 8 + self.shards.len() * per_shard
    }

    /// The batch's shards, their chunks in `epochs` (the batch's epochs,
    /// in the order they were described).
    pub fn shards<'e>(&'e self, epochs: &'e [CompressedEpoch]) -> Result<Vec<Shard<'e>>> {
        let mut out = Vec::new();
        try_reserve(&mut out, self.shards.len(), "a batch of shard rows")?;
        out.extend(self.shards.iter().map(|s| Shard {
            coord: &self.coords[s.coords.clone()],
            data: epochs[s.epoch].shard_data(s.k, s.per_shard),
            index: &self.indexes[s.index.clone()],
            index_at_start: s.index_at_start,
            level: s.level,
            array: s.array,
        }));
        Ok(out)
    }

    /// Empties the batch, keeping its memory for the next one.
    pub fn clear(&mut self) {
        self.coords.clear();
        self.indexes.clear();
        self.shards.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IndexLocation;
    use crate::layout::{Dim, Layout};
    use crate::shard::{EpochData, ShardAssembler};

    /// An owned copy of a shard, to compare.
    type Owned = (Vec<u64>, Vec<u8>, Vec<u8>, bool, u32, u32);

    fn owned(s: &Shard<'_>) -> Owned {
        let (c, d, i) = (s.coord.to_vec(), s.data.to_vec(), s.index.to_vec());
        (c, d, i, s.index_at_start, s.level, s.array)
    }

    /// Chunk `j` of epoch `e`: `(e + j) % 5` bytes (some empty, as skipped
    /// frames leave them), each byte distinct.
    fn chunk(e: u64, j: u64) -> Vec<u8> {
        (0..(e + j) % 5)
            .map(|b| (e * 31 + j * 7 + b) as u8)
            .collect()
    }

    /// Epoch `e` of `layout`, its chunks in shard-major order.
    fn epoch(layout: &Layout, e: u64) -> CompressedEpoch {
        let mut offsets = vec![0u64];
        let mut data = Vec::new();
        for j in 0..layout.shard_major_len() {
            data.extend(chunk(e, j));
            offsets.push(data.len() as u64);
        }
        CompressedEpoch {
            array: 1,
            epoch: e,
            level: 0,
            data: EpochData::Owned(data),
            offsets,
        }
    }

    /// The test layout: unbounded 2-D frames of 4 x 6 tiles, shards of
    /// 2 x 3 tiles, so that each epoch (one plane) is a row of 2 x 2 shards.
    fn layout() -> Layout {
        let dims = [Dim::new(0, 1, 1), Dim::new(8, 2, 2), Dim::new(18, 3, 3)];
        Layout::new(&dims, 2).unwrap()
    }

    /// Row `e` of the test layout as the sharding codec's specification
    /// lays it out, built by hand: shard `k` at (e, k / 2, k % 2) holds
    /// its six chunks in order, and its index one (offset, nbytes) pair of
    /// u64 LE per chunk (both 2^64 - 1 for an empty one), offsets counted
    /// past the index where it comes first, then their crc32c as u32 LE.
    fn row_by_the_specification(e: u64, index_at_start: bool) -> Vec<Owned> {
        let index_len = 6 * 16 + 4;
        let shift = if index_at_start { index_len } else { 0 };
        (0..4u64)
            .map(|k| {
                let (mut data, mut index) = (Vec::new(), Vec::new());
                for w in 0..6 {
                    let bytes = chunk(e, k * 6 + w);
                    let (offset, n) = match bytes.len() {
                        0 => (u64::MAX, u64::MAX),
                        n => ((shift + data.len()) as u64, n as u64),
                    };
                    index.extend(offset.to_le_bytes());
                    index.extend(n.to_le_bytes());
                    data.extend(bytes);
                }
                index.extend(crc32c::crc32c(&index).to_le_bytes());
                assert_eq!(index.len(), index_len);
                (vec![e, k / 2, k % 2], data, index, index_at_start, 0, 1)
            })
            .collect()
    }

    #[test]
    fn rows_described_together_are_the_rows_of_the_specification() {
        let layout = layout();
        for location in [IndexLocation::Start, IndexLocation::End] {
            let at_start = location == IndexLocation::Start;
            let mut assembler = ShardAssembler::new(&layout, location, 64)
                .unwrap()
                .for_array(1);
            assert!(assembler.rows_in_place());
            let epochs: Vec<_> = (0..7).map(|e| epoch(&layout, e)).collect();
            let mut batch = RowBatch::default();
            // Two batches, the second after the first was cleared.
            for run in [&epochs[..3], &epochs[3..]] {
                for (e, epoch) in run.iter().enumerate() {
                    assembler.describe_into(epoch, e, &mut batch).unwrap();
                }
                let got: Vec<_> = batch.shards(run).unwrap().iter().map(owned).collect();
                let expected: Vec<_> = run
                    .iter()
                    .flat_map(|epoch| row_by_the_specification(epoch.epoch, at_start))
                    .collect();
                assert_eq!(got, expected, "index at start: {at_start}");
                batch.clear();
            }
            assert_eq!(assembler.rows_emitted(), 7);
            // Such rows are not pushed one by one.
            let mut emit = |_: &[Shard<'_>]| -> Result<()> { Ok(()) };
            assert!(assembler.push(&epochs[0], &mut emit).is_err());
        }
    }

    #[test]
    fn a_batch_takes_rows_until_its_descriptions_reach_the_bound() {
        let layout = layout();
        let mut a = ShardAssembler::new(&layout, IndexLocation::End, 64).unwrap();
        let row = ShardAssembler::row_description_bytes(&layout) as usize;
        let mut batch = RowBatch::default();
        assert!(
            batch.has_room_for(EXTRA_DESCRIPTION_BYTES * 2),
            "a first row always fits"
        );
        let mut e = 0;
        while batch.has_room_for(row) {
            a.describe_into(&epoch(&layout, e), 0, &mut batch).unwrap();
            assert_eq!(batch.description_bytes(), row * (e as usize + 1));
            e += 1;
        }
        assert_eq!(e as usize, EXTRA_DESCRIPTION_BYTES / row);
    }
}
