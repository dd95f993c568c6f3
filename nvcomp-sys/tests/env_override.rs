//! TZ_NVCOMP_LIBRARY handling. Kept alone in its own test binary, and in a
//! single test, because it changes the process environment.

use std::path::Path;

use nvcomp_sys::{Error, Nvcomp, ENV_LIBRARY};

#[test]
fn env_var_names_the_only_candidate_and_explicit_beats_it() {
    let not_a_library = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    std::env::set_var(ENV_LIBRARY, &not_a_library);

    let err = Nvcomp::load(None).unwrap_err();
    let msg = err.to_string();
    let Error::NotFound { tried } = &err else {
        panic!("expected NotFound, got {err:?}");
    };
    assert_eq!(tried.len(), 1, "{msg}");
    assert_eq!(
        tried[0].0,
        format!("TZ_NVCOMP_LIBRARY={}", not_a_library.display())
    );
    assert!(
        msg.contains("ELF") || msg.contains("too short"),
        "dlopen's reason should be kept: {msg}"
    );

    // An explicit path wins over the variable.
    let explicit = Path::new("/nonexistent/explicit/libnvcomp.so");
    let msg = Nvcomp::load(Some(explicit)).unwrap_err().to_string();
    assert!(msg.contains("/nonexistent/explicit/libnvcomp.so"), "{msg}");
    assert!(!msg.contains("TZ_NVCOMP_LIBRARY="), "{msg}");

    // Empty means unset: the full search runs and every place is listed.
    std::env::set_var(ENV_LIBRARY, "");
    std::env::set_var("CONDA_PREFIX", "/nonexistent/conda");
    if let Err(err) = Nvcomp::load(None) {
        let msg = err.to_string();
        for place in [
            "libnvcomp.so.6",
            "libnvcomp.so.5",
            "/nonexistent/conda/lib",
            "/usr/local/cuda/lib64",
        ] {
            assert!(
                msg.contains(&format!("  - {place}")),
                "{place} missing from: {msg}"
            );
        }
    }
    std::env::remove_var(ENV_LIBRARY);
}
