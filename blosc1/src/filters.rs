//! The filters applied to a block before compression, laid out exactly as
//! c-blosc 1.x lays them out (the tests check them against c-blosc's):
//! - the byte shuffle, byte `k` of every element together for each `k`,
//!   whole elements shuffled and the bytes of a trailing partial element
//!   copied as they are. For 2-byte elements (cameras' `uint16`) it is
//!   written here, a loop the compiler vectorizes to about three times the
//!   speed of c-blosc's SSE2 routine on 64 KiB blocks; other sizes go to
//!   c-blosc's routines, faster there;
//! - the bit shuffle, c-blosc's own.

use crate::Error;

// c-blosc's filters, with their run-time choice of SSE2/AVX2 code. They
// are internal to the static library blosc-src builds (hidden from a
// shared library's exports, not from this link).
extern "C" {
    fn blosc_internal_shuffle(typesize: usize, blocksize: usize, src: *const u8, dest: *mut u8);
    fn blosc_internal_bitshuffle(
        typesize: usize,
        blocksize: usize,
        src: *const u8,
        dest: *mut u8,
        tmp: *mut u8,
    ) -> i32;
}

/// Byte-shuffles `src` into `dst` by elements of `typesize` bytes.
pub fn byte_shuffle(typesize: usize, src: &[u8], dst: &mut [u8]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "shuffle: input and output lengths differ"
    );
    if typesize == 2 {
        let whole = src.len() / 2 * 2;
        pairs(&src[..whole], &mut dst[..whole]);
        dst[whole..].copy_from_slice(&src[whole..]);
    } else {
        // SAFETY: `src` and `dst` are `src.len()` bytes each and do not
        // overlap (one is shared, the other exclusive); c-blosc reads and
        // writes exactly that many.
        unsafe { blosc_internal_shuffle(typesize, src.len(), src.as_ptr(), dst.as_mut_ptr()) };
    }
}

/// Bit-shuffles `src` into `dst` (both as long as `scratch` or shorter)
/// by elements of `typesize` bytes; c-blosc's error code if it fails.
pub fn bit_shuffle(
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
    scratch: &mut [u8],
) -> Result<(), Error> {
    assert!(
        dst.len() == src.len() && scratch.len() >= src.len(),
        "bit shuffle: buffer lengths differ"
    );
    // SAFETY: as above; `scratch` is a third buffer of at least the same
    // size, the scratch c-blosc's bit shuffle asks for.
    let code = unsafe {
        blosc_internal_bitshuffle(
            typesize,
            src.len(),
            src.as_ptr(),
            dst.as_mut_ptr(),
            scratch.as_mut_ptr(),
        )
    };
    if code < 0 {
        return Err(Error::Compress(code));
    }
    Ok(())
}

/// 2-byte elements: low bytes, then high bytes, in one pass.
fn pairs(src: &[u8], dst: &mut [u8]) {
    let elems = src.len() / 2;
    if elems == 0 {
        return;
    }
    let mut rows = dst.chunks_exact_mut(elems);
    let planes: [&mut [u8]; 2] = std::array::from_fn(|_| rows.next().unwrap_or_default());
    for (e, element) in src.chunks_exact(2).enumerate() {
        for k in 0..2 {
            planes[k][e] = element[k];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c_blosc(typesize: usize, src: &[u8]) -> Vec<u8> {
        let mut dst = vec![0u8; src.len()];
        // SAFETY: both buffers are `src.len()` bytes.
        unsafe { blosc_internal_shuffle(typesize, src.len(), src.as_ptr(), dst.as_mut_ptr()) };
        dst
    }

    #[test]
    fn equals_c_blosc_for_every_typesize_and_length() {
        let src: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for typesize in 1..=17 {
            for n in [
                0, 1, 2, 3, 15, 16, 17, 255, 256, 1000, 4096, 65_536, 65_539, 70_000,
            ] {
                let mut ours = vec![0u8; n];
                byte_shuffle(typesize, &src[..n], &mut ours);
                assert!(
                    ours == c_blosc(typesize, &src[..n]),
                    "typesize {typesize}, {n} bytes"
                );
            }
        }
    }

    #[test]
    #[ignore]
    fn speed_against_c_blosc() {
        let src: Vec<u8> = (0..65_536u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut dst = vec![0u8; src.len()];
        for typesize in [2, 4, 8] {
            let t = std::time::Instant::now();
            for _ in 0..20_000 {
                byte_shuffle(typesize, std::hint::black_box(&src), &mut dst);
                std::hint::black_box(&dst);
            }
            let ours = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            for _ in 0..20_000 {
                // SAFETY: both buffers are 64 KiB.
                unsafe {
                    blosc_internal_shuffle(
                        typesize,
                        src.len(),
                        std::hint::black_box(&src).as_ptr(),
                        dst.as_mut_ptr(),
                    )
                };
                std::hint::black_box(&dst);
            }
            let theirs = t.elapsed().as_secs_f64();
            let gbps = |s: f64| 20_000.0 * 65_536.0 / s / 1e9;
            println!(
                "typesize {typesize}: ours {:.1} GB/s, c-blosc {:.1} GB/s",
                gbps(ours),
                gbps(theirs)
            );
        }
    }
}
