//! Pyramid level 1 on the device: the planes of the batch just copied in
//! are reduced there, on a stream of the compressor's priority beside the
//! scatter (what writes over them later waits for it)
//! (kernels/downsample.cu, the arithmetic of
//! [`crate::backend::cpu::downsample`]) and only level 1's planes, an
//! eighth of the bytes for a 3-D pyramid, come back to the host, where the
//! levels above are made from them and whence level 1 goes to a GPU
//! backend of its own ([`lane_config`]) to be compressed.

use super::driver::{DeviceBuffer, Event, Stream};
use super::kernels::Kernels;
use crate::backend::Level1Job;
use crate::config::{DType, Method, Validated};
use crate::error::{Error, Result};
use std::ffi::c_void;

/// Dimensions of a plane the kernel takes (`TZ_MAX_INNER`).
const MAX_INNER: usize = 8;

/// `struct tz_reduction` of kernels/downsample.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct Reduction {
    rank: u32,
    dtype: u32,
    method: u32,
    window_planes: u32,
    in_size: [u64; MAX_INNER],
    out_size: [u64; MAX_INNER],
    downsample: [u32; MAX_INNER],
    in_plane_elems: u64,
    out_plane_elems: u64,
    out_planes: u64,
}

/// Level 1's planes of a batch, on the device.
pub struct Level1 {
    d_out: DeviceBuffer,
    /// The reduction and the copy back: off the input stream, where they
    /// would hold up the scatter, and at the compressor's priority, so
    /// that the previous batch's compression does not starve them.
    stream: Stream,
    reduced: Event,
    /// The planes and bytes of the batch reduced last, until fetched.
    pending: Option<(usize, usize)>,
}

/// Device bytes level 1 of a batch of `epochs` epochs takes (0 without a
/// pyramid).
pub fn device_bytes(v: &Validated, epochs: u64) -> usize {
    if v.image.levels.len() < 2 {
        return 0;
    }
    let planes = epochs * v.layout.epoch_planes();
    let out_planes = if v.image.axes[0].downsample {
        planes.div_ceil(2)
    } else {
        planes
    };
    (out_planes * v.image.levels[1].plane_bytes()) as usize
}

/// The configuration of the GPU backend that compresses pyramid level 1 of
/// `v` (a stream planned for the GPU), or `None` without a pyramid. Level 1
/// holds an eighth of level 0's bytes in a 3-D pyramid, a quarter in a 2-D
/// one: on the host's threads its compression would compete with the
/// copies that feed level 0, so it shares level 0's GPU instead. Its
/// batches hold what one batch of level 0 makes of it; it takes no
/// staging (its input is the pyramid's own buffer) and no share of a
/// `device_bytes` cap of its own (the stream's plan counts it).
pub fn lane_config(v: &Validated) -> Option<Validated> {
    let levels = &v.image.levels;
    let level1 = levels.get(1)?;
    let planes0 = v.epochs_per_buffer * v.layout.epoch_planes();
    let planes1 = if v.image.axes[0].downsample {
        planes0.div_ceil(2)
    } else {
        planes0
    };
    let mut lane = v.clone();
    lane.layout = level1.clone();
    lane.image.levels = vec![level1.clone()];
    lane.staging_buffers = 0;
    lane.epochs_per_buffer = planes1.div_ceil(level1.epoch_planes().max(1)).max(1);
    lane.config.device_bytes = None;
    Some(lane)
}

impl Level1 {
    pub fn new(v: &Validated, epochs: u64) -> Result<Option<Level1>> {
        let bytes = device_bytes(v, epochs);
        if bytes == 0 {
            return Ok(None);
        }
        Ok(Some(Level1 {
            d_out: DeviceBuffer::new(bytes, "the pyramid's level 1")?,
            stream: Stream::new_high_priority()?,
            reduced: Event::new()?,
            pending: None,
        }))
    }

    /// Enqueues, once `copied_in` has completed, the reduction of the
    /// first `job.planes` planes of `input` (on the device) by
    /// `job.reduction`, for [`Level1::fetch`]; what writes over `input`
    /// next must wait for [`Level1::reduced`].
    pub fn enqueue(
        &mut self,
        kernels: &Kernels,
        input: &DeviceBuffer,
        copied_in: &Event,
        job: Level1Job<'_>,
    ) -> Result<()> {
        self.pending = None;
        let r = job.reduction;
        let rank = r.inner.len();
        if rank > MAX_INNER {
            return Err(Error::Internal(format!(
                "the pyramid kernel takes planes of at most {MAX_INNER} dimensions"
            )));
        }
        let out_inner = r.out_inner();
        let window_planes = if job.pairs { 2 } else { 1 };
        let mut p = Reduction {
            rank: rank as u32,
            dtype: DType::ALL.iter().position(|&d| d == r.dtype).unwrap_or(0) as u32,
            method: match r.method {
                Method::Mean => 0,
                Method::Min => 1,
                Method::Max => 2,
                Method::Median => 3,
                Method::Decimate => 4,
            },
            window_planes,
            in_size: [1; MAX_INNER],
            out_size: [1; MAX_INNER],
            downsample: [0; MAX_INNER],
            in_plane_elems: r.inner.iter().product(),
            out_plane_elems: out_inner.iter().product(),
            out_planes: (job.planes / window_planes as usize) as u64,
        };
        p.in_size[..rank].copy_from_slice(&r.inner);
        p.out_size[..rank].copy_from_slice(&out_inner);
        for (flag, &ds) in p.downsample.iter_mut().zip(&r.downsample) {
            *flag = ds as u32;
        }
        let bytes = (p.out_planes * p.out_plane_elems) as usize * r.dtype.size();
        let in_bytes = job.planes as u64 * p.in_plane_elems * r.dtype.size() as u64;
        if bytes > self.d_out.bytes || in_bytes > input.bytes as u64 {
            return Err(Error::Internal(format!(
                "level 1 of a batch takes {bytes} bytes from {in_bytes}, {} and {} are there",
                self.d_out.bytes, input.bytes
            )));
        }
        let total = p.out_planes * p.out_plane_elems;
        let grid = total.div_ceil(256).clamp(1, 1 << 20) as u32;
        let stream = &self.stream;
        stream.wait(copied_in, "pyramid level 1")?;
        let (mut in_ptr, mut out_ptr) = (input.ptr, self.d_out.ptr);
        // SAFETY: the parameters match tz_downsample(const void*, void*,
        // tz_reduction); the input holds `planes` planes and the output
        // the reduced ones (both checked above).
        unsafe {
            kernels.downsample.launch(
                grid,
                256,
                stream,
                &mut [
                    &mut in_ptr as *mut _ as *mut c_void,
                    &mut out_ptr as *mut _ as *mut c_void,
                    &mut p as *mut _ as *mut c_void,
                ],
                "pyramid level 1",
            )?;
        }
        self.reduced.record(stream, "pyramid level 1")?;
        self.pending = Some((job.planes, bytes));
        Ok(())
    }

    /// Waits for the reduction and copy enqueued last, if any.
    pub fn sync(&self, stage: &'static str) -> Result<()> {
        self.stream.sync(stage)
    }

    /// The event after the reduction enqueued last, until it is fetched.
    pub fn reduced(&self) -> Option<&Event> {
        self.pending.map(|_| &self.reduced)
    }

    /// Copies the level 1 enqueued last into `out` and waits for it, when
    /// it was reduced from `planes` planes (`Ok(false)` otherwise: the
    /// caller reduces on the host).
    pub fn fetch(&mut self, planes: usize, out: &mut [u8]) -> Result<bool> {
        let Some((reduced_planes, bytes)) = self.pending.take() else {
            return Ok(false);
        };
        if reduced_planes != planes {
            return Ok(false);
        }
        if bytes > out.len() {
            return Err(Error::Internal(format!(
                "level 1 of a batch takes {bytes} bytes, {} are there",
                out.len()
            )));
        }
        let s = &self.stream;
        self.d_out
            .download_async(&mut out[..bytes], s, "pyramid level 1")?;
        s.sync("pyramid level 1")?;
        Ok(true)
    }
}
