//! Issue 59's cache-side API in Rust: `EntryCache::peek`, the containers' slowest cursor, the
//! settings `EntryCacheManager::update_config` changes while running (with threads and the
//! background evictor), and the reads-in-flight limiter a manager's ledgers share.

use ledgercache::broker::cursors::active::ActiveCursorContainer;
use ledgercache::broker::cursors::heap::SlowestCursorHeap;
use ledgercache::broker::ledger::{LedgerConfig, ManagedLedger, ReadOutcome, StartAt};
use ledgercache::broker::storage::{MemoryStorage, StorageHandle};
use ledgercache::cache::inflight_reads::{Admission, ReadPermits};
use ledgercache::{
    CacheConfig, EntryCacheManager, Error, ManualClock, Payload, Position, SettingValue,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use SettingValue::{Bool, Float, Int};

fn manager(settings: &[(&str, SettingValue)]) -> (EntryCacheManager, Arc<ManualClock>) {
    let mut c = CacheConfig::default();
    c.set_all(settings.iter().map(|(k, v)| (*k, v.clone())))
        .unwrap();
    let clock = Arc::new(ManualClock::new(0));
    (
        EntryCacheManager::new(c, clock.clone(), false).unwrap(),
        clock,
    )
}

fn p(e: i64) -> Position {
    Position::new(1, e)
}

#[test]
fn peek_neither_marks_accessed_nor_counts_a_lookup() {
    let (m, clock) = manager(&[("eviction_time_threshold_ms", Int(100))]);
    let c = m.get_cache("t");
    c.insert(p(0), Payload::from(vec![0; 10]), 3, None).unwrap();
    c.insert(p(1), Payload::from(vec![0; 10]), 0, None).unwrap();
    let info = c.peek(p(0)).unwrap();
    assert_eq!(
        (
            info.size,
            info.expected_reads,
            info.requeue_count,
            info.accessed
        ),
        (10, Some(3), 0, false)
    );
    assert_eq!(c.peek(p(1)).unwrap().expected_reads, None);
    let stats = m.stats();
    assert_eq!((stats.hits, stats.misses), (0, 0));
    // The read entry is extended once, the peeked one is not: with no expected reads left to
    // extend for, only the get keeps p(1).
    c.get(p(1));
    c.peek(p(0));
    clock.advance_ms(150);
    m.evict_expired();
    assert!(c
        .peek(p(1))
        .is_some_and(|i| i.requeue_count == 1 && !i.accessed));
}

/// ManagedCursorContainerTest.testSlowestReader, for both containers (a fixed shuffle per round).
#[test]
fn slowest_reader() {
    for round in 0..100u64 {
        let mut order: Vec<i64> = (1..=100).collect();
        // A small deterministic shuffle (xorshift) per round.
        let mut x = round.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for i in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let mut active = ActiveCursorContainer::new();
        let mut heap = SlowestCursorHeap::new();
        for i in order {
            active.add(format!("cursor{i}"), Some(Position::new(0, i)));
            heap.add(format!("cursor{i}"), Some(Position::new(0, i)));
        }
        assert_eq!(
            active.slowest_cursor().map(|(k, p)| (k.clone(), p)),
            Some(("cursor1".to_string(), Position::new(0, 1)))
        );
        assert_eq!(
            heap.slowest_cursor().map(|(k, _)| k.as_str()),
            Some("cursor1")
        );
    }
}

#[test]
fn a_smaller_size_evicts_at_once_and_other_settings_are_refused() {
    let (m, _) = manager(&[
        ("cache_size_bytes", Int(200)),
        ("eviction_watermark", Float(0.8)),
        ("eviction_time_threshold_ms", Int(20_000)),
    ]);
    let c = m.get_cache("cache1");
    for i in 0..20 {
        c.insert(p(i), Payload::from(vec![0; i as usize + 1]), 0, None)
            .unwrap();
    }
    assert_eq!(m.size_bytes(), 155);
    let (_, freed) = m.update_config([("cache_size_bytes", Int(100))]).unwrap();
    assert!(m.size_bytes() <= 80);
    assert_eq!(freed, 155 - m.size_bytes());
    assert_eq!(m.max_size_bytes(), 100);
    assert_eq!(
        m.config().cache_size_bytes,
        200,
        "the start config stays as it was"
    );
    let err = m.update_config([("copy_entries", Bool(true))]).unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)));
    assert!(
        err.to_string().contains("managedLedgerCacheCopyEntries"),
        "{err}"
    );
    assert!(err.to_string().contains("restart"), "{err}");
    assert!(matches!(
        m.update_config([("cache_size", Int(1))]),
        Err(Error::UnknownSetting { .. })
    ));
    assert_eq!(m.current_config().cache_size_bytes, 100);
}

/// Threads insert while another changes the size and watermark and the background evictor runs:
/// the manager's totals match its caches' once all is settled, and the last size holds.
#[test]
fn updates_race_inserts_and_the_background_evictor() {
    let mut c = CacheConfig::default();
    c.set_all([
        ("cache_size_bytes", Int(100_000)),
        ("eviction_interval_ms", Int(1)),
    ])
    .unwrap();
    let m = Arc::new(EntryCacheManager::new(c, Arc::new(ManualClock::new(0)), true).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let (m, stop) = (m.clone(), stop.clone());
            std::thread::spawn(move || {
                let cache = m.get_cache(&format!("t{t}"));
                let mut e = 0;
                while !stop.load(Ordering::Relaxed) {
                    cache
                        .insert(Position::new(1, e), Payload::from(vec![0; 100]), 1, None)
                        .unwrap();
                    e += 1;
                }
            })
        })
        .collect();
    for k in 0..300i64 {
        m.update_config([
            ("cache_size_bytes", Int(20_000 + 1000 * (k % 50))),
            ("eviction_watermark", Float(0.5 + (k % 4) as f64 / 10.0)),
            ("extend_ttl_max_times", Int(k % 3)),
        ])
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    m.update_config([("cache_size_bytes", Int(10_000))])
        .unwrap();
    m.run_eviction();
    let s = m.settled_accounting();
    assert_eq!(s.accounted, s.cached);
    assert!(m.size_bytes() <= 10_000);
}

fn ledger(limit: i64, clock: &Arc<ManualClock>) -> (EntryCacheManager, ManagedLedger) {
    let mut c = CacheConfig::default();
    c.set_all([
        ("cache_size_bytes", Int(1 << 20)),
        ("max_reads_in_flight_bytes", Int(limit)),
    ])
    .unwrap();
    let m = EntryCacheManager::new(c, clock.clone(), false).unwrap();
    let storage = StorageHandle::new(Arc::new(MemoryStorage::new()));
    let config = LedgerConfig {
        read_latency: ledgercache::broker::storage::ReadLatency {
            fixed_ns: 10_000_000,
            ..Default::default()
        },
        ..LedgerConfig::default()
    };
    let ml = ManagedLedger::open("t", &m, storage, config).unwrap();
    (m, ml)
}

#[test]
fn a_ledgers_reads_share_the_managers_permits() {
    let clock = Arc::new(ManualClock::new(0));
    let (m, ml) = ledger(5000, &clock);
    clock.advance_ms(3_000);
    for _ in 0..10 {
        ml.add_entry(Payload::from(vec![0; 1000])).unwrap();
    }
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let b = ml.open_cursor("b", StartAt::Earliest, true).unwrap();
    let ra = a.read_entries_async(4).unwrap();
    let rb = b.read_entries_async(4).unwrap();
    let (max, remaining, waiting, _) = m.reads_limiter().snapshot();
    assert_eq!((max, remaining, waiting), (5000, 5000 - 4 * 1064, 1));
    clock.advance_ms(10);
    assert_eq!(ml.poll(), 1);
    assert!(ml.is_read_done(ra) && !ml.is_read_done(rb));
    // A synchronous read cannot wait for permits.
    let c = ml.open_cursor("c", StartAt::Earliest, true).unwrap();
    assert!(matches!(c.read_entries(4), Err(Error::ResourceLimit(_))));
    drop(ml.take_read(ra));
    ml.poll();
    assert!(ml.is_read_done(rb));
    drop(ml.take_read(rb));
    assert_eq!(m.reads_limiter().snapshot().1, 5000);
}

#[test]
fn permits_given_up_while_waiting_leave_the_queue() {
    let clock = Arc::new(ManualClock::new(0));
    let (m, _ml) = ledger(1000, &clock);
    let limiter = m.reads_limiter();
    let (held, go) = ReadPermits::acquire(limiter, 1, Some(900), true).unwrap();
    assert!(matches!(go, Admission::Go(_)));
    let (waiting, wait) = ReadPermits::acquire(limiter, 1, Some(900), true).unwrap();
    assert_eq!(wait, Admission::Wait);
    assert_eq!(limiter.snapshot().2, 1);
    drop(waiting);
    assert_eq!(limiter.snapshot().2, 0);
    drop(held);
    assert_eq!(limiter.snapshot().1, 1000);
    // Granted while waiting and then given up: the permits come back.
    let (held, _) = ReadPermits::acquire(limiter, 1, Some(900), true).unwrap();
    let (waiting, _) = ReadPermits::acquire(limiter, 1, Some(900), true).unwrap();
    drop(held);
    drop(waiting);
    assert_eq!(limiter.snapshot().1, 1000);
}

#[test]
fn a_discarded_read_gives_its_permits_back() {
    let clock = Arc::new(ManualClock::new(0));
    let (m, ml) = ledger(5000, &clock);
    clock.advance_ms(3_000);
    for _ in 0..10 {
        ml.add_entry(Payload::from(vec![0; 1000])).unwrap();
    }
    let a = ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    let b = ml.open_cursor("b", StartAt::Earliest, true).unwrap();
    let ra = a.read_entries_async(4).unwrap();
    let rb = b.read_entries_async(4).unwrap();
    // Waiting for permits: it leaves the queue.
    assert!(ml.discard_read(rb));
    assert_eq!(m.reads_limiter().snapshot().2, 0);
    clock.advance_ms(10);
    assert_eq!(ml.poll(), 1);
    // Finished and not taken: its permits come back.
    assert!(ml.discard_read(ra));
    assert_eq!(m.reads_limiter().snapshot().1, 5000);
    assert!(!ml.discard_read(ra) && ml.take_read(ra).is_none());
    // Discarded in flight: the storage read it issued completes for nobody.
    let rb = b.read_entries_async(8).unwrap();
    assert!(ml.discard_read(rb));
    assert_eq!(
        (ml.reads_in_flight(), m.reads_limiter().snapshot().1),
        (0, 5000)
    );
    clock.advance_ms(10);
    assert_eq!(ml.poll(), 0);
    let c = ml.open_cursor("c", StartAt::Earliest, true).unwrap();
    assert!(matches!(c.read_entries(4), Ok(ReadOutcome::Delivered(e)) if e.len() == 4));
}
