//! The Linux half of the platform layer: the memory accounting (`/proc`
//! and the cgroup file systems) and faulting in memory.

mod cgroup;
mod memory;

pub use memory::available_host_bytes;

/// Faults in the whole pages inside `region` in one call
/// (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14 and later) instead of one
/// fault per 4 KiB page on first touch: on a virtual machine each fault
/// is a trap into the hypervisor, and a 2-core machine's first stream
/// spent more time faulting in its staging than copying into it. Best
/// effort: an older kernel refuses the advice and the pages fault in as
/// they are touched.
pub fn fault_in(region: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    let start = (region as usize).next_multiple_of(PAGE);
    let end = (region as usize + len) / PAGE * PAGE;
    if end <= start {
        return;
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
