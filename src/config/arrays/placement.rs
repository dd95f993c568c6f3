//! Where a stream's arrays sit in the store: their keys, and the keys a
//! collection or a plate of wells asks for.

use super::{ArrayConfig, Plate};
use crate::config::ConfigError;
use std::collections::{BTreeSet, HashMap};

/// Keys: well-formed, distinct, none inside another's path.
pub(super) fn check_keys(arrays: &[ArrayConfig]) -> Result<(), ConfigError> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, a) in arrays.iter().enumerate() {
        let field = || format!("arrays[{i}].key");
        if let Some(why) = malformed_key(&a.key) {
            return Err(ConfigError::new(field(), format!("{:?}: {why}", a.key)));
        }
        if let Some(j) = seen.insert(&a.key, i) {
            return Err(ConfigError::new(
                field(),
                format!("{:?} is also the key of arrays[{j}]", a.key),
            ));
        }
    }
    for (i, a) in arrays.iter().enumerate() {
        // Every folder above the array must be a group, not another array.
        let mut end = 0;
        while let Some(slash) = a.key[end..].find('/') {
            end += slash;
            if let Some(&j) = seen.get(&a.key[..end]) {
                return Err(ConfigError::new(
                    format!("arrays[{i}].key"),
                    format!(
                        "{:?} lies inside arrays[{j}] ({:?}): an array cannot hold another",
                        a.key, arrays[j].key
                    ),
                ));
            }
            end += 1;
        }
    }
    Ok(())
}

/// Why `key` cannot name an array, if it cannot.
fn malformed_key(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("must not be empty".into());
    }
    for part in key.split('/') {
        if part.is_empty() {
            return Some("has an empty name (a leading, trailing or double `/`)".into());
        }
        if part == "." || part == ".." {
            return Some(format!("`{part}` is not a name"));
        }
        if part.starts_with("__") {
            return Some(format!("`{part}`: names starting with `__` are Zarr's"));
        }
        if part == "c" {
            return Some("`c` holds an array's chunks".into());
        }
        if part == "zarr.json" {
            return Some("`zarr.json` is a document's name".into());
        }
        if let Some(c) = part
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            return Some(format!(
                "`{c}` in `{part}`: names take letters, digits, `-`, `_` and `.`"
            ));
        }
    }
    None
}

/// A collection's images are named by one key each, beside the `OME` group.
pub(super) fn check_collection(arrays: &[ArrayConfig]) -> Result<(), ConfigError> {
    for (i, a) in arrays.iter().enumerate() {
        if a.key.contains('/') || a.key == "OME" {
            return Err(ConfigError::new(
                format!("arrays[{i}].key"),
                format!(
                    "{:?}: a collection's images have one name each, other than `OME`",
                    a.key
                ),
            ));
        }
    }
    Ok(())
}

/// Rows, columns and wells agree; every field is an array at
/// `<row>/<column>/<field>` and every array is a field.
pub(super) fn check_plate(plate: &Plate, arrays: &[ArrayConfig]) -> Result<(), ConfigError> {
    let names = |list: &[String], what: &str| -> Result<(), ConfigError> {
        if list.is_empty() {
            return Err(ConfigError::new(
                format!("plate.{what}"),
                "must not be empty",
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, n) in list.iter().enumerate() {
            if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(ConfigError::new(
                    format!("plate.{what}[{i}]"),
                    format!("{n:?}: names take letters and digits only"),
                ));
            }
            if !seen.insert(n) {
                return Err(ConfigError::new(
                    format!("plate.{what}[{i}]"),
                    format!("{n:?} is listed twice"),
                ));
            }
        }
        Ok(())
    };
    names(&plate.rows, "rows")?;
    names(&plate.columns, "columns")?;
    if plate.wells.is_empty() {
        return Err(ConfigError::new("plate.wells", "must not be empty"));
    }
    let keys: HashMap<&str, usize> = arrays
        .iter()
        .enumerate()
        .map(|(i, a)| (a.key.as_str(), i))
        .collect();
    let mut fields_of: Vec<Option<usize>> = vec![None; arrays.len()];
    let mut wells = BTreeSet::new();
    for (w, well) in plate.wells.iter().enumerate() {
        let at = |f: &str| format!("plate.wells[{w}].{f}");
        if !plate.rows.contains(&well.row) {
            return Err(ConfigError::new(
                at("row"),
                format!("{:?} is not one of plate.rows", well.row),
            ));
        }
        if !plate.columns.contains(&well.column) {
            return Err(ConfigError::new(
                at("column"),
                format!("{:?} is not one of plate.columns", well.column),
            ));
        }
        if !wells.insert((&well.row, &well.column)) {
            return Err(ConfigError::new(
                at("row"),
                format!("well {}/{} is listed twice", well.row, well.column),
            ));
        }
        if well.fields.is_empty() {
            return Err(ConfigError::new(
                at("fields"),
                "must name at least one array",
            ));
        }
        let prefix = format!("{}/{}/", well.row, well.column);
        for (f, key) in well.fields.iter().enumerate() {
            let field = format!("plate.wells[{w}].fields[{f}]");
            let Some(&i) = keys.get(key.as_str()) else {
                return Err(ConfigError::new(field, format!("{key:?} names no array")));
            };
            let rest = key.strip_prefix(&prefix).unwrap_or("");
            if rest.is_empty() || rest.contains('/') {
                return Err(ConfigError::new(
                    field,
                    format!("{key:?}: a field of well {prefix} has the key {prefix}<field>"),
                ));
            }
            if let Some(other) = fields_of[i].replace(w) {
                return Err(ConfigError::new(
                    field,
                    format!("{key:?} is already a field of plate.wells[{other}]"),
                ));
            }
        }
    }
    if let Some(i) = fields_of.iter().position(Option::is_none) {
        return Err(ConfigError::new(
            format!("arrays[{i}].key"),
            format!(
                "{:?} is no well's field: every array of a plate is one",
                arrays[i].key
            ),
        ));
    }
    let ids: BTreeSet<u64> = plate.acquisitions.iter().map(|a| a.id).collect();
    if ids.len() != plate.acquisitions.len() {
        return Err(ConfigError::new(
            "plate.acquisitions",
            "ids must be distinct",
        ));
    }
    Ok(())
}
