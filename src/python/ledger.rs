//! `ManagedLedger`, `ManagedCursor` and `ReadHandle`.

use super::args::{get_opt, Int};
use super::cache::{entries_to_py, PyCachedEntry, PyEntryCache, PyEntryCacheManager};
use super::errors::{raise, IntoPyResult};
use super::payload::{payload_arg, payload_to_py};
use super::position::PyPosition;
use super::storage::PyStorage;
use crate::broker::ledger::{
    rollover, CursorStats, LedgerConfig, ManagedCursor, ManagedLedger, ReadId, ReadOutcome,
    SkipMode, StartAt,
};
use crate::broker::read_flow::RedeliveryReason;
use crate::broker::storage::ReadLatency;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// ManagedLedger(name, manager, storage, ...): one topic partition: appends go to storage and,
/// per PIP-430, into `manager`'s cache; cursors read through the cache.
#[pyclass(name = "ManagedLedger", module = "ledgercache", frozen)]
pub struct PyManagedLedger {
    inner: ManagedLedger,
    cache: Py<PyEntryCache>,
    storage: Py<PyStorage>,
}

fn start_at(py: Python<'_>, start: &Bound<'_, PyAny>) -> PyResult<StartAt> {
    if let Ok(p) = start.extract::<PyPosition>() {
        return Ok(StartAt::At(p.0));
    }
    match start.extract::<String>().as_deref() {
        Ok("latest") => Ok(StartAt::Latest),
        Ok("earliest") => Ok(StartAt::Earliest),
        _ => Err(raise(
            py,
            "InvalidArgumentError",
            format!("invalid start: expected \"latest\", \"earliest\" or a Position, got {start}"),
        )),
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &CursorStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("read_position", PyPosition(s.read_position))?;
    d.set_item("mark_delete_position", PyPosition(s.mark_delete_position))?;
    d.set_item("backlog", s.backlog)?;
    d.set_item("active", s.active)?;
    d.set_item("epoch", s.epoch)?;
    d.set_item("epoch_increase_count", s.epoch_increase_count)?;
    d.set_item("epoch_increase_running", s.epoch_increase_running)?;
    d.set_item("replay_queue", s.replay_queue)?;
    d.set_item("delivered", s.delivered)?;
    d.set_item("out_of_order_deliveries", s.out_of_order_deliveries)?;
    d.set_item("discarded_reads", s.discarded_reads)?;
    Ok(d)
}

// The literal defaults of `PyManagedLedger::new`'s signature are the rollover rule's.
const _: () = assert!(
    rollover::MAX_ENTRIES == 50_000
        && rollover::MAX_BYTES == 2_147_483_648
        && rollover::MIN_AGE_MS == 600_000
        && rollover::MAX_AGE_MS == 14_400_000
);

#[pymethods]
impl PyManagedLedger {
    #[new]
    // The rollover defaults are `ledger::rollover`'s (checked above), written out in the text
    // signature so that Python shows them; the parameters take any int and name themselves in
    // their errors (see `super::args`).
    #[pyo3(signature = (name, manager, storage, *, max_entries_per_ledger = None,
                        max_bytes_per_ledger = None, min_rollover_ms = None,
                        max_rollover_ms = None, cursor_epochs = true, read_latency_ms = 0.0, read_latency_per_entry_us = 0.0,
                        read_latency_per_kib_us = 0.0),
           text_signature = "(name, manager, storage, *, max_entries_per_ledger=50000, max_bytes_per_ledger=2147483648, min_rollover_ms=600000, max_rollover_ms=14400000, cursor_epochs=True, read_latency_ms=0.0, read_latency_per_entry_us=0.0, read_latency_per_kib_us=0.0)")]
    #[allow(
        clippy::too_many_arguments,
        reason = "Python's keyword arguments, one a setting"
    )]
    fn new(
        py: Python<'_>,
        name: String,
        manager: Bound<'_, PyEntryCacheManager>,
        storage: Bound<'_, PyStorage>,
        max_entries_per_ledger: Option<Int>,
        max_bytes_per_ledger: Option<Int>,
        min_rollover_ms: Option<Int>,
        max_rollover_ms: Option<Int>,
        cursor_epochs: bool,
        read_latency_ms: f64,
        read_latency_per_entry_us: f64,
        read_latency_per_kib_us: f64,
    ) -> PyResult<Self> {
        for (arg, v) in [
            ("read_latency_ms", read_latency_ms),
            ("read_latency_per_entry_us", read_latency_per_entry_us),
            ("read_latency_per_kib_us", read_latency_per_kib_us),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(raise(
                    py,
                    "InvalidArgumentError",
                    format!("invalid {arg}: must be >= 0, got {v}"),
                ));
            }
        }
        let config = LedgerConfig {
            max_entries_per_ledger: get_opt(py, max_entries_per_ledger, "max_entries_per_ledger")?
                .unwrap_or(rollover::MAX_ENTRIES),
            max_bytes_per_ledger: get_opt(py, max_bytes_per_ledger, "max_bytes_per_ledger")?
                .unwrap_or(rollover::MAX_BYTES),
            min_rollover_ms: get_opt(py, min_rollover_ms, "min_rollover_ms")?
                .unwrap_or(rollover::MIN_AGE_MS),
            max_rollover_ms: get_opt(py, max_rollover_ms, "max_rollover_ms")?
                .unwrap_or(rollover::MAX_AGE_MS),
            cursor_epochs,
            read_latency: ReadLatency {
                fixed_ns: (read_latency_ms * 1e6) as u64,
                per_entry_ns: (read_latency_per_entry_us * 1e3) as u64,
                per_kib_ns: (read_latency_per_kib_us * 1e3) as u64,
            },
        };
        let handle = storage.get().handle.clone();
        let m = manager.get().inner.clone();
        let inner = py
            .detach(|| ManagedLedger::open(&name, &m, handle, config))
            .py_err(py)?;
        let cache = manager.get().get_cache(py, &name)?;
        Ok(PyManagedLedger {
            inner,
            cache,
            storage: storage.unbind(),
        })
    }

    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// This ledger's entry cache (the manager's cache of the same name).
    #[getter]
    fn cache(&self, py: Python<'_>) -> Py<PyEntryCache> {
        self.cache.clone_ref(py)
    }

    #[getter]
    fn storage(&self, py: Python<'_>) -> Py<PyStorage> {
        self.storage.clone_ref(py)
    }

    /// Appends `data`; returns its position.
    fn add_entry(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyPosition> {
        let payload = payload_arg(data)?;
        py.detach(|| self.inner.add_entry(payload))
            .py_err(py)
            .map(PyPosition)
    }

    /// Appends each of `entries`; returns their positions.
    fn add_entries(
        &self,
        py: Python<'_>,
        entries: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyPosition>> {
        let payloads = entries
            .iter()
            .map(payload_arg)
            .collect::<PyResult<Vec<_>>>()?;
        py.detach(|| {
            payloads
                .into_iter()
                .map(|p| self.inner.add_entry(p))
                .collect::<Result<Vec<_>>>()
        })
        .py_err(py)
        .map(|ps| ps.into_iter().map(PyPosition).collect())
    }

    /// Opens (or returns) cursor `name`, starting at "latest", "earliest" or a Position.
    #[pyo3(signature = (name, start = None, active = true))]
    fn open_cursor(
        &self,
        py: Python<'_>,
        name: &str,
        start: Option<&Bound<'_, PyAny>>,
        active: bool,
    ) -> PyResult<PyManagedCursor> {
        let start = match start {
            Some(s) => start_at(py, s)?,
            None => StartAt::Latest,
        };
        let cursor = py
            .detach(|| self.inner.open_cursor(name, start, active))
            .py_err(py)?;
        Ok(PyManagedCursor { inner: cursor })
    }

    /// The cursor `name`, or None.
    fn cursor(&self, py: Python<'_>, name: &str) -> Option<PyManagedCursor> {
        py.detach(|| self.inner.cursor(name))
            .map(|inner| PyManagedCursor { inner })
    }

    fn cursor_names(&self, py: Python<'_>) -> Vec<String> {
        py.detach(|| self.inner.cursor_names())
    }

    /// Deletes cursor `name` (Pulsar's deleteCursor): closed, and forgotten by a FileStorage, so
    /// reopening the ledger does not bring it back. NotFoundError if there is no such cursor.
    fn delete_cursor(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        py.detach(|| self.inner.delete_cursor(name)).py_err(py)
    }

    /// Deletes a ledger (not the current one); its cached entries are dropped.
    fn delete_ledger(&self, py: Python<'_>, ledger_id: Int) -> PyResult<()> {
        let ledger_id: i64 = ledger_id.get(py, "ledger_id")?;
        py.detach(|| self.inner.delete_ledger(ledger_id)).py_err(py)
    }

    /// The lowest read position among the cursors, or None without cursors (Pulsar's
    /// `ManagedCursorContainer.getSlowestReaderPosition`).
    #[getter]
    fn slowest_reader_position(&self, py: Python<'_>) -> Option<PyPosition> {
        py.detach(|| self.inner.slowest_reader_position())
            .map(PyPosition)
    }

    /// The cursor with the lowest mark-delete position, the first opened among equals; None
    /// without cursors (Pulsar's `ManagedLedgerImpl.getSlowestConsumer`).
    fn slowest_consumer(&self, py: Python<'_>) -> Option<PyManagedCursor> {
        py.detach(|| self.inner.slowest_consumer())
            .map(|inner| PyManagedCursor { inner })
    }

    /// (ledger_id, entries, bytes) of each ledger, oldest first.
    #[getter]
    fn ledgers(&self, py: Python<'_>) -> Vec<(i64, u64, u64)> {
        py.detach(|| self.inner.ledgers())
            .into_iter()
            .map(|l| (l.id, l.entries, l.bytes))
            .collect()
    }

    #[getter]
    fn last_position(&self, py: Python<'_>) -> Option<PyPosition> {
        py.detach(|| self.inner.last_position()).map(PyPosition)
    }

    #[getter]
    fn entry_count(&self, py: Python<'_>) -> u64 {
        py.detach(|| self.inner.entry_count())
    }

    #[getter]
    fn active_cursor_count(&self, py: Python<'_>) -> usize {
        py.detach(|| self.inner.active_cursor_count())
    }

    /// Storage reads made through this ledger's store: read_ops, read_entries, read_bytes, ...
    fn storage_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.storage
            .bind(py)
            .call_method0("stats")?
            .cast_into()
            .map_err(Into::into)
    }

    /// Runs the broker's periodic cursor check (Pulsar's stats task, every
    /// `backlog_check_interval_ms`): which cursors count as active given their backlog, and which
    /// cache their storage reads. Only the pre-PIP-430 read flow has anything to check.
    fn check_backlogged_cursors(&self, py: Python<'_>) {
        py.detach(|| self.inner.check_backlogged_cursors())
    }

    /// Completes the reads whose storage reads are due on the clock; returns how many finished.
    fn poll(&self, py: Python<'_>) -> usize {
        py.detach(|| self.inner.poll())
    }

    #[getter]
    fn reads_in_flight(&self, py: Python<'_>) -> usize {
        py.detach(|| self.inner.reads_in_flight())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ManagedLedger({:?}, entries={}, ledgers={})",
            self.inner.name(),
            py.detach(|| self.inner.entry_count()),
            py.detach(|| self.inner.ledgers()).len()
        )
    }
}

/// A cursor (subscription) of a ManagedLedger.
#[pyclass(name = "ManagedCursor", module = "ledgercache", frozen)]
pub struct PyManagedCursor {
    inner: ManagedCursor,
}

fn delivered(py: Python<'_>, outcome: ReadOutcome) -> PyResult<Vec<Py<PyCachedEntry>>> {
    match outcome {
        ReadOutcome::Delivered(entries) => entries_to_py(py, entries),
        ReadOutcome::Discarded => Ok(Vec::new()),
    }
}

#[pymethods]
impl PyManagedCursor {
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Reads up to `n` entries from the read position; each consumes one expected read when
    /// released. An empty list at the end of the ledger.
    fn read_entries(&self, py: Python<'_>, n: Int) -> PyResult<Vec<Py<PyCachedEntry>>> {
        let n: u64 = n.get(py, "n")?;
        let outcome = py.detach(|| self.inner.read_entries(n)).py_err(py)?;
        delivered(py, outcome)
    }

    /// Reads up to `n` entries and delivers them at once: their payloads, each read consumed.
    fn read_data(&self, py: Python<'_>, n: Int) -> PyResult<Vec<Py<PyAny>>> {
        let n: u64 = n.get(py, "n")?;
        let outcome = py.detach(|| self.inner.read_entries(n)).py_err(py)?;
        Ok(match outcome {
            ReadOutcome::Delivered(entries) => entries
                .iter()
                .map(|e| {
                    e.release();
                    payload_to_py(py, e.payload())
                })
                .collect(),
            ReadOutcome::Discarded => Vec::new(),
        })
    }

    /// Starts a read of up to `n` entries that completes when its storage reads do.
    fn read_entries_async(&self, py: Python<'_>, n: Int) -> PyResult<PyReadHandle> {
        let n: u64 = n.get(py, "n")?;
        let id = py.detach(|| self.inner.read_entries_async(n)).py_err(py)?;
        Ok(PyReadHandle::new(self.inner.ledger().clone(), id))
    }

    /// Reads up to `n` entries of the replay queue (lowest first).
    fn read_replay(&self, py: Python<'_>, n: Int) -> PyResult<Vec<Py<PyCachedEntry>>> {
        let n: u64 = n.get(py, "n")?;
        let outcome = py.detach(|| self.inner.read_replay(n)).py_err(py)?;
        delivered(py, outcome)
    }

    fn read_replay_async(&self, py: Python<'_>, n: Int) -> PyResult<PyReadHandle> {
        let n: u64 = n.get(py, "n")?;
        let id = py.detach(|| self.inner.read_replay_async(n)).py_err(py)?;
        Ok(PyReadHandle::new(self.inner.ledger().clone(), id))
    }

    /// Queues positions for redelivery. `reason` is why they go back: "hold-back" (the consumer
    /// could not take them yet; a cached entry expects one more read, as Pulsar's Key_Shared
    /// dispatcher does), "nack" or "overflow" (Pulsar adds no expected read for these).
    #[pyo3(signature = (positions, reason = "hold-back"))]
    fn add_to_replay(
        &self,
        py: Python<'_>,
        positions: Vec<PyPosition>,
        reason: &str,
    ) -> PyResult<()> {
        let reason = RedeliveryReason::parse(reason)
            .ok_or_else(|| {
                Error::invalid(
                    "reason",
                    format!("{reason:?} is not one of hold-back, nack, overflow"),
                )
            })
            .py_err(py)?;
        let ps: Vec<_> = positions.into_iter().map(|p| p.0).collect();
        py.detach(|| self.inner.add_to_replay(&ps, reason))
            .py_err(py)
    }

    #[getter]
    fn replay_queue(&self, py: Python<'_>) -> PyResult<Vec<PyPosition>> {
        Ok(self
            .inner
            .replay_queue()
            .py_err(py)?
            .into_iter()
            .map(PyPosition)
            .collect())
    }

    /// Acknowledges one entry on its own; reads pass over it, as a broker's do after a rewind.
    /// Raises `InvalidArgumentError` for a position past the last entry written.
    fn ack(&self, py: Python<'_>, position: PyPosition) -> PyResult<()> {
        py.detach(|| self.inner.ack(position.0)).py_err(py)
    }

    /// Acknowledges every entry up to `position`.
    fn mark_delete(&self, py: Python<'_>, position: PyPosition) -> PyResult<()> {
        py.detach(|| self.inner.mark_delete(position.0)).py_err(py)
    }

    /// Whether the cursor counts as active for caching. Setting it says whether a consumer is
    /// connected; under the pre-PIP-430 flow a connected cursor with `cursor_backlogged_threshold`
    /// or more entries to read stays inactive until `ManagedLedger.check_backlogged_cursors`.
    /// Setting it to False (no consumer left) drops the replay queue, as a broker's dispatcher
    /// does when its last consumer leaves.
    #[getter]
    fn active(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.inner.is_active()).py_err(py)
    }

    #[setter]
    fn set_active(&self, py: Python<'_>, active: bool) -> PyResult<()> {
        py.detach(|| self.inner.set_active(active)).py_err(py)
    }

    /// Closes the cursor.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.close()).py_err(py)
    }

    /// Moves the read position only (Pulsar's `seek(position, force)`): without `force` a
    /// position at or before the mark-delete position moves it to the entry after the mark-delete
    /// position; with `force` it goes there, and reads deliver acknowledged entries again.
    #[pyo3(signature = (position, force = false))]
    fn seek(&self, py: Python<'_>, position: PyPosition, force: bool) -> PyResult<()> {
        py.detach(|| self.inner.seek(position.0, force)).py_err(py)
    }

    /// Entries from the read position to the last entry written, less those acknowledged on
    /// their own (Pulsar's `getNumberOfEntries`).
    #[getter]
    fn entries_to_read(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.inner.entries_to_read()).py_err(py)
    }

    /// Whether the read position is at or before the last entry written (Pulsar's
    /// `hasMoreEntries`; like it, entries acknowledged on their own still count).
    fn has_more_entries(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.inner.has_more_entries()).py_err(py)
    }

    /// The entries acknowledged on their own past the mark-delete position, as (first, last)
    /// Position pairs with both ends inclusive, in position order (Pulsar's
    /// `getIndividuallyDeletedMessagesSet`, which prints each as an open-closed range
    /// `(first-1, last]`).
    #[getter]
    fn individually_acked(&self, py: Python<'_>) -> PyResult<Vec<(PyPosition, PyPosition)>> {
        Ok(py
            .detach(|| self.inner.individually_acked())
            .py_err(py)?
            .into_iter()
            .map(|(a, b)| (PyPosition(a), PyPosition(b)))
            .collect())
    }

    /// Resets the subscription to `position`: everything before it acknowledged, nothing after.
    fn reset(&self, py: Python<'_>, position: PyPosition) -> PyResult<()> {
        py.detach(|| self.inner.reset(position.0)).py_err(py)
    }

    /// Reads again from the first unacknowledged entry.
    fn rewind(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.rewind()).py_err(py)
    }

    /// Skips `n` entries from the mark-delete position (Pulsar's `skipEntries(n, mode)`):
    /// `individually_acked="exclude"` (the default, a broker's skip-messages) passes over entries
    /// acknowledged on their own, skipping `n` unacknowledged ones; "include" counts them.
    #[pyo3(signature = (n, individually_acked = "exclude"))]
    fn skip(&self, py: Python<'_>, n: Int, individually_acked: &str) -> PyResult<()> {
        let n: u64 = n.get(py, "n")?;
        let mode = match individually_acked {
            "exclude" => SkipMode::Exclude,
            "include" => SkipMode::Include,
            other => {
                return Err(Error::invalid(
                    "individually_acked",
                    format!("{other:?} is not one of \"exclude\", \"include\""),
                ))
                .py_err(py)
            }
        };
        py.detach(|| self.inner.skip(n, mode)).py_err(py)
    }

    /// Acknowledges everything.
    fn clear_backlog(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.clear_backlog()).py_err(py)
    }

    /// Phase one of an epoch increase: marks the cursor modified and moves its read position;
    /// returns the current epoch. Raises CursorEpochConflictException if one is running.
    fn start_increase_epoch(&self, py: Python<'_>, new_read_position: PyPosition) -> PyResult<u32> {
        py.detach(|| self.inner.start_increase_epoch(new_read_position.0))
            .py_err(py)
    }

    /// Phase two: bumps the epoch; False if no increase was running.
    fn end_increase_epoch(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.inner.end_increase_epoch()).py_err(py)
    }

    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u32> {
        py.detach(|| self.inner.epoch()).py_err(py)
    }

    /// True if a read started at `epoch` would be discarded now.
    fn is_epoch_outdated(&self, py: Python<'_>, epoch: Int) -> PyResult<bool> {
        let epoch: u32 = epoch.get(py, "epoch")?;
        py.detach(|| self.inner.is_epoch_outdated(epoch)).py_err(py)
    }

    /// Sets the read position if the epoch is still `expected_epoch`; returns whether it did.
    fn set_read_position(
        &self,
        py: Python<'_>,
        position: PyPosition,
        expected_epoch: Int,
    ) -> PyResult<bool> {
        let expected_epoch: u32 = expected_epoch.get(py, "expected_epoch")?;
        py.detach(|| self.inner.set_read_position(position.0, expected_epoch))
            .py_err(py)
    }

    #[getter]
    fn read_position(&self, py: Python<'_>) -> PyResult<PyPosition> {
        py.detach(|| self.inner.read_position())
            .py_err(py)
            .map(PyPosition)
    }

    #[getter]
    fn mark_delete_position(&self, py: Python<'_>) -> PyResult<PyPosition> {
        py.detach(|| self.inner.mark_delete_position())
            .py_err(py)
            .map(PyPosition)
    }

    #[getter]
    fn backlog(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.inner.backlog()).py_err(py)
    }

    /// Active cursors at or before this one (PIP-430 mode).
    fn count_at_or_before(&self, py: Python<'_>) -> u32 {
        py.detach(|| self.inner.count_at_or_before())
    }

    /// Positions, backlog, activity, epoch and delivery counters.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| self.inner.stats()).py_err(py)?;
        stats_dict(py, &s)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match py.detach(|| self.inner.read_position()) {
            Ok(p) => format!(
                "ManagedCursor({:?}, read_position=Position({}, {}))",
                self.inner.name(),
                p.ledger_id,
                p.entry_id
            ),
            Err(_) => format!("ManagedCursor({:?}, closed)", self.inner.name()),
        }
    }
}

/// A read in flight. ``done`` tells whether it finished; ``result()`` returns its entries (an empty
/// list if it was discarded because the cursor's epoch moved on; see ``discarded``).
#[pyclass(name = "ReadHandle", module = "ledgercache", frozen)]
pub struct PyReadHandle {
    ledger: ManagedLedger,
    id: ReadId,
    taken: Mutex<
        Option<
            std::result::Result<Option<Vec<crate::cache::entry::CachedEntry>>, crate::error::Error>,
        >,
    >,
}

impl PyReadHandle {
    fn new(ledger: ManagedLedger, id: ReadId) -> Self {
        PyReadHandle {
            ledger,
            id,
            taken: Mutex::new(None),
        }
    }

    /// Moves the outcome out of the ledger once it is there.
    fn settle(&self) -> bool {
        let mut taken = self.taken.lock();
        if taken.is_none() {
            if let Some(outcome) = self.ledger.take_read(self.id) {
                *taken = Some(outcome.map(|o| match o {
                    ReadOutcome::Delivered(e) => Some(e),
                    ReadOutcome::Discarded => None,
                }));
            }
        }
        taken.is_some()
    }
}

impl Drop for PyReadHandle {
    /// A handle dropped before its outcome was taken discards its read: the read would otherwise
    /// hold its reads-in-flight permits in the ledger for ever, and later reads would wait for
    /// them. Without the GIL, as every other call into the ledger.
    fn drop(&mut self) {
        if self.taken.get_mut().is_none() {
            let (ledger, id) = (&self.ledger, self.id);
            Python::attach(|py| py.detach(|| ledger.discard_read(id)));
        }
    }
}

#[pymethods]
impl PyReadHandle {
    #[getter]
    fn done(&self, py: Python<'_>) -> bool {
        py.detach(|| self.settle())
    }

    /// True if the read finished but was discarded (its cursor's epoch moved on).
    #[getter]
    fn discarded(&self, py: Python<'_>) -> bool {
        py.detach(|| self.settle()) && matches!(*self.taken.lock(), Some(Ok(None)))
    }

    /// The delivered entries. Raises if the read failed, or if it has not finished yet (advance the
    /// clock and call ``ManagedLedger.poll()``).
    fn result(&self, py: Python<'_>) -> PyResult<Vec<Py<PyCachedEntry>>> {
        if !py.detach(|| self.settle()) {
            return Err(raise(
                py,
                "LedgerCacheError",
                "the read has not completed; advance the clock and call poll()".into(),
            ));
        }
        match &*self.taken.lock() {
            Some(Ok(Some(entries))) => entries_to_py(
                py,
                entries
                    .iter()
                    .map(crate::cache::entry::CachedEntry::copy)
                    .collect(),
            ),
            Some(Ok(None)) => Ok(Vec::new()),
            Some(Err(e)) => Err(super::errors::to_py(py, e.clone())),
            None => unreachable!("settled"),
        }
    }
}
