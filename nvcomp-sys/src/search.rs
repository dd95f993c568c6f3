//! Where to look for libnvcomp, in order.
//!
//! The environment is passed in as a function so the order can be tested
//! without touching the process environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Environment variable naming the library file to load.
pub const ENV_LIBRARY: &str = "TZ_NVCOMP_LIBRARY";

pub use crate::system::FILE_NAMES;
use crate::system::{self, WHEEL_SUBDIRS};

/// Folders a host application registered with [`add_search_dir`].
static PREFERRED_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Adds a folder to look for `FILE_NAMES` in before the loader's own
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

    for dir in system::package_dirs(&var) {
        push_dir(&mut out, dir);
    }
    // The pip wheels. Globs only over `python3*`-like names, so this stays
    // a handful of read_dir calls.
    for site in system::site_patterns(&var, env("PYTHONPATH")) {
        for sub in WHEEL_SUBDIRS {
            let pattern = site.join(sub);
            let found = expand(&pattern);
            if found.is_empty() {
                out.push(Candidate::NoMatch(pattern.display().to_string()));
            }
            for dir in found {
                push_dir(&mut out, dir);
            }
        }
    }
    for dir in system::system_dirs(&var) {
        push_dir(&mut out, dir);
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
        assert_eq!(c[0], Candidate::LoaderName(FILE_NAMES[0]));
    }

    #[test]
    fn search_order() {
        let tmp = std::env::temp_dir().join(format!("nvcomp-sys-search-{}", std::process::id()));
        let (venv, conda) = (tmp.join("venv"), tmp.join("conda"));
        let only_venv = |k: &str| (k == "VIRTUAL_ENV").then(|| venv.clone());
        // The environment's own site-packages, with its `*` made a version.
        let venv_site = system::site_patterns(&only_venv, None)[0]
            .to_str()
            .unwrap()
            .replace('*', "3.12");
        let venv_site = PathBuf::from(venv_site).join(WHEEL_SUBDIRS[0]);
        std::fs::create_dir_all(&venv_site).unwrap();
        let only_conda = |k: &str| (k == "CONDA_PREFIX").then(|| conda.clone());
        let conda_dir = system::package_dirs(&only_conda)[0].clone();
        std::fs::create_dir_all(&conda_dir).unwrap();
        let env = env_of(&[
            ("CONDA_PREFIX", conda.to_str().unwrap()),
            ("VIRTUAL_ENV", venv.to_str().unwrap()),
            ("HOME", tmp.join("nohome").to_str().unwrap()),
        ]);
        let c = candidates(None, &[], &env);
        std::fs::remove_dir_all(&tmp).unwrap();

        let mut expected: Vec<Candidate> = FILE_NAMES
            .iter()
            .map(|n| Candidate::LoaderName(n))
            .collect();
        expected.push(Candidate::Dir(conda_dir));
        expected.push(Candidate::Dir(venv_site));
        assert_eq!(&c[..expected.len()], &expected[..]);
        // A glob matching nothing stays visible for the error message.
        let conda_site = system::site_patterns(&only_conda, None)[0].join(WHEEL_SUBDIRS[0]);
        assert!(c.contains(&Candidate::NoMatch(conda_site.display().to_string())));
        // The system's own folders come last.
        let var = |k: &str| env(k).map(PathBuf::from);
        let last: Vec<Candidate> = system::system_dirs(&var)
            .into_iter()
            .map(Candidate::Dir)
            .collect();
        assert_eq!(&c[c.len() - last.len()..], &last[..]);
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
                Candidate::LoaderName(FILE_NAMES[0]),
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
