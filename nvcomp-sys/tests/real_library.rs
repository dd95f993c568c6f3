//! Runs against real nvCOMP libraries when some are around: the files in
//! `TZ_NVCOMP_TEST_LIBRARIES` (':'-separated), else whatever
//! `Nvcomp::load(None)` finds. Without a GPU the device-dependent query
//! must fail with a clear error, not crash. Skipped (with a message) when
//! no library is found.

use std::path::PathBuf;

use nvcomp_sys::{AbiVersion, Error, Nvcomp, Status, ZstdCompressOpts, ZstdDecompressOpts};

fn libraries() -> Vec<Nvcomp> {
    match std::env::var_os("TZ_NVCOMP_TEST_LIBRARIES") {
        Some(list) if !list.is_empty() => std::env::split_paths(&list)
            .map(|p: PathBuf| {
                Nvcomp::load(Some(&p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            })
            .collect(),
        _ => match Nvcomp::load(None) {
            Ok(nv) => vec![nv],
            Err(e) => {
                eprintln!("skipped: no nvCOMP here ({e})");
                Vec::new()
            }
        },
    }
}

#[test]
fn real_library_queries() {
    for nv in libraries() {
        let (major, minor, patch) = nv.version();
        eprintln!(
            "{}: nvCOMP {major}.{minor}.{patch}, {:?}",
            nv.path().display(),
            nv.abi()
        );
        let expected = if major == 5 {
            AbiVersion::V5
        } else {
            AbiVersion::V6
        };
        assert_eq!(nv.abi(), expected);

        // Host-only queries work with or without a GPU.
        let opts = ZstdCompressOpts::default();
        let a = nv.zstd_compress_alignments(&opts).unwrap();
        assert!(
            a.input.is_power_of_two() && a.output.is_power_of_two() && a.temp.is_power_of_two()
        );
        let d = nv
            .zstd_decompress_alignments(&ZstdDecompressOpts::default())
            .unwrap();
        assert!(d.input.is_power_of_two());
        let max_out = nv
            .zstd_compress_max_output_chunk_bytes(65536, &opts)
            .unwrap();
        assert!(max_out > 65536, "{max_out}");

        // Needs the driver: a number on a GPU machine, a CUDA error elsewhere.
        match nv.zstd_compress_temp_bytes(8192, 65536, 8192 * 65536, &opts) {
            Ok(bytes) => eprintln!("  compress temp for 8192 x 64 KiB: {bytes} bytes"),
            Err(e @ Error::Status { status, .. }) if Status(status) == Status::ERROR_CUDA_ERROR => {
                let msg = e.to_string();
                assert!(msg.contains("libcuda.so.1"), "{msg}");
                eprintln!("  no GPU: {msg}");
            }
            Err(e) => panic!("unexpected: {e}"),
        }
    }
}

#[test]
fn every_standard_compressor_answers_host_queries() {
    use nvcomp_sys::{Algorithm, CompressOpts};
    for nv in libraries() {
        for algorithm in Algorithm::ALL {
            let c = match nv.compressor(algorithm, CompressOpts::default_for(algorithm)) {
                Ok(c) => c,
                // 5.x may predate gzip compression: the error names it.
                Err(e @ Error::MissingSymbol { .. }) if nv.version().0 == 5 => {
                    eprintln!("  {algorithm:?}: {e}");
                    continue;
                }
                Err(e) => panic!("{algorithm:?}: {e}"),
            };
            let a = c.alignments().unwrap();
            assert!(
                a.input.is_power_of_two() && a.output.is_power_of_two(),
                "{a:?}"
            );
            let max_out = c.max_output_chunk_bytes(65536).unwrap();
            assert!(max_out >= 65536, "{algorithm:?}: {max_out}");
            eprintln!("  {algorithm:?}: alignments {a:?}, bound of 64 KiB {max_out}");
        }
    }
}
