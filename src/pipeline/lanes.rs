//! Lanes: the arrays of a stream that share one backend. Arrays of the same
//! layout (shape, tiles, shards, element size, storage order) and codec
//! compute the same way, so one backend, with its worker threads or its
//! device pools and compressor, serves them all; each lane has one pool
//! of staging buffers.
//!
//! Staging of a lane of several arrays: every array may hold a partial
//! epoch in a buffer of its own while the others write (a time-lapse
//! visits every position before the next time point), so a lane holds at
//! least one buffer per array and two more, each of one epoch or more,
//! within `staging_bytes` where that allows; past it the budget is raised.

use crate::backend::{self, BackendKind};
use crate::config::{Plan, Validated};
use crate::error::Result;
use crate::memory::MemoryPlan;
use crate::metadata::frame_metadata::FrameMetadataArray;
use crate::pipeline::intake::rows_held;
use crate::shard::{ShardAssembler, EXTRA_DESCRIPTION_BYTES};

/// How the arrays of a stream fall into lanes.
pub struct Lanes {
    /// Each array's lane.
    pub lane_of: Vec<usize>,
    /// Each lane's first array (whose configuration plans the backend).
    pub first: Vec<usize>,
}

impl Lanes {
    pub fn of(plan: &Plan) -> Lanes {
        let mut lane_of = Vec::with_capacity(plan.arrays.len());
        let mut first: Vec<usize> = Vec::new();
        for (a, v) in plan.arrays.iter().enumerate() {
            match first.iter().position(|&f| same_work(&plan.arrays[f], v)) {
                Some(l) => lane_of.push(l),
                None => {
                    lane_of.push(first.len());
                    first.push(a);
                }
            }
        }
        Lanes { lane_of, first }
    }

    /// How many arrays lane `lane` serves.
    pub fn members(&self, lane: usize) -> usize {
        self.lane_of.iter().filter(|&&l| l == lane).count()
    }
}

/// Whether two arrays' epochs compress the same way.
fn same_work(a: &Validated, b: &Validated) -> bool {
    a.layout == b.layout && a.config.codec == b.config.codec && a.config.dtype == b.config.dtype
}

/// A lane's staging: epochs per buffer and the most buffers, for a lane of
/// `members` arrays planned by `v` (its backend's own plan).
pub fn lane_staging(v: &Validated, members: usize) -> (u64, usize) {
    if members <= 1 {
        return (v.epochs_per_buffer, v.staging_buffers);
    }
    let budget_epochs = v.staging_buffers as u64 * v.epochs_per_buffer;
    let want = members as u64 + 2;
    let per_buffer = (budget_epochs / want).clamp(1, v.epochs_per_buffer.max(1));
    let buffers = (budget_epochs / per_buffer).max(want);
    (per_buffer, usize::try_from(buffers).unwrap_or(usize::MAX))
}

/// How many of a lane's staging buffers ([`lane_staging`]) hold what one
/// buffer of a lone array does (its backend's batch): one for a lane of one
/// array; for a lane of many, whose buffers are smaller, as many as the
/// compute thread gathers into one batch. A writer that waits keeps the
/// pipeline busy with two such batches, not two buffers (see
/// `intake/free.rs`).
pub fn lane_batch_buffers(v: &Validated, members: usize) -> usize {
    let (per_buffer, _) = lane_staging(v, members);
    let batch = v.epochs_per_buffer.div_ceil(per_buffer.max(1)).max(1);
    usize::try_from(batch).unwrap_or(usize::MAX)
}

/// Of a lane's staging buffers ([`lane_staging`]), how many fit in its
/// backend's staging budget: the lane grows past them only while its
/// arrays hold so many buffers with partial epochs that the rest cannot
/// keep the pipeline going (see `intake/free.rs`).
pub fn lane_budget_buffers(v: &Validated, members: usize) -> usize {
    let (per_buffer, buffers) = lane_staging(v, members);
    let budget_epochs = v.staging_buffers as u64 * v.epochs_per_buffer;
    let within = usize::try_from(budget_epochs / per_buffer.max(1)).unwrap_or(usize::MAX);
    within.clamp(1, buffers)
}

/// Host bytes of the rows of per-frame metadata array `v` may hold at once
/// (0 without metadata): at most a staging buffer's rows and two more.
pub fn frame_metadata_bytes(v: &Validated) -> u64 {
    let Some(m) = FrameMetadataArray::of(v) else {
        return 0;
    };
    let buffer_frames = v.epochs_per_buffer.saturating_mul(v.layout.epoch_planes());
    (rows_held(&m, buffer_frames) as u64).saturating_mul(m.chunk_bytes() as u64)
}

/// Host bytes of the delivery thread's batch of shard rows (see
/// [`crate::shard::RowBatch`]): the largest row of any array and level, and what the
/// batch holds beyond its first row.
pub fn delivery_batch_bytes(plan: &Plan) -> u64 {
    let levels = plan.arrays.iter().flat_map(|v| &v.image.levels);
    let largest_row = levels.map(ShardAssembler::row_description_bytes).max();
    (largest_row.unwrap_or(0)).saturating_add(EXTRA_DESCRIPTION_BYTES as u64)
}

/// Host staging bytes of a lane beyond what its backend's plan counts.
pub fn extra_staging_bytes(v: &Validated, members: usize) -> u64 {
    let (per_buffer, buffers) = lane_staging(v, members);
    let epoch = v.layout.epoch_bytes();
    let lane = (buffers as u64).saturating_mul(per_buffer.saturating_mul(epoch));
    let planned = (v.staging_buffers as u64).saturating_mul(v.epochs_per_buffer * epoch);
    lane.saturating_sub(planned)
}

/// The memory a stream of `plan` would take, and the backend it would run
/// on, without creating it: each lane's backend as planned for its first
/// array, the lanes' extra staging, and every other array's shard state
/// and pyramid.
pub fn estimate(plan: &Plan) -> Result<(BackendKind, MemoryPlan)> {
    let lanes = Lanes::of(plan);
    let mut total = MemoryPlan::default();
    let mut kind: Option<BackendKind> = None;
    for (l, &first) in lanes.first.iter().enumerate() {
        let mut v = plan.arrays[first].clone();
        if let Some(k) = kind {
            v.config.backend = k.as_choice();
        }
        let (k, p) = backend::estimate(&v)?;
        kind.get_or_insert(k);
        let members = lanes.members(l);
        total.device_bytes = total.device_bytes.saturating_add(p.device_bytes);
        total.pinned_bytes = total.pinned_bytes.saturating_add(p.pinned_bytes);
        total.host_bytes = total.host_bytes.saturating_add(p.host_bytes);
        // Staging is page-locked where a GPU backend allocates it.
        let extra = extra_staging_bytes(&v, members);
        match k {
            BackendKind::Gpu => total.pinned_bytes = total.pinned_bytes.saturating_add(extra),
            BackendKind::Cpu => total.host_bytes = total.host_bytes.saturating_add(extra),
        }
    }
    for v in &plan.arrays {
        total.host_bytes = total.host_bytes.saturating_add(frame_metadata_bytes(v));
    }
    total.host_bytes = total.host_bytes.saturating_add(delivery_batch_bytes(plan));
    if let Some(store) = plan.shared().config.store.as_ref() {
        let buffers = crate::sink::folder_store_buffer_bytes(store);
        total.host_bytes = total.host_bytes.saturating_add(buffers);
    }
    if plan.arrays.len() > 1 {
        for (a, v) in plan.arrays.iter().enumerate() {
            if lanes.first.contains(&a) {
                continue;
            }
            let chunk = crate::codec::max_chunk_bytes(v.config.codec, v.layout.tile_bytes());
            let shards: u64 = v
                .image
                .levels
                .iter()
                .map(|l| ShardAssembler::memory_bytes(l, chunk as u64))
                .sum();
            let pyramid = crate::backend::cpu::pyramid_host_bytes(v, false);
            total.host_bytes = total
                .host_bytes
                .saturating_add(shards)
                .saturating_add(pyramid);
        }
    }
    let kind = kind.expect("a stream has an array");
    Ok((kind, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StreamConfig;

    /// An array of 256 x 256 uint16 frames in tiles of 32^3 (4 MiB
    /// epochs) on the CPU backend.
    fn small_frames() -> Validated {
        let json = r#"{"dtype": "uint16", "backend": "cpu", "dimensions": [
            {"name": "t", "size": 0, "tile": 32, "tiles_per_shard": 1},
            {"name": "y", "size": 256, "tile": 32, "tiles_per_shard": 8},
            {"name": "x", "size": 256, "tile": 32, "tiles_per_shard": 8}]}"#;
        let plan = StreamConfig::from_json(json).unwrap().validate().unwrap();
        plan.arrays.into_iter().next().unwrap()
    }

    #[test]
    fn a_batch_of_a_lane_holds_what_a_lone_arrays_buffer_does() {
        let v = small_frames();
        assert!(
            v.epochs_per_buffer > 1,
            "the case needs buffers of several epochs"
        );
        assert_eq!(lane_batch_buffers(&v, 1), 1);
        for members in [2, 5, 40, 96, 1000] {
            let (per_buffer, _) = lane_staging(&v, members);
            let batch = lane_batch_buffers(&v, members) as u64;
            // The fewest of the lane's buffers that hold a lone array's.
            assert!(
                batch * per_buffer >= v.epochs_per_buffer,
                "{members} arrays"
            );
            assert!(
                (batch - 1) * per_buffer < v.epochs_per_buffer,
                "{members} arrays"
            );
        }
    }
}
