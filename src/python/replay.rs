//! The replay session behind `ledgercache.replay()`: Arrow record batches go in through the Arrow
//! C data interface (no per-event Python), measurements come out as Arrow record batches.

use super::arrow_batch::to_pyarrow;
use super::arrow_import::import_exported;
use super::config::PyCacheConfig;
use super::errors::{raise, IntoPyResult};
use crate::lab::replay::summary::{self, Run};
use crate::lab::replay::{FeedError, FeedStatus, Session};
use arrow_array::{RecordBatch, StructArray};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator};

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

/// How long a check lets pass before it runs the signal handlers again. Each run takes the GIL,
/// which the thread taking the next batches may hold: a check per decoded slice of a replay was 3%
/// of its time. 10 ms is a tenth of the delay after a Ctrl-C that a person notices.
const SIGNAL_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

/// Runs `work` without the GIL, handing it a check that runs Python's signal handlers (at most
/// once every [`SIGNAL_CHECK_INTERVAL`]): when one raises (Ctrl-C: `KeyboardInterrupt`), the work
/// stops and that exception is raised.
fn checking_signals(
    py: Python<'_>,
    work: impl Send + FnOnce(&mut dyn FnMut() -> crate::error::Result<()>) -> crate::error::Result<()>,
) -> PyResult<()> {
    let mut interrupt: Option<PyErr> = None;
    let mut checked = std::time::Instant::now();
    let result = py.detach(|| {
        work(&mut || {
            if checked.elapsed() < SIGNAL_CHECK_INTERVAL {
                return Ok(());
            }
            checked = std::time::Instant::now();
            // A closure, not the method's path: `attach` hands over a `Python` of any lifetime.
            #[allow(
                clippy::redundant_closure_for_method_calls,
                reason = "Python::check_signals as a path is not general over the lifetime"
            )]
            let signals = Python::attach(|py| py.check_signals());
            signals.map_err(|e| {
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

/// A Python iterable of record batches as a source for `Session::feed_all`. Its code runs in
/// the caller's `contextvars` context, whichever thread takes the next batch.
///
/// Decoding ahead, a thread of its own takes the batches, one ahead of the decoder, and the
/// decoder waits for them while the feed listens: so an interrupt ends the feed even while the
/// iterable is slow to give a batch (a thread waiting inside the iterable could not be joined
/// before it returns). That thread ends once the feed is over and its current call returns.
/// Otherwise the batches are taken on the calling thread, where Ctrl-C reaches the iterable
/// itself.
enum PythonBatches {
    Direct(Py<PyIterator>, CallerContext),
    Pulled(std::sync::mpsc::Receiver<Option<PyResult<RecordBatch>>>),
}

/// The caller's `contextvars` context, and the object `next` returns at the end.
struct CallerContext {
    context: Py<PyAny>,
    next: Py<PyAny>,
    end: Py<PyAny>,
}

impl CallerContext {
    fn new(py: Python<'_>) -> PyResult<Self> {
        let builtins = py.import("builtins")?;
        Ok(CallerContext {
            context: py
                .import("contextvars")?
                .call_method0("copy_context")?
                .unbind(),
            next: builtins.getattr("next")?.unbind(),
            end: builtins.getattr("object")?.call0()?.unbind(),
        })
    }

    /// The iterator's next batch, taken in the caller's context; `None` at its end.
    fn next_batch(
        &self,
        py: Python<'_>,
        iterator: &Py<PyIterator>,
    ) -> Option<PyResult<RecordBatch>> {
        let item = self
            .context
            .call_method1(py, "run", (&self.next, iterator, &self.end));
        match item {
            Ok(item) if item.is(&self.end) => None,
            Ok(item) => Some(import_batch(item.bind(py))),
            Err(e) => Some(Err(e)),
        }
    }
}

impl PythonBatches {
    fn new(py: Python<'_>, iterator: Py<PyIterator>, pulled: bool) -> PyResult<Self> {
        let caller = CallerContext::new(py)?;
        if !pulled {
            return Ok(PythonBatches::Direct(iterator, caller));
        }
        let (batches_tx, batches_rx) = std::sync::mpsc::sync_channel(1);
        // Handed back if the thread cannot start, to take the batches on the calling thread.
        let (back_tx, back_rx) = std::sync::mpsc::channel::<(Py<PyIterator>, CallerContext)>();
        let _ = std::thread::Builder::new()
            .name("ledgercache-batches".into())
            .spawn(move || {
                let Ok((iterator, caller)) = back_rx.recv() else {
                    return;
                };
                loop {
                    let batch = Python::attach(|py| caller.next_batch(py, &iterator));
                    let last = !matches!(batch, Some(Ok(_)));
                    if batches_tx.send(batch).is_err() || last {
                        break;
                    }
                }
                Python::attach(|_| drop((iterator, caller)));
            });
        // If the thread did not start, its end of the channel went with it: the batches are
        // then taken on the calling thread.
        match back_tx.send((iterator, caller)) {
            Ok(()) => Ok(PythonBatches::Pulled(batches_rx)),
            Err(std::sync::mpsc::SendError((iterator, caller))) => {
                Ok(PythonBatches::Direct(iterator, caller))
            }
        }
    }

    fn next(&self, status: &FeedStatus) -> Option<PyResult<RecordBatch>> {
        match self {
            PythonBatches::Direct(iterator, caller) => {
                Python::attach(|py| caller.next_batch(py, iterator))
            }
            PythonBatches::Pulled(batches) => loop {
                use std::sync::mpsc::RecvTimeoutError;
                match batches.recv_timeout(crate::lab::replay::CHECK_WHILE_WAITING) {
                    Ok(batch) => return batch,
                    Err(RecvTimeoutError::Timeout) if !status.stopped() => {}
                    Err(RecvTimeoutError::Timeout) => return None,
                    // The thread sends the end (or an error) before it goes, and nothing is
                    // asked after that: gone without it, it failed, and the trace is not over.
                    Err(RecvTimeoutError::Disconnected) => {
                        return Some(Err(Python::attach(|py| {
                            raise(
                                py,
                                "LedgerCacheError",
                                "the thread taking the trace's batches stopped before the end"
                                    .into(),
                            )
                        })))
                    }
                }
            },
        }
    }
}

/// Replays one broker's trace under several configurations (see `ledgercache.replay`).
#[pyclass(name = "ReplaySession", module = "ledgercache._native", frozen)]
pub struct PyReplaySession(UntilFinished<Session>);

/// A core object that a final call consumes; calls after it raise `ClosedError`. One call at a
/// time: a call while another runs (from the batches a feed is taking, or from another thread)
/// raises `UnsupportedError`, where waiting for the lock while holding the GIL could wait for ever
/// (the running call needs the GIL for its interrupt checks and its source).
struct UntilFinished<T> {
    slot: Mutex<Option<T>>,
    /// What the object is, for the errors ("replay session").
    what: &'static str,
}

impl<T> UntilFinished<T> {
    fn new(value: T, what: &'static str) -> Self {
        UntilFinished {
            slot: Mutex::new(Some(value)),
            what,
        }
    }

    fn lock(&self, py: Python<'_>) -> PyResult<parking_lot::MutexGuard<'_, Option<T>>> {
        self.slot.try_lock().ok_or_else(|| {
            raise(
                py,
                "UnsupportedError",
                format!(
                    "the {} is busy with another call (one at a time: not from the batches it is \
                     being fed, nor from another thread meanwhile)",
                    self.what
                ),
            )
        })
    }

    fn closed(&self, py: Python<'_>) -> PyErr {
        raise(py, "ClosedError", format!("the {} is finished", self.what))
    }

    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut T) -> R) -> PyResult<R> {
        let mut guard = self.lock(py)?;
        let value = guard.as_mut().ok_or_else(|| self.closed(py))?;
        Ok(f(value))
    }

    fn take(&self, py: Python<'_>) -> PyResult<T> {
        self.lock(py)?.take().ok_or_else(|| self.closed(py))
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
            "replay session",
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
    /// the same results and the same error. Decoding ahead, the batches are taken from the
    /// iterable on another thread (see [`PythonBatches`]) while the engine replays, so the
    /// source's own work overlaps the replay. An exception the iterable raises is raised as is,
    /// after the batches before it have been replayed.
    fn feed_all(&self, py: Python<'_>, batches: &Bound<'_, PyAny>) -> PyResult<()> {
        let iterator = batches.try_iter()?.unbind();
        self.0.with(py, |s| {
            // Made with the session in hand: nothing is taken from the iterable for a call that
            // fails at once (a busy or finished session).
            let source = PythonBatches::new(py, iterator, s.decodes_ahead())?;
            let mut next = move |status: &FeedStatus| source.next(status);
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
        self.0
            .with(py, crate::lab::replay::Session::start_second_pass)
    }

    /// The summary (a row per broker and configuration) and the per-second series, as
    /// `pyarrow.RecordBatch`es with the columns `crate::lab::replay::summary` declares.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        let session = self.0.take(py)?;
        let dumps = py.import("json")?.getattr("dumps")?;
        let sorted = PyDict::new(py);
        sorted.set_item("sort_keys", true)?;
        let runs = session
            .finish()
            .into_iter()
            .map(|(broker, config, metrics, took)| {
                // The settings as `CacheConfig.to_dict` gives them, so the JSON rebuilds the config.
                let settings =
                    Bound::new(py, PyCacheConfig(config.clone()))?.call_method0("to_dict")?;
                let config_json: String = dumps.call((settings,), Some(&sorted))?.extract()?;
                Ok(Run {
                    broker,
                    config,
                    metrics,
                    took,
                    config_json,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let (summary, series) = summary::tables(&runs).py_err(py)?;
        Ok((to_pyarrow(py, summary)?, to_pyarrow(py, series)?))
    }
}

/// An empty batch with `columns`, whose schema pyarrow reads (with each field's doc).
fn empty_schema<S>(py: Python<'_>, columns: &[summary::Column<S>]) -> PyResult<Py<PyAny>> {
    let batch = RecordBatch::new_empty(std::sync::Arc::new(summary::schema(columns)));
    to_pyarrow(py, batch)?.getattr(py, "schema")
}

/// The replay summary's schema (`lc.replay.SUMMARY_SCHEMA`): a field per column, its doc in the
/// field's metadata under ``b"doc"``.
#[pyfunction]
pub fn summary_schema(py: Python<'_>) -> PyResult<Py<PyAny>> {
    empty_schema(py, summary::SUMMARY)
}

/// The per-second series' schema (`lc.replay.SERIES_SCHEMA`).
#[pyfunction]
pub fn series_schema(py: Python<'_>) -> PyResult<Py<PyAny>> {
    empty_schema(py, summary::SERIES)
}

/// The trace format as `lc.trace` exposes it: ``columns`` (each a dict of ``name``, ``type`` as
/// pyarrow names it, ``optional`` and ``doc``), ``ops`` and ``reasons``.
#[pyfunction]
pub fn trace_format(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use crate::lab::replay::trace_schema::{reasons, OPS, TRACE_COLUMNS};
    let columns = TRACE_COLUMNS
        .iter()
        .map(|c| {
            let d = PyDict::new(py);
            d.set_item("name", c.name)?;
            d.set_item("type", c.kind.name())?;
            d.set_item("optional", c.optional)?;
            d.set_item("doc", c.doc)?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let out = PyDict::new(py);
    out.set_item("columns", columns)?;
    out.set_item("ops", OPS.to_vec())?;
    out.set_item("reasons", reasons().collect::<Vec<_>>())?;
    Ok(out)
}

/// Records a trace's request stream for export (see `ledgercache.export_requests`).
#[pyclass(name = "RequestRecorder", module = "ledgercache._native", frozen)]
pub struct PyRequestRecorder(UntilFinished<crate::lab::replay::RequestRecorder>);

#[pymethods]
impl PyRequestRecorder {
    /// The stream the replay under `config` sees (None: a cache that holds nothing, every read
    /// in its entries' order).
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<PyCacheConfig>) -> PyResult<Self> {
        let recorder = match config {
            Some(c) => crate::lab::replay::RequestRecorder::new(&c.0).py_err(py)?,
            None => Default::default(),
        };
        Ok(PyRequestRecorder(UntilFinished::new(
            recorder,
            "request recorder",
        )))
    }

    fn needs_second_pass(&self, py: Python<'_>) -> PyResult<bool> {
        self.0.with(py, |r| r.needs_second_pass())
    }

    fn start_second_pass(&self, py: Python<'_>) -> PyResult<()> {
        self.0
            .with(py, crate::lab::replay::RequestRecorder::start_second_pass)
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
