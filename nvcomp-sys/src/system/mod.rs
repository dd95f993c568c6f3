//! What differs between operating systems for finding and naming nvCOMP:
//! the library's file names, where NVIDIA's wheels and packages put it, and
//! how to ask which file a loaded address came from. One half per system;
//! nothing else in this crate says `cfg`.

#[cfg(unix)]
mod unix;
#[cfg(windows)]
mod windows;

#[cfg(unix)]
pub use unix::*;
#[cfg(windows)]
pub use windows::*;

/// The answers of a system with neither half: nothing found anywhere, so
/// the error lists only the loader names it tried.
#[cfg(not(any(unix, windows)))]
mod none {
    use std::ffi::OsString;
    use std::path::PathBuf;

    pub const FILE_NAMES: [&str; 0] = [];
    pub const LIBRARY_LABEL: &str = "nvCOMP's library";

    pub fn package_dirs(_env: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
        Vec::new()
    }
    pub fn site_patterns(
        _env: &dyn Fn(&str) -> Option<PathBuf>,
        _pp: Option<OsString>,
    ) -> Vec<PathBuf> {
        Vec::new()
    }
    pub const WHEEL_SUBDIRS: [&str; 0] = [];
    pub fn system_dirs(_env: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
        Vec::new()
    }
    pub fn loaded_from(_addr: usize) -> Option<PathBuf> {
        None
    }
}
#[cfg(not(any(unix, windows)))]
pub use none::*;
