//! ABI checks against stand-in libraries built from tests/fake/ with the
//! system C compiler: version gating, missing symbols, and that every
//! argument reaches C in the order and layout of the 5.x and 6.x headers.
//! Skipped (with a message) where no `cc` is available.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use nvcomp_sys::{
    AbiVersion, Alignments, DecompressBackend, Error, Nvcomp, Status, ZstdCompressBatch,
    ZstdCompressOpts, ZstdDecompressBatch, ZstdDecompressOpts,
};

/// (file name under the build dir, extra cc flags)
const VARIANTS: &[(&str, &[&str])] = &[
    ("v6/libnvcomp.so.6", &["-DVERSION=6000"]),
    ("v5/libnvcomp.so.5", &["-DVERSION=5301"]),
    ("v4/libnvcomp.so.4", &["-DVERSION=4201"]),
    ("v7/libnvcomp.so.7", &["-DVERSION=7000"]),
    (
        "nocompress/libnvcomp.so.6",
        &["-DVERSION=6000", "-DOMIT_COMPRESS_ASYNC"],
    ),
];

fn build_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake/libnvcomp_fake.c");
        let dir = std::env::temp_dir().join(format!("nvcomp-sys-fake-{}", std::process::id()));
        for (name, flags) in VARIANTS {
            let out = dir.join(name);
            std::fs::create_dir_all(out.parent().unwrap()).unwrap();
            let status = Command::new("cc")
                .args(["-shared", "-fPIC", "-O1", "-o"])
                .arg(&out)
                .args(*flags)
                .arg(&src)
                .status();
            match status {
                Ok(s) if s.success() => {}
                other => {
                    eprintln!("skipped: cannot build the fake nvCOMP with cc ({other:?})");
                    return None;
                }
            }
        }
        // Not nvCOMP at all: no nvcompGetProperties.
        let other = dir.join("other/libother.so");
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        let c = dir.join("other/other.c");
        std::fs::write(&c, "int other_function(void) { return 0; }\n").unwrap();
        let ok = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&other)
            .arg(&c)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(dir)
    })
    .as_deref()
}

fn fake(name: &str) -> Option<PathBuf> {
    build_dir().map(|d| d.join(name))
}

#[test]
fn v6_dispatch_and_arguments() {
    let Some(path) = fake("v6/libnvcomp.so.6") else {
        return;
    };
    let nv = Nvcomp::load(Some(&path)).unwrap();
    assert_eq!(nv.abi(), AbiVersion::V6);
    assert_eq!(nv.version(), (6, 0, 0));
    assert_eq!(nv.path(), path.as_path());
    check_common(&nv);
    // 6.x passes a null stream to the temp-size queries.
    assert_eq!(
        nv.zstd_compress_temp_bytes(1, 1000, 100_000, &ZstdCompressOpts::default())
            .unwrap(),
        1 + 2 * 1000 + 3 * 100_000
    );
}

#[test]
fn v5_dispatch_and_arguments() {
    let Some(path) = fake("v5/libnvcomp.so.5") else {
        return;
    };
    let nv = Nvcomp::load(Some(&path)).unwrap();
    assert_eq!(nv.abi(), AbiVersion::V5);
    assert_eq!(nv.version(), (5, 3, 1));
    check_common(&nv);
}

fn check_common(nv: &Nvcomp) {
    let copts = ZstdCompressOpts::default();
    let dopts = ZstdDecompressOpts::with_backend(DecompressBackend::Cuda);
    assert_eq!(nv.cudart_version(), (12, 9));
    assert_eq!(
        nv.zstd_compress_alignments(&copts).unwrap(),
        Alignments {
            input: 4,
            output: 2,
            temp: 8
        }
    );
    assert_eq!(
        nv.zstd_decompress_alignments(&dopts).unwrap(),
        Alignments {
            input: 8,
            output: 16,
            temp: 34
        }
    );
    assert_eq!(
        nv.zstd_compress_max_output_chunk_bytes(65536, &copts)
            .unwrap(),
        65547
    );
    assert_eq!(
        nv.zstd_compress_temp_bytes(8192, 65536, 8192 * 65536, &copts)
            .unwrap(),
        8192 + 2 * 65536 + 3 * 8192 * 65536
    );
    assert_eq!(
        nv.zstd_decompress_temp_bytes(7, 100, 700, &dopts).unwrap(),
        5 * (7 + 2 * 100 + 3 * 700) + 2
    );
    assert_eq!(nv.status_string(Status(0)).as_deref(), Some("fake success"));

    // A failing status becomes a named error.
    let err = nv
        .zstd_compress_max_output_chunk_bytes(0, &copts)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "nvcompBatchedZstdCompressGetMaxOutputChunkSize failed: nvcompErrorInvalidValue (10)"
    );

    let stream = 0x7000 as nvcomp_sys::CuStream;
    let batch = ZstdCompressBatch {
        uncompressed_ptrs: 0x1000,
        uncompressed_bytes: 0x2000,
        max_uncompressed_chunk_bytes: 65536,
        num_chunks: 3,
        temp: 0x3000,
        temp_bytes: 4096,
        compressed_ptrs: 0x4000,
        compressed_bytes: 0x5000,
        statuses: 0x6000,
    };
    // SAFETY: the fake only compares the pointer values, never dereferences them.
    unsafe { nv.zstd_compress_async(&batch, &copts, stream) }.unwrap();
    let dbatch = ZstdDecompressBatch {
        compressed_ptrs: 0x1000,
        compressed_bytes: 0x2000,
        uncompressed_buffer_bytes: 0x2800,
        uncompressed_bytes: 0x5000,
        num_chunks: 3,
        temp: 0x3000,
        temp_bytes: 4096,
        uncompressed_ptrs: 0x4000,
        statuses: 0,
    };
    // SAFETY: as above.
    unsafe { nv.zstd_decompress_async(&dbatch, &dopts, stream) }.unwrap();
    // A wrong argument is reported, proving the fake checks them.
    let bad = ZstdCompressBatch {
        num_chunks: 4,
        ..batch
    };
    // SAFETY: as above.
    let err = unsafe { nv.zstd_compress_async(&bad, &copts, stream) }.unwrap_err();
    assert!(matches!(err, Error::Status { status: 103, .. }), "{err}");
}

#[test]
fn old_and_new_majors_are_unsupported() {
    for (name, version) in [
        ("v4/libnvcomp.so.4", (4, 2, 1)),
        ("v7/libnvcomp.so.7", (7, 0, 0)),
    ] {
        let Some(path) = fake(name) else { return };
        let err = Nvcomp::load(Some(&path)).unwrap_err();
        let Error::UnsupportedVersion { version: v, .. } = &err else {
            panic!("expected UnsupportedVersion, got {err:?}");
        };
        assert_eq!(*v, version);
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("nvCOMP {}.{}.{} (", v.0, v.1, v.2)),
            "{msg}"
        );
        assert!(msg.ends_with("is not supported (need 5.x or 6.x)"), "{msg}");
    }
}

#[test]
fn missing_entry_point_is_named() {
    let Some(path) = fake("nocompress/libnvcomp.so.6") else {
        return;
    };
    let err = Nvcomp::load(Some(&path)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::MissingSymbol {
                symbol: "nvcompBatchedZstdCompressAsync",
                version: Some((6, 0, 0)),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_library_that_is_not_nvcomp_is_rejected() {
    let Some(path) = fake("other/libother.so") else {
        return;
    };
    let err = Nvcomp::load(Some(&path)).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("does not export `nvcompGetProperties` (is it nvCOMP?)"),
        "{err}"
    );
}

#[test]
fn a_registered_folder_comes_before_the_system_search() {
    let Some(path) = fake("v5/libnvcomp.so.5") else {
        return;
    };
    if std::env::var_os(nvcomp_sys::ENV_LIBRARY).is_some_and(|v| !v.is_empty()) {
        eprintln!("skipped: {} is set and wins", nvcomp_sys::ENV_LIBRARY);
        return;
    }
    nvcomp_sys::add_search_dir(path.parent().unwrap());
    let nv = Nvcomp::load(None).unwrap();
    assert_eq!(nv.path(), path.as_path());
    assert_eq!(nv.abi(), AbiVersion::V5);
}
