//! The delivery thread: it assembles each array's and level's shards from
//! the compressed epochs, in order, and hands them to the sink.

use super::workers::guarded;
use super::{Shared, Stage};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::shard::{CompressedEpoch, Shard, ShardAssembler};
use crate::sink::ShardSink;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

/// Work for the delivery thread.
pub enum Delivery {
    Epoch(CompressedEpoch),
    Finish { planes: Vec<Vec<u64>> },
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
}

impl DeliveryThread {
    pub fn run(mut self) {
        while let Ok(d) = self.deliveries.recv() {
            if self.shared.is_poisoned() || self.shared.cancel.load(Relaxed) {
                continue; // drain, so that the compute thread never blocks
            }
            let shared = self.shared.clone();
            match d {
                Delivery::Epoch(mut epoch) => {
                    guarded(&shared, "delivery", || self.deliver(&epoch));
                    // A shared output buffer goes back to the backend now,
                    // not when this spare is next filled.
                    epoch.data.release();
                    let _ = self.spare_epochs.send(epoch);
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

    fn finish(&mut self, planes: &[Vec<u64>]) -> Result<()> {
        for a in self.assemblers.iter_mut().flatten() {
            a.finish(&mut counted(&mut *self.sink, &self.shared))?;
        }
        self.sink.finish(planes)
    }
}

/// Emits a shard through `sink`, counting it in the metrics. A stream
/// destroyed without its flush stops here, between two shards of a row:
/// only the sink call under way when it was destroyed completes.
fn counted<'a>(
    sink: &'a mut dyn ShardSink,
    shared: &'a Shared,
) -> impl FnMut(Shard<'_>) -> Result<()> + 'a {
    move |shard| {
        if shared.cancel.load(Relaxed) {
            return Err(Error::Internal(
                "the stream was destroyed before its flush".into(),
            ));
        }
        sink.emit(&shard)?;
        shared
            .metrics
            .add_shard((shard.data.len() + shard.index.len()) as u64);
        Ok(())
    }
}
