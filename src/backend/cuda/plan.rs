//! The GPU backend's memory plan: what a stream of a configuration
//! allocates (level 0's backend and, with a pyramid, level 1's), the batch
//! shape under a `device_bytes` cap, and the check against the device's
//! free memory before anything is allocated.

use super::driver::gpu_err;
use super::sizes::Sizes;
use super::{codec, probe, pyramid};
use crate::config::Validated;
use crate::error::{Error, Result};
use crate::memory::MemoryPlan;

/// The GPU backend's plan for `v` (its GPU staging plan applied, under
/// its `device_bytes` cap).
pub fn plan(v: &Validated) -> Result<MemoryPlan> {
    probe(v).map_err(Error::BackendUnavailable)?;
    stream_plan(&gpu_plan(v)?)
}

/// Level 0's backend and, with a pyramid, the backend that compresses
/// level 1 ([`level1_lane`]).
fn stream_plan(v: &Validated) -> Result<MemoryPlan> {
    let mut plan = backend_plan(v)?;
    if let Some((_, more)) = level1_lane(v)? {
        plan.device_bytes += more.device_bytes;
        plan.pinned_bytes += more.pinned_bytes;
        plan.host_bytes += more.host_bytes;
    }
    Ok(plan)
}

/// The configuration and plan of the backend that compresses pyramid
/// level 1 of `v` ([`pyramid::lane_config`]), unless `v` has no pyramid
/// or a `device_bytes` cap leaves no room for it beside level 0's
/// batches (its nvCOMP temp buffer alone takes about a gigabyte): level 1
/// is then compressed on the host's threads rather than level 0's
/// batches made smaller.
pub(super) fn level1_lane(v: &Validated) -> Result<Option<(Validated, MemoryPlan)>> {
    let Some(lane) = pyramid::lane_config(v) else {
        return Ok(None);
    };
    let plan = backend_plan(&lane)?;
    if let Some(cap) = v.config.device_bytes {
        if backend_plan(v)?.device_bytes + plan.device_bytes > cap {
            return Ok(None);
        }
    }
    Ok(Some((lane, plan)))
}

/// Whether a GPU stream of `v` compresses pyramid level 1 on the GPU.
pub fn level1_on_gpu(v: &Validated) -> bool {
    gpu_plan(v)
        .and_then(|p| level1_lane(&p))
        .is_ok_and(|lane| lane.is_some())
}

/// What one [`CudaBackend`] built for `v` allocates.
fn backend_plan(v: &Validated) -> Result<MemoryPlan> {
    let gpu_codec = codec::load(v.config.codec, v.layout.elem_size())?;
    let z = Sizes::new(v, gpu_codec.as_deref())?;
    let (pinned_bytes, host_bytes) = host_bytes(v, &z);
    Ok(MemoryPlan {
        device_bytes: device_bytes(v, &z),
        pinned_bytes,
        host_bytes,
    })
}

/// Device bytes of a stream with batches of `z.epochs` epochs.
fn device_bytes(v: &Validated, z: &Sizes) -> u64 {
    z.device_bytes(v.layout.tiles_per_epoch() as usize)
        + pyramid::device_bytes(v, z.epochs as u64) as u64
}

/// `v` with the GPU's staging plan, its batches made small enough for its
/// `device_bytes` cap (the largest batch that fits, the staging buffers
/// as many as before); refused with the numbers when one epoch per batch
/// does not fit.
pub fn gpu_plan(v: &Validated) -> Result<Validated> {
    let mut v = v.with_gpu_staging()?;
    let Some(cap) = v.config.device_bytes else {
        return Ok(v);
    };
    let need = |v: &Validated| -> Result<u64> { Ok(stream_plan(v)?.device_bytes) };
    let first = need(&v)?;
    if first <= cap {
        return Ok(v);
    }
    // Device memory grows with the batch: the largest batch that fits.
    let (mut lo, mut hi) = (0u64, v.epochs_per_buffer);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        v.epochs_per_buffer = mid;
        if need(&v)? <= cap {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo == 0 {
        v.epochs_per_buffer = 1;
        let smallest = need(&v)?;
        return Err(Error::OutOfMemory(format!(
            "device_bytes is {cap}, but the GPU backend needs {smallest} bytes of device memory \
             for its smallest batch (one epoch of {} bytes, {} tiles; {first} for the default \
             batch): raise device_bytes, or make epochs smaller (tile[0], the frame size)",
            v.layout.epoch_bytes(),
            v.layout.tiles_per_epoch()
        )));
    }
    v.epochs_per_buffer = lo;
    Ok(v)
}

/// Page-locked bytes (staging and the backend's own buffers) and ordinary
/// host bytes (the shard state and the host copy of the permutation and
/// chunk tables) of a GPU stream.
pub(super) fn host_bytes(v: &Validated, z: &Sizes) -> (u64, u64) {
    let staging = v.staging_buffers as u64 * v.epochs_per_buffer * v.layout.epoch_bytes();
    let max_chunk = crate::codec::max_chunk_bytes(v.config.codec, v.layout.tile_bytes()) as u64;
    let assembler = crate::shard::ShardAssembler::memory_bytes(&v.layout, max_chunk);
    // Offsets of the epochs in flight (three), the tables built once (the
    // shard permutation's host copy and the chunk order's rankings among
    // them), and a batch too large for the page-locked output buffers.
    let tables = 3 * (v.layout.shard_major_len() + 1) * 8
        + 2 * z.chunks as u64 * 8
        + v.layout.tiles_per_epoch() * 8
        + super::chunk_order::ChunkOrder::memory_bytes(z.chunks);
    let host = assembler
        .saturating_add(tables)
        .saturating_add(z.fallback_bytes as u64);
    (z.pinned_bytes() + staging, host)
}

/// Refuses a configuration whose buffers do not fit in the device's free
/// memory, before allocating any of them.
pub(super) fn check_fits(z: &Sizes, tiles_per_epoch: usize, pyramid: usize) -> Result<()> {
    let need = z.device_bytes(tiles_per_epoch) + pyramid as u64;
    let (free, total) =
        cudarc::driver::result::mem_get_info().map_err(|e| gpu_err("reading free memory", e))?;
    if need > free as u64 {
        return Err(Error::OutOfMemory(format!(
            "the GPU backend needs {need} bytes of device memory for batches of {} epochs ({} tiles), \
             but {free} of {total} are free; lower staging_bytes or the tile count per epoch",
            z.epochs, z.chunks
        )));
    }
    Ok(())
}
