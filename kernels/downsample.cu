// Pyramid level 1 from level 0's planes while they are on the device: the
// CPU twin is src/backend/cpu/downsample (the arithmetic both follow is
// documented there). One thread per output element; its window is read in
// row-major order, the planes along dimension 0 slowest.
#include <stdint.h>

#define TZ_MAX_INNER 8
#define TZ_MAX_WINDOW 64

struct tz_reduction {
    uint32_t rank;           // dimensions of a plane (all but dimension 0)
    uint32_t dtype;          // the tz_dtype order: u8 u16 u32 u64 i8 i16 i32 i64 f16 f32 f64
    uint32_t method;         // 0 mean, 1 min, 2 max, 3 median, 4 decimate
    uint32_t window_planes;  // 1, or 2 when dimension 0 is halved
    uint64_t in_size[TZ_MAX_INNER];
    uint64_t out_size[TZ_MAX_INNER];
    uint32_t downsample[TZ_MAX_INNER];
    uint64_t in_plane_elems;
    uint64_t out_plane_elems;
    uint64_t out_planes;
};

// IEEE binary16, by its bits (no fp16 header needed): exact conversion to
// f64, and f64 to binary16 rounded to nearest, ties to even.
struct h16 {
    uint16_t bits;
};

__device__ inline double h16_to_double(h16 h) {
    uint64_t sign = (uint64_t)(h.bits >> 15) << 63;
    uint32_t exp = (h.bits >> 10) & 0x1f, mant = h.bits & 0x3ff;
    if (exp == 31)  // inf or NaN, payload kept
        return __longlong_as_double((long long)(sign | (0x7ffULL << 52) | ((uint64_t)mant << 42)));
    double v = exp == 0 ? ldexp((double)mant, -24) : ldexp((double)(mant | 0x400), (int)exp - 25);
    return sign ? -v : v;
}

__device__ inline h16 double_to_h16(double d) {
    uint64_t b = (uint64_t)__double_as_longlong(d);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    int exp = (int)((b >> 52) & 0x7ff);
    uint64_t mant = b & 0xfffffffffffffULL;
    if (exp == 0x7ff)
        return h16{(uint16_t)(sign | 0x7c00 | (mant ? (0x200 | (uint16_t)(mant >> 42)) : 0))};
    int e = exp - 1023 + 15;
    if (e >= 31) return h16{(uint16_t)(sign | 0x7c00)};
    uint64_t m_full = exp == 0 ? mant : (mant | (1ULL << 52));
    int shift = 42 + (e >= 1 ? 0 : 1 - e);
    if (shift >= 64) return h16{sign};
    uint64_t m = m_full >> shift;
    uint64_t rem = m_full & ((1ULL << shift) - 1), half = 1ULL << (shift - 1);
    uint32_t h = e >= 1 ? (((uint32_t)e << 10) | (uint32_t)(m & 0x3ff)) : (uint32_t)m;
    if (rem > half || (rem == half && (h & 1))) h += 1;  // a carry moves up the exponent
    return h16{(uint16_t)(sign | h)};
}

// Ordering and mean per element type. Floats compare by IEEE 754
// totalOrder, as the f64 of their value (f16 and f32 convert exactly).
template <typename T> struct Num {
    static __device__ bool less(T a, T b) { return a < b; }
};
__device__ inline int64_t total_key(double d) {
    int64_t b = __double_as_longlong(d);
    return b ^ (int64_t)((uint64_t)(b >> 63) >> 1);
}
template <> struct Num<float> {
    static __device__ bool less(float a, float b) { return total_key((double)a) < total_key((double)b); }
};
template <> struct Num<double> {
    static __device__ bool less(double a, double b) { return total_key(a) < total_key(b); }
};
template <> struct Num<h16> {
    static __device__ bool less(h16 a, h16 b) {
        return total_key(h16_to_double(a)) < total_key(h16_to_double(b));
    }
};

// The integer mean: exact sum, rounded to nearest, ties to even.
template <typename S> __device__ S round_half_even(S sum, S n) {
    S q = sum / n, r = sum % n;
    if (r < 0) { q -= 1; r += n; }  // floor division
    if (2 * r > n || (2 * r == n && (q & 1) != 0)) q += 1;
    return q;
}

template <typename T> struct Mean {
    long long sum = 0;
    __device__ void add(T v) { sum += (long long)v; }
    __device__ T get(uint32_t n) const { return (T)round_half_even<long long>(sum, n); }
};
template <> struct Mean<uint64_t> {
    __int128 sum = 0;
    __device__ void add(uint64_t v) { sum += (__int128)v; }
    __device__ uint64_t get(uint32_t n) const { return (uint64_t)round_half_even<__int128>(sum, n); }
};
template <> struct Mean<int64_t> {
    __int128 sum = 0;
    __device__ void add(int64_t v) { sum += (__int128)v; }
    __device__ int64_t get(uint32_t n) const { return (int64_t)round_half_even<__int128>(sum, n); }
};
template <> struct Mean<float> {
    double sum = 0.0;
    __device__ void add(float v) { sum += (double)v; }
    __device__ float get(uint32_t n) const { return (float)(sum / (double)n); }
};
template <> struct Mean<double> {
    double sum = 0.0;
    __device__ void add(double v) { sum += v; }
    __device__ double get(uint32_t n) const { return sum / (double)n; }
};
template <> struct Mean<h16> {
    double sum = 0.0;
    __device__ void add(h16 v) { sum += h16_to_double(v); }
    __device__ h16 get(uint32_t n) const { return double_to_h16(sum / (double)n); }
};

template <typename T>
__device__ void reduce_one(const T *__restrict__ in, T *__restrict__ out, const tz_reduction &r,
                           uint64_t idx) {
    const uint64_t p = idx / r.out_plane_elems;
    uint64_t e = idx - p * r.out_plane_elems;
    uint64_t first[TZ_MAX_INNER], count[TZ_MAX_INNER], stride[TZ_MAX_INNER];
    uint64_t s = 1;
    for (int d = (int)r.rank - 1; d >= 0; --d) {
        uint64_t c = e % r.out_size[d];
        e /= r.out_size[d];
        if (r.downsample[d]) {
            first[d] = 2 * c;
            count[d] = (2 * c + 2 <= r.in_size[d]) ? 2 : 1;
        } else {
            first[d] = c;
            count[d] = 1;
        }
        stride[d] = s;
        s *= r.in_size[d];
    }
    T window[TZ_MAX_WINDOW];
    uint32_t n = 0;
    Mean<T> mean;
    T best = T();
    bool have = false;
    uint64_t idx_d[TZ_MAX_INNER];
    for (uint32_t q = 0; q < r.window_planes; ++q) {
        const T *plane = in + (p * r.window_planes + q) * r.in_plane_elems;
        for (uint32_t d = 0; d < r.rank; ++d) idx_d[d] = 0;
        for (;;) {
            uint64_t at = 0;
            for (uint32_t d = 0; d < r.rank; ++d) at += (first[d] + idx_d[d]) * stride[d];
            T v = plane[at];
            switch (r.method) {
            case 0: mean.add(v); break;
            case 1: if (!have || Num<T>::less(v, best)) best = v; break;
            case 2: if (!have || Num<T>::less(best, v)) best = v; break;
            case 3: if (n < TZ_MAX_WINDOW) window[n] = v; break;
            default: if (!have) best = v; break;
            }
            have = true;
            ++n;
            // Odometer over the window, last dimension fastest.
            int d = (int)r.rank - 1;
            for (; d >= 0; --d) {
                if (++idx_d[d] < count[d]) break;
                idx_d[d] = 0;
            }
            if (d < 0) break;
        }
    }
    T result;
    if (r.method == 0) {
        result = mean.get(n);
    } else if (r.method == 3) {
        // Insertion sort of at most 64 elements; the lower median.
        for (uint32_t i = 1; i < n; ++i) {
            T v = window[i];
            uint32_t j = i;
            while (j > 0 && Num<T>::less(v, window[j - 1])) {
                window[j] = window[j - 1];
                --j;
            }
            window[j] = v;
        }
        result = window[(n - 1) / 2];
    } else {
        result = best;
    }
    out[idx] = result;
}

template <typename T>
__device__ void reduce_all(const void *in, void *out, const tz_reduction &r) {
    const uint64_t total = r.out_planes * r.out_plane_elems;
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += step)
        reduce_one<T>((const T *)in, (T *)out, r, i);
}

// The common case, fast: planes of two dimensions, both halved, an
// integer type of at most 32 bits. The 4 (or 8, with pairs of planes)
// elements of a whole window sit in registers; a window cut short by an
// odd size takes the general path. Same results as reduce_one.
template <typename T>
__device__ inline void order(T &a, T &b) {
    const T lo = b < a ? b : a, hi = b < a ? a : b;
    a = lo;
    b = hi;
}

// Sorting networks of 4 and 8 elements (5 and 19 comparators, Knuth,
// TAOCP 5.3.4): the ones src/backend/cpu/downsample sorts by.
template <typename T>
__device__ inline void sort_window(T (&v)[4]) {
    order(v[0], v[1]); order(v[2], v[3]); order(v[0], v[2]); order(v[1], v[3]);
    order(v[1], v[2]);
}

template <typename T>
__device__ inline void sort_window(T (&v)[8]) {
    order(v[0], v[2]); order(v[1], v[3]); order(v[4], v[6]); order(v[5], v[7]);
    order(v[0], v[4]); order(v[1], v[5]); order(v[2], v[6]); order(v[3], v[7]);
    order(v[0], v[1]); order(v[2], v[3]); order(v[4], v[5]); order(v[6], v[7]);
    order(v[2], v[4]); order(v[3], v[5]);
    order(v[1], v[4]); order(v[3], v[6]);
    order(v[1], v[2]); order(v[3], v[4]); order(v[5], v[6]);
}

template <typename T, int PLANES>
__device__ void reduce_all_2d(const void *in_, void *out_, const tz_reduction &r) {
    const T *in = (const T *)in_;
    T *out = (T *)out_;
    const uint64_t total = r.out_planes * r.out_plane_elems;
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t out_w = r.out_size[1], in_h = r.in_size[0], in_w = r.in_size[1];
    constexpr int N = 4 * PLANES;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += step) {
        const uint64_t p = i / r.out_plane_elems;
        const uint64_t e = i - p * r.out_plane_elems;
        const uint64_t y = e / out_w, x = e - y * out_w;
        if (2 * y + 2 > in_h || 2 * x + 2 > in_w) {
            reduce_one<T>(in, out, r, i);
            continue;
        }
        T v[N];
#pragma unroll
        for (int q = 0; q < PLANES; ++q) {
            const T *row = in + (p * PLANES + q) * r.in_plane_elems + 2 * y * in_w + 2 * x;
            v[4 * q] = row[0];
            v[4 * q + 1] = row[1];
            v[4 * q + 2] = row[in_w];
            v[4 * q + 3] = row[in_w + 1];
        }
        T result = v[0];  // decimate: the window's first element
        switch (r.method) {
        case 0: {
            long long sum = 0;
#pragma unroll
            for (int k = 0; k < N; ++k) sum += (long long)v[k];
            result = (T)round_half_even<long long>(sum, N);
            break;
        }
        case 1:
#pragma unroll
            for (int k = 1; k < N; ++k) result = v[k] < result ? v[k] : result;
            break;
        case 2:
#pragma unroll
            for (int k = 1; k < N; ++k) result = result < v[k] ? v[k] : result;
            break;
        case 3:
            sort_window(v);
            result = v[(N - 1) / 2];
            break;
        default: break;
        }
        out[i] = result;
    }
}

template <typename T>
__device__ void reduce_any(const void *in, void *out, const tz_reduction &r) {
    if (r.rank == 2 && r.downsample[0] && r.downsample[1]) {
        if (r.window_planes == 2) {
            reduce_all_2d<T, 2>(in, out, r);
            return;
        }
        if (r.window_planes == 1) {
            reduce_all_2d<T, 1>(in, out, r);
            return;
        }
    }
    reduce_all<T>(in, out, r);
}

extern "C" __global__ void tz_downsample(const void *in, void *out, tz_reduction r) {
    switch (r.dtype) {
    case 0: reduce_any<uint8_t>(in, out, r); break;
    case 1: reduce_any<uint16_t>(in, out, r); break;
    case 2: reduce_any<uint32_t>(in, out, r); break;
    case 3: reduce_all<uint64_t>(in, out, r); break;
    case 4: reduce_any<int8_t>(in, out, r); break;
    case 5: reduce_any<int16_t>(in, out, r); break;
    case 6: reduce_any<int32_t>(in, out, r); break;
    case 7: reduce_all<int64_t>(in, out, r); break;
    case 8: reduce_all<h16>(in, out, r); break;
    case 9: reduce_all<float>(in, out, r); break;
    default: reduce_all<double>(in, out, r); break;
    }
}
