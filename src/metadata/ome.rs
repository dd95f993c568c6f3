//! The OME-NGFF 0.5 image group: `zarr.json` with `node_type: group` and
//! `attributes.ome.multiscales`, beside the user's attributes.

use crate::config::{AxisKind, Validated};
use serde_json::{json, Map, Value};

/// The group `zarr.json` of an OME-Zarr image: axes in storage order, one
/// dataset per level with its scale (and translation, when not zero).
pub fn group_json(v: &Validated, attributes: &Map<String, Value>) -> String {
    let image = &v.image;
    let axes: Vec<Value> = image
        .stored_axes()
        .map(|a| {
            let mut axis = Map::new();
            axis.insert("name".into(), json!(a.name));
            // A custom kind is written without a type, as OME-NGFF allows.
            if a.kind != AxisKind::Other {
                axis.insert("type".into(), json!(a.kind.name()));
            }
            if let Some(u) = &a.unit {
                axis.insert("unit".into(), json!(u));
            }
            Value::Object(axis)
        })
        .collect();
    let datasets: Vec<Value> = (0..image.levels.len() as u32)
        .map(|k| {
            let (scale, translation) = image.transform(k);
            let mut transforms = vec![json!({"type": "scale", "scale": scale})];
            if translation.iter().any(|&t| t != 0.0) {
                transforms.push(json!({"type": "translation", "translation": translation}));
            }
            json!({"path": k.to_string(), "coordinateTransformations": transforms})
        })
        .collect();
    let mut multiscale = Map::new();
    if let Some(Some(name)) = &image.ome {
        multiscale.insert("name".into(), json!(name));
    }
    multiscale.insert("axes".into(), Value::Array(axes));
    multiscale.insert("datasets".into(), Value::Array(datasets));
    multiscale.insert("type".into(), json!(image.method.name()));
    multiscale.insert(
        "metadata".into(),
        json!({"method": format!("tiledzarr {} ({})", env!("CARGO_PKG_VERSION"), image.method.name())}),
    );
    let mut attrs = attributes.clone();
    attrs.insert(
        "ome".into(),
        json!({"version": "0.5", "multiscales": [Value::Object(multiscale)]}),
    );
    let doc = json!({
        "zarr_format": 3,
        "node_type": "group",
        "attributes": attrs,
    });
    serde_json::to_string_pretty(&doc).expect("metadata always serializes") + "\n"
}
