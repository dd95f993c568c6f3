//! Accumulates the active shards of one shard row and emits them when the
//! row is complete (or at the end of the stream).

use super::batch::BatchedShard;
use super::{CompressedEpoch, RowBatch, Shard, ShardIndex};
use crate::config::IndexLocation;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::memory::{try_filled, try_reserve};
use rayon::prelude::*;

/// Shards one copy task takes at least: a row of a few small shards is not
/// worth splitting.
const PARALLEL_MIN_SHARDS: usize = 2;

struct ActiveShard {
    data: Vec<u8>,
    index: ShardIndex,
}

/// Host-side shard state for one stream.
pub struct ShardAssembler {
    layout: Layout,
    /// The pyramid level whose shards this assembles.
    level: u32,
    /// The stream's array whose shards this assembles.
    array: u32,
    index_at_start: bool,
    /// Whether shard-major position `j` holds a tile (edge shards have holes).
    present: Vec<bool>,
    /// Bytes a shard's data can reach in a row that spans several epochs:
    /// reserved once, so that the row never reallocates as it fills.
    row_bytes: usize,
    shards: Vec<ActiveShard>,
    /// The shard row being filled, if any epoch of it has arrived.
    row: Option<u64>,
    rows_emitted: u64,
    out: RowOut,
}

/// Where a row's shards are described as they are handed on together.
#[derive(Default)]
struct RowOut {
    /// The coordinates of the row's shards, `rank` each.
    coords: Vec<u64>,
    /// The serialized indexes of the row's shards, one after another.
    indexes: Vec<u8>,
}

impl ShardAssembler {
    /// The shard state of one row, for chunks of at most `max_chunk` bytes
    /// (an error when memory is short: see [`ShardAssembler::memory_bytes`]
    /// for how much it takes).
    pub fn new(layout: &Layout, location: IndexLocation, max_chunk: u64) -> Result<ShardAssembler> {
        let mut present = try_filled(layout.shard_major_len() as usize, false, "shard positions")?;
        for (j, p) in present.iter_mut().enumerate() {
            *p = layout.slot_at_position(j as u64).is_some();
        }
        let chunks = layout.chunks_per_shard() as usize;
        let mut shards = Vec::new();
        try_reserve(&mut shards, layout.shards_per_row() as usize, "shard state")?;
        for _ in 0..layout.shards_per_row() {
            shards.push(ActiveShard {
                data: Vec::new(),
                index: ShardIndex::new(chunks)?,
            });
        }
        // Rows made in place are described into the delivery's batch.
        let shards_n = if rows_in_place(layout) {
            0
        } else {
            layout.shards_per_row() as usize
        };
        let coords = try_filled(
            shards_n.saturating_mul(layout.rank()),
            0,
            "shard coordinates",
        )?;
        let indexes = try_filled(
            shards_n.saturating_mul(layout.index_bytes()),
            0,
            "a shard row's indexes",
        )?;
        let row_bytes = usize::try_from(row_data_bytes(layout, max_chunk))
            .map_err(|_| Error::OutOfMemory("a shard row exceeds the address space".into()))?;
        Ok(ShardAssembler {
            layout: layout.clone(),
            level: 0,
            array: 0,
            index_at_start: location == IndexLocation::Start,
            present,
            row_bytes,
            shards,
            row: None,
            rows_emitted: 0,
            out: RowOut { coords, indexes },
        })
    }

    /// The same, for the shards of the stream's array `array`.
    pub fn for_array(mut self, array: u32) -> ShardAssembler {
        self.array = array;
        self
    }

    /// The same, for the shards of pyramid level `level`.
    pub fn for_level(mut self, level: u32) -> ShardAssembler {
        self.level = level;
        self
    }

    /// Host bytes the assembler holds at most, for chunks of at most
    /// `max_chunk` bytes: its tables, and a whole shard row's data when a
    /// row spans several epochs (its shards are written only when the row
    /// is complete).
    pub fn memory_bytes(layout: &Layout, max_chunk: u64) -> u64 {
        let shards = layout.shards_per_row();
        // Per shard: its index under construction and serialized, its
        // coordinates, its state and its entry in the row handed on.
        let per_shard = layout.chunks_per_shard() * 16
            + layout.index_bytes() as u64
            + 8 * layout.rank() as u64
            + (std::mem::size_of::<ActiveShard>() + std::mem::size_of::<Shard<'_>>()) as u64;
        let tables = layout.shard_major_len() + shards * per_shard;
        tables.saturating_add(shards.saturating_mul(row_data_bytes(layout, max_chunk)))
    }

    /// Shard rows emitted so far.
    pub fn rows_emitted(&self) -> u64 {
        self.rows_emitted
    }

    /// Adds one epoch of a row that spans several (where not
    /// [`Self::rows_in_place`]: those rows are described into a
    /// [`RowBatch`] instead); emits the shard row when this epoch completes
    /// it. Epochs must arrive in order. Returns whether a row was emitted.
    pub fn push<E: From<Error>>(
        &mut self,
        epoch: &CompressedEpoch,
        emit: &mut dyn FnMut(&[Shard<'_>]) -> Result<(), E>,
    ) -> Result<bool, E> {
        if self.rows_in_place() {
            let why = "a row made in place is described into a batch, not pushed";
            return Err(E::from(Error::Internal(why.into())));
        }
        let (row, first_chunk) = self.layout.epoch_in_shard_row(epoch.epoch);
        debug_assert!(self.row.is_none_or(|r| r == row), "epochs out of order");
        self.row = Some(row);
        let per_shard = self.layout.chunks_per_shard_epoch() as usize;
        let present = &self.present;
        let row_bytes = self.row_bytes;
        // The shards of a row are independent: on a GPU an epoch's bytes
        // arrive faster than one thread copies them.
        self.shards
            .par_iter_mut()
            .enumerate()
            .with_min_len(PARALLEL_MIN_SHARDS)
            .try_for_each(|(k, shard)| -> Result<()> {
                let bytes = epoch.shard_data(k, per_shard);
                let base = shard.data.len() as u64;
                let len = shard.data.len();
                if shard.data.capacity() - len < bytes.len() {
                    let room = row_bytes.max(len + bytes.len()) - len;
                    try_reserve(&mut shard.data, room, "a shard row's data")?;
                }
                shard.data.extend_from_slice(bytes);
                index_epoch(
                    &mut shard.index,
                    present,
                    epoch,
                    k,
                    per_shard,
                    first_chunk,
                    base,
                );
                Ok(())
            })
            .map_err(E::from)?;
        let last_of_row = (epoch.epoch + 1).is_multiple_of(self.layout.epochs_per_shard_row());
        let last_of_array = self.layout.epoch_count() == Some(epoch.epoch + 1);
        if last_of_row || last_of_array {
            self.emit_row(emit)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Emits the row in progress, if any: the partial shards of a stream
    /// that ends before its shard row is full. Their missing chunks stay empty.
    pub fn finish<E: From<Error>>(
        &mut self,
        emit: &mut dyn FnMut(&[Shard<'_>]) -> Result<(), E>,
    ) -> Result<bool, E> {
        if self.row.is_none() {
            return Ok(false);
        }
        self.emit_row(emit)?;
        Ok(true)
    }

    fn emit_row<E: From<Error>>(
        &mut self,
        emit: &mut dyn FnMut(&[Shard<'_>]) -> Result<(), E>,
    ) -> Result<(), E> {
        let row = self.row.take().expect("a row is in progress");
        self.describe_row(row);
        let shards = &self.shards;
        self.hand_on(&|k| &shards[k].data, emit)?;
        for shard in &mut self.shards {
            shard.data.clear();
            shard.index.clear();
        }
        self.rows_emitted += 1;
        Ok(())
    }

    /// Serializes the indexes of row `row`'s shards and their coordinates.
    fn describe_row(&mut self, row: u64) {
        let mut out = std::mem::take(&mut self.out);
        self.describe_row_into(row, &mut out.indexes, &mut out.coords);
        self.out = out;
    }

    /// The same, into `indexes` and `coords` (room for the row's shards).
    fn describe_row_into(&self, row: u64, indexes: &mut [u8], coords: &mut [u64]) {
        let rank = self.layout.rank();
        let index_len = self.layout.index_bytes();
        let shift = self.index_shift();
        for (k, shard) in self.shards.iter().enumerate() {
            let room = &mut indexes[k * index_len..(k + 1) * index_len];
            shard.index.serialize(shift, room);
            let coord = &mut coords[k * rank..(k + 1) * rank];
            self.layout.shard_coord(row, k as u64, coord);
        }
    }

    /// Whether each epoch is a whole shard row, emitted from the epoch's
    /// own bytes: such rows may go to the sink together in a [`RowBatch`].
    pub fn rows_in_place(&self) -> bool {
        rows_in_place(&self.layout)
    }

    /// Bytes one row of `layout` takes in a [`RowBatch`]: its shards'
    /// indexes, coordinates and places, and the shards handed on.
    pub fn row_description_bytes(layout: &Layout) -> u64 {
        let per_shard = layout.index_bytes() as u64
            + 8 * layout.rank() as u64
            + (std::mem::size_of::<BatchedShard>() + std::mem::size_of::<Shard<'_>>()) as u64;
        layout.shards_per_row().saturating_mul(per_shard)
    }

    /// Adds the row that `epoch` makes (where [`Self::rows_in_place`]) to
    /// `batch`, as the batch's epoch `e`, and counts it emitted: the caller
    /// hands the batch to the sink.
    pub fn describe_into(
        &mut self,
        epoch: &CompressedEpoch,
        e: usize,
        batch: &mut RowBatch,
    ) -> Result<()> {
        debug_assert!(self.rows_in_place());
        let (row, _) = self.layout.epoch_in_shard_row(epoch.epoch);
        let per_shard = self.layout.chunks_per_shard_epoch() as usize;
        let (n, rank, index_len) = (
            self.shards.len(),
            self.layout.rank(),
            self.layout.index_bytes(),
        );
        // The assembler's own row holds as much: these cannot overflow.
        try_reserve(&mut batch.shards, n, "a batch of shard rows")?;
        try_reserve(&mut batch.coords, n * rank, "a batch of shard rows")?;
        try_reserve(&mut batch.indexes, n * index_len, "a batch of shard rows")?;
        for (k, shard) in self.shards.iter_mut().enumerate() {
            index_epoch(&mut shard.index, &self.present, epoch, k, per_shard, 0, 0);
        }
        let (c0, i0) = (batch.coords.len(), batch.indexes.len());
        batch.coords.resize(c0 + n * rank, 0);
        batch.indexes.resize(i0 + n * index_len, 0);
        self.describe_row_into(row, &mut batch.indexes[i0..], &mut batch.coords[c0..]);
        batch.shards.extend((0..n).map(|k| BatchedShard {
            epoch: e,
            k,
            per_shard,
            coords: c0 + k * rank..c0 + (k + 1) * rank,
            index: i0 + k * index_len..i0 + (k + 1) * index_len,
            index_at_start: self.index_at_start,
            level: self.level,
            array: self.array,
        }));
        for shard in &mut self.shards {
            shard.index.clear();
        }
        self.rows_emitted += 1;
        Ok(())
    }

    /// Hands the row [`ShardAssembler::describe_row`] described to `emit`
    /// at once, shard `k`'s chunks being `data(k)`.
    fn hand_on<'d, E: From<Error>>(
        &self,
        data: &dyn Fn(usize) -> &'d [u8],
        emit: &mut dyn FnMut(&[Shard<'_>]) -> Result<(), E>,
    ) -> Result<(), E> {
        let n = self.shards.len();
        let rank = self.layout.rank();
        let index_len = self.layout.index_bytes();
        let mut row_shards = Vec::new();
        try_reserve(&mut row_shards, n, "a shard row").map_err(E::from)?;
        row_shards.extend((0..n).map(|k| Shard {
            coord: &self.out.coords[k * rank..(k + 1) * rank],
            data: data(k),
            index: &self.out.indexes[k * index_len..(k + 1) * index_len],
            index_at_start: self.index_at_start,
            level: self.level,
            array: self.array,
        }));
        emit(&row_shards)
    }
}

impl ShardAssembler {
    /// Offsets in the index count from the start of the shard file: with the
    /// index first, they skip its bytes.
    fn index_shift(&self) -> u64 {
        if self.index_at_start {
            self.layout.index_bytes() as u64
        } else {
            0
        }
    }
}

/// Whether each epoch of `layout` is a whole shard row, emitted from the
/// epoch's own bytes rather than gathered in the assembler's buffers.
fn rows_in_place(layout: &Layout) -> bool {
    layout.epochs_per_shard_row() == 1
}

/// The most bytes one shard's data reaches in a shard row that spans
/// several epochs (0 when each epoch is a row: it is emitted in place).
fn row_data_bytes(layout: &Layout, max_chunk: u64) -> u64 {
    let epochs = layout.epochs_per_shard_row();
    let held = match layout.epoch_count() {
        _ if rows_in_place(layout) => 0,
        Some(count) => epochs.min(count),
        None => epochs,
    };
    held.saturating_mul(layout.chunks_per_shard_epoch())
        .saturating_mul(max_chunk)
}

/// Records shard `k`'s chunks of `epoch` in its index, at chunk slots from
/// `first_chunk` on, their data starting at `base` in the shard.
fn index_epoch(
    index: &mut ShardIndex,
    present: &[bool],
    epoch: &CompressedEpoch,
    k: usize,
    per_shard: usize,
    first_chunk: u64,
    base: u64,
) {
    let first = k * per_shard;
    let offsets = &epoch.offsets;
    for w in 0..per_shard {
        let j = first + w;
        let nbytes = offsets[j + 1] - offsets[j];
        // A chunk of no bytes is one that holds nothing (skipped frames):
        // it stays empty, read as the fill value. Every codec's encoding of
        // a real chunk has bytes.
        if present[j] && nbytes > 0 {
            let at = base + offsets[j] - offsets[first];
            index.set(first_chunk as usize + w, at, nbytes);
        }
    }
}
