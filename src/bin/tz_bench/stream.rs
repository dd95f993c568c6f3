//! The timed runs: one frame per write, from the first write to the return
//! of `finish` (stream creation, which allocates and pre-faults staging, is
//! outside the clock, as the protocol says).

use super::args::Ingest;
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
    pub lifecycle: Lifecycle,
}

/// What a run's stream took to start and to end, and the memory it held.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Lifecycle {
    /// `Stream::new` (what tz_create does).
    pub create_seconds: f64,
    /// Dropping the flushed stream (what tz_destroy does).
    pub destroy_seconds: f64,
    /// The GPU backend's device and page-locked bytes after the flush
    /// (every buffer allocated by then; page-locked buffers kept for the
    /// next stream excluded), 0 on the CPU.
    pub device_bytes: u64,
    pub pinned_bytes: u64,
    /// How much the process's resident memory grew from before the
    /// stream's creation to the end of its flush (the stream's staging,
    /// shard state and threads, as the system counts them; Linux only).
    pub rss_growth_bytes: Option<u64>,
    /// Staging memory the stream held at its end (the library's
    /// `staging_bytes` metric: what it grew to).
    pub staging_bytes: u64,
}

/// The process's resident bytes (`VmRSS`), where the system tells.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Where the shards of a run go.
pub enum Target<'a> {
    Discard,
    /// A store at this path, replaced by each run, with or without fsync
    /// and the page cache.
    Fs(&'a std::path::Path, FsChoices),
}

/// A folder store's settings that a run chooses.
#[derive(Clone, Copy)]
pub struct FsChoices {
    pub fsync: bool,
    pub page_cache: Option<bool>,
}

pub fn run(
    config: &Config,
    target: &Target,
    frames: &Frames,
    ingest: Ingest,
    progress: &mut Progress,
) -> Result<Run, String> {
    let mut config = config.clone();
    let sink: Option<Box<dyn ShardSink>> = match target {
        Target::Discard => Some(Box::new(Discard)),
        Target::Fs(path, choices) => {
            config.store = Some(Store {
                path: path.to_path_buf(),
                overwrite: true,
                fsync: choices.fsync,
                page_cache: choices.page_cache,
                ..Default::default()
            });
            None
        }
    };
    let rss_before = resident_bytes();
    let t = Instant::now();
    let mut stream = Stream::new(&config, sink).map_err(|e| format!("creating the stream: {e}"))?;
    let create_seconds = t.elapsed().as_secs_f64();
    if let Target::Fs(..) = target {
        // As the peers do before each rep: the write-back of the previous
        // run's files must not be charged to this one.
        tiledzarr::sync_disks();
    }
    let fb = frames.frame_bytes() as u64;
    let start = Instant::now();
    match ingest {
        Ingest::Write => {
            for i in 0..frames.frames() {
                stream
                    .write_blocking(frames.frame(i), None)
                    .map_err(|e| format!("writing frame {i}: {e}"))?;
                progress.update((i + 1) * fb, start);
            }
        }
        Ingest::Dma => {
            let total = frames.bytes() as usize;
            let mut done = 0;
            while done < total {
                let r = stream.reserve().map_err(|e| format!("reserving: {e}"))?;
                if r.is_empty() {
                    drop(r);
                    std::thread::yield_now();
                    continue;
                }
                let n = r.len().min(total - done);
                r.commit(n).map_err(|e| format!("committing: {e}"))?;
                done += n;
                progress.update(done as u64, start);
            }
        }
    }
    let summary = stream
        .finish()
        .map_err(|e| format!("finishing the stream: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let (device_bytes, pinned_bytes) = tiledzarr::backend::cuda::allocated();
    let rss_growth_bytes = rss_before
        .zip(resident_bytes())
        .map(|(before, after)| after.saturating_sub(before));
    let staging_bytes = summary.metrics.staging_bytes;
    let t = Instant::now();
    drop(stream);
    let destroy_seconds = t.elapsed().as_secs_f64();
    progress.done(frames.bytes(), seconds);
    Ok(Run {
        seconds,
        summary,
        lifecycle: Lifecycle {
            create_seconds,
            destroy_seconds,
            device_bytes,
            pinned_bytes,
            rss_growth_bytes,
            staging_bytes,
        },
    })
}

/// Writes the run's frames into reservations (a copy on this thread): the
/// untimed first rep of `--ingest dma`, which leaves the frames in the
/// staging buffers the timed reps commit.
pub fn fill_reservations(config: &Config, frames: &Frames) -> Result<(), String> {
    let mut stream =
        Stream::new(config, Some(Box::new(Discard))).map_err(|e| format!("creating: {e}"))?;
    if stream.backend().0 != tiledzarr::backend::BackendKind::Gpu {
        // Only the GPU keeps staging buffers, and with them the frames,
        // from one stream to the next: the CPU's would stream zeros.
        return Err(format!(
            "--ingest dma needs the GPU backend; this stream runs on the CPU ({})",
            stream.backend().1
        ));
    }
    for i in 0..frames.frames() {
        let mut frame = frames.frame(i);
        while !frame.is_empty() {
            let mut r = stream.reserve().map_err(|e| format!("reserving: {e}"))?;
            let n = r.len().min(frame.len());
            r[..n].copy_from_slice(&frame[..n]);
            r.commit(n).map_err(|e| format!("committing: {e}"))?;
            frame = &frame[n..];
        }
    }
    stream.finish().map_err(|e| format!("finishing: {e}"))?;
    Ok(())
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
