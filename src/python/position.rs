use super::args::Int;
use crate::cache::position::Position;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// Position(ledger_id, entry_id): where an entry sits in a managed ledger.
///
/// Immutable, hashable, ordered by (ledger_id, entry_id).
#[pyclass(
    name = "Position",
    module = "ledgercache",
    frozen,
    eq,
    ord,
    hash,
    from_py_object
)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PyPosition(pub Position);

#[pymethods]
impl PyPosition {
    #[new]
    fn new(py: Python<'_>, ledger_id: Int, entry_id: Int) -> PyResult<Self> {
        Ok(PyPosition(Position::new(
            ledger_id.get(py, "ledger_id")?,
            entry_id.get(py, "entry_id")?,
        )))
    }

    #[getter]
    fn ledger_id(&self) -> i64 {
        self.0.ledger_id
    }

    #[getter]
    fn entry_id(&self) -> i64 {
        self.0.entry_id
    }

    fn __repr__(&self) -> String {
        format!("Position({}, {})", self.0.ledger_id, self.0.entry_id)
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __getnewargs__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, [self.0.ledger_id, self.0.entry_id])
    }
}

impl From<Position> for PyPosition {
    fn from(p: Position) -> Self {
        PyPosition(p)
    }
}
