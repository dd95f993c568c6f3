//! The C API never takes the host program down and never leaves a caller
//! waiting for ever: configurations that once aborted the process, memory
//! the machine does not have, the end of a bounded array in tz_write_all,
//! tz_destroy while a slow sink works, and a sink that calls its own stream.

mod common;

use common::child::{self, Limits};
use common::*;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tiledzarr::ffi::*;

const OK: i32 = tz_status::TZ_OK as i32;

/// The address space the memory-limited child gets.
const LIMIT: u64 = 4 << 30;

/// Configurations that validation accepted and that then aborted the
/// process in tz_create_json (allocations sized by the shard shape), and
/// shapes at the new limits.
const ABORTED: [&str; 4] = [
    r#"{"dtype":"uint8","dimensions":[{"size":0,"tile":1,"tiles_per_shard":4294967295}],"backend":"cpu","staging_bytes":4096}"#,
    r#"{"dtype":"float32","dimensions":[{"size":10,"tile":3},{"size":7,"tile":2,"tiles_per_shard":4294967295}],"backend":"cpu"}"#,
    r#"{"dtype":"uint16","dimensions":[{"size":0,"tile":1,"tiles_per_shard":4294967295},{"size":3,"tile":1,"tiles_per_shard":4294967295}],"backend":"cpu","staging_bytes":4096}"#,
    r#"{"dtype":"uint8","dimensions":[{"size":0,"tile":1,"tiles_per_shard":1},{"size":4294967295,"tile":1,"tiles_per_shard":1}],"backend":"cpu"}"#,
];

/// Accepted shapes at the limits: one shard of 2^20 chunks; a row of 2^16
/// shards of 256 chunks (2^24 chunks, 1.4 GB of shard state: within the
/// limit with two threads; on a machine with many cores their malloc
/// arenas take enough address space that it is refused as out of memory).
const AT_LIMITS: [&str; 2] = [
    r#"{"dtype":"uint8","dimensions":[{"size":0,"tile":1,"tiles_per_shard":1048576}],"backend":"cpu","staging_bytes":4096}"#,
    r#"{"dtype":"uint8","dimensions":[{"size":0,"tile":1,"tiles_per_shard":256},{"size":65536,"tile":1,"tiles_per_shard":1}],"backend":"cpu","staging_bytes":131072}"#,
];

/// Counts shards and bytes without keeping them.
#[derive(Default)]
struct Tally {
    shards: AtomicU64,
    bytes: AtomicU64,
}

unsafe extern "C" fn tally(user: *mut c_void, shard: *const tz_shard) -> i32 {
    let t = &*(user as *const Tally);
    let s = &*shard;
    t.shards.fetch_add(1, Ordering::Relaxed);
    t.bytes
        .fetch_add((s.data_bytes + s.index_bytes) as u64, Ordering::Relaxed);
    0
}

fn create_tally(json: &str, t: &Tally) -> Result<*mut tz_stream, (i32, String)> {
    let json = cstring(json);
    let mut s = std::ptr::null_mut();
    let rc = tz_create_json(
        json.as_ptr(),
        Some(tally),
        t as *const Tally as *mut c_void,
        &mut s,
    );
    if rc != OK {
        return Err((rc, last_error()));
    }
    Ok(s)
}

/// The child under a 4 GiB address space: every configuration is either
/// refused with a configuration or memory status, or streams and flushes.
#[test]
fn child_memory_limited() {
    if child::role().as_deref() != Some("memory-limited") {
        return;
    }
    let staging_100g = r#"{"dtype":"uint16","dimensions":[{"size":0,"tile":1},{"size":64,"tile":8}],"backend":"cpu","staging_bytes":100000000000}"#;
    // More than the limit but maybe less than the machine has: refused by
    // a failed allocation, not by the kernel's OOM killer.
    let staging_6g = r#"{"dtype":"uint16","dimensions":[{"size":0,"tile":1},{"size":64,"tile":8}],"backend":"cpu","staging_bytes":6000000000}"#;
    for (i, json) in ABORTED
        .iter()
        .chain(&AT_LIMITS)
        .chain(&[staging_100g, staging_6g])
        .enumerate()
    {
        let t = Tally::default();
        match create_tally(json, &t) {
            Err((rc, msg)) => {
                assert!(
                    rc == code(tz_status::TZ_ERR_CONFIG)
                        || rc == code(tz_status::TZ_ERR_OUT_OF_MEMORY),
                    "{json}: {rc} {msg}"
                );
                println!("config {i}: refused ({rc}): {msg}");
            }
            Ok(s) => {
                let data = Rng(i as u64).bytes(10_000);
                write_in_pieces(s, &data, &mut || 4096).unwrap();
                assert_eq!(tz_flush(s), OK, "{json}: {}", stream_error(s));
                tz_destroy(s);
                let shards = t.shards.load(Ordering::Relaxed);
                assert!(shards > 0, "{json}");
                println!("config {i}: streamed {shards} shards");
            }
        }
    }
}

#[test]
fn configurations_that_aborted_are_refused_or_stream_under_a_memory_limit() {
    let out = child::run(
        "child_memory_limited",
        "memory-limited",
        &[],
        Limits {
            address_space: Some(LIMIT),
            ..Limits::default()
        },
    );
    let lines: Vec<&str> = out
        .lines()
        .filter_map(|l| l.find("config ").map(|at| &l[at..]))
        .collect();
    assert_eq!(lines.len(), ABORTED.len() + AT_LIMITS.len() + 2, "{out}");
    // The shapes that aborted are refused by the shard limits, naming them.
    for line in &lines[..ABORTED.len()] {
        assert!(line.contains("refused") && line.contains("limit"), "{line}");
    }
    assert!(lines[ABORTED.len()].contains("streamed"), "{out}");
    let line = lines[ABORTED.len() + 1];
    assert!(
        line.contains("streamed") || line.contains("refused (12)"),
        "{line}"
    );
    for line in &lines[ABORTED.len() + AT_LIMITS.len()..] {
        assert!(line.contains("refused (12)"), "{line}");
        assert!(
            line.contains("bytes"),
            "the message gives the numbers: {line}"
        );
    }
}

#[test]
fn the_estimate_counts_the_shard_state() {
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    let json = cstring(AT_LIMITS[0]);
    assert_eq!(
        tz_estimate_memory_json(json.as_ptr(), plan.as_mut_ptr()),
        OK
    );
    let plan = unsafe { plan.assume_init() };
    // An index of 2^20 entries of 16 bytes is held while the shard fills.
    assert!(plan.host_bytes > 16 << 20, "{}", plan.host_bytes);
    let json = cstring(ABORTED[0]);
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    let rc = tz_estimate_memory_json(json.as_ptr(), plan.as_mut_ptr());
    assert_eq!(rc, code(tz_status::TZ_ERR_CONFIG), "{}", last_error());
}

#[test]
fn staging_beyond_the_machines_memory_is_out_of_memory_with_the_numbers() {
    let available = tiledzarr::memory::available_host_bytes().unwrap_or(1 << 40);
    let staging = (100u64 << 30).max(4 * available);
    let json = format!(
        r#"{{"dtype":"uint16","dimensions":[{{"size":0,"tile":1}},{{"size":64,"tile":8}}],"backend":"cpu","staging_bytes":{staging}}}"#
    );
    let (rc, msg) = create_json(&json, Some(&Collected::default())).unwrap_err();
    assert_eq!(rc, code(tz_status::TZ_ERR_OUT_OF_MEMORY), "{msg}");
    assert!(
        msg.contains("available") && msg.contains("staging_bytes"),
        "{msg}"
    );
}

#[test]
fn write_all_at_the_end_returns_what_it_took_and_then_overflows() {
    // 4 x 8 uint16: 64 bytes in all.
    let json = format!(
        r#"{{"dtype": "uint16", "backend": "{}", "dimensions": [
        {{"size": 4, "tile": 2}}, {{"size": 8, "tile": 4, "tiles_per_shard": 2}}]}}"#,
        test_backend()
    );
    let sink = Collected::default();
    let s = create_json(&json, Some(&sink)).unwrap();
    let data = Rng(8).bytes(100);
    // Past the first epoch (32 bytes), which the stream hands on first.
    assert_eq!(
        tz_write_all(s, data.as_ptr() as *const c_void, 40, 10_000),
        40
    );
    let rest = &data[40..];
    let n = tz_write_all(s, rest.as_ptr() as *const c_void, rest.len(), 10_000);
    assert_eq!(n, 24, "the bytes up to the end: {}", stream_error(s));
    let n = tz_write_all(s, rest.as_ptr() as *const c_void, rest.len(), 10_000);
    assert_eq!(n, -(code(tz_status::TZ_ERR_OVERFLOW) as i64));
    assert_eq!(tz_flush(s), OK);
    tz_destroy(s);
    assert_eq!(sink.shards.lock().unwrap().len(), 2);
}

/// A sink that takes `delay` per shard, counting its calls.
struct Slow {
    delay: Duration,
    calls: AtomicU64,
}

unsafe extern "C" fn slow(user: *mut c_void, _shard: *const tz_shard) -> i32 {
    let s = &*(user as *const Slow);
    s.calls.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(s.delay);
    0
}

#[test]
fn destroy_without_flush_stops_delivery_at_once() {
    // Eight shards per row, one epoch per row.
    let json = cstring(&format!(
        r#"{{"dtype": "uint16", "backend": "{}", "staging_bytes": 256, "dimensions": [
        {{"size": 0, "tile": 1}}, {{"size": 64, "tile": 8}}]}}"#,
        test_backend()
    ));
    let sink = Slow {
        delay: Duration::from_millis(300),
        calls: AtomicU64::new(0),
    };
    let mut s = std::ptr::null_mut();
    let user = &sink as *const Slow as *mut c_void;
    assert_eq!(tz_create_json(json.as_ptr(), Some(slow), user, &mut s), OK);
    // Two rows: sixteen shards to deliver, 4.8 s of sink calls.
    let data = Rng(9).bytes(2 * 64 * 2);
    write_in_pieces(s, &data, &mut || 128).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while sink.calls.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    tz_destroy(s);
    let calls = sink.calls.load(Ordering::SeqCst);
    // The call under way completes; no other starts.
    assert!((1..=2).contains(&calls), "{calls} sink calls after destroy");
}

/// A sink that calls its own stream, recording the answers.
#[derive(Default)]
struct Reentrant {
    stream: AtomicPtr<tz_stream>,
    write: AtomicI64,
    write_all: AtomicI64,
    flush: AtomicI64,
    metrics: AtomicI64,
    message: std::sync::Mutex<String>,
}

unsafe extern "C" fn reentrant(user: *mut c_void, _shard: *const tz_shard) -> i32 {
    let r = &*(user as *const Reentrant);
    let s = r.stream.load(Ordering::SeqCst);
    let byte = [0u8; 2];
    r.write.store(
        tz_write(s, byte.as_ptr() as *const c_void, 2),
        Ordering::SeqCst,
    );
    r.write_all.store(
        tz_write_all(s, byte.as_ptr() as *const c_void, 2, -1),
        Ordering::SeqCst,
    );
    r.flush.store(tz_flush(s) as i64, Ordering::SeqCst);
    *r.message.lock().unwrap() = last_error();
    tz_destroy(s); // refused: the stream lives on
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    r.metrics
        .store(tz_get_metrics(s, m.as_mut_ptr()) as i64, Ordering::SeqCst);
    0
}

#[test]
fn a_sink_calling_its_own_stream_gets_an_error_instead_of_a_deadlock() {
    let json = cstring(&format!(
        r#"{{"dtype": "uint16", "backend": "{}", "dimensions": [
        {{"size": 0, "tile": 1}}, {{"size": 16, "tile": 8}}]}}"#,
        test_backend()
    ));
    let r = Box::leak(Box::<Reentrant>::default());
    r.write.store(1, Ordering::SeqCst);
    let mut s = std::ptr::null_mut();
    let user = r as *const Reentrant as *mut c_void;
    assert_eq!(
        tz_create_json(json.as_ptr(), Some(reentrant), user, &mut s),
        OK
    );
    r.stream.store(s, Ordering::SeqCst);
    let data = Rng(10).bytes(3 * 16 * 2);
    write_in_pieces(s, &data, &mut || 32).unwrap();
    let handle = s as usize;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rc = tz_flush(handle as *mut tz_stream);
        let _ = done_tx.send(rc);
    });
    let rc = done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("tz_flush deadlocked on a sink that calls its own stream");
    assert_eq!(rc, OK);
    let invalid = code(tz_status::TZ_ERR_INVALID_ARGUMENT) as i64;
    assert_eq!(r.write.load(Ordering::SeqCst), -invalid);
    assert_eq!(r.write_all.load(Ordering::SeqCst), -invalid);
    assert_eq!(r.flush.load(Ordering::SeqCst), invalid);
    assert_eq!(r.metrics.load(Ordering::SeqCst), OK as i64);
    let msg = r.message.lock().unwrap().clone();
    assert!(msg.contains("own sink callback"), "{msg}");
    // The stream survived the refused tz_destroy and is freed here.
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), OK);
    assert_eq!(unsafe { m.assume_init() }.shards_emitted, 6);
    tz_destroy(s);
}

#[test]
fn the_c_config_grew_into_its_own_padding() {
    // 0.1's tz_config was 88 bytes with 4 of tail padding; the new field
    // takes them, so a program built against 0.1 passes a struct of the
    // same size (and one zeroed as C programs do asks for fsync).
    assert_eq!(std::mem::size_of::<tz_config>(), 88);
    assert_eq!(std::mem::offset_of!(tz_config, store_skip_fsync), 84);
}
