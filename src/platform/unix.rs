//! The unix half of files and disks.

use std::fs::File;

use std::path::Path;
use std::time::Duration;

pub const CUDA_DRIVER: &str = "libcuda.so.1";

/// rename(2) replaces the target whoever holds it open.
pub fn replace_file(
    from: &Path,
    to: &Path,
    _patience: Duration,
    _refused: &dyn Fn(),
) -> std::io::Result<()> {
    std::fs::rename(from, to)
}

/// Any name but the empty one and NUL bytes (which opening refuses with
/// its own message) is a valid file name.
pub fn unusable_path(_path: &Path) -> Option<String> {
    None
}

pub fn sync_folder(folder: &Path) -> std::io::Result<()> {
    File::open(folder)?.sync_all()
}

/// `flock`: the lock covers no bytes, so others read the file freely.
pub fn try_lock(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

pub fn sync_disks() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}
