//! Writes around the page cache on Linux: `O_DIRECT`, on the local disk
//! file systems known to take it well.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `statfs` magic numbers (`linux/magic.h`) of the file systems whose
/// `O_DIRECT` writes go straight to a local block device: ext2/3/4, XFS,
/// btrfs, f2fs. Not NFS, SMB or FUSE (each write a round trip to a server
/// or a daemon), nor tmpfs (memory: nothing to go around).
const LOCAL_DISK_FILE_SYSTEMS: [u64; 4] = [0xEF53, 0x5846_5342, 0x9123_683E, 0xF2F5_2010];

pub fn writes_suit(folder: &Path) -> bool {
    file_system_magic(folder).is_some_and(|m| LOCAL_DISK_FILE_SYSTEMS.contains(&m))
}

/// The `statfs` magic number of the file system holding `path`.
fn file_system_magic(path: &Path) -> Option<u64> {
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statfs` is plain data; all zeros is a valid value that the
    // call overwrites.
    let mut info: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string that outlives the call;
    // `info` is a writable `statfs` owned here.
    if unsafe { libc::statfs(path.as_ptr(), &mut info) } != 0 {
        return None;
    }
    // The field's type differs between architectures (a signed word on
    // most): the magic number is its low 32 bits.
    Some(info.f_type as u64 & 0xFFFF_FFFF)
}

pub fn create(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_file_systems_are_not_taken_for_disks() {
        // /proc and /sys are never a disk's, /dev/shm is memory (tmpfs,
        // which takes O_DIRECT since Linux 6.6, to no purpose).
        assert!(!writes_suit(Path::new("/proc")));
        assert!(!writes_suit(Path::new("/sys")));
        if Path::new("/dev/shm").is_dir() {
            assert!(!writes_suit(Path::new("/dev/shm")));
        }
        assert!(file_system_magic(Path::new("/proc")).is_some());
        assert_eq!(file_system_magic(Path::new("/no/such/folder")), None);
    }
}
