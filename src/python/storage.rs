//! Storage classes: `Storage` (the base), `MemoryStorage`, `FileStorage`, and `CallableStorage`,
//! which reads from a user's own store through a Python function.

use super::args::Int;
use super::errors::IntoPyResult;
use super::payload::shared_bytes;
use crate::broker::storage::{
    FileOptions, FileStorage, MemoryStorage, Storage, StorageHandle, SyncPolicy,
};
use crate::cache::entry::Payload;
use crate::error::{Error, Result};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::collections::HashMap;
use std::sync::Arc;

/// Base class of the stores a ``ManagedLedger`` reads from and writes to; counts storage reads.
#[pyclass(name = "Storage", module = "ledgercache", subclass, frozen)]
pub struct PyStorage {
    pub(super) handle: StorageHandle,
}

impl PyStorage {
    fn of(store: impl Storage + 'static) -> Self {
        PyStorage {
            handle: StorageHandle::new(Arc::new(store)),
        }
    }
}

#[pymethods]
impl PyStorage {
    /// Reads served so far: read_ops, read_entries, read_bytes, appends, appended_bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.handle.stats().fields() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Ledgers of managed ledger `owner`, oldest first, as (ledger_id, entries).
    fn ledgers(&self, py: Python<'_>, owner: &str) -> PyResult<Vec<(i64, u64)>> {
        py.detach(|| self.handle.ledgers(owner)).py_err(py)
    }

    /// Entries first..=last of a ledger (counted as one storage read).
    fn read(
        &self,
        py: Python<'_>,
        ledger_id: Int,
        first: Int,
        last: Int,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let ledger_id: i64 = ledger_id.get(py, "ledger_id")?;
        let (first, last): (i64, i64) = (first.get(py, "first")?, last.get(py, "last")?);
        let entries = py
            .detach(|| self.handle.read(ledger_id, first, last))
            .py_err(py)?;
        Ok(entries
            .iter()
            .map(|p| super::payload::payload_to_py(py, p))
            .collect())
    }

    fn __repr__(&self) -> String {
        self.handle.store().describe()
    }
}

/// MemoryStorage(): ledgers kept in memory.
#[pyclass(name = "MemoryStorage", module = "ledgercache", extends = PyStorage, frozen)]
pub struct PyMemoryStorage;

#[pymethods]
impl PyMemoryStorage {
    #[new]
    fn new() -> PyClassInitializer<Self> {
        PyClassInitializer::from(PyStorage::of(MemoryStorage::new())).add_subclass(PyMemoryStorage)
    }
}

/// FileStorage(path, *, create=True, read_only=False, sync="never"): ledgers persisted as segment
/// files under `path`; reopening the same directory resumes them. One writer per directory (an
/// exclusive lock; read-only opens share theirs). `create=False` refuses a missing directory
/// instead of creating an empty store. `sync="always"` fsyncs every append before acknowledging
/// it. See docs/storage.md.
#[pyclass(name = "FileStorage", module = "ledgercache", extends = PyStorage, frozen)]
pub struct PyFileStorage {
    path: std::path::PathBuf,
    options: FileOptions,
    recovered: Vec<(std::path::PathBuf, u64, String)>,
    store: Arc<FileStorage>,
}

#[pymethods]
impl PyFileStorage {
    #[new]
    #[pyo3(signature = (path, *, create = true, read_only = false, sync = "never"))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        create: bool,
        read_only: bool,
        sync: &str,
    ) -> PyResult<PyClassInitializer<Self>> {
        let options = FileOptions {
            create,
            read_only,
            sync: SyncPolicy::parse(sync).py_err(py)?,
        };
        let store = Arc::new(
            py.detach(|| FileStorage::open_with(&path, options))
                .py_err(py)?,
        );
        let recovered = store
            .recovered()
            .iter()
            .map(|r| (r.path.clone(), r.offset, r.reason.clone()))
            .collect();
        let base = PyStorage {
            handle: StorageHandle::new(store.clone()),
        };
        Ok(PyClassInitializer::from(base).add_subclass(PyFileStorage {
            path,
            options,
            recovered,
            store,
        }))
    }

    #[getter]
    fn path(&self) -> std::path::PathBuf {
        self.path.clone()
    }

    #[getter]
    fn read_only(&self) -> bool {
        self.options.read_only
    }

    #[getter]
    fn sync(&self) -> &'static str {
        self.options.sync.name()
    }

    /// Torn tails this open cut off, as (segment file, offset cut to, why): writes that were
    /// never acknowledged (a killed process, an OS crash).
    #[getter]
    fn recovered(&self) -> Vec<(std::path::PathBuf, u64, String)> {
        self.recovered.clone()
    }

    /// Releases the segment files and the directory lock now (otherwise they go when the store
    /// is garbage collected); later use raises ClosedError. Also a context manager that closes.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.store.close());
    }

    #[getter]
    fn closed(&self) -> bool {
        self.store.is_closed()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    /// Segments whose readable part ends early because of damage, as (ledger_id, segment file,
    /// offset, why); reads past it raise CorruptSegmentError, appends to it are refused.
    fn damaged(&self) -> Vec<(i64, std::path::PathBuf, u64, String)> {
        self.store.damaged()
    }
}

/// A read-only store backed by a Python function `load(ledger_id, first_entry, last_entry)` that
/// returns the entries as a list of bytes.
struct CallableStore {
    load: Py<PyAny>,
    ledgers: HashMap<String, Vec<(i64, u64)>>,
}

impl Storage for CallableStore {
    fn create_ledger(&self, _owner: &str) -> Result<i64> {
        Err(Error::Unsupported(
            "CallableStorage is read-only: it cannot create ledgers or append".into(),
        ))
    }

    fn ledgers(&self, owner: &str) -> Result<Vec<(i64, u64)>> {
        Ok(self.ledgers.get(owner).cloned().unwrap_or_default())
    }

    fn append(&self, _ledger_id: i64, _data: &[u8]) -> Result<i64> {
        Err(Error::Unsupported(
            "CallableStorage is read-only: it cannot create ledgers or append".into(),
        ))
    }

    fn read(&self, ledger_id: i64, first: i64, last: i64) -> Result<Vec<Payload>> {
        Python::attach(|py| {
            let out = self.load.call1(py, (ledger_id, first, last)).map_err(|e| {
                Error::Storage(format!("load({ledger_id}, {first}, {last}) raised {e}"))
            })?;
            let list: Vec<Bound<'_, PyBytes>> = out.bind(py).extract().map_err(|_| {
                Error::Storage(format!(
                    "load({ledger_id}, {first}, {last}) must return a list of bytes"
                ))
            })?;
            let wanted = (last - first + 1) as usize;
            if list.len() != wanted {
                return Err(Error::Storage(format!(
                    "load({ledger_id}, {first}, {last}) returned {} entries, expected {wanted}",
                    list.len()
                )));
            }
            Ok(list.into_iter().map(shared_bytes).collect())
        })
    }

    fn delete_ledger(&self, _ledger_id: i64) -> Result<()> {
        Err(Error::Unsupported(
            "CallableStorage is read-only: it cannot delete ledgers".into(),
        ))
    }

    fn describe(&self) -> String {
        "CallableStorage".into()
    }
}

/// CallableStorage(load, ledgers=None): reads a user's own store through
/// ``load(ledger_id, first_entry, last_entry) -> list[bytes]``. ``ledgers`` maps a managed
/// ledger's name to its ``[(ledger_id, entry_count), ...]``. Read-only.
#[pyclass(name = "CallableStorage", module = "ledgercache", extends = PyStorage, frozen)]
pub struct PyCallableStorage;

#[pymethods]
impl PyCallableStorage {
    #[new]
    #[pyo3(signature = (load, ledgers = None))]
    fn new(
        py: Python<'_>,
        load: Bound<'_, PyAny>,
        ledgers: Option<HashMap<String, Vec<(Int, Int)>>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let ledgers = ledgers
            .map(|all| {
                all.into_iter()
                    .map(|(name, list)| {
                        let list = list
                            .into_iter()
                            .map(|(id, n)| Ok((id.get(py, "ledgers")?, n.get(py, "ledgers")?)))
                            .collect::<PyResult<Vec<(i64, u64)>>>()?;
                        Ok((name, list))
                    })
                    .collect::<PyResult<HashMap<_, _>>>()
            })
            .transpose()?;
        if !load.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "load must be callable: load(ledger_id, first, last)",
            ));
        }
        let store = CallableStore {
            load: load.unbind(),
            ledgers: ledgers.unwrap_or_default(),
        };
        Ok(PyClassInitializer::from(PyStorage::of(store)).add_subclass(PyCallableStorage))
    }
}
