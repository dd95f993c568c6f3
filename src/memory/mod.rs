//! Host memory: how much this process may still use, and allocations that
//! fail with an error instead of aborting. Every buffer whose size a
//! configuration decides goes through here: the host program must never be
//! taken down because a configuration asked for too much.

mod idle_cache;

use crate::error::{Error, Result};
pub use idle_cache::IdleCache;

/// Large ordinary buffers (a CPU stream's staging and its epochs'
/// compressed bytes) a finished stream leaves for the next: a fresh one's
/// pages are faulted in on first touch, which took a CPU stream of a few
/// epochs longer than the copies into it.
static SPARE_BYTES: IdleCache<Vec<u8>> =
    IdleCache::new("tz-host-cache", |v| v.capacity() as u64, 8);

/// Buffers smaller than this are not worth keeping: the allocator reuses
/// them.
pub const SPARE_MIN_BYTES: usize = 8 << 20;

/// Keeps `v` (its allocation; its contents are stale) for a later stream,
/// if it is large enough to be worth it.
pub fn give_spare_bytes(v: Vec<u8>) {
    if v.capacity() >= SPARE_MIN_BYTES {
        SPARE_BYTES.give(v);
    }
}

/// The smallest kept vector with room for `bytes` (its length and stale
/// contents as they were), and not more than twice that: a stream holds
/// about what its plan says.
pub fn take_spare_bytes(bytes: usize) -> Option<Vec<u8>> {
    SPARE_BYTES.take(|v| v.capacity() >= bytes && v.capacity() / 2 <= bytes)
}

/// Sets of buffers, kept like [`SPARE_BYTES`]: a CPU epoch's buffers per
/// shard, whose fresh pages are faulted in as the workers pack the
/// epoch's chunks into them (about 130 MB for an epoch of cam-32 at
/// zstd's ratio, a tenth of a second of a 2-core machine).
static SPARE_SETS: IdleCache<Vec<Vec<u8>>> =
    IdleCache::new("tz-set-cache", |set| set_bytes(set), 8);

fn set_bytes(set: &[Vec<u8>]) -> u64 {
    set.iter().map(|c| c.capacity() as u64).sum()
}

/// Keeps a set of buffers (their contents are stale) for a later stream,
/// if it holds enough memory to be worth it.
pub fn give_spare_set(set: Vec<Vec<u8>>) {
    if set_bytes(&set) >= SPARE_MIN_BYTES as u64 {
        SPARE_SETS.give(set);
    }
}

/// A kept set of `count` buffers for up to `each_bytes` each, taken from
/// one of at least `count` and at most twice as many (the rest freed),
/// holding at most twice the memory the stream plans for them.
pub fn take_spare_set(count: usize, each_bytes: usize) -> Option<Vec<Vec<u8>>> {
    let plan = count.saturating_mul(each_bytes) as u64;
    let mut set = SPARE_SETS.take(|s| serves(s.len(), set_bytes(s), count, plan))?;
    set.truncate(count);
    Some(set)
}

/// Whether a kept set of `kept` buffers holding `kept_bytes` serves a
/// stream that plans `plan` bytes for `count` of them: enough buffers,
/// and not so many or so large that the stream holds far more than its
/// plan says.
fn serves(kept: usize, kept_bytes: u64, count: usize, plan: u64) -> bool {
    kept >= count && kept / 2 <= count && kept_bytes / 2 <= plan
}

/// Frees the kept ordinary buffers; returns the bytes freed.
pub fn release_spare_bytes() -> u64 {
    SPARE_BYTES.release() + SPARE_SETS.release()
}

/// Ordinary bytes kept for later streams.
pub fn spare_bytes() -> u64 {
    SPARE_BYTES.bytes() + SPARE_SETS.bytes()
}

/// A vector of `n` copies of `value`, or `OutOfMemory` naming `what`.
pub fn try_filled<T: Clone>(n: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    try_reserve(&mut v, n, what)?;
    v.resize(n, value);
    Ok(v)
}

/// Room for `extra` more elements in `v`, or `OutOfMemory` naming `what`.
/// Exactly that room: the estimate of a stream's memory counts the sizes
/// asked for, not the doubling of a growing vector.
pub fn try_reserve<T>(v: &mut Vec<T>, extra: usize, what: &str) -> Result<()> {
    v.try_reserve_exact(extra).map_err(|_| {
        Error::OutOfMemory(format!(
            "{what}: {} bytes could not be allocated",
            extra.saturating_mul(std::mem::size_of::<T>())
        ))
    })
}

/// Bytes of memory this process can still take without being killed or
/// refused, as far as the system says: the kernel's `MemAvailable`, lowered
/// to what the memory limits of the process's cgroup and every cgroup
/// above it, or an address-space limit, leave. `None` where none of them
/// can be read (not Linux).
///
/// An allocation that reserves address space succeeds far beyond this on
/// Linux (overcommit) and the process is killed when the pages are touched,
/// so large buffers are checked against it first.
pub fn available_host_bytes() -> Option<u64> {
    crate::platform::available_host_bytes()
}

/// Refuses `need` bytes of host memory (for `what`) when the system says
/// fewer are available, with both numbers in the message.
pub fn check_available(need: u64, what: &str) -> Result<()> {
    let mut available = available_host_bytes();
    // What the process keeps for later streams gives way first.
    if available.is_some_and(|free| need > free) && release_spare_bytes() > 0 {
        available = available_host_bytes();
    }
    match available {
        Some(free) if need > free => Err(Error::OutOfMemory(format!(
            "{what} needs {need} bytes of host memory, but only {free} are available; \
             lower staging_bytes or the shard size"
        ))),
        _ => Ok(()),
    }
}

/// Host memory an object store may hold in shards copied for upload and
/// not yet uploaded (a larger shard goes alone).
pub const UPLOAD_BUDGET_BYTES: u64 = 512 << 20;

/// Memory a configuration needs, computed without allocating anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryPlan {
    pub device_bytes: u64,
    /// Page-locked host memory, staging included.
    pub pinned_bytes: u64,
    /// Ordinary host memory.
    pub host_bytes: u64,
}

/// Copies at least this large are split over the copy threads: one thread
/// moves about 9 GB/s, short of what a camera link and the GPU can take.
const PARALLEL_COPY_BYTES: usize = 8 << 20;

/// `copy(dst, src)`, split over `pool`'s threads when it is large.
pub fn parallel_copy(
    pool: &rayon::ThreadPool,
    dst: &mut [u8],
    src: &[u8],
    copy: fn(&mut [u8], &[u8]),
) {
    if src.len() < PARALLEL_COPY_BYTES || pool.current_num_threads() == 1 {
        copy(dst, src);
        return;
    }
    use rayon::prelude::*;
    // Whole cache lines per piece, so that no two threads share one.
    let piece = src
        .len()
        .div_ceil(pool.current_num_threads())
        .next_multiple_of(64);
    pool.install(|| {
        dst.par_chunks_mut(piece)
            .zip(src.par_chunks(piece))
            .for_each(|(d, s)| copy(d, s));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_sets_serve_streams_of_up_to_their_size() {
        let mib = 1 << 20;
        assert!(serves(4096, 4096 * mib, 4096, 4096 * mib));
        assert!(serves(4096, 4096 * mib, 2048, 2048 * mib));
        assert!(
            !serves(4096, 4096 * mib, 2047, 2047 * mib),
            "twice the buffers a stream needs"
        );
        assert!(!serves(4095, 4095 * mib, 4096, 4096 * mib));
        // As many buffers, but far larger ones than the stream plans for.
        assert!(!serves(4096, 4096 * mib, 4096, 1024 * mib));
        // Small sets are not kept: the allocator reuses them.
        give_spare_set((0..3).map(|_| Vec::with_capacity(1024)).collect());
        assert!(take_spare_set(3, 1024).is_none());
    }

    #[test]
    fn huge_requests_are_errors() {
        let e = try_filled(usize::MAX / 2, 0u64, "a test table").unwrap_err();
        assert!(matches!(e, Error::OutOfMemory(_)), "{e}");
        assert!(e.to_string().contains("a test table"), "{e}");
        assert!(check_available(u64::MAX, "a stream").is_err());
    }
}
