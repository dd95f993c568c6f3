//! Command-line options. Parsed by hand: the crate takes no argument-parsing
//! dependency for one tool. An option is a field of [`Options`], its default
//! in `Default`, one arm in [`parse`] (a word from a fixed set goes through
//! [`choice`]) and a line of [`USAGE`].

use std::path::PathBuf;
use std::str::FromStr;
use tiledzarr::config::{BackendChoice, Cname, Method, Shuffle};
use tiledzarr::synth::Pattern;

pub const USAGE: &str = "\
tz-bench: the ingest throughput of TiledZarr, as bench/README.md defines it

usage: tz-bench [options]

  --config NAME|FILE.json   cam-32 (default), cam-32-pyramid, cam-64, cam-128,
                            tczyx, tczyx-ome, frames-u8, or a configuration
                            file in the library's JSON schema
  --backend auto|cpu|gpu    overrides the configuration's backend (named: auto)
  --sink discard|fs         discard shards (pipeline figure, default) or write
                            a Zarr store (end-to-end figure)
  --fsync on|off            with --sink fs: flush every shard file and its
                            folder to the disk before it counts as written
                            (default on, as the library's default)
  --page-cache on|off|auto  with --sink fs: shard files through the page cache
                            (on) or around it where the store's disk takes such
                            writes (off); auto, the library's default: around it
                            with fsync, through it without
  --store-dir DIR           where the store, peer stores and raw frames go
                            (default: the system temp dir); removed at the end
  --bytes SIZE              data streamed per rep, e.g. 2GiB, 512MiB, 8GB
                            (default 2GiB on the CPU, 8GiB on a GPU), rounded
                            down to whole epochs (tile[0] frames), at least one
  --reps N                  timed repetitions (default 3)
  --pattern P               microscopy (default), random, sparse
  --seed S                  generator seed (default 1)
  --level L                 compression level: zstd -7..22, blosc and gzip
                            0..9 (default: the configuration's, 1)
  --codec C[,C...]          the tile codec, or a list to sweep (one record
                            each, then a summary): zstd, gzip, none, blosc
                            (zstd inside, byte shuffle), blosc-zstd,
                            blosc-lz4, blosc-zlib, each blosc one optionally
                            with -byte, -bit or -noshuffle (default: the
                            configuration's codec)
  --multiscale N            write an N-level pyramid (0: until every halved
                            dimension fits in a tile), OME-Zarr metadata
  --method M                the pyramid's reduction: mean (default), min,
                            max, median, decimate
  --staging SIZE            staging_bytes (default: the backend's plan)
  --device-bytes SIZE       device_bytes, the GPU's device memory cap
  --ingest write|dma        write: the frames through write (default); dma:
                            reservations (reserve/commit) committed without
                            a host copy, as a frame grabber's DMA delivers
                            them: an untimed first rep writes the frames
                            into the reservations, and the timed reps commit
                            the staging buffers as that left them (the
                            page-locked buffers are kept between streams)
  --threads N               CPU worker threads, also used by the CPU ceiling
                            (default: one per core)
  --out RECORD.json         the JSON record (default
                            RESULTS/<date>-<config>-<backend>-<sink>.json)
  --results DIR             the folder of records named by default, one per
                            codec of a sweep (default RESULTS: bench/results
                            of the source tree, or of the working directory
                            where the binary runs outside one)
  --peers                   also run scripts/bench-peers.py on the same frames
                            and codec (acquire-zarr, tensorstore), a rep of
                            each after each of the stream's
  --python PATH             interpreter for the peers (default .venv/bin/python)
  --no-ceilings             skip the ceiling measurements
  --positions N             a time-lapse of N positions instead: one stream
                            of N arrays (2048 x 2048 uint16 frames, 2
                            channels, each position's frames written in turn
                            at each time point), beside one stream of the
                            configuration (cam-32) of the same bytes in the
                            same run; the codec and backend options apply
  -h, --help                this text
";

/// How the frames reach the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingest {
    /// `write`: the stream copies them into staging.
    Write,
    /// Reservations committed without a host copy (see the usage text).
    Dma,
}

impl Ingest {
    pub fn name(self) -> &'static str {
        match self {
            Ingest::Write => "write",
            Ingest::Dma => "dma",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    Discard,
    Fs,
}

impl SinkKind {
    pub fn name(self) -> &'static str {
        match self {
            SinkKind::Discard => "discard",
            SinkKind::Fs => "fs",
        }
    }
}

/// A codec as asked on the command line: blosc's `cname` and `shuffle`
/// when named (else the configuration's, or the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecArg {
    Zstd,
    Gzip,
    Blosc {
        cname: Option<Cname>,
        shuffle: Option<Shuffle>,
    },
    None,
}

impl CodecArg {
    /// `zstd`, `gzip`, `none`, `blosc[-zstd|-lz4|-zlib][-byte|-bit|-noshuffle]`.
    pub fn parse(word: &str) -> Result<CodecArg, String> {
        let expected = || {
            format!(
                "expected zstd, gzip, none or blosc[-zstd|-lz4|-zlib][-byte|-bit|-noshuffle], got {word:?}"
            )
        };
        let mut parts = word.split('-');
        let arg = match parts.next() {
            Some("zstd") => CodecArg::Zstd,
            Some("gzip") => CodecArg::Gzip,
            Some("none") => CodecArg::None,
            Some("blosc") => {
                let (mut cname, mut shuffle) = (None, None);
                for p in parts.by_ref() {
                    match p {
                        "zstd" if cname.is_none() => cname = Some(Cname::Zstd),
                        "lz4" if cname.is_none() => cname = Some(Cname::Lz4),
                        "zlib" if cname.is_none() => cname = Some(Cname::Zlib),
                        "byte" if shuffle.is_none() => shuffle = Some(Shuffle::Byte),
                        "bit" if shuffle.is_none() => shuffle = Some(Shuffle::Bit),
                        "noshuffle" if shuffle.is_none() => shuffle = Some(Shuffle::None),
                        _ => return Err(expected()),
                    }
                }
                CodecArg::Blosc { cname, shuffle }
            }
            _ => return Err(expected()),
        };
        match parts.next() {
            None => Ok(arg),
            Some(_) => Err(expected()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub config: String,
    pub backend: Option<BackendChoice>,
    pub sink: SinkKind,
    pub store_dir: Option<PathBuf>,
    /// The store's fsync (filesystem sink).
    pub fsync: bool,
    /// The store's page_cache (filesystem sink); `None`: the default.
    pub page_cache: Option<bool>,
    pub bytes: Option<u64>,
    pub reps: usize,
    pub pattern: Pattern,
    pub seed: u64,
    pub level: Option<i32>,
    /// The codecs to sweep; empty: the configuration's.
    pub codecs: Vec<CodecArg>,
    pub threads: Option<u32>,
    pub staging: Option<u64>,
    pub device_bytes: Option<u64>,
    pub ingest: Ingest,
    /// Pyramid levels (`--multiscale`) and reduction (`--method`).
    pub multiscale: Option<u32>,
    pub method: Option<tiledzarr::config::Method>,
    pub out: Option<PathBuf>,
    /// The folder of records named by default (`--results`).
    pub results: Option<PathBuf>,
    pub peers: bool,
    pub python: Option<PathBuf>,
    pub ceilings: bool,
    /// A time-lapse of this many positions (`--positions`).
    pub positions: Option<usize>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            config: "cam-32".into(),
            backend: None,
            sink: SinkKind::Discard,
            store_dir: None,
            fsync: true,
            page_cache: None,
            bytes: None,
            reps: 3,
            pattern: Pattern::Microscopy,
            seed: 1,
            level: None,
            codecs: Vec::new(),
            threads: None,
            staging: None,
            device_bytes: None,
            ingest: Ingest::Write,
            multiscale: None,
            method: None,
            out: None,
            results: None,
            peers: false,
            python: None,
            ceilings: true,
            positions: None,
        }
    }
}

/// What the command line asks for: a run, or the usage text.
pub enum Parsed {
    Run(Box<Options>),
    Help,
}

pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut o = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        // Both `--key value` and `--key=value`.
        let (key, inline) = match arg.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{key} needs a value"))
        };
        match key.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--config" => o.config = value()?,
            "--backend" => o.backend = Some(backend(&value()?)?),
            "--sink" => {
                let sinks = [("discard", SinkKind::Discard), ("fs", SinkKind::Fs)];
                o.sink = choice(&key, &value()?, &sinks)?;
            }
            "--store-dir" => o.store_dir = Some(value()?.into()),
            "--fsync" => o.fsync = choice(&key, &value()?, &[("on", true), ("off", false)])?,
            "--page-cache" => {
                let choices = [("on", Some(true)), ("off", Some(false)), ("auto", None)];
                o.page_cache = choice(&key, &value()?, &choices)?
            }
            "--bytes" => o.bytes = Some(parse_bytes(&value()?)?),
            "--reps" => o.reps = number(&key, &value()?)?,
            "--pattern" => {
                o.pattern = value()?
                    .parse()
                    .map_err(|e: String| format!("{key}: {e}"))?
            }
            "--seed" => o.seed = number(&key, &value()?)?,
            "--level" => o.level = Some(number(&key, &value()?)?),
            "--codec" => {
                o.codecs = value()?
                    .split(',')
                    .map(|w| CodecArg::parse(w).map_err(|e| format!("{key}: {e}")))
                    .collect::<Result<_, _>>()?;
            }
            "--threads" => o.threads = Some(number(&key, &value()?)?),
            "--staging" => o.staging = Some(parse_bytes(&value()?)?),
            "--device-bytes" => o.device_bytes = Some(parse_bytes(&value()?)?),
            "--ingest" => {
                o.ingest = choice(
                    &key,
                    &value()?,
                    &[("write", Ingest::Write), ("dma", Ingest::Dma)],
                )?
            }
            "--multiscale" => o.multiscale = Some(number(&key, &value()?)?),
            "--method" => {
                let methods = [
                    ("mean", Method::Mean),
                    ("min", Method::Min),
                    ("max", Method::Max),
                    ("median", Method::Median),
                    ("decimate", Method::Decimate),
                ];
                o.method = Some(choice(&key, &value()?, &methods)?);
            }
            "--out" => o.out = Some(value()?.into()),
            "--results" => o.results = Some(value()?.into()),
            "--peers" => o.peers = true,
            "--positions" => o.positions = Some(number(&key, &value()?)?),
            "--python" => o.python = Some(value()?.into()),
            "--no-ceilings" => o.ceilings = false,
            _ if key.starts_with('-') => return Err(format!("unknown option {key:?}")),
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
        if inline.is_some() && matches!(key.as_str(), "--peers" | "--no-ceilings") {
            return Err(format!("{key} takes no value"));
        }
    }
    if o.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    if o.codecs == [CodecArg::None] && o.level.is_some() {
        return Err("--level has no meaning with --codec none".into());
    }
    if o.codecs.len() > 1 && o.out.is_some() {
        return Err(
            "--out names one record: a codec sweep writes one per codec (--results DIR names their folder)"
                .into(),
        );
    }
    if o.out.is_some() && o.results.is_some() {
        return Err("--out and --results: name the record or its folder, not both".into());
    }
    Ok(Parsed::Run(Box::new(o)))
}

fn backend(v: &str) -> Result<BackendChoice, String> {
    let backends = [
        ("auto", BackendChoice::Auto),
        ("cpu", BackendChoice::Cpu),
        ("gpu", BackendChoice::Gpu),
    ];
    choice("--backend", v, &backends)
}

/// One of a fixed set of words: `--sink: expected discard or fs, got "x"`.
fn choice<T: Copy>(key: &str, v: &str, words: &[(&str, T)]) -> Result<T, String> {
    if let Some(&(_, t)) = words.iter().find(|(w, _)| *w == v) {
        return Ok(t);
    }
    let names: Vec<&str> = words.iter().map(|(w, _)| *w).collect();
    let expected = match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(format!("{key}: expected {expected}, got {v:?}"))
}

fn number<T: FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{key}: expected a number, got {v:?}"))
}

/// `2GiB`, `256MiB`, `1.5GB`, `4096`: binary units with `i`, decimal
/// without, as the protocol says GB means 10^9 bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        u => {
            return Err(format!(
                "--bytes: unknown unit {u:?} in {text:?} (B, MB, MiB, GB, GiB, ...)"
            ))
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("--bytes: expected a size such as 2GiB, got {text:?}"))?;
    let bytes = n * scale;
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("--bytes: {text:?} is out of range"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("256 MiB").unwrap(), 256 << 20);
        assert_eq!(parse_bytes("1.5GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("2G").is_err());
        assert!(parse_bytes("0").is_err());
    }

    #[test]
    fn flags() {
        let a = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let Parsed::Run(o) = parse(a("--config=cam-64 --sink fs --reps 2 --peers")).unwrap() else {
            panic!("expected a run")
        };
        assert_eq!(o.config, "cam-64");
        assert_eq!(o.sink, SinkKind::Fs);
        assert_eq!(o.reps, 2);
        assert!(o.peers);
        assert!(parse(a("--reps")).is_err());
        assert!(parse(a("--bogus")).is_err());
        assert!(parse(a("--codec none --level 3")).is_err());
        assert!(parse(a("--codec lz4")).is_err());
        assert!(parse(a("--codec blosc-lz4-zlib")).is_err());
        assert!(parse(a("--codec zstd,blosc-zstd-bit --out x.json")).is_err());
        assert!(parse(a("--out x.json --results r")).is_err());
        let Parsed::Run(o) = parse(a("--codec zstd,gzip --results r")).unwrap() else {
            panic!("a run")
        };
        assert_eq!(o.results, Some(PathBuf::from("r")));
        let Parsed::Run(o) = parse(a("--codec zstd,gzip,blosc-lz4-bit,blosc-noshuffle")).unwrap()
        else {
            panic!("expected a run")
        };
        assert_eq!(
            o.codecs,
            [
                CodecArg::Zstd,
                CodecArg::Gzip,
                CodecArg::Blosc {
                    cname: Some(Cname::Lz4),
                    shuffle: Some(Shuffle::Bit)
                },
                CodecArg::Blosc {
                    cname: None,
                    shuffle: Some(Shuffle::None)
                },
            ]
        );
        assert_eq!(
            parse(a("--sink s3")).err().unwrap(),
            "--sink: expected discard or fs, got \"s3\""
        );
        assert_eq!(
            parse(a("--codec=lz4")).err().unwrap(),
            "--codec: expected zstd, gzip, none or blosc[-zstd|-lz4|-zlib][-byte|-bit|-noshuffle], got \"lz4\""
        );
        assert!(parse(a("--pattern stripes"))
            .err()
            .unwrap()
            .starts_with("--pattern: "));
        assert_eq!(
            parse(a("--bogus")).err().unwrap(),
            "unknown option \"--bogus\""
        );
        assert_eq!(
            parse(a("cam-32")).err().unwrap(),
            "unexpected argument \"cam-32\""
        );
        let Parsed::Run(o) = parse(a("--codec blosc --level 5")).unwrap() else {
            panic!("expected a run")
        };
        assert_eq!(o.level, Some(5));
        assert_eq!(
            o.codecs,
            [CodecArg::Blosc {
                cname: None,
                shuffle: None
            }]
        );
    }
}
