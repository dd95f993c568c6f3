//! `tiledzarr._native.Stream`: the safe `tiledzarr::Stream` behind a lock,
//! with the GIL released around everything that can wait or copy a lot.
//! The Python class `tiledzarr.Stream` wraps it.

use crate::buffer::{Buffer, Kind};
use crate::errors;
use crate::sink::{in_sink, PySink};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tiledzarr::pipeline::{Stage, StreamStats};
use tiledzarr::sink::ShardSink;
use tiledzarr::{Config, DType, Error, Stream};

/// Writes at least this large release the GIL while they copy; smaller
/// ones keep it (releasing and taking it back costs more than the copy
/// when other threads compete for it).
const LARGE_WRITE: usize = 1 << 20;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[pyclass(frozen, module = "tiledzarr._native", name = "Stream")]
pub struct PyStream {
    /// Tells this stream's own sink calls apart (see `sink::in_sink`).
    id: u64,
    /// `None` once closed.
    inner: Mutex<Option<Stream>>,
    /// Counters readable without the lock (while another thread flushes).
    stats: StreamStats,
    /// What the Python sink raised, chained to the SinkError.
    raised: Arc<Mutex<Option<PyErr>>>,
    flushed: AtomicBool,
    config_json: String,
    dtype: DType,
    /// The shape of one plane (a frame): the sizes of dimensions 1 and up.
    plane_shape: Vec<u64>,
    /// Bytes the array holds (`None`: unbounded).
    capacity: Option<u64>,
}

fn config_from_json(json: &str) -> PyResult<Config> {
    Config::from_json(json).map_err(|e| errors::to_py(&Error::from(e), None))
}

/// Zero-copy access to a C-contiguous buffer, or an InvalidArgumentError
/// naming the problem.
fn contiguous(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Buffer> {
    let buf = Buffer::get(obj).map_err(|e| {
        errors::invalid_argument(format!(
            "{what} must support the buffer protocol (a numpy array, bytes, bytearray, \
             memoryview), not {}: {e}",
            obj.get_type().name().map_or("?".into(), |n| n.to_string())
        ))
    })?;
    if !buf.is_c_contiguous() {
        return Err(errors::invalid_argument(format!(
            "{what} is not C-contiguous (row-major without gaps; shape {:?}): pass \
             numpy.ascontiguousarray(a), which copies it",
            buf.shape()
        )));
    }
    Ok(buf)
}

/// The dtype name of a buffer's elements, as numpy spells it.
fn element_name(kind: Kind, size: usize, format: &str) -> String {
    let d = DType::ALL.into_iter().find(|d| {
        d.size() == size
            && match kind {
                Kind::Float => d.is_float(),
                Kind::Signed => d.is_signed(),
                Kind::Unsigned => !d.is_float() && !d.is_signed(),
                Kind::Other => false,
            }
    });
    match d {
        Some(d) => d.name().to_string(),
        None => format!("format {format:?}, {size} bytes per item"),
    }
}

fn shape_str(s: &[u64]) -> String {
    match s {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

impl PyStream {
    /// The library's error as an exception, chained to what the Python
    /// sink raised when that is the cause.
    fn error(&self, py: Python<'_>, e: Error) -> PyErr {
        let cause = match e {
            Error::Sink { .. } => self.raised.lock().as_ref().map(|c| c.clone_ref(py)),
            _ => None,
        };
        errors::to_py(&e, cause)
    }

    /// Refuses calls from this stream's own sink: its flush waits for the
    /// very thread the sink runs on.
    fn check_caller(&self, what: &str) -> PyResult<()> {
        if in_sink(self.id) {
            return Err(errors::invalid_argument(format!(
                "Stream.{what} was called from this stream's own sink, which may not write, \
                 append, set_attributes, flush or close its stream"
            )));
        }
        Ok(())
    }

    /// Runs `f` on the open stream with the GIL released.
    fn detached<T: Send>(
        &self,
        py: Python<'_>,
        what: &str,
        f: impl FnOnce(&mut Stream) -> tiledzarr::Result<T> + Send,
    ) -> PyResult<T> {
        self.check_caller(what)?;
        let r = py.detach(|| match self.inner.lock().as_mut() {
            Some(s) => f(s).map_err(Some),
            None => Err(None),
        });
        r.map_err(|e| match e {
            Some(e) => self.error(py, e),
            None => closed(),
        })
    }

    /// Blocking write of `buf` with the timeout in seconds (`None`: none).
    fn write_blocking(
        &self,
        py: Python<'_>,
        what: &str,
        buf: &Buffer,
        timeout: Option<f64>,
    ) -> PyResult<usize> {
        let limit = match timeout {
            Some(t) if !(t >= 0.0 && t.is_finite()) => {
                return Err(errors::invalid_argument(format!(
                    "timeout must be a non-negative number of seconds or None, not {t}"
                )))
            }
            // Seconds past what a Duration holds (1e300) wait without a
            // limit, as None does.
            t => t.and_then(|t| Duration::try_from_secs_f64(t).ok()),
        };
        let bytes = buf.bytes();
        let n = self.detached(py, what, |s| s.write_blocking(bytes, limit))?;
        let at_end = self.capacity == Some(self.stats.snapshot().bytes_in);
        if n < bytes.len() && !at_end {
            let err = errors::new(
                "WriteTimeoutError",
                format!(
                    "{what} timed out after {} s with {n} of {} bytes taken (they stay in \
                     the stream; write the rest to continue)",
                    timeout.unwrap_or_default(),
                    bytes.len()
                ),
            );
            err.value(py).setattr("bytes_written", n)?;
            return Err(err);
        }
        Ok(n)
    }
}

fn closed() -> PyErr {
    errors::new(
        "FinishedError",
        "the stream is closed: close() ran, or its with block ended",
    )
}

#[pymethods]
impl PyStream {
    #[new]
    #[pyo3(signature = (config_json, sink=None))]
    fn new(py: Python<'_>, config_json: &str, sink: Option<Py<PyAny>>) -> PyResult<PyStream> {
        let config = config_from_json(config_json)?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let raised = Arc::new(Mutex::new(None));
        let sink = sink.map(|callable| {
            Box::new(PySink {
                callable,
                stream_id: id,
                raised: raised.clone(),
            }) as Box<dyn ShardSink>
        });
        // Creating a stream allocates its staging memory and may set up a
        // GPU: seconds, with the GIL released.
        let stream = py
            .detach(|| Stream::new(&config, sink))
            .map_err(|e| errors::to_py(&e, None))?;
        // A frame as it arrives: the acquisition order of `dimensions`
        // (the layout is in the storage order).
        let plane_shape = config.dimensions[1..].iter().map(|d| d.size).collect();
        let capacity = stream.config().layout.array_bytes();
        let config_json = stream.config().config.to_json();
        Ok(PyStream {
            id,
            stats: stream.stats(),
            inner: Mutex::new(Some(stream)),
            raised,
            flushed: AtomicBool::new(false),
            config_json,
            dtype: config.dtype,
            plane_shape,
            capacity,
        })
    }

    /// Copies what fits of `data` into free staging memory without waiting;
    /// returns the bytes taken (0: busy).
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.check_caller("write")?;
        let buf = contiguous(data, "data")?;
        let bytes = buf.bytes();
        if bytes.len() < LARGE_WRITE {
            if let Some(mut guard) = self.inner.try_lock() {
                let s = guard.as_mut().ok_or_else(closed)?;
                return s.try_write(bytes).map_err(|e| self.error(py, e));
            }
        }
        self.detached(py, "write", |s| s.try_write(bytes))
    }

    /// Writes all of `data`, waiting for staging memory, at most `timeout`
    /// seconds.
    #[pyo3(signature = (data, timeout=None))]
    fn write_all(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<usize> {
        self.check_caller("write_all")?;
        let buf = contiguous(data, "data")?;
        self.write_blocking(py, "write_all", &buf, timeout)
    }

    /// Writes one frame (or a stack of frames) after checking its dtype and
    /// shape, waiting until it is taken.
    #[pyo3(signature = (frame, timeout=None))]
    fn append(
        &self,
        py: Python<'_>,
        frame: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        self.check_caller("append")?;
        let buf = contiguous(frame, "frame")?;
        let (kind, little) = buf.element();
        let want_kind = if self.dtype.is_float() {
            Kind::Float
        } else if self.dtype.is_signed() {
            Kind::Signed
        } else {
            Kind::Unsigned
        };
        if kind != want_kind || buf.itemsize() != self.dtype.size() || !little {
            let name = element_name(kind, buf.itemsize(), &buf.format());
            let order = if little { "" } else { " big-endian" };
            return Err(errors::invalid_argument(format!(
                "frame dtype is{order} {name}, the stream's is {}: convert it with \
                 frame.astype(numpy.{})",
                self.dtype, self.dtype
            )));
        }
        let shape = buf.shape();
        let plane = &self.plane_shape;
        let fits = shape == *plane || (shape.len() == plane.len() + 1 && shape[1..] == plane[..]);
        if !fits {
            let mut stack = vec![0];
            stack.extend(plane);
            return Err(errors::invalid_argument(format!(
                "frame shape {} does not match the stream's frame shape {} (or {} for n \
                 frames)",
                shape_str(&shape),
                shape_str(plane),
                shape_str(&stack).replacen('0', "n", 1)
            )));
        }
        let len = buf.bytes().len() as u64;
        if let Some(cap) = self.capacity {
            let written = self.stats.snapshot().bytes_in;
            if written + len > cap {
                return Err(errors::new(
                    "ArrayOverflowError",
                    format!(
                        "the frame would go past the end of the array ({cap} bytes, \
                         {written} written, the frame {len}): nothing of it was written"
                    ),
                ));
            }
        }
        self.write_blocking(py, "append", &buf, timeout)?;
        Ok(())
    }

    /// Replaces the user's attributes with `attributes_json`, a JSON object.
    fn set_attributes(&self, py: Python<'_>, attributes_json: &str) -> PyResult<()> {
        self.check_caller("set_attributes")?;
        let value: serde_json::Value = serde_json::from_str(attributes_json).map_err(|e| {
            errors::invalid_argument(format!("attributes are not valid JSON ({e})"))
        })?;
        self.detached(py, "set_attributes", |s| s.set_attributes(&value))
    }

    /// Completes the stream; blocks until every shard is out.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.detached(py, "flush", |s| s.finish().map(|_| ()))?;
        self.flushed.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Frees the stream; without a flush, what was not emitted is dropped.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.check_caller("close")?;
        // What the sink raised holds its frames, which may hold this stream.
        drop(self.raised.lock().take());
        // Dropping waits for the pipeline's threads, one of which may need
        // the GIL for a sink call under way.
        py.detach(|| drop(self.inner.lock().take()));
        Ok(())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.try_lock().is_some_and(|g| g.is_none())
    }

    #[getter]
    fn flushed(&self) -> bool {
        self.flushed.load(Ordering::Relaxed)
    }

    #[getter]
    fn config_json(&self) -> &str {
        &self.config_json
    }

    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }

    #[getter]
    fn frame_shape(&self) -> Vec<u64> {
        self.plane_shape.clone()
    }

    /// The counters, as a dict; never waits.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.stats.snapshot();
        let (kind, reason) = self.stats.backend();
        let d = PyDict::new(py);
        d.set_item("bytes_in", m.bytes_in)?;
        d.set_item("bytes_out", m.bytes_out)?;
        d.set_item("shards_emitted", m.shards)?;
        d.set_item("epochs_completed", m.epochs)?;
        for stage in Stage::ALL {
            d.set_item(format!("seconds_{}", stage.name()), m.seconds(stage))?;
        }
        d.set_item("backend", kind.name())?;
        d.set_item("backend_reason", reason)?;
        Ok(d)
    }
}

impl Drop for PyStream {
    fn drop(&mut self) {
        if let Some(stream) = self.inner.get_mut().take() {
            // As in `close`: a sink call under way needs the GIL to end.
            Python::attach(|py| py.detach(move || drop(stream)));
        }
    }
}
