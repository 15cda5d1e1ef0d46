//! The trace format: one row per event a broker sees, decoded from Arrow record batches.
//!
//! Columns: `ts_us` int64 (non-decreasing), `broker` string, `topic` string, `op` string, `cursor`
//! string (null where none), `ledger_id` int64, `entry_id` int64, `count` int32 (entries for `read`),
//! `size` int32 (bytes for `add`); optionally `reason` string (why a `redeliver` happened, see
//! [`REASON_COLUMN`]). A string column may also be dictionary-encoded with int32 keys (as the
//! workload generator makes them). Every error names the column and the row (counted from 0 over
//! the whole trace), so a bad row never silently shifts results.

use super::plain_keys::PlainKeys;
use crate::broker::cursors::java_hash_map::subscription_cursor_hash;
use crate::broker::read_flow::RedeliveryReason;
use crate::cache::fast_hash::FastMap;
use crate::cache::position::Position;
use crate::error::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::ArrowPrimitiveType;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, DictionaryArray, Int32Array, PrimitiveArray, RecordBatch, StringArray};
use arrow_buffer::{ArrowNativeType, NullBuffer};
use arrow_schema::DataType;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// A cursor connects (starts being active) at `position`, or at the end when it has none.
    Open,
    /// A cursor disconnects (stops being active).
    Close,
    /// An entry of `size` bytes is published at `position`.
    Add,
    /// A cursor reads `count` entries from its read position.
    Read,
    /// A cursor reads the redelivered entry at `position`.
    Replay,
    /// The entry at `position` is queued for redelivery to a cursor.
    Redeliver,
    /// A cursor acknowledges everything up to `position`.
    Ack,
    /// A reset: the cursor's read position moves to `position`, its mark-delete position to the
    /// entry before it.
    Seek,
    /// The ledger `position.ledger_id` is deleted.
    Delete,
    /// A cursor acknowledges `count` entries from `position` (null or 0: one), each on its own.
    IndividualAck,
    /// A cursor reads again from its first unacknowledged entry (entries acknowledged on their own
    /// stay acknowledged).
    Rewind,
    /// The broker closes the topic (a restart, a bundle unload): its cached entries and cursors go.
    Unload,
    /// The broker opens the topic's managed ledger and finds `count` entries of `size` bytes from
    /// `position` in storage (null position: nothing there).
    Load,
}

impl Op {
    pub const NAMES: [&'static str; 13] = [
        "open",
        "close",
        "add",
        "read",
        "replay",
        "redeliver",
        "ack",
        "seek",
        "delete",
        "individual_ack",
        "rewind",
        "unload",
        "load",
    ];

    /// Every op, in declaration order (`Op::ALL[op as usize] == op`).
    pub const ALL: [Op; 13] = [
        Op::Open,
        Op::Close,
        Op::Add,
        Op::Read,
        Op::Replay,
        Op::Redeliver,
        Op::Ack,
        Op::Seek,
        Op::Delete,
        Op::IndividualAck,
        Op::Rewind,
        Op::Unload,
        Op::Load,
    ];

    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "open" => Op::Open,
            "close" => Op::Close,
            "add" => Op::Add,
            "read" => Op::Read,
            "replay" => Op::Replay,
            "redeliver" => Op::Redeliver,
            "ack" => Op::Ack,
            "seek" => Op::Seek,
            "delete" => Op::Delete,
            "individual_ack" => Op::IndividualAck,
            "rewind" => Op::Rewind,
            "unload" => Op::Unload,
            "load" => Op::Load,
            _ => return None,
        })
    }

    /// The op's name in a trace.
    pub fn name(self) -> &'static str {
        Op::NAMES[self as usize]
    }

    fn needs_cursor(self) -> bool {
        !matches!(self, Op::Add | Op::Delete | Op::Unload | Op::Load)
    }
}

pub const NO_CURSOR: u32 = u32::MAX;

/// Optional string column: why a `redeliver` row's position went back to the replay queue
/// (`hold-back`, `nack`, `overflow`; null: not said).
pub const REASON_COLUMN: &str = "reason";

/// Optional int64 column with each row's number in the original trace.
pub const ROW_COLUMN: &str = "__row";

/// One decoded event. Topics and cursors are interned: ids index [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub row: u64,
    /// Index into [`TraceDecoder::brokers`].
    pub broker: u32,
    pub ts_us: i64,
    pub op: Op,
    pub topic: u32,
    pub cursor: u32,
    /// `None` where the row has no position (an `open` at the end, `read`, `close`).
    pub position: Option<Position>,
    pub count: u32,
    pub size: u32,
    /// Why a `redeliver` happened (`Unspecified` for other ops and traces without the column).
    pub reason: RedeliveryReason,
}

/// Interned topic and cursor names.
#[derive(Debug, Default, Clone)]
pub struct Names {
    pub topics: Vec<String>,
    topic_ids: FastMap<String, u32>,
    pub cursors: Vec<(u32, String)>,
    /// By cursor id: the `String.hashCode` of the name Pulsar gives the subscription's cursor
    /// (what orders Pulsar's cursor container, see [`crate::broker::cursors::pulsar_list`]).
    pub cursor_hashes: Vec<i32>,
    /// Per topic: cursor name -> id (nested so a lookup borrows the name instead of allocating).
    cursor_ids: Vec<FastMap<String, u32>>,
}

impl Names {
    fn topic(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.topic_ids.get(name) {
            return id;
        }
        let id = self.topics.len() as u32;
        self.topics.push(name.to_string());
        self.topic_ids.insert(name.to_string(), id);
        self.cursor_ids.push(FastMap::default());
        id
    }

    fn cursor(&mut self, topic: u32, name: &str) -> u32 {
        let by_name = &mut self.cursor_ids[topic as usize];
        if let Some(&id) = by_name.get(name) {
            return id;
        }
        let id = self.cursors.len() as u32;
        self.cursors.push((topic, name.to_string()));
        self.cursor_hashes.push(subscription_cursor_hash(name));
        by_name.insert(name.to_string(), id);
        id
    }
}

/// A primitive column as its values and its validity, read per row without a call (the decode
/// loop is too large for the compiler to inline arrow's accessors into it).
struct Column<'a, T> {
    values: &'a [T],
    /// `None` when no row is null.
    nulls: Option<&'a NullBuffer>,
}

impl<'a, T: ArrowNativeType> Column<'a, T> {
    fn of<P: ArrowPrimitiveType<Native = T>>(a: &'a PrimitiveArray<P>) -> Self {
        Column {
            values: a.values().as_ref(),
            nulls: a.nulls().filter(|n| n.null_count() > 0),
        }
    }

    #[inline(always)]
    fn is_null(&self, i: usize) -> bool {
        self.nulls.is_some_and(|n| n.is_null(i))
    }

    #[inline(always)]
    fn value(&self, i: usize) -> T {
        self.values[i]
    }

    #[inline(always)]
    fn get(&self, i: usize) -> Option<T> {
        (!self.is_null(i)).then(|| self.values[i])
    }
}

/// The key (or id) of a null row in [`Strings::keys`] and [`Strings::ids`]. No column has this many
/// distinct values: a dictionary's keys are non-negative i32s, and a plain column's values share at
/// most 2^31 bytes. Ids count the brokers and topics of the whole trace, which stay far below.
const NULL_KEY: u32 = u32::MAX;

/// A string column: plain, or dictionary-encoded with int32 keys.
#[derive(Clone, Copy)]
enum Strings<'a> {
    Plain(&'a StringArray),
    Dictionary(&'a Int32Array, &'a StringArray),
}

impl<'a> Strings<'a> {
    fn of(c: &'a dyn Array, column: &str) -> Result<Self> {
        match c.data_type() {
            DataType::Utf8 => Ok(Strings::Plain(c.as_string::<i32>())),
            DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8 => {
                let d: &DictionaryArray<Int32Type> = c.as_dictionary();
                let values = d.values().as_string::<i32>();
                // As u32, a negative key is 2^31 or more: at or past `limit` either way (and no
                // non-negative key is out of range of 2^31 values or more).
                let limit = values.len().min(1 << 31) as u32;
                let out_of_range = |k: i32| k as u32 >= limit;
                let keys = d.keys();
                // Every key, null rows' too, is checked first in one branch-free pass. A null row's
                // key may be anything, so only when that pass finds one out of range are the valid
                // rows' keys looked at one by one, for the one to report.
                let any_out = keys
                    .values()
                    .iter()
                    .fold(false, |out, &k| out | out_of_range(k));
                let bad = if any_out {
                    keys.iter().flatten().find(|&k| out_of_range(k))
                } else {
                    None
                };
                if let Some(k) = bad {
                    return Err(column_error(
                        column,
                        format!("dictionary key {k} is not below {}", values.len()),
                    ));
                }
                Ok(Strings::Dictionary(d.keys(), values))
            }
            t => Err(column_error(
                column,
                format!("must be string (or dictionary<int32, string>), is {t}"),
            )),
        }
    }

    /// Whether row `i` is null (for the rows the decoder looks at one by one).
    fn is_null(&self, i: usize) -> bool {
        match self {
            Strings::Plain(a) => a.is_null(i),
            Strings::Dictionary(k, v) => k.is_null(i) || v.is_null(k.value(i) as usize),
        }
    }

    fn value(&self, i: usize) -> &'a str {
        match self {
            Strings::Plain(a) => a.value(i),
            Strings::Dictionary(k, v) => v.value(k.value(i) as usize),
        }
    }

    /// Every row's id, in `out`: `decode(row)` gives the id of a value on the first row it
    /// appears on in the batch (of a dictionary's key: a value the dictionary holds twice is
    /// decoded once per key, to the same id), and its other rows repeat it; [`NULL_KEY`] for a
    /// null row. A column at a time, so that the row loop reads an id per column instead of
    /// comparing strings among everything else it keeps in registers.
    fn ids(&self, out: &mut Vec<u32>, decode: impl FnMut(usize) -> u32) {
        match *self {
            Strings::Plain(a) => PlainKeys::new().map(a, NULL_KEY, out, decode),
            Strings::Dictionary(_, v) => {
                self.keys(out);
                resolve(out, Memo(vec![Memo::UNSET; v.len()]), decode);
            }
        }
    }

    /// Every row's key, in `out` (cleared first): equal values of one batch have equal keys (a
    /// dictionary's key, checked to index the values; a plain value's number in order of first
    /// appearance); [`NULL_KEY`] for a null row.
    fn keys(&self, out: &mut Vec<u32>) {
        out.clear();
        match *self {
            Strings::Plain(a) => {
                let mut distinct = 0;
                PlainKeys::new().map(a, NULL_KEY, out, |_| {
                    distinct += 1;
                    distinct - 1
                })
            }
            Strings::Dictionary(k, v) => {
                // Keys were checked to index the values: non-negative, so they fit a u32.
                fn some(n: Option<&NullBuffer>) -> Option<&NullBuffer> {
                    n.filter(|n| n.null_count() > 0)
                }
                match (some(k.nulls()), some(v.nulls())) {
                    (None, None) => out.extend(k.values().iter().map(|&key| key as u32)),
                    // Null rows come in runs (a cursor column is null on every add, a reason
                    // column on all but redeliveries): filled a run of valid rows at a time.
                    (Some(knulls), None) => {
                        out.resize(k.len(), NULL_KEY);
                        let keys = k.values();
                        for (start, end) in knulls.valid_slices() {
                            for (o, &key) in out[start..end].iter_mut().zip(&keys[start..end]) {
                                *o = key as u32;
                            }
                        }
                    }
                    (knulls, vnulls) => {
                        out.extend(k.values().iter().enumerate().map(|(i, &key)| {
                            let is_null = knulls.is_some_and(|n| n.is_null(i))
                                || vnulls.is_some_and(|n| n.is_null(key as usize));
                            if is_null {
                                NULL_KEY
                            } else {
                                key as u32
                            }
                        }))
                    }
                }
            }
        }
    }
}

/// An op name that is none of [`Op::NAMES`] (its rows fail with the name).
const UNKNOWN_OP: u32 = Op::ALL.len() as u32;

/// Turns a column's keys into the ids they decode to, in place: `decode(row)` gives the id of the
/// value first seen at `row`, and its other rows take it from the memo. Null rows keep
/// [`NULL_KEY`]. Rows come in runs, so the previous row's key is compared first.
fn resolve(keys: &mut [u32], mut memo: Memo, mut decode: impl FnMut(usize) -> u32) {
    let mut previous = (NULL_KEY, NULL_KEY);
    for (i, k) in keys.iter_mut().enumerate() {
        let key = *k;
        if key == NULL_KEY {
            continue;
        }
        if key != previous.0 {
            let id = match memo.get(key) {
                Some(id) => id,
                None => {
                    let id = decode(i);
                    memo.set(key, id);
                    id
                }
            };
            previous = (key, id);
        }
        *k = previous.1;
    }
}

/// [`resolve`] for the cursor column, whose names repeat across topics: a cursor's id is memoized
/// by (topic id, key). A null cursor becomes [`NO_CURSOR`]; so does a row without a topic (it
/// fails on its topic).
fn resolve_cursors(keys: &mut [u32], topics: &[u32], mut decode: impl FnMut(usize, u32) -> u32) {
    let mut memo: FastMap<(u32, u32), u32> = FastMap::default();
    let mut previous = ((NULL_KEY, NULL_KEY), NO_CURSOR);
    for (i, (k, &topic)) in keys.iter_mut().zip(topics).enumerate() {
        if *k == NULL_KEY || topic == NULL_KEY {
            *k = NO_CURSOR;
            continue;
        }
        let memo_key = (topic, *k);
        if memo_key != previous.0 {
            let id = *memo.entry(memo_key).or_insert_with(|| decode(i, topic));
            previous = (memo_key, id);
        }
        *k = previous.1;
    }
}

/// Per batch and dictionary column, a slot per dictionary value: the id its key decoded to,
/// filled on its first row (so ids are still given in order of first appearance), so that the
/// other rows look their id up by key instead of hashing and comparing the name.
struct Memo(Vec<u32>);

impl Memo {
    const UNSET: u32 = u32::MAX;

    fn get(&self, key: u32) -> Option<u32> {
        self.0
            .get(key as usize)
            .copied()
            .filter(|&id| id != Self::UNSET)
    }

    fn set(&mut self, key: u32, id: u32) {
        if let Some(slot) = self.0.get_mut(key as usize) {
            *slot = id;
        }
    }
}

/// Decodes batches in order, checking types and time order, and interning names.
#[derive(Debug, Default)]
pub struct TraceDecoder {
    pub names: Names,
    rows: u64,
    /// Brokers in order of first appearance, and each one's latest timestamp.
    brokers: Vec<(String, i64)>,
    broker_ids: FastMap<String, u32>,
    /// Per batch, the keys of the broker, topic, op and cursor columns, then the ids they decode
    /// to (kept to reuse the memory).
    keys: [Vec<u32>; 4],
}

fn column_error(column: &str, reason: impl std::fmt::Display) -> Error {
    Error::invalid("trace", format!("column {column:?}: {reason}"))
}

fn row_error(row: u64, column: &str, reason: impl std::fmt::Display) -> Error {
    Error::invalid("trace", format!("row {row}, column {column:?}: {reason}"))
}

/// A batch's columns, checked as whole columns.
struct Columns<'b> {
    ts: PrimitiveArray<Int64Type>,
    broker: Strings<'b>,
    topic: Strings<'b>,
    op: Strings<'b>,
    cursor: Strings<'b>,
    ledger: PrimitiveArray<Int64Type>,
    entry: PrimitiveArray<Int64Type>,
    count: PrimitiveArray<Int32Type>,
    size: PrimitiveArray<Int32Type>,
    row_numbers: Option<PrimitiveArray<Int64Type>>,
    reasons: Option<Strings<'b>>,
}

/// The columns of `batch`, in the order [`TraceDecoder::decode`] checks them.
fn columns(batch: &RecordBatch) -> Result<Columns<'_>> {
    let col = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or_else(|| column_error(name, "is missing"))
    };
    let int64 = |name: &str| {
        let c = col(name)?;
        match c.data_type() {
            DataType::Int64 => Ok(c.as_primitive::<Int64Type>().clone()),
            t => Err(column_error(name, format!("must be int64, is {t}"))),
        }
    };
    let int32 = |name: &str| {
        let c = col(name)?;
        match c.data_type() {
            DataType::Int32 => Ok(c.as_primitive::<Int32Type>().clone()),
            t => Err(column_error(name, format!("must be int32, is {t}"))),
        }
    };
    let string = |name: &'static str| Strings::of(col(name)?, name);
    let (ts, broker, topic, op, cursor) = (
        int64("ts_us")?,
        string("broker")?,
        string("topic")?,
        string("op")?,
        string("cursor")?,
    );
    let (ledger, entry, count, size) = (
        int64("ledger_id")?,
        int64("entry_id")?,
        int32("count")?,
        int32("size")?,
    );
    // Row numbers of the whole trace when a caller split it (by broker) before feeding.
    let row_numbers = match batch.column_by_name(ROW_COLUMN) {
        Some(_) => Some(int64(ROW_COLUMN)?),
        None => None,
    };
    // Optional: why a `redeliver` happened (traces written before it existed stay valid).
    let reasons = match batch.column_by_name(REASON_COLUMN) {
        Some(_) => Some(string(REASON_COLUMN)?),
        None => None,
    };
    Ok(Columns {
        ts,
        broker,
        topic,
        op,
        cursor,
        ledger,
        entry,
        count,
        size,
        row_numbers,
        reasons,
    })
}

/// A `load` row's checks: a ledger needs its first entry; the entries it names, `entry_id` to
/// `entry_id + count`, are ids of 0..2^63-1 (checked arithmetic: the engine registers them as one
/// run, whatever their number); count and size are not negative.
fn check_load(
    row: u64,
    position: Option<Position>,
    entry_null: bool,
    count: i32,
    size: i32,
) -> Result<()> {
    if count < 0 {
        return Err(row_error(
            row,
            "count",
            format!("a load's entries must be >= 0, got {count}"),
        ));
    }
    if size < 0 {
        return Err(row_error(
            row,
            "size",
            format!("a load's mean entry size must be >= 0, got {size}"),
        ));
    }
    let Some(p) = position else {
        return Ok(());
    };
    if entry_null {
        return Err(row_error(
            row,
            "entry_id",
            "is null, but a \"load\" of a ledger needs its first entry (null ledger_id: the topic \
             was opened with nothing in storage)",
        ));
    }
    let fits = p.entry_id >= 0 && p.entry_id.checked_add(i64::from(count)).is_some();
    if !fits {
        return Err(row_error(
            row,
            "entry_id",
            format!(
                "a load's entries {} + {count} must be ids in 0..={}",
                p.entry_id,
                i64::MAX - 1
            ),
        ));
    }
    Ok(())
}

impl TraceDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The brokers seen so far, in order of first appearance (an event's `broker` indexes this).
    pub fn brokers(&self) -> impl Iterator<Item = &str> {
        self.brokers.iter().map(|(b, _)| b.as_str())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The errors a batch has as whole columns (a column missing or of the wrong type, a
    /// dictionary key out of range), without looking at its rows: [`TraceDecoder::decode`] finds
    /// these before any row's, so a caller decoding the batch a slice at a time checks them first
    /// to report what decoding it whole would.
    pub fn check_columns(batch: &RecordBatch) -> Result<()> {
        columns(batch).map(drop)
    }

    /// Decodes one batch, appending its events to `out`.
    pub fn decode(&mut self, batch: &RecordBatch, out: &mut Vec<Event>) -> Result<()> {
        let c = columns(batch)?;
        let (ts, ledger, entry, count, size) = (
            Column::of(&c.ts),
            Column::of(&c.ledger),
            Column::of(&c.entry),
            Column::of(&c.count),
            Column::of(&c.size),
        );
        let row_numbers = c.row_numbers.as_ref().map(Column::of);
        let (broker, topic, op, cursor, reasons) = (c.broker, c.topic, c.op, c.cursor, c.reasons);
        out.reserve(batch.num_rows());
        // Each string column's keys become the ids they decode to, a column at a time, so that the
        // row loop below reads an id per column instead of holding four memos in its registers.
        let [brokers, topics, ops, cursors] = &mut self.keys;
        let (broker_ids, brokers_seen) = (&mut self.broker_ids, &mut self.brokers);
        broker.ids(brokers, |i| {
            let b = broker.value(i);
            if let Some(&id) = broker_ids.get(b) {
                return id;
            }
            brokers_seen.push((b.to_string(), i64::MIN));
            let id = brokers_seen.len() as u32 - 1;
            broker_ids.insert(b.to_string(), id);
            id
        });
        op.ids(ops, |i| {
            Op::parse(op.value(i)).map_or(UNKNOWN_OP, |k| k as u32)
        });
        let names = &mut self.names;
        topic.ids(topics, |i| names.topic(topic.value(i)));
        cursor.keys(cursors);
        resolve_cursors(cursors, topics, |i, topic_id| {
            names.cursor(topic_id, cursor.value(i))
        });
        let (brokers, topics, ops, cursors) = (&brokers[..], &topics[..], &ops[..], &cursors[..]);
        for i in 0..batch.num_rows() {
            let row = match &row_numbers {
                Some(r) => r.value(i) as u64,
                None => self.rows + i as u64,
            };
            let required = |null: bool, name: &str| {
                if null {
                    Err(row_error(row, name, "is null"))
                } else {
                    Ok(())
                }
            };
            required(ts.is_null(i), "ts_us")?;
            let (broker_id, topic_id, op_id, cursor_id) =
                (brokers[i], topics[i], ops[i], cursors[i]);
            required(broker_id == NULL_KEY, "broker")?;
            required(topic_id == NULL_KEY, "topic")?;
            required(op_id == NULL_KEY, "op")?;
            let ts_us = ts.value(i);
            let last = &mut self.brokers[broker_id as usize].1;
            if ts_us < *last {
                return Err(row_error(
                    row,
                    "ts_us",
                    format!(
                        "time goes backwards for broker {:?} ({ts_us} after {last})",
                        broker.value(i)
                    ),
                ));
            }
            *last = ts_us;
            let Some(&kind) = Op::ALL.get(op_id as usize) else {
                return Err(row_error(
                    row,
                    "op",
                    format!(
                        "unknown op {:?}; expected one of {}",
                        op.value(i),
                        Op::NAMES.join(", ")
                    ),
                ));
            };
            if cursor_id == NO_CURSOR && kind.needs_cursor() {
                return Err(row_error(
                    row,
                    "cursor",
                    format!("is null, but {:?} needs a cursor", kind.name()),
                ));
            }
            let position = ledger
                .get(i)
                .map(|l| Position::new(l, entry.get(i).unwrap_or(0)));
            let needs_position = matches!(
                kind,
                Op::Add
                    | Op::Replay
                    | Op::Redeliver
                    | Op::Ack
                    | Op::Seek
                    | Op::Delete
                    | Op::IndividualAck
            );
            if needs_position && position.is_none() {
                return Err(row_error(
                    row,
                    "ledger_id",
                    format!("is null, but {:?} needs a position", kind.name()),
                ));
            }
            if matches!(
                kind,
                Op::Add | Op::Replay | Op::Redeliver | Op::Ack | Op::Seek | Op::IndividualAck
            ) && entry.is_null(i)
            {
                return Err(row_error(
                    row,
                    "entry_id",
                    format!("is null, but {:?} needs an entry", kind.name()),
                ));
            }
            let reason = match &reasons {
                Some(r) if kind == Op::Redeliver && !r.is_null(i) => {
                    let name = r.value(i);
                    RedeliveryReason::parse(name).ok_or_else(|| {
                        let known: Vec<_> =
                            RedeliveryReason::NAMES.iter().map(|(n, _)| *n).collect();
                        row_error(
                            row,
                            REASON_COLUMN,
                            format!(
                                "unknown reason {name:?}; expected one of {} or null",
                                known.join(", ")
                            ),
                        )
                    })?
                }
                _ => RedeliveryReason::Unspecified,
            };
            let n = count.get(i).unwrap_or(0);
            let s = size.get(i).unwrap_or(0);
            if kind == Op::Read && n <= 0 {
                return Err(row_error(
                    row,
                    "count",
                    format!("a read must ask for at least one entry, got {n}"),
                ));
            }
            if kind == Op::IndividualAck && n < 0 {
                return Err(row_error(
                    row,
                    "count",
                    format!("an individual ack covers at least one entry, got {n}"),
                ));
            }
            if kind == Op::Add && s < 0 {
                return Err(row_error(row, "size", format!("must be >= 0, got {s}")));
            }
            if kind == Op::Load {
                check_load(row, position, entry.is_null(i), n, s)?;
            }
            out.push(Event {
                row,
                broker: broker_id,
                ts_us,
                op: kind,
                topic: topic_id,
                cursor: cursor_id,
                position,
                count: n.max(0) as u32,
                size: s.max(0) as u32,
                reason,
            });
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }
}
