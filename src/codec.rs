//! Chunk codecs on the CPU: zstd and `none`, and the Zarr codec metadata each
//! one produces.

use crate::config::Codec;
use serde_json::{json, Value};

/// A per-thread compressor: owns the zstd context so that a worker reuses
/// it for every tile.
pub struct ChunkCompressor {
    inner: Inner,
}

enum Inner {
    None,
    Zstd(zstd::bulk::Compressor<'static>),
}

impl ChunkCompressor {
    pub fn new(codec: Codec) -> std::io::Result<ChunkCompressor> {
        let inner = match codec {
            Codec::None => Inner::None,
            Codec::Zstd { level } => Inner::Zstd(zstd::bulk::Compressor::new(level)?),
        };
        Ok(ChunkCompressor { inner })
    }

    /// Replaces `out` with the encoded chunk of `tile`.
    pub fn compress(&mut self, tile: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        out.clear();
        match &mut self.inner {
            Inner::None => out.extend_from_slice(tile),
            Inner::Zstd(z) => {
                out.reserve(zstd::zstd_safe::compress_bound(tile.len()));
                z.compress_to_buffer(tile, out)?;
            }
        }
        Ok(())
    }
}

/// Upper bound of one encoded chunk of `tile_bytes`.
pub fn max_chunk_bytes(codec: Codec, tile_bytes: usize) -> usize {
    match codec {
        Codec::None => tile_bytes,
        Codec::Zstd { .. } => zstd::zstd_safe::compress_bound(tile_bytes),
    }
}

/// The inner `codecs` list of the `sharding_indexed` codec: how a reader
/// decodes one chunk.
pub fn zarr_chunk_codecs(codec: Codec) -> Value {
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    match codec {
        Codec::None => json!([bytes]),
        Codec::Zstd { level } => json!([
            bytes,
            {"name": "zstd", "configuration": {"level": level, "checksum": false}}
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_round_trips_and_none_copies() {
        let tile: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        ChunkCompressor::new(Codec::Zstd { level: 3 })
            .unwrap()
            .compress(&tile, &mut out)
            .unwrap();
        assert!(out.len() < tile.len());
        assert_eq!(zstd::bulk::decompress(&out, tile.len()).unwrap(), tile);
        ChunkCompressor::new(Codec::None)
            .unwrap()
            .compress(&tile, &mut out)
            .unwrap();
        assert_eq!(out, tile);
    }
}
