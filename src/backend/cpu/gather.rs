//! The CPU scatter, done as a gather per row of tiles: the tiles of a row
//! share their input rows, so copying them together walks the input in
//! order (one page after another) instead of jumping a row per run.

use crate::error::Result;
use crate::layout::{Layout, TileGather};
use crate::memory::try_reserve;

/// Consecutive tiles of one row, gathered and compressed as one task.
#[derive(Debug, Clone)]
pub struct RowTask {
    /// Gather plan of the row's first tile: every tile of the row has the
    /// same runs, shifted along the last dimension.
    plan: TileGather,
    /// Index of the first tile within its row, and how many to take.
    first_in_row: u64,
    pub count: u64,
    /// Pool slot of the first tile.
    pub first_slot: u64,
}

/// Scratch per task stays near this size (many small tiles per task, or
/// one large tile)...
const TASK_BYTES: usize = 1 << 20;

/// ...unless more tiles are needed to read a page of each input row in one
/// go, up to this size. Each tile takes one run of every input row it
/// spans: with a task's runs a page long, every page of the epoch is read
/// once, in order, rather than a piece at a time by several tasks (cam-32,
/// one thread: 6.6 GiB/s with whole 4 KiB rows against 4.2 with 1 KiB).
const TASK_BYTES_MAX: usize = 4 << 20;

/// The page the input's rows are read by.
const INPUT_PAGE: usize = 4096;

/// Tasks per worker thread an epoch keeps at least when its tasks grow
/// past [`TASK_BYTES`], and a group of epochs has at least when its
/// epochs have fewer ([`group_epochs`]): the workers meet at the end of
/// every group, and the fewer its tasks, the longer the others wait for
/// the last ones (on 16 cores whole rows of cam-32 gained nothing; see
/// docs/performance-log.md).
const TASKS_PER_THREAD: u64 = 16;

/// Tiles one task of `threads` workers gathers and compresses.
pub fn task_tiles(layout: &Layout, threads: usize) -> u64 {
    let tile = layout.tile_bytes().max(1);
    let base = (TASK_BYTES / tile).max(1) as u64;
    let run = layout.dims()[layout.rank() - 1].tile as usize * layout.elem_size();
    let page = INPUT_PAGE.div_ceil(run.max(1)).min(TASK_BYTES_MAX / tile) as u64;
    let enough = layout.tiles_per_epoch() / (TASKS_PER_THREAD * threads.max(1) as u64);
    base.max(page.min(enough))
        .min(layout.tiles_per_row())
        .max(1)
}

/// How many tasks [`row_tasks`] splits an epoch into.
pub fn tasks_per_epoch(layout: &Layout, max_tiles: u64) -> u64 {
    let per_row = layout.tiles_per_row();
    layout.tiles_per_epoch() / per_row * per_row.div_ceil(max_tiles.max(1))
}

/// Epochs whose tasks the workers take from one queue (a group), at most
/// `most`: an epoch of fewer than `TASKS_PER_THREAD` tasks per worker
/// would leave workers idle at its end, where they meet (a 2048 x 2048
/// uint16 frame of 128 x 128 tiles is 16 tasks, a row each: one per
/// worker on 16 cores).
pub fn group_epochs(layout: &Layout, threads: usize, most: u64) -> u64 {
    let tasks = tasks_per_epoch(layout, task_tiles(layout, threads)).max(1);
    (TASKS_PER_THREAD * threads.max(1) as u64)
        .div_ceil(tasks)
        .clamp(1, most.max(1))
}

/// Splits the tile pool into row tasks of at most `max_tiles` tiles.
pub fn row_tasks(layout: &Layout, max_tiles: u64) -> Result<Vec<RowTask>> {
    let per_row = layout.tiles_per_row();
    let rows = layout.tiles_per_epoch() / per_row;
    let mut tasks = Vec::new();
    try_reserve(
        &mut tasks,
        tasks_per_epoch(layout, max_tiles) as usize,
        "gather tasks",
    )?;
    for r in 0..rows {
        let plan = layout.tile_gather(r * per_row);
        let mut j = 0;
        while j < per_row {
            let count = max_tiles.min(per_row - j);
            tasks.push(RowTask {
                plan: plan.clone(),
                first_in_row: j,
                count,
                first_slot: r * per_row + j,
            });
            j += count;
        }
    }
    Ok(tasks)
}

/// Bytes between the starts of two tiles in a task's scratch: a tile and
/// a cache line. Each input run feeds every tile of the task at once; tiles
/// a power of two apart (64 KiB) would all fall in the same few cache sets
/// and evict one another while being written.
pub fn scratch_stride(tile_bytes: usize) -> usize {
    tile_bytes + 64
}

/// Copies the task's tiles out of the epoch's input into `tiles`
/// (`count` tiles of `tile_bytes`, [`scratch_stride`] apart). Parts of edge
/// tiles outside the array get the fill value (zero).
pub fn gather_row(layout: &Layout, task: &RowTask, input: &[u8], tiles: &mut [u8]) {
    let elem = layout.elem_size();
    let tile_bytes = layout.tile_bytes();
    let stride = scratch_stride(tile_bytes);
    let run = task.plan.run_len() as usize;
    // Along the last dimension, tile j starts `j * tile` elements further.
    let step = layout.dims()[layout.rank() - 1].tile as usize;
    // A row of one tile may have runs merged across dimensions: take them
    // whole. Otherwise runs are one tile long, the row's last one clipped.
    let single = layout.tiles_per_row() == 1;
    let extent = |j: u64| {
        if single {
            run
        } else {
            layout.row_tile_extent(j) as usize
        }
    };
    for k in 0..task.count {
        let j = task.first_in_row + k;
        if task.plan.is_clipped() || extent(j) < run {
            let t = k as usize * stride;
            tiles[t..t + tile_bytes].fill(0);
        }
    }
    // The tiles whose runs are whole (all but a clipped last one) take
    // consecutive pieces of one stretch of the input row.
    let count = task.count as usize;
    let whole = if single || count == 0 {
        count
    } else {
        let last = task.first_in_row + task.count - 1;
        count - usize::from(extent(last) < run)
    };
    let piece = run * elem;
    task.plan.for_each_run(|src, dst| {
        let from = (src as usize + task.first_in_row as usize * step) * elem;
        let to = dst as usize * elem;
        let stretch = &input[from..from + whole * piece];
        scatter_pieces(stretch, piece, &mut tiles[to..], stride);
        for k in whole..count {
            let j = task.first_in_row as usize + k;
            let n = extent(j as u64) * elem;
            let from = (src as usize + j * step) * elem;
            let to = k * stride + dst as usize * elem;
            tiles[to..to + n].copy_from_slice(&input[from..from + n]);
        }
    });
}

/// Copies the consecutive `piece`-byte pieces of `stretch` to `out`,
/// `stride` bytes apart. A run of a tile is short (64 bytes for cam-32):
/// a copy of a length known at compile time is a few vector moves, where
/// one of a length known at run time is a call to `memcpy`, which cost
/// as much as the copying.
fn scatter_pieces(stretch: &[u8], piece: usize, out: &mut [u8], stride: usize) {
    match piece {
        16 => scatter_fixed::<16>(stretch, out, stride),
        32 => scatter_fixed::<32>(stretch, out, stride),
        64 => scatter_fixed::<64>(stretch, out, stride),
        128 => scatter_fixed::<128>(stretch, out, stride),
        256 => scatter_fixed::<256>(stretch, out, stride),
        _ => {
            for (k, p) in stretch.chunks_exact(piece.max(1)).enumerate() {
                out[k * stride..k * stride + piece].copy_from_slice(p);
            }
        }
    }
}

fn scatter_fixed<const N: usize>(stretch: &[u8], out: &mut [u8], stride: usize) {
    for (k, p) in stretch.chunks_exact(N).enumerate() {
        let to: &mut [u8; N] = (&mut out[k * stride..k * stride + N])
            .try_into()
            .expect("a slice of N bytes");
        to.copy_from_slice(p);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::layout::Dim;
    use proptest::prelude::*;

    /// Tile `slot` of an epoch, element by element from the definitions:
    /// element `w` of the tile is the input element at `t * tile + w`, or
    /// zero past the array's edge.
    pub fn naive_tile(layout: &Layout, input: &[u8], slot: u64) -> Vec<u8> {
        let dims = layout.dims();
        let rank = dims.len();
        let elem = layout.elem_size();
        let mut t = vec![0u64; rank];
        layout.tile_coords(slot, &mut t[1..]);
        let shape: Vec<u64> = dims.iter().map(|d| d.tile).collect();
        let mut out = vec![0u8; layout.tile_bytes()];
        for w in 0..layout.tile_elems() {
            let (mut rest, mut src, mut stride, mut inside) = (w, 0u64, 1u64, true);
            for d in (0..rank).rev() {
                let x = t[d] * shape[d] + rest % shape[d];
                rest /= shape[d];
                // Dimension 0 within the epoch: all of its planes are there.
                let size = if d == 0 { shape[0] } else { dims[d].size };
                inside &= x < size;
                src += x * stride;
                stride *= size;
            }
            if inside {
                let (s, o) = (src as usize * elem, w as usize * elem);
                out[o..o + elem].copy_from_slice(&input[s..s + elem]);
            }
        }
        out
    }

    fn case() -> impl Strategy<Value = (Vec<(u64, u64)>, usize, u64)> {
        (
            1usize..=4,
            prop::sample::select(vec![1usize, 2, 4, 8]),
            1u64..=5,
        )
            .prop_flat_map(|(rank, elem, tasks)| {
                // Last tiles of 8 to 128 elements give runs of the copies
                // specialized by length; others the general one.
                let last_tile = prop_oneof![Just(8u64), Just(16), Just(32), Just(64), 1u64..40];
                let inner = proptest::collection::vec((1u64..70, 1u64..6), rank.saturating_sub(2));
                (
                    inner,
                    (1u64..200, last_tile),
                    Just(elem),
                    Just(tasks),
                    1u64..4,
                )
                    .prop_map(move |(inner, last, elem, tasks, planes)| {
                        let mut dims = vec![(0, planes)];
                        dims.extend(inner);
                        if rank > 1 {
                            dims.push(last);
                        } else {
                            dims[0].1 = last.1;
                        }
                        (dims, elem, tasks)
                    })
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn gather_matches_the_definition((dims, elem, max_tiles) in case()) {
            // The gather does not depend on the shard shape: one shard
            // spans each inner dimension, so no case meets the limit on
            // shards per row (a shard of one tile would, at 69 x 69 x 199).
            let dims: Vec<Dim> = dims
                .iter()
                .enumerate()
                .map(|(d, &(s, t))| Dim::new(s, t, u64::from(d == 0)))
                .collect();
            let layout = Layout::new(&dims, elem).unwrap();
            let input: Vec<u8> = (0..layout.epoch_bytes())
                .map(|i| (i * 131 + i / 251) as u8)
                .collect();
            let stride = scratch_stride(layout.tile_bytes());
            for task in row_tasks(&layout, max_tiles).unwrap() {
                // Stale bytes in the scratch, as a worker's reused one has.
                let mut scratch = vec![0xa5u8; task.count as usize * stride];
                gather_row(&layout, &task, &input, &mut scratch);
                for k in 0..task.count {
                    let slot = task.first_slot + k;
                    let at = k as usize * stride;
                    prop_assert_eq!(
                        &scratch[at..at + layout.tile_bytes()],
                        &naive_tile(&layout, &input, slot)[..],
                        "tile {} of {:?}", slot, dims
                    );
                }
            }
        }
    }
}
