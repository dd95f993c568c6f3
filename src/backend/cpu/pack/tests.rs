use super::super::gather::row_tasks;
use super::*;
use crate::layout::Dim;
use proptest::prelude::*;

/// A layout of `dims` as (size, tile, tiles per shard), 2-byte elements.
fn layout(dims: &[(u64, u64, u64)]) -> Layout {
    let dims: Vec<Dim> = dims.iter().map(|&(s, t, p)| Dim::new(s, t, p)).collect();
    Layout::new(&dims, 2).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Every tile is in exactly one piece at its shard-major position;
    /// a shard's pieces are numbered in position order, each task's in
    /// its tile order, and a later piece of a shard never belongs to an
    /// earlier task (what keeps a worker that waits for its turn from
    /// waiting for a task nobody has taken).
    #[test]
    fn pieces_cover_the_tiles_in_each_shards_order(
        inner in proptest::collection::vec((1u64..40, 1u64..5, 1u64..4), 1..4),
        max_tiles in 1u64..20,
    ) {
        let mut dims = vec![(0, 2, 1)];
        dims.extend(inner);
        let l = layout(&dims);
        let tasks = row_tasks(&l, max_tiles).unwrap();
        let all = pieces(&l, &tasks).unwrap();
        let per_shard = l.chunks_per_shard_epoch();
        let mut seen = vec![false; l.shard_major_len() as usize];
        // Per shard: (task, first position) of its pieces by seq.
        let mut by_shard: Vec<Vec<(usize, u64, usize)>> = vec![Vec::new(); l.shards_per_row() as usize];
        for (t, (task, mine)) in tasks.iter().zip(&all).enumerate() {
            let mut tile = 0;
            for p in mine {
                prop_assert_eq!(p.first_tile, tile, "pieces follow the task's tiles");
                for k in 0..p.count {
                    let pos = p.first_pos + k as u64;
                    prop_assert_eq!(l.shard_position(task.first_slot + (p.first_tile + k) as u64), pos);
                    prop_assert_eq!(pos / per_shard, p.shard as u64);
                    prop_assert!(!seen[pos as usize], "position {} twice", pos);
                    seen[pos as usize] = true;
                }
                tile += p.count;
                by_shard[p.shard].push((t, p.first_pos, p.seq));
            }
            prop_assert_eq!(tile, task.count as usize);
        }
        for (j, s) in seen.iter().enumerate() {
            prop_assert_eq!(*s, l.slot_at_position(j as u64).is_some(), "position {}", j);
        }
        for list in &by_shard {
            for (i, w) in list.iter().enumerate() {
                prop_assert_eq!(w.2, i, "seq in the order the pieces come");
            }
            for w in list.windows(2) {
                prop_assert!(w[0].1 < w[1].1, "positions rise with seq");
                prop_assert!(w[0].0 <= w[1].0, "tasks rise with seq");
            }
        }
    }
}

/// Pieces taken in order, as the workers take tasks, and committed out of
/// order (each after a delay of its own, as compression times vary) from
/// three threads, with no buffer, one or many for waiting: each shard
/// holds its pieces' bytes in seq order and every position its length.
#[test]
fn shards_hold_their_pieces_in_order_whatever_the_commit_order() {
    let shards = 3;
    let per_shard = 8;
    let pieces_per_shard = 4; // two positions each
                              // Task order: the pieces of all shards interleaved, as row tasks
                              // cross the shards.
    let mut work: Vec<(Piece, PieceBuf)> = Vec::new();
    for seq in 0..pieces_per_shard {
        for shard in 0..shards {
            let first_pos = (shard * per_shard + 2 * seq) as u64;
            let lens = vec![1 + seq as u64, 3];
            let total = lens.iter().sum::<u64>() as usize;
            let bytes = (0..total)
                .map(|i| (shard * 50 + seq * 10 + i) as u8)
                .collect();
            let piece = Piece {
                shard,
                seq,
                first_pos,
                first_tile: 0,
                count: 2,
            };
            work.push((piece, PieceBuf { bytes, lens }));
        }
    }
    let expected: Vec<Vec<u8>> = (0..shards)
        .map(|k| {
            work.iter()
                .filter(|(p, _)| p.shard == k)
                .flat_map(|(_, b)| b.bytes.clone())
                .collect()
        })
        .collect();
    for may_wait in [0, 1, 100] {
        for round in 0..20u64 {
            let mut data = vec![b"stale".to_vec(); shards];
            let mut sizes = vec![9u64; shards * per_shard];
            let packer = Packer::new(
                vec![(&mut data, &mut sizes)],
                per_shard,
                64,
                Vec::new(),
                may_wait,
            )
            .unwrap();
            let next = AtomicUsize::new(0);
            std::thread::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((piece, buf)) = work.get(i) else {
                            return;
                        };
                        let delay = (i as u64 * 7919 + round * 31) % 7;
                        std::thread::sleep(std::time::Duration::from_micros(300 * delay));
                        let mut mine = PieceBuf {
                            bytes: buf.bytes.clone(),
                            lens: buf.lens.clone(),
                        };
                        packer.commit(0, piece, &mut mine);
                    });
                }
            });
            packer.finish().unwrap();
            assert_eq!(data, expected, "may wait {may_wait}, round {round}");
            for (j, size) in sizes.iter().enumerate() {
                let within = j % per_shard;
                let want = if within % 2 == 0 {
                    1 + within as u64 / 2
                } else {
                    3
                };
                assert_eq!(*size, want, "position {j}");
            }
        }
    }
}

/// A worker that stops early wakes the ones waiting for its pieces.
#[test]
fn a_stop_releases_waiting_workers() {
    let mut data = vec![Vec::new()];
    let mut sizes = vec![0u64; 4];
    let packer = Packer::new(vec![(&mut data, &mut sizes)], 4, 64, Vec::new(), 0).unwrap();
    let second = Piece {
        shard: 0,
        seq: 1,
        first_pos: 1,
        first_tile: 0,
        count: 1,
    };
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut buf = PieceBuf {
                bytes: vec![7],
                lens: vec![1],
            };
            packer.commit(0, &second, &mut buf);
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        packer.stop();
        waiter.join().unwrap();
    });
    assert!(packer.is_stopped());
    packer.finish().unwrap();
    assert!(data[0].is_empty(), "nothing appended out of turn");
}
