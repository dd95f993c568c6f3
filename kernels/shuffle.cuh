// The blosc shuffles of 8 elements at a time, shared by the shuffle kernels
// (kernels/blosc.cu) and the scatter, which byte-shuffles as it writes each
// tile where the geometry allows (kernels/scatter.cu).
#pragma once
#include <stdint.h>

// Byte shuffle: byte j of element e goes to plane j, at e.
//
// Where every tile and plane is aligned (the pools are), a thread takes 8
// elements: TS 8-byte loads, and one 8-byte store per plane. Byte-wise, a
// warp moved 32 bytes per instruction, and the shuffle, beside nvCOMP on
// the GPU, slowed the compressor down.

// Eight elements of TS bytes, loaded as TS words from 8-byte aligned
// `src`; `byte_plane(j)` gathers byte j of each, element i's at byte i.
template <int TS> struct EightElements {
    uint64_t w[TS];
    __device__ explicit EightElements(const uint8_t *src) {
#pragma unroll
        for (int q = 0; q < TS; ++q) w[q] = ((const uint64_t *)src)[q];
    }
    __device__ uint64_t byte_plane(int j) const {
        uint64_t plane = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int at = i * TS + j; // byte j of element i
            plane |= ((w[at / 8] >> (8 * (at % 8))) & 0xffu) << (8 * i);
        }
        return plane;
    }
};

template <int TS>
__device__ void shuffle_8_elements(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst,
                                   uint64_t elems) {
    const EightElements<TS> e(src);
#pragma unroll
    for (int j = 0; j < TS; ++j) *(uint64_t *)(dst + j * elems) = e.byte_plane(j);
}

// The 8 x 8 bit matrix whose row i is byte i of `x`, transposed: bit i of
// byte b of the result is bit b of byte i (Hacker's Delight, 7-3).
__device__ uint64_t transpose_8x8(uint64_t x) {
    uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
    x = x ^ t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
    x = x ^ t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
    return x ^ t ^ (t << 28);
}

// Bit shuffle of 8 elements (bytes 8k.. of every row): byte j of the 8
// elements gathered into a word, transposed, and its byte b stored at row
// 8j + b. Adjacent threads write adjacent bytes of each row.
template <int TS>
__device__ void bitshuffle_8_elements(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst,
                                      uint64_t row, uint64_t k) {
    const EightElements<TS> e(src);
#pragma unroll
    for (int j = 0; j < TS; ++j) {
        const uint64_t x = transpose_8x8(e.byte_plane(j));
#pragma unroll
        for (int b = 0; b < 8; ++b) dst[(8 * j + b) * row + k] = (uint8_t)(x >> (8 * b));
    }
}


// Whether the scatter byte-shuffled a tile: the `filter` argument of the
// scatter and of the framing (`tz_blosc_frame`'s `raw_filter`).
#define TZ_FILTER_NONE 0
#define TZ_FILTER_BYTES 1

// Byte `b` of a tile of `elems` elements of `typesize` bytes as it was
// before `filter` shuffled it into `t`.
__device__ uint8_t unshuffled_byte(const uint8_t *t, uint64_t b, uint64_t elems, uint32_t typesize,
                                   uint32_t filter) {
    if (filter == TZ_FILTER_BYTES) {
        const uint64_t e = b / typesize, j = b - e * typesize;
        return t[j * elems + e];
    }
    return t[b];
}
