use super::args::{get_opt, Int};
use super::arrow_batch::{batch_entries, entries_to_batch, to_pyarrow, ReadsArg};
use super::clock::clock_arg;
use super::config::{to_setting, PyCacheConfig};
use super::errors::{raise, IntoPyResult};
use super::payload::{detached_releasing, payload_arg, payload_to_py};
use super::position::PyPosition;
use crate::cache::entry::CachedEntry;
use crate::cache::manager::{count_and_size, EntryCache, EntryCacheManager, EntryInfo};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// EntryCacheManager(config, clock=None, background_eviction=False): the broker-wide cache.
///
/// One size budget and one FIFO removal queue for the entry caches of all managed ledgers.
#[pyclass(name = "EntryCacheManager", module = "ledgercache", frozen)]
pub struct PyEntryCacheManager {
    /// Dropped without the GIL (see the `Drop` impl).
    pub(super) inner: ManuallyDrop<Arc<EntryCacheManager>>,
    /// The Python wrapper of each cache, so `get_cache` returns the same object for a name.
    wrappers: Mutex<HashMap<String, Py<PyEntryCache>>>,
}

impl Drop for PyEntryCacheManager {
    /// The manager's last handle stops its background evictor and waits for it, and the evictor
    /// may be waiting for the GIL (to release a pyarrow buffer of Python memory it evicted): the
    /// handle goes without the GIL.
    fn drop(&mut self) {
        // SAFETY: the field is taken once, here, and not used afterwards.
        let inner = unsafe { ManuallyDrop::take(&mut self.inner) };
        Python::attach(|py| py.detach(move || drop(inner)));
    }
}

#[pymethods]
impl PyEntryCacheManager {
    #[new]
    #[pyo3(signature = (config = None, clock = None, background_eviction = false))]
    fn new(
        py: Python<'_>,
        config: Option<PyCacheConfig>,
        clock: Option<&Bound<'_, PyAny>>,
        background_eviction: bool,
    ) -> PyResult<Self> {
        let config = config.unwrap_or(PyCacheConfig(Default::default()));
        let inner =
            EntryCacheManager::new(config.0.clone(), clock_arg(clock)?, background_eviction)
                .py_err(py)?;
        Ok(PyEntryCacheManager {
            inner: ManuallyDrop::new(Arc::new(inner)),
            wrappers: Mutex::new(HashMap::new()),
        })
    }

    /// The cache of the managed ledger `name`, created on first use (the same object for a name).
    pub(super) fn get_cache(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyEntryCache>> {
        let mut wrappers = self.wrappers.lock();
        if let Some(w) = wrappers.get(name) {
            return Ok(w.clone_ref(py));
        }
        let cache = self.inner.get_cache(name);
        let w = Py::new(py, PyEntryCache { inner: cache })?;
        wrappers.insert(name.to_string(), w.clone_ref(py));
        Ok(w)
    }

    /// Removes the cache `name` and its entries; returns (entries, bytes) removed.
    fn remove_cache(&self, py: Python<'_>, name: &str) -> (u64, u64) {
        self.wrappers.lock().remove(name);
        detached_releasing(py, |released| {
            self.inner.remove_cache_releasing(name, released)
        })
        .unwrap_or((0, 0))
    }

    /// Names of the caches that exist.
    fn cache_names(&self) -> Vec<String> {
        self.inner.cache_names()
    }

    /// The settings in force: those the manager was made with, and the changes
    /// ``update_config`` made since.
    #[getter]
    fn config(&self) -> PyCacheConfig {
        PyCacheConfig(self.inner.current_config())
    }

    /// Changes settings while the manager runs, as a broker's dynamic configuration does: only
    /// ``cache_size_bytes``, ``eviction_watermark``, ``eviction_time_threshold_ms``,
    /// ``extend_ttl_max_times`` and ``extend_ttl_of_recently_accessed`` (the cache keys Pulsar
    /// applies live); any other raises ``UnsupportedError`` naming it (a broker needs a restart
    /// for it). A cache left above its trigger threshold evicts down to the new watermark at once
    /// (on the background evictor when there is one); returns the (entries, bytes) this call
    /// evicted. On error nothing changes.
    #[pyo3(signature = (**changes))]
    fn update_config(
        &self,
        py: Python<'_>,
        changes: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<(u64, u64)> {
        let mut pairs = Vec::new();
        if let Some(changes) = changes {
            for (k, v) in changes.iter() {
                let key: String = k.extract()?;
                let value = to_setting(py, &key, &v)?;
                pairs.push((key, value));
            }
        }
        detached_releasing(py, |released| {
            self.inner.update_config_releasing(
                pairs.iter().map(|(k, v)| (k.as_str(), v.clone())),
                released,
            )
        })
        .py_err(py)
    }

    #[getter]
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    #[getter]
    fn entry_count(&self) -> u64 {
        self.inner.entry_count()
    }

    #[getter]
    fn max_size_bytes(&self) -> u64 {
        self.inner.max_size_bytes()
    }

    /// One time pass; returns (entries, bytes) removed.
    fn evict_expired(&self, py: Python<'_>) -> (u64, u64) {
        detached_releasing(py, |released| self.inner.evict_expired_releasing(released))
    }

    /// One size pass freeing at least `n` bytes oldest-first, honouring requeues.
    fn evict_bytes(&self, py: Python<'_>, n: Int) -> PyResult<(u64, u64)> {
        let n: i64 = n.get(py, "n")?;
        if n <= 0 {
            return Err(raise(
                py,
                "InvalidArgumentError",
                format!("invalid n: must be > 0 bytes to free, got {n}"),
            ));
        }
        detached_releasing(py, |released| {
            self.inner.evict_bytes_releasing(n as u64, released)
        })
        .py_err(py)
    }

    /// The periodic task: a time pass, then a size pass to the watermark if above the trigger.
    fn run_eviction(&self, py: Python<'_>) -> (u64, u64) {
        detached_releasing(py, |released| self.inner.run_eviction_releasing(released))
    }

    /// Counters: inserted, evicted, requeued, hits, misses, and more.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.inner.stats().fields() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The reads-in-flight limiter its managed ledgers share: ``max_bytes``, ``remaining_bytes``,
    /// ``waiting`` (reads queued now), and the counts ``acquired``, ``released``, ``queued``,
    /// ``timed_out``, ``refused``.
    fn reads_in_flight<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (max, remaining, waiting, counts) = self.inner.reads_limiter().snapshot();
        let d = super::inflight::counts_dict(py, counts)?;
        d.set_item("max_bytes", max)?;
        d.set_item("remaining_bytes", remaining)?;
        d.set_item("waiting", waiting)?;
        Ok(d)
    }

    /// Items in the removal queue, stale ones included.
    fn removal_queue_len(&self, py: Python<'_>) -> usize {
        py.detach(|| self.inner.removal_queue_len())
    }

    /// Heap bytes of bookkeeping, payload bytes excluded: slabs, indexes, the removal queue, and per
    /// entry its payload's header and its read-count handler.
    fn metadata_bytes(&self, py: Python<'_>) -> usize {
        py.detach(|| self.inner.metadata_bytes())
    }

    fn __repr__(&self) -> String {
        format!(
            "EntryCacheManager(size_bytes={}, entry_count={}, max_size_bytes={})",
            self.inner.size_bytes(),
            self.inner.entry_count(),
            self.inner.max_size_bytes()
        )
    }
}

/// The entry cache of one managed ledger; get it from ``EntryCacheManager.get_cache``.
#[pyclass(name = "EntryCache", module = "ledgercache", frozen)]
pub struct PyEntryCache {
    inner: Arc<EntryCache>,
}

pub(super) fn entries_to_py(
    py: Python<'_>,
    entries: Vec<CachedEntry>,
) -> PyResult<Vec<Py<PyCachedEntry>>> {
    entries
        .into_iter()
        .map(|e| Py::new(py, PyCachedEntry { inner: e }))
        .collect()
}

#[pymethods]
impl PyEntryCache {
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Caches `data` at `position` unless that position is cached already (or caching is off);
    /// returns whether it was inserted. `expected_reads` > 0 gives the entry a read counter;
    /// `size` overrides the accounted size (default ``len(data)``).
    #[pyo3(signature = (position, data, expected_reads = Int::of(0), size = None))]
    #[pyo3(text_signature = "(self, position, data, expected_reads=0, size=None)")]
    fn insert(
        &self,
        py: Python<'_>,
        position: PyPosition,
        data: &Bound<'_, PyAny>,
        expected_reads: Int,
        size: Option<Int>,
    ) -> PyResult<bool> {
        let expected_reads: i64 = expected_reads.get(py, "expected_reads")?;
        let size = get_opt::<i64>(py, size, "size")?;
        let expected_reads = i32::try_from(expected_reads)
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| {
                raise(
                    py,
                    "InvalidArgumentError",
                    format!("invalid expected_reads: must be in [0, 2^31), got {expected_reads}"),
                )
            })?;
        let size = size
            .map(|s| {
                u32::try_from(s).map_err(|_| {
                    raise(
                        py,
                        "InvalidArgumentError",
                        format!("invalid size: must be in [0, 2^32), got {s}"),
                    )
                })
            })
            .transpose()?;
        let payload = payload_arg(data)?;
        let (count, size) = count_and_size(&payload, expected_reads, size).py_err(py)?;
        // The insert holds the GIL, as `get` does: letting go of it and taking it back would cost
        // more than the insert. A size pass, if the insert calls for one, runs without it, and
        // the `bytes` it evicts are released afterwards, with it.
        let inserted = self
            .inner
            .insert_leaving_pass(position.0, payload, count, size)
            .py_err(py)?;
        let Some(total) = inserted else {
            return Ok(false);
        };
        if self.inner.pass_due(total) {
            if self.inner.evicts_in_background() {
                // A wake-up of the evictor thread, which releases what it evicts itself: letting go
                // of the GIL for it would cost more than the insert.
                let mut released = Vec::new();
                self.inner.finish_insert_releasing(total, &mut released);
                debug_assert!(released.is_empty(), "a wake-up evicts nothing");
            } else {
                detached_releasing(py, |released| {
                    self.inner.finish_insert_releasing(total, released)
                });
            }
        }
        Ok(true)
    }

    /// Caches the elements of ``data`` (an Arrow binary, large_binary, string or large_string
    /// array: anything with ``__arrow_c_array__``, or ``__arrow_c_stream__`` like a
    /// ``pyarrow.ChunkedArray``) at (ledger_id, first_entry_id), (ledger_id, first_entry_id + 1),
    /// ... without copying their bytes; returns how many were inserted.
    ///
    /// Each cached payload is a slice of the array's values buffer, which stays alive while any
    /// entry or reader copy refers to it (``copy_entries=True`` copies, as for ``insert``).
    /// Positions already cached are skipped, as by ``insert``. ``expected_reads`` is one count for
    /// every entry or one per entry; ``sizes`` (one per entry) overrides the accounted sizes
    /// (default: the payload lengths); both take Arrow integer arrays, lists, ranges or NumPy
    /// arrays. Nulls are refused with ``InvalidArgumentError`` naming the first null's index, as
    /// are arrays of another type or length and an entry id past 2**63 - 1; nothing is inserted
    /// then. The cache ends up as if each element had been passed to ``insert`` in order (one
    /// timestamp for the batch; a size pass runs whenever an entry takes the cache over its
    /// trigger threshold).
    #[pyo3(signature = (ledger_id, first_entry_id, data, *, expected_reads = ReadsArg::Count(0), sizes = None))]
    #[pyo3(
        text_signature = "(self, ledger_id, first_entry_id, data, *, expected_reads=0, sizes=None)"
    )]
    fn insert_batch(
        &self,
        py: Python<'_>,
        ledger_id: Int,
        first_entry_id: Int,
        data: &Bound<'_, PyAny>,
        expected_reads: ReadsArg<'_>,
        sizes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let ledger_id: i64 = ledger_id.get(py, "ledger_id")?;
        let first_entry_id: i64 = first_entry_id.get(py, "first_entry_id")?;
        let entries = batch_entries(data, &expected_reads, sizes)?;
        // Inline eviction may run here, and what it evicts or the batch skips is released once
        // the cache's lock is let go: a producer's release callback may take the GIL (pyarrow's
        // does for memory that belongs to a Python object), which it then waits for like any
        // thread.
        py.detach(|| self.inner.insert_batch(ledger_id, first_entry_id, entries))
            .py_err(py)
    }

    /// The cached entries from ``first`` to ``last`` (both inclusive) as a ``pyarrow.RecordBatch``
    /// with columns ``ledger_id`` (int64), ``entry_id`` (int64) and ``data`` (binary; large_binary
    /// past 2 GiB), in position order; hits, misses and accessed marks as for ``get_range``.
    ///
    /// ``data`` shares the cached bytes when the entries lie back to back in one Arrow buffer
    /// (entries of one ``insert_batch``, read in order); otherwise it is one copy of them into a
    /// new buffer. With ``release``, each entry's expected read is consumed as if its reader copy
    /// were released (``get_range``'s copies consume nothing until released).
    #[pyo3(signature = (first, last, *, release = false))]
    fn get_range_arrow(
        &self,
        py: Python<'_>,
        first: PyPosition,
        last: PyPosition,
        release: bool,
    ) -> PyResult<Py<PyAny>> {
        let batch = py.detach(|| {
            let found = self.inner.get_range(first.0, last.0);
            if release {
                found.iter().for_each(|e| {
                    e.release();
                });
            }
            entries_to_batch(&found)
        });
        let batch = batch
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("arrow export: {e}")))?;
        to_pyarrow(py, batch)
    }

    /// The entry at `position`, or None; marks it accessed.
    fn get(&self, py: Python<'_>, position: PyPosition) -> PyResult<Option<Py<PyCachedEntry>>> {
        self.inner
            .get(position.0)
            .map(|e| Py::new(py, PyCachedEntry { inner: e }))
            .transpose()
    }

    /// A look at the cached entry at `position` (size, expected reads, requeues, whether it was
    /// read since the evictor last looked), or None; unlike ``get`` it does not mark the entry
    /// accessed (which extends its TTL) nor count a lookup.
    fn peek(&self, position: PyPosition) -> Option<PyEntryInfo> {
        self.inner.peek(position.0).map(PyEntryInfo)
    }

    /// Cached entries from `first` to `last`, both inclusive, in position order.
    fn get_range(
        &self,
        py: Python<'_>,
        first: PyPosition,
        last: PyPosition,
    ) -> PyResult<Vec<Py<PyCachedEntry>>> {
        let found = py.detach(|| self.inner.get_range(first.0, last.0));
        entries_to_py(py, found)
    }

    /// Removes entries from `first` to `last` (inclusive if `last_inclusive`); returns (entries, bytes).
    #[pyo3(signature = (first, last, last_inclusive))]
    fn remove_range(
        &self,
        py: Python<'_>,
        first: PyPosition,
        last: PyPosition,
        last_inclusive: bool,
    ) -> (u64, u64) {
        detached_releasing(py, |released| {
            self.inner
                .remove_range_releasing(first.0, last.0, last_inclusive, released)
        })
    }

    /// Removes every entry; returns (entries, bytes).
    fn clear(&self, py: Python<'_>) -> (u64, u64) {
        detached_releasing(py, |released| self.inner.clear_releasing(released))
    }

    /// Cached positions in order.
    fn positions(&self) -> Vec<PyPosition> {
        self.inner.positions().into_iter().map(PyPosition).collect()
    }

    #[getter]
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, position: &Bound<'_, PyAny>) -> bool {
        position
            .extract::<PyPosition>()
            .is_ok_and(|p| self.inner.contains(p.0))
    }

    fn __repr__(&self) -> String {
        format!(
            "EntryCache({:?}, entries={}, size_bytes={})",
            self.inner.name(),
            self.inner.len(),
            self.inner.size_bytes()
        )
    }
}

/// A reader's copy of a cached entry. ``release()`` (or leaving a ``with`` block) consumes one
/// expected read, once; dropping it without releasing consumes nothing.
#[pyclass(name = "CachedEntry", module = "ledgercache", frozen)]
pub struct PyCachedEntry {
    pub(super) inner: CachedEntry,
}

#[pymethods]
impl PyCachedEntry {
    #[getter]
    fn position(&self) -> PyPosition {
        PyPosition(self.inner.position())
    }

    /// The payload: the very ``bytes`` object that was inserted when it was ``bytes``.
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyAny> {
        payload_to_py(py, self.inner.payload())
    }

    #[getter]
    fn size(&self) -> u32 {
        self.inner.size()
    }

    /// Remaining expected reads, or None if the entry was cached with none.
    #[getter]
    fn expected_reads(&self) -> Option<i32> {
        self.inner.expected_reads()
    }

    #[getter]
    fn requeue_count(&self) -> u16 {
        self.inner.requeue_count()
    }

    #[getter]
    fn released(&self) -> bool {
        self.inner.is_released()
    }

    /// Consumes one expected read the first time; returns whether this call did.
    fn release(&self) -> bool {
        self.inner.release()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.inner.release();
        false
    }

    fn __len__(&self) -> usize {
        self.inner.data().len()
    }

    fn __repr__(&self) -> String {
        let p = self.inner.position();
        let reads = self
            .inner
            .expected_reads()
            .map_or("None".to_string(), |n| n.to_string());
        format!(
            "CachedEntry(Position({}, {}), size={}, expected_reads={reads})",
            p.ledger_id,
            p.entry_id,
            self.inner.size()
        )
    }
}

/// A cached entry as the evictor sees it (``EntryCache.peek``): looking did not mark it accessed.
#[pyclass(name = "EntryInfo", module = "ledgercache", frozen)]
pub struct PyEntryInfo(EntryInfo);

#[pymethods]
impl PyEntryInfo {
    #[getter]
    fn position(&self) -> PyPosition {
        PyPosition(self.0.position)
    }

    /// The accounted size.
    #[getter]
    fn size(&self) -> u32 {
        self.0.size
    }

    /// Remaining expected reads, or None if the entry was cached without a count.
    #[getter]
    fn expected_reads(&self) -> Option<i32> {
        self.0.expected_reads
    }

    /// How many times the evictor extended the entry's TTL.
    #[getter]
    fn requeue_count(&self) -> u16 {
        self.0.requeue_count
    }

    /// Read since the evictor last looked at it.
    #[getter]
    fn accessed(&self) -> bool {
        self.0.accessed
    }

    /// When it was inserted or last requeued (its TTL counts from here), on the manager's clock.
    #[getter]
    fn timestamp_ns(&self) -> u64 {
        self.0.timestamp_ns
    }

    fn __repr__(&self) -> String {
        let p = self.0.position;
        let reads = self
            .0
            .expected_reads
            .map_or("None".to_string(), |n| n.to_string());
        format!(
            "EntryInfo(Position({}, {}), size={}, expected_reads={reads}, requeue_count={}, accessed={})",
            p.ledger_id,
            p.entry_id,
            self.0.size,
            self.0.requeue_count,
            if self.0.accessed { "True" } else { "False" }
        )
    }
}
