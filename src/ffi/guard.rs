//! The panic boundary and the last-error messages.

use crate::error::Error;
use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// The stream whose sink callback this thread is running, if any.
    static IN_SINK: Cell<u64> = const { Cell::new(0) };
}

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

/// A number no other stream of this process has (never 0).
pub fn next_stream_id() -> u64 {
    NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed)
}

/// Whether this thread is inside stream `id`'s sink callback.
pub fn in_sink(id: u64) -> bool {
    IN_SINK.with(|s| s.get() == id)
}

/// Runs `f` marked as stream `id`'s sink callback on this thread.
pub fn as_sink<T>(id: u64, f: impl FnOnce() -> T) -> T {
    let outer = IN_SINK.with(|s| s.replace(id));
    let r = f();
    IN_SINK.with(|s| s.set(outer));
    r
}

/// Message holder of one stream.
#[derive(Default)]
pub struct ErrorSlot {
    message: Mutex<CString>,
    /// Set when a panic was caught inside this stream: it is unusable.
    broken: Mutex<Option<Error>>,
}

impl ErrorSlot {
    pub fn as_ptr(&self) -> *const std::ffi::c_char {
        // The CString's heap buffer stays put until the next failure
        // replaces it (documented lifetime of the returned pointer).
        self.message.lock().as_ptr()
    }
    pub fn broken(&self) -> Option<Error> {
        self.broken.lock().clone()
    }
}

pub fn thread_last_error() -> *const std::ffi::c_char {
    LAST_ERROR.with(|m| m.borrow().as_ptr())
}

fn to_cstring(text: String) -> CString {
    CString::new(text.replace('\0', " ")).unwrap_or_default()
}

/// Records `e` as the last error of this thread and of `slot`.
pub fn record(slot: Option<&ErrorSlot>, e: &Error) {
    let text = e.to_string();
    LAST_ERROR.with(|m| *m.borrow_mut() = to_cstring(text.clone()));
    if let Some(slot) = slot {
        *slot.message.lock() = to_cstring(text);
    }
}

/// Runs `f` at the C boundary: an error is recorded and mapped by
/// `on_err`; a panic is caught, recorded, breaks the stream, and maps to an
/// internal error.
pub fn guard<T>(
    what: &str,
    slot: Option<&ErrorSlot>,
    on_err: impl Fn(&Error) -> T,
    f: impl FnOnce() -> Result<T, Error>,
) -> T {
    let result = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let e = Error::from_panic(what, &*panic);
            if let Some(slot) = slot {
                slot.broken.lock().get_or_insert(e.clone());
            }
            Err(e)
        }
    };
    result.unwrap_or_else(|e| {
        record(slot, &e);
        on_err(&e)
    })
}
