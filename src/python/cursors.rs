use super::errors::raise;
use super::position::PyPosition;
use crate::broker::cursors::active::{ActiveCursorContainer, CursorId};
use crate::broker::cursors::heap::SlowestCursorHeap;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// `Ok` if the container knew the cursor, else `UnknownCursorError` naming it.
fn known(py: Python<'_>, name: &str, found: bool) -> PyResult<()> {
    if found {
        Ok(())
    } else {
        Err(unknown(py, name))
    }
}

fn unknown(py: Python<'_>, name: &str) -> PyErr {
    raise(py, "UnknownCursorError", format!("unknown cursor {name:?}"))
}

/// ActiveCursorContainer(): active cursors sorted by position, answering "how many cursors are
/// at or before this one" in O(log n) with a small constant (PIP-430's ActiveManagedCursorContainer,
/// with its defects fixed).
#[pyclass(name = "ActiveCursorContainer", module = "ledgercache", frozen)]
pub struct PyActiveCursorContainer(Mutex<ActiveCursorContainer<String>>);

#[pymethods]
impl PyActiveCursorContainer {
    #[new]
    fn new() -> Self {
        PyActiveCursorContainer(Mutex::new(ActiveCursorContainer::new()))
    }

    /// Registers cursor `name` at `position` (None: registered but not tracked); an existing name
    /// moves. Returns the cursor's handle.
    #[pyo3(signature = (name, position))]
    fn add(
        slf: &Bound<'_, Self>,
        name: Bound<'_, PyString>,
        position: Option<PyPosition>,
    ) -> PyResult<PyCursorHandle> {
        let id = slf
            .get()
            .0
            .lock()
            .add(name.to_str()?.to_owned(), position.map(|p| p.0));
        Ok(PyCursorHandle::new(slf, name, id))
    }

    /// The handle of cursor `name`: its calls skip the name lookup. Raises UnknownCursorError for an
    /// unknown name.
    fn cursor(slf: &Bound<'_, Self>, name: Bound<'_, PyString>) -> PyResult<PyCursorHandle> {
        let id = slf.get().0.lock().id_of(name.to_str()?);
        match id {
            Some(id) => Ok(PyCursorHandle::new(slf, name, id)),
            None => Err(unknown(slf.py(), name.to_str()?)),
        }
    }

    /// Moves cursor `name` (None untracks it). Raises UnknownCursorError for an unknown name.
    #[pyo3(signature = (name, position))]
    fn update(&self, py: Python<'_>, name: &str, position: Option<PyPosition>) -> PyResult<()> {
        let found = self.0.lock().update(name, position.map(|p| p.0));
        known(py, name, found)
    }

    /// Forgets cursor `name`. Raises UnknownCursorError for an unknown name.
    fn remove(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let found = self.0.lock().remove(name);
        known(py, name, found)
    }

    /// Tracked cursors at or before cursor `name`'s position, itself included; 0 if unknown or untracked.
    fn count_at_or_before(&self, name: &str) -> u32 {
        self.0.lock().count_at_or_before(name)
    }

    /// The lowest tracked position, or None.
    fn slowest_position(&self) -> Option<PyPosition> {
        self.0.lock().slowest_position().map(PyPosition)
    }

    /// The name of the slowest tracked cursor (one at ``slowest_position()``; among cursors tied
    /// there, any one), or None (Pulsar's ``getSlowestCursor``).
    fn slowest_cursor(&self) -> Option<String> {
        self.0.lock().slowest_cursor().map(|(k, _)| k.clone())
    }

    /// The position cursor `name` was last given, or None.
    fn position_of(&self, name: &str) -> Option<PyPosition> {
        self.0.lock().position_of(name).map(PyPosition)
    }

    fn __len__(&self) -> usize {
        self.0.lock().len()
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> bool {
        name.extract::<String>()
            .is_ok_and(|n| self.0.lock().contains(&n))
    }

    fn __repr__(&self) -> String {
        format!("ActiveCursorContainer(cursors={})", self.0.lock().len())
    }
}

/// A cursor of an ActiveCursorContainer, from `add` or `cursor(name)`: the name looked up once. Stale
/// once the cursor is removed (even if the name is added again, which makes a new cursor): then
/// `update` raises UnknownCursorError and `count_at_or_before` returns 0, as for an unknown name.
#[pyclass(name = "CursorHandle", module = "ledgercache", frozen)]
pub struct PyCursorHandle {
    container: Py<PyActiveCursorContainer>,
    name: Py<PyString>,
    id: CursorId,
}

impl PyCursorHandle {
    fn new(
        container: &Bound<'_, PyActiveCursorContainer>,
        name: Bound<'_, PyString>,
        id: CursorId,
    ) -> Self {
        PyCursorHandle {
            container: container.clone().unbind(),
            name: name.unbind(),
            id,
        }
    }

    fn cursors(&self) -> &Mutex<ActiveCursorContainer<String>> {
        &self.container.get().0
    }
}

#[pymethods]
impl PyCursorHandle {
    /// Moves the cursor (None untracks it). Raises UnknownCursorError if it was removed.
    #[pyo3(signature = (position))]
    fn update(&self, py: Python<'_>, position: Option<PyPosition>) -> PyResult<()> {
        if self
            .cursors()
            .lock()
            .update_by_id(self.id, position.map(|p| p.0))
        {
            Ok(())
        } else {
            Err(raise(
                py,
                "UnknownCursorError",
                format!(
                    "cursor {:?} was removed: its handle is stale",
                    self.name.bind(py).to_str()?
                ),
            ))
        }
    }

    /// Tracked cursors at or before this cursor's position, itself included; 0 if untracked or
    /// removed.
    fn count_at_or_before(&self) -> u32 {
        self.cursors().lock().count_by_id(self.id)
    }

    /// The cursor's name.
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        self.name.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("CursorHandle({})", self.name.bind(py).repr()?))
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

    /// The name of the cursor at the heap's top (Pulsar's ``getSlowestCursor``), or None.
    fn slowest_cursor(&self) -> Option<String> {
        self.0.lock().slowest_cursor().map(|(k, _)| k.clone())
    }

    fn __len__(&self) -> usize {
        self.0.lock().len()
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> bool {
        name.extract::<String>()
            .is_ok_and(|n| self.0.lock().contains(&n))
    }
}
