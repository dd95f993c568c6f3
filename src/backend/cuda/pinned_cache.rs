//! The process's cache of page-locked buffers. Allocating and faulting in
//! gigabytes of page-locked memory takes about a second per GiB, most of a
//! GPU stream's start-up: so a stream's staging and output buffers, when
//! it ends, wait here for the next stream of the process, which takes
//! those of its sizes instead of allocating (see [`IdleCache`]).

use super::driver::PinnedBuffer;
use crate::memory::IdleCache;
use cudarc::driver::sys;

/// A stream's buffers: a few staging and output buffers each.
const LIMIT: usize = 16;

static CACHE: IdleCache<PinnedBuffer> =
    IdleCache::new("tz-pinned-cache", |b| b.allocated_bytes() as u64, LIMIT);

/// A cached buffer of exactly `bytes` for `device`, the most recently kept.
pub fn take(device: sys::CUdevice, bytes: usize) -> Option<PinnedBuffer> {
    CACHE.take(|b| b.device() == device && b.len() == bytes)
}

/// Keeps `buffer` for a later stream.
pub fn give(buffer: PinnedBuffer) {
    CACHE.give(buffer)
}

/// Frees every cached buffer; returns the bytes freed.
pub fn release() -> u64 {
    CACHE.release()
}

/// Page-locked bytes the cache holds now.
pub fn cached_bytes() -> u64 {
    CACHE.bytes()
}
