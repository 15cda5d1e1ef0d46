//! The Arrow PyCapsule interface, inbound: what an object's `__arrow_c_array__()` returned (a schema
//! capsule and an array capsule) becomes Arrow data owned by Rust, without copying the buffers.

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_data::ArrayData;
use arrow_schema::ArrowError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// Imports the `(schema, array)` capsule pair `exported`; `fail` turns an import error into the
/// caller's exception.
pub(super) fn import_exported(
    exported: &Bound<'_, PyAny>,
    fail: impl FnOnce(ArrowError) -> PyErr,
) -> PyResult<ArrayData> {
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = exported.extract()?;
    let schema_ptr = schema
        .pointer_checked(Some(c"arrow_schema"))?
        .cast::<FFI_ArrowSchema>();
    let array_ptr = array
        .pointer_checked(Some(c"arrow_array"))?
        .cast::<FFI_ArrowArray>();
    // SAFETY: the capsules were checked by name, so they hold C data interface structs that the
    // producer filled in. The array struct is moved out and replaced by a released one, so its
    // capsule's destructor releases nothing and the imported buffers own the producer's release
    // callback; the schema is only borrowed and stays owned by its capsule, alive until the end of
    // this function.
    unsafe {
        let array = std::ptr::replace(array_ptr.as_ptr(), FFI_ArrowArray::empty());
        from_ffi(array, schema_ptr.as_ref())
    }
    .map_err(fail)
}
