//! The copy into staging memory. Nothing on the host reads a page-locked
//! staging buffer again (the DMA engine does), and the CPU backend reads a
//! large ordinary one only once it is full, long after its first bytes
//! left the caches, so the copy uses streaming stores: they skip the
//! read-for-ownership of every destination line that an ordinary `memcpy`
//! of pieces this size pays, a third of its traffic.

/// `dst.copy_from_slice(src)` with non-temporal stores where the CPU has
/// them.
pub fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_streaming: lengths differ");
    #[cfg(target_arch = "x86_64")]
    {
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        let body = (dst.len() - head) / 64 * 64;
        dst[..head].copy_from_slice(&src[..head]);
        stream_body(&mut dst[head..head + body], &src[head..head + body]);
        dst[head + body..].copy_from_slice(&src[head + body..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// `dst` 16-byte aligned (unless empty: a piece shorter than the
/// alignment leaves no body, at whatever address), both a multiple of 64
/// bytes long.
#[cfg(target_arch = "x86_64")]
fn stream_body(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    debug_assert!(
        (dst.is_empty() || (dst.as_ptr() as usize).is_multiple_of(16))
            && dst.len().is_multiple_of(64)
    );
    for (d, s) in dst.chunks_exact_mut(64).zip(src.chunks_exact(64)) {
        let (d, s) = (d.as_mut_ptr() as *mut __m128i, s.as_ptr() as *const __m128i);
        // SAFETY: SSE2 is part of every x86_64 CPU; `s` holds 64 readable
        // bytes (unaligned loads), `d` 64 writable bytes at a 16-byte
        // aligned address, as `_mm_stream_si128` requires.
        unsafe {
            let v = [
                _mm_loadu_si128(s),
                _mm_loadu_si128(s.add(1)),
                _mm_loadu_si128(s.add(2)),
                _mm_loadu_si128(s.add(3)),
            ];
            for (k, v) in v.into_iter().enumerate() {
                _mm_stream_si128(d.add(k), v);
            }
        }
    }
    // SAFETY: a store fence has no preconditions; it orders the streaming
    // stores before whatever hands the buffer to the device.
    unsafe { _mm_sfence() };
}

#[cfg(test)]
mod tests {
    use super::copy_streaming;

    #[test]
    fn copies_every_alignment_and_length() {
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        for offset in 0..17 {
            for len in [0, 1, 15, 16, 63, 64, 65, 200, 1000, 4000 - offset] {
                let mut dst = vec![0u8; 4096];
                copy_streaming(&mut dst[offset..offset + len], &src[..len]);
                assert_eq!(
                    &dst[offset..offset + len],
                    &src[..len],
                    "offset {offset} len {len}"
                );
                assert!(dst[..offset].iter().all(|&b| b == 0));
                assert!(dst[offset + len..].iter().all(|&b| b == 0));
            }
        }
    }
}
