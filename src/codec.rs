//! Chunk codecs on the CPU: zstd, blosc (Blosc1 frames, zstd inside) and
//! `none`, and the Zarr codec metadata each one produces.

use crate::config::{Codec, Shuffle};
use serde_json::{json, Value};

/// The inner compressor of every blosc frame written here.
pub const BLOSC_CNAME: &str = "zstd";

/// A per-thread compressor: owns the zstd context so that a worker reuses
/// it for every tile.
pub struct ChunkCompressor {
    inner: Inner,
}

enum Inner {
    None,
    Zstd(zstd::bulk::Compressor<'static>),
    /// c-blosc keeps no state between frames: only the parameters.
    Blosc(blosc1::Params),
}

impl ChunkCompressor {
    /// A compressor for tiles of elements of `elem_size` bytes (blosc
    /// shuffles by it).
    pub fn new(codec: Codec, elem_size: usize) -> std::io::Result<ChunkCompressor> {
        let inner = match codec {
            Codec::None => Inner::None,
            Codec::Zstd { level } => Inner::Zstd(zstd::bulk::Compressor::new(level)?),
            Codec::Blosc { level, shuffle } => Inner::Blosc(blosc1::Params {
                level: u8::try_from(level)
                    .map_err(|_| invalid(format!("blosc level {level} is out of range")))?,
                shuffle: blosc_shuffle(shuffle),
                typesize: elem_size,
            }),
        };
        Ok(ChunkCompressor { inner })
    }

    /// Replaces `out` with the encoded chunk of `tile`.
    pub fn compress(&mut self, tile: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        out.clear();
        match &mut self.inner {
            Inner::None => out.extend_from_slice(tile),
            Inner::Zstd(z) => {
                out.try_reserve_exact(zstd::zstd_safe::compress_bound(tile.len()))
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e))?;
                z.compress_to_buffer(tile, out)?;
            }
            // One thread per frame: the backend runs tiles in parallel.
            Inner::Blosc(p) => blosc1::compress(p, tile, out).map_err(|e| match e {
                blosc1::Error::OutOfMemory(_) => {
                    std::io::Error::new(std::io::ErrorKind::OutOfMemory, e)
                }
                e => std::io::Error::other(e),
            })?,
        }
        Ok(())
    }
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message)
}

fn blosc_shuffle(s: Shuffle) -> blosc1::Shuffle {
    match s {
        Shuffle::None => blosc1::Shuffle::None,
        Shuffle::Byte => blosc1::Shuffle::Byte,
        Shuffle::Bit => blosc1::Shuffle::Bit,
    }
}

/// Upper bound of one encoded chunk of `tile_bytes`.
pub fn max_chunk_bytes(codec: Codec, tile_bytes: usize) -> usize {
    match codec {
        Codec::None => tile_bytes,
        Codec::Zstd { .. } => zstd::zstd_safe::compress_bound(tile_bytes),
        Codec::Blosc { .. } => blosc1::max_compressed_len(tile_bytes),
    }
}

/// The inner `codecs` list of the `sharding_indexed` codec: how a reader
/// decodes one chunk of elements of `elem_size` bytes.
pub fn zarr_chunk_codecs(codec: Codec, elem_size: usize) -> Value {
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    match codec {
        Codec::None => json!([bytes]),
        Codec::Zstd { level } => json!([
            bytes,
            {"name": "zstd", "configuration": {"level": level, "checksum": false}}
        ]),
        // The Zarr v3 blosc codec: the shuffle mode and typesize are
        // recorded explicitly, blocksize 0 is c-blosc's automatic choice.
        Codec::Blosc { level, shuffle } => json!([
            bytes,
            {"name": "blosc", "configuration": {
                "cname": BLOSC_CNAME,
                "clevel": level,
                "shuffle": match shuffle {
                    Shuffle::None => "noshuffle",
                    Shuffle::Byte => "shuffle",
                    Shuffle::Bit => "bitshuffle",
                },
                "typesize": elem_size,
                "blocksize": 0
            }}
        ]),
    }
}

#[cfg(test)]
mod tests;
