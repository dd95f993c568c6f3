//! The GPU half of each codec (the CPU half, and the Zarr metadata both
//! write, is `crate::codec`): what nvCOMP needs sized for a batch of tiles,
//! the batched compress call, and the kernels a codec runs around it (the
//! blosc shuffle before, its framing after). A new codec is a file here and
//! an arm in [`load`] and [`max_tile_bytes`].

mod blosc;
mod nvcomp;

pub use nvcomp::deflate_algorithm;

use super::driver::Stream;
use super::kernels::Kernels;
use crate::config::{Cname, Codec};
use crate::error::{Error, Result};
use nvcomp_sys::Algorithm;

/// What a codec needs for one batch of tiles.
#[derive(Debug, Clone, Copy)]
pub struct BatchSizes {
    /// Alignment of each tile the compressor reads.
    pub input_align: usize,
    /// Bytes of one chunk's slot in the compressed pool, and the alignment
    /// of each slot.
    pub slot_bytes: usize,
    pub slot_align: usize,
    /// Where in its slot the compressor writes (room for a header before
    /// it), and where the finished chunk starts.
    pub lead: usize,
    pub start: usize,
    /// The compressor's temp buffer.
    pub temp: usize,
    /// Whether the codec filters each tile into a scratch pool (one tile
    /// pool's size) that the compressor then reads, unless the scatter
    /// applies the filter ([`GpuCodec::scatter_filter`]).
    pub scratch: bool,
}

/// A shuffle the scatter kernel can apply as it writes the tiles
/// (`TZ_FILTER_*` of kernels/shuffle.cuh): blosc's byte shuffle. (Its bit
/// shuffle there measured slower than the two kernels apart.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Filter {
    None = 0,
    Bytes = 1,
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
    /// Array of pointers to each chunk's output (its slot plus `lead`).
    pub chunk_ptrs: u64,
    /// Array of `size_t`, written: each chunk's compressed bytes.
    pub chunk_sizes: u64,
    /// Array of `i32`, written: each chunk's status.
    pub statuses: u64,
}

/// The pools a codec's own kernels work on for one batch (device
/// addresses; strides in bytes).
#[derive(Debug, Clone, Copy)]
pub struct Pools {
    /// The scattered tiles, as the array holds them.
    pub tiles: u64,
    pub tile_stride: u64,
    /// How the scatter shuffled the tiles (`Filter::None` where it did
    /// not: the codec's own kernels then filter them into `scratch`).
    pub tiles_filter: Filter,
    /// The scratch pool (0 when the codec asked for none or the scatter
    /// filtered), `tile_stride` apart.
    pub scratch: u64,
    /// The compressed pool's slots, `slot_stride` apart.
    pub slots: u64,
    pub slot_stride: u64,
    /// Array of `size_t`: the compressor's output sizes, rewritten to the
    /// finished chunks' sizes.
    pub sizes: u64,
    pub chunks: usize,
    pub tile_bytes: usize,
}

/// A codec on the GPU.
pub trait GpuCodec: Send {
    /// The sizes for a batch of `chunks` tiles of `tile_bytes`.
    fn sizes(&self, chunks: usize, tile_bytes: usize) -> Result<BatchSizes>;

    /// The filter the scatter may apply for this codec in place of the
    /// codec's own kernels (and their scratch pool), where the geometry
    /// allows ([`super::kernels::Geometry::can_filter`]).
    fn scatter_filter(&self) -> Filter {
        Filter::None
    }

    /// Whether the compress call runs (blosc at level 0 stores every chunk
    /// as it is): only then may its chunks be taken in another order.
    fn compresses(&self) -> bool {
        true
    }

    /// Enqueues what runs on the tiles before the compress call.
    ///
    /// # Safety
    /// The CUDA context owning every buffer is current on this thread,
    /// `stream` is a live stream of it, and every pool of `pools` is sized
    /// as [`GpuCodec::sizes`] asked, until the stream has finished the work.
    unsafe fn before_compress(&self, _pools: &Pools, _k: &Kernels, _s: &Stream) -> Result<()> {
        Ok(())
    }

    /// Enqueues the compression of `batch` on `stream`; `stage` names the
    /// call in errors.
    ///
    /// # Safety
    /// As [`GpuCodec::before_compress`], for the buffers of `batch`.
    unsafe fn compress_async(
        &self,
        batch: &Batch,
        stream: &Stream,
        stage: &'static str,
    ) -> Result<()>;

    /// Enqueues what turns the compressor's outputs into finished chunks.
    ///
    /// # Safety
    /// As [`GpuCodec::before_compress`].
    unsafe fn after_compress(&self, _pools: &Pools, _k: &Kernels, _s: &Stream) -> Result<()> {
        Ok(())
    }
}

/// The GPU codec of `codec` for elements of `elem_size` bytes; `None` for
/// `none` (tiles stored as they are).
pub fn load(codec: Codec, elem_size: usize) -> Result<Option<Box<dyn GpuCodec>>> {
    let Some((algorithm, deflate)) = nvcomp_compressor(codec) else {
        return Ok(None);
    };
    let inner = nvcomp::NvBatched::load(algorithm, deflate)
        .map_err(|e| Error::BackendUnavailable(e.to_string()))?;
    Ok(Some(match codec {
        Codec::Blosc {
            level,
            shuffle,
            cname,
        } => Box::new(blosc::NvBlosc::new(inner, level, shuffle, cname, elem_size)),
        _ => Box::new(inner),
    }))
}

/// nvCOMP's compressor for `codec` (blosc: the one inside its frames) and
/// its deflate/gzip algorithm; `None` for `none`.
pub fn nvcomp_compressor(codec: Codec) -> Option<(Algorithm, i32)> {
    match codec {
        Codec::None => None,
        Codec::Zstd { .. } => Some((Algorithm::Zstd, 0)),
        Codec::Gzip { level } => Some((Algorithm::Gzip, deflate_algorithm(level))),
        Codec::Blosc { level, cname, .. } => Some(match cname {
            Cname::Zstd => (Algorithm::Zstd, 0),
            Cname::Lz4 => (Algorithm::Lz4, 0),
            Cname::Zlib => (Algorithm::Deflate, deflate_algorithm(level)),
        }),
    }
}

/// The largest tile `codec` compresses on the GPU, and the limit's name.
pub fn max_tile_bytes(codec: Codec) -> Option<(usize, &'static str)> {
    match codec {
        Codec::None => None,
        Codec::Zstd { .. } => Some((
            Algorithm::Zstd.max_chunk_bytes(),
            "nvCOMP's zstd chunk limit",
        )),
        Codec::Gzip { .. } => Some((
            Algorithm::Gzip.max_chunk_bytes(),
            "nvCOMP's gzip chunk limit",
        )),
        Codec::Blosc { cname, .. } => {
            let (inner, name) = match cname {
                Cname::Zstd => (Algorithm::Zstd, "nvCOMP's zstd chunk limit"),
                Cname::Lz4 => (Algorithm::Lz4, "nvCOMP's LZ4 chunk limit"),
                Cname::Zlib => (Algorithm::Deflate, "nvCOMP's deflate chunk limit"),
            };
            // A Blosc1 block is at most c-blosc's BLOSC_MAX_BLOCKSIZE.
            let block = blosc::MAX_BLOCK_BYTES;
            Some(if block < inner.max_chunk_bytes() {
                (block, "the Blosc1 block limit")
            } else {
                (inner.max_chunk_bytes(), name)
            })
        }
    }
}
