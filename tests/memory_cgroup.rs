//! The host-memory check holds to the memory cgroup the process is in, not
//! to the machine: a child of the test binary, put in a cgroup with a
//! 1 GiB limit that the test makes below its own, is refused a stream
//! whose staging needs 4 GiB (the machine has more), with an available
//! figure within the limit, and streams to a folder store with 256 MiB.
//! Without the check the kernel's OOM killer ends the child instead.
//! Skipped, loudly, where the machine does not let the test make such a
//! cgroup (not root, no memory controller, a read-only cgroup file system).

mod common;

use common::child::{self, Limits};
use common::*;
use std::path::{Path, PathBuf};
use tiledzarr::ffi::*;

/// The limit of the cgroup the child runs in.
const LIMIT: u64 = 1 << 30;
const ROLE: &str = "in-memory-cgroup";
/// The `cgroup.procs` file the child writes its pid to before anything else.
const PROCS_ENV: &str = "TZ_TEST_CGROUP_PROCS";
/// The folder the child makes its stores in.
const STORE_ENV: &str = "TZ_TEST_STORE";

/// Says loudly that `test` did not run, and why.
fn skipped(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n!!! SKIPPED {test}: {why} !!!\n");
}

/// A CPU stream of 1024 x 1024 uint16 frames with `staging` bytes of
/// staging, into a folder store at `store`.
fn json(staging: u64, store: &Path) -> String {
    format!(
        r#"{{"dtype": "uint16", "backend": "cpu", "staging_bytes": {staging}, "dimensions": [
            {{"size": 0, "tile": 1, "tiles_per_shard": 4}},
            {{"size": 1024, "tile": 256, "tiles_per_shard": 4}},
            {{"size": 1024, "tile": 256, "tiles_per_shard": 4}}],
          "store": {{"path": {:?}, "fsync": false}}}}"#,
        store.to_str().unwrap()
    )
}

const FRAME_BYTES: usize = 1024 * 1024 * 2;

/// The "only N are available" figure of a refusal.
fn available_in(msg: &str) -> Option<u64> {
    let (_, rest) = msg.split_once("only ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The child: joins the cgroup, is refused 4 GiB of staging as out of
/// memory with a figure within the limit, and streams 8 MiB with 256 MiB.
#[test]
fn child_in_memory_cgroup() {
    if child::role().as_deref() != Some(ROLE) {
        return;
    }
    let procs = std::env::var(PROCS_ENV).unwrap();
    std::fs::write(&procs, std::process::id().to_string()).unwrap();
    let store = PathBuf::from(std::env::var(STORE_ENV).unwrap());
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    println!("cgroups: {}", cgroups.trim().replace('\n', " "));
    println!(
        "available in the cgroup: {:?}",
        tiledzarr::memory::available_host_bytes()
    );

    let (rc, msg) = create_json(&json(4 << 30, &store.join("big")), None).unwrap_err();
    assert_eq!(rc, tz_status::TZ_ERR_OUT_OF_MEMORY as i32, "{msg}");
    let available = available_in(&msg).unwrap_or_else(|| panic!("no figure: {msg}"));
    assert!(available <= LIMIT, "{msg}");
    println!("refused: {msg}");

    let small = json(256 << 20, &store.join("small"));
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    let rc = tz_estimate_memory_json(cstring(&small).as_ptr(), plan.as_mut_ptr());
    assert_eq!(rc, tz_status::TZ_OK as i32, "{}", last_error());
    // SAFETY: tz_estimate_memory_json filled the plan: it returned TZ_OK.
    let plan = unsafe { plan.assume_init() };
    println!(
        "256 MiB staging plans {} bytes of host memory",
        plan.host_bytes
    );
    let s = create_json(&small, None).unwrap_or_else(|(rc, msg)| panic!("{rc}: {msg}"));
    let data = Rng(7).bytes(4 * FRAME_BYTES);
    write_in_pieces(s, &data, &mut || 1 << 20).unwrap();
    assert_eq!(tz_flush(s), tz_status::TZ_OK as i32, "{}", stream_error(s));
    tz_destroy(s);
    assert!(store.join("small/zarr.json").exists());
    println!("streamed {} bytes", data.len());
}

/// A cgroup the test made, removed when dropped (once the child that was
/// in it has exited).
struct TestCgroup {
    dir: PathBuf,
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // The kernel may take a moment to let go of an exited child.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("could not remove the test cgroup {}", self.dir.display());
    }
}

/// Where this process's cgroup is in the hierarchy whose line in
/// `/proc/self/cgroup` `line_is_ours` picks and whose mount
/// `mount_is_ours(fs type, super options)` picks.
fn own_cgroup_folder(
    line_is_ours: impl Fn(&str, &str) -> bool,
    mount_is_ours: impl Fn(&str, &str) -> bool,
) -> Result<PathBuf, String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let path = cgroups
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
            line_is_ours(id, controllers).then_some(path)
        })
        .ok_or("the process is in no such cgroup")?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    for line in mountinfo.lines() {
        let Some((mount, fs)) = line.split_once(" - ") else {
            continue;
        };
        let mount: Vec<&str> = mount.split(' ').collect();
        let fs: Vec<&str> = fs.split(' ').collect();
        if fs.len() < 3 || !mount_is_ours(fs[0], fs[2]) {
            continue;
        }
        if let Ok(rest) = Path::new(path).strip_prefix(mount[3]) {
            return Ok(Path::new(mount[4]).join(rest));
        }
    }
    Err(format!("no mount shows cgroup {path}"))
}

/// A v1 memory cgroup below this process's, limited to `limit` bytes.
fn make_v1(limit: u64) -> Result<TestCgroup, String> {
    let own = own_cgroup_folder(
        |_, controllers| controllers.split(',').any(|c| c == "memory"),
        |fs, options| fs == "cgroup" && options.split(',').any(|o| o == "memory"),
    )
    .map_err(|e| format!("no cgroup v1 memory controller: {e}"))?;
    let dir = own.join(format!("tz-test-v1-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let cgroup = TestCgroup { dir };
    std::fs::write(cgroup.dir.join("memory.limit_in_bytes"), limit.to_string())
        .map_err(|e| format!("cannot limit {}: {e}", cgroup.dir.display()))?;
    Ok(cgroup)
}

/// A v2 cgroup below this process's with the memory controller, limited
/// to `limit` bytes.
fn make_v2(limit: u64) -> Result<TestCgroup, String> {
    let own = own_cgroup_folder(
        |id, controllers| id == "0" && controllers.is_empty(),
        |fs, _| fs == "cgroup2",
    )
    .map_err(|e| format!("no cgroup v2 hierarchy: {e}"))?;
    let controllers = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "memory") {
        return Err(format!(
            "the memory controller is not available in {} (cgroup.controllers: {:?})",
            own.display(),
            controllers.trim()
        ));
    }
    let dir = own.join(format!("tz-test-v2-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let cgroup = TestCgroup { dir };
    if !cgroup.dir.join("memory.max").exists() {
        // A cgroup with processes of its own (not the root) may not hand
        // controllers down: then the test cannot run here.
        std::fs::write(own.join("cgroup.subtree_control"), "+memory")
            .map_err(|e| format!("cannot enable memory below {}: {e}", own.display()))?;
    }
    std::fs::write(cgroup.dir.join("memory.max"), limit.to_string())
        .map_err(|e| format!("cannot limit {}: {e}", cgroup.dir.display()))?;
    Ok(cgroup)
}

/// Runs the child in `cgroup` and shows what it printed.
fn run_child_in(cgroup: &TestCgroup) {
    let store = tempfile::tempdir().unwrap();
    println!(
        "available to the test process: {:?}",
        tiledzarr::memory::available_host_bytes()
    );
    let procs = cgroup.dir.join("cgroup.procs");
    let out = child::run(
        "child_in_memory_cgroup",
        ROLE,
        &[
            (PROCS_ENV, procs.to_str().unwrap().to_string()),
            (STORE_ENV, store.path().to_str().unwrap().to_string()),
        ],
        Limits::default(),
    );
    print!("{out}");
    assert!(
        out.contains("refused: ") && out.contains("streamed "),
        "{out}"
    );
}

#[test]
fn staging_beyond_a_v1_memory_cgroup_is_refused() {
    match make_v1(LIMIT) {
        Ok(cgroup) => run_child_in(&cgroup),
        Err(why) => skipped("staging_beyond_a_v1_memory_cgroup_is_refused", &why),
    }
}

#[test]
fn staging_beyond_a_v2_memory_cgroup_is_refused() {
    match make_v2(LIMIT) {
        Ok(cgroup) => run_child_in(&cgroup),
        Err(why) => skipped("staging_beyond_a_v2_memory_cgroup_is_refused", &why),
    }
}
