//! A fault-injecting proxy in front of an S3-compatible server, for the
//! fault matrix (tests/s3_faults.rs). The library under test talks to the
//! proxy's port; the proxy forwards each HTTP/1.1 request to the server, or:
//! - **down**: every connection is cut and the port refuses new ones, as
//!   when the server's process dies (the tests kill the real process too
//!   where the server keeps its data across a restart);
//! - **stalled**: connections are accepted and never answered (a black
//!   hole: a stalled load balancer, a half-dead server);
//! - **flaky**: a share of the requests is answered `503 SlowDown` or
//!   `500 InternalError` instead of being forwarded;
//! - **a trigger**: the proxy goes down the moment a chosen request
//!   arrives (a `zarr.json` update, the completion of a multipart upload),
//!   with that request never reaching the server;
//! - **a lost answer**: a chosen request reaches the server and is carried
//!   out, but the client gets `500 InternalError` instead of its answer
//!   (an answer lost on the way back).
//!
//! Each forwarded request goes on a connection of its own (`Connection:
//! close` is set on the way), so that every request passes the checks
//! above. `Connection` is not among the headers a request's signature
//! covers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Forward,
    Down,
    Stalled,
}

type Hook = Box<dyn Fn() + Send + Sync>;
type Matcher = Box<dyn Fn(&str) -> bool + Send + Sync>;

struct State {
    upstream: Option<u16>,
    mode: Mutex<Mode>,
    /// Requests answered with an error instead, per thousand.
    flaky_per_mille: AtomicU64,
    /// (which request lines, how many of them to let pass first): go down
    /// on the next one, and call the hook.
    trigger: Mutex<Option<(Matcher, u64)>>,
    on_trigger: Mutex<Option<Hook>>,
    triggered: AtomicBool,
    /// (which request lines, how many of them to let pass first): forward
    /// the next one and answer the client with an error instead.
    lose: Mutex<Option<(Matcher, u64)>>,
    answers_lost: AtomicU64,
    /// Every socket of a live connection, to cut them when going down.
    sockets: Mutex<Vec<TcpStream>>,
    requests: AtomicU64,
    faults: AtomicU64,
    rng: AtomicU64,
    quit: AtomicBool,
}

pub struct Proxy {
    pub port: u16,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// A proxy to the server on `upstream` (127.0.0.1), forwarding.
    pub fn to(upstream: u16) -> Proxy {
        Proxy::start(Some(upstream), Mode::Forward)
    }

    /// A listener that takes connections and never answers.
    pub fn black_hole() -> Proxy {
        Proxy::start(None, Mode::Stalled)
    }

    fn start(upstream: Option<u16>, mode: Mode) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        let state = Arc::new(State {
            upstream,
            mode: Mutex::new(mode),
            flaky_per_mille: AtomicU64::new(0),
            trigger: Mutex::new(None),
            on_trigger: Mutex::new(None),
            triggered: AtomicBool::new(false),
            lose: Mutex::new(None),
            answers_lost: AtomicU64::new(0),
            sockets: Mutex::new(Vec::new()),
            requests: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            rng: AtomicU64::new(seed),
            quit: AtomicBool::new(false),
        });
        let s = state.clone();
        let accept = std::thread::spawn(move || accept_loop(listener, port, s));
        Proxy {
            port,
            state,
            accept: Some(accept),
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn mode(&self) -> Mode {
        *self.state.mode.lock().unwrap()
    }

    /// Cuts every connection and refuses new ones.
    pub fn down(&self) {
        go_down(&self.state);
    }

    /// Forwards again (the port listens again within a few milliseconds).
    pub fn up(&self) {
        *self.state.mode.lock().unwrap() = Mode::Forward;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the proxy did not listen again"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// From now on, connections are taken and never answered.
    pub fn stall(&self) {
        *self.state.mode.lock().unwrap() = Mode::Stalled;
    }

    /// Answers `per_mille` of the requests with 503 SlowDown or 500.
    pub fn flaky(&self, per_mille: u64) {
        self.state.flaky_per_mille.store(per_mille, SeqCst);
    }

    /// Goes down when a request whose line (`PUT /bucket/key?query
    /// HTTP/1.1`) `matches` arrives, after `pass` such requests went
    /// through, calling `hook` then (to kill the server too).
    pub fn down_on(
        &self,
        matches: impl Fn(&str) -> bool + Send + Sync + 'static,
        pass: u64,
        hook: impl Fn() + Send + Sync + 'static,
    ) {
        self.state.triggered.store(false, SeqCst);
        *self.state.on_trigger.lock().unwrap() = Some(Box::new(hook));
        *self.state.trigger.lock().unwrap() = Some((Box::new(matches), pass));
    }

    /// Loses the answer to the next request whose line `matches`, after
    /// `pass` such requests went through: the server carries it out, the
    /// client is answered `500 InternalError`.
    pub fn lose_answer_on(
        &self,
        matches: impl Fn(&str) -> bool + Send + Sync + 'static,
        pass: u64,
    ) {
        *self.state.lose.lock().unwrap() = Some((Box::new(matches), pass));
    }

    /// Answers lost so far.
    pub fn answers_lost(&self) -> u64 {
        self.state.answers_lost.load(SeqCst)
    }

    /// Forgets a trigger or a lost answer that has not fired.
    pub fn disarm(&self) {
        *self.state.trigger.lock().unwrap() = None;
        *self.state.lose.lock().unwrap() = None;
        self.state.triggered.store(false, SeqCst);
    }

    pub fn triggered(&self) -> bool {
        self.state.triggered.load(SeqCst)
    }

    /// Requests seen and requests answered with an injected error.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.state.requests.load(SeqCst),
            self.state.faults.load(SeqCst),
        )
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.quit.store(true, SeqCst);
        cut_all(&self.state);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn go_down(state: &State) {
    *state.mode.lock().unwrap() = Mode::Down;
    cut_all(state);
}

fn cut_all(state: &State) {
    for s in state.sockets.lock().unwrap().drain(..) {
        let _ = s.shutdown(Shutdown::Both);
    }
}

/// Accepts while forwarding or stalled; while down, holds no listener, so
/// that connections are refused.
fn accept_loop(listener: TcpListener, port: u16, state: Arc<State>) {
    let mut listener = Some(listener);
    while !state.quit.load(SeqCst) {
        let mode = *state.mode.lock().unwrap();
        if mode == Mode::Down {
            listener = None;
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if listener.is_none() {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(l) => listener = Some(l),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            }
        }
        let l = listener.as_ref().unwrap();
        l.set_nonblocking(true).unwrap();
        match l.accept() {
            Ok((client, _)) => {
                client.set_nonblocking(false).unwrap();
                let s = state.clone();
                std::thread::spawn(move || serve(client, s));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

fn track(state: &State, s: &TcpStream) -> bool {
    let mut v = state.sockets.lock().unwrap();
    v.retain(|s| s.peer_addr().is_ok());
    if *state.mode.lock().unwrap() == Mode::Down {
        return false;
    }
    v.push(s.try_clone().unwrap());
    true
}

/// One connection: one request, forwarded or answered with a fault.
fn serve(mut client: TcpStream, state: Arc<State>) {
    if !track(&state, &client) {
        return;
    }
    let stalled = || *state.mode.lock().unwrap() == Mode::Stalled;
    if stalled() {
        // Never answer: hold the connection until it is cut.
        hold(&client, &state);
        return;
    }
    let Some((head, body_start)) = read_head(&mut client) else {
        return;
    };
    let text = String::from_utf8_lossy(&head).to_string();
    let line = text.lines().next().unwrap_or("").to_string();
    state.requests.fetch_add(1, SeqCst);
    if stalled() {
        hold(&client, &state);
        return;
    }
    let mut trigger = state.trigger.lock().unwrap();
    if let Some((matches, pass)) = trigger.as_mut() {
        if matches(&line) {
            if *pass == 0 {
                *trigger = None;
                drop(trigger);
                state.triggered.store(true, SeqCst);
                go_down(&state);
                if let Some(h) = &*state.on_trigger.lock().unwrap() {
                    h();
                }
                return;
            }
            *pass -= 1;
        }
    }
    drop(trigger);
    let lose = {
        let mut lose = state.lose.lock().unwrap();
        match lose.as_mut() {
            Some((matches, 0)) if matches(&line) => {
                *lose = None;
                true
            }
            Some((matches, pass)) if matches(&line) => {
                *pass -= 1;
                false
            }
            _ => false,
        }
    };
    let length = content_length(&text);
    let per_mille = state.flaky_per_mille.load(SeqCst);
    if per_mille > 0 && next_random(&state) % 1000 < per_mille {
        state.faults.fetch_add(1, SeqCst);
        // Take the whole body first: the client then reads a clean answer.
        let mut rest = length.saturating_sub(body_start.len() as u64);
        let mut sink = [0u8; 65536];
        while rest > 0 {
            match client.read(&mut sink[..rest.min(65536) as usize]) {
                Ok(0) | Err(_) => return,
                Ok(n) => rest -= n as u64,
            }
        }
        if next_random(&state).is_multiple_of(2) {
            answer_error(&mut client, "503 Slow Down", "SlowDown");
        } else {
            answer_error(&mut client, INTERNAL_ERROR, "InternalError");
        }
        return;
    }
    let Some(port) = state.upstream else {
        return;
    };
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", port)) else {
        return;
    };
    if !track(&state, &server) {
        return;
    }
    let mut out = Vec::with_capacity(head.len() + 32);
    for (i, l) in text.split("\r\n").enumerate() {
        if i > 0 && l.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        if l.is_empty() {
            break;
        }
        out.extend_from_slice(l.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out.extend_from_slice(&body_start);
    if server.write_all(&out).is_err() {
        return;
    }
    let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut s2);
        let _ = s2.shutdown(Shutdown::Write);
    });
    if lose {
        // The server's whole answer, then an error in its place.
        let mut answer = Vec::new();
        let _ = server.read_to_end(&mut answer);
        let status = String::from_utf8_lossy(&answer);
        let status = status.lines().next().unwrap_or("no answer");
        eprintln!("proxy: {line}: the server answered {status}; the client is told 500");
        state.answers_lost.fetch_add(1, SeqCst);
        answer_error(&mut client, INTERNAL_ERROR, "InternalError");
    } else {
        let _ = std::io::copy(&mut server, &mut client);
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
    let _ = up.join();
}

const INTERNAL_ERROR: &str = "500 Internal Server Error";

/// Answers `client` with an S3 error, and closes the connection.
fn answer_error(client: &mut TcpStream, status: &str, code: &str) {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>\
         <Message>injected by the test proxy</Message></Error>"
    );
    let _ = write!(
        client,
        "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.shutdown(Shutdown::Both);
}

/// Holds a connection without answering until it is cut or the proxy ends.
fn hold(client: &TcpStream, state: &State) {
    let _ = client.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 65536];
    let mut c = client;
    while !state.quit.load(SeqCst) && *state.mode.lock().unwrap() != Mode::Down {
        match c.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// The request's head (up to and without the blank line) and what of the
/// body came with it.
fn read_head(c: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = c.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let body = buf.split_off(end + 4);
            buf.truncate(end + 2);
            return Some((buf, body));
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    }
}

fn content_length(head: &str) -> u64 {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

fn next_random(state: &State) -> u64 {
    let mut x = state.rng.load(SeqCst);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    state.rng.store(x, SeqCst);
    x
}
