//! Linux (and other unix): `libnvcomp.so.*`, the wheels' `lib64` folder,
//! `/proc/self/maps`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// File names tried in each folder and on the loader path: the newest
/// supported soname first, then the unversioned development symlink.
pub const FILE_NAMES: [&str; 3] = ["libnvcomp.so.6", "libnvcomp.so.5", "libnvcomp.so"];

/// How the messages name the library a user sets `TZ_NVCOMP_LIBRARY` to.
pub const LIBRARY_LABEL: &str = "libnvcomp.so";

/// Where the pip wheels put the library, below a site-packages folder.
pub const WHEEL_SUBDIRS: [&str; 1] = ["nvidia/libnvcomp/lib64"];

/// Folders a package manager puts the library in straight away: conda's
/// `nvcomp` package, in `$CONDA_PREFIX/lib`.
pub fn package_dirs(var: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    var("CONDA_PREFIX")
        .map(|c| c.join("lib"))
        .into_iter()
        .collect()
}

/// The site-packages folders (as globs over `python3*`-like names) that
/// may hold a wheel: the active environments first, each `PYTHONPATH`
/// entry, then the user's and the usual interpreter prefixes.
pub fn site_patterns(
    var: &dyn Fn(&str) -> Option<PathBuf>,
    pythonpath: Option<OsString>,
) -> Vec<PathBuf> {
    let mut patterns = Vec::new();
    for prefix in var("VIRTUAL_ENV").iter().chain(var("CONDA_PREFIX").iter()) {
        patterns.push(prefix.join("lib/python3*/site-packages"));
    }
    if let Some(pp) = pythonpath {
        patterns.extend(std::env::split_paths(&pp).filter(|d| !d.as_os_str().is_empty()));
    }
    if let Some(home) = var("HOME") {
        patterns.push(home.join(".local/lib/python3*/site-packages"));
        patterns.push(home.join(".pyenv/versions/*/lib/python3*/site-packages"));
    }
    for prefix in ["/usr/local/lib", "/usr/lib"] {
        patterns.push(Path::new(prefix).join("python3*/dist-packages"));
        patterns.push(Path::new(prefix).join("python3*/site-packages"));
    }
    patterns
}

/// The CUDA toolkit and distribution packages, last, in case the loader
/// cache does not cover them.
pub fn system_dirs(_var: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    vec![
        "/usr/local/cuda/lib64".into(),
        "/usr/lib/x86_64-linux-gnu".into(),
    ]
}

/// The file that the mapping containing `addr` comes from, read from
/// /proc/self/maps: the real path when the loader resolved a bare soname.
pub fn loaded_from(addr: usize) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|line| {
        let (range, _) = line.split_once(' ')?;
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        if !(start..end).contains(&addr) {
            return None;
        }
        // The path is the only field that contains '/'.
        line.find('/').map(|i| PathBuf::from(&line[i..]))
    })
}
