//! Waiting for the pipeline's threads at the flush and at destroy: for as
//! long as they work, and no longer once the store's disk has stopped
//! answering (see [`StallWatch`]). A thread caught in a write the disk
//! never finishes cannot be stopped; it is left to end on its own, holding
//! what it holds (the store's lock among it) until then.

use super::shared::Shared;
use crate::error::Error;
use crate::sink::StallWatch;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the threads that do not wait on the disk get to wind down once
/// the stream gave up on it (they wait on a queue the stuck thread no
/// longer drains, or end at once).
const WIND_DOWN: Duration = Duration::from_millis(250);

/// The longest nap between two looks at the threads: what the wait adds,
/// at most, to a flush.
const MOST_NAP: Duration = Duration::from_millis(5);

/// Joins `threads`; a panic in one poisons the stream. Where `stall` says
/// the store's disk answered nothing for its bound, poisons the stream with
/// that, stops it, and returns once the other threads ended (or after
/// [`WIND_DOWN`]), leaving the rest running.
pub(super) fn join_threads(
    shared: &Shared,
    mut threads: Vec<JoinHandle<()>>,
    stall: Option<&StallWatch>,
) {
    let Some(stall) = stall else {
        threads.into_iter().for_each(|t| join(shared, t));
        return;
    };
    let mut nap = Duration::from_micros(50);
    loop {
        threads = join_finished(shared, threads);
        if threads.is_empty() {
            return;
        }
        if let Some(e) = stall.stalled() {
            give_up(shared, threads, e);
            return;
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(MOST_NAP);
    }
}

fn join(shared: &Shared, t: JoinHandle<()>) {
    if t.join().is_err() {
        shared.poison(Error::Internal("a pipeline thread panicked".into()));
    }
}

/// Joins the threads that ended; the others.
fn join_finished(shared: &Shared, threads: Vec<JoinHandle<()>>) -> Vec<JoinHandle<()>> {
    let (ended, running): (Vec<_>, Vec<_>) = threads.into_iter().partition(|t| t.is_finished());
    ended.into_iter().for_each(|t| join(shared, t));
    running
}

fn give_up(shared: &Shared, mut threads: Vec<JoinHandle<()>>, e: Error) {
    shared.poison(e);
    shared.cancel.store(true, Relaxed);
    let until = Instant::now() + WIND_DOWN;
    while !threads.is_empty() && Instant::now() < until {
        std::thread::sleep(MOST_NAP);
        threads = join_finished(shared, threads);
    }
    // Dropping a handle detaches its thread.
    drop(threads);
}
