//! The page-locked buffers each batch's shard-major bytes are copied back
//! into. A filled buffer goes on to the delivery thread as it is, shared by
//! the epochs of its batch (no copy on the host), and comes back here when
//! the last of them lets go of it.

use super::driver::{Context, PinnedAllocator, PinnedBuffer};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct OutputPool {
    /// The bytes of each buffer.
    bytes: usize,
    free: Receiver<PinnedBuffer>,
    home: Sender<PinnedBuffer>,
    /// Why the buffers allocated in the background did not all come.
    failed: Arc<Mutex<Option<Error>>>,
    allocating: Option<JoinHandle<()>>,
}

/// A buffer out of the pool; dropping it sends it home.
struct Lease {
    buffer: Option<PinnedBuffer>,
    home: Sender<PinnedBuffer>,
}

impl AsRef<[u8]> for Lease {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref().map_or(&[], |b| b.as_slice())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            // With the pool gone the buffer is simply freed.
            let _ = self.home.send(b);
        }
    }
}

/// How long `take` waits before it calls the wait a failure: the delivery
/// thread releases every buffer it is given unless a sink call hangs.
const TAKE_TIMEOUT: Duration = Duration::from_secs(600);

impl OutputPool {
    /// A pool of `count` buffers of `bytes`, allocated on a thread of
    /// their own: the first batch needs one only when it is compressed, and
    /// a stream's start should not wait for them.
    pub fn new(ctx: &Context, count: usize, bytes: usize) -> Result<OutputPool> {
        let (home, free) = channel();
        let failed = Arc::new(Mutex::new(None));
        let alloc = PinnedAllocator::new(ctx)?;
        let (to, why) = (home.clone(), failed.clone());
        let allocating = std::thread::Builder::new()
            .name("tz-output-alloc".into())
            .spawn(move || {
                for _ in 0..count {
                    match alloc.recycled(bytes) {
                        Ok(b) => {
                            if to.send(b).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            *why.lock() = Some(e);
                            return;
                        }
                    }
                }
            })
            .map_err(|e| Error::Internal(format!("starting thread tz-output-alloc: {e}")))?;
        Ok(OutputPool {
            bytes,
            free,
            home,
            failed,
            allocating: Some(allocating),
        })
    }

    /// The bytes of each buffer.
    pub fn buffer_bytes(&self) -> usize {
        self.bytes
    }

    /// Waits until every buffer of the pool is allocated (or failed to be).
    pub fn wait_allocated(&mut self) {
        if let Some(t) = self.allocating.take() {
            let _ = t.join();
        }
    }

    /// A free buffer, waiting while the delivery thread still holds every
    /// one of them (the back-pressure of a slow sink) or while they are
    /// being allocated.
    pub fn take(&self) -> Result<PinnedBuffer> {
        let deadline = Instant::now() + TAKE_TIMEOUT;
        loop {
            match self.free.recv_timeout(Duration::from_millis(100)) {
                Ok(b) => return Ok(b),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the pool holds a sender"),
            }
            if let Some(e) = self.failed.lock().take() {
                return Err(e);
            }
            if Instant::now() >= deadline {
                return Err(Error::Internal(format!(
                    "no output buffer came back from the delivery thread in {} s: a sink call is stuck",
                    TAKE_TIMEOUT.as_secs()
                )));
            }
        }
    }

    /// `buffer`, filled, to be shared by the epochs of its batch.
    pub fn share(&self, buffer: PinnedBuffer) -> Arc<dyn AsRef<[u8]> + Send + Sync> {
        Arc::new(Lease {
            buffer: Some(buffer),
            home: self.home.clone(),
        })
    }
}

impl Drop for OutputPool {
    /// The allocating thread ends before the pool: every buffer it makes
    /// is then in the pool (and freed, or kept for the next stream, with it).
    fn drop(&mut self) {
        self.wait_allocated();
    }
}
