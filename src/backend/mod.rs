//! Compute backends: each turns one epoch of row-major input into compressed
//! tiles grouped by shard. The pipeline drives them through [`Backend`] and
//! never needs to know which one runs.

pub mod cpu;
pub mod cuda;

use crate::config::{BackendChoice, Validated};
use crate::error::{Error, Result};
use crate::memory::MemoryPlan;
use crate::metrics::Metrics;
use crate::shard::CompressedEpoch;
use std::sync::atomic::AtomicBool;

/// One epoch's work, as the pipeline hands it to a backend.
pub struct EpochJob<'a> {
    pub epoch: u64,
    /// `layout.epoch_bytes()` of row-major input, padded with the fill value.
    pub input: &'a [u8],
    /// Set when the stream is abandoned: stop early, the result is dropped.
    pub cancel: &'a AtomicBool,
    pub metrics: &'a Metrics,
}

/// A staging buffer's worth of epochs, or several buffers' (the epochs of
/// several arrays that share the backend, gathered into one batch).
pub struct BatchJob<'a> {
    pub first_epoch: u64,
    /// Runs of whole epochs of row-major input, in order, each run's last
    /// epoch padded with the fill value.
    pub input: &'a [&'a [u8]],
    pub epochs: usize,
    pub cancel: &'a AtomicBool,
    pub metrics: &'a Metrics,
    /// Pyramid level 1 of this batch, for a backend that reduces it where
    /// the batch already is (then fetched by [`Backend::fetch_level1`]).
    pub level1: Option<Level1Job<'a>>,
}

impl<'a> BatchJob<'a> {
    /// Each epoch's input, in order.
    pub fn epoch_inputs(&self) -> impl Iterator<Item = &'a [u8]> {
        let bytes: usize = self.input.iter().map(|run| run.len()).sum();
        let epoch_bytes = (bytes / self.epochs.max(1)).max(1);
        let runs: &'a [&'a [u8]] = self.input;
        runs.iter()
            .flat_map(move |run| run.chunks(epoch_bytes))
            .take(self.epochs)
    }
}

/// Pyramid level 1 of a batch: its first `planes` planes reduced by
/// `reduction` (in pairs along dimension 0 with `pairs`).
#[derive(Clone, Copy)]
pub struct Level1Job<'a> {
    pub reduction: &'a cpu::downsample::PlaneReduction,
    pub planes: usize,
    pub pairs: bool,
}

pub trait Backend: Send {
    /// What allocates this backend's staging buffers (page-locked for the
    /// GPU), each starting on a page boundary (a reservation hands it to
    /// DMA engines), on any thread: a stream allocates its first buffer at
    /// create and the others in the background as its writer needs them
    /// (`pipeline/intake/free.rs`).
    fn staging_allocator(&self) -> Result<StagingAllocator> {
        Ok(Box::new(host_staging))
    }

    /// Scatters, compresses and aggregates one epoch into `out`
    /// (shard-major: see [`CompressedEpoch`]).
    fn compress_epoch(&mut self, job: EpochJob<'_>, out: &mut CompressedEpoch) -> Result<()>;

    /// Does a batch of epochs, taking output objects from `spare` and handing
    /// each finished epoch, in order, to `done` (false: stop). By default,
    /// one epoch at a time.
    fn compress_batch(
        &mut self,
        job: BatchJob<'_>,
        spare: &mut dyn FnMut() -> CompressedEpoch,
        done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        for (k, input) in job.epoch_inputs().enumerate() {
            if job.cancel.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            let mut out = spare();
            let epoch = EpochJob {
                epoch: job.first_epoch + k as u64,
                input,
                cancel: job.cancel,
                metrics: job.metrics,
            };
            self.compress_epoch(epoch, &mut out)?;
            job.metrics.add_epoch();
            if !done(out) {
                break;
            }
        }
        Ok(())
    }

    /// Epochs `compress_batch` hands on at once, one after another: the
    /// queue to the sink holds as many, so that handing them on does not
    /// wait for the sink to write the first ones while the backend could
    /// start on the next, and the delivery thread takes as many off it at
    /// once, to hand their rows to the sink together. A backend's memory
    /// plan counts them: a group packed, one queued, one delivered.
    fn epochs_handed_together(&self) -> usize {
        1
    }

    /// The most epochs one `compress_batch` takes (its buffers' size).
    fn max_batch_epochs(&self) -> usize {
        usize::MAX
    }

    /// Pyramid level 1 of the batch just given to `compress_batch`, as its
    /// job's [`Level1Job`] asked (reduced where the input was at hand),
    /// into `out`, when it was reduced from `planes` planes. `Ok(false)`:
    /// not done here; the caller reduces on the host.
    fn fetch_level1(&mut self, _planes: usize, _out: &mut [u8]) -> Result<bool> {
        Ok(false)
    }

    /// Whether `compress_batch` left a batch whose results are still to be
    /// handed on (what `collect_ready` polls for).
    fn holds_batch(&self) -> bool {
        false
    }

    /// Hands on a batch `compress_batch` still holds if its results are
    /// back, without waiting for them: called while no new batch comes, so
    /// that a slow stream's last batch is not held until the next arrives.
    fn collect_ready(
        &mut self,
        _metrics: &Metrics,
        _spare: &mut dyn FnMut() -> CompressedEpoch,
        _done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        Ok(())
    }

    /// Hands on whatever `compress_batch` still holds (a backend that
    /// overlaps batches returns each one's epochs on the next call); called
    /// once at the end of the stream.
    fn drain(
        &mut self,
        _metrics: &Metrics,
        _spare: &mut dyn FnMut() -> CompressedEpoch,
        _done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        Ok(())
    }
}

/// Allocates one staging buffer of the given size, on any thread.
pub type StagingAllocator = Box<dyn FnMut(usize) -> Result<StagingBuffer> + Send>;

/// A staging buffer in ordinary memory, starting on a page boundary.
fn host_staging(bytes: usize) -> Result<StagingBuffer> {
    let total = bytes.saturating_add(PAGE - 1);
    let out_of_memory = || {
        Error::OutOfMemory(format!(
            "a staging buffer of {bytes} bytes could not be allocated; lower staging_bytes"
        ))
    };
    // Every page in at creation (in one call where the system has one), so
    // that the acquisition's writes never wait on the kernel. One kept from
    // an earlier stream has its pages in already; a new one comes zeroed
    // and resident, its pages written once.
    let buf = match crate::memory::take_spare_bytes(total) {
        Some(mut buf) => {
            buf.truncate(total);
            buf.try_reserve_exact(total - buf.len())
                .map_err(|_| out_of_memory())?;
            let spare = buf.spare_capacity_mut();
            crate::platform::fault_in(spare.as_mut_ptr().cast(), spare.len());
            buf.resize(total, 0);
            buf
        }
        None => crate::platform::zeroed_resident_bytes(total).ok_or_else(out_of_memory)?,
    };
    let start = buf.as_ptr().align_offset(PAGE).min(PAGE - 1);
    Ok(StagingBuffer::Host {
        buf,
        start,
        len: bytes,
    })
}

/// Host staging buffers at least this large are filled with streaming
/// stores: larger than the last-level cache of the machines measured.
const STREAMED_HOST_BYTES: usize = 32 << 20;

/// The page size staging buffers align to.
const PAGE: usize = 4096;

/// Host memory the write path copies into: plain for the CPU backend,
/// page-locked for the GPU's DMA.
pub enum StagingBuffer {
    /// `len` bytes from `start`, the first page boundary in `buf`.
    Host {
        buf: Vec<u8>,
        start: usize,
        len: usize,
    },
    Pinned(cuda::PinnedBuffer),
}

impl Drop for StagingBuffer {
    /// An ordinary buffer waits for the process's next stream
    /// ([`crate::memory::give_spare_bytes`]); a page-locked one goes to
    /// its own cache when dropped.
    fn drop(&mut self) {
        if let StagingBuffer::Host { buf, .. } = self {
            crate::memory::give_spare_bytes(std::mem::take(buf));
        }
    }
}

impl StagingBuffer {
    /// How to copy a piece of the acquisition's data in: pinned memory is
    /// only read again by the GPU's copy engine, and a host buffer larger
    /// than the caches is read by the CPU backend's workers only when it is
    /// full, long after its first bytes left the caches; so both copies
    /// bypass the caches (the CPU backend's copy of cam-32 on two cores:
    /// about 0.1 s per GiB against 0.15). A small host buffer may still be
    /// in the caches when its workers read it.
    pub fn copier(&self) -> fn(&mut [u8], &[u8]) {
        match self {
            StagingBuffer::Host { len, .. } if *len < STREAMED_HOST_BYTES => {
                <[u8]>::copy_from_slice
            }
            StagingBuffer::Host { .. } | StagingBuffer::Pinned(_) => cuda::copy_streaming,
        }
    }
}

impl std::ops::Deref for StagingBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            StagingBuffer::Host { buf, start, len } => &buf[*start..*start + *len],
            StagingBuffer::Pinned(p) => p.as_slice(),
        }
    }
}

impl std::ops::DerefMut for StagingBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            StagingBuffer::Host { buf, start, len } => &mut buf[*start..*start + *len],
            StagingBuffer::Pinned(p) => p.as_mut_slice(),
        }
    }
}

/// Which backend runs a stream, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Gpu,
}

impl BackendKind {
    /// The configuration's choice that picks this backend and no other.
    pub fn as_choice(self) -> BackendChoice {
        match self {
            BackendKind::Cpu => BackendChoice::Cpu,
            BackendKind::Gpu => BackendChoice::Gpu,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Gpu => "gpu",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Selection {
    pub kind: BackendKind,
    pub reason: String,
}

/// Picks and builds the backend the configuration asks for. A GPU backend
/// brings its own staging plan, which replaces `v`'s.
pub fn select(v: &mut Validated) -> Result<(Box<dyn Backend>, Selection)> {
    let gpu = |v: &mut Validated| -> Result<cuda::CudaBackend> {
        let planned = cuda::gpu_plan(v)?;
        let b = cuda::CudaBackend::new(&planned)?;
        *v = planned;
        Ok(b)
    };
    let reason = match v.config.backend {
        BackendChoice::Cpu => "backend \"cpu\" requested".to_string(),
        BackendChoice::Gpu => {
            let b = gpu(v).map_err(|e| match e {
                Error::BackendUnavailable(why) => {
                    Error::BackendUnavailable(format!("backend \"gpu\" requested, but {why}"))
                }
                e => e,
            })?;
            let reason = format!("backend \"gpu\" requested: {}", b.device_name);
            return Ok((
                Box::new(b),
                Selection {
                    kind: BackendKind::Gpu,
                    reason,
                },
            ));
        }
        BackendChoice::Auto => match gpu(v) {
            Ok(b) => {
                let reason = format!("auto: {} is usable", b.device_name);
                return Ok((
                    Box::new(b),
                    Selection {
                        kind: BackendKind::Gpu,
                        reason,
                    },
                ));
            }
            Err(e) => format!("auto: no usable GPU ({}); using the CPU", describe(&e)),
        },
    };
    // Checked before anything is allocated: staging pages are touched at
    // once, and the kernel kills a process that overcommits rather than
    // failing the allocation.
    let host = cpu::plan(v)
        .host_bytes
        .saturating_add(cpu::pyramid_host_bytes(v, false));
    crate::memory::check_available(host, "this stream (CPU backend)")?;
    let cpu = cpu::CpuBackend::new(v)?;
    Ok((
        Box::new(cpu),
        Selection {
            kind: BackendKind::Cpu,
            reason,
        },
    ))
}

/// The backend of its own that compresses pyramid level 1 of `v` (a
/// stream planned for `selection.kind`): a GPU stream's, where its plan has
/// one (levels 2.. are an eighth of level 1 or less, and stay on the
/// host's threads); `None`: the host's threads compress level 1 too.
///
/// Where level 1's GPU backend does not fit in what level 0's left free on
/// the device (another process holds the rest), level 1 goes to the host's
/// threads rather than the stream being refused, and `selection.reason`
/// says so. Either way the pyramid's host memory is checked before any of
/// it is allocated.
pub fn level1_backend(
    v: &Validated,
    selection: &mut Selection,
) -> Result<Option<Box<dyn Backend>>> {
    if v.image.levels.len() < 2 {
        return Ok(None);
    }
    let lane = match selection.kind {
        BackendKind::Gpu => match cuda::CudaBackend::for_level1(v) {
            Ok(lane) => lane,
            Err(Error::OutOfMemory(why)) => {
                selection.reason = format!(
                    "{}; pyramid level 1 compressed on the host, its GPU backend does not fit ({why})",
                    selection.reason
                );
                None
            }
            Err(e) => return Err(e),
        },
        BackendKind::Cpu => None,
    };
    crate::memory::check_available(
        cpu::pyramid_host_bytes(v, lane.is_some()),
        "this stream's pyramid levels",
    )?;
    Ok(lane.map(|b| Box::new(b) as Box<dyn Backend>))
}

/// The memory a stream of this configuration would take, and the backend
/// it would run on, without creating it: the same choice as [`select`].
pub fn estimate(v: &Validated) -> Result<(BackendKind, MemoryPlan)> {
    let (kind, mut plan) = estimate_backend(v)?;
    let level1_on_gpu = kind == BackendKind::Gpu && cuda::level1_on_gpu(v);
    plan.host_bytes = plan
        .host_bytes
        .saturating_add(cpu::pyramid_host_bytes(v, level1_on_gpu));
    if v.config.store.as_ref().is_some_and(|s| s.url.is_some()) {
        // Shards copied for upload: at most the budget, or one shard.
        let max_chunk = crate::codec::max_chunk_bytes(v.config.codec, v.layout.tile_bytes());
        let shard = (max_chunk as u64)
            .saturating_mul(v.layout.chunks_per_shard())
            .saturating_add(v.layout.index_bytes() as u64);
        plan.host_bytes += crate::memory::UPLOAD_BUDGET_BYTES.max(shard);
    }
    Ok((kind, plan))
}

fn estimate_backend(v: &Validated) -> Result<(BackendKind, MemoryPlan)> {
    match v.config.backend {
        BackendChoice::Cpu => Ok((BackendKind::Cpu, cpu::plan(v))),
        BackendChoice::Gpu => cuda::plan(v).map(|p| (BackendKind::Gpu, p)),
        BackendChoice::Auto => Ok(match cuda::plan(v) {
            Ok(p) => (BackendKind::Gpu, p),
            Err(_) => (BackendKind::Cpu, cpu::plan(v)),
        }),
    }
}

/// Adds a folder in which the GPU backend looks for nvCOMP
/// (`libnvcomp.so.6`, `.5` or `.so`) before the dynamic loader's search,
/// for every stream created after the call: where a host application knows
/// nvCOMP lies, such as the `nvidia-libnvcomp` wheel of a Python
/// environment. `TZ_NVCOMP_LIBRARY`, when set, still wins. Folders are
/// tried in the order they were added.
pub fn add_nvcomp_search_dir(dir: impl Into<std::path::PathBuf>) {
    nvcomp_sys::add_search_dir(dir);
}

fn describe(e: &Error) -> String {
    match e {
        Error::BackendUnavailable(why) => why.clone(),
        e => e.to_string(),
    }
}
