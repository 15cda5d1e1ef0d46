//! The reads-in-flight limiter from Python: Pulsar's `InflightReadsLimiter` API (acquire with a
//! callback, release, the scheduled timeout check), on a ledgercache clock.

use super::clock::clock_arg;
use super::errors::raise;
use crate::cache::clock::SharedClock;
use crate::cache::inflight_reads::{Acquire, Handle, InflightReadsLimiter, Ticket};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;

/// InflightReadsLimiter(max_reads_in_flight_bytes, acquire_queue_size=50000,
/// acquire_timeout_ms=60000, clock=None): Pulsar's limiter of the bytes managed-ledger reads hold
/// (managedLedgerMaxReadsInFlightSizeInMB and its two companions); 0 or less disables it.
#[pyclass(name = "InflightReadsLimiter", module = "ledgercache", frozen)]
pub struct PyInflightReadsLimiter {
    clock: SharedClock,
    state: Mutex<State>,
}

struct State {
    limiter: InflightReadsLimiter,
    callbacks: HashMap<Ticket, Option<Py<PyAny>>>,
}

/// Permits a read holds (Pulsar's ``InflightReadsLimiter.Handle``).
#[pyclass(
    name = "InflightReadsHandle",
    module = "ledgercache",
    frozen,
    from_py_object
)]
#[derive(Clone, Copy)]
pub struct PyInflightReadsHandle(Handle);

#[pymethods]
impl PyInflightReadsHandle {
    #[getter]
    fn permits(&self) -> u64 {
        self.0.permits
    }

    #[getter]
    fn success(&self) -> bool {
        self.0.success
    }

    /// When the read asked for the permits, on the limiter's clock.
    #[getter]
    fn created_ns(&self) -> u64 {
        self.0.created_ns
    }

    fn __repr__(&self) -> String {
        format!(
            "InflightReadsHandle(permits={}, success={})",
            self.0.permits,
            if self.0.success { "True" } else { "False" }
        )
    }
}

fn non_negative(py: Python<'_>, name: &str, v: i64) -> PyResult<u64> {
    u64::try_from(v).map_err(|_| {
        raise(
            py,
            "InvalidArgumentError",
            format!("invalid {name}: must be >= 0, got {v}"),
        )
    })
}

impl PyInflightReadsLimiter {
    /// Calls back the queued reads that `settled` names, without the lock. A callback that raises
    /// is reported (``sys.unraisablehook``) and the others still run, as Pulsar logs and goes on.
    fn call_back(&self, py: Python<'_>, settled: Vec<(Ticket, Handle)>) -> PyResult<()> {
        let calls: Vec<_> = {
            let mut st = self.state.lock();
            settled
                .into_iter()
                .filter_map(|(t, h)| st.callbacks.remove(&t).map(|cb| (cb, h)))
                .collect()
        };
        for (cb, h) in calls {
            let Some(cb) = cb else { continue };
            if let Err(e) = cb.call1(py, (PyInflightReadsHandle(h),)) {
                e.write_unraisable(py, Some(cb.bind(py)));
            }
        }
        Ok(())
    }
}

#[pymethods]
impl PyInflightReadsLimiter {
    #[new]
    #[pyo3(signature = (max_reads_in_flight_bytes, acquire_queue_size = 50_000, acquire_timeout_ms = 60_000, clock = None))]
    fn new(
        py: Python<'_>,
        max_reads_in_flight_bytes: i64,
        acquire_queue_size: i64,
        acquire_timeout_ms: i64,
        clock: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        // Pulsar: any size <= 0 disables the limiter.
        let max = u64::try_from(max_reads_in_flight_bytes).unwrap_or(0);
        let queue = usize::try_from(non_negative(py, "acquire_queue_size", acquire_queue_size)?)
            .unwrap_or(usize::MAX);
        let timeout = non_negative(py, "acquire_timeout_ms", acquire_timeout_ms)?;
        Ok(PyInflightReadsLimiter {
            clock: clock_arg(clock)?,
            state: Mutex::new(State {
                limiter: InflightReadsLimiter::new(max, queue, timeout),
                callbacks: HashMap::new(),
            }),
        })
    }

    #[getter]
    fn disabled(&self) -> bool {
        self.state.lock().limiter.is_disabled()
    }

    #[getter]
    fn remaining_bytes(&self) -> u64 {
        self.state.lock().limiter.remaining_bytes()
    }

    /// Reads waiting for permits.
    #[getter]
    fn queued(&self) -> usize {
        self.state.lock().limiter.queued()
    }

    /// Asks for ``permits``: their handle if they are free (a read asking for more than the whole
    /// limit gets the whole limit once all of it is free), None if the read queues (``callback``
    /// is then called with its handle when permits come, or with a failed one when it times out),
    /// or a failed handle (``success`` False) if the queue is full.
    #[pyo3(signature = (permits, callback = None))]
    fn acquire(
        &self,
        py: Python<'_>,
        permits: i64,
        callback: Option<Py<PyAny>>,
    ) -> PyResult<Option<PyInflightReadsHandle>> {
        let permits = non_negative(py, "permits", permits)?;
        let now = self.clock.now_ns();
        let mut st = self.state.lock();
        Ok(match st.limiter.acquire(permits, now) {
            Acquire::Granted(h) | Acquire::Refused(h) => Some(PyInflightReadsHandle(h)),
            Acquire::Queued(ticket) => {
                st.callbacks.insert(ticket, callback);
                None
            }
        })
    }

    /// Gives a handle's permits back, then hands permits to the queued reads in order (calling
    /// their callbacks), failing those found timed out.
    fn release(&self, py: Python<'_>, handle: PyInflightReadsHandle) -> PyResult<()> {
        let now = self.clock.now_ns();
        let settled = self.state.lock().limiter.release(handle.0, now);
        self.call_back(py, settled)
    }

    /// Pulsar's scheduled timeout check: fails (calls back with a failed handle) the queued reads
    /// that have waited ``acquire_timeout_ms`` or longer; returns how many.
    fn check_timeouts(&self, py: Python<'_>) -> PyResult<usize> {
        let now = self.clock.now_ns();
        let settled = self.state.lock().limiter.check_timeouts(now);
        let n = settled.len();
        self.call_back(py, settled)?;
        Ok(n)
    }

    /// Counts: acquired, released, queued, timed_out, refused.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        counts_dict(py, self.state.lock().limiter.counts())
    }
}

pub(super) fn counts_dict<'py>(
    py: Python<'py>,
    c: crate::cache::inflight_reads::LimiterCounts,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("acquired", c.acquired)?;
    d.set_item("released", c.released)?;
    d.set_item("queued", c.queued)?;
    d.set_item("timed_out", c.timed_out)?;
    d.set_item("refused", c.refused)?;
    Ok(d)
}
