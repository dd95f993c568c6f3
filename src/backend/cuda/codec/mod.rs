//! The GPU half of each codec (the CPU half, and the Zarr metadata both
//! write, is `crate::codec`): what nvCOMP needs sized for a batch of tiles,
//! and the batched compress call. A new codec is a file here and an arm in
//! [`load`] and [`max_tile_bytes`].

mod zstd;

use super::driver::Stream;
use crate::config::Codec;
use crate::error::{Error, Result};

/// What a codec needs for one batch of tiles.
#[derive(Debug, Clone, Copy)]
pub struct BatchSizes {
    /// Alignment of each tile (input) and of each compressed chunk.
    pub input_align: usize,
    pub output_align: usize,
    /// The largest compressed chunk of one tile.
    pub max_chunk: usize,
    /// The codec's temp buffer.
    pub temp: usize,
}

/// The device buffers of one batched compress call: every pointer a device
/// address; "array" a device array of `chunks` elements.
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    /// Array of pointers to the tiles, each aligned to `input_align`.
    pub tile_ptrs: u64,
    /// Array of `size_t`: each tile's bytes.
    pub tile_sizes: u64,
    pub max_tile_bytes: usize,
    pub chunks: usize,
    pub temp: u64,
    pub temp_bytes: usize,
    /// Array of pointers to each chunk's output, `max_chunk` long and
    /// aligned to `output_align`.
    pub chunk_ptrs: u64,
    /// Array of `size_t`, written: each chunk's compressed bytes.
    pub chunk_sizes: u64,
    /// Array of `i32`, written: each chunk's status.
    pub statuses: u64,
}

/// A codec on the GPU.
pub trait GpuCodec: Send {
    /// The sizes for a batch of `chunks` tiles of `tile_bytes`.
    fn sizes(&self, chunks: usize, tile_bytes: usize) -> Result<BatchSizes>;

    /// Enqueues the compression of `batch` on `stream`; `stage` names the
    /// call in errors.
    ///
    /// # Safety
    /// The CUDA context owning every buffer is current on this thread,
    /// `stream` is a live stream of it, and every buffer of `batch` is
    /// sized and aligned as [`GpuCodec::sizes`] asks for this batch's
    /// shape, until the stream has finished the work.
    unsafe fn compress_async(
        &self,
        batch: &Batch,
        stream: &Stream,
        stage: &'static str,
    ) -> Result<()>;
}

/// The GPU codec of `codec`; `None` for `none` (tiles stored as they are).
pub fn load(codec: Codec) -> Result<Option<Box<dyn GpuCodec>>> {
    match codec {
        Codec::None => Ok(None),
        Codec::Zstd { .. } => Ok(Some(Box::new(zstd::NvZstd::load()?))),
        Codec::Blosc { .. } => Err(Error::BackendUnavailable(super::BLOSC_UNSUPPORTED.into())),
    }
}

/// The largest tile `codec` compresses on the GPU, and the limit's name.
pub fn max_tile_bytes(codec: Codec) -> Option<(usize, &'static str)> {
    match codec {
        Codec::Zstd { .. } => Some((zstd::MAX_CHUNK, "nvCOMP's zstd chunk limit")),
        Codec::None | Codec::Blosc { .. } => None,
    }
}
