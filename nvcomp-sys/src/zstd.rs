//! The batched zstd entry points.

use std::ffi::c_void;
use std::ptr;

use crate::error::Error;
use crate::ffi::{Alignments, CuStream, RawStatus, ZstdCompressOpts, ZstdDecompressOpts};
use crate::status::Status;
use crate::{Nvcomp, Result, TempSizeFns};

/// A `CUdeviceptr`: a device address as the CUDA driver API hands it out.
/// 0 is null.
pub type DevicePtr = u64;

fn dptr<T>(p: DevicePtr) -> *mut T {
    p as usize as *mut T
}

fn check(function: &'static str, raw: RawStatus) -> Result<()> {
    let status = Status(raw);
    if status.is_success() {
        Ok(())
    } else {
        Err(Error::status(function, status))
    }
}

/// The device buffers of one `nvcompBatchedZstdCompressAsync` call. Every
/// pointer is a device address; "array" means a device-accessible array of
/// `num_chunks` elements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZstdCompressBatch {
    /// Array of `const void*`: where each uncompressed chunk starts; each
    /// chunk aligned to [`Alignments::input`].
    pub uncompressed_ptrs: DevicePtr,
    /// Array of `size_t`: each chunk's uncompressed size.
    pub uncompressed_bytes: DevicePtr,
    /// The largest entry of `uncompressed_bytes` (at most 16 MB per the
    /// header; 64 KiB is NVIDIA's recommendation).
    pub max_uncompressed_chunk_bytes: usize,
    pub num_chunks: usize,
    /// Temporary workspace of `temp_bytes`, aligned to [`Alignments::temp`];
    /// may be 0 when `temp_bytes` is 0. See the crate docs on zeroing it.
    pub temp: DevicePtr,
    pub temp_bytes: usize,
    /// Array of `void*`: each chunk's output buffer, at least
    /// [`Nvcomp::zstd_compress_max_output_chunk_bytes`] long and aligned to
    /// [`Alignments::output`].
    pub compressed_ptrs: DevicePtr,
    /// Array of `size_t`, written: each chunk's compressed size.
    pub compressed_bytes: DevicePtr,
    /// Array of `nvcompStatus_t` (i32), written: each chunk's status; 0
    /// to skip per-chunk status reporting.
    pub statuses: DevicePtr,
}

/// The device buffers of one `nvcompBatchedZstdDecompressAsync` call, as
/// in [`ZstdCompressBatch`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZstdDecompressBatch {
    /// Array of `const void*`: each compressed chunk.
    pub compressed_ptrs: DevicePtr,
    /// Array of `size_t`: each compressed chunk's size.
    pub compressed_bytes: DevicePtr,
    /// Array of `size_t`: the capacity of each output buffer; a chunk that
    /// does not fit gets `nvcompErrorCannotDecompress`.
    pub uncompressed_buffer_bytes: DevicePtr,
    /// Array of `size_t`, written: the bytes actually decompressed per chunk.
    pub uncompressed_bytes: DevicePtr,
    pub num_chunks: usize,
    pub temp: DevicePtr,
    pub temp_bytes: usize,
    /// Array of `void*`: each chunk's output buffer.
    pub uncompressed_ptrs: DevicePtr,
    /// Array of `nvcompStatus_t`, written; 0 to skip.
    pub statuses: DevicePtr,
}

impl Nvcomp {
    /// Minimum alignments of the compressor's input, output and temp
    /// buffers (`nvcompBatchedZstdCompressGetRequiredAlignments`). Host
    /// only. 5.1–6.0 report input 4, output 1, temp 1.
    pub fn zstd_compress_alignments(&self, opts: &ZstdCompressOpts) -> Result<Alignments> {
        let mut out = Alignments::default();
        // SAFETY: `out` is a valid, writable nvcompAlignmentRequirements_t
        // and `opts` the header's struct, passed by value.
        let raw = unsafe { (self.fns.compress_alignments)(*opts, &mut out) };
        check("nvcompBatchedZstdCompressGetRequiredAlignments", raw).map(|()| out)
    }

    /// Minimum alignments for decompression
    /// (`nvcompBatchedZstdDecompressGetRequiredAlignments`). Host only.
    pub fn zstd_decompress_alignments(&self, opts: &ZstdDecompressOpts) -> Result<Alignments> {
        let mut out = Alignments::default();
        // SAFETY: as in `zstd_compress_alignments`.
        let raw = unsafe { (self.fns.decompress_alignments)(*opts, &mut out) };
        check("nvcompBatchedZstdDecompressGetRequiredAlignments", raw).map(|()| out)
    }

    /// The output capacity each chunk needs
    /// (`nvcompBatchedZstdCompressGetMaxOutputChunkSize`). Host only.
    pub fn zstd_compress_max_output_chunk_bytes(
        &self,
        max_uncompressed_chunk_bytes: usize,
        opts: &ZstdCompressOpts,
    ) -> Result<usize> {
        let mut out = 0usize;
        // SAFETY: `out` is a valid, writable size_t.
        let raw = unsafe {
            (self.fns.max_output_chunk_size)(max_uncompressed_chunk_bytes, *opts, &mut out)
        };
        check("nvcompBatchedZstdCompressGetMaxOutputChunkSize", raw).map(|()| out)
    }

    /// Temporary device memory needed to compress `num_chunks` chunks of at
    /// most `max_uncompressed_chunk_bytes` each, `max_total_uncompressed_bytes`
    /// in all (5.x `nvcompBatchedZstdCompressGetTempSizeAsync`, 6.x
    /// `nvcompBatchedZstdCompressGetTempSize`).
    ///
    /// The answer depends on the GPU architecture. No context needs to be
    /// current (nvCOMP's runtime falls back to the current device, 0 by
    /// default), but in a multi-GPU process make the compressing device's
    /// context current first. Without a driver this returns
    /// `nvcompErrorCudaError`. 6.x's stream argument is passed as null: the
    /// header says the query enqueues no work on it.
    pub fn zstd_compress_temp_bytes(
        &self,
        num_chunks: usize,
        max_uncompressed_chunk_bytes: usize,
        max_total_uncompressed_bytes: usize,
        opts: &ZstdCompressOpts,
    ) -> Result<usize> {
        let mut out = 0usize;
        let (n, m, t) = (
            num_chunks,
            max_uncompressed_chunk_bytes,
            max_total_uncompressed_bytes,
        );
        let (name, raw) = match self.fns.temp_size {
            TempSizeFns::V5 { compress, .. } => {
                // SAFETY: `out` is a valid, writable size_t; the other
                // arguments are plain values.
                let raw = unsafe { compress(n, m, *opts, &mut out, t) };
                ("nvcompBatchedZstdCompressGetTempSizeAsync", raw)
            }
            TempSizeFns::V6 { compress, .. } => {
                // SAFETY: as above; a null stream is the default stream.
                let raw = unsafe { compress(n, m, *opts, &mut out, t, ptr::null_mut()) };
                ("nvcompBatchedZstdCompressGetTempSize", raw)
            }
        };
        check(name, raw).map(|()| out)
    }

    /// Temporary device memory needed to decompress such a batch (5.x
    /// `nvcompBatchedZstdDecompressGetTempSizeAsync`, 6.x
    /// `nvcompBatchedZstdDecompressGetTempSize`); as
    /// [`Nvcomp::zstd_compress_temp_bytes`].
    pub fn zstd_decompress_temp_bytes(
        &self,
        num_chunks: usize,
        max_uncompressed_chunk_bytes: usize,
        max_total_uncompressed_bytes: usize,
        opts: &ZstdDecompressOpts,
    ) -> Result<usize> {
        let mut out = 0usize;
        let (n, m, t) = (
            num_chunks,
            max_uncompressed_chunk_bytes,
            max_total_uncompressed_bytes,
        );
        let (name, raw) = match self.fns.temp_size {
            TempSizeFns::V5 { decompress, .. } => {
                // SAFETY: as in `zstd_compress_temp_bytes`.
                let raw = unsafe { decompress(n, m, *opts, &mut out, t) };
                ("nvcompBatchedZstdDecompressGetTempSizeAsync", raw)
            }
            TempSizeFns::V6 { decompress, .. } => {
                // SAFETY: as in `zstd_compress_temp_bytes`.
                let raw = unsafe { decompress(n, m, *opts, &mut out, t, ptr::null_mut()) };
                ("nvcompBatchedZstdDecompressGetTempSize", raw)
            }
        };
        check(name, raw).map(|()| out)
    }

    /// Enqueues batched zstd compression on `stream`
    /// (`nvcompBatchedZstdCompressAsync`). Each output chunk is a complete
    /// zstd frame. `Ok` means the work was launched; per-chunk results land
    /// in `batch.statuses` once the stream reaches them.
    ///
    /// **Zero the temp buffer first** whenever the batch shape differs from
    /// the previous call on that buffer (see the crate docs and
    /// [`TempShape`]): stale contents from another shape were seen to make
    /// this call fault with an illegal address, which poisons the CUDA
    /// context.
    ///
    /// # Safety
    /// A CUDA context owning every buffer must be current on this thread,
    /// `stream` must be a live stream of it (or null), and every field of
    /// `batch` must satisfy the constraints documented on
    /// [`ZstdCompressBatch`] until the stream has finished the work: the
    /// header calls any violation undefined behaviour.
    pub unsafe fn zstd_compress_async(
        &self,
        batch: &ZstdCompressBatch,
        opts: &ZstdCompressOpts,
        stream: CuStream,
    ) -> Result<()> {
        let b = batch;
        // SAFETY: the caller guarantees the buffers and stream (see above);
        // the argument order is the header's.
        let raw = unsafe {
            (self.fns.compress_async)(
                dptr::<*const c_void>(b.uncompressed_ptrs),
                dptr::<usize>(b.uncompressed_bytes),
                b.max_uncompressed_chunk_bytes,
                b.num_chunks,
                dptr::<c_void>(b.temp),
                b.temp_bytes,
                dptr::<*mut c_void>(b.compressed_ptrs),
                dptr::<usize>(b.compressed_bytes),
                *opts,
                dptr::<RawStatus>(b.statuses),
                stream,
            )
        };
        check("nvcompBatchedZstdCompressAsync", raw)
    }

    /// Enqueues batched zstd decompression on `stream`
    /// (`nvcompBatchedZstdDecompressAsync`). Corrupt input is undefined
    /// behaviour per the header, so only feed it what nvCOMP or a
    /// conforming zstd encoder produced.
    ///
    /// # Safety
    /// As [`Nvcomp::zstd_compress_async`], for the fields of
    /// [`ZstdDecompressBatch`].
    pub unsafe fn zstd_decompress_async(
        &self,
        batch: &ZstdDecompressBatch,
        opts: &ZstdDecompressOpts,
        stream: CuStream,
    ) -> Result<()> {
        let b = batch;
        // SAFETY: the caller guarantees the buffers and stream; the argument
        // order is the header's.
        let raw = unsafe {
            (self.fns.decompress_async)(
                dptr::<*const c_void>(b.compressed_ptrs),
                dptr::<usize>(b.compressed_bytes),
                dptr::<usize>(b.uncompressed_buffer_bytes),
                dptr::<usize>(b.uncompressed_bytes),
                b.num_chunks,
                dptr::<c_void>(b.temp),
                b.temp_bytes,
                dptr::<*mut c_void>(b.uncompressed_ptrs),
                *opts,
                dptr::<RawStatus>(b.statuses),
                stream,
            )
        };
        check("nvcompBatchedZstdDecompressAsync", raw)
    }
}

/// Remembers the batch shape a compress temp buffer last served, to apply
/// the zero-fill workaround described in the crate docs only when needed.
///
/// ```
/// # use nvcomp_sys::TempShape;
/// let mut shape = TempShape::new();
/// assert!(shape.needs_zeroing(8192, 65536)); // fresh buffer: contents unknown
/// assert!(!shape.needs_zeroing(8192, 65536)); // same shape: reuse as is
/// assert!(shape.needs_zeroing(100, 65536)); // different chunk count
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TempShape {
    last: Option<(usize, usize)>,
}

impl TempShape {
    /// A buffer with unknown contents (freshly allocated memory is not zero).
    pub const fn new() -> Self {
        Self { last: None }
    }

    /// Whether the temp buffer must be zero-filled (on the compress stream,
    /// before the call) to compress a batch of this shape; records the
    /// shape either way, so call it once per compress call.
    pub fn needs_zeroing(
        &mut self,
        num_chunks: usize,
        max_uncompressed_chunk_bytes: usize,
    ) -> bool {
        let shape = Some((num_chunks, max_uncompressed_chunk_bytes));
        let differs = self.last != shape;
        self.last = shape;
        differs
    }

    /// Forgets the recorded shape: call after the buffer was reallocated,
    /// written by anything else, or a compress call on it failed.
    pub fn reset(&mut self) {
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_shape_tracks_count_and_size() {
        let mut s = TempShape::new();
        assert!(s.needs_zeroing(4, 1024));
        assert!(!s.needs_zeroing(4, 1024));
        assert!(s.needs_zeroing(4, 2048));
        assert!(s.needs_zeroing(5, 2048));
        assert!(!s.needs_zeroing(5, 2048));
        s.reset();
        assert!(s.needs_zeroing(5, 2048));
    }

    #[test]
    fn device_pointers_convert_losslessly() {
        let p: *mut u8 = dptr(0x7f00_dead_b000);
        assert_eq!(p as usize, 0x7f00_dead_b000);
        assert!(dptr::<u8>(0).is_null());
    }
}
