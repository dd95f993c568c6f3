//! `tiledzarr._native.Stream`: the safe `tiledzarr::Stream` behind a lock,
//! with the GIL released around everything that can wait or copy a lot.
//! The Python class `tiledzarr.Stream` wraps it.

use crate::arrays::{ArrayInfo, Arrays};
use crate::buffer::Buffer;
use crate::errors;
use crate::sink::{in_sink, PySink};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tiledzarr::config::StreamConfig;
use tiledzarr::pipeline::{Stage, StreamStats};
use tiledzarr::sink::ShardSink;
use tiledzarr::{Error, Stream};

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
    /// What `key=` names and what `append` checks frames against.
    arrays: Arrays,
}

fn config_from_json(json: &str) -> PyResult<StreamConfig> {
    StreamConfig::from_json(json).map_err(|e| errors::to_py(&Error::from(e), None))
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

    /// Blocking write of `buf` to array `index` with the timeout in seconds
    /// (`None`: none).
    fn write_blocking(
        &self,
        py: Python<'_>,
        what: &str,
        (index, array): (usize, &ArrayInfo),
        buf: &Buffer,
        timeout: Option<f64>,
    ) -> PyResult<usize> {
        let limit = seconds(timeout)?;
        let bytes = buf.bytes();
        let n = self.detached(py, what, |s| {
            let n = s.write_blocking_to(index, bytes, limit)?;
            array.took(n);
            Ok(n)
        })?;
        if n < bytes.len() && !array.is_full() {
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

/// A timeout in seconds as a limit (`None`: none).
fn seconds(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    match timeout {
        Some(t) if !(t >= 0.0 && t.is_finite()) => Err(errors::invalid_argument(format!(
            "timeout must be a non-negative number of seconds or None, not {t}"
        ))),
        // Seconds past what a Duration holds (1e300) wait without a limit,
        // as None does.
        t => Ok(t.and_then(|t| Duration::try_from_secs_f64(t).ok())),
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
        let keys = match &config {
            StreamConfig::One(_) => vec![String::new()],
            StreamConfig::Many(m) => m.arrays.iter().map(|a| a.key.clone()).collect(),
        };
        let sink = sink.map(|callable| {
            Box::new(PySink {
                callable,
                stream_id: id,
                raised: raised.clone(),
                keys,
            }) as Box<dyn ShardSink>
        });
        // Creating a stream allocates its staging memory and may set up a
        // GPU: seconds, with the GIL released.
        let stream = py
            .detach(|| Stream::create(&config, sink))
            .map_err(|e| errors::to_py(&e, None))?;
        let config_json = match &config {
            StreamConfig::One(_) => stream.config().config.to_json(),
            StreamConfig::Many(m) => m.to_json(),
        };
        Ok(PyStream {
            arrays: Arrays::of(stream.plan()),
            id,
            stats: stream.stats(),
            inner: Mutex::new(Some(stream)),
            raised,
            flushed: AtomicBool::new(false),
            config_json,
        })
    }

    /// Copies what fits of `data` into free staging memory of array `key`
    /// (`None`: the first) without waiting; returns the bytes taken (0:
    /// busy).
    #[pyo3(signature = (data, key=None))]
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>, key: Option<&str>) -> PyResult<usize> {
        self.check_caller("write")?;
        let (index, array) = self.arrays.get(key)?;
        let buf = contiguous(data, "data")?;
        let bytes = buf.bytes();
        if bytes.len() < LARGE_WRITE {
            if let Some(mut guard) = self.inner.try_lock() {
                let s = guard.as_mut().ok_or_else(closed)?;
                let n = s
                    .try_write_to(index, bytes)
                    .map_err(|e| self.error(py, e))?;
                array.took(n);
                return Ok(n);
            }
        }
        self.detached(py, "write", |s| {
            let n = s.try_write_to(index, bytes)?;
            array.took(n);
            Ok(n)
        })
    }

    /// Writes all of `data` to array `key` (`None`: the first), waiting for
    /// staging memory, at most `timeout` seconds.
    #[pyo3(signature = (data, timeout=None, key=None))]
    fn write_all(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        key: Option<&str>,
    ) -> PyResult<usize> {
        self.check_caller("write_all")?;
        let target = self.arrays.get(key)?;
        let buf = contiguous(data, "data")?;
        self.write_blocking(py, "write_all", target, &buf, timeout)
    }

    /// Writes one frame (or a stack of frames) to array `key` (`None`: the
    /// first) after checking its dtype and shape against that array's,
    /// waiting until it is taken.
    #[pyo3(signature = (frame, timeout=None, key=None))]
    fn append(
        &self,
        py: Python<'_>,
        frame: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        key: Option<&str>,
    ) -> PyResult<()> {
        self.check_caller("append")?;
        let target = self.arrays.get(key)?;
        let buf = contiguous(frame, "frame")?;
        target.1.check_frame(&buf)?;
        target.1.check_room(buf.bytes().len() as u64)?;
        self.write_blocking(py, "append", target, &buf, timeout)?;
        Ok(())
    }
    /// Advances array `key` (`None`: the first) by `frames` frames without
    /// data (frames the camera dropped), waiting until they are taken, at
    /// most `timeout` seconds.
    #[pyo3(signature = (frames=1, timeout=None, key=None))]
    fn skip(
        &self,
        py: Python<'_>,
        frames: u64,
        timeout: Option<f64>,
        key: Option<&str>,
    ) -> PyResult<()> {
        self.check_caller("skip")?;
        let (index, array) = self.arrays.get(key)?;
        let len = frames
            .checked_mul(array.plane_bytes())
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| errors::invalid_argument(format!("{frames} frames is too many")))?;
        array.check_room(len as u64)?;
        let limit = seconds(timeout)?;
        let done = self.detached(py, "skip", |s| {
            let n = s.skip_blocking_to(index, len, limit)?;
            array.took(n);
            Ok(n)
        })?;
        if done < len {
            let err = errors::new(
                "WriteTimeoutError",
                format!(
                    "skip timed out after {} s with {} of {frames} frames skipped",
                    timeout.unwrap_or_default(),
                    done as u64 / array.plane_bytes().max(1)
                ),
            );
            err.value(py).setattr("bytes_written", done)?;
            return Err(err);
        }
        Ok(())
    }

    /// Records `json` (a JSON object) as frame `frame`'s metadata of array
    /// `key` (`None`: the first).
    #[pyo3(signature = (frame, json, key=None))]
    fn frame_metadata(
        &self,
        py: Python<'_>,
        frame: u64,
        json: &str,
        key: Option<&str>,
    ) -> PyResult<()> {
        self.check_caller("frame_metadata")?;
        let (index, _) = self.arrays.get(key)?;
        self.detached(py, "frame_metadata", |s| {
            s.frame_metadata(index, frame, json)
        })
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

    /// The keys of the arrays, in the order of the configuration's
    /// `arrays` (`[""]`: one array at the store's root).
    #[getter]
    fn array_keys(&self) -> Vec<String> {
        self.arrays.keys()
    }

    /// The element type of array `key` (`None`: the first).
    #[pyo3(signature = (key=None))]
    fn dtype(&self, key: Option<&str>) -> PyResult<&'static str> {
        Ok(self.arrays.get(key)?.1.dtype.name())
    }

    /// The frame shape of array `key` (`None`: the first).
    #[pyo3(signature = (key=None))]
    fn frame_shape(&self, key: Option<&str>) -> PyResult<Vec<u64>> {
        Ok(self.arrays.get(key)?.1.plane_shape.clone())
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
        d.set_item("staging_bytes", m.staging_bytes)?;
        d.set_item("staging_peak_bytes", m.staging_peak_bytes)?;
        d.set_item("busy_writes", m.busy_writes)?;
        d.set_item("bytes_uploaded", m.bytes_uploaded)?;
        d.set_item("objects_uploaded", m.objects_uploaded)?;
        d.set_item("uploads_in_flight", m.uploads_in_flight)?;
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
