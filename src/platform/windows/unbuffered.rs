//! Writes around the file cache on Windows: `FILE_FLAG_NO_BUFFERING`, on
//! fixed drives.

use std::fs::{File, OpenOptions};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::path::Path;
use windows_sys::Win32::Storage::FileSystem::{
    GetDriveTypeW, GetVolumePathNameW, FILE_FLAG_NO_BUFFERING,
};

/// `GetDriveTypeW`'s answer for a local disk (`DRIVE_FIXED` in
/// `winbase.h`); network shares, RAM disks and removable drives answer
/// otherwise.
const DRIVE_FIXED: u32 = 3;

pub fn writes_suit(folder: &Path) -> bool {
    let wide: Vec<u16> = folder.as_os_str().encode_wide().chain([0]).collect();
    let mut volume = [0u16; 1024];
    // SAFETY: `wide` is NUL-terminated and outlives the call; `volume` is
    // writable for the length passed.
    let ok = unsafe { GetVolumePathNameW(wide.as_ptr(), volume.as_mut_ptr(), volume.len() as u32) };
    if ok == 0 {
        return false;
    }
    // SAFETY: the call above wrote a NUL-terminated path into `volume`.
    unsafe { GetDriveTypeW(volume.as_ptr()) == DRIVE_FIXED }
}

pub fn create(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(FILE_FLAG_NO_BUFFERING)
        .open(path)
}
