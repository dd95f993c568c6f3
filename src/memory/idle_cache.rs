//! Buffers a finished stream leaves for the process's next one. A fresh
//! buffer costs its first touch: the kernel faults in and zeroes every page
//! (page-locked memory is also pinned, about a second per GiB), which a
//! short stream pays again and again. A cache keeps what a stream gives
//! back; a buffer left unused for [`IDLE`] is freed by a thread that runs
//! while the cache holds any, and [`IdleCache::release`] frees them all.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long a buffer waits for a stream before it is freed.
pub const IDLE: Duration = Duration::from_secs(30);

pub struct IdleCache<T: Send + 'static> {
    kept: Mutex<Vec<(T, Instant)>>,
    bytes: AtomicU64,
    reaper: AtomicBool,
    /// The reaper thread's name.
    name: &'static str,
    /// The memory a buffer holds.
    size: fn(&T) -> u64,
    /// At most this many buffers are kept; beyond, the oldest is freed.
    limit: usize,
}

impl<T: Send + 'static> IdleCache<T> {
    pub const fn new(name: &'static str, size: fn(&T) -> u64, limit: usize) -> IdleCache<T> {
        IdleCache {
            kept: Mutex::new(Vec::new()),
            bytes: AtomicU64::new(0),
            reaper: AtomicBool::new(false),
            name,
            size,
            limit,
        }
    }

    /// The smallest kept buffer that `fits` (of those, the most recently
    /// kept), taken out of the cache.
    pub fn take(&self, fits: impl Fn(&T) -> bool) -> Option<T> {
        let mut kept = self.kept.lock();
        let i = (0..kept.len())
            .rev()
            .filter(|&i| fits(&kept[i].0))
            .min_by_key(|&i| (self.size)(&kept[i].0))?;
        let (buffer, _) = kept.remove(i);
        self.bytes.fetch_sub((self.size)(&buffer), Relaxed);
        Some(buffer)
    }

    /// Keeps `buffer` for a later stream.
    pub fn give(&'static self, buffer: T) {
        self.bytes.fetch_add((self.size)(&buffer), Relaxed);
        let evicted = {
            let mut kept = self.kept.lock();
            kept.push((buffer, Instant::now()));
            let over = kept.len().saturating_sub(self.limit);
            kept.drain(..over).collect::<Vec<_>>()
        };
        self.free(evicted);
        if !self.reaper.swap(true, Relaxed) {
            let started = std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || self.reap());
            if started.is_err() {
                // Without the thread, the buffers wait for `release` or
                // the next stream.
                self.reaper.store(false, Relaxed);
            }
        }
    }

    /// Frees every kept buffer; returns the bytes freed.
    pub fn release(&self) -> u64 {
        let all = std::mem::take(&mut *self.kept.lock());
        self.free(all)
    }

    /// The bytes the cache holds now.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    /// Frees buffers taken out of the cache (outside its lock: freeing
    /// takes time); returns the bytes freed.
    fn free(&self, buffers: Vec<(T, Instant)>) -> u64 {
        let bytes: u64 = buffers.iter().map(|(b, _)| (self.size)(b)).sum();
        self.bytes.fetch_sub(bytes, Relaxed);
        drop(buffers);
        bytes
    }

    /// Frees buffers idle for [`IDLE`]; ends when the cache is empty.
    fn reap(&self) {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let old = {
                let mut kept = self.kept.lock();
                let (old, keep) = std::mem::take(&mut *kept)
                    .into_iter()
                    .partition(|(_, since)| since.elapsed() >= IDLE);
                *kept = keep;
                if kept.is_empty() {
                    self.reaper.store(false, Relaxed);
                }
                old
            };
            self.free(old);
            if !self.reaper.load(Relaxed) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static CACHE: IdleCache<Vec<u8>> = IdleCache::new("tz-test-cache", |v| v.len() as u64, 2);

    #[test]
    fn keeps_takes_evicts_and_releases() {
        CACHE.give(vec![1; 10]);
        CACHE.give(vec![2; 20]);
        assert_eq!(CACHE.bytes(), 30);
        // Over the limit: the oldest goes.
        CACHE.give(vec![3; 30]);
        assert_eq!(CACHE.bytes(), 50);
        assert!(CACHE.take(|v| v.len() == 10).is_none());
        CACHE.give(vec![4; 20]);
        assert_eq!(CACHE.bytes(), 50, "the 20 bytes of 2 evicted");
        let got = CACHE.take(|v| v.len() >= 15).unwrap();
        assert_eq!(got[0], 4, "the smallest that fits");
        let got = CACHE.take(|v| v.len() >= 15).unwrap();
        assert_eq!(got[0], 3);
        CACHE.give(vec![5; 20]);
        CACHE.give(vec![6; 20]);
        assert_eq!(
            CACHE.take(|_| true).unwrap()[0],
            6,
            "of equals, the most recent"
        );
        assert_eq!(CACHE.bytes(), 20);
        assert_eq!(CACHE.release(), 20);
        assert_eq!(CACHE.bytes(), 0);
        assert!(CACHE.take(|_| true).is_none());
    }
}
