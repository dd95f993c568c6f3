//! Configurations generated over the JSON schema (and off it), through the
//! C API, at least 100,000 per run (`TZ_FUZZ_CASES` changes the count; the
//! same cases every run unless `TZ_FUZZ_RANDOM` is set), shared among child
//! processes run at once, one a core up to 4 (`TZ_FUZZ_PARTS` changes it):
//!
//! * tz_create_json never aborts the process (the run is under an address
//!   space limit, so an allocation too large fails instead of swapping);
//! * it agrees with tz_estimate_memory_json: a configuration the estimate
//!   refuses is refused with the same status, and one whose estimate does
//!   not fit in memory is refused as out of memory;
//! * an accepted configuration writes, flushes, and reads back bit-exact
//!   (decoded by the test's own reader);
//! * the host memory the stream allocates stays within the estimate (a
//!   counting allocator sees every Rust allocation of the process).

mod common;
mod support;

use common::child::{self, Limits};
use common::*;
use proptest::prelude::*;
use proptest::test_runner::{
    Config as RunnerConfig, RngAlgorithm, TestCaseError, TestRng, TestRunner,
};
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use support::decode;
use tiledzarr::config::IndexLocation;
use tiledzarr::ffi::*;
use tiledzarr::layout::{Dim, Layout};

/// Counts the bytes the process holds, and the most it held since a reset.
struct Counting;

static HELD: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

fn note(delta: i64) {
    let now = HELD.fetch_add(delta, Relaxed) + delta;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call goes to the system allocator unchanged; the counters
// are only arithmetic on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: AllocLayout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            note(l.size() as i64);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: AllocLayout) {
        System.dealloc(p, l);
        note(-(l.size() as i64));
    }
    unsafe fn alloc_zeroed(&self, l: AllocLayout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            note(l.size() as i64);
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: AllocLayout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            note(new as i64 - l.size() as i64);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The process's address space limit: far above what a streamed case
/// needs, far below the machine, so that an oversized allocation fails.
const ADDRESS_SPACE: u64 = 8 << 30;
/// Cases whose estimate is at most this are created, written and read back.
const STREAMED: u64 = 24 << 20;
/// Cases estimated between the two, up to `LARGE`, are created (then
/// dropped) one in this many: creating them costs time (their staging is
/// touched page by page), not coverage.
const SAMPLE_LARGE: u64 = 500;
const LARGE: u64 = 1 << 30;
/// Fixed allowance over the estimate: threads, channels, names, the
/// sink's map of shards.
const SLACK: i64 = 4 << 20;

fn dimension(first: bool) -> impl Strategy<Value = Value> {
    let size = prop_oneof![
        16 => 1u64..40,
        8 => 1u64..300,
        2 => Just(if first { 0 } else { 1 }),
        1 => any::<u64>(),
        1 => (1u64..64).prop_map(|k| k << 26),
    ];
    let tile = prop_oneof![
        24 => 1u64..12,
        8 => 1u64..100,
        1 => Just(0u64),
        1 => any::<u64>(),
        1 => Just(1u64 << 31),
    ];
    let tps = prop_oneof![
        24 => 0u64..5,
        4 => 1u64..64,
        1 => Just(u32::MAX as u64),
        1 => any::<u64>(),
        1 => Just(1u64 << 20),
    ];
    let name = prop_oneof![8 => Just(None), 1 => "[a-z]{1,3}".prop_map(Some)];
    (size, tile, tps, name, 0u8..100).prop_map(move |(size, tile, tps, name, odd)| {
        let size = if first && odd < 40 { 0 } else { size };
        let mut d = json!({"size": size, "tile": tile, "tiles_per_shard": tps});
        if let Some(n) = name {
            d["name"] = n.into();
        }
        match odd {
            0 => d["tile"] = json!("4"),
            1 => d["size"] = json!(-1),
            2 => d["extra"] = json!(1),
            3 => {
                d.as_object_mut().unwrap().remove("tile");
            }
            _ => {}
        }
        d
    })
}

fn codec() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => (-8i64..24).prop_map(|level| json!({"name": "zstd", "level": level})),
        4 => Just(json!({"name": "none"})),
        8 => (
            -1i64..11,
            prop::sample::select(vec!["byte", "bit", "none", "byte", "bit", "none", "word"]),
            prop::sample::select(vec!["zstd", "lz4", "zlib", "zstd", "lz4", "zlib", "snappy"]),
        )
            .prop_map(|(level, shuffle, cname)| {
                json!({"name": "blosc", "level": level, "shuffle": shuffle, "cname": cname})
            }),
        1 => Just(json!({"name": "lz4"})),
        1 => Just(json!("zstd")),
    ]
}

fn dtype() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16",
        "float32", "float64", "uint12", "bool",
    ])
    .prop_map(Value::from)
}

fn config() -> impl Strategy<Value = Value> {
    let dims = (
        dimension(true),
        prop::collection::vec(dimension(false), 0..4),
        0u8..100,
    )
        .prop_map(|(first, rest, odd)| {
            let mut dims = vec![first];
            dims.extend(rest);
            match odd {
                0 => dims.clear(),
                1 => dims = vec![dims[0].clone(); 33],
                _ => {}
            }
            Value::from(dims)
        });
    let staging = prop_oneof![
        12 => (1u64..64).prop_map(|k| Some(k * 1024)),
        1 => (1u64..24).prop_map(|k| Some(k << 20)),
        1 => any::<u64>().prop_map(Some),
        1 => Just(None),
        2 => (1u64..400).prop_map(|g| Some(g << 30)),
    ];
    (
        dtype(),
        dims,
        codec(),
        staging,
        (0u32..4, prop::bool::ANY, 0u8..100),
    )
        .prop_map(|(dtype, dims, codec, staging, (threads, start, odd))| {
            let mut c = json!({
                "dtype": dtype, "dimensions": dims, "codec": codec, "backend": "cpu",
                "threads": threads, "index_location": if start { "start" } else { "end" },
            });
            if let Some(s) = staging {
                c["staging_bytes"] = s.into();
            }
            match odd {
                0 => c["backend"] = json!("gpu"),
                1 => c["threads"] = json!(5000),
                2 => c["bogus"] = json!(true),
                3 => c["store"] = json!({"path": ""}),
                4 => {
                    c.as_object_mut().unwrap().remove("dtype");
                }
                _ => {}
            }
            c
        })
}

/// What the cases did.
#[derive(Default, Debug)]
struct Tally {
    cases: u64,
    refused: HashMap<i32, u64>,
    streamed: u64,
    created_large: u64,
    malformed: u64,
}

fn text_cases() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => config().prop_map(|c| c.to_string()),
        1 => (config(), any::<prop::sample::Index>()).prop_map(|(c, cut)| {
            let text = c.to_string();
            text[..cut.index(text.len())].to_string()
        }),
        1 => "[ -~]{0,40}",
    ]
}

const TEST: &str = "generated_configurations_never_abort_and_stream_within_their_estimate";

/// The cases run in child processes of this test, at once: a case runs on
/// one thread, and the allocation counter and the address space limit are
/// a process's, so a process of its own for each share of the cases is
/// what fills the cores.
#[test]
fn generated_configurations_never_abort_and_stream_within_their_estimate() {
    let env_number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = env_number("TZ_FUZZ_CASES").unwrap_or(100_000);
    if let Some(role) = child::role() {
        let (part, parts) = role
            .split_once('/')
            .and_then(|(p, n)| Some((p.parse().ok()?, n.parse().ok()?)))
            .expect("the child's role is PART/PARTS");
        return run_part(part, parts, cases);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let parts = env_number("TZ_FUZZ_PARTS").unwrap_or(cores.min(4)).max(1);
    // Each child on a thread of its own, so that every child's pipes are
    // read while the others run; child::run fails the test with a failed
    // part's output.
    let outputs: Vec<String> = std::thread::scope(|scope| {
        let parts: Vec<_> = (0..parts)
            .map(|part| {
                let role = format!("{part}/{parts}");
                scope.spawn(move || child::run(TEST, &role, &[], Limits::default()))
            })
            .collect();
        parts.into_iter().map(|p| p.join().unwrap()).collect()
    });
    // Each part's tally, to see what the cases reached (the harness prints
    // it after the test's name, on the same line).
    for (part, stdout) in outputs.iter().enumerate() {
        let tally = format!("part {part} of {parts}: ");
        for line in stdout.lines().filter_map(|l| Some(&l[l.find(&tally)?..])) {
            println!("{line}");
        }
    }
}

/// Part `part` of `parts`: its share of `cases`, drawn from a seed of its
/// own (the same on every run, unless TZ_FUZZ_RANDOM draws new ones, to
/// search further).
fn run_part(part: u64, parts: u64, cases: u64) {
    set_address_space_limit();
    let share = cases / parts + u64::from(part < cases % parts);
    let config = RunnerConfig {
        cases: u32::try_from(share).expect("TZ_FUZZ_CASES fits a u32"),
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..RunnerConfig::default()
    };
    let mut runner = if std::env::var_os("TZ_FUZZ_RANDOM").is_some() {
        TestRunner::new(config)
    } else {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&part.to_le_bytes());
        seed[8..16].copy_from_slice(b"tz-fuzz\0");
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed))
    };
    let tally = std::cell::RefCell::new(Tally::default());
    runner
        .run(&text_cases(), |text| {
            check(&text, &mut tally.borrow_mut()).map_err(TestCaseError::fail)
        })
        .unwrap();
    let t = tally.into_inner();
    println!("part {part} of {parts}: {t:?}");
    assert!(t.cases >= share);
    // The generator reaches every outcome that matters, in every part.
    assert!(t.streamed > share / 20, "{t:?}");
    for status in [tz_status::TZ_ERR_CONFIG, tz_status::TZ_ERR_OUT_OF_MEMORY] {
        assert!(
            t.refused.get(&(status as i32)).is_some_and(|&n| n > 10),
            "{t:?}"
        );
    }
}

fn set_address_space_limit() {
    let l = libc::rlimit {
        rlim_cur: ADDRESS_SPACE,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a plain system call on a struct on the stack.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &l) }, 0);
}

fn estimate(text: &str) -> Result<tz_memory_plan, i32> {
    let c = cstring(text);
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    match tz_estimate_memory_json(c.as_ptr(), plan.as_mut_ptr()) {
        0 => Ok(unsafe { plan.assume_init() }),
        rc => Err(rc),
    }
}

fn check(text: &str, tally: &mut Tally) -> Result<(), String> {
    tally.cases += 1;
    if text.contains('\0') {
        tally.malformed += 1;
        return Ok(());
    }
    let est = estimate(text);
    let host = est.as_ref().map(|p| p.host_bytes).ok();
    let need = est
        .as_ref()
        .map_or(0, |p| p.host_bytes.saturating_add(p.pinned_bytes));
    let create = match est {
        Err(_) => true,
        Ok(_) if need <= STREAMED => return stream(text, need, tally),
        Ok(_) => {
            need > ADDRESS_SPACE || (need <= LARGE && tally.cases.is_multiple_of(SAMPLE_LARGE))
        }
    };
    if !create {
        return Ok(());
    }
    let sink = Collected::default();
    match (create_json(text, Some(&sink)), est) {
        (Err((rc, _)), Err(erc)) if rc == erc => {
            *tally.refused.entry(rc).or_default() += 1;
            Ok(())
        }
        (Err((rc, msg)), Ok(_)) if need > ADDRESS_SPACE => {
            if rc != tz_status::TZ_ERR_OUT_OF_MEMORY as i32 {
                return Err(format!(
                    "{text}: needs {need} bytes, refused with {rc}: {msg}"
                ));
            }
            *tally.refused.entry(rc).or_default() += 1;
            Ok(())
        }
        (Err((rc, msg)), _) => Err(format!("{text}: estimate {host:?}, create {rc}: {msg}")),
        (Ok(s), Ok(_)) if need <= ADDRESS_SPACE => {
            tally.created_large += 1;
            tz_destroy(s);
            Ok(())
        }
        (Ok(s), _) => {
            tz_destroy(s);
            Err(format!(
                "{text}: created although the estimate said {host:?}"
            ))
        }
    }
}

/// Creates, writes, flushes and reads back an accepted configuration,
/// within its estimate.
fn stream(text: &str, estimate: u64, tally: &mut Tally) -> Result<(), String> {
    let config = tiledzarr::Config::from_json(text).map_err(|e| e.to_string())?;
    let dims: Vec<Dim> = config
        .dimensions
        .iter()
        .map(|d| Dim::new(d.size, d.tile, d.tiles_per_shard))
        .collect();
    let elem = config.dtype.size();
    let layout = Layout::new(&dims, elem).map_err(|e| e.to_string())?;
    // Bytes to write: the whole of a small bounded array, else a few
    // epochs' worth (at most 256 KiB).
    let bytes = match layout.array_bytes() {
        Some(n) if n <= 1 << 20 => n,
        Some(n) => n.min(64 << 10),
        None => (3 * layout.epoch_bytes() + 5).min(256 << 10),
    } as usize;
    let data = Rng(tally.cases).bytes(bytes);
    let sink = Collected {
        index_at_start: config.index_location == IndexLocation::Start,
        ..Collected::default()
    };
    let base = HELD.load(Relaxed);
    PEAK.store(base, Relaxed);
    let s = create_json(text, Some(&sink)).map_err(|(rc, m)| format!("{text}: {rc} {m}"))?;
    let written = write_in_pieces(s, &data, &mut || 4099);
    let flushed = tz_flush(s);
    let message = stream_error(s);
    tz_destroy(s);
    let peak = PEAK.load(Relaxed) - base;
    written.map_err(|rc| format!("{text}: write {rc}: {message}"))?;
    if flushed != 0 {
        return Err(format!("{text}: flush {flushed}: {message}"));
    }
    tally.streamed += 1;
    let shards = sink.shards.into_inner().unwrap();
    let kept: i64 = shards.values().map(|v| v.capacity() as i64 + 128).sum();
    if peak > estimate as i64 + kept + SLACK {
        return Err(format!(
            "{text}: allocated {peak} bytes at the peak, estimated {estimate} (+{kept} kept by the test's sink)"
        ));
    }
    read_back(&layout, &config, &data, &shards).map_err(|e| format!("{text}: {e}"))
}

fn read_back(
    layout: &Layout,
    config: &tiledzarr::Config,
    data: &[u8],
    shards: &HashMap<Vec<u64>, Vec<u8>>,
) -> Result<(), String> {
    let plane = layout.plane_bytes() as usize;
    let planes = match layout.array_bytes() {
        Some(n) if n as usize > data.len() => return Ok(()), // a prefix of a large array
        Some(_) => layout.dims()[0].size,
        None => data.len().div_ceil(plane) as u64,
    };
    let dims = support::decode_dims(layout, planes);
    let elem = layout.elem_size();
    let codec = support::decode_codec(config.codec, elem);
    let loc = support::decode_location(config.index_location);
    let decoded = decode::decode_array(&dims, elem, codec, loc, shards)?;
    let mut expected = data.to_vec();
    expected.resize(planes as usize * plane, 0);
    if decoded != expected {
        return Err("the shards do not decode to the data written".into());
    }
    Ok(())
}
