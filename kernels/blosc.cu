// The Blosc1 codec on the GPU, around nvCOMP's batched compressors: the
// shuffle filters before the compress call (each tile of the pool into a
// scratch pool, which nvCOMP then compresses as one Blosc1 block), and the
// framing after it (each chunk's Blosc1 header in front of its stream, the
// zlib wrapper where the inner codec is zlib, and the "memcpyed" form for
// a chunk that does not shrink). The format is c-blosc 1.x's
// (README_CHUNK_FORMAT, blosc.c): version 2, one block, one stream (the
// "don't split" flag), the block's start and the stream's size as int32s.
//
// Where the geometry allows, the scatter byte-shuffles as it writes each
// tile (kernels/scatter.cu) and the byte-shuffle kernel here does not run.
#include "shuffle.cuh"

// Whether the 8-element paths apply: 8-byte aligned tiles, planes and rows.
__device__ bool aligned_8(const uint8_t *in, uint64_t in_stride, const uint8_t *out,
                          uint64_t out_stride, uint64_t elems) {
    return (((uint64_t)in | in_stride | (uint64_t)out | out_stride | elems) % 8) == 0;
}

// Byte shuffle of `count` tiles of `elems` elements of `typesize` bytes,
// `in_stride` and `out_stride` bytes apart.
extern "C" __global__ void tz_shuffle_bytes(const uint8_t *__restrict__ in, uint64_t in_stride,
                                            uint8_t *__restrict__ out, uint64_t out_stride,
                                            uint64_t elems, uint32_t typesize, uint64_t count) {
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t first = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (aligned_8(in, in_stride, out, out_stride, elems) &&
        (typesize == 2 || typesize == 4 || typesize == 8)) {
        const uint64_t groups = elems / 8, total = count * groups;
        for (uint64_t g = first; g < total; g += step) {
            const uint64_t c = g / groups, e = (g - c * groups) * 8;
            const uint8_t *src = in + c * in_stride + e * typesize;
            uint8_t *dst = out + c * out_stride + e;
            switch (typesize) {
            case 2: shuffle_8_elements<2>(src, dst, elems); break;
            case 4: shuffle_8_elements<4>(src, dst, elems); break;
            default: shuffle_8_elements<8>(src, dst, elems); break;
            }
        }
        return;
    }
    const uint64_t total = count * elems;
    for (uint64_t g = first; g < total; g += step) {
        const uint64_t c = g / elems, e = g - c * elems;
        const uint8_t *src = in + c * in_stride + e * typesize;
        uint8_t *dst = out + c * out_stride + e;
        for (uint32_t j = 0; j < typesize; ++j) dst[j * elems] = src[j];
    }
}

// Bit shuffle as c-blosc's bitshuffle writes it: 8 * typesize rows of
// elems / 8 bytes, row 8j + b holding bit b of byte j of every element,
// element e at bit e % 8 of byte e / 8. One warp per 32 elements: a ballot
// over the warp gathers one bit of 32 elements into four output bytes.
// Tiles whose element count is not a multiple of 8 are copied as they are
// (c-blosc 1.x leaves such blocks unshuffled too).
extern "C" __global__ void tz_bitshuffle(const uint8_t *__restrict__ in, uint64_t in_stride,
                                         uint8_t *__restrict__ out, uint64_t out_stride,
                                         uint64_t elems, uint32_t typesize, uint64_t count) {
    const unsigned lane = threadIdx.x % 32;
    const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
    const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
    if (elems % 8 != 0) {
        const uint64_t bytes = elems * typesize;
        for (uint64_t w = warp; w < count; w += warps)
            for (uint64_t b = lane; b < bytes; b += 32) out[w * out_stride + b] = in[w * in_stride + b];
        return;
    }
    const uint64_t row = elems / 8;
    if (((uint64_t)in | in_stride) % 8 == 0 &&
        (typesize == 1 || typesize == 2 || typesize == 4 || typesize == 8)) {
        const uint64_t step = (uint64_t)gridDim.x * blockDim.x, total = count * row;
        for (uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; g < total; g += step) {
            const uint64_t c = g / row, k = g - c * row;
            const uint8_t *src = in + c * in_stride + 8 * k * typesize;
            uint8_t *dst = out + c * out_stride;
            switch (typesize) {
            case 1: bitshuffle_8_elements<1>(src, dst, row, k); break;
            case 2: bitshuffle_8_elements<2>(src, dst, row, k); break;
            case 4: bitshuffle_8_elements<4>(src, dst, row, k); break;
            default: bitshuffle_8_elements<8>(src, dst, row, k); break;
            }
        }
        return;
    }
    const uint64_t groups = (elems + 31) / 32;
    for (uint64_t g = warp; g < count * groups; g += warps) {
        const uint64_t c = g / groups, e0 = (g - c * groups) * 32, e = e0 + lane;
        const uint8_t *src = in + c * in_stride;
        uint8_t *dst = out + c * out_stride;
        const uint64_t k = e0 / 8 + lane; // the output byte this lane writes (lanes 0-3)
        for (uint32_t j = 0; j < typesize; ++j) {
            const unsigned byte = e < elems ? src[e * typesize + j] : 0;
            for (unsigned b = 0; b < 8; ++b) {
                const unsigned mask = __ballot_sync(0xffffffffu, (byte >> b) & 1u);
                if (lane < 4 && k < row) dst[(8 * j + b) * row + k] = (uint8_t)(mask >> (8 * lane));
            }
        }
    }
}

__device__ void put_le32(uint8_t *p, uint32_t v) {
    p[0] = v & 0xff;
    p[1] = (v >> 8) & 0xff;
    p[2] = (v >> 16) & 0xff;
    p[3] = v >> 24;
}

// Adler-32 of `n` bytes, by the whole block (blockDim.x a power of two, at
// most 1024); the result is valid in thread 0.
__device__ uint32_t block_adler32(const uint8_t *p, uint64_t n) {
    const uint64_t MOD = 65521;
    __shared__ uint64_t s1[1024], s2[1024];
    uint64_t a = 0, b = 0;
    // a = 1 + sum d_i, b = n + sum (n - i) d_i, both mod 65521.
    for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const uint64_t d = p[i];
        a += d;
        b += ((n - i) % MOD) * d;
        if ((i / blockDim.x) % 4096 == 4095) {
            a %= MOD;
            b %= MOD;
        }
    }
    s1[threadIdx.x] = a % MOD;
    s2[threadIdx.x] = b % MOD;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            s1[threadIdx.x] = (s1[threadIdx.x] + s1[threadIdx.x + s]) % MOD;
            s2[threadIdx.x] = (s2[threadIdx.x] + s2[threadIdx.x + s]) % MOD;
        }
        __syncthreads();
    }
    const uint32_t lo = (uint32_t)((1 + s1[0]) % MOD), hi = (uint32_t)((n % MOD + s2[0]) % MOD);
    __syncthreads(); // the shared arrays are reused by the next chunk
    return (hi << 16) | lo;
}

// Frames each of `count` chunks in place. Chunk i's slot starts at
// chunks + i * chunk_stride; nvCOMP wrote its stream of sizes[i] bytes at
// `lead` in the slot. The finished chunk starts at lead - H (H: the 16-byte
// header, the block start and the stream size, and for zlib the stream's
// 2-byte header) and sizes[i] becomes its length. A chunk that would not be
// smaller than 16 + tile_bytes becomes "memcpyed": the header and the tile
// as it was before any shuffle, read from `raw` (byte-shuffled,
// `raw_filter` TZ_FILTER_BYTES, where the scatter shuffled). For zlib,
// the Adler-32 of what nvCOMP compressed (`packed`) follows the stream.
// `mode`: bit 0 zlib, bit 1 store every chunk memcpyed (level 0: no stream
// was made, `sizes` is not read). One block per chunk.
extern "C" __global__ void tz_blosc_frame(uint8_t *chunks, uint64_t chunk_stride, uint64_t lead,
                                          uint64_t *sizes, const uint8_t *raw, uint64_t raw_stride,
                                          uint32_t raw_filter,
                                          const uint8_t *packed, uint64_t packed_stride,
                                          uint64_t tile_bytes, uint32_t flags, uint32_t typesize,
                                          uint32_t mode, uint64_t count) {
    const bool zlib = mode & 1, store = mode & 2;
    const uint64_t H = 24 + (zlib ? 2 : 0), trailer = zlib ? 4 : 0;
    for (uint64_t i = blockIdx.x; i < count; i += gridDim.x) {
        uint8_t *slot = chunks + i * chunk_stride;
        uint8_t *start = slot + lead - H;
        const uint64_t stream = store ? 0 : sizes[i];
        const uint64_t total = H + stream + trailer;
        __syncthreads(); // every thread has read sizes[i] before thread 0 rewrites it
        const bool memcpyed = store || total >= 16 + tile_bytes;
        if (memcpyed) {
            const uint8_t *src = raw + i * raw_stride;
            const uint64_t elems = tile_bytes / typesize;
            for (uint64_t b = threadIdx.x; b < tile_bytes; b += blockDim.x)
                start[16 + b] = unshuffled_byte(src, b, elems, typesize, raw_filter);
        }
        uint32_t adler = 0;
        if (zlib && !memcpyed) adler = block_adler32(packed + i * packed_stride, tile_bytes);
        if (threadIdx.x == 0) {
            const uint64_t size = memcpyed ? 16 + tile_bytes : total;
            start[0] = 2; // Blosc1 format version
            start[1] = 1; // the inner codec's format version (1 for all)
            start[2] = (uint8_t)(flags | (memcpyed ? 0x2 : 0));
            start[3] = (uint8_t)typesize;
            put_le32(start + 4, (uint32_t)tile_bytes);
            put_le32(start + 8, (uint32_t)tile_bytes); // one block
            put_le32(start + 12, (uint32_t)size);
            if (!memcpyed) {
                put_le32(start + 16, 20); // the block starts after its start
                put_le32(start + 20, (uint32_t)(stream + (zlib ? 6 : 0)));
                if (zlib) {
                    start[24] = 0x78; // deflate, 32 KiB window
                    start[25] = 0x01; // no dictionary, check bits
                    uint8_t *t = slot + lead + stream;
                    t[0] = adler >> 24;
                    t[1] = (adler >> 16) & 0xff;
                    t[2] = (adler >> 8) & 0xff;
                    t[3] = adler & 0xff;
                }
            }
            sizes[i] = size;
        }
    }
}
