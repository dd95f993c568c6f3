//! A real S3-compatible server for the object store tests: `s3s-fs` (from
//! crates.io, installed by scripts/setup-s3-server.sh) on 127.0.0.1, keeping
//! its buckets in a folder, so that what it holds survives a restart and can
//! be checked on disk: objects are files at `<root>/<bucket>/<key>`, and an
//! incomplete multipart upload is a `.upload-<id>.json` file in `<root>`.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const KEY_ID: &str = "tz-test-key";
pub const SECRET: &str = "tz-test-secret-0123456789";

/// The server binary, or `None` (the caller skips, loudly). The tests'
/// credentials must be the environment's: without them the client would
/// look for instance metadata, which a test never asks for.
pub fn binary(test: &str) -> Option<PathBuf> {
    let bin = std::env::var_os("TZ_S3FS_BIN").map(PathBuf::from);
    let keys = std::env::var("AWS_ACCESS_KEY_ID").ok().as_deref() == Some(KEY_ID)
        && std::env::var("AWS_SECRET_ACCESS_KEY").ok().as_deref() == Some(SECRET);
    match bin {
        Some(b) if b.is_file() && keys => {
            ran(test);
            Some(b)
        }
        _ => {
            skipped(
                test,
                &format!(
                    "no S3 server. Set TZ_S3FS_BIN to an s3s-fs binary and \
                     AWS_ACCESS_KEY_ID={KEY_ID} AWS_SECRET_ACCESS_KEY={SECRET} \
                     (scripts/test.sh does)"
                ),
            );
            None
        }
    }
}

/// Says so on the terminal even when the test harness captures output.
pub fn skipped(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n!!! SKIPPED {test}: {why} !!!\n");
}

/// Records that `test` ran against a server (scripts/test.sh counts them).
pub fn ran(test: &str) {
    if let Some(path) = std::env::var_os("TZ_S3_TESTS_RAN") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the TZ_S3_TESTS_RAN file opens");
        writeln!(f, "{test}").unwrap();
    }
}

pub struct Server {
    bin: PathBuf,
    pub root: PathBuf,
    pub port: u16,
    key: (String, String),
    child: Option<Child>,
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    /// Starts a server on a free port keeping its data in `root`, with the
    /// tests' credentials.
    pub fn start(bin: &Path, root: &Path) -> Server {
        Server::start_with_keys(bin, root, KEY_ID, SECRET)
    }

    pub fn start_with_keys(bin: &Path, root: &Path, key: &str, secret: &str) -> Server {
        std::fs::create_dir_all(root).unwrap();
        let mut s = Server {
            bin: bin.to_path_buf(),
            root: root.to_path_buf(),
            port: free_port(),
            key: (key.into(), secret.into()),
            child: None,
        };
        s.restart();
        s
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Makes a bucket (a folder of the server's root).
    pub fn bucket(&self, name: &str) -> PathBuf {
        let p = self.root.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// Kills the server at once (no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The server's process id (it changes at each restart).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Freezes the server (SIGSTOP): what it holds on disk stops changing.
    pub fn freeze(&self, on: bool) {
        let pid = self.child.as_ref().expect("running").id() as i32;
        let sig = if on { libc::SIGSTOP } else { libc::SIGCONT };
        // SAFETY: signalling a child process of this test.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// Starts it again on the same port and folder.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new(&self.bin)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", &self.key.0, "--secret-key", &self.key.1])
            .arg(&self.root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("s3s-fs starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "s3s-fs did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Multipart uploads the server still holds (started, neither complete
    /// nor aborted): what ListMultipartUploads would list. s3s-fs keeps one
    /// `.upload-<id>.json` record per upload.
    pub fn incomplete_uploads(&self) -> Vec<String> {
        self.root_files(".upload-")
    }

    /// Part files in the server's folder (`.upload_id-<id>.part-<n>`); s3s-fs
    /// drops an upload's record before it assembles the parts, so a server
    /// killed while completing keeps parts that belong to no upload.
    pub fn part_files(&self) -> Vec<String> {
        self.root_files(".upload_id-")
    }

    /// Incomplete uploads that hold parts: uploads whose id the client
    /// learned (it sent parts). An upload created by a request whose answer
    /// never arrived (the server died before it) holds none, and no client
    /// knows its id: only a listing or a lifecycle rule finds it.
    pub fn incomplete_uploads_with_parts(&self) -> Vec<String> {
        let parts = self.part_files();
        self.incomplete_uploads()
            .into_iter()
            .filter(|u| {
                let id = u.trim_start_matches(".upload-").trim_end_matches(".json");
                parts.iter().any(|p| p.contains(id))
            })
            .collect()
    }

    fn root_files(&self, prefix: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.root)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(prefix))
            .collect();
        v.sort();
        v
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Kills process `pid` at once (SIGKILL), from any thread; the `Server`
/// that started it reaps it at its next kill or restart.
pub fn kill_pid(pid: u32) {
    // SAFETY: signalling a child process of this test.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}
