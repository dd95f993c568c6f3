//! Thin owning wrappers over the CUDA driver API (through cudarc's raw
//! `result` layer, loaded at run time). All the CUDA pointer handling of
//! the GPU backend lives here: contexts, streams and memory in this file,
//! kernels (`kernel.rs`) and events (`event.rs`) beside it.

use crate::error::Error;
use cudarc::driver::{result, sys};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

mod event;
mod kernel;
mod pinned;
pub use event::Event;
pub use kernel::{Kernel, Module};
pub use pinned::{PinnedAllocator, PinnedBuffer};

/// A CUDA failure in `stage`.
pub fn gpu_err(stage: &'static str, e: impl std::fmt::Display) -> Error {
    Error::Gpu {
        stage,
        message: e.to_string(),
    }
}

/// Checks that the NVIDIA driver library can be loaded, before any cudarc
/// call (cudarc panics when it cannot find it).
pub fn driver_present() -> Result<(), String> {
    // SAFETY: loading the driver library runs its initialisers, which is
    // what any use of CUDA does; the handle is dropped at once.
    let name = crate::platform::CUDA_DRIVER;
    match unsafe { libloading::Library::new(name) } {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("no NVIDIA driver: {name} cannot be loaded ({e})")),
    }
}

/// The primary context of one device, current on the threads that use it.
pub struct Context {
    device: sys::CUdevice,
    ctx: sys::CUcontext,
    pub name: String,
}

// SAFETY: a CUDA context may be made current on any thread; the backend
// binds it before every use.
unsafe impl Send for Context {}

impl Context {
    pub fn new(ordinal: u32) -> Result<Context, Error> {
        result::init().map_err(|e| gpu_err("initialising CUDA", e))?;
        let count = result::device::get_count().map_err(|e| gpu_err("counting devices", e))?;
        if ordinal as i32 >= count {
            return Err(Error::BackendUnavailable(format!(
                "device {ordinal} requested, but {count} CUDA device(s) are present"
            )));
        }
        let device =
            result::device::get(ordinal as i32).map_err(|e| gpu_err("opening the device", e))?;
        // SAFETY: `device` is a valid ordinal's handle; released in Drop.
        let ctx = unsafe { result::primary_ctx::retain(device) }
            .map_err(|e| gpu_err("creating the context", e))?;
        let name = result::device::get_name(device).unwrap_or_else(|_| "unknown GPU".into());
        let c = Context { device, ctx, name };
        c.bind()?;
        Ok(c)
    }

    /// Makes the context current on the calling thread.
    pub fn bind(&self) -> Result<(), Error> {
        // SAFETY: `ctx` is retained for the life of `self`.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| gpu_err("binding the context", e))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `new`; everything allocated in it
        // is freed first (the backend drops its buffers before this).
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}

/// A stream of the current context.
pub struct Stream(pub sys::CUstream);

// SAFETY: streams are usable from any thread with the context current.
unsafe impl Send for Stream {}

impl Stream {
    pub fn new() -> Result<Stream, Error> {
        result::stream::create(result::stream::StreamKind::NonBlocking)
            .map(Stream)
            .map_err(|e| gpu_err("creating a stream", e))
    }

    /// A stream at the highest priority the context offers: the GPU starts
    /// its kernels' blocks ahead of other streams', so that the compressor
    /// (the pipeline's slowest stage) is not slowed down by the copies and
    /// filters running beside it.
    pub fn new_high_priority() -> Result<Stream, Error> {
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: two valid out-pointers; the caller made a context current.
        unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) }
            .result()
            .map_err(|e| gpu_err("reading stream priorities", e))?;
        let mut stream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: a valid out-pointer, flags and a priority in the range.
        unsafe { sys::cuStreamCreateWithPriority(&mut stream, flags, greatest) }
            .result()
            .map_err(|e| gpu_err("creating a stream", e))?;
        Ok(Stream(stream))
    }

    pub fn sync(&self, stage: &'static str) -> Result<(), Error> {
        // SAFETY: a live stream of the current context.
        unsafe { result::stream::synchronize(self.0) }.map_err(|e| gpu_err(stage, e))
    }

    /// Makes later work on this stream wait for `event`'s captured work.
    pub fn wait(&self, event: &Event, stage: &'static str) -> Result<(), Error> {
        // SAFETY: a live stream and event of the current context.
        unsafe {
            result::stream::wait_event(
                self.0,
                event.0,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| gpu_err(stage, e))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once; pending work finishes first.
        unsafe {
            let _ = result::stream::synchronize(self.0);
            let _ = result::stream::destroy(self.0);
        }
    }
}

/// Bytes of device and page-locked memory held by live buffers.
static DEVICE_BYTES: AtomicU64 = AtomicU64::new(0);
pub(super) static PINNED_BYTES: AtomicU64 = AtomicU64::new(0);

pub fn allocated() -> (u64, u64) {
    (DEVICE_BYTES.load(Relaxed), PINNED_BYTES.load(Relaxed))
}

/// Device memory.
pub struct DeviceBuffer {
    pub ptr: sys::CUdeviceptr,
    pub bytes: usize,
}

// SAFETY: a device address, usable from any thread with the context current.
unsafe impl Send for DeviceBuffer {}

impl DeviceBuffer {
    pub fn new(bytes: usize, what: &str) -> Result<DeviceBuffer, Error> {
        // SAFETY: plain allocation in the current context; 0 bytes becomes 1.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.map_err(|e| {
            Error::OutOfMemory(format!("{bytes} bytes of GPU memory for {what}: {e}"))
        })?;
        DEVICE_BYTES.fetch_add(bytes as u64, Relaxed);
        Ok(DeviceBuffer { ptr, bytes })
    }

    pub fn zero_async(
        &self,
        bytes: usize,
        stream: &Stream,
        stage: &'static str,
    ) -> Result<(), Error> {
        debug_assert!(bytes <= self.bytes);
        // SAFETY: the range lies inside this allocation.
        unsafe { result::memset_d8_async(self.ptr, 0, bytes, stream.0) }
            .map_err(|e| gpu_err(stage, e))
    }

    /// Copies `src` to the start of this buffer, ordered on `stream`. `src`
    /// must stay untouched until the stream has passed this point.
    pub fn upload_async<T>(
        &self,
        src: &[T],
        stream: &Stream,
        stage: &'static str,
    ) -> Result<(), Error> {
        assert!(std::mem::size_of_val(src) <= self.bytes);
        // SAFETY: the destination is large enough (checked); the caller keeps
        // `src` alive and unchanged until the stream is synchronised.
        unsafe { result::memcpy_htod_async(self.ptr, src, stream.0) }.map_err(|e| gpu_err(stage, e))
    }

    /// Copies `src` to `offset` bytes into this buffer, ordered on
    /// `stream`; `src` must stay untouched until the stream has passed
    /// this point.
    pub fn upload_at_async(
        &self,
        offset: usize,
        src: &[u8],
        stream: &Stream,
        stage: &'static str,
    ) -> Result<(), Error> {
        assert!(offset
            .checked_add(src.len())
            .is_some_and(|end| end <= self.bytes));
        // SAFETY: the range lies inside this allocation (checked); the
        // caller keeps `src` alive and unchanged until the stream has
        // passed the copy.
        unsafe { result::memcpy_htod_async(self.ptr + offset as u64, src, stream.0) }
            .map_err(|e| gpu_err(stage, e))
    }

    /// Copies `dst.len()` bytes from `offset` bytes into this buffer into
    /// `dst`, ordered on `stream`; `dst` is valid once the stream has
    /// passed this point.
    pub fn download_at_async(
        &self,
        offset: usize,
        dst: &mut [u8],
        stream: &Stream,
        stage: &'static str,
    ) -> Result<(), Error> {
        assert!(offset
            .checked_add(dst.len())
            .is_some_and(|end| end <= self.bytes));
        // SAFETY: the source range lies inside this allocation (checked);
        // the caller keeps `dst` alive and does not read it until the
        // stream has passed the copy.
        unsafe { result::memcpy_dtoh_async(dst, self.ptr + offset as u64, stream.0) }
            .map_err(|e| gpu_err(stage, e))
    }

    /// Copies the start of this buffer into `dst`, ordered on `stream`;
    /// `dst` is valid once the stream is synchronised.
    pub fn download_async<T>(
        &self,
        dst: &mut [T],
        stream: &Stream,
        stage: &'static str,
    ) -> Result<(), Error> {
        assert!(std::mem::size_of_val(dst) <= self.bytes);
        // SAFETY: the source range lies inside this allocation; the caller
        // synchronises before reading `dst`.
        unsafe { result::memcpy_dtoh_async(dst, self.ptr, stream.0) }.map_err(|e| gpu_err(stage, e))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        DEVICE_BYTES.fetch_sub(self.bytes as u64, Relaxed);
        // SAFETY: allocated in `new`, freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}
