//! The stream's calls that wait for staging memory (`tz_write_all`,
//! Python's `append` and `skip`): the non-waiting step repeated, with a
//! wait for a free buffer between steps, up to a timeout.

use super::intake::{Intake, Waited, Writer};
use super::Stream;
use crate::error::Result;
use std::time::{Duration, Instant};

impl Stream {
    /// Writes all of `data`, waiting for staging memory as needed, at most
    /// `timeout` (for ever with `None`, or a timeout too long for the
    /// clock, such as `Duration::MAX`). Returns the bytes taken: fewer than
    /// `data.len()` only when the timeout expired.
    pub fn write_blocking(&mut self, data: &[u8], timeout: Option<Duration>) -> Result<usize> {
        self.write_blocking_to(0, data, timeout)
    }

    /// [`Stream::write_blocking`] to array `array`.
    pub fn write_blocking_to(
        &mut self,
        array: usize,
        data: &[u8],
        timeout: Option<Duration>,
    ) -> Result<usize> {
        self.until_taken(array, data.len(), timeout, |intake, pool, done| {
            intake.try_write(array, &data[done..], pool, Writer::Waits)
        })
    }

    /// [`Stream::skip_to`] for a caller that waits: skips all `nbytes`,
    /// waiting for staging memory as needed, at most `timeout` (as
    /// [`Stream::write_blocking`] does). Returns the bytes skipped: fewer
    /// than `nbytes` only when the timeout expired.
    pub fn skip_blocking_to(
        &mut self,
        array: usize,
        nbytes: usize,
        timeout: Option<Duration>,
    ) -> Result<usize> {
        self.until_taken(array, nbytes, timeout, |intake, _, done| {
            intake.skip(array, nbytes - done, Writer::Waits)
        })
    }

    /// Takes `len` bytes of array `array` through `step` (which takes what
    /// it can now of the bytes from `done` on), waiting between steps for
    /// staging memory, at most `timeout` (none for `None`, or a timeout too
    /// long for the clock, such as `Duration::MAX`). Returns the bytes
    /// taken: fewer than `len` only when the timeout expired (counted as a
    /// busy write) or at the end of a bounded array.
    fn until_taken(
        &mut self,
        array: usize,
        len: usize,
        timeout: Option<Duration>,
        mut step: impl FnMut(&mut Intake, &rayon::ThreadPool, usize) -> Result<usize>,
    ) -> Result<usize> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut done = 0;
        loop {
            self.check_open()?;
            done += step(&mut self.intake.lock(), &self.copy_pool, done)?;
            // At the end of a bounded array, what was taken is reported now
            // and the overflow on the next call, as `try_write` does.
            let at_end = self.intake.lock().is_full(array);
            if done == len || (done > 0 && at_end) {
                return Ok(done);
            }
            // Busy: wait for the compute thread to hand a buffer back, in
            // short turns that leave the write side to the latency timer.
            let turn = Duration::from_millis(50);
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(turn),
                None => turn,
            };
            let got = match self.intake.lock().wait_for_buffer(array, wait)? {
                Waited::Got => true,
                Waited::TimedOut => false,
                Waited::HadOne => {
                    // Short with a buffer in hand: skipped epochs wait for
                    // room in their queue, which no buffer signals.
                    std::thread::sleep(wait.min(Duration::from_millis(1)));
                    false
                }
            };
            if !got && deadline.is_some_and(|d| Instant::now() >= d) {
                self.shared.metrics.write_was_busy();
                return Ok(done);
            }
        }
    }
}
