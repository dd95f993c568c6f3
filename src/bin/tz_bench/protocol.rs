//! The protocol's named configurations (`bench-protocol.md`, "Configurations")
//! and the command-line overrides applied to them or to a JSON file.

use super::args::{CodecArg, Options};
use tiledzarr::config::Codec;
use tiledzarr::{Config, DType};

/// `(name, size, tile, tiles_per_shard)`, slowest first; size 0 is the
/// protocol's ∞ (the unbounded append axis).
type Dims = &'static [(&'static str, u64, u64, u64)];

const NAMED: &[(&str, DType, Dims)] = &[
    (
        "cam-32",
        DType::Uint16,
        &[("z", 0, 32, 1), ("y", 2048, 32, 16), ("x", 2048, 32, 16)],
    ),
    (
        "cam-64",
        DType::Uint16,
        &[("z", 0, 64, 1), ("y", 2048, 64, 8), ("x", 2048, 64, 8)],
    ),
    (
        "cam-128",
        DType::Uint16,
        &[("z", 0, 32, 1), ("y", 2048, 128, 4), ("x", 2048, 128, 4)],
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
    ),
    (
        "frames-u8",
        DType::Uint8,
        &[("t", 0, 1, 64), ("y", 4096, 256, 4), ("x", 4096, 256, 4)],
    ),
];

pub fn names() -> impl Iterator<Item = &'static str> {
    NAMED.iter().map(|(n, _, _)| *n)
}

/// A named configuration: zstd level 1, backend auto, no store. Built
/// through the JSON schema so that keys added to it later keep their
/// defaults.
pub fn named(name: &str) -> Option<Config> {
    let (_, dtype, dims) = NAMED.iter().find(|(n, _, _)| *n == name)?;
    let dimensions: Vec<_> = dims
        .iter()
        .map(|&(n, size, tile, tps)| {
            serde_json::json!({"name": n, "size": size, "tile": tile, "tiles_per_shard": tps})
        })
        .collect();
    let json = serde_json::json!({
        "dtype": dtype.name(),
        "dimensions": dimensions,
        "codec": {"name": "zstd", "level": 1},
        "backend": "auto",
    });
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

/// Applies the command line's backend, codec and threads. The store is
/// always left out: the benchmark decides where shards go (`--sink`), so
/// that a file's `store.path` is never overwritten or deleted.
pub fn apply(config: &mut Config, o: &Options) {
    if let Some(b) = o.backend {
        config.backend = b;
    }
    match (o.codec, o.level) {
        (Some(CodecArg::None), _) => config.codec = Codec::None,
        (_, Some(level)) => config.codec = Codec::Zstd { level },
        (Some(CodecArg::Zstd), None) => {
            if config.codec == Codec::None {
                config.codec = Codec::Zstd { level: 1 };
            }
        }
        (None, None) => {}
    }
    if let Some(t) = o.threads {
        config.threads = t;
    }
    config.store = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_configuration_validates_with_the_protocol_tile_bytes() {
        let tile_kib = [64, 512, 1024, 1024, 64];
        for (name, kib) in names().zip(tile_kib) {
            let v = named(name).unwrap().validate().unwrap();
            assert_eq!(v.layout.tile_bytes(), kib << 10, "{name}");
            assert!(v.layout.is_unbounded(), "{name}");
        }
    }
}
