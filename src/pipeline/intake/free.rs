//! The staging buffers not in use, and how their number grows.
//!
//! A stream starts with one staging buffer and one more on its way, and
//! takes more only when the writer outruns the hand-off: each time the
//! writer takes a buffer and no other is free, one more is asked of the
//! allocator's thread, up to the stream's budget (`staging_bytes`). The new buffer is allocated and its
//! pages faulted in on that thread while the writer fills the one it
//! holds, so growing never makes `tz_write` wait. A writer the pipeline
//! keeps up with settles at three buffers (one being filled, one being
//! compressed, one free ahead); one that outruns it takes the whole budget.
//! A lane of several arrays may take more than the budget, one buffer per
//! array and two more (each array may hold a partial epoch while the
//! others write), but only while its arrays hold so many buffers with
//! partial epochs that the others could not keep the pipeline going: a
//! time-lapse whose positions each complete their epochs at a visit stays
//! within the budget however many positions it has.
//! Buffers are not given back while the stream lives: an acquisition that
//! outran the pipeline once is likely to again, and a buffer given back
//! would cost its page faults a second time.

use crate::backend::StagingBuffer;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::Duration;

/// The free pool ended: the pipeline's threads are gone.
pub struct Gone;

pub struct FreeBuffers {
    free: Receiver<StagingBuffer>,
    /// One free buffer taken ahead of need: a channel says whether it is
    /// empty only by being tried.
    ahead: Option<StagingBuffer>,
    /// Asks the allocator's thread for one more buffer.
    grow: Option<Sender<()>>,
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
}

impl FreeBuffers {
    /// `free` delivers every buffer the stream has (those returned after
    /// use and the new ones); each message on `grow` adds one, at most
    /// `can_grow` in all.
    /// The first buffer ahead is asked for at once, so that it is ready
    /// when the writer hands its first buffer on.
    pub fn new(free: Receiver<StagingBuffer>, grow: Option<Sender<()>>, can_grow: usize) -> Self {
        let mut pool = FreeBuffers {
            free,
            ahead: None,
            grow,
            can_grow,
            budget: usize::MAX,
            had: 1,
            past_budget: false,
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

    /// `held` buffers are in the hands of arrays with partial epochs: when
    /// the budget leaves fewer than two others (one being compressed, one
    /// being filled), growth past the budget is allowed.
    pub fn set_held(&mut self, held: usize) {
        self.past_budget = held.saturating_add(2) > self.budget;
    }

    /// A free buffer, without waiting (`None`: none is free now).
    pub fn try_take(&mut self) -> Result<Option<StagingBuffer>, Gone> {
        let taken = match self.ahead.take() {
            Some(buf) => Some(buf),
            None => self.poll()?,
        };
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
                self.look_ahead()?;
                Ok(Some(buf))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Gone),
        }
    }

    /// No more growth: the stream is flushing or going away (this also
    /// lets the allocator's thread end).
    pub fn stop_growing(&mut self) {
        self.grow = None;
    }

    fn poll(&mut self) -> Result<Option<StagingBuffer>, Gone> {
        match self.free.try_recv() {
            Ok(buf) => Ok(Some(buf)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(Gone),
        }
    }

    /// Keeps one free buffer ahead, asking for one more when none is.
    fn look_ahead(&mut self) -> Result<(), Gone> {
        if self.ahead.is_none() {
            self.ahead = self.poll()?;
        }
        if self.ahead.is_none() {
            self.ask_for_one();
        }
        Ok(())
    }

    fn ask_for_one(&mut self) {
        if self.can_grow == 0 || (self.had >= self.budget && !self.past_budget) {
            return;
        }
        if let Some(grow) = &self.grow {
            if grow.send(()).is_ok() {
                self.can_grow -= 1;
                self.had += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn buffer() -> StagingBuffer {
        StagingBuffer::Host {
            buf: vec![0; 8],
            start: 0,
            len: 8,
        }
    }

    /// A pool of one buffer that may grow to `limit`, with the allocator
    /// played by the test: (pool, where buffers come back, growth asked).
    fn pool(limit: usize) -> (FreeBuffers, Sender<StagingBuffer>, Receiver<()>) {
        let (free_tx, free_rx) = channel();
        let (grow_tx, grow_rx) = channel();
        free_tx.send(buffer()).unwrap();
        (
            FreeBuffers::new(free_rx, Some(grow_tx), limit - 1),
            free_tx,
            grow_rx,
        )
    }

    /// Answers every request for growth with a new buffer; how many.
    fn allocate(asked: &Receiver<()>, free: &Sender<StagingBuffer>) -> usize {
        asked
            .try_iter()
            .map(|()| free.send(buffer()).unwrap())
            .count()
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
}
