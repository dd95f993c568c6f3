//! An independent reader of sharded Zarr v3 arrays, for checking the writer.
//!
//! Written from the Zarr v3 core and `sharding_indexed` specifications alone,
//! sharing no code with the library, so that a mistake in the library's own
//! index or layout arithmetic cannot cancel out in a round trip.
//!
//! Supported: `regular` chunk grid, `default` chunk key encoding, one
//! `sharding_indexed` codec whose inner codecs are `bytes` (little endian)
//! optionally followed by `zstd`, `gzip` or `blosc`, and whose index codecs are
//! `bytes` (little endian) then `crc32c`. Anything else is reported as an
//! error rather than guessed at.
//!
//! Blosc frames are decoded with c-blosc (through the `blosc1` crate, which
//! the writer uses too), so their headers are checked here from the Blosc1
//! chunk format alone: sizes, element size, shuffle and compressor must be
//! what the metadata says. zarr-python and tensorstore decode them
//! independently (`tests/readback`).

use std::collections::HashMap;
use std::path::Path;

/// One array dimension, as the decoder needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim {
    /// Extent of the array along this dimension.
    pub size: u64,
    /// Inner chunk ("tile") extent: the unit that is compressed.
    pub tile: u64,
    /// Tiles per shard along this dimension (> 0).
    pub tiles_per_shard: u64,
}

/// Where a shard keeps its chunk index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexLocation {
    Start,
    End,
}

/// The bytes-to-bytes codec applied to each tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Zstd,
    /// One gzip member (RFC 1952) per chunk.
    Gzip,
    Blosc(Blosc),
}

/// What the `blosc` codec's metadata promises about every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blosc {
    pub typesize: usize,
    pub shuffle: BloscShuffle,
    /// The compressor's code in the frame header's flags (bits 5-7):
    /// blosclz 0, lz4 and lz4hc 1, snappy 2, zlib 3, zstd 4.
    pub compressor: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BloscShuffle {
    None,
    Byte,
    Bit,
}

/// Checks a Blosc1 frame's 16-byte header (the Blosc chunk format: version,
/// compressor version, flags, typesize, then u32 LE nbytes, blocksize,
/// cbytes) against the metadata and the tile it must decode to.
pub fn check_blosc_header(frame: &[u8], expect: &Blosc, tile_bytes: usize) -> Result<(), String> {
    let Some(header) = frame.get(..16) else {
        return Err(format!(
            "blosc frame of {} bytes has no header",
            frame.len()
        ));
    };
    let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().unwrap()) as usize;
    let (version, flags, typesize) = (header[0], header[2], header[3] as usize);
    let (nbytes, cbytes) = (u32_at(4), u32_at(12));
    if !(1..=2).contains(&version) {
        return Err(format!("blosc frame format version {version}, not Blosc1"));
    }
    if cbytes != frame.len() || nbytes != tile_bytes {
        return Err(format!(
            "blosc header says {nbytes} bytes in {cbytes}, expected {tile_bytes} in {}",
            frame.len()
        ));
    }
    let shuffle = match (flags & 0b001 != 0, flags & 0b100 != 0) {
        (false, false) => BloscShuffle::None,
        (true, false) => BloscShuffle::Byte,
        (false, true) => BloscShuffle::Bit,
        (true, true) => return Err(format!("blosc flags {flags:#010b}: both shuffles")),
    };
    if shuffle != expect.shuffle {
        return Err(format!(
            "blosc frame shuffled {shuffle:?}, the metadata says {:?}",
            expect.shuffle
        ));
    }
    if expect.shuffle != BloscShuffle::None && typesize != expect.typesize {
        return Err(format!(
            "blosc frame typesize {typesize}, the metadata says {}",
            expect.typesize
        ));
    }
    // A frame stored raw (bit 1, "memcpyed") names no compressor in use.
    let memcpyed = flags & 0b010 != 0;
    if !memcpyed && flags >> 5 != expect.compressor {
        return Err(format!(
            "blosc frame compressed with code {}, the metadata's cname has code {}",
            flags >> 5,
            expect.compressor
        ));
    }
    Ok(())
}

/// An index entry with this offset and size marks a chunk that is not stored.
pub const EMPTY: u64 = u64::MAX;

/// The crc32c (Castagnoli) checksum of `bytes`, little endian, as the
/// `crc32c` codec appends it.
pub fn crc32c_le(bytes: &[u8]) -> [u8; 4] {
    crc32c::crc32c(bytes).to_le_bytes()
}

/// Size of the index of a shard of `chunks` chunks: an (offset, nbytes) pair
/// of u64 per chunk and the 4-byte checksum.
pub fn index_len(chunks: usize) -> usize {
    16 * chunks + 4
}

/// Split a shard into its chunk-data region and its index (entries and
/// checksum). Index offsets count from the start of the whole shard, so for
/// an index at the start, data-region byte 0 is shard byte `index_len`.
pub fn split_shard(
    shard: &[u8],
    chunks: usize,
    loc: IndexLocation,
) -> Result<(&[u8], &[u8]), String> {
    let len = index_len(chunks);
    if shard.len() < len {
        return Err(format!(
            "shard is {} bytes, shorter than its {len}-byte index",
            shard.len()
        ));
    }
    Ok(match loc {
        IndexLocation::Start => {
            let (index, data) = shard.split_at(len);
            (data, index)
        }
        IndexLocation::End => shard.split_at(shard.len() - len),
    })
}

/// Read and check a shard's index: the checksum, and that every stored
/// chunk lies inside the shard and outside the index. `None` is an empty
/// chunk; `Some((offset, nbytes))` counts from the start of the shard.
pub fn read_index(
    shard: &[u8],
    chunks: usize,
    loc: IndexLocation,
) -> Result<Vec<Option<(u64, u64)>>, String> {
    let (_, index) = split_shard(shard, chunks, loc)?;
    let (entries, crc) = index.split_at(16 * chunks);
    if crc32c_le(entries) != crc {
        return Err(format!(
            "index checksum mismatch: stored {:08x}, computed {:08x}",
            u32::from_le_bytes(crc.try_into().unwrap()),
            crc32c::crc32c(entries)
        ));
    }
    // The bytes chunks may occupy: everything but the index.
    let index_bytes = index_len(chunks) as u64;
    let shard_bytes = shard.len() as u64;
    let (lo, hi) = match loc {
        IndexLocation::Start => (index_bytes, shard_bytes),
        IndexLocation::End => (0, shard_bytes - index_bytes),
    };
    let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
    entries
        .chunks_exact(16)
        .enumerate()
        .map(|(k, e)| {
            let (offset, nbytes) = (u64_at(&e[..8]), u64_at(&e[8..]));
            if offset == EMPTY && nbytes == EMPTY {
                return Ok(None);
            }
            let end = offset.checked_add(nbytes);
            if offset < lo || end.is_none_or(|end| end > hi) {
                return Err(format!(
                    "chunk {k}: bytes [{offset}, +{nbytes}) are not within the data region [{lo}, {hi}) of the shard"
                ));
            }
            Ok(Some((offset, nbytes)))
        })
        .collect()
}

/// Decode a whole array from its shards.
///
/// `shards` maps a shard's grid coordinate (dimension 0 first) to the whole
/// shard file. Missing shards and empty chunks read as 0. Returns the array
/// as little-endian row-major bytes, `prod(size) * elem_size` long.
pub fn decode_array(
    dims: &[Dim],
    elem_size: usize,
    codec: Codec,
    loc: IndexLocation,
    shards: &HashMap<Vec<u64>, Vec<u8>>,
) -> Result<Vec<u8>, String> {
    if let Some(d) = dims.iter().find(|d| d.tile == 0 || d.tiles_per_shard == 0) {
        return Err(format!("tile and tiles_per_shard must be positive: {d:?}"));
    }
    let sizes: Vec<u64> = dims.iter().map(|d| d.size).collect();
    let tiles: Vec<u64> = dims.iter().map(|d| d.tile).collect();
    let per_shard: Vec<u64> = dims.iter().map(|d| d.tiles_per_shard).collect();
    let tile_grid: Vec<u64> = dims.iter().map(|d| d.size.div_ceil(d.tile)).collect();
    let shard_grid: Vec<u64> = tile_grid
        .iter()
        .zip(&per_shard)
        .map(|(t, p)| t.div_ceil(*p))
        .collect();
    let array_bytes = checked_product(&sizes)
        .and_then(|n| n.checked_mul(elem_size as u64))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("array too large")?;
    let tile_bytes = checked_product(&tiles)
        .and_then(|n| n.checked_mul(elem_size as u64))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("tile too large")?;
    let chunks = checked_product(&per_shard)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("too many chunks per shard")?;

    let mut out = vec![0u8; array_bytes];
    // In a fixed order, so that the first error reported does not vary.
    let mut coords: Vec<&Vec<u64>> = shards.keys().collect();
    coords.sort();
    for coord in coords {
        let shard = &shards[coord];
        let fail = |msg: String| format!("shard {coord:?}: {msg}");
        if coord.len() != dims.len() || coord.iter().zip(&shard_grid).any(|(c, n)| c >= n) {
            return Err(fail(format!("not in the shard grid {shard_grid:?}")));
        }
        let entries = read_index(shard, chunks, loc).map_err(fail)?;
        for (k, entry) in entries.into_iter().enumerate() {
            let Some((offset, nbytes)) = entry else {
                continue;
            };
            let within = unravel(k as u64, &per_shard);
            let tile: Vec<u64> = (0..dims.len())
                .map(|d| coord[d] * per_shard[d] + within[d])
                .collect();
            if tile.iter().zip(&tile_grid).any(|(t, n)| t >= n) {
                return Err(fail(format!(
                    "chunk {k} is stored but its tile {tile:?} lies outside the array (tile grid {tile_grid:?})"
                )));
            }
            let stored = &shard[offset as usize..(offset + nbytes) as usize];
            let decoded = match codec {
                Codec::None => stored.to_vec(),
                Codec::Zstd => zstd::stream::decode_all(stored)
                    .map_err(|e| fail(format!("chunk {k} (tile {tile:?}): zstd: {e}")))?,
                Codec::Gzip => gunzip(stored)
                    .map_err(|e| fail(format!("chunk {k} (tile {tile:?}): gzip: {e}")))?,
                Codec::Blosc(b) => {
                    let fail_blosc = |e: String| fail(format!("chunk {k} (tile {tile:?}): {e}"));
                    check_blosc_header(stored, &b, tile_bytes).map_err(fail_blosc)?;
                    blosc1::decompress(stored).map_err(|e| fail_blosc(e.to_string()))?
                }
            };
            if decoded.len() != tile_bytes {
                return Err(fail(format!(
                    "chunk {k} (tile {tile:?}) decodes to {} bytes, expected {tile_bytes}",
                    decoded.len()
                )));
            }
            let origin: Vec<u64> = tile.iter().zip(&tiles).map(|(t, n)| t * n).collect();
            paste_tile(&mut out, &sizes, &decoded, &tiles, &origin, elem_size);
        }
    }
    Ok(out)
}

/// Copy the part of a full tile (row-major over `tile_shape`, placed at
/// `origin`) that lies inside the array into `array` (row-major over `shape`).
fn paste_tile(
    array: &mut [u8],
    shape: &[u64],
    tile: &[u8],
    tile_shape: &[u64],
    origin: &[u64],
    elem: usize,
) {
    let Some(last) = shape.len().checked_sub(1) else {
        array.copy_from_slice(&tile[..elem]); // rank 0: one element
        return;
    };
    // Extent of the tile that is inside the array, per dimension.
    let extent: Vec<u64> = (0..shape.len())
        .map(|d| tile_shape[d].min(shape[d] - origin[d]))
        .collect();
    let row_bytes = extent[last] as usize * elem;
    // One contiguous run per row: iterate over the leading dimensions.
    for r in 0..checked_product(&extent[..last]).unwrap() {
        let at = unravel(r, &extent[..last]);
        let (mut src, mut dst) = (0u64, 0u64);
        for d in 0..last {
            src = src * tile_shape[d] + at[d];
            dst = dst * shape[d] + origin[d] + at[d];
        }
        let src = (src * tile_shape[last]) as usize * elem;
        let dst = (dst * shape[last] + origin[last]) as usize * elem;
        array[dst..dst + row_bytes].copy_from_slice(&tile[src..src + row_bytes]);
    }
}

/// Row-major coordinates of linear position `k` in an array of `shape`.
fn unravel(mut k: u64, shape: &[u64]) -> Vec<u64> {
    let mut coords = vec![0; shape.len()];
    for (c, n) in coords.iter_mut().zip(shape).rev() {
        *c = k % n;
        k /= n;
    }
    coords
}

fn checked_product(values: &[u64]) -> Option<u64> {
    values.iter().try_fold(1u64, |acc, &v| acc.checked_mul(v))
}

/// Bytes per element of a Zarr v3 `data_type` this reader understands.
fn data_type_size(name: &str) -> Option<usize> {
    Some(match name {
        "bool" | "uint8" | "int8" => 1,
        "uint16" | "int16" | "float16" => 2,
        "uint32" | "int32" | "float32" => 4,
        "uint64" | "int64" | "float64" => 8,
        _ => return None,
    })
}

/// Decode a sharded Zarr v3 array stored in a filesystem directory: parse
/// `<dir>/zarr.json`, read every shard file under `<dir>/c`, and decode.
/// Returns (shape, data_type, little-endian row-major bytes). A file under
/// `c` that is not a shard of the grid is an error.
pub fn decode_store(dir: &Path) -> Result<(Vec<u64>, String, Vec<u8>), String> {
    let meta_path = dir.join("zarr.json");
    let text =
        std::fs::read_to_string(&meta_path).map_err(|e| format!("{}: {e}", meta_path.display()))?;
    let meta: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", meta_path.display()))?;
    let layout = parse_metadata(&meta).map_err(|e| format!("{}: {e}", meta_path.display()))?;

    let mut shards = HashMap::new();
    let root = dir.join("c");
    if layout.shape.is_empty() {
        // A rank-0 array's one shard is the file `c` itself.
        if root.is_file() {
            shards.insert(Vec::new(), read(&root)?);
        }
    } else if root.is_dir() {
        collect_shards(&root, &mut Vec::new(), layout.shape.len(), &mut shards)?;
    } else if root.exists() {
        return Err(format!("{} is not a directory", root.display()));
    }
    let data = decode_array(
        &layout.dims,
        layout.elem_size,
        layout.codec,
        layout.loc,
        &shards,
    )?;
    Ok((layout.shape, layout.data_type, data))
}

struct Layout {
    shape: Vec<u64>,
    data_type: String,
    elem_size: usize,
    dims: Vec<Dim>,
    codec: Codec,
    loc: IndexLocation,
}

fn parse_metadata(meta: &serde_json::Value) -> Result<Layout, String> {
    use serde_json::Value;
    let field = |v: &'_ Value, key: &str| -> Result<Value, String> {
        v.get(key)
            .cloned()
            .ok_or_else(|| format!("missing {key:?}"))
    };
    let u64s = |v: &Value, what: &str| -> Result<Vec<u64>, String> {
        v.as_array()
            .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<_>>>())
            .ok_or_else(|| format!("{what} is not a list of integers: {v}"))
    };
    let name_of = |v: &Value| {
        v.get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };

    if meta.get("zarr_format") != Some(&Value::from(3)) {
        return Err("zarr_format is not 3".into());
    }
    if meta.get("node_type").and_then(Value::as_str) != Some("array") {
        return Err("node_type is not \"array\"".into());
    }
    let shape = u64s(&field(meta, "shape")?, "shape")?;
    let data_type = field(meta, "data_type")?
        .as_str()
        .ok_or("data_type is not a string")?
        .to_owned();
    let elem_size =
        data_type_size(&data_type).ok_or_else(|| format!("unsupported data_type {data_type:?}"))?;

    let grid = field(meta, "chunk_grid")?;
    if name_of(&grid) != "regular" {
        return Err(format!("unsupported chunk_grid {grid}"));
    }
    let shard_shape = u64s(
        &field(&field(&grid, "configuration")?, "chunk_shape")?,
        "chunk_shape",
    )?;

    let keys = field(meta, "chunk_key_encoding")?;
    let separator = keys
        .get("configuration")
        .and_then(|c| c.get("separator"))
        .and_then(Value::as_str)
        .unwrap_or("/");
    if name_of(&keys) != "default" || separator != "/" {
        return Err(format!("unsupported chunk_key_encoding {keys}"));
    }

    // Missing chunks are assumed to read as 0; any other fill value would
    // need decode_array to know it.
    let fill = field(meta, "fill_value")?;
    let zero = match &fill {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
        // Floats may give their fill value as raw bits in hex.
        Value::String(s) => s
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|c| c == b'0')),
        _ => false,
    };
    if !zero {
        return Err(format!("fill_value {fill} is not zero"));
    }
    if let Some(t) = meta.get("storage_transformers") {
        if t.as_array().is_none_or(|a| !a.is_empty()) {
            return Err(format!("unsupported storage_transformers {t}"));
        }
    }

    let codecs = field(meta, "codecs")?;
    let [sharding] = codecs.as_array().map(Vec::as_slice).unwrap_or(&[]) else {
        return Err(format!(
            "expected exactly one codec, sharding_indexed: {codecs}"
        ));
    };
    if name_of(sharding) != "sharding_indexed" {
        return Err(format!("expected the sharding_indexed codec: {sharding}"));
    }
    let config = field(sharding, "configuration")?;
    let tile_shape = u64s(&field(&config, "chunk_shape")?, "sharding chunk_shape")?;

    let little_endian_bytes = |c: &Value| {
        name_of(c) == "bytes"
            && match c.get("configuration").and_then(|c| c.get("endian")) {
                None => elem_size == 1, // endian may be omitted only for 1-byte types
                Some(e) => e == "little",
            }
    };
    let inner = field(&config, "codecs")?;
    let codec = match inner.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        [b] if little_endian_bytes(b) => Codec::None,
        [b, z] if little_endian_bytes(b) && name_of(z) == "zstd" => Codec::Zstd,
        [b, z] if little_endian_bytes(b) && name_of(z) == "gzip" => Codec::Gzip,
        [b, z] if little_endian_bytes(b) && name_of(z) == "blosc" => {
            Codec::Blosc(parse_blosc(z).map_err(|e| format!("blosc codec {z}: {e}"))?)
        }
        _ => return Err(format!("unsupported inner codecs {inner}")),
    };
    let index_codecs = field(&config, "index_codecs")?;
    match index_codecs.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        [b, c]
            if name_of(b) == "bytes"
                && b.get("configuration")
                    .and_then(|c| c.get("endian"))
                    .is_some_and(|e| e == "little")
                && name_of(c) == "crc32c" => {}
        _ => return Err(format!("unsupported index_codecs {index_codecs}")),
    }
    let loc = match config.get("index_location").and_then(Value::as_str) {
        None | Some("end") => IndexLocation::End,
        Some("start") => IndexLocation::Start,
        Some(other) => return Err(format!("unknown index_location {other:?}")),
    };

    if shard_shape.len() != shape.len() || tile_shape.len() != shape.len() {
        return Err(format!(
            "rank mismatch: shape {shape:?}, shard {shard_shape:?}, tile {tile_shape:?}"
        ));
    }
    let mut dims = Vec::with_capacity(shape.len());
    for ((&size, &shard), &tile) in shape.iter().zip(&shard_shape).zip(&tile_shape) {
        if tile == 0 || shard == 0 || shard % tile != 0 {
            return Err(format!(
                "shard shape {shard_shape:?} is not a positive multiple of tile shape {tile_shape:?}"
            ));
        }
        dims.push(Dim {
            size,
            tile,
            tiles_per_shard: shard / tile,
        });
    }
    Ok(Layout {
        shape,
        data_type,
        elem_size,
        dims,
        codec,
        loc,
    })
}

/// The Zarr v3 `blosc` codec's configuration, every member checked
/// against the codec's specification.
fn parse_blosc(codec: &serde_json::Value) -> Result<Blosc, String> {
    use serde_json::Value;
    let config = codec.get("configuration").ok_or("no configuration")?;
    let member = |key: &str| config.get(key).ok_or(format!("no {key:?}"));
    let compressor = match member("cname")?.as_str() {
        Some("blosclz") => 0,
        Some("lz4" | "lz4hc") => 1,
        Some("snappy") => 2,
        Some("zlib") => 3,
        Some("zstd") => 4,
        _ => return Err("unknown cname".into()),
    };
    if member("clevel")?.as_u64().is_none_or(|l| l > 9) {
        return Err("clevel is not 0 to 9".into());
    }
    let shuffle = match member("shuffle")?.as_str() {
        Some("noshuffle") => BloscShuffle::None,
        Some("shuffle") => BloscShuffle::Byte,
        Some("bitshuffle") => BloscShuffle::Bit,
        _ => return Err("unknown shuffle".into()),
    };
    // Required unless there is no shuffle.
    let typesize = match config.get("typesize").map(Value::as_u64) {
        Some(Some(t)) if t >= 1 => t as usize,
        None if shuffle == BloscShuffle::None => 0,
        _ => return Err("typesize is not a positive integer".into()),
    };
    if !member("blocksize")?.is_u64() {
        return Err("blocksize is not a non-negative integer".into());
    }
    Ok(Blosc {
        typesize,
        shuffle,
        compressor,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Gather the shard files below `dir` (which is `c/<prefix...>`), keyed by
/// their grid coordinate. Every entry must be a canonical decimal name, with
/// directories down to `rank - 1` levels and files at the last level.
fn collect_shards(
    dir: &Path,
    prefix: &mut Vec<u64>,
    rank: usize,
    shards: &mut HashMap<Vec<u64>, Vec<u8>>,
) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let coord = name
            .parse::<u64>()
            .ok()
            .filter(|c| c.to_string() == name)
            .ok_or_else(|| format!("unexpected entry {} in the chunk tree", path.display()))?;
        prefix.push(coord);
        if prefix.len() < rank && path.is_dir() {
            collect_shards(&path, prefix, rank, shards)?;
        } else if prefix.len() == rank && path.is_file() {
            shards.insert(prefix.clone(), read(&path)?);
        } else {
            return Err(format!(
                "unexpected entry {} in the chunk tree",
                path.display()
            ));
        }
        prefix.pop();
    }
    Ok(())
}

/// One gzip member, which must end where the chunk ends.
fn gunzip(member: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut d = flate2::bufread::GzDecoder::new(member);
    let mut out = Vec::new();
    d.read_to_end(&mut out).map_err(|e| e.to_string())?;
    let rest = d.into_inner();
    if !rest.is_empty() {
        return Err(format!("{} bytes after the member", rest.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! The decoder's own tests: arrays are tiled, compressed and assembled
    //! into shards here by hand, then decoded and compared.

    use super::*;
    use proptest::prelude::*;

    /// How the hand-made writer stores a chunk whose tile is all zeros.
    #[derive(Clone, Copy)]
    enum Zeros {
        Store,
        Skip,
    }

    /// Shard an array (row-major bytes over the dims' sizes) the simplest
    /// possible way: for every shard and chunk, gather the tile element by
    /// element, padding with zeros outside the array.
    fn encode(
        dims: &[Dim],
        elem: usize,
        codec: Codec,
        loc: IndexLocation,
        zeros: Zeros,
        data: &[u8],
    ) -> HashMap<Vec<u64>, Vec<u8>> {
        let sizes: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let tiles: Vec<u64> = dims.iter().map(|d| d.tile).collect();
        let per_shard: Vec<u64> = dims.iter().map(|d| d.tiles_per_shard).collect();
        let shard_grid: Vec<u64> = dims
            .iter()
            .map(|d| d.size.div_ceil(d.tile).div_ceil(d.tiles_per_shard))
            .collect();
        let chunks = checked_product(&per_shard).unwrap() as usize;
        let tile_elems = checked_product(&tiles).unwrap();
        let mut shards = HashMap::new();
        for s in 0..checked_product(&shard_grid).unwrap() {
            let shard = unravel(s, &shard_grid);
            let mut body = Vec::new();
            let mut index = Vec::new();
            for k in 0..chunks as u64 {
                let within = unravel(k, &per_shard);
                let mut tile = Vec::new();
                let mut inside = false;
                for e in 0..tile_elems {
                    let at = unravel(e, &tiles);
                    let global: Vec<u64> = (0..dims.len())
                        .map(|d| (shard[d] * per_shard[d] + within[d]) * tiles[d] + at[d])
                        .collect();
                    if global.iter().zip(&sizes).all(|(g, n)| g < n) {
                        inside = true;
                        let mut lin = 0;
                        for d in 0..dims.len() {
                            lin = lin * sizes[d] + global[d];
                        }
                        let lin = lin as usize * elem;
                        tile.extend_from_slice(&data[lin..lin + elem]);
                    } else {
                        tile.extend(std::iter::repeat_n(0, elem));
                    }
                }
                let all_zero = tile.iter().all(|&b| b == 0);
                if !inside || (all_zero && matches!(zeros, Zeros::Skip)) {
                    index.extend_from_slice(&EMPTY.to_le_bytes());
                    index.extend_from_slice(&EMPTY.to_le_bytes());
                    continue;
                }
                let stored = match codec {
                    Codec::None => tile,
                    Codec::Zstd => zstd::bulk::compress(&tile, 1).unwrap(),
                    Codec::Gzip => {
                        use std::io::Write;
                        let mut z = flate2::write::GzEncoder::new(Vec::new(), Default::default());
                        z.write_all(&tile).unwrap();
                        z.finish().unwrap()
                    }
                    Codec::Blosc(b) => blosc_frame(&b, &tile),
                };
                let base = match loc {
                    IndexLocation::Start => index_len(chunks),
                    IndexLocation::End => 0,
                };
                index.extend_from_slice(&((base + body.len()) as u64).to_le_bytes());
                index.extend_from_slice(&(stored.len() as u64).to_le_bytes());
                body.extend_from_slice(&stored);
            }
            let crc = crc32c_le(&index);
            index.extend_from_slice(&crc);
            let bytes = match loc {
                IndexLocation::Start => [index, body].concat(),
                IndexLocation::End => [body, index].concat(),
            };
            shards.insert(shard, bytes);
        }
        shards
    }

    /// A zstd Blosc1 frame as the metadata `b` describes.
    fn blosc_frame(b: &Blosc, tile: &[u8]) -> Vec<u8> {
        let shuffle = match b.shuffle {
            BloscShuffle::None => blosc1::Shuffle::None,
            BloscShuffle::Byte => blosc1::Shuffle::Byte,
            BloscShuffle::Bit => blosc1::Shuffle::Bit,
        };
        let cname = match b.compressor {
            1 => blosc1::Cname::Lz4,
            3 => blosc1::Cname::Zlib,
            _ => blosc1::Cname::Zstd,
        };
        let params = blosc1::Params {
            level: 1,
            cname,
            shuffle,
            typesize: b.typesize,
        };
        let mut out = Vec::new();
        blosc1::compress(&params, tile, &mut out).unwrap();
        out
    }

    fn blosc(typesize: usize, shuffle: BloscShuffle) -> Codec {
        Codec::Blosc(Blosc {
            typesize,
            shuffle,
            compressor: 4,
        })
    }

    fn dims(spec: &[(u64, u64, u64)]) -> Vec<Dim> {
        spec.iter()
            .map(|&(size, tile, tiles_per_shard)| Dim {
                size,
                tile,
                tiles_per_shard,
            })
            .collect()
    }

    /// Distinct, non-zero bytes, so that misplaced elements show.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 + 1).collect()
    }

    fn round_trip(spec: &[(u64, u64, u64)], elem: usize) {
        let d = dims(spec);
        let n: u64 = spec.iter().map(|s| s.0).product();
        let data = pattern(n as usize * elem);
        let codecs = [
            Codec::None,
            Codec::Zstd,
            blosc(elem, BloscShuffle::Byte),
            blosc(elem, BloscShuffle::Bit),
            blosc(elem, BloscShuffle::None),
        ];
        for codec in codecs {
            for loc in [IndexLocation::Start, IndexLocation::End] {
                let shards = encode(&d, elem, codec, loc, Zeros::Store, &data);
                let decoded = decode_array(&d, elem, codec, loc, &shards).unwrap();
                assert!(decoded == data, "{spec:?} {elem} {codec:?} {loc:?}");
            }
        }
    }

    #[test]
    fn round_trips_with_partial_edges() {
        let _alone = crate::support::alone();
        round_trip(&[(7, 2, 2), (10, 4, 3)], 2);
        round_trip(&[(5, 5, 1), (9, 2, 4), (3, 3, 1)], 1);
        round_trip(&[(4, 1, 3), (6, 4, 1), (1, 2, 2)], 8);
        round_trip(&[(33, 8, 2)], 4);
    }

    #[test]
    fn round_trips_rank_zero() {
        let _alone = crate::support::alone();
        round_trip(&[], 2);
    }

    #[test]
    fn missing_shards_and_empty_chunks_read_as_zero() {
        let _alone = crate::support::alone();
        let d = dims(&[(6, 2, 2), (8, 4, 1)]);
        let mut data = pattern(48);
        data[..24].iter_mut().for_each(|b| *b = 0); // first three rows
        let loc = IndexLocation::End;
        let mut shards = encode(&d, 1, Codec::Zstd, loc, Zeros::Skip, &data);
        assert_eq!(
            decode_array(&d, 1, Codec::Zstd, loc, &shards).unwrap(),
            data
        );
        // Shard [0, 0] holds rows 0..4 and columns 0..4; its tile of rows
        // 0..2 is zero, so not stored. Dropping the shards of rows 4..6
        // zeroes those rows.
        assert_eq!(read_index(&shards[&vec![0, 0]], 2, loc).unwrap()[0], None);
        shards.remove(&vec![1, 0]);
        shards.remove(&vec![1, 1]);
        let decoded = decode_array(&d, 1, Codec::Zstd, loc, &shards).unwrap();
        assert_eq!(&decoded[..32], &data[..32]);
        assert!(decoded[32..].iter().all(|&b| b == 0));
    }

    #[test]
    fn corrupt_checksum_is_reported_with_the_shard() {
        let _alone = crate::support::alone();
        let d = dims(&[(4, 2, 1), (4, 2, 2)]);
        let data = pattern(16);
        for loc in [IndexLocation::Start, IndexLocation::End] {
            let mut shards = encode(&d, 1, Codec::None, loc, Zeros::Store, &data);
            let shard = shards.get_mut(&vec![1, 0]).unwrap();
            let at = match loc {
                IndexLocation::Start => 3,             // an index entry
                IndexLocation::End => shard.len() - 1, // the checksum
            };
            shard[at] ^= 1;
            let err = decode_array(&d, 1, Codec::None, loc, &shards).unwrap_err();
            assert!(err.contains("[1, 0]") && err.contains("checksum"), "{err}");
        }
    }

    /// Rewrite entry `k` of a shard's index (at the end) and fix its checksum.
    fn set_entry(shard: &mut [u8], chunks: usize, k: usize, offset: u64, nbytes: u64) {
        let start = shard.len() - index_len(chunks);
        let at = start + 16 * k;
        shard[at..at + 8].copy_from_slice(&offset.to_le_bytes());
        shard[at + 8..at + 16].copy_from_slice(&nbytes.to_le_bytes());
        let crc = crc32c_le(&shard[start..start + 16 * chunks]);
        let len = shard.len();
        shard[len - 4..].copy_from_slice(&crc);
    }

    #[test]
    fn bad_entries_are_errors() {
        let _alone = crate::support::alone();
        let d = dims(&[(4, 2, 2)]);
        let data = pattern(4);
        let loc = IndexLocation::End;
        let good = encode(&d, 1, Codec::None, loc, Zeros::Store, &data);
        let check = |offset: u64, nbytes: u64, expect: &str| {
            let mut shards = good.clone();
            set_entry(shards.get_mut(&vec![0]).unwrap(), 2, 1, offset, nbytes);
            let err = decode_array(&d, 1, Codec::None, loc, &shards).unwrap_err();
            assert!(err.contains("[0]") && err.contains(expect), "{err}");
        };
        check(3, 2, "data region"); // runs into the index
        check(u64::MAX - 1, 4, "data region"); // overflows
        check(EMPTY, 2, "data region"); // half-empty
        check(0, 1, "decodes to 1 bytes, expected 2");
        // With the index at the start, data may not overlap it.
        let shards = encode(
            &d,
            1,
            Codec::None,
            IndexLocation::Start,
            Zeros::Store,
            &data,
        );
        let mut shard = shards[&vec![0]].clone();
        shard[..8].copy_from_slice(&0u64.to_le_bytes());
        let crc = crc32c_le(&shard[..32]);
        shard[32..36].copy_from_slice(&crc);
        let err = read_index(&shard, 2, IndexLocation::Start).unwrap_err();
        assert!(err.contains("data region"), "{err}");
        // Too short to hold an index at all.
        assert!(read_index(&[0; 10], 1, loc).is_err());
    }

    #[test]
    fn stored_chunk_outside_the_array_is_an_error() {
        let _alone = crate::support::alone();
        // 3 tiles along the dimension, 2 per shard: chunk 1 of shard 1 is
        // beyond the array and must be empty.
        let d = dims(&[(5, 2, 2)]);
        let data = pattern(5);
        let loc = IndexLocation::End;
        let mut shards = encode(&d, 1, Codec::None, loc, Zeros::Store, &data);
        set_entry(shards.get_mut(&vec![1]).unwrap(), 2, 1, 0, 2);
        let err = decode_array(&d, 1, Codec::None, loc, &shards).unwrap_err();
        assert!(err.contains("[1]") && err.contains("outside"), "{err}");
        // A shard beyond the grid is an error too.
        let mut shards = encode(&d, 1, Codec::None, loc, Zeros::Store, &data);
        shards.insert(vec![2], shards[&vec![1]].clone());
        let err = decode_array(&d, 1, Codec::None, loc, &shards).unwrap_err();
        assert!(err.contains("[2]") && err.contains("grid"), "{err}");
    }

    #[test]
    fn zstd_garbage_is_an_error() {
        let _alone = crate::support::alone();
        let d = dims(&[(2, 2, 1)]);
        let loc = IndexLocation::End;
        let mut shards = encode(&d, 1, Codec::None, loc, Zeros::Store, &[1, 2]);
        let err = decode_array(&d, 1, Codec::Zstd, loc, &shards).unwrap_err();
        assert!(err.contains("zstd"), "{err}");
        shards.clear();
        assert_eq!(
            decode_array(&d, 1, Codec::Zstd, loc, &shards).unwrap(),
            [0, 0]
        );
    }

    #[test]
    fn blosc_headers_must_agree_with_the_metadata() {
        let _alone = crate::support::alone();
        // Tiles large enough to be compressed (c-blosc stores tiny ones raw).
        let d = dims(&[(4000, 1000, 2)]);
        let data: Vec<u8> = (0..8000).map(|i| (i / 64) as u8).collect();
        let loc = IndexLocation::End;
        let shards = encode(
            &d,
            2,
            blosc(2, BloscShuffle::Byte),
            loc,
            Zeros::Store,
            &data,
        );
        let decoded = decode_array(&d, 2, blosc(2, BloscShuffle::Byte), loc, &shards);
        assert_eq!(decoded.unwrap(), data);
        for (wrong, word) in [
            (blosc(4, BloscShuffle::Byte), "typesize"),
            (blosc(2, BloscShuffle::Bit), "shuffled"),
            (blosc(2, BloscShuffle::None), "shuffled"),
            (
                Codec::Blosc(Blosc {
                    typesize: 2,
                    shuffle: BloscShuffle::Byte,
                    compressor: 1,
                }),
                "compressed with code 4",
            ),
        ] {
            let err = decode_array(&d, 2, wrong, loc, &shards).unwrap_err();
            assert!(err.contains(word), "{wrong:?}: {err}");
        }
        // A frame cut short, its index entry made to match.
        let mut shards = shards;
        let shard = shards.get_mut(&vec![0]).unwrap();
        let n = u64::from_le_bytes(
            shard[shard.len() - 28..shard.len() - 20]
                .try_into()
                .unwrap(),
        );
        set_entry(shard, 2, 0, 0, n - 1);
        let err = decode_array(&d, 2, blosc(2, BloscShuffle::Byte), loc, &shards).unwrap_err();
        assert!(err.contains("blosc header"), "{err}");
    }

    fn write_store(dir: &Path, meta: &serde_json::Value, shards: &HashMap<Vec<u64>, Vec<u8>>) {
        std::fs::write(dir.join("zarr.json"), meta.to_string()).unwrap();
        for (coord, bytes) in shards {
            let mut path = dir.join("c");
            for c in coord {
                path.push(c.to_string());
            }
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    }

    fn metadata(shape: &[u64], shard: &[u64], tile: &[u64], loc: &str) -> serde_json::Value {
        serde_json::json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": shape,
            "data_type": "uint16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shard}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": [{
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": tile,
                    "codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "zstd", "configuration": {"level": 1, "checksum": false}}
                    ],
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"}
                    ],
                    "index_location": loc
                }
            }],
            "dimension_names": null,
            "attributes": {}
        })
    }

    #[test]
    fn reads_a_store_from_disk() {
        let _alone = crate::support::alone();
        let d = dims(&[(5, 2, 2), (3, 3, 1), (7, 2, 3)]);
        let data = pattern(5 * 3 * 7 * 2);
        for (loc, name) in [(IndexLocation::Start, "start"), (IndexLocation::End, "end")] {
            let dir = tempfile::tempdir().unwrap();
            let shards = encode(&d, 2, Codec::Zstd, loc, Zeros::Store, &data);
            write_store(
                dir.path(),
                &metadata(&[5, 3, 7], &[4, 3, 6], &[2, 3, 2], name),
                &shards,
            );
            let (shape, dtype, decoded) = decode_store(dir.path()).unwrap();
            assert_eq!((shape, dtype.as_str()), (vec![5, 3, 7], "uint16"));
            assert!(decoded == data, "{name}");

            // A stray file in the chunk tree is reported.
            std::fs::write(dir.path().join("c/0/0/0.tmp"), b"x").unwrap();
            let err = decode_store(dir.path()).unwrap_err();
            assert!(err.contains("0.tmp"), "{err}");
        }
    }

    #[test]
    fn reads_an_empty_store_and_rejects_unsupported_metadata() {
        let _alone = crate::support::alone();
        let dir = tempfile::tempdir().unwrap();
        let mut meta = metadata(&[3, 4], &[2, 4], &[1, 2], "end");
        write_store(dir.path(), &meta, &HashMap::new());
        assert_eq!(decode_store(dir.path()).unwrap().2, vec![0; 24]);

        meta["chunk_grid"]["configuration"]["chunk_shape"] = serde_json::json!([2, 3]);
        write_store(dir.path(), &meta, &HashMap::new());
        assert!(decode_store(dir.path()).unwrap_err().contains("multiple"));

        let mut meta = metadata(&[3, 4], &[2, 4], &[1, 2], "end");
        meta["fill_value"] = serde_json::json!(7);
        write_store(dir.path(), &meta, &HashMap::new());
        assert!(decode_store(dir.path()).unwrap_err().contains("fill_value"));

        let mut meta = metadata(&[3, 4], &[2, 4], &[1, 2], "end");
        meta["codecs"][0]["configuration"]["codecs"][1]["name"] = "lzma".into();
        write_store(dir.path(), &meta, &HashMap::new());
        assert!(decode_store(dir.path())
            .unwrap_err()
            .contains("inner codecs"));
    }

    #[test]
    fn reads_a_blosc_store_and_checks_its_configuration() {
        let _alone = crate::support::alone();
        let d = dims(&[(6, 2, 2), (300, 100, 3)]);
        let data: Vec<u8> = (0..6 * 300 * 2).map(|i| (i / 64) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let shards = encode(
            &d,
            2,
            blosc(2, BloscShuffle::Byte),
            IndexLocation::End,
            Zeros::Store,
            &data,
        );
        let with = |configuration: serde_json::Value| {
            let mut meta = metadata(&[6, 300], &[4, 300], &[2, 100], "end");
            meta["codecs"][0]["configuration"]["codecs"][1] =
                serde_json::json!({"name": "blosc", "configuration": configuration});
            write_store(dir.path(), &meta, &shards);
            decode_store(dir.path())
        };
        let good = serde_json::json!({
            "cname": "zstd", "clevel": 1, "shuffle": "shuffle", "typesize": 2, "blocksize": 0
        });
        assert!(with(good.clone()).unwrap().2 == data);
        for (key, value, word) in [
            ("shuffle", serde_json::json!("byteshuffle"), "shuffle"),
            ("cname", serde_json::json!("brotli"), "cname"),
            ("clevel", serde_json::json!(10), "clevel"),
            ("typesize", serde_json::json!(0), "typesize"),
            ("typesize", serde_json::json!(4), "typesize 2"),
            ("cname", serde_json::json!("lz4"), "compressed with code 4"),
        ] {
            let mut bad = good.clone();
            bad[key] = value;
            let err = with(bad).unwrap_err();
            assert!(err.contains(word), "{key}: {err}");
        }
        let mut bad = good.clone();
        bad.as_object_mut().unwrap().remove("typesize");
        assert!(with(bad).unwrap_err().contains("typesize"));
    }

    fn arb_case() -> impl Strategy<Value = (Vec<(u64, u64, u64)>, usize, bool, bool)> {
        let dim = (1u64..12, 1u64..5, 1u64..4);
        (
            prop::collection::vec(dim, 0..4),
            prop::sample::select(vec![1usize, 2, 4, 8]),
            any::<bool>(),
            any::<bool>(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_layout_round_trips((spec, elem, zstd, start) in arb_case()) {
            let _alone = crate::support::alone();
            let d = dims(&spec);
            let n: u64 = spec.iter().map(|s| s.0).product();
            let data = pattern(n as usize * elem);
            let codec = if zstd { Codec::Zstd } else { Codec::None };
            let loc = if start { IndexLocation::Start } else { IndexLocation::End };
            let shards = encode(&d, elem, codec, loc, Zeros::Skip, &data);
            prop_assert_eq!(decode_array(&d, elem, codec, loc, &shards).unwrap(), data);
        }
    }
}
