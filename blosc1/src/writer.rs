//! Blosc1 frames written here, block by block, with c-blosc's own shuffle
//! filters and the inner compressors c-blosc calls (liblz4, libzstd,
//! zlib), their state kept from frame to frame.
//!
//! Why not `blosc_compress_ctx`: every call allocates and frees its block
//! buffers (and a zstd context or a deflate state), so a stream of 64 KiB
//! tiles faults fresh pages in for nearly every frame and rebuilds zstd's
//! tables each time: about a fifth of the frame's time for blosc-zstd.
//! A [`Writer`] owns those buffers and contexts and reuses them.
//!
//! The frames are laid out as c-blosc lays them out by default: blocks
//! of whole elements (one per tile up to 256 KiB), split into one stream
//! per byte of the element where c-blosc splits them (every compressor
//! but zstd), levels mapped onto the inner compressors as c-blosc maps
//! them. With the block size c-blosc is told to use, a frame is c-blosc's
//! own byte for byte (the tests compare them, and decode every
//! combination with c-blosc).

use crate::filters;
use crate::zlib::Deflate;
use crate::{
    Cname, Error, Params, Shuffle, MAX_INPUT_BYTES, MAX_LEVEL, MAX_OVERHEAD, MAX_TYPESIZE,
};

/// The largest block: a block, its filtered copy and its compressed bytes
/// stay within a core's L2 cache. A tile up to this size is one block.
pub const MAX_BLOCK_BYTES: usize = 256 * 1024;

/// Inputs smaller than this are stored as they are (c-blosc's
/// `MIN_BUFFERSIZE`).
const MIN_BUFFER_BYTES: usize = 128;

/// The most streams c-blosc splits a block into (`MAX_SPLITS`).
const MAX_SPLITS: usize = 16;

/// Header flags (c-blosc's README_CHUNK_FORMAT).
const FLAG_SHUFFLE: u8 = 0x1;
const FLAG_MEMCPYED: u8 = 0x2;
const FLAG_BITSHUFFLE: u8 = 0x4;
const FLAG_DONT_SPLIT: u8 = 0x10;

/// `BLOSC_VERSION_FORMAT`, and the format version of every inner codec
/// used here (`BLOSC_{LZ4,ZLIB,ZSTD}_VERSION_FORMAT`).
const FORMAT_VERSION: u8 = 2;
const INNER_FORMAT_VERSION: u8 = 1;

/// The compressor inside the frames, with its state.
enum Inner {
    Lz4 { acceleration: i32 },
    Zstd(zstd::bulk::Compressor<'static>),
    Zlib(Deflate),
}

/// Writes Blosc1 frames of one set of parameters, reusing its buffers and
/// compressor state; one per thread.
pub struct Writer {
    params: Params,
    inner: Inner,
    /// One block after the filter.
    filtered: Vec<u8>,
    /// The bit shuffle's scratch.
    scratch: Vec<u8>,
    /// One block's compressed bytes.
    packed: Vec<u8>,
}

impl Writer {
    pub fn new(params: Params) -> Result<Writer, Error> {
        if params.level > MAX_LEVEL {
            return Err(Error::Level(params.level));
        }
        if !(1..=MAX_TYPESIZE).contains(&params.typesize) {
            return Err(Error::Typesize(params.typesize));
        }
        let level = i32::from(params.level);
        let inner = match params.cname {
            // c-blosc: acceleration 10 - level.
            Cname::Lz4 => Inner::Lz4 {
                acceleration: 10 - level,
            },
            Cname::Zstd => Inner::Zstd(
                zstd::bulk::Compressor::new(zstd_level(level))
                    .map_err(|e| Error::Setup("zstd", e.raw_os_error().unwrap_or(-1)))?,
            ),
            Cname::Zlib => {
                Inner::Zlib(Deflate::new(level).map_err(|code| Error::Setup("zlib", code))?)
            }
        };
        Ok(Writer {
            params,
            inner,
            filtered: Vec::new(),
            scratch: Vec::new(),
            packed: Vec::new(),
        })
    }

    /// Replaces `out` with the Blosc1 frame of `input`.
    pub fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        out.clear();
        self.compress_append(input, out).map(|_| ())
    }

    /// Appends the Blosc1 frame of `input` to `out`; returns its length.
    /// What `out` held before stays as it was, also on an error.
    pub fn compress_append(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Error> {
        let base = out.len();
        self.frame_at(input, out, base)
            .inspect_err(|_| out.truncate(base))?;
        Ok(out.len() - base)
    }

    /// Writes the frame of `input` after `out[..base]`.
    fn frame_at(&mut self, input: &[u8], out: &mut Vec<u8>, base: usize) -> Result<(), Error> {
        let n = input.len();
        if n > MAX_INPUT_BYTES {
            return Err(Error::TooLarge(n));
        }
        // The frame's own length, which it never reaches.
        let capacity = n + MAX_OVERHEAD;
        out.try_reserve(capacity)
            .map_err(|_| Error::OutOfMemory(capacity))?;
        let p = self.params;
        if p.level == 0 || n < MIN_BUFFER_BYTES {
            memcpyed(&p, input, out, base);
            return Ok(());
        }
        let block = block_bytes(n, p.typesize);
        let blocks = n.div_ceil(block);
        let split = splits(p.cname, p.typesize, block);
        let room = block.min(n);
        // The bit shuffle alone needs the scratch.
        let scratch = if p.shuffle == Shuffle::Bit {
            Some(&mut self.scratch)
        } else {
            None
        };
        for v in [&mut self.filtered, &mut self.packed]
            .into_iter()
            .chain(scratch)
        {
            if v.len() < room {
                v.try_reserve(room - v.len())
                    .map_err(|_| Error::OutOfMemory(room))?;
                v.resize(room, 0);
            }
        }
        let flags = if split { 0 } else { FLAG_DONT_SPLIT };
        header(&p, n, block, flags, out);
        let starts = out.len();
        if starts - base + 4 * blocks >= capacity {
            memcpyed(&p, input, out, base);
            return Ok(());
        }
        out.resize(starts + 4 * blocks, 0);
        for (b, src) in input.chunks(block).enumerate() {
            let at = (out.len() - base) as u32;
            out[starts + 4 * b..starts + 4 * b + 4].copy_from_slice(&at.to_le_bytes());
            let filtered = &mut self.filtered[..src.len()];
            let block_in = if filter(&p, src, filtered, &mut self.scratch)? {
                &*filtered
            } else {
                src
            };
            // A full block of a split frame is one stream per byte of the
            // element (c-blosc's "split"); the last, shorter block is one.
            let streams = if split && src.len() == block {
                p.typesize
            } else {
                1
            };
            for stream_in in block_in.chunks(block_in.len() / streams) {
                let packed = &mut self.packed[..stream_in.len()];
                // c-blosc keeps the (filtered) stream as it is when it does
                // not shrink.
                let bytes = match self.inner.pack(stream_in, packed) {
                    Some(size) => &packed[..size],
                    None => stream_in,
                };
                // A frame that would not be smaller than the input is
                // stored as it is (and `out` never grows past what was
                // reserved).
                if out.len() - base + 4 + bytes.len() >= capacity {
                    memcpyed(&p, input, out, base);
                    return Ok(());
                }
                out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                out.extend_from_slice(bytes);
            }
        }
        let total = (out.len() - base) as u32;
        out[base + 12..base + 16].copy_from_slice(&total.to_le_bytes());
        Ok(())
    }
}

/// Applies `p`'s filter to `src` into `dst` (as long); false when the
/// filter leaves the block as it is and `dst` was not written.
fn filter(p: &Params, src: &[u8], dst: &mut [u8], scratch: &mut [u8]) -> Result<bool, Error> {
    let t = p.typesize;
    match p.shuffle {
        // As c-blosc: a byte shuffle of one-byte elements is the identity,
        // and a bit shuffle needs a whole element.
        Shuffle::Byte if t > 1 => {
            filters::byte_shuffle(t, src, dst);
            Ok(true)
        }
        Shuffle::Bit if src.len() >= t => {
            filters::bit_shuffle(t, src, dst, scratch)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

impl Inner {
    /// Compresses `src` into `dst` (as long as `src`): the compressed
    /// size, or `None` when it does not fit in fewer bytes than `src`.
    fn pack(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        let size = match self {
            Inner::Lz4 { acceleration } => {
                let (Ok(n), Ok(cap)) = (i32::try_from(src.len()), i32::try_from(dst.len())) else {
                    return None;
                };
                // SAFETY: `src` is readable for `n` bytes and `dst` writable
                // for `cap`; LZ4 writes at most `cap` bytes and returns 0
                // when the block does not fit.
                let size = unsafe {
                    lz4_sys::LZ4_compress_fast(
                        src.as_ptr().cast(),
                        dst.as_mut_ptr().cast(),
                        n,
                        cap,
                        *acceleration,
                    )
                };
                usize::try_from(size).ok()?
            }
            Inner::Zstd(z) => z.compress_to_buffer(src, dst).ok()?,
            Inner::Zlib(z) => z.compress(src, dst)?,
        };
        (size > 0 && size < src.len()).then_some(size)
    }
}

/// zstd's level for blosc `level` 1..=9, as c-blosc 1.21 maps it:
/// `2 * level - 1` below 9, zstd's highest at 9. (Its source also sends 8
/// to the highest less 2, but tests the level after mapping it, so 8
/// gives 15; the frames follow what c-blosc writes.)
fn zstd_level(level: i32) -> i32 {
    if level < 9 {
        2 * level - 1
    } else {
        *zstd::compression_level_range().end()
    }
}

/// Bytes per block for `n` bytes of input: all of it up to
/// [`MAX_BLOCK_BYTES`], else blocks of whole groups of 8 elements (the
/// bit shuffle's unit); whole elements either way, as c-blosc's blocks
/// are, a trailing partial element going to a last, shorter block.
fn block_bytes(n: usize, typesize: usize) -> usize {
    let block = if n <= MAX_BLOCK_BYTES {
        n / typesize * typesize
    } else {
        MAX_BLOCK_BYTES / (8 * typesize) * (8 * typesize)
    };
    block.max(1)
}

/// Whether the full blocks of a frame are split into one stream per byte
/// of the element, as c-blosc 1.x decides by default
/// (`BLOSC_FORWARD_COMPAT_SPLIT`): for every compressor but zstd, for
/// elements of up to 16 bytes, and blocks of at least 128 elements. The
/// byte planes of a shuffled block compress faster and smaller apart
/// with LZ4 and zlib.
fn splits(cname: Cname, typesize: usize, block: usize) -> bool {
    cname != Cname::Zstd && typesize <= MAX_SPLITS && block / typesize >= MIN_BUFFER_BYTES
}

/// The header's flags byte of a frame whose blocks are one stream each
/// ("don't split"): the filter and the inner compressor (the GPU's frames
/// carry the same).
pub fn one_stream_flags(shuffle: Shuffle, cname: Cname) -> u8 {
    codec_flags(shuffle, cname) | FLAG_DONT_SPLIT
}

/// The flags byte's filter and inner-compressor bits.
fn codec_flags(shuffle: Shuffle, cname: Cname) -> u8 {
    let filter = match shuffle {
        Shuffle::None => 0,
        Shuffle::Byte => FLAG_SHUFFLE,
        Shuffle::Bit => FLAG_BITSHUFFLE,
    };
    filter | (cname.header_code() << 5)
}

/// The 16-byte header: `block` bytes per block, `extra` flags (splitting,
/// memcpyed) beside the codec's; the total is filled in at the end.
fn header(p: &Params, n: usize, block: usize, extra: u8, out: &mut Vec<u8>) {
    let flags = codec_flags(p.shuffle, p.cname) | extra;
    out.extend_from_slice(&[
        FORMAT_VERSION,
        INNER_FORMAT_VERSION,
        flags,
        p.typesize as u8,
    ]);
    for v in [n, block, 0] {
        out.extend_from_slice(&(v as u32).to_le_bytes());
    }
}

/// Replaces `out[base..]` with the frame that stores `input` as it is.
fn memcpyed(p: &Params, input: &[u8], out: &mut Vec<u8>, base: usize) {
    out.truncate(base);
    header(
        p,
        input.len(),
        input.len(),
        FLAG_MEMCPYED | FLAG_DONT_SPLIT,
        out,
    );
    out.extend_from_slice(input);
    let total = (out.len() - base) as u32;
    out[base + 12..base + 16].copy_from_slice(&total.to_le_bytes());
}

#[cfg(test)]
mod tests;
