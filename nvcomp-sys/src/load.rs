//! Opening libnvcomp, checking its version and resolving its entry points.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use libloading::Library;

use crate::error::Error;
use crate::ffi;
use crate::search::{self, Candidate, FILE_NAMES};
use crate::status::Status;
use crate::{AbiVersion, Fns, Nvcomp, TempSizeFns};

/// Why one candidate was not used.
enum Rejection {
    /// dlopen failed (missing file, not a shared object, unmet dependency).
    Open(String),
    /// It opened, but is not a usable nvCOMP.
    Unusable(Error),
}

impl Rejection {
    fn describe(self) -> String {
        match self {
            Rejection::Open(s) => s,
            Rejection::Unusable(e) => e.to_string(),
        }
    }
}

impl Nvcomp {
    /// Loads nvCOMP 5.x or 6.x.
    ///
    /// With `explicit`, only that file is tried; otherwise, when the
    /// `TZ_NVCOMP_LIBRARY` environment variable is set and non-empty, only
    /// the file it names. Otherwise, in order: the folders registered with
    /// [`crate::add_search_dir`], `libnvcomp.so.6`,
    /// `libnvcomp.so.5` and `libnvcomp.so` through the dynamic loader's own
    /// search (LD_LIBRARY_PATH, ld.so.cache, ...); then `$CONDA_PREFIX/lib`;
    /// then the pip wheels' `nvidia/libnvcomp/lib64` below the site-packages
    /// of `$VIRTUAL_ENV`, `$CONDA_PREFIX`, each `$PYTHONPATH` entry,
    /// `~/.local/lib/python3*`, `~/.pyenv/versions/*/lib/python3*`,
    /// `/usr/local/lib/python3*` and `/usr/lib/python3*`; then
    /// `/usr/local/cuda/lib64` and `/usr/lib/x86_64-linux-gnu`. On Windows
    /// the same order with `nvcomp64_6.dll` and `nvcomp64_5.dll` through the
    /// loader's search (the program's folder, the system folders, `PATH`),
    /// `%CONDA_PREFIX%\Library\bin`, the wheels' `nvidia\libnvcomp\bin`
    /// below each environment's `Lib\site-packages` and the python.org
    /// installs, nvCOMP's installer folders and `%CUDA_PATH%\bin` (see
    /// the `system` module). The first library that opens, reports a
    /// supported version and exports every needed symbol wins.
    ///
    /// Errors: [`Error::NotFound`] listing every place tried and why it was
    /// rejected; when the only candidate (explicit or from the environment)
    /// opened but was unusable, the specific [`Error::UnsupportedVersion`],
    /// [`Error::MissingSymbol`] or [`Error::Status`] instead.
    ///
    /// Needs no GPU: nvCOMP loads the CUDA driver lazily, so loading and
    /// the host-only queries work on a machine without libcuda.so.1.
    pub fn load(explicit: Option<&Path>) -> Result<Nvcomp, Error> {
        let preferred = search::preferred_dirs();
        load_from(search::candidates(explicit, &preferred, &|k| {
            std::env::var_os(k)
        }))
    }
}

fn load_from(candidates: Vec<Candidate>) -> Result<Nvcomp, Error> {
    let single = matches!(candidates.as_slice(), [Candidate::File { .. }]);
    let mut tried: Vec<(String, String)> = Vec::new();
    for candidate in candidates {
        match candidate {
            Candidate::File { path, label } => match open(path.as_os_str()) {
                Ok(n) => return Ok(n),
                Err(Rejection::Unusable(e)) if single => return Err(e),
                Err(r) => tried.push((label, r.describe())),
            },
            Candidate::LoaderName(name) => match open(OsStr::new(name)) {
                Ok(n) => return Ok(n),
                Err(r) => tried.push((name.to_string(), r.describe())),
            },
            Candidate::Dir(dir) => {
                let label = dir.display().to_string();
                if !dir.is_dir() {
                    tried.push((label, "no such directory".into()));
                    continue;
                }
                let mut present = false;
                for name in FILE_NAMES {
                    let path = dir.join(name);
                    if !path.exists() {
                        continue;
                    }
                    present = true;
                    match open(path.as_os_str()) {
                        Ok(n) => return Ok(n),
                        Err(r) => tried.push((path.display().to_string(), r.describe())),
                    }
                }
                if !present {
                    tried.push((label, format!("contains none of {}", FILE_NAMES.join(", "))));
                }
            }
            Candidate::NoMatch(pattern) => tried.push((pattern, "no such directory".into())),
        }
    }
    Err(Error::NotFound { tried })
}

fn open(target: &OsStr) -> Result<Nvcomp, Rejection> {
    // SAFETY: dlopen runs the library's initialisers. The candidates are
    // files named libnvcomp.so* or the file the user chose to name, which
    // we trust to be nvCOMP; nothing else is executed before its version
    // and symbols are checked.
    let lib =
        unsafe { Library::new(target) }.map_err(|e| Rejection::Open(dl_reason(&e, target)))?;
    let fallback = PathBuf::from(target);
    bind(lib, fallback).map_err(Rejection::Unusable)
}

// dlerror() repeats the file name in front of the reason; the error list
// already shows it.
fn dl_reason(e: &libloading::Error, target: &OsStr) -> String {
    let s = e.to_string();
    let prefix = format!("{}: ", target.to_string_lossy());
    s.strip_prefix(&prefix).map(str::to_owned).unwrap_or(s)
}

/// Copies symbol `name` out of `lib` as a `T`.
///
/// # Safety
/// `T` must be the exact function-pointer type of `name` in the loaded
/// library's ABI, and the pointer must not outlive `lib`.
unsafe fn sym<T: Copy>(lib: &Library, name: &str) -> Option<T> {
    // SAFETY: upheld by the caller (see above); `get` appends the NUL.
    unsafe { lib.get::<T>(name.as_bytes()) }.ok().map(|s| *s)
}

fn bind(lib: Library, fallback: PathBuf) -> Result<Nvcomp, Error> {
    // SAFETY: ffi::GetPropertiesFn is nvcompGetProperties' signature in
    // every nvCOMP that has it; the pointer is only used while `lib` lives
    // (below, or after `lib` is leaked).
    let get_properties: Option<ffi::GetPropertiesFn> = unsafe { sym(&lib, "nvcompGetProperties") };
    let path = get_properties
        .and_then(|f| loaded_from(f as usize))
        .unwrap_or(fallback);
    let Some(get_properties) = get_properties else {
        return Err(Error::MissingSymbol {
            path,
            symbol: "nvcompGetProperties",
            version: None,
        });
    };
    let mut properties = ffi::Properties::default();
    // SAFETY: `properties` is a valid, writable nvcompProperties_t.
    let status = Status(unsafe { get_properties(&mut properties) });
    if !status.is_success() {
        return Err(Error::status("nvcompGetProperties", status));
    }
    let version = crate::decode_version(properties.version);
    let abi = match version.0 {
        5 => AbiVersion::V5,
        6 => AbiVersion::V6,
        _ => return Err(Error::UnsupportedVersion { path, version }),
    };

    let missing = |symbol| Error::MissingSymbol {
        path: path.clone(),
        symbol,
        version: Some(version),
    };
    macro_rules! need {
        ($name:literal) => {
            // SAFETY: each call site assigns the result to the ffi type
            // transcribed from the header of this ABI for `$name`; `lib`
            // is leaked on success, so the pointers never dangle.
            unsafe { sym(&lib, $name) }.ok_or_else(|| missing($name))?
        };
    }
    let temp_size = match abi {
        AbiVersion::V5 => TempSizeFns::V5 {
            compress: need!("nvcompBatchedZstdCompressGetTempSizeAsync"),
            decompress: need!("nvcompBatchedZstdDecompressGetTempSizeAsync"),
        },
        AbiVersion::V6 => TempSizeFns::V6 {
            compress: need!("nvcompBatchedZstdCompressGetTempSize"),
            decompress: need!("nvcompBatchedZstdDecompressGetTempSize"),
        },
    };
    let fns = Fns {
        compress_alignments: need!("nvcompBatchedZstdCompressGetRequiredAlignments"),
        decompress_alignments: need!("nvcompBatchedZstdDecompressGetRequiredAlignments"),
        max_output_chunk_size: need!("nvcompBatchedZstdCompressGetMaxOutputChunkSize"),
        compress_async: need!("nvcompBatchedZstdCompressAsync"),
        decompress_async: need!("nvcompBatchedZstdDecompressAsync"),
        temp_size,
        // SAFETY: as in `need!`; optional because 5.1 lacks it.
        status_string: unsafe { sym(&lib, "nvcompGetStatusString") },
    };

    let lookup = |name: &'static str| -> Option<*const std::ffi::c_void> {
        // SAFETY: only the address is read; `resolve` gives it its type.
        unsafe { sym::<*const std::ffi::c_void>(&lib, name) }
    };
    let compressors = crate::batched::Algorithm::ALL.map(|a| {
        // SAFETY: `lookup` reads this ABI's nvCOMP, leaked below.
        unsafe { crate::batched::resolve(a, abi, &lookup) }
    });

    // Never dlclose nvCOMP: it carries a static CUDA runtime whose
    // teardown while other threads or queued GPU work still use it is not
    // something NVIDIA supports, and keeping it mapped lets `Nvcomp` be a
    // plain copyable table of function pointers.
    std::mem::forget(lib);
    Ok(Nvcomp {
        path,
        abi,
        properties,
        fns,
        compressors,
    })
}

/// The file the loaded module holding `addr` comes from: the real path
/// when the loader resolved a bare name.
fn loaded_from(addr: usize) -> Option<PathBuf> {
    crate::system::loaded_from(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_from_finds_this_binary() {
        let here =
            loaded_from(loaded_from as fn(usize) -> Option<PathBuf> as usize).expect("own mapping");
        let exe = std::env::current_exe().unwrap();
        assert_eq!(here.file_name(), exe.file_name());
    }

    #[test]
    fn missing_directories_and_globs_are_listed() {
        let err = load_from(vec![
            Candidate::Dir("/nonexistent/nvcomp-dir".into()),
            Candidate::NoMatch("/nonexistent/python3*/site-packages".into()),
        ])
        .err()
        .unwrap();
        let Error::NotFound { tried } = err else {
            panic!("expected NotFound");
        };
        assert_eq!(
            tried,
            vec![
                (
                    "/nonexistent/nvcomp-dir".to_string(),
                    "no such directory".to_string()
                ),
                (
                    "/nonexistent/python3*/site-packages".to_string(),
                    "no such directory".to_string()
                ),
            ]
        );
    }

    #[test]
    fn empty_directory_says_what_it_lacked() {
        let dir = std::env::temp_dir().join(format!("nvcomp-sys-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = load_from(vec![Candidate::Dir(dir.clone())]).err().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("contains none of {}", FILE_NAMES.join(", "))),
            "{msg}"
        );
    }
}
