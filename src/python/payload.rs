//! Payloads crossing the boundary: Python `bytes` are shared with the cache without copying, and
//! come back out as the same object.

use crate::cache::entry::{Payload, PayloadBuffer};
use crate::cache::prefetch::prefetch;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::any::Any;
use std::cell::Cell;

/// A Python `bytes` object used as a payload without copying. `bytes` are immutable and their
/// buffer lives as long as the object, which this holds.
pub struct PythonBytes {
    object: Py<PyBytes>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the pointer is into an immutable `bytes` object kept alive by `object`; reading it needs
// no GIL, and `Py` defers its decref when dropped without the GIL.
unsafe impl Send for PythonBytes {}
// SAFETY: as for `Send`: shared access only reads the immutable bytes.
unsafe impl Sync for PythonBytes {}

impl PayloadBuffer for PythonBytes {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: see the Send/Sync note above.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `bytes` are shared; other buffers (bytearray, memoryview, pyarrow.Buffer) are copied once into a
/// `bytes`, since their contents could change and their exporter needs the GIL to be released.
pub fn payload_arg(data: &Bound<'_, PyAny>) -> PyResult<Payload> {
    let py = data.py();
    let bytes = match data.cast::<PyBytes>() {
        Ok(b) => b.clone(),
        Err(_) => {
            // memoryview() accepts exactly the objects that export a buffer.
            let view = py.import("builtins")?.getattr("memoryview")?.call1((data,)).map_err(|_| {
                let type_name = data.get_type().name().map(|n| n.to_string()).unwrap_or_default();
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "data must be bytes-like (bytes, bytearray, memoryview, pyarrow.Buffer), not {type_name}"
                ))
            })?;
            view.call_method0("tobytes")?.cast_into::<PyBytes>()?
        }
    };
    Ok(shared_bytes(bytes))
}

/// A payload that shares a `bytes` object's buffer.
pub fn shared_bytes(bytes: Bound<'_, PyBytes>) -> Payload {
    let slice = bytes.as_bytes();
    if slice.is_empty() {
        return Payload::empty();
    }
    let (ptr, len) = (slice.as_ptr(), slice.len());
    Payload::new(PythonBytes {
        object: bytes.unbind(),
        ptr,
        len,
    })
}

/// Runs `evict` without the GIL, with a buffer for the external payloads it evicts, and drops
/// them afterwards holding the GIL ([`release_evicted`]): dropped inside `detach`, each `bytes`
/// would take a trip through PyO3's deferred-release pool (a global lock).
pub fn detached_releasing<T, F>(py: Python<'_>, evict: F) -> T
where
    F: Send + FnOnce(&mut Vec<Payload>) -> T,
    T: Send,
{
    // Taken, not borrowed: a release that runs Python code which evicts again on this thread
    // finds an empty buffer and grows its own.
    let mut released = RELEASED.try_with(Cell::take).unwrap_or_default();
    let out = py.detach(|| evict(&mut released));
    release_evicted(py, &mut released);
    if released.capacity() <= KEPT_RELEASED {
        // Gone at thread exit (a thread-local's destructor evicting): the buffer just goes.
        let _ = RELEASED.try_with(|kept| kept.set(released));
    }
    out
}

thread_local! {
    /// The buffer of [`detached_releasing`], empty between calls but with its capacity: a pass
    /// that evicts many entries would otherwise grow a fresh one by doubling every time, copying
    /// it and faulting in new pages (about 4 ns an evicted entry, 5% of a pass over a million
    /// `bytes`).
    static RELEASED: Cell<Vec<Payload>> = const { Cell::new(Vec::new()) };
}

/// The largest buffer kept for the next pass: 2^20 payloads, 8 MiB a thread.
const KEPT_RELEASED: usize = 1 << 20;

/// Drops payloads an eviction pass handed back, holding the GIL, so that each `bytes` is released
/// directly rather than through PyO3's deferred pool. The objects are cold by now, so the loop
/// fetches a payload's header, then the object it holds, a few payloads ahead of the drop. Drains
/// `released`, which keeps its capacity.
fn release_evicted(_py: Python<'_>, released: &mut Vec<Payload>) {
    const HEADER_AHEAD: usize = 16;
    const OBJECT_AHEAD: usize = 8;
    let mut payloads = released.drain(..);
    while let Some(payload) = payloads.next() {
        let after = payloads.as_slice();
        if let Some(h) = after.get(HEADER_AHEAD - 1).and_then(Payload::header_addr) {
            prefetch(h);
        }
        if let Some(b) = after
            .get(OBJECT_AHEAD - 1)
            .and_then(|p| p.buffer::<PythonBytes>())
        {
            prefetch(b.object.as_ptr() as *const u8);
        }
        drop(payload);
    }
}

pub fn payload_to_py(py: Python<'_>, payload: &Payload) -> Py<PyAny> {
    match payload.buffer::<PythonBytes>() {
        Some(b) => b.object.clone_ref(py).into_any(),
        None => PyBytes::new(py, payload.as_slice()).into_any().unbind(),
    }
}
