//! The OME-NGFF 0.5 image group: `zarr.json` with `node_type: group` and
//! `attributes.ome.multiscales`, beside the user's attributes.

use crate::config::{AxisKind, Validated};
use serde_json::{json, Map, Value};

/// The group `zarr.json` of an OME-Zarr image: axes in storage order, one
/// dataset per level with its scale (and translation, when not zero), and
/// the `omero` block when the configuration gives one.
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
    let mut ome = Map::new();
    ome.insert("version".into(), json!("0.5"));
    ome.insert("multiscales".into(), json!([Value::Object(multiscale)]));
    if let Some(omero) = &image.omero {
        ome.insert("omero".into(), Value::Object(omero.clone()));
    }
    let mut attrs = attributes.clone();
    attrs.insert("ome".into(), Value::Object(ome));
    let doc = json!({
        "zarr_format": 3,
        "node_type": "group",
        "attributes": attrs,
    });
    serde_json::to_string_pretty(&doc).expect("metadata always serializes") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn group(extra: Value) -> Value {
        let mut c = json!({"dtype": "uint16", "dimensions": [
            {"name": "c", "size": 2, "tile": 1},
            {"name": "y", "size": 8, "tile": 8}, {"name": "x", "size": 8, "tile": 8}]});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let v = Config::from_json(&c.to_string())
            .unwrap()
            .validate()
            .unwrap();
        serde_json::from_str(&group_json(&v, &v.image.attributes)).unwrap()
    }

    #[test]
    fn the_omero_block_sits_beside_the_multiscales() {
        let window = json!({"start": 0, "end": 4095, "min": 0, "max": 65535});
        let omero = json!({"channels": [
            {"label": "DAPI", "color": "0000FF", "window": window},
            {"label": "GFP", "color": "00FF00", "window": window, "active": false}]});
        let doc = group(json!({"ome": {"name": "cells", "omero": omero},
                               "attributes": {"sample": 7}}));
        let ome = &doc["attributes"]["ome"];
        assert_eq!(ome["omero"], omero);
        assert_eq!(ome["multiscales"][0]["name"], "cells");
        assert_eq!(ome["version"], "0.5");
        assert_eq!(doc["attributes"]["sample"], 7);
        // Without one, none is written.
        let doc = group(json!({"ome": true}));
        assert!(doc["attributes"]["ome"].get("omero").is_none());
    }
}
