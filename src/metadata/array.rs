//! An array's metadata document, `zarr.json`, as architecture.md
//! specifies it: one per pyramid level.

use crate::codec::zarr_chunk_codecs;
use crate::config::Validated;
use serde_json::{json, Map, Value};

/// `zarr.json` of level `level`'s array with `planes` planes along
/// dimension 0 (the level's size when bounded), holding `attributes`.
pub fn zarr_json(
    v: &Validated,
    level: u32,
    planes: u64,
    attributes: &Map<String, Value>,
) -> String {
    let layout = &v.image.levels[level as usize];
    let mut shape: Vec<u64> = layout.dims().iter().map(|d| d.size).collect();
    shape[0] = planes;
    let fill: Value = if v.config.dtype.is_float() {
        json!(0.0)
    } else {
        json!(0)
    };
    let doc = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": v.config.dtype.name(),
        "chunk_grid": {
            "name": "regular",
            "configuration": {"chunk_shape": layout.shard_shape()}
        },
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [{
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": layout.tile_shape(),
                "codecs": zarr_chunk_codecs(v.config.codec, layout.elem_size()),
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"}
                ],
                "index_location": v.config.index_location.name()
            }
        }],
        "attributes": attributes,
        "dimension_names": v.names,
    });
    serde_json::to_string_pretty(&doc).expect("metadata always serializes") + "\n"
}
