//! Packing a CPU epoch's chunks by shard where they are compressed (the
//! epochs of a group at once: see the backend's `compress_batch`).
//!
//! A worker compresses a task's tiles into a buffer of its own, which
//! stays in its cache, and appends them to their shard's output as soon as
//! every earlier chunk of that shard is there: each shard's chunks end up
//! back to back in position order (as sharding.md's aggregation leaves
//! them) without a separate pass over the epoch's compressed bytes.
//! Within a shard, position order is tile order (both are row-major, the
//! shard's origin aside), so a shard's pieces come from tasks in the
//! order the workers take them: a piece whose predecessors are not in yet
//! waits in a spare buffer, or, when too many wait, its worker waits for
//! them. Either way the result is the same bytes, whatever the timing.

use super::gather::RowTask;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::memory::try_reserve;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Consecutive tiles of a task that are consecutive positions of one
/// shard.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// The active shard (shard-major position / chunks per shard epoch).
    pub shard: usize,
    /// Its place among the shard's pieces.
    pub seq: usize,
    /// The shard-major position of its first tile.
    pub first_pos: u64,
    /// Its first tile within the task, and how many it holds.
    pub first_tile: usize,
    pub count: usize,
}

/// The pieces of each task, in task order, each task's in tile order.
pub fn pieces(layout: &Layout, tasks: &[RowTask]) -> Result<Vec<Vec<Piece>>> {
    let per_shard = layout.chunks_per_shard_epoch();
    let mut seq = crate::memory::try_filled(layout.shards_per_row() as usize, 0, "shard pieces")?;
    let mut out = Vec::new();
    try_reserve(&mut out, tasks.len(), "task pieces")?;
    for task in tasks {
        let mut mine: Vec<Piece> = Vec::new();
        for k in 0..task.count as usize {
            let pos = layout.shard_position(task.first_slot + k as u64);
            let shard = (pos / per_shard) as usize;
            match mine.last_mut() {
                Some(p) if p.shard == shard && p.first_pos + p.count as u64 == pos => {
                    p.count += 1;
                }
                _ => {
                    try_reserve(&mut mine, 1, "task pieces")?;
                    mine.push(Piece {
                        shard,
                        seq: seq[shard],
                        first_pos: pos,
                        first_tile: k,
                        count: 1,
                    });
                    seq[shard] += 1;
                }
            }
        }
        out.push(mine);
    }
    Ok(out)
}

/// A piece's chunks, compressed back to back, and their lengths.
#[derive(Debug, Default)]
pub struct PieceBuf {
    pub bytes: Vec<u8>,
    pub lens: Vec<u64>,
}

impl PieceBuf {
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.lens.clear();
    }
}

/// One active shard's output while its epoch is packed.
struct ShardOut<'a> {
    data: &'a mut Vec<u8>,
    /// Chunk bytes at each of the shard's positions (0: no tile).
    sizes: &'a mut [u64],
    first_pos: u64,
    /// The next piece to append.
    next: usize,
    /// Pieces that came before their turn: (seq, first position, chunks).
    waiting: Vec<(usize, u64, PieceBuf)>,
}

impl ShardOut<'_> {
    fn append(&mut self, first_pos: u64, piece: &PieceBuf) {
        self.data.extend_from_slice(&piece.bytes);
        let at = (first_pos - self.first_pos) as usize;
        self.sizes[at..at + piece.lens.len()].copy_from_slice(&piece.lens);
        self.next += 1;
    }
}

/// Where one epoch of a group is packed: its active shards' outputs (one
/// vector each, emptied here) and its chunk sizes (one entry per
/// shard-major position).
pub type EpochOut<'a> = (&'a mut [Vec<u8>], &'a mut [u64]);

/// The shards of a group of epochs being packed by the workers.
pub struct Packer<'a> {
    /// Epoch after epoch, each epoch's active shards in order.
    shards: Vec<(Mutex<ShardOut<'a>>, Condvar)>,
    shards_per_epoch: usize,
    /// Buffers for pieces that wait, and how many more may wait.
    spare: Mutex<Vec<PieceBuf>>,
    may_wait: AtomicUsize,
    /// Set when a worker stops early (an error, or the stream cancelled):
    /// the pieces after its own never come.
    stopped: AtomicBool,
}

impl<'a> Packer<'a> {
    /// A packer into `epochs` (each of its shard vectors given room for
    /// `shard_bound` bytes; all with the same number of shards), letting up
    /// to `may_wait` pieces of the whole group wait in buffers from
    /// `spare`.
    pub fn new(
        epochs: Vec<EpochOut<'a>>,
        per_shard: usize,
        shard_bound: usize,
        spare: Vec<PieceBuf>,
        may_wait: usize,
    ) -> Result<Packer<'a>> {
        let shards_per_epoch = epochs.first().map_or(0, |(data, _)| data.len());
        let mut shards = Vec::new();
        try_reserve(
            &mut shards,
            shards_per_epoch.saturating_mul(epochs.len()),
            "shard outputs",
        )?;
        for (data, sizes) in epochs {
            debug_assert_eq!(data.len(), shards_per_epoch);
            sizes.fill(0);
            for (k, (data, sizes)) in data.iter_mut().zip(sizes.chunks_mut(per_shard)).enumerate() {
                data.clear();
                try_reserve(data, shard_bound, "a shard's compressed bytes")?;
                let out = ShardOut {
                    data,
                    sizes,
                    first_pos: (k * per_shard) as u64,
                    next: 0,
                    waiting: Vec::new(),
                };
                shards.push((Mutex::new(out), Condvar::new()));
            }
        }
        Ok(Packer {
            shards,
            shards_per_epoch,
            spare: Mutex::new(spare),
            may_wait: AtomicUsize::new(may_wait),
            stopped: AtomicBool::new(false),
        })
    }

    /// Hands on `piece`'s chunks in `buf`, a piece of the group's epoch
    /// `epoch`: appended to the shard now when every earlier piece of it is
    /// in (with any waiting pieces that follow), else kept until they are
    /// (`buf` then holds a spare buffer), else, with too many waiting, once
    /// they are.
    pub fn commit(&self, epoch: usize, piece: &Piece, buf: &mut PieceBuf) {
        let (lock, turn) = &self.shards[epoch * self.shards_per_epoch + piece.shard];
        let mut out = lock.lock();
        loop {
            if out.next == piece.seq {
                out.append(piece.first_pos, buf);
                while let Some(i) = out.waiting.iter().position(|w| w.0 == out.next) {
                    let (_, first_pos, mut waited) = out.waiting.swap_remove(i);
                    out.append(first_pos, &waited);
                    waited.clear();
                    self.spare.lock().push(waited);
                    self.may_wait.fetch_add(1, Ordering::Relaxed);
                }
                turn.notify_all();
                return;
            }
            if self.stopped.load(Ordering::Relaxed) {
                return;
            }
            if self.take_wait_slot() {
                let spare = self.spare.lock().pop().unwrap_or_default();
                out.waiting
                    .push((piece.seq, piece.first_pos, std::mem::replace(buf, spare)));
                return;
            }
            turn.wait(&mut out);
        }
    }

    fn take_wait_slot(&self) -> bool {
        self.may_wait
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    /// A worker stops early: the pieces after its own never come, so no
    /// worker waits for them.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        for (lock, turn) in &self.shards {
            // Taking the lock orders this with a worker about to wait.
            drop(lock.lock());
            turn.notify_all();
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// The spare buffers, for the next group; an error when a piece was
    /// lost (only after [`Packer::stop`]).
    pub fn finish(self) -> Result<Vec<PieceBuf>> {
        let mut spare = self.spare.into_inner();
        for (lock, _) in self.shards {
            let out = lock.into_inner();
            if !out.waiting.is_empty() && !self.stopped.load(Ordering::Relaxed) {
                return Err(Error::Internal(
                    "a shard's chunks were left waiting for an earlier piece".into(),
                ));
            }
            spare.extend(out.waiting.into_iter().map(|(_, _, mut b)| {
                b.clear();
                b
            }));
        }
        Ok(spare)
    }
}

#[cfg(test)]
mod tests;
