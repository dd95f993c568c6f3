//! The order of a batch's chunks in its compress call.
//!
//! nvCOMP's batched compressors hand a call's chunks to the GPU's blocks in
//! the order of their tables, and the call ends when its last chunks do.
//! Chunks differ in cost, and the costly ones left for the end keep the
//! call running on a few blocks while the others idle: taking the costliest
//! first (list scheduling, longest first) shortens that tail. On an H100,
//! one call on 8192 cam-32 tiles (nvCOMP 6.0): zstd 7.29 GB/s as tiled,
//! 8.04 smallest chunks first; blosc-zstd with the byte shuffle 13.95 and
//! 15.96 largest first; blosc-lz4 byte 18.70 and 21.10; gzip unchanged.
//!
//! A chunk's cost is not known before it is compressed, but the compressed
//! size of the same tile in an earlier batch ranks it (ranked by the other
//! epoch of the batch, the gain was the same). Which end is costly depends
//! on the compressor and the data, so the stream measures: it compresses a
//! batch in each order, keeps the fastest, and tries the others again
//! every [`PROBE_EVERY`] batches, ranking by fresh sizes. Only full batches
//! take part; the stream's first batch (cold) is not timed.

use crate::error::Result;
use crate::memory::try_filled;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How a batch's chunks are ordered in the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrangement {
    /// As the tiles lie in the pool.
    AsTiled = 0,
    /// By the compressed size of the same tile in an earlier batch,
    /// smallest first.
    SmallestFirst = 1,
    /// The same, largest first.
    LargestFirst = 2,
}

const ALL: [Arrangement; 3] = [
    Arrangement::AsTiled,
    Arrangement::SmallestFirst,
    Arrangement::LargestFirst,
];

/// Full batches between two rounds of trying every arrangement again.
pub const PROBE_EVERY: u32 = 64;

/// Batches the process has compressed in an order other than the tiles'
/// (read by tests, which must see the rearranged path run).
static REARRANGED: AtomicU64 = AtomicU64::new(0);

/// Batches compressed so far in this process in an order other than the
/// tiles'.
pub fn rearranged_batches() -> u64 {
    REARRANGED.load(Relaxed)
}

pub struct ChunkOrder {
    /// Tiles of a full batch.
    chunks: usize,
    /// The tiles ranked by compressed size, smallest first, and the
    /// reverse; empty until a batch's sizes came back.
    ascending: Vec<u32>,
    descending: Vec<u32>,
    /// The sizes they were ranked by.
    keys: Vec<u64>,
    /// Whether the next full batch collected should report its sizes.
    wants_sizes: bool,
    /// Whether the rankings changed since they were last taken.
    changed: bool,
    /// The latest timing of each arrangement (seconds per batch); `None`:
    /// to be measured (again).
    seconds: [Option<f64>; 3],
    /// Batches of each arrangement enqueued and not yet timed.
    in_flight: [u32; 3],
    since_probe: u32,
    full_batches: u64,
}

impl ChunkOrder {
    /// The state for batches of `chunks` tiles.
    pub fn new(chunks: usize) -> Result<ChunkOrder> {
        let mut ascending = try_filled(chunks, 0u32, "the chunk order")?;
        let mut descending = try_filled(chunks, 0u32, "the chunk order")?;
        let keys = try_filled(chunks, 0u64, "the chunk order")?;
        ascending.clear();
        descending.clear();
        Ok(ChunkOrder {
            chunks,
            ascending,
            descending,
            keys,
            wants_sizes: true,
            changed: false,
            seconds: [None; 3],
            in_flight: [0; 3],
            since_probe: 0,
            full_batches: 0,
        })
    }

    /// The arrangement of the next batch, of `chunks` tiles. `None`: as
    /// tiled, and not timed (a partial batch, or the stream's first).
    /// `Some(a)`: the caller times the compression and hands it to
    /// [`ChunkOrder::record`].
    pub fn choose(&mut self, chunks: usize) -> Option<Arrangement> {
        if chunks != self.chunks || chunks < 2 {
            return None;
        }
        self.full_batches += 1;
        if self.full_batches == 1 {
            return None;
        }
        let ranked = !self.ascending.is_empty();
        let candidates = if ranked { &ALL[..] } else { &ALL[..1] };
        let untried = candidates
            .iter()
            .find(|a| self.seconds[**a as usize].is_none() && self.in_flight[**a as usize] == 0);
        let pick = match untried {
            Some(a) => *a,
            None => {
                let best = candidates
                    .iter()
                    .filter_map(|a| self.seconds[*a as usize].map(|s| (*a, s)))
                    .min_by(|x, y| x.1.total_cmp(&y.1))
                    .map_or(Arrangement::AsTiled, |(a, _)| a);
                self.since_probe += 1;
                if ranked && self.since_probe >= PROBE_EVERY {
                    self.since_probe = 0;
                    self.wants_sizes = true;
                    for a in ALL {
                        if a != best {
                            self.seconds[a as usize] = None;
                        }
                    }
                }
                best
            }
        };
        self.in_flight[pick as usize] += 1;
        if pick != Arrangement::AsTiled {
            REARRANGED.fetch_add(1, Relaxed);
        }
        Some(pick)
    }

    /// The compression of a batch `choose` arranged as `a` took `seconds`.
    pub fn record(&mut self, a: Arrangement, seconds: f64) {
        let n = &mut self.in_flight[a as usize];
        *n = n.saturating_sub(1);
        self.seconds[a as usize] = Some(seconds);
    }

    /// Whether the next full batch collected should hand its chunk sizes
    /// to [`ChunkOrder::rank`].
    pub fn wants_sizes(&self, chunks: usize) -> bool {
        self.wants_sizes && chunks == self.chunks
    }

    /// Ranks the tiles by `size_of(tile)`, the compressed sizes of a full
    /// batch (ties by tile, so that the order is the same every time).
    pub fn rank(&mut self, mut size_of: impl FnMut(usize) -> u64) {
        for (i, k) in self.keys.iter_mut().enumerate() {
            *k = size_of(i);
        }
        let keys = &self.keys;
        self.ascending.clear();
        self.ascending.extend(0..self.chunks as u32);
        self.ascending
            .sort_unstable_by_key(|&i| (keys[i as usize], i));
        self.descending.clear();
        self.descending.extend(self.ascending.iter().rev());
        self.wants_sizes = false;
        self.changed = true;
    }

    /// The rankings (smallest first, largest first), once after each
    /// change: the caller copies them where the compress calls read them.
    pub fn take_changed(&mut self) -> Option<(&[u32], &[u32])> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        Some((&self.ascending, &self.descending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Arrangement::*;

    /// Runs `batches` full batches, each taking `cost(arrangement)`
    /// seconds, timed `lag` batches after being chosen (batches in flight),
    /// with sizes handed back whenever asked; returns the arrangements.
    fn run(
        o: &mut ChunkOrder,
        batches: usize,
        lag: usize,
        cost: impl Fn(Arrangement, usize) -> f64,
    ) -> Vec<Option<Arrangement>> {
        let mut chosen = Vec::new();
        let mut pending = std::collections::VecDeque::new();
        for b in 0..batches {
            let a = o.choose(o.chunks);
            chosen.push(a);
            pending.push_back((a, b));
            if pending.len() > lag {
                let (a, b) = pending.pop_front().unwrap();
                if let Some(a) = a {
                    o.record(a, cost(a, b));
                }
                if o.wants_sizes(o.chunks) {
                    o.rank(|i| (i * 7919 % 13) as u64);
                }
            }
        }
        chosen
    }

    #[test]
    fn tries_every_arrangement_then_keeps_the_fastest() {
        for (fastest, lag) in [(SmallestFirst, 1), (LargestFirst, 2), (AsTiled, 0)] {
            let mut o = ChunkOrder::new(64).unwrap();
            let chosen = run(&mut o, 40, lag, |a, _| if a == fastest { 1.0 } else { 1.1 });
            assert_eq!(chosen[0], None, "the first batch is not timed");
            for a in ALL {
                assert!(chosen.contains(&Some(a)), "{a:?} never tried");
            }
            assert!(
                chosen[10..].iter().all(|c| *c == Some(fastest)),
                "{fastest:?} not kept: {chosen:?}"
            );
        }
    }

    #[test]
    fn tries_the_others_again_and_follows_a_change() {
        let mut o = ChunkOrder::new(16).unwrap();
        // Smallest first wins until batch 100, then largest first does.
        let chosen = run(&mut o, 3 * PROBE_EVERY as usize, 1, |a, b| {
            match (a, b < 100) {
                (SmallestFirst, true) | (LargestFirst, false) => 1.0,
                (LargestFirst, true) => 1.2,
                (SmallestFirst, false) => 1.25,
                (AsTiled, _) => 1.3,
            }
        });
        assert_eq!(chosen[20], Some(SmallestFirst));
        assert_eq!(chosen.last().copied().flatten(), Some(LargestFirst));
        let others = chosen[10..]
            .iter()
            .filter(|c| **c != Some(SmallestFirst) && **c != Some(LargestFirst))
            .count();
        assert!(
            others <= 4,
            "re-tried too often: {others} of {}",
            chosen.len()
        );
    }

    #[test]
    fn partial_batches_keep_the_tiles_order() {
        let mut o = ChunkOrder::new(16).unwrap();
        run(&mut o, 10, 1, |_, _| 1.0);
        assert_eq!(o.choose(15), None);
        assert_eq!(o.choose(1), None);
        assert!(!o.wants_sizes(15));
    }

    #[test]
    fn rankings_are_permutations_sorted_by_size() {
        let mut o = ChunkOrder::new(1000).unwrap();
        let size = |i: usize| ((i * 2654435761) % 977) as u64;
        o.rank(size);
        let (asc, desc) = o
            .take_changed()
            .map(|(a, d)| (a.to_vec(), d.to_vec()))
            .unwrap();
        assert!(o.take_changed().is_none(), "handed out once per change");
        let mut seen = asc.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<u32>>());
        assert!(asc
            .windows(2)
            .all(|w| size(w[0] as usize) <= size(w[1] as usize)));
        assert!(asc.iter().rev().eq(desc.iter()));
    }
}
