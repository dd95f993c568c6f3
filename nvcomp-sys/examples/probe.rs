//! Loads nvCOMP and prints what it reports for a batch of 8192 chunks of
//! 64 KiB, without creating any CUDA context.
//!
//! Usage: `cargo run --example probe [-- /path/to/libnvcomp.so]`

use std::path::PathBuf;
use std::process::ExitCode;

use nvcomp_sys::{Nvcomp, ZstdCompressOpts, ZstdDecompressOpts};

const NUM_CHUNKS: usize = 8192;
const CHUNK_BYTES: usize = 64 << 10;

fn main() -> ExitCode {
    let explicit = std::env::args_os().nth(1).map(PathBuf::from);
    let nv = match Nvcomp::load(explicit.as_deref()) {
        Ok(nv) => nv,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let (major, minor, patch) = nv.version();
    let (cuda_major, cuda_minor) = nv.cudart_version();
    println!("library:  {}", nv.path().display());
    println!(
        "version:  {major}.{minor}.{patch} ({:?} ABI), built with CUDA {cuda_major}.{cuda_minor}",
        nv.abi()
    );

    let copts = ZstdCompressOpts::default();
    let dopts = ZstdDecompressOpts::default();
    let total = NUM_CHUNKS * CHUNK_BYTES;
    println!("batch:    {NUM_CHUNKS} x {CHUNK_BYTES} bytes");
    show("compress alignments", nv.zstd_compress_alignments(&copts));
    show(
        "decompress alignments",
        nv.zstd_decompress_alignments(&dopts),
    );
    show(
        "max output chunk bytes",
        nv.zstd_compress_max_output_chunk_bytes(CHUNK_BYTES, &copts),
    );
    show(
        "compress temp bytes",
        nv.zstd_compress_temp_bytes(NUM_CHUNKS, CHUNK_BYTES, total, &copts),
    );
    show(
        "decompress temp bytes",
        nv.zstd_decompress_temp_bytes(NUM_CHUNKS, CHUNK_BYTES, total, &dopts),
    );
    ExitCode::SUCCESS
}

fn show<T: std::fmt::Debug>(what: &str, r: nvcomp_sys::Result<T>) {
    match r {
        Ok(v) => println!("{what}: {v:?}"),
        Err(e) => println!("{what}: error: {e}"),
    }
}
