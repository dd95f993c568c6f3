//! blosc on the GPU: the shuffle filter (a byte shuffle in the scatter
//! where the geometry allows, else into a scratch pool), nvCOMP's zstd,
//! LZ4 or raw deflate compressing each shuffled tile as one Blosc1 block,
//! and a kernel writing each chunk's Blosc1 header (and zlib's wrapper)
//! around the stream (kernels/blosc.cu). The frames are c-blosc 1.x's, so
//! every blosc reader decodes them; a chunk that does not shrink is stored
//! "memcpyed", as c-blosc does.

use super::nvcomp::NvBatched;
use super::{Batch, BatchSizes, Filter, GpuCodec, Pools};
use crate::backend::cuda::driver::Stream;
use crate::backend::cuda::kernels::Kernels;
use crate::config::{Cname, Shuffle};
use crate::error::Result;
use std::ffi::c_void;

/// c-blosc's BLOSC_MAX_BLOCKSIZE: (INT_MAX - 255 * 4) / 3; readers refuse
/// larger blocks, and a GPU frame is one block.
pub const MAX_BLOCK_BYTES: usize = (i32::MAX as usize - 255 * 4) / 3;

/// Where nvCOMP writes in a chunk's slot: past the longest header (26
/// bytes with zlib's), at an alignment every compressor accepts.
const LEAD: usize = 32;

pub struct NvBlosc {
    inner: NvBatched,
    /// Level 0: every chunk stored memcpyed, as c-blosc does.
    store_only: bool,
    shuffle: Shuffle,
    cname: Cname,
    typesize: usize,
}

impl NvBlosc {
    pub fn new(
        inner: NvBatched,
        level: i32,
        shuffle: Shuffle,
        cname: Cname,
        typesize: usize,
    ) -> NvBlosc {
        NvBlosc {
            inner,
            store_only: level == 0,
            shuffle,
            cname,
            typesize,
        }
    }

    /// Whether a filter runs: a byte shuffle of one-byte elements is the
    /// identity (c-blosc skips it too).
    fn filters(&self) -> bool {
        match self.shuffle {
            Shuffle::None => false,
            Shuffle::Byte => self.typesize > 1,
            Shuffle::Bit => true,
        }
    }

    /// The header bytes in front of the stream: Blosc1's 16, the block's
    /// start and the stream's size, and zlib's two.
    fn header_bytes(&self) -> usize {
        24 + if self.cname == Cname::Zlib { 2 } else { 0 }
    }

    /// The flags byte, as the CPU twin of the framing writes it.
    fn flags(&self) -> u32 {
        u32::from(crate::codec::blosc_block::flags(self.shuffle, self.cname))
    }
}

impl GpuCodec for NvBlosc {
    fn sizes(&self, chunks: usize, tile_bytes: usize) -> Result<BatchSizes> {
        let (input_align, output_align, max_stream, temp) =
            self.inner.raw_sizes(chunks, tile_bytes)?;
        let start = LEAD - self.header_bytes();
        let framed = LEAD + max_stream + 4; // zlib's Adler-32 after the stream
        let memcpyed = start + 16 + tile_bytes;
        Ok(BatchSizes {
            input_align,
            slot_bytes: framed.max(memcpyed),
            slot_align: output_align.max(8),
            lead: LEAD,
            start,
            temp,
            scratch: self.filters(),
        })
    }

    fn scatter_filter(&self) -> Filter {
        if self.shuffle == Shuffle::Byte && self.filters() {
            Filter::Bytes
        } else {
            Filter::None
        }
    }

    fn compresses(&self) -> bool {
        !self.store_only
    }

    unsafe fn before_compress(&self, p: &Pools, k: &Kernels, s: &Stream) -> Result<()> {
        if !self.filters() || p.tiles_filter != Filter::None {
            return Ok(());
        }
        let (kernel, name) = match self.shuffle {
            Shuffle::Bit => (&k.bitshuffle, "blosc bit shuffle"),
            _ => (&k.shuffle_bytes, "blosc byte shuffle"),
        };
        let (mut input, mut in_stride) = (p.tiles, p.tile_stride);
        let (mut out, mut out_stride) = (p.scratch, p.tile_stride);
        let mut elems = (p.tile_bytes / self.typesize) as u64;
        let mut typesize = self.typesize as u32;
        let mut count = p.chunks as u64;
        let grid = (p.chunks as u64 * elems).div_ceil(256).clamp(1, 1 << 16) as u32;
        // SAFETY: the parameters match tz_shuffle_bytes and tz_bitshuffle
        // (in, in_stride, out, out_stride, elems, typesize, count); both
        // pools hold `count` tiles `tile_stride` apart (the caller).
        unsafe {
            kernel.launch(
                grid,
                256,
                s,
                &mut [
                    &mut input as *mut _ as *mut c_void,
                    &mut in_stride as *mut _ as *mut c_void,
                    &mut out as *mut _ as *mut c_void,
                    &mut out_stride as *mut _ as *mut c_void,
                    &mut elems as *mut _ as *mut c_void,
                    &mut typesize as *mut _ as *mut c_void,
                    &mut count as *mut _ as *mut c_void,
                ],
                name,
            )
        }
    }

    unsafe fn compress_async(&self, b: &Batch, stream: &Stream, stage: &'static str) -> Result<()> {
        if self.store_only {
            return Ok(());
        }
        // SAFETY: forwarded to the caller's contract.
        unsafe { self.inner.compress_async(b, stream, stage) }
    }

    unsafe fn after_compress(&self, p: &Pools, k: &Kernels, s: &Stream) -> Result<()> {
        let (mut slots, mut slot_stride, mut lead) = (p.slots, p.slot_stride, LEAD as u64);
        let mut sizes = p.sizes;
        // The tiles as they were before the shuffle (the framing undoes a
        // shuffle the scatter did), and as the compressor read them.
        let (mut raw, mut raw_stride) = (p.tiles, p.tile_stride);
        let mut raw_filter = p.tiles_filter as u32;
        let shuffled_apart = self.filters() && p.tiles_filter == Filter::None;
        let mut packed = if shuffled_apart { p.scratch } else { p.tiles };
        let mut packed_stride = p.tile_stride;
        let mut tile_bytes = p.tile_bytes as u64;
        let mut flags = self.flags();
        let mut typesize = self.typesize as u32;
        let mut mode = u32::from(self.cname == Cname::Zlib) | (u32::from(self.store_only) << 1);
        let mut count = p.chunks as u64;
        let grid = (p.chunks as u32).clamp(1, 65535);
        // SAFETY: the parameters match tz_blosc_frame; every slot holds
        // `slot_bytes` from `sizes` (the header before `lead`, the memcpyed
        // tile from `start`), the pools `count` tiles.
        unsafe {
            k.blosc_frame.launch(
                grid,
                256,
                s,
                &mut [
                    &mut slots as *mut _ as *mut c_void,
                    &mut slot_stride as *mut _ as *mut c_void,
                    &mut lead as *mut _ as *mut c_void,
                    &mut sizes as *mut _ as *mut c_void,
                    &mut raw as *mut _ as *mut c_void,
                    &mut raw_stride as *mut _ as *mut c_void,
                    &mut raw_filter as *mut _ as *mut c_void,
                    &mut packed as *mut _ as *mut c_void,
                    &mut packed_stride as *mut _ as *mut c_void,
                    &mut tile_bytes as *mut _ as *mut c_void,
                    &mut flags as *mut _ as *mut c_void,
                    &mut typesize as *mut _ as *mut c_void,
                    &mut mode as *mut _ as *mut c_void,
                    &mut count as *mut _ as *mut c_void,
                ],
                "blosc framing",
            )
        }
    }
}
