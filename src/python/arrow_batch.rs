//! Arrow across the boundary for `EntryCache.insert_batch` and `EntryCache.get_range_arrow`:
//! binary arrays come in through the Arrow C data interface (`__arrow_c_array__`, or
//! `__arrow_c_stream__` for chunked arrays) and their payloads are cached as slices of the imported
//! values buffer, without copying; ranges go out as a `pyarrow.RecordBatch`.

use super::arrow_import::import_exported;
use super::errors::raise;
use crate::cache::arrow_payload::{contiguous_run, slices_of};
use crate::cache::entry::{CachedEntry, PayloadGroup};
use crate::cache::manager::BatchEntry;
use crate::cache::payload::MAX_SLICE_LEN;
use crate::cache::read_count::ReadCount;
use arrow_array::ffi::to_ffi;
use arrow_array::{
    Array, ArrayRef, BinaryArray, Int64Array, LargeBinaryArray, RecordBatch, StructArray,
};
use arrow_buffer::{ArrowNativeType, Buffer, OffsetBuffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_schema::DataType;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};
use std::sync::Arc;

fn invalid(py: Python<'_>, name: &str, reason: impl std::fmt::Display) -> PyErr {
    raise(
        py,
        "InvalidArgumentError",
        format!("invalid {name}: {reason}"),
    )
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// Imports one array exported through `__arrow_c_array__`.
fn import_array(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<ArrayData> {
    let py = obj.py();
    let exported = obj.call_method0("__arrow_c_array__")?;
    import_exported(&exported, |e| {
        invalid(py, name, format!("cannot import the Arrow array: {e}"))
    })
}

/// The chunks of `obj`: an Arrow array (one chunk) or anything `pyarrow.chunked_array` accepts
/// through `__arrow_c_stream__` (a `pyarrow.ChunkedArray`, a polars Series, ...).
fn import_chunks(obj: &Bound<'_, PyAny>, name: &str, expected: &str) -> PyResult<Vec<ArrayData>> {
    let py = obj.py();
    if obj.hasattr("__arrow_c_array__")? {
        return Ok(vec![import_array(obj, name)?]);
    }
    if obj.hasattr("__arrow_c_stream__")? {
        let chunked = py
            .import("pyarrow")?
            .getattr("chunked_array")?
            .call1((obj,))
            .map_err(|e| invalid(py, name, format!("cannot import the Arrow stream: {e}")))?;
        return chunked
            .getattr("chunks")?
            .try_iter()?
            .map(|chunk| import_array(&chunk?, name))
            .collect();
    }
    Err(invalid(
        py,
        name,
        format!(
            "expected {expected} (an object with __arrow_c_array__ or __arrow_c_stream__), got {}",
            type_name(obj)
        ),
    ))
}

/// Index of the first null in `data`, if any.
fn first_null(data: &ArrayData) -> Option<usize> {
    let nulls = data.nulls().filter(|n| n.null_count() > 0)?;
    (0..data.len()).find(|&i| nulls.is_null(i))
}

/// The offsets of one chunk of a binary array (`len + 1` of them).
enum Offsets {
    Small(ScalarBuffer<i32>),
    Large(ScalarBuffer<i64>),
}

impl Offsets {
    /// Where element `i`'s bytes start and end in the values buffer.
    fn bounds(&self, i: usize) -> (usize, usize) {
        match self {
            Offsets::Small(o) => (o[i].as_usize(), o[i + 1].as_usize()),
            Offsets::Large(o) => (o[i].as_usize(), o[i + 1].as_usize()),
        }
    }
}

/// One chunk of `data`: its values buffer and where each element lies in it, checked.
struct Chunk {
    values: Buffer,
    offsets: Offsets,
    len: usize,
}

impl Chunk {
    /// `None` if the offsets are not `len + 1` non-decreasing offsets into the values buffer.
    fn new(data: &ArrayData, large: bool) -> Option<Self> {
        let (offsets, values) = (data.buffers().first()?, data.buffers().get(1)?.clone());
        let width = if large { 8 } else { 4 };
        let (start, len) = (data.offset(), data.len());
        // ScalarBuffer panics on these; a foreign producer could hand either over.
        let misaligned = offsets.as_ptr().align_offset(width) != 0;
        if misaligned || offsets.len() / width < start.checked_add(len)?.checked_add(1)? {
            return None;
        }
        let offsets = if large {
            Offsets::Large(ScalarBuffer::new(offsets.clone(), start, len + 1))
        } else {
            Offsets::Small(ScalarBuffer::new(offsets.clone(), start, len + 1))
        };
        let chunk = Chunk {
            values,
            offsets,
            len,
        };
        let in_bounds = (0..len).all(|i| {
            let (start, end) = chunk.offsets.bounds(i);
            start <= end && end <= chunk.values.len()
        });
        in_bounds.then_some(chunk)
    }
}

/// The entries of a batch, made one at a time as the cache takes them, so that no per-entry array
/// is allocated besides the cache's own bookkeeping.
pub(super) struct ArrowEntries {
    chunks: Vec<Chunk>,
    chunk: usize,
    /// Cuts the current chunk's payloads (made when the chunk's first entry is taken).
    group: Option<PayloadGroup>,
    in_chunk: usize,
    index: usize,
    len: usize,
    reads: ExpectedReads,
    sizes: Option<Vec<u32>>,
}

impl Iterator for ArrowEntries {
    type Item = BatchEntry;

    // Inlined into the insert loop: returned through memory, the entry's fields reload as one
    // wide load from narrower stores, which the CPU cannot forward (a stall per entry).
    #[inline]
    fn next(&mut self) -> Option<BatchEntry> {
        while self.in_chunk == self.chunks.get(self.chunk)?.len {
            self.chunk += 1;
            self.in_chunk = 0;
            self.group = None;
        }
        let chunk = &self.chunks[self.chunk];
        let (start, end) = chunk.offsets.bounds(self.in_chunk);
        let group = match &mut self.group {
            Some(g) => g,
            None => self.group.insert(
                slices_of(chunk.values.clone(), chunk.len).expect("one header per element fits"),
            ),
        };
        let i = self.index;
        self.in_chunk += 1;
        self.index += 1;
        let len = end - start;
        Some(BatchEntry {
            payload: group
                .slice(start, len)
                .expect("bounds checked in Chunk::new, one payload per element"),
            // Lengths were checked against u32 in `batch_entries`.
            size: self.sizes.as_ref().map_or(len as u32, |s| s[i]),
            read_count: self.reads.count(i),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.len - self.index;
        (left, Some(left))
    }
}

impl ExactSizeIterator for ArrowEntries {}

/// One integer per entry (`sizes`, `expected_reads`): an Arrow integer array (chunked or not), or
/// anything `pyarrow.array` turns into one (a list, a NumPy array, a range).
fn int_column(obj: &Bound<'_, PyAny>, name: &str, n: usize) -> PyResult<Vec<i64>> {
    let py = obj.py();
    let obj = if obj.hasattr("__arrow_c_array__")? || obj.hasattr("__arrow_c_stream__")? {
        obj.clone()
    } else {
        py.import("pyarrow")?
            .getattr("array")?
            .call1((obj, py.import("pyarrow")?.getattr("int64")?.call0()?))
            .map_err(|e| invalid(py, name, format!("expected integers, one per entry ({e})")))?
    };
    let mut out = Vec::with_capacity(n);
    for data in import_chunks(&obj, name, "an integer array")? {
        if let Some(i) = first_null(&data) {
            return Err(invalid(
                py,
                name,
                format!("null at index {}", out.len() + i),
            ));
        }
        let array = arrow_array::make_array(data);
        let values = widen(&array).ok_or_else(|| match array.data_type() {
            t if t.is_integer() => invalid(py, name, "an integer does not fit in 64 bits"),
            other => invalid(
                py,
                name,
                format!("expected an integer array, got Arrow type {other}"),
            ),
        })?;
        out.extend(values);
    }
    if out.len() != n {
        return Err(invalid(
            py,
            name,
            format!("has {} values for {n} entries", out.len()),
        ));
    }
    Ok(out)
}

/// The values of an integer array of any width as i64; `None` if it is not an integer array or a
/// value does not fit.
fn widen(array: &ArrayRef) -> Option<Vec<i64>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    macro_rules! each {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .values()
                .iter()
                .map(|&v| i64::try_from(v).ok())
                .collect()
        };
    }
    match array.data_type() {
        DataType::Int8 => each!(Int8Type),
        DataType::Int16 => each!(Int16Type),
        DataType::Int32 => each!(Int32Type),
        DataType::Int64 => each!(Int64Type),
        DataType::UInt8 => each!(UInt8Type),
        DataType::UInt16 => each!(UInt16Type),
        DataType::UInt32 => each!(UInt32Type),
        DataType::UInt64 => each!(UInt64Type),
        _ => None,
    }
}

/// The `expected_reads` argument as given: one count, or something with one count per entry.
#[derive(FromPyObject)]
pub(super) enum ReadsArg<'py> {
    Count(i64),
    Each(Bound<'py, PyAny>),
}

/// `expected_reads`: one count for every entry, or one per entry.
enum ExpectedReads {
    All(i32),
    Each(Vec<i64>),
}

impl ExpectedReads {
    fn from_arg(py: Python<'_>, arg: &ReadsArg<'_>, n: usize) -> PyResult<Self> {
        let arg = match arg {
            ReadsArg::Count(count) => {
                return Ok(ExpectedReads::All(reads_count(py, *count, None)?))
            }
            ReadsArg::Each(arg) => arg,
        };
        let each = int_column(arg, "expected_reads", n)?;
        for (i, &count) in each.iter().enumerate() {
            reads_count(py, count, Some(i))?;
        }
        Ok(ExpectedReads::Each(each))
    }

    fn count(&self, i: usize) -> ReadCount {
        match self {
            ExpectedReads::All(count) => ReadCount::expecting(*count),
            ExpectedReads::Each(each) => ReadCount::expecting(each[i] as i32),
        }
    }
}

fn reads_count(py: Python<'_>, count: i64, index: Option<usize>) -> PyResult<i32> {
    i32::try_from(count)
        .ok()
        .filter(|c| *c >= 0)
        .ok_or_else(|| {
            let at = index.map_or(String::new(), |i| format!(" at index {i}"));
            invalid(
                py,
                "expected_reads",
                format!("must be in [0, 2^31), got {count}{at}"),
            )
        })
}

/// The batch `insert_batch` caches: one entry per element of `data`, in order across chunks.
pub(super) fn batch_entries(
    data: &Bound<'_, PyAny>,
    expected_reads: &ReadsArg<'_>,
    sizes: Option<&Bound<'_, PyAny>>,
) -> PyResult<ArrowEntries> {
    let py = data.py();
    let mut chunks = Vec::new();
    let mut n = 0usize;
    for data in import_chunks(data, "data", "an Arrow binary array")? {
        if let Some(i) = first_null(&data) {
            return Err(invalid(
                py,
                "data",
                format!("null at index {}; entries cannot be null (drop them, or cache empty payloads instead)", n + i),
            ));
        }
        let large = match data.data_type() {
            DataType::Binary | DataType::Utf8 => false,
            DataType::LargeBinary | DataType::LargeUtf8 => true,
            other => {
                return Err(invalid(
                    py,
                    "data",
                    format!("expected an Arrow binary, large_binary, string or large_string array, got Arrow type {other}"),
                ))
            }
        };
        if data.is_empty() {
            // Producers may export an empty array without offsets.
            continue;
        }
        let chunk = Chunk::new(&data, large)
            .ok_or_else(|| invalid(py, "data", "malformed Arrow array: offsets out of bounds"))?;
        n += chunk.len;
        chunks.push(chunk);
    }
    // Only large_binary elements can be that long: a group cuts no longer payloads.
    let mut index = 0;
    for chunk in &chunks {
        let large = matches!(chunk.offsets, Offsets::Large(_));
        for i in (0..chunk.len).filter(|_| large) {
            let (start, end) = chunk.offsets.bounds(i);
            if end - start > MAX_SLICE_LEN {
                return Err(invalid(
                    py,
                    "data",
                    format!(
                        "{} bytes at index {} is more than an entry can hold",
                        end - start,
                        index + i
                    ),
                ));
            }
        }
        index += chunk.len;
    }
    let reads = ExpectedReads::from_arg(py, expected_reads, n)?;
    let sizes = match sizes {
        Some(sizes) => {
            let sizes = int_column(sizes, "sizes", n)?;
            let checked = sizes.iter().enumerate().map(|(i, &size)| {
                u32::try_from(size).map_err(|_| {
                    invalid(
                        py,
                        "sizes",
                        format!("must be in [0, 2^32), got {size} at index {i}"),
                    )
                })
            });
            Some(checked.collect::<PyResult<Vec<u32>>>()?)
        }
        None => None,
    };
    Ok(ArrowEntries {
        chunks,
        chunk: 0,
        group: None,
        in_chunk: 0,
        index: 0,
        len: n,
        reads,
        sizes,
    })
}

/// Reader copies as a record batch `ledger_id: int64, entry_id: int64, data: binary` (or
/// `large_binary` past 2 GiB). The data column shares the cached bytes when they lie back to back
/// in one Arrow buffer (entries of one `insert_batch`, read in order); otherwise it is one copy.
pub(super) fn entries_to_batch(
    entries: &[CachedEntry],
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let ledger_ids = Int64Array::from_iter_values(entries.iter().map(|e| e.position().ledger_id));
    let entry_ids = Int64Array::from_iter_values(entries.iter().map(|e| e.position().entry_id));
    let values = contiguous_run(entries.iter().map(CachedEntry::payload)).unwrap_or_else(|| {
        let mut all = Vec::with_capacity(entries.iter().map(|e| e.data().len()).sum());
        entries.iter().for_each(|e| all.extend_from_slice(e.data()));
        Buffer::from_vec(all)
    });
    let lengths = entries.iter().map(|e| e.data().len());
    let data: ArrayRef = if i32::try_from(values.len()).is_ok() {
        let offsets = OffsetBuffer::<i32>::from_lengths(lengths);
        Arc::new(BinaryArray::try_new(offsets, values, None)?)
    } else {
        let offsets = OffsetBuffer::<i64>::from_lengths(lengths);
        Arc::new(LargeBinaryArray::try_new(offsets, values, None)?)
    };
    RecordBatch::try_from_iter([
        ("ledger_id", Arc::new(ledger_ids) as ArrayRef),
        ("entry_id", Arc::new(entry_ids) as ArrayRef),
        ("data", data),
    ])
}

/// A record batch on its way to pyarrow through `__arrow_c_array__`, exported once.
#[pyclass(name = "_ArrowExport", module = "ledgercache._native", frozen)]
pub(super) struct ArrowExport(Mutex<Option<RecordBatch>>);

#[pymethods]
impl ArrowExport {
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let batch = self.0.lock().take().ok_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err("the batch was exported already")
        })?;
        let (array, schema) = to_ffi(&StructArray::from(batch).into_data())
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("arrow export: {e}")))?;
        let schema = PyCapsule::new_with_value(py, schema, c"arrow_schema")?;
        let array = PyCapsule::new_with_value(py, array, c"arrow_array")?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }
}

/// `batch` as a `pyarrow.RecordBatch`.
pub(super) fn to_pyarrow(py: Python<'_>, batch: RecordBatch) -> PyResult<Py<PyAny>> {
    let export = Py::new(py, ArrowExport(Mutex::new(Some(batch))))?;
    Ok(py
        .import("pyarrow")?
        .getattr("record_batch")?
        .call1((export,))?
        .unbind())
}
