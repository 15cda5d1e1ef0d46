//! Maps the core's `Error` onto the exception classes of `ledgercache.errors`, a hierarchy rooted
//! at `LedgerCacheError` whose argument errors are also `ValueError`s (and unknown settings also
//! `TypeError`s), so callers can catch either.

use crate::error::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn class_for(err: &Error) -> &'static str {
    match err {
        Error::InvalidArgument { .. } => "InvalidArgumentError",
        Error::UnknownSetting { .. } => "UnknownSettingError",
        Error::Unsupported(_) => "UnsupportedError",
        Error::Closed(_) => "ClosedError",
        Error::NotFound { what: "cursor", .. } => "UnknownCursorError",
        Error::NotFound { .. } => "NotFoundError",
        Error::Storage(_) => "StorageError",
        Error::CorruptSegment { .. } => "CorruptSegmentError",
        Error::ResourceLimit(_) => "ResourceLimitError",
        Error::CursorModifying(_) => "CursorModifyingException",
        Error::CursorEpochConflict(_) => "CursorEpochConflictException",
        // Bindings that check signals raise the signal's exception; anything else is the root.
        Error::Interrupted => "LedgerCacheError",
    }
}

/// A Python exception of the class named `class` in `ledgercache.errors`.
pub fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    let module = ERRORS.get_or_try_init(py, || {
        PyModule::import(py, "ledgercache.errors").map(Bound::unbind)
    });
    match module.and_then(|m| m.bind(py).getattr(class)) {
        Ok(cls) => PyErr::from_type(
            cls.cast_into()
                .expect("ledgercache.errors holds exception classes"),
            message,
        ),
        // The package is missing (the extension imported on its own): still raise something clear.
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    raise(py, class_for(&err), err.to_string())
}

/// `?`-friendly conversion for core results.
pub trait IntoPyResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for crate::error::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// A non-negative integer argument, or `InvalidArgumentError` naming it.
pub fn non_negative(py: Python<'_>, name: &'static str, value: i64) -> PyResult<u64> {
    u64::try_from(value).map_err(|_| {
        to_py(
            py,
            Error::invalid(name, format!("must be >= 0, got {value}")),
        )
    })
}
