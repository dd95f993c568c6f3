//! Runtime-loaded bindings to NVIDIA nvCOMP's batched zstd C API, and to
//! its other standard-format compressors (LZ4, deflate, gzip) through one
//! table ([`Nvcomp::compressor`]).
//!
//! nvCOMP's licence forbids redistributing it, so users install it
//! themselves (CUDA toolkit, conda `nvcomp`, or the pip wheels
//! `nvidia-libnvcomp-cu12` / `nvidia-libnvcomp-cu13`) and this crate opens
//! it with `dlopen` at run time; see [`Nvcomp::load`] for where it looks.
//! Both the 5.x and the 6.x ABI are supported; [`AbiVersion`] says which
//! one was found. Everything is declared from the headers in NVIDIA's
//! wheels (see [`ffi`]).
//!
//! This crate makes no CUDA calls of its own. Device memory and streams
//! are passed through as raw driver-API values: [`DevicePtr`] is a
//! `CUdeviceptr`, [`CuStream`] a `CUstream` (same as `cudaStream_t`).
//! nvCOMP's static CUDA runtime uses whatever context is current on the
//! calling thread, so the caller makes its context current first.
//!
//! # The temporary-buffer trap
//!
//! `nvcompBatchedZstdCompressAsync` was seen (with 5.3.0 and 6.0.0, inside
//! this project's pipeline) to fault with an illegal-address error when its
//! temporary buffer still held what an earlier call with a *different
//! chunk count or chunk size* left there, and zero-filling the temp buffer
//! before each call made the fault go away. Callers should therefore clear
//! the temp buffer (e.g. `cuMemsetD8Async(temp, 0, temp_bytes, stream)` on
//! the compress stream) before every compress call whose batch shape
//! differs from the previous call on that buffer, including the first call
//! on a fresh buffer; [`TempShape`] tracks when that is due.
//!
//! The trigger is not pinned down: `examples/gpu_roundtrip.rs --trap ...`
//! alternates batch shapes (8192 or 1000 chunks, 64 or 32 KiB, uneven
//! sizes, either order, shared or exact temp sizes, temp pre-filled with
//! 0xab) on one unzeroed temp buffer, and none of it faulted on an H200
//! with 5.3.0 or 6.0.0. So when the fault shows up again, also check that
//! `temp_bytes` and the per-chunk arrays were sized for the *current*
//! shape, not a previous one.
//!
//! # What needs a GPU
//!
//! Loading, [`Nvcomp::version`], the alignment queries,
//! [`Nvcomp::zstd_compress_max_output_chunk_bytes`] and (here) the
//! decompress temp-size query are host computations and work without a
//! driver. The compress temp-size query consults the device (temp space is
//! architecture-specific): without a driver it returns
//! `nvcompErrorCudaError`; with one it needs no context made current by
//! the caller (measured on an H200 before `cuInit`: nvCOMP's static CUDA
//! runtime initialises itself), but when the process uses several GPUs make
//! the target device's context current so the answer is for that device.
//! The `*_async` calls need device memory and a current context, and
//! enqueue work on the stream.
//!
//! The temp buffers are large: for 8192 chunks of 64 KiB (5.3.0 and 6.0.0
//! on an H200) compression asks for 1 999 212 615 bytes and decompression
//! for 1 667 432 448; 1000 chunks still need 1 232 667 679 to compress.

mod batched;
pub mod error;
pub mod ffi;
mod load;
mod search;
pub mod status;
mod system;
mod zstd;

use std::ffi::CStr;
use std::path::{Path, PathBuf};

pub use batched::{Algorithm, BatchedCompressor, CompressBatch, CompressOpts};
pub use error::Error;
pub use ffi::{Alignments, CuStream, DecompressBackend, ZstdCompressOpts, ZstdDecompressOpts};
pub use search::{add_search_dir, ENV_LIBRARY};
pub use status::Status;
pub use zstd::{DevicePtr, TempShape, ZstdCompressBatch, ZstdDecompressBatch};

/// Result of this crate's calls.
pub type Result<T> = std::result::Result<T, Error>;

/// Largest uncompressed chunk the zstd compressor accepts
/// (`nvcompZstdCompressionMaxAllowedChunkSize`, 5.1–6.0). The compress
/// call's documentation also says chunks "must not exceed 16 MB".
pub const ZSTD_COMPRESSION_MAX_CHUNK_BYTES: usize = (1 << 31) - 1;

/// Which C ABI the loaded library has. They differ only in the temp-size
/// queries (see [`ffi`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbiVersion {
    /// nvCOMP 5.x: `...GetTempSizeAsync`, no stream argument.
    V5,
    /// nvCOMP 6.x: `...GetTempSize` with a trailing stream argument.
    V6,
}

/// A loaded nvCOMP library. Cheap to clone: the library stays mapped for
/// the life of the process, so this is a table of function pointers.
#[derive(Clone, Debug)]
pub struct Nvcomp {
    path: PathBuf,
    abi: AbiVersion,
    properties: ffi::Properties,
    fns: Fns,
    /// The batched compressors, indexed by [`Algorithm`]: resolved at load,
    /// or the first entry point the library lacks.
    compressors: [batched::Resolved; 4],
}

#[derive(Clone, Copy, Debug)]
struct Fns {
    compress_alignments: ffi::ZstdCompressGetRequiredAlignmentsFn,
    decompress_alignments: ffi::ZstdDecompressGetRequiredAlignmentsFn,
    max_output_chunk_size: ffi::ZstdCompressGetMaxOutputChunkSizeFn,
    compress_async: ffi::ZstdCompressAsyncFn,
    decompress_async: ffi::ZstdDecompressAsyncFn,
    temp_size: TempSizeFns,
    status_string: Option<ffi::GetStatusStringFn>,
}

#[derive(Clone, Copy, Debug)]
enum TempSizeFns {
    V5 {
        compress: ffi::ZstdCompressGetTempSizeV5Fn,
        decompress: ffi::ZstdDecompressGetTempSizeV5Fn,
    },
    V6 {
        compress: ffi::ZstdCompressGetTempSizeV6Fn,
        decompress: ffi::ZstdDecompressGetTempSizeV6Fn,
    },
}

/// Splits nvCOMP's `major * 1000 + minor * 100 + patch` version number.
pub(crate) fn decode_version(v: u32) -> (u32, u32, u32) {
    (v / 1000, (v % 1000) / 100, v % 100)
}

impl Nvcomp {
    /// The library's (major, minor, patch), from `nvcompGetProperties`.
    pub fn version(&self) -> (u32, u32, u32) {
        decode_version(self.properties.version)
    }

    /// The version of the CUDA runtime nvCOMP was built with, as
    /// (major, minor), e.g. (12, 9).
    pub fn cudart_version(&self) -> (u32, u32) {
        let v = self.properties.cudart_version;
        (v / 1000, (v % 1000) / 10)
    }

    /// Which ABI the library has.
    pub fn abi(&self) -> AbiVersion {
        self.abi
    }

    /// The file the library was loaded from (resolved through the process's
    /// mappings when the dynamic loader found it by soname).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// nvCOMP's own description of `status` (`nvcompGetStatusString`, 5.2
    /// and later); `None` on 5.1.
    pub fn status_string(&self, status: Status) -> Option<String> {
        let f = self.fns.status_string?;
        // SAFETY: the function accepts any code and returns a pointer to a
        // static NUL-terminated string (or null, checked below).
        let p = unsafe { f(status.0) };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null, NUL-terminated and static per the header.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_decode() {
        assert_eq!(decode_version(6000), (6, 0, 0));
        assert_eq!(decode_version(5300), (5, 3, 0));
        assert_eq!(decode_version(4201), (4, 2, 1));
    }

    #[test]
    fn nvcomp_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Nvcomp>();
    }
}
