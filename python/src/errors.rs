//! The library's errors as Python exceptions: one class per status, all
//! subclasses of `tiledzarr.TiledZarrError` (defined in
//! `tiledzarr/_errors.py`), carrying the library's message.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use tiledzarr::Error;

/// The exception class for each error of the library.
pub fn class_name(e: &Error) -> &'static str {
    match e {
        Error::Config(_) => "ConfigError",
        Error::NullArgument(_) => "NullArgumentError",
        Error::InvalidArgument(_) => "InvalidArgumentError",
        Error::Overflow { .. } | Error::ArrayOverflow { .. } => "ArrayOverflowError",
        Error::Finished => "FinishedError",
        Error::Sink { .. } => "SinkError",
        Error::Io { .. } => "StoreIOError",
        Error::Exists { .. } => "StoreExistsError",
        Error::BackendUnavailable(_) => "BackendUnavailableError",
        Error::Gpu { .. } => "GpuError",
        Error::Timeout(_) => "WriteTimeoutError",
        Error::OutOfMemory(_) => "OutOfMemoryError",
        Error::Internal(_) => "InternalError",
        Error::ObjectStore { .. } => "ObjectStoreError",
        Error::AccessDenied { .. } => "AccessDeniedError",
    }
}

fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    MODULE
        .get_or_try_init(py, || Ok(py.import("tiledzarr._errors")?.unbind()))
        .map(|m| m.bind(py))
}

/// The exception class `name` of `tiledzarr._errors`.
pub fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(errors_module(py)?.getattr(name)?.cast_into::<PyType>()?)
}

/// A `name` exception carrying `message`.
pub fn new(name: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| match class(py, name) {
        Ok(cls) => PyErr::from_type(cls, message),
        Err(e) => e,
    })
}

/// The library's error as the exception of its status; `cause`, when
/// given, becomes its `__cause__` (what a Python sink raised).
pub fn to_py(e: &Error, cause: Option<PyErr>) -> PyErr {
    let err = new(class_name(e), e.to_string());
    if let Some(cause) = cause {
        Python::attach(|py| err.set_cause(py, Some(cause)));
    }
    err
}

/// An argument the binding refuses before the library sees it.
pub fn invalid_argument(message: impl Into<String>) -> PyErr {
    new("InvalidArgumentError", message)
}
