//! The device pools a batch works in, rotated between batches.
//!
//! A batch needs its frames as copied in (the landing pool), its tiles,
//! the codec's filtered tiles (blosc's shuffle, where the scatter did not
//! apply it), the compressor's chunks
//! and the shard-major bytes copied out. Those lifetimes overlap little,
//! so a few pools of one size serve every role: the compressor writes its
//! chunks over the frames (scattered by then), the aggregation writes over
//! the tiles (compressed by then). Each pool carries the event after
//! which its last reader is done; a stream that takes a pool waits for it.
//!
//! With one pool more than a batch holds at once, the next batch is copied
//! in while this one compresses; with two more, it is scattered (and
//! filtered) then too. The second costs a pool and gains little where the
//! compressor is slow (zstd, ~75 ms a batch against ~1 ms of scatter):
//! see [`pool_count`].

use super::driver::{DeviceBuffer, Event, Stream};
use crate::error::{Error, Result};
use std::collections::VecDeque;

/// Which pool holds what for one batch (indices into [`Pools`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    /// The frames as copied in; also the pyramid's level-1 source.
    pub land: usize,
    /// The scattered tiles.
    pub tiles: usize,
    /// The codec's filtered tiles (the landing pool, free once scattered).
    pub filtered: Option<usize>,
    /// The compressor's chunks: the landing pool, or a pool of their own
    /// when a filter writes over the landing pool.
    pub chunks: Option<usize>,
    /// The shard-major bytes: over the tiles when compressed (free once
    /// compressed and framed), else over the landing pool.
    pub aggregated: usize,
}

impl Roles {
    /// Every pool of the batch but the aggregated one, once each (free
    /// once the aggregation has read them).
    pub fn before_aggregate(&self) -> Vec<usize> {
        let mut pools = Vec::with_capacity(3);
        for p in [Some(self.land), Some(self.tiles), self.chunks]
            .into_iter()
            .flatten()
        {
            if p != self.aggregated && !pools.contains(&p) {
                pools.push(p);
            }
        }
        pools
    }
}

/// How a batch of a codec uses pools.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub compressed: bool,
    pub filtered: bool,
}

impl Usage {
    /// Pools one batch holds at once.
    pub fn per_batch(self) -> usize {
        if self.compressed && self.filtered {
            3
        } else {
            2
        }
    }
}

/// Pools for a stream: a batch's own, one for the next batch's copy in,
/// and (unless `lean`) one for its scatter. Without compression the next
/// batch's scatter waits only for this one's aggregation, right behind
/// its own scatter: one more pool is enough.
pub fn pool_count(usage: Usage, lean: bool) -> usize {
    let overlap = if lean || !usage.compressed { 1 } else { 2 };
    usage.per_batch() + overlap
}

pub struct Pools {
    buffers: Vec<DeviceBuffer>,
    /// Recorded after each pool's last reader; `None` before first use.
    released: Vec<Option<Event>>,
    /// Pools not held by a batch, in the order they were given back.
    free: VecDeque<usize>,
    usage: Usage,
}

impl Pools {
    pub fn new(count: usize, bytes: usize, usage: Usage) -> Result<Pools> {
        let mut buffers = Vec::with_capacity(count);
        for _ in 0..count {
            buffers.push(DeviceBuffer::new(bytes, "a batch pool")?);
        }
        Ok(Pools {
            buffers,
            released: (0..count).map(|_| None).collect(),
            free: (0..count).collect(),
            usage,
        })
    }

    pub fn ptr(&self, pool: usize) -> u64 {
        self.buffers[pool].ptr
    }

    pub fn buffer(&self, pool: usize) -> &DeviceBuffer {
        &self.buffers[pool]
    }

    pub fn count(&self) -> usize {
        self.buffers.len()
    }

    /// A free pool for work enqueued next on `stream`, which waits until
    /// the pool's last reader is done: the first one already done, else
    /// the first given back. Take a batch's landing pool, enqueue its copy
    /// in, then take its tile pool: the copy then never waits for the
    /// tiles' last reader.
    pub fn take(&mut self, stream: &Stream) -> Result<usize> {
        let mut pick = 0;
        for (i, &p) in self.free.iter().enumerate() {
            let done = match &self.released[p] {
                None => true,
                Some(e) => e.is_complete("taking a batch pool")?,
            };
            if done {
                pick = i;
                break;
            }
        }
        // A batch gives its pools back before the one after next takes
        // its own, so one is always free; an error rather than a panic all
        // the same.
        let pool = self.free.remove(pick).ok_or_else(|| {
            Error::Internal(format!("no free batch pool of {}", self.buffers.len()))
        })?;
        if let Some(e) = &self.released[pool] {
            stream.wait(e, "taking a batch pool")?;
        }
        Ok(pool)
    }

    /// The roles of a batch whose frames land in pool `land` and whose
    /// tiles go to pool `tiles` (both taken); with a filter, the chunks'
    /// own pool comes from [`Pools::take_chunks`].
    pub fn roles(&self, land: usize, tiles: usize) -> Roles {
        let u = self.usage;
        Roles {
            land,
            tiles,
            filtered: (u.compressed && u.filtered).then_some(land),
            chunks: (u.compressed && !u.filtered).then_some(land),
            aggregated: if u.compressed { tiles } else { land },
        }
    }

    /// With a filter over the landing pool, the chunks' own pool, for
    /// `compute` (the stream that compresses).
    pub fn take_chunks(&mut self, roles: &mut Roles, compute: &Stream) -> Result<()> {
        if roles.filtered.is_some() {
            roles.chunks = Some(self.take(compute)?);
        }
        Ok(())
    }

    /// Gives `pool` back once the work enqueued on `stream` so far is done.
    pub fn give_back(&mut self, pool: usize, stream: &Stream) -> Result<()> {
        let event = match self.released[pool].take() {
            Some(e) => e,
            None => Event::new()?,
        };
        event.record(stream, "giving back a batch pool")?;
        self.released[pool] = Some(event);
        self.free.push_back(pool);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_before_aggregate_lists_each_pool_once() {
        let r = Roles {
            land: 0,
            tiles: 1,
            filtered: None,
            chunks: Some(0),
            aggregated: 1,
        };
        assert_eq!(r.before_aggregate(), vec![0]);
        let r = Roles {
            land: 3,
            tiles: 1,
            filtered: Some(3),
            chunks: Some(2),
            aggregated: 1,
        };
        assert_eq!(r.before_aggregate(), vec![3, 2]);
        let r = Roles {
            land: 2,
            tiles: 0,
            filtered: None,
            chunks: None,
            aggregated: 2,
        };
        assert_eq!(r.before_aggregate(), vec![0]);
    }

    #[test]
    fn pool_counts() {
        let plain = Usage {
            compressed: true,
            filtered: false,
        };
        let filter = Usage {
            compressed: true,
            filtered: true,
        };
        let none = Usage {
            compressed: false,
            filtered: false,
        };
        assert_eq!(pool_count(plain, true), 3);
        assert_eq!(pool_count(plain, false), 4);
        assert_eq!(pool_count(filter, true), 4);
        assert_eq!(pool_count(filter, false), 5);
        assert_eq!(pool_count(none, false), 3);
    }
}
