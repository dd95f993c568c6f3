//! The JSON record of a run (`bench-protocol.md`, "Records"), and the facts
//! about the machine and the source it needs.

use super::ceilings::Ceiling;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

#[derive(Debug, Serialize)]
pub struct Record {
    pub tool: String,
    /// UTC, ISO 8601.
    pub date: String,
    pub commit: Commit,
    pub device: Device,
    pub configuration: Configuration,
    pub data: Data,
    pub backend: Backend,
    pub sink: Sink,
    pub figures: Figures,
    pub ceilings: Vec<Ceiling>,
    /// As `scripts/bench-peers.py --json` reports them, plus
    /// `tiledzarr_over_peer` (TiledZarr's best GB/s over the peer's best).
    pub peers: Vec<Value>,
    /// The peer script's own account of its run (versions, load), or null.
    pub peers_setup: Value,
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Commit {
    /// `TZ_COMMIT`, else `git rev-parse HEAD`, else "unknown".
    pub hash: String,
    /// Tracked files differ from the commit (untracked ones are not counted).
    pub dirty: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct Device {
    pub cpu: String,
    pub cores: usize,
    pub memory_bytes: Option<u64>,
    /// Filled (from nvidia-smi) when the GPU backend ran; null otherwise.
    pub gpu: Option<String>,
    pub gpu_driver: Option<String>,
    /// 1-minute load average before and after: other work on the machine
    /// makes figures noisy.
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
    /// The share of the machine's CPU time its hypervisor gave to others
    /// ("steal" in `/proc/stat`) from before the first run to after the
    /// last: a virtual machine's neighbours make its memory copies and its
    /// cores slower in a way the load average does not show.
    pub steal_fraction: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Configuration {
    /// The protocol name, or the JSON file's stem.
    pub name: String,
    /// The configuration streamed, in the library's JSON schema (the store,
    /// set per run for the filesystem sink, left out).
    pub json: Value,
    pub tile_shape: Vec<u64>,
    pub shard_shape: Vec<u64>,
    pub threads: usize,
}

#[derive(Debug, Serialize)]
pub struct Data {
    pub pattern: String,
    pub seed: u64,
    pub dtype: String,
    pub frame_shape: Vec<u64>,
    pub frame_bytes: u64,
    pub frames: u64,
    /// Bytes streamed per run.
    pub bytes: u64,
    /// Frames generated before timing; the stream cycles through them.
    pub distinct_frames: u64,
}

#[derive(Debug, Serialize)]
pub struct Backend {
    pub requested: String,
    pub kind: String,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct Sink {
    pub kind: String,
    /// For the filesystem sink: the folder given by --store-dir (or the
    /// temp dir) that the store, the peers' stores and the raw frames went
    /// under, in a scratch folder removed at the end.
    pub dir: Option<String>,
    /// The filesystem holding `dir`, from /proc/mounts: "ext4 /dev/vda on /".
    pub filesystem: Option<String>,
    /// For the filesystem sink: whether every shard file and its folder
    /// were fsync'ed before counting as written.
    pub fsync: Option<bool>,
    /// For the filesystem sink: `on` (shard files through the page
    /// cache), `off` (around it where the disk takes such writes) or
    /// `auto` (the library's default: around it with fsync).
    pub page_cache: Option<String>,
    /// For the filesystem sink: the shard files of the stream's runs that
    /// were written around the page cache (0 where its disk takes no such
    /// writes or the page cache was asked for).
    pub unbuffered_files: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Figures {
    /// Bytes streamed / seconds from the first write to the return of
    /// finish, best run (GB = 1e9 bytes).
    pub best_gbps: f64,
    pub median_gbps: f64,
    /// Every run's seconds, in run order.
    pub seconds: Vec<f64>,
    /// Input bytes / bytes emitted in shards, indexes included.
    pub compression_ratio: f64,
    pub bytes_out: u64,
    pub shards: u64,
    pub epochs: u64,
    /// Of the best run: seconds per stage, summed over the threads that ran
    /// it, and bytes in / those seconds.
    pub stage_seconds: BTreeMap<String, f64>,
    pub stage_gbps: BTreeMap<String, Option<f64>>,
    /// How the frames reached the stream: "write" or "dma" (reservations
    /// committed without a host copy).
    pub ingest: String,
    /// Every run's start, end and memory, in run order (the first run's
    /// stream is the process's first).
    pub lifecycle: Vec<super::stream::Lifecycle>,
    /// `tz_estimate_memory`'s plan for the configuration: device,
    /// page-locked and host bytes.
    pub memory_plan: Option<[u64; 3]>,
}

impl Record {
    pub fn write(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        let mut text = serde_json::to_string_pretty(self).expect("a record serializes");
        text.push('\n');
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
    }
}

/// Whether a record can be written at `path`: its folder is created (as
/// [`Record::write`] would), and the file opened for appending, which leaves
/// an existing one as it was; one created here is removed again.
pub fn check_file(path: &Path) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Whether records can be written in `dir` (created if missing), by
/// creating and removing a file there.
pub fn check_folder(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let probe = dir.join(format!(".tz-bench-{}.probe", std::process::id()));
    std::fs::File::create(&probe)
        .map_err(|e| format!("cannot write a record in {}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

pub fn commit(root: &Path) -> Commit {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    // A bundle's run script sets TZ_COMMIT to the commit its binaries were
    // built from: the checkout it runs in (if any) says nothing about them.
    // Run from a bundle without it, the bundle's COMMIT file (beside bin/)
    // says the same.
    let bundled = || {
        let exe = std::env::current_exe().ok()?;
        let file = exe.parent()?.parent()?.join("COMMIT");
        let hash = std::fs::read_to_string(file).ok()?.trim().to_string();
        (!hash.is_empty()).then_some(hash)
    };
    if let Some(hash) = std::env::var("TZ_COMMIT").ok().or_else(bundled) {
        return Commit { hash, dirty: None };
    }
    match git(&["rev-parse", "HEAD"]) {
        Some(hash) => Commit {
            hash,
            dirty: git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty()),
        },
        None => Commit {
            hash: "unknown".into(),
            dirty: None,
        },
    }
}

pub fn device() -> Device {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = field(&cpuinfo, "model name")
        .or_else(|| field(&cpuinfo, "Model"))
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_bytes = field(&meminfo, "MemTotal")
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024);
    Device {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_bytes,
        gpu: None,
        gpu_driver: None,
        load_before: None,
        load_after: None,
        steal_fraction: None,
    }
}

/// Name and driver version of GPU `ordinal`, from `nvidia-smi` (best
/// effort: both `None` without it).
pub fn gpu(ordinal: u32) -> (Option<String>, Option<String>) {
    let out = Command::new("nvidia-smi")
        .args(["--query-gpu=name,driver_version", "--format=csv,noheader"])
        .arg(format!("--id={ordinal}"))
        .output()
        .ok()
        .filter(|o| o.status.success());
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match text.as_deref().and_then(|t| t.split_once(',')) {
        Some((name, driver)) => (Some(name.trim().into()), Some(driver.trim().into())),
        None => (None, None),
    }
}

/// The mount holding `path` (the longest mount point above it): type,
/// device and mount point. A tmpfs here means the "disk" is memory.
pub fn filesystem(path: &Path) -> Option<String> {
    let path = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3).then(|| (f[0], f[1], f[2]))
        })
        .filter(|(_, at, _)| path.starts_with(at))
        .max_by_key(|(_, at, _)| at.len())
        .map(|(dev, at, kind)| format!("{kind} {dev} on {at}"))
}

/// The first `key: value` line's value.
fn field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// The 1-minute load average.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The machine's CPU time so far, in clock ticks: all of it and the part
/// its hypervisor gave to others (the first line of `/proc/stat`).
#[derive(Debug, Clone, Copy)]
pub struct CpuTimes {
    total: u64,
    steal: u64,
}

pub fn cpu_times() -> Option<CpuTimes> {
    parse_cpu_times(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// `cpu  user nice system idle iowait irq softirq steal guest guest_nice`:
/// the total is the first eight (guest time is inside user time).
fn parse_cpu_times(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (ticks.len() == 8).then(|| CpuTimes {
        total: ticks.iter().sum(),
        steal: ticks[7],
    })
}

/// The share of the CPU time since `before` that was stolen.
pub fn steal_since(before: CpuTimes, after: CpuTimes) -> Option<f64> {
    let total = after.total.checked_sub(before.total)?;
    let steal = after.steal.checked_sub(before.steal)?;
    (total > 0).then(|| steal as f64 / total as f64)
}

/// The current UTC time as ISO 8601 (`2025-01-31T12:34:56Z`) and in the
/// basic form for file names (`20250131T123456Z`).
pub fn now_utc() -> (String, String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let (hh, mm, ss) = (s / 3600, s % 3600 / 60, s % 60);
    (
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z"),
        format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}Z"),
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
/// algorithm; no date crate for one conversion).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        let dir = std::env::temp_dir().join(format!("tz-bench-dest-{}", std::process::id()));
        let record = dir.join("sub/r.json");
        check_file(&record).unwrap();
        assert!(!record.exists(), "the check leaves no file behind");
        std::fs::write(&record, "kept").unwrap();
        check_file(&record).unwrap();
        assert_eq!(std::fs::read_to_string(&record).unwrap(), "kept");
        check_folder(&dir).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "only sub/");
        let err = check_file(&dir.join("sub")).unwrap_err();
        assert!(err.contains("sub"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stolen_cpu_time() {
        let stat = |user: u64, steal: u64, guest: u64| {
            format!("cpu  {user} 0 50 800 10 0 5 {steal} {guest} 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
        };
        let before = parse_cpu_times(&stat(100, 0, 7)).unwrap();
        let after = parse_cpu_times(&stat(160, 40, 37)).unwrap();
        // 100 ticks passed (60 of user time, 40 stolen); the 30 of guest
        // time are inside user time and not counted again.
        assert_eq!(steal_since(before, after), Some(0.4));
        assert_eq!(steal_since(before, before), None, "no time passed");
        assert_eq!(steal_since(after, before), None, "a counter went back");
        assert!(parse_cpu_times("cpu  1 2 3\n").is_none(), "too few fields");
        assert!(
            parse_cpu_times("cpu0 1 2 3 4 5 6 7 8\n").is_none(),
            "no summary line"
        );
        let here = cpu_times().expect("/proc/stat on Linux");
        assert!(here.steal <= here.total);
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
