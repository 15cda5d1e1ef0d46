//! The workload generator from Python: its trace as a stream of Arrow record batches handed over
//! through the Arrow C stream interface (`__arrow_c_stream__`), so pyarrow reads them without a
//! copy, one batch at a time, while the simulation runs only as far as the batches taken need.

use super::args::{get_opt, Int};
use super::config::to_setting;
use super::errors::{raise, IntoPyResult};
use crate::lab::workload::{DetailValue, TraceBatches, TraceStream, WorkloadSpec};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_schema::ffi::FFI_ArrowSchema;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyCapsule, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// The spec from snake_case settings (see ``ledgercache.workload``); ``topic_details`` is a list
/// of mappings (snake_case keys), taken apart here and checked by the spec.
fn spec_of(py: Python<'_>, settings: &Bound<'_, PyDict>) -> PyResult<WorkloadSpec> {
    let mut spec = WorkloadSpec::default();
    for (k, v) in settings.iter() {
        let key: String = k.extract()?;
        if key == "topic_details" {
            let value = detail_of(py, "topic_details", &v, 0)?;
            spec.set_topic_details(&value).py_err(py)?;
            continue;
        }
        let value = to_setting(py, &key, &v)?;
        spec.set(&key, &value).py_err(py)?;
    }
    Ok(spec)
}

/// `topicDetails` nests three levels (topics, subscriptions, consumer rates): deeper is an error.
const MAX_DETAIL_DEPTH: usize = 5;

/// A ``topic_details`` value as a tree: lists and tuples, mappings with string keys, and
/// bool/int/float/str leaves; anything else (``None`` too) an ``InvalidArgumentError`` naming
/// where it is.
fn detail_of(
    py: Python<'_>,
    path: &str,
    v: &Bound<'_, PyAny>,
    depth: usize,
) -> PyResult<DetailValue> {
    let invalid = |reason: String| {
        raise(
            py,
            "InvalidArgumentError",
            format!("invalid spec: {path}: {reason}"),
        )
    };
    if let Ok(d) = v.cast::<PyDict>() {
        if depth >= MAX_DETAIL_DEPTH {
            return Err(invalid("nested too deeply".into()));
        }
        let mut entries = Vec::with_capacity(d.len());
        for (k, item) in d.iter() {
            let Ok(key) = k.extract::<String>() else {
                return Err(invalid(format!(
                    "keys must be strings, got {}",
                    k.get_type().name()?
                )));
            };
            let value = detail_of(py, &format!("{path}.{key}"), &item, depth + 1)?;
            entries.push((key, value));
        }
        return Ok(DetailValue::Map(entries));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        if depth >= MAX_DETAIL_DEPTH {
            return Err(invalid("nested too deeply".into()));
        }
        let mut items = Vec::with_capacity(v.len()?);
        for (i, item) in v.try_iter()?.enumerate() {
            items.push(detail_of(py, &format!("{path}[{i}]"), &item?, depth + 1)?);
        }
        return Ok(DetailValue::List(items));
    }
    if v.is_none() {
        return Err(invalid("has no value".into()));
    }
    if v.is_instance_of::<PyBool>()
        || v.is_instance_of::<PyInt>()
        || v.is_instance_of::<PyFloat>()
        || v.is_instance_of::<PyString>()
    {
        return Ok(DetailValue::Scalar(to_setting(py, path, v)?));
    }
    Err(invalid(format!(
        "expected a number, text, a list or a mapping, got {}",
        v.get_type().name()?
    )))
}

/// A workload's trace, not generated yet: ``pyarrow.RecordBatchReader.from_stream(obj)`` reads
/// it batch by batch (once).
#[pyclass(name = "WorkloadStream", module = "ledgercache._native", frozen)]
pub struct PyWorkloadStream(Mutex<Option<TraceBatches>>);

#[pymethods]
impl PyWorkloadStream {
    /// The Arrow C stream of the trace's batches; a second call raises ``ClosedError``.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema; // one schema; readers conform it (ledgercache.trace.conform)
        let batches = self.0.lock().take().ok_or_else(|| {
            raise(
                py,
                "ClosedError",
                "the workload stream was read already: a stream is read once (make another)".into(),
            )
        })?;
        let stream = FFI_ArrowArrayStream::new(Box::new(batches));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The Arrow C schema of the batches.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(crate::lab::workload::trace_schema().as_ref())
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("arrow export: {e}")))?;
        PyCapsule::new_with_value(py, schema, c"arrow_schema")
    }
}

// The default below is written out so Python's signature shows it; this keeps it the crate's.
const _: () = assert!(crate::lab::workload::DEFAULT_BATCH_ROWS as i64 == 65536);

/// A workload's trace as a stream of record batches of at most ``batch_rows`` rows: every
/// broker's events merged by time, or only ``broker``'s. A spec whose simulation is estimated to
/// need more than ``memory_budget`` bytes raises ``ResourceLimitError`` before anything is
/// allocated.
#[pyfunction]
#[pyo3(signature = (settings, seed, broker = None, batch_rows = Int::of(65536), memory_budget = Int::of(4294967296)))]
#[pyo3(
    text_signature = "(settings, seed, broker=None, batch_rows=65536, memory_budget=4294967296)"
)]
pub fn stream_workload(
    py: Python<'_>,
    settings: &Bound<'_, PyDict>,
    seed: Int,
    broker: Option<Int>,
    batch_rows: Int,
    memory_budget: Int,
) -> PyResult<PyWorkloadStream> {
    let seed: u64 = seed.get(py, "seed")?;
    let broker = get_opt::<u32>(py, broker, "broker")?;
    let batch_rows: i64 = batch_rows.get(py, "batch_rows")?;
    let memory_budget: u64 = memory_budget.get(py, "memory_budget")?;
    let spec = spec_of(py, settings)?;
    if batch_rows < 1 {
        return Err(raise(
            py,
            "InvalidArgumentError",
            format!("invalid batch_rows: must be >= 1, got {batch_rows}"),
        ));
    }
    // Setting up the simulation runs a little of it (the cursors opening at time 0).
    let stream = py
        .detach(|| TraceStream::checked(&spec, seed, broker, memory_budget))
        .py_err(py)?;
    let rows = usize::try_from(batch_rows).unwrap_or(usize::MAX);
    Ok(PyWorkloadStream(Mutex::new(Some(stream.batches(rows)))))
}

// The default above is written out so Python's signature shows it; this keeps it the crate's.
const _: () = assert!(crate::lab::workload::DEFAULT_MEMORY_BUDGET == 4294967296);

/// The check ``stream_workload`` makes before it allocates (``broker`` in range, the simulation
/// within ``memory_budget``), without setting up the simulation: for a caller that starts the
/// streams elsewhere (Spark tasks) and wants a spec that cannot fit refused first.
#[pyfunction]
#[pyo3(signature = (settings, broker = None, memory_budget = Int::of(4294967296)))]
#[pyo3(text_signature = "(settings, broker=None, memory_budget=4294967296)")]
pub fn check_workload(
    py: Python<'_>,
    settings: &Bound<'_, PyDict>,
    broker: Option<Int>,
    memory_budget: Int,
) -> PyResult<()> {
    let broker = get_opt::<u32>(py, broker, "broker")?;
    let memory_budget: u64 = memory_budget.get(py, "memory_budget")?;
    let spec = spec_of(py, settings)?;
    TraceStream::check(&spec, broker, memory_budget).py_err(py)
}

/// A rough size of a workload's trace before generating it: ``messages``, ``entries``,
/// ``events``; the rate simulated (``producer_rate``, ``requested_rate``, ``ingest_capacity``,
/// ``capped_by``: ``"bytes"``, ``"messages"`` or None); the simulation's memory
/// (``memory_bytes``, ``memory_growing_bytes``); ``simulated_seconds`` (warm-up and test) and
/// ``backlog_start_seconds`` (when backlog-first consumers start, or None).
#[pyfunction]
pub fn estimate_workload<'py>(
    py: Python<'py>,
    settings: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = spec_of(py, settings)?;
    let e = spec.estimate();
    let i = spec.ingest();
    let f = spec.footprint();
    let d = PyDict::new(py);
    d.set_item("messages", e.messages)?;
    d.set_item("entries", e.entries)?;
    d.set_item("events", e.events)?;
    d.set_item("producer_rate", i.rate)?;
    d.set_item("requested_rate", i.requested)?;
    d.set_item("ingest_capacity", i.capacity)?;
    d.set_item("capped_by", i.capped_by)?;
    d.set_item("memory_bytes", f.bytes)?;
    d.set_item("memory_growing_bytes", f.growing_bytes)?;
    d.set_item("simulated_seconds", spec.simulated_minutes() * 60.0)?;
    d.set_item(
        "nack_redelivery_delay_seconds",
        spec.nack_redelivery_delay_ms() as f64 / 1000.0,
    )?;
    d.set_item(
        "backlog_start_seconds",
        spec.backlog_start_us().map(|us| us / 1e6),
    )?;
    let limit = spec.backlog_max_wait_minutes * 60.0;
    let phases = spec.backlog_phases();
    d.set_item("backlog_built", phases.map(|(build, _)| build < limit))?;
    d.set_item(
        "backlog_wait_capped",
        phases.is_some_and(|(build, drain)| build + drain >= limit),
    )?;
    Ok(d)
}

/// The names the workload spec takes, as Rust declares them: ``settings`` (snake_case),
/// ``topic_detail`` and ``subscription_detail`` (``topicDetails``' keys) and ``shape`` (the
/// homogeneous shape settings ``topicDetails`` replaces).
#[pyfunction]
pub fn spec_keys(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use crate::lab::workload::{SHAPE_SETTINGS, SPEC_NAMES, SUBSCRIPTION_KEYS, TOPIC_KEYS};
    let out = PyDict::new(py);
    out.set_item("settings", SPEC_NAMES.to_vec())?;
    out.set_item("topic_detail", TOPIC_KEYS.to_vec())?;
    out.set_item("subscription_detail", SUBSCRIPTION_KEYS.to_vec())?;
    out.set_item("shape", SHAPE_SETTINGS.to_vec())?;
    Ok(out)
}
