//! The pieces of `tz-bench`, one concern per file; `tz-bench.rs` runs them
//! in order.

pub mod args;
pub mod ceilings;
pub mod data;
pub mod peers;
pub mod positions;
pub mod protocol;
pub mod record;
pub mod stream;
pub mod table;
pub mod workdir;
