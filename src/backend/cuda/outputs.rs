//! The page-locked buffers each batch's shard-major bytes are copied back
//! into. A filled buffer goes on to the delivery thread as it is, shared by
//! the epochs of its batch (no copy on the host), and comes back here when
//! the last of them lets go of it.

use super::driver::{Context, PinnedBuffer};
use crate::error::{Error, Result};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

pub struct OutputPool {
    free: Receiver<PinnedBuffer>,
    home: Sender<PinnedBuffer>,
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
    pub fn new(ctx: &Context, count: usize, bytes: usize) -> Result<OutputPool> {
        let (home, free) = channel();
        for _ in 0..count {
            home.send(PinnedBuffer::recycled(ctx, bytes)?)
                .expect("the receiver is held here");
        }
        Ok(OutputPool { free, home })
    }

    /// A free buffer, waiting while the delivery thread still holds every
    /// one of them (the back-pressure of a slow sink).
    pub fn take(&self) -> Result<PinnedBuffer> {
        match self.free.recv_timeout(TAKE_TIMEOUT) {
            Ok(b) => Ok(b),
            Err(RecvTimeoutError::Timeout) => Err(Error::Internal(format!(
                "no output buffer came back from the delivery thread in {} s: a sink call is stuck",
                TAKE_TIMEOUT.as_secs()
            ))),
            Err(RecvTimeoutError::Disconnected) => unreachable!("the pool holds a sender"),
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
