//! The managed ledger and its cursors: PIP-430's read-count flow end to end, Pulsar's partial-hit
//! read cases, legacy mode, storage, and the three races of the cursor-epoch proposal (PIP-269),
//! each shown wrong without epochs and right with them.

use ledgercache::broker::ledger::{
    LedgerConfig, ManagedCursor, ManagedLedger, ReadOutcome, SkipMode, StartAt,
};
use ledgercache::broker::read_flow::RedeliveryReason;
use ledgercache::broker::storage::{
    FileStorage, MemoryStorage, ReadLatency, Storage, StorageHandle,
};
use ledgercache::{
    CacheConfig, CachedEntry, EntryCacheManager, Error, ManualClock, Payload, Position,
    SettingValue,
};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

struct Fixture {
    clock: Arc<ManualClock>,
    manager: EntryCacheManager,
    storage: StorageHandle,
}

fn fixture(settings: &[(&str, SettingValue)]) -> Fixture {
    fixture_with(settings, Arc::new(MemoryStorage::new()))
}

/// A manager over `store` with `settings`. The continue-caching window (which the library applies
/// by default, from the ledger's load on) is off unless a setting turns it on, so that what a
/// scenario publishes before its cursors are active stays uncached.
fn fixture_with(settings: &[(&str, SettingValue)], store: Arc<dyn Storage>) -> Fixture {
    let mut cfg = CacheConfig::default();
    cfg.set("apply_continue_caching_window", SettingValue::Bool(false))
        .unwrap();
    for (k, v) in settings {
        cfg.set(k, v.clone()).unwrap();
    }
    let clock = Arc::new(ManualClock::new(0));
    let manager = EntryCacheManager::new(cfg, clock.clone(), false).unwrap();
    Fixture {
        clock,
        manager,
        storage: StorageHandle::new(store),
    }
}

impl Fixture {
    fn ledger(&self, config: LedgerConfig) -> ManagedLedger {
        ManagedLedger::open(
            "persistent://t/ns/topic",
            &self.manager,
            self.storage.clone(),
            config,
        )
        .unwrap()
    }
}

fn publish(ml: &ManagedLedger, n: usize) -> Vec<Position> {
    (0..n)
        .map(|i| {
            ml.add_entry(Payload::from(format!("entry-{i}").into_bytes()))
                .unwrap()
        })
        .collect()
}

fn delivered(outcome: ReadOutcome) -> Vec<CachedEntry> {
    match outcome {
        ReadOutcome::Delivered(e) => e,
        ReadOutcome::Discarded => panic!("read was discarded"),
    }
}

fn read_all(c: &ManagedCursor, n: u64) -> Vec<Position> {
    let entries = delivered(c.read_entries(n).unwrap());
    entries
        .iter()
        .map(|e| {
            e.release();
            e.position()
        })
        .collect()
}

/// A ledger that rolls over every `entries` entries, with no minimum rollover time (the clock of
/// these scenarios barely moves).
fn rolling_every(entries: u64) -> LedgerConfig {
    LedgerConfig {
        max_entries_per_ledger: entries,
        min_rollover_ms: 0,
        ..Default::default()
    }
}

fn latency() -> LedgerConfig {
    LedgerConfig {
        read_latency: ReadLatency {
            fixed_ns: 5_000_000,
            per_entry_ns: 0,
            per_kib_ns: 0,
        },
        ..Default::default()
    }
}

#[test]
fn publish_counts_active_cursors_and_releases_consume_them() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig::default());
    let cursors: Vec<_> = (0..3)
        .map(|i| {
            ml.open_cursor(&format!("sub-{i}"), StartAt::Latest, true)
                .unwrap()
        })
        .collect();
    let p = publish(&ml, 1)[0];
    assert_eq!(ml.cache().expected_reads(p), Some(Some(3)));
    for (i, c) in cursors.iter().enumerate() {
        assert_eq!(read_all(c, 10), vec![p]);
        assert_eq!(ml.cache().expected_reads(p), Some(Some(2 - i as i32)));
    }
    assert_eq!(ml.storage_stats().read_ops, 0, "every read was a hit");
}

#[test]
fn a_late_reader_caches_with_the_cursors_at_or_before_it() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig::default());
    let ps = publish(&ml, 10); // no active cursor: nothing cached
    assert_eq!(ml.cache().len(), 0);
    let tail = ml.open_cursor("tail", StartAt::Latest, true).unwrap();
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let b = ml.open_cursor("b", StartAt::Earliest, true).unwrap();
    assert_eq!(tail.count_at_or_before(), 3);
    assert_eq!(a.count_at_or_before(), 2);
    // `a` reads from storage: a and b are at or before it, the tail cursor is not.
    let got = delivered(a.read_entries(10).unwrap());
    assert_eq!(ml.storage_stats().read_ops, 1);
    assert_eq!(ml.cache().expected_reads(ps[0]), Some(Some(2)));
    got.iter().for_each(|e| {
        e.release();
    });
    assert_eq!(ml.cache().expected_reads(ps[0]), Some(Some(1)));
    // `b` is served from the cache, and leaves nothing expected.
    read_all(&b, 10);
    assert_eq!(ml.storage_stats().read_ops, 1);
    assert_eq!(ml.cache().expected_reads(ps[9]), Some(Some(0)));
    // A reader with nobody at or before it does not cache (count 0).
    let solo = fixture(&[]);
    let ml2 = solo.ledger(LedgerConfig::default());
    publish(&ml2, 5);
    let c = ml2.open_cursor("c", StartAt::Earliest, false).unwrap();
    read_all(&c, 5);
    assert_eq!(ml2.cache().len(), 0);
}

#[test]
fn a_replay_add_keeps_an_entry_through_a_size_pass_that_removes_its_neighbours() {
    let f = fixture(&[("extend_ttl_of_recently_accessed", SettingValue::Bool(false))]);
    let ml = f.ledger(LedgerConfig::default());
    let c = ml.open_cursor("ks", StartAt::Latest, true).unwrap();
    let ps = publish(&ml, 5);
    read_all(&c, 5); // all consumed: counts 0
    c.add_to_replay(&[ps[2]], RedeliveryReason::HoldBack)
        .unwrap();
    assert_eq!(ml.cache().expected_reads(ps[2]), Some(Some(1)));
    f.manager.evict_bytes(4 * 7).unwrap(); // as much as the four neighbours hold
    assert_eq!(ml.cache().positions(), vec![ps[2]]);
    let replayed = delivered(c.read_replay(10).unwrap());
    assert_eq!(
        replayed
            .iter()
            .map(ledgercache::CachedEntry::position)
            .collect::<Vec<_>>(),
        vec![ps[2]]
    );
    assert_eq!(ml.storage_stats().read_ops, 0);
    assert!(c.replay_queue().unwrap().is_empty());
}

#[test]
fn deleting_a_ledger_invalidates_its_entries_and_moves_cursors_on() {
    let f = fixture(&[]);
    let ml = f.ledger(rolling_every(10));
    let c = ml.open_cursor("s", StartAt::Latest, true).unwrap();
    let ps = publish(&ml, 25);
    assert_eq!(ml.ledgers().len(), 3);
    let first = ps[0].ledger_id;
    assert!(ml.cache().contains(ps[3]));
    ml.delete_ledger(first).unwrap();
    assert!(!ml.cache().contains(ps[3]));
    assert!(ml.cache().contains(ps[12]));
    assert_eq!(
        c.read_position().unwrap(),
        ps[10],
        "the cursor moved to the next ledger"
    );
    assert_eq!(read_all(&c, 100).len(), 15);
    assert!(matches!(
        ml.delete_ledger(ps[24].ledger_id),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn rollover_reads_across_ledgers_in_order() {
    let f = fixture(&[]);
    let ml = f.ledger(rolling_every(7));
    let ps = publish(&ml, 20);
    let c = ml.open_cursor("s", StartAt::Earliest, true).unwrap();
    assert_eq!(read_all(&c, 100), ps);
    assert_eq!(
        ml.ledgers().iter().map(|l| l.entries).collect::<Vec<_>>(),
        vec![7, 7, 6]
    );
    assert_eq!(c.backlog().unwrap(), 20);
    c.mark_delete(ps[9]).unwrap();
    assert_eq!(c.backlog().unwrap(), 10);
}

/// A read that spans two ledgers moves its cursor's read position into the second ledger before it
/// reads there (Pulsar's `OpReadEntry.updateReadPosition`, then `checkReadCompletion`), so the
/// second ledger's storage read counts a cursor the reader passed in the first one.
#[test]
fn a_read_spanning_ledgers_counts_the_cursors_it_passed_in_the_first() {
    let f = fixture(&[]);
    let ml = f.ledger(rolling_every(4));
    let ps = publish(&ml, 8); // no active cursor: nothing cached
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let b = ml.open_cursor("b", StartAt::At(ps[2]), true).unwrap();
    let got = delivered(a.read_entries(8).unwrap());
    assert_eq!(got.len(), 8);
    assert_eq!(
        ml.storage_stats().read_ops,
        2,
        "one storage read per ledger"
    );
    // In the first ledger only `a` is at or before `a`; in the second, `b` is too.
    assert_eq!(ml.cache().expected_reads(ps[2]), Some(Some(1)));
    assert_eq!(ml.cache().expected_reads(ps[4]), Some(Some(2)));
    got.iter().for_each(|e| {
        e.release();
    });
    assert_eq!(ml.cache().expected_reads(ps[4]), Some(Some(1)));
    // `b` reads the second ledger's entries from the cache.
    assert_eq!(read_all(&b, 6), ps[2..].to_vec());
    assert_eq!(ml.storage_stats().read_ops, 2);
}

/// With read latency, a read spanning ledgers reads the second one only when the first one's
/// storage read has completed, from the moved read position.
#[test]
fn with_latency_a_read_spanning_ledgers_reads_them_one_after_the_other() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig {
        max_entries_per_ledger: 4,
        min_rollover_ms: 0,
        ..latency()
    });
    let ps = publish(&ml, 8);
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let _b = ml.open_cursor("b", StartAt::At(ps[2]), true).unwrap();
    let id = a.read_entries_async(8).unwrap();
    assert_eq!(ml.storage_stats().read_ops, 1, "the second ledger waits");
    f.clock.advance_ms(5);
    ml.poll();
    assert_eq!(ml.storage_stats().read_ops, 2);
    assert_eq!(
        a.read_position().unwrap(),
        ps[4],
        "moved into the second ledger"
    );
    assert!(!ml.is_read_done(id));
    f.clock.advance_ms(5);
    ml.poll();
    let got = delivered(ml.take_read(id).unwrap().unwrap());
    assert_eq!(
        got.iter()
            .map(ledgercache::CachedEntry::position)
            .collect::<Vec<_>>(),
        ps
    );
    assert_eq!(ml.cache().expected_reads(ps[4]), Some(Some(2)));
    // The next ledger's read starts when the one before completed: one poll long after both
    // latencies completes the whole read.
    let c = ml.open_cursor("c", StartAt::Earliest, true).unwrap();
    ml.cache().clear();
    let id = c.read_entries_async(8).unwrap();
    f.clock.advance_ms(100);
    assert_eq!(ml.poll(), 1);
    assert_eq!(delivered(ml.take_read(id).unwrap().unwrap()).len(), 8);
}

/// Entries 0..99 in storage; `cached` already in the cache; reading 0..99 must read exactly the
/// missing sub-ranges, each once, and return all 100 in order.
fn partial_hit_case(cached: &[i64]) {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig::default());
    let ps = publish(&ml, 100);
    for &e in cached {
        ml.cache()
            .insert(
                ps[e as usize],
                Payload::from(format!("entry-{e}").into_bytes()),
                0,
                None,
            )
            .unwrap();
    }
    let c = ml.open_cursor("s", StartAt::Earliest, false).unwrap();
    let got = delivered(c.read_entries(100).unwrap());
    assert_eq!(
        got.iter()
            .map(ledgercache::CachedEntry::position)
            .collect::<Vec<_>>(),
        ps
    );
    for e in &got {
        assert_eq!(
            e.data(),
            format!("entry-{}", e.position().entry_id).as_bytes()
        );
    }
    let mut sorted = cached.to_vec();
    sorted.sort();
    let mut gaps = 0;
    let mut prev = -1;
    for &e in &sorted {
        if e > prev + 1 {
            gaps += 1;
        }
        prev = e;
    }
    if prev < 99 {
        gaps += 1;
    }
    let s = ml.storage_stats();
    assert_eq!(
        (s.read_ops, s.read_entries),
        (gaps, 100 - cached.len() as u64),
        "cached {cached:?}"
    );
}

#[test]
fn partial_hits_read_exactly_the_missing_sub_ranges() {
    for cached in [
        &[50][..],
        &[0],
        &[99],
        &[50, 51],
        &[0, 1],
        &[98],
        &[5, 15, 75, 76, 78],
    ] {
        partial_hit_case(cached);
    }
}

/// A read whose second ledger cannot be read delivers the first ledger's entries and leaves the
/// cursor at the second (`OpReadEntry.internalReadEntriesFailed`: `if (!entries.isEmpty())
/// complete(ctx)`); one whose first ledger cannot be read fails.
#[test]
fn a_read_failing_in_its_second_ledger_delivers_the_first() {
    let store = Arc::new(FailingStorage::new());
    let f = fixture_with(&[], store.clone());
    let ml = f.ledger(rolling_every(4));
    let ps = publish(&ml, 8);
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    store
        .failing_ledger
        .store(ps[4].ledger_id, Ordering::Relaxed);
    assert_eq!(read_all(&a, 8), ps[..4].to_vec());
    assert_eq!(a.read_position().unwrap(), ps[4]);
    assert!(
        a.read_entries(8).is_err(),
        "the first ledger of this read fails: the read fails"
    );
    assert_eq!(a.read_position().unwrap(), ps[4]);
    store.failing_ledger.store(-1, Ordering::Relaxed);
    assert_eq!(read_all(&a, 8), ps[4..].to_vec());
}

/// Fails reads that do not start at entry 0 (while armed), and every read of one ledger (`-1`:
/// none).
struct FailingStorage {
    inner: MemoryStorage,
    armed: AtomicBool,
    failing_ledger: AtomicI64,
}

impl FailingStorage {
    fn new() -> Self {
        FailingStorage {
            inner: MemoryStorage::new(),
            armed: AtomicBool::new(false),
            failing_ledger: AtomicI64::new(-1),
        }
    }
}

impl Storage for FailingStorage {
    fn create_ledger(&self, owner: &str) -> ledgercache::Result<i64> {
        self.inner.create_ledger(owner)
    }
    fn ledgers(&self, owner: &str) -> ledgercache::Result<Vec<(i64, u64)>> {
        self.inner.ledgers(owner)
    }
    fn append(&self, ledger_id: i64, data: &[u8]) -> ledgercache::Result<i64> {
        self.inner.append(ledger_id, data)
    }
    fn read(&self, ledger_id: i64, first: i64, last: i64) -> ledgercache::Result<Vec<Payload>> {
        if self.failing_ledger.load(Ordering::Relaxed) == ledger_id {
            return Err(Error::Storage(format!(
                "injected failure reading ledger {ledger_id}"
            )));
        }
        if self.armed.load(Ordering::Relaxed) && first != 0 {
            return Err(Error::Storage(format!(
                "injected failure reading {first}..={last}"
            )));
        }
        self.inner.read(ledger_id, first, last)
    }
    fn delete_ledger(&self, ledger_id: i64) -> ledgercache::Result<()> {
        self.inner.delete_ledger(ledger_id)
    }
    fn describe(&self) -> String {
        "failing".into()
    }
}

#[test]
fn a_failing_sub_read_falls_back_to_one_full_read() {
    let store = Arc::new(FailingStorage::new());
    let f = fixture_with(&[], store.clone());
    let ml = f.ledger(LedgerConfig::default());
    let ps = publish(&ml, 100);
    ml.cache()
        .insert(ps[50], Payload::from(b"entry-50".to_vec()), 0, None)
        .unwrap();
    store.armed.store(true, Ordering::Relaxed);
    let c = ml.open_cursor("s", StartAt::Earliest, false).unwrap();
    let got = delivered(c.read_entries(100).unwrap());
    assert_eq!(got.len(), 100);
    // 0..49 succeeds, 51..99 fails, then one full read of 0..99.
    let s = ml.storage_stats();
    assert_eq!((s.read_ops, s.read_entries), (2, 150));
    // When the full read fails too, the read fails with the storage error.
    let c2 = ml.open_cursor("s2", StartAt::At(ps[10]), false).unwrap();
    assert!(matches!(c2.read_entries(5), Err(Error::Storage(_))));
}

#[test]
fn overlapping_reads_in_flight_share_one_storage_read() {
    let f = fixture(&[]);
    let ml = f.ledger(latency());
    let ps = publish(&ml, 20);
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let b = ml.open_cursor("b", StartAt::Earliest, true).unwrap();
    let ra = a.read_entries_async(20).unwrap();
    let rb = b.read_entries_async(10).unwrap();
    assert_eq!(ml.poll(), 0, "nothing is due yet");
    assert!(!ml.is_read_done(ra));
    f.clock.advance_ms(5);
    assert_eq!(ml.poll(), 2);
    assert_eq!(delivered(ml.take_read(ra).unwrap().unwrap()).len(), 20);
    assert_eq!(delivered(ml.take_read(rb).unwrap().unwrap()).len(), 10);
    assert_eq!(ml.storage_stats().read_ops, 1);
    assert_eq!(b.read_position().unwrap(), ps[10]);
}

/// `PendingReadsManager.findPendingRead`: a read that a storage read in flight covers only in part
/// waits for it for the entries they share and reads the rest itself; a read spanning two in flight
/// reads only what lies between them.
#[test]
fn a_read_overlapping_one_in_flight_reads_only_the_rest() {
    let f = fixture(&[]);
    let ml = f.ledger(latency());
    let ps = publish(&ml, 12);
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let b = ml.open_cursor("b", StartAt::At(ps[2]), true).unwrap();
    let c = ml.open_cursor("c", StartAt::Earliest, true).unwrap();
    let ra = a.read_entries_async(5).unwrap(); // 0..=4
    f.clock.advance_ms(1);
    let rb = b.read_entries_async(5).unwrap(); // 2..=6: waits for 2..=4, reads 5..=6
    let rc = c.read_entries_async(12).unwrap(); // 0..=11: waits for both, reads 7..=11
    let s = ml.storage_stats();
    assert_eq!((s.read_ops, s.read_entries), (3, 12));
    f.clock.advance_ms(4);
    assert_eq!(ml.poll(), 1, "a's read is in, b's waits for its own");
    assert!(!ml.is_read_done(rb) && !ml.is_read_done(rc));
    f.clock.advance_ms(1);
    assert_eq!(ml.poll(), 2);
    let got = |r| {
        delivered(ml.take_read(r).unwrap().unwrap())
            .iter()
            .map(ledgercache::CachedEntry::position)
            .collect::<Vec<_>>()
    };
    assert_eq!(got(ra), ps[..5]);
    assert_eq!(got(rb), ps[2..7]);
    assert_eq!(got(rc), ps[..]);
    assert_eq!(ml.storage_stats().read_ops, 3);
}

/// A read whose gaps between cache hits both wait for one storage read in flight takes from it
/// only the gaps' entries: its hits stay the cache's entries, so releasing them consumes the
/// cached entries' expected reads.
#[test]
fn a_read_joining_one_storage_read_for_two_gaps_keeps_its_hits_between_them() {
    let f = fixture(&[]);
    let ml = f.ledger(latency());
    let ps = publish(&ml, 10);
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let b = ml.open_cursor("b", StartAt::At(ps[2]), true).unwrap();
    let x = ml.open_cursor("x", StartAt::At(ps[4]), true).unwrap();
    let ra = a.read_entries_async(10).unwrap(); // 0..=9 in flight
    let got_x = delivered(x.read_entries(2).unwrap()); // 4..=5 at once: cached for a, b and x
    assert_eq!(ml.cache().expected_reads(ps[4]), Some(Some(3)));
    let rb = b.read_entries_async(6).unwrap(); // 2..=7: hits 4..=5, both gaps wait for a's read
    assert_eq!(ml.storage_stats().read_ops, 2, "b reads nothing itself");
    f.clock.advance_ms(5);
    assert_eq!(ml.poll(), 2);
    let got_b = delivered(ml.take_read(rb).unwrap().unwrap());
    let positions: Vec<Position> = got_b
        .iter()
        .map(ledgercache::CachedEntry::position)
        .collect();
    assert_eq!(positions, ps[2..8]);
    for e in got_b {
        e.release();
    }
    assert_eq!(
        ml.cache().expected_reads(ps[4]),
        Some(Some(2)),
        "b's hit was the cached entry"
    );
    for e in got_x
        .into_iter()
        .chain(delivered(ml.take_read(ra).unwrap().unwrap()))
    {
        e.release();
    }
}

/// A storage read that finds part of its range cached by another meanwhile: its reader keeps the
/// entries it read, with their own count (`RangeEntryCacheImpl.readFromStorage` returns what it
/// created whether `insert` took it), so releasing them does not consume the expected reads of the
/// entries the other read cached. (A read that completes at once joins no read in flight.)
#[test]
fn a_storage_read_of_entries_cached_meanwhile_leaves_their_count() {
    let f = fixture(&[]);
    let ml = f.ledger(latency());
    let ps = publish(&ml, 8);
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let b = ml.open_cursor("b", StartAt::At(ps[2]), true).unwrap();
    let ra = a.read_entries_async(5).unwrap();
    // `b`'s read completes at once: 2..=6, cached for `a` and `b`.
    let got_b = b.read_entries(5).unwrap();
    assert_eq!(ml.storage_stats().read_ops, 2);
    assert_eq!(ml.cache().expected_reads(ps[2]), Some(Some(2)));
    f.clock.advance_ms(5);
    assert_eq!(ml.poll(), 1);
    // `a`'s read found 2..=4 cached: it keeps its own, and the cached ones still expect a read.
    for e in delivered(ml.take_read(ra).unwrap().unwrap()) {
        e.release();
    }
    assert_eq!(
        ml.cache().expected_reads(ps[2]),
        Some(Some(2)),
        "still `b`'s"
    );
    for e in delivered(got_b) {
        e.release();
    }
    assert_eq!(ml.cache().expected_reads(ps[2]), Some(Some(1)));
}

/// `ManagedCursorImpl.setReadPosition` takes only a position past the mark-delete position: a read
/// completing after a mark-delete went past its entries leaves the read position after the
/// mark-delete.
#[test]
fn a_read_completing_after_a_mark_delete_past_it_keeps_the_read_position() {
    let f = fixture(&[]);
    let ml = f.ledger(latency());
    let ps = publish(&ml, 20);
    let c = ml.open_cursor("c", StartAt::Earliest, true).unwrap();
    let read = c.read_entries_async(10).unwrap();
    c.mark_delete(ps[15]).unwrap();
    assert_eq!(c.read_position().unwrap(), ps[16]);
    // Past the last entry written: refused (`asyncMarkDelete`'s "Invalid mark deleted position").
    let past = Position::new(ps[19].ledger_id, ps[19].entry_id + 1);
    assert!(matches!(
        c.mark_delete(past),
        Err(Error::InvalidArgument {
            name: "position",
            ..
        })
    ));
    assert_eq!(c.mark_delete_position().unwrap(), ps[15]);
    f.clock.advance_ms(5);
    assert_eq!(ml.poll(), 1);
    assert_eq!(delivered(ml.take_read(read).unwrap().unwrap()).len(), 10);
    assert_eq!(c.read_position().unwrap(), ps[16], "not back to ps[10]");
}

#[test]
fn completions_follow_the_manual_clock() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig {
        read_latency: ReadLatency {
            fixed_ns: 1_000_000,
            per_entry_ns: 1_000_000,
            per_kib_ns: 0,
        },
        ..Default::default()
    });
    publish(&ml, 30);
    let slow = ml.open_cursor("slow", StartAt::Earliest, false).unwrap();
    let fast = ml
        .open_cursor(
            "fast",
            StartAt::At(Position::new(ml.ledgers()[0].id, 20)),
            false,
        )
        .unwrap();
    let r_slow = slow.read_entries_async(10).unwrap(); // 11 ms
    let r_fast = fast.read_entries_async(2).unwrap(); // 3 ms
    f.clock.advance_ms(3);
    ml.poll();
    assert!(ml.is_read_done(r_fast) && !ml.is_read_done(r_slow));
    f.clock.advance_ms(8);
    ml.poll();
    assert!(ml.is_read_done(r_slow));
}

#[test]
fn legacy_mode_invalidates_up_to_the_slowest_reader() {
    let f = fixture(&[("eviction_by_expected_read_count", SettingValue::Bool(false))]);
    let ml = f.ledger(LedgerConfig::default());
    let c1 = ml.open_cursor("c1", StartAt::Latest, true).unwrap();
    let c2 = ml.open_cursor("c2", StartAt::Latest, true).unwrap();
    let ps = publish(&ml, 10);
    assert_eq!(ml.cache().len(), 10);
    assert_eq!(
        ml.cache().expected_reads(ps[0]),
        Some(None),
        "no read counters before PIP-430"
    );
    read_all(&c1, 10);
    assert_eq!(ml.cache().len(), 10, "c2 has not read them yet");
    read_all(&c2, 5);
    assert_eq!(ml.cache().len(), 5);
    read_all(&c2, 5);
    assert_eq!(ml.cache().len(), 0);
    assert_eq!(ml.storage_stats().read_ops, 0);
}

#[test]
fn legacy_mode_by_mark_delete_keeps_unacknowledged_entries() {
    let f = fixture(&[
        ("eviction_by_expected_read_count", SettingValue::Bool(false)),
        (
            "eviction_by_mark_deleted_position",
            SettingValue::Bool(true),
        ),
    ]);
    let ml = f.ledger(LedgerConfig::default());
    let c = ml.open_cursor("c", StartAt::Latest, true).unwrap();
    let ps = publish(&ml, 10);
    read_all(&c, 10);
    assert_eq!(ml.cache().len(), 10);
    // The cursor is tracked at its mark-delete position itself and the invalidation removes up to
    // it exclusive: the last acknowledged entry stays (Pulsar's own
    // `ManagedLedgerTest.invalidateEntriesFromCacheByMarkDeletePosition`, branch-4.0).
    c.mark_delete(ps[3]).unwrap();
    assert_eq!(ml.cache().len(), 7);
    assert!(ml.cache().contains(ps[3]));
}

#[test]
fn continue_caching_window_after_the_last_active_cursor_leaves() {
    let f = fixture(&[
        ("eviction_time_threshold_ms", SettingValue::Int(100)), // window: 200 ms
        ("apply_continue_caching_window", SettingValue::Bool(true)),
    ]);
    let ml = f.ledger(LedgerConfig::default());
    // Pulsar's container starts its window as the topic loads
    // (`ActiveManagedCursorContainerImpl`'s constructor sets `cursorRemovedTimestampMillis`): a
    // publish before any cursor was active is cached, uncounted, while the window lasts.
    let loaded = publish(&ml, 1)[0];
    assert_eq!(ml.cache().expected_reads(loaded), Some(None));
    f.clock.advance_ms(250);
    assert!(!ml.cache().contains(publish(&ml, 1)[0]), "window over");
    let c = ml.open_cursor("c", StartAt::Latest, true).unwrap();
    c.set_active(false).unwrap();
    let p = publish(&ml, 1)[0];
    assert_eq!(
        ml.cache().expected_reads(p),
        Some(None),
        "cached, with no reads expected"
    );
    // A Key_Shared hold-back adds a read only to an entry with a read-count handler
    // (`PersistentStickyKeyDispatcherMultipleConsumers.filterAndGroupEntriesForDispatching`): one
    // cached expecting none has none, so it stays uncounted (and gets no TTL extensions).
    c.add_to_replay(&[p], RedeliveryReason::HoldBack).unwrap();
    assert_eq!(ml.cache().expected_reads(p), Some(None));
    f.clock.advance_ms(250);
    let q = publish(&ml, 1)[0];
    assert!(!ml.cache().contains(q));
}

#[test]
fn file_storage_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let ps = {
        let f = fixture_with(&[], Arc::new(FileStorage::open(dir.path()).unwrap()));
        let ml = f.ledger(rolling_every(40));
        publish(&ml, 100)
    };
    let f = fixture_with(&[], Arc::new(FileStorage::open(dir.path()).unwrap()));
    let ml = f.ledger(rolling_every(40));
    assert_eq!(ml.entry_count(), 100);
    let c = ml.open_cursor("s", StartAt::Earliest, false).unwrap();
    let got = delivered(c.read_entries(100).unwrap());
    assert_eq!(
        got.iter()
            .map(ledgercache::CachedEntry::position)
            .collect::<Vec<_>>(),
        ps
    );
    assert_eq!(got[42].data(), b"entry-42");
    // A broker opening a managed ledger starts a new ledger (`ManagedLedgerImpl.initializeBookKeeper`).
    let next = ml.add_entry(Payload::from(b"more".to_vec())).unwrap();
    assert!(next.ledger_id > ps[99].ledger_id, "{next:?}");
    assert_eq!(next.entry_id, 0);
    assert_eq!(ml.ledgers().len(), 4);
}

/// Pulsar's rollover: a ledger is full at `max_entries_per_ledger` only once it is older than the
/// minimum rollover time, and it is full at the maximum rollover time whatever it holds; the
/// entry that finds it full is its last, and the next ledger's age counts from then.
#[test]
fn a_ledger_rolls_over_by_entries_only_after_the_minimum_time_and_always_at_the_maximum() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig {
        max_entries_per_ledger: 5,
        min_rollover_ms: 60_000,
        max_rollover_ms: 300_000,
        ..Default::default()
    });
    let entries = |ml: &ManagedLedger| ml.ledgers().iter().map(|l| l.entries).collect::<Vec<_>>();
    publish(&ml, 8);
    assert_eq!(
        entries(&ml),
        vec![8],
        "younger than the minimum: no rollover"
    );
    f.clock.advance_ms(60_001);
    publish(&ml, 1);
    assert_eq!(
        entries(&ml),
        vec![9, 0],
        "this entry found it full: it is the last, and the next ledger is created at once"
    );
    publish(&ml, 6);
    assert_eq!(entries(&ml), vec![9, 6], "the next ledger is young again");
    f.clock.advance_ms(240_000);
    publish(&ml, 1);
    assert_eq!(entries(&ml), vec![9, 7, 0]);
    publish(&ml, 1);
    assert_eq!(entries(&ml), vec![9, 7, 1]);
    f.clock.advance_ms(299_999);
    publish(&ml, 1);
    assert_eq!(
        entries(&ml),
        vec![9, 7, 2],
        "not full: under the entries, short of the age"
    );
    f.clock.advance_ms(1);
    publish(&ml, 2);
    assert_eq!(entries(&ml), vec![9, 7, 3, 1], "full by age alone");
}

#[test]
fn epoch_increase_blocks_reads_and_conflicts() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig::default());
    let ps = publish(&ml, 10);
    let c = ml.open_cursor("s", StartAt::Earliest, true).unwrap();
    assert_eq!(c.start_increase_epoch(ps[3]).unwrap(), 0);
    assert!(matches!(c.read_entries(1), Err(Error::CursorModifying(_))));
    assert!(matches!(
        c.start_increase_epoch(ps[4]),
        Err(Error::CursorEpochConflict(_))
    ));
    assert!(matches!(
        c.seek(ps[4], false),
        Err(Error::CursorEpochConflict(_))
    ));
    assert!(c.end_increase_epoch().unwrap());
    assert_eq!(c.stats().unwrap().epoch_increase_count, 1);
    assert_eq!(read_all(&c, 1), vec![ps[3]]);
    assert!(
        !c.set_read_position(ps[0], 0).unwrap(),
        "epoch 0 is outdated"
    );
    assert!(c.set_read_position(ps[0], 1).unwrap());
    for op in [0, 1, 2, 3] {
        match op {
            0 => c.rewind().unwrap(),
            1 => c.skip(2, SkipMode::Exclude).unwrap(),
            2 => c.reset(ps[5]).unwrap(),
            _ => c.clear_backlog().unwrap(),
        }
    }
    let s = c.stats().unwrap();
    assert_eq!((s.epoch, s.epoch_increase_count, s.backlog), (5, 5, 0));
    assert_eq!(
        s.read_position,
        ml.ledgers()
            .last()
            .map(|l| Position::new(l.id, 10))
            .unwrap()
    );
}

/// Scenario 1: a replay read in flight while the redelivery set is cleared and the read position
/// reset. Returns what was delivered after the reset, and the cursor's out-of-order count.
fn scenario_replay_read_vs_reset(epochs: bool) -> (Vec<i64>, u64) {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig {
        cursor_epochs: epochs,
        ..latency()
    });
    let ps = publish(&ml, 10);
    let c = ml.open_cursor("ks", StartAt::Earliest, true).unwrap();
    let first = delivered(c.read_entries(10).unwrap());
    first.iter().for_each(|e| {
        e.release();
    });
    c.add_to_replay(&[ps[5], ps[6]], RedeliveryReason::Nack)
        .unwrap();
    ml.cache().clear();
    let replay = c.read_replay_async(2).unwrap();
    c.reset(ps[0]).unwrap(); // clears the redelivery set, read position back to 0
    f.clock.advance_ms(5);
    ml.poll();
    let mut after_reset = Vec::new();
    if let ReadOutcome::Delivered(es) = ml.take_read(replay).unwrap().unwrap() {
        after_reset.extend(es.iter().map(|e| e.position().entry_id));
    }
    after_reset.extend(read_all(&c, 10).iter().map(|p| p.entry_id));
    (after_reset, c.stats().unwrap().out_of_order_deliveries)
}

#[test]
fn race_1_replay_read_in_flight_during_a_reset() {
    let (without, disorder) = scenario_replay_read_vs_reset(false);
    assert_eq!(
        &without[..2],
        &[5, 6],
        "without epochs the stale replay is delivered first"
    );
    assert!(disorder > 0);
    let (with, disorder) = scenario_replay_read_vs_reset(true);
    assert_eq!(
        with,
        (0..10).collect::<Vec<_>>(),
        "with epochs nothing from before the reset comes after it"
    );
    assert_eq!(disorder, 0);
}

/// Scenario 2: a sequential read in flight while the read position is reset to an earlier entry.
fn scenario_sequential_read_vs_reset(epochs: bool) -> (Position, Vec<i64>) {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig {
        cursor_epochs: epochs,
        ..latency()
    });
    let ps = publish(&ml, 10);
    let c = ml.open_cursor("s", StartAt::Earliest, false).unwrap();
    read_all(&c, 5);
    let in_flight = c.read_entries_async(5).unwrap(); // 5..9 from storage
    c.reset(ps[0]).unwrap();
    f.clock.advance_ms(5);
    ml.poll();
    let _ = ml.take_read(in_flight).unwrap().unwrap();
    let position_after = c.read_position().unwrap();
    let next: Vec<i64> = read_all(&c, 10).iter().map(|p| p.entry_id).collect();
    (position_after, next)
}

#[test]
fn race_2_sequential_read_in_flight_during_a_reset() {
    let (pos, next) = scenario_sequential_read_vs_reset(false);
    assert_eq!(
        pos.entry_id, 10,
        "without epochs the stale read moves the read position forward"
    );
    assert!(
        next.is_empty(),
        "and entries 0..4 are never delivered again"
    );
    let (pos, next) = scenario_sequential_read_vs_reset(true);
    assert_eq!(pos.entry_id, 0);
    assert_eq!(next, (0..10).collect::<Vec<_>>());
}

/// A Key_Shared dispatcher's state that must agree with the cursor: each recently joined consumer
/// may read up to the read position it saw when it joined.
#[derive(Default)]
struct Dispatcher {
    consumers: Vec<&'static str>,
    recently_joined: Vec<(&'static str, Position)>,
}

/// Scenario 3: a reset racing a consumer reconnect, step by step as in the proposal. Returns the
/// cursor's read position and the recently-joined consumers at the end.
fn scenario_reset_vs_reconnect(two_phase: bool) -> (Position, Vec<(&'static str, Position)>) {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig::default());
    let ps = publish(&ml, 10);
    let c = ml.open_cursor("ks", StartAt::Earliest, true).unwrap();
    c.mark_delete(ps[2]).unwrap();
    read_all(&c, 10);
    let mut d = Dispatcher {
        consumers: vec!["consumer_0"],
        ..Default::default()
    };
    let reset_to = ps[0];
    // 1. reset begins: disconnect all consumers (and, two-phase, mark the cursor modified).
    if two_phase {
        c.start_increase_epoch(reset_to).unwrap();
    }
    d.consumers.clear();
    d.recently_joined.clear();
    // 2-6. the reconnect: add consumer_1, rewind, add consumer_2 as recently joined.
    let reconnect = |d: &mut Dispatcher| -> Result<(), Error> {
        c.rewind()?;
        d.consumers.push("consumer_1");
        d.consumers.push("consumer_2");
        d.recently_joined.push(("consumer_2", c.read_position()?));
        Ok(())
    };
    let deferred = reconnect(&mut d).is_err();
    // 7. reset sets the read position (one phase) or ends its increase (two phases).
    if two_phase {
        c.end_increase_epoch().unwrap();
    } else {
        c.seek(reset_to, true).unwrap();
    }
    if deferred {
        reconnect(&mut d).unwrap();
    }
    (c.read_position().unwrap(), d.recently_joined)
}

#[test]
fn race_3_reset_against_a_consumer_reconnect() {
    let (read, joined) = scenario_reset_vs_reconnect(false);
    assert!(
        joined.iter().any(|(_, max)| *max > read),
        "one phase: consumer_2 waits for {joined:?} beyond read position {read}"
    );
    let (read, joined) = scenario_reset_vs_reconnect(true);
    assert!(
        joined.iter().all(|(_, max)| *max == read),
        "two phases: the dispatcher agrees with the cursor"
    );
}

/// Pulsar's cursor reads pass over entries acknowledged on their own
/// (`ManagedLedgerImpl.internalReadFromLedger`'s skip condition, `OpReadEntry.checkReadCompletion`):
/// after a rewind, only what is still unacknowledged is read again, one window at a time.
#[test]
fn a_rewound_read_passes_over_individually_acknowledged_entries() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig::default());
    let ps = publish(&ml, 10);
    let c = ml.open_cursor("s", StartAt::Earliest, true).unwrap();
    assert_eq!(read_all(&c, 10), ps);
    for i in [1, 2, 5, 6, 7] {
        c.ack(ps[i]).unwrap();
    }
    assert_eq!(c.backlog().unwrap(), 5);
    assert!(c.ack(Position::new(ps[9].ledger_id, 10)).is_err());
    c.rewind().unwrap();
    assert_eq!(c.read_position().unwrap(), ps[0]);
    // The window 0..=2 reads 0 alone; the window 1..=2 is acknowledged, skipped; then 3..=4.
    assert_eq!(read_all(&c, 3), vec![ps[0], ps[3], ps[4]]);
    assert_eq!(c.read_position().unwrap(), ps[5]);
    assert_eq!(read_all(&c, 5), vec![ps[8], ps[9]]);
    // Acknowledging 0 joins 1..=2 to the mark-delete position.
    c.ack(ps[0]).unwrap();
    assert_eq!(c.mark_delete_position().unwrap(), ps[2]);
    // A read whose last window is acknowledged leaves the cursor past it: here, at the end.
    for i in [3, 4, 9] {
        c.ack(ps[i]).unwrap();
    }
    assert_eq!(c.mark_delete_position().unwrap(), ps[7]);
    c.rewind().unwrap();
    assert_eq!(read_all(&c, 5), vec![ps[8]]);
    let end = Position::new(ps[9].ledger_id, ps[9].entry_id + 1);
    assert_eq!(c.read_position().unwrap(), end);
    c.ack(ps[8]).unwrap();
    assert_eq!(c.mark_delete_position().unwrap(), ps[9]);
    assert_eq!(c.backlog().unwrap(), 0);
}

/// `PersistentDispatcherMultipleConsumers.clearComponentsAfterRemovedAllConsumers`: when the last
/// consumer leaves, the replay queue is dropped.
#[test]
fn the_replay_queue_is_dropped_when_no_consumer_is_left() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig::default());
    let ps = publish(&ml, 4);
    let c = ml.open_cursor("s", StartAt::Earliest, true).unwrap();
    read_all(&c, 4);
    c.add_to_replay(&ps[1..3], RedeliveryReason::Nack).unwrap();
    c.set_active(true).unwrap();
    assert_eq!(c.replay_queue().unwrap(), ps[1..3].to_vec());
    c.set_active(false).unwrap();
    assert!(c.replay_queue().unwrap().is_empty());
}

/// Issue 59 from Rust: the ledger opened with the managed ledger and after a full one
/// (`ManagedLedgerImpl.initializeBookKeeper`, `createLedgerAfterClosed`), `seek` with and without
/// force (`ManagedCursorImpl.seek`), `skip` in both modes (`skipEntries`), and a replay of a position
/// with no entry failing (`asyncReplayEntries`).
#[test]
fn pulsars_positions_seek_skip_and_replay_from_rust() {
    let f = fixture(&[]);
    let ml = f.ledger(LedgerConfig {
        max_entries_per_ledger: 4,
        min_rollover_ms: 0,
        ..Default::default()
    });
    let c = ml.open_cursor("s", StartAt::Latest, true).unwrap();
    let first = ml.ledgers()[0].id;
    assert_eq!(
        (
            c.mark_delete_position().unwrap(),
            c.read_position().unwrap()
        ),
        (Position::new(first, -1), Position::new(first, 0))
    );
    let ps = publish(&ml, 4);
    let next = ml.ledgers()[1];
    assert_eq!((next.entries, ml.entry_count()), (0, 4));
    let late = ml.open_cursor("late", StartAt::Latest, true).unwrap();
    assert_eq!(
        (
            late.mark_delete_position().unwrap(),
            late.read_position().unwrap()
        ),
        (ps[3], Position::new(next.id, 0))
    );
    assert!(!late.has_more_entries().unwrap());
    c.ack(ps[1]).unwrap();
    assert_eq!(c.individually_acked().unwrap(), vec![(ps[1], ps[1])]);
    assert_eq!((c.entries_to_read().unwrap(), c.backlog().unwrap()), (3, 3));
    c.skip(1, SkipMode::Include).unwrap();
    assert_eq!(c.mark_delete_position().unwrap(), ps[1]);
    c.skip(1, SkipMode::Exclude).unwrap();
    assert_eq!(c.mark_delete_position().unwrap(), ps[2]);
    c.seek(ps[0], false).unwrap();
    assert_eq!(c.read_position().unwrap(), ps[3]);
    c.seek(ps[0], true).unwrap();
    assert_eq!(c.read_position().unwrap(), ps[0]);
    assert!(matches!(
        c.mark_delete(ps[1]),
        Err(Error::InvalidArgument {
            name: "position",
            ..
        })
    ));
    c.add_to_replay(&[ps[3], Position::new(99, 0)], RedeliveryReason::Nack)
        .unwrap();
    let err = c.read_replay(10).unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what: "entry", name } if name.starts_with("99:0")),
        "{err}"
    );
    assert_eq!(c.replay_queue().unwrap(), vec![ps[3]]);
    assert_eq!(ml.slowest_reader_position(), Some(ps[0]));
    assert_eq!(ml.slowest_consumer().unwrap().name(), "s");
}
