//! The delivery thread: it assembles each array's and level's shards from
//! the compressed epochs, in order, and hands them to the sink.

use super::workers::guarded;
use super::{Shared, Stage};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::metadata::frame_metadata::FrameMetadataArray;
use crate::pipeline::intake::MetadataRow;
use crate::shard::{CompressedEpoch, Shard, ShardAssembler};
use crate::sink::{ShardProgress, ShardSink, TICK};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Instant;

/// Work for the delivery thread.
pub enum Delivery {
    Epoch(CompressedEpoch),
    /// Rows of array `array`'s per-frame metadata.
    FrameMetadata {
        array: u32,
        rows: Vec<crate::pipeline::intake::MetadataRow>,
    },
    Finish {
        planes: Vec<Vec<u64>>,
    },
}

pub struct DeliveryThread {
    pub shared: Arc<Shared>,
    /// Per array, per pyramid level (one without a pyramid): its layout
    /// and shards.
    pub layouts: Vec<Vec<Layout>>,
    pub assemblers: Vec<Vec<ShardAssembler>>,
    pub sink: Box<dyn ShardSink>,
    pub deliveries: Receiver<Delivery>,
    pub spare_epochs: Sender<CompressedEpoch>,
    /// A sink with work left at the end goes back to the stream, so that it
    /// lives (and tries once more) until the stream is destroyed; any other
    /// is dropped when this thread ends (a folder store's lock with it).
    pub retired: Sender<Box<dyn ShardSink>>,
    /// Each array's per-frame metadata array, where it has one, and the
    /// frames its rows written so far cover.
    pub frame_metadata: Vec<Option<(FrameMetadataArray, u64)>>,
}

impl DeliveryThread {
    pub fn run(mut self) {
        let mut ticked = Instant::now();
        loop {
            let d = match self
                .deliveries
                .recv_timeout(TICK.saturating_sub(ticked.elapsed()))
            {
                Ok(d) => Some(d),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
                continue; // drain, so that the compute thread never blocks
            }
            let shared = self.shared.clone();
            if ticked.elapsed() >= TICK {
                guarded(&shared, "delivery", || self.sink.tick());
                ticked = Instant::now();
            }
            let Some(d) = d else { continue };
            match d {
                Delivery::Epoch(mut epoch) => {
                    guarded(&shared, "delivery", || self.deliver(&epoch));
                    // A shared output buffer goes back to the backend now,
                    // not when this spare is next filled.
                    epoch.data.release();
                    let _ = self.spare_epochs.send(epoch);
                }
                Delivery::FrameMetadata { array, rows } => {
                    guarded(&shared, "delivery", || self.frame_metadata(array, rows));
                }
                Delivery::Finish { planes } => {
                    guarded(&shared, "delivery", || self.finish(&planes));
                    break;
                }
            }
        }
        if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
            let shared = self.shared.clone();
            guarded(&shared, "delivery", || {
                self.sink.abandon();
                Ok(())
            });
        }
        if self.sink.has_work_left() {
            let _ = self.retired.send(self.sink);
        }
    }

    fn deliver(&mut self, epoch: &CompressedEpoch) -> Result<()> {
        let t = std::time::Instant::now();
        let (a, k) = (epoch.array as usize, epoch.level as usize);
        let assembler = &mut self.assemblers[a][k];
        let row_done = assembler.push(epoch, &mut counted(&mut *self.sink, &self.shared))?;
        if row_done {
            let planes = self.layouts[a][k].planes_in_shard_rows(assembler.rows_emitted());
            self.sink.progress(epoch.array, epoch.level, planes)?;
        }
        self.shared.metrics.add_time(Stage::Sink, t.elapsed());
        Ok(())
    }

    /// Writes rows of array `array`'s metadata, and its `zarr.json` when
    /// they reach past what it covered.
    fn frame_metadata(&mut self, array: u32, rows: Vec<MetadataRow>) -> Result<()> {
        let Some((m, covered)) = &mut self.frame_metadata[array as usize] else {
            return Ok(());
        };
        let mut docs = Vec::with_capacity(rows.len() + 1);
        let mut reach = *covered;
        for (row, bytes) in rows {
            // JSON text and zero bytes: UTF-8 by construction.
            let text = String::from_utf8(bytes)
                .map_err(|_| Error::Internal("frame metadata that is not UTF-8".into()))?;
            docs.push(m.chunk(row, text));
            reach = reach.max((row + 1) * m.rows);
        }
        if reach > *covered {
            *covered = reach;
            docs.push(m.document(reach));
        }
        self.sink.documents(docs)
    }

    fn finish(&mut self, planes: &[Vec<u64>]) -> Result<()> {
        for a in self.assemblers.iter_mut().flatten() {
            a.finish(&mut counted(&mut *self.sink, &self.shared))?;
        }
        // The metadata arrays' extent: the frames each image holds.
        let docs: Vec<_> = self
            .frame_metadata
            .iter()
            .zip(planes)
            .filter_map(|(m, p)| m.as_ref().map(|(m, _)| m.document(p[0])))
            .collect();
        if !docs.is_empty() {
            self.sink.documents(docs)?;
        }
        self.sink.finish(planes)
    }
}

/// Emits a row of shards through `sink`, counting each in the metrics. A
/// stream destroyed without its flush stops here, between two shards: only
/// the shards being written when it was destroyed complete.
fn counted<'a>(
    sink: &'a mut dyn ShardSink,
    shared: &'a Shared,
) -> impl FnMut(&[Shard<'_>]) -> Result<()> + 'a {
    move |shards| sink.emit_row(shards, &Counted(shared))
}

struct Counted<'a>(&'a Shared);

impl ShardProgress for Counted<'_> {
    fn proceed(&self) -> Result<()> {
        if self.0.cancel.load(Relaxed) {
            return Err(Error::Internal(
                "the stream was destroyed before its flush".into(),
            ));
        }
        Ok(())
    }

    fn written(&self, shard: &Shard<'_>) {
        self.0
            .metrics
            .add_shard((shard.data.len() + shard.index.len()) as u64);
    }
}
