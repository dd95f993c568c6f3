//! How a stream is put together: what it allocates before its store
//! exists ([`Parts::prepare`]), then its threads, channels and intake
//! ([`Parts::start`]).

use super::delivery::DeliveryThread;
use super::intake::{FreeBuffers, Intake, IntakeParts};
use super::latency;
use super::pyramid::Pyramid;
use super::shared::Shared;
use super::workers::ComputeThread;
use super::Stream;
use crate::backend::{self, Backend, BackendKind, StagingAllocator, StagingBuffer};
use crate::config::Validated;
use crate::error::{Error, Result};
use crate::shard::ShardAssembler;
use crate::sink::{ShardSink, SharedAttributes, StreamHooks};
use parking_lot::Mutex;
use std::sync::mpsc;
use std::sync::Arc;

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

/// Everything a stream allocates before its store exists: the backend,
/// the staging buffers and the shard state.
pub(super) struct Parts {
    pub(super) v: Validated,
    backend: Box<dyn Backend>,
    selection: backend::Selection,
    /// The first staging buffer; the others come from `more_staging`
    /// on a thread of their own once the stream runs.
    staging: StagingBuffer,
    more_staging: Option<StagingAllocator>,
    /// One per pyramid level.
    assemblers: Vec<ShardAssembler>,
    pyramid: Option<Pyramid>,
}

impl Parts {
    pub(super) fn prepare(mut v: Validated) -> Result<Parts> {
        let (backend, mut selection) = backend::select(&mut v)?;
        let buffer_bytes = (v.layout.epoch_bytes() * v.epochs_per_buffer) as usize;
        let max_chunk = crate::codec::max_chunk_bytes(v.config.codec, v.layout.tile_bytes());
        let assemblers = v
            .image
            .levels
            .iter()
            .enumerate()
            .map(|(k, l)| {
                ShardAssembler::new(l, v.config.index_location, max_chunk as u64)
                    .map(|a| a.for_level(k as u32))
            })
            .collect::<Result<_>>()?;
        let pyramid = Pyramid::new(&v, backend::level1_backend(&v, &mut selection)?)?;
        let mut alloc = backend.staging_allocator()?;
        let staging = alloc(buffer_bytes)?;
        let more_staging = (v.staging_buffers > 1).then_some(alloc);
        Ok(Parts {
            v,
            backend,
            selection,
            staging,
            more_staging,
            assemblers,
            pyramid,
        })
    }

    /// Starts the pipeline's threads on `sink`.
    pub(super) fn start(self, mut sink: Box<dyn ShardSink>) -> Result<Stream> {
        let Parts {
            v,
            backend,
            selection,
            staging,
            more_staging,
            assemblers,
            pyramid,
        } = self;
        let copy_threads = copy_threads(selection.kind);
        let attributes = SharedAttributes::new(v.image.attributes.clone());
        let shared = Arc::new(Shared::new(selection, attributes));
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
        let buffer_bytes = (v.layout.epoch_bytes() * v.epochs_per_buffer) as usize;
        let n = v.staging_buffers;
        let (free_tx, free_rx) = mpsc::channel();
        free_tx.send(staging).expect("receiver alive");
        // The other buffers as the writer outruns the hand-off (see
        // intake/free.rs), allocated on a thread of their own.
        let (grow_tx, grow_rx) = mpsc::channel::<()>();
        let allocate_more = more_staging.map(|mut alloc| {
            let free = free_tx.clone();
            move || {
                // A buffer that cannot be allocated now leaves the stream
                // with fewer (the memory was checked at create): slower
                // when the input outruns the backend, never wrong.
                for () in grow_rx {
                    let Ok(buf) = alloc(buffer_bytes) else { return };
                    if free.send(buf).is_err() {
                        return; // the stream is gone
                    }
                }
            }
        });
        let free_staging = FreeBuffers::new(free_rx, Some(grow_tx), n - 1);
        // Every staging buffer plus the finish message fits: sends never block.
        let (job_tx, job_rx) = mpsc::sync_channel(n + 1);
        let (del_tx, del_rx) = mpsc::sync_channel(1);
        let (spare_tx, spare_rx) = mpsc::channel();
        let (retired_tx, retired_rx) = mpsc::channel();
        let compute = ComputeThread {
            retired: retired_tx,
            shared: shared.clone(),
            backend,
            layout: v.layout.clone(),
            jobs: job_rx,
            free_staging: free_tx,
            deliveries: del_tx,
            spare_epochs: Arc::new(parking_lot::Mutex::new(spare_rx)),
            pyramid,
        };
        let (retired_sink_tx, retired_sink_rx) = mpsc::channel();
        let delivery = DeliveryThread {
            shared: shared.clone(),
            layouts: v.image.levels.clone(),
            assemblers,
            sink,
            deliveries: del_rx,
            spare_epochs: spare_tx,
            retired: retired_sink_tx,
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
        if let Some(f) = allocate_more {
            threads.push(spawn("tz-staging", Box::new(f))?);
        }
        let copy_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(copy_threads)
            .thread_name(|i| format!("tz-copy-{i}"))
            .build()
            .map_err(|e| Error::Internal(format!("starting copy threads: {e}")))?;
        let (wake_tx, wake_rx) = mpsc::channel();
        let intake = Arc::new(Mutex::new(Intake::new(IntakeParts {
            shared: shared.clone(),
            buffer_bytes,
            epoch_bytes: v.layout.epoch_bytes() as usize,
            capacity: v.layout.array_bytes(),
            free_staging,
            jobs: job_tx,
            wake_timer: Some(wake_tx),
        })));
        let timer = latency::start(&intake, v.max_latency, wake_rx)?;
        Ok(Stream {
            _retired: retired_rx,
            _retired_sink: retired_sink_rx,
            copy_pool,
            config: v,
            shared,
            intake,
            threads,
            timer: Some(timer),
            finished: None,
        })
    }
}
