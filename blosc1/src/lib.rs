//! A safe interface to c-blosc 1: one Blosc1 frame per call, zstd, lz4 or
//! zlib inside.
//!
//! The frames are the format of the Zarr v3 `blosc` codec, which
//! zarr-python (through numcodecs) and tensorstore decode natively.
//! c-blosc 1.21 is compiled from the sources vendored by `blosc-src`, with
//! its zstd taken from `zstd-sys`, lz4 from `lz4-sys` and zlib from
//! `libz-sys`.
//!
//! Frames are written by [`Writer`] (`writer.rs`), around c-blosc's own
//! filters and inner compressors; [`compress`] is c-blosc's one-call
//! encoder, kept as the reference the writer is tested against.
//!
//! Only c-blosc's context API is called (`blosc_compress_ctx`,
//! `blosc_decompress_ctx`): it keeps no global state, reads no environment
//! variables (the plain `blosc_compress` honours `BLOSC_CLEVEL`,
//! `BLOSC_SHUFFLE` and others, which would let the environment change what
//! is written) and may run on any number of threads at once. Every call
//! uses one internal thread: callers parallelise across frames.

use std::ffi::CStr;

mod filters;
mod writer;
mod zlib;
pub use writer::{one_stream_flags, Writer, MAX_BLOCK_BYTES};

/// Highest compression level (0 stores the data uncompressed in the frame).
pub const MAX_LEVEL: u8 = 9;
/// Largest element size c-blosc shuffles by.
pub const MAX_TYPESIZE: usize = blosc_src::BLOSC_MAX_TYPESIZE as usize;
/// Bytes a frame may add to its input (the header).
pub const MAX_OVERHEAD: usize = blosc_src::BLOSC_MAX_OVERHEAD as usize;
/// Largest input one frame holds (`INT_MAX` less the header).
pub const MAX_INPUT_BYTES: usize = blosc_src::BLOSC_MAX_BUFFERSIZE as usize;

/// The compressor inside a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cname {
    Zstd,
    Lz4,
    Zlib,
}

impl Cname {
    fn c_name(self) -> &'static CStr {
        match self {
            Cname::Zstd => c"zstd",
            Cname::Lz4 => c"lz4",
            Cname::Zlib => c"zlib",
        }
    }

    /// The name in the Zarr `blosc` codec's `cname`.
    pub fn name(self) -> &'static str {
        match self {
            Cname::Zstd => "zstd",
            Cname::Lz4 => "lz4",
            Cname::Zlib => "zlib",
        }
    }

    /// The compressor's code in a frame header's flags (bits 5 to 7).
    pub fn header_code(self) -> u8 {
        match self {
            Cname::Lz4 => 1,
            Cname::Zlib => 3,
            Cname::Zstd => 4,
        }
    }
}

/// The shuffle filter applied before compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shuffle {
    None,
    /// Byte `k` of every element together, for each `k < typesize`.
    Byte,
    /// Bit `k` of every element together.
    Bit,
}

impl Shuffle {
    fn code(self) -> i32 {
        (match self {
            Shuffle::None => blosc_src::BLOSC_NOSHUFFLE,
            Shuffle::Byte => blosc_src::BLOSC_SHUFFLE,
            Shuffle::Bit => blosc_src::BLOSC_BITSHUFFLE,
        }) as i32
    }
}

/// How a frame is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// 0 to [`MAX_LEVEL`]; c-blosc maps it onto the inner compressor's.
    pub level: u8,
    pub cname: Cname,
    pub shuffle: Shuffle,
    /// Bytes per element, 1 to [`MAX_TYPESIZE`]: the stride of the shuffle.
    pub typesize: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    Level(u8),
    Typesize(usize),
    TooLarge(usize),
    /// c-blosc's compressor failed (its return code).
    Compress(i32),
    /// Not a valid Blosc1 frame, or it did not decode (why).
    Corrupt(String),
    /// The output buffer (this many bytes) could not be allocated.
    OutOfMemory(usize),
    /// An inner compressor could not be set up (which, and its code).
    Setup(&'static str, i32),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Level(l) => write!(f, "blosc level must be 0 to {MAX_LEVEL}, got {l}"),
            Error::Typesize(t) => {
                write!(f, "blosc typesize must be 1 to {MAX_TYPESIZE}, got {t}")
            }
            Error::TooLarge(n) => write!(
                f,
                "a blosc frame holds at most {MAX_INPUT_BYTES} bytes, got {n}"
            ),
            Error::Compress(code) => write!(f, "c-blosc compression failed (code {code})"),
            Error::Corrupt(why) => write!(f, "not a valid blosc frame: {why}"),
            Error::OutOfMemory(n) => {
                write!(f, "{n} bytes for a blosc frame could not be allocated")
            }
            Error::Setup(what, code) => write!(f, "setting up {what} failed (code {code})"),
        }
    }
}

impl std::error::Error for Error {}

/// The largest frame [`compress`] writes for `input_bytes` of input.
pub fn max_compressed_len(input_bytes: usize) -> usize {
    input_bytes + MAX_OVERHEAD
}

/// The version of the c-blosc library compiled in, e.g. "1.21.6".
pub fn c_blosc_version() -> &'static str {
    CStr::from_bytes_with_nul(blosc_src::BLOSC_VERSION_STRING)
        .ok()
        .and_then(|s| s.to_str().ok())
        .unwrap_or("unknown")
}

/// Replaces `out` with the Blosc1 frame of `input`.
pub fn compress(params: &Params, input: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
    compress_blocks(params, input, out, 0)
}

/// [`compress`] in blocks of `blocksize` bytes (0: c-blosc's choice).
fn compress_blocks(
    params: &Params,
    input: &[u8],
    out: &mut Vec<u8>,
    blocksize: usize,
) -> Result<(), Error> {
    if params.level > MAX_LEVEL {
        return Err(Error::Level(params.level));
    }
    if !(1..=MAX_TYPESIZE).contains(&params.typesize) {
        return Err(Error::Typesize(params.typesize));
    }
    if input.len() > MAX_INPUT_BYTES {
        return Err(Error::TooLarge(input.len()));
    }
    out.clear();
    let capacity = max_compressed_len(input.len());
    out.try_reserve(capacity)
        .map_err(|_| Error::OutOfMemory(capacity))?;
    // SAFETY: `input` is readable for `input.len()` bytes and `out` has
    // room for `capacity` bytes; c-blosc writes at most `destsize` bytes
    // and never reads `dest` before writing it. The compressor name is a
    // NUL-terminated string. One internal thread: no pool is started.
    let written = unsafe {
        blosc_src::blosc_compress_ctx(
            i32::from(params.level),
            params.shuffle.code(),
            params.typesize,
            input.len(),
            input.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            capacity,
            params.cname.c_name().as_ptr(),
            blocksize,
            1,
        )
    };
    // With room for the input plus the header a frame always fits, so 0
    // (did not fit) is an error here like a negative code.
    if written <= 0 || written as usize > capacity {
        return Err(Error::Compress(written));
    }
    // SAFETY: c-blosc initialised the first `written` bytes, within capacity.
    unsafe { out.set_len(written as usize) };
    Ok(())
}

/// Decodes one Blosc1 frame, which must fill `frame` exactly.
pub fn decompress(frame: &[u8]) -> Result<Vec<u8>, Error> {
    let mut nbytes = 0usize;
    if frame.len() < blosc_src::BLOSC_MIN_HEADER_LENGTH as usize {
        return Err(Error::Corrupt(format!(
            "{} bytes, shorter than the header",
            frame.len()
        )));
    }
    // SAFETY: `frame` is readable for `frame.len()` bytes, at least a
    // header; the check reads the header only.
    let valid = unsafe {
        blosc_src::blosc_cbuffer_validate(frame.as_ptr().cast(), frame.len(), &mut nbytes)
    };
    if valid != 0 {
        return Err(Error::Corrupt(format!(
            "its header does not describe a frame of {} bytes",
            frame.len()
        )));
    }
    let mut out = Vec::<u8>::with_capacity(nbytes);
    // SAFETY: the header was checked against the frame's length above, so
    // c-blosc reads within `frame`; it writes at most `nbytes` bytes to
    // `out`, which has that capacity.
    let read = unsafe {
        blosc_src::blosc_decompress_ctx(frame.as_ptr().cast(), out.as_mut_ptr().cast(), nbytes, 1)
    };
    if read < 0 || read as usize != nbytes {
        return Err(Error::Corrupt(format!(
            "decoding returned {read}, expected {nbytes} bytes"
        )));
    }
    // SAFETY: c-blosc wrote all `nbytes` bytes.
    unsafe { out.set_len(nbytes) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(n: usize) -> Vec<u8> {
        (0..n as u32)
            .flat_map(|i| ((i / 3) as u16).to_le_bytes())
            .collect()
    }

    #[test]
    fn frames_round_trip_and_shuffle_pays() {
        let data = ramp(1 << 15);
        let mut sizes = Vec::new();
        for shuffle in [Shuffle::None, Shuffle::Byte, Shuffle::Bit] {
            let p = Params {
                cname: Cname::Zstd,
                level: 1,
                shuffle,
                typesize: 2,
            };
            let mut frame = Vec::new();
            compress(&p, &data, &mut frame).unwrap();
            assert_eq!(decompress(&frame).unwrap(), data, "{shuffle:?}");
            sizes.push(frame.len());
        }
        // A slow ramp of u16: its high bytes are nearly constant once shuffled.
        assert!(sizes[1] < sizes[0], "{sizes:?}");
    }

    #[test]
    fn every_inner_compressor_round_trips_and_names_itself() {
        let data = ramp(1 << 14);
        for cname in [Cname::Zstd, Cname::Lz4, Cname::Zlib] {
            let p = Params {
                cname,
                level: 5,
                shuffle: Shuffle::Byte,
                typesize: 2,
            };
            let mut frame = Vec::new();
            compress(&p, &data, &mut frame).unwrap();
            assert!(frame.len() < data.len() / 2, "{cname:?}: {}", frame.len());
            assert_eq!(frame[2] >> 5, cname.header_code(), "{cname:?}");
            assert_eq!(decompress(&frame).unwrap(), data, "{cname:?}");
        }
    }

    #[test]
    fn empty_and_tiny_inputs() {
        for n in [0, 1, 7, 17] {
            let data: Vec<u8> = (0..n as u8).collect();
            let mut frame = Vec::new();
            let p = Params {
                cname: Cname::Zstd,
                level: 5,
                shuffle: Shuffle::Byte,
                typesize: 4,
            };
            compress(&p, &data, &mut frame).unwrap();
            assert!(frame.len() <= max_compressed_len(n));
            assert_eq!(decompress(&frame).unwrap(), data);
        }
    }

    #[test]
    fn bad_parameters_and_frames_are_errors() {
        let mut out = Vec::new();
        let p = |level, typesize| Params {
            cname: Cname::Zstd,
            level,
            shuffle: Shuffle::Byte,
            typesize,
        };
        assert_eq!(compress(&p(10, 2), b"ab", &mut out), Err(Error::Level(10)));
        assert_eq!(compress(&p(1, 0), b"ab", &mut out), Err(Error::Typesize(0)));
        assert_eq!(
            compress(&p(1, 256), b"ab", &mut out),
            Err(Error::Typesize(256))
        );
        assert!(decompress(b"short").is_err());
        compress(&p(1, 2), &ramp(1000), &mut out).unwrap();
        assert!(decompress(&out[..out.len() - 1]).is_err());
        let mut longer = out.clone();
        longer.push(0);
        assert!(decompress(&longer).is_err());
    }

    #[test]
    fn version_is_known() {
        assert!(c_blosc_version().starts_with("1."), "{}", c_blosc_version());
    }
}
