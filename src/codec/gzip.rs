//! gzip: one gzip member per chunk (the Zarr v3 core `gzip` codec), through
//! flate2 on zlib-rs (a zlib-compatible deflate in Rust: same streams as
//! zlib's at the same level, nothing to build in C).

use flate2::{Compress, Compression, Crc, FlushCompress, Status};
use serde_json::{json, Value};

/// The member header flate2's `GzBuilder` writes without a name or a time:
/// magic, deflate, no flags, mtime 0, no extra flags, OS "unknown".
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// A raw deflate stream at one level, reset for every tile of a worker.
pub struct Compressor(Compress);

impl Compressor {
    pub fn new(level: i32) -> Compressor {
        let level = Compression::new(level.clamp(0, 9) as u32);
        Compressor(Compress::new(level, false))
    }

    /// Appends the gzip member of `tile` to `out`: header, raw deflate,
    /// CRC-32 and size modulo 2^32, little-endian.
    pub fn compress_append(&mut self, tile: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        out.try_reserve_exact(bound(tile.len()))
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e))?;
        out.extend_from_slice(&HEADER);
        self.0.reset();
        // The reserve above holds the whole stream; should deflate still ask
        // for room, it gets more rather than failing the chunk.
        loop {
            let consumed = self.0.total_in() as usize;
            match self
                .0
                .compress_vec(&tile[consumed..], out, FlushCompress::Finish)
            {
                Ok(Status::StreamEnd) => break,
                Ok(_) => out
                    .try_reserve(4096.max(tile.len() / 8))
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e))?,
                Err(e) => return Err(std::io::Error::other(e)),
            }
        }
        let mut crc = Crc::new();
        crc.update(tile);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(tile.len() as u32).to_le_bytes());
        Ok(())
    }
}

/// The largest member of a tile of `tile_bytes`: zlib's conservative
/// `deflateBound` (any level and memory setting), the header and the
/// trailer.
pub fn bound(tile_bytes: usize) -> usize {
    let n = tile_bytes;
    n + n.div_ceil(8) + n.div_ceil(64) + 5 + HEADER.len() + 8
}

/// The codec's entry in the `sharding_indexed` chunk codecs.
pub fn metadata(level: i32) -> Value {
    json!({"name": "gzip", "configuration": {"level": level}})
}
