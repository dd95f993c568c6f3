//! The layout checked against a naive per-element reference: unravel the
//! global element index, and compute tile, epoch, shard, chunk slot and
//! offset within the tile directly from the definitions.

use super::*;
use proptest::prelude::*;

/// Shapes of at most this many elements keep a case fast.
const MAX_ELEMS: u64 = 1 << 17;

#[derive(Debug, Clone)]
struct Case {
    dims: Vec<Dim>,
    /// Planes streamed along dimension 0 (its size when bounded).
    planes: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=6, any::<bool>())
        .prop_flat_map(|(rank, unbounded)| {
            (
                proptest::collection::vec(1u64..=300, rank),
                proptest::collection::vec((0.0f64..1.0, 0.0f64..1.0), rank),
                Just(unbounded),
            )
        })
        .prop_map(|(mut sizes, fractions, unbounded)| {
            // Halve the largest extent until the case is small enough.
            while sizes.iter().product::<u64>() > MAX_ELEMS {
                let (i, _) = sizes.iter().enumerate().max_by_key(|(_, &s)| s).unwrap();
                sizes[i] = sizes[i].div_ceil(2);
            }
            let dims: Vec<Dim> = sizes
                .iter()
                .zip(&fractions)
                .enumerate()
                .map(|(d, (&size, &(ft, fp)))| {
                    // Tiles from 1 to a little past the size (one edge tile).
                    let tile = 1 + (ft * (size + 2) as f64) as u64;
                    let count = size.div_ceil(tile);
                    // tiles_per_shard from 0 (= all) to one past the count.
                    let mut tps = (fp * (count + 2) as f64) as u64;
                    if d == 0 && unbounded && tps == 0 {
                        tps = 1;
                    }
                    Dim::new(size, tile, tps)
                })
                .collect();
            let planes = dims[0].size;
            let mut dims = dims;
            // A shard of one tile along every inner dimension can exceed the
            // limit on shards per row (it is checked by its own test): one
            // shard spans the dimension with the most until the case is legal.
            let shards_along = |d: &Dim| match d.tiles_per_shard {
                0 => 1,
                tps => d.tile_count().div_ceil(tps),
            };
            while dims[1..].iter().map(shards_along).product::<u64>() > MAX_SHARDS_PER_ROW {
                let widest = dims[1..]
                    .iter_mut()
                    .max_by_key(|d| shards_along(d))
                    .unwrap();
                widest.tiles_per_shard = 0;
            }
            if unbounded {
                dims[0].size = 0;
            }
            Case { dims, planes }
        })
}

/// What the definitions say about one element.
#[derive(Debug, PartialEq, Eq)]
struct Place {
    epoch: u64,
    slot: u64,
    within_tile: u64,
    shard: Vec<u64>,
    chunk_in_shard: u64,
}

fn naive_place(dims: &[Dim], planes: u64, mut e: u64) -> Place {
    let rank = dims.len();
    let mut x = vec![0u64; rank];
    for d in (0..rank).rev() {
        let size = if d == 0 { planes } else { dims[d].size };
        x[d] = e % size;
        e /= size;
    }
    let tile_count: Vec<u64> = dims.iter().map(|d| d.size.div_ceil(d.tile)).collect();
    let tps: Vec<u64> = dims
        .iter()
        .zip(&tile_count)
        .map(|(d, &c)| {
            if d.tiles_per_shard == 0 {
                c
            } else {
                d.tiles_per_shard
            }
        })
        .collect();
    let t: Vec<u64> = (0..rank).map(|d| x[d] / dims[d].tile).collect();
    let n: Vec<u64> = (0..rank).map(|d| x[d] % dims[d].tile).collect();
    let mut slot = 0;
    for d in 1..rank {
        slot = slot * tile_count[d] + t[d];
    }
    let mut within_tile = 0;
    let mut chunk_in_shard = 0;
    for d in 0..rank {
        within_tile = within_tile * dims[d].tile + n[d];
        chunk_in_shard = chunk_in_shard * tps[d] + t[d] % tps[d];
    }
    Place {
        epoch: t[0],
        slot,
        within_tile,
        shard: (0..rank).map(|d| t[d] / tps[d]).collect(),
        chunk_in_shard,
    }
}

/// Where the layout puts element `e`: the epoch from its position in the
/// stream, the slot and offset by running the gather plans, the shard and
/// chunk through the shard permutation.
fn layout_places(layout: &Layout, planes: u64) -> Vec<Place> {
    let epoch_elems = layout.epoch_elems();
    let total = planes * layout.plane_elems();
    let tile_elems = layout.tile_elems();
    let mut places: Vec<Option<Place>> = (0..total).map(|_| None).collect();
    let epochs = planes.div_ceil(layout.epoch_planes());
    for epoch in 0..epochs {
        let first = epoch * epoch_elems;
        for slot in 0..layout.tiles_per_epoch() {
            let plan = layout.tile_gather(slot);
            let run = plan.run_len();
            let pos = layout.shard_position(slot);
            assert_eq!(layout.slot_at_position(pos), Some(slot));
            let (row, first_chunk) = layout.epoch_in_shard_row(epoch);
            let k = pos / layout.chunks_per_shard_epoch();
            let mut shard = vec![0; layout.rank()];
            layout.shard_coord(row, k, &mut shard);
            let chunk = first_chunk + pos % layout.chunks_per_shard_epoch();
            let mut covered = 0;
            plan.for_each_run(|src, dst| {
                for r in 0..run {
                    covered += 1;
                    let e = first + src + r;
                    assert!(dst + r < tile_elems, "run leaves the tile");
                    if e >= total {
                        continue; // padding of the last epoch
                    }
                    let old = places[e as usize].replace(Place {
                        epoch,
                        slot,
                        within_tile: dst + r,
                        shard: shard.clone(),
                        chunk_in_shard: chunk,
                    });
                    assert!(old.is_none(), "element {e} gathered twice");
                }
            });
            assert_eq!(covered == tile_elems, !plan.is_clipped());
        }
    }
    places
        .into_iter()
        .enumerate()
        .map(|(e, p)| p.unwrap_or_else(|| panic!("element {e} never gathered")))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn layout_matches_naive_reference(c in case()) {
        let layout = Layout::new(&c.dims, 2).unwrap();
        let places = layout_places(&layout, c.planes);
        for (e, place) in places.iter().enumerate() {
            prop_assert_eq!(place, &naive_place(&c.dims, c.planes, e as u64), "element {}", e);
        }
    }

    #[test]
    fn shard_permutation_is_a_bijection_onto_present_positions(c in case()) {
        let layout = Layout::new(&c.dims, 1).unwrap();
        let m = layout.tiles_per_epoch();
        let mut seen = vec![false; layout.shard_major_len() as usize];
        for i in 0..m {
            let p = layout.shard_position(i);
            prop_assert!(p < layout.shard_major_len());
            prop_assert!(!seen[p as usize]);
            seen[p as usize] = true;
        }
        for (j, &hit) in seen.iter().enumerate() {
            prop_assert_eq!(layout.slot_at_position(j as u64).is_some(), hit);
        }
    }
}

#[test]
fn counts_of_the_cam32_configuration() {
    let dims = [
        Dim::new(0, 32, 1),
        Dim::new(2048, 32, 16),
        Dim::new(2048, 32, 16),
    ];
    let l = Layout::new(&dims, 2).unwrap();
    assert_eq!(l.tiles_per_epoch(), 64 * 64);
    assert_eq!(l.shards_per_row(), 16);
    assert_eq!(l.chunks_per_shard(), 256);
    assert_eq!(l.tile_bytes(), 64 << 10);
    assert_eq!(l.epoch_bytes(), 256 << 20);
    assert_eq!(l.shard_shape(), vec![32, 512, 512]);
    assert_eq!(l.index_bytes(), 256 * 16 + 4);
}

#[test]
fn rank_one_is_one_tile_per_epoch() {
    let l = Layout::new(&[Dim::new(10, 4, 2)], 4).unwrap();
    assert_eq!(l.tiles_per_epoch(), 1);
    assert_eq!(l.epoch_count(), Some(3));
    assert_eq!(l.shard_count(), &[2]);
    let plan = l.tile_gather(0);
    assert_eq!(plan.run_len(), 4);
}

#[test]
fn rules_are_enforced() {
    use LayoutError::*;
    let e = |dims: &[Dim], es| Layout::new(dims, es).unwrap_err();
    assert_eq!(e(&[], 1), Rank(0));
    assert_eq!(e(&[Dim::new(1, 1, 1); 33], 1), Rank(33));
    assert_eq!(e(&[Dim::new(4, 1, 1), Dim::new(0, 1, 1)], 1), ZeroSize(1));
    assert_eq!(e(&[Dim::new(4, 0, 1)], 1), ZeroTile(0));
    assert_eq!(e(&[Dim::new(0, 4, 0)], 1), UnboundedAllTiles);
    assert_eq!(
        e(&[Dim::new(1 << 40, 1, 1), Dim::new(1 << 40, 1, 1)], 1),
        ElementsOverflow(1)
    );
    assert_eq!(e(&[Dim::new(1 << 62, 1, 1)], 8), BytesOverflow(0));
    assert!(matches!(
        e(&[Dim::new(1 << 20, 1 << 20, 1), Dim::new(4096, 4096, 1)], 1),
        TileTooLarge { dim: 1, .. }
    ));
    assert!(Layout::new(&[Dim::new(1 << 31, (1 << 31) - 1, 1)], 1).is_ok());
}

#[test]
fn shard_sizes_are_bounded() {
    use LayoutError::*;
    let e = |dims: &[Dim]| Layout::new(dims, 2).unwrap_err();
    // Both found aborting a process before these limits existed.
    assert!(matches!(
        e(&[Dim::new(0, 1, u32::MAX as u64)]),
        ShardTooLarge { dim: 0, .. }
    ));
    assert!(matches!(
        e(&[Dim::new(10, 3, 1), Dim::new(7, 2, u32::MAX as u64)]),
        ShardTooLarge { dim: 1, .. }
    ));
    let max = MAX_CHUNKS_PER_SHARD;
    assert!(Layout::new(&[Dim::new(0, 1, max)], 2).is_ok());
    assert!(matches!(
        e(&[Dim::new(0, 1, max / 2), Dim::new(6, 1, 3)]),
        ShardTooLarge { dim: 1, .. }
    ));
    // One chunk per shard over a 2^17-wide plane: too many shard files.
    assert!(matches!(
        e(&[Dim::new(0, 1, 1), Dim::new(1 << 17, 1, 1)]),
        TooManyShards { dim: 1, .. }
    ));
    assert!(Layout::new(&[Dim::new(0, 1, 1), Dim::new(1 << 16, 1, 1)], 2).is_ok());
    // 2^16 shards of 2^9 chunks each: a row of 2^25 chunks.
    assert!(matches!(
        e(&[Dim::new(0, 1, 1 << 9), Dim::new(1 << 16, 1, 1)]),
        RowTooLarge { dim: 1, .. }
    ));
    let l = Layout::new(&[Dim::new(0, 1, 1 << 8), Dim::new(1 << 16, 1, 1)], 2).unwrap();
    assert_eq!(
        l.shards_per_row() * l.chunks_per_shard(),
        MAX_CHUNKS_PER_ROW
    );
}
