//! Stores for the independent Zarr readers. Each store is written through the
//! Rust API from synthetic data, checked here with `support::decode`, and,
//! when `TZ_READBACK_DIR` is set, left there with its raw input and a line in
//! `manifest.tsv` (store, raw, dtype, shape) for zarr-python and tensorstore
//! to read back (`scripts/test.sh` does that).

mod support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Stream};

struct Fixture {
    name: String,
    dtype: DType,
    /// (size, tile, tiles_per_shard), dimension 0 first; size 0 = unbounded.
    dims: Vec<(u64, u64, u64)>,
    /// Planes streamed along dimension 0, and extra elements of a partial one.
    planes: u64,
    extra_elems: u64,
    codec: &'static str,
    index: &'static str,
    pattern: Pattern,
}

/// A codec string that lives as long as the test (fixtures are built once).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        out.push(Fixture {
            name: format!("dtype-{}", dtype.name()),
            dtype,
            // Ragged: 37 = 4 tiles of 10 (last 7), 3 tiles per shard.
            dims: vec![(0, 4, 2), (23, 8, 2), (37, 10, 3)],
            planes: 13,
            extra_elems: 40,
            codec: if i % 4 == 3 {
                r#"{"name": "none"}"#
            } else {
                r#"{"name": "zstd", "level": 1}"#
            },
            index: if i % 2 == 0 { "end" } else { "start" },
            pattern: if i % 3 == 0 {
                Pattern::Random
            } else {
                Pattern::Microscopy
            },
        });
    }
    out.push(Fixture {
        name: "bounded-4d-sparse".into(),
        dtype: DType::Uint16,
        dims: vec![(5, 2, 0), (3, 1, 2), (64, 32, 1), (50, 16, 0)],
        planes: 5,
        extra_elems: 0,
        codec: r#"{"name": "zstd", "level": 5}"#,
        index: "end",
        pattern: Pattern::Sparse,
    });
    // Every codec on every element type: Blosc1 with zstd, lz4 and zlib
    // inside under all three shuffles, and gzip; ragged edges, both index
    // locations, levels across their ranges. The readers decode the frames
    // with their own c-blosc (numcodecs) and blosc implementation
    // (tensorstore), and gzip with zlib.
    let mut k = 0;
    for dtype in DType::ALL {
        for cname in ["zstd", "lz4", "zlib"] {
            for shuffle in ["byte", "bit", "none"] {
                let level = [1, 5, 9, 0, 3][k % 5];
                out.push(Fixture {
                    name: format!("blosc-{}-{cname}-{shuffle}-{level}", dtype.name()),
                    dtype,
                    dims: vec![(0, 4, 2), (45, 16, 2), (70, 32, 2)],
                    planes: 11,
                    extra_elems: 17,
                    codec: leak(format!(
                        r#"{{"name": "blosc", "level": {level}, "cname": "{cname}", "shuffle": "{shuffle}"}}"#
                    )),
                    index: if k % 2 == 0 { "end" } else { "start" },
                    pattern: Pattern::Microscopy,
                });
                k += 1;
            }
        }
        let level = [1, 6, 9, 0][k % 4];
        out.push(Fixture {
            name: format!("gzip-{}-{level}", dtype.name()),
            dtype,
            dims: vec![(0, 4, 2), (45, 16, 2), (70, 32, 2)],
            planes: 11,
            extra_elems: 17,
            codec: leak(format!(r#"{{"name": "gzip", "level": {level}}}"#)),
            index: if k % 2 == 0 { "start" } else { "end" },
            pattern: if k % 3 == 0 {
                Pattern::Random
            } else {
                Pattern::Microscopy
            },
        });
        k += 1;
    }
    out.push(Fixture {
        name: "cam32-like-blosc".into(),
        dtype: DType::Uint16,
        dims: vec![(0, 32, 1), (512, 32, 16), (512, 32, 16)],
        planes: 70,
        extra_elems: 0,
        codec: r#"{"name": "blosc", "level": 1}"#,
        index: "end",
        pattern: Pattern::Microscopy,
    });
    out.push(Fixture {
        name: "cam32-like".into(),
        dtype: DType::Uint16,
        dims: vec![(0, 32, 1), (512, 32, 16), (512, 32, 16)],
        planes: 70,
        extra_elems: 0,
        codec: r#"{"name": "zstd", "level": 1}"#,
        index: "end",
        pattern: Pattern::Microscopy,
    });
    out
}

fn write_fixture(f: &Fixture, dir: &Path) -> (PathBuf, PathBuf, Vec<u64>) {
    let store = dir.join(format!("{}.zarr", f.name));
    let raw = dir.join(format!("{}.raw", f.name));
    let dims: Vec<String> = f
        .dims
        .iter()
        .map(|(s, t, p)| format!(r#"{{"size": {s}, "tile": {t}, "tiles_per_shard": {p}}}"#))
        .collect();
    // Four epochs of staging: the default gigabyte is for cameras, and
    // small stores by the hundred would spend their time mapping it.
    let plane: u64 = f.dims[1..].iter().map(|d| d.0).product::<u64>() * f.dtype.size() as u64;
    let staging = 4 * f.dims[0].1 * plane;
    let json = format!(
        r#"{{"dtype": "{}", "dimensions": [{}], "codec": {}, "index_location": "{}",
            "backend": "cpu", "staging_bytes": {staging},
            "store": {{"path": {:?}, "overwrite": true, "fsync": false}}}}"#,
        f.dtype.name(),
        dims.join(", "),
        f.codec,
        f.index,
        store.to_str().unwrap()
    );
    let config = Config::from_json(&json).unwrap();
    let frame_shape: Vec<u64> = f.dims[1..].iter().map(|d| d.0).collect();
    let gen = Generator::new(f.pattern, f.dtype, &frame_shape, 42);
    let mut data = vec![0u8; gen.frame_bytes() * (f.planes as usize + 1)];
    gen.fill_frames(0, &mut data);
    data.truncate(
        gen.frame_bytes() * f.planes as usize + (f.extra_elems as usize) * f.dtype.size(),
    );
    let mut stream = Stream::new(&config, None).unwrap();
    for frame in data.chunks(gen.frame_bytes()) {
        assert_eq!(stream.write_blocking(frame, None).unwrap(), frame.len());
    }
    let summary = stream.finish().unwrap();
    assert!(summary.metrics.shards > 0);
    std::fs::write(&raw, &data).unwrap();
    let mut shape: Vec<u64> = f.dims.iter().map(|d| d.0).collect();
    shape[0] = summary.planes;
    // Our own decoder first.
    let (got_shape, dtype, decoded) = support::decode::decode_store(&store).unwrap();
    assert_eq!(got_shape, shape, "{}", f.name);
    assert_eq!(dtype, f.dtype.name());
    assert!(
        decoded.starts_with(&data),
        "{}: decoded data differs",
        f.name
    );
    assert!(
        decoded[data.len()..].iter().all(|&b| b == 0),
        "{}: fill",
        f.name
    );
    (store, raw, shape)
}

#[test]
fn write_readback_fixtures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = match std::env::var_os("TZ_READBACK_DIR") {
        Some(d) => PathBuf::from(d),
        None => tmp.path().to_path_buf(),
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut manifest = std::fs::File::create(dir.join("manifest.tsv")).unwrap();
    for f in fixtures() {
        let (store, raw, shape) = write_fixture(&f, &dir);
        let shape: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
        writeln!(
            manifest,
            "{}\t{}\t{}\t{}",
            store.display(),
            raw.display(),
            f.dtype.name(),
            shape.join(",")
        )
        .unwrap();
    }
}
