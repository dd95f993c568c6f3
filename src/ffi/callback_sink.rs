//! The sink that calls the user's C function.

use super::types::{tz_shard, tz_shard_sink_fn};
use crate::error::{Error, Result};
use crate::shard::Shard;
use crate::sink::ShardSink;
use std::ffi::c_void;

pub struct CallbackSink {
    f: unsafe extern "C" fn(*mut c_void, *const tz_shard) -> i32,
    user_data: *mut c_void,
    /// The stream this sink belongs to (see `guard::in_sink`).
    stream_id: u64,
}

// SAFETY: the C contract says the callback is called from a library thread,
// one call at a time per stream; the user data travels with it by design.
unsafe impl Send for CallbackSink {}

impl CallbackSink {
    pub fn new(
        f: tz_shard_sink_fn,
        user_data: *mut c_void,
        stream_id: u64,
    ) -> Option<CallbackSink> {
        f.map(|f| CallbackSink {
            f,
            user_data,
            stream_id,
        })
    }
}

impl ShardSink for CallbackSink {
    fn emit(&mut self, shard: &Shard<'_>) -> Result<()> {
        let c = tz_shard {
            rank: shard.coord.len() as u32,
            coord: shard.coord.as_ptr(),
            data: shard.data.as_ptr(),
            data_bytes: shard.data.len(),
            index: shard.index.as_ptr(),
            index_bytes: shard.index.len(),
            level: shard.level,
            array: shard.array,
        };
        // SAFETY: `c` and the slices it points into outlive the call; the
        // callback and its user data are the user's promise.
        let rc = super::guard::as_sink(self.stream_id, || unsafe { (self.f)(self.user_data, &c) });
        if rc != 0 {
            return Err(Error::Sink {
                coord: shard.coord.to_vec(),
                reason: format!("the callback returned {rc}"),
            });
        }
        Ok(())
    }
}
