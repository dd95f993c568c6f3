//! Chunk codecs on the CPU, one file per codec with its compressor, its
//! bound and the Zarr codec metadata it produces: `zstd`, `blosc` (Blosc1
//! frames, zstd, lz4 or zlib inside), `gzip` and `none` (the tile as it is). A new codec
//! is a file here and an arm in each of the three dispatches below.

mod blosc;
pub mod blosc_block;
mod gzip;
mod zstd;

use crate::config::Codec;
use serde_json::{json, Value};

pub use blosc::cname_of as blosc_cname;

/// A per-thread compressor: owns the codec's state (zstd's context) so
/// that a worker reuses it for every tile.
pub struct ChunkCompressor {
    inner: Inner,
}

enum Inner {
    None,
    Zstd(zstd::Compressor),
    Blosc(blosc::Compressor),
    Gzip(gzip::Compressor),
}

impl ChunkCompressor {
    /// A compressor for tiles of elements of `elem_size` bytes (blosc
    /// shuffles by it).
    pub fn new(codec: Codec, elem_size: usize) -> std::io::Result<ChunkCompressor> {
        let inner = match codec {
            Codec::None => Inner::None,
            Codec::Zstd { level } => Inner::Zstd(zstd::Compressor::new(level)?),
            Codec::Blosc {
                level,
                shuffle,
                cname,
            } => Inner::Blosc(blosc::Compressor::new(level, shuffle, cname, elem_size)?),
            Codec::Gzip { level } => Inner::Gzip(gzip::Compressor::new(level)),
        };
        Ok(ChunkCompressor { inner })
    }

    /// Replaces `out` with the encoded chunk of `tile`.
    pub fn compress(&mut self, tile: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        out.clear();
        self.compress_append(tile, out).map(|_| ())
    }

    /// Appends the encoded chunk of `tile` to `out` and returns its length:
    /// a worker packs a run of chunks into one buffer. On an error `out`
    /// holds what it held before.
    pub fn compress_append(&mut self, tile: &[u8], out: &mut Vec<u8>) -> std::io::Result<usize> {
        let base = out.len();
        let done = match &mut self.inner {
            Inner::None => out
                .try_reserve_exact(tile.len())
                .map(|()| out.extend_from_slice(tile))
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e)),
            Inner::Zstd(z) => z.compress_append(tile, out),
            Inner::Blosc(b) => b.compress_append(tile, out),
            Inner::Gzip(g) => g.compress_append(tile, out),
        };
        match done {
            Ok(()) => Ok(out.len() - base),
            Err(e) => {
                out.truncate(base);
                Err(e)
            }
        }
    }
}

/// Upper bound of one encoded chunk of `tile_bytes`.
pub fn max_chunk_bytes(codec: Codec, tile_bytes: usize) -> usize {
    match codec {
        Codec::None => tile_bytes,
        Codec::Zstd { .. } => zstd::bound(tile_bytes),
        Codec::Blosc { .. } => blosc::bound(tile_bytes),
        Codec::Gzip { .. } => gzip::bound(tile_bytes),
    }
}

/// The inner `codecs` list of the `sharding_indexed` codec: how a reader
/// decodes one chunk of elements of `elem_size` bytes.
pub fn zarr_chunk_codecs(codec: Codec, elem_size: usize) -> Value {
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    match codec {
        Codec::None => json!([bytes]),
        Codec::Zstd { level } => json!([bytes, zstd::metadata(level)]),
        Codec::Blosc {
            level,
            shuffle,
            cname,
        } => json!([bytes, blosc::metadata(level, shuffle, cname, elem_size)]),
        Codec::Gzip { level } => json!([bytes, gzip::metadata(level)]),
    }
}

#[cfg(test)]
mod tests;
