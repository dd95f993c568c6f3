//! Where to look for libnvcomp, in order.
//!
//! The environment is passed in as a function so the order can be tested
//! without touching the process environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Environment variable naming the library file to load.
pub const ENV_LIBRARY: &str = "TZ_NVCOMP_LIBRARY";

/// File names tried in each directory and on the loader path: the newest
/// supported soname first, then the unversioned development symlink.
pub const FILE_NAMES: [&str; 3] = ["libnvcomp.so.6", "libnvcomp.so.5", "libnvcomp.so"];

/// Where the pip wheels put the library, below a site-packages directory.
const WHEEL_SUBDIR: &str = "nvidia/libnvcomp/lib64";

/// Folders a host application registered with [`add_search_dir`].
static PREFERRED_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Adds a folder to look for [`FILE_NAMES`] in before the loader's own
/// search: where the host application knows nvCOMP lies (a Python package
/// finds the `nvidia-libnvcomp` wheel of its own environment and registers
/// its folder). An explicit path and [`ENV_LIBRARY`] still come first.
/// Folders are tried in the order they were added; adding one twice keeps
/// the first.
pub fn add_search_dir(dir: impl Into<PathBuf>) {
    let dir = dir.into();
    let mut dirs = PREFERRED_DIRS.lock().unwrap_or_else(|p| p.into_inner());
    if !dirs.contains(&dir) {
        dirs.push(dir);
    }
}

/// The folders registered with [`add_search_dir`].
pub fn preferred_dirs() -> Vec<PathBuf> {
    PREFERRED_DIRS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// One place to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Candidate {
    /// A file named by the caller or by [`ENV_LIBRARY`]; `label` says which.
    File { path: PathBuf, label: String },
    /// A bare soname for the dynamic loader (LD_LIBRARY_PATH, ld.so.cache, ...).
    LoaderName(&'static str),
    /// A directory to look for [`FILE_NAMES`] in.
    Dir(PathBuf),
    /// A glob that matched no directory; kept so the error lists it.
    NoMatch(String),
}

/// The places to try. An explicit path, else a non-empty [`ENV_LIBRARY`],
/// is the only candidate: whoever names a library wants that one, and
/// silently falling back to another could load a different version than the
/// one they chose. Otherwise the `preferred` folders (see
/// [`add_search_dir`]) come first, then the usual places.
pub fn candidates(
    explicit: Option<&Path>,
    preferred: &[PathBuf],
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<Candidate> {
    if let Some(path) = explicit {
        return vec![Candidate::File {
            path: path.to_path_buf(),
            label: path.display().to_string(),
        }];
    }
    if let Some(path) = env(ENV_LIBRARY).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        let label = format!("{ENV_LIBRARY}={}", path.display());
        return vec![Candidate::File { path, label }];
    }

    let mut out: Vec<Candidate> = preferred.iter().cloned().map(Candidate::Dir).collect();
    out.extend(FILE_NAMES.iter().map(|n| Candidate::LoaderName(n)));
    let push_dir = |out: &mut Vec<Candidate>, dir: PathBuf| {
        let c = Candidate::Dir(dir);
        if !out.contains(&c) {
            out.push(c);
        }
    };
    let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let conda = var("CONDA_PREFIX");
    let venv = var("VIRTUAL_ENV");
    let home = var("HOME");

    // conda's `nvcomp` package puts the library straight into $CONDA_PREFIX/lib.
    if let Some(conda) = &conda {
        push_dir(&mut out, conda.join("lib"));
    }
    // The pip wheels: the active environments first, then the usual
    // interpreter prefixes. Globs only over `python3*`-like names, so
    // this stays a handful of read_dir calls.
    let mut patterns: Vec<PathBuf> = Vec::new();
    for prefix in venv.iter().chain(conda.iter()) {
        patterns.push(prefix.join("lib/python3*/site-packages"));
    }
    if let Some(pp) = env("PYTHONPATH") {
        for dir in std::env::split_paths(&pp).filter(|d| !d.as_os_str().is_empty()) {
            patterns.push(dir);
        }
    }
    if let Some(home) = &home {
        patterns.push(home.join(".local/lib/python3*/site-packages"));
        patterns.push(home.join(".pyenv/versions/*/lib/python3*/site-packages"));
    }
    for prefix in ["/usr/local/lib", "/usr/lib"] {
        patterns.push(Path::new(prefix).join("python3*/dist-packages"));
        patterns.push(Path::new(prefix).join("python3*/site-packages"));
    }
    for pattern in patterns {
        let pattern = pattern.join(WHEEL_SUBDIR);
        let found = expand(&pattern);
        if found.is_empty() {
            out.push(Candidate::NoMatch(pattern.display().to_string()));
        }
        for dir in found {
            push_dir(&mut out, dir);
        }
    }
    // The CUDA toolkit and distribution packages, in case the loader cache
    // does not cover them.
    for dir in ["/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"] {
        push_dir(&mut out, PathBuf::from(dir));
    }
    out
}

/// Expands `*` in path components (a component may hold one `*`, matched
/// as prefix*suffix). A pattern without `*` is returned as is when it is a
/// directory. Matches are sorted newest-looking (lexically greatest) first.
pub fn expand(pattern: &Path) -> Vec<PathBuf> {
    let mut current = vec![PathBuf::new()];
    for comp in pattern.components() {
        let comp = comp.as_os_str().to_string_lossy();
        let mut next = Vec::new();
        match comp.split_once('*') {
            None => {
                next = current.into_iter().map(|p| p.join(comp.as_ref())).collect();
            }
            Some((prefix, suffix)) => {
                for base in &current {
                    let Ok(entries) = std::fs::read_dir(base) else {
                        continue;
                    };
                    let mut names: Vec<String> = entries
                        .filter_map(|e| e.ok())
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|n| {
                            n.len() >= prefix.len() + suffix.len()
                                && n.starts_with(prefix)
                                && n.ends_with(suffix)
                        })
                        .collect();
                    names.sort_unstable_by(|a, b| b.cmp(a));
                    next.extend(names.into_iter().map(|n| base.join(n)));
                }
            }
        }
        current = next;
    }
    current.retain(|p| p.is_dir());
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn explicit_path_is_the_only_candidate() {
        let env = env_of(&[(ENV_LIBRARY, "/from/env.so")]);
        let c = candidates(Some(Path::new("/given.so")), &["/pref".into()], &env);
        assert_eq!(
            c,
            vec![Candidate::File {
                path: "/given.so".into(),
                label: "/given.so".into()
            }]
        );
    }

    #[test]
    fn env_var_beats_the_search() {
        let env = env_of(&[(ENV_LIBRARY, "/from/env.so")]);
        let c = candidates(None, &["/pref".into()], &env);
        assert_eq!(
            c,
            vec![Candidate::File {
                path: "/from/env.so".into(),
                label: "TZ_NVCOMP_LIBRARY=/from/env.so".into()
            }]
        );
    }

    #[test]
    fn empty_env_var_is_ignored() {
        let env = env_of(&[(ENV_LIBRARY, "")]);
        let c = candidates(None, &[], &env);
        assert_eq!(c[0], Candidate::LoaderName("libnvcomp.so.6"));
    }

    #[test]
    fn search_order() {
        let tmp = std::env::temp_dir().join(format!("nvcomp-sys-search-{}", std::process::id()));
        let venv_site = tmp
            .join("venv/lib/python3.12/site-packages")
            .join(WHEEL_SUBDIR);
        std::fs::create_dir_all(&venv_site).unwrap();
        std::fs::create_dir_all(tmp.join("conda/lib")).unwrap();
        let env = env_of(&[
            ("CONDA_PREFIX", tmp.join("conda").to_str().unwrap()),
            ("VIRTUAL_ENV", tmp.join("venv").to_str().unwrap()),
            ("HOME", tmp.join("nohome").to_str().unwrap()),
        ]);
        let c = candidates(None, &[], &env);
        std::fs::remove_dir_all(&tmp).unwrap();

        assert_eq!(
            &c[..5],
            &[
                Candidate::LoaderName("libnvcomp.so.6"),
                Candidate::LoaderName("libnvcomp.so.5"),
                Candidate::LoaderName("libnvcomp.so"),
                Candidate::Dir(tmp.join("conda/lib")),
                Candidate::Dir(venv_site),
            ]
        );
        // A glob matching nothing stays visible for the error message.
        let conda_site = tmp
            .join("conda/lib/python3*/site-packages")
            .join(WHEEL_SUBDIR);
        assert!(c.contains(&Candidate::NoMatch(conda_site.display().to_string())));
        assert_eq!(
            &c[c.len() - 2..],
            &[
                Candidate::Dir("/usr/local/cuda/lib64".into()),
                Candidate::Dir("/usr/lib/x86_64-linux-gnu".into()),
            ]
        );
    }

    #[test]
    fn preferred_dirs_come_before_the_loader() {
        let env = env_of(&[(ENV_LIBRARY, "")]);
        let preferred: Vec<PathBuf> = vec!["/app/nvcomp".into(), "/other".into()];
        let c = candidates(None, &preferred, &env);
        assert_eq!(
            &c[..3],
            &[
                Candidate::Dir("/app/nvcomp".into()),
                Candidate::Dir("/other".into()),
                Candidate::LoaderName("libnvcomp.so.6"),
            ]
        );
    }

    #[test]
    fn expand_matches_prefix_and_sorts_newest_first() {
        let tmp = std::env::temp_dir().join(format!("nvcomp-sys-expand-{}", std::process::id()));
        for d in ["python3.10/x", "python3.12/x", "python2.7/x", "python3.11"] {
            std::fs::create_dir_all(tmp.join(d)).unwrap();
        }
        let got = expand(&tmp.join("python3*/x"));
        std::fs::remove_dir_all(&tmp).unwrap();
        assert_eq!(
            got,
            vec![tmp.join("python3.12/x"), tmp.join("python3.10/x")]
        );
    }
}
