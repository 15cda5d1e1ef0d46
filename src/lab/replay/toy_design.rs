//! What a new design costs: a toy FIFO cache, defined here in one file, replays a trace through
//! the engine with the read flow it shares with LRU and comes out as summary rows built from the
//! declared columns ([`super::summary`]), with no other code written for it.

use super::strategy::{CacheStrategy, EntryKey, Lru, StrategyCounters};
use super::summary::{self, Run};
use super::{replayer, TraceDecoder};
use crate::config::{CacheConfig, Strategy};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// First in, first out, bounded by bytes; a read changes nothing.
struct ToyFifo {
    capacity: u64,
    bytes: u64,
    queue: VecDeque<(EntryKey, u32)>,
    cached: HashSet<EntryKey>,
    counters: StrategyCounters,
}

impl ToyFifo {
    fn new(capacity: u64) -> Self {
        ToyFifo {
            capacity,
            bytes: 0,
            queue: VecDeque::new(),
            cached: HashSet::new(),
            counters: StrategyCounters::default(),
        }
    }
}

impl CacheStrategy for ToyFifo {
    fn insert(&mut self, _now_ns: u64, key: EntryKey, size: u32, _expected_reads: i32) {
        if u64::from(size) > self.capacity || !self.cached.insert(key) {
            return;
        }
        self.queue.push_back((key, size));
        self.bytes += u64::from(size);
        while self.bytes > self.capacity {
            let Some((old, old_size)) = self.queue.pop_front() else {
                break;
            };
            self.cached.remove(&old);
            self.bytes -= u64::from(old_size);
            self.counters.evicted_entries += 1;
        }
    }

    fn read(&mut self, _now_ns: u64, key: EntryKey) -> bool {
        self.cached.contains(&key)
    }

    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
        let gone = |k: &EntryKey| k.topic == topic && k.position.ledger_id == ledger;
        self.queue.retain(|(k, _)| !gone(k));
        self.cached.retain(|k| !gone(k));
        self.bytes = self.queue.iter().map(|(_, s)| u64::from(*s)).sum();
    }

    fn cached_bytes(&self) -> u64 {
        self.bytes
    }

    fn counters(&self) -> StrategyCounters {
        self.counters
    }

    fn contains(&self, key: EntryKey) -> bool {
        self.cached.contains(&key)
    }
}

/// A trace row: time, op, cursor, entry, count, size.
type Row = (
    i64,
    &'static str,
    Option<&'static str>,
    Option<i64>,
    Option<i32>,
    Option<i32>,
);

/// One broker, one topic, one cursor reading each entry once as it is published.
fn tailing_trace(entries: i64) -> RecordBatch {
    let mut rows: Vec<Row> = vec![(0, "open", Some("sub"), None, None, None)];
    for e in 0..entries {
        let t = 1_000 * (e + 1);
        rows.push((t, "add", None, Some(e), None, Some(100)));
        rows.push((t + 1, "read", Some("sub"), None, Some(1), None));
    }
    let n = rows.len();
    RecordBatch::try_from_iter([
        (
            "ts_us",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
        ),
        ("broker", Arc::new(StringArray::from(vec!["b"; n]))),
        ("topic", Arc::new(StringArray::from(vec!["t"; n]))),
        (
            "op",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        ),
        (
            "cursor",
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            )),
        ),
        (
            "ledger_id",
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.3.map(|_| 1)).collect::<Vec<_>>(),
            )),
        ),
        (
            "entry_id",
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.3).collect::<Vec<_>>(),
            )),
        ),
        (
            "count",
            Arc::new(Int32Array::from(
                rows.iter().map(|r| r.4).collect::<Vec<_>>(),
            )),
        ),
        (
            "size",
            Arc::new(Int32Array::from(
                rows.iter().map(|r| r.5).collect::<Vec<_>>(),
            )),
        ),
    ])
    .unwrap()
}

/// The design's replay of `trace`, as a summary row.
fn replayed(trace: &RecordBatch, config: &CacheConfig, design: Box<dyn CacheStrategy>) -> Run {
    let mut decoder = TraceDecoder::new();
    let mut events = Vec::new();
    decoder.decode(trace, &mut events).unwrap();
    let mut r = replayer(config, design);
    r.run(&events, &decoder.names).unwrap();
    Run {
        broker: "b".into(),
        config: config.clone(),
        metrics: r.finish(),
        took: Duration::ZERO,
        config_json: "{}".into(),
    }
}

#[test]
fn a_design_in_one_file_replays_and_reports_through_the_declared_columns() {
    let trace = tailing_trace(50);
    for capacity in [0u64, 250, 1_000, 1 << 20] {
        // The toy shares LRU's read flow (admit everything): the one line a real design adds to
        // `first_pass` picks its flow and builds it, as `replayer(config, Box::new(ToyFifo::new(..)))`.
        let config = CacheConfig {
            strategy: Strategy::Lru,
            cache_size_bytes: capacity,
            ..CacheConfig::default()
        };
        let fifo = replayed(&trace, &config, Box::new(ToyFifo::new(capacity)));
        let lru = replayed(&trace, &config, Box::new(Lru::new(capacity)));
        // Entries read once each, in publish order: recency order is insertion order, so FIFO
        // and LRU keep the same entries at every size.
        assert_eq!(fifo.metrics.entries_read, 50, "capacity {capacity}");
        assert_eq!(fifo.metrics.hits, lru.metrics.hits, "capacity {capacity}");
        if capacity == 0 {
            assert_eq!(fifo.metrics.hits, 0);
        }
        if capacity >= 100 {
            assert_eq!(
                fifo.metrics.hits, 50,
                "capacity {capacity}: each entry read as it lands"
            );
        }
        let (rows, _) = summary::tables(&[fifo]).unwrap();
        let names: Vec<_> = rows
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let declared: Vec<_> = summary::SUMMARY
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        assert_eq!(names, declared);
        assert_eq!(rows.num_rows(), 1);
    }
}
