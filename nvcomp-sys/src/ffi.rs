//! Raw C types and function-pointer types of nvCOMP's batched zstd API.
//!
//! Every declaration here was transcribed from the headers shipped inside
//! NVIDIA's PyPI wheels, which are the ground truth for the ABI:
//!
//! * 5.x: `nvidia-libnvcomp-cu12` 5.1.0.21, 5.2.0.13 and 5.3.0.16,
//!   `include/nvcomp/zstd.h`, `include/nvcomp/shared_types.h`, `include/nvcomp.h`.
//!   The zstd declarations are identical in those three releases.
//! * 6.x: `nvidia-libnvcomp-cu13` 6.0.0.12, same files.
//!
//! Between 5.x and 6.0 only the two temp-size queries changed: 5.x
//! `nvcompBatched{Zstd}{Compress,Decompress}GetTempSizeAsync(...)` became 6.x
//! `...GetTempSize(..., cudaStream_t stream)` (one extra trailing argument).
//! Option structs, alignment/properties structs, status codes and the
//! compress/decompress entry points are unchanged.
//!
//! C enums (`nvcompStatus_t`, `nvcompDecompressBackend_t`) are `int` on every
//! platform nvCOMP ships for, hence `i32`.

use std::ffi::c_void;

/// `cudaStream_t` / `CUstream` (the same handle): an opaque pointer.
/// Null is the legacy default stream.
pub type CuStream = *mut c_void;

/// `nvcompStatus_t` as returned by every entry point.
pub type RawStatus = i32;

/// `nvcompProperties_t` (shared_types.h, 5.1–6.0).
///
/// `version` is `major * 1000 + minor * 100 + patch` (version.h's
/// `MAKE_SEMANTIC_VERSION`), e.g. 6000 for 6.0.0; `cudart_version` is CUDA's
/// `major * 1000 + minor * 10`, e.g. 12090 for 12.9.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Properties {
    pub version: u32,
    pub cudart_version: u32,
}

/// `nvcompAlignmentRequirements_t` (shared_types.h, 5.1–6.0): the minimum
/// alignment, in bytes, of each input buffer, each output buffer and the
/// temporary buffer. `temp` is 1 when no temporary storage is used.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Alignments {
    pub input: usize,
    pub output: usize,
    pub temp: usize,
}

/// `nvcompBatchedZstdCompressOpts_t` (zstd.h, 5.1–6.0): 64 reserved bytes
/// that must be zero. The field is private so the only value that can
/// exist is the header's `nvcompBatchedZstdCompressDefaultOpts`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZstdCompressOpts {
    reserved: [u8; 64],
}

impl Default for ZstdCompressOpts {
    fn default() -> Self {
        Self { reserved: [0; 64] }
    }
}

/// `nvcompDecompressBackend_t` (shared_types.h, 5.1–6.0).
#[repr(i32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DecompressBackend {
    /// `NVCOMP_DECOMPRESS_BACKEND_DEFAULT`: nvCOMP chooses.
    #[default]
    Default = 0,
    /// `NVCOMP_DECOMPRESS_BACKEND_HARDWARE`: the dedicated decompression
    /// engine (Blackwell and later); buffers over the engine's limit fail
    /// asynchronously.
    Hardware = 1,
    /// `NVCOMP_DECOMPRESS_BACKEND_CUDA`: the CUDA-kernel implementation.
    Cuda = 2,
}

/// `nvcompBatchedZstdDecompressOpts_t` (zstd.h, 5.1–6.0): a backend
/// followed by 60 reserved bytes that must be zero (64 bytes in all).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZstdDecompressOpts {
    backend: DecompressBackend,
    reserved: [u8; 60],
}

impl ZstdDecompressOpts {
    /// Options selecting `backend`, everything else zero.
    pub fn with_backend(backend: DecompressBackend) -> Self {
        Self {
            backend,
            reserved: [0; 60],
        }
    }

    /// The selected backend.
    pub fn backend(&self) -> DecompressBackend {
        self.backend
    }
}

impl Default for ZstdDecompressOpts {
    /// The header's `nvcompBatchedZstdDecompressDefaultOpts`.
    fn default() -> Self {
        Self::with_backend(DecompressBackend::Default)
    }
}

/// `nvcompStatus_t nvcompGetProperties(nvcompProperties_t *properties)`
/// (nvcomp.h, 5.1–6.0).
pub type GetPropertiesFn = unsafe extern "C" fn(*mut Properties) -> RawStatus;

/// `nvcompBatchedZstdCompressGetRequiredAlignments(compress_opts, *alignment_requirements)`
/// (zstd.h, 5.1–6.0).
pub type ZstdCompressGetRequiredAlignmentsFn =
    unsafe extern "C" fn(ZstdCompressOpts, *mut Alignments) -> RawStatus;

/// `nvcompBatchedZstdDecompressGetRequiredAlignments(decompress_opts, *alignment_requirements)`
/// (zstd.h, 5.1–6.0).
pub type ZstdDecompressGetRequiredAlignmentsFn =
    unsafe extern "C" fn(ZstdDecompressOpts, *mut Alignments) -> RawStatus;

/// 5.x `nvcompBatchedZstdCompressGetTempSizeAsync(size_t num_chunks,
/// size_t max_uncompressed_chunk_bytes, nvcompBatchedZstdCompressOpts_t compress_opts,
/// size_t *temp_bytes, size_t max_total_uncompressed_bytes)` (zstd.h 5.1–5.3).
/// Despite its name it takes no stream.
pub type ZstdCompressGetTempSizeV5Fn =
    unsafe extern "C" fn(usize, usize, ZstdCompressOpts, *mut usize, usize) -> RawStatus;

/// 6.x `nvcompBatchedZstdCompressGetTempSize(size_t num_chunks,
/// size_t max_uncompressed_chunk_bytes, nvcompBatchedZstdCompressOpts_t compress_opts,
/// size_t *temp_bytes, size_t max_total_uncompressed_bytes, cudaStream_t stream)`
/// (zstd.h 6.0.0). The header says it enqueues no work on the stream.
pub type ZstdCompressGetTempSizeV6Fn =
    unsafe extern "C" fn(usize, usize, ZstdCompressOpts, *mut usize, usize, CuStream) -> RawStatus;

/// 5.x `nvcompBatchedZstdDecompressGetTempSizeAsync(num_chunks,
/// max_uncompressed_chunk_bytes, decompress_opts, *temp_bytes,
/// max_total_uncompressed_bytes)` (zstd.h 5.1–5.3).
pub type ZstdDecompressGetTempSizeV5Fn =
    unsafe extern "C" fn(usize, usize, ZstdDecompressOpts, *mut usize, usize) -> RawStatus;

/// 6.x `nvcompBatchedZstdDecompressGetTempSize(num_chunks,
/// max_uncompressed_chunk_bytes, decompress_opts, *temp_bytes,
/// max_total_uncompressed_bytes, stream)` (zstd.h 6.0.0).
pub type ZstdDecompressGetTempSizeV6Fn = unsafe extern "C" fn(
    usize,
    usize,
    ZstdDecompressOpts,
    *mut usize,
    usize,
    CuStream,
) -> RawStatus;

/// `nvcompBatchedZstdCompressGetMaxOutputChunkSize(size_t max_uncompressed_chunk_bytes,
/// nvcompBatchedZstdCompressOpts_t compress_opts, size_t *max_compressed_chunk_bytes)`
/// (zstd.h, 5.1–6.0).
pub type ZstdCompressGetMaxOutputChunkSizeFn =
    unsafe extern "C" fn(usize, ZstdCompressOpts, *mut usize) -> RawStatus;

/// `nvcompBatchedZstdCompressAsync(const void *const *device_uncompressed_chunk_ptrs,
/// const size_t *device_uncompressed_chunk_bytes, size_t max_uncompressed_chunk_bytes,
/// size_t num_chunks, void *device_temp_ptr, size_t temp_bytes,
/// void *const *device_compressed_chunk_ptrs, size_t *device_compressed_chunk_bytes,
/// nvcompBatchedZstdCompressOpts_t compress_opts, nvcompStatus_t *device_statuses,
/// cudaStream_t stream)` (zstd.h, 5.1–6.0, unchanged).
pub type ZstdCompressAsyncFn = unsafe extern "C" fn(
    *const *const c_void,
    *const usize,
    usize,
    usize,
    *mut c_void,
    usize,
    *const *mut c_void,
    *mut usize,
    ZstdCompressOpts,
    *mut RawStatus,
    CuStream,
) -> RawStatus;

/// `nvcompBatchedZstdDecompressAsync(const void *const *device_compressed_chunk_ptrs,
/// const size_t *device_compressed_chunk_bytes, const size_t *device_uncompressed_buffer_bytes,
/// size_t *device_uncompressed_chunk_bytes, size_t num_chunks, void *const device_temp_ptr,
/// size_t temp_bytes, void *const *device_uncompressed_chunk_ptrs,
/// nvcompBatchedZstdDecompressOpts_t decompress_opts, nvcompStatus_t *device_statuses,
/// cudaStream_t stream)` (zstd.h, 5.1–6.0, unchanged).
pub type ZstdDecompressAsyncFn = unsafe extern "C" fn(
    *const *const c_void,
    *const usize,
    *const usize,
    *mut usize,
    usize,
    *mut c_void,
    usize,
    *const *mut c_void,
    ZstdDecompressOpts,
    *mut RawStatus,
    CuStream,
) -> RawStatus;

/// `const char *nvcompGetStatusString(nvcompStatus_t status)` (nvcomp.h;
/// exported from 5.2 on, absent in 5.1).
pub type GetStatusStringFn = unsafe extern "C" fn(RawStatus) -> *const std::ffi::c_char;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, size_of};

    // The option structs are passed by value, so their size must match the
    // header's exactly or every later argument is read from the wrong place.
    #[test]
    fn layouts_match_headers() {
        assert_eq!(size_of::<ZstdCompressOpts>(), 64);
        assert_eq!(size_of::<ZstdDecompressOpts>(), 64);
        assert_eq!(align_of::<ZstdDecompressOpts>(), 4);
        assert_eq!(size_of::<Alignments>(), 3 * size_of::<usize>());
        assert_eq!(size_of::<Properties>(), 8);
        assert_eq!(size_of::<DecompressBackend>(), 4);
    }

    #[test]
    fn default_opts_are_zero() {
        assert!(ZstdCompressOpts::default().reserved.iter().all(|&b| b == 0));
        let d = ZstdDecompressOpts::default();
        assert_eq!(d.backend(), DecompressBackend::Default);
        assert!(d.reserved.iter().all(|&b| b == 0));
    }
}
