//! The delivery thread: it assembles each array's and level's shards from
//! the compressed epochs, in order, and hands them to the sink.

use super::workers::guarded;
use super::{Shared, Stage};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::metadata::frame_metadata::FrameMetadataArray;
use crate::pipeline::intake::MetadataRow;
use crate::shard::{CompressedEpoch, RowBatch, Shard, ShardAssembler};
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
    /// The most epochs taken off the queue at once (what the backend
    /// hands on at once: the memory plan counts as many being delivered).
    pub most_at_once: usize,
    /// The epochs being delivered together (kept for the next ones).
    pub waiting: Vec<CompressedEpoch>,
    /// The rows of those epochs handed to the sink together (its memory
    /// kept from one delivery to the next).
    pub batch: RowBatch,
}

impl DeliveryThread {
    pub fn run(mut self) {
        let mut ticked = Instant::now();
        // A delivery taken off the queue behind a run of epochs.
        let mut next: Option<Delivery> = None;
        loop {
            let d = match next.take().map(Ok).unwrap_or_else(|| {
                self.deliveries
                    .recv_timeout(TICK.saturating_sub(ticked.elapsed()))
            }) {
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
                Delivery::Epoch(epoch) => {
                    // With the epochs waiting behind it, up to the first
                    // delivery of another kind, which comes next.
                    let mut epochs = std::mem::take(&mut self.waiting);
                    epochs.push(epoch);
                    while epochs.len() < self.most_at_once {
                        match self.deliveries.try_recv() {
                            Ok(Delivery::Epoch(e)) => epochs.push(e),
                            Ok(other) => {
                                next = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    guarded(&shared, "delivery", || self.deliver(&epochs));
                    for mut epoch in epochs.drain(..) {
                        // A shared output buffer goes back to the backend
                        // now, not when this spare is next filled.
                        epoch.data.release();
                        let _ = self.spare_epochs.send(epoch);
                    }
                    self.waiting = epochs;
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

    /// Hands the shards of `epochs` to the sink, in order. The rows that
    /// each epoch makes whole are described into one batch and go to it
    /// together, in one call while the batch has room (see [`RowBatch`]);
    /// a row that spans epochs is assembled and goes on its own, after the
    /// batch before it.
    fn deliver(&mut self, epochs: &[CompressedEpoch]) -> Result<()> {
        let t = std::time::Instant::now();
        let mut batch = std::mem::take(&mut self.batch);
        // The epochs whose rows are in the batch, not yet handed on.
        let mut run = 0..0;
        for (e, epoch) in epochs.iter().enumerate() {
            let (a, k) = (epoch.array as usize, epoch.level as usize);
            if !self.assemblers[a][k].rows_in_place() {
                self.hand_on_batch(&mut batch, &epochs[run])?;
                run = e + 1..e + 1;
                let assembler = &mut self.assemblers[a][k];
                if assembler.push(epoch, &mut counted(&mut *self.sink, &self.shared))? {
                    self.progress(a, k)?;
                }
                continue;
            }
            let row = ShardAssembler::row_description_bytes(&self.layouts[a][k]);
            if !batch.has_room_for(row as usize) {
                self.hand_on_batch(&mut batch, &epochs[run])?;
                run = e..e;
            }
            self.assemblers[a][k].describe_into(epoch, e - run.start, &mut batch)?;
            run.end = e + 1;
        }
        self.hand_on_batch(&mut batch, &epochs[run])?;
        self.batch = batch;
        self.shared.metrics.add_time(Stage::Sink, t.elapsed());
        Ok(())
    }

    /// Emits the rows of `batch` (of `epochs`), then moves the extents of
    /// the arrays and levels they belong to; empties it.
    fn hand_on_batch(&mut self, batch: &mut RowBatch, epochs: &[CompressedEpoch]) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        counted(&mut *self.sink, &self.shared)(&batch.shards(epochs)?)?;
        batch.clear();
        for (i, epoch) in epochs.iter().enumerate() {
            // Once per array and level, after its last row.
            let later = |e: &CompressedEpoch| (e.array, e.level) == (epoch.array, epoch.level);
            if !epochs[i + 1..].iter().any(later) {
                self.progress(epoch.array as usize, epoch.level as usize)?;
            }
        }
        Ok(())
    }

    /// Tells the sink how far array `a`'s level `k` is written.
    fn progress(&mut self, a: usize, k: usize) -> Result<()> {
        let rows = self.assemblers[a][k].rows_emitted();
        let planes = self.layouts[a][k].planes_in_shard_rows(rows);
        self.sink.progress(a as u32, k as u32, planes)
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
    move |shards| sink.emit_rows(shards, &Counted(shared))
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
