//! Tests that need a process of their own (a memory limit, a file size
//! limit, a second writer, a kill -9): the test binary runs one of its own
//! tests again as a child, which finds its role in `TZ_TEST_CHILD`.

use std::process::{Command, Stdio};

const ROLE: &str = "TZ_TEST_CHILD";

/// The role this process was started in, when it is a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// Limits set in the child before it starts.
#[derive(Default, Clone, Copy)]
pub struct Limits {
    /// RLIMIT_AS: address space in bytes.
    pub address_space: Option<u64>,
    /// RLIMIT_FSIZE: the largest file the child may write (SIGXFSZ is
    /// ignored, so that a write past it fails with EFBIG instead).
    pub file_size: Option<u64>,
}

/// A command running test `test` of this binary as a child in `role`,
/// with `env` set; stdout and stderr are piped.
pub fn command(test: &str, role: &str, env: &[(&str, String)], limits: Limits) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(ROLE, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    set_limits(&mut cmd, limits);
    cmd
}

/// Sets `limits` in the child before it starts (setrlimit after fork).
#[cfg(unix)]
fn set_limits(cmd: &mut Command, limits: Limits) {
    use std::os::unix::process::CommandExt;
    let set = move || -> std::io::Result<()> {
        let limit = |resource, bytes: u64| {
            let l = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            // SAFETY: a plain system call on a struct on the stack.
            if unsafe { libc::setrlimit(resource, &l) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        };
        if let Some(b) = limits.address_space {
            limit(libc::RLIMIT_AS, b)?;
        }
        if let Some(b) = limits.file_size {
            limit(libc::RLIMIT_FSIZE, b)?;
            // SAFETY: setting a signal to be ignored; kept across exec.
            unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
        }
        Ok(())
    };
    // SAFETY: the closure only makes async-signal-safe system calls.
    unsafe { cmd.pre_exec(set) };
}

/// Resource limits are unix's: the tests that need them do not run on
/// Windows (scripts/test-windows.sh lists them).
#[cfg(not(unix))]
fn set_limits(_cmd: &mut Command, limits: Limits) {
    assert!(
        limits.address_space.is_none() && limits.file_size.is_none(),
        "resource limits need unix"
    );
}

/// Runs the child to its end; panics with its output unless it exited 0.
/// Returns its stdout.
pub fn run(test: &str, role: &str, env: &[(&str, String)], limits: Limits) -> String {
    let out = command(test, role, env, limits)
        .stdin(Stdio::null())
        .output()
        .expect("starting the child");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child {role} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
