//! The write side of a stream: the staging buffer being filled, the
//! reservation handed to a caller that writes into staging memory itself,
//! and the hand-off of filled buffers to the compute thread.
//!
//! It sits behind a mutex shared by the caller's thread and the latency
//! timer ([`super::latency`]), which hands on the whole epochs of a buffer
//! that has waited too long to fill.

mod cursor;
mod frame_metadata;
pub(super) mod free;
mod skip;

pub use cursor::ArrayIntake;
use cursor::Cursor;
pub use frame_metadata::{compact_object, rows_held, MetadataRow};
pub use free::{FreeBuffers, Writer};

use super::batches::Batch;
use super::shared::Shared;
use super::workers::Job;
use crate::backend::StagingBuffer;
use crate::error::{Error, Result};
use crate::metrics::Stage;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Sender, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What [`Intake::wait_for_buffer`] came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// A free buffer came within the wait.
    Got,
    /// None came.
    TimedOut,
    /// The array had one in hand already: nothing to wait for.
    HadOne,
}

pub struct Intake {
    shared: Arc<Shared>,
    /// Each array's buffer in hand and epochs.
    cursors: Vec<Cursor>,
    /// One free pool per lane (arrays that share a backend).
    free_staging: Vec<FreeBuffers>,
    jobs: Option<SyncSender<Job>>,
    /// The array whose buffer a [`Lease`] holds.
    leased: Option<usize>,
    wake_timer: Option<Sender<()>>,
    pub started: Option<Instant>,
}

/// The free part of a staging buffer, handed to the caller to write into
/// (`Stream::reserve`, `tz_reserve`); the buffer goes back with
/// `Intake::commit`.
pub struct Lease {
    array: usize,
    buf: StagingBuffer,
    start: usize,
    len: usize,
}

impl Lease {
    /// The bytes the caller may write.
    pub fn bytes(&mut self) -> &mut [u8] {
        let (start, len) = (self.start, self.len);
        &mut self.buf[start..start + len]
    }

    pub fn bytes_ref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first byte's address, for a caller across the C boundary.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.bytes().as_mut_ptr()
    }
}

/// What [`Intake::new`] needs from the stream.
pub struct IntakeParts {
    pub shared: Arc<Shared>,
    pub arrays: Vec<ArrayIntake>,
    /// One free pool per lane.
    pub free_staging: Vec<FreeBuffers>,
    pub jobs: SyncSender<Job>,
    pub wake_timer: Option<Sender<()>>,
}

impl Intake {
    pub fn new(p: IntakeParts) -> Intake {
        Intake {
            shared: p.shared,
            cursors: p.arrays.into_iter().map(Cursor::new).collect(),
            free_staging: p.free_staging,
            jobs: Some(p.jobs),
            leased: None,
            wake_timer: p.wake_timer,
            started: None,
        }
    }

    /// Bytes written to array `array` so far.
    pub fn bytes_in(&self, array: usize) -> u64 {
        self.cursors[array].bytes_in
    }

    /// Whether array `array` is bounded and complete.
    pub fn is_full(&self, array: usize) -> bool {
        self.cursors[array].at_end()
    }

    /// The array `array`, or an error naming the arrays there are.
    fn cursor(&self, array: usize) -> Result<()> {
        if array < self.cursors.len() {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "array {array} does not exist: this stream has {} (0 to {})",
            self.cursors.len(),
            self.cursors.len() - 1
        )))
    }

    /// Copies what fits of `data` into free staging memory of array
    /// `array` (a large write shared by the threads of `pool`), without
    /// waiting; returns the bytes taken. `writer` says whether the caller
    /// waits for memory when this takes less than all.
    pub fn try_write(
        &mut self,
        array: usize,
        data: &[u8],
        pool: &rayon::ThreadPool,
        writer: Writer,
    ) -> Result<usize> {
        self.cursor(array)?;
        if self.leased.is_some() && !data.is_empty() {
            return Err(Error::InvalidArgument(
                "a reservation is outstanding: commit it (tz_commit) before writing".into(),
            ));
        }
        let take = self.room(array, data.len())?;
        self.started.get_or_insert_with(Instant::now);
        let t = Instant::now();
        let mut done = 0;
        while done < take {
            if self.cursors[array].staging.is_none() && !self.take_free_buffer(array, writer)? {
                break;
            }
            let c = &mut self.cursors[array];
            let n = (take - done).min(c.hand_on_bytes() - c.filled);
            let buf = c.staging.as_mut().expect("a buffer is in hand");
            let copier = buf.copier();
            crate::memory::parallel_copy(
                pool,
                &mut buf[c.filled..c.filled + n],
                &data[done..done + n],
                copier,
            );
            self.advance(array, n)?;
            done += n;
        }
        self.shared.metrics.add_time(Stage::Copy, t.elapsed());
        self.shared.metrics.add_in(done as u64);
        if done < take && writer == Writer::CannotWait {
            self.shared.metrics.write_was_busy();
        }
        Ok(done)
    }

    /// How much of `len` bytes array `array` still takes; an error past
    /// the end of a bounded array.
    fn room(&self, array: usize, len: usize) -> Result<usize> {
        self.cursors[array].room(len).map_err(|capacity| {
            if self.cursors.len() == 1 {
                Error::Overflow { capacity }
            } else {
                Error::ArrayOverflow {
                    array: self.shared.keys[array].clone(),
                    capacity,
                }
            }
        })
    }

    /// Counts `n` bytes just written after `filled`; hands the buffer on
    /// when it is full or holds the end of a bounded array.
    fn advance(&mut self, array: usize, n: usize) -> Result<()> {
        let c = &mut self.cursors[array];
        c.filled += n;
        c.bytes_in += n as u64;
        if c.whole_since.is_none() && c.filled >= c.plan.epoch_bytes {
            c.whole_since = Some(Instant::now());
            if let Some(wake) = &self.wake_timer {
                let _ = wake.send(());
            }
        }
        if c.is_due() {
            self.submit(array, self.cursors[array].filled)?;
        }
        Ok(())
    }

    /// Waits for a free staging buffer for array `array` when it has none
    /// in hand, at most `wait`.
    pub fn wait_for_buffer(&mut self, array: usize, wait: Duration) -> Result<Waited> {
        self.cursor(array)?;
        if self.cursors[array].staging.is_some() || self.leased.is_some() {
            return Ok(Waited::HadOne);
        }
        let lane = self.cursors[array].plan.lane;
        let pool = self.pool(lane);
        pool.set_writer(Writer::Waits);
        match pool.take_within(wait) {
            Ok(Some(buf)) => {
                self.start_buffer(array, buf);
                Ok(Waited::Got)
            }
            Ok(None) => Ok(Waited::TimedOut),
            Err(free::Gone) => Err(self.pipeline_gone()),
        }
    }

    /// The free part of array `array`'s staging buffer in hand (taking a
    /// free one if none is), at most what a bounded array still takes;
    /// `None` when no staging memory is free.
    pub fn lease(&mut self, array: usize) -> Result<Option<Lease>> {
        self.cursor(array)?;
        if self.leased.is_some() {
            return Err(Error::InvalidArgument(
                "a reservation is already outstanding: commit it (tz_commit) before reserving again"
                    .into(),
            ));
        }
        let room = self.room(array, usize::MAX)?;
        self.started.get_or_insert_with(Instant::now);
        if self.cursors[array].staging.is_none()
            && !self.take_free_buffer(array, Writer::CannotWait)?
        {
            self.shared.metrics.write_was_busy();
            return Ok(None);
        }
        let c = &mut self.cursors[array];
        let buf = c.staging.take().expect("a buffer is in hand");
        self.leased = Some(array);
        Ok(Some(Lease {
            array,
            buf,
            start: c.filled,
            len: (c.hand_on_bytes() - c.filled).min(room),
        }))
    }

    /// Takes the lease's buffer back with its first `n` bytes written
    /// (`n` at most the lease's length: the stream checks it first).
    pub fn commit(&mut self, lease: Lease, n: usize) -> Result<()> {
        let array = lease.array;
        debug_assert!(n <= lease.len && self.leased == Some(array));
        debug_assert_eq!(lease.start, self.cursors[array].filled);
        self.leased = None;
        self.cursors[array].staging = Some(lease.buf);
        self.shared.metrics.add_in(n as u64);
        self.advance(array, n)
    }

    /// Takes back a lease the caller gives up (its bytes do not count).
    pub fn cancel(&mut self, lease: Lease) {
        self.leased = None;
        self.cursors[lease.array].staging = Some(lease.buf);
    }

    /// Hands on the whole epochs of every buffer in hand whose oldest has
    /// waited `max_latency`; returns how long until the next check is due
    /// (`None`: no clock running).
    pub fn hand_on_due(&mut self, max_latency: Duration) -> Result<Option<Duration>> {
        let mut next: Option<Duration> = None;
        for array in 0..self.cursors.len() {
            if let Some(wait) = self.hand_on_due_of(array, max_latency)? {
                next = Some(next.map_or(wait, |n| n.min(wait)));
            }
        }
        Ok(next)
    }

    fn hand_on_due_of(&mut self, array: usize, max_latency: Duration) -> Result<Option<Duration>> {
        let c = &self.cursors[array];
        let Some(since) = c.whole_since else {
            return Ok(None);
        };
        let waited = since.elapsed();
        if waited < max_latency {
            return Ok(Some(max_latency - waited));
        }
        if self.leased == Some(array) || self.jobs.is_none() {
            // The caller holds the buffer: checked again shortly.
            return Ok(Some(Duration::from_millis(1)));
        }
        let epoch_bytes = c.plan.epoch_bytes;
        let whole = c.filled / epoch_bytes * epoch_bytes;
        let tail = c.filled - whole;
        if tail > 0 {
            // The partial epoch moves to a free buffer of its own.
            let lane = c.plan.lane;
            let Some(mut next) = self
                .pool(lane)
                .try_take()
                .map_err(|_| self.pipeline_gone())?
            else {
                return Ok(Some(Duration::from_millis(1)));
            };
            let c = &mut self.cursors[array];
            let buf = c.staging.as_ref().expect("a buffer holds the epochs");
            let copier = buf.copier();
            copier(&mut next[..tail], &buf[whole..c.filled]);
            let full = c.staging.replace(next).expect("a buffer in hand");
            self.send(array, full, whole)?;
            self.cursors[array].filled = tail;
        } else {
            self.submit(array, whole)?;
        }
        Ok(None)
    }

    /// Hands array `array`'s buffer in hand on with its first `valid` bytes.
    pub fn submit(&mut self, array: usize, valid: usize) -> Result<()> {
        let buf = self.cursors[array]
            .staging
            .take()
            .expect("a buffer is in hand");
        self.send(array, buf, valid)?;
        self.cursors[array].filled = 0;
        Ok(())
    }

    fn send(&mut self, array: usize, buf: StagingBuffer, valid: usize) -> Result<()> {
        let c = &mut self.cursors[array];
        let job = Job::Batch(Batch {
            array: array as u32,
            first_epoch: c.epoch,
            buf,
            valid,
        });
        let first_epoch = c.epoch;
        c.epoch += valid.div_ceil(c.plan.epoch_bytes) as u64;
        c.whole_since = None;
        let jobs = self.jobs.as_ref().ok_or(Error::Finished)?;
        jobs.send(job).map_err(|_| self.pipeline_gone())?;
        self.hand_on_metadata_before(array, first_epoch)
    }

    /// Every array's last partial buffer, then the end of the job queue:
    /// what the flush sends before its `Finish`. Returns the sender for
    /// that.
    pub fn close(&mut self) -> Result<Option<SyncSender<Job>>> {
        self.wake_timer = None;
        self.free_staging
            .iter_mut()
            .for_each(FreeBuffers::stop_growing);
        for array in 0..self.cursors.len() {
            let c = &self.cursors[array];
            if c.filled > 0 && c.staging.is_some() {
                self.submit(array, c.filled)?;
            }
            self.hand_on_all_metadata(array)?;
        }
        Ok(self.jobs.take())
    }

    /// Drops the job queue and the timer's wake-up without a flush (the
    /// stream is destroyed).
    pub fn abandon(&mut self) {
        self.jobs = None;
        self.wake_timer = None;
        self.free_staging
            .iter_mut()
            .for_each(FreeBuffers::stop_growing);
    }

    pub fn is_leased(&self) -> bool {
        self.leased.is_some()
    }

    fn take_free_buffer(&mut self, array: usize, writer: Writer) -> Result<bool> {
        let lane = self.cursors[array].plan.lane;
        let pool = self.pool(lane);
        pool.set_writer(writer);
        match pool.try_take() {
            Ok(Some(buf)) => {
                self.start_buffer(array, buf);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(free::Gone) => Err(self.pipeline_gone()),
        }
    }

    /// Lane `lane`'s free pool, told how many of its buffers the arrays
    /// hold (with partial epochs, or a reservation).
    fn pool(&mut self, lane: usize) -> &mut FreeBuffers {
        let held = self
            .cursors
            .iter()
            .enumerate()
            .filter(|(a, c)| {
                c.plan.lane == lane && (c.staging.is_some() || self.leased == Some(*a))
            })
            .count();
        let pool = &mut self.free_staging[lane];
        pool.set_held(held);
        pool
    }

    fn start_buffer(&mut self, array: usize, buf: StagingBuffer) {
        let c = &mut self.cursors[array];
        debug_assert!(c.staging.is_none());
        c.staging = Some(buf);
        c.filled = 0;
    }

    fn pipeline_gone(&self) -> Error {
        if self.shared.cancel.load(Relaxed) {
            return Error::Finished;
        }
        self.shared.check().err().unwrap_or_else(|| {
            let e = Error::Internal("the pipeline's compute thread stopped".into());
            self.shared.poison(e.clone());
            e
        })
    }
}

#[cfg(test)]
mod tests;
