//! Pure index math: how a row-major stream of elements maps onto tiles, epochs
//! and shards. No I/O, no threads, no allocation on the hot paths.
//!
//! Conventions (used everywhere in the crate): dimension 0 is the slowest
//! (outermost), D-1 the fastest, as in a Zarr `shape` and a C array. For each
//! dimension d:
//!
//! * `tile_count[d] = ceil(size[d] / tile[d])`
//! * `shard_count[d] = ceil(tile_count[d] / tiles_per_shard[d])`
//!
//! Dimension 0 may be unbounded (`size = 0`): the stream appends along it.
//!
//! **Epochs.** The input is cut into epochs along dimension 0: epoch `e`
//! holds the `tile[0]` planes `[e·tile[0], (e+1)·tile[0])`, where a plane is
//! one index along dimension 0 (`plane_elems = ∏_{d>0} size[d]`). An epoch
//! fills `M = ∏_{d>0} tile_count[d]` tiles, the tile pool, whose slot `i` is
//! the row-major ravel of the inner tile coordinates `(t_1, …, t_{D-1})`.
//!
//! **Shard permutation.** With `s_d = t_d / tps[d]` and `w_d = t_d mod tps[d]`,
//! tile `i` goes to position `P[i] = ravel(s_1…s_{D-1}, w_1…w_{D-1})` over the
//! shape `(shard_count[1..], tps[1..])` (sharding.md). Positions run over
//! `[0, S_inner · T_inner)` with `S_inner = ∏_{d>0} shard_count[d]` active shards
//! per shard row and `T_inner = ∏_{d>0} tps[d]` chunks per shard per epoch.
//! `P` is injective; it is onto exactly when every inner dimension's tile count
//! divides into whole shards. Positions with no tile are the edge shards'
//! missing chunks: empty in the shard index.
//!
//! **Shard rows.** Epoch `e` belongs to shard row `s_0 = e / tps[0]` and fills
//! chunk slots `(e mod tps[0]) · T_inner + w` of each active shard, where `w` is
//! the position within the shard. A shard holds `tps[0] · T_inner` chunks.

mod dims;
pub mod pyramid;
mod scatter;

pub use dims::{
    Dim, LayoutError, MAX_CHUNKS_PER_ROW, MAX_CHUNKS_PER_SHARD, MAX_RANK, MAX_SHARDS_PER_ROW,
    MAX_TILE_BYTES,
};
pub use scatter::TileGather;

/// The tiling and sharding geometry of one array, with every derived count
/// computed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    dims: Vec<Dim>,
    elem_size: usize,
    /// `tile_count[d]`; for an unbounded dimension 0 this is 0.
    tile_count: Vec<u64>,
    /// Tiles per shard with `0 = all` resolved.
    tps: Vec<u64>,
    /// `shard_count[d]`; for an unbounded dimension 0 this is 0.
    shard_count: Vec<u64>,
    plane_elems: u64,
    tile_elems: u64,
    tiles_per_epoch: u64,
    shards_per_row: u64,
    chunks_per_shard_epoch: u64,
    /// The storage order's source: stored dimension `d` is dimension
    /// `source_order[d]` of the input (identity unless a storage order
    /// was given).
    source_order: Vec<usize>,
    /// Element stride in an epoch's input of one step along stored
    /// dimension `d` (dimension 0: one plane).
    src_stride: Vec<u64>,
}

impl Layout {
    /// Validates the dimensions and derives every count. `elem_size` is the
    /// element size in bytes.
    pub fn new(dims: &[Dim], elem_size: usize) -> Result<Layout, LayoutError> {
        dims::validate(dims, elem_size)?;
        let tile_count: Vec<u64> = dims.iter().map(Dim::tile_count).collect();
        let tps: Vec<u64> = dims
            .iter()
            .zip(&tile_count)
            .map(|(d, &tc)| {
                if d.tiles_per_shard == 0 {
                    tc
                } else {
                    d.tiles_per_shard
                }
            })
            .collect();
        let shard_count: Vec<u64> = tile_count
            .iter()
            .zip(&tps)
            .map(|(&tc, &p)| tc.div_ceil(p))
            .collect();
        // `validate` has checked that every product below fits in u64.
        let inner = 1..dims.len();
        let plane_elems = dims[inner.clone()].iter().map(|d| d.size).product();
        let tile_elems = dims.iter().map(|d| d.tile).product();
        let tiles_per_epoch = tile_count[inner.clone()].iter().product();
        let shards_per_row = shard_count[inner.clone()].iter().product();
        let chunks_per_shard_epoch = tps[inner].iter().product();
        let source_order: Vec<usize> = (0..dims.len()).collect();
        let src_stride = row_major_strides(dims);
        Ok(Layout {
            dims: dims.to_vec(),
            elem_size,
            tile_count,
            tps,
            shard_count,
            plane_elems,
            tile_elems,
            tiles_per_epoch,
            shards_per_row,
            chunks_per_shard_epoch,
            source_order,
            src_stride,
        })
    }

    /// This layout (in storage order) fed from input in another order:
    /// stored dimension `d` is dimension `source_order[d]` of the input,
    /// whose row-major planes the epochs still are. Dimension 0 (the axis
    /// planes arrive along) and the last dimension (the rows copied whole)
    /// must stay in place; `source_order` must be a permutation.
    pub fn with_source_order(mut self, source_order: &[usize]) -> Result<Layout, LayoutError> {
        let rank = self.rank();
        let mut seen = vec![false; rank];
        let valid = source_order.len() == rank
            && source_order
                .iter()
                .all(|&a| a < rank && !std::mem::replace(&mut seen[a], true))
            && source_order[0] == 0
            && source_order[rank - 1] == rank - 1;
        if !valid {
            return Err(LayoutError::SourceOrder(source_order.to_vec()));
        }
        // The input's dimensions: stored dimension d sits at input position
        // source_order[d].
        let mut input = self.dims.clone();
        for (d, &a) in source_order.iter().enumerate() {
            input[a] = self.dims[d];
        }
        let input_strides = row_major_strides(&input);
        self.src_stride = source_order.iter().map(|&a| input_strides[a]).collect();
        self.source_order = source_order.to_vec();
        Ok(self)
    }

    /// Stored dimension `d` is input dimension `source_order()[d]`.
    pub fn source_order(&self) -> &[usize] {
        &self.source_order
    }

    /// Element stride in an epoch's input of one step along stored
    /// dimension `d` (dimension 0: one plane).
    pub fn src_stride(&self) -> &[u64] {
        &self.src_stride
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }
    pub fn elem_size(&self) -> usize {
        self.elem_size
    }
    /// True when dimension 0 is an unbounded append axis.
    pub fn is_unbounded(&self) -> bool {
        self.dims[0].size == 0
    }
    /// `tile_count[d]` (0 for an unbounded dimension 0).
    pub fn tile_count(&self) -> &[u64] {
        &self.tile_count
    }
    /// Tiles per shard per dimension, `0 = all` resolved.
    pub fn tiles_per_shard(&self) -> &[u64] {
        &self.tps
    }
    /// `shard_count[d]` (0 for an unbounded dimension 0).
    pub fn shard_count(&self) -> &[u64] {
        &self.shard_count
    }
    /// The tile shape in elements.
    pub fn tile_shape(&self) -> Vec<u64> {
        self.dims.iter().map(|d| d.tile).collect()
    }
    /// The shard shape in elements: `tps[d] · tile[d]`.
    pub fn shard_shape(&self) -> Vec<u64> {
        self.dims
            .iter()
            .zip(&self.tps)
            .map(|(d, &p)| d.tile * p)
            .collect()
    }
    /// Elements in one plane (one index along dimension 0).
    pub fn plane_elems(&self) -> u64 {
        self.plane_elems
    }
    pub fn plane_bytes(&self) -> u64 {
        self.plane_elems * self.elem_size as u64
    }
    pub fn tile_elems(&self) -> u64 {
        self.tile_elems
    }
    pub fn tile_bytes(&self) -> usize {
        (self.tile_elems * self.elem_size as u64) as usize
    }
    /// `M`: tiles filled by one epoch.
    pub fn tiles_per_epoch(&self) -> u64 {
        self.tiles_per_epoch
    }
    /// Planes per full epoch (`tile[0]`).
    pub fn epoch_planes(&self) -> u64 {
        self.dims[0].tile
    }
    pub fn epoch_elems(&self) -> u64 {
        self.dims[0].tile * self.plane_elems
    }
    pub fn epoch_bytes(&self) -> u64 {
        self.epoch_elems() * self.elem_size as u64
    }
    /// Total input bytes of a bounded array, `None` when unbounded.
    pub fn array_bytes(&self) -> Option<u64> {
        (!self.is_unbounded()).then(|| self.dims[0].size * self.plane_bytes())
    }
    /// Number of epochs of a bounded array, `None` when unbounded.
    pub fn epoch_count(&self) -> Option<u64> {
        (!self.is_unbounded()).then(|| self.tile_count[0])
    }
    /// `S_inner`: shards active at once (one shard row along dimension 0).
    pub fn shards_per_row(&self) -> u64 {
        self.shards_per_row
    }
    /// `T_inner`: chunks one epoch adds to each active shard.
    pub fn chunks_per_shard_epoch(&self) -> u64 {
        self.chunks_per_shard_epoch
    }
    /// Chunks in a whole shard: `tps[0] · T_inner`, the index length.
    pub fn chunks_per_shard(&self) -> u64 {
        self.tps[0] * self.chunks_per_shard_epoch
    }
    /// Bytes of a serialized shard index: 16 per chunk plus the crc32c.
    pub fn index_bytes(&self) -> usize {
        self.chunks_per_shard() as usize * 16 + 4
    }
    /// Positions of the shard-major order: `S_inner · T_inner >= M`.
    pub fn shard_major_len(&self) -> u64 {
        self.shards_per_row * self.chunks_per_shard_epoch
    }
    /// Epochs per shard row (`tps[0]`).
    pub fn epochs_per_shard_row(&self) -> u64 {
        self.tps[0]
    }

    /// Inner tile coordinates `(t_1, …, t_{D-1})` of pool slot `i`.
    pub fn tile_coords(&self, i: u64, out: &mut [u64]) {
        unravel(i, &self.tile_count[1..], out);
    }

    /// The shard permutation `P[i]`: the shard-major position of pool slot `i`.
    pub fn shard_position(&self, i: u64) -> u64 {
        let inner = &self.tile_count[1..];
        let (mut shard, mut within) = (0u64, 0u64);
        let mut rest = i;
        // Unravel i from the fastest dimension while raveling the shard and
        // within-shard parts, each against its own shape.
        let (mut shard_stride, mut within_stride) = (1u64, 1u64);
        for d in (0..inner.len()).rev() {
            let t = rest % inner[d];
            rest /= inner[d];
            let p = self.tps[d + 1];
            shard += (t / p) * shard_stride;
            within += (t % p) * within_stride;
            shard_stride *= self.shard_count[d + 1];
            within_stride *= p;
        }
        shard * self.chunks_per_shard_epoch + within
    }

    /// The inverse of [`Layout::shard_position`]: the pool slot at shard-major
    /// position `j`, or `None` when `j` is a missing chunk of an edge shard.
    pub fn slot_at_position(&self, j: u64) -> Option<u64> {
        let shard = j / self.chunks_per_shard_epoch;
        let within = j % self.chunks_per_shard_epoch;
        let (mut srest, mut wrest) = (shard, within);
        let mut slot = 0u64;
        let mut stride = 1u64;
        for d in (1..self.rank()).rev() {
            let s = srest % self.shard_count[d];
            srest /= self.shard_count[d];
            let w = wrest % self.tps[d];
            wrest /= self.tps[d];
            let t = s * self.tps[d] + w;
            if t >= self.tile_count[d] {
                return None;
            }
            slot += t * stride;
            stride *= self.tile_count[d];
        }
        Some(slot)
    }

    /// The shard grid coordinate of active shard `k` in shard row `row`.
    pub fn shard_coord(&self, row: u64, k: u64, out: &mut [u64]) {
        out[0] = row;
        unravel(k, &self.shard_count[1..], &mut out[1..]);
    }

    /// The shard row that epoch `e` belongs to, and the first index slot it
    /// fills in each of that row's shards.
    pub fn epoch_in_shard_row(&self, e: u64) -> (u64, u64) {
        (
            e / self.tps[0],
            (e % self.tps[0]) * self.chunks_per_shard_epoch,
        )
    }

    /// Planes along dimension 0 covered by the first `rows` complete shard rows.
    pub fn planes_in_shard_rows(&self, rows: u64) -> u64 {
        rows * self.tps[0] * self.dims[0].tile
    }

    /// The gather plan for pool slot `i`: where each run of a tile comes from
    /// in an epoch's row-major input.
    pub fn tile_gather(&self, i: u64) -> TileGather {
        TileGather::new(self, i)
    }

    /// Tiles in a row: consecutive pool slots that differ only in their
    /// last tile coordinate (1 for rank 1). They read the same input rows,
    /// so gathering them together reads the input in order.
    pub fn tiles_per_row(&self) -> u64 {
        if self.rank() == 1 {
            1
        } else {
            self.tile_count[self.rank() - 1]
        }
    }

    /// Elements of tile `j` of a row along the last dimension, clipped at the
    /// array's edge (rank >= 2).
    pub fn row_tile_extent(&self, j: u64) -> u64 {
        let last = self.dims[self.rank() - 1];
        last.tile.min(last.size - j * last.tile)
    }
}

/// Row-major element strides of `dims` (dimension 0: one plane).
fn row_major_strides(dims: &[Dim]) -> Vec<u64> {
    let mut strides = vec![0u64; dims.len()];
    let mut s = 1u64;
    for d in (0..dims.len()).rev() {
        strides[d] = s;
        if d > 0 {
            s *= dims[d].size;
        }
    }
    strides
}

/// Row-major unravel of `i` against `shape` into `out` (same length).
pub fn unravel(mut i: u64, shape: &[u64], out: &mut [u64]) {
    for d in (0..shape.len()).rev() {
        out[d] = i % shape[d];
        i /= shape[d];
    }
}

/// Row-major ravel of `coord` against `shape`.
pub fn ravel(coord: &[u64], shape: &[u64]) -> u64 {
    coord.iter().zip(shape).fold(0, |acc, (&c, &n)| acc * n + c)
}

#[cfg(test)]
mod tests;
