//! How a stream is put together: what it allocates before its store
//! exists ([`Parts::prepare`]), then its threads, channels and intake
//! ([`Parts::start`]).

use super::delivery::DeliveryThread;
use super::intake::{free, rows_held, ArrayIntake, FreeBuffers, Intake, IntakeParts};
use super::lanes::{
    delivery_batch_bytes, extra_staging_bytes, frame_metadata_bytes, lane_batch_buffers,
    lane_budget_buffers, lane_staging, Lanes,
};
use super::latency;
use super::pyramid::Pyramid;
use super::shared::{Shared, SKIPS_QUEUED};
use super::workers::ComputeThread;
use super::Stream;
use crate::backend::{self, Backend, BackendKind, StagingAllocator, StagingBuffer};
use crate::config::Plan;
use crate::error::{Error, Result};
use crate::metadata::frame_metadata::FrameMetadataArray;
use crate::shard::{RowBatch, ShardAssembler};
use crate::sink::{ShardSink, SharedAttributes, StreamHooks};
use parking_lot::Mutex;
use std::sync::mpsc;
use std::sync::Arc;

/// How long create waits for a GPU stream's second staging buffer, past
/// which the stream starts without it: several times what one takes (512
/// MiB 0.1-0.3 s, 1 GiB up to 0.6 s on an H100 machine). Where the
/// allocation fails, the allocator's thread ends and the wait with it: the
/// stream starts with the buffer it has.
const STAGING_AT_CREATE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Threads that share a large write's copy into staging memory. Feeding a
/// GPU takes all of the host's memory bandwidth the cores can draw, and the
/// writing thread sleeps while they copy, so the GPU backend gets one per
/// core (at most 16); the CPU backend's compressor needs the cores, so it
/// gets half of them (at most 8).
pub fn copy_threads(kind: BackendKind) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match kind {
        BackendKind::Gpu => cores.clamp(1, 16),
        BackendKind::Cpu => (cores / 2).clamp(1, 8),
    }
}

/// One lane's backend and staging (see [`super::lanes`]).
struct LaneParts {
    backend: Box<dyn Backend>,
    buffer_bytes: usize,
    /// The most staging buffers the lane takes.
    buffers: usize,
    /// Of those, how many fit in the staging budget.
    budget_buffers: usize,
    /// How many make one batch of its backend.
    batch_buffers: usize,
    /// The first staging buffer; the others come from `more_staging`
    /// on a thread of their own once the stream runs.
    staging: StagingBuffer,
    more_staging: Option<StagingAllocator>,
}

/// Everything a stream allocates before its store exists: the backends,
/// the first staging buffers and the shard state.
pub(super) struct Parts {
    pub(super) plan: Plan,
    selection: backend::Selection,
    lanes: Vec<LaneParts>,
    lane_of: Vec<usize>,
    /// Per array, one per pyramid level.
    assemblers: Vec<Vec<ShardAssembler>>,
    pyramids: Vec<Option<Pyramid>>,
}

impl Parts {
    pub(super) fn prepare(mut plan: Plan) -> Result<Parts> {
        let lanes_of = Lanes::of(&plan);
        let mut selection: Option<backend::Selection> = None;
        let mut lanes = Vec::with_capacity(lanes_of.first.len());
        let mut extra_host = delivery_batch_bytes(&plan);
        for (l, &first) in lanes_of.first.iter().enumerate() {
            let v = &mut plan.arrays[first];
            if let Some(chosen) = &selection {
                // Every lane runs where the first one does.
                v.config.backend = chosen.kind.as_choice();
            }
            let (backend, chosen) = backend::select(v)?;
            selection.get_or_insert(chosen);
            let members = lanes_of.members(l);
            let (per_buffer, buffers) = lane_staging(v, members);
            extra_host = extra_host.saturating_add(extra_staging_bytes(v, members));
            let buffer_bytes = (v.layout.epoch_bytes() * per_buffer) as usize;
            let mut alloc = backend.staging_allocator()?;
            let staging = alloc(buffer_bytes)?;
            lanes.push(LaneParts {
                backend,
                buffer_bytes,
                buffers,
                budget_buffers: lane_budget_buffers(v, members),
                batch_buffers: lane_batch_buffers(v, members),
                staging,
                more_staging: (buffers > 1).then_some(alloc),
            });
        }
        let mut selection = selection.expect("a stream has an array");
        let single = plan.arrays.len() == 1;
        let mut assemblers = Vec::with_capacity(plan.arrays.len());
        let mut pyramids = Vec::with_capacity(plan.arrays.len());
        let mut pool = None;
        for (a, v) in plan.arrays.iter().enumerate() {
            extra_host = extra_host.saturating_add(frame_metadata_bytes(v));
            let max_chunk = crate::codec::max_chunk_bytes(v.config.codec, v.layout.tile_bytes());
            let levels = v
                .image
                .levels
                .iter()
                .enumerate()
                .map(|(k, l)| {
                    ShardAssembler::new(l, v.config.index_location, max_chunk as u64)
                        .map(|s| s.for_level(k as u32).for_array(a as u32))
                })
                .collect::<Result<Vec<_>>>()?;
            if !single {
                // The first array of a lane has its backend's memory
                // checked; every other array's shard state is checked here.
                extra_host = extra_host.saturating_add(
                    v.image
                        .levels
                        .iter()
                        .map(|l| ShardAssembler::memory_bytes(l, max_chunk as u64))
                        .sum::<u64>(),
                );
            }
            assemblers.push(levels);
            // Level 1 of a stream of several arrays is reduced and
            // compressed on the host: a GPU backend per array's level 1
            // would take the device memory the arrays share.
            let level1 = if single {
                backend::level1_backend(v, &mut selection)?
            } else {
                let mut host = backend::Selection {
                    kind: BackendKind::Cpu,
                    reason: String::new(),
                };
                backend::level1_backend(v, &mut host)?
            };
            pyramids.push(Pyramid::new(v, level1, &mut pool)?);
        }
        crate::memory::check_available(extra_host, "this stream's other arrays")?;
        Ok(Parts {
            plan,
            selection,
            lanes,
            lane_of: lanes_of.lane_of,
            assemblers,
            pyramids,
        })
    }

    /// Starts the pipeline's threads on `sink`.
    pub(super) fn start(self, mut sink: Box<dyn ShardSink>) -> Result<Stream> {
        let Parts {
            plan,
            selection,
            lanes,
            lane_of,
            assemblers,
            pyramids,
        } = self;
        let copy_threads = copy_threads(selection.kind);
        let page_locked_staging = selection.kind == BackendKind::Gpu;
        let v0 = plan.shared();
        let attributes = SharedAttributes::new(v0.image.attributes.clone());
        let keys = plan.arrays.iter().map(|v| v.key.clone()).collect();
        let shared = Arc::new(Shared::new(selection, attributes, keys));
        let (poisoned, noted) = (Arc::downgrade(&shared), Arc::downgrade(&shared));
        sink.attach(&StreamHooks {
            poison: Arc::new(move |e| {
                if let Some(s) = poisoned.upgrade() {
                    s.poison(e)
                }
            }),
            note: Arc::new(move |note| {
                if let Some(s) = noted.upgrade() {
                    s.note(note)
                }
            }),
            uploads: shared.metrics.uploads.clone(),
            attributes: shared.attributes.clone(),
        });
        // Staging buffers go back to their lane's pool: the compute
        // thread sends each with its lane.
        let mut backends = Vec::with_capacity(lanes.len());
        let mut free_staging = Vec::with_capacity(lanes.len());
        let mut free_senders = Vec::with_capacity(lanes.len());
        let mut allocators = Vec::new();
        let mut all_buffers = 0;
        let lane_buffer_bytes: Vec<usize> = lanes.iter().map(|l| l.buffer_bytes).collect();
        for lane in lanes {
            let (free_tx, free_rx) = mpsc::channel();
            shared.metrics.staging_grew(lane.staging.len() as u64);
            free_tx.send(lane.staging).expect("receiver alive");
            // The other buffers as the writer outruns the hand-off (see
            // intake/free.rs), allocated on a thread of their own.
            let (growth, orders) = free::growth();
            let buffer_bytes = lane.buffer_bytes;
            if let Some(mut alloc) = lane.more_staging {
                let free = free_tx.clone();
                // Weak: the allocator's thread keeps no stream alive.
                let counted = Arc::downgrade(&shared);
                allocators.push(move || {
                    // A buffer that cannot be allocated now leaves the
                    // stream with fewer (the memory was checked at
                    // create): slower when the input outruns the backend,
                    // never wrong.
                    for () in orders.asked.iter() {
                        let Ok(buf) = alloc(buffer_bytes) else { return };
                        if let Some(shared) = counted.upgrade() {
                            shared.metrics.staging_grew(buf.len() as u64);
                        }
                        orders.made_one();
                        if free.send(buf).is_err() {
                            return; // the stream is gone
                        }
                    }
                });
            }
            free_staging.push(
                FreeBuffers::new(free_rx, Some(growth), lane.buffers - 1)
                    .with_budget(lane.budget_buffers)
                    .with_batch_buffers(lane.batch_buffers)
                    .with_metrics(shared.clone()),
            );
            free_senders.push(free_tx);
            backends.push(lane.backend);
            all_buffers += lane.buffers;
        }
        // Every staging buffer, the queued runs of skipped epochs and the
        // finish message fit: sends never block.
        // Each batch and each run of skipped epochs may bring a job of
        // metadata rows with it.
        let (job_tx, job_rx) = mpsc::sync_channel(2 * (all_buffers + SKIPS_QUEUED) + 1);
        let has_pyramid: Vec<bool> = pyramids.iter().map(Option::is_some).collect();
        // The sink's queue takes what a backend hands on at once.
        let queued = backends.iter().map(|b| b.epochs_handed_together());
        let queued = queued.max().unwrap_or(1).max(1);
        let (del_tx, del_rx) = mpsc::sync_channel(queued);
        let (spare_tx, spare_rx) = mpsc::channel();
        let (retired_tx, retired_rx) = mpsc::channel();
        let lanes_n = backends.len();
        let compute = ComputeThread {
            retired: retired_tx,
            shared: shared.clone(),
            backends,
            lane_of: lane_of.clone(),
            layouts: plan.arrays.iter().map(|v| v.layout.clone()).collect(),
            owed: vec![Default::default(); lanes_n],
            peeked: None,
            jobs: job_rx,
            free_staging: free_senders,
            deliveries: del_tx,
            spare_epochs: Arc::new(parking_lot::Mutex::new(spare_rx)),
            has_pyramid: has_pyramid.clone(),
            pyramids,
        };
        let (retired_sink_tx, retired_sink_rx) = mpsc::channel();
        let delivery = DeliveryThread {
            shared: shared.clone(),
            layouts: plan.arrays.iter().map(|v| v.image.levels.clone()).collect(),
            assemblers,
            sink,
            deliveries: del_rx,
            spare_epochs: spare_tx,
            retired: retired_sink_tx,
            frame_metadata: plan
                .arrays
                .iter()
                .map(|v| FrameMetadataArray::of(v).map(|m| (m, 0)))
                .collect(),
            most_at_once: queued,
            waiting: Vec::new(),
            batch: RowBatch::default(),
        };
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| Error::Internal(format!("starting thread {name}: {e}")))
        };
        let mut threads = vec![
            spawn("tz-compute", Box::new(move || compute.run()))?,
            spawn("tz-delivery", Box::new(move || delivery.run()))?,
        ];
        for f in allocators {
            threads.push(spawn("tz-staging", Box::new(f))?);
        }
        if page_locked_staging {
            // Page-locked staging is slow to allocate: the buffer asked
            // for ahead is made while the rest of the stream starts, and
            // is there before the first write (else the first stream of a
            // process waited for it, 0.3-0.4 s of cam-32 on an H100).
            for pool in &mut free_staging {
                pool.wait_until_free(2, STAGING_AT_CREATE_WAIT)
                    .map_err(|_| Error::Internal("the staging allocator ended at create".into()))?;
            }
        }
        let copy_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(copy_threads)
            .thread_name(|i| format!("tz-copy-{i}"))
            .build()
            .map_err(|e| Error::Internal(format!("starting copy threads: {e}")))?;
        let (wake_tx, wake_rx) = mpsc::channel();
        let arrays = plan
            .arrays
            .iter()
            .zip(&lane_of)
            .zip(&has_pyramid)
            .map(|((v, &lane), &pyramid)| ArrayIntake {
                lane,
                buffer_bytes: lane_buffer_bytes[lane],
                epoch_bytes: v.layout.epoch_bytes() as usize,
                plane_bytes: v.layout.plane_bytes() as usize,
                // A pyramid's levels are reduced from the data: skipped
                // epochs go through it as fill-value planes.
                empty_epochs: !pyramid,
                frame_metadata: FrameMetadataArray::of(v).map(|m| {
                    let frames = lane_buffer_bytes[lane] as u64 / v.layout.plane_bytes().max(1);
                    let most = rows_held(&m, frames);
                    (m, most)
                }),
                capacity: v.layout.array_bytes(),
            })
            .collect();
        let intake = Arc::new(Mutex::new(Intake::new(IntakeParts {
            shared: shared.clone(),
            arrays,
            free_staging,
            jobs: job_tx,
            wake_timer: Some(wake_tx),
        })));
        let timer = latency::start(&intake, v0.max_latency, wake_rx)?;
        Ok(Stream {
            _retired: retired_rx,
            _retired_sink: retired_sink_rx,
            copy_pool,
            config: plan.arrays[0].clone(),
            plan,
            shared,
            intake,
            threads,
            timer: Some(timer),
            finished: None,
            stall: None,
        })
    }
}
