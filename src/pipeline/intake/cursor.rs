//! One array's place in the write side: the staging buffer it fills, how
//! much of it is written, and where its epochs stand.

use super::frame_metadata::FrameMetadataRows;
use crate::backend::StagingBuffer;
use crate::metadata::frame_metadata::FrameMetadataArray;
use std::time::Instant;

/// What the intake needs to know of each array.
pub struct ArrayIntake {
    /// The staging pool (one per group of arrays that share a backend)
    /// its buffers come from.
    pub lane: usize,
    /// How many of its bytes one staging buffer holds: whole epochs.
    pub buffer_bytes: usize,
    pub epoch_bytes: usize,
    /// One frame's bytes: what a skip counts in.
    pub plane_bytes: usize,
    /// Whether whole epochs of skipped frames go on as epochs without data
    /// (false where a pyramid is reduced from the data).
    pub empty_epochs: bool,
    /// A bounded array's bytes.
    pub capacity: Option<u64>,
    /// Its per-frame metadata array and how many of its rows may wait.
    pub frame_metadata: Option<(FrameMetadataArray, usize)>,
}

pub(super) struct Cursor {
    pub plan: ArrayIntake,
    /// The buffer being filled, and how many bytes it holds.
    pub staging: Option<StagingBuffer>,
    pub filled: usize,
    /// The first epoch of the staging buffer in hand.
    pub epoch: u64,
    pub bytes_in: u64,
    /// When the buffer in hand first held a whole epoch: the clock of the
    /// latency bound.
    pub whole_since: Option<Instant>,
    pub metadata: Option<FrameMetadataRows>,
}

impl Cursor {
    pub fn new(mut plan: ArrayIntake) -> Cursor {
        let metadata = plan
            .frame_metadata
            .take()
            .map(|(array, most)| FrameMetadataRows::new(array, most));
        Cursor {
            metadata,
            plan,
            staging: None,
            filled: 0,
            epoch: 0,
            bytes_in: 0,
            whole_since: None,
        }
    }

    /// How full the buffer in hand gets before it is handed on: as many
    /// whole epochs as the array has handed on before it (at least one),
    /// up to the buffer's size. An array's first batches are one epoch,
    /// one, two, four...: the compressor starts after the first epoch
    /// rather than a whole buffer (a GPU stream of cam-32: 256 MiB copied
    /// in instead of 512 MiB before the GPU has work), and from then on
    /// each batch is in before the one ahead of it is compressed, until
    /// batches reach the buffer's size, which the compressor needs for its
    /// rate.
    pub fn hand_on_bytes(&self) -> usize {
        let whole = (self.plan.buffer_bytes / self.plan.epoch_bytes) as u64;
        self.epoch.clamp(1, whole.max(1)) as usize * self.plan.epoch_bytes
    }

    /// How much of `len` bytes the array still takes; `Err(capacity)` past
    /// the end of a bounded array.
    pub fn room(&self, len: usize) -> Result<usize, u64> {
        match self.plan.capacity {
            Some(cap) => {
                let left = cap - self.bytes_in;
                if left == 0 && len > 0 {
                    return Err(cap);
                }
                Ok(len.min(usize::try_from(left).unwrap_or(usize::MAX)))
            }
            None => Ok(len),
        }
    }

    /// Whether the buffer in hand is due to be handed on: full, or holding
    /// the end of a bounded array.
    pub fn is_due(&self) -> bool {
        self.filled == self.hand_on_bytes() || Some(self.bytes_in) == self.plan.capacity
    }

    pub fn at_end(&self) -> bool {
        Some(self.bytes_in) == self.plan.capacity
    }
}
