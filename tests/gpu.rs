//! GPU-only tests, ignored by default: `scripts/gpu-run.sh` runs them on a
//! GPU machine with `--ignored`, where a missing GPU, driver or nvCOMP makes
//! them fail rather than pass.

mod common;
mod support;

use common::Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use support::decode::{self, decode_array};
use tiledzarr::shard::Shard;
use tiledzarr::{Config, DType, Stream};

type Shards = Arc<Mutex<HashMap<Vec<u64>, Vec<u8>>>>;
/// (size, tile, tiles_per_shard) per dimension.
type Dims = Vec<(u64, u64, u64)>;

/// (size, tile, tiles_per_shard) per dimension; size 0 = unbounded.
fn config(
    dtype: DType,
    dims: &[(u64, u64, u64)],
    backend: &str,
    codec: &str,
    staging: u64,
) -> Config {
    let dims: Vec<String> = dims
        .iter()
        .map(|(s, t, p)| format!(r#"{{"size": {s}, "tile": {t}, "tiles_per_shard": {p}}}"#))
        .collect();
    Config::from_json(&format!(
        r#"{{"dtype": "{}", "dimensions": [{}], "backend": "{backend}", "codec": {codec},
            "staging_bytes": {staging}}}"#,
        dtype.name(),
        dims.join(", ")
    ))
    .unwrap()
}

fn stream(config: &Config, data: &[u8], write: usize) -> (Shards, tiledzarr::Summary) {
    let shards: Shards = Default::default();
    let sink_shards = shards.clone();
    let sink = move |s: &Shard<'_>| -> tiledzarr::Result<()> {
        let file = [s.data, s.index].concat();
        sink_shards.lock().unwrap().insert(s.coord.to_vec(), file);
        Ok(())
    };
    let mut s = Stream::new(config, Some(Box::new(sink))).unwrap();
    for piece in data.chunks(write) {
        assert_eq!(s.write_blocking(piece, None).unwrap(), piece.len());
    }
    let summary = s.finish().unwrap();
    (shards, summary)
}

fn decode(config: &Config, planes: u64, shards: &Shards, zstd: bool) -> Vec<u8> {
    let v = config.validate().unwrap();
    let dims = support::decode_dims(&v.layout, planes);
    let codec = if zstd {
        decode::Codec::Zstd
    } else {
        decode::Codec::None
    };
    decode_array(
        &dims,
        v.layout.elem_size(),
        codec,
        decode::IndexLocation::End,
        &shards.lock().unwrap(),
    )
    .unwrap()
}

const ZSTD: &str = r#"{"name": "zstd", "level": 1}"#;

#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn gpu_and_cpu_stores_decode_to_the_same_array() {
    let cases: Vec<(DType, Dims, u64)> = vec![
        (
            DType::Uint16,
            vec![(0, 32, 1), (512, 32, 16), (512, 32, 16)],
            75,
        ),
        (DType::Uint8, vec![(0, 4, 2), (37, 8, 3), (101, 16, 2)], 41),
        (
            DType::Float32,
            vec![(50, 7, 0), (33, 5, 2), (20, 20, 1)],
            50,
        ),
        (
            DType::Int64,
            vec![(0, 3, 1), (10, 4, 1), (9, 4, 0), (6, 2, 2)],
            10,
        ),
    ];
    let mut rng = Rng(11);
    for (dtype, dims, planes) in cases {
        let plane: u64 = dims[1..].iter().map(|d| d.0).product::<u64>() * dtype.size() as u64;
        let data = rng.bytes((planes * plane) as usize);
        let staging = dims[0].1 * plane * 4;
        let mut arrays = Vec::new();
        for backend in ["cpu", "gpu"] {
            let c = config(dtype, &dims, backend, ZSTD, staging);
            let (shards, summary) = stream(&c, &data, 1 << 20);
            assert_eq!(
                summary.backend.name(),
                backend,
                "{}",
                summary.backend_reason
            );
            arrays.push(decode(&c, summary.planes, &shards, true));
        }
        assert!(
            arrays[0] == arrays[1],
            "{dtype} {dims:?}: GPU and CPU arrays differ"
        );
        assert!(
            arrays[1].starts_with(&data),
            "{dtype} {dims:?}: GPU array differs from the input"
        );
    }
}

#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn codec_none_on_the_gpu_round_trips() {
    let dims = [(0, 5, 2), (40, 16, 2), (30, 8, 0)];
    let plane = 40 * 30 * 2;
    let data = Rng(5).bytes(23 * plane);
    let c = config(
        DType::Uint16,
        &dims,
        "gpu",
        r#"{"name": "none"}"#,
        5 * plane as u64 * 4,
    );
    let (shards, summary) = stream(&c, &data, 999);
    let array = decode(&c, summary.planes, &shards, false);
    assert!(array.starts_with(&data));
}

/// nvCOMP faults when its temp buffer holds what a call of another shape
/// left there: streams one after another and side by side, with different
/// tile sizes and a last batch smaller than the others, must all decode.
#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn streams_of_different_shapes_in_one_process_all_decode() {
    let shapes: Vec<(u64, u64)> = vec![(64, 32), (128, 64), (32, 16), (64, 32), (96, 48)];
    let run = |i: usize, (size, tile): (u64, u64)| {
        let dims = [(0, 8, 1), (size, tile, 2), (size, tile, 2)];
        let plane = size * size * 2;
        // 3 epochs per batch; 11 epochs and a bit: the last batch is short.
        let planes = 8 * 11 + 3;
        let data = Rng(i as u64).bytes((planes * plane) as usize);
        let c = config(DType::Uint16, &dims, "gpu", ZSTD, 8 * plane * 6);
        let (shards, summary) = stream(&c, &data, 1 << 16);
        let array = decode(&c, summary.planes, &shards, true);
        assert!(array.starts_with(&data), "stream {i} ({size}/{tile})");
    };
    for (i, &shape) in shapes.iter().enumerate() {
        run(i, shape);
    }
    std::thread::scope(|s| {
        for (i, &shape) in shapes.iter().enumerate() {
            s.spawn(move || run(100 + i, shape));
        }
    });
}

/// Every codec the CPU backend writes, on the GPU: blosc with zstd, lz4
/// and zlib inside under each shuffle (level 0 included: every chunk
/// memcpyed), and gzip across its levels, over element sizes 1 to 8, on
/// camera-like data (compressible) and random bytes (chunks that do not
/// shrink), with tiles whose element count is not a multiple of 8 (the
/// bit shuffle leaves those as they are). The GPU store must decode, with
/// the independent decoder's checks of every Blosc1 header, to the CPU
/// store's array and to the input.
#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn every_codec_on_the_gpu_decodes_as_the_cpu_store() {
    use tiledzarr::synth::{Generator, Pattern};
    let mut codecs: Vec<String> = Vec::new();
    for (k, cname) in ["zstd", "lz4", "zlib"].iter().enumerate() {
        for (j, shuffle) in ["byte", "bit", "none"].iter().enumerate() {
            let level = [1, 5, 9][(k + j) % 3];
            codecs.push(format!(
                r#"{{"name": "blosc", "level": {level}, "cname": "{cname}", "shuffle": "{shuffle}"}}"#
            ));
        }
        codecs.push(format!(
            r#"{{"name": "blosc", "level": 0, "cname": "{cname}"}}"#
        ));
    }
    for level in [0, 1, 4, 6, 9] {
        codecs.push(format!(r#"{{"name": "gzip", "level": {level}}}"#));
    }
    // With random data, batches larger than the page-locked output buffers
    // (they come back through ordinary memory).
    codecs.push(r#"{"name": "zstd", "level": 1}"#.to_string());
    // (dtype, dims, planes, random data). TZ_GPU_CODEC_CASES=N runs the
    // first N (the sanitizers run three: every kernel path, fewer bytes).
    let mut cases: Vec<(DType, Dims, u64, bool)> = vec![
        // 5 x 7 x 9 = 315 elements per tile: not a multiple of 8. The cases
        // after it: the scatter byte-shuffles (random data: every chunk is
        // stored memcpyed, unshuffled by the framing), then does not.
        (
            DType::Uint8,
            vec![(0, 5, 2), (37, 7, 3), (50, 9, 2)],
            23,
            false,
        ),
        (
            DType::Float32,
            vec![(30, 4, 2), (33, 8, 2), (40, 16, 1)],
            30,
            true,
        ),
        // Rows of 36 elements: the shuffles run apart from the scatter (a
        // row is not whole groups of 8), on tiles of 288 elements.
        (
            DType::Uint16,
            vec![(0, 4, 1), (20, 6, 2), (36, 12, 2)],
            9,
            false,
        ),
        (
            DType::Uint16,
            vec![(0, 16, 1), (256, 32, 4), (256, 32, 4)],
            40,
            false,
        ),
        (
            DType::Int64,
            vec![(0, 2, 1), (20, 8, 1), (24, 8, 0)],
            9,
            false,
        ),
    ];
    if let Some(n) = std::env::var("TZ_GPU_CODEC_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cases.truncate(n);
    }
    let mut rng = Rng(23);
    for (dtype, dims, planes, random) in cases {
        let frame: Vec<u64> = dims[1..].iter().map(|d| d.0).collect();
        let plane = frame.iter().product::<u64>() * dtype.size() as u64;
        let data = if random {
            rng.bytes((planes * plane) as usize)
        } else {
            let gen = Generator::new(Pattern::Microscopy, dtype, &frame, 7);
            let mut d = vec![0u8; (planes * plane) as usize];
            gen.fill_frames(0, &mut d);
            d
        };
        let staging = dims[0].1 * plane * 4;
        for codec in &codecs {
            let mut arrays = Vec::new();
            let mut sizes = Vec::new();
            for backend in ["cpu", "gpu"] {
                let c = config(dtype, &dims, backend, codec, staging);
                let (shards, summary) = stream(&c, &data, 1 << 18);
                assert_eq!(
                    summary.backend.name(),
                    backend,
                    "{codec}: {}",
                    summary.backend_reason
                );
                let v = c.validate().unwrap();
                let elem = v.layout.elem_size();
                let array = decode_array(
                    &support::decode_dims(&v.layout, summary.planes),
                    elem,
                    support::decode_codec(c.codec, elem),
                    decode::IndexLocation::End,
                    &shards.lock().unwrap(),
                )
                .unwrap_or_else(|e| panic!("{dtype} {dims:?} {codec} on the {backend}: {e}"));
                arrays.push(array);
                sizes.push(summary.metrics.bytes_out);
            }
            let what = format!("{dtype} {dims:?} {codec} (random {random})");
            assert!(arrays[0] == arrays[1], "{what}: GPU and CPU arrays differ");
            assert!(
                arrays[1].starts_with(&data),
                "{what}: GPU array differs from the input"
            );
            eprintln!("{what}: bytes out cpu {} gpu {}", sizes[0], sizes[1]);
        }
    }
}
