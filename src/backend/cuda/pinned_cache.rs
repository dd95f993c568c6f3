//! The process's cache of page-locked buffers. Allocating and faulting in
//! gigabytes of page-locked memory takes about a second per GiB, most of a
//! GPU stream's start-up: so a stream's staging and output buffers, when
//! it ends, wait here for the next stream of the process, which takes
//! those of its sizes instead of allocating. A buffer left unused for
//! [`IDLE`] is freed by a thread that runs while the cache holds any;
//! [`release`] frees them all at once.

use super::driver::PinnedBuffer;
use cudarc::driver::sys;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long a buffer waits for a stream before it is freed.
pub const IDLE: Duration = Duration::from_secs(30);

struct Kept {
    buffer: PinnedBuffer,
    since: Instant,
}

static CACHE: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
static CACHED_BYTES: AtomicU64 = AtomicU64::new(0);
static REAPER: AtomicBool = AtomicBool::new(false);

/// A cached buffer of exactly `bytes` for `device`, the most recently kept.
pub fn take(device: sys::CUdevice, bytes: usize) -> Option<PinnedBuffer> {
    let mut cache = CACHE.lock();
    let i = cache
        .iter()
        .rposition(|k| k.buffer.device() == device && k.buffer.len() == bytes)?;
    let kept = cache.swap_remove(i);
    CACHED_BYTES.fetch_sub(kept.buffer.allocated_bytes() as u64, Relaxed);
    Some(kept.buffer)
}

/// Keeps `buffer` for a later stream.
pub fn give(buffer: PinnedBuffer) {
    CACHED_BYTES.fetch_add(buffer.allocated_bytes() as u64, Relaxed);
    CACHE.lock().push(Kept {
        buffer,
        since: Instant::now(),
    });
    if !REAPER.swap(true, Relaxed) {
        let started = std::thread::Builder::new()
            .name("tz-pinned-cache".into())
            .spawn(reap);
        if started.is_err() {
            // Without the thread, the buffers wait for `release` or the
            // next stream.
            REAPER.store(false, Relaxed);
        }
    }
}

/// Frees every cached buffer; returns the bytes freed.
pub fn release() -> u64 {
    free(std::mem::take(&mut *CACHE.lock()))
}

/// Frees buffers taken out of the cache (outside its lock: freeing takes
/// time); returns the bytes freed.
fn free(buffers: Vec<Kept>) -> u64 {
    let bytes: u64 = buffers
        .iter()
        .map(|k| k.buffer.allocated_bytes() as u64)
        .sum();
    CACHED_BYTES.fetch_sub(bytes, Relaxed);
    drop(buffers);
    bytes
}

/// Page-locked bytes the cache holds now.
pub fn cached_bytes() -> u64 {
    CACHED_BYTES.load(Relaxed)
}

/// Frees buffers idle for [`IDLE`]; ends when the cache is empty.
fn reap() {
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let freed: Vec<Kept> = {
            let mut cache = CACHE.lock();
            let (old, keep): (Vec<Kept>, Vec<Kept>) = std::mem::take(&mut *cache)
                .into_iter()
                .partition(|k| k.since.elapsed() >= IDLE);
            *cache = keep;
            if cache.is_empty() {
                REAPER.store(false, Relaxed);
            }
            old
        };
        free(freed);
        if !REAPER.load(Relaxed) {
            return;
        }
    }
}
