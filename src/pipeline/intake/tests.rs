//! The intake's hand-off of staging buffers and its reservations.

use super::*;
use crate::backend::{BackendKind, Selection};
use crate::sink::SharedAttributes;
use std::sync::mpsc::{channel, sync_channel, Receiver};

const EPOCH: usize = 16;
const EPOCHS_PER_BUFFER: usize = 8;

struct Rig {
    intake: Intake,
    jobs: Receiver<Job>,
    free: Sender<StagingBuffer>,
    pool: rayon::ThreadPool,
    /// Each batch's first epoch and bytes, in the order handed on.
    batches: Vec<(u64, Vec<u8>)>,
}

impl Rig {
    fn new(buffers: usize) -> Rig {
        let (free, free_staging) = channel();
        let bytes = EPOCH * EPOCHS_PER_BUFFER;
        for _ in 0..buffers {
            let buf = vec![0u8; bytes];
            let _ = free.send(StagingBuffer::Host {
                buf,
                start: 0,
                len: bytes,
            });
        }
        let (jobs_tx, jobs) = sync_channel(buffers);
        let selection = Selection {
            kind: BackendKind::Cpu,
            reason: String::new(),
        };
        let shared = Arc::new(Shared::new(
            selection,
            SharedAttributes::new(Default::default()),
            vec![String::new()],
        ));
        let intake = Intake::new(IntakeParts {
            shared,
            arrays: vec![ArrayIntake {
                lane: 0,
                buffer_bytes: bytes,
                epoch_bytes: EPOCH,
                plane_bytes: EPOCH / 4,
                empty_epochs: true,
                capacity: None,
                frame_metadata: None,
            }],
            free_staging: vec![FreeBuffers::new(free_staging, None, 0)],
            jobs: jobs_tx,
            wake_timer: None,
        });
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        Rig {
            intake,
            jobs,
            free,
            pool,
            batches: Vec::new(),
        }
    }

    /// Takes the batches handed on, giving their buffers back.
    fn drain(&mut self) {
        while let Ok(job) = self.jobs.try_recv() {
            if let Job::Batch(crate::pipeline::batches::Batch {
                first_epoch,
                buf,
                valid,
                ..
            }) = job
            {
                self.batches.push((first_epoch, buf[..valid].to_vec()));
                let _ = self.free.send(buf);
            }
        }
    }

    /// Every byte handed on, in order.
    fn bytes(&self) -> Vec<u8> {
        self.batches.iter().flat_map(|(_, b)| b.clone()).collect()
    }

    fn epochs_per_batch(&self) -> Vec<usize> {
        self.batches.iter().map(|(_, b)| b.len() / EPOCH).collect()
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn a_streams_first_batches_grow_from_one_epoch_to_a_whole_buffer() {
    let mut rig = Rig::new(2);
    let data = pattern(40 * EPOCH);
    // Writes of an epoch and a half straddle the hand-offs.
    for piece in data.chunks(EPOCH * 3 / 2) {
        let mut done = 0;
        while done < piece.len() {
            done += rig
                .intake
                .try_write(0, &piece[done..], &rig.pool, Writer::CannotWait)
                .unwrap();
            rig.drain();
        }
    }
    assert_eq!(rig.epochs_per_batch(), [1, 1, 2, 4, 8, 8, 8, 8]);
    let mut first = 0;
    for (epoch, bytes) in &rig.batches {
        assert_eq!(*epoch, first);
        first += (bytes.len() / EPOCH) as u64;
    }
    assert_eq!(rig.bytes(), data);
}

#[test]
fn a_reservation_ends_where_its_buffer_is_handed_on() {
    let mut rig = Rig::new(2);
    let data = pattern(20 * EPOCH);
    let mut at = 0;
    let mut lengths = Vec::new();
    while at < data.len() {
        // A write of half an epoch, then a reservation filled whole.
        let half = (EPOCH / 2).min(data.len() - at);
        at += rig
            .intake
            .try_write(0, &data[at..at + half], &rig.pool, Writer::CannotWait)
            .unwrap();
        rig.drain();
        let Some(mut lease) = rig.intake.lease(0).unwrap() else {
            continue;
        };
        let n = lease.len().min(data.len() - at);
        lengths.push(lease.len());
        lease.bytes()[..n].copy_from_slice(&data[at..at + n]);
        rig.intake.commit(lease, n).unwrap();
        at += n;
        rig.drain();
    }
    assert_eq!(
        lengths[..4],
        [EPOCH / 2, EPOCH / 2, 3 * EPOCH / 2, 7 * EPOCH / 2]
    );
    assert_eq!(rig.epochs_per_batch()[..4], [1, 1, 2, 4]);
    let _jobs = rig.intake.close().unwrap();
    rig.drain();
    assert_eq!(rig.bytes(), data);
}
