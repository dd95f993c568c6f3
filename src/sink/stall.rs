//! How a store that waits on a disk shows the stream whether the disk
//! still answers.
//!
//! A write, flush or rename on a disk that stalls (a hung NFS mount, a
//! failing drive) does not return, and no portable call takes it back: the
//! thread that made it waits as long as the operating system does. The
//! store marks each of its calls and stamps every answer here; the stream's
//! flush and destroy, which wait for the store's thread, give up once the
//! store has been in a call with no answer for its bound, and leave the
//! thread to end whenever the disk lets it.

use crate::error::Error;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A store's disk, as its threads last saw it answer.
pub struct StallWatch {
    /// How long the store may wait on its disk for an answer.
    bound: Duration,
    /// The store's folder, for the error.
    store: PathBuf,
    /// Calls into the store under way (several threads may be in one).
    calls: AtomicUsize,
    /// When a call began or a disk operation last returned, in
    /// milliseconds since [`origin`].
    last_answer_ms: AtomicU64,
}

/// The zero of the stamps: the first watch of the process.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    origin().elapsed().as_millis() as u64
}

impl StallWatch {
    pub fn new(bound: Duration, store: PathBuf) -> StallWatch {
        StallWatch {
            bound,
            store,
            calls: AtomicUsize::new(0),
            last_answer_ms: AtomicU64::new(now_ms()),
        }
    }

    /// Marks a call into the store until the guard is dropped: only while
    /// one is under way can the store be waiting on its disk.
    pub fn call(self: &Arc<Self>) -> CallGuard {
        self.answered();
        self.calls.fetch_add(1, Relaxed);
        CallGuard(self.clone())
    }

    /// A disk operation returned (on any of the store's threads).
    pub fn answered(&self) {
        self.last_answer_ms.fetch_max(now_ms(), Relaxed);
    }

    /// The bound this watch gives the disk.
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// The failure to report when the store has been in a call for longer
    /// than its bound without an answer from its disk; `None` while it
    /// answers (or is not waiting on it).
    pub fn stalled(&self) -> Option<Error> {
        if self.calls.load(Relaxed) == 0 {
            return None;
        }
        let silent = now_ms().saturating_sub(self.last_answer_ms.load(Relaxed));
        (silent > self.bound.as_millis() as u64).then(|| Error::Io {
            what: "waiting for the disk of the store",
            path: self.store.clone(),
            kind: std::io::ErrorKind::TimedOut,
            message: format!(
                "no write, flush or rename returned for {} s (store.timeout_s): the stream \
                 gave up on the disk; shards written before stay in place, the rest are lost, \
                 and the store's threads end once the disk answers",
                self.bound.as_secs()
            ),
        })
    }
}

/// A call into the store under way; see [`StallWatch::call`].
pub struct CallGuard(Arc<StallWatch>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.0.answered();
        self.0.calls.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalled_only_in_a_call_past_the_bound_without_an_answer() {
        let w = Arc::new(StallWatch::new(
            Duration::from_millis(200),
            PathBuf::from("s.zarr"),
        ));
        std::thread::sleep(Duration::from_millis(300));
        assert!(w.stalled().is_none(), "no call under way");
        let call = w.call();
        assert!(w.stalled().is_none(), "the call just began");
        std::thread::sleep(Duration::from_millis(150));
        w.answered();
        std::thread::sleep(Duration::from_millis(100));
        assert!(w.stalled().is_none(), "an answer 100 ms ago");
        std::thread::sleep(Duration::from_millis(150));
        let e = w.stalled().expect("250 ms without an answer");
        assert!(e.to_string().contains("s.zarr"), "{e}");
        drop(call);
        assert!(w.stalled().is_none(), "the call returned");
    }
}
