//! The replay engine on small hand-written traces whose answers are worked out here.

use arrow_array::RecordBatch;
use ledgercache::lab::replay::{replay, TraceDecoder};
use ledgercache::{CacheConfig, SettingValue};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

mod support;
use support::trace_rows::*;

use SettingValue::{Float, Int, Str};

fn exact(strategy: &str, size: i64) -> CacheConfig {
    config(&[
        ("cache_size_bytes", Int(size)),
        ("eviction_trigger_threshold", Float(1.0)),
        ("eviction_watermark", Float(1.0)),
        ("strategy", Str(strategy.into())),
    ])
}

#[test]
fn fifo_evicts_in_insertion_order() {
    let rows = [
        open(0, "c", None),
        add(1, 0, 10),
        add(2, 1, 10),
        add(3, 2, 10),
        add(4, 3, 10),
        open(5, "late", Some(0)),
        read(6, "late", 4),
    ];
    let m = run(&rows, &exact("pip430-fifo", 30));
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (3, 1, 1), "{m:?}");
    // Entry 0 went when entry 3 came; read back for `late`, it displaced entry 1 (read by then).
    assert_eq!(m.evicted_entries, 2);
}

#[test]
fn ttl_expires_on_trace_time_unless_reads_are_expected() {
    let rows = [open(0, "c", None), add(0, 0, 10), read(450, "c", 1)];
    let ttl = [
        ("eviction_time_threshold_ms", Int(100)),
        ("extend_ttl_of_recently_accessed", SettingValue::Bool(false)),
    ];
    let mut fifo = ttl.to_vec();
    fifo.push(("strategy", Str("pip430-fifo".into())));
    let m = run(&rows, &config(&fifo));
    assert_eq!((m.hits, m.misses), (0, 1), "plain FIFO: expired at 100 ms");
    let m = run(&rows, &config(&ttl));
    assert_eq!(
        (m.hits, m.misses),
        (1, 0),
        "PIP-430: the cursor's expected read extends the TTL"
    );
    assert!(m.requeues >= 4, "{m:?}");
    let late = [open(0, "c", None), add(0, 0, 10), read(800, "c", 1)];
    let m = run(&late, &config(&ttl));
    assert_eq!((m.hits, m.misses), (0, 1), "after 5 extensions it goes");
}

#[test]
fn lru_keeps_the_recently_read() {
    let rows = [
        open(0, "a", None),
        add(1, 0, 10),
        add(2, 1, 10),
        read(3, "a", 1), // reads 0: now the most recent
        add(4, 2, 10),   // evicts 1
        open(5, "b", Some(0)),
        read(6, "b", 3),
    ];
    let m = run(&rows, &exact("lru", 20));
    // a hits 0; b hits 0 and 2 and misses 1, the least recently used when 2 came.
    assert_eq!((m.hits, m.misses), (3, 1), "{m:?}");
}

#[test]
fn belady_is_never_below_the_others_on_uniform_sizes() {
    let mut rng = StdRng::seed_from_u64(42);
    let mut rows: Vec<Row> = vec![open(0, "a", None), open(0, "b", None), open(0, "c", None)];
    let names = ["a", "b", "c"];
    let mut published = 0i64;
    for ts in 1..3000 {
        if rng.random_bool(0.6) {
            rows.push(add(ts, published, 100));
            published += 1;
        } else {
            let c = names[rng.random_range(0..3)];
            rows.push(read(ts, c, rng.random_range(1..8)));
            if rng.random_bool(0.02) {
                let back = rng.random_range(0..published.max(1));
                rows.push((ts, "seek", "t", Some(c), Some(1), Some(back), 0, 0));
            }
        }
    }
    let results: Vec<(&str, u64)> = [
        "belady",
        "lru",
        "pip430",
        "pip430-fifo",
        "legacy",
        "segmented",
    ]
    .iter()
    .map(|s| {
        (
            *s,
            run(
                &rows,
                &config(&[
                    ("cache_size_bytes", Int(5_000)),
                    ("strategy", Str((*s).into())),
                ]),
            )
            .hits,
        )
    })
    .collect();
    let belady = results[0].1;
    for (s, hits) in &results[1..] {
        assert!(belady >= *hits, "belady {belady} < {s} {hits}: {results:?}");
    }
}

#[test]
fn bad_traces_name_the_row() {
    let mut d = TraceDecoder::new();
    let mut ev = Vec::new();
    let err = d
        .decode(&batch(&[add(5, 0, 1), add(4, 1, 1)]), &mut ev)
        .unwrap_err()
        .to_string();
    assert!(err.contains("row 1") && err.contains("ts_us"), "{err}");
    let err = TraceDecoder::new()
        .decode(
            &batch(&[(0, "publish", "t", None, Some(1), Some(0), 0, 1)]),
            &mut ev,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("row 0") && err.contains("unknown op"), "{err}");
    let err = TraceDecoder::new()
        .decode(&batch(&[(0, "read", "t", None, None, None, 1, 0)]), &mut ev)
        .unwrap_err()
        .to_string();
    assert!(err.contains("cursor") && err.contains("row 0"), "{err}");
    let b = batch(&[add(0, 0, 1)]);
    let without = RecordBatch::try_new(
        Arc::new(
            b.schema()
                .as_ref()
                .clone()
                .project(&[0, 1, 2, 3, 4, 5, 6, 7])
                .unwrap(),
        ),
        b.columns()[..8].to_vec(),
    )
    .unwrap();
    let err = TraceDecoder::new()
        .decode(&without, &mut ev)
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"size\"") && err.contains("missing"), "{err}");
    // A read on a cursor never opened fails in the engine, naming the row.
    let mut d = TraceDecoder::new();
    let mut events = Vec::new();
    d.decode(&batch(&[add(0, 0, 1), read(1, "ghost", 1)]), &mut events)
        .unwrap();
    let err = replay(&events, &d.names, &CacheConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("row 1") && err.contains("ghost"), "{err}");
}

#[test]
fn replays_are_deterministic() {
    let rows: Vec<Row> = std::iter::once(open(0, "a", None))
        .chain((0..500).flat_map(|i| [add(i * 3, i, 50 + (i % 7) as i32), read(i * 3 + 1, "a", 1)]))
        .collect();
    for s in [
        "pip430",
        "pip430-fifo",
        "lru",
        "belady",
        "legacy",
        "segmented",
    ] {
        let cfg = config(&[
            ("cache_size_bytes", Int(2_000)),
            ("strategy", Str(s.into())),
        ]);
        assert_eq!(run(&rows, &cfg), run(&rows, &cfg), "{s}");
    }
}

#[test]
fn legacy_evicts_a_newer_entry_from_the_largest_cache_while_an_older_one_survives() {
    let t = |ts: i64,
             op: &'static str,
             topic: &'static str,
             cursor: Option<&'static str>,
             e: Option<i64>,
             size: i32|
     -> Row {
        (
            ts,
            op,
            topic,
            cursor,
            e.map(|_| 1),
            e,
            if op == "read" { 1 } else { 0 },
            size,
        )
    };
    let mut rows = vec![
        t(0, "open", "big", Some("c"), None, 0),
        t(0, "open", "small", Some("c"), None, 0),
    ];
    rows.push(t(1, "add", "small", None, Some(0), 10)); // the oldest entry
    for e in 0..10 {
        rows.push(t(2 + e, "add", "big", None, Some(e), 10));
    }
    let read_back = |topic: &'static str| {
        let mut r = rows.clone();
        r.extend([
            t(20, "open", topic, Some("late"), Some(0), 0),
            t(21, "close", topic, Some("late"), None, 0),
            t(22, "read", topic, Some("late"), None, 0),
        ]);
        r
    };
    // 110 bytes offered to a 100-byte cache. Legacy, with Pulsar's trigger (98 bytes) and
    // watermark (90): the last insert finds 100 bytes cached, is refused (at the maximum), and
    // starts an eviction of 10 bytes, all from the big cache (its entry 0, newer than the small
    // cache's entry). Global FIFO (exact thresholds) frees the oldest, the small cache's entry.
    let cfg = |strategy: &str| match strategy {
        "legacy" => config(&[
            ("cache_size_bytes", Int(100)),
            ("strategy", Str(strategy.into())),
        ]),
        _ => exact(strategy, 100),
    };
    let hits = |strategy: &str, topic: &'static str| run(&read_back(topic), &cfg(strategy)).hits;
    assert_eq!(
        (hits("legacy", "small"), hits("legacy", "big")),
        (1, 0),
        "legacy keeps the older small/0, drops big/0"
    );
    assert_eq!(
        (hits("pip430-fifo", "small"), hits("pip430-fifo", "big")),
        (0, 1),
        "FIFO drops the oldest"
    );
    let legacy = run(&read_back("small"), &cfg("legacy"));
    assert_eq!(legacy.evicted_entries, 1);
}

/// `RangeEntryCacheImpl.insert` asks `RangeEntryCacheManagerImpl.hasSpaceInCache` first, with the
/// size before the insert (4.0): over the trigger it starts a size eviction of the excess over the
/// watermark, and at or over the maximum the entry is not cached.
#[test]
fn legacy_refuses_an_insert_at_the_maximum_and_evicts_after_it() {
    let mut rows = vec![open(0, "c", None)];
    rows.extend((0..11).map(|e| add(1 + e, e, 100)));
    rows.extend([seek(20, "c", 9), read(21, "c", 2)]);
    let cfg = config(&[
        ("cache_size_bytes", Int(1000)),
        ("strategy", Str("legacy".into())),
    ]);
    let m = run(&rows, &cfg);
    // Entry 9 fills the cache to 1000 bytes; entry 10 is refused and evicts entry 0 (down to
    // 900): the range 9..10 is not all cached, so it is read from storage whole.
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (0, 2, 1), "{m:?}");
    assert_eq!(m.evicted_entries, 1, "{m:?}");
    assert_eq!(m.peak_cache_bytes, 1000, "{m:?}");
}

/// `RangeCache.evictLEntriesBeforeTimestamp` (4.0) removes entries inserted at or before
/// `now - managedLedgerCacheEvictionTimeThresholdMillis`; master's `RangeCacheRemovalQueue` only
/// those before it.
#[test]
fn legacy_time_eviction_takes_an_entry_inserted_at_the_limit() {
    let rows = [
        open(0, "c", None),
        add(10, 0, 10),
        open(1015, "late", Some(0)),
        read(1016, "late", 1),
    ];
    let m = run(&rows, &config(&[("strategy", Str("legacy".into()))]));
    assert_eq!(
        (m.hits, m.misses),
        (0, 1),
        "evicted by the tick at 1010 ms: {m:?}"
    );
    let m = run(&rows, &config(&[("strategy", Str("pip430-fifo".into()))]));
    assert_eq!(
        (m.hits, m.misses),
        (1, 0),
        "kept until the tick at 1020 ms: {m:?}"
    );
}

#[test]
fn segmented_ring_drops_a_whole_segment_on_rotation() {
    let mut rows = vec![open(0, "c", None)];
    for e in 0..5 {
        rows.push(add(1 + e, e, 10));
    }
    rows.extend([
        open(10, "late", Some(0)),
        (11, "close", "t", Some("late"), None, None, 0, 0),
        read(12, "late", 5),
    ]);
    let cfg = config(&[
        ("cache_size_bytes", Int(40)),
        ("segment_count", Int(2)),
        ("strategy", Str("segmented".into())),
    ]);
    let m = run(&rows, &cfg);
    // Segments of 20 bytes: [0,1] [2,3], then 4 empties the first segment (0 and 1 go together).
    // PR #15955 serves a range only when all of it is cached: 0 and 1 are gone, so all 5 miss.
    assert_eq!((m.hits, m.misses), (0, 5), "{m:?}");
    assert_eq!(m.evicted_entries, 2);
    // A range that is all still cached is served from the ring.
    let mut rows2 = rows[..6].to_vec();
    rows2.extend([
        open(10, "late", Some(2)),
        (11, "close", "t", Some("late"), None, None, 0, 0),
        read(12, "late", 3),
    ]);
    let m = run(&rows2, &cfg);
    assert_eq!((m.hits, m.misses), (3, 0), "{m:?}");
}

#[test]
fn segmented_sizes_its_ring_as_pr_15955() {
    // SharedEntryCacheManagerImpl: one segment per GiB of cache, at least 2.
    let c = config(&[("strategy", Str("segmented".into()))]);
    assert_eq!(c.effective_segment_count(), 2, "1 GiB default cache");
    let c = config(&[("cache_size_bytes", Int(5 << 30))]);
    assert_eq!(c.effective_segment_count(), 5);
}

#[test]
fn retained_bytes_follow_the_receive_buffers() {
    // Bursts of 500 entries of 1000 bytes in the same millisecond fill large receive buffers; the
    // cache keeps about 200 entries, but a buffer stays allocated while one of its entries is cached.
    let mut rows = vec![open(0, "c", None)];
    let mut e = 0;
    for burst in 0..8 {
        for _ in 0..500 {
            rows.push(add(burst * 10 + 1, e, 1000));
            e += 1;
        }
    }
    let base = [
        ("cache_size_bytes", Int(200_000)),
        ("strategy", Str("lru".into())),
        ("memory_model", SettingValue::Bool(true)),
    ];
    let with = |extra: &[(&str, SettingValue)]| {
        let mut s = base.to_vec();
        s.extend_from_slice(extra);
        run(&rows, &config(&s))
    };
    let copied = with(&[("copy_entries", SettingValue::Bool(true))]);
    assert_eq!(copied.peak_retained_bytes, copied.peak_cache_bytes);
    let default_max = with(&[]);
    let small_max = with(&[("recv_buffer_max_bytes", Int(64 << 10))]);
    assert!(
        default_max.peak_retained_bytes > small_max.peak_retained_bytes,
        "{default_max:?} vs {small_max:?}"
    );
    assert!(small_max.peak_retained_bytes >= small_max.peak_cache_bytes);
    assert!(
        default_max.peak_retained_bytes >= 256 << 10,
        "buffers grown past 64 KiB show: {}",
        default_max.peak_retained_bytes
    );
}

#[test]
fn a_read_in_flight_during_a_seek_is_discarded_with_epochs_and_delivered_out_of_order_without() {
    // Entries 0..9 published with nobody connected (not cached). `c` reads 5..9 from storage
    // (20 ms), seeks back to 0 at 10 ms and reads 0..9 at 15 ms (0..4 from storage again).
    let mut rows = vec![];
    for e in 0..10 {
        rows.push(add(1, e, 100));
    }
    rows.extend([
        open(2, "c", Some(5)),
        read(3, "c", 5),
        (10, "seek", "t", Some("c"), Some(1), Some(0), 0, 0),
        read(15, "c", 10),
    ]);
    let cfg = |epochs: bool| {
        config(&[
            ("storage_read_latency_ms", Int(20)),
            ("cursor_epochs", SettingValue::Bool(epochs)),
        ])
    };
    let with = run(&rows, &cfg(true));
    assert_eq!(
        (with.discarded_reads, with.out_of_order_deliveries),
        (1, 0),
        "{with:?}"
    );
    let without = run(&rows, &cfg(false));
    // The stale 5..9 arrives at 23 ms, after the seek; then 0..9 at 35 ms: 0..8 come below 9.
    assert_eq!(
        (without.discarded_reads, without.out_of_order_deliveries),
        (0, 9),
        "{without:?}"
    );
    assert_eq!(with.entries_read, without.entries_read);
}

/// Reads that span ledgers, start in an earlier one, or stay in the last: each entry is read once
/// and counted at its own ledger's size (the last ledger is looked at first, the others searched).
#[test]
fn reads_across_ledgers_count_each_entry_at_its_own_ledgers_size() {
    let add_to = |ts, ledger, e, size| (ts, "add", "t", None, Some(ledger), Some(e), 0, size);
    let open_at = |ts, c, ledger, e| (ts, "open", "t", Some(c), Some(ledger), Some(e), 0, 0);
    let mut rows: Vec<Row> = (0..3).map(|e| add_to(1, 1, e, 10)).collect();
    rows.extend((0..3).map(|e| add_to(2, 2, e, 100)));
    rows.extend([
        open_at(3, "a", 1, 0),
        read(4, "a", 6), // (1,0)..(1,2), then (2,0)..(2,2)
        open_at(5, "b", 1, 1),
        read(6, "b", 1), // (1,1): an earlier ledger's entry
        open_at(7, "c", 2, 1),
        read(8, "c", 5), // (2,1), (2,2): the rest of the last ledger
    ]);
    for strategy in ["lru", "pip430", "pip430-fifo", "legacy", "belady"] {
        let m = run(&rows, &exact(strategy, 1 << 20));
        assert_eq!(
            (m.entries_read, m.read_bytes),
            (6 + 1 + 2, 3 * 10 + 3 * 100 + 10 + 2 * 100),
            "{strategy}: {m:?}"
        );
    }
}

/// `RangeEntryCacheManagerImpl.entriesRemoved` counts every removal into the broker's
/// `brk_ml_cache_evicted_entries_total`, invalidations too; the summary keeps the two apart, so
/// that their sum compares with the broker's counter.
#[test]
fn invalidations_are_counted_apart_from_evictions() {
    let mut rows = vec![open(0, "c", None)];
    rows.extend((0..5).map(|e| add(1 + e, e, 10)));
    rows.extend([read(10, "c", 5), delete_ledger(20)]);
    for (strategy, invalidated) in [
        ("legacy", 5), // behind the slowest active cursor once it read them
        ("pip430", 5), // kept (read counts) until the ledger goes
        ("lru", 5),
        ("belady", 5),
        ("segmented", 5),
    ] {
        let m = run(&rows, &config(&[("strategy", Str(strategy.into()))]));
        assert_eq!(
            (m.evicted_entries, m.invalidated_entries),
            (0, invalidated),
            "{strategy}: {m:?}"
        );
    }
    // The ring after rotations: each entry is counted once, evicted by a rotation or invalidated
    // by the deletion, never both (two 20-byte segments).
    let mut rows = vec![open(0, "c", None)];
    rows.extend((0..5).map(|e| add(1 + e, e, 10))); // 0 and 1 go with the first rotation
    rows.push(delete_ledger(10)); // 2, 3 and 4 are still cached
    rows.extend((5..11).map(|e| add(11 + e, e, 10))); // into ledger 1 again: rotations
    let ring = config(&[
        ("strategy", Str("segmented".into())),
        ("cache_size_bytes", Int(40)),
        ("segment_count", Int(2)),
    ]);
    let m = run(&rows, &ring);
    assert_eq!(m.invalidated_entries, 3, "{m:?}");
    // 8, 9 and 10 are cached at the end.
    assert_eq!(
        m.evicted_entries + m.invalidated_entries,
        11 - 3,
        "every entry but the three still cached is counted once: {m:?}"
    );
}

/// A rewind reads again from the first unacknowledged entry, and the read passes over what was
/// acknowledged on its own (`ManagedCursorImpl.rewind`, `internalReadFromLedger`'s skip
/// condition): after the cache let the entries go, the re-read of 0..9 with 1..2 and 5..7
/// acknowledged reads 0, 3..4 and 8..9 from storage, one storage read per window's run.
#[test]
fn a_rewound_read_passes_over_individually_acknowledged_entries() {
    let mut rows = vec![open(0, "c", None)];
    rows.extend((0..10).map(|e| add(1 + e, e, 100)));
    rows.extend([
        read(20, "c", 10),
        individual_ack(30, "c", 1, 2),
        individual_ack(31, "c", 5, 3),
        // Past the last entry: refused, as a broker fails it.
        individual_ack(32, "c", 10, 3),
        rewind(5000, "c"),
        read(5001, "c", 3),
        read(5002, "c", 10),
    ]);
    for strategy in ["pip430", "legacy", "lru"] {
        let cfg = config(&[
            ("strategy", Str(strategy.into())),
            (
                "cache_size_bytes",
                Int(if strategy == "lru" { 1 } else { 1 << 20 }),
            ),
        ]);
        let m = run(&rows, &cfg);
        // The first read hits what the adds cached (none under a 1-byte LRU).
        let first_hits = if strategy == "lru" { 0 } else { 10 };
        assert_eq!(m.entries_read, 10 + 5, "{strategy}: {m:?}");
        assert_eq!(m.hits, first_hits, "{strategy}: {m:?}");
        // Windows: 0..=2 reads 0; 1..=2 skipped; 3..=4; then 5..=9 reads 8..=9.
        let first_read_ops = if strategy == "lru" { 1 } else { 0 };
        assert_eq!(m.storage_read_ops, first_read_ops + 3, "{strategy}: {m:?}");
    }
    // Acknowledging 0 joins 1..2 to the mark-delete position; a rewind then starts at 3.
    let mut rows2 = rows[..15].to_vec();
    rows2.extend([
        individual_ack(40, "c", 0, 1),
        rewind(5000, "c"),
        read(5001, "c", 1),
    ]);
    let m = run(&rows2, &config(&[("strategy", Str("pip430".into()))]));
    assert_eq!(m.entries_read, 11, "{m:?}");
    assert_eq!(m.storage_read_ops, 1, "{m:?}");
    // A broker takes an acknowledgement's positions up to the first past the last entry
    // (`asyncDelete`): 8..=9 of 8..=10 are acknowledged, so the re-read ends at 4.
    let mut rows4 = rows[..14].to_vec();
    rows4.extend([
        individual_ack(32, "c", 8, 3),
        rewind(5000, "c"),
        read(5001, "c", 10),
    ]);
    let m = run(&rows4, &config(&[("strategy", Str("pip430".into()))]));
    assert_eq!((m.entries_read, m.storage_read_ops), (13, 2), "{m:?}");
    // A seek (a reset) forgets individual acknowledgements: everything from 0 is read again.
    let mut rows3 = rows[..15].to_vec();
    rows3.extend([
        (40, "seek", "t", Some("c"), Some(1), Some(0), 0, 0),
        read(5001, "c", 10),
    ]);
    let m = run(&rows3, &config(&[("strategy", Str("pip430".into()))]));
    assert_eq!(m.entries_read, 20, "{m:?}");
}
