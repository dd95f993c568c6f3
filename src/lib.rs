//! TiledZarr streams raw row-major frames into compressed, sharded Zarr v3
//! stores: it tiles the stream, compresses every tile, groups the tiles by
//! shard and hands each complete shard to a sink (a callback or the built-in
//! filesystem store).
//!
//! Layers, each depending only on those above it: `platform` (all that
//! differs between operating systems: the memory this process may still
//! take); [`memory`] (fallible
//! allocation, what the host has left, the memory plan, the parallel copy,
//! the buffers kept for a process's next stream)
//! and [`metrics`] (stage counters), which every layer may use;
//! [`layout`] (index math),
//! [`config`], [`codec`], [`shard`], [`sink`], [`pipeline`], [`backend`] and
//! the C ABI in `ffi`.

pub mod backend;
pub mod codec;
pub mod config;
mod error;
pub mod layout;
pub mod memory;
pub mod metadata;
pub mod metrics;
pub mod pipeline;
mod platform;
pub mod shard;
pub mod sink;
pub mod synth;

pub use config::{Config, DType};
pub use error::{Error, Result};
pub use pipeline::{Stream, Summary};
/// Asks the system to write every dirty page to the disks (the benchmark
/// tool, between runs).
#[doc(hidden)]
pub use platform::sync_disks;

/// Frees the memory the process keeps for its next stream (a GPU stream's
/// page-locked staging and output buffers, a CPU stream's buffers of
/// compressed epochs and its chunk buffers, kept when it ends so that the
/// next one does not allocate and fault them in again; freed anyway after
/// 30 s unused).
/// Returns the bytes freed.
pub fn release_cached_memory() -> u64 {
    backend::cuda::release_cached_memory() + memory::release_spare_bytes()
}
pub mod ffi;
