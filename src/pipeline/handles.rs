//! What a stream hands its caller besides bytes: a reservation of staging
//! memory, a read-only view of its counters, and `std::io::Write`.

use super::{Shared, Snapshot, Stream};
use crate::backend::BackendKind;
use crate::error::Result;
use crate::pipeline::Lease;
use std::sync::Arc;

/// Free staging memory handed to the caller ([`Stream::reserve`]); it
/// dereferences to the bytes to write.
pub struct Reservation<'a> {
    stream: &'a mut Stream,
    lease: Option<Lease>,
}

impl<'a> Reservation<'a> {
    pub(super) fn new(stream: &'a mut Stream, lease: Option<Lease>) -> Reservation<'a> {
        Reservation { stream, lease }
    }
}

impl Reservation<'_> {
    /// Passes on the first `n` bytes written (at most the reservation's
    /// length).
    pub fn commit(mut self, n: usize) -> Result<()> {
        if self.lease.is_none() && n == 0 {
            return Ok(());
        }
        self.stream.commit(&mut self.lease, n)
    }
}

impl std::ops::Deref for Reservation<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.lease.as_ref().map_or(&[], |l| l.bytes_ref())
    }
}

impl std::ops::DerefMut for Reservation<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.lease {
            Some(l) => l.bytes(),
            None => &mut [],
        }
    }
}

impl Drop for Reservation<'_> {
    /// Without a commit, no byte of the reservation counts.
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.stream.cancel(lease);
        }
    }
}

/// Read-only access to a stream's counters from any thread.
#[derive(Clone)]
pub struct StreamStats(pub(super) Arc<Shared>);

impl StreamStats {
    pub fn snapshot(&self) -> Snapshot {
        self.0.metrics.snapshot()
    }
    pub fn backend(&self) -> (BackendKind, &str) {
        (self.0.selection.kind, &self.0.selection.reason)
    }
}

impl std::io::Write for Stream {
    /// Non-blocking: `Ok(0)` means busy (see [`Stream`]).
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.try_write(buf).map_err(std::io::Error::other)
    }
    /// Data goes out in whole shards; only [`Stream::finish`] completes it.
    fn flush(&mut self) -> std::io::Result<()> {
        self.shared.check().map_err(std::io::Error::other)
    }
}
