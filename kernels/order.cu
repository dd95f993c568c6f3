// The order of a batch's chunks in the compress call (chunk_order.rs):
// nvCOMP works through its tables in order, so a batch compressed in
// another order is handed pointer tables permuted by `order` (entry k of
// the call is tile order[k]), and what nvCOMP writes per entry (sizes,
// statuses) is put back in tile order before anything else reads it.
#include <stdint.h>

// k_tiles[k] = tiles[order[k]], k_chunks[k] = chunks[order[k]] for k < n.
extern "C" __global__ void tz_order_tables(const uint32_t *__restrict__ order,
                                           const uint64_t *__restrict__ tiles,
                                           const uint64_t *__restrict__ chunks,
                                           uint64_t *__restrict__ k_tiles,
                                           uint64_t *__restrict__ k_chunks, uint64_t n) {
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t i = order[k];
        k_tiles[k] = tiles[i];
        k_chunks[k] = chunks[i];
    }
}

// sizes[order[k]] = k_sizes[k], statuses[order[k]] = k_statuses[k] for k < n.
extern "C" __global__ void tz_unorder_results(const uint32_t *__restrict__ order,
                                              const uint64_t *__restrict__ k_sizes,
                                              const int32_t *__restrict__ k_statuses,
                                              uint64_t *__restrict__ sizes,
                                              int32_t *__restrict__ statuses, uint64_t n) {
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t i = order[k];
        sizes[i] = k_sizes[k];
        statuses[i] = k_statuses[k];
    }
}
