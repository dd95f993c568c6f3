//! Pyramid levels 1.. of a stream. Each level is a lane: the planes of the
//! level below are reduced into its planes (on the host, with the
//! arithmetic of [`crate::backend::cpu::downsample`]), gathered into whole
//! epochs of its own layout and compressed on the CPU backend's worker
//! threads, shared by every lane; level 1, the largest, may instead go to a
//! backend of its own (a GPU stream's: see [`Pyramid::new`]). Level 0 runs
//! on the stream's own backend; its planes come straight from the staging
//! buffers.
//!
//! Along dimension 0, a downsampled level takes two planes of the level
//! below per plane: an unpaired plane waits in the lane (the carry) for
//! the next batch, and at the end of the stream it is reduced alone (or,
//! in a bounded array that ends early, with the fill planes after it).

use crate::backend::cpu::downsample::PlaneReduction;
use crate::backend::cpu::{worker_pool, CpuBackend};
use crate::backend::{Backend, BatchJob};
use crate::config::Validated;
use crate::error::Result;
use crate::layout::Layout;
use crate::memory::try_reserve;
use crate::metrics::{Metrics, Stage};
use crate::shard::CompressedEpoch;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Levels 1.. of a stream's pyramid.
pub struct Pyramid {
    lanes: Vec<Lane>,
    pool: Arc<rayon::ThreadPool>,
}

struct Lane {
    level: u32,
    layout: Layout,
    backend: Box<dyn Backend>,
    /// From the level below's planes (input order) to one of this level's.
    reduction: PlaneReduction,
    /// Two planes of the level below per plane of this one.
    pairs: bool,
    /// The level below's extent along dimension 0 when bounded.
    below_extent: Option<u64>,
    /// Planes of the level below taken so far.
    below_seen: u64,
    /// An unpaired plane of the level below (room for two planes).
    carry: Vec<u8>,
    carried: bool,
    /// This level's planes not yet in a compressed epoch (input order).
    pending: Vec<u8>,
    /// Where the planes added by the current step begin in `pending`.
    fresh: usize,
    next_epoch: u64,
}

/// What compressing needs from the compute thread.
pub struct Outlet<'a> {
    pub cancel: &'a AtomicBool,
    pub metrics: &'a Metrics,
    pub spare: &'a mut dyn FnMut() -> CompressedEpoch,
    /// Takes a finished epoch of level `level` (false: stop).
    pub done: &'a mut dyn FnMut(u32, CompressedEpoch) -> bool,
}

impl Pyramid {
    /// The lanes of `v`'s levels 1.., or `None` without a pyramid. Level 1
    /// is compressed by `level1` when given (in batches of at most its
    /// [`Backend::max_batch_epochs`]), else on the worker threads of
    /// `pool`, which every pyramid of a stream shares (made here when
    /// `None`).
    pub fn new(
        v: &Validated,
        level1: Option<Box<dyn Backend>>,
        pool: &mut Option<Arc<rayon::ThreadPool>>,
    ) -> Result<Option<Pyramid>> {
        let levels = &v.image.levels;
        if levels.len() < 2 {
            return Ok(None);
        }
        let pool = match pool {
            Some(p) => p.clone(),
            None => pool.insert(worker_pool(v.threads)?).clone(),
        };
        let downsample = v.image.downsample();
        let mut lanes = Vec::with_capacity(levels.len() - 1);
        let mut level1 = level1;
        for (k, layout) in levels.iter().enumerate().skip(1) {
            let below = &levels[k - 1];
            // The level below's sizes in input order (dimension 1..).
            let inner: Vec<u64> = input_sizes(below)[1..].to_vec();
            let reduction = PlaneReduction {
                dtype: v.config.dtype,
                method: v.image.method,
                inner,
                downsample: downsample[1..].to_vec(),
            };
            let plane = reduction.src_plane_bytes();
            let mut carry = Vec::new();
            try_reserve(&mut carry, 2 * plane, "a pyramid level's carried plane")?;
            lanes.push(Lane {
                level: k as u32,
                layout: layout.clone(),
                backend: match level1.take() {
                    Some(b) => b,
                    None => Box::new(CpuBackend::with_pool(v, layout, pool.clone())?),
                },
                reduction,
                pairs: downsample[0],
                below_extent: (!below.is_unbounded()).then(|| below.dims()[0].size),
                below_seen: 0,
                carry,
                carried: false,
                pending: Vec::new(),
                fresh: 0,
                next_epoch: 0,
            });
        }
        Ok(Some(Pyramid { lanes, pool }))
    }

    /// Takes whole planes of level 0 (input order) and reduces them into
    /// every level; [`Pyramid::compress_whole`] then compresses the epochs
    /// that completed (the planes' buffer is free in between).
    pub fn reduce(&mut self, planes0: &[u8], metrics: &Metrics) -> Result<()> {
        self.advance(planes0, false, metrics)
    }

    /// Compresses every whole epoch waiting on any level.
    pub fn compress_whole(&mut self, out: &mut Outlet<'_>) -> Result<()> {
        self.compress(false, out)
    }

    /// The end of the stream: reduces what the lanes still hold, then
    /// compresses every level's last, partial epoch (padded with the fill
    /// value).
    pub fn finish(&mut self, out: &mut Outlet<'_>) -> Result<()> {
        self.advance(&[], true, out.metrics)?;
        self.compress(true, out)
    }

    /// The levels' backends, for the stream to hold until it goes (as it
    /// holds level 0's: what a GPU backend allocated stays in the stream's
    /// plan from create to destroy).
    pub fn into_backends(self) -> Vec<Box<dyn Backend>> {
        self.lanes.into_iter().map(|l| l.backend).collect()
    }

    /// Level 1's reduction (from level 0's planes), and whether it pairs
    /// planes along dimension 0: what a backend that reduces level 1
    /// itself needs ([`crate::backend::Level1Job`]).
    pub fn first_reduction(&self) -> (PlaneReduction, bool) {
        let lane = &self.lanes[0];
        (lane.reduction.clone(), lane.pairs)
    }

    /// Takes level 1's planes reduced elsewhere from `below` planes of
    /// level 0 (no plane may be waiting for its pair: the backend reduced
    /// whole pairs from the start), and reduces the levels above. Returns
    /// a buffer for the next batch's level 1: when no plane of level 1 was
    /// waiting, `planes1` itself becomes the lane's planes, without a copy.
    pub fn take_level1(
        &mut self,
        mut planes1: Vec<u8>,
        below: u64,
        metrics: &Metrics,
    ) -> Result<Vec<u8>> {
        let lane = &mut self.lanes[0];
        if lane.carried {
            return Err(crate::error::Error::Internal(
                "level 1 came reduced while a plane of level 0 waited for its pair".into(),
            ));
        }
        lane.below_seen += below;
        lane.fresh = lane.pending.len();
        if lane.pending.is_empty() {
            std::mem::swap(&mut lane.pending, &mut planes1);
        } else {
            let at = lane.pending.len();
            grow(&mut lane.pending, at + planes1.len())?;
            lane.pending[at..].copy_from_slice(&planes1);
        }
        planes1.clear();
        self.advance_from(1, None, false, metrics)?;
        Ok(planes1)
    }

    fn advance(&mut self, planes0: &[u8], ending: bool, metrics: &Metrics) -> Result<()> {
        self.advance_from(0, Some(planes0), ending, metrics)
    }

    /// Feeds lane `first` with `src` (planes of the level below it; `None`:
    /// the planes the lane below just took), and each lane above with the
    /// planes the one below just made.
    fn advance_from(
        &mut self,
        first: usize,
        src: Option<&[u8]>,
        ending: bool,
        metrics: &Metrics,
    ) -> Result<()> {
        let t = std::time::Instant::now();
        for k in first..self.lanes.len() {
            let (below, rest) = self.lanes.split_at_mut(k);
            let lane = &mut rest[0];
            lane.fresh = lane.pending.len();
            let src = match (src, below.last()) {
                (Some(s), _) if k == first => s,
                (_, Some(b)) => &b.pending[b.fresh..],
                (_, None) => &[],
            };
            lane.feed(src, &self.pool)?;
            if ending {
                lane.flush_carry(&self.pool)?;
            }
        }
        metrics.add_time(Stage::Scatter, t.elapsed());
        Ok(())
    }

    fn compress(&mut self, ending: bool, out: &mut Outlet<'_>) -> Result<()> {
        for lane in &mut self.lanes {
            let epoch_bytes = lane.layout.epoch_bytes() as usize;
            if ending && lane.pending.len() % epoch_bytes != 0 {
                let whole = lane.pending.len().div_ceil(epoch_bytes) * epoch_bytes;
                grow(&mut lane.pending, whole)?;
            }
            let epochs = lane.pending.len() / epoch_bytes;
            let level = lane.level;
            let done = &mut *out.done;
            let mut done = |e: CompressedEpoch| done(level, e);
            let batch = lane.backend.max_batch_epochs().max(1);
            let mut from = 0;
            while from < epochs {
                let n = batch.min(epochs - from);
                let job = BatchJob {
                    first_epoch: lane.next_epoch,
                    input: &[&lane.pending[from * epoch_bytes..(from + n) * epoch_bytes]],
                    epochs: n,
                    cancel: out.cancel,
                    metrics: out.metrics,
                    level1: None,
                };
                lane.backend.compress_batch(job, out.spare, &mut done)?;
                lane.next_epoch += n as u64;
                from += n;
            }
            if ending {
                lane.backend.drain(out.metrics, out.spare, &mut done)?;
            } else if lane.backend.holds_batch() {
                // A slow stream's level is not held until its next batch.
                lane.backend
                    .collect_ready(out.metrics, out.spare, &mut done)?;
            }
            if epochs > 0 {
                lane.pending.drain(..epochs * epoch_bytes);
                lane.fresh = 0;
            }
        }
        Ok(())
    }
}

impl Lane {
    /// Reduces whole planes of the level below into `pending`.
    fn feed(&mut self, src: &[u8], pool: &rayon::ThreadPool) -> Result<()> {
        let plane = self.reduction.src_plane_bytes();
        if plane == 0 || src.is_empty() {
            return Ok(());
        }
        let n = src.len() / plane;
        self.below_seen += n as u64;
        let mut i = 0;
        if !self.pairs {
            while i < n {
                self.emit(&src[i * plane..(i + 1) * plane], pool)?;
                i += 1;
            }
            return Ok(());
        }
        if self.carried {
            self.carry.extend_from_slice(&src[..plane]);
            let carry = std::mem::take(&mut self.carry);
            let r = self.emit(&carry, pool);
            self.carry = carry;
            self.carry.clear();
            self.carried = false;
            r?;
            i = 1;
        }
        while i + 1 < n {
            self.emit(&src[i * plane..(i + 2) * plane], pool)?;
            i += 2;
        }
        if i < n {
            self.carry.clear();
            self.carry
                .extend_from_slice(&src[i * plane..(i + 1) * plane]);
            self.carried = true;
        }
        Ok(())
    }

    /// At the end of the stream: the unpaired plane is reduced alone, or
    /// with a fill plane where the bounded level below goes on past it.
    fn flush_carry(&mut self, pool: &rayon::ThreadPool) -> Result<()> {
        if !self.carried {
            return Ok(());
        }
        let plane = self.reduction.src_plane_bytes();
        if self.below_extent.is_some_and(|e| self.below_seen < e) {
            self.carry.resize(2 * plane, 0);
        }
        let carry = std::mem::take(&mut self.carry);
        let r = self.emit(&carry, pool);
        self.carry = carry;
        self.carried = false;
        r
    }

    /// Reduces the window `src` (one or two planes) into a new plane at
    /// the end of `pending`.
    fn emit(&mut self, src: &[u8], pool: &rayon::ThreadPool) -> Result<()> {
        let at = self.pending.len();
        grow(&mut self.pending, at + self.reduction.out_plane_bytes())?;
        self.reduction.reduce(src, &mut self.pending[at..], pool);
        Ok(())
    }
}

/// Grows `buf` to `len` bytes (zeros), failing cleanly when memory is short.
fn grow(buf: &mut Vec<u8>, len: usize) -> Result<()> {
    // Amortised: planes are added one at a time.
    buf.try_reserve(len.saturating_sub(buf.len()))
        .map_err(|_| {
            crate::error::Error::OutOfMemory(format!(
                "a pyramid level's planes: {len} bytes could not be allocated"
            ))
        })?;
    buf.resize(len, 0);
    Ok(())
}

/// A level's sizes in input order (its layout is in storage order).
fn input_sizes(layout: &Layout) -> Vec<u64> {
    let mut sizes = vec![0; layout.rank()];
    for (d, &a) in layout.source_order().iter().enumerate() {
        sizes[a] = layout.dims()[d].size;
    }
    sizes
}

#[cfg(test)]
mod tests;
