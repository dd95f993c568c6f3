//! The Linux half of the platform layer: everything here reads `/proc` and
//! the cgroup file systems.

mod cgroup;
mod memory;

pub use memory::available_host_bytes;
