//! The timed runs: one frame per write, from the first write to the return
//! of `finish` (stream creation, which allocates and pre-faults staging, is
//! outside the clock, as the protocol says).

use super::data::Frames;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use tiledzarr::config::Store;
use tiledzarr::sink::{Discard, ShardSink};
use tiledzarr::{Config, Stream, Summary};

/// One timed run.
pub struct Run {
    pub seconds: f64,
    pub summary: Summary,
}

/// Where the shards of a run go.
pub enum Target<'a> {
    Discard,
    /// A store at this path, replaced by each run, with or without fsync.
    Fs(&'a std::path::Path, bool),
}

pub fn run(
    config: &Config,
    target: &Target,
    frames: &Frames,
    progress: &mut Progress,
) -> Result<Run, String> {
    let mut config = config.clone();
    let sink: Option<Box<dyn ShardSink>> = match target {
        Target::Discard => Some(Box::new(Discard)),
        Target::Fs(path, fsync) => {
            config.store = Some(Store {
                path: path.to_path_buf(),
                overwrite: true,
                fsync: *fsync,
                ..Default::default()
            });
            None
        }
    };
    let mut stream = Stream::new(&config, sink).map_err(|e| format!("creating the stream: {e}"))?;
    if let Target::Fs(..) = target {
        // As the peers do before each rep: the write-back of the previous
        // run's files must not be charged to this one.
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
    }
    let fb = frames.frame_bytes() as u64;
    let start = Instant::now();
    for i in 0..frames.frames() {
        stream
            .write_blocking(frames.frame(i), None)
            .map_err(|e| format!("writing frame {i}: {e}"))?;
        progress.update((i + 1) * fb, start);
    }
    let summary = stream
        .finish()
        .map_err(|e| format!("finishing the stream: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    progress.done(frames.bytes(), seconds);
    Ok(Run { seconds, summary })
}

/// A one-line progress report on stderr: rewritten in place on a terminal,
/// one line per rep otherwise (logs should not fill with carriage returns).
pub struct Progress {
    live: bool,
    label: String,
    last: Option<Instant>,
}

const EVERY: Duration = Duration::from_millis(250);

impl Progress {
    pub fn new() -> Progress {
        Progress {
            live: std::io::stderr().is_terminal(),
            label: String::new(),
            last: None,
        }
    }

    pub fn start(&mut self, label: String) {
        self.label = label;
        self.last = None;
    }

    fn update(&mut self, bytes: u64, start: Instant) {
        if !self.live || self.last.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let s = start.elapsed().as_secs_f64();
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{}: {:.2} GB, {:.3} GB/s so far   ",
            self.label,
            bytes as f64 / 1e9,
            bytes as f64 / 1e9 / s.max(1e-9)
        );
        let _ = err.flush();
    }

    fn done(&mut self, bytes: u64, seconds: f64) {
        let lead = if self.live { "\r" } else { "" };
        eprintln!(
            "{lead}{}: {:.2} GB in {seconds:.3} s = {:.3} GB/s        ",
            self.label,
            bytes as f64 / 1e9,
            bytes as f64 / 1e9 / seconds
        );
    }
}
