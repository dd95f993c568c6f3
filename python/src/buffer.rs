//! The buffer protocol, for any object that exports its memory (numpy
//! arrays, `bytes`, `bytearray`, `memoryview`, `array.array`), without a
//! copy.
//!
//! The limited API of CPython 3.10 (the abi3 floor of the wheel) leaves the
//! buffer protocol out; 3.11 added it unchanged: `PyObject_GetBuffer`,
//! `PyBuffer_Release` and `Py_buffer` have had this form and these symbols
//! since Python 3.3. They are declared here for 3.10 and later.

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use std::ffi::{c_char, c_int, c_void, CStr};

#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut pyo3::ffi::PyObject,
    len: isize,
    itemsize: isize,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut isize,
    strides: *mut isize,
    suboffsets: *mut isize,
    internal: *mut c_void,
}

extern "C" {
    fn PyObject_GetBuffer(
        obj: *mut pyo3::ffi::PyObject,
        view: *mut RawBuffer,
        flags: c_int,
    ) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// `PyBUF_RECORDS_RO`: format, shape and strides; read-only is fine.
const PYBUF_RECORDS_RO: c_int = 0x0004 | 0x0010 | 0x0008;

/// `PyBUF_READ`, for memoryviews the sink may only read.
pub const PYBUF_READ: c_int = 0x100;

/// An exported buffer, held until dropped (the exporter cannot resize or
/// free it meanwhile). Dropping releases it and needs the GIL: drop it
/// while attached.
pub struct Buffer {
    view: Box<RawBuffer>,
}

// SAFETY: the view is plain data describing memory whose owner is kept
// alive by the view's reference to the exporter; reading it from another
// thread while this thread waits in `Python::detach` is what the buffer
// protocol is for. Release happens in Drop, which the binding runs attached.
unsafe impl Send for Buffer {}
// SAFETY: shared access only reads the view's fields and the exported bytes.
unsafe impl Sync for Buffer {}

/// What [`Buffer::element`] found in the format string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Unsigned,
    Signed,
    Float,
    Other,
}

impl Buffer {
    /// Gets `obj`'s buffer; fails with `TypeError` when `obj` exports none.
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        let mut view = Box::new(RawBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: `obj` is a live object (we are attached), `view` a
        // writable Py_buffer; on failure nothing is held and a Python
        // exception is set, fetched below.
        let rc = unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *view, PYBUF_RECORDS_RO) };
        if rc != 0 {
            return Err(PyErr::take(obj.py())
                .unwrap_or_else(|| PyBufferError::new_err("the object exports no buffer")));
        }
        Ok(Buffer { view })
    }

    /// The exported bytes. Valid while `self` lives.
    pub fn bytes(&self) -> &[u8] {
        if self.view.len == 0 {
            return &[];
        }
        // SAFETY: the exporter guarantees `len` readable bytes at `buf` for
        // as long as the view is held, which `self` does; the caller only
        // reads them when `is_c_contiguous` holds.
        unsafe { std::slice::from_raw_parts(self.view.buf as *const u8, self.view.len as usize) }
    }

    /// The shape: `()` for a scalar (0-d), else one entry per dimension.
    pub fn shape(&self) -> Vec<u64> {
        if self.view.shape.is_null() {
            // Only a 0-d exporter may leave it out when PyBUF_ND is asked.
            return match self.view.ndim {
                0 => Vec::new(),
                _ => vec![(self.view.len / self.view.itemsize.max(1)) as u64],
            };
        }
        // SAFETY: with PyBUF_ND requested, `shape` holds `ndim` entries.
        let s = unsafe { std::slice::from_raw_parts(self.view.shape, self.view.ndim as usize) };
        s.iter().map(|&n| n as u64).collect()
    }

    pub fn itemsize(&self) -> usize {
        self.view.itemsize as usize
    }

    /// Whether the bytes lie in row-major order without gaps.
    pub fn is_c_contiguous(&self) -> bool {
        if self.view.strides.is_null() || self.view.len == 0 {
            return true;
        }
        let ndim = self.view.ndim as usize;
        // SAFETY: with PyBUF_STRIDES requested, `shape` and `strides` hold
        // `ndim` entries each.
        let (shape, strides) = unsafe {
            (
                std::slice::from_raw_parts(self.view.shape, ndim),
                std::slice::from_raw_parts(self.view.strides, ndim),
            )
        };
        let mut expected = self.view.itemsize;
        for (&n, &s) in shape.iter().zip(strides).rev() {
            if n > 1 && s != expected {
                return false;
            }
            expected *= n;
        }
        true
    }

    /// The format string ("B" when the exporter gives none).
    pub fn format(&self) -> String {
        if self.view.format.is_null() {
            return "B".into();
        }
        // SAFETY: with PyBUF_FORMAT requested, a NUL-terminated string that
        // lives as long as the view.
        unsafe { CStr::from_ptr(self.view.format) }
            .to_string_lossy()
            .into_owned()
    }

    /// The element's kind and whether it is stored little-endian (native
    /// order counts as little-endian: the library runs on little-endian
    /// hosts only).
    pub fn element(&self) -> (Kind, bool) {
        let format = self.format();
        let (little, code) = match format.as_bytes() {
            [b'@' | b'=' | b'<', rest @ ..] => (true, rest),
            [b'>' | b'!', rest @ ..] => (false, rest),
            rest => (true, rest),
        };
        let kind = match code {
            [b'B' | b'H' | b'I' | b'L' | b'Q' | b'N'] => Kind::Unsigned,
            [b'b' | b'h' | b'i' | b'l' | b'q' | b'n'] => Kind::Signed,
            [b'e' | b'f' | b'd'] => Kind::Float,
            _ => Kind::Other,
        };
        (kind, little)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // Attached already where the binding drops a buffer; `attach`
        // nests without cost then.
        Python::attach(|_| {
            // SAFETY: the view was filled by a successful PyObject_GetBuffer
            // and is released exactly once, attached.
            unsafe { PyBuffer_Release(&mut *self.view) }
        });
    }
}
