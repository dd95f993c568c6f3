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
/// past [`TASK_BYTES`]: the workers meet at the end of every epoch, and
/// the fewer its tasks, the longer the others wait for the last ones (on
/// 16 cores whole rows of cam-32 gained nothing; see the README).
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

/// Splits the tile pool into row tasks of at most `max_tiles` tiles.
pub fn row_tasks(layout: &Layout, max_tiles: u64) -> Result<Vec<RowTask>> {
    let per_row = layout.tiles_per_row();
    let rows = layout.tiles_per_epoch() / per_row;
    let mut tasks = Vec::new();
    try_reserve(
        &mut tasks,
        (rows * per_row.div_ceil(max_tiles)) as usize,
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
    task.plan.for_each_run(|src, dst| {
        for k in 0..task.count as usize {
            let j = task.first_in_row as usize + k;
            let n = extent(j as u64) * elem;
            let from = (src as usize + j * step) * elem;
            let to = k * stride + dst as usize * elem;
            tiles[to..to + n].copy_from_slice(&input[from..from + n]);
        }
    });
}
