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

mod metadata;
use metadata::parse_metadata;

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
pub fn unravel(mut k: u64, shape: &[u64]) -> Vec<u64> {
    let mut coords = vec![0; shape.len()];
    for (c, n) in coords.iter_mut().zip(shape).rev() {
        *c = k % n;
        k /= n;
    }
    coords
}

pub fn checked_product(values: &[u64]) -> Option<u64> {
    values.iter().try_fold(1u64, |acc, &v| acc.checked_mul(v))
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
