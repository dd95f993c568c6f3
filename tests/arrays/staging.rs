//! The staging a writer that waits takes in a stream of many arrays.

use std::time::Duration;
use tiledzarr::config::StreamConfig;
use tiledzarr::Stream;

/// The stream's staging budget.
const STAGING_BYTES: u64 = 8 << 20;

/// `arrays` positions of 256 x 256 uint16 frames, one frame per epoch and
/// per visit, with 8 MiB of staging on the CPU backend.
fn positions(arrays: usize) -> StreamConfig {
    let list: Vec<serde_json::Value> = (0..arrays)
        .map(|p| {
            serde_json::json!({"key": format!("Pos{p}"), "dtype": "uint16", "codec": {"name": "none"},
                "dimensions": [
                    {"name": "t", "size": 0, "tile": 1, "tiles_per_shard": 1},
                    {"name": "y", "size": 256, "tile": 64, "tiles_per_shard": 4},
                    {"name": "x", "size": 256, "tile": 64, "tiles_per_shard": 4}]})
        })
        .collect();
    let json = serde_json::json!({"arrays": list, "backend": "cpu", "threads": 1,
        "staging_bytes": STAGING_BYTES});
    StreamConfig::from_json(&json.to_string()).unwrap()
}

/// The most staging a waiting writer holds with the pipeline held still
/// (the sink answers nothing until the writer has waited out its timeout).
fn staging_a_waiting_writer_takes(arrays: usize) -> u64 {
    let (release_tx, sink) = super::support::held_sink();
    let mut s = Stream::create(&positions(arrays), Some(sink)).unwrap();
    let frame = vec![3u8; 256 * 256 * 2];
    let mut stalled = false;
    'visits: for _ in 0..1000 {
        for p in 0..arrays {
            let n = s
                .write_blocking_to(p, &frame, Some(Duration::from_millis(300)))
                .unwrap();
            if n < frame.len() {
                stalled = true;
                break 'visits;
            }
        }
    }
    assert!(stalled, "the stream never stalled");
    let peak = s.metrics().staging_peak_bytes;
    drop(release_tx);
    drop(s);
    peak
}

/// A writer that waits is kept to what keeps the pipeline busy, counted
/// in the backend's batches: in a lane of many arrays, whose buffers are
/// smaller and gathered into one batch, that is as much staging as one
/// array's, not two of the small buffers (which made every GPU batch of a
/// time-lapse one epoch long).
#[test]
fn a_waiting_writer_of_many_positions_takes_batches_not_buffers() {
    let one = staging_a_waiting_writer_takes(1);
    let many = staging_a_waiting_writer_takes(24);
    assert!(
        3 * many >= 2 * one,
        "24 positions held {many} bytes of staging, one array {one}"
    );
    // Never past the budget: no array holds a partial epoch between its
    // visits, and only those let a lane grow past it.
    assert!(many <= STAGING_BYTES, "{many}");
}
