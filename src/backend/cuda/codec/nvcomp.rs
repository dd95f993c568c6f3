//! nvCOMP's batched compressors as they are: zstd (a zstd frame per
//! chunk, as libzstd writes; nvCOMP takes no level) and gzip (a gzip member
//! per chunk; the level picks nvCOMP's algorithm), and the inner
//! compressors of the blosc codec.

use super::{Batch, BatchSizes, GpuCodec};
use crate::backend::cuda::driver::{gpu_err, Stream};
use crate::error::Result;
use nvcomp_sys::{Algorithm, BatchedCompressor, CompressBatch, CompressOpts, Nvcomp};

/// nvCOMP's deflate and gzip `algorithm` for a zlib-style `level`: 0 and
/// 1 the fastest (entropy coding only), 2-3 nvCOMP's default, 4-5 medium,
/// 6-7 "beats zlib 6", 8-9 the smallest. nvCOMP has no stored mode.
pub fn deflate_algorithm(level: i32) -> i32 {
    match level {
        ..=1 => 0,
        2..=3 => 1,
        4..=5 => 2,
        6..=7 => 4,
        _ => 5,
    }
}

pub struct NvBatched {
    compressor: BatchedCompressor,
}

impl NvBatched {
    /// `algorithm` with deflate's and gzip's `deflate_algorithm` (ignored by
    /// the others).
    pub fn load(algorithm: Algorithm, deflate_algorithm: i32) -> nvcomp_sys::Result<NvBatched> {
        let nvcomp = Nvcomp::load(None)?;
        let opts = CompressOpts::with_deflate_algorithm(algorithm, deflate_algorithm);
        Ok(NvBatched {
            compressor: nvcomp.compressor(algorithm, opts)?,
        })
    }

    /// Input and output alignments, the largest output of a tile, and the
    /// temp bytes of a batch.
    pub fn raw_sizes(
        &self,
        chunks: usize,
        tile_bytes: usize,
    ) -> Result<(usize, usize, usize, usize)> {
        let c = &self.compressor;
        let align = c
            .alignments()
            .map_err(|e| gpu_err("nvCOMP alignments", e))?;
        let max_chunk = c
            .max_output_chunk_bytes(tile_bytes)
            .map_err(|e| gpu_err("nvCOMP output size", e))?;
        let temp = c
            .temp_bytes(chunks, tile_bytes, chunks * tile_bytes)
            .map_err(|e| gpu_err("nvCOMP temp size", e))?;
        Ok((align.input, align.output, max_chunk, temp))
    }
}

impl GpuCodec for NvBatched {
    fn sizes(&self, chunks: usize, tile_bytes: usize) -> Result<BatchSizes> {
        let (input_align, output_align, max_chunk, temp) = self.raw_sizes(chunks, tile_bytes)?;
        Ok(BatchSizes {
            input_align,
            slot_bytes: max_chunk,
            slot_align: output_align,
            lead: 0,
            start: 0,
            temp,
            scratch: false,
        })
    }

    unsafe fn compress_async(&self, b: &Batch, stream: &Stream, stage: &'static str) -> Result<()> {
        let batch = CompressBatch {
            uncompressed_ptrs: b.tile_ptrs,
            uncompressed_bytes: b.tile_sizes,
            max_uncompressed_chunk_bytes: b.max_tile_bytes,
            num_chunks: b.chunks,
            temp: b.temp,
            temp_bytes: b.temp_bytes,
            compressed_ptrs: b.chunk_ptrs,
            compressed_bytes: b.chunk_sizes,
            statuses: b.statuses,
        };
        // SAFETY: the caller guarantees the context, the stream and every
        // buffer of the batch (see the trait).
        unsafe { self.compressor.compress_async(&batch, stream.0 as _) }
            .map_err(|e| gpu_err(stage, e))
    }
}
