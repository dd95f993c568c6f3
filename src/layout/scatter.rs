//! The scatter of one epoch's row-major input into its tiles, expressed per
//! tile as a gather plan: a set of contiguous runs, each copied from the input
//! to the tile. The plan is pure arithmetic; the backends do the copying.

use super::{Layout, MAX_RANK};

/// Where the elements of one tile lie in an epoch's row-major input.
///
/// The tile's extent is clipped at the array's edge (edge tiles); the part
/// of the tile outside the array keeps the fill value. Along dimension 0 the
/// whole `tile[0]` planes are taken: the epoch buffer is padded to full size.
#[derive(Debug, Clone)]
pub struct TileGather {
    /// Dimensions left after merging the ones that are contiguous in both
    /// input and tile; the last is the run dimension.
    rank: usize,
    extent: [u64; MAX_RANK],
    src_stride: [u64; MAX_RANK],
    dst_stride: [u64; MAX_RANK],
    origin: u64,
    clipped: bool,
}

impl TileGather {
    pub(super) fn new(layout: &Layout, slot: u64) -> TileGather {
        let dims = layout.dims();
        let rank = dims.len();
        let mut t = [0u64; MAX_RANK];
        layout.tile_coords(slot, &mut t[1..rank]);
        let mut extent = [0u64; MAX_RANK];
        let mut src_stride = [0u64; MAX_RANK];
        let mut dst_stride = [0u64; MAX_RANK];
        let mut dst = 1u64;
        let mut origin = 0u64;
        let mut clipped = false;
        for d in (0..rank).rev() {
            let tile = dims[d].tile;
            extent[d] = if d == 0 {
                tile
            } else {
                tile.min(dims[d].size - t[d] * tile)
            };
            clipped |= extent[d] < tile;
            // The input may be in another order than the tiles (a storage
            // order): its strides come from the layout.
            src_stride[d] = layout.src_stride()[d];
            dst_stride[d] = dst;
            origin += t[d] * tile * src_stride[d];
            dst *= tile;
        }
        // Merge dimension d into d+1 where both sides are contiguous: the
        // runs then get as long as the data allows.
        let mut merged = 0usize;
        let mut out = TileGather {
            rank: 0,
            extent: [0; MAX_RANK],
            src_stride: [0; MAX_RANK],
            dst_stride: [0; MAX_RANK],
            origin,
            clipped,
        };
        for d in 0..rank {
            if merged > 0 {
                let p = merged - 1;
                let contiguous = src_stride[p] == extent[d] * src_stride[d]
                    && dst_stride[p] == extent[d] * dst_stride[d];
                if contiguous {
                    out.extent[p] *= extent[d];
                    out.src_stride[p] = src_stride[d];
                    out.dst_stride[p] = dst_stride[d];
                    continue;
                }
            }
            out.extent[merged] = extent[d];
            out.src_stride[merged] = src_stride[d];
            out.dst_stride[merged] = dst_stride[d];
            merged += 1;
        }
        out.rank = merged;
        out
    }

    /// True when the tile is cut by the array's edge: the caller must fill
    /// the tile first, since the runs do not cover all of it.
    pub fn is_clipped(&self) -> bool {
        self.clipped
    }

    /// Elements per run.
    pub fn run_len(&self) -> u64 {
        self.extent[self.rank - 1]
    }

    /// Calls `f(src, dst)` for every run, with `src` the element offset in
    /// the epoch input and `dst` the element offset in the tile; each run is
    /// [`TileGather::run_len`] elements long, contiguous on both sides.
    pub fn for_each_run(&self, mut f: impl FnMut(u64, u64)) {
        let outer = self.rank - 1;
        let mut idx = [0u64; MAX_RANK];
        let (mut src, mut dst) = (self.origin, 0u64);
        loop {
            f(src, dst);
            // Odometer over the outer dimensions, fastest first.
            let mut d = outer;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                src += self.src_stride[d];
                dst += self.dst_stride[d];
                if idx[d] < self.extent[d] {
                    break;
                }
                src -= self.src_stride[d] * self.extent[d];
                dst -= self.dst_stride[d] * self.extent[d];
                idx[d] = 0;
            }
        }
    }
}
