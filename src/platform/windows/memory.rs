//! The memory this process may still take on Windows: the available
//! physical memory, lowered to what a job object's limits leave (a job is
//! how services, containers and schedulers cap a process's memory).

use windows_sys::Win32::System::JobObjects::{
    JobObjectExtendedLimitInformation, QueryInformationJobObject,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_JOB_MEMORY,
    JOB_OBJECT_LIMIT_PROCESS_MEMORY,
};
use windows_sys::Win32::System::ProcessStatus::{GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows_sys::Win32::System::SystemInformation::{GlobalMemoryStatusEx, MEMORYSTATUSEX};
use windows_sys::Win32::System::Threading::GetCurrentProcess;

pub fn available_host_bytes() -> Option<u64> {
    [physical_available(), job_headroom()]
        .into_iter()
        .flatten()
        .min()
}

/// The available physical memory. A status with no total is no answer:
/// Wine's `GlobalMemoryStatusEx` keeps its last answer for a second, and a
/// thread that asks while another is filling it in for the first time gets
/// it still all zeros (streams created at once in a new process under Wine
/// were refused with "0 bytes available"). Asked again a moment later, the
/// answer is there; still none after that, the system says nothing.
fn physical_available() -> Option<u64> {
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // SAFETY: MEMORYSTATUSEX is plain data; the call reads dwLength,
        // set below, and fills the rest.
        let mut status: MEMORYSTATUSEX = unsafe { std::mem::zeroed() };
        status.dwLength = std::mem::size_of::<MEMORYSTATUSEX>() as u32;
        // SAFETY: `status` is a valid, writable MEMORYSTATUSEX of that length.
        let ok = unsafe { GlobalMemoryStatusEx(&mut status) };
        if ok == 0 {
            return None;
        }
        if status.ullTotalPhys > 0 {
            return Some(status.ullAvailPhys);
        }
    }
    None
}

/// What the job object the process runs in (if any) leaves it: the process
/// limit less its committed memory, the job limit less the job's peak.
fn job_headroom() -> Option<u64> {
    // SAFETY: plain data, filled by the call below.
    let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a null job handle asks about the calling process's job; the
    // buffer is the structure this information class fills, with its size.
    let ok = unsafe {
        QueryInformationJobObject(
            std::ptr::null_mut(),
            JobObjectExtendedLimitInformation,
            (&mut info as *mut JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return None; // not in a job
    }
    let flags = info.BasicLimitInformation.LimitFlags;
    let mut headroom: Option<u64> = None;
    if flags & JOB_OBJECT_LIMIT_PROCESS_MEMORY != 0 {
        let used = process_commit().unwrap_or(0);
        headroom = Some((info.ProcessMemoryLimit as u64).saturating_sub(used));
    }
    if flags & JOB_OBJECT_LIMIT_JOB_MEMORY != 0 {
        let left = (info.JobMemoryLimit as u64).saturating_sub(info.PeakJobMemoryUsed as u64);
        headroom = Some(headroom.map_or(left, |h| h.min(left)));
    }
    headroom
}

/// The memory this process has committed (what a job's process limit
/// counts).
fn process_commit() -> Option<u64> {
    // SAFETY: plain data, filled by the call below.
    let mut c: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    // SAFETY: the pseudo-handle of the current process needs no closing;
    // `c` is writable and `size` its size.
    let ok = unsafe { GetProcessMemoryInfo(GetCurrentProcess(), &mut c, size) };
    (ok != 0).then_some(c.PagefileUsage as u64)
}
