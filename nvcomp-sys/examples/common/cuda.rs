//! A minimal CUDA driver-API wrapper for the examples: libcuda.so.1 is
//! opened at run time, like nvCOMP, and only the calls they need are bound.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

use libloading::Library;

pub type CuResult = c_int;

/// The handful of driver-API entry points this example needs (cuda.h).
pub struct Cuda {
    _lib: Library,
    pub init: unsafe extern "C" fn(c_uint) -> CuResult,
    pub device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
    pub device_get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult,
    pub primary_ctx_retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult,
    pub ctx_set_current: unsafe extern "C" fn(*mut c_void) -> CuResult,
    pub stream_create: unsafe extern "C" fn(*mut *mut c_void, c_uint) -> CuResult,
    pub stream_sync: unsafe extern "C" fn(*mut c_void) -> CuResult,
    pub mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    pub mem_free: unsafe extern "C" fn(u64) -> CuResult,
    pub htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CuResult,
    pub dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult,
    pub memset_async: unsafe extern "C" fn(u64, u8, usize, *mut c_void) -> CuResult,
    pub error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
}

macro_rules! sym {
    ($lib:expr, $name:literal) => {
        // SAFETY: the field's type is the cuda.h signature of `$name`, and
        // the library is kept alive in `_lib` as long as the pointers.
        *unsafe { $lib.get($name.as_bytes()) }.unwrap_or_else(|e| panic!("{}: {e}", $name))
    };
}

impl Cuda {
    pub fn load() -> Cuda {
        // SAFETY: libcuda.so.1 is the NVIDIA driver; loading it runs only its own initialisers.
        let lib = unsafe { Library::new("libcuda.so.1") }.expect("libcuda.so.1");
        Cuda {
            init: sym!(lib, "cuInit"),
            device_get: sym!(lib, "cuDeviceGet"),
            device_get_name: sym!(lib, "cuDeviceGetName"),
            primary_ctx_retain: sym!(lib, "cuDevicePrimaryCtxRetain"),
            ctx_set_current: sym!(lib, "cuCtxSetCurrent"),
            stream_create: sym!(lib, "cuStreamCreate"),
            stream_sync: sym!(lib, "cuStreamSynchronize"),
            mem_alloc: sym!(lib, "cuMemAlloc_v2"),
            mem_free: sym!(lib, "cuMemFree_v2"),
            htod: sym!(lib, "cuMemcpyHtoD_v2"),
            dtoh: sym!(lib, "cuMemcpyDtoH_v2"),
            memset_async: sym!(lib, "cuMemsetD8Async"),
            error_name: sym!(lib, "cuGetErrorName"),
            _lib: lib,
        }
    }

    pub fn check(&self, what: &str, r: CuResult) -> Result<(), String> {
        if r == 0 {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a static string pointer or fails.
        let known = unsafe { (self.error_name)(r, &mut name) } == 0 && !name.is_null();
        // SAFETY: checked non-null; the driver's strings are static and NUL-terminated.
        let name = if known {
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        } else {
            "?".into()
        };
        Err(format!("{what} failed: {name} ({r})"))
    }

    pub fn alloc(&self, bytes: usize) -> u64 {
        let mut p = 0u64;
        // SAFETY: `p` is writable; a context is current (set up in main).
        self.check("cuMemAlloc", unsafe {
            (self.mem_alloc)(&mut p, bytes.max(1))
        })
        .unwrap();
        p
    }

    pub fn upload<T: Copy>(&self, data: &[T]) -> u64 {
        let bytes = std::mem::size_of_val(data);
        let p = self.alloc(bytes);
        // SAFETY: `p` holds `bytes` bytes; `data` is that long.
        self.check("cuMemcpyHtoD", unsafe {
            (self.htod)(p, data.as_ptr().cast(), bytes)
        })
        .unwrap();
        p
    }

    pub fn download<T: Copy + Default>(&self, src: u64, n: usize) -> Result<Vec<T>, String> {
        let mut out = vec![T::default(); n];
        // SAFETY: `out` holds n elements; `src` at least as many (caller).
        let r = unsafe {
            (self.dtoh)(
                out.as_mut_ptr().cast(),
                src,
                std::mem::size_of_val(out.as_slice()),
            )
        };
        self.check("cuMemcpyDtoH", r).map(|()| out)
    }
}
