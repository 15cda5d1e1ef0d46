//! Hand-written traces for the lab's tests: rows, a record batch of them, a replay.
#![allow(
    dead_code,
    reason = "each test binary that includes `support` uses part of it"
)]

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use ledgercache::lab::replay::{replay, ReplayMetrics, TraceDecoder};
use ledgercache::{CacheConfig, SettingValue};
use std::sync::Arc;

/// (ts_ms, op, topic, cursor, ledger, entry, count, size)
pub type Row = (
    i64,
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<i64>,
    Option<i64>,
    i32,
    i32,
);

pub fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        (
            "ts_us",
            Arc::new(Int64Array::from_iter_values(
                rows.iter().map(|r| r.0 * 1000),
            )) as ArrayRef,
        ),
        (
            "broker",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "b1"))) as ArrayRef,
        ),
        (
            "topic",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))) as ArrayRef,
        ),
        (
            "op",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))) as ArrayRef,
        ),
        (
            "cursor",
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.3))) as ArrayRef,
        ),
        (
            "ledger_id",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.4))) as ArrayRef,
        ),
        (
            "entry_id",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.5))) as ArrayRef,
        ),
        (
            "count",
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.6))) as ArrayRef,
        ),
        (
            "size",
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.7))) as ArrayRef,
        ),
    ])
    .unwrap()
}

pub fn config(settings: &[(&str, SettingValue)]) -> CacheConfig {
    let mut c = CacheConfig::default();
    for (k, v) in settings {
        c.set(k, v.clone()).unwrap();
    }
    c
}

pub fn run(rows: &[Row], cfg: &CacheConfig) -> ReplayMetrics {
    let mut d = TraceDecoder::new();
    let mut events = Vec::new();
    d.decode(&batch(rows), &mut events).unwrap();
    replay(&events, &d.names, cfg).unwrap()
}

pub fn add(ts: i64, e: i64, size: i32) -> Row {
    (ts, "add", "t", None, Some(1), Some(e), 0, size)
}

pub fn open(ts: i64, c: &'static str, at: Option<i64>) -> Row {
    (ts, "open", "t", Some(c), at.map(|_| 1), at, 0, 0)
}

pub fn read(ts: i64, c: &'static str, n: i32) -> Row {
    (ts, "read", "t", Some(c), None, None, n, 0)
}

/// Like [`run`], with a `reason` column: `reasons` gives (row index, reason) for `redeliver` rows.
pub fn run_with_reasons(
    rows: &[Row],
    reasons: &[(usize, &str)],
    cfg: &CacheConfig,
) -> ReplayMetrics {
    let b = batch(rows);
    let column: Vec<Option<&str>> = (0..rows.len())
        .map(|i| reasons.iter().find(|(r, _)| *r == i).map(|(_, s)| *s))
        .collect();
    let schema = b.schema();
    let mut fields: Vec<(&str, ArrayRef)> = schema
        .fields()
        .iter()
        .zip(b.columns())
        .map(|(f, c)| (f.name().as_str(), c.clone()))
        .collect();
    fields.push(("reason", Arc::new(StringArray::from(column)) as ArrayRef));
    let b = RecordBatch::try_from_iter(fields).unwrap();
    let mut d = TraceDecoder::new();
    let mut events = Vec::new();
    d.decode(&b, &mut events).unwrap();
    replay(&events, &d.names, cfg).unwrap()
}

pub fn close(ts: i64, c: &'static str) -> Row {
    (ts, "close", "t", Some(c), None, None, 0, 0)
}

pub fn seek(ts: i64, c: &'static str, e: i64) -> Row {
    (ts, "seek", "t", Some(c), Some(1), Some(e), 0, 0)
}

pub fn redeliver(ts: i64, c: &'static str, e: i64) -> Row {
    (ts, "redeliver", "t", Some(c), Some(1), Some(e), 0, 0)
}

pub fn replay_of(ts: i64, c: &'static str, e: i64) -> Row {
    (ts, "replay", "t", Some(c), Some(1), Some(e), 0, 0)
}

/// A cumulative acknowledgement: the cursor's mark-delete position moves to entry `e`.
pub fn ack(ts: i64, c: &'static str, e: i64) -> Row {
    (ts, "ack", "t", Some(c), Some(1), Some(e), 0, 0)
}

/// An individual acknowledgement of `n` entries from entry `e`.
pub fn individual_ack(ts: i64, c: &'static str, e: i64, n: i32) -> Row {
    (ts, "individual_ack", "t", Some(c), Some(1), Some(e), n, 0)
}

/// The cursor reads again from its first unacknowledged entry.
pub fn rewind(ts: i64, c: &'static str) -> Row {
    (ts, "rewind", "t", Some(c), None, None, 0, 0)
}

/// The deletion of ledger 1 (the only ledger these rows add to).
pub fn delete_ledger(ts: i64) -> Row {
    (ts, "delete", "t", None, Some(1), Some(0), 0, 0)
}

/// A trace where Pulsar's cursor container counts one cursor too many for a storage read, which
/// keeps an entry cached that the exact count lets go: a later reader hits it with Pulsar's
/// container and misses it with the exact one. `padding` entries more are published first (to
/// make the trace span decoding slices).
pub fn tail_move_rows(padding: usize) -> Vec<Row> {
    let mut rows: Vec<Row> = (0..10 + padding as i64)
        .map(|e| add(1 + e.min(9), e, 10))
        .collect();
    // No cursor while publishing: nothing is cached. Five cursors at entry 5, opened in the
    // reverse of the order the container's map keeps their names in (a to e, by their hashes),
    // so that e is the tail of its list only if the names' hashes reach it; f at entry 0.
    for c in ["e", "d", "c", "b", "a"] {
        rows.push(open(20, c, Some(5)));
    }
    rows.push(open(20, "f", Some(0)));
    rows.extend([
        // f's storage read: the first query rebuilds the list.
        read(30, "f", 1),
        // e moves alone, and stays the tail.
        ack(31, "e", 7),
        // a's storage read: two moves wait among six cursors, so they are applied one by one;
        // e's is the tail shortcut. Five cursors are at or before a (e is past it); Pulsar says six.
        read(32, "a", 1),
        read(33, "b", 1),
        read(34, "c", 1),
        read(35, "d", 1),
        read(36, "f", 5),
        // Four seconds on, entry 5 is cached only if it still expects a read.
        open(4_000, "g", Some(5)),
        read(4_001, "g", 1),
    ]);
    rows
}
