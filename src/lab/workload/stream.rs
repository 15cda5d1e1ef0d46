//! The generator as a stream of record batches: the simulation runs only as far as the batches
//! taken so far need, so memory holds the simulation's state (consumers' queues, replay queues,
//! the message index of entries a cursor can still reach) and one batch, not the trace.
//!
//! A workload's brokers are simulated side by side and merged by time (ties go to the lower
//! broker), which is the order [`generate`](super::generate) gives: the streamed batches,
//! concatenated, are its rows, whatever the batch size.
//!
//! String columns are dictionary-encoded (`Dictionary(Int32, Utf8)`), so no column's offsets can
//! overflow however many rows a batch has; the dictionaries are the workload's name tables,
//! shared by every batch.

use super::generate::{EventColumns, Names, Sim, REASON_HOLD_BACK, REASON_NACK, REASON_OVERFLOW};
use super::spec::WorkloadSpec;
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, DictionaryArray, Int32Array, Int64Array, RecordBatch, RecordBatchOptions,
    RecordBatchReader, StringArray,
};
use arrow_schema::{ArrowError, SchemaRef};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::Arc;

/// Rows per batch unless asked otherwise.
pub const DEFAULT_BATCH_ROWS: usize = 65_536;

/// Rows a broker's simulation runs ahead of the merge (per broker, when there are several; about
/// 100 bytes a row).
const CHUNK_ROWS: usize = 1024;

/// The trace format's `op` values, in the order of the `op` dictionary (the decoder's list).
const OPS: [&str; crate::lab::replay::Op::NAMES.len()] = crate::lab::replay::Op::NAMES;
const REASONS: [&str; 3] = [REASON_HOLD_BACK, REASON_NACK, REASON_OVERFLOW];

fn op_key(op: &str) -> i32 {
    // The generator writes only known ops; the dictionary is `Op::NAMES` in order.
    crate::lab::replay::Op::parse(op).map_or(0, |o| o as i32)
}

fn reason_key(reason: &str) -> i32 {
    match reason {
        REASON_HOLD_BACK => 0,
        REASON_NACK => 1,
        _ => {
            debug_assert_eq!(reason, REASON_OVERFLOW);
            2
        }
    }
}

/// The schema of the generator's batches: the trace format's columns, string columns
/// dictionary-encoded.
pub fn trace_schema() -> SchemaRef {
    Arc::new(crate::lab::replay::trace_schema::arrow_schema(true))
}

/// Turns rows into record batches; holds the dictionaries every batch shares.
#[derive(Debug, Clone)]
pub(super) struct Encoder {
    schema: SchemaRef,
    brokers: ArrayRef,
    topics: ArrayRef,
    /// Distinct cursor names (many topics have a `sub-0`), and each cursor id's key among them.
    cursors: ArrayRef,
    cursor_keys: Vec<i32>,
    ops: ArrayRef,
    reasons: ArrayRef,
}

impl Encoder {
    pub(super) fn new(brokers: &[String], topics: &[String], cursors: &[String]) -> Self {
        let mut distinct: Vec<&str> = Vec::new();
        let mut key_of = std::collections::HashMap::new();
        let cursor_keys = cursors
            .iter()
            .map(|c| {
                *key_of.entry(c.as_str()).or_insert_with(|| {
                    distinct.push(c);
                    distinct.len() as i32 - 1
                })
            })
            .collect();
        let strings = |v: &[&str]| Arc::new(StringArray::from_iter_values(v)) as ArrayRef;
        let owned = |v: &[String]| Arc::new(StringArray::from_iter_values(v)) as ArrayRef;
        Encoder {
            schema: trace_schema(),
            brokers: owned(brokers),
            topics: owned(topics),
            cursors: strings(&distinct),
            cursor_keys,
            ops: strings(&OPS),
            reasons: strings(&REASONS),
        }
    }

    fn dict(keys: Int32Array, values: &ArrayRef) -> ArrayRef {
        Arc::new(
            DictionaryArray::<Int32Type>::try_new(keys, values.clone())
                .expect("keys index the name table"),
        )
    }

    /// Rows `r` of `ev` as a record batch.
    pub(super) fn batch(&self, ev: &EventColumns, r: Range<usize>) -> RecordBatch {
        let keys = |ids: &[u32]| Int32Array::from_iter_values(ids.iter().map(|&i| i as i32));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ev.ts_us[r.clone()].to_vec())),
            Self::dict(keys(&ev.broker[r.clone()]), &self.brokers),
            Self::dict(keys(&ev.topic[r.clone()]), &self.topics),
            Self::dict(
                Int32Array::from_iter_values(ev.op[r.clone()].iter().map(|o| op_key(o))),
                &self.ops,
            ),
            Self::dict(
                Int32Array::from_iter(
                    ev.cursor[r.clone()]
                        .iter()
                        .map(|c| c.map(|c| self.cursor_keys[c as usize])),
                ),
                &self.cursors,
            ),
            Arc::new(Int64Array::from_iter(
                ev.ledger_id[r.clone()].iter().copied(),
            )),
            Arc::new(Int64Array::from_iter(
                ev.entry_id[r.clone()].iter().copied(),
            )),
            Arc::new(Int32Array::from(ev.count[r.clone()].to_vec())),
            Arc::new(Int32Array::from(ev.size[r.clone()].to_vec())),
            Arc::new(Int32Array::from_iter(
                ev.messages[r.clone()].iter().copied(),
            )),
            Self::dict(
                Int32Array::from_iter(ev.reason[r.clone()].iter().map(|x| x.map(reason_key))),
                &self.reasons,
            ),
        ];
        let options = RecordBatchOptions::new().with_row_count(Some(r.len()));
        RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)
            .expect("columns match the schema")
    }
}

/// One broker's simulation and the rows it has made that the merge has not taken yet.
struct Source {
    sim: Sim,
    /// Rows of `sim.out` already taken.
    taken: usize,
    more: bool,
}

impl Source {
    /// Makes sure rows wait (unless the simulation is over); false if none do.
    fn refill(&mut self, rows: usize) -> bool {
        if self.taken == self.sim.out.len() {
            self.sim.out.clear_rows();
            self.taken = 0;
        }
        if self.more && self.sim.out.len() - self.taken < rows {
            self.more = self.sim.fill(self.taken + rows);
        }
        self.taken < self.sim.out.len()
    }
}

/// A workload's trace, generated batch by batch as simulated time advances.
///
/// ```
/// use ledgercache::lab::workload::{TraceStream, WorkloadSpec};
/// let mut stream = TraceStream::new(&WorkloadSpec::default(), 1);
/// let mut rows = 0;
/// while let Some(batch) = stream.next_batch(10_000) {
///     assert!(batch.num_rows() <= 10_000);
///     rows += batch.num_rows();
/// }
/// assert_eq!(rows as u64, stream.rows());
/// ```
pub struct TraceStream {
    sources: Vec<Source>,
    /// Several sources: the next row of each one that has rows, (time, source).
    heads: BinaryHeap<Reverse<(i64, usize)>>,
    /// Several sources: the rows of the batch being made.
    merged: EventColumns,
    encoder: Encoder,
    rows: u64,
}

impl TraceStream {
    /// Every broker's events, merged by time as [`generate`](super::generate) gives them.
    pub fn new(spec: &WorkloadSpec, seed: u64) -> Self {
        Self::of((0..super::generate::holding_brokers(spec)).map(|b| Sim::new(spec, seed, b)))
    }

    /// One broker's events, as [`generate_broker`](super::generate_broker) gives them.
    pub fn broker(spec: &WorkloadSpec, seed: u64, broker: u32) -> Self {
        Self::of(std::iter::once(Sim::new(spec, seed, broker)))
    }

    /// [`TraceStream::new`] (`broker` None) or [`TraceStream::broker`], after checking the spec
    /// ([`WorkloadSpec::check`]) before anything is allocated: a spec whose simulation would
    /// need more than `memory_budget` bytes, or a broker that does not exist, is an error.
    /// `new` and `broker` do not check: use them with specs known to fit.
    pub fn checked(
        spec: &WorkloadSpec,
        seed: u64,
        broker: Option<u32>,
        memory_budget: u64,
    ) -> crate::error::Result<Self> {
        Self::check(spec, broker, memory_budget)?;
        Ok(match broker {
            Some(b) => Self::broker(spec, seed, b),
            None => Self::new(spec, seed),
        })
    }

    /// What [`TraceStream::checked`] checks before it allocates: `broker` is one of the spec's,
    /// and the simulation fits in `memory_budget` bytes.
    pub fn check(
        spec: &WorkloadSpec,
        broker: Option<u32>,
        memory_budget: u64,
    ) -> crate::error::Result<()> {
        if let Some(b) = broker {
            if b >= spec.brokers {
                return Err(crate::error::Error::invalid(
                    "broker",
                    format!("{b} is not below brokers={}", spec.brokers),
                ));
            }
        }
        spec.check(memory_budget, broker).map(|_| ())
    }

    fn of(sims: impl Iterator<Item = (Sim, Names)>) -> Self {
        // Every broker's simulation names the whole workload's topics and cursors: keep one copy.
        let mut names = None;
        let mut sources: Vec<Source> = sims
            .map(|(sim, n)| {
                names.get_or_insert(n);
                Source {
                    sim,
                    taken: 0,
                    more: true,
                }
            })
            .collect();
        let names = names.unwrap_or_default();
        let encoder = Encoder::new(&names.brokers, &names.topics, &names.cursors);
        let mut heads = BinaryHeap::new();
        if sources.len() > 1 {
            for (k, s) in sources.iter_mut().enumerate() {
                if s.refill(CHUNK_ROWS) {
                    heads.push(Reverse((s.sim.out.ts_us[s.taken], k)));
                }
            }
        }
        TraceStream {
            sources,
            heads,
            merged: EventColumns::default(),
            encoder,
            rows: 0,
        }
    }

    /// The schema of every batch (see [`trace_schema`]).
    pub fn schema(&self) -> SchemaRef {
        self.encoder.schema.clone()
    }

    /// Rows handed out so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The next rows, at most `max_rows` of them (at least one); `None` when the trace is over.
    /// Every batch but the last has exactly `max_rows` rows.
    pub fn next_batch(&mut self, max_rows: usize) -> Option<RecordBatch> {
        let max_rows = max_rows.max(1);
        let batch = if self.sources.len() == 1 {
            let s = &mut self.sources[0];
            if !s.refill(max_rows) {
                return None;
            }
            let n = max_rows.min(s.sim.out.len() - s.taken);
            let batch = self.encoder.batch(&s.sim.out, s.taken..s.taken + n);
            s.taken += n;
            // What is left is less than one task's rows: moving it to the front is cheap.
            s.sim.out.drain_front(s.taken);
            s.taken = 0;
            batch
        } else {
            self.merge(max_rows);
            if self.merged.is_empty() {
                return None;
            }
            self.encoder.batch(&self.merged, 0..self.merged.len())
        };
        self.rows += batch.num_rows() as u64;
        Some(batch)
    }

    /// Takes the next `max_rows` rows of the merged sources into `merged`: rows of the source
    /// with the earliest next row (the lower source on a tie), as long as they come before every
    /// other source's next row.
    fn merge(&mut self, max_rows: usize) {
        self.merged.clear_rows();
        while self.merged.len() < max_rows {
            let Some(Reverse((_, k))) = self.heads.pop() else {
                break;
            };
            let next = self.heads.peek().map(|Reverse(h)| *h);
            let s = &mut self.sources[k];
            let out = &s.sim.out;
            let room = max_rows - self.merged.len();
            let mut end = s.taken;
            while end < out.len() && end - s.taken < room {
                let before_next = match next {
                    None => true,
                    Some((ts, other)) => (out.ts_us[end], k) < (ts, other),
                };
                if !before_next {
                    break;
                }
                end += 1;
            }
            self.merged.extend_from(out, s.taken..end);
            s.taken = end;
            if s.refill(CHUNK_ROWS) {
                self.heads.push(Reverse((s.sim.out.ts_us[s.taken], k)));
            }
        }
    }

    /// The batches of at most `batch_rows` rows, as an Arrow `RecordBatchReader`.
    pub fn batches(self, batch_rows: usize) -> TraceBatches {
        TraceBatches {
            stream: Some(self),
            batch_rows,
        }
    }
}

/// A [`TraceStream`] as an iterator of record batches (an Arrow `RecordBatchReader`). A panic in
/// the generator ends the stream with an error instead of unwinding into the caller (which may be
/// C, through the Arrow C stream interface).
pub struct TraceBatches {
    stream: Option<TraceStream>,
    batch_rows: usize,
}

impl Iterator for TraceBatches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let stream = self.stream.as_mut()?;
        let rows = self.batch_rows;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stream.next_batch(rows))) {
            Ok(Some(batch)) => Some(Ok(batch)),
            Ok(None) => {
                self.stream = None;
                None
            }
            Err(panic) => {
                self.stream = None;
                let why = panic
                    .downcast_ref::<&str>()
                    .map(ToString::to_string)
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Some(Err(ArrowError::ExternalError(
                    format!("the workload generator failed: {why}").into(),
                )))
            }
        }
    }
}

impl RecordBatchReader for TraceBatches {
    fn schema(&self) -> SchemaRef {
        trace_schema()
    }
}
