//! TiledZarr's criterion benchmarks, a crate of their own so that the
//! library's tests never build criterion:
//!
//! - `cpu_pipeline`: the CPU backend end to end on small chunks (cam-32,
//!   cam-1k), shards discarded or written to a folder;
//! - `cpu_stages`: its stages alone (the scatter, zstd on one and all
//!   cores, the shard assembly).
//!
//! `cargo bench -p tiledzarr-benches --bench cpu_pipeline`.
