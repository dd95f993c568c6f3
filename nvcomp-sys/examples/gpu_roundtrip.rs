//! End-to-end check of the bindings on a GPU: compresses a batch with
//! nvCOMP, checks every chunk with the CPU zstd decoder, decompresses it
//! again with nvCOMP and compares. Talks to the CUDA driver through
//! libcuda.so.1 directly (loaded at run time, like nvCOMP), since this
//! crate makes no CUDA calls of its own.
//!
//! Usage: `gpu_roundtrip [--lib PATH] [--trap MODE]`
//!
//! `--trap` probes the temp-buffer fault documented in the crate docs: it
//! compresses batches of two shapes in turn on one temp buffer that is
//! filled only before the first call, and reports each outcome (see
//! `run_trap` for the modes). A fault poisons the context, so run each
//! trap in its own process.

#[path = "common/cuda.rs"]
mod cuda;

use std::ffi::{c_char, c_void, CStr};
use std::path::PathBuf;
use std::time::Instant;

use cuda::Cuda;
use nvcomp_sys::{
    DevicePtr, Nvcomp, ZstdCompressBatch, ZstdCompressOpts, ZstdDecompressBatch, ZstdDecompressOpts,
};

/// A batch laid out in device memory, ready for nvCOMP.
struct DeviceBatch {
    chunk_sizes: Vec<usize>,
    input: u64,
    in_ptrs: u64,
    in_sizes: u64,
    out: u64,
    out_stride: usize,
    out_ptrs: u64,
    out_sizes: u64,
    statuses: u64,
}

fn make_chunk(i: usize, len: usize) -> Vec<u8> {
    // Mostly smooth 16-bit "pixels" with a little noise, like camera data;
    // every 97th chunk is incompressible.
    let mut x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    if i % 97 == 5 {
        return (0..len).map(|_| next() as u8).collect();
    }
    let mut v = Vec::with_capacity(len);
    for k in 0..len / 2 {
        let pixel = (1000 + (k % 512) as u16 * 3 + (next() % 8) as u16).to_le_bytes();
        v.extend_from_slice(&pixel);
    }
    v.resize(len, 0);
    v
}

fn upload_batch(
    cu: &Cuda,
    chunk_sizes: Vec<usize>,
    max_chunk: usize,
    max_out: usize,
    align_out: usize,
) -> (DeviceBatch, Vec<Vec<u8>>) {
    let n = chunk_sizes.len();
    let chunks: Vec<Vec<u8>> = chunk_sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| make_chunk(i, len))
        .collect();
    let mut host = vec![0u8; n * max_chunk];
    for (i, c) in chunks.iter().enumerate() {
        host[i * max_chunk..i * max_chunk + c.len()].copy_from_slice(c);
    }
    let input = cu.upload(&host);
    let out_stride = max_out.div_ceil(align_out.max(8)) * align_out.max(8);
    let out = cu.alloc(n * out_stride);
    let in_ptrs: Vec<u64> = (0..n).map(|i| input + (i * max_chunk) as u64).collect();
    let out_ptrs: Vec<u64> = (0..n).map(|i| out + (i * out_stride) as u64).collect();
    let batch = DeviceBatch {
        input,
        in_ptrs: cu.upload(&in_ptrs),
        in_sizes: cu.upload(&chunk_sizes),
        out,
        out_stride,
        out_ptrs: cu.upload(&out_ptrs),
        out_sizes: cu.alloc(n * 8),
        statuses: cu.alloc(n * 4),
        chunk_sizes,
    };
    (batch, chunks)
}

impl DeviceBatch {
    fn compress_args(
        &self,
        max_chunk: usize,
        temp: DevicePtr,
        temp_bytes: usize,
    ) -> ZstdCompressBatch {
        ZstdCompressBatch {
            uncompressed_ptrs: self.in_ptrs,
            uncompressed_bytes: self.in_sizes,
            max_uncompressed_chunk_bytes: max_chunk,
            num_chunks: self.chunk_sizes.len(),
            temp,
            temp_bytes,
            compressed_ptrs: self.out_ptrs,
            compressed_bytes: self.out_sizes,
            statuses: self.statuses,
        }
    }

    fn free(&self, cu: &Cuda) {
        for p in [
            self.input,
            self.in_ptrs,
            self.in_sizes,
            self.out,
            self.out_ptrs,
            self.out_sizes,
            self.statuses,
        ] {
            // SAFETY: each was allocated by cu.alloc and is freed once.
            unsafe { (cu.mem_free)(p) };
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let lib = opt("--lib").map(PathBuf::from);
    let trap = opt("--trap");

    let nv = Nvcomp::load(lib.as_deref()).unwrap_or_else(|e| panic!("{e}"));
    let (a, b, c) = nv.version();
    println!(
        "nvCOMP {a}.{b}.{c} ({:?}) from {}",
        nv.abi(),
        nv.path().display()
    );
    let copts = ZstdCompressOpts::default();
    let dopts = ZstdDecompressOpts::default();
    const N: usize = 8192;
    const CHUNK: usize = 64 << 10;

    // Which queries work before any CUDA call by this process?
    println!(
        "before cuInit: compress temp = {:?}",
        nv.zstd_compress_temp_bytes(N, CHUNK, N * CHUNK, &copts)
            .map_err(|e| e.to_string())
    );

    let cu = Cuda::load();
    // SAFETY: plain driver-API calls with valid out-pointers, in the order the driver requires (init, device, context, stream).
    let stream = unsafe {
        cu.check("cuInit", (cu.init)(0)).unwrap();
        let mut dev = 0;
        cu.check("cuDeviceGet", (cu.device_get)(&mut dev, 0))
            .unwrap();
        let mut name = [0 as c_char; 128];
        cu.check(
            "cuDeviceGetName",
            (cu.device_get_name)(name.as_mut_ptr(), 128, dev),
        )
        .unwrap();
        println!(
            "device 0: {}",
            CStr::from_ptr(name.as_ptr()).to_string_lossy()
        );
        println!(
            "after cuInit, no current context: compress temp = {:?}",
            nv.zstd_compress_temp_bytes(N, CHUNK, N * CHUNK, &copts)
                .map_err(|e| e.to_string())
        );
        let mut ctx = std::ptr::null_mut();
        cu.check(
            "cuDevicePrimaryCtxRetain",
            (cu.primary_ctx_retain)(&mut ctx, dev),
        )
        .unwrap();
        cu.check("cuCtxSetCurrent", (cu.ctx_set_current)(ctx))
            .unwrap();
        let mut stream = std::ptr::null_mut();
        cu.check("cuStreamCreate", (cu.stream_create)(&mut stream, 1))
            .unwrap();
        stream
    };

    let align = nv.zstd_compress_alignments(&copts).unwrap();
    let max_out = nv
        .zstd_compress_max_output_chunk_bytes(CHUNK, &copts)
        .unwrap();
    let temp_bytes = nv
        .zstd_compress_temp_bytes(N, CHUNK, N * CHUNK, &copts)
        .unwrap();
    let dtemp_bytes = nv
        .zstd_decompress_temp_bytes(N, CHUNK, N * CHUNK, &dopts)
        .unwrap();
    println!("with context: alignments {align:?}, max out {max_out}, compress temp {temp_bytes}, decompress temp {dtemp_bytes}");

    if let Some(mode) = trap {
        run_trap(&nv, &cu, stream, &mode, max_out, align.output);
        return;
    }

    // Full batch with a short last chunk.
    let mut sizes = vec![CHUNK; N];
    sizes[N - 1] = 12345;
    let (batch, chunks) = upload_batch(&cu, sizes, CHUNK, max_out, align.output);
    let temp = cu.alloc(temp_bytes);
    let args = batch.compress_args(CHUNK, temp, temp_bytes);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        // SAFETY: all buffers are live allocations of the current context,
        // sized and aligned as ZstdCompressBatch requires; temp is zeroed
        // first on the same stream.
        unsafe {
            cu.check(
                "cuMemsetD8Async",
                (cu.memset_async)(temp, 0, temp_bytes, stream),
            )
            .unwrap();
            nv.zstd_compress_async(&args, &copts, stream).unwrap();
            cu.check("cuStreamSynchronize", (cu.stream_sync)(stream))
                .unwrap();
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    let total: usize = batch.chunk_sizes.iter().sum();
    println!(
        "compress: {:.2} GB/s (best of 3, {} MiB)",
        total as f64 / best / 1e9,
        total >> 20
    );

    let statuses: Vec<i32> = cu.download(batch.statuses, N).unwrap();
    let csizes: Vec<usize> = cu.download(batch.out_sizes, N).unwrap();
    let out: Vec<u8> = cu.download(batch.out, N * batch.out_stride).unwrap();
    assert!(
        statuses.iter().all(|&s| s == 0),
        "chunk statuses: {:?}",
        statuses
            .iter()
            .filter(|&&s| s != 0)
            .take(5)
            .collect::<Vec<_>>()
    );
    let ctotal: usize = csizes.iter().sum();
    println!(
        "compressed {} -> {} bytes (ratio {:.2})",
        total,
        ctotal,
        total as f64 / ctotal as f64
    );
    for (i, chunk) in chunks.iter().enumerate() {
        let frame = &out[i * batch.out_stride..i * batch.out_stride + csizes[i]];
        assert!(csizes[i] <= max_out);
        assert_eq!(
            &frame[..4],
            &[0x28, 0xb5, 0x2f, 0xfd],
            "chunk {i}: not a zstd frame"
        );
        let cpu = zstd::bulk::decompress(frame, CHUNK)
            .unwrap_or_else(|e| panic!("chunk {i}: CPU zstd rejects nvCOMP's frame: {e}"));
        assert_eq!(&cpu, chunk, "chunk {i}: CPU decode differs");
    }
    println!("CPU zstd decodes all {N} nvCOMP frames identically");

    // GPU decompression back into a fresh buffer.
    let dest = cu.alloc(N * CHUNK);
    let dest_ptrs: Vec<u64> = (0..N).map(|i| dest + (i * CHUNK) as u64).collect();
    let dest_ptrs = cu.upload(&dest_ptrs);
    let capacities = cu.upload(&vec![CHUNK; N]);
    let got_sizes = cu.alloc(N * 8);
    let dtemp = cu.alloc(dtemp_bytes);
    let dargs = ZstdDecompressBatch {
        compressed_ptrs: batch.out_ptrs,
        compressed_bytes: batch.out_sizes,
        uncompressed_buffer_bytes: capacities,
        uncompressed_bytes: got_sizes,
        num_chunks: N,
        temp: dtemp,
        temp_bytes: dtemp_bytes,
        uncompressed_ptrs: dest_ptrs,
        statuses: batch.statuses,
    };
    // SAFETY: as for compression; the compressed frames came from nvCOMP.
    unsafe {
        nv.zstd_decompress_async(&dargs, &dopts, stream).unwrap();
        cu.check("cuStreamSynchronize", (cu.stream_sync)(stream))
            .unwrap();
    }
    let statuses: Vec<i32> = cu.download(batch.statuses, N).unwrap();
    let dsizes: Vec<usize> = cu.download(got_sizes, N).unwrap();
    let back: Vec<u8> = cu.download(dest, N * CHUNK).unwrap();
    assert!(statuses.iter().all(|&s| s == 0));
    for (i, chunk) in chunks.iter().enumerate() {
        assert_eq!(dsizes[i], chunk.len(), "chunk {i}: size");
        assert_eq!(
            &back[i * CHUNK..i * CHUNK + chunk.len()],
            chunk.as_slice(),
            "chunk {i}: data"
        );
    }
    println!("nvCOMP decompression restores all {N} chunks");
    batch.free(&cu);
    println!("ROUNDTRIP OK");
}

/// Compresses shape A with a zeroed temp buffer, then alternates B, A, B
/// on the same temp buffer without zeroing it again, and reports each
/// outcome. `mode` is `none|count|max|sizes`, optionally followed by `-rev`
/// (start with B), `-exact` (pass each shape's own temp size rather than
/// the larger of the two) and/or `-garbage` (fill the temp buffer with 0xab
/// instead of zeroing it before the first call).
fn run_trap(
    nv: &Nvcomp,
    cu: &Cuda,
    stream: *mut c_void,
    mode: &str,
    max_out: usize,
    align_out: usize,
) {
    let copts = ZstdCompressOpts::default();
    const CHUNK: usize = 64 << 10;
    let base = mode.split('-').next().unwrap();
    let a_shape = (vec![CHUNK; 8192], CHUNK);
    let b_shape = match base {
        "count" => (vec![CHUNK; 1000], CHUNK),
        "max" => (vec![CHUNK / 2; 8192], CHUNK / 2),
        "sizes" => ((0..8192).map(|i| CHUNK - (i * 37) % 4096).collect(), CHUNK),
        "none" => a_shape.clone(),
        other => panic!("unknown trap mode {other}"),
    };
    let (first, second) = if mode.contains("-rev") {
        (b_shape, a_shape)
    } else {
        (a_shape, b_shape)
    };
    let temp_of = |(sizes, max): &(Vec<usize>, usize)| {
        nv.zstd_compress_temp_bytes(sizes.len(), *max, sizes.len() * max, &copts)
            .unwrap()
    };
    let (t1, t2) = (temp_of(&first), temp_of(&second));
    let alloc_bytes = t1.max(t2);
    let (t1, t2) = if mode.contains("-exact") {
        (t1, t2)
    } else {
        (alloc_bytes, alloc_bytes)
    };
    let temp = cu.alloc(alloc_bytes);
    let (m1, m2) = (first.1, second.1);
    let (a, _) = upload_batch(cu, first.0, m1, max_out, align_out);
    let (b, _) = upload_batch(cu, second.0, m2, max_out, align_out);
    // `-garbage` fills the temp buffer with a non-zero byte instead, to see
    // whether nvCOMP needs it zeroed at all.
    let fill = if mode.contains("-garbage") { 0xab } else { 0 };
    // SAFETY: a plain memset of a live allocation on a live stream.
    let zeroed = unsafe { (cu.memset_async)(temp, fill, alloc_bytes, stream) };
    cu.check("cuMemsetD8Async", zeroed).unwrap();
    let calls = [
        (&a, m1, t1, "first"),
        (&b, m2, t2, "second"),
        (&a, m1, t1, "first"),
        (&b, m2, t2, "second"),
    ];
    for (step, (batch, max, tb, which)) in calls.into_iter().enumerate() {
        // SAFETY: live buffers of the current context, laid out as
        // required; only the temp contents are deliberately left stale.
        let r = unsafe {
            nv.zstd_compress_async(&batch.compress_args(max, temp, tb), &copts, stream)
                .map_err(|e| e.to_string())
                .and_then(|()| cu.check("cuStreamSynchronize", (cu.stream_sync)(stream)))
        };
        let failed = r.as_ref().ok().map(|_| {
            let s: Vec<i32> = cu
                .download(batch.statuses, batch.chunk_sizes.len())
                .unwrap();
            s.iter().filter(|&&x| x != 0).count()
        });
        println!(
            "trap {mode}: call {step} ({which} shape, {} x {max}, temp {tb}, freshly filled: {}): {r:?}, failed chunks: {failed:?}",
            batch.chunk_sizes.len(),
            step == 0
        );
        if r.is_err() {
            return;
        }
    }
}
