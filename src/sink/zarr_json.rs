//! The array metadata document, `zarr.json`, exactly as architecture.md
//! specifies it.

use crate::codec::zarr_chunk_codecs;
use crate::config::Validated;
use serde_json::{json, Value};

/// `zarr.json` for the array with `planes` planes along dimension 0 (the
/// configured size when bounded).
pub fn zarr_json(v: &Validated, planes: u64) -> String {
    let layout = &v.layout;
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
                "codecs": zarr_chunk_codecs(v.config.codec, v.layout.elem_size()),
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"}
                ],
                "index_location": v.config.index_location.name()
            }
        }],
        "attributes": {},
        "dimension_names": v.names,
    });
    serde_json::to_string_pretty(&doc).expect("metadata always serializes") + "\n"
}
