//! One scenario per behaviour where the lab used to depart from Pulsar's code, each citing the
//! Pulsar class and method it now follows (see docs/fidelity.md). Each would fail on the lab as
//! it was before the read flow was shared.

mod support;

use ledgercache::SettingValue::{self, Bool, Float, Int, Str};
use support::trace_rows::*;

/// An entry added to ledger `ledger`.
fn add_in(ts: i64, ledger: i64, e: i64) -> Row {
    (ts, "add", "t", None, Some(ledger), Some(e), 0, 10)
}

/// A cursor opened at `(ledger, e)`.
fn open_at(ts: i64, c: &'static str, ledger: i64, e: i64) -> Row {
    (ts, "open", "t", Some(c), Some(ledger), Some(e), 0, 0)
}

fn design(strategy: &str, extra: &[(&str, SettingValue)]) -> ledgercache::CacheConfig {
    let mut s = vec![("strategy", Str(strategy.into()))];
    s.extend(extra.iter().cloned());
    config(&s)
}

/// `ManagedLedgerImpl.asyncReadEntry` (4.0) passes `cursor.isCacheReadEntry()`, which only
/// `checkCursorsToCacheEntries` sets, and that returns at once while
/// `managedLedgerMinimumBacklogCursorsForCaching` is 0: by default 4.0 never caches a storage read.
#[test]
fn legacy_two_readers_of_expired_entries_read_storage_twice() {
    let mut rows = vec![open(0, "a", None), open(0, "b", None)];
    rows.extend((0..4).map(|e| add(1 + e, e, 10)));
    // Well past the TTL: both readers go back to the start and read the same entries.
    rows.extend([
        seek(5_000, "a", 0),
        seek(5_000, "b", 0),
        read(5_001, "a", 4),
        read(5_002, "b", 4),
    ]);
    let m = run(&rows, &design("legacy", &[]));
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (0, 8, 2), "{m:?}");

    // With the 4.0 knobs that turn it on, the stats task marks both cursors (close in backlog)
    // and the second reader hits what the first one read.
    let on = design(
        "legacy",
        &[
            ("min_backlog_cursors_for_caching", Int(1)),
            ("min_backlog_entries_for_caching", Int(1)),
            ("backlog_check_interval_ms", Int(5_000)),
        ],
    );
    let m = run(&rows, &on);
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (4, 4, 1), "{m:?}");
}

/// `RangeEntryCacheImpl.asyncReadEntry(lh, position, ...)`, which `ManagedCursorImpl
/// .asyncReplayEntries` calls per position, reads with an expected read count of 0: a redelivered
/// entry read from storage is never cached.
#[test]
fn a_replayed_miss_replayed_again_misses_again() {
    let rows = [
        open(0, "c", None),
        add(1, 0, 10),
        read(2, "c", 1),
        redeliver(3, "c", 0),
        replay_of(5_000, "c", 0), // expired by now: a miss
        redeliver(5_001, "c", 0),
        replay_of(5_002, "c", 0),
    ];
    // (PR #15955's ring has no TTL; that it never caches a storage read is checked below.)
    for strategy in ["pip430", "legacy"] {
        let m = run(&rows, &design(strategy, &[]));
        assert_eq!((m.hits, m.misses), (1, 2), "{strategy}: {m:?}");
        assert_eq!(m.storage_read_ops, 2, "{strategy}: {m:?}");
    }
}

/// `PersistentStickyKeyDispatcherMultipleConsumers` increments an entry's expected read count
/// where it holds the entry back for a blocked key; negative acks and Shared overflow do not.
#[test]
fn only_a_key_shared_hold_back_adds_an_expected_read() {
    let rows = [
        open(0, "c", None),
        add(1, 0, 10),
        read(2, "c", 1), // the one expected read is consumed
        redeliver(3, "c", 0),
        replay_of(1_500, "c", 0), // past one TTL: kept only while a read is expected
    ];
    let cfg = design(
        "pip430",
        &[("extend_ttl_of_recently_accessed", Bool(false))],
    );
    let hold_back = run_with_reasons(&rows, &[(3, "hold-back")], &cfg);
    assert_eq!(hold_back.hits, 2, "{hold_back:?}");
    for reason in ["nack", "overflow"] {
        let m = run_with_reasons(&rows, &[(3, reason)], &cfg);
        assert_eq!((m.hits, m.misses), (1, 1), "{reason}: {m:?}");
    }
    // The lab-only setting that counts every redelivery.
    let every = design(
        "pip430",
        &[
            ("extend_ttl_of_recently_accessed", Bool(false)),
            ("expected_read_on_every_redelivery", Bool(true)),
        ],
    );
    let m = run_with_reasons(&rows, &[(3, "nack")], &every);
    assert_eq!(m.hits, 2, "{m:?}");
}

/// `ManagedLedgerImpl.invalidateEntriesUpToSlowestReaderPosition` (4.0) clears the cache when the
/// last active cursor leaves (`deactivateCursorByName`).
#[test]
fn legacy_clears_its_cache_when_the_last_active_cursor_leaves() {
    let rows = [
        open(0, "c", None),
        add(1, 0, 10),
        add(2, 1, 10),
        close(3, "c"),
        open(4, "d", Some(0)),
        read(5, "d", 2),
    ];
    let m = run(&rows, &design("legacy", &[]));
    assert_eq!((m.hits, m.misses), (0, 2), "{m:?}");
    // PIP-430 keeps them: entries still expecting a read stay until their TTL runs out.
    let m = run(&rows, &design("pip430", &[]));
    assert_eq!((m.hits, m.misses), (2, 0), "{m:?}");
}

/// `PersistentTopic.checkBackloggedCursor` (4.0): a cursor with `managedLedgerCursorBackloggedThreshold`
/// (1000) entries or more to read is inactive, on subscribe and on every stats update
/// (`statsUpdateFrequencyInSecs`, 60 s); with no active cursor, `OpAddEntry` caches nothing.
/// Master skips the check under PIP-430.
#[test]
fn legacy_deactivates_a_backlogged_cursor() {
    let mut rows: Vec<Row> = (0..1500).map(|e| add(e / 100, e, 10)).collect();
    rows.push(open(20, "slow", Some(0))); // 1500 behind: inactive
    rows.extend((1500..1510).map(|e| add(21, e, 10)));
    rows.push(read(22, "slow", 100));
    let m = run(&rows, &design("legacy", &[]));
    assert_eq!(
        m.peak_cache_bytes, 0,
        "nothing cached while the only cursor is backlogged"
    );
    // Caught up by the next stats update, it is active again and publishes are cached.
    let mut rows2 = rows.clone();
    rows2.push(read(30, "slow", 1000)); // 410 left: under the threshold
    rows2.extend((1510..1515).map(|e| add(61_000 + e, e, 10)));
    let m = run(&rows2, &design("legacy", &[]));
    assert_eq!(m.peak_cache_bytes, 50, "{m:?}");
    let m = run(&rows, &design("pip430", &[]));
    assert!(m.peak_cache_bytes > 0, "PIP-430 keeps the cursor active");
}

/// `RangeEntryCacheImpl.asyncReadEntry0` (4.0) and PR #15955's `SharedEntryCacheImpl` serve a range
/// from the cache only if all of it is there; otherwise they read all of it from storage.
#[test]
fn legacy_and_segmented_serve_ranges_all_or_nothing() {
    let mut rows = vec![open(0, "c", None), open(0, "d", None)];
    rows.extend((0..4).map(|e| add(1 + e, e, 10))); // entry 0 goes to make room for entry 3
    rows.push(read(10, "d", 4));
    let exact = |s: &str| {
        design(
            s,
            &[
                ("cache_size_bytes", Int(30)),
                ("eviction_trigger_threshold", Float(1.0)),
                ("eviction_watermark", Float(1.0)),
            ],
        )
    };
    let m = run(&rows, &exact("legacy"));
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (0, 4, 1), "{m:?}");
    // Master's RangeEntryCacheImpl serves the three cached entries and reads the one missing.
    let m = run(&rows, &exact("pip430-fifo"));
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (3, 1, 1), "{m:?}");
}

/// PR #15955 (`SharedEntryCacheImpl`) inserts on publish only: a storage read is never cached.
#[test]
fn segmented_never_caches_a_storage_read() {
    let rows = [
        open(0, "a", None),
        close(1, "a"),
        add(2, 0, 10), // no active cursor: not cached
        add(3, 1, 10),
        open(4, "b", Some(0)),
        open(4, "c", Some(0)),
        read(5, "b", 2),
        read(6, "c", 2),
    ];
    let m = run(&rows, &design("segmented", &[]));
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (0, 4, 2), "{m:?}");
}

/// `ActiveManagedCursorContainerImpl.shouldCacheAddedEntry` reads the continue-caching window from
/// `ManagedLedgerConfig`, which the broker never sets (`ManagedLedgerClientFactory` hands it to the
/// factory config only): as shipped the window is 0. The lab follows that unless told otherwise.
#[test]
fn the_continue_caching_window_is_off_in_the_lab_unless_applied() {
    let rows = [
        open(0, "c", None),
        close(10, "c"),
        add(20, 0, 10),
        open(30, "c", Some(0)),
        read(31, "c", 1),
    ];
    let m = run(&rows, &design("pip430", &[]));
    assert_eq!((m.hits, m.misses), (0, 1), "{m:?}");
    let m = run(
        &rows,
        &design("pip430", &[("apply_continue_caching_window", Bool(true))]),
    );
    assert_eq!((m.hits, m.misses), (1, 0), "{m:?}");
}

/// `ManagedCursorImpl.setAcknowledgedPosition` (both branches): a read position at or behind the
/// new mark-delete position moves to the entry after it, so a cursor never reads what it has
/// acknowledged.
#[test]
fn an_ack_past_the_read_position_moves_it() {
    let mut rows = vec![open(0, "c", Some(0))];
    rows.extend((0..10).map(|e| add(1 + e, e, 10)));
    rows.extend([ack(20, "c", 9), add(21, 10, 10), read(22, "c", 5)]);
    for strategy in ["pip430", "legacy"] {
        let m = run(&rows, &design(strategy, &[]));
        // Only entry 10 is left to read.
        assert_eq!((m.hits, m.misses), (1, 0), "{strategy}: {m:?}");
    }
}

/// `ManagedCursorImpl.asyncMarkDelete` fails a position past the last entry written ("Invalid mark
/// deleted position"): such an ack changes nothing.
#[test]
fn an_ack_past_the_last_entry_changes_nothing() {
    let mut rows = vec![open(0, "c", Some(0))];
    rows.extend((0..5).map(|e| add(1 + e, e, 10)));
    rows.extend([ack(10, "c", 9), add(11, 5, 10), read(12, "c", 10)]);
    let m = run(&rows, &design("pip430", &[]));
    assert_eq!((m.entries_read, m.hits), (6, 6), "{m:?}");
}

/// 4.0 with `cacheEvictionByMarkDeletedPosition`: `activateCursor` and
/// `onCursorMarkDeletePositionUpdated` track a cursor at its mark-delete position itself, and
/// `RangeEntryCacheImpl.invalidateEntries` removes up to it exclusive, so the slowest cursor's last
/// acknowledged entry stays cached (Pulsar's `ManagedLedgerTest
/// .invalidateEntriesFromCacheByMarkDeletePosition`).
#[test]
fn by_mark_delete_the_last_acknowledged_entry_stays() {
    let mut rows = vec![open(0, "a", None), open(0, "b", None)];
    rows.extend((0..4).map(|e| add(1 + e, e, 10)));
    rows.extend([
        read(10, "a", 4),
        read(11, "b", 4),
        ack(12, "a", 1),
        ack(13, "b", 3),
        open(14, "c", Some(0)),
    ]);
    // One-entry reads: 4.0 serves a range only when all of it is cached.
    rows.extend((0..4).map(|i| read(15 + i, "c", 1)));
    let by_mark_delete = design(
        "legacy",
        &[("eviction_by_mark_deleted_position", Bool(true))],
    );
    let m = run(&rows, &by_mark_delete);
    // a and b hit their 8; c misses entry 0 (gone) and hits 1 (a's mark-delete), 2 and 3.
    assert_eq!((m.hits, m.misses), (11, 1), "{m:?}");
}

/// A seek is a reset (`ManagedCursorImpl.internalResetCursor`): the mark-delete position goes to
/// the entry before the new read position, back as well as forward, so by mark-delete position a
/// cursor that seeks back keeps the entries it will read again.
#[test]
fn by_mark_delete_a_seek_back_moves_the_mark_delete_back() {
    let mut rows = vec![open(0, "a", None), open(0, "b", None)];
    rows.extend((0..10).map(|e| add(1 + e, e, 10)));
    rows.extend([
        read(20, "a", 10),
        ack(21, "a", 9),
        read(22, "b", 5),
        ack(23, "b", 4),
        seek(24, "a", 6),
        read(25, "b", 5),
        ack(26, "b", 9),
        read(27, "a", 4),
    ]);
    let by_mark_delete = design(
        "legacy",
        &[("eviction_by_mark_deleted_position", Bool(true))],
    );
    let m = run(&rows, &by_mark_delete);
    assert_eq!((m.hits, m.misses), (24, 0), "{m:?}");
}

/// `PersistentTopic.checkBackloggedCursor`: 4.0 keeps a cursor active while it has fewer than
/// `managedLedgerCursorBackloggedThreshold` entries to read (a negative threshold: never); master,
/// with the expected-read count off, while it has at most that many (a negative one: always).
#[test]
fn the_backlogged_threshold_is_each_branchs_own() {
    let mut rows: Vec<Row> = (0..1000).map(|e| add(e / 100, e, 10)).collect();
    rows.push(open(20, "c", Some(0))); // exactly 1000 entries to read
    rows.push(add(21, 1000, 10));
    let legacy = run(&rows, &design("legacy", &[]));
    assert_eq!(legacy.peak_cache_bytes, 0, "4.0: 1000 is not under 1000");
    let expected_reads_off = [("eviction_by_expected_read_count", Bool(false))];
    let master = run(&rows, &design("pip430", &expected_reads_off));
    assert_eq!(master.peak_cache_bytes, 10, "master: 1000 is at most 1000");

    let caught_up = [open(0, "c", None), add(1, 0, 10)];
    let negative = ("cursor_backlogged_threshold", Int(-1));
    let legacy = run(
        &caught_up,
        &design("legacy", std::slice::from_ref(&negative)),
    );
    assert_eq!(legacy.peak_cache_bytes, 0, "4.0: no backlog is under -1");
    let master = run(
        &caught_up,
        &design("pip430", &[expected_reads_off[0].clone(), negative]),
    );
    assert_eq!(master.peak_cache_bytes, 10, "master: negative means always");
}

/// With read latency, `RangeEntryCacheImpl.readFromStorage` caches what a storage read returns when
/// it completes, and `PendingReadsManager.readEntries` lets a read that a storage read under way
/// covers wait for that one instead of reading storage again: a second reader during the latency
/// misses the cache and shares the first reader's storage read.
#[test]
fn with_read_latency_a_storage_read_is_cached_when_it_completes_and_shared_meanwhile() {
    let mut rows: Vec<Row> = (0..5).map(|e| add(1 + e, e, 10)).collect(); // no cursor: not cached
    rows.extend([
        open(999, "a", Some(0)),
        open(999, "b", Some(0)),
        read(1_000, "a", 5),
        read(1_050, "b", 5), // a's storage read completes at 1100
        open(1_200, "c", Some(0)),
        read(1_201, "c", 5), // cached by now, within its time to live
    ]);
    let cfg = design("pip430", &[("storage_read_latency_ms", Int(100))]);
    let m = run(&rows, &cfg);
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (5, 10, 1), "{m:?}");
}

/// `PendingReadsManager.findPendingRead`: a read that a storage read under way covers only in part
/// waits for it for those entries and reads the rest from storage on its own, left and right of
/// it; a read between two under way reads only the gap between them.
#[test]
fn with_read_latency_a_read_overlapping_one_under_way_reads_only_the_rest() {
    let mut rows: Vec<Row> = (0..30).map(|e| add(1 + e, e, 10)).collect(); // no cursor: not cached
    rows.extend([
        open(999, "a", Some(5)),
        open(999, "b", Some(0)),
        open(999, "c", Some(10)),
        open(999, "d", Some(0)),
        read(1_000, "a", 10), // 5..=14 under way until 1100
        read(1_010, "b", 10), // 0..=9: waits for 5..=9, reads 0..=4
        read(1_020, "c", 10), // 10..=19: waits for 10..=14, reads 15..=19
        read(1_030, "d", 20), // 0..=19: all under way
    ]);
    let cfg = design("pip430", &[("storage_read_latency_ms", Int(100))]);
    let m = run(&rows, &cfg);
    assert_eq!((m.misses, m.storage_read_ops), (50, 3), "{m:?}");
    assert_eq!(m.storage_read_bytes, 200, "each entry read once");
}

/// `RangeEntryCacheImpl.readFromStorage` calls the expected-read count's supplier
/// (`ManagedCursorImpl.getNumberOfCursorsAtSamePositionOrBefore`) when the storage read completes:
/// a cursor that leaves the reader's position meanwhile is not counted, so the entries expect no
/// read once the reader has its copy and go at their time to live; a reader taken back there later
/// reads them from storage. Counted when the read was issued, they kept an expected read and the
/// TTL extension kept them cached.
#[test]
fn with_read_latency_the_expected_read_count_is_taken_when_the_storage_read_completes() {
    let mut rows: Vec<Row> = (0..30).map(|e| add(1 + e, e, 10)).collect(); // no cursor: not cached
    rows.extend([
        open(999, "a", Some(0)),
        open(999, "b", Some(0)),
        read(1_000, "a", 5),  // 0..=4 under way until 1100
        seek(1_050, "b", 20), // b leaves before it completes
        // Past the entries' time to live twice (the reader's copy marked them accessed, which
        // earns them one extension).
        seek(3_400, "b", 0),
        read(3_401, "b", 5),
    ]);
    let cfg = design("pip430", &[("storage_read_latency_ms", Int(100))]);
    let m = run(&rows, &cfg);
    assert_eq!((m.hits, m.misses), (0, 10), "{m:?}");
    assert_eq!(m.storage_read_ops, 2);
    // Without latency the storage read completes as it is issued, with b still at 0.
    let cfg = design("pip430", &[]);
    let m = run(&rows, &cfg);
    assert_eq!((m.hits, m.misses), (5, 5), "{m:?}");
}

/// `PendingReadsManager.PendingRead.readEntriesComplete`: each read that waited for a storage read
/// gets copies of its entries (`copyEntries`) that share their read counter, so each consumes an
/// expected read when it is dispatched, as the reader's own copies do. Here both readers are
/// counted and both consume theirs: nothing is left expected, and the entries go at their time to
/// live (one extension for the access) before a third reader comes.
#[test]
fn with_read_latency_a_read_that_waited_consumes_its_expected_reads() {
    let mut rows: Vec<Row> = (0..5).map(|e| add(1 + e, e, 10)).collect(); // no cursor: not cached
    rows.extend([
        open(999, "a", Some(0)),
        open(999, "b", Some(0)),
        read(1_000, "a", 5),
        read(1_050, "b", 5), // waits for a's storage read, until 1100
        open(3_400, "c", Some(0)),
        read(3_401, "c", 5),
    ]);
    let cfg = design("pip430", &[("storage_read_latency_ms", Int(100))]);
    let m = run(&rows, &cfg);
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (0, 15, 2), "{m:?}");
}

/// `RangeEntryCacheImpl.doAsyncReadEntriesByPosition`: a read that is partly served from the cache
/// holds its copies of the cached entries until its storage part completes and it is dispatched,
/// so their expected reads stay until then: an entry whose time to live ends meanwhile gets its
/// extension (`managedLedgerCacheEvictionExtendTTLOfEntriesWithRemainingExpectedReadsMaxTimes`)
/// and a later reader still finds it.
#[test]
fn with_read_latency_a_read_holds_its_cache_hits_until_it_completes() {
    let mut rows = vec![open(0, "a", Some(0))];
    rows.extend((0..5).map(|e| add(1 + e, e, 10))); // cached, expecting a's read
    rows.push(close(6, "a"));
    rows.extend((5..10).map(|e| add(7 + e, e, 10))); // no active cursor: not cached
    rows.extend([
        open(900, "a", Some(0)),
        read(990, "a", 10), // 0..=4 hit; 5..=9 from storage until 1090, past 0..=4's TTL
        open(1_500, "b", Some(0)),
        read(1_501, "b", 5),
    ]);
    let cfg = design(
        "pip430",
        &[
            ("storage_read_latency_ms", Int(100)),
            ("extend_ttl_of_recently_accessed", Bool(false)),
        ],
    );
    let m = run(&rows, &cfg);
    assert_eq!((m.hits, m.misses), (10, 5), "{m:?}");
    assert_eq!(m.requeues, 5, "0..=4, once");
}

/// `OpReadEntry.updateReadPosition`: a cursor's read position, which the active-cursor container
/// follows (`ManagedLedgerImpl.onCursorReadPositionUpdated`), moves when its read completes. In
/// 4.0 the entries behind the slowest active cursor go as it moves
/// (`invalidateEntriesUpToSlowestReaderPosition`), so while the slowest cursor's read is under way
/// a cursor behind the other reads the entries it is passing from the cache.
#[test]
fn with_read_latency_a_cursor_moves_when_its_read_completes() {
    let mut rows: Vec<Row> = (0..10).map(|e| add(1 + e, e, 10)).collect(); // no cursor: not cached
    rows.push(open(997, "b", Some(0)));
    rows.extend((10..20).map(|e| add(998, e, 10))); // cached: b is active
    rows.extend([
        open(999, "a", Some(15)),
        read(1_000, "b", 20), // from storage until 1100 (4.0 serves a range all or nothing)
        open(1_050, "c", Some(10)),
        read(1_060, "c", 5), // b is still at 0: nothing behind a and c went yet
        add(1_200, 20, 10),
    ]);
    let cfg = design("legacy", &[("storage_read_latency_ms", Int(100))]);
    let m = run(&rows, &cfg);
    assert_eq!((m.hits, m.misses, m.storage_read_ops), (5, 20, 1), "{m:?}");
    assert_eq!(m.invalidated_entries, 5, "10..=14, once b's read completed");
}

/// `PersistentTopic.checkBackloggedCursor` asks `ManagedCursorImpl.getNumberOfEntries`, counted from
/// the read position, which a read under way has not moved yet: the stats task that runs while
/// it is under way sees the whole backlog and deactivates the cursor, and 4.0 drops what it cached
/// when its last active cursor leaves.
#[test]
fn with_read_latency_the_stats_task_counts_the_backlog_from_where_the_read_started() {
    let mut rows: Vec<Row> = (0..10).map(|e| add(1 + e, e, 10)).collect(); // no cursor: not cached
    rows.push(open(500, "c", Some(0))); // a backlog of 10: active
    rows.extend((10..25).map(|e| add(600, e, 10))); // cached
    rows.extend([
        read(1_000, "c", 10), // from storage until 1100; the stats task runs meanwhile
        read(1_200, "c", 5),  // 10..=14: gone with the cache
    ]);
    let cfg = design(
        "legacy",
        &[
            ("storage_read_latency_ms", Int(100)),
            ("cursor_backlogged_threshold", Int(20)),
            ("backlog_check_interval_ms", Int(1_050)),
        ],
    );
    let m = run(&rows, &cfg);
    assert_eq!((m.hits, m.misses), (0, 15), "{m:?}");
    assert_eq!(m.invalidated_entries, 15);
}

/// A read spanning two ledgers reads the second once the first part completed and moved the read
/// position (`OpReadEntry.checkReadCompletion`): the second part's count has the reader at the
/// second ledger, as without latency.
#[test]
fn with_read_latency_each_part_of_a_read_counts_from_where_that_part_starts() {
    let mut rows: Vec<Row> = (0..5).map(|e| add_in(1 + e, 1, e)).collect();
    rows.extend((0..5).map(|e| add_in(10 + e, 2, e))); // no cursor: not cached
    rows.extend([
        open_at(999, "a", 1, 0),
        open_at(999, "b", 1, 2),
        read(1_000, "a", 10),
        read(3_401, "b", 8), // past two TTLs: what ledger 2's count kept for b
    ]);
    let outcome = |ms: i64| {
        let m = run(
            &rows,
            &design("pip430", &[("storage_read_latency_ms", Int(ms))]),
        );
        (m.hits, m.misses)
    };
    assert_eq!(outcome(0), (5, 13));
    assert_eq!(outcome(100), (5, 13));
}

/// `ManagedCursorImpl.setAcknowledgedPosition`: an acknowledgement past the read position moves it
/// on at once and tells the container, a read under way or not: a storage read completing after it
/// does not count the cursor that acknowledged past it.
#[test]
fn with_read_latency_an_ack_past_a_read_under_way_moves_the_cursor_at_once() {
    let mut rows: Vec<Row> = (0..10).map(|e| add(1 + e, e, 10)).collect(); // no cursor: not cached
    rows.extend([
        open(900, "a", Some(0)),
        open(900, "b", Some(5)),
        read(990, "b", 5),   // 5..=9 until 1090
        read(1_000, "a", 5), // 0..=4 until 1100
        ack(1_050, "a", 9),  // a's read position goes to 10: not at or before b any more
        seek(3_400, "b", 5), // past two TTLs
        read(3_401, "b", 5),
    ]);
    let cfg = design(
        "pip430",
        &[
            ("storage_read_latency_ms", Int(100)),
            ("exact_cursor_counts", Bool(true)),
        ],
    );
    let m = run(&rows, &cfg);
    assert_eq!((m.hits, m.misses), (0, 15), "{m:?}");
}

/// `ManagedCursorImpl.setReadPosition` takes only a position past the mark-delete position: a read
/// that completes after an ack went past its entries leaves the read position where the ack put
/// it (here a stale read, delivered because cursor epochs are off).
#[test]
fn a_read_completing_after_an_ack_past_it_does_not_move_the_cursor_back() {
    let mut rows: Vec<Row> = (0..30).map(|e| add(1 + e, e, 10)).collect(); // no cursor: uncached
    rows.extend([
        open(999, "c", Some(0)),
        read(1_000, "c", 10), // misses: in flight until 1100
        seek(1_010, "c", 0),
        ack(1_020, "c", 15), // the read position goes to 16
        read(1_200, "c", 100),
    ]);
    let cfg = design(
        "pip430",
        &[
            ("storage_read_latency_ms", Int(100)),
            ("cursor_epochs", Bool(false)),
        ],
    );
    let m = run(&rows, &cfg);
    assert_eq!(m.entries_read, 10 + 14, "the last read starts at 16: {m:?}");
}

/// `ActiveManagedCursorContainerImpl.moveNodeToNewPosition` (master): a cursor that moves while it
/// stays the list's tail touches no counter, so the cursors it left at its old position keep
/// counting it until the next rebuild (a query with at least half the cursors moved). The lab
/// follows Pulsar's container by default; `exact_cursor_counts=True` counts right.
#[test]
fn a_tail_move_leaves_pulsars_count_too_high_until_the_next_rebuild() {
    let rows = tail_move_rows(0);
    let pulsar = run(&rows, &design("pip430", &[]));
    let exact = run(
        &rows,
        &design("pip430", &[("exact_cursor_counts", Bool(true))]),
    );
    assert_eq!(exact.hits + 1, pulsar.hits, "{exact:?}\n{pulsar:?}");
    assert_eq!(exact.misses, pulsar.misses + 1);
    assert_eq!(
        pulsar,
        run(
            &rows,
            &design("pip430", &[("exact_cursor_counts", Bool(false))])
        )
    );
}
