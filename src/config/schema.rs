//! The configuration's shape, shared by the JSON form and the Rust API.

use super::{ConfigError, DType};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    /// Host staging memory the write path may fill before it reports busy;
    /// it holds whole epochs, at least two. Default: two epochs or 1 GiB,
    /// whichever is more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging_bytes: Option<u64>,
    /// GPU ordinal for the GPU backend.
    #[serde(default)]
    pub device: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// The Zarr v3 store written by the library: a folder (`path`) or an
/// S3-compatible object store (`url`), exactly one of the two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// The store folder (empty when `url` names an object store).
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub path: PathBuf,
    /// `s3://bucket/prefix`: the store's objects are `prefix/zarr.json` and
    /// `prefix/c/...` in `bucket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The object store's endpoint (`http://host:port` for an on-premises
    /// server, addressed path-style); default: `AWS_ENDPOINT_URL`, else AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The bucket's region; default: `AWS_REGION`, `AWS_DEFAULT_REGION`, the
    /// profile's region, else `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Replace an existing store: only a store whose every file (or object)
    /// this library wrote (an earlier store, an empty folder) is cleared;
    /// anything else is refused, naming what is in the way.
    #[serde(default)]
    pub overwrite: bool,
    /// Flush each shard file and `zarr.json`, and their folder, to the disk
    /// before the shard counts as written (on the delivery thread: writes
    /// never wait for it). Off trades durability for speed. (An object store
    /// has its object complete when its upload returns.)
    #[serde(default = "yes")]
    pub fsync: bool,
}

impl Default for Store {
    fn default() -> Store {
        Store {
            path: PathBuf::new(),
            url: None,
            endpoint: None,
            region: None,
            overwrite: false,
            fsync: true,
        }
    }
}

impl Store {
    /// The filesystem store at `path`, with the defaults.
    pub fn folder(path: impl Into<PathBuf>) -> Store {
        Store {
            path: path.into(),
            ..Store::default()
        }
    }

    /// The object store at `url` (`s3://bucket/prefix`), with the defaults.
    pub fn object(url: impl Into<String>) -> Store {
        Store {
            url: Some(url.into()),
            ..Store::default()
        }
    }
}

fn is_empty_path(p: &std::path::Path) -> bool {
    p.as_os_str().is_empty()
}

fn yes() -> bool {
    true
}

impl Config {
    /// Parses the JSON form. Errors name the key (as a path such as
    /// `dimensions[1].tile`) and what was wrong with it.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
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
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a config always serializes")
    }
}
