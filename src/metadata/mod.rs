//! Every JSON document a store holds: each level's array `zarr.json` and,
//! for an OME-Zarr image, the group `zarr.json` with its OME-NGFF 0.5
//! `multiscales` and the user's attributes. Used by every store, so that a
//! folder and an object store hold the same documents under the same keys.
//!
//! Keys, relative to the store's root: without OME the store is one array
//! (`zarr.json`, shards under `c/`); with OME the root is a group and
//! level `k` is the array under `k/` (`k/zarr.json`, `k/c/...`). In a
//! stream of several arrays each array's keys are below its own key
//! (`<key>/zarr.json`...), and the groups around them come from
//! [`group_documents`].

mod array;
pub mod frame_metadata;
mod groups;
mod ome;

pub use array::zarr_json;
pub use groups::group_documents;
pub use ome::group_json;

use crate::config::Validated;
use serde_json::{Map, Value};

/// The key prefix of level `level`'s array: `""` for a plain array,
/// `"<level>/"` in an OME image.
pub fn level_prefix(v: &Validated, level: u32) -> String {
    if v.image.is_ome() {
        format!("{}{level}/", v.prefix())
    } else {
        v.prefix()
    }
}

/// A document and the key it is stored under.
#[derive(Debug, Clone)]
pub struct Document {
    pub key: String,
    pub json: String,
}

/// Level `level`'s array document with `planes` planes along dimension 0.
pub fn level_document(
    v: &Validated,
    level: u32,
    planes: u64,
    attributes: &Map<String, Value>,
) -> Document {
    // The user's attributes live in the group of an OME image.
    let empty = Map::new();
    let attrs = if v.image.is_ome() { &empty } else { attributes };
    Document {
        key: format!("{}zarr.json", level_prefix(v, level)),
        json: zarr_json(v, level, planes, attrs),
    }
}

/// The document holding the attributes: the group (OME) or level 0's
/// array (with `planes0` planes).
pub fn attributes_document(
    v: &Validated,
    planes0: u64,
    attributes: &Map<String, Value>,
) -> Document {
    if v.image.is_ome() {
        Document {
            key: format!("{}zarr.json", v.prefix()),
            json: group_json(v, attributes),
        }
    } else {
        level_document(v, 0, planes0, attributes)
    }
}

/// Every document of a store whose levels hold `planes[k]` planes along
/// dimension 0: the group first (OME), then each level's array.
pub fn all_documents(
    v: &Validated,
    planes: &[u64],
    attributes: &Map<String, Value>,
) -> Vec<Document> {
    let mut docs = Vec::with_capacity(planes.len() + 1);
    if v.image.is_ome() {
        docs.push(attributes_document(v, planes[0], attributes));
    }
    for (k, &p) in planes.iter().enumerate() {
        docs.push(level_document(v, k as u32, p, attributes));
    }
    if let Some(m) = frame_metadata::FrameMetadataArray::of(v) {
        docs.push(m.document(planes[0]));
    }
    docs
}

/// The extent along dimension 0 of every level when `planes0` planes of
/// level 0 exist (a bounded array: the configured sizes).
pub fn level_planes(v: &Validated, planes0: u64) -> Vec<u64> {
    let ds = v.image.axes[0].downsample;
    let mut p = planes0;
    v.image
        .levels
        .iter()
        .enumerate()
        .map(|(k, l)| {
            if k > 0 {
                p = crate::layout::pyramid::next_size(p, ds);
            }
            if l.is_unbounded() {
                p
            } else {
                l.dims()[0].size
            }
        })
        .collect()
}
