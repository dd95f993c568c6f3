//! The configuration's shape, shared by the JSON form and the Rust API.

use super::{ConfigError, DType, Store};
use serde::{Deserialize, Serialize};

/// Everything a stream needs to know before the first byte arrives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub dtype: DType,
    /// Slowest dimension first.
    pub dimensions: Vec<Dimension>,
    #[serde(default)]
    pub codec: Codec,
    #[serde(default)]
    pub backend: BackendChoice,
    /// Where the library writes a Zarr v3 store itself; optional when a sink
    /// callback is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<Store>,
    /// Where each shard's index goes.
    #[serde(default)]
    pub index_location: IndexLocation,
    /// Worker threads of the CPU backend; 0 = one per core.
    #[serde(default)]
    pub threads: u32,
    /// The most host staging memory the write path may fill before it
    /// reports busy; it holds whole epochs, at least two. A stream starts
    /// with two buffers and grows towards this while the writer outruns the
    /// pipeline. Default: two epochs or 1 GiB, whichever is more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging_bytes: Option<u64>,
    /// GPU ordinal for the GPU backend.
    #[serde(default)]
    pub device: u32,
    /// A cap on the GPU backend's device memory: its batches are made
    /// small enough to fit. Default: the backend's own plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<u64>,
    /// The latency bound: a staging buffer goes to the compressor when it is
    /// full or when its oldest whole epoch has waited this long. Default
    /// 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_latency_ms: Option<u64>,
    /// The dimension names, slowest first, in which the array is stored;
    /// default: the order of `dimensions` (the order of the bytes).
    /// Dimension 0 and the last dimension stay in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_order: Option<Vec<String>>,
    /// A multiscale pyramid; implies `ome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiscale: Option<Multiscale>,
    /// Write an OME-Zarr image (OME-NGFF 0.5): `true` or `{"name": ...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ome: Option<Ome>,
    /// The user's own metadata: a JSON object written into the image
    /// group's attributes (the array's without OME), beside `ome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<serde_json::Value>,
    /// Per-frame metadata (`tz_frame_metadata`), kept in the array
    /// `frame_metadata` of the OME image's group. JSON form only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_metadata: Option<FrameMetadata>,
}

/// Per-frame metadata: a JSON object per index of dimension 0, of at most
/// `max_bytes` bytes (compact UTF-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameMetadata {
    pub max_bytes: u32,
}

/// The largest `frame_metadata.max_bytes`.
pub const MAX_FRAME_METADATA_BYTES: u32 = 65536;

/// A multiscale pyramid: `levels` arrays (level 0 included), each halving
/// the downsampled dimensions of the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Multiscale {
    /// Levels, level 0 included; 0 = until every downsampled dimension fits
    /// in one tile.
    #[serde(default)]
    pub levels: u32,
    #[serde(default)]
    pub method: Method,
}

/// How a level summarises each window of the level below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// The mean, rounded to nearest (integers: ties to even).
    #[default]
    Mean,
    Min,
    Max,
    /// The lower median: the ceil(n/2)-th smallest of the n elements.
    Median,
    /// The window's first element.
    Decimate,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Mean => "mean",
            Method::Min => "min",
            Method::Max => "max",
            Method::Median => "median",
            Method::Decimate => "decimate",
        }
    }
}

/// `"ome": true`, or `"ome": {"name": "...", "omero": {...}}` (both keys
/// optional).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Ome {
    Enabled(bool),
    Settings(OmeSettings),
}

/// By hand rather than untagged, so that a misspelt key is named in the
/// error (serde's untagged enums say only that no variant matched).
impl<'de> Deserialize<'de> for Ome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ome, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Bool(b) => Ok(Ome::Enabled(b)),
            v @ serde_json::Value::Object(_) => serde_json::from_value(v)
                .map(Ome::Settings)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "expected true, false or an object with \"name\" and \"omero\", got {other}"
            ))),
        }
    }
}

/// An OME-Zarr image's own metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OmeSettings {
    /// The image's name in `multiscales`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// OME-NGFF's transitional `omero` block, written as given into
    /// `attributes.ome.omero`: `channels`, one per channel, each with a
    /// `color` (six hex digits) and a `window` (`start`, `end`, `min`,
    /// `max`), and a `label` (the channel's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omero: Option<serde_json::Value>,
}

/// What an axis is, in OME-NGFF's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AxisKind {
    Time,
    Channel,
    Space,
    Other,
}

impl AxisKind {
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::Time => "time",
            AxisKind::Channel => "channel",
            AxisKind::Space => "space",
            AxisKind::Other => "other",
        }
    }

    /// The default kind of a dimension named `name`.
    pub fn from_name(name: &str) -> AxisKind {
        match name {
            "t" => AxisKind::Time,
            "c" => AxisKind::Channel,
            "z" | "y" | "x" => AxisKind::Space,
            _ => AxisKind::Other,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dimension {
    /// Becomes the Zarr `dimension_names` entry; default `d<i>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Extent in elements; 0 on dimension 0 = unbounded append axis.
    pub size: u64,
    /// Tile (inner chunk) extent in elements.
    pub tile: u64,
    /// Tiles per shard along this dimension; 0 = all.
    #[serde(default = "one")]
    pub tiles_per_shard: u64,
    /// What the axis is; default from the name (`t` time, `c` channel,
    /// `z`/`y`/`x` space, else other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<AxisKind>,
    /// An OME-NGFF unit name (`"micrometer"`, `"second"`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Physical size of one element (default 1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// Physical position of element 0 (default 0.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<f64>,
    /// Whether pyramid levels halve this dimension; default: space
    /// dimensions of more than one element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downsample: Option<bool>,
}

impl Dimension {
    /// A dimension with the defaults for everything but its extent.
    pub fn new(size: u64, tile: u64, tiles_per_shard: u64) -> Dimension {
        Dimension {
            name: None,
            size,
            tile,
            tiles_per_shard,
            kind: None,
            unit: None,
            scale: None,
            translation: None,
            downsample: None,
        }
    }

    /// The same, named.
    pub fn named(name: &str, size: u64, tile: u64, tiles_per_shard: u64) -> Dimension {
        Dimension {
            name: Some(name.into()),
            ..Dimension::new(size, tile, tiles_per_shard)
        }
    }
}

fn one() -> u64 {
    1
}

/// The per-tile compression codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "lowercase", deny_unknown_fields)]
pub enum Codec {
    /// Tiles stored raw.
    None,
    /// zstd at `level` (see [`super::ZSTD_LEVELS`]).
    Zstd {
        #[serde(default = "one_i32")]
        level: i32,
    },
    /// Blosc1 frames (the Zarr v3 `blosc` codec) with `cname` inside (zstd
    /// by default), at blosc `level` (see [`super::BLOSC_LEVELS`]),
    /// shuffled by the element size first.
    Blosc {
        #[serde(default = "one_i32")]
        level: i32,
        #[serde(default)]
        shuffle: Shuffle,
        #[serde(default)]
        cname: Cname,
    },
    /// One gzip member per chunk (the Zarr v3 core `gzip` codec) at
    /// `level` (see [`super::GZIP_LEVELS`]).
    Gzip {
        #[serde(default = "one_i32")]
        level: i32,
    },
}

/// The shuffle filter of the blosc codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shuffle {
    /// Byte `k` of every element together: what makes uint16 images compress.
    #[default]
    Byte,
    /// Bit `k` of every element together.
    Bit,
    /// The elements as they are.
    None,
}

impl Shuffle {
    /// The configuration's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Shuffle::Byte => "byte",
            Shuffle::Bit => "bit",
            Shuffle::None => "none",
        }
    }
}

/// The compressor inside each blosc frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cname {
    /// zstd, at the level c-blosc derives from the blosc level.
    #[default]
    Zstd,
    /// LZ4: faster, larger.
    Lz4,
    /// zlib (deflate with its header and checksum).
    Zlib,
}

impl Cname {
    /// The configuration's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Cname::Zstd => "zstd",
            Cname::Lz4 => "lz4",
            Cname::Zlib => "zlib",
        }
    }
}

fn one_i32() -> i32 {
    1
}

impl Default for Codec {
    fn default() -> Codec {
        Codec::Zstd { level: 1 }
    }
}

/// Which compute backend runs the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// The GPU when one is usable, else the CPU; the reason is recorded.
    #[default]
    Auto,
    /// Host threads only; never touches CUDA.
    Cpu,
    /// The GPU or an error naming the missing piece.
    Gpu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexLocation {
    #[default]
    End,
    Start,
}

impl IndexLocation {
    pub fn name(self) -> &'static str {
        match self {
            IndexLocation::End => "end",
            IndexLocation::Start => "start",
        }
    }
}

impl Config {
    /// Parses the JSON form. Errors name the key (as a path such as
    /// `dimensions[1].tile`) and what was wrong with it.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        parse_json(text)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a config always serializes")
    }
}

/// Parses a configuration's JSON form; errors name the key (as a path
/// such as `dimensions[1].tile`) and what was wrong with it.
pub(super) fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let config: T = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ConfigError::new("json", format!("malformed JSON: {inner}"));
        }
        let field = if path == "." || path == "?" {
            "config".to_string()
        } else {
            path
        };
        ConfigError::new(field, inner.to_string())
    })?;
    // Text after the configuration (a second object, a stray word) is
    // refused, not ignored: it is most likely a configuration the caller
    // meant to give.
    de.end().map_err(|e| {
        ConfigError::new(
            "json",
            format!("text after the configuration is not allowed: {e}"),
        )
    })?;
    Ok(config)
}
