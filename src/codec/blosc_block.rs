//! Blosc1 frames of one block, as the GPU backend writes them
//! (kernels/blosc.cu), with the same arithmetic on the CPU: the shuffle
//! filters and the frame around an inner stream. The tests check these
//! against c-blosc's decoder, so the kernels' format is pinned down on a
//! machine without a GPU; the benchmark uses the filters to give nvCOMP's
//! ceiling the tiles the GPU compresses.

use crate::config::{Cname, Shuffle};

/// Byte `j` of every element together, plane after plane.
pub fn shuffle_bytes(tile: &[u8], typesize: usize, out: &mut [u8]) {
    let elems = tile.len() / typesize;
    for (e, element) in tile.chunks_exact(typesize).enumerate() {
        for (j, &b) in element.iter().enumerate() {
            out[j * elems + e] = b;
        }
    }
}

/// c-blosc's bit shuffle: 8 * typesize rows of elems / 8 bytes, row 8j + b
/// holding bit b of byte j of every element, element e at bit e % 8 of
/// byte e / 8; a tile whose element count is not a multiple of 8 is left
/// as it is, as c-blosc 1.x leaves it.
pub fn bitshuffle(tile: &[u8], typesize: usize, out: &mut [u8]) {
    let elems = tile.len() / typesize;
    if !elems.is_multiple_of(8) {
        out[..tile.len()].copy_from_slice(tile);
        return;
    }
    let row = elems / 8;
    out[..tile.len()].fill(0);
    for (e, element) in tile.chunks_exact(typesize).enumerate() {
        for (j, &byte) in element.iter().enumerate() {
            for b in 0..8 {
                out[(8 * j + b) * row + e / 8] |= ((byte >> b) & 1) << (e % 8);
            }
        }
    }
}

/// What the compressor reads for `shuffle` (the tile itself when the
/// filter is the identity).
pub fn filtered(tile: &[u8], shuffle: Shuffle, typesize: usize) -> Vec<u8> {
    let mut out = vec![0; tile.len()];
    match shuffle {
        Shuffle::Byte if typesize > 1 => shuffle_bytes(tile, typesize, &mut out),
        Shuffle::Bit => bitshuffle(tile, typesize, &mut out),
        _ => out.copy_from_slice(tile),
    }
    out
}

/// The flags byte: the shuffle, "don't split" and the inner codec.
pub fn flags(shuffle: Shuffle, cname: Cname) -> u8 {
    blosc1::one_stream_flags(
        super::blosc::shuffle_of(shuffle),
        super::blosc::cname_of(cname),
    )
}

/// The frame of a tile of `tile_bytes` around `stream` (the inner codec's
/// output; for zlib a raw deflate stream, wrapped here), or the memcpyed
/// frame of `raw` when it would not be smaller.
pub fn frame(
    raw: &[u8],
    stream: &[u8],
    shuffle: Shuffle,
    cname: Cname,
    typesize: usize,
    adler32: Option<u32>,
) -> Vec<u8> {
    let zlib = cname == Cname::Zlib;
    let inner = stream.len() + if zlib { 6 } else { 0 };
    let total = 24 + inner;
    let memcpyed = total >= 16 + raw.len();
    let size = if memcpyed { 16 + raw.len() } else { total };
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&[2, 1, flags(shuffle, cname) | if memcpyed { 0x2 } else { 0 }]);
    out.push(typesize as u8);
    for v in [raw.len(), raw.len(), size] {
        out.extend_from_slice(&(v as u32).to_le_bytes());
    }
    if memcpyed {
        out.extend_from_slice(raw);
        return out;
    }
    out.extend_from_slice(&20u32.to_le_bytes());
    out.extend_from_slice(&(inner as u32).to_le_bytes());
    if zlib {
        out.extend_from_slice(&[0x78, 0x01]);
    }
    out.extend_from_slice(stream);
    if let (true, Some(a)) = (zlib, adler32) {
        out.extend_from_slice(&a.to_be_bytes());
    }
    out
}

/// Adler-32 as the kernel computes it: a = 1 + sum d_i, b = n + sum (n - i)
/// d_i, modulo 65521.
pub fn adler32(data: &[u8]) -> u32 {
    const MOD: u64 = 65521;
    let n = data.len() as u64;
    let (mut a, mut b) = (0u64, 0u64);
    for (i, &d) in data.iter().enumerate() {
        a = (a + d as u64) % MOD;
        b = (b + ((n - i as u64) % MOD) * d as u64) % MOD;
    }
    let lo = (1 + a) % MOD;
    let hi = (n % MOD + b) % MOD;
    ((hi as u32) << 16) | lo as u32
}
