//! TiledZarr streams raw row-major frames into compressed, sharded Zarr v3
//! stores: it tiles the stream, compresses every tile, groups the tiles by
//! shard and hands each complete shard to a sink.

pub mod layout;
pub mod config;
