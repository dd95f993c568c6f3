//! The write side of a stream: the staging buffer being filled, the
//! reservation handed to a caller that writes into staging memory itself,
//! and the hand-off of filled buffers to the compute thread.
//!
//! It sits behind a mutex shared by the caller's thread and the latency
//! timer ([`super::latency`]), which hands on the whole epochs of a buffer
//! that has waited too long to fill.

mod free;

pub use free::FreeBuffers;

use super::shared::Shared;
use super::workers::Job;
use crate::backend::StagingBuffer;
use crate::error::{Error, Result};
use crate::metrics::Stage;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Sender, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Intake {
    shared: Arc<Shared>,
    /// The buffer being filled, and how many bytes it holds.
    staging: Option<StagingBuffer>,
    filled: usize,
    /// The first epoch of the staging buffer in hand.
    epoch: u64,
    pub bytes_in: u64,
    buffer_bytes: usize,
    epoch_bytes: usize,
    /// A bounded array's bytes.
    capacity: Option<u64>,
    free_staging: FreeBuffers,
    jobs: Option<SyncSender<Job>>,
    /// Set while a [`Lease`] holds the buffer in hand.
    leased: bool,
    /// When the buffer in hand first held a whole epoch: the clock of the
    /// latency bound; the timer is woken when it starts.
    whole_since: Option<Instant>,
    wake_timer: Option<Sender<()>>,
    pub started: Option<Instant>,
}

/// The free part of a staging buffer, handed to the caller to write into
/// (`Stream::reserve`, `tz_reserve`); the buffer goes back with
/// [`Intake::commit`].
pub struct Lease {
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
    pub buffer_bytes: usize,
    pub epoch_bytes: usize,
    pub capacity: Option<u64>,
    pub free_staging: FreeBuffers,
    pub jobs: SyncSender<Job>,
    pub wake_timer: Option<Sender<()>>,
}

impl Intake {
    pub fn new(p: IntakeParts) -> Intake {
        Intake {
            shared: p.shared,
            staging: None,
            filled: 0,
            epoch: 0,
            bytes_in: 0,
            buffer_bytes: p.buffer_bytes,
            epoch_bytes: p.epoch_bytes,
            capacity: p.capacity,
            free_staging: p.free_staging,
            jobs: Some(p.jobs),
            leased: false,
            whole_since: None,
            wake_timer: p.wake_timer,
            started: None,
        }
    }

    /// Copies what fits of `data` into free staging memory (a large
    /// write shared by the threads of `pool`), without waiting; returns the
    /// bytes taken.
    pub fn try_write(&mut self, data: &[u8], pool: &rayon::ThreadPool) -> Result<usize> {
        if self.leased && !data.is_empty() {
            return Err(Error::InvalidArgument(
                "a reservation is outstanding: commit it (tz_commit) before writing".into(),
            ));
        }
        let take = self.room(data.len())?;
        self.started.get_or_insert_with(Instant::now);
        let t = Instant::now();
        let mut done = 0;
        while done < take {
            if self.staging.is_none() && !self.take_free_buffer()? {
                break;
            }
            let n = (take - done).min(self.hand_on_bytes() - self.filled);
            let buf = self.staging.as_mut().expect("a buffer is in hand");
            let copier = buf.copier();
            crate::memory::parallel_copy(
                pool,
                &mut buf[self.filled..self.filled + n],
                &data[done..done + n],
                copier,
            );
            self.advance(n)?;
            done += n;
        }
        self.shared.metrics.add_time(Stage::Copy, t.elapsed());
        self.shared.metrics.add_in(done as u64);
        Ok(done)
    }

    /// How full the buffer in hand gets before it is handed on: as many
    /// whole epochs as the stream has handed on before it (at least one),
    /// up to the buffer's size. A stream's first batches are one epoch,
    /// one, two, four...: the compressor starts after the first epoch
    /// rather than a whole buffer (a GPU stream of cam-32: 256 MiB copied
    /// in instead of 512 MiB before the GPU has work), and from then on
    /// each batch is in before the one ahead of it is compressed, until
    /// batches reach the buffer's size, which the compressor needs for its
    /// rate.
    fn hand_on_bytes(&self) -> usize {
        let whole = (self.buffer_bytes / self.epoch_bytes) as u64;
        self.epoch.clamp(1, whole.max(1)) as usize * self.epoch_bytes
    }

    /// How much of `len` bytes the array still takes; an error past the
    /// end of a bounded array.
    fn room(&self, len: usize) -> Result<usize> {
        match self.capacity {
            Some(cap) => {
                let left = cap - self.bytes_in;
                if left == 0 && len > 0 {
                    return Err(Error::Overflow { capacity: cap });
                }
                Ok(len.min(usize::try_from(left).unwrap_or(usize::MAX)))
            }
            None => Ok(len),
        }
    }

    /// Counts `n` bytes just written after `filled`; hands the buffer on
    /// when it is full or holds the end of a bounded array.
    fn advance(&mut self, n: usize) -> Result<()> {
        self.filled += n;
        self.bytes_in += n as u64;
        if self.whole_since.is_none() && self.filled >= self.epoch_bytes {
            self.whole_since = Some(Instant::now());
            if let Some(wake) = &self.wake_timer {
                let _ = wake.send(());
            }
        }
        if self.filled == self.hand_on_bytes() || Some(self.bytes_in) == self.capacity {
            self.submit(self.filled)?;
        }
        Ok(())
    }

    /// Waits for a free staging buffer when none is in hand, at most
    /// `wait`; false when the time ran out.
    pub fn wait_for_buffer(&mut self, wait: Duration) -> Result<bool> {
        if self.staging.is_some() || self.leased {
            return Ok(true);
        }
        match self.free_staging.take_within(wait) {
            Ok(Some(buf)) => {
                self.start_buffer(buf);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(free::Gone) => Err(self.pipeline_gone()),
        }
    }

    /// The free part of the staging buffer in hand (taking a free one if
    /// none is), at most what a bounded array still takes; `None` when no
    /// staging memory is free.
    pub fn lease(&mut self) -> Result<Option<Lease>> {
        if self.leased {
            return Err(Error::InvalidArgument(
                "a reservation is already outstanding: commit it (tz_commit) before reserving again"
                    .into(),
            ));
        }
        let room = self.room(usize::MAX)?;
        self.started.get_or_insert_with(Instant::now);
        if self.staging.is_none() && !self.take_free_buffer()? {
            return Ok(None);
        }
        let buf = self.staging.take().expect("a buffer is in hand");
        self.leased = true;
        Ok(Some(Lease {
            buf,
            start: self.filled,
            len: (self.hand_on_bytes() - self.filled).min(room),
        }))
    }

    /// Takes the lease's buffer back with its first `n` bytes written
    /// (`n` at most the lease's length: the stream checks it first).
    pub fn commit(&mut self, lease: Lease, n: usize) -> Result<()> {
        debug_assert!(n <= lease.len && self.leased && lease.start == self.filled);
        self.leased = false;
        self.staging = Some(lease.buf);
        self.shared.metrics.add_in(n as u64);
        self.advance(n)
    }

    /// Takes back a lease the caller gives up (its bytes do not count).
    pub fn cancel(&mut self, lease: Lease) {
        self.leased = false;
        self.staging = Some(lease.buf);
    }

    /// Hands on the whole epochs of the buffer in hand once the oldest
    /// has waited `max_latency`; returns how long until the next check is
    /// due (`None`: no clock running).
    pub fn hand_on_due(&mut self, max_latency: Duration) -> Result<Option<Duration>> {
        let Some(since) = self.whole_since else {
            return Ok(None);
        };
        let waited = since.elapsed();
        if waited < max_latency {
            return Ok(Some(max_latency - waited));
        }
        if self.leased || self.jobs.is_none() {
            // The caller holds the buffer: checked again shortly.
            return Ok(Some(Duration::from_millis(1)));
        }
        let whole = self.filled / self.epoch_bytes * self.epoch_bytes;
        let tail = self.filled - whole;
        if tail > 0 {
            // The partial epoch moves to a free buffer of its own.
            let Some(mut next) = self
                .free_staging
                .try_take()
                .map_err(|_| self.pipeline_gone())?
            else {
                return Ok(Some(Duration::from_millis(1)));
            };
            let buf = self.staging.as_ref().expect("a buffer holds the epochs");
            let copier = buf.copier();
            copier(&mut next[..tail], &buf[whole..self.filled]);
            let full = self.staging.replace(next).expect("a buffer in hand");
            self.send(full, whole)?;
            self.filled = tail;
        } else {
            self.submit(whole)?;
        }
        Ok(None)
    }

    /// Hands the buffer in hand on with its first `valid` bytes.
    pub fn submit(&mut self, valid: usize) -> Result<()> {
        let buf = self.staging.take().expect("a buffer is in hand");
        self.send(buf, valid)?;
        self.filled = 0;
        Ok(())
    }

    fn send(&mut self, buf: StagingBuffer, valid: usize) -> Result<()> {
        let job = Job::Batch {
            first_epoch: self.epoch,
            buf,
            valid,
        };
        self.epoch += valid.div_ceil(self.epoch_bytes) as u64;
        self.whole_since = None;
        let jobs = self.jobs.as_ref().ok_or(Error::Finished)?;
        jobs.send(job).map_err(|_| self.pipeline_gone())
    }

    /// The last partial buffer, then the end of the job queue: what the
    /// flush sends before its `Finish`. Returns the sender for that.
    pub fn close(&mut self) -> Result<Option<SyncSender<Job>>> {
        self.wake_timer = None;
        self.free_staging.stop_growing();
        if self.filled > 0 && self.staging.is_some() {
            self.submit(self.filled)?;
        }
        Ok(self.jobs.take())
    }

    /// Drops the job queue and the timer's wake-up without a flush (the
    /// stream is destroyed).
    pub fn abandon(&mut self) {
        self.jobs = None;
        self.wake_timer = None;
        self.free_staging.stop_growing();
    }

    pub fn is_leased(&self) -> bool {
        self.leased
    }

    fn take_free_buffer(&mut self) -> Result<bool> {
        match self.free_staging.try_take() {
            Ok(Some(buf)) => {
                self.start_buffer(buf);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(free::Gone) => Err(self.pipeline_gone()),
        }
    }

    fn start_buffer(&mut self, buf: StagingBuffer) {
        debug_assert!(self.staging.is_none());
        self.staging = Some(buf);
        self.filled = 0;
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
