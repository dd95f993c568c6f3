//! The main job: stream a synthetic microscope acquisition into a Zarr v3
//! store with the default backend, one frame per write, and report the
//! throughput.
//!
//! ```text
//! cargo run --release --example acquire -- [--frames N] [--out PATH] [--backend auto|cpu|gpu] [--size PX]
//!     [--multiscale N] [--method mean|min|max|median|decimate]
//! cargo run --release --example acquire -- --help
//! ```
//!
//! The frames are the benchmark protocol's microscopy data (u16 2048x2048,
//! tiles 32x32x32, 16x16 tiles per shard: the cam-32 configuration). Up to
//! 64 distinct frames are generated up front and cycled, so that generating
//! data does not limit the rate; 64 frames span two tiles along z, so no
//! tile sees a repeated frame.
//!
//! A progress bar goes to stderr when stderr is a terminal; the summary goes
//! to stdout. Errors are one line, `error: ...`, and exit status 1.

use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Stream};

const USAGE: &str = "\
acquire: stream a synthetic microscope acquisition into a Zarr v3 store and
report the throughput (u16 frames, tiles 32x32x32, 16x16 tiles per shard,
zstd level 1: the benchmark's cam-32 configuration)

usage: cargo run --release --example acquire -- [options]

  --frames N               frames to write (default 256: 2 GiB at 2048 px)
  --out PATH               the store; an existing store there is replaced
                           (default out.zarr)
  --backend auto|cpu|gpu   auto: the GPU when one is usable, else the CPU
                           (default auto)
  --size PX                frame height and width in pixels (default 2048)
  --multiscale N           write an OME-Zarr image with an N-level pyramid
                           halving z, y and x (0: until y and x fit in a tile)
  --method M               the pyramid's reduction: mean (default), min, max,
                           median, decimate
  -h, --help               this text

Options also take the form --frames=N. While stderr is a terminal a progress
bar shows the frames handed to the stream, the rate and the time left, then a
spinner while the last shards are compressed and written.
";

/// Distinct frames generated before the clock starts (two tiles along z).
const DISTINCT_FRAMES: u64 = 64;

struct Options {
    frames: u64,
    /// Text, as the configuration's JSON holds it.
    out: String,
    /// "auto", "cpu" or "gpu", the configuration's names.
    backend: &'static str,
    size: u64,
    /// Pyramid levels and method, when asked for.
    multiscale: Option<u64>,
    method: &'static str,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            frames: 256,
            out: "out.zarr".into(),
            backend: "auto",
            size: 2048,
            multiscale: None,
            method: "mean",
        }
    }
}

/// What the command line asks for: a run, or the usage text.
enum Parsed {
    Run(Options),
    Help,
}

fn main() -> ExitCode {
    let options = match parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match acquire(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Parses `--key value` and `--key=value`. Errors name the option and the
/// value, as the user typed them.
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    let mut o = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            return Err(format!(
                "unexpected argument {:?} (see --help)",
                arg.to_string_lossy()
            ));
        };
        let (key, inline) = match text.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k.to_string(), Some(OsString::from(v))),
            _ => (text.to_string(), None),
        };
        // A following option is not taken for a missing value (a value that
        // starts with "--" can still be given as --key=value).
        let mut value = || match inline.clone() {
            Some(v) => Ok(v),
            None => match args.next() {
                Some(v) if !v.to_string_lossy().starts_with("--") => Ok(v),
                _ => Err(format!("{key} needs a value (see --help)")),
            },
        };
        match key.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--frames" => o.frames = whole_number(&key, &value()?)?,
            "--out" => {
                o.out = value()?
                    .into_string()
                    .map_err(|v| format!("{key}: {:?} is not valid UTF-8", v.to_string_lossy()))?
            }
            "--backend" => o.backend = backend(&value()?)?,
            "--multiscale" => o.multiscale = Some(whole_number(&key, &value()?)?),
            "--method" => {
                let v = value()?;
                let text = v.to_string_lossy();
                o.method = ["mean", "min", "max", "median", "decimate"]
                    .into_iter()
                    .find(|m| *m == text)
                    .ok_or_else(|| {
                        format!("{key}: {text:?} is not one of mean, min, max, median, decimate")
                    })?;
            }
            "--size" => {
                o.size = whole_number(&key, &value()?)?;
                if o.size == 0 {
                    return Err(format!("{key}: a frame needs at least one pixel, got 0"));
                }
            }
            _ if key.starts_with('-') => {
                return Err(format!("unknown option {key:?} (see --help)"))
            }
            _ => return Err(format!("unexpected argument {key:?} (see --help)")),
        }
    }
    Ok(Parsed::Run(o))
}

fn whole_number(key: &str, v: &OsString) -> Result<u64, String> {
    let text = v.to_string_lossy();
    text.parse()
        .map_err(|_| format!("{key}: {text:?} is not a whole number"))
}

fn backend(v: &OsString) -> Result<&'static str, String> {
    let text = v.to_string_lossy();
    ["auto", "cpu", "gpu"]
        .into_iter()
        .find(|b| *b == text)
        .ok_or_else(|| format!("--backend: {text:?} is not one of auto, cpu, gpu"))
}

fn acquire(o: &Options) -> Result<(), String> {
    let size = o.size;
    // Built as JSON, the library's one schema: keys it adds later keep their
    // defaults, and serde_json escapes the path.
    let mut json = serde_json::json!({
        "dtype": "uint16",
        "dimensions": [
            {"name": "z", "size": 0, "tile": 32, "tiles_per_shard": 1, "unit": "micrometer"},
            {"name": "y", "size": size, "tile": 32, "tiles_per_shard": 16, "unit": "micrometer", "scale": 0.65},
            {"name": "x", "size": size, "tile": 32, "tiles_per_shard": 16, "unit": "micrometer", "scale": 0.65}
        ],
        "codec": {"name": "zstd", "level": 1},
        "backend": o.backend,
        "store": {"path": o.out, "overwrite": true}
    });
    if let Some(levels) = o.multiscale {
        json["multiscale"] = serde_json::json!({"levels": levels, "method": o.method});
    }
    let config = Config::from_json(&json.to_string()).map_err(|e| format!("configuration: {e}"))?;

    // The stream first: a store, backend or memory problem is reported
    // before the frames are generated.
    let mut stream = Stream::new(&config, None).map_err(|e| e.to_string())?;
    let (kind, reason) = stream.backend();
    eprintln!("backend: {} ({reason})", kind.name());

    let generator = Generator::new(Pattern::Microscopy, DType::Uint16, &[size, size], 1);
    let frame_bytes = generator.frame_bytes();
    let distinct: Vec<Vec<u8>> = (0..DISTINCT_FRAMES.min(o.frames).max(1))
        .map(|i| {
            let mut f = vec![0u8; frame_bytes];
            generator.fill_frame(i, &mut f);
            f
        })
        .collect();

    let bar = BarGuard(progress_bar(o.frames, frame_bytes as u64));
    let start = Instant::now();
    let mut busy_spins = 0u64;
    for i in 0..o.frames {
        let frame = &distinct[(i % distinct.len() as u64) as usize];
        // A camera would retry a busy write; here the rest of the frame
        // waits for staging memory instead of spinning on the CPU.
        let n = stream
            .try_write(frame)
            .map_err(|e| format!("writing frame {i}: {e}"))?;
        if n < frame.len() {
            busy_spins += 1;
            stream
                .write_blocking(&frame[n..], None)
                .map_err(|e| format!("writing frame {i}: {e}"))?;
        }
        bar.inc(frame_bytes as u64);
    }
    finishing(&bar);
    let summary = stream
        .finish()
        .map_err(|e| format!("finishing the acquisition: {e}"))?;
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let m = summary.metrics;
    println!(
        "wrote {} frames ({:.2} GB) to {} in {seconds:.2} s: {:.2} GB/s, compression ratio {:.2}, {} shards, {busy_spins} frames met a busy stream",
        o.frames,
        m.bytes_in as f64 / 1e9,
        o.out,
        m.bytes_in as f64 / 1e9 / seconds,
        m.compression_ratio(),
        m.shards,
    );
    let stages: Vec<String> = tiledzarr::pipeline::Stage::ALL
        .iter()
        .map(|&st| format!("{} {:.2} s", st.name(), m.seconds(st)))
        .collect();
    println!(
        "cumulative stage seconds (all threads): {}",
        stages.join(", ")
    );
    Ok(())
}

/// A bar counting the bytes handed to the stream (decimal units, as the
/// summary's GB/s), with the frame count beside it. Hidden when stderr is
/// not a terminal.
fn progress_bar(frames: u64, frame_bytes: u64) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "writing [{wide_bar}] {frames} frames, {decimal_bytes}/{decimal_total_bytes}, \
         {decimal_bytes_per_sec}, ETA {eta}",
    )
    .expect("the template is valid")
    .progress_chars("=> ")
    .with_key(
        "frames",
        move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let done = s.pos() / frame_bytes.max(1);
            let _ = write!(w, "{done}/{frames}");
        },
    );
    ProgressBar::new(frames.saturating_mul(frame_bytes)).with_style(style)
}

/// On an early return (an error) the bar stays where it stopped, showing
/// how far the acquisition got, and the cursor moves to the next line so
/// that the error message starts one.
struct BarGuard(ProgressBar);

impl std::ops::Deref for BarGuard {
    type Target = ProgressBar;
    fn deref(&self) -> &ProgressBar {
        &self.0
    }
}

impl Drop for BarGuard {
    fn drop(&mut self) {
        if !self.0.is_finished() {
            self.0.abandon();
            if !self.0.is_hidden() {
                eprintln!();
            }
        }
    }
}

/// The last frames handed over are still in staging memory, up to a few
/// seconds of compression: a spinner with the time so far says that the
/// program is busy rather than stuck at 100%.
fn finishing(bar: &ProgressBar) {
    let style = ProgressStyle::with_template(
        "{spinner} finishing: compressing and writing the last shards ({elapsed} in all)",
    )
    .expect("the template is valid")
    .tick_chars("-\\|/ ");
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(100));
}
