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
//! compressed, one free ahead). One that outruns it and cannot wait
//! (`tz_write`, `tz_reserve`: a camera whose frames would be lost) takes
//! the whole budget, which absorbs a burst. One that waits for free memory
//! (`tz_write_all`, the Python `append`, the C++ `write_all`) grows it no
//! further than keeps the pipeline busy, plus one buffer per other array
//! holding one:
//! - two buffers (one being filled, one being compressed) while one side
//!   is the faster: a writer that always finds its next buffer still
//!   being compressed is held back by the pipeline, and one that always
//!   finds it free holds the pipeline back, and in neither case would a
//!   buffer ahead make the stream end sooner;
//! - three once each side has waited for the other (once the pipeline
//!   has given a buffer back, one take found none free, and another found
//!   nothing in the pipeline but the buffer just handed on): the two run
//!   at about the same rate, and a buffer ahead absorbs their turns.
//!
//! In a lane of several arrays, whose buffers are smaller (each array may
//! hold one), the compute thread gathers the buffers waiting in the queue
//! into one batch of the backend; there each count above is of batches
//! (a lone array's buffer), not of buffers: a time-lapse of 96 positions
//! on the GPU, a buffer per position's epoch, ran at 0.15 of one stream's
//! rate with two buffers, one epoch per batch.
//!
//! More would not compress the frames sooner, but would cost the faults
//! of memory that only holds a backlog: on two cores, a fresh process's
//! first stream of 0.27 GB written at once ran about a tenth slower with
//! its staging grown to the whole acquisition than with three buffers,
//! and a further 7% slower (median of six processes) with three than
//! with two.
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
use crate::pipeline::shared::Shared;
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

/// How the writer takes staging memory (see the module's comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// Told "busy" when none is free (`tz_write`, `tz_reserve`, `tz_skip`):
    /// the pool grows to the budget to absorb what it cannot wait with.
    CannotWait,
    /// Waits until a buffer is free (`tz_write_all`): the pool grows only
    /// as far as keeps the pipeline busy.
    Waits,
}

/// The batches a waiting writer keeps the pipeline busy with while one
/// side is the faster: one being filled, one being compressed (for a lone
/// array, a batch is a buffer).
const FED_BY_A_WAITING_WRITER: usize = 2;

/// The channel every buffer of the stream comes on (new or given back),
/// counting them: what came beyond the new ones was given back.
struct Incoming {
    rx: Receiver<StagingBuffer>,
    received: usize,
}

impl Incoming {
    fn try_recv(&mut self) -> Result<StagingBuffer, TryRecvError> {
        let buf = self.rx.try_recv()?;
        self.received += 1;
        Ok(buf)
    }

    fn recv_timeout(&mut self, wait: Duration) -> Result<StagingBuffer, RecvTimeoutError> {
        let buf = self.rx.recv_timeout(wait)?;
        self.received += 1;
        Ok(buf)
    }
}

pub struct FreeBuffers {
    free: Incoming,
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
    /// Buffers in the hands of arrays (see [`FreeBuffers::set_held`]).
    held: usize,
    /// Buffers that make one batch of the lane's backend (see
    /// `lanes::lane_batch_buffers`).
    batch_buffers: usize,
    /// How the latest take's writer takes memory.
    writer: Writer,
    /// Which sides a waiting writer's takes saw wait once the pipeline
    /// had given a buffer back (before, every take is of a new one and
    /// says nothing of which side is the faster): the writer (no buffer
    /// free), the pipeline (nothing in it but the buffer just handed on).
    writer_waited: bool,
    pipeline_waited: bool,
    /// Whether the writer has tried for a buffer and found none since its
    /// latest take.
    missed: bool,
    /// Whose metrics count the buffers that go.
    shared: Option<Arc<Shared>>,
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
            free: Incoming {
                rx: free,
                received: 0,
            },
            ready: VecDeque::new(),
            grow,
            asked: 0,
            can_grow,
            budget: usize::MAX,
            had: 1,
            past_budget: false,
            held: 0,
            batch_buffers: 1,
            writer: Writer::CannotWait,
            writer_waited: false,
            pipeline_waited: false,
            missed: false,
            shared: None,
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

    /// The same, for a lane whose backend's batch takes `buffers` buffers.
    pub fn with_batch_buffers(mut self, buffers: usize) -> Self {
        self.batch_buffers = buffers.max(1);
        self
    }

    /// The same, counting the buffers that go in `shared`'s metrics.
    pub fn with_metrics(mut self, shared: Arc<Shared>) -> Self {
        self.shared = Some(shared);
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
        self.held = held;
        self.past_budget = held.saturating_add(2) > self.budget;
    }

    /// The next takes are `writer`'s.
    pub fn set_writer(&mut self, writer: Writer) {
        self.writer = writer;
    }

    /// A free buffer, without waiting (`None`: none is free now).
    pub fn try_take(&mut self) -> Result<Option<StagingBuffer>, Gone> {
        self.collect()?;
        let free = self.ready.len();
        let taken = self.ready.pop_front();
        self.note_take(taken.is_some(), free);
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
                // Taken after the miss of `try_take` above.
                self.note_take(true, self.ready.len());
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

    /// Notes a try for a buffer (`got` one or not, `free` of them free
    /// before it). A take after a miss kept the writer waiting; one at the
    /// first try with nothing in the pipeline but the buffer just handed on
    /// found the pipeline waiting for the writer. Each is noted for a
    /// waiting writer once the pipeline has given a buffer back.
    fn note_take(&mut self, got: bool, free: usize) {
        if !got {
            self.missed = true;
            return;
        }
        if self.writer == Writer::Waits && self.given_back() {
            if self.missed {
                self.writer_waited = true;
            } else if self.in_pipeline(free) <= 1 {
                self.pipeline_waited = true;
            }
        }
        self.missed = false;
    }

    /// Whether the pipeline has given a buffer back: more came on `free`
    /// than the first and those the allocator made.
    fn given_back(&self) -> bool {
        self.free.received > 1 + (self.asked - self.unmade())
    }

    /// Buffers asked of the allocator's thread and not made yet.
    fn unmade(&self) -> usize {
        self.grow
            .as_ref()
            .map_or(0, |g| self.asked.saturating_sub(g.made()))
    }

    /// Buffers the pipeline has (compressing or queued) when `free` are
    /// free and the taker holds none: all that were made but the free ones
    /// and those other arrays hold.
    fn in_pipeline(&self, free: usize) -> usize {
        self.had
            .saturating_sub(self.unmade())
            .saturating_sub(free)
            .saturating_sub(self.held)
    }

    /// The buffers a waiting writer keeps the pipeline busy with (see the
    /// module's comment), besides those other arrays hold.
    fn fed_by_a_waiting_writer(&self) -> usize {
        let batches =
            FED_BY_A_WAITING_WRITER + usize::from(self.writer_waited && self.pipeline_waited);
        batches.saturating_mul(self.batch_buffers)
    }

    /// When the allocator's thread has ended with buffers asked of it and
    /// not made, stops counting them and growing (the stream goes on with
    /// the buffers it has, as the module's comment says); whether it did.
    fn forget_unmade(&mut self) -> bool {
        if !self.grow.as_ref().is_some_and(Growth::allocator_ended) {
            return false;
        }
        let unmade = self.unmade();
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
        let keep = self.ready.len() - surplus;
        for gone in self.ready.drain(keep..) {
            if let Some(shared) = &self.shared {
                shared.metrics.staging_shrank(gone.len() as u64);
            }
        }
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
        // `held` counts the other arrays' buffers: the taker's is not in
        // its hands yet.
        let fed = self.held.saturating_add(self.fed_by_a_waiting_writer());
        if self.writer == Writer::Waits && self.had >= fed {
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
mod tests;
