// Scatter: row-major input epochs into the tile pool. One warp per input
// row (a run along the last dimension): the row's place in the pool is
// worked out once per row, not per element, and the lanes then copy the row
// in 8-byte words where the tiles' rows allow it, so that both the loads
// and the stores are coalesced runs.
//
// With a `filter`, the scatter also byte-shuffles as blosc's filter does
// (the tile pool then holds the shuffled tiles the compressor reads): 8
// elements a lane, each byte plane's 8 bytes stored at their place. The
// host asks for it only where a row, a tile's row and the pool's tile
// stride hold whole groups of 8 elements. (A bit shuffle here was slower
// than the scatter and the bit-shuffle kernel apart: its stores of 4 bytes
// per tile and bit row cost many more L2 writes than either kernel's.)
#include "layout.cuh"
#include "shuffle.cuh"

// Copies one row of `units` units (U) to the pool: unit `x` goes to tile
// `x / tile_units`, `tile_jump` units apart, at `x % tile_units` in it.
template <typename U>
__device__ void copy_row(const U *__restrict__ in, U *__restrict__ out, uint64_t units,
                         uint64_t tile_units, uint64_t tile_jump, unsigned lane) {
    for (uint64_t x = lane; x < units; x += 32) {
        uint64_t t = x / tile_units;
        out[t * tile_jump + (x - t * tile_units)] = in[x];
    }
}

// Byte-shuffles one row of `groups` groups of 8 elements (TS bytes each)
// into the tiles: group `x` goes to tile `x / tile_groups` (`tile_jump`
// bytes apart from `tile`), at element `within + 8 * (x % tile_groups)`.
template <int TS>
__device__ void shuffle_row(const uint8_t *__restrict__ in, uint8_t *__restrict__ tile,
                            uint64_t groups, uint64_t tile_groups, uint64_t tile_jump,
                            uint64_t within, uint64_t tile_elems, unsigned lane) {
    for (uint64_t x = lane; x < groups; x += 32) {
        const uint64_t t = x / tile_groups;
        const uint64_t p = within + (x - t * tile_groups) * 8;
        shuffle_8_elements<TS>(in + x * 8 * TS, tile + t * tile_jump + p, tile_elems);
    }
}

// `epochs` whole epochs of input into `epochs` tile pools, back to back,
// byte-shuffled where `filter` is TZ_FILTER_BYTES.
extern "C" __global__ void tz_scatter(const void *in, void *out, tz_geometry g, uint64_t epochs,
                                      uint32_t filter) {
    const int last = (int)g.rank - 1;
    const uint64_t elem = g.elem_size;
    const uint64_t width = g.extent[last];
    const uint64_t rows_per_epoch = g.epoch_elems / width;
    const uint64_t rows = epochs * rows_per_epoch;
    const uint64_t pool_elems = g.tiles_per_epoch * g.tile_stride;
    // 8-byte words when a row, a tile's row and the pool's tile stride are
    // whole words (the pool itself is aligned), else whole elements.
    const bool words = (width * elem) % 8 == 0 && (g.tile[last] * elem) % 8 == 0 &&
                       (g.tile_stride * elem) % 8 == 0;
    const uint64_t unit = words ? 8 : elem;
    const uint64_t units = width * elem / unit;
    const uint64_t tile_units = g.tile[last] * elem / unit;
    const uint64_t tile_jump = g.slot_stride[last] * g.tile_stride * elem / unit;

    const unsigned lane = threadIdx.x % 32;
    const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
    for (uint64_t r = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; r < rows;
         r += warps) {
        uint64_t epoch = r / rows_per_epoch;
        uint64_t rest = r - epoch * rows_per_epoch;
        // The row's coordinates along every dimension but the last.
        uint64_t slot = 0, within = 0;
        for (int d = last - 1; d >= 0; --d) {
            uint64_t x = rest % g.extent[d];
            rest /= g.extent[d];
            uint64_t t = x / g.tile[d];
            slot += t * g.slot_stride[d];
            within += (x - t * g.tile[d]) * g.within_stride[d];
        }
        if (filter != TZ_FILTER_NONE) {
            const uint8_t *row = (const uint8_t *)in + r * width * elem;
            uint8_t *tile = (uint8_t *)out + (epoch * pool_elems + slot * g.tile_stride) * elem;
            const uint64_t groups = width / 8, tile_groups = g.tile[last] / 8;
            const uint64_t jump = g.slot_stride[last] * g.tile_stride * elem;
            switch (elem) {
            case 2: shuffle_row<2>(row, tile, groups, tile_groups, jump, within, g.tile_elems, lane); break;
            case 4: shuffle_row<4>(row, tile, groups, tile_groups, jump, within, g.tile_elems, lane); break;
            default: shuffle_row<8>(row, tile, groups, tile_groups, jump, within, g.tile_elems, lane); break;
            }
            continue;
        }
        const uint64_t src = r * width * elem / unit;
        const uint64_t dst = (epoch * pool_elems + slot * g.tile_stride + within) * elem / unit;
        switch (unit) {
        case 1: copy_row((const uint8_t *)in + src, (uint8_t *)out + dst, units, tile_units, tile_jump, lane); break;
        case 2: copy_row((const uint16_t *)in + src, (uint16_t *)out + dst, units, tile_units, tile_jump, lane); break;
        case 4: copy_row((const uint32_t *)in + src, (uint32_t *)out + dst, units, tile_units, tile_jump, lane); break;
        default: copy_row((const uint64_t *)in + src, (uint64_t *)out + dst, units, tile_units, tile_jump, lane); break;
        }
    }
}
