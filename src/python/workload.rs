//! The workload generator from Python, and Arrow batches handed back through the Arrow C data
//! interface (`__arrow_c_array__`), so pyarrow takes them without a copy.

use super::config::to_setting;
use super::errors::IntoPyResult;
use crate::workload::{generate, generate_broker, WorkloadSpec};
use arrow_array::ffi::{to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, RecordBatch, StructArray};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};

/// A record batch made in Rust; ``pyarrow.record_batch(obj)`` imports it.
#[pyclass(name = "ArrowBatch", module = "ledgercache._native", frozen)]
pub struct PyArrowBatch(pub RecordBatch);

#[pymethods]
impl PyArrowBatch {
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema; // the batch has one schema; callers cast if they want another
        let data = StructArray::from(self.0.clone()).into_data();
        let (array, schema): (FFI_ArrowArray, FFI_ArrowSchema) = to_ffi(&data)
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("arrow export: {e}")))?;
        let schema = PyCapsule::new_with_value(py, schema, c"arrow_schema")?;
        let array = PyCapsule::new_with_value(py, array, c"arrow_array")?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.0.num_rows()
    }
}

/// Generates a workload's trace from snake_case settings (see ``ledgercache.workload``).
#[pyfunction]
#[pyo3(signature = (settings, seed, broker = None))]
pub fn generate_workload(
    py: Python<'_>,
    settings: &Bound<'_, PyDict>,
    seed: u64,
    broker: Option<u32>,
) -> PyResult<PyArrowBatch> {
    let mut spec = WorkloadSpec::default();
    for (k, v) in settings.iter() {
        let key: String = k.extract()?;
        let value = to_setting(py, &key, &v)?;
        spec.set(&key, &value).py_err(py)?;
    }
    if let Some(b) = broker {
        if b >= spec.brokers {
            return Err(super::errors::raise(
                py,
                "InvalidArgumentError",
                format!("invalid broker: {b} is not below brokers={}", spec.brokers),
            ));
        }
    }
    let batch = py.detach(|| {
        match broker {
            Some(b) => generate_broker(&spec, seed, b),
            None => generate(&spec, seed),
        }
        .to_record_batch()
    });
    Ok(PyArrowBatch(batch))
}
