//! What differs between operating systems, behind one small interface: the
//! layers above ask their question here (how much memory this process may
//! still take) and never read an operating system's files or call its
//! interfaces themselves. Each system's answers live in a half of their
//! own (`linux`), used as `os`; a target without one answers "unknown"
//! (`None`), which callers treat as no limit.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;

/// The answers of a target that has no half of its own yet.
#[cfg(not(target_os = "linux"))]
mod os {
    pub fn available_host_bytes() -> Option<u64> {
        None
    }
}

/// Bytes of memory this process can still take without being killed or
/// refused, as far as the system says; `None` where it says nothing (no
/// half for this target, or none of its figures could be read).
///
/// On Linux: `MemAvailable`, lowered to what the memory limit of the
/// process's cgroup and of every cgroup above it (v1 or v2) leaves, and to
/// what an address-space limit (`ulimit -v`) leaves.
pub fn available_host_bytes() -> Option<u64> {
    os::available_host_bytes()
}
