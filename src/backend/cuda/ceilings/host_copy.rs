//! The write path's host-side ceilings: the stream's frames copied into
//! page-locked memory as `tz_write` copies them, alone and followed by the
//! copy to the device.

use super::{guarded, Timings};
use crate::backend::cuda::driver::{self, Context, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::error::{Error, Result};

/// How the host-copy ceiling copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostCopy {
    /// `memcpy` (`copy_from_slice`).
    Memcpy,
    /// Non-temporal stores, as the write path copies into pinned staging.
    Streaming,
}

/// A copy from `src` into `dst`, of equal lengths.
type CopyFn = fn(&mut [u8], &[u8]);

/// The copy threads and the copy function of `how`.
fn copier(threads: usize, how: HostCopy) -> Result<(rayon::ThreadPool, CopyFn)> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Internal(format!("starting copy threads: {e}")))?;
    let copy: CopyFn = match how {
        HostCopy::Memcpy => <[u8]>::copy_from_slice,
        HostCopy::Streaming => crate::backend::cuda::copy_streaming,
    };
    Ok((pool, copy))
}

/// Times copying `bytes` of ordinary (pageable) frames into page-locked
/// memory the way the write path fills a staging buffer: one frame after
/// another (`frame(i)`, cycling as the stream does), each split over
/// `threads` threads. One untimed fill, then `reps` timed ones (host wall
/// clock: no GPU work is involved).
pub fn host_to_pinned<'a>(
    device: u32,
    bytes: usize,
    frame: &dyn Fn(u64) -> &'a [u8],
    threads: usize,
    how: HostCopy,
    reps: usize,
) -> Result<Timings> {
    let frame_bytes = frame(0).len();
    if bytes == 0 || frame_bytes == 0 || reps == 0 || threads == 0 {
        return Err(Error::InvalidArgument(
            "the host-copy ceiling needs bytes, frames, threads and at least one run".into(),
        ));
    }
    let (pool, copy) = copier(threads, how)?;
    guarded("the host-copy ceiling", || {
        driver::driver_present().map_err(Error::BackendUnavailable)?;
        let ctx = Context::new(device)?;
        let mut host = PinnedBuffer::new(&ctx, bytes)?;
        let mut fill = |next: &mut u64| {
            for dst in host.as_mut_slice().chunks_mut(frame_bytes) {
                let src = frame(*next);
                crate::memory::parallel_copy(&pool, dst, &src[..dst.len()], copy);
                *next += 1;
            }
        };
        let mut next = 0;
        fill(&mut next);
        let mut seconds = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = std::time::Instant::now();
            fill(&mut next);
            seconds.push(t.elapsed().as_secs_f64());
        }
        Ok(Timings {
            seconds,
            bytes: bytes as u64,
        })
    })
}

/// The page-locked ring of [`host_copy_then_h2d`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    /// How the frames are copied into it.
    pub how: HostCopy,
    /// Its size: whole frames, at least two.
    pub bytes: usize,
    /// Whether each frame also comes back from the device into page-locked
    /// memory of the run's size once it is there, as a stream without
    /// compression sends its bytes back.
    pub copy_back: bool,
}

/// Times the write path's two host-side steps together, as a stream
/// through `tz_write` runs them: the frames copied into page-locked memory
/// (one frame after another, each split over `threads` threads, as in
/// [`host_to_pinned`]) and each frame sent on to the device
/// (`cuMemcpyHtoDAsync`) as soon as it is in. The page-locked memory is a
/// ring of `ring.bytes` (whole frames): a frame's place is written again
/// once its copy to the device has finished. One untimed round, then
/// `reps` timed ones of `bytes` each (host wall clock, from the first copy
/// until the last transfer has finished). With a ring as large as the
/// stream's staging, every byte passes through host memory as the stream
/// moves it; a ring small enough to stay in the processor's last-level
/// cache shows what reading the frames back from the cache saves.
pub fn host_copy_then_h2d<'a>(
    device: u32,
    bytes: usize,
    frame: &dyn Fn(u64) -> &'a [u8],
    threads: usize,
    ring: Ring,
    reps: usize,
) -> Result<Timings> {
    let frame_bytes = frame(0).len();
    let slots = ring.bytes / frame_bytes.max(1);
    if bytes < frame_bytes || frame_bytes == 0 || reps == 0 || threads == 0 || slots < 2 {
        return Err(Error::InvalidArgument(
            "the copy-and-H2D ceiling needs two frames of ring, a frame, threads and a run".into(),
        ));
    }
    let (pool, copy) = copier(threads, ring.how)?;
    let frames = bytes / frame_bytes;
    guarded("the copy-and-H2D ceiling", || {
        driver::driver_present().map_err(Error::BackendUnavailable)?;
        let ctx = Context::new(device)?;
        let (up, down) = (Stream::new()?, Stream::new()?);
        let mut staging = PinnedBuffer::new(&ctx, slots * frame_bytes)?;
        let mut back = match ring.copy_back {
            true => Some(PinnedBuffer::new(&ctx, frames * frame_bytes)?),
            false => None,
        };
        let dev = DeviceBuffer::new(frames * frame_bytes, "the copy-and-H2D ceiling")?;
        let sent: Vec<Event> = (0..slots).map(|_| Event::new()).collect::<Result<_>>()?;
        let stage = "copy-and-H2D ceiling";
        let mut next = 0u64;
        let mut round = || -> Result<f64> {
            let t = std::time::Instant::now();
            for i in 0..frames {
                let slot = i % slots;
                // Each round ends with every transfer done: a place waits
                // only for its transfer earlier in the same round.
                if i >= slots {
                    sent[slot].sync(stage)?;
                }
                let at = slot * frame_bytes;
                let dst = &mut staging.as_mut_slice()[at..at + frame_bytes];
                crate::memory::parallel_copy(&pool, dst, frame(next), copy);
                next += 1;
                dev.upload_at_async(i * frame_bytes, dst, &up, stage)?;
                sent[slot].record(&up, stage)?;
                if let Some(back) = &mut back {
                    down.wait(&sent[slot], stage)?;
                    let out = &mut back.as_mut_slice()[i * frame_bytes..(i + 1) * frame_bytes];
                    dev.download_at_async(i * frame_bytes, out, &down, stage)?;
                }
            }
            up.sync(stage)?;
            down.sync(stage)?;
            Ok(t.elapsed().as_secs_f64())
        };
        let timed = round().and_then(|_| (0..reps).map(|_| round()).collect::<Result<Vec<_>>>());
        if timed.is_err() {
            // Nothing is freed while a transfer may still read or write it.
            let _ = (up.sync(stage), down.sync(stage));
        }
        let seconds = timed?;
        Ok(Timings {
            seconds,
            bytes: (frames * frame_bytes) as u64,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_fail_before_touching_a_gpu() {
        let frame = [7u8; 64];
        let f = |_: u64| &frame[..];
        let ring = |bytes| Ring {
            how: HostCopy::Memcpy,
            bytes,
            copy_back: true,
        };
        let one_frame_ring = host_copy_then_h2d(0, 1 << 10, &f, 2, ring(64), 1);
        assert!(matches!(one_frame_ring, Err(Error::InvalidArgument(_))));
        let no_runs = host_copy_then_h2d(0, 1 << 10, &f, 2, ring(256), 0);
        assert!(matches!(no_runs, Err(Error::InvalidArgument(_))));
        let no_threads = host_to_pinned(0, 1 << 10, &f, 0, HostCopy::Streaming, 1);
        assert!(matches!(no_threads, Err(Error::InvalidArgument(_))));
    }
}
