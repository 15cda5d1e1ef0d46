use super::errors::raise;
use super::position::PyPosition;
use crate::cursors::active::{ActiveCursorContainer, CursorId};
use crate::cursors::heap::SlowestCursorHeap;
use parking_lot::Mutex;
use pyo3::prelude::*;

/// `Ok` if the container knew the cursor, else `UnknownCursorError` naming it.
fn known(py: Python<'_>, name: &str, found: bool) -> PyResult<()> {
    if found {
        Ok(())
    } else {
        Err(raise(
            py,
            "UnknownCursorError",
            format!("unknown cursor {name:?}"),
        ))
    }
}

/// The container with names as keys, and the last name looked up: a caller that moves a cursor and
/// then asks for its count names it twice in a row, and the second lookup then costs a comparison
/// instead of a hash-map probe (two cache misses among many cursors).
#[derive(Default)]
struct Named {
    container: ActiveCursorContainer<String>,
    last: Option<(String, CursorId)>,
}

impl Named {
    /// The handle of cursor `name`, if registered.
    fn id(&mut self, name: &str) -> Option<CursorId> {
        if let Some((last, id)) = &self.last {
            if last == name {
                return Some(*id);
            }
        }
        let id = self.container.id_of(name)?;
        match &mut self.last {
            // Reuse the string's allocation.
            Some((last, last_id)) => {
                last.clear();
                last.push_str(name);
                *last_id = id;
            }
            None => self.last = Some((name.to_string(), id)),
        }
        Some(id)
    }
}

/// ActiveCursorContainer(): active cursors sorted by position, answering "how many cursors are
/// at or before this one" in O(log n) with a small constant (PIP-430's ActiveManagedCursorContainer,
/// with its defects fixed).
#[pyclass(name = "ActiveCursorContainer", module = "ledgercache", frozen)]
pub struct PyActiveCursorContainer(Mutex<Named>);

#[pymethods]
impl PyActiveCursorContainer {
    #[new]
    fn new() -> Self {
        PyActiveCursorContainer(Mutex::new(Named::default()))
    }

    /// Registers cursor `name` at `position` (None: registered but not tracked); an existing name moves.
    #[pyo3(signature = (name, position))]
    fn add(&self, name: String, position: Option<PyPosition>) {
        self.0.lock().container.add(name, position.map(|p| p.0));
    }

    /// Moves cursor `name` (None untracks it). Raises UnknownCursorError for an unknown name.
    #[pyo3(signature = (name, position))]
    fn update(&self, py: Python<'_>, name: &str, position: Option<PyPosition>) -> PyResult<()> {
        let mut named = self.0.lock();
        let found = match named.id(name) {
            Some(id) => named.container.update_by_id(id, position.map(|p| p.0)),
            None => false,
        };
        known(py, name, found)
    }

    /// Forgets cursor `name`. Raises UnknownCursorError for an unknown name.
    fn remove(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let mut named = self.0.lock();
        // A removed cursor's handle goes stale; the memo must not hand it out.
        named.last = None;
        let found = named.container.remove(name);
        known(py, name, found)
    }

    /// Tracked cursors at or before cursor `name`'s position, itself included; 0 if unknown or untracked.
    fn count_at_or_before(&self, name: &str) -> u32 {
        let mut named = self.0.lock();
        match named.id(name) {
            Some(id) => named.container.count_by_id(id),
            None => 0,
        }
    }

    /// The lowest tracked position, or None.
    fn slowest_position(&self) -> Option<PyPosition> {
        self.0.lock().container.slowest_position().map(PyPosition)
    }

    /// The position cursor `name` was last given, or None.
    fn position_of(&self, name: &str) -> Option<PyPosition> {
        self.0.lock().container.position_of(name).map(PyPosition)
    }

    fn __len__(&self) -> usize {
        self.0.lock().container.len()
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> bool {
        name.extract::<String>()
            .is_ok_and(|n| self.0.lock().container.contains(&n))
    }

    fn __repr__(&self) -> String {
        format!(
            "ActiveCursorContainer(cursors={})",
            self.0.lock().container.len()
        )
    }
}

/// SlowestCursorHeap(): the pre-PIP-430 container: a min-heap that tracks the slowest cursor.
#[pyclass(name = "SlowestCursorHeap", module = "ledgercache", frozen)]
pub struct PySlowestCursorHeap(Mutex<SlowestCursorHeap<String>>);

#[pymethods]
impl PySlowestCursorHeap {
    #[new]
    fn new() -> Self {
        PySlowestCursorHeap(Mutex::new(SlowestCursorHeap::new()))
    }

    #[pyo3(signature = (name, position))]
    fn add(&self, name: String, position: Option<PyPosition>) {
        self.0.lock().add(name, position.map(|p| p.0));
    }

    #[pyo3(signature = (name, position))]
    fn update(&self, py: Python<'_>, name: String, position: Option<PyPosition>) -> PyResult<()> {
        let found = self.0.lock().update(&name, position.map(|p| p.0));
        known(py, &name, found)
    }

    fn remove(&self, py: Python<'_>, name: String) -> PyResult<()> {
        let found = self.0.lock().remove(&name);
        known(py, &name, found)
    }

    fn slowest_position(&self) -> Option<PyPosition> {
        self.0.lock().slowest_position().map(PyPosition)
    }

    fn __len__(&self) -> usize {
        self.0.lock().len()
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> bool {
        name.extract::<String>()
            .is_ok_and(|n| self.0.lock().contains(&n))
    }
}
