//! A Python callable as the shard sink. It runs on the library's delivery
//! thread, which attaches to the interpreter (takes the GIL) for each call.

use crate::buffer::PYBUF_READ;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::cell::Cell;
use std::sync::Arc;
use tiledzarr::shard::Shard;
use tiledzarr::sink::ShardSink;
use tiledzarr::Error;

thread_local! {
    /// The stream whose Python sink this thread is running, if any (0: none).
    static IN_SINK: Cell<u64> = const { Cell::new(0) };
}

/// Whether this thread is inside stream `id`'s sink.
pub fn in_sink(id: u64) -> bool {
    IN_SINK.with(|s| s.get() == id)
}

/// One complete shard, as the sink receives it. `data` and `index` are
/// read-only memoryviews of the library's memory, valid during the call
/// only: they are released when the sink returns (copy with `bytes(...)` to
/// keep them).
#[pyclass(frozen, name = "Shard", module = "tiledzarr")]
pub struct PyShard {
    /// The shard's grid coordinate, dimension 0 first.
    #[pyo3(get)]
    coord: Py<PyTuple>,
    /// The compressed chunks, concatenated.
    #[pyo3(get)]
    data: Py<PyAny>,
    /// The `sharding_indexed` index: (offset, nbytes) u64 little-endian
    /// pairs, then its crc32c.
    #[pyo3(get)]
    index: Py<PyAny>,
    /// Whether the shard file is index then data (else data then index).
    #[pyo3(get)]
    index_at_start: bool,
    /// The pyramid level the shard belongs to: 0 for full resolution (and
    /// every shard without a pyramid), k for the array at `<store>/<k>`.
    #[pyo3(get)]
    level: u32,
    /// The index of the shard's array in the configuration's `arrays` (0
    /// in a stream of one array).
    #[pyo3(get)]
    array: u32,
    /// The key of the shard's array (`""`: the only array, at the root).
    #[pyo3(get)]
    key: String,
}

#[pymethods]
impl PyShard {
    fn __repr__(&self, py: Python<'_>) -> String {
        let array = match self.key.as_str() {
            "" => String::new(),
            key => format!("key={key:?}, "),
        };
        format!(
            "Shard({array}level={}, coord={}, index_at_start={})",
            self.level,
            self.coord
                .bind(py)
                .repr()
                .map_or("?".into(), |r| r.to_string()),
            if self.index_at_start { "True" } else { "False" }
        )
    }
}

/// Calls `callable(shard)` for each shard. What the callable raised is kept
/// in `raised` so that the stream's next call can chain it.
pub struct PySink {
    pub callable: Py<PyAny>,
    pub stream_id: u64,
    pub raised: Arc<Mutex<Option<PyErr>>>,
    /// The arrays' keys, in the order of their indexes.
    pub keys: Vec<String>,
}

/// A read-only memoryview of `bytes`, which must outlive every use of it:
/// [`release`] it before they go.
fn memoryview<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `bytes` is valid for the call; the view is read-only and is
    // released by `emit` before the call returns.
    unsafe {
        let ptr = pyo3::ffi::PyMemoryView_FromMemory(
            bytes.as_ptr() as *mut std::ffi::c_char,
            bytes.len() as isize,
            PYBUF_READ,
        );
        Bound::from_owned_ptr_or_err(py, ptr)
    }
}

/// Releases a memoryview: later access raises ValueError instead of
/// reading memory the library has reused. Fails (BufferError) while
/// something still exports from it, such as `numpy.frombuffer(data)`.
fn release(view: &Bound<'_, PyAny>) -> PyResult<()> {
    view.call_method0("release").map(|_| ())
}

impl PySink {
    fn call(&self, py: Python<'_>, shard: &Shard<'_>) -> PyResult<()> {
        let data = memoryview(py, shard.data)?;
        let index = match memoryview(py, shard.index) {
            Ok(i) => i,
            Err(e) => {
                release(&data)?;
                return Err(e);
            }
        };
        let arg = PyShard {
            coord: PyTuple::new(py, shard.coord)?.unbind(),
            data: data.clone().unbind(),
            index: index.clone().unbind(),
            index_at_start: shard.index_at_start,
            level: shard.level,
            array: shard.array,
            key: self
                .keys
                .get(shard.array as usize)
                .cloned()
                .unwrap_or_default(),
        };
        let result = self.callable.bind(py).call1((arg,)).map(|_| ());
        // Released whatever the call did, before the memory goes back.
        let released = release(&data).and(release(&index));
        result?;
        released.map_err(|e| {
            pyo3::exceptions::PyBufferError::new_err(format!(
                "the sink kept a view of the shard's memory past its call ({e}); \
                 copy what it needs with bytes(shard.data) instead"
            ))
        })
    }
}

impl ShardSink for PySink {
    fn emit(&mut self, shard: &Shard<'_>) -> tiledzarr::Result<()> {
        let outer = IN_SINK.with(|s| s.replace(self.stream_id));
        let result = Python::attach(|py| {
            self.call(py, shard).map_err(|e| {
                let reason = format!("the Python sink raised {e}");
                self.raised.lock().get_or_insert(e);
                reason
            })
        });
        IN_SINK.with(|s| s.set(outer));
        result.map_err(|reason| Error::Sink {
            coord: shard.coord.to_vec(),
            reason,
        })
    }
}
