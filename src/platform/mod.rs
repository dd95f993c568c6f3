//! What differs between operating systems, behind one small interface: the
//! layers above ask their question here and never read an operating
//! system's files or call its interfaces themselves. Each answer has a half
//! per system: `unix` (files and disks on any unix), `linux` (its memory
//! accounting: `/proc`, cgroups; writes around the page cache) and
//! `windows`. A target without a half for
//! a question answers "unknown" where it can (`None`: no memory limit
//! known), and nothing else here says `cfg`.
//!
//! A file's identity is the same-file crate's on every system (device and
//! inode on unix, volume serial and file index on Windows).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(unix)]
mod unix;
#[cfg(windows)]
mod windows;

#[cfg(unix)]
use unix as files;
#[cfg(windows)]
use windows as files;

#[cfg(target_os = "linux")]
use linux as memory;
#[cfg(windows)]
use windows as memory;

/// The answers of a target with no memory accounting of its own yet.
#[cfg(not(any(target_os = "linux", windows)))]
mod memory {
    pub fn available_host_bytes() -> Option<u64> {
        None
    }
    pub fn fault_in(_region: *mut u8, _len: usize) {}
}

#[cfg(target_os = "linux")]
use linux as unbuffered;
#[cfg(windows)]
use windows as unbuffered;

/// The answers of a target without writes around the page cache yet.
#[cfg(not(any(target_os = "linux", windows)))]
mod unbuffered {
    pub fn writes_suit(_folder: &std::path::Path) -> bool {
        false
    }
    pub fn create(_path: &std::path::Path) -> std::io::Result<std::fs::File> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

use std::fs::File;
use std::path::Path;

/// The NVIDIA driver's library, as the system's loader names it.
pub const CUDA_DRIVER: &str = files::CUDA_DRIVER;

/// Bytes of memory this process can still take without being killed or
/// refused, as far as the system says; `None` where it says nothing.
///
/// Linux: `MemAvailable`, lowered to what the memory limit of the process's
/// cgroup and of every cgroup above it (v1 or v2) leaves, and to what an
/// address-space limit (`ulimit -v`) leaves. Windows: the available
/// physical memory (`GlobalMemoryStatusEx`), lowered to what a job object's
/// process or job memory limit leaves.
pub fn available_host_bytes() -> Option<u64> {
    memory::available_host_bytes()
}

/// Makes the `len` bytes at `region` (the spare capacity of a large
/// buffer about to be filled, owned by the caller) resident in one call
/// rather than a page fault per page on first touch. Linux only
/// (`MADV_POPULATE_WRITE`); elsewhere nothing.
pub fn fault_in(region: *mut u8, len: usize) {
    memory::fault_in(region, len)
}

/// A vector of `len` zero bytes with its pages resident, or `None` where
/// the memory cannot be had. Taken zeroed from the allocator (for a large
/// buffer, fresh pages that the allocator knows read as zeros and does not
/// write) and made resident by [`fault_in`]: the memory is written once,
/// by the kernel clearing its pages, not a second time by a fill.
pub fn zeroed_resident_bytes(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: the layout's size is not zero.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    fault_in(ptr, len);
    // SAFETY: `ptr` comes from the global allocator with the layout of
    // `len` bytes of alignment 1, every one of them initialised (zero); the
    // vector owns it from here and frees it with that same layout.
    Some(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// A file's (or folder's) identity, to tell whether a path still names the
/// file it named before. Holds the file open (on Windows with every sharing
/// flag, so that it can still be renamed or removed).
pub struct FileId(same_file::Handle);

impl FileId {
    pub fn of_path(path: &Path) -> std::io::Result<FileId> {
        same_file::Handle::from_path(path).map(FileId)
    }

    pub fn of_file(file: &File) -> std::io::Result<FileId> {
        same_file::Handle::from_file(file.try_clone()?).map(FileId)
    }

    /// Whether `path` names this file now.
    pub fn is_at(&self, path: &Path) -> bool {
        FileId::of_path(path).is_ok_and(|now| now.0 == self.0)
    }
}

/// Flushes a folder's entries (a rename or a new file in it) to the disk.
/// On Windows NTFS journals a folder's entries itself and a folder cannot be
/// flushed as a file: nothing to do.
pub fn sync_folder(folder: &Path) -> std::io::Result<()> {
    files::sync_folder(folder)
}

/// Takes an exclusive advisory lock on `file` without waiting: whether it
/// was taken. Others can still read the file (the holder's process id).
pub fn try_lock(file: &File) -> std::io::Result<bool> {
    files::try_lock(file)
}

/// Renames `from` to `to`, replacing a file at `to` atomically: a reader
/// sees the old file or the new one. Windows refuses to replace a file that
/// another program holds open without delete sharing (C's `fopen`,
/// Python's `open`); readers hold `zarr.json` for the moment they read
/// it, so the rename is tried again for up to `patience` (at least once);
/// after that the error's kind is `ResourceBusy`. Each refusal calls
/// `refused`: the disk answered (a store counts it as such, so that a
/// reader's hold is not taken for a disk that stalls).
pub fn replace_file(
    from: &Path,
    to: &Path,
    patience: std::time::Duration,
    refused: &dyn Fn(),
) -> std::io::Result<()> {
    files::replace_file(from, to, patience, refused)
}

/// Why this system cannot hold a file or folder at `path`, if it cannot:
/// on Windows the names it reserves for devices (`CON`, `NUL`, `COM1`, ...,
/// with any extension), the characters `<>:"|?*` and control characters in
/// a name, and names ending in a dot or a space (which Windows silently
/// strips, so the folder would not be the one named). Elsewhere `None`.
pub fn unusable_path(path: &Path) -> Option<String> {
    files::unusable_path(path)
}

/// Asks the system to write every dirty page to the disks (benchmarks, so
/// that one run's write-back is not charged to the next). Best effort.
pub fn sync_disks() {
    files::sync_disks()
}

/// What writes around the page cache need aligned: the address of the
/// bytes written, their length and their offset in the file. 4 KiB, the
/// sector of every common disk; a disk whose sectors are larger refuses
/// such writes, and the writer then goes through the page cache.
pub const UNBUFFERED_ALIGN: usize = 4096;

/// Whether files in `folder` are best written around the page cache: on
/// a local disk's file system that takes such writes (Linux: ext4, XFS,
/// btrfs, f2fs; Windows: a fixed drive). Not on a network mount, where
/// each such write waits for the server, nor in memory (tmpfs). Elsewhere
/// `false`.
pub fn unbuffered_writes_suit(folder: &Path) -> bool {
    unbuffered::writes_suit(folder)
}

/// Creates (or truncates) the file at `path` for writing around the page
/// cache (Linux `O_DIRECT`, Windows `FILE_FLAG_NO_BUFFERING`): every write
/// must be of whole [`UNBUFFERED_ALIGN`] blocks from memory aligned as
/// much, at an aligned offset; `File::set_len` then gives the file its
/// length. A file system that takes no such writes answers `InvalidInput`
/// here or at the first write; elsewhere `Unsupported`.
pub fn create_unbuffered(path: &Path) -> std::io::Result<File> {
    unbuffered::create(path)
}
