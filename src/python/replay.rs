//! The replay session behind `ledgercache.replay()`: Arrow record batches go in through the Arrow
//! C data interface (no per-event Python), measurements come out as dicts.

use super::arrow_import::import_exported;
use super::config::PyCacheConfig;
use super::errors::{raise, IntoPyResult};
use crate::replay::{FeedError, Session};
use arrow_array::{RecordBatch, StructArray};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Imports a record batch exported through `__arrow_c_array__` (pyarrow, polars, ...).
pub(super) fn import_batch(obj: &Bound<'_, PyAny>) -> PyResult<RecordBatch> {
    let py = obj.py();
    let exported = obj.call_method0("__arrow_c_array__").map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "expected an Arrow record batch (an object with __arrow_c_array__), got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let data = import_exported(&exported, |e| {
        raise(
            py,
            "InvalidArgumentError",
            format!("invalid trace: cannot import the batch: {e}"),
        )
    })?;
    Ok(RecordBatch::from(StructArray::from(data)))
}

/// Runs `work` without the GIL, handing it a check that runs Python's signal handlers: when one
/// raises (Ctrl-C: `KeyboardInterrupt`), the work stops and that exception is raised.
fn checking_signals(
    py: Python<'_>,
    work: impl Send + FnOnce(&mut dyn FnMut() -> crate::error::Result<()>) -> crate::error::Result<()>,
) -> PyResult<()> {
    let mut interrupt: Option<PyErr> = None;
    let result = py.detach(|| {
        work(&mut || {
            Python::attach(|py| py.check_signals()).map_err(|e| {
                interrupt = Some(e);
                crate::error::Error::Interrupted
            })
        })
    });
    match interrupt {
        Some(e) => Err(e),
        None => result.py_err(py),
    }
}

/// Replays one broker's trace under several configurations (see `ledgercache.replay`).
#[pyclass(name = "ReplaySession", module = "ledgercache._native", frozen)]
pub struct PyReplaySession(UntilFinished<Session>);

/// A core object that a final call consumes; calls after it raise `ClosedError`.
struct UntilFinished<T> {
    slot: Mutex<Option<T>>,
    finished: &'static str,
}

impl<T> UntilFinished<T> {
    fn new(value: T, finished: &'static str) -> Self {
        UntilFinished {
            slot: Mutex::new(Some(value)),
            finished,
        }
    }

    fn closed(&self, py: Python<'_>) -> PyErr {
        raise(py, "ClosedError", self.finished.into())
    }

    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut T) -> R) -> PyResult<R> {
        let mut guard = self.slot.lock();
        let value = guard.as_mut().ok_or_else(|| self.closed(py))?;
        Ok(f(value))
    }

    fn take(&self, py: Python<'_>) -> PyResult<T> {
        self.slot.lock().take().ok_or_else(|| self.closed(py))
    }
}

#[pymethods]
impl PyReplaySession {
    #[new]
    #[pyo3(signature = (configs, *, decode_ahead = true))]
    fn new(py: Python<'_>, configs: Vec<PyCacheConfig>, decode_ahead: bool) -> PyResult<Self> {
        let session = Session::new(configs.into_iter().map(|c| c.0).collect())
            .py_err(py)?
            .decode_ahead(decode_ahead);
        Ok(PyReplaySession(UntilFinished::new(
            session,
            "replay session is finished",
        )))
    }

    /// Replays one record batch of the trace, without the GIL; Python's signal handlers run every
    /// so many events, so Ctrl-C ends a long batch with `KeyboardInterrupt`.
    fn feed(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<()> {
        let batch = import_batch(batch)?;
        self.0.with(py, |s| {
            checking_signals(py, |check| s.feed_checked(&batch, check))
        })?
    }

    /// Replays every record batch of an iterable, in order: what `feed` of each would do, with
    /// the same results and the same error. Decoding ahead, the decoding thread also takes the
    /// next batch from the iterable (holding the GIL for it) while the engine replays, so the
    /// source's own work overlaps the replay. An exception the iterable raises is raised as is,
    /// after the batches before it have been replayed.
    fn feed_all(&self, py: Python<'_>, batches: &Bound<'_, PyAny>) -> PyResult<()> {
        let batches = batches.try_iter()?.unbind();
        self.0.with(py, |s| {
            let mut next = || {
                Python::attach(|py| {
                    let batch = batches.bind(py).clone().next()?;
                    Some(batch.and_then(|b| import_batch(&b)))
                })
            };
            let mut failed_source = None;
            let replayed = checking_signals(py, |check| match s.feed_all(&mut next, check) {
                Ok(()) => Ok(()),
                Err(FeedError::Replay(e)) => Err(e),
                Err(FeedError::Source(e)) => {
                    failed_source = Some(e);
                    Ok(())
                }
            });
            match failed_source {
                Some(e) => Err(e),
                None => replayed,
            }
        })?
    }

    fn needs_second_pass(&self, py: Python<'_>) -> PyResult<bool> {
        self.0.with(py, |s| s.needs_second_pass())
    }

    fn start_second_pass(&self, py: Python<'_>) -> PyResult<()> {
        self.0.with(py, |s| s.start_second_pass())
    }

    /// One dict per configuration: the measurements and a per-second series.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let session = self.0.take(py)?;
        session
            .finish()
            .into_iter()
            .map(|(broker, config, m, took)| {
                let d = PyDict::new(py);
                d.set_item("broker", &broker)?;
                d.set_item("strategy", config.strategy.name())?;
                d.set_item("cache_size_bytes", config.cache_size_bytes)?;
                d.set_item("events", m.events)?;
                d.set_item("entries_read", m.entries_read)?;
                d.set_item("read_bytes", m.read_bytes)?;
                d.set_item("hits", m.hits)?;
                d.set_item("misses", m.misses)?;
                d.set_item("hit_ratio", m.hit_ratio())?;
                d.set_item("storage_read_ops", m.storage_read_ops)?;
                d.set_item("storage_read_bytes", m.storage_read_bytes)?;
                d.set_item("published_entries", m.published_entries)?;
                d.set_item("published_bytes", m.published_bytes)?;
                d.set_item("evicted_entries", m.evicted_entries)?;
                d.set_item("requeues", m.requeues)?;
                d.set_item("peak_cache_bytes", m.peak_cache_bytes)?;
                // Not measured without the memory model (entries sliced from buffers, model off).
                let measured = config.copy_entries || config.memory_model;
                d.set_item(
                    "peak_retained_bytes",
                    measured.then_some(m.peak_retained_bytes),
                )?;
                d.set_item("out_of_order_deliveries", m.out_of_order_deliveries)?;
                d.set_item("discarded_reads", m.discarded_reads)?;
                d.set_item("replay_seconds", took.as_secs_f64())?;
                d.set_item("per_second", m.per_second)?;
                d.set_item("config", PyCacheConfig(config))?;
                Ok(d)
            })
            .collect()
    }
}

/// Records a trace's request stream for export (see `ledgercache.export_requests`).
#[pyclass(name = "RequestRecorder", module = "ledgercache._native", frozen)]
pub struct PyRequestRecorder(UntilFinished<crate::replay::RequestRecorder>);

#[pymethods]
impl PyRequestRecorder {
    #[new]
    fn new() -> Self {
        PyRequestRecorder(UntilFinished::new(
            Default::default(),
            "recorder is finished",
        ))
    }

    fn feed(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<()> {
        let batch = import_batch(batch)?;
        self.0.with(py, |r| {
            checking_signals(py, |check| r.feed_checked(&batch, check))
        })?
    }

    /// Writes the stream to `path` as "oracleGeneral" or "csv"; returns the number of requests.
    fn write(&self, py: Python<'_>, path: std::path::PathBuf, format: &str) -> PyResult<usize> {
        let recorder = self.0.take(py)?;
        let format = format.to_string();
        py.detach(move || {
            let log = recorder.finish();
            match format.as_str() {
                "oracleGeneral" => log.write_oracle_general(&path),
                "csv" => log.write_csv(&path),
                other => Err(crate::error::Error::invalid(
                    "format",
                    format!("{other:?} is not \"oracleGeneral\" or \"csv\""),
                )),
            }
            .map(|_| log.requests.len())
        })
        .py_err(py)
    }
}
