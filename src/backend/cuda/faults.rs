//! Failures a test can force on the GPU backend, to check that a CUDA or
//! nvCOMP failure poisons the stream with its stage named and that nothing
//! hangs afterwards. A fault is armed for the next GPU stream the process
//! creates and strikes on that stream's second batch, while the first is
//! still in flight. Nothing arms one unless a test asks.

use std::sync::atomic::{AtomicU8, Ordering::SeqCst};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Fault {
    None = 0,
    /// The compress stage reports a failure, as nvCOMP would; the CUDA
    /// context stays usable.
    CompressFails = 1,
    /// The scatter kernel reads an unmapped device address: a real
    /// illegal-address fault, which leaves the CUDA context unusable.
    ScatterIllegalAddress = 2,
}

/// The batch (counted from 0) on which an armed fault strikes.
pub const STRIKES_ON_BATCH: u64 = 1;

static ARMED: AtomicU8 = AtomicU8::new(Fault::None as u8);

/// Arms `fault` for the next GPU stream created in this process.
pub fn arm(fault: Fault) {
    ARMED.store(fault as u8, SeqCst);
}

/// The armed fault, disarmed: a stream takes it when it is built.
pub(super) fn take() -> Fault {
    match ARMED.swap(Fault::None as u8, SeqCst) {
        1 => Fault::CompressFails,
        2 => Fault::ScatterIllegalAddress,
        _ => Fault::None,
    }
}

/// Device memory held away from streams, so that a test can give the next
/// stream less free memory than its plan; freed when dropped.
pub struct Occupied {
    _buffer: super::driver::DeviceBuffer,
    // Last: the buffer is freed before the context goes.
    _ctx: super::driver::Context,
}

/// Takes all but `leave_free` bytes of device `device`'s free memory.
pub fn occupy_device_memory(device: u32, leave_free: u64) -> crate::error::Result<Occupied> {
    let ctx = super::driver::Context::new(device)?;
    let (free, _) = cudarc::driver::result::mem_get_info()
        .map_err(|e| super::driver::gpu_err("reading free memory", e))?;
    let bytes = (free as u64).saturating_sub(leave_free) as usize;
    Ok(Occupied {
        _buffer: super::driver::DeviceBuffer::new(bytes, "memory a test holds")?,
        _ctx: ctx,
    })
}
