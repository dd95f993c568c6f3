//! The batched compressors other than zstd's own bindings (LZ4, raw
//! deflate, gzip) and zstd again, behind one table: nvCOMP declares the
//! same five compress entry points for each, differing only in the name
//! and in the option struct, which is 64 bytes in every one of them
//! (transcribed from `include/nvcomp/{lz4,deflate,gzip,zstd}.h` of the
//! 6.0.0.12 wheel; 5.x declares the same entry points with the 5.x
//! temp-size query, see [`crate::ffi`]).
//!
//! A library that lacks one compressor (gzip compression is recent) still
//! loads: [`Nvcomp::compressor`] then names the missing symbol.

use std::ffi::c_void;
use std::ptr;

use crate::error::Error;
use crate::ffi::{Alignments, CuStream, RawStatus};
use crate::status::Status;
use crate::{AbiVersion, DevicePtr, Nvcomp, Result};

/// A batched compressor nvCOMP offers in a standard format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// One zstd frame per chunk.
    Zstd,
    /// One LZ4 block (no frame) per chunk, as `LZ4_compress_default` writes.
    Lz4,
    /// One raw deflate stream (RFC 1951) per chunk.
    Deflate,
    /// One gzip member (RFC 1952) per chunk.
    Gzip,
}

/// The symbol names of one compressor.
struct Names {
    alignments: &'static str,
    max_output: &'static str,
    temp_v5: &'static str,
    temp_v6: &'static str,
    compress: &'static str,
}

impl Algorithm {
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Zstd,
        Algorithm::Lz4,
        Algorithm::Deflate,
        Algorithm::Gzip,
    ];

    fn names(self) -> Names {
        macro_rules! names {
            ($p:literal) => {
                Names {
                    alignments: concat!("nvcompBatched", $p, "CompressGetRequiredAlignments"),
                    max_output: concat!("nvcompBatched", $p, "CompressGetMaxOutputChunkSize"),
                    temp_v5: concat!("nvcompBatched", $p, "CompressGetTempSizeAsync"),
                    temp_v6: concat!("nvcompBatched", $p, "CompressGetTempSize"),
                    compress: concat!("nvcompBatched", $p, "CompressAsync"),
                }
            };
        }
        match self {
            Algorithm::Zstd => names!("Zstd"),
            Algorithm::Lz4 => names!("LZ4"),
            Algorithm::Deflate => names!("Deflate"),
            Algorithm::Gzip => names!("Gzip"),
        }
    }

    /// The largest chunk the compressor takes, from its header
    /// (`nvcomp*CompressionMaxAllowedChunkSize`; zstd's compress call also
    /// says chunks "must not exceed 16 MB", and that is the figure here).
    pub fn max_chunk_bytes(self) -> usize {
        match self {
            Algorithm::Zstd => 16 << 20,
            Algorithm::Lz4 => 1 << 24,
            Algorithm::Deflate => 1 << 31,
            // The header's `0x7FFFFFFF << 15`; a gzip member records its
            // size modulo 2^32 anyway.
            Algorithm::Gzip => (1 << 32) - 1,
        }
    }

    /// Whether the option struct's first field selects an algorithm
    /// (deflate and gzip: 0 fastest ... 5 smallest).
    pub fn has_algorithm_option(self) -> bool {
        matches!(self, Algorithm::Deflate | Algorithm::Gzip)
    }
}

/// The compress option struct of any of the four compressors: 64 bytes,
/// whose first `int` is deflate's and gzip's `algorithm` or LZ4's
/// `data_type` (then LZ4's `bitshuffle_mode`); zero elsewhere, as the
/// headers require of their reserved bytes. Passed by value, so only the
/// size matters to the calling convention.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressOpts {
    words: [i32; 16],
}

impl CompressOpts {
    /// The header's default options of `algorithm` (deflate and gzip:
    /// algorithm 1; LZ4: bytes, no bitshuffle; zstd: all zero).
    pub fn default_for(algorithm: Algorithm) -> CompressOpts {
        let mut words = [0; 16];
        if algorithm.has_algorithm_option() {
            words[0] = 1;
        }
        CompressOpts { words }
    }

    /// Deflate's or gzip's `algorithm` (0 fastest to 5 smallest); ignored
    /// for the others, whose first field must stay as the default.
    pub fn with_deflate_algorithm(algorithm: Algorithm, level: i32) -> CompressOpts {
        let mut o = CompressOpts::default_for(algorithm);
        if algorithm.has_algorithm_option() {
            o.words[0] = level;
        }
        o
    }
}

type AlignmentsFn = unsafe extern "C" fn(CompressOpts, *mut Alignments) -> RawStatus;
type MaxOutputFn = unsafe extern "C" fn(usize, CompressOpts, *mut usize) -> RawStatus;
type TempV5Fn = unsafe extern "C" fn(usize, usize, CompressOpts, *mut usize, usize) -> RawStatus;
type TempV6Fn =
    unsafe extern "C" fn(usize, usize, CompressOpts, *mut usize, usize, CuStream) -> RawStatus;
type CompressFn = unsafe extern "C" fn(
    *const *const c_void,
    *const usize,
    usize,
    usize,
    *mut c_void,
    usize,
    *const *mut c_void,
    *mut usize,
    CompressOpts,
    *mut RawStatus,
    CuStream,
) -> RawStatus;

#[derive(Clone, Copy, Debug)]
enum TempFn {
    V5(TempV5Fn),
    V6(TempV6Fn),
}

/// The resolved entry points of one compressor, or the first symbol the
/// library lacked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompressFns {
    alignments: AlignmentsFn,
    max_output: MaxOutputFn,
    temp: TempFn,
    compress: CompressFn,
}

pub(crate) type Resolved = std::result::Result<CompressFns, &'static str>;

/// Resolves `algorithm`'s entry points through `sym`, which must return
/// the address of the named symbol of the loaded library.
///
/// # Safety
/// `sym` must return symbols of an nvCOMP whose ABI is `abi`, alive for as
/// long as the returned table is used.
pub(crate) unsafe fn resolve(
    algorithm: Algorithm,
    abi: AbiVersion,
    sym: &dyn Fn(&'static str) -> Option<*const c_void>,
) -> Resolved {
    let n = algorithm.names();
    let get = |name: &'static str| sym(name).ok_or(name);
    let temp_name = match abi {
        AbiVersion::V5 => n.temp_v5,
        AbiVersion::V6 => n.temp_v6,
    };
    let (a, m, t, c) = (
        get(n.alignments)?,
        get(n.max_output)?,
        get(temp_name)?,
        get(n.compress)?,
    );
    // SAFETY: each address is the named entry point, whose C signature
    // (from the headers cited above) is the function-pointer type it is
    // transmuted to; the caller keeps the library loaded.
    unsafe {
        Ok(CompressFns {
            alignments: std::mem::transmute::<*const c_void, AlignmentsFn>(a),
            max_output: std::mem::transmute::<*const c_void, MaxOutputFn>(m),
            temp: match abi {
                AbiVersion::V5 => TempFn::V5(std::mem::transmute::<*const c_void, TempV5Fn>(t)),
                AbiVersion::V6 => TempFn::V6(std::mem::transmute::<*const c_void, TempV6Fn>(t)),
            },
            compress: std::mem::transmute::<*const c_void, CompressFn>(c),
        })
    }
}

/// The device buffers of one batched compress call (as
/// [`crate::ZstdCompressBatch`], for any compressor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompressBatch {
    pub uncompressed_ptrs: DevicePtr,
    pub uncompressed_bytes: DevicePtr,
    pub max_uncompressed_chunk_bytes: usize,
    pub num_chunks: usize,
    pub temp: DevicePtr,
    pub temp_bytes: usize,
    pub compressed_ptrs: DevicePtr,
    pub compressed_bytes: DevicePtr,
    pub statuses: DevicePtr,
}

/// One of nvCOMP's batched compressors with its options.
#[derive(Clone, Copy, Debug)]
pub struct BatchedCompressor {
    algorithm: Algorithm,
    opts: CompressOpts,
    fns: CompressFns,
}

fn check(function: &'static str, raw: RawStatus) -> Result<()> {
    let status = Status(raw);
    if status.is_success() {
        Ok(())
    } else {
        Err(Error::status(function, status))
    }
}

fn dptr<T>(p: DevicePtr) -> *mut T {
    p as usize as *mut T
}

impl Nvcomp {
    /// `algorithm`'s batched compressor with `opts`; an error naming the
    /// missing entry point when this nvCOMP lacks it.
    pub fn compressor(
        &self,
        algorithm: Algorithm,
        opts: CompressOpts,
    ) -> Result<BatchedCompressor> {
        let fns = self.compressors[algorithm as usize].map_err(|symbol| Error::MissingSymbol {
            path: self.path.clone(),
            symbol,
            version: Some(self.version()),
        })?;
        Ok(BatchedCompressor {
            algorithm,
            opts,
            fns,
        })
    }
}

impl BatchedCompressor {
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Minimum alignments of input, output and temp buffers. Host only.
    pub fn alignments(&self) -> Result<Alignments> {
        let mut out = Alignments::default();
        // SAFETY: `out` is a valid, writable nvcompAlignmentRequirements_t;
        // the options are passed by value.
        let raw = unsafe { (self.fns.alignments)(self.opts, &mut out) };
        check(self.algorithm.names().alignments, raw).map(|()| out)
    }

    /// The output capacity each chunk needs. Host only.
    pub fn max_output_chunk_bytes(&self, max_uncompressed_chunk_bytes: usize) -> Result<usize> {
        let mut out = 0usize;
        // SAFETY: `out` is a valid, writable size_t.
        let raw =
            unsafe { (self.fns.max_output)(max_uncompressed_chunk_bytes, self.opts, &mut out) };
        check(self.algorithm.names().max_output, raw).map(|()| out)
    }

    /// Temporary device memory for a batch of that shape (consults the
    /// device: see the crate docs).
    pub fn temp_bytes(
        &self,
        num_chunks: usize,
        max_uncompressed_chunk_bytes: usize,
        max_total_uncompressed_bytes: usize,
    ) -> Result<usize> {
        let mut out = 0usize;
        let (n, m, t) = (
            num_chunks,
            max_uncompressed_chunk_bytes,
            max_total_uncompressed_bytes,
        );
        let names = self.algorithm.names();
        let (name, raw) = match self.fns.temp {
            // SAFETY: `out` is a valid, writable size_t; the rest are values.
            TempFn::V5(f) => (names.temp_v5, unsafe { f(n, m, self.opts, &mut out, t) }),
            // SAFETY: as above; a null stream is the default stream, and the
            // header says the query enqueues nothing on it.
            TempFn::V6(f) => (names.temp_v6, unsafe {
                f(n, m, self.opts, &mut out, t, ptr::null_mut())
            }),
        };
        check(name, raw).map(|()| out)
    }

    /// Enqueues the compression of `batch` on `stream`.
    ///
    /// # Safety
    /// As [`Nvcomp::zstd_compress_async`]: a current context owning every
    /// buffer, a live stream of it, and every buffer of `batch` sized and
    /// aligned as this compressor's queries asked, until the stream is done.
    pub unsafe fn compress_async(&self, batch: &CompressBatch, stream: CuStream) -> Result<()> {
        let b = batch;
        // SAFETY: the caller guarantees the buffers and the stream; the
        // argument order is the headers'.
        let raw = unsafe {
            (self.fns.compress)(
                dptr::<*const c_void>(b.uncompressed_ptrs),
                dptr::<usize>(b.uncompressed_bytes),
                b.max_uncompressed_chunk_bytes,
                b.num_chunks,
                dptr::<c_void>(b.temp),
                b.temp_bytes,
                dptr::<*mut c_void>(b.compressed_ptrs),
                dptr::<usize>(b.compressed_bytes),
                self.opts,
                dptr::<RawStatus>(b.statuses),
                stream,
            )
        };
        check(self.algorithm.names().compress, raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_the_headers_size_and_defaults() {
        assert_eq!(std::mem::size_of::<CompressOpts>(), 64);
        assert_eq!(CompressOpts::default_for(Algorithm::Zstd).words, [0; 16]);
        assert_eq!(CompressOpts::default_for(Algorithm::Lz4).words, [0; 16]);
        assert_eq!(CompressOpts::default_for(Algorithm::Gzip).words[0], 1);
        assert_eq!(
            CompressOpts::with_deflate_algorithm(Algorithm::Deflate, 0).words[0],
            0
        );
        assert_eq!(
            CompressOpts::with_deflate_algorithm(Algorithm::Lz4, 3).words,
            [0; 16]
        );
    }

    #[test]
    fn symbol_names_follow_the_headers() {
        let n = Algorithm::Lz4.names();
        assert_eq!(n.compress, "nvcompBatchedLZ4CompressAsync");
        assert_eq!(n.temp_v6, "nvcompBatchedLZ4CompressGetTempSize");
        assert_eq!(
            Algorithm::Gzip.names().alignments,
            "nvcompBatchedGzipCompressGetRequiredAlignments"
        );
    }

    #[test]
    fn a_missing_entry_point_is_named() {
        let none = |_: &'static str| None;
        // SAFETY: resolves nothing.
        let r = unsafe { resolve(Algorithm::Gzip, AbiVersion::V6, &none) };
        assert_eq!(
            r.err(),
            Some("nvcompBatchedGzipCompressGetRequiredAlignments")
        );
    }
}
