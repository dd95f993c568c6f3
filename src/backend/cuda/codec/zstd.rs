//! zstd through nvCOMP's batched compressor: a standard zstd frame per
//! chunk, as the CPU's libzstd writes (nvCOMP takes no level).

use super::{Batch, BatchSizes, GpuCodec};
use crate::backend::cuda::driver::{gpu_err, Stream};
use crate::error::{Error, Result};
use nvcomp_sys::{Nvcomp, ZstdCompressBatch, ZstdCompressOpts};

/// nvCOMP's zstd takes chunks of at most 16 MiB.
pub const MAX_CHUNK: usize = 16 << 20;

pub struct NvZstd {
    nvcomp: Nvcomp,
    opts: ZstdCompressOpts,
}

impl NvZstd {
    pub fn load() -> Result<NvZstd> {
        let nvcomp = Nvcomp::load(None).map_err(|e| Error::BackendUnavailable(e.to_string()))?;
        Ok(NvZstd {
            nvcomp,
            opts: ZstdCompressOpts::default(),
        })
    }
}

impl GpuCodec for NvZstd {
    fn sizes(&self, chunks: usize, tile_bytes: usize) -> Result<BatchSizes> {
        let nv = &self.nvcomp;
        let align = nv
            .zstd_compress_alignments(&self.opts)
            .map_err(|e| gpu_err("nvCOMP alignments", e))?;
        let max_chunk = nv
            .zstd_compress_max_output_chunk_bytes(tile_bytes, &self.opts)
            .map_err(|e| gpu_err("nvCOMP output size", e))?;
        let temp = nv
            .zstd_compress_temp_bytes(chunks, tile_bytes, chunks * tile_bytes, &self.opts)
            .map_err(|e| gpu_err("nvCOMP temp size", e))?;
        Ok(BatchSizes {
            input_align: align.input,
            output_align: align.output,
            max_chunk,
            temp,
        })
    }

    unsafe fn compress_async(&self, b: &Batch, stream: &Stream, stage: &'static str) -> Result<()> {
        let batch = ZstdCompressBatch {
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
        unsafe {
            self.nvcomp
                .zstd_compress_async(&batch, &self.opts, stream.0 as _)
        }
        .map_err(|e| gpu_err(stage, e))
    }
}
