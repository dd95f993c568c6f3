//! Kernels: a module loaded from the fatbin built with the crate, and
//! launches of its functions.

use super::{gpu_err, Stream};
use crate::error::Error;
use cudarc::driver::{result, sys};
use std::ffi::c_void;

/// A loaded module and one of its kernels.
pub struct Kernel {
    func: sys::CUfunction,
}

// SAFETY: a function handle of a loaded module, usable from any thread
// with the context current.
unsafe impl Send for Kernel {}

/// A module loaded from an embedded fatbin; unloaded with the context.
pub struct Module(sys::CUmodule);

// SAFETY: as for Kernel.
unsafe impl Send for Module {}

impl Module {
    pub fn load(fatbin: &'static [u8]) -> Result<Module, Error> {
        // SAFETY: `fatbin` is a complete fatbin image produced by nvcc at
        // build time and lives for the whole program.
        unsafe { result::module::load_data(fatbin.as_ptr() as *const c_void) }
            .map(Module)
            .map_err(|e| gpu_err("loading the kernels", e))
    }

    pub fn kernel(&self, name: &str) -> Result<Kernel, Error> {
        let cname = std::ffi::CString::new(name).expect("kernel names have no NUL");
        // SAFETY: the module is loaded; the name is NUL-terminated.
        unsafe { result::module::get_function(self.0, cname) }
            .map(|func| Kernel { func })
            .map_err(|e| gpu_err("finding a kernel", e))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded in `load`, unloaded once.
        let _ = unsafe { result::module::unload(self.0) };
    }
}

impl Kernel {
    /// Launches with the given parameters (pointers to each argument, in the
    /// kernel's order).
    ///
    /// # Safety
    /// `params` must match the kernel's signature exactly, and every device
    /// pointer among them must be valid for what the kernel does.
    pub unsafe fn launch(
        &self,
        grid: u32,
        block: u32,
        stream: &Stream,
        params: &mut [*mut c_void],
        stage: &'static str,
    ) -> Result<(), Error> {
        // SAFETY: forwarded to the caller's contract.
        unsafe {
            result::launch_kernel(self.func, (grid, 1, 1), (block, 1, 1), 0, stream.0, params)
        }
        .map_err(|e| gpu_err(stage, e))
    }
}
