//! Status codes of the C API and the mapping from the library's errors.

use crate::error::Error;

/// Status codes. Functions returning `int32_t` return one of these;
/// `tz_write` and `tz_write_all` return the negated code on error.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum tz_status {
    TZ_OK = 0,
    /// A required pointer argument was NULL.
    TZ_ERR_NULL_ARGUMENT = 1,
    /// An argument is out of range or malformed (other than the config).
    TZ_ERR_INVALID_ARGUMENT = 2,
    /// The configuration breaks a rule; the message names the field.
    TZ_ERR_CONFIG = 3,
    /// A write past the end of a bounded array.
    TZ_ERR_OVERFLOW = 4,
    /// The stream was flushed: it takes no more data.
    TZ_ERR_FINISHED = 5,
    /// The shard sink callback returned non-zero; the stream is poisoned.
    TZ_ERR_SINK = 6,
    /// A file system operation failed; the message names the path.
    TZ_ERR_IO = 7,
    /// The store path exists and `overwrite` is off (or it is not a store).
    TZ_ERR_EXISTS = 8,
    /// The requested backend cannot run here; the message says why.
    TZ_ERR_BACKEND_UNAVAILABLE = 9,
    /// A CUDA or nvCOMP call failed; the message names the stage.
    TZ_ERR_GPU = 10,
    /// `tz_write_all` did not finish in time.
    TZ_ERR_TIMEOUT = 11,
    /// Memory could not be allocated.
    TZ_ERR_OUT_OF_MEMORY = 12,
    /// A bug in the library (a caught panic); the stream is poisoned.
    TZ_ERR_INTERNAL = 13,
    /// An object store request failed after its retries (server unreachable,
    /// no such bucket, an error answer); the message names the object's
    /// URL and the server's answer. Since 0.3.
    TZ_ERR_OBJECT_STORE = 14,
    /// The object store refused the credentials, or none were found. Since 0.3.
    TZ_ERR_ACCESS_DENIED = 15,
}

impl tz_status {
    pub const ALL: [tz_status; 16] = [
        tz_status::TZ_OK,
        tz_status::TZ_ERR_NULL_ARGUMENT,
        tz_status::TZ_ERR_INVALID_ARGUMENT,
        tz_status::TZ_ERR_CONFIG,
        tz_status::TZ_ERR_OVERFLOW,
        tz_status::TZ_ERR_FINISHED,
        tz_status::TZ_ERR_SINK,
        tz_status::TZ_ERR_IO,
        tz_status::TZ_ERR_EXISTS,
        tz_status::TZ_ERR_BACKEND_UNAVAILABLE,
        tz_status::TZ_ERR_GPU,
        tz_status::TZ_ERR_TIMEOUT,
        tz_status::TZ_ERR_OUT_OF_MEMORY,
        tz_status::TZ_ERR_INTERNAL,
        tz_status::TZ_ERR_OBJECT_STORE,
        tz_status::TZ_ERR_ACCESS_DENIED,
    ];

    /// A NUL-terminated description of the code.
    pub fn describe(self) -> &'static str {
        use tz_status::*;
        match self {
            TZ_OK => "ok\0",
            TZ_ERR_NULL_ARGUMENT => "a required pointer argument is NULL\0",
            TZ_ERR_INVALID_ARGUMENT => "invalid argument\0",
            TZ_ERR_CONFIG => "invalid configuration\0",
            TZ_ERR_OVERFLOW => "write past the end of the array\0",
            TZ_ERR_FINISHED => "the stream is finished\0",
            TZ_ERR_SINK => "the shard sink failed\0",
            TZ_ERR_IO => "file system error\0",
            TZ_ERR_EXISTS => "the store already exists\0",
            TZ_ERR_BACKEND_UNAVAILABLE => "backend unavailable\0",
            TZ_ERR_GPU => "GPU failure\0",
            TZ_ERR_TIMEOUT => "timed out\0",
            TZ_ERR_OUT_OF_MEMORY => "out of memory\0",
            TZ_ERR_INTERNAL => "internal error\0",
            TZ_ERR_OBJECT_STORE => "object store request failed\0",
            TZ_ERR_ACCESS_DENIED => "object store access denied\0",
        }
    }
}

impl From<&Error> for tz_status {
    fn from(e: &Error) -> tz_status {
        use tz_status::*;
        match e {
            Error::Config(_) => TZ_ERR_CONFIG,
            Error::NullArgument(_) => TZ_ERR_NULL_ARGUMENT,
            Error::InvalidArgument(_) => TZ_ERR_INVALID_ARGUMENT,
            Error::Overflow { .. } | Error::ArrayOverflow { .. } => TZ_ERR_OVERFLOW,
            Error::Finished => TZ_ERR_FINISHED,
            Error::Sink { .. } => TZ_ERR_SINK,
            Error::Io { .. } => TZ_ERR_IO,
            Error::Exists { .. } => TZ_ERR_EXISTS,
            Error::BackendUnavailable(_) => TZ_ERR_BACKEND_UNAVAILABLE,
            Error::Gpu { .. } => TZ_ERR_GPU,
            Error::Timeout(_) => TZ_ERR_TIMEOUT,
            Error::OutOfMemory(_) => TZ_ERR_OUT_OF_MEMORY,
            Error::Internal(_) => TZ_ERR_INTERNAL,
            Error::ObjectStore { .. } => TZ_ERR_OBJECT_STORE,
            Error::AccessDenied { .. } => TZ_ERR_ACCESS_DENIED,
        }
    }
}
