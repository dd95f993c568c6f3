// Scatter: row-major input epochs into the tile pool. One thread per
// element; consecutive threads read consecutive elements (coalesced loads),
// and write runs along the last dimension of each tile.
#include "layout.cuh"

template <typename T>
__device__ void scatter_elems(const T *__restrict__ in, T *__restrict__ out,
                              const tz_geometry &g, uint64_t total) {
    const uint64_t pool_elems = g.tiles_per_epoch * g.tile_stride;
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total;
         e += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t epoch = e / g.epoch_elems;
        uint64_t rest = e - epoch * g.epoch_elems;
        uint64_t slot = 0, within = 0;
        for (int d = (int)g.rank - 1; d >= 0; --d) {
            uint64_t x = rest % g.extent[d];
            rest /= g.extent[d];
            uint64_t t = x / g.tile[d];
            slot += t * g.slot_stride[d];
            within += (x - t * g.tile[d]) * g.within_stride[d];
        }
        out[epoch * pool_elems + slot * g.tile_stride + within] = in[e];
    }
}

// `epochs` whole epochs of input into `epochs` tile pools, back to back.
extern "C" __global__ void tz_scatter(const void *in, void *out, tz_geometry g, uint64_t epochs) {
    const uint64_t total = epochs * g.epoch_elems;
    switch (g.elem_size) {
    case 1: scatter_elems((const uint8_t *)in, (uint8_t *)out, g, total); break;
    case 2: scatter_elems((const uint16_t *)in, (uint16_t *)out, g, total); break;
    case 4: scatter_elems((const uint32_t *)in, (uint32_t *)out, g, total); break;
    default: scatter_elems((const uint64_t *)in, (uint64_t *)out, g, total); break;
    }
}
