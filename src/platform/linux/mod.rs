//! The Linux half of the platform layer: the memory accounting (`/proc`
//! and the cgroup file systems), faulting in memory, and writes around
//! the page cache.

mod cgroup;
mod memory;
mod unbuffered;

pub use memory::available_host_bytes;
pub use unbuffered::{create, writes_suit};

/// Faults in the whole pages inside `region`
/// (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14 and later) instead of one
/// fault per 4 KiB page on first touch: on a virtual machine each fault
/// is a trap into the hypervisor, and a 2-core machine's first stream
/// spent more time faulting in its staging than copying into it. Best
/// effort: an older kernel refuses the advice and the pages fault in as
/// they are touched.
///
/// With `TZ_HUGE_PAGES=1`, a region of `HUGE_REGION_BYTES` or more is
/// first advised to take transparent huge pages (`MADV_HUGEPAGE`, which
/// matters where the system's policy is `madvise`, the default of Debian
/// and Ubuntu): 2 MiB pages cost one fault, one accounting charge and one
/// page-table entry where 4 KiB pages cost 512. Not by default: where
/// free memory is fragmented, the kernel compacts it first, on the
/// faulting thread. Measured for cam-1k's first stream on two cores
/// (0.27 GB of frames, six processes each): 0.70-1.09 s with the advice
/// against 1.01-1.15 s without on a GPU machine of 128 GiB (pinned to two
/// of its cores), but 0.86-1.75 s against 0.81-1.02 s on a 2-core machine
/// of 23 GiB, with the same policy.
pub fn fault_in(region: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    let start = (region as usize).next_multiple_of(PAGE);
    let end = (region as usize + len) / PAGE * PAGE;
    if end <= start {
        return;
    }
    if end - start >= HUGE_REGION_BYTES && huge_pages_advised() {
        // SAFETY: as below; the advice changes how the pages are backed,
        // never their contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
    // SAFETY: [start, end) lies inside the caller's allocation, which it
    // owns and has not handed out; populating writes no data (the pages
    // read as zeros, as fresh anonymous memory does) and leaves the
    // mapping as it was.
    unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            end - start,
            libc::MADV_POPULATE_WRITE,
        );
    }
}

/// Regions from this size take the huge-page advice: a staging buffer, not
/// a small table.
const HUGE_REGION_BYTES: usize = 8 << 20;

/// Whether to advise huge pages: only with `TZ_HUGE_PAGES=1`.
fn huge_pages_advised() -> bool {
    std::env::var_os("TZ_HUGE_PAGES").is_some_and(|v| v == "1")
}
