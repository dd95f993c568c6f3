//! One dimension of the array and the rules a set of dimensions must obey.

/// Most dimensions an array may have.
pub const MAX_RANK: usize = 32;

/// Largest tile in bytes: compressors address a chunk with 32-bit sizes.
pub const MAX_TILE_BYTES: u64 = (1 << 31) - 1;

/// Most chunks in one shard (padding past the array's edge included): its
/// index is then at most 16 MiB, written whole with every shard.
pub const MAX_CHUNKS_PER_SHARD: u64 = 1 << 20;

/// Most shards in one shard row, the shards filled at once: each is a file
/// written when the row completes.
pub const MAX_SHARDS_PER_ROW: u64 = 1 << 16;

/// Most chunks in one shard row (shards per row times chunks per shard): the
/// host keeps an index entry for each (16 bytes) while the row fills, and
/// the backends a few words per position of an epoch.
pub const MAX_CHUNKS_PER_ROW: u64 = 1 << 24;

/// One dimension: its extent, its tile extent and its tiles per shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim {
    /// Extent in elements; 0 only on dimension 0, meaning unbounded.
    pub size: u64,
    /// Tile (Zarr inner chunk) extent in elements, at least 1.
    pub tile: u64,
    /// Tiles per shard along this dimension; 0 means all of them.
    pub tiles_per_shard: u64,
}

impl Dim {
    pub fn new(size: u64, tile: u64, tiles_per_shard: u64) -> Dim {
        Dim {
            size,
            tile,
            tiles_per_shard,
        }
    }

    /// `ceil(size / tile)`; 0 for an unbounded dimension.
    pub fn tile_count(&self) -> u64 {
        self.size.div_ceil(self.tile)
    }
}

/// A rule broken by a set of dimensions. `dim` is the index of the
/// offending dimension where there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("rank must be 1 to {MAX_RANK}, got {0}")]
    Rank(usize),
    #[error(
        "dimensions[{0}].size: must be at least 1 (only dimension 0 may be 0, meaning unbounded)"
    )]
    ZeroSize(usize),
    #[error("dimensions[{0}].tile: must be at least 1")]
    ZeroTile(usize),
    #[error("dimensions[0].tiles_per_shard: 0 (all tiles) needs a bounded size; an unbounded dimension needs an explicit count")]
    UnboundedAllTiles,
    #[error("dimensions[{0}].size: the element count of the array overflows 64 bits")]
    ElementsOverflow(usize),
    #[error("dimensions[{0}].size: the byte count of the array overflows 64 bits")]
    BytesOverflow(usize),
    #[error("dimensions[{dim}].tile: a tile of {bytes} bytes exceeds the limit of {MAX_TILE_BYTES} bytes (2^31-1)")]
    TileTooLarge { dim: usize, bytes: u128 },
    #[error("dimensions[{dim}].tiles_per_shard: a shard would hold {chunks} chunks (edge padding included), more than the limit of {MAX_CHUNKS_PER_SHARD}")]
    ShardTooLarge { dim: usize, chunks: u128 },
    #[error("dimensions[{dim}].tiles_per_shard: a shard row would hold {shards} shards, more than the limit of {MAX_SHARDS_PER_ROW}; use more tiles per shard")]
    TooManyShards { dim: usize, shards: u128 },
    #[error("dimensions[{dim}].tiles_per_shard: a shard row would hold {chunks} chunks ({shards} shards of {per_shard}), more than the limit of {MAX_CHUNKS_PER_ROW}")]
    RowTooLarge {
        dim: usize,
        chunks: u128,
        shards: u128,
        per_shard: u128,
    },
    #[error(
        "dimensions[{0}]: one epoch (tile[0] planes) or its tile pool overflows the address space"
    )]
    EpochTooLarge(usize),
    #[error("storage_order: {0:?} is not a permutation that keeps dimension 0 first and the last dimension last")]
    SourceOrder(Vec<usize>),
}

/// Checks every rule and that every product the layout derives fits.
pub(crate) fn validate(dims: &[Dim], elem_size: usize) -> Result<(), LayoutError> {
    if dims.is_empty() || dims.len() > MAX_RANK {
        return Err(LayoutError::Rank(dims.len()));
    }
    for (d, dim) in dims.iter().enumerate() {
        if dim.size == 0 && d > 0 {
            return Err(LayoutError::ZeroSize(d));
        }
        if dim.tile == 0 {
            return Err(LayoutError::ZeroTile(d));
        }
    }
    if dims[0].size == 0 && dims[0].tiles_per_shard == 0 {
        return Err(LayoutError::UnboundedAllTiles);
    }
    let elem = elem_size as u128;
    // Element and byte counts of the whole array (an unbounded dimension
    // counts as one epoch: the stream itself may run on for ever).
    let mut elems: u128 = 1;
    for (d, dim) in dims.iter().enumerate() {
        let extent = if dim.size == 0 { dim.tile } else { dim.size };
        elems = elems.saturating_mul(extent as u128);
        if elems > u64::MAX as u128 {
            return Err(LayoutError::ElementsOverflow(d));
        }
        if elems * elem > u64::MAX as u128 {
            return Err(LayoutError::BytesOverflow(d));
        }
    }
    let mut tile_bytes = elem;
    for (d, dim) in dims.iter().enumerate() {
        tile_bytes = tile_bytes.saturating_mul(dim.tile as u128);
        if tile_bytes > MAX_TILE_BYTES as u128 {
            return Err(LayoutError::TileTooLarge {
                dim: d,
                bytes: tile_bytes,
            });
        }
    }
    // One epoch of input and its padded tile pool must be addressable.
    let mut epoch: u128 = dims[0].tile as u128 * elem;
    let mut pool: u128 = tile_bytes;
    for (d, dim) in dims.iter().enumerate().skip(1) {
        epoch = epoch.saturating_mul(dim.size as u128);
        pool = pool.saturating_mul(dim.tile_count() as u128);
        if epoch > isize::MAX as u128 || pool > isize::MAX as u128 {
            return Err(LayoutError::EpochTooLarge(d));
        }
    }
    check_shard_counts(dims)
}

/// The shard and shard-row limits: every per-chunk table the stream keeps
/// is sized by them, so a legal but absurd shape is refused here instead of
/// stalling or exhausting memory later.
fn check_shard_counts(dims: &[Dim]) -> Result<(), LayoutError> {
    let (mut per_shard, mut shards): (u128, u128) = (1, 1);
    for (d, dim) in dims.iter().enumerate() {
        let tps = if dim.tiles_per_shard == 0 {
            dim.tile_count()
        } else {
            dim.tiles_per_shard
        };
        per_shard = per_shard.saturating_mul(tps as u128);
        if per_shard > MAX_CHUNKS_PER_SHARD as u128 {
            return Err(LayoutError::ShardTooLarge {
                dim: d,
                chunks: per_shard,
            });
        }
        if d > 0 {
            shards = shards.saturating_mul(dim.tile_count().div_ceil(tps) as u128);
            if shards > MAX_SHARDS_PER_ROW as u128 {
                return Err(LayoutError::TooManyShards { dim: d, shards });
            }
        }
        let chunks = per_shard * shards;
        if chunks > MAX_CHUNKS_PER_ROW as u128 {
            return Err(LayoutError::RowTooLarge {
                dim: d,
                chunks,
                shards,
                per_shard,
            });
        }
    }
    Ok(())
}
