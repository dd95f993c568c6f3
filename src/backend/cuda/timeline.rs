//! A GPU stream's batches step by step, for finding where a stream waits:
//! with `TZ_GPU_TIMELINE` set to a file path, the backend records a CUDA
//! event at each step of each batch on the stream that does the step, and
//! writes them to that file (CSV: batch, step, stream, ms since the first
//! mark) when the stream ends. Each stream of a process overwrites it.
//!
//! The events cost a few microseconds a step. A mark that cannot be
//! recorded ends the timeline, never the stream.

use super::driver::{Event, Stream};
use std::io::Write;
use std::path::PathBuf;

/// The environment variable that names the timeline's file.
pub const ENV: &str = "TZ_GPU_TIMELINE";

/// Marks kept at most (about 1500 batches): the events are driver
/// resources.
const MAX_MARKS: usize = 16 * 1024;

/// The steps marked, each on its stream: after the step named.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// Input stream: the landing pool is free, the frames are on the
    /// device, the tile pool is free, the tiles (and the codec's filter)
    /// are written.
    LandingReady,
    H2dDone,
    TilesReady,
    Scattered,
    /// Compute stream: the wait for the scatter is over, nvCOMP's call is
    /// done, the statuses are copied back; the aggregation.
    CompressGo,
    NvcompDone,
    Compressed,
    AggregateStart,
    AggregateEnd,
    /// Output stream: the copy out of the shard-major bytes.
    D2hStart,
    D2hEnd,
}

impl Step {
    fn stream(self) -> &'static str {
        match self {
            Step::LandingReady | Step::H2dDone | Step::TilesReady | Step::Scattered => "input",
            Step::D2hStart | Step::D2hEnd => "output",
            _ => "compute",
        }
    }
}

pub struct Timeline {
    path: PathBuf,
    marks: Vec<(u64, Step, Event)>,
}

impl Timeline {
    /// A timeline when [`ENV`] names a file.
    pub fn from_env() -> Option<Timeline> {
        let path = std::env::var_os(ENV).filter(|p| !p.is_empty())?;
        Some(Timeline {
            path: path.into(),
            marks: Vec::new(),
        })
    }

    /// Marks `step` of `batch` on `stream`.
    fn mark(&mut self, stream: &Stream, batch: u64, step: Step) {
        if self.marks.len() >= MAX_MARKS || self.marks.try_reserve(1).is_err() {
            return;
        }
        let Ok(event) = Event::new() else { return };
        if event.record(stream, "timeline").is_ok() {
            self.marks.push((batch, step, event));
        }
    }

    /// Writes the marks, in the order they happened, once the work they
    /// follow is done (the caller synchronised the streams). A file that
    /// cannot be written is reported on standard error: the caller asked
    /// for it, and a stream's end has no one to return an error to.
    pub fn finish(&self) {
        if let Err(e) = self.write() {
            eprintln!(
                "tiledzarr: {ENV}: cannot write {}: {e}",
                self.path.display()
            );
        }
    }

    fn write(&self) -> std::io::Result<()> {
        let Some((_, _, first)) = self.marks.first() else {
            return Ok(());
        };
        let mut rows = Vec::with_capacity(self.marks.len());
        for (batch, step, event) in &self.marks {
            let ms = first
                .seconds_until(event, "timeline")
                .map_err(std::io::Error::other)?
                * 1e3;
            rows.push((ms, *batch, *step));
        }
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&self.path)?);
        writeln!(out, "batch,step,stream,ms")?;
        for (ms, batch, step) in rows {
            writeln!(out, "{batch},{step:?},{},{ms:.3}", step.stream())?;
        }
        out.flush()
    }
}

/// Marks `step` of `batch` on `stream` when the stream keeps a timeline.
pub fn mark(timeline: &mut Option<Timeline>, stream: &Stream, batch: u64, step: Step) {
    if let Some(t) = timeline {
        t.mark(stream, batch, step);
    }
}
