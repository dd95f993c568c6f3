// The tiling geometry as the kernels see it; filled by the host from
// `layout::Layout` (see src/backend/cuda/kernels.rs, which mirrors it with
// #[repr(C)]). Dimension 0 is the slowest.
#pragma once
#include <stdint.h>

#define TZ_MAX_RANK 32

struct tz_geometry {
    uint32_t rank;
    uint32_t elem_size;     // bytes per element: 1, 2, 4 or 8
    uint64_t epoch_elems;   // elements of one epoch of input
    uint64_t tile_elems;    // elements of one tile
    uint64_t tile_stride;   // elements from one tile of the pool to the next (>= tile_elems: alignment)
    uint64_t tiles_per_epoch;
    // Per dimension: the epoch's extent (tile[0] along dimension 0, size
    // elsewhere), the tile extent, and the strides that place a tile's
    // coordinate and an element's within-tile coordinate in the tile pool.
    uint64_t extent[TZ_MAX_RANK];
    uint64_t tile[TZ_MAX_RANK];
    uint64_t slot_stride[TZ_MAX_RANK];   // pool slot = sum t_d * slot_stride[d]
    uint64_t within_stride[TZ_MAX_RANK]; // offset in tile = sum n_d * within_stride[d]
};
