//! Thin owning wrappers over the CUDA driver API (through cudarc's raw
//! `result` layer, loaded at run time). All the CUDA pointer handling of
//! the GPU backend lives here: contexts, streams and memory in this file,
//! kernels (`kernel.rs`) and events (`event.rs`) beside it.

use crate::error::Error;
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

mod event;
mod kernel;
pub use event::Event;
pub use kernel::{Kernel, Module};

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
static PINNED_BYTES: AtomicU64 = AtomicU64::new(0);

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

/// Page-locked host memory (not write-combined: the host reads it back).
/// It keeps its context alive: a staging buffer may outlive the backend
/// that allocated it.
pub struct PinnedBuffer {
    /// The first page boundary of the allocation at `base`: the driver
    /// aligns small allocations to less than a page, and a reservation
    /// promises one.
    ptr: *mut u8,
    base: *mut u8,
    bytes: usize,
    device: sys::CUdevice,
    ctx: sys::CUcontext,
    /// Dropped, it goes to the process's cache instead of being freed.
    recycle: bool,
}

// SAFETY: plain host memory; the owner moves it between threads.
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared references only read the bytes; writing needs `&mut`.
unsafe impl Sync for PinnedBuffer {}

/// The page size page-locked buffers start on.
const PAGE: usize = 4096;

/// What a page-locked buffer of `bytes` allocates: room to start on a page.
fn alloc_bytes(bytes: usize) -> usize {
    bytes.max(1).saturating_add(PAGE - 1)
}

impl PinnedBuffer {
    pub fn new(context: &Context, bytes: usize) -> Result<PinnedBuffer, Error> {
        context.bind()?;
        PinnedBuffer::on_device(context.device, bytes)
    }

    /// The device's primary context must be current on this thread.
    fn on_device(device: sys::CUdevice, bytes: usize) -> Result<PinnedBuffer, Error> {
        // SAFETY: retains the primary context current on this thread; the
        // matching release is in Drop.
        let ctx = unsafe { result::primary_ctx::retain(device) }
            .map_err(|e| gpu_err("retaining the context", e))?;
        // SAFETY: a plain allocation (flags 0: cached, not write-combined).
        let base = match unsafe { result::malloc_host(alloc_bytes(bytes), 0) } {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: balances the retain above.
                let _ = unsafe { result::primary_ctx::release(device) };
                return Err(Error::OutOfMemory(format!(
                    "{bytes} bytes of pinned host memory: {e}"
                )));
            }
        };
        PINNED_BYTES.fetch_add(alloc_bytes(bytes) as u64, Relaxed);
        let base = base as *mut u8;
        let mut b = PinnedBuffer {
            ptr: base.wrapping_add(base.align_offset(PAGE).min(PAGE - 1)),
            base,
            bytes,
            device,
            ctx,
            recycle: false,
        };
        // Fault every page in now, not during the acquisition.
        b.as_mut_slice().fill(0);
        Ok(b)
    }

    pub fn device(&self) -> sys::CUdevice {
        self.device
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The page-locked bytes behind the buffer (its page alignment's room
    /// included), as [`allocated`] counts them.
    pub fn allocated_bytes(&self) -> usize {
        alloc_bytes(self.bytes)
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `bytes` initialised bytes at `ptr`, owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }

    /// The buffer as `u64`s (offsets read back from the device).
    pub fn as_u64s(&self) -> &[u64] {
        // SAFETY: page-locked memory is page aligned, any bit pattern is a
        // valid u64, and the length is rounded down to whole values.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u64, self.bytes / 8) }
    }

    pub fn as_u64s_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `as_u64s`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u64, self.bytes / 8) }
    }

    /// The buffer as `i32`s (nvCOMP statuses read back from the device).
    pub fn as_i32s(&self) -> &[i32] {
        // SAFETY: as in `as_u64s`, for i32.
        unsafe { std::slice::from_raw_parts(self.ptr as *const i32, self.bytes / 4) }
    }

    pub fn as_i32s_mut(&mut self) -> &mut [i32] {
        // SAFETY: as in `as_u64s_mut`, for i32.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut i32, self.bytes / 4) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.recycle {
            let kept = PinnedBuffer {
                ptr: self.ptr,
                base: std::mem::replace(&mut self.base, std::ptr::null_mut()),
                bytes: self.bytes,
                device: self.device,
                ctx: self.ctx,
                recycle: false,
            };
            super::pinned_cache::give(kept);
            return;
        }
        PINNED_BYTES.fetch_sub(alloc_bytes(self.bytes) as u64, Relaxed);
        // SAFETY: the context is alive (retained in `new`); the memory was
        // allocated by malloc_host there and is freed once; then the retain
        // is balanced.
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            let _ = result::free_host(self.base as *mut c_void);
            let _ = result::primary_ctx::release(self.device);
        }
    }
}

/// Allocates page-locked buffers for one device on any thread (a
/// stream's staging buffers after its first, allocated in the background
/// while the first writes land). It keeps the device's context alive.
pub struct PinnedAllocator {
    device: sys::CUdevice,
    ctx: sys::CUcontext,
}

// SAFETY: a retained primary context may be made current on any thread.
unsafe impl Send for PinnedAllocator {}

impl PinnedAllocator {
    pub fn new(context: &Context) -> Result<PinnedAllocator, Error> {
        context.bind()?;
        // SAFETY: retains the primary context `context` already holds; the
        // matching release is in Drop.
        let ctx = unsafe { result::primary_ctx::retain(context.device) }
            .map_err(|e| gpu_err("retaining the context", e))?;
        Ok(PinnedAllocator {
            device: context.device,
            ctx,
        })
    }

    /// A buffer from the process's cache (a stream before this one left
    /// it there), else a new one; either way it goes back to the cache
    /// when dropped. For the large buffers of a stream: staging and the
    /// output pool.
    pub fn recycled(&self, bytes: usize) -> Result<PinnedBuffer, Error> {
        let mut b = match super::pinned_cache::take(self.device, bytes) {
            Some(b) => b,
            None => {
                // SAFETY: the context is retained for the life of `self`.
                unsafe { result::ctx::set_current(self.ctx) }
                    .map_err(|e| gpu_err("binding the context", e))?;
                PinnedBuffer::on_device(self.device, bytes)?
            }
        };
        b.recycle = true;
        Ok(b)
    }
}

impl Drop for PinnedAllocator {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `new`.
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}
