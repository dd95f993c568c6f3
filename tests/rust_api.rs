//! The Rust API's contract: `write` never waits (Ok(0) = busy), a panic in
//! a sink becomes an error rather than crossing into the caller, `finish`
//! is terminal.

mod support;

use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use tiledzarr::shard::Shard;
use tiledzarr::{Config, Error, Stream};

/// Unbounded u8, epochs of 2 x 16 bytes, staging of two single-epoch buffers.
const SMALL: &str = r#"{"dtype": "uint8", "dimensions": [
    {"size": 0, "tile": 2, "tiles_per_shard": 1},
    {"size": 16, "tile": 8, "tiles_per_shard": 2}], "staging_bytes": 64}"#;

#[test]
fn write_returns_zero_instead_of_waiting_for_a_stalled_sink() {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let emitted = Arc::new(Mutex::new(0usize));
    let count = emitted.clone();
    // The sink blocks on every shard until released.
    let sink = move |_: &Shard<'_>| -> tiledzarr::Result<()> {
        release_rx.lock().unwrap().recv().unwrap();
        *count.lock().unwrap() += 1;
        Ok(())
    };
    let config = Config::from_json(SMALL).unwrap();
    let mut s = Stream::new(&config, Some(Box::new(sink))).unwrap();
    let data = [7u8; 32];
    // Staging (2 buffers) + the epoch held by the blocked sink + one waiting
    // to be delivered: after a few epochs the stream must say busy.
    let mut busy = false;
    for _ in 0..16 {
        let n = s.write(&data).unwrap();
        if n == 0 {
            busy = true;
            break;
        }
    }
    assert!(
        busy,
        "the stream never reported busy while its sink was stalled"
    );
    assert_eq!(
        s.write(&data).unwrap(),
        0,
        "still busy, and still not waiting"
    );
    // Release the sink: everything written gets out.
    for _ in 0..64 {
        let _ = release_tx.send(());
    }
    let summary = s.finish().unwrap();
    assert_eq!(*emitted.lock().unwrap() as u64, summary.metrics.shards);
    assert!(matches!(s.write(&data), Err(e) if e.to_string().contains("finished")));
}

#[test]
fn a_panicking_sink_poisons_the_stream_with_an_internal_error() {
    let sink = |_: &Shard<'_>| -> tiledzarr::Result<()> { panic!("sink exploded") };
    let config = Config::from_json(SMALL).unwrap();
    let mut s = Stream::new(&config, Some(Box::new(sink))).unwrap();
    let _ = s.write_blocking(&[1u8; 96], None);
    let err = s.finish().unwrap_err();
    assert!(
        matches!(err, Error::Internal(ref m) if m.contains("sink exploded")),
        "{err}"
    );
    // Every later call answers with the same failure.
    assert!(matches!(s.try_write(&[1]), Err(Error::Internal(_))));
    assert!(matches!(s.finish(), Err(Error::Internal(_))));
}

#[test]
fn write_blocking_times_out_with_what_it_took() {
    let (_keep, rx) = mpsc::channel::<()>();
    let rx = Mutex::new(rx);
    // A sink that never returns until the test ends.
    let sink = move |_: &Shard<'_>| -> tiledzarr::Result<()> {
        let _ = rx.lock().unwrap().recv();
        Ok(())
    };
    let config = Config::from_json(SMALL).unwrap();
    let mut s = Stream::new(&config, Some(Box::new(sink))).unwrap();
    let data = vec![3u8; 4096];
    let n = s
        .write_blocking(&data, Some(std::time::Duration::from_millis(50)))
        .unwrap();
    assert!(n > 0 && n < data.len(), "took {n}");
    drop(_keep);
    drop(s);
}

/// `busy_writes` counts each call that found staging full and took less
/// than it was given (a write, a skip, a reservation, a waiting write or
/// skip at its timeout), and nothing else: the test keeps its own count of such
/// returns. `staging_peak_bytes` is the most staging held at once.
#[test]
fn busy_writes_counts_every_call_that_found_staging_full() {
    let (release_tx, sink) = support::held_sink();
    let config = Config::from_json(SMALL).unwrap();
    let mut s = Stream::new(&config, Some(sink)).unwrap();
    let data = [5u8; 48];
    let wait = |ms| Some(std::time::Duration::from_millis(ms));
    // A waiting writer fills staging until it waits out its timeout: the
    // pipeline is then held still by the sink.
    let mut short = 0u64;
    for _ in 0..64 {
        let n = s.write_blocking(&data, wait(300)).unwrap();
        if n < data.len() {
            short += 1;
            break;
        }
    }
    assert_eq!(short, 1, "the stream never stalled");
    for _ in 0..3 {
        assert_eq!(s.write(&data).unwrap(), 0, "busy");
        short += 1;
    }
    // Writes of nothing ask for nothing.
    assert_eq!(s.write(&[]).unwrap(), 0);
    let reservation = s.reserve().unwrap();
    assert!(reservation.is_empty(), "busy");
    short += 1;
    drop(reservation);
    // Whole frames of 16 bytes; skipped frames may go on without staging.
    short += u64::from(s.skip_to(0, 64).unwrap() < 64);
    assert!(s.write_blocking(&data, wait(50)).unwrap() < data.len());
    short += 1;
    // A waiting skip of one frame needs staging (it ends no epoch): its
    // retries within the timeout are not busy writes, the timeout is.
    assert_eq!(s.skip_blocking_to(0, 16, wait(50)).unwrap(), 0);
    short += 1;
    let m = s.metrics();
    assert_eq!(m.busy_writes, short, "busy writes");
    assert_eq!((m.staging_bytes, m.staging_peak_bytes), (64, 64));
    drop(release_tx); // every shard passes from now on
    let summary = s.finish().unwrap();
    assert_eq!(summary.metrics.busy_writes, short);
    assert_eq!(summary.metrics.staging_peak_bytes, 64);
}

#[test]
fn the_kernels_are_built_in_when_the_build_had_nvcc() {
    // scripts/test.sh installs nvcc and sets this: the kernels must compile.
    if std::env::var_os("TZ_REQUIRE_KERNELS").is_some() {
        assert!(tiledzarr::backend::cuda::kernels_built());
    } else {
        eprintln!("TZ_REQUIRE_KERNELS not set: not checking for the kernels");
    }
}

/// A CPU stream's buffers of compressed epochs, when it ends, wait for the
/// process's next stream (a fresh one is faulted in page by page), and
/// `release_cached_memory` frees them.
#[test]
fn a_finished_streams_epoch_buffers_are_kept_and_released() {
    // Epochs of 32 frames of 512 KiB: 16 MiB, incompressible, so each
    // epoch's compressed bytes are over the size worth keeping.
    let config = Config::from_json(
        r#"{"dtype": "uint16", "backend": "cpu", "dimensions": [
            {"size": 0, "tile": 32, "tiles_per_shard": 1},
            {"size": 256, "tile": 32, "tiles_per_shard": 8},
            {"size": 1024, "tile": 32, "tiles_per_shard": 8}]}"#,
    )
    .unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let frames: Vec<u8> = (0..(3 * 16) << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut s = Stream::new(&config, Some(Box::new(tiledzarr::sink::Discard))).unwrap();
    s.write_blocking(&frames, None).unwrap();
    s.finish().unwrap();
    drop(s);
    let kept = tiledzarr::memory::spare_bytes();
    assert!(
        kept >= tiledzarr::memory::SPARE_MIN_BYTES as u64,
        "{kept} bytes kept"
    );
    let freed = tiledzarr::release_cached_memory();
    assert!(freed >= kept, "{freed} of {kept} bytes freed");
}

#[test]
fn a_timeout_too_long_to_reach_means_no_limit() {
    // `Duration::MAX` (a natural "forever") lies past any clock reading:
    // the wait has no deadline instead of overflowing the clock.
    let config = Config::from_json(SMALL).unwrap();
    let discard = |_: &Shard<'_>| -> tiledzarr::Result<()> { Ok(()) };
    let mut s = Stream::new(&config, Some(Box::new(discard))).unwrap();
    let data = [3u8; 32 * 8];
    let far = std::time::Duration::MAX;
    assert_eq!(s.write_blocking(&data, Some(far)).unwrap(), data.len());
    let summary = s.finish().unwrap();
    assert_eq!(summary.metrics.bytes_in, data.len() as u64);
}

/// Without an NVIDIA driver, `backend: "gpu"` fails naming the driver's
/// library as this system's loader names it (`libcuda.so.1`, Windows:
/// `nvcuda.dll`), and `auto` falls back to the CPU saying why. Where the
/// driver loads, there is nothing to check.
#[test]
fn without_a_driver_the_gpu_backend_names_the_library() {
    let driver = if cfg!(windows) {
        "nvcuda.dll"
    } else {
        "libcuda.so.1"
    };
    let with = |backend: &str| {
        let json = SMALL.replacen('{', &format!(r#"{{"backend": "{backend}", "#), 1);
        Config::from_json(&json).unwrap()
    };
    let sink = || Some(Box::new(tiledzarr::sink::Discard) as Box<dyn tiledzarr::sink::ShardSink>);
    let e = match Stream::new(&with("gpu"), sink()) {
        Err(e) if e.to_string().contains("no NVIDIA driver") => e.to_string(),
        other => {
            let what = other
                .err()
                .map_or("a GPU is usable".into(), |e| e.to_string());
            eprintln!("the NVIDIA driver loads here: nothing to check ({what})");
            return;
        }
    };
    assert!(e.contains(driver), "{e}");
    let s = Stream::new(&with("auto"), sink()).unwrap();
    let (kind, reason) = s.backend();
    assert_eq!(kind, tiledzarr::backend::BackendKind::Cpu);
    assert!(reason.contains(driver), "{reason}");
}

#[test]
fn a_store_writes_each_shard_of_a_row_as_the_sink_beside_it_got_it() {
    // Rows of 3 x 4 shards (two epochs each), each shard's chunks of its
    // own sizes: the store writes a row's files on several threads.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rows.zarr");
    let config = Config::from_json(&format!(
        r#"{{"dtype": "uint16", "dimensions": [
            {{"size": 0, "tile": 4, "tiles_per_shard": 2}},
            {{"size": 48, "tile": 8, "tiles_per_shard": 2}},
            {{"size": 64, "tile": 8, "tiles_per_shard": 2}}],
            "store": {{"path": {:?}}}}}"#,
        root
    ))
    .unwrap();
    let got = Arc::new(Mutex::new(Vec::<(Vec<u64>, Vec<u8>)>::new()));
    let seen = got.clone();
    let sink = move |shard: &Shard<'_>| -> tiledzarr::Result<()> {
        seen.lock()
            .unwrap()
            .push((shard.coord.to_vec(), shard.parts().concat()));
        Ok(())
    };
    let mut s = Stream::new(&config, Some(Box::new(sink))).unwrap();
    let mut state = 1u32;
    let frame: Vec<u8> = (0..48 * 64 * 2 * 20)
        .map(|i| {
            // Noise in the low bytes, structure in the high ones.
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            if i % 2 == 0 {
                (state >> 24) as u8
            } else {
                (i / 997) as u8
            }
        })
        .collect();
    assert_eq!(s.write_blocking(&frame, None).unwrap(), frame.len());
    let summary = s.finish().unwrap();
    let got = got.lock().unwrap();
    // 20 frames: two full rows and a partial one of 4 planes.
    assert_eq!(got.len(), 3 * 12);
    assert_eq!(
        summary.metrics.shards,
        got.len() as u64,
        "each shard counted once"
    );
    for (coord, bytes) in got.iter() {
        let path = coord
            .iter()
            .fold(root.join("c"), |p, c| p.join(c.to_string()));
        let file = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            file == *bytes,
            "{} differs from the shard the sink got",
            path.display()
        );
    }
    let files = walk(&root.join("c"));
    assert_eq!(
        files,
        got.len(),
        "no other files (a partial one left behind)"
    );
}

/// Files below `dir`.
fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| if p.is_dir() { walk(&p) } else { 1 })
        .sum()
}

/// A burst of rows into a folder store, then a pause: `zarr.json` covers
/// every row within a fraction of a second, without waiting for the next
/// row or the end (the extent moves at most every 100 ms while rows come,
/// and once more when they stop).
#[test]
fn a_pause_after_a_burst_of_rows_brings_the_extent_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("burst.zarr");
    let config = Config::from_json(&format!(
        r#"{{"dtype": "uint8", "max_latency_ms": 10, "dimensions": [
            {{"size": 0, "tile": 1, "tiles_per_shard": 1}},
            {{"size": 16, "tile": 8, "tiles_per_shard": 2}}],
            "store": {{"path": {:?}, "fsync": false}}}}"#,
        store.to_str().unwrap()
    ))
    .unwrap();
    let mut s = Stream::new(&config, None).unwrap();
    for i in 0..40u8 {
        assert_eq!(s.write_blocking(&[i; 16], None).unwrap(), 16);
    }
    let extent = || -> u64 {
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(store.join("zarr.json")).unwrap()).unwrap();
        doc["shape"][0].as_u64().unwrap()
    };
    let start = std::time::Instant::now();
    while extent() < 40 && start.elapsed() < std::time::Duration::from_secs(3) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(extent(), 40, "the extent before the end");
    s.finish().unwrap();
    assert_eq!(extent(), 40);
}

/// A writer that waits for staging memory (`write_blocking`, C's
/// `tz_write_all`) is given no more than keeps the pipeline busy: two
/// buffers (one being filled, one being compressed), and one ahead if the
/// pipeline was found waiting for the writer before the sink held it (on a
/// busy machine the writer may be the slower at first; the pool's own
/// tests give each pattern of waits its exact count). One that cannot wait
/// (`write`, C's `tz_write`) grows staging to its whole budget to absorb
/// what it writes. Both against a sink that holds the pipeline still, so
/// that the writer outruns it.
#[test]
fn a_waiting_writer_takes_what_keeps_the_pipeline_busy_and_one_that_cannot_wait_the_budget() {
    // Epochs of 32 frames of 256 x 256 uint16 (4 MiB), buffers of 64 MiB,
    // a budget of four.
    let config = Config::from_json(
        r#"{"dtype": "uint16", "backend": "cpu", "staging_bytes": 268435456,
            "dimensions": [
            {"size": 0, "tile": 32, "tiles_per_shard": 1},
            {"size": 256, "tile": 32, "tiles_per_shard": 8},
            {"size": 256, "tile": 32, "tiles_per_shard": 8}]}"#,
    )
    .unwrap();
    let buffer = 64u64 << 20;
    let epoch: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    for waits in [true, false] {
        let (open_tx, open_rx) = mpsc::channel::<()>();
        let open_rx = Mutex::new(open_rx);
        // The sink holds its first shard until the test lets it go.
        let sink = move |_: &Shard<'_>| -> tiledzarr::Result<()> {
            let _ = open_rx.lock().unwrap().recv();
            Ok(())
        };
        let mut s = Stream::new(&config, Some(Box::new(sink))).unwrap();
        let mut written = 0u64;
        let stalled_at = if waits {
            loop {
                let at = (written % epoch.len() as u64) as usize;
                let wait = Some(std::time::Duration::from_millis(300));
                let n = s.write_blocking(&epoch[at..], wait).unwrap();
                written += n as u64;
                if n < epoch.len() - at {
                    break s.metrics().staging_bytes; // timed out: stalled
                }
                assert!(written < 16 * buffer, "never stalled");
            }
        } else {
            // Growth comes on a thread of its own: retry until the
            // budget is taken, or for at most a few seconds.
            let start = std::time::Instant::now();
            while s.metrics().staging_bytes < 4 * buffer && start.elapsed().as_secs() < 10 {
                let at = (written % epoch.len() as u64) as usize;
                written += s.write(&epoch[at..]).unwrap() as u64;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            s.metrics().staging_bytes
        };
        drop(open_tx); // every shard passes from now on
        let want = if waits {
            2 * buffer..=3 * buffer
        } else {
            4 * buffer..=4 * buffer
        };
        assert!(
            want.contains(&stalled_at),
            "staging held (waits: {waits}): {stalled_at} bytes"
        );
        let summary = s.finish().unwrap();
        assert_eq!(summary.metrics.bytes_in, written, "nothing lost");
    }
}
