//! A second S3-compatible server for the object store tests, independent of
//! s3s-fs (tests/s3/server.rs): moto's standalone server (`moto[server]`
//! from PyPI, installed by scripts/setup-python.sh into the venv), run as
//! `python -m moto.server` on 127.0.0.1.
//!
//! moto keeps everything in memory: what it holds is seen only through S3
//! calls, and a restart (or a kill) loses it all. The administrative calls
//! the tests need (make a bucket, list keys, read an object, list the
//! multipart uploads under way) go through `moto_admin.py` beside this file,
//! with botocore, outside the library under test: one helper process per
//! server, started with it, so that each call costs a round trip and not an
//! interpreter start.
//!
//! What moto does not do as AWS does: it accepts any credentials and any
//! signature (the tests' credentials are still required, so that the
//! library never looks for others) and does not check Content-MD5; an
//! UploadPart to an upload it does not know (one started before a restart,
//! its bucket made again since) answers 500 Internal Server Error, not 404
//! NoSuchUpload. Path-style addressing on `http://127.0.0.1:PORT` works, and
//! so do multipart uploads (parts below 5 MiB but the last refused at
//! completion), ListMultipartUploads (uploads without parts included) and
//! conditional writes: `If-None-Match: *` on PutObject and
//! CompleteMultipartUpload, `If-Match` on PutObject.
//!
//! Shared with server.rs (included below, not copied): the credentials,
//! `free_port`, `skipped` and the record of tests that ran.
#![allow(dead_code)]

#[path = "server.rs"]
pub mod server;

pub use server::{free_port, skipped, KEY_ID, SECRET};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The administrative helper, run with the same interpreter as the server.
const ADMIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/s3/moto_admin.py");

/// An interpreter that can `import moto.server` (TZ_MOTO_PYTHON, the venv's
/// python), or `None` (the caller skips, loudly). The tests' credentials
/// must be the environment's: without them the library would look for
/// others (a profile, instance metadata), which a test never asks for.
pub fn python(test: &str) -> Option<PathBuf> {
    let py = std::env::var_os("TZ_MOTO_PYTHON").map(PathBuf::from);
    let keys = std::env::var("AWS_ACCESS_KEY_ID").ok().as_deref() == Some(KEY_ID)
        && std::env::var("AWS_SECRET_ACCESS_KEY").ok().as_deref() == Some(SECRET);
    match py {
        Some(p) if p.is_file() && keys => {
            server::ran(test);
            Some(p)
        }
        _ => {
            skipped(
                test,
                &format!(
                    "no moto server. Set TZ_MOTO_PYTHON to a python that can import \
                     moto.server (the venv of scripts/setup-python.sh) and \
                     AWS_ACCESS_KEY_ID={KEY_ID} AWS_SECRET_ACCESS_KEY={SECRET}"
                ),
            );
            None
        }
    }
}

/// The helper process and its pipes.
struct Admin {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// moto's server on 127.0.0.1, with its administrative helper. Dropping it
/// kills both.
pub struct Moto {
    python: PathBuf,
    pub port: u16,
    /// The server's and the helper's output (`moto.log`, `admin.log`).
    dir: tempfile::TempDir,
    child: Option<Child>,
    admin: Mutex<Admin>,
}

impl Moto {
    /// Starts a server on a free port, empty, and waits until it answers
    /// S3 calls (about a second).
    pub fn start(python: &Path) -> Moto {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        // The helper loads botocore while the server starts.
        let mut child = Command::new(python)
            .arg(ADMIN)
            .arg(&endpoint)
            .env("AWS_ACCESS_KEY_ID", KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file(&dir.path().join("admin.log")))
            .spawn()
            .unwrap_or_else(|e| panic!("{} {ADMIN} does not start: {e}", python.display()));
        let admin = Admin {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        let mut m = Moto {
            python: python.to_path_buf(),
            port,
            dir,
            child: None,
            admin: Mutex::new(admin),
        };
        m.restart();
        m
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What the server wrote (one line per request, and its errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("moto.log")).unwrap_or_default()
    }

    /// The server's process id (it changes at each restart).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Kills the server at once (SIGKILL: no goodbye to its clients). All it
    /// held is gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port. moto keeps everything in memory,
    /// so the server that comes back is empty: no bucket, no object, no
    /// multipart upload (an upload under way before is not listed, and
    /// aborting it answers NoSuchUpload).
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new(&self.python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(log_file(&self.dir.path().join("moto.log")))
            .stderr(log_file(&self.dir.path().join("moto.log")))
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{} -m moto.server does not start: {e}",
                    self.python.display()
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            self.check_alive();
            assert!(
                Instant::now() < deadline,
                "moto did not listen on {} within 30 s:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Listening is not answering: the first S3 call also loads moto's
        // S3 backend, which the library's first request then need not wait
        // for.
        self.call(serde_json::json!({"op": "ping"}));
        // A port taken by another server in the meantime: ours exited.
        self.check_alive();
    }

    /// Panics with the server's output when it has exited.
    fn check_alive(&mut self) {
        let child = self.child.as_mut().expect("moto is running");
        if let Some(status) = child.try_wait().unwrap() {
            self.child = None;
            panic!(
                "moto on port {} exited ({status}):\n{}",
                self.port,
                self.log()
            );
        }
    }

    /// Makes a bucket.
    pub fn create_bucket(&self, name: &str) {
        self.call(serde_json::json!({"op": "create_bucket", "bucket": name}));
    }

    /// The keys under `prefix` in `bucket`, in the server's (lexical) order.
    pub fn list(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let v = self.call(serde_json::json!({"op": "list", "bucket": bucket, "prefix": prefix}));
        serde_json::from_value(v).unwrap()
    }

    /// ListMultipartUploads: the uploads the server holds (started, neither
    /// complete nor aborted) as (key, upload id).
    pub fn list_multipart_uploads(&self, bucket: &str) -> Vec<(String, String)> {
        let v = self.call(serde_json::json!({"op": "uploads", "bucket": bucket}));
        serde_json::from_value(v).unwrap()
    }

    /// ListParts: the parts upload `id` of `key` holds (0 once it is gone).
    pub fn parts(&self, bucket: &str, key: &str, id: &str) -> u64 {
        let req = serde_json::json!({"op": "parts", "bucket": bucket, "key": key, "upload_id": id});
        self.call(req).as_u64().unwrap()
    }

    /// The object at `key`, or `None` when there is none (another error,
    /// a missing bucket included, panics).
    pub fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let req = serde_json::json!({"op": "get", "bucket": bucket, "key": key});
        let mut admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let len = self.exchange(&mut admin, &req);
        let len = len.as_u64()? as usize;
        let mut body = vec![0u8; len];
        admin
            .stdout
            .read_exact(&mut body)
            .unwrap_or_else(|e| panic!("moto admin get {bucket}/{key}: {e}{}", self.admin_log()));
        Some(body)
    }

    /// One request to the helper; its answer's value. Panics with the
    /// server's answer when the call failed.
    fn call(&self, req: serde_json::Value) -> serde_json::Value {
        let mut admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        self.exchange(&mut admin, &req)
    }

    fn exchange(&self, admin: &mut Admin, req: &serde_json::Value) -> serde_json::Value {
        let sent = writeln!(admin.stdin, "{req}").and_then(|_| admin.stdin.flush());
        let mut line = String::new();
        let read = sent.and_then(|_| admin.stdout.read_line(&mut line));
        match read {
            Ok(n) if n > 0 => {}
            Ok(_) => panic!("moto admin exited at {req}{}", self.admin_log()),
            Err(e) => panic!("moto admin at {req}: {e}{}", self.admin_log()),
        }
        let mut answer: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("moto admin answered {line:?} to {req}: {e}"));
        if let Some(error) = answer.get("error") {
            panic!(
                "moto on port {}: {req} failed: {}",
                self.port,
                error.as_str().unwrap_or_default()
            );
        }
        answer["ok"].take()
    }

    fn admin_log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("admin.log")).unwrap_or_default();
        format!(":\n{text}")
    }
}

/// An output file opened for appending (a restart adds to it).
fn log_file(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.kill();
        // The helper ends at the end of its input; killed all the same, so
        // that a helper stuck on a request does not outlive the test.
        let admin = self.admin.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = admin.child.kill();
        let _ = admin.child.wait();
    }
}
