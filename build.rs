//! Generates include/tiledzarr.h from src/ffi with cbindgen. The header is
//! committed; it is rewritten only when its content changes, and the test
//! script fails when the committed copy is stale.
//!
//! The GPU kernels (kernels/*.cu) will be compiled here with nvcc into an
//! embedded fatbin; without nvcc the build will still succeed.

use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=Cargo.toml");
    generate_header(&root);
    set_soname();
}

/// Gives the shared library a versioned soname (libtiledzarr.so.MAJOR), so
/// that installed copies of different major versions can live side by side.
fn set_soname() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtiledzarr.so.{major}");
    }
}

fn generate_header(root: &std::path::Path) {
    let mut config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml is readable");
    let version = |k: &str| std::env::var(k).unwrap();
    config.after_includes = Some(format!(
        "\n#define TZ_VERSION_MAJOR {}\n#define TZ_VERSION_MINOR {}\n#define TZ_VERSION_PATCH {}\n\n/** An open stream (opaque). */\ntypedef struct tz_stream tz_stream;\n",
        version("CARGO_PKG_VERSION_MAJOR"),
        version("CARGO_PKG_VERSION_MINOR"),
        version("CARGO_PKG_VERSION_PATCH"),
    ));
    let bindings = match cbindgen::generate_with_config(root, config) {
        Ok(b) => b,
        Err(e) => {
            // A parse error in the crate is reported by rustc itself.
            println!("cargo:warning=header not regenerated: {e}");
            return;
        }
    };
    let mut text = Vec::new();
    bindings.write(&mut text);
    let path = root.join("include/tiledzarr.h");
    if std::fs::read(&path).ok().as_deref() != Some(&text[..]) {
        std::fs::create_dir_all(root.join("include")).unwrap();
        std::fs::write(&path, text).expect("include/tiledzarr.h is writable");
    }
}
