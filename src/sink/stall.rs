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

use crate::error::{Error, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A store's disk, as its threads last saw it answer.
pub struct StallWatch {
    /// How long the store may wait on its disk for an answer.
    bound: Duration,
    /// Where the bound comes from, for the error: the store's
    /// `store.timeout_s`, or nothing for the library's default.
    bound_from: &'static str,
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
    /// A watch with the bound a stream's `store.timeout_s` gives.
    pub fn new(bound: Duration, store: PathBuf) -> StallWatch {
        StallWatch {
            bound,
            bound_from: " (store.timeout_s)",
            store,
            calls: AtomicUsize::new(0),
            last_answer_ms: AtomicU64::new(now_ms()),
        }
    }

    /// A watch with the library's default bound, for work on a store that
    /// no stream configures (`tz_recover`).
    pub fn with_default_bound(store: PathBuf) -> StallWatch {
        let bound = Duration::from_secs(super::DEFAULT_TIMEOUT_S);
        StallWatch {
            bound_from: "",
            ..StallWatch::new(bound, store)
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
        self.stalled_as(
            "waiting for the disk of the store",
            "the stream gave up on the disk; shards written before stay in place, the rest \
             are lost, and the store's threads end once the disk answers",
        )
    }

    /// [`Self::stalled`], saying what was under way and what follows.
    fn stalled_as(&self, what: &'static str, outcome: &str) -> Option<Error> {
        if self.calls.load(Relaxed) == 0 {
            return None;
        }
        let silent = now_ms().saturating_sub(self.last_answer_ms.load(Relaxed));
        (silent > self.bound.as_millis() as u64).then(|| Error::Io {
            what,
            path: self.store.clone(),
            kind: std::io::ErrorKind::TimedOut,
            message: format!(
                "no write, flush or rename returned for {} s{}: {outcome}",
                self.bound.as_secs(),
                self.bound_from
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

/// Where [`on_own_thread`]'s work stands, as its caller and its thread
/// see it.
enum Work<T> {
    Running,
    Done(Result<T>),
    /// The caller gave up on the disk: what the work still makes goes to
    /// its `undo`.
    Abandoned,
}

/// How often a caller of [`on_own_thread`] looks at the watch; work on a
/// disk that answers wakes it at once.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// What a caller of [`on_own_thread`] is doing, for its error, and what
/// follows when it gives up.
pub struct Task {
    /// The name of the thread that does the work: at most 15 bytes, as
    /// Linux keeps no more of a thread's name (`/proc/*/task/*/comm`).
    pub thread: &'static str,
    pub what: &'static str,
    pub outcome: &'static str,
}

/// Does `work` (which waits on the disk) on a thread of its own, inside a
/// call of `watch`, and waits for it as long as the disk answers: on a disk
/// that stalls, the caller (`tz_create`, `tz_recover`) gets an error after
/// the watch's bound instead of waiting with the disk. What the thread
/// still makes after that goes to `undo`, on that thread, once the disk
/// lets it finish.
pub fn on_own_thread<T: Send + 'static>(
    watch: &Arc<StallWatch>,
    task: Task,
    work: impl FnOnce() -> Result<T> + Send + 'static,
    undo: impl FnOnce(T) + Send + 'static,
) -> Result<T> {
    let state = Arc::new((Mutex::new(Work::Running), Condvar::new()));
    let (theirs, call, thread) = (state.clone(), watch.call(), task.thread);
    std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            // A panic is an answer too: the caller must not wait for a
            // result that never comes.
            let made = catch_unwind(AssertUnwindSafe(work))
                .unwrap_or_else(|panic| Err(Error::from_panic(thread, &*panic)));
            drop(call);
            let (lock, done) = &*theirs;
            let mut at = lock.lock().unwrap_or_else(|e| e.into_inner());
            if let Work::Abandoned = &*at {
                drop(at);
                if let Ok(made) = made {
                    undo(made);
                }
                return;
            }
            *at = Work::Done(made);
            done.notify_one();
        })
        .map_err(|e| Error::Internal(format!("starting thread {}: {e}", task.thread)))?;
    let (lock, done) = &*state;
    let mut at = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Work::Done(made) = std::mem::replace(&mut *at, Work::Running) {
            return made;
        }
        if let Some(e) = watch.stalled_as(task.what, task.outcome) {
            *at = Work::Abandoned;
            return Err(e);
        }
        at = done
            .wait_timeout(at, LOOK_EVERY)
            .unwrap_or_else(|e| e.into_inner())
            .0;
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

    const TASK: Task = Task {
        thread: "tz-test-work",
        what: "working on the store",
        outcome: "the work was given up",
    };

    fn watch(ms: u64) -> Arc<StallWatch> {
        Arc::new(StallWatch::new(
            Duration::from_millis(ms),
            PathBuf::from("s.zarr"),
        ))
    }

    #[test]
    fn work_that_answers_is_waited_for_whatever_it_returns() {
        let w = watch(100);
        let undone = Arc::new(AtomicUsize::new(0));
        let u = undone.clone();
        let w2 = w.clone();
        let slow = on_own_thread(
            &w,
            TASK,
            move || {
                // Three times the bound, answering all along.
                for _ in 0..10 {
                    std::thread::sleep(Duration::from_millis(30));
                    w2.answered();
                }
                Ok(7)
            },
            move |_| {
                u.fetch_add(1, Relaxed);
            },
        );
        assert_eq!(slow.unwrap(), 7);
        let refused = on_own_thread(
            &w,
            TASK,
            || Err::<u8, _>(Error::Internal("no".into())),
            |_| {},
        );
        assert!(matches!(refused, Err(Error::Internal(_))));
        // The panic hook (a backtrace) may take longer than 100 ms.
        let patient = watch(10_000);
        let panicked = on_own_thread(&patient, TASK, || -> Result<u8> { panic!("a bug") }, |_| {});
        assert!(
            matches!(&panicked, Err(e) if e.to_string().contains("a bug")),
            "{panicked:?}"
        );
        assert_eq!(undone.load(Relaxed), 0);
        assert!(w.stalled().is_none(), "no call left under way");
    }

    #[test]
    fn work_that_stalls_is_given_up_and_undone_when_it_ends() {
        let w = watch(100);
        let undone = Arc::new(AtomicUsize::new(0));
        let u = undone.clone();
        let gate = Arc::new(Mutex::new(()));
        let g = gate.clone();
        let held = gate.lock().unwrap();
        let t0 = Instant::now();
        let made = on_own_thread(
            &w,
            TASK,
            move || {
                // A disk that stalls: nothing returns until the gate opens.
                drop(g.lock().unwrap_or_else(|e| e.into_inner()));
                Ok(7)
            },
            move |seven| {
                u.fetch_add(seven, Relaxed);
            },
        );
        let e = made.expect_err("the disk stalled");
        assert!(e.to_string().contains("working on the store"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(undone.load(Relaxed), 0, "still stalled");
        drop(held);
        let t1 = Instant::now();
        while undone.load(Relaxed) == 0 && t1.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(undone.load(Relaxed), 7, "what the work made late is undone");
    }
}
