//! A topic's life on a broker in the replay engine: unload and load rows, reconnects.

use ledgercache::lab::replay::engine::PerSecond;
use ledgercache::lab::replay::{replay, ReplayMetrics, TraceDecoder};
use ledgercache::SettingValue;
use proptest::prelude::*;
use std::time::{Duration, Instant};

mod support;
use support::trace_rows::*;

use SettingValue::{Int, Str};

fn unload(ts: i64) -> Row {
    (ts, "unload", "t", None, None, None, 0, 0)
}

/// Ledger `ledger`'s entries `first..first + count` in storage, `size` bytes each on average.
fn load(ts: i64, ledger: i64, first: i64, count: i32, size: i32) -> Row {
    (
        ts,
        "load",
        "t",
        None,
        Some(ledger),
        Some(first),
        count,
        size,
    )
}

fn open_in(ts: i64, c: &'static str, ledger: i64, e: i64) -> Row {
    (ts, "open", "t", Some(c), Some(ledger), Some(e), 0, 0)
}

fn pip430(latency_ms: i64) -> ledgercache::CacheConfig {
    config(&[
        ("strategy", Str("pip430".into())),
        ("storage_read_latency_ms", Int(latency_ms)),
    ])
}

/// A storage read under way when its topic is unloaded caches nothing and delivers nothing
/// (`ManagedLedgerImpl.asyncClose` fails the reads of a closed ledger); without the unload the
/// same read caches its entries for the cursor behind.
#[test]
fn an_unload_discards_the_storage_reads_under_way() {
    let mut rows = vec![
        load(0, 1, 0, 10, 100),
        open_in(0, "x", 1, 0),
        open_in(0, "y", 1, 0),
        read(100, "x", 10),
    ];
    let mut kept = rows.clone();
    kept.push(read(300, "y", 2));
    let kept = run(&kept, &pip430(50));
    assert!(kept.peak_cache_bytes > 0, "{kept:?}");
    assert_eq!(kept.hits, 2, "y hits what x's storage read cached");
    rows.push(unload(120));
    // The topic comes back here: the new cursors must not receive the old read.
    rows.extend([
        load(130, 1, 0, 10, 100),
        open_in(130, "x", 1, 0),
        read(300, "x", 2),
    ]);
    let m = run(&rows, &pip430(50));
    assert_eq!(m.peak_cache_bytes, 0, "{m:?}");
    assert_eq!(m.out_of_order_deliveries, 0);
    assert_eq!((m.unloads, m.loads, m.reopens), (1, 2, 1));
    assert_eq!(m.storage_read_ops, 2);
}

/// The reads waiting for permits when their topic goes give back what they are granted: the
/// limiter's permits all return, so a later read of another cursor is not refused.
#[test]
fn an_unload_gives_back_the_permits_of_reads_it_discards() {
    let cfg = config(&[
        ("strategy", Str("pip430".into())),
        ("storage_read_latency_ms", Int(50)),
        ("max_reads_in_flight_bytes", Int(2_000)),
        ("reads_in_flight_acquire_timeout_ms", Int(10_000)),
    ]);
    let rows = [
        load(0, 1, 0, 100, 100),
        open_in(0, "x", 1, 0),
        open_in(0, "y", 1, 0),
        read(10, "x", 10),
        read(11, "y", 10),
        unload(20),
        load(30, 1, 0, 100, 100),
        open_in(30, "x", 1, 0),
        read(2_000, "x", 10),
        read(3_000, "x", 10),
    ];
    let m = run(&rows, &cfg);
    assert_eq!(m.reads_failed_for_permits, 0, "{m:?}");
    assert_eq!(
        m.reads_waited_for_permits, 1,
        "only y's read waited: the permits all came back"
    );
}

/// After an unload, the cursor's acknowledgements are the trace's to restate (`individual_ack`
/// rows after the `open`): the broker forgot them, and the open starts it at its position.
#[test]
fn a_cursor_reopened_after_an_unload_starts_afresh() {
    let rows = [
        open(0, "c", Some(0)),
        add(1, 0, 10),
        add(1, 1, 10),
        add(1, 2, 10),
        individual_ack(2, "c", 1, 1),
        unload(3),
        open(4, "c", Some(0)),
        read(5, "c", 3),
    ];
    let m = run(&rows, &pip430(0));
    assert_eq!(
        m.entries_read, 3,
        "entry 1's acknowledgement went with the unload"
    );
    assert_eq!(m.reopens, 1);
    assert_eq!(m.hits, 0, "the unload emptied the cache");
}

/// A trace that adds after an unload, with no `load` row, loads the topic implicitly: the adds are
/// cached again for the reopened cursor.
#[test]
fn an_add_after_an_unload_loads_the_topic() {
    let rows = [
        open(0, "c", None),
        add(1, 0, 10),
        unload(2),
        open(3, "c", None),
        add(4, 1, 10),
        read(5, "c", 1),
    ];
    let m = run(&rows, &pip430(0));
    assert_eq!((m.hits, m.misses), (1, 0), "{m:?}");
    assert_eq!(
        (m.unloads, m.loads),
        (1, 0),
        "an implicit load is not counted"
    );
}

/// An unload of a topic this broker does not have open changes nothing, and a load of a ledger the
/// topic knows changes nothing it knows (its sizes stay the added ones).
#[test]
fn repeated_lifecycle_rows_change_nothing() {
    let rows = [
        unload(0),
        open(0, "c", Some(0)),
        add(1, 0, 10),
        add(1, 1, 30),
        load(2, 1, 0, 1_000, 999),
        unload(3),
        unload(3),
        open(4, "c", Some(0)),
        read(5, "c", 5),
    ];
    let m = run(&rows, &pip430(0));
    assert_eq!(m.unloads, 1);
    assert_eq!((m.entries_read, m.read_bytes), (2, 40), "{m:?}");
}

/// A load's work does not depend on its count: a thousand ledgers of 2^31 - 1 entries each load
/// as fast as a thousand of one, and a read far into one costs its own entries only.
#[test]
fn a_load_costs_nothing_whatever_its_count() {
    let mut rows: Vec<Row> = (0..1_000).map(|l| load(0, l, 0, i32::MAX, 1_000)).collect();
    rows.extend([
        open_in(1, "c", 999, i64::from(i32::MAX) - 3),
        read(2, "c", 10),
    ]);
    let start = Instant::now();
    let m = run(&rows, &pip430(0));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!((m.entries_read, m.read_bytes), (3, 3_000), "{m:?}");
    assert_eq!(m.loads, 1, "one topic loaded, its ledgers in one go");
}

fn second(second: i64, reads: u64, hits: u64, event: bool) -> PerSecond {
    PerSecond {
        second,
        reads,
        hits,
        misses: reads - hits,
        loads: u64::from(event),
        ..PerSecond::default()
    }
}

fn warm(seconds: Vec<PerSecond>) -> Vec<Option<f64>> {
    ReplayMetrics {
        per_second: seconds,
        ..ReplayMetrics::default()
    }
    .times_to_warm()
}

#[test]
fn time_to_warm_counts_the_cold_seconds_after_the_event() {
    // Baseline: the last five seconds with reads before second 10, 1 to 5 (40 of 50 hits: 0.8;
    // with second 0's reads too it would be 40 of 60).
    let mut s: Vec<PerSecond> = (0..6).map(|i| second(i, 10, 10, false)).collect();
    s[0].hits = 0;
    s[1].hits = 0;
    s.push(second(10, 0, 0, true));
    // Second 11 cold (0.5), 12 without reads, 13 cold (0.7 < 0.75), 14 back (0.8).
    s.extend([
        second(11, 10, 5, false),
        second(12, 0, 0, false),
        second(13, 10, 7, false),
    ]);
    s.push(second(14, 10, 8, false));
    let out = warm(s);
    assert_eq!(out[6], Some(3.0), "{out:?}");
    assert!(out.iter().enumerate().all(|(i, t)| i == 6 || t.is_none()));
}

#[test]
fn time_to_warm_is_zero_when_the_next_reads_hit_and_null_without_a_baseline() {
    let out = warm(vec![
        second(0, 0, 0, true),
        second(1, 10, 10, false),
        second(2, 10, 0, true),
        second(7, 10, 10, false),
    ]);
    assert_eq!(out, vec![None, None, Some(0.0), None]);
}

#[test]
fn an_event_never_back_counts_to_the_end_and_the_summary_says_so() {
    let m = ReplayMetrics {
        per_second: vec![
            second(0, 10, 10, false),
            second(1, 0, 0, true),
            second(2, 10, 0, false),
            second(9, 10, 0, false),
        ],
        ..ReplayMetrics::default()
    };
    assert_eq!(m.times_to_warm()[1], Some(8.0));
    let w = m.warmth();
    assert_eq!(
        (w.events, w.mean_seconds, w.max_seconds),
        (1, Some(8.0), Some(8.0))
    );
    let none = ReplayMetrics::default().warmth();
    assert_eq!(
        (none.events, none.mean_seconds, none.max_seconds),
        (0, None, None)
    );
}

/// Every second an event, none ever back: the work is by the seconds, not their square.
#[test]
fn time_to_warm_of_many_events_is_quick() {
    let mut s = vec![second(0, 10, 10, false)];
    s.extend((1..200_000).map(|i| second(i, 10, 0, true)));
    let start = Instant::now();
    let out = warm(s);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(out[1], Some(199_998.0));
    assert_eq!(
        out[2],
        Some(199_997.0),
        "a 0.5 baseline (seconds 0 and 1), never back"
    );
    assert_eq!(out[10], Some(0.0), "a 0.0 baseline is back at once");
}

/// Ops of the arbitrary traces below: lifecycle rows among the cursor and ledger ops.
const OPS: [&str; 8] = [
    "open",
    "close",
    "add",
    "read",
    "ack",
    "individual_ack",
    "unload",
    "load",
];

proptest! {
    #![proptest_config(support::fixed_cases(64))]

    /// Arbitrary traces with unload and load rows, values at the ends of their types, replayed
    /// with read latency and the reads-in-flight limiter: an error naming a row, or results;
    /// never a panic, and quick whatever the counts.
    #[test]
    fn arbitrary_lifecycle_traces_replay_or_name_a_row(
        rows in proptest::collection::vec(
            (
                0usize..OPS.len(),
                0i64..300,
                0usize..3,
                prop_oneof![4 => 0i64..4, 1 => Just(i64::MAX), 1 => Just(-1i64)],
                prop_oneof![4 => 0i64..8, 1 => Just(i64::MAX - 1), 1 => Just(-1i64)],
                prop_oneof![4 => 0i32..8, 1 => Just(i32::MAX), 1 => Just(-1i32)],
                prop_oneof![4 => 0i32..200, 1 => Just(i32::MAX)],
            ),
            1..60,
        )
    ) {
        let cursors = ["a", "b", "c"];
        let mut ts = 0;
        let rows: Vec<Row> = rows
            .iter()
            .map(|&(op, step, c, ledger, entry, count, size)| {
                ts += step;
                let op = OPS[op];
                let cursor = (!matches!(op, "add" | "unload" | "load")).then_some(cursors[c]);
                (ts, op, "t", cursor, Some(ledger), Some(entry), count, size)
            })
            .collect();
        let cfg = config(&[
            ("strategy", Str("pip430".into())),
            ("storage_read_latency_ms", Int(20)),
            ("max_reads_in_flight_bytes", Int(5_000)),
        ]);
        let mut d = TraceDecoder::new();
        let mut events = Vec::new();
        let start = Instant::now();
        let outcome = d
            .decode(&batch(&rows), &mut events)
            .and_then(|()| replay(&events, &d.names, &cfg));
        if let Err(e) = outcome {
            prop_assert!(e.to_string().contains("row "), "{e}");
        }
        prop_assert!(start.elapsed() < Duration::from_secs(30));
    }
}

/// A read of a loaded ledger of 2^31 - 1 entries takes at most 2^20 of them in one row: bounded
/// work (and a bounded list of misses) whatever the count.
#[test]
fn a_read_takes_at_most_a_million_entries() {
    let rows = [
        load(0, 1, 0, i32::MAX, 1),
        open_in(1, "c", 1, 0),
        read(2, "c", i32::MAX),
    ];
    let m = run(&rows, &pip430(0));
    assert_eq!(m.entries_read, 1 << 20);
}
