//! A stream of several arrays: positions of a time-lapse, the fields of a
//! plate's wells, several cameras. Each array has its own shape, element
//! type, codec and OME image; the stream's staging, threads, backend and
//! store are shared. The JSON form is a configuration with `arrays`:
//!
//! ```json
//! {
//!   "arrays": [
//!     {"key": "A/1/0", "dtype": "uint16", "dimensions": [...]},
//!     {"key": "A/2/0", "dtype": "uint16", "dimensions": [...]}
//!   ],
//!   "plate": {"rows": ["A"], "columns": ["1", "2"],
//!             "wells": [{"row": "A", "column": "1", "fields": ["A/1/0"]},
//!                       {"row": "A", "column": "2", "fields": ["A/2/0"]}]},
//!   "backend": "auto",
//!   "store": {"path": "plate.zarr"}
//! }
//! ```
//!
//! Without `collection` or `plate` the arrays are images (or plain arrays)
//! under their keys in a root group.

use super::{
    BackendChoice, Codec, Config, ConfigError, DType, Dimension, FrameMetadata, IndexLocation,
    Multiscale, Ome, Store, Validated,
};
use crate::error::{Error, Result};
use placement::{check_collection, check_keys, check_plate};
use serde::{Deserialize, Serialize};

mod placement;

/// The most arrays one stream may hold (a 1536-well plate with a few
/// fields each); every array costs its shard state and, while it holds a
/// partial epoch, a staging buffer.
pub const MAX_ARRAYS: usize = 8192;

/// A stream of several arrays: `arrays` and the keys every array shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArraysConfig {
    pub arrays: Vec<ArrayConfig>,
    /// `"bioformats2raw"`: the arrays are the images of a collection,
    /// listed in the `OME` group's `series`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<Collection>,
    /// The arrays are the fields of a plate's wells (OME-NGFF HCS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plate: Option<Plate>,
    #[serde(default)]
    pub backend: BackendChoice,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<Store>,
    #[serde(default)]
    pub index_location: IndexLocation,
    #[serde(default)]
    pub threads: u32,
    /// Host staging memory for all arrays together (see
    /// [`Config::staging_bytes`]); raised where needed so that every array
    /// can hold a partial epoch at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging_bytes: Option<u64>,
    #[serde(default)]
    pub device: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_latency_ms: Option<u64>,
}

/// One array of a stream: its key in the store and today's per-array
/// settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayConfig {
    /// Where the array's image lives, relative to the store's root:
    /// `/`-separated names of letters, digits, `-`, `_` and `.`.
    pub key: String,
    pub dtype: DType,
    pub dimensions: Vec<Dimension>,
    #[serde(default)]
    pub codec: Codec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_order: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiscale: Option<Multiscale>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ome: Option<Ome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_metadata: Option<FrameMetadata>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Collection {
    /// A root group marked `bioformats2raw.layout` 3 and an `OME` group
    /// whose `series` lists the images (as ome-writers writes positions).
    Bioformats2raw,
}

/// A plate of wells (OME-NGFF 0.5 HCS): each well's fields are arrays whose
/// keys are `<row>/<column>/<field>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub rows: Vec<String>,
    pub columns: Vec<String>,
    pub wells: Vec<Well>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acquisitions: Vec<Acquisition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Well {
    pub row: String,
    pub column: String,
    /// The keys of the arrays that are this well's fields, in order.
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acquisition {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// How a stream's arrays sit in the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrangement {
    /// One array (or OME image) at the store's root: today's stream.
    Single,
    /// Images under their keys in a root group.
    Group,
    Collection,
    Plate(Plate),
}

/// A stream's validated configuration: each array's [`Validated`] (its key
/// in [`Validated::key`]) and how they sit in the store.
#[derive(Debug, Clone)]
pub struct Plan {
    pub arrays: Vec<Validated>,
    pub arrangement: Arrangement,
}

impl Plan {
    /// The plan of a single-array configuration.
    pub fn single(v: Validated) -> Plan {
        Plan {
            arrays: vec![v],
            arrangement: Arrangement::Single,
        }
    }

    /// The settings every array shares (backend, store, threads...): the
    /// first array's.
    pub fn shared(&self) -> &Validated {
        &self.arrays[0]
    }

    /// The store the configuration names; an error for a stream that has
    /// none (a callback only).
    pub fn store(&self) -> Result<&Store> {
        let store = self.shared().config.store.as_ref();
        store.ok_or_else(|| Error::InvalidArgument("the configuration names no store".into()))
    }

    /// The index of the array with `key`.
    pub fn index_of(&self, key: &str) -> Option<usize> {
        self.arrays.iter().position(|v| v.key == key)
    }
}

impl ArraysConfig {
    /// Parses the JSON form (see [`Config::from_json`] for the errors).
    pub fn from_json(text: &str) -> Result<ArraysConfig, ConfigError> {
        super::schema::parse_json(text)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a config always serializes")
    }

    /// Each array as a configuration of its own, with the shared keys.
    pub fn array_config(&self, a: &ArrayConfig) -> Config {
        let in_ome_layout = self.collection.is_some() || self.plate.is_some();
        Config {
            dtype: a.dtype,
            dimensions: a.dimensions.clone(),
            codec: a.codec,
            backend: self.backend,
            store: self.store.clone(),
            index_location: self.index_location,
            threads: self.threads,
            staging_bytes: self.staging_bytes,
            device: self.device,
            device_bytes: self.device_bytes,
            max_latency_ms: self.max_latency_ms,
            storage_order: a.storage_order.clone(),
            multiscale: a.multiscale,
            ome: match &a.ome {
                None if in_ome_layout => Some(Ome::Enabled(true)),
                ome => ome.clone(),
            },
            attributes: a.attributes.clone(),
            frame_metadata: a.frame_metadata,
        }
    }

    /// Checks every array and the layout; errors name the array
    /// (`arrays[3] ("A/2/0").dimensions[1].tile: ...`) and the rule.
    pub fn validate(&self) -> Result<Plan, ConfigError> {
        if self.arrays.is_empty() || self.arrays.len() > MAX_ARRAYS {
            return Err(ConfigError::new(
                "arrays",
                format!(
                    "must list 1 to {MAX_ARRAYS} arrays, got {}",
                    self.arrays.len()
                ),
            ));
        }
        check_keys(&self.arrays)?;
        let in_ome_layout = self.collection.is_some() || self.plate.is_some();
        let mut arrays = Vec::with_capacity(self.arrays.len());
        for (i, a) in self.arrays.iter().enumerate() {
            let named = |e: ConfigError| {
                let field = match e.field.as_str() {
                    // Shared keys keep their own name.
                    f if is_shared_key(f) => f.to_string(),
                    f => format!("arrays[{i}] ({:?}).{f}", a.key),
                };
                ConfigError::new(field, e.rule)
            };
            if in_ome_layout && a.ome == Some(Ome::Enabled(false)) {
                return Err(named(ConfigError::new(
                    "ome",
                    "must be an OME image in a collection or a plate (leave \"ome\" out)",
                )));
            }
            let mut v = self.array_config(a).validate().map_err(named)?;
            v.key = a.key.clone();
            arrays.push(v);
        }
        let arrangement = match (&self.collection, &self.plate) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    "plate",
                    "a stream is a collection or a plate, not both",
                ))
            }
            (Some(Collection::Bioformats2raw), None) => {
                check_collection(&self.arrays)?;
                Arrangement::Collection
            }
            (None, Some(plate)) => {
                check_plate(plate, &self.arrays)?;
                Arrangement::Plate(plate.clone())
            }
            (None, None) => Arrangement::Group,
        };
        Ok(Plan {
            arrays,
            arrangement,
        })
    }
}

/// Keys that name a shared setting rather than an array's.
fn is_shared_key(field: &str) -> bool {
    let head = field.split(['.', '[']).next().unwrap_or(field);
    matches!(
        head,
        "backend"
            | "store"
            | "index_location"
            | "threads"
            | "staging_bytes"
            | "device"
            | "device_bytes"
            | "max_latency_ms"
    )
}

/// A configuration in either form: one array, or `arrays`.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamConfig {
    One(Box<Config>),
    Many(Box<ArraysConfig>),
}

impl StreamConfig {
    /// Parses either form: a JSON object with `arrays` is a stream of
    /// several arrays.
    pub fn from_json(text: &str) -> Result<StreamConfig, ConfigError> {
        let has_arrays = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
            .map(|m| m.contains_key("arrays"))
            .unwrap_or(false);
        if has_arrays {
            ArraysConfig::from_json(text).map(|m| StreamConfig::Many(Box::new(m)))
        } else {
            Config::from_json(text).map(|c| StreamConfig::One(Box::new(c)))
        }
    }

    pub fn validate(&self) -> Result<Plan, ConfigError> {
        match self {
            StreamConfig::One(c) => c.validate().map(Plan::single),
            StreamConfig::Many(m) => m.validate(),
        }
    }
}

impl From<Config> for StreamConfig {
    fn from(c: Config) -> StreamConfig {
        StreamConfig::One(Box::new(c))
    }
}

impl From<ArraysConfig> for StreamConfig {
    fn from(c: ArraysConfig) -> StreamConfig {
        StreamConfig::Many(Box::new(c))
    }
}

#[cfg(test)]
mod tests;
