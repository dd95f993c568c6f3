//! blosc: one Blosc1 frame per chunk with zstd, lz4 or zlib inside,
//! shuffled by the element size first (the Zarr v3 `blosc` codec), written
//! by `blosc1::Writer` (c-blosc's filters and inner compressors, their
//! buffers and state kept from tile to tile).

use crate::config::{Cname, Shuffle};
use serde_json::{json, Value};

/// One thread's frame writer.
pub struct Compressor(blosc1::Writer);

impl Compressor {
    pub fn new(
        level: i32,
        shuffle: Shuffle,
        cname: Cname,
        elem_size: usize,
    ) -> std::io::Result<Compressor> {
        let level = u8::try_from(level).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("blosc level {level} is out of range"),
            )
        })?;
        blosc1::Writer::new(blosc1::Params {
            level,
            cname: cname_of(cname),
            shuffle: shuffle_of(shuffle),
            typesize: elem_size,
        })
        .map(Compressor)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    }

    /// Appends the frame of `tile` to `out`. One thread per frame: the
    /// backend runs tiles in parallel.
    pub fn compress_append(&mut self, tile: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        self.0
            .compress_append(tile, out)
            .map(|_| ())
            .map_err(|e| match e {
                blosc1::Error::OutOfMemory(_) => {
                    std::io::Error::new(std::io::ErrorKind::OutOfMemory, e)
                }
                e => std::io::Error::other(e),
            })
    }
}

/// c-blosc's compressor for `cname`.
pub fn cname_of(cname: Cname) -> blosc1::Cname {
    match cname {
        Cname::Zstd => blosc1::Cname::Zstd,
        Cname::Lz4 => blosc1::Cname::Lz4,
        Cname::Zlib => blosc1::Cname::Zlib,
    }
}

pub fn shuffle_of(s: Shuffle) -> blosc1::Shuffle {
    match s {
        Shuffle::None => blosc1::Shuffle::None,
        Shuffle::Byte => blosc1::Shuffle::Byte,
        Shuffle::Bit => blosc1::Shuffle::Bit,
    }
}

/// The largest frame of a tile of `tile_bytes`.
pub fn bound(tile_bytes: usize) -> usize {
    blosc1::max_compressed_len(tile_bytes)
}

/// The codec's entry in the `sharding_indexed` chunk codecs: the shuffle
/// mode and typesize are recorded explicitly, blocksize 0 is c-blosc's
/// automatic choice.
pub fn metadata(level: i32, shuffle: Shuffle, cname: Cname, elem_size: usize) -> Value {
    json!({"name": "blosc", "configuration": {
        "cname": cname_of(cname).name(),
        "clevel": level,
        "shuffle": match shuffle {
            Shuffle::None => "noshuffle",
            Shuffle::Byte => "shuffle",
            Shuffle::Bit => "bitshuffle",
        },
        "typesize": elem_size,
        "blocksize": 0
    }})
}
