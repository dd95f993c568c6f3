//! zlib streams for blosc's zlib frames from the zlib c-blosc links
//! (`libz-sys`), one deflate state kept from block to block: c-blosc calls
//! `compress2`, which sets a state up and frees it for every block. Same
//! library, level and parameters as `compress2`, so the same bytes.

use libz_sys as z;
use std::ffi::c_int;

/// One deflate state at one level.
pub struct Deflate {
    /// Boxed: zlib's state points back at the stream, which must not move.
    stream: Box<z::z_stream>,
}

// SAFETY: the stream and its state belong to this value alone; zlib keeps
// no thread-local or shared state, so it may be used from another thread.
unsafe impl Send for Deflate {}

/// zlib's allocator: `items * size` bytes from the C heap (null when that
/// overflows or fails, which zlib reports as `Z_MEM_ERROR`).
extern "C" fn alloc(_opaque: z::voidpf, items: z::uInt, size: z::uInt) -> z::voidpf {
    match (items as usize).checked_mul(size as usize) {
        // SAFETY: malloc of a plain size; zlib frees it through `free`.
        Some(bytes) => unsafe { libc::malloc(bytes) },
        None => std::ptr::null_mut(),
    }
}

extern "C" fn free(_opaque: z::voidpf, address: z::voidpf) {
    // SAFETY: `address` came from `alloc` (malloc) and zlib frees it once.
    unsafe { libc::free(address) }
}

impl Deflate {
    /// A state at `level` (0 to 9), as `compress2` sets it up; zlib's
    /// error code when it cannot (out of memory).
    pub fn new(level: i32) -> Result<Deflate, i32> {
        let mut stream = Box::new(z::z_stream {
            next_in: std::ptr::null_mut(),
            avail_in: 0,
            total_in: 0,
            next_out: std::ptr::null_mut(),
            avail_out: 0,
            total_out: 0,
            msg: std::ptr::null_mut(),
            state: std::ptr::null_mut(),
            zalloc: alloc,
            zfree: free,
            opaque: std::ptr::null_mut(),
            data_type: 0,
            adler: 0,
            reserved: 0,
        });
        // SAFETY: `stream` is a valid, boxed z_stream with its allocator
        // set; the version string and struct size are zlib's own.
        let code = unsafe {
            z::deflateInit_(
                &mut *stream,
                level as c_int,
                z::zlibVersion(),
                std::mem::size_of::<z::z_stream>() as c_int,
            )
        };
        if code == z::Z_OK {
            Ok(Deflate { stream })
        } else {
            Err(code)
        }
    }

    /// The zlib stream of `src` into `dst`: its size, or `None` when it
    /// does not fit in `dst` (or the input is too large for zlib's
    /// counters).
    pub fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        let (Ok(avail_in), Ok(avail_out)) =
            (z::uInt::try_from(src.len()), z::uInt::try_from(dst.len()))
        else {
            return None;
        };
        let s = &mut *self.stream;
        // SAFETY: the state was initialised by `deflateInit_`.
        if unsafe { z::deflateReset(s) } != z::Z_OK {
            return None;
        }
        s.next_in = src.as_ptr().cast_mut();
        s.avail_in = avail_in;
        s.next_out = dst.as_mut_ptr();
        s.avail_out = avail_out;
        // SAFETY: zlib reads `avail_in` bytes from `next_in` (it never
        // writes there) and writes at most `avail_out` bytes at `next_out`;
        // both slices outlive the call. The pointers are reset before the
        // next use.
        let code = unsafe { z::deflate(s, z::Z_FINISH) };
        let written = s.total_out as usize;
        s.next_in = std::ptr::null_mut();
        s.next_out = std::ptr::null_mut();
        (code == z::Z_STREAM_END).then_some(written)
    }
}

impl Drop for Deflate {
    fn drop(&mut self) {
        // SAFETY: the state was initialised by `deflateInit_` and is freed
        // once, here.
        unsafe { z::deflateEnd(&mut *self.stream) };
    }
}
