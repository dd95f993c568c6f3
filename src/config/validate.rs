//! Validation: every rule checked once, before anything is allocated.

use super::{
    check_endpoint, image, Codec, Config, ConfigError, Image, ObjectUrl, Store,
    MAX_FRAME_METADATA_BYTES,
};
use crate::layout::{Dim, Layout, LayoutError};
use std::ops::RangeInclusive;

/// zstd levels accepted (negative levels are zstd's fast modes).
pub const ZSTD_LEVELS: RangeInclusive<i32> = -7..=22;

/// blosc levels accepted (0 stores the tiles in frames uncompressed).
pub const BLOSC_LEVELS: RangeInclusive<i32> = 0..=9;

/// gzip levels, as zlib's: 0 stores, 1 is fastest, 9 smallest (the GPU
/// maps them onto nvCOMP's algorithms: see the README's codec table).
pub const GZIP_LEVELS: RangeInclusive<i32> = 0..=9;

/// Most worker threads a stream may ask for.
pub const MAX_THREADS: u32 = 1024;

/// Default staging budget when the config leaves it out (raised to two
/// epochs when an epoch is larger than half of it).
const DEFAULT_STAGING_BYTES: u64 = 1 << 30;

/// Staging buffers aim at this size: small epochs are batched so that a
/// hand-off carries a worthwhile amount of work.
const TARGET_BUFFER_BYTES: u64 = 64 << 20;

/// On the GPU a buffer is one compressor call: nvCOMP reaches its rate only
/// on large batches (thousands of tiles, hundreds of MiB), and the device
/// holds about ten times a batch (input, two tile pools, compressed chunks,
/// two aggregated outputs, nvCOMP's temp buffer). Measured on an H100
/// with cam-32 (README): batches of 512 MiB, two of them (1 GiB of pinned
/// staging), ingest at 0.94-0.95 of batches of 1 GiB with 5.2 GB of device
/// memory instead of 9.3 and 2.2 GB of page-locked memory instead of 5.4.
/// A larger budget buys larger batches: a third of it, up to 1 GiB (so
/// that `staging_bytes` of 3 GiB gives the batches of 1 GiB of 0.4, about
/// 6% faster for 9.3 GB of device memory).
const GPU_MIN_TARGET_BUFFER_BYTES: u64 = 512 << 20;
const GPU_MAX_TARGET_BUFFER_BYTES: u64 = 1 << 30;
const GPU_DEFAULT_STAGING_BYTES: u64 = 1 << 30;
/// Without compression no stage gains from large batches, and smaller ones
/// fill and drain the pipeline sooner and even out the copies' jitter.
const GPU_UNCOMPRESSED_BUFFER_BYTES: u64 = 256 << 20;
const GPU_MAX_TILES_PER_CALL: u64 = 16384;

/// A configuration that passed every rule, with what it implies.
#[derive(Debug, Clone)]
pub struct Validated {
    pub config: Config,
    /// The array's key in a stream of several arrays (`""`: the only
    /// array, at the store's root).
    pub key: String,
    pub layout: Layout,
    /// Dimension names, defaults filled in.
    pub names: Vec<String>,
    /// Staging buffers, each holding `epochs_per_buffer` epochs of input.
    pub staging_buffers: usize,
    pub epochs_per_buffer: u64,
    /// Worker threads, 0 resolved to the machine's cores.
    pub threads: usize,
    /// Axes, storage order, pyramid levels and attributes. `layout` is
    /// level 0's layout (in storage order): `image.levels[0]`.
    pub image: Image,
    /// How long a whole epoch may wait in staging for its buffer to fill.
    pub max_latency: std::time::Duration,
}

impl Config {
    /// Checks every rule; the error names the field and the rule broken.
    pub fn validate(&self) -> Result<Validated, ConfigError> {
        let dims: Vec<Dim> = self
            .dimensions
            .iter()
            .map(|d| Dim::new(d.size, d.tile, d.tiles_per_shard))
            .collect();
        let layout = Layout::new(&dims, self.dtype.size()).map_err(layout_error)?;
        check_codec(self.codec, layout.tile_bytes())?;
        if self.threads > MAX_THREADS {
            return Err(ConfigError::new(
                "threads",
                format!(
                    "must be 0 (one per core) to {MAX_THREADS}, got {}",
                    self.threads
                ),
            ));
        }
        if let Some(store) = &self.store {
            check_store(store)?;
        }
        let (staging_buffers, epochs_per_buffer) = plan_staging(
            &layout,
            self.staging_bytes,
            DEFAULT_STAGING_BYTES,
            TARGET_BUFFER_BYTES,
        )?;
        let names: Vec<String> = self
            .dimensions
            .iter()
            .enumerate()
            .map(|(i, d)| d.name.clone().unwrap_or_else(|| format!("d{i}")))
            .collect();
        let image = image::validate(self, layout, &names)?;
        check_frame_metadata(self, &image)?;
        let layout = image.levels[0].clone();
        let names = image.stored_axes().map(|a| a.name.clone()).collect();
        let max_latency = check_max_latency(self.max_latency_ms)?;
        if self.device_bytes == Some(0) {
            return Err(ConfigError::new(
                "device_bytes",
                "must be a number of bytes, or left out for the backend's own plan",
            ));
        }
        let threads = match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n as usize,
        };
        Ok(Validated {
            config: self.clone(),
            key: String::new(),
            layout,
            names,
            staging_buffers,
            epochs_per_buffer,
            threads,
            image,
            max_latency,
        })
    }
}

/// Per-frame metadata lives in the image's group: an OME image, with a
/// size per frame a reader can hold.
fn check_frame_metadata(c: &Config, image: &Image) -> Result<(), ConfigError> {
    let Some(m) = c.frame_metadata else {
        return Ok(());
    };
    if !image.is_ome() {
        return Err(ConfigError::new(
            "frame_metadata",
            "needs an OME image (\"ome\": true, a collection or a plate): the image's group holds the metadata array",
        ));
    }
    if m.max_bytes == 0 || m.max_bytes > MAX_FRAME_METADATA_BYTES {
        return Err(ConfigError::new(
            "frame_metadata.max_bytes",
            format!(
                "must be 1 to {MAX_FRAME_METADATA_BYTES} bytes per frame, not {}",
                m.max_bytes
            ),
        ));
    }
    Ok(())
}

/// The latency bound's default, in milliseconds.
pub const DEFAULT_MAX_LATENCY_MS: u64 = 1000;
/// The longest latency bound accepted: one day.
pub const MAX_LATENCY_MS: u64 = 86_400_000;

fn check_max_latency(ms: Option<u64>) -> Result<std::time::Duration, ConfigError> {
    let ms = ms.unwrap_or(DEFAULT_MAX_LATENCY_MS);
    if !(1..=MAX_LATENCY_MS).contains(&ms) {
        return Err(ConfigError::new(
            "max_latency_ms",
            format!("must be 1 to {MAX_LATENCY_MS} (one day), got {ms}"),
        ));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// The longest wait on a store's disk or server accepted: an hour.
pub const MAX_STORE_TIMEOUT_S: u64 = 3600;

/// `timeout_s` seconds as a store's bound on a disk or server that answers
/// nothing; an error naming `field` out of 1 to `MAX_STORE_TIMEOUT_S`.
pub fn store_timeout(field: &str, timeout_s: u64) -> Result<std::time::Duration, ConfigError> {
    if !(1..=MAX_STORE_TIMEOUT_S).contains(&timeout_s) {
        return Err(ConfigError::new(
            field,
            format!("must be 1 to {MAX_STORE_TIMEOUT_S} seconds, got {timeout_s}"),
        ));
    }
    Ok(std::time::Duration::from_secs(timeout_s))
}

/// A store is a folder or an object store URL, not both.
fn check_store(store: &Store) -> Result<(), ConfigError> {
    let has_path = !store.path.as_os_str().is_empty();
    if let Some(t) = store.timeout_s {
        store_timeout("store.timeout_s", t)?;
    }
    match &store.url {
        None if !has_path => Err(ConfigError::new(
            "store.path",
            "must not be empty (or give store.url for an object store)",
        )),
        None if store.path.to_string_lossy().contains("://") => Err(ConfigError::new(
            "store.path",
            format!(
                "{:?} is a URL, not a folder: give it as store.url",
                store.path
            ),
        )),
        None => {
            if let Some(why) = crate::platform::unusable_path(&store.path) {
                return Err(ConfigError::new(
                    "store.path",
                    format!("{:?}: {why}", store.path),
                ));
            }
            let object_only = [
                ("endpoint", store.endpoint.is_some()),
                ("region", store.region.is_some()),
            ];
            if let Some((field, _)) = object_only.iter().find(|(_, given)| *given) {
                return Err(ConfigError::new(
                    format!("store.{field}"),
                    "applies to an object store (store.url) only",
                ));
            }
            Ok(())
        }
        Some(_) if has_path => Err(ConfigError::new(
            "store.url",
            "give store.path (a folder) or store.url (an object store), not both",
        )),
        Some(url) => {
            ObjectUrl::parse(url)?;
            if let Some(e) = &store.endpoint {
                check_endpoint(e)?;
            }
            if store.region.as_deref() == Some("") {
                return Err(ConfigError::new("store.region", "must not be empty"));
            }
            Ok(())
        }
    }
}

/// The codec's level range, and what a blosc frame can hold.
fn check_codec(codec: Codec, tile_bytes: usize) -> Result<(), ConfigError> {
    let (level, levels) = match codec {
        Codec::None => return Ok(()),
        Codec::Zstd { level } => (level, ZSTD_LEVELS),
        Codec::Blosc { level, .. } => (level, BLOSC_LEVELS),
        Codec::Gzip { level } => (level, GZIP_LEVELS),
    };
    if !levels.contains(&level) {
        return Err(ConfigError::new(
            "codec.level",
            format!(
                "must be {} to {}, got {level}",
                levels.start(),
                levels.end()
            ),
        ));
    }
    // A Blosc1 frame's sizes are 32-bit: its input is at most INT_MAX less
    // the header, a little less than the largest tile the layout allows.
    if matches!(codec, Codec::Blosc { .. }) && tile_bytes > blosc1::MAX_INPUT_BYTES {
        return Err(ConfigError::new(
            "codec",
            format!(
                "blosc takes tiles of at most {} bytes, a tile here is {tile_bytes}",
                blosc1::MAX_INPUT_BYTES
            ),
        ));
    }
    Ok(())
}

/// Splits the staging budget into buffers of whole epochs: at least two
/// buffers (one filling while the other is processed), each near
/// [`TARGET_BUFFER_BYTES`] unless one epoch is larger, and no larger than a
/// bounded array.
fn plan_staging(
    layout: &Layout,
    staging_bytes: Option<u64>,
    default_budget: u64,
    target_buffer: u64,
) -> Result<(usize, u64), ConfigError> {
    let epoch = layout.epoch_bytes();
    let budget = staging_bytes.unwrap_or(default_budget.max(2 * epoch));
    if budget / epoch < 2 {
        return Err(ConfigError::new(
            "staging_bytes",
            format!(
                "must hold at least two epochs of input ({} bytes: tile[0] planes, twice), got {budget}",
                2 * epoch
            ),
        ));
    }
    let mut per_buffer = (target_buffer / epoch).clamp(1, budget / epoch / 2);
    let mut buffers = budget / (per_buffer * epoch);
    if let Some(epochs) = layout.epoch_count() {
        // A small bounded array needs no more than fits the whole of it.
        per_buffer = per_buffer.min(epochs);
        buffers = buffers.min(epochs.div_ceil(per_buffer).max(2));
    }
    let buffers = usize::try_from(buffers)
        .ok()
        .filter(|&n| (n as u128) * ((per_buffer * epoch) as u128) <= isize::MAX as u128)
        .ok_or_else(|| ConfigError::new("staging_bytes", "exceeds the address space"))?;
    Ok((buffers, per_buffer))
}

impl Validated {
    /// The array's keys' prefix in the store: `""` for the only array, else
    /// its key and a slash.
    pub fn prefix(&self) -> String {
        if self.key.is_empty() {
            String::new()
        } else {
            format!("{}/", self.key)
        }
    }

    /// The staging plan for the GPU backend: larger buffers, one compressor
    /// call each (an explicit `staging_bytes` still bounds it).
    pub fn with_gpu_staging(&self) -> Result<Validated, ConfigError> {
        let (mut staging_buffers, mut epochs_per_buffer) = plan_staging(
            &self.layout,
            self.config.staging_bytes,
            GPU_DEFAULT_STAGING_BYTES,
            match self.config.codec {
                Codec::None => GPU_UNCOMPRESSED_BUFFER_BYTES,
                Codec::Zstd { .. } | Codec::Blosc { .. } | Codec::Gzip { .. } => (self
                    .config
                    .staging_bytes
                    .unwrap_or(GPU_DEFAULT_STAGING_BYTES)
                    / 3)
                .clamp(GPU_MIN_TARGET_BUFFER_BYTES, GPU_MAX_TARGET_BUFFER_BYTES),
            },
        )?;
        // Small tiles: bound the tiles of one call (the compressor's tables
        // and temp memory grow with them); past this, batches gain nothing.
        let max_epochs = (GPU_MAX_TILES_PER_CALL / self.layout.tiles_per_epoch()).max(1);
        if epochs_per_buffer > max_epochs {
            let budget = staging_buffers as u64 * epochs_per_buffer;
            epochs_per_buffer = max_epochs;
            staging_buffers = (budget / max_epochs).clamp(2, 4) as usize;
        }
        Ok(Validated {
            staging_buffers,
            epochs_per_buffer,
            ..self.clone()
        })
    }
}

/// Layout rules name a dimension; the message already starts with the field.
fn layout_error(e: LayoutError) -> ConfigError {
    let text = e.to_string();
    match text.split_once(": ") {
        Some((field, rule)) if field.starts_with("dimensions") => ConfigError::new(field, rule),
        _ => ConfigError::new("dimensions", text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cname, Shuffle};

    fn err(json: &str) -> ConfigError {
        Config::from_json(json)
            .and_then(|c| c.validate().map(|_| ()))
            .unwrap_err()
    }

    const DIMS: &str = r#""dimensions": [{"size": 0, "tile": 4}, {"size": 16, "tile": 4}]"#;

    #[test]
    fn text_after_the_configuration_is_refused() {
        let one = format!(r#"{{"dtype": "uint8", {DIMS}}}"#);
        assert!(Config::from_json(&format!("{one} \n\t")).is_ok());
        for tail in [" garbage", " {}", &format!(" {one}"), ",", "]"] {
            let e = Config::from_json(&format!("{one}{tail}")).unwrap_err();
            assert_eq!(e.field, "json", "{tail:?}: {e}");
            assert!(
                e.to_string().contains("text after the configuration"),
                "{e}"
            );
        }
    }

    #[test]
    fn defaults_fill_in() {
        let c = Config::from_json(&format!(r#"{{"dtype": "uint16", {DIMS}}}"#)).unwrap();
        let v = c.validate().unwrap();
        assert_eq!(c.codec, Codec::Zstd { level: 1 });
        assert_eq!(v.names, ["d0", "d1"]);
        assert!(v.staging_buffers >= 2);
        assert!(v.threads >= 1);
    }

    #[test]
    fn blosc_defaults_to_level_1_byte_shuffle() {
        let parse = |codec: &str| {
            Config::from_json(&format!(
                r#"{{"dtype": "uint16", {DIMS}, "codec": {codec}}}"#
            ))
            .unwrap()
        };
        let c = parse(r#"{"name": "blosc"}"#);
        let byte = Codec::Blosc {
            level: 1,
            shuffle: Shuffle::Byte,
            cname: Cname::Zstd,
        };
        assert_eq!(c.codec, byte);
        let c = parse(r#"{"name": "blosc", "level": 9, "shuffle": "bit"}"#);
        let bit = Codec::Blosc {
            level: 9,
            shuffle: Shuffle::Bit,
            cname: Cname::Zstd,
        };
        assert_eq!(c.codec, bit);
        assert_eq!(Config::from_json(&c.to_json()).unwrap(), c);
        let c = parse(r#"{"name": "blosc", "level": 0, "shuffle": "none"}"#);
        assert!(c.validate().is_ok());
        for (name, cname) in [
            ("lz4", Cname::Lz4),
            ("zlib", Cname::Zlib),
            ("zstd", Cname::Zstd),
        ] {
            let c = parse(&format!(r#"{{"name": "blosc", "cname": "{name}"}}"#));
            assert!(matches!(c.codec, Codec::Blosc { cname: got, .. } if got == cname));
            assert_eq!(Config::from_json(&c.to_json()).unwrap(), c);
            assert_eq!(cname.name(), name);
        }
        for shuffle in [Shuffle::Byte, Shuffle::Bit, Shuffle::None] {
            let c = parse(&format!(
                r#"{{"name": "blosc", "shuffle": "{}"}}"#,
                shuffle.name()
            ));
            assert!(matches!(c.codec, Codec::Blosc { shuffle: got, .. } if got == shuffle));
        }
    }

    #[test]
    fn blosc_tiles_fit_a_frame() {
        let json = |tile: usize| {
            format!(
                r#"{{"dtype": "uint8", "dimensions": [{{"size": 0, "tile": {tile}}}],
                    "codec": {{"name": "blosc"}}}}"#
            )
        };
        let max = blosc1::MAX_INPUT_BYTES;
        assert!(Config::from_json(&json(max)).unwrap().validate().is_ok());
        let e = err(&json(max + 1));
        assert_eq!(e.field, "codec", "{e}");
        assert!(e.rule.contains("blosc"), "{e}");
    }

    #[test]
    fn a_folder_store_takes_a_timeout() {
        let json = format!(
            r#"{{"dtype": "uint8", {DIMS}, "store": {{"path": "s.zarr", "timeout_s": 5}}}}"#
        );
        let v = Config::from_json(&json).unwrap().validate().unwrap();
        assert_eq!(v.config.store.unwrap().timeout_s, Some(5));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (r#"{"dtype": "uint16", "dimensions": [], "bogus": 1}"#.to_string(), "bogus"),
            (r#"{"dtype": "uint17", "dimensions": []}"#.into(), "dtype"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "codec": {{"name": "lz4"}}}}"#), "codec"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "codec": {{"name": "zstd", "level": 99}}}}"#), "codec.level"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "codec": {{"name": "blosc", "level": 10}}}}"#), "codec.level"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "codec": {{"name": "blosc", "level": -1}}}}"#), "codec.level"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "codec": {{"name": "blosc", "shuffle": "word"}}}}"#), "codec"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "codec": {{"name": "blosc", "cname": "snappy"}}}}"#), "codec"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "backend": "tpu"}}"#), "backend"),
            (r#"{"dtype": "uint8", "dimensions": [{"size": 4, "tile": 0}]}"#.into(), "dimensions[0].tile"),
            (r#"{"dtype": "uint8", "dimensions": [{"size": 4, "tile": 1}, {"size": 0, "tile": 1}]}"#.into(), "dimensions[1].size"),
            (r#"{"dtype": "uint8", "dimensions": [{"size": 4, "tile": 1, "tyle": 2}]}"#.into(), "dimensions[0]"),
            (r#"{"dtype": "uint8", "dimensions": []}"#.into(), "dimensions"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "staging_bytes": 1}}"#), "staging_bytes"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "threads": 5000}}"#), "threads"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "store": {{"path": "s.zarr", "timeout_s": 0}}}}"#), "store.timeout_s"),
            (format!(r#"{{"dtype": "uint8", {DIMS}, "store": {{"url": "s3://b/p", "timeout_s": 3601}}}}"#), "store.timeout_s"),
            (r#"{"dtype": "uint8", "#.into(), "json"),
            (r#"{"dimensions": []}"#.into(), "config"),
        ];
        for (json, field) in cases {
            let e = err(&json);
            assert!(e.field.starts_with(field), "{json}: got {e}");
        }
    }
}
