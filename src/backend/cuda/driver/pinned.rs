//! Page-locked host memory: a stream's staging and output buffers, and
//! the small buffers results are read back into.

use super::{gpu_err, Context, PINNED_BYTES};
use crate::error::Error;
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;

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
    /// Whose memory it is.
    memory: Backing,
}

/// Where a page-locked buffer's memory comes from.
enum Backing {
    /// The driver's (`cuMemHostAlloc`), freed by it.
    Driver,
    /// The process's own, page-locked by the driver from `ptr` for the
    /// buffer's pages (`cuMemHostRegister`), unregistered before it is
    /// freed.
    Registered(Vec<u8>),
}

/// Buffers from this size are the process's memory, made resident first
/// (`platform::fault_in`) and then registered with the driver. Measured on
/// an H100 machine for 512 MiB: 0.17-0.22 s (0.09 s as huge pages)
/// against 0.21-0.24 s for `cuMemHostAlloc` and 0.05 s more to fill it,
/// the same 55 GB/s from it to the device. A stream's staging and output buffers are this large;
/// a small buffer of results comes from the driver.
const REGISTER_MIN_BYTES: usize = 8 << 20;

// SAFETY: plain host memory; the owner moves it between threads.
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared references only read the bytes; writing needs `&mut`.
unsafe impl Sync for PinnedBuffer {}

/// The page size page-locked buffers start on.
const PAGE: usize = 4096;

/// The first page boundary at or after `base`.
fn first_page(base: *mut u8) -> *mut u8 {
    base.wrapping_add(base.align_offset(PAGE).min(PAGE - 1))
}

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
        let registered = (bytes >= REGISTER_MIN_BYTES)
            .then(|| registered(bytes))
            .flatten();
        let (base, ptr, memory) = match registered {
            Some((mut memory, ptr)) => (memory.as_mut_ptr(), ptr, Backing::Registered(memory)),
            // A system that refuses to register ordinary memory, or a small
            // buffer: the driver allocates it.
            // SAFETY: a plain allocation (flags 0: cached, not write-combined).
            None => match unsafe { result::malloc_host(alloc_bytes(bytes), 0) } {
                Ok(p) => {
                    let base = p as *mut u8;
                    let ptr = first_page(base);
                    // Its contents defined (the pages are in already).
                    // SAFETY: `bytes` bytes from `ptr` lie in the allocation.
                    unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
                    (base, ptr, Backing::Driver)
                }
                Err(e) => {
                    // SAFETY: balances the retain above.
                    let _ = unsafe { result::primary_ctx::release(device) };
                    return Err(Error::OutOfMemory(format!(
                        "{bytes} bytes of pinned host memory: {e}"
                    )));
                }
            },
        };
        PINNED_BYTES.fetch_add(alloc_bytes(bytes) as u64, Relaxed);
        Ok(PinnedBuffer {
            ptr,
            base,
            bytes,
            device,
            ctx,
            recycle: false,
            memory,
        })
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
    /// included), as the driver module's `allocated` counts them.
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
                memory: std::mem::replace(&mut self.memory, Backing::Driver),
            };
            super::super::pinned_cache::give(kept);
            return;
        }
        PINNED_BYTES.fetch_sub(alloc_bytes(self.bytes) as u64, Relaxed);
        // SAFETY: the context is alive (retained in `on_device`); driver
        // memory is freed once, by the driver; registered memory is
        // unregistered once, from the page it was registered at, before the
        // vector that owns it is freed; then the retain is balanced.
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            match &mut self.memory {
                Backing::Driver => {
                    let _ = result::free_host(self.base as *mut c_void);
                }
                Backing::Registered(memory) => {
                    let _ = sys::cuMemHostUnregister(self.ptr as *mut c_void);
                    drop(std::mem::take(memory));
                }
            }
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
        let mut b = match super::super::pinned_cache::take(self.device, bytes) {
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

/// Zeroed memory of the process's own for a buffer of `bytes`, resident
/// and registered with the driver from its first page boundary (returned),
/// for whole pages; `None` where it cannot be had or registered.
fn registered(bytes: usize) -> Option<(Vec<u8>, *mut u8)> {
    let pages = bytes.checked_next_multiple_of(PAGE)?;
    let mut memory = crate::platform::zeroed_resident_bytes(pages.checked_add(PAGE)?)?;
    let ptr = first_page(memory.as_mut_ptr());
    // SAFETY: [ptr, ptr + pages) lies inside `memory`, which the caller
    // keeps, unmoved (a vector's heap memory does not move), until it has
    // unregistered it; flags 0: page-locked for this context's device.
    let status = unsafe { sys::cuMemHostRegister_v2(ptr as *mut c_void, pages, 0) };
    status.result().ok()?;
    Some((memory, ptr))
}
