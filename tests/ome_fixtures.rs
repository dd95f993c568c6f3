//! OME-Zarr stores for the independent checker: every downsampling method
//! on every element type it applies to, odd sizes, storage orders, an
//! unbounded dimension downsampled along itself that ends in a partial
//! window, bounded arrays, plain arrays with attributes. Each store is
//! written through the Rust API from synthetic data; level 0 is decoded
//! here with `support::decode` and compared with the input (transposed to
//! the storage order), and every level's `zarr.json` shape is checked.
//! When `TZ_OME_DIR` is set the stores stay there with their raw input,
//! their configuration and a line in `manifest.tsv` for
//! `tests/readback/check_ome.py`, which computes the pyramid with NumPy and
//! reads every level with zarr-python and tensorstore, validates the OME
//! metadata and opens the image with ome-zarr-py. `TZ_OME_BACKEND` picks
//! the backend (`cpu` by default; the GPU script sets `gpu`).

mod support;

use serde_json::{json, Value};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Stream};

struct Case {
    name: String,
    dtype: DType,
    /// The configuration without dtype, store, backend and staging.
    config: Value,
    /// Planes along dimension 0 to stream, and elements of one more.
    planes: u64,
    extra_elems: u64,
    random: bool,
    /// Staging in epochs (small: batches end mid-window).
    staging_epochs: u64,
}

fn dim(name: &str, size: u64, tile: u64, tps: u64) -> Value {
    json!({"name": name, "size": size, "tile": tile, "tiles_per_shard": tps})
}

/// OME-NGFF's omero block for the three channels of the tczyx cases.
fn omero() -> Value {
    let window = json!({"start": 10, "end": 3000, "min": 0, "max": 65535});
    json!({"channels": [
        {"label": "DAPI", "color": "0000FF", "window": window, "active": true},
        {"label": "GFP", "color": "00FF00", "window": window, "family": "linear"},
        {"color": "FF00FF", "window": window, "inverted": false}],
        "rdefs": {"model": "color", "defaultZ": 2}})
}

fn with(mut v: Value, extra: Value) -> Value {
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let methods = ["mean", "min", "max", "median", "decimate"];
    // Every method on every type: t unbounded and halved, ending in a
    // partial window (7 planes and part of an eighth); odd y and x.
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for (j, method) in methods.iter().enumerate() {
            let k = i * methods.len() + j;
            let codec = [
                json!({"name": "zstd", "level": 1}),
                json!({"name": "none"}),
                json!({"name": "blosc", "cname": "lz4", "shuffle": "bit"}),
                json!({"name": "gzip", "level": 1}),
            ][k % 4]
                .clone();
            out.push(Case {
                name: format!("{method}-{}", dtype.name()),
                dtype,
                config: json!({
                    "dimensions": [
                        with(dim("t", 0, 2, 2), json!({"unit": "second", "scale": 0.25, "downsample": true})),
                        with(dim("y", 13, 4, 2), json!({"unit": "micrometer", "scale": 0.5, "translation": 3.0})),
                        with(dim("x", 11, 4, 3), json!({"unit": "micrometer", "scale": 0.5})),
                    ],
                    "multiscale": {"levels": 3, "method": method},
                    "codec": codec,
                    "index_location": if k.is_multiple_of(2) { "end" } else { "start" },
                }),
                planes: 7,
                extra_elems: if k.is_multiple_of(3) { 5 } else { 0 },
                random: k.is_multiple_of(2),
                staging_epochs: 2,
            });
        }
    }
    // Acquired t-z-c-y-x, stored t-c-z-y-x (OME's order), y and x halved.
    for (method, dtype) in [
        ("mean", DType::Uint16),
        ("median", DType::Int16),
        ("max", DType::Float32),
    ] {
        // One with a time scale of 0: frames taken back to back.
        let t_scale = if method == "median" { 0.0 } else { 40.0 };
        out.push(Case {
            name: format!("tzcyx-to-tczyx-{method}"),
            dtype,
            config: json!({
                "dimensions": [
                    with(dim("t", 0, 1, 2), json!({"unit": "millisecond", "scale": t_scale})),
                    with(dim("z", 5, 2, 2), json!({"unit": "micrometer", "scale": 2.0, "downsample": false})),
                    dim("c", 3, 1, 0),
                    with(dim("y", 21, 8, 2), json!({"unit": "micrometer", "scale": 0.65})),
                    with(dim("x", 19, 8, 2), json!({"unit": "micrometer", "scale": 0.65})),
                ],
                "storage_order": ["t", "c", "z", "y", "x"],
                "multiscale": {"levels": 3, "method": method},
                "ome": {"name": "tczyx", "omero": omero()},
                "attributes": {"instrument": {"name": "scope-1", "objective": "20x/0.8"}, "operator": "a. n. other"},
            }),
            planes: 5,
            extra_elems: 0,
            random: false,
            staging_epochs: 3,
        });
    }
    // A z-stack streamed along z (bounded), every spatial axis halved,
    // as many levels as fit in one tile; batches of 3 planes end
    // mid-window.
    out.push(Case {
        name: "zstack-bounded-auto-levels".into(),
        dtype: DType::Uint16,
        config: json!({
            "dimensions": [
                with(dim("z", 23, 3, 2), json!({"unit": "micrometer", "scale": 1.5})),
                with(dim("y", 40, 8, 2), json!({"unit": "micrometer"})),
                with(dim("x", 36, 8, 2), json!({"unit": "micrometer"})),
            ],
            "multiscale": {"levels": 0, "method": "mean"},
        }),
        planes: 23,
        extra_elems: 0,
        random: false,
        staging_epochs: 2,
    });
    // Channels before space with an unbounded time axis not halved, the
    // channel axis given a kind by hand, batches of three epochs.
    out.push(Case {
        name: "t-c-y-x-min-long".into(),
        dtype: DType::Uint8,
        config: json!({
            "dimensions": [
                with(dim("time", 0, 3, 1), json!({"kind": "time", "unit": "second"})),
                with(dim("ch", 2, 1, 1), json!({"kind": "channel"})),
                with(dim("y", 30, 16, 1), json!({"unit": "nanometer", "scale": 100.0})),
                with(dim("x", 33, 16, 1), json!({"unit": "nanometer", "scale": 100.0})),
            ],
            "multiscale": {"levels": 4, "method": "min"},
        }),
        planes: 37,
        extra_elems: 0,
        random: true,
        staging_epochs: 3,
    });
    // OME without a pyramid; a plain array with a storage order and
    // attributes.
    out.push(Case {
        name: "ome-single-level".into(),
        dtype: DType::Uint16,
        config: json!({
            "dimensions": [dim("t", 0, 4, 1), dim("y", 20, 8, 2), dim("x", 24, 8, 2)],
            "ome": true,
            "attributes": {"note": "one level"},
        }),
        planes: 9,
        extra_elems: 3,
        random: false,
        staging_epochs: 2,
    });
    out.push(Case {
        name: "plain-storage-order".into(),
        dtype: DType::Int32,
        config: json!({
            "dimensions": [dim("t", 0, 2, 1), dim("a", 3, 2, 1), dim("b", 4, 3, 1), dim("x", 10, 4, 2)],
            "storage_order": ["t", "b", "a", "x"],
            "attributes": {"kept": [1, 2, 3]},
        }),
        planes: 5,
        extra_elems: 0,
        random: true,
        staging_epochs: 2,
    });
    out
}

/// Deterministic test data: random bits for integers (every value,
/// extremes included), signed fractional values for floats (no NaN), or
/// the synthetic microscopy frames.
fn data(case: &Case, frame_shape: &[u64], bytes: usize) -> Vec<u8> {
    let elem = case.dtype.size();
    if case.random || case.dtype.is_float() {
        let mut s = 0x2545f4914f6cdd1du64 ^ bytes as u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut out = Vec::with_capacity(bytes);
        while out.len() < bytes {
            let r = next();
            let v = (r % 200_001) as f64 / 100.0 - 1000.0;
            match case.dtype {
                DType::Float16 => out.extend(half_bits(v as f32).to_le_bytes()),
                DType::Float32 => out.extend((v as f32).to_le_bytes()),
                DType::Float64 => out.extend(v.to_le_bytes()),
                _ => out.extend(&r.to_le_bytes()[..elem]),
            }
        }
        out.truncate(bytes);
        return out;
    }
    let gen = Generator::new(Pattern::Microscopy, case.dtype, frame_shape, 7);
    let frames = bytes.div_ceil(gen.frame_bytes());
    let mut out = vec![0u8; gen.frame_bytes() * frames];
    gen.fill_frames(0, &mut out);
    out.truncate(bytes);
    out
}

/// IEEE binary16 bits of `v` (round to nearest even; test values are
/// small and normal).
fn half_bits(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let mant = b & 0x7f_ffff;
    if exp <= 0 {
        return sign;
    }
    let mut h = ((exp as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        h += 1;
    }
    sign | h as u16
}

struct Written {
    store: PathBuf,
    raw: PathBuf,
    config: PathBuf,
}

fn write_case(case: &Case, dir: &Path, backend: &str) -> Written {
    let store = dir.join(format!("{}.zarr", case.name));
    let raw = dir.join(format!("{}.raw", case.name));
    let config_path = dir.join(format!("{}.json", case.name));
    let dims = case.config["dimensions"].as_array().unwrap();
    let sizes: Vec<u64> = dims.iter().map(|d| d["size"].as_u64().unwrap()).collect();
    let tile0 = dims[0]["tile"].as_u64().unwrap();
    let elem = case.dtype.size() as u64;
    let plane: u64 = sizes[1..].iter().product::<u64>() * elem;
    let mut config = case.config.clone();
    config["dtype"] = json!(case.dtype.name());
    config["backend"] = json!(backend);
    config["staging_bytes"] = json!(case.staging_epochs * tile0 * plane);
    config["store"] = json!({"path": store.to_str().unwrap(), "overwrite": true, "fsync": false});
    let text = serde_json::to_string_pretty(&config).unwrap();
    let parsed = Config::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let v = parsed.validate().unwrap();
    let bytes = (case.planes * plane + case.extra_elems * elem) as usize;
    let input = data(case, &sizes[1..], bytes);
    let mut stream = Stream::new(&parsed, None).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    // Writes of uneven sizes, so that planes and elements are cut.
    let mut at = 0;
    let mut step = 1usize;
    while at < input.len() {
        let n = (plane as usize * 2 / 3 + step).min(input.len() - at);
        assert_eq!(stream.write_blocking(&input[at..at + n], None).unwrap(), n);
        at += n;
        step = step * 7 % 61 + 1;
    }
    let summary = stream
        .finish()
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    std::fs::write(&raw, &input).unwrap();
    std::fs::write(&config_path, &text).unwrap();

    // Level 0, decoded here, is the input in storage order.
    let ome = v.image.is_ome();
    let level0 = if ome { store.join("0") } else { store.clone() };
    let (shape, dtype, decoded) = support::decode::decode_store(&level0).unwrap();
    assert_eq!(dtype, case.dtype.name());
    let order = &v.image.order;
    let mut acq = sizes.clone();
    acq[0] = summary.planes;
    let want_shape: Vec<u64> = order.iter().map(|&a| acq[a]).collect();
    assert_eq!(shape, want_shape, "{}", case.name);
    let mut padded = input.clone();
    padded.resize((acq.iter().product::<u64>() * elem) as usize, 0);
    assert_eq!(
        decoded,
        transpose(&padded, &acq, order, elem as usize),
        "{}: level 0",
        case.name
    );
    // Every level's array with the pyramid's shape.
    for (k, layout) in v.image.levels.iter().enumerate() {
        let doc: Value = serde_json::from_slice(
            &std::fs::read(if ome {
                store.join(k.to_string()).join("zarr.json")
            } else {
                store.join("zarr.json")
            })
            .unwrap(),
        )
        .unwrap();
        let shape: Vec<u64> = doc["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_u64().unwrap())
            .collect();
        let mut want: Vec<u64> = layout.dims().iter().map(|d| d.size).collect();
        if layout.is_unbounded() {
            let ds0 = v.image.axes[0].downsample;
            want[0] = (0..k).fold(summary.planes, |p, _| if ds0 { p.div_ceil(2) } else { p });
        }
        assert_eq!(shape, want, "{}: level {k}", case.name);
    }
    Written {
        store,
        raw,
        config: config_path,
    }
}

/// `data` (row-major over `shape`) with its axes in the order `order`.
fn transpose(data: &[u8], shape: &[u64], order: &[usize], elem: usize) -> Vec<u8> {
    let rank = shape.len();
    let mut strides = vec![1u64; rank];
    for d in (0..rank - 1).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let out_shape: Vec<u64> = order.iter().map(|&a| shape[a]).collect();
    let n: u64 = shape.iter().product();
    let mut out = vec![0u8; data.len()];
    let mut c = vec![0u64; rank];
    for i in 0..n {
        tiledzarr::layout::unravel(i, &out_shape, &mut c);
        let src: u64 = (0..rank).map(|d| c[d] * strides[order[d]]).sum();
        let (s, o) = (src as usize * elem, i as usize * elem);
        out[o..o + elem].copy_from_slice(&data[s..s + elem]);
    }
    out
}

#[test]
fn write_ome_fixtures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = match std::env::var_os("TZ_OME_DIR") {
        Some(d) => PathBuf::from(d),
        None => tmp.path().to_path_buf(),
    };
    let backend = std::env::var("TZ_OME_BACKEND").unwrap_or_else(|_| "cpu".into());
    std::fs::create_dir_all(&dir).unwrap();
    let mut manifest = std::fs::File::create(dir.join("manifest.tsv")).unwrap();
    for case in cases() {
        let w = write_case(&case, &dir, &backend);
        writeln!(
            manifest,
            "{}\t{}\t{}",
            w.store.display(),
            w.raw.display(),
            w.config.display()
        )
        .unwrap();
    }
}

/// Every fixture stored without compression (compressed bytes differ
/// between nvCOMP and the CPU libraries), written by both backends: the
/// same files with the same bytes, every pyramid level, index and
/// metadata document included.
#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn gpu_stores_equal_cpu_stores_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (cpu, gpu) = (tmp.path().join("cpu"), tmp.path().join("gpu"));
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::create_dir_all(&gpu).unwrap();
    let mut compared = 0;
    for mut case in cases() {
        case.config["codec"] = json!({"name": "none"});
        let (a, b) = (
            support::store_files(&write_case(&case, &cpu, "cpu").store),
            support::store_files(&write_case(&case, &gpu, "gpu").store),
        );
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>(),
            "{}: the stores hold different files",
            case.name
        );
        for (path, bytes) in &a {
            assert!(
                b[path] == *bytes,
                "{}: {} differs between the CPU and the GPU store",
                case.name,
                path.display()
            );
        }
        compared += a.len();
    }
    assert!(compared > 100, "only {compared} files compared");
}

fn small_ome(store: &Path, extra: &str) -> Result<Config, tiledzarr::config::ConfigError> {
    Config::from_json(&format!(
        r#"{{"dtype": "uint16", "backend": "cpu",
            "dimensions": [{{"name": "t", "size": 0, "tile": 2}}, {{"name": "y", "size": 16, "tile": 8}},
                           {{"name": "x", "size": 16, "tile": 8}}],
            "multiscale": {{"levels": 2}},
            "store": {{"path": {:?}, "fsync": false}}{extra}}}"#,
        store.to_str().unwrap()
    ))
}

#[test]
fn bad_image_configs_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s.zarr");
    for extra in [
        r#", "attributes": {"ome": 1}"#,
        r#", "attributes": 7"#,
        r#", "storage_order": ["y", "t", "x"]"#,
        r#", "multiscale": {"levels": 9}"#,
    ] {
        // A duplicate key: the later multiscale replaces the first.
        let e = match small_ome(&store, extra) {
            Ok(c) => Stream::new(&c, None).err().expect("refused"),
            Err(e) => tiledzarr::Error::from(e),
        };
        assert!(!store.exists(), "{extra}: {e}");
    }
}

#[test]
fn attributes_replaced_before_the_flush_reach_the_group() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s.zarr");
    let c = small_ome(&store, r#", "attributes": {"run": 1}"#).unwrap();
    let mut s = Stream::new(&c, None).unwrap();
    let group = || -> Value {
        serde_json::from_slice(&std::fs::read(store.join("zarr.json")).unwrap()).unwrap()
    };
    assert_eq!(group()["attributes"]["run"], 1);
    let frame = vec![7u8; 16 * 16 * 2];
    for _ in 0..5 {
        s.write_blocking(&frame, None).unwrap();
    }
    assert!(s.set_attributes(&json!([1])).is_err());
    assert!(s.set_attributes(&json!({"ome": 2})).is_err());
    s.set_attributes(&json!({"run": 2, "stage": {"x": 1.5}}))
        .unwrap();
    s.finish().unwrap();
    let g = group();
    assert_eq!(g["attributes"]["run"], 2);
    assert_eq!(g["attributes"]["stage"]["x"], 1.5);
    assert_eq!(g["attributes"]["ome"]["version"], "0.5");
    assert!(matches!(
        s.set_attributes(&json!({"run": 3})),
        Err(tiledzarr::Error::Finished)
    ));
    // Level 1 halves y and x; time is not downsampled by default.
    let l1: Value =
        serde_json::from_slice(&std::fs::read(store.join("1/zarr.json")).unwrap()).unwrap();
    assert_eq!(l1["shape"], json!([5, 8, 8]));
}
