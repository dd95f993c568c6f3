//! The CPU backend: per tile, gather from the epoch's row-major input and
//! compress, on a pool of worker threads; then group by shard.

use super::{Backend, EpochJob};
use crate::codec::ChunkCompressor;
use crate::config::{Codec, Validated};
use crate::error::{Error, Result};
use crate::layout::{Layout, TileGather};
use crate::pipeline::Stage;
use crate::shard::CompressedEpoch;
use rayon::prelude::*;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

pub struct CpuBackend {
    layout: Layout,
    codec: Codec,
    pool: rayon::ThreadPool,
    /// Gather plan and shard-major position of every pool slot, computed once.
    plans: Vec<(TileGather, u64)>,
    /// One encoded chunk per pool slot, reused from epoch to epoch.
    chunks: Vec<Vec<u8>>,
}

impl CpuBackend {
    pub fn new(v: &Validated) -> Result<CpuBackend> {
        let layout = v.layout.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(v.threads)
            .thread_name(|i| format!("tz-cpu-{i}"))
            .build()
            .map_err(|e| Error::Internal(format!("starting worker threads: {e}")))?;
        let plans = (0..layout.tiles_per_epoch())
            .map(|i| (layout.tile_gather(i), layout.shard_position(i)))
            .collect();
        let chunks = vec![Vec::new(); layout.tiles_per_epoch() as usize];
        Ok(CpuBackend {
            layout,
            codec: v.config.codec,
            pool,
            plans,
            chunks,
        })
    }
}

impl Backend for CpuBackend {
    fn compress_epoch(&mut self, job: EpochJob<'_>, out: &mut CompressedEpoch) -> Result<()> {
        let layout = &self.layout;
        let elem = layout.elem_size();
        let tile_bytes = layout.tile_bytes();
        let codec = self.codec;
        let plans = &self.plans;
        self.pool.install(|| {
            self.chunks.par_iter_mut().enumerate().try_for_each_init(
                || (ChunkCompressor::new(codec), vec![0u8; tile_bytes]),
                |(compressor, tile), (slot, chunk)| -> Result<()> {
                    if job.cancel.load(Relaxed) {
                        return Ok(());
                    }
                    let t0 = Instant::now();
                    gather(&plans[slot].0, job.input, elem, tile);
                    let t1 = Instant::now();
                    let compressor = compressor
                        .as_mut()
                        .map_err(|e| Error::Internal(format!("creating compressor: {e}")))?;
                    compressor
                        .compress(tile, chunk)
                        .map_err(|e| Error::Internal(format!("compressing tile {slot}: {e}")))?;
                    job.metrics.add_time(Stage::Scatter, t1 - t0);
                    job.metrics.add_time(Stage::Compress, t1.elapsed());
                    Ok(())
                },
            )
        })?;
        job.metrics.time(Stage::Aggregate, || {
            aggregate(layout, plans, &self.chunks, out);
        });
        out.epoch = job.epoch;
        Ok(())
    }
}

/// Copies one tile out of the epoch's input; the parts of an edge tile
/// outside the array get the fill value (zero).
fn gather(plan: &TileGather, input: &[u8], elem: usize, tile: &mut [u8]) {
    if plan.is_clipped() {
        tile.fill(0);
    }
    let run = plan.run_len() as usize * elem;
    plan.for_each_run(|src, dst| {
        let (src, dst) = (src as usize * elem, dst as usize * elem);
        tile[dst..dst + run].copy_from_slice(&input[src..src + run]);
    });
}

/// Packs the chunks densely in shard-major order: permute sizes, exclusive
/// scan, gather (sharding.md's three passes).
fn aggregate(
    layout: &Layout,
    plans: &[(TileGather, u64)],
    chunks: &[Vec<u8>],
    out: &mut CompressedEpoch,
) {
    let len = layout.shard_major_len() as usize;
    out.offsets.clear();
    out.offsets.resize(len + 1, 0);
    for ((_, pos), chunk) in plans.iter().zip(chunks) {
        out.offsets[*pos as usize + 1] = chunk.len() as u64;
    }
    for j in 0..len {
        out.offsets[j + 1] += out.offsets[j];
    }
    out.data.clear();
    out.data.resize(out.offsets[len] as usize, 0);
    for ((_, pos), chunk) in plans.iter().zip(chunks) {
        let at = out.offsets[*pos as usize] as usize;
        out.data[at..at + chunk.len()].copy_from_slice(chunk);
    }
}
