use super::args::Int;
use super::errors::IntoPyResult;
use crate::cache::clock::{Clock, ManualClock, SharedClock, SystemClock};
use crate::error::Error;
use pyo3::prelude::*;
use std::sync::Arc;

/// ManualClock(start_ns=0): a clock that moves only when told to; for tests and replays.
#[pyclass(name = "ManualClock", module = "ledgercache", frozen)]
pub struct PyManualClock(pub Arc<ManualClock>);

#[pymethods]
impl PyManualClock {
    #[new]
    #[pyo3(signature = (start_ns = Int::of(0)), text_signature = "(start_ns=0)")]
    fn new(py: Python<'_>, start_ns: Int) -> PyResult<Self> {
        Ok(PyManualClock(Arc::new(ManualClock::new(
            start_ns.non_negative_i64(py, "start_ns")?,
        ))))
    }

    /// The current time in nanoseconds.
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }

    /// Moves the clock forward by `ms` milliseconds; returns the new time in nanoseconds.
    fn advance_ms(&self, py: Python<'_>, ms: Int) -> PyResult<u64> {
        let ms = ms.non_negative_i64(py, "ms")?;
        let ns = ms
            .checked_mul(1_000_000)
            .ok_or_else(|| Error::invalid("ms", format!("{ms} ms overflows the clock")))
            .py_err(py)?;
        self.0.checked_advance_ns(ns, "ms").py_err(py)
    }

    /// Moves the clock forward by `ns` nanoseconds; returns the new time.
    fn advance_ns(&self, py: Python<'_>, ns: Int) -> PyResult<u64> {
        let ns = ns.non_negative_i64(py, "ns")?;
        self.0.checked_advance_ns(ns, "ns").py_err(py)
    }

    fn __repr__(&self) -> String {
        format!("ManualClock(now_ns={})", self.0.now_ns())
    }
}

/// SystemClock(): the system monotonic clock (the default everywhere).
#[pyclass(name = "SystemClock", module = "ledgercache", frozen)]
pub struct PySystemClock;

#[pymethods]
impl PySystemClock {
    #[new]
    fn new() -> Self {
        PySystemClock
    }

    fn now_ns(&self) -> u64 {
        SystemClock.now_ns()
    }

    fn __repr__(&self) -> &'static str {
        "SystemClock()"
    }
}

/// The clock argument of constructors: None, a ManualClock or a SystemClock.
pub fn clock_arg(clock: Option<&Bound<'_, PyAny>>) -> PyResult<SharedClock> {
    let Some(obj) = clock else {
        return Ok(Arc::new(SystemClock));
    };
    if obj.is_none() || obj.is_instance_of::<PySystemClock>() {
        return Ok(Arc::new(SystemClock));
    }
    if let Ok(manual) = obj.cast::<PyManualClock>() {
        return Ok(manual.get().0.clone());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "clock must be a ledgercache.ManualClock, a ledgercache.SystemClock or None, not {}",
        obj.get_type().name()?
    )))
}
