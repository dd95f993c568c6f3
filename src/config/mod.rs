//! The public configuration: Rust types with their JSON form, validated once
//! into a [`Validated`] whose every error names the field and the rule.
//!
//! ```json
//! {
//!   "dtype": "uint16",
//!   "dimensions": [
//!     {"name": "t", "size": 0,    "tile": 32,  "tiles_per_shard": 1},
//!     {"name": "y", "size": 2048, "tile": 128, "tiles_per_shard": 4},
//!     {"name": "x", "size": 2048, "tile": 128, "tiles_per_shard": 4}
//!   ],
//!   "codec": {"name": "zstd", "level": 1},
//!   "backend": "auto",
//!   "store": {"path": "acquisition.zarr", "overwrite": false}
//! }
//! ```

mod arrays;
mod dtype;
mod error;
mod image;
mod schema;
mod store;
mod store_url;
mod validate;

pub use arrays::{
    Acquisition, Arrangement, ArrayConfig, ArraysConfig, Collection, Plan, Plate, StreamConfig,
    Well, MAX_ARRAYS,
};
pub use dtype::DType;
pub use error::ConfigError;
pub use image::{check_attributes, Axis, Image, SPACE_UNITS, TIME_UNITS};
pub use schema::{
    AxisKind, BackendChoice, Cname, Codec, Config, Dimension, FrameMetadata, IndexLocation, Method,
    Multiscale, Ome, OmeSettings, Shuffle, MAX_FRAME_METADATA_BYTES,
};
pub use store::Store;
pub use store_url::{check_endpoint, ObjectUrl};
pub use validate::{store_timeout, Validated, BLOSC_LEVELS, GZIP_LEVELS, MAX_THREADS, ZSTD_LEVELS};
