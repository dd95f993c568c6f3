//! `tiledzarr._native`: the Python binding over the safe Rust API, as
//! `ffi` is the C binding over it. The public Python API is the package
//! `tiledzarr` (python/tiledzarr), which wraps this module.

mod arrays;
mod buffer;
mod errors;
mod sink;
mod stream;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tiledzarr::config::StreamConfig;
use tiledzarr::Error;

/// The memory a stream of this configuration would take and its backend,
/// without creating it.
#[pyfunction]
fn estimate_memory<'py>(py: Python<'py>, config_json: &str) -> PyResult<Bound<'py, PyDict>> {
    let plan = py.detach(|| -> tiledzarr::Result<_> {
        let config = StreamConfig::from_json(config_json).map_err(Error::from)?;
        tiledzarr::pipeline::estimate(&config.validate()?)
    });
    let (kind, plan) = plan.map_err(|e| errors::to_py(&e, None))?;
    let d = PyDict::new(py);
    d.set_item("device_bytes", plan.device_bytes)?;
    d.set_item("pinned_bytes", plan.pinned_bytes)?;
    d.set_item("host_bytes", plan.host_bytes)?;
    d.set_item("backend", kind.name())?;
    Ok(d)
}

/// Adds a folder where the GPU backend looks for nvCOMP first.
#[pyfunction]
fn add_nvcomp_search_dir(dir: std::path::PathBuf) {
    tiledzarr::backend::add_nvcomp_search_dir(dir);
}

/// Frees the page-locked memory kept for the process's next GPU stream;
/// returns the bytes freed.
#[pyfunction]
fn release_cached_memory() -> u64 {
    tiledzarr::release_cached_memory()
}

/// Repairs a store whose stream was killed (tiledzarr::sink::recover),
/// giving up on a disk that answers nothing for `timeout_s` (1 to 3600;
/// `None`: the library's default); what it did, by name.
#[pyfunction]
#[pyo3(signature = (store_path, timeout_s=None))]
fn recover<'py>(
    py: Python<'py>,
    store_path: std::path::PathBuf,
    timeout_s: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let bound = timeout_s
        .map(|t| tiledzarr::config::store_timeout("timeout_s", t))
        .transpose()
        .map_err(|e| errors::to_py(&tiledzarr::Error::Config(e), None))?;
    let r = py
        .detach(|| tiledzarr::sink::recover_within(&store_path, bound))
        .map_err(|e| errors::to_py(&e, None))?;
    let d = PyDict::new(py);
    d.set_item("partial_files_removed", r.partial_files_removed)?;
    d.set_item("planes_before", r.planes_before)?;
    d.set_item("planes_after", r.planes_after)?;
    d.set_item("shards_beyond", r.shards_beyond)?;
    d.set_item("arrays", r.arrays)?;
    Ok(d)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<stream::PyStream>()?;
    m.add_class::<sink::PyShard>()?;
    m.add_function(wrap_pyfunction!(estimate_memory, m)?)?;
    m.add_function(wrap_pyfunction!(add_nvcomp_search_dir, m)?)?;
    m.add_function(wrap_pyfunction!(release_cached_memory, m)?)?;
    m.add_function(wrap_pyfunction!(recover, m)?)?;
    Ok(())
}
