//! Windows: `nvcomp64_<major>.dll`, the wheels' `bin` folder, the module
//! that holds an address from the loader itself.
//!
//! NVIDIA's `win_amd64` wheels of its CUDA libraries keep their DLLs in
//! `nvidia/<package>/bin`; `lib64` is looked at too, as the Linux wheels
//! name it. The nvCOMP installer puts its DLLs in
//! `C:\Program Files\NVIDIA nvCOMP\v<version>\bin\<CUDA major>`.

use std::ffi::OsString;
use std::os::windows::ffi::OsStringExt;
use std::path::PathBuf;

use windows_sys::Win32::Foundation::HMODULE;
use windows_sys::Win32::System::LibraryLoader::{
    GetModuleFileNameW, GetModuleHandleExW, GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
    GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
};

/// File names tried in each folder and through the loader's search (the
/// application's folder, the system folders, `PATH`): the newest supported
/// major version first.
pub const FILE_NAMES: [&str; 2] = ["nvcomp64_6.dll", "nvcomp64_5.dll"];

/// How the messages name the library a user sets `TZ_NVCOMP_LIBRARY` to.
pub const LIBRARY_LABEL: &str = "nvcomp64_<major>.dll";

/// Where the pip wheels put the DLL, below a site-packages folder.
pub const WHEEL_SUBDIRS: [&str; 2] = ["nvidia/libnvcomp/bin", "nvidia/libnvcomp/lib64"];

/// Folders a package manager puts the DLL in straight away: conda's
/// `nvcomp` package, in `%CONDA_PREFIX%\Library\bin`.
pub fn package_dirs(var: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    var("CONDA_PREFIX")
        .map(|c| c.join("Library").join("bin"))
        .into_iter()
        .collect()
}

/// The site-packages folders (as globs) that may hold a wheel: the active
/// environments first, each `PYTHONPATH` entry, then the per-user and the
/// per-machine installs of python.org's installer.
pub fn site_patterns(
    var: &dyn Fn(&str) -> Option<PathBuf>,
    pythonpath: Option<OsString>,
) -> Vec<PathBuf> {
    let mut patterns = Vec::new();
    for prefix in var("VIRTUAL_ENV").iter().chain(var("CONDA_PREFIX").iter()) {
        patterns.push(prefix.join("Lib").join("site-packages"));
    }
    if let Some(pp) = pythonpath {
        patterns.extend(std::env::split_paths(&pp).filter(|d| !d.as_os_str().is_empty()));
    }
    if let Some(appdata) = var("APPDATA") {
        patterns.push(
            appdata
                .join("Python")
                .join("Python3*")
                .join("site-packages"),
        );
    }
    if let Some(local) = var("LOCALAPPDATA") {
        patterns.push(
            local
                .join("Programs")
                .join("Python")
                .join("Python3*")
                .join("Lib")
                .join("site-packages"),
        );
    }
    if let Some(programs) = var("ProgramFiles") {
        patterns.push(programs.join("Python3*").join("Lib").join("site-packages"));
    }
    patterns
}

/// nvCOMP's own installer, newest version and CUDA major first; then the
/// CUDA toolkit's `bin`.
pub fn system_dirs(var: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(programs) = var("ProgramFiles") {
        dirs.extend(crate::search::expand(
            &programs
                .join("NVIDIA nvCOMP")
                .join("v*")
                .join("bin")
                .join("*"),
        ));
    }
    if let Some(cuda) = var("CUDA_PATH") {
        dirs.push(cuda.join("bin"));
    }
    dirs
}

/// The file of the module that holds `addr`, asked of the loader: the real
/// path when it resolved a bare DLL name.
pub fn loaded_from(addr: usize) -> Option<PathBuf> {
    let mut module: HMODULE = std::ptr::null_mut();
    // SAFETY: FROM_ADDRESS takes `addr` as an address inside a module, not
    // a name; UNCHANGED_REFCOUNT leaves the module's count as it is, so
    // nothing is to be released; `module` is a valid out-pointer.
    let found = unsafe {
        GetModuleHandleExW(
            GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
            addr as *const u16,
            &mut module,
        )
    };
    if found == 0 {
        return None;
    }
    // Long paths: grow the buffer until the name fits.
    let mut buffer = vec![0u16; 260];
    loop {
        // SAFETY: `buffer` is writable for its length; `module` is loaded
        // (it holds `addr`, which the caller's library keeps mapped).
        let n = unsafe { GetModuleFileNameW(module, buffer.as_mut_ptr(), buffer.len() as u32) }
            as usize;
        if n == 0 {
            return None;
        }
        if n < buffer.len() {
            return Some(PathBuf::from(OsString::from_wide(&buffer[..n])));
        }
        if buffer.len() >= 1 << 15 {
            return None;
        }
        buffer.resize(buffer.len() * 2, 0);
    }
}
