//! Loading failures must be errors that say what was tried, never crashes.

use std::path::Path;

use nvcomp_sys::{Error, Nvcomp};

#[test]
fn explicit_missing_path_is_not_found_and_named() {
    let path = Path::new("/nonexistent/dir/libnvcomp.so.6");
    let err = Nvcomp::load(Some(path)).unwrap_err();
    let Error::NotFound { tried } = &err else {
        panic!("expected NotFound, got {err:?}");
    };
    assert_eq!(tried.len(), 1, "an explicit path is the only candidate");
    assert_eq!(tried[0].0, path.display().to_string());
    assert!(tried[0].1.contains("No such file"), "{}", tried[0].1);
    let msg = err.to_string();
    assert!(msg.starts_with("nvCOMP not found"), "{msg}");
    assert!(msg.contains("/nonexistent/dir/libnvcomp.so.6"), "{msg}");
}

#[test]
fn explicit_non_library_file_says_why() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let err = Nvcomp::load(Some(&path)).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::NotFound { .. }), "{msg}");
    assert!(msg.contains("Cargo.toml"), "{msg}");
    // glibc says "invalid ELF header" or "file too short".
    assert!(
        msg.contains("ELF") || msg.contains("too short"),
        "dlopen's reason should be kept: {msg}"
    );
}

#[test]
fn error_types_are_std_errors() {
    fn check<E: std::error::Error + Send + Sync + 'static>() {}
    check::<Error>();
}
