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
//! on the compressor and the data, so the stream measures: once it has a
//! ranking it compresses a batch in each order and keeps the faster,
//! trying the other again every [`PROBE_EVERY`] batches with fresh sizes.
//! As tiled never won by more than 1% (gzip), so it is not tried. The
//! process remembers the order a stream kept, and the sizes it ranked by,
//! for the next stream of the same codec and batch shape, which starts
//! ranked with that order and tries the other only later: instrument
//! software opens a stream per acquisition, of the same camera. Only full
//! batches take part.

use crate::error::Result;
use crate::memory::try_filled;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How a batch's chunks are ordered in the call, once ranked (before, as
/// the tiles lie in the pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrangement {
    /// As the tiles lie in the pool.
    AsTiled,
    /// By the compressed size of the same tile in an earlier batch,
    /// smallest first.
    SmallestFirst,
    /// The same, largest first.
    LargestFirst,
}

/// The arrangements a ranked batch is tried in.
const TRIED: [Arrangement; 2] = [Arrangement::SmallestFirst, Arrangement::LargestFirst];

fn tried_index(a: Arrangement) -> usize {
    match a {
        Arrangement::LargestFirst => 1,
        _ => 0,
    }
}

/// Full batches between two rounds of trying the other arrangement again.
pub const PROBE_EVERY: u32 = 64;

/// Batches the process has compressed in an order other than the tiles'
/// (read by tests, which must see the rearranged path run).
static REARRANGED: AtomicU64 = AtomicU64::new(0);

/// Batches compressed so far in this process in an order other than the
/// tiles'.
pub fn rearranged_batches() -> u64 {
    REARRANGED.load(Relaxed)
}

/// What the last stream of a shape left: the arrangement it kept and
/// the sizes it last ranked its tiles by.
struct Kept {
    shape: String,
    arrangement: Option<Arrangement>,
    keys: Vec<u64>,
}

/// A few shapes' (at most 128 KiB of sizes each: a call has at most
/// 16384 tiles).
static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
const KEPT_SHAPES: usize = 16;

/// `f` on the process's memory of `shape`, made when missing.
fn remember(shape: &str, f: impl FnOnce(&mut Kept)) {
    let mut kept = KEPT.lock();
    let k = match kept.iter().position(|k| k.shape == shape) {
        Some(k) => k,
        None => {
            if kept.len() >= KEPT_SHAPES {
                kept.remove(0);
            }
            kept.push(Kept {
                shape: shape.to_string(),
                arrangement: None,
                keys: Vec::new(),
            });
            kept.len() - 1
        }
    };
    f(&mut kept[k]);
}

/// The arrangement the last stream of `shape` kept, and into `keys` (when
/// as long) the sizes it ranked by; whether there were such sizes.
fn recall(shape: &str, keys: &mut [u64]) -> (Option<Arrangement>, bool) {
    let kept = KEPT.lock();
    let Some(k) = kept.iter().find(|k| k.shape == shape) else {
        return (None, false);
    };
    let sized = k.keys.len() == keys.len();
    if sized {
        keys.copy_from_slice(&k.keys);
    }
    (k.arrangement, sized)
}

pub struct ChunkOrder {
    /// What the process remembers the kept arrangement by: codec and
    /// batch shape.
    shape: String,
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
    /// The latest timing (seconds per batch) of each arrangement of
    /// [`TRIED`]; `None`: to be measured (again); infinite: not to be
    /// tried before the next round (the other one was kept before).
    seconds: [Option<f64>; 2],
    /// Batches of each arrangement enqueued and not yet timed.
    in_flight: [u32; 2],
    since_probe: u32,
    /// What this stream last left in the process's memory.
    remembered: Option<Arrangement>,
}

impl ChunkOrder {
    /// Host bytes of the state for batches of `chunks` tiles (the two
    /// rankings and their keys, and the keys the process keeps).
    pub fn memory_bytes(chunks: usize) -> u64 {
        chunks as u64 * (4 + 4 + 8 + 8)
    }

    /// The state for batches of `chunks` tiles of a stream whose codec and
    /// batch shape `shape` names.
    pub fn new(chunks: usize, shape: String) -> Result<ChunkOrder> {
        let mut ascending = try_filled(chunks, 0u32, "the chunk order")?;
        let mut descending = try_filled(chunks, 0u32, "the chunk order")?;
        let mut keys = try_filled(chunks, 0u64, "the chunk order")?;
        ascending.clear();
        descending.clear();
        let mut seconds = [None; 2];
        let (kept, sized) = recall(&shape, &mut keys);
        if let Some(kept) = kept {
            seconds[1 - tried_index(kept)] = Some(f64::INFINITY);
        }
        let mut order = ChunkOrder {
            shape,
            chunks,
            ascending,
            descending,
            keys,
            wants_sizes: true,
            changed: false,
            seconds,
            in_flight: [0; 2],
            since_probe: 0,
            remembered: None,
        };
        if sized {
            // Ranked from the first batch on; its own sizes rank again.
            order.sort_keys();
            order.wants_sizes = true;
        }
        Ok(order)
    }

    /// The arrangement of the next batch, of `chunks` tiles. `None`: as
    /// tiled, not timed (a partial batch, or no ranking yet). `Some(a)`:
    /// the caller times the compression and hands it to
    /// [`ChunkOrder::record`].
    pub fn choose(&mut self, chunks: usize) -> Option<Arrangement> {
        if chunks != self.chunks || chunks < 2 || self.ascending.is_empty() {
            return None;
        }
        let untried = (0..2).find(|&k| self.seconds[k].is_none() && self.in_flight[k] == 0);
        let k = match untried {
            Some(k) => k,
            None => {
                let best = self.best();
                self.since_probe += 1;
                if self.since_probe >= PROBE_EVERY {
                    self.since_probe = 0;
                    self.wants_sizes = true;
                    self.seconds[1 - best] = None;
                }
                best
            }
        };
        self.in_flight[k] += 1;
        REARRANGED.fetch_add(1, Relaxed);
        Some(TRIED[k])
    }

    /// The faster arrangement measured; where one is not, the other
    /// unless that one is set aside (infinite); the first where neither is.
    fn best(&self) -> usize {
        match self.seconds {
            [Some(a), Some(b)] => usize::from(b < a),
            [Some(a), None] => usize::from(!a.is_finite()),
            [None, Some(b)] => usize::from(b.is_finite()),
            [None, None] => 0,
        }
    }

    /// The compression of a batch `choose` arranged as `a` took `seconds`.
    pub fn record(&mut self, a: Arrangement, seconds: f64) {
        let k = tried_index(a);
        self.in_flight[k] = self.in_flight[k].saturating_sub(1);
        self.seconds[k] = Some(seconds);
        // The process's memory changes only when the kept order does: no
        // lock or allocation on every batch.
        let best = TRIED[self.best()];
        if self.remembered != Some(best) {
            remember(&self.shape, |k| k.arrangement = Some(best));
            self.remembered = Some(best);
        }
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
        self.sort_keys();
        let keys = &self.keys;
        remember(&self.shape, |k| {
            k.keys.clear();
            // Without room the next stream starts unranked, as a first does.
            if k.keys.try_reserve_exact(keys.len()).is_ok() {
                k.keys.extend_from_slice(keys);
            }
        });
    }

    /// The rankings by `keys`.
    fn sort_keys(&mut self) {
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

    /// Runs `batches` full batches, each taking `cost(arrangement, batch)`
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

    fn fresh(shape: &str) -> ChunkOrder {
        ChunkOrder::new(64, shape.into()).unwrap()
    }

    #[test]
    fn tries_both_arrangements_then_keeps_the_faster() {
        for (k, (fastest, lag)) in [(SmallestFirst, 1), (LargestFirst, 2), (LargestFirst, 0)]
            .into_iter()
            .enumerate()
        {
            let mut o = fresh(&format!("keeps the faster {k}"));
            let chosen = run(&mut o, 40, lag, |a, _| if a == fastest { 1.0 } else { 1.1 });
            let unranked = chosen.iter().take_while(|c| c.is_none()).count();
            assert_eq!(
                unranked,
                lag + 1,
                "as tiled until the first sizes: {chosen:?}"
            );
            assert!(chosen.contains(&Some(SmallestFirst)) && chosen.contains(&Some(LargestFirst)));
            assert!(
                chosen[10..].iter().all(|c| *c == Some(fastest)),
                "{fastest:?} not kept: {chosen:?}"
            );
        }
    }

    #[test]
    fn tries_the_other_again_and_follows_a_change() {
        let mut o = fresh("follows a change");
        // Smallest first wins until batch 100, then largest first does.
        let n = 3 * PROBE_EVERY as usize;
        let chosen = run(&mut o, n, 1, |a, b| match (a, b < 100) {
            (SmallestFirst, true) | (LargestFirst, false) => 1.0,
            _ => 1.2,
        });
        assert_eq!(chosen[20], Some(SmallestFirst));
        assert_eq!(chosen[n - 1], Some(LargestFirst));
        let switches = chosen[10..].windows(2).filter(|w| w[0] != w[1]).count();
        assert!(switches <= 6, "re-tried too often: {chosen:?}");
    }

    #[test]
    fn the_next_stream_of_a_shape_starts_with_what_the_last_kept() {
        let cost = |a, _| if a == LargestFirst { 1.0 } else { 1.3 };
        let first = run(&mut fresh("next stream"), 20, 1, cost);
        let second = run(&mut fresh("next stream"), 20, 1, cost);
        assert!(first.contains(&Some(SmallestFirst)), "{first:?}");
        assert_eq!(first[0], None, "a first stream has no ranking yet");
        assert!(
            second.iter().all(|a| *a == Some(LargestFirst)),
            "unranked, or tried again too soon: {second:?}"
        );
        // Another shape knows nothing of it.
        let other = run(&mut fresh("another shape"), 20, 1, cost);
        assert!(other.contains(&Some(SmallestFirst)), "{other:?}");
    }

    #[test]
    fn partial_batches_keep_the_tiles_order() {
        let mut o = fresh("partial");
        run(&mut o, 10, 1, |_, _| 1.0);
        assert_eq!(o.choose(63), None);
        assert_eq!(o.choose(1), None);
        assert!(!o.wants_sizes(63));
    }

    #[test]
    fn rankings_are_permutations_sorted_by_size() {
        let mut o = ChunkOrder::new(1000, "rankings".into()).unwrap();
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
