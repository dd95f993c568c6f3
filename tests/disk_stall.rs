//! A folder store whose disk stalls, as a hung network mount or a failing
//! drive does: the store lies on a FUSE file system
//! (`tests/disk/stall_fs.py`, a real mount served by another process) that
//! holds every call in the kernel while a gate file exists. With
//! `store.timeout_s` 2, `tz_flush` and `tz_destroy` must return within the
//! bound and a short wind-down, the flush with an I/O error naming the
//! store; `tz_write` never waits; and once the disk answers again the
//! stream's threads end, the store's lock goes with them, and every shard
//! row in the store reads back as the frames written. `tz_create` on a disk
//! already stalled fails within the bound too (given there through
//! `tz_options.store_timeout_s`), and leaves no store once the disk
//! answers; `tz_recover_with` fails after the bound its
//! `tz_options.store_timeout_s` gives (`tz_recover` takes the default,
//! 60 s, the same way).
//!
//! Needs `TZ_STALL_FS_PYTHON`, a Python with fusepy (Debian:
//! `/usr/bin/python3` with python3-fusepy), and the right to mount FUSE
//! (root); without it the test says so and does nothing. The test command
//! sets it where a FUSE mount works, and checks that the test ran.

mod common;
mod support;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tiledzarr::ffi::*;

const OK: i32 = tz_status::TZ_OK as i32;
const TIMEOUT_S: u64 = 2;
/// What the flush and destroy may take beyond `TIMEOUT_S`: the watch's
/// wind-down (0.25 s) and a loaded machine's slack.
const SLACK: Duration = Duration::from_secs(4);
/// How long a call may take before the test calls it hung: it then opens
/// the gate, so that the test ends either way.
const HUNG: Duration = Duration::from_secs(40);

/// u16 planes of 64 x 48, a shard row of 4 planes (2 x 2 shards), sent
/// on within 50 ms.
fn json(store: &Path) -> String {
    format!(
        r#"{{"dtype": "uint16", "backend": "cpu", "max_latency_ms": 50, "dimensions": [
            {{"size": 0, "tile": 4, "tiles_per_shard": 1}},
            {{"size": 64, "tile": 16, "tiles_per_shard": 2}},
            {{"size": 48, "tile": 16, "tiles_per_shard": 2}}],
          "store": {{"path": {:?}, "timeout_s": {TIMEOUT_S}}}}}"#,
        store.to_str().unwrap()
    )
}

/// [`json`]'s stream through the C structs, its bound in
/// `tz_options.store_timeout_s`.
fn create_with_options(store: &Path) -> Result<*mut tz_stream, (i32, String)> {
    let path = cstring(store.to_str().unwrap());
    let dims = [c_dim(0, 4, 1), c_dim(64, 16, 2), c_dim(48, 16, 2)];
    let mut c = std::mem::MaybeUninit::<tz_config>::uninit();
    let mut o = std::mem::MaybeUninit::<tz_options>::uninit();
    assert_eq!(tz_config_init(c.as_mut_ptr()), OK);
    assert_eq!(tz_options_init(o.as_mut_ptr()), OK);
    // SAFETY: both initialised by their _init functions just above.
    let (mut c, mut o) = unsafe { (c.assume_init(), o.assume_init()) };
    c.dtype = tz_dtype::TZ_DTYPE_UINT16 as u32;
    c.backend = tz_backend::TZ_BACKEND_CPU as u32;
    c.rank = dims.len() as u32;
    c.dimensions = dims.as_ptr();
    c.store_path = path.as_ptr();
    o.max_latency_ms = 50;
    o.store_timeout_s = TIMEOUT_S;
    create_with(&c, &o)
}

const PLANE_BYTES: usize = 64 * 48 * 2;
const ROW_PLANES: usize = 4;

fn planes(n: usize) -> Vec<u8> {
    Rng(77).bytes(n * PLANE_BYTES)
}

/// The FUSE mount and its server; dropping it opens the gate and unmounts.
struct StallFs {
    server: Child,
    backing: PathBuf,
    mount: PathBuf,
    gate: PathBuf,
    _dir: tempfile::TempDir,
}

impl StallFs {
    fn start(python: &str) -> StallFs {
        let dir = tempfile::tempdir().unwrap();
        let (backing, mount) = (dir.path().join("backing"), dir.path().join("mount"));
        std::fs::create_dir(&backing).unwrap();
        std::fs::create_dir(&mount).unwrap();
        let gate = dir.path().join("gate");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/disk/stall_fs.py");
        let mut server = Command::new(python)
            .arg(&script)
            .args([&backing, &mount, &gate])
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the FUSE server");
        let mut line = String::new();
        BufReader::new(server.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let fs = StallFs {
            server,
            backing,
            mount,
            gate,
            _dir: dir,
        };
        assert_eq!(line.trim(), "mounted", "the FUSE server did not mount");
        fs
    }

    fn stall(&self) {
        std::fs::write(&self.gate, b"").unwrap();
    }

    fn answer(&self) {
        let _ = std::fs::remove_file(&self.gate);
    }
}

impl Drop for StallFs {
    fn drop(&mut self) {
        self.answer();
        let _ = Command::new("kill")
            .args(["-TERM", &self.server.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.server.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
        // Unmounted with the server as a rule; this is for a server killed.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mount)
            .stderr(Stdio::null())
            .status();
    }
}

/// The thread on which `tz_create` makes a folder store.
const CREATE_THREAD: &str = "tz-store-create";

/// The thread on which `tz_recover` repairs a store.
const RECOVER_THREAD: &str = "tz-store-repair";

/// The `/proc` entry of this process's thread named `name`, if it has
/// one. A listing of `/proc/self/task` can end early when a thread ends
/// during it (as the stalled streams' threads do once the disk answers),
/// so the folder is read until the thread is seen, for up to a second.
fn thread_named(name: &str) -> Option<PathBuf> {
    // Linux keeps 15 bytes of a thread's name: a longer one is never found.
    assert!(name.len() <= 15, "{name} is longer than a thread name");
    for _ in 0..50 {
        let found = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .map(|t| t.unwrap().path())
            .find(|task| is_named(task, name));
        if found.is_some() {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn is_named(task: &Path, name: &str) -> bool {
    std::fs::read_to_string(task.join("comm")).is_ok_and(|c| c.trim_end() == name)
}

/// The thread named `name`, which must be waiting on the stalled disk.
fn waiting_thread(name: &str) -> PathBuf {
    thread_named(name).unwrap_or_else(|| panic!("no thread {name} waits on the disk"))
}

/// Waits until the thread `name` at `task` (the work on the store that a
/// call gave up on) has ended.
fn wait_for_end(task: &Path, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while is_named(task, name) {
        assert!(
            Instant::now() < deadline,
            "{name} did not end once the disk answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `call` on a thread of its own and returns its result and how long
/// it took; one that hangs opens the gate and fails the test.
fn timed<T: Send + 'static>(
    fs: &StallFs,
    what: &str,
    call: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    timed_for(fs, what, HUNG, call)
}

/// [`timed`], for a call that hangs after `hung`.
fn timed_for<T: Send + 'static>(
    fs: &StallFs,
    what: &str,
    hung: Duration,
    call: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (tx, rx) = mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(call());
    });
    match rx.recv_timeout(hung) {
        Ok(v) => (v, t0.elapsed()),
        Err(_) => {
            fs.answer();
            panic!("{what} had not returned {hung:?} after the disk stalled");
        }
    }
}

/// A call that gave up on the stalled disk: `TZ_ERR_IO` with a message
/// naming each of `names`, within `bound` and the slack.
fn assert_gave_up(
    what: &str,
    (rc, message): &(i32, String),
    took: Duration,
    names: &[&str],
    bound: Duration,
) {
    eprintln!("{what} on the stalled disk: {took:?}, {rc}: {message}");
    assert_eq!(*rc, tz_status::TZ_ERR_IO as i32, "{what}: {message}");
    for name in names {
        assert!(message.contains(name), "{what}: {message}");
    }
    assert!(
        took <= bound + SLACK,
        "{what} took {took:?}, bound {bound:?}"
    );
}

/// Writes `rows` shard rows of `data` and waits until their shards are
/// emitted (on the disk, its extent moved at most 0.1 s later).
fn write_rows(s: *mut tz_stream, data: &[u8], rows: usize) {
    let bytes = rows * ROW_PLANES * PLANE_BYTES;
    write_in_pieces(s, &data[..bytes], &mut || PLANE_BYTES).unwrap();
    wait_for_shards(s, 4 * rows as u64);
    std::thread::sleep(Duration::from_millis(300));
}

/// tz_write on a stalled disk: takes what staging holds, then says busy,
/// and never waits.
fn write_without_waiting(s: *mut tz_stream, data: &[u8]) {
    for plane in data.chunks(PLANE_BYTES).take(40) {
        let t0 = Instant::now();
        let r = tz_write(s, plane.as_ptr().cast(), plane.len());
        assert!(r >= 0, "tz_write on a stalled disk: {r}");
        assert!(t0.elapsed() < Duration::from_secs(1), "tz_write waited");
    }
}

/// Waits until the stream's threads let go of the store (its lock), then
/// recovers it and checks every row it holds against `data`.
fn check_store_after(backing_store: &Path, data: &[u8], at_least_rows: usize) {
    let path = cstring(backing_store.to_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut report = std::mem::MaybeUninit::<tz_recovery>::zeroed();
        if tz_recover(path.as_ptr(), report.as_mut_ptr()) == OK {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store's lock was not let go once the disk answered: {}",
            last_error()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (shape, _, bytes) = support::decode::decode_store(backing_store).unwrap();
    let planes = shape[0] as usize;
    assert!(
        planes >= at_least_rows * ROW_PLANES,
        "{planes} planes in the store, {at_least_rows} rows were written before the stall"
    );
    assert_eq!(shape[1..], [64, 48]);
    assert!(
        bytes == data[..planes * PLANE_BYTES],
        "the store's planes differ from the frames"
    );
}

#[test]
fn a_stalled_disk_bounds_the_create_the_flush_the_destroy_and_the_recovery() {
    let Ok(python) = std::env::var("TZ_STALL_FS_PYTHON") else {
        eprintln!("skipped: set TZ_STALL_FS_PYTHON to a Python with fusepy (FUSE mounts needed)");
        return;
    };
    let fs = StallFs::start(&python);
    let data = planes(64);

    // The mount passes calls through: a whole stream on it, no stall.
    let store = fs.mount.join("healthy.zarr");
    let s = create_json(&json(&store), None).unwrap();
    write_in_pieces(s, &data[..8 * PLANE_BYTES], &mut || PLANE_BYTES).unwrap();
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    tz_destroy(s);
    check_store_after(&fs.backing.join("healthy.zarr"), &data, 2);

    // The flush: an I/O error naming the store within the bound.
    let store = fs.mount.join("flushed.zarr");
    let s = create_json(&json(&store), None).unwrap();
    write_rows(s, &data, 2);
    fs.stall();
    write_without_waiting(s, &data[2 * ROW_PLANES * PLANE_BYTES..]);
    let handle = s as usize;
    let (rc, took) = timed(&fs, "tz_flush", move || {
        let s = handle as *mut tz_stream;
        (tz_flush(s), stream_error(s))
    });
    let bound = Duration::from_secs(TIMEOUT_S);
    assert_gave_up(
        "tz_flush",
        &rc,
        took,
        &["flushed.zarr", "store.timeout_s"],
        bound,
    );
    let ((), took) = timed(&fs, "tz_destroy after the flush", move || {
        tz_destroy(handle as *mut tz_stream)
    });
    assert!(took < SLACK, "tz_destroy took {took:?}");
    fs.answer();
    check_store_after(&fs.backing.join("flushed.zarr"), &data, 2);

    // The destroy without a flush: within the bound as well.
    let store = fs.mount.join("destroyed.zarr");
    let s = create_json(&json(&store), None).unwrap();
    write_rows(s, &data, 1);
    fs.stall();
    write_without_waiting(s, &data[ROW_PLANES * PLANE_BYTES..]);
    let handle = s as usize;
    let ((), took) = timed(&fs, "tz_destroy", move || {
        tz_destroy(handle as *mut tz_stream)
    });
    eprintln!("tz_destroy on the stalled disk: {took:?}");
    assert!(
        took <= Duration::from_secs(TIMEOUT_S) + SLACK,
        "tz_destroy took {took:?} with timeout_s {TIMEOUT_S}"
    );
    fs.answer();
    check_store_after(&fs.backing.join("destroyed.zarr"), &data, 1);

    // The create on a disk already stalled: an I/O error within the bound
    // (given through the C structs this time), and once the disk answers,
    // nothing of the store is left.
    fs.stall();
    let store = fs.mount.join("created.zarr");
    let at = store.clone();
    let (made, took) = timed(&fs, "tz_create", move || {
        create_with_options(&at).map(|s| s as usize)
    });
    let refused = made.expect_err("tz_create on a stalled disk");
    assert_gave_up(
        "tz_create",
        &refused,
        took,
        &["created.zarr", "store.timeout_s"],
        bound,
    );
    let creating = waiting_thread(CREATE_THREAD);
    fs.answer();
    wait_for_end(&creating, CREATE_THREAD);
    assert!(
        !fs.backing.join("created.zarr").exists(),
        "the store made after the create gave up was not removed"
    );
    let s = create_json(&json(&store), None).expect("a create once the disk answers");
    tz_destroy(s);

    // The recovery on a disk that stalls: an I/O error after the bound of
    // its options, and the recovery ends once the disk answers.
    fs.stall();
    let flushed = fs.mount.join("flushed.zarr");
    let (rc, took) = timed_for(&fs, "tz_recover_with", HUNG, move || {
        let o = tz_options {
            store_timeout_s: TIMEOUT_S,
            ..default_options()
        };
        // A success (status 0) fails the check below.
        recover_store_with(&flushed, Some(&o)).map_or_else(|e| e, |_| (OK, String::new()))
    });
    let names = ["flushed.zarr", "recovering the store", "store.timeout_s"];
    assert_gave_up("tz_recover_with", &rc, took, &names, bound);
    let recovering = waiting_thread(RECOVER_THREAD);
    fs.answer();
    wait_for_end(&recovering, RECOVER_THREAD);

    if let Some(ran) = std::env::var_os("TZ_DISK_TESTS_RAN") {
        std::fs::write(
            ran,
            "a_stalled_disk_bounds_the_create_the_flush_the_destroy_and_the_recovery\n",
        )
        .unwrap();
    }
}
