//! Reading an array's `zarr.json`: its shape, data type, grid and codecs,
//! from the Zarr v3 core and `sharding_indexed` specifications.

use super::*;

/// Bytes per element of a Zarr v3 `data_type` this reader understands.
pub(super) fn data_type_size(name: &str) -> Option<usize> {
    Some(match name {
        "bool" | "uint8" | "int8" => 1,
        "uint16" | "int16" | "float16" => 2,
        "uint32" | "int32" | "float32" => 4,
        "uint64" | "int64" | "float64" => 8,
        _ => return None,
    })
}

pub(super) struct Layout {
    pub(super) shape: Vec<u64>,
    pub(super) data_type: String,
    pub(super) elem_size: usize,
    pub(super) dims: Vec<Dim>,
    pub(super) codec: Codec,
    pub(super) loc: IndexLocation,
}

pub(super) fn parse_metadata(meta: &serde_json::Value) -> Result<Layout, String> {
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
pub(super) fn parse_blosc(codec: &serde_json::Value) -> Result<Blosc, String> {
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
