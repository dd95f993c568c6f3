//! CUDA and nvCOMP failures on the GPU backend: the stream is poisoned
//! with the failing stage named, and neither the writes, `finish` nor
//! dropping the stream hangs. Ignored by default: `scripts/gpu-run.sh` runs
//! it on a GPU machine with `--ignored`.
//!
//! One test function on purpose: the illegal-address fault leaves the
//! process's CUDA context unusable, so the scenarios run in order, that one
//! last, and no other test shares this process.

mod common;

use common::Rng;
use std::sync::mpsc;
use std::time::Duration;
use tiledzarr::backend::cuda::faults::{self, Fault};
use tiledzarr::{Config, Error, Stream};

const SIZE: u64 = 256;
const PLANE: usize = (SIZE * SIZE * 2) as usize;
/// Staging of 4 epochs a buffer; 64 epochs streamed: many batches after
/// the one the fault strikes.
const PLANES: usize = 16 * 64;
/// Longest a scenario may take before it counts as hung.
const HANG: Duration = Duration::from_secs(120);

fn config() -> Config {
    Config::from_json(&format!(
        r#"{{"dtype": "uint16", "backend": "gpu", "codec": {{"name": "zstd", "level": 1}},
            "staging_bytes": {},
            "dimensions": [{{"size": 0, "tile": 16, "tiles_per_shard": 1}},
                           {{"size": {SIZE}, "tile": 64, "tiles_per_shard": 2}},
                           {{"size": {SIZE}, "tile": 64, "tiles_per_shard": 2}}]}}"#,
        16 * PLANE * 4
    ))
    .unwrap()
}

/// How a scenario's stream ended.
#[derive(Debug)]
enum Outcome {
    /// Every write and `finish` succeeded.
    Finished,
    /// The first error, from a write or from `finish`.
    Failed(Error),
}

/// Streams `PLANES` planes with `fault` armed, then drops the stream, all
/// on a thread watched for hangs.
fn run(fault: Fault) -> Outcome {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        faults::arm(fault);
        let data = Rng(7).bytes(PLANES * PLANE);
        let outcome = (|| {
            let mut s = Stream::new(&config(), Some(Box::new(tiledzarr::sink::Discard)))?;
            for frame in data.chunks(PLANE) {
                if let Err(e) = s.write_blocking(frame, None) {
                    drop(s); // as tz_destroy does, without a flush
                    return Err(e);
                }
            }
            s.finish()
        })();
        let _ = tx.send(match outcome {
            Ok(_) => Outcome::Finished,
            Err(e) => Outcome::Failed(e),
        });
    });
    rx.recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("{fault:?}: the stream hung for {HANG:?}"))
}

fn assert_gpu_failure(outcome: Outcome, stage: &str, needle: &str) {
    match outcome {
        Outcome::Failed(Error::Gpu { stage: s, message }) => {
            assert!(
                s.contains(stage),
                "stage {s:?} named, {stage:?} expected ({message})"
            );
            assert!(
                message.to_lowercase().contains(needle),
                "message {message:?} lacks {needle:?}"
            );
        }
        other => panic!("a GPU failure in {stage} expected, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn gpu_failures_poison_the_stream_and_nothing_hangs() {
    // Nothing armed: the stream runs to the end (the scenarios can fail).
    assert!(matches!(run(Fault::None), Outcome::Finished));

    // A compress failure with a batch in flight names its stage.
    assert_gpu_failure(run(Fault::CompressFails), "compress", "injected");

    // The context survives it: the next stream finishes.
    assert!(matches!(run(Fault::None), Outcome::Finished));

    // A real illegal-address fault in the scatter kernel. It is
    // asynchronous: the driver reports it from whichever call on the
    // context comes next (a wait on the batch, or the next launch), so the
    // stage named is that call's; the message carries the driver's words.
    let outcome = run(Fault::ScatterIllegalAddress);
    eprintln!("illegal address: {outcome:?}");
    assert_gpu_failure(outcome, "", "illegal");

    // Creating another stream afterwards fails cleanly or works, but never
    // hangs or panics.
    let after = run(Fault::None);
    eprintln!("a stream after the fault: {after:?}");
}
