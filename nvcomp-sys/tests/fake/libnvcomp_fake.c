/* A stand-in for libnvcomp with the 5.x or 6.x zstd ABI (VERSION picks:
 * nvCOMP's major * 1000 + minor * 100 + patch). Each entry point checks
 * that its arguments arrived in the order and layout of the real headers
 * and encodes them in its result, so the Rust side can verify the ABI
 * without a GPU. A mismatch in the async calls returns 100 + the index
 * of the first wrong argument. */
#include <stddef.h>
#include <stdint.h>

#ifndef VERSION
#define VERSION 6000
#endif

typedef struct { uint32_t version; uint32_t cudart_version; } props_t;
typedef struct { size_t input; size_t output; size_t temp; } align_t;
typedef struct { char reserved[64]; } copts_t;
typedef struct { int backend; char reserved[60]; } dopts_t;

static int all_zero(const char *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i]) return 0;
  return 1;
}

int nvcompGetProperties(props_t *p) {
  if (!p) return 10;
  p->version = VERSION;
  p->cudart_version = 12090;
  return 0;
}

const char *nvcompGetStatusString(int status) {
  return status == 0 ? "fake success" : "fake failure";
}

int nvcompBatchedZstdCompressGetRequiredAlignments(copts_t o, align_t *a) {
  if (!all_zero(o.reserved, 64)) return 10;
  a->input = 4; a->output = 2; a->temp = 8;
  return 0;
}

int nvcompBatchedZstdDecompressGetRequiredAlignments(dopts_t o, align_t *a) {
  if (!all_zero(o.reserved, 60)) return 10;
  a->input = 8; a->output = 16; a->temp = 32 + (size_t)o.backend;
  return 0;
}

int nvcompBatchedZstdCompressGetMaxOutputChunkSize(size_t m, copts_t o, size_t *out) {
  if (m == 0 || !all_zero(o.reserved, 64)) return 10;
  *out = m + 11;
  return 0;
}

#define ENCODE(n, m, total) ((n) + 2 * (m) + 3 * (total))

#if VERSION >= 6000
int nvcompBatchedZstdCompressGetTempSize(size_t n, size_t m, copts_t o, size_t *t,
                                         size_t total, void *stream) {
  if (!all_zero(o.reserved, 64)) return 10;
  *t = ENCODE(n, m, total) + (stream ? 1000000000 : 0);
  return 0;
}
int nvcompBatchedZstdDecompressGetTempSize(size_t n, size_t m, dopts_t o, size_t *t,
                                           size_t total, void *stream) {
  if (!all_zero(o.reserved, 60)) return 10;
  *t = 5 * ENCODE(n, m, total) + (size_t)o.backend + (stream ? 1000000000 : 0);
  return 0;
}
#else
int nvcompBatchedZstdCompressGetTempSizeAsync(size_t n, size_t m, copts_t o, size_t *t,
                                              size_t total) {
  if (!all_zero(o.reserved, 64)) return 10;
  *t = ENCODE(n, m, total);
  return 0;
}
int nvcompBatchedZstdDecompressGetTempSizeAsync(size_t n, size_t m, dopts_t o, size_t *t,
                                                size_t total) {
  if (!all_zero(o.reserved, 60)) return 10;
  *t = 5 * ENCODE(n, m, total) + (size_t)o.backend;
  return 0;
}
#endif

#define EXPECT(i, cond) if (!(cond)) return 100 + (i)

#ifndef OMIT_COMPRESS_ASYNC
int nvcompBatchedZstdCompressAsync(const void *const *in_ptrs, const size_t *in_bytes,
                                   size_t max_in, size_t n, void *temp, size_t temp_bytes,
                                   void *const *out_ptrs, size_t *out_bytes, copts_t o,
                                   int *statuses, void *stream) {
  EXPECT(0, (uintptr_t)in_ptrs == 0x1000);
  EXPECT(1, (uintptr_t)in_bytes == 0x2000);
  EXPECT(2, max_in == 65536);
  EXPECT(3, n == 3);
  EXPECT(4, (uintptr_t)temp == 0x3000);
  EXPECT(5, temp_bytes == 4096);
  EXPECT(6, (uintptr_t)out_ptrs == 0x4000);
  EXPECT(7, (uintptr_t)out_bytes == 0x5000);
  EXPECT(8, all_zero(o.reserved, 64));
  EXPECT(9, (uintptr_t)statuses == 0x6000);
  EXPECT(10, (uintptr_t)stream == 0x7000);
  return 0;
}
#endif

int nvcompBatchedZstdDecompressAsync(const void *const *in_ptrs, const size_t *in_bytes,
                                     const size_t *out_capacity, size_t *out_bytes, size_t n,
                                     void *temp, size_t temp_bytes, void *const *out_ptrs,
                                     dopts_t o, int *statuses, void *stream) {
  EXPECT(0, (uintptr_t)in_ptrs == 0x1000);
  EXPECT(1, (uintptr_t)in_bytes == 0x2000);
  EXPECT(2, (uintptr_t)out_capacity == 0x2800);
  EXPECT(3, (uintptr_t)out_bytes == 0x5000);
  EXPECT(4, n == 3);
  EXPECT(5, (uintptr_t)temp == 0x3000);
  EXPECT(6, temp_bytes == 4096);
  EXPECT(7, (uintptr_t)out_ptrs == 0x4000);
  EXPECT(8, o.backend == 2 && all_zero(o.reserved, 60));
  EXPECT(9, statuses == 0);
  EXPECT(10, (uintptr_t)stream == 0x7000);
  return 0;
}
