//! The groups around a stream's arrays, written once when the store is
//! created and never rewritten: the root group, every folder between it
//! and an image, and for a collection or a plate their OME-NGFF 0.5
//! metadata (`bioformats2raw.layout` with the `OME` group's `series`; the
//! plate, its rows and its wells).

use super::Document;
use crate::config::{Arrangement, Plan, Plate};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// Every group document of `plan`, each folder's before those below it;
/// none for a single array at the root.
pub fn group_documents(plan: &Plan) -> Vec<Document> {
    let keys: Vec<&str> = plan.arrays.iter().map(|v| v.key.as_str()).collect();
    match &plan.arrangement {
        Arrangement::Single => Vec::new(),
        Arrangement::Group => {
            let mut docs = vec![group("", Map::new())];
            docs.extend(folders(&keys).map(|f| group(f, Map::new())));
            docs
        }
        Arrangement::Collection => vec![
            group("", ome(json!({"bioformats2raw.layout": 3}))),
            group("OME", ome(json!({"series": keys}))),
        ],
        Arrangement::Plate(plate) => plate_documents(plate),
    }
}

/// The folders between the root and each key, parents first.
fn folders<'a>(keys: &[&'a str]) -> impl Iterator<Item = &'a str> {
    let mut all = BTreeSet::new();
    for key in keys {
        let mut end = 0;
        while let Some(slash) = key[end..].find('/') {
            end += slash;
            all.insert(&key[..end]);
            end += 1;
        }
    }
    // Sorted, a folder comes before every folder below it.
    all.into_iter()
}

fn plate_documents(plate: &Plate) -> Vec<Document> {
    let index = |list: &[String], name: &str| list.iter().position(|n| n == name).unwrap_or(0);
    let wells: Vec<Value> = plate
        .wells
        .iter()
        .map(|w| {
            json!({
                "path": format!("{}/{}", w.row, w.column),
                "rowIndex": index(&plate.rows, &w.row),
                "columnIndex": index(&plate.columns, &w.column),
            })
        })
        .collect();
    let names =
        |list: &[String]| -> Vec<Value> { list.iter().map(|n| json!({"name": n})).collect() };
    let mut meta = Map::new();
    if let Some(name) = &plate.name {
        meta.insert("name".into(), json!(name));
    }
    meta.insert("rows".into(), Value::Array(names(&plate.rows)));
    meta.insert("columns".into(), Value::Array(names(&plate.columns)));
    meta.insert("wells".into(), Value::Array(wells));
    let most_fields = plate
        .wells
        .iter()
        .map(|w| w.fields.len())
        .max()
        .unwrap_or(0);
    meta.insert("field_count".into(), json!(most_fields));
    if !plate.acquisitions.is_empty() {
        meta.insert("acquisitions".into(), json!(plate.acquisitions));
    }
    let mut docs = vec![group("", ome(json!({"plate": meta})))];
    let rows: BTreeSet<&str> = plate.wells.iter().map(|w| w.row.as_str()).collect();
    docs.extend(rows.into_iter().map(|r| group(r, Map::new())));
    for w in &plate.wells {
        let images: Vec<Value> = w
            .fields
            .iter()
            .map(|key| json!({"path": key.rsplit('/').next().unwrap_or(key)}))
            .collect();
        let path = format!("{}/{}", w.row, w.column);
        docs.push(group(&path, ome(json!({"well": {"images": images}}))));
    }
    docs
}

/// Attributes holding an `ome` block of version 0.5 with `fields`.
fn ome(fields: Value) -> Map<String, Value> {
    let mut block = Map::new();
    block.insert("version".into(), json!("0.5"));
    if let Value::Object(f) = fields {
        block.extend(f);
    }
    let mut attrs = Map::new();
    attrs.insert("ome".into(), Value::Object(block));
    attrs
}

/// The group document of folder `path` (`""`: the root).
fn group(path: &str, attributes: Map<String, Value>) -> Document {
    let doc = json!({"zarr_format": 3, "node_type": "group", "attributes": attributes});
    Document {
        key: if path.is_empty() {
            "zarr.json".into()
        } else {
            format!("{path}/zarr.json")
        },
        json: serde_json::to_string_pretty(&doc).expect("metadata always serializes") + "\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StreamConfig;

    fn plan(json: serde_json::Value) -> Plan {
        StreamConfig::from_json(&json.to_string())
            .unwrap()
            .validate()
            .unwrap()
    }

    fn array(key: &str) -> Value {
        json!({"key": key, "dtype": "uint8",
               "dimensions": [{"name": "t", "size": 0, "tile": 1},
                              {"name": "y", "size": 8, "tile": 8}, {"name": "x", "size": 8, "tile": 8}]})
    }

    fn parsed(doc: &Document) -> Value {
        serde_json::from_str(&doc.json).unwrap()
    }

    #[test]
    fn groups_between_the_root_and_each_image() {
        let docs = group_documents(&plan(
            json!({"arrays": [array("a/b/x"), array("a/y"), array("z")]}),
        ));
        let keys: Vec<&str> = docs.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(keys, ["zarr.json", "a/zarr.json", "a/b/zarr.json"]);
        assert!(docs.iter().all(|d| parsed(d)["node_type"] == "group"));
    }

    #[test]
    fn a_collection_lists_its_series_in_order() {
        let docs = group_documents(&plan(json!({"arrays": [array("P1"), array("P0")],
                                                "collection": "bioformats2raw"})));
        assert_eq!(
            parsed(&docs[0])["attributes"]["ome"]["bioformats2raw.layout"],
            3
        );
        assert_eq!(docs[1].key, "OME/zarr.json");
        assert_eq!(
            parsed(&docs[1])["attributes"]["ome"]["series"],
            json!(["P1", "P0"])
        );
    }

    #[test]
    fn a_plate_has_its_rows_and_wells() {
        let docs = group_documents(&plan(json!({
            "arrays": [array("B/3/0"), array("B/3/1"), array("A/1/0")],
            "plate": {"rows": ["A", "B"], "columns": ["1", "2", "3"],
                      "wells": [{"row": "B", "column": "3", "fields": ["B/3/0", "B/3/1"]},
                                {"row": "A", "column": "1", "fields": ["A/1/0"]}]}})));
        let keys: Vec<&str> = docs.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "zarr.json",
                "A/zarr.json",
                "B/zarr.json",
                "B/3/zarr.json",
                "A/1/zarr.json"
            ]
        );
        let plate = &parsed(&docs[0])["attributes"]["ome"]["plate"];
        assert_eq!(
            plate["wells"][0],
            json!({"path": "B/3", "rowIndex": 1, "columnIndex": 2})
        );
        assert_eq!(plate["field_count"], 2);
        assert_eq!(
            parsed(&docs[3])["attributes"]["ome"]["well"]["images"],
            json!([{"path": "0"}, {"path": "1"}])
        );
    }
}
