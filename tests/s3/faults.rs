//! What the object store's fault tests share (tests/s3_faults.rs and the
//! C API case in tests/s3_moto.rs): the two servers behind a fault proxy,
//! the cases' arrays, a camera thread, and the checks every case ends with.
#![allow(dead_code)]

#[path = "moto.rs"]
pub mod moto;
#[path = "proxy.rs"]
pub mod proxy;

pub use moto::server;
use proxy::Proxy;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiledzarr::synth::Generator;
use tiledzarr::{Config, DType, Error, Stream};

/// `store.timeout_s` of most cases: short, to keep the matrix quick.
pub const TIMEOUT_S: u64 = 5;
/// How long a failed stream may take to return from the flush (and, apart,
/// from destroy) with `store.timeout_s` of `timeout_s`: the bound the README
/// states (one request's bound, then the wind-down of the uploads cancelled
/// and of the aborts, `min(timeout_s, 10)` each, and a second), and slack for
/// two loaded cores.
pub fn bound_for(timeout_s: u64) -> Duration {
    let wind_down = timeout_s.min(10);
    Duration::from_secs(timeout_s + 2 * wind_down + 1 + 5)
}

/// The small-shard array of the cases: u16 frames of 300 x 200, tiles of
/// 4 x 64 x 64, shards of 1 x 2 x 2 tiles (128 KiB, one PUT each).
pub const FRAME: [u64; 2] = [300, 200];
pub const SMALL: &str = r#"[{"size": 0, "tile": 4, "tiles_per_shard": 1},
    {"size": 300, "tile": 64, "tiles_per_shard": 2}, {"size": 200, "tile": 64, "tiles_per_shard": 2}]"#;
/// Shards of 24 MiB (one u32 plane of 3072 x 2048 each): multipart uploads
/// of three parts.
pub const BIG_FRAME: [u64; 2] = [3072, 2048];
pub const BIG: &str = r#"[{"size": 0, "tile": 1, "tiles_per_shard": 1},
    {"size": 3072, "tile": 1024, "tiles_per_shard": 3}, {"size": 2048, "tile": 1024, "tiles_per_shard": 2}]"#;

pub struct Rng(pub u64);
impl Rng {
    pub fn new(case: &str) -> Rng {
        let seed = std::env::var("TZ_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{case}: seed {seed} (TZ_FAULT_SEED replays it)");
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

/// One of the two servers, and the proxy the library reaches it through.
pub struct Backend {
    pub s3fs: Option<server::Server>,
    pub moto: Option<moto::Moto>,
    pub proxy: Proxy,
    pub bucket: String,
    pub name: &'static str,
    /// `store.timeout_s` of the stores the case makes next.
    pub timeout_s: u64,
}

impl Backend {
    pub fn s3fs(test: &str, root: &Path) -> Option<Backend> {
        let bin = server::binary(test)?;
        let srv = server::Server::start(&bin, root);
        srv.bucket("faults");
        let proxy = Proxy::to(srv.port);
        Some(Backend {
            s3fs: Some(srv),
            moto: None,
            proxy,
            bucket: "faults".into(),
            name: "s3s-fs",
            timeout_s: TIMEOUT_S,
        })
    }

    pub fn moto(test: &str) -> Option<Backend> {
        let py = moto::python(test)?;
        let m = moto::Moto::start(&py);
        m.create_bucket("faults");
        let proxy = Proxy::to(m.port);
        Some(Backend {
            s3fs: None,
            moto: Some(m),
            proxy,
            bucket: "faults".into(),
            name: "moto",
            timeout_s: TIMEOUT_S,
        })
    }

    pub fn store(&self, prefix: &str, extra: &str) -> String {
        format!(
            r#"{{"url": "s3://{}/{prefix}", "endpoint": "{}", "timeout_s": {}{extra}}}"#,
            self.bucket,
            self.proxy.endpoint(),
            self.timeout_s
        )
    }

    /// The bound of the case's stores.
    pub fn bound(&self) -> Duration {
        bound_for(self.timeout_s)
    }

    /// The server dies: the proxy cuts every connection and refuses new
    /// ones, and s3s-fs's process is killed too.
    pub fn kill(&mut self) {
        self.proxy.down();
        if let Some(s) = &mut self.s3fs {
            s.kill();
        }
    }

    /// The server dies (as `kill`) the moment a request whose line
    /// `matches` arrives, after `pass` such requests went through.
    pub fn die_on(&self, matches: impl Fn(&str) -> bool + Send + Sync + 'static, pass: u64) {
        let s3fs_pid = self.s3fs.as_ref().map(|s| s.pid());
        self.proxy.down_on(matches, pass, move || {
            if let Some(pid) = s3fs_pid {
                server::kill_pid(pid);
            }
        });
    }

    /// The server comes back with what it held.
    pub fn back(&mut self) {
        if let Some(s) = &mut self.s3fs {
            s.restart();
        }
        self.proxy.up();
    }

    /// Multipart uploads under `prefix` that hold parts. (An upload whose
    /// creation the server recorded but never answered holds none, and no
    /// client learned its id: a bucket lifecycle rule cleans those.)
    pub fn uploads_with_parts(&self, prefix: &str) -> Vec<String> {
        if let Some(s) = &self.s3fs {
            return s.incomplete_uploads_with_parts();
        }
        let m = self.moto.as_ref().unwrap();
        m.list_multipart_uploads(&self.bucket)
            .into_iter()
            .filter(|(key, id)| key.starts_with(prefix) && m.parts(&self.bucket, key, id) > 0)
            .map(|(key, id)| format!("{key} (upload id {id})"))
            .collect()
    }

    /// The store's objects as a folder (the server's own folder for
    /// s3s-fs; a copy fetched with S3 calls for moto).
    pub fn fetch(&self, prefix: &str, tmp: &Path) -> PathBuf {
        if let Some(s) = &self.s3fs {
            return s.root.join(&self.bucket).join(prefix);
        }
        let m = self.moto.as_ref().unwrap();
        let to = tmp.join(format!("fetched-{prefix}"));
        for key in m.list(&self.bucket, &format!("{prefix}/")) {
            let body = m.get(&self.bucket, &key).expect("a listed object reads");
            let path = to.join(&key[prefix.len() + 1..]);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        to
    }
}

/// A case's configuration: 256 MiB of staging, less than a case writes of
/// the big shards, so that shards go up while the camera runs.
pub fn config(dtype: &str, dims: &str, store: &str) -> Config {
    let json = format!(
        r#"{{"dtype": "{dtype}", "dimensions": {dims}, "codec": {{"name": "zstd", "level": 1}},
            "backend": "cpu", "threads": 2, "staging_bytes": 268435456, "store": {store}}}"#
    );
    Config::from_json(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// Writes frames `0..planes` of `g` to `s`, each whole before the next.
pub fn write_planes(s: &mut Stream, g: &Generator, planes: u64) {
    let mut frame = vec![0u8; g.frame_bytes()];
    for p in 0..planes {
        g.fill_frame(p, &mut frame);
        assert_eq!(s.write_blocking(&frame, None).unwrap(), frame.len());
    }
}

/// Whether a request line asks to complete a multipart upload.
pub fn is_completion(line: &str) -> bool {
    line.starts_with("POST ") && line.contains("uploadId=")
}

/// The camera: `planes` frames at `fps` (0: as fast as the stream takes
/// them), in writes of random sizes, until done, failed or stopped.
pub struct Camera {
    pub thread: std::thread::JoinHandle<(Stream, u64, Option<Error>)>,
    pub stop: Arc<AtomicBool>,
}

impl Camera {
    pub fn start(mut s: Stream, g: Generator, planes: u64, fps: u64, seed: u64) -> Camera {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut rng = Rng(seed | 1);
            let mut frame = vec![0u8; g.frame_bytes()];
            let start = Instant::now();
            for plane in 0..planes {
                if fps > 0 {
                    let due = start + Duration::from_secs_f64(plane as f64 / fps as f64);
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                }
                g.fill_frame(plane, &mut frame);
                let mut at = 0;
                while at < frame.len() {
                    if stopped.load(Relaxed) {
                        return (s, plane, None);
                    }
                    let n = (rng.range(1, frame.len() as u64 + 1) as usize).min(frame.len() - at);
                    match s.try_write(&frame[at..at + n]) {
                        Ok(0) => std::thread::sleep(Duration::from_millis(1)),
                        Ok(k) => at += k,
                        Err(e) => return (s, plane, Some(e)),
                    }
                }
            }
            (s, planes, None)
        });
        Camera { thread, stop }
    }

    pub fn join(self) -> (Stream, u64, Option<Error>) {
        self.stop.store(true, Relaxed);
        self.thread.join().unwrap()
    }
}

/// The checks every case ends with, once the server is back: `zarr.json`
/// is there and its extent covers complete shard rows only; every shard on
/// the server decodes bit-exact (a missing one reads as fill); no multipart
/// upload with parts is left. Returns the complete shard rows.
pub fn check_store(b: &Backend, prefix: &str, tmp: &Path, g: &Generator, dtype: DType) -> u64 {
    let left = b.uploads_with_parts(prefix);
    assert!(
        left.is_empty(),
        "{}: multipart uploads left behind: {left:?}",
        b.name
    );
    let dir = b.fetch(prefix, tmp);
    let meta = std::fs::read_to_string(dir.join("zarr.json"))
        .unwrap_or_else(|e| panic!("{}: zarr.json of {prefix}: {e}", b.name));
    let mut doc: serde_json::Value = serde_json::from_str(&meta).unwrap();
    let extent = doc["shape"][0].as_u64().unwrap();
    let shard: Vec<u64> = doc["chunk_grid"]["configuration"]["chunk_shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let grid: Vec<u64> = (1..3)
        .map(|d| g.frame_shape()[d - 1].div_ceil(shard[d]))
        .collect();
    let has = |row: u64, y: u64, x: u64| dir.join(format!("c/{row}/{y}/{x}")).is_file();
    let row_complete = |row: u64| (0..grid[0]).all(|y| (0..grid[1]).all(|x| has(row, y, x)));
    let mut complete = 0;
    while row_complete(complete) {
        complete += 1;
    }
    let mut last = complete;
    while (0..grid[0]).any(|y| (0..grid[1]).any(|x| has(last, y, x))) {
        last += 1;
    }
    assert!(
        extent <= complete * shard[0],
        "{}: zarr.json covers {extent} planes, only {complete} shard rows are complete",
        b.name
    );
    if last == 0 {
        return 0;
    }
    // Decode everything that is there, up to the last row holding a shard.
    let copy = tmp.join(format!("check-{prefix}"));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).unwrap();
    let planes = last * shard[0];
    doc["shape"][0] = planes.into();
    std::fs::write(copy.join("zarr.json"), doc.to_string()).unwrap();
    for row in 0..last {
        for y in 0..grid[0] {
            for x in 0..grid[1] {
                if has(row, y, x) {
                    let to = copy.join(format!("c/{row}/{y}"));
                    std::fs::create_dir_all(&to).unwrap();
                    std::fs::copy(dir.join(format!("c/{row}/{y}/{x}")), to.join(x.to_string()))
                        .unwrap();
                }
            }
        }
    }
    let (_, _, got) = crate::support::decode::decode_store(&copy)
        .unwrap_or_else(|e| panic!("{}: a shard on the server does not decode: {e}", b.name));
    let mut want = vec![0u8; g.frame_bytes() * planes as usize];
    g.fill_frames(0, &mut want);
    let (h, w, elem) = (g.frame_shape()[0], g.frame_shape()[1], dtype.size() as u64);
    for p in 0..planes {
        for yy in 0..h {
            let at = ((p * h + yy) * w * elem) as usize;
            let row = &mut want[at..at + (w * elem) as usize];
            for x in 0..grid[1] {
                if !has(p / shard[0], yy / shard[1], x) {
                    let (a, z) = (x * shard[2] * elem, ((x + 1) * shard[2]).min(w) * elem);
                    row[a as usize..z as usize].fill(0);
                }
            }
        }
    }
    assert!(
        got == want,
        "{}: the shards on the server differ from what was written",
        b.name
    );
    complete
}

/// The stream's failure names the store's objects and says what happened.
pub fn check_failure(b: &Backend, prefix: &str, e: &Error) {
    let text = e.to_string();
    assert!(
        matches!(e, Error::ObjectStore { .. }),
        "{}: expected an object store error, got {text}",
        b.name
    );
    let store = format!("s3://{}/{prefix}", b.bucket);
    assert!(
        text.contains(&store),
        "{}: the message names nothing of {store}: {text}",
        b.name
    );
}
