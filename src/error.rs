//! The one error type of the library. It is `Clone` because a poisoned
//! stream answers every later call with the error that poisoned it.

use crate::config::ConfigError;
use std::path::PathBuf;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("{0} is NULL")]
    NullArgument(&'static str),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("write past the end of the array: it holds {capacity} bytes, all of them written")]
    Overflow { capacity: u64 },
    /// The same for one array of a stream of several: the others take more.
    #[error(
        "write past the end of array {array:?}: it holds {capacity} bytes, all of them written"
    )]
    ArrayOverflow { array: String, capacity: u64 },
    #[error("the stream is finished: tz_flush has run")]
    Finished,
    #[error("the sink failed on shard {coord:?}: {reason}")]
    Sink { coord: Vec<u64>, reason: String },
    #[error("{what} {path}: {message}")]
    Io {
        what: &'static str,
        path: PathBuf,
        kind: std::io::ErrorKind,
        message: String,
    },
    #[error("{path} already exists: {reason}")]
    Exists { path: PathBuf, reason: String },
    /// An object store request failed after its retries; `url` names the
    /// object (or the bucket), `message` carries the server's answer.
    #[error("object store: {what} {url}: {message}")]
    ObjectStore {
        what: &'static str,
        url: String,
        message: String,
    },
    /// The object store refused the credentials (or found none).
    #[error("object store: access denied {what} {url}: {message}")]
    AccessDenied {
        what: &'static str,
        url: String,
        message: String,
    },
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    #[error("GPU failure in {stage}: {message}")]
    Gpu {
        stage: &'static str,
        message: String,
    },
    #[error("timed out after {0} ms")]
    Timeout(u64),
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The same failure with `note` (what else it cost, starting with its
    /// own separator) at the end of its message.
    pub fn with_note(mut self, note: &str) -> Error {
        match &mut self {
            Error::ObjectStore { message, .. }
            | Error::AccessDenied { message, .. }
            | Error::Io { message, .. }
            | Error::Gpu { message, .. } => message.push_str(note),
            Error::InvalidArgument(m)
            | Error::BackendUnavailable(m)
            | Error::OutOfMemory(m)
            | Error::Internal(m) => m.push_str(note),
            Error::Sink { reason, .. } | Error::Exists { reason, .. } => reason.push_str(note),
            Error::Config(_)
            | Error::NullArgument(_)
            | Error::Overflow { .. }
            | Error::ArrayOverflow { .. }
            | Error::Finished
            | Error::Timeout(_) => {}
        }
        self
    }

    /// An I/O failure on `path` while doing `what` ("writing shard", ...).
    pub fn io(what: &'static str, path: impl Into<PathBuf>, e: std::io::Error) -> Error {
        Error::Io {
            what,
            path: path.into(),
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error for a panic caught in `what`.
    pub(crate) fn from_panic(what: &str, panic: &(dyn std::any::Any + Send)) -> Error {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Error::Internal(format!("{what} panicked: {msg}"))
    }
}
