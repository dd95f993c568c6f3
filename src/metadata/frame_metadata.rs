//! The per-frame metadata array of an image (`tz_frame_metadata`): a Zarr
//! v3 array `frame_metadata` in the OME image's group, `uint8` of shape
//! `[frames, max_bytes]`; row `i` holds frame `i`'s JSON object as compact
//! UTF-8, padded with zero bytes (all zero: no metadata). One chunk per
//! shard row of the image's level 0, uncompressed (a chunk is UTF-8 text:
//! the stores write it as they write documents), written when the frames
//! after that row are handed on. A reader: `json.loads(bytes(a[i]).rstrip(b"\0"))`.

use super::Document;
use crate::config::Validated;
use serde_json::json;

/// The array's name in the image's group.
pub const NAME: &str = "frame_metadata";

/// What the stores and the pipeline need of an image's metadata array.
#[derive(Debug, Clone)]
pub struct FrameMetadataArray {
    /// `<image>/frame_metadata/`.
    pub prefix: String,
    /// Frames per chunk: a shard row of level 0.
    pub rows: u64,
    pub max_bytes: u32,
    /// Dimension 0's name and, bounded, its size.
    axis: String,
    size: Option<u64>,
}

impl FrameMetadataArray {
    /// The image's metadata array, where its configuration asks for one.
    pub fn of(v: &Validated) -> Option<FrameMetadataArray> {
        let m = v.config.frame_metadata?;
        let layout = &v.image.levels[0];
        let d0 = &layout.dims()[0];
        Some(FrameMetadataArray {
            prefix: format!("{}{NAME}/", v.prefix()),
            rows: d0.tile * layout.tiles_per_shard()[0],
            max_bytes: m.max_bytes,
            axis: v.names[0].clone(),
            size: (!layout.is_unbounded()).then_some(d0.size),
        })
    }

    /// Bytes of one chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.rows as usize * self.max_bytes as usize
    }

    /// The array's `zarr.json` with `planes` frames (a bounded image's
    /// size whatever `planes` says).
    pub fn document(&self, planes: u64) -> Document {
        let frames = self.size.unwrap_or(planes);
        let doc = json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": [frames, self.max_bytes],
            "data_type": "uint8",
            "chunk_grid": {
                "name": "regular",
                "configuration": {"chunk_shape": [self.rows, self.max_bytes]}
            },
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": [{"name": "bytes"}],
            "attributes": {"tiledzarr": {"frame_metadata":
                "row i: frame i's JSON object, UTF-8, padded with zero bytes"}},
            "dimension_names": [self.axis, "json_bytes"],
        });
        Document {
            key: format!("{}zarr.json", self.prefix),
            json: serde_json::to_string_pretty(&doc).expect("metadata always serializes") + "\n",
        }
    }

    /// Chunk `row` (frames `row * rows` on) as a document: `text` is the
    /// chunk's bytes, JSON objects and zero padding (valid UTF-8).
    pub fn chunk(&self, row: u64, text: String) -> Document {
        Document {
            key: format!("{}c/{row}/0", self.prefix),
            json: text,
        }
    }
}
