//! The protocol's named configurations (`bench-protocol.md`, "Configurations")
//! and the command-line overrides applied to them or to a JSON file.

use super::args::{CodecArg, Options};
use tiledzarr::config::{Cname, Codec, Multiscale, Shuffle};
use tiledzarr::{Config, DType};

/// `(name, size, tile, tiles_per_shard)`, slowest first; size 0 is the
/// protocol's ∞ (the unbounded append axis).
type Dims = &'static [(&'static str, u64, u64, u64)];

/// Keys added to a named configuration's JSON (a pyramid, OME metadata).
type Extra = &'static str;

const NAMED: &[(&str, DType, Dims, Extra)] = &[
    (
        "cam-32",
        DType::Uint16,
        &[("z", 0, 32, 1), ("y", 2048, 32, 16), ("x", 2048, 32, 16)],
        "",
    ),
    (
        // cam-32 with a 5-level mean pyramid halving z, y and x.
        "cam-32-pyramid",
        DType::Uint16,
        &[("z", 0, 32, 1), ("y", 2048, 32, 16), ("x", 2048, 32, 16)],
        r#"{"multiscale": {"levels": 5, "method": "mean"}}"#,
    ),
    (
        "cam-64",
        DType::Uint16,
        &[("z", 0, 64, 1), ("y", 2048, 64, 8), ("x", 2048, 64, 8)],
        "",
    ),
    (
        "cam-128",
        DType::Uint16,
        &[("z", 0, 32, 1), ("y", 2048, 128, 4), ("x", 2048, 128, 4)],
        "",
    ),
    (
        "tczyx",
        DType::Uint16,
        &[
            ("t", 0, 1, 1),
            ("c", 3, 1, 1),
            ("z", 64, 32, 2),
            ("y", 1024, 128, 4),
            ("x", 1024, 128, 4),
        ],
        "",
    ),
    (
        // tczyx acquired t-z-c-y-x and stored t-c-z-y-x as OME-NGFF asks,
        // with a 3-level mean pyramid halving y and x.
        "tczyx-ome",
        DType::Uint16,
        &[
            ("t", 0, 1, 1),
            ("z", 64, 32, 2),
            ("c", 3, 1, 1),
            ("y", 1024, 128, 4),
            ("x", 1024, 128, 4),
        ],
        r#"{"storage_order": ["t", "c", "z", "y", "x"], "ome": true,
            "multiscale": {"levels": 3, "method": "mean"},
            "dimensions": {"z": {"downsample": false}}}"#,
    ),
    (
        "frames-u8",
        DType::Uint8,
        &[("t", 0, 1, 64), ("y", 4096, 256, 4), ("x", 4096, 256, 4)],
        "",
    ),
];

pub fn names() -> impl Iterator<Item = &'static str> {
    NAMED.iter().map(|(n, _, _, _)| *n)
}

/// A named configuration: zstd level 1, backend auto, no store. Built
/// through the JSON schema so that keys added to it later keep their
/// defaults.
pub fn named(name: &str) -> Option<Config> {
    let (_, dtype, dims, extra) = NAMED.iter().find(|(n, _, _, _)| *n == name)?;
    let extra: serde_json::Value = if extra.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(extra).expect("the named configurations' extras parse")
    };
    // Per-dimension keys in the extra are keyed by the dimension's name.
    let dimensions: Vec<_> = dims
        .iter()
        .map(|&(n, size, tile, tps)| {
            let mut d =
                serde_json::json!({"name": n, "size": size, "tile": tile, "tiles_per_shard": tps});
            if let Some(more) = extra["dimensions"][n].as_object() {
                for (k, v) in more {
                    d[k] = v.clone();
                }
            }
            d
        })
        .collect();
    let mut json = serde_json::json!({
        "dtype": dtype.name(),
        "dimensions": dimensions,
        "codec": {"name": "zstd", "level": 1},
        "backend": "auto",
    });
    for (k, v) in extra.as_object().expect("an object") {
        if k != "dimensions" {
            json[k] = v.clone();
        }
    }
    Some(Config::from_json(&json.to_string()).expect("the named configurations parse"))
}

/// The configuration `--config` names, with a label for file names and the
/// table: the protocol name, or the file's stem.
pub fn load(spec: &str) -> Result<(String, Config), String> {
    if let Some(c) = named(spec) {
        return Ok((spec.to_string(), c));
    }
    let path = std::path::Path::new(spec);
    if !path.is_file() {
        let known: Vec<_> = names().collect();
        return Err(format!(
            "--config: {spec:?} is neither a configuration name ({}) nor a file",
            known.join(", ")
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {spec}: {e}"))?;
    let config = Config::from_json(&text).map_err(|e| format!("{spec}: {e}"))?;
    let label = path
        .file_stem()
        .map_or("config".into(), |s| s.to_string_lossy().into_owned());
    Ok((label, config))
}

/// Applies the command line's backend, codec (`arg`, one of the sweep's;
/// `None` keeps the configuration's) and threads. The store is always left
/// out: the benchmark decides where shards go (`--sink`), so that a file's
/// `store.path` is never overwritten or deleted.
pub fn apply(config: &mut Config, o: &Options, arg: Option<CodecArg>) {
    if let Some(b) = o.backend {
        config.backend = b;
    }
    config.codec = codec(config.codec, arg, o.level);
    if let Some(t) = o.threads {
        config.threads = t;
    }
    if o.staging.is_some() {
        config.staging_bytes = o.staging;
    }
    if o.device_bytes.is_some() {
        config.device_bytes = o.device_bytes;
    }
    if let Some(levels) = o.multiscale {
        config.multiscale = Some(Multiscale {
            levels,
            method: config.multiscale.map(|m| m.method).unwrap_or_default(),
        });
    }
    if let (Some(method), Some(m)) = (o.method, config.multiscale.as_mut()) {
        m.method = method;
    }
    config.store = None;
}

/// The codec the command line asks for: `--codec` switches codec (keeping
/// the configuration's level, and for blosc its cname and shuffle unless
/// named, when it names the same one), `--level` alone applies to the
/// configuration's codec (zstd if it has none).
fn codec(config: Codec, arg: Option<CodecArg>, level: Option<i32>) -> Codec {
    let kept = match config {
        Codec::Zstd { level } | Codec::Blosc { level, .. } | Codec::Gzip { level } => Some(level),
        Codec::None => None,
    };
    let same = |named: bool| level.or(kept.filter(|_| named)).unwrap_or(1);
    match (arg, config) {
        (Some(CodecArg::None), _) => Codec::None,
        (None, Codec::None) => level.map_or(Codec::None, |level| Codec::Zstd { level }),
        (None, c @ (Codec::Zstd { .. } | Codec::Gzip { .. } | Codec::Blosc { .. })) => {
            with_level(c, same(true))
        }
        (Some(CodecArg::Zstd), c) => Codec::Zstd {
            level: same(matches!(c, Codec::Zstd { .. })),
        },
        (Some(CodecArg::Gzip), c) => Codec::Gzip {
            level: same(matches!(c, Codec::Gzip { .. })),
        },
        (Some(CodecArg::Blosc { cname, shuffle }), c) => {
            let (was_blosc, c_cname, c_shuffle) = match c {
                Codec::Blosc { cname, shuffle, .. } => (true, cname, shuffle),
                _ => (false, Cname::Zstd, Shuffle::Byte),
            };
            Codec::Blosc {
                level: same(was_blosc),
                shuffle: shuffle.unwrap_or(c_shuffle),
                cname: cname.unwrap_or(c_cname),
            }
        }
    }
}

fn with_level(c: Codec, level: i32) -> Codec {
    match c {
        Codec::Zstd { .. } => Codec::Zstd { level },
        Codec::Gzip { .. } => Codec::Gzip { level },
        Codec::Blosc { shuffle, cname, .. } => Codec::Blosc {
            level,
            shuffle,
            cname,
        },
        Codec::None => Codec::None,
    }
}

/// A codec's short name for tables and file names: `zstd-1`, `gzip-1`,
/// `blosc-lz4-bit-5`, `none`.
pub fn label(c: Codec) -> String {
    match c {
        Codec::None => "none".into(),
        Codec::Zstd { level } => format!("zstd-{level}"),
        Codec::Gzip { level } => format!("gzip-{level}"),
        Codec::Blosc {
            level,
            shuffle,
            cname,
        } => format!(
            "blosc-{}-{}-{level}",
            tiledzarr::codec::blosc_cname(cname).name(),
            match shuffle {
                Shuffle::Byte => "byte",
                Shuffle::Bit => "bit",
                Shuffle::None => "noshuffle",
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_and_level_from_the_command_line() {
        let zstd = |level| Codec::Zstd { level };
        let blosc = |level, shuffle| Codec::Blosc {
            level,
            shuffle,
            cname: Cname::Zstd,
        };
        let (z, b, n) = (
            Some(CodecArg::Zstd),
            Some(CodecArg::Blosc {
                cname: None,
                shuffle: None,
            }),
            Some(CodecArg::None),
        );
        assert_eq!(codec(zstd(3), b, None), blosc(1, Shuffle::Byte));
        assert_eq!(codec(zstd(3), b, Some(4)), blosc(4, Shuffle::Byte));
        assert_eq!(
            codec(blosc(5, Shuffle::Bit), b, None),
            blosc(5, Shuffle::Bit)
        );
        assert_eq!(
            codec(blosc(5, Shuffle::Bit), None, Some(2)),
            blosc(2, Shuffle::Bit)
        );
        assert_eq!(codec(blosc(5, Shuffle::Bit), z, None), zstd(1));
        assert_eq!(codec(zstd(3), z, None), zstd(3));
        assert_eq!(codec(zstd(3), None, Some(7)), zstd(7));
        assert_eq!(codec(Codec::None, None, Some(2)), zstd(2));
        assert_eq!(codec(Codec::None, z, None), zstd(1));
        assert_eq!(codec(zstd(3), n, None), Codec::None);
        assert_eq!(codec(Codec::None, None, None), Codec::None);
        let lz4_bit = Some(CodecArg::Blosc {
            cname: Some(Cname::Lz4),
            shuffle: Some(Shuffle::Bit),
        });
        assert_eq!(
            codec(zstd(3), lz4_bit, None),
            Codec::Blosc {
                level: 1,
                shuffle: Shuffle::Bit,
                cname: Cname::Lz4
            }
        );
        assert_eq!(
            codec(zstd(3), Some(CodecArg::Gzip), Some(6)),
            Codec::Gzip { level: 6 }
        );
        assert_eq!(label(codec(zstd(3), lz4_bit, Some(5))), "blosc-lz4-bit-5");
        assert_eq!(label(Codec::Gzip { level: 1 }), "gzip-1");
    }

    #[test]
    fn every_named_configuration_validates_with_the_protocol_tile_bytes() {
        let tile_kib = [64, 64, 512, 1024, 1024, 1024, 64];
        let levels = [1, 5, 1, 1, 1, 3, 1];
        let names: Vec<_> = names().collect();
        assert_eq!(names.len(), tile_kib.len());
        for ((name, kib), levels) in names.into_iter().zip(tile_kib).zip(levels) {
            let v = named(name).unwrap().validate().unwrap();
            assert_eq!(v.layout.tile_bytes(), kib << 10, "{name}");
            assert!(v.layout.is_unbounded(), "{name}");
            assert_eq!(v.image.levels.len(), levels, "{name}");
        }
        // tczyx-ome stores t-c-z-y-x what arrives t-z-c-y-x, z not halved.
        let v = named("tczyx-ome").unwrap().validate().unwrap();
        assert_eq!(v.names, ["t", "c", "z", "y", "x"]);
        assert_eq!(v.image.downsample(), [false, false, false, true, true]);
    }
}
