// Aggregate by shard (sharding.md): permute the compressed sizes into
// shard-major order, exclusive scan into offsets, gather the chunks densely.
// Work covers `epochs` epochs at once: tile i of the batch is tile i % M of
// epoch i / M, and its position is (i / M) * L + perm[i % M], L being the
// shard-major length of one epoch.
#include <stdint.h>

// Pass 1. `sizes_out` (epochs * L entries) must be zeroed first: positions
// without a tile (edge shards) keep size 0.
extern "C" __global__ void tz_permute_sizes(const uint64_t *__restrict__ sizes,
                                            const uint64_t *__restrict__ perm,
                                            uint64_t *__restrict__ sizes_out,
                                            uint64_t tiles_per_epoch, uint64_t len_per_epoch,
                                            uint64_t count) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < count;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t epoch = i / tiles_per_epoch;
        uint64_t pos = epoch * len_per_epoch + perm[i - epoch * tiles_per_epoch];
        sizes_out[pos] = sizes[i];
    }
}

// Pass 2. In-place exclusive scan of n values followed by the total at
// [n]: offsets[0..n] in, offsets[0..=n] out. One block of 1024 threads
// walking the array in chunks; n is thousands to a few hundred thousand.
extern "C" __global__ void tz_exclusive_scan(uint64_t *offsets, uint64_t n) {
    __shared__ uint64_t part[1024];
    __shared__ uint64_t carry;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (uint64_t base = 0; base < n; base += blockDim.x) {
        uint64_t i = base + threadIdx.x;
        uint64_t v = i < n ? offsets[i] : 0;
        part[threadIdx.x] = v;
        __syncthreads();
        // Hillis-Steele inclusive scan in shared memory.
        for (unsigned s = 1; s < blockDim.x; s <<= 1) {
            uint64_t add = threadIdx.x >= s ? part[threadIdx.x - s] : 0;
            __syncthreads();
            part[threadIdx.x] += add;
            __syncthreads();
        }
        if (i < n) offsets[i] = carry + part[threadIdx.x] - v;
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) carry += part[threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.x == 0) offsets[n] = carry;
}

// Copies `n` bytes from `src` to `dst` with the threads of a block. The
// bulk goes in 8-byte words stored aligned: each word of the destination
// joins two aligned words of the source (a funnel shift), since the
// source's alignment differs from the destination's by any amount. An
// aligned source word read holds at least one byte of the chunk, so no
// read leaves the (8-byte multiple) allocation. A byte-wise copy moved 32
// bytes per warp instruction, and the gather sat between two batches'
// compressions.
__device__ void copy_chunk(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst,
                           uint64_t n) {
    const uint64_t to_aligned = (8 - ((uint64_t)dst & 7)) & 7;
    const uint64_t head = to_aligned < n ? to_aligned : n;
    if (threadIdx.x < head) dst[threadIdx.x] = src[threadIdx.x];
    src += head;
    dst += head;
    n -= head;
    const uint64_t words = n / 8;
    const unsigned shift = (unsigned)((uint64_t)src & 7);
    const uint64_t *base = (const uint64_t *)(src - shift);
    uint64_t *out = (uint64_t *)dst;
    if (shift == 0) {
        for (uint64_t k = threadIdx.x; k < words; k += blockDim.x) out[k] = base[k];
    } else {
        const unsigned lo = 8 * shift, hi = 64 - 8 * shift;
        for (uint64_t k = threadIdx.x; k < words; k += blockDim.x)
            out[k] = (base[k] >> lo) | (base[k + 1] << hi);
    }
    for (uint64_t b = words * 8 + threadIdx.x; b < n; b += blockDim.x) dst[b] = src[b];
}

// Pass 3. One block per tile copies its compressed bytes from the padded
// pool (stride `stride`) to its offset in the dense output.
extern "C" __global__ void tz_gather_chunks(const uint8_t *__restrict__ pool, uint64_t stride,
                                            const uint64_t *__restrict__ sizes,
                                            const uint64_t *__restrict__ perm,
                                            const uint64_t *__restrict__ offsets,
                                            uint8_t *__restrict__ out, uint64_t tiles_per_epoch,
                                            uint64_t len_per_epoch, uint64_t count) {
    for (uint64_t i = blockIdx.x; i < count; i += gridDim.x) {
        uint64_t epoch = i / tiles_per_epoch;
        uint64_t pos = epoch * len_per_epoch + perm[i - epoch * tiles_per_epoch];
        copy_chunk(pool + i * stride, out + offsets[pos], sizes[i]);
    }
}
