//! OME-NGFF's transitional `omero` block: each channel's name, colour and
//! display window, which viewers (napari, OMERO, ome-zarr-py) read. Checked
//! at create as the OME-NGFF 0.5 validators check it, so that a stream never
//! writes an image they refuse; keys it does not name pass as they are.

use super::Axis;
use crate::config::{AxisKind, ConfigError};
use serde_json::{Map, Value};

const FIELD: &str = "ome.omero";

/// The channel entries `omero.channels` must have: the channel axis's
/// extent (`None` when that axis is dimension 0 and unbounded), or 1
/// without a channel axis.
fn channel_count(axes: &[Axis], sizes: &[u64]) -> Option<u64> {
    match axes.iter().position(|a| a.kind == AxisKind::Channel) {
        Some(i) if sizes[i] == 0 => None,
        Some(i) => Some(sizes[i]),
        None => Some(1),
    }
}

/// Checks `omero` for an image of `axes` whose level 0 has `sizes` (both
/// in input order): an object whose `channels` has one entry per channel,
/// each with a `color` (six hex digits, as `"00FF00"`) and a `window` of
/// numbers `start`, `end`, `min` and `max`; `label`, `family` and the other
/// keys OME-NGFF names have their types.
pub fn check(
    omero: &Value,
    axes: &[Axis],
    sizes: &[u64],
) -> Result<Map<String, Value>, ConfigError> {
    let Value::Object(block) = omero else {
        return Err(ConfigError::new(
            FIELD,
            format!(
                "must be a JSON object such as {{\"channels\": [{{\"label\": \"GFP\", \"color\": \"00FF00\", \
                 \"window\": {{\"start\": 0, \"end\": 4095, \"min\": 0, \"max\": 65535}}}}]}}, got {}",
                super::kind_of(omero)
            ),
        ));
    };
    let field = |f: &str| format!("{FIELD}.{f}");
    let Some(channels) = block.get("channels") else {
        return Err(ConfigError::new(
            field("channels"),
            "is missing: OME-NGFF's omero block lists every channel (its colour and window)",
        ));
    };
    let Value::Array(channels) = channels else {
        return Err(ConfigError::new(
            field("channels"),
            format!("must be an array, got {}", super::kind_of(channels)),
        ));
    };
    if let Some(want) = channel_count(axes, sizes) {
        if channels.len() as u64 != want {
            let what = match axes.iter().find(|a| a.kind == AxisKind::Channel) {
                Some(a) => format!("the channel axis \"{}\" has {want}", a.name),
                None => "an image without a channel axis has one".into(),
            };
            return Err(ConfigError::new(
                field("channels"),
                format!("has {} entries; {what}", channels.len()),
            ));
        }
    }
    for (i, channel) in channels.iter().enumerate() {
        check_channel(channel, &field(&format!("channels[{i}]")))?;
    }
    typed(
        block,
        FIELD,
        &[
            ("id", Type::Integer),
            ("name", Type::Text),
            ("version", Type::Text),
        ],
    )?;
    if let Some(rdefs) = block.get("rdefs") {
        let Value::Object(rdefs) = rdefs else {
            return Err(ConfigError::new(
                field("rdefs"),
                format!("must be a JSON object, got {}", super::kind_of(rdefs)),
            ));
        };
        typed(
            rdefs,
            &field("rdefs"),
            &[
                ("defaultT", Type::Integer),
                ("defaultZ", Type::Integer),
                ("model", Type::Text),
                ("projection", Type::Text),
            ],
        )?;
    }
    Ok(block.clone())
}

fn check_channel(channel: &Value, at: &str) -> Result<(), ConfigError> {
    let Value::Object(c) = channel else {
        return Err(ConfigError::new(
            at,
            format!("must be a JSON object, got {}", super::kind_of(channel)),
        ));
    };
    let field = |f: &str| format!("{at}.{f}");
    match c.get("color") {
        Some(Value::String(s)) if s.len() == 6 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {}
        Some(other) => {
            return Err(ConfigError::new(
                field("color"),
                format!(
                    "must be six hex digits of red, green and blue, as \"00FF00\"; got {other}"
                ),
            ))
        }
        None => {
            return Err(ConfigError::new(
                field("color"),
                "is missing: every channel has a colour, six hex digits as \"00FF00\"",
            ))
        }
    }
    match c.get("window") {
        Some(Value::Object(w)) => {
            for key in ["start", "end", "min", "max"] {
                match w.get(key) {
                    Some(Value::Number(_)) => {}
                    Some(other) => {
                        return Err(ConfigError::new(
                            field(&format!("window.{key}")),
                            format!("must be a number, got {}", super::kind_of(other)),
                        ))
                    }
                    None => {
                        return Err(ConfigError::new(
                            field(&format!("window.{key}")),
                            "is missing: a window has start, end, min and max",
                        ))
                    }
                }
            }
        }
        Some(other) => {
            return Err(ConfigError::new(
                field("window"),
                format!("must be a JSON object, got {}", super::kind_of(other)),
            ))
        }
        None => return Err(ConfigError::new(
            field("window"),
            "is missing: every channel has a display window {\"start\", \"end\", \"min\", \"max\"}",
        )),
    }
    typed(
        c,
        at,
        &[
            ("label", Type::Text),
            ("family", Type::Text),
            ("active", Type::Bool),
            ("inverted", Type::Bool),
            ("coefficient", Type::Number),
        ],
    )
}

#[derive(Clone, Copy)]
enum Type {
    Text,
    Bool,
    Number,
    Integer,
}

/// Checks the types of the optional `keys` of `object` (at `at`).
fn typed(object: &Map<String, Value>, at: &str, keys: &[(&str, Type)]) -> Result<(), ConfigError> {
    for &(key, want) in keys {
        let Some(v) = object.get(key) else { continue };
        let (fits, what) = match want {
            Type::Text => (v.is_string(), "a string"),
            Type::Bool => (v.is_boolean(), "true or false"),
            Type::Number => (v.is_number(), "a number"),
            Type::Integer => (v.is_u64(), "a whole number, 0 or more"),
        };
        if !fits {
            return Err(ConfigError::new(
                format!("{at}.{key}"),
                format!("must be {what}, got {}", super::kind_of(v)),
            ));
        }
    }
    Ok(())
}
