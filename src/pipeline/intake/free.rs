//! The staging buffers not in use, and how their number grows.
//!
//! A stream starts with one staging buffer and one more on its way, and
//! takes more only when the writer outruns the hand-off: each time the
//! writer takes a buffer and no other is free, one more is asked of the
//! allocator's thread, up to the stream's budget (`staging_bytes`). The new buffer is allocated and its
//! pages faulted in on that thread while the writer fills the one it
//! holds, so growing never makes `tz_write` wait. One buffer is on its way
//! at a time: that thread makes them one after another, so a writer that
//! retries while one is on its way (a `tz_write` that took part of a
//! frame, called again at once) would get it no sooner by asking again,
//! and each extra ask would leave the stream a buffer it never needed,
//! faulted in at the cost of the cores that compress. A writer the pipeline
//! keeps up with settles at three buffers (one being filled, one being
//! compressed, one free ahead); one that outruns it takes the whole budget.
//! A lane of several arrays may take more than the budget, one buffer per
//! array and two more (each array may hold a partial epoch while the
//! others write), but only while its arrays hold so many buffers with
//! partial epochs that the others could not keep the pipeline going: a
//! time-lapse whose positions each complete their epochs at a visit stays
//! within the budget however many positions it has.
//!
//! A stream gives buffers back when its input has slowed for a while: if
//! after every take during [`SHRINK_WINDOW`] at least two buffers were
//! free, all but one of the buffers that stayed free go (to the process's
//! cache of spare buffers, which frees them after its own idle time, or to
//! the page-locked cache), and the pool may grow again later. The window is
//! long against a burst (a camera's frames come every few milliseconds)
//! and short against an acquisition, so buffers that outran the pipeline
//! once are kept through the pauses of a burst but not for an hour of
//! slow imaging. The check runs when the writer takes a buffer: a writer
//! that stops altogether keeps what it had until it writes again.

use crate::backend::StagingBuffer;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the free buffers are watched before those that stayed free go
/// (see the module's comment).
const SHRINK_WINDOW: Duration = Duration::from_secs(10);

/// The fewest buffers a pool shrinks to: one being filled, one being
/// compressed.
const SHRINK_FLOOR: usize = 2;

/// How often a wait for the buffers asked for at create looks whether the
/// allocator's thread gave up.
const ALLOCATOR_CHECK: Duration = Duration::from_millis(10);

/// The free pool ended: the pipeline's threads are gone.
pub struct Gone;

/// The pool's end of the way to the allocator's thread.
pub struct Growth {
    ask: Sender<()>,
    /// Buffers the allocator's thread has made so far.
    made: Arc<AtomicUsize>,
}

/// The allocator's thread's end: one message on `asked` per buffer to
/// make; [`Orders::made_one`] as each is done, before it is sent. Dropped
/// when that thread ends, which the pool sees (a buffer it could not
/// allocate is not waited for).
pub struct Orders {
    pub asked: Receiver<()>,
    made: Arc<AtomicUsize>,
}

impl Orders {
    pub fn made_one(&self) {
        self.made.fetch_add(1, Ordering::Release);
    }
}

impl Growth {
    /// Whether the allocator's thread has ended (its [`Orders`] dropped):
    /// after a buffer it could not allocate, what was asked of it and not
    /// made never comes.
    fn allocator_ended(&self) -> bool {
        Arc::strong_count(&self.made) == 1
    }

    fn made(&self) -> usize {
        self.made.load(Ordering::Acquire)
    }
}

/// A way from a pool to the allocator's thread that makes its buffers.
pub fn growth() -> (Growth, Orders) {
    let (ask, asked) = channel();
    let made = Arc::new(AtomicUsize::new(0));
    (
        Growth {
            ask,
            made: made.clone(),
        },
        Orders { asked, made },
    )
}

pub struct FreeBuffers {
    free: Receiver<StagingBuffer>,
    /// The free buffers taken off the channel (which says whether it is
    /// empty only by being tried), oldest first.
    ready: VecDeque<StagingBuffer>,
    /// Asks the allocator's thread for one more buffer.
    grow: Option<Growth>,
    /// Buffers asked of the allocator's thread so far.
    asked: usize,
    /// Buffers that may still be asked for.
    can_grow: usize,
    /// The stream's buffers within the staging budget, all told (past
    /// them, growth waits for [`FreeBuffers::set_held`] to allow it).
    budget: usize,
    /// Buffers asked for or had so far.
    had: usize,
    /// Whether the arrays' partial epochs hold so many buffers that growth
    /// past the budget is allowed.
    past_budget: bool,
    /// The watch for buffers that stay free.
    idle: IdleWatch,
}

/// The fewest free buffers seen at a take since `since`.
struct IdleWatch {
    window: Duration,
    since: Instant,
    fewest_free: usize,
}

impl FreeBuffers {
    /// `free` delivers every buffer the stream has (those returned after
    /// use and the new ones); each message on `grow` adds one, at most
    /// `can_grow` in all.
    /// The first buffer ahead is asked for at once, so that it is ready
    /// when the writer hands its first buffer on.
    pub fn new(free: Receiver<StagingBuffer>, grow: Option<Growth>, can_grow: usize) -> Self {
        let mut pool = FreeBuffers {
            free,
            ready: VecDeque::new(),
            grow,
            asked: 0,
            can_grow,
            budget: usize::MAX,
            had: 1,
            past_budget: false,
            idle: IdleWatch {
                window: SHRINK_WINDOW,
                since: Instant::now(),
                fewest_free: usize::MAX,
            },
        };
        pool.ask_for_one();
        pool
    }

    /// The same, growing past `budget` buffers in all only as
    /// [`FreeBuffers::set_held`] allows.
    pub fn with_budget(mut self, budget: usize) -> Self {
        self.budget = budget.max(1);
        self
    }

    /// The same, watching for idle buffers over `window` instead of
    /// [`SHRINK_WINDOW`].
    #[cfg(test)]
    pub fn with_shrink_window(mut self, window: Duration) -> Self {
        self.idle.window = window;
        self
    }

    /// `held` buffers are in the hands of arrays with partial epochs: when
    /// the budget leaves fewer than two others (one being compressed, one
    /// being filled), growth past the budget is allowed.
    pub fn set_held(&mut self, held: usize) {
        self.past_budget = held.saturating_add(2) > self.budget;
    }

    /// A free buffer, without waiting (`None`: none is free now).
    pub fn try_take(&mut self) -> Result<Option<StagingBuffer>, Gone> {
        self.collect()?;
        let taken = self.ready.pop_front();
        self.shrink_if_idle(Instant::now());
        self.look_ahead()?;
        Ok(taken)
    }

    /// A free buffer, waiting at most `wait` for one.
    pub fn take_within(&mut self, wait: Duration) -> Result<Option<StagingBuffer>, Gone> {
        if let Some(buf) = self.try_take()? {
            return Ok(Some(buf));
        }
        match self.free.recv_timeout(wait) {
            Ok(buf) => {
                self.idle.fewest_free = 0;
                self.look_ahead()?;
                Ok(Some(buf))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Gone),
        }
    }

    /// Waits, at most `wait` in all, until `count` buffers (at most as
    /// many as were asked for) are free: at create, for memory whose
    /// allocation is slow enough that the first writes would wait for the
    /// buffer asked for ahead (page-locked memory, a quarter of a second
    /// per 512 MiB from the driver).
    pub fn wait_until_free(&mut self, count: usize, wait: Duration) -> Result<(), Gone> {
        let until = Instant::now() + wait;
        self.collect()?;
        while self.ready.len() < count.min(self.had) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.forget_unmade() {
                break;
            }
            // In short turns: an allocator's thread that gives up says so
            // only by ending.
            match self.free.recv_timeout(left.min(ALLOCATOR_CHECK)) {
                Ok(buf) => self.ready.push_back(buf),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(Gone),
            }
        }
        Ok(())
    }

    /// When the allocator's thread has ended with buffers asked of it and
    /// not made, stops counting them and growing (the stream goes on with
    /// the buffers it has, as the module's comment says); whether it did.
    fn forget_unmade(&mut self) -> bool {
        let Some(grow) = &self.grow else {
            return false;
        };
        if !grow.allocator_ended() {
            return false;
        }
        let unmade = self.asked.saturating_sub(grow.made());
        self.had -= unmade.min(self.had.saturating_sub(1));
        self.asked -= unmade;
        self.can_grow = 0;
        self.grow = None;
        true
    }

    /// No more growth: the stream is flushing or going away (this also
    /// lets the allocator's thread end).
    pub fn stop_growing(&mut self) {
        self.grow = None;
    }

    /// Takes every buffer the channel has into `ready`.
    fn collect(&mut self) -> Result<(), Gone> {
        loop {
            match self.free.try_recv() {
                Ok(buf) => self.ready.push_back(buf),
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => return Err(Gone),
            }
        }
    }

    /// Notes how many buffers are free after a take; at the end of a
    /// window in which at least two always were, lets all but one (the one
    /// ahead) go.
    fn shrink_if_idle(&mut self, now: Instant) {
        let watch = &mut self.idle;
        watch.fewest_free = watch.fewest_free.min(self.ready.len());
        if now.duration_since(watch.since) < watch.window {
            return;
        }
        let surplus = watch
            .fewest_free
            .saturating_sub(1)
            .min(self.had.saturating_sub(SHRINK_FLOOR))
            .min(self.ready.len());
        // Every free buffer is resident and as good as any other.
        self.ready.truncate(self.ready.len() - surplus);
        self.had -= surplus;
        self.can_grow += surplus;
        watch.since = now;
        watch.fewest_free = usize::MAX;
    }

    /// Keeps one free buffer ahead, asking for one more when none is.
    fn look_ahead(&mut self) -> Result<(), Gone> {
        if self.ready.is_empty() {
            self.collect()?;
        }
        if self.ready.is_empty() {
            self.ask_for_one();
        }
        Ok(())
    }

    fn ask_for_one(&mut self) {
        if self.can_grow == 0 || (self.had >= self.budget && !self.past_budget) {
            return;
        }
        if let Some(grow) = &self.grow {
            if grow.made() < self.asked {
                return; // one is on its way (see the module's comment)
            }
            if grow.ask.send(()).is_ok() {
                self.asked += 1;
                self.can_grow -= 1;
                self.had += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer() -> StagingBuffer {
        StagingBuffer::Host {
            buf: vec![0; 8],
            start: 0,
            len: 8,
        }
    }

    /// A pool of one buffer that may grow to `limit`, with the allocator
    /// played by the test: (pool, where buffers come back, growth asked).
    fn pool(limit: usize) -> (FreeBuffers, Sender<StagingBuffer>, Orders) {
        let (free_tx, free_rx) = channel();
        let (growth, orders) = growth();
        free_tx.send(buffer()).unwrap();
        (
            FreeBuffers::new(free_rx, Some(growth), limit - 1),
            free_tx,
            orders,
        )
    }

    /// Answers every request for growth with a new buffer; how many.
    fn allocate(orders: &Orders, free: &Sender<StagingBuffer>) -> usize {
        orders
            .asked
            .try_iter()
            .map(|()| {
                orders.made_one();
                free.send(buffer()).unwrap()
            })
            .count()
    }

    #[test]
    fn a_writer_that_retries_while_a_buffer_is_on_its_way_asks_for_no_more() {
        let (mut pool, free, asked) = pool(16);
        let first = pool.try_take().ok().flatten().expect("the first buffer");
        // The buffer ahead, asked for at create, takes its time: the
        // writer, done with the first, retries many times meanwhile.
        for _ in 0..50 {
            assert!(pool.try_take().ok().flatten().is_none());
        }
        assert!(pool
            .take_within(Duration::from_millis(1))
            .ok()
            .flatten()
            .is_none());
        assert_eq!(
            allocate(&asked, &free),
            1,
            "one buffer asked for, not one per retry"
        );
        let second = pool.try_take().ok().flatten().expect("the buffer ahead");
        assert_eq!(allocate(&asked, &free), 1, "the next one ahead");
        // Taken while waiting: the one after is asked for as it arrives.
        drop((first, second));
        assert!(pool
            .take_within(Duration::from_millis(1))
            .ok()
            .flatten()
            .is_some());
        assert_eq!(allocate(&asked, &free), 1);
        assert_eq!(pool.had, 4);
    }

    #[test]
    fn a_writer_the_pipeline_keeps_up_with_settles_at_three_buffers() {
        let (mut pool, free, asked) = pool(16);
        let mut made = 1 + allocate(&asked, &free);
        assert_eq!(made, 2, "one buffer ahead is asked for at create");
        // Each buffer the writer fills is compressed and back before the
        // writer needs the next but one.
        let mut compressing: Option<StagingBuffer> = None;
        for _ in 0..100 {
            let buf = pool.try_take().ok().flatten().expect("never waits");
            if let Some(done) = compressing.replace(buf) {
                free.send(done).unwrap();
            }
            made += allocate(&asked, &free);
        }
        assert_eq!(made, 3);
    }

    #[test]
    fn a_writer_that_outruns_the_pipeline_grows_it_to_the_budget_and_no_further() {
        let (mut pool, free, asked) = pool(5);
        let mut held = Vec::new();
        for _ in 0..20 {
            if let Some(buf) = pool.try_take().ok().flatten() {
                held.push(buf); // never given back
            }
            allocate(&asked, &free);
        }
        assert_eq!(held.len(), 5);
        assert_eq!(allocate(&asked, &free), 0);
        assert!(pool.try_take().ok().flatten().is_none());
    }

    #[test]
    fn past_the_budget_only_while_partial_epochs_hold_the_buffers() {
        let (pool, free, asked) = pool(8);
        let mut pool = pool.with_budget(3);
        let mut held = Vec::new();
        for _ in 0..20 {
            if let Some(buf) = pool.try_take().ok().flatten() {
                held.push(buf);
            }
            allocate(&asked, &free);
        }
        assert_eq!(
            held.len(),
            3,
            "a writer that outruns the pipeline stays in the budget"
        );
        // Two arrays hold buffers with partial epochs: one more may come.
        pool.set_held(2);
        for _ in 0..20 {
            if let Some(buf) = pool.try_take().ok().flatten() {
                held.push(buf);
                pool.set_held(held.len());
            }
            allocate(&asked, &free);
        }
        assert_eq!(held.len(), 8, "up to the lane's limit");
        assert_eq!(allocate(&asked, &free), 0);
    }

    #[test]
    fn buffers_that_stay_free_for_a_window_go_and_come_back_when_needed() {
        let window = Duration::from_millis(40);
        let (pool, free, asked) = pool(8);
        let mut pool = pool.with_shrink_window(window);
        // A burst: the writer outruns the pipeline and the pool grows to 8.
        let mut held = Vec::new();
        for _ in 0..20 {
            if let Some(buf) = pool.try_take().ok().flatten() {
                held.push(buf);
            }
            allocate(&asked, &free);
        }
        assert_eq!(held.len(), 8);
        held.drain(..).for_each(|b| free.send(b).unwrap());
        // Then a slow input for two windows: each buffer is back long
        // before the next is needed, so seven stay free all along.
        let start = Instant::now();
        while start.elapsed() < 2 * window + Duration::from_millis(10) {
            let buf = pool.try_take().ok().flatten().expect("buffers are free");
            free.send(buf).unwrap();
            assert_eq!(allocate(&asked, &free), 0, "nothing new while idle");
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(pool.had, SHRINK_FLOOR, "all but the floor went");
        // A steady input that keeps two in use (one filled, one being
        // compressed) and one free ahead grows it to three and keeps them.
        let mut compressing: Option<StagingBuffer> = None;
        let start = Instant::now();
        while start.elapsed() < 2 * window + Duration::from_millis(10) {
            let buf = pool.try_take().ok().flatten().expect("never waits");
            if let Some(done) = compressing.replace(buf) {
                free.send(done).unwrap();
            }
            allocate(&asked, &free);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(pool.had, 3, "a buffer in use is never counted idle");
        // Another burst grows it back to the limit.
        for _ in 0..20 {
            if let Some(buf) = pool.try_take().ok().flatten() {
                held.push(buf);
            }
            allocate(&asked, &free);
        }
        assert_eq!(held.len() + usize::from(compressing.is_some()), 8);
    }

    #[test]
    fn no_growth_after_it_stopped_and_an_ended_pipeline_says_so() {
        let (mut pool, free, asked) = pool(4);
        allocate(&asked, &free);
        pool.stop_growing();
        assert!(pool.try_take().ok().flatten().is_some());
        assert!(pool.try_take().ok().flatten().is_some());
        assert_eq!(allocate(&asked, &free), 0, "nothing asked once stopped");
        drop(free);
        assert!(pool.try_take().is_err());
        assert!(pool.take_within(Duration::from_millis(1)).is_err());
    }

    #[test]
    fn a_wait_at_create_ends_when_the_allocator_gives_up() {
        // The buffer ahead is made while create waits for it.
        let (mut waiting, free, asked) = pool(4);
        let maker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            allocate(&asked, &free);
            (asked, free)
        });
        waiting
            .wait_until_free(2, Duration::from_secs(5))
            .ok()
            .expect("the pipeline is there");
        assert_eq!(waiting.ready.len(), 2, "the buffer ahead came");
        let (_asked, _free) = maker.join().unwrap();

        // The allocator cannot make it (its thread ends): the wait does
        // not last its whole bound, and the stream goes on with what it
        // has, asking for no more.
        let (mut pool, free, asked) = pool(4);
        drop(asked);
        let start = Instant::now();
        pool.wait_until_free(2, Duration::from_secs(5))
            .ok()
            .expect("the pipeline is there");
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        assert_eq!((pool.ready.len(), pool.had), (1, 1));
        let only = pool.try_take().ok().flatten().expect("the first buffer");
        assert!(pool.try_take().ok().flatten().is_none());
        free.send(only).unwrap();
        assert!(pool.try_take().ok().flatten().is_some(), "it is reused");
    }
}
