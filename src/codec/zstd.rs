//! zstd: one zstd frame per chunk (the Zarr v3 `zstd` codec).

use serde_json::{json, Value};

/// A zstd context at one level, reused for every tile of a worker.
pub struct Compressor(zstd::bulk::Compressor<'static>);

impl Compressor {
    pub fn new(level: i32) -> std::io::Result<Compressor> {
        Ok(Compressor(zstd::bulk::Compressor::new(level)?))
    }

    /// Appends the frame of `tile` to `out`.
    pub fn compress_append(&mut self, tile: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        out.try_reserve_exact(bound(tile.len()))
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e))?;
        // A cursor at the end: zstd writes after what `out` holds.
        let mut end = std::io::Cursor::new(out);
        end.set_position(end.get_ref().len() as u64);
        self.0.compress_to_buffer(tile, &mut end)?;
        Ok(())
    }
}

/// The largest frame of a tile of `tile_bytes`.
pub fn bound(tile_bytes: usize) -> usize {
    zstd::zstd_safe::compress_bound(tile_bytes)
}

/// The codec's entry in the `sharding_indexed` chunk codecs.
pub fn metadata(level: i32) -> Value {
    json!({"name": "zstd", "configuration": {"level": level, "checksum": false}})
}
