//! The Windows half: files, disks and memory, through windows-sys.

mod memory;
mod names;
mod unbuffered;

pub use memory::available_host_bytes;
pub use names::unusable_path;
pub use unbuffered::{create, writes_suit};

use std::fs::File;
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use std::time::{Duration, Instant};
use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_LOCK_VIOLATION, ERROR_SHARING_VIOLATION, HANDLE,
};
use windows_sys::Win32::Storage::FileSystem::{
    LockFileEx, LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

pub const CUDA_DRIVER: &str = "nvcuda.dll";

/// Windows commits a buffer's pages as they are touched; its bulk call
/// (`PrefetchVirtualMemory`) reads in file-backed pages only: nothing to
/// do here.
pub fn fault_in(_region: *mut u8, _len: usize) {}

/// NTFS journals a folder's entries (a rename, a new file) itself, and a
/// folder handle cannot be flushed: nothing to do.
pub fn sync_folder(_folder: &Path) -> std::io::Result<()> {
    Ok(())
}

/// The standard library's rename replaces the target with POSIX semantics
/// where the file system offers them (NTFS on Windows 10 1607 and later: a
/// reader that opened the file with delete sharing keeps reading the old
/// one), else with `MoveFileExW`. Either is refused while a reader holds
/// the target without delete sharing: tried again, waiting a little longer
/// each time, for `patience`.
pub fn replace_file(
    from: &Path,
    to: &Path,
    patience: Duration,
    refused: &dyn Fn(),
) -> std::io::Result<()> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        let e = match std::fs::rename(from, to) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let held = matches!(e.raw_os_error(),
            Some(c) if c == ERROR_SHARING_VIOLATION as i32 || c == ERROR_ACCESS_DENIED as i32);
        if !held {
            return Err(e);
        }
        refused();
        if started.elapsed() >= patience {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!(
                    "another program holds it open without delete sharing (tried for {} ms): {e}",
                    patience.as_millis()
                ),
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// The locked range: one byte far past any data. Windows' byte-range locks
/// are mandatory (a locked byte cannot be read by another process), so the
/// lock stays clear of the process id written at the start of the file.
const LOCK_OFFSET: u64 = 1 << 62;

pub fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: OVERLAPPED is plain data; all zeros is its documented
    // initial state before the offset is set.
    let mut at: OVERLAPPED = unsafe { std::mem::zeroed() };
    at.Anonymous.Anonymous.Offset = LOCK_OFFSET as u32;
    at.Anonymous.Anonymous.OffsetHigh = (LOCK_OFFSET >> 32) as u32;
    let flags = LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY;
    // SAFETY: the handle is the open file's, valid while `file` lives; the
    // OVERLAPPED outlives the call, which does not wait (FAIL_IMMEDIATELY
    // on a handle opened for synchronous I/O). The lock goes with the
    // handle when the file is closed.
    let ok = unsafe { LockFileEx(file.as_raw_handle() as HANDLE, flags, 0, 1, 0, &mut at) };
    if ok != 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(code) if code == ERROR_LOCK_VIOLATION as i32 => Ok(false),
        _ => Err(e),
    }
}

/// Windows has no call that flushes every volume for an unprivileged
/// process: a benchmark's files are flushed one by one instead.
pub fn sync_disks() {}
