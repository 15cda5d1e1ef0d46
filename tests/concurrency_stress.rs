//! Several threads insert, read and release while evictions run; afterwards the size accounting
//! must equal the sum of what is cached, and every entry read back must be the one at its position.

use ledgercache::{
    CacheConfig, EntryCacheManager, ManualClock, Payload, Position, SettingValue, SystemClock,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

/// The payload names its own position, so a mix-up shows.
fn payload(p: Position) -> Payload {
    let mut v = format!("{}:{}|", p.ledger_id, p.entry_id).into_bytes();
    v.resize(v.len() + (p.entry_id % 50) as usize, b'x');
    Payload::from(v)
}

fn check_entry(e: &ledgercache::CachedEntry) {
    let p = e.position();
    assert_eq!(
        e.data(),
        payload(p).as_slice(),
        "entry at {p} carries someone else's bytes"
    );
    assert_eq!(e.size() as usize, e.data().len());
}

fn run(background: bool, manual_clock: bool) {
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(64 * 1024))
        .unwrap();
    cfg.set("eviction_time_threshold_ms", SettingValue::Int(1))
        .unwrap();
    cfg.set("eviction_interval_ms", SettingValue::Int(1))
        .unwrap();
    let manual = manual_clock.then(|| Arc::new(ManualClock::new(0)));
    let clock: ledgercache::SharedClock = match &manual {
        Some(c) => c.clone(),
        None => Arc::new(SystemClock),
    };
    let m = Arc::new(EntryCacheManager::new(cfg, clock.clone(), background).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let m = m.clone();
            thread::spawn(move || {
                let cache = m.get_cache(&format!("topic-{}", t % 2));
                for e in 0..20_000i64 {
                    let p = Position::new(t, e);
                    cache.insert(p, payload(p), (e % 3) as i32, None).unwrap();
                    if e % 64 == 0 {
                        for got in cache.get_range(Position::new(t, e - 64), p) {
                            check_entry(&got);
                            got.release();
                        }
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (m, stop) = (m.clone(), stop.clone());
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = (n % 3) as i64;
                    let cache = m.get_cache(&format!("topic-{}", t % 2));
                    if let Some(got) = cache.get(Position::new(t, ((n * 7919) % 20_000) as i64)) {
                        check_entry(&got);
                        got.release();
                    }
                    if r == 0 && n % 5000 == 0 {
                        cache.remove_range(
                            Position::new(t, 0),
                            Position::new(t, (n % 20_000) as i64),
                            false,
                        );
                    }
                    n += 1;
                }
            })
        })
        .collect();
    // Caches made, filled and removed over and over: their entries' queue items outlive them, and
    // their ids are reused only once those items are gone.
    let churn = {
        let (m, stop) = (m.clone(), stop.clone());
        thread::spawn(move || {
            let mut round = 0i64;
            // At least 20 rounds, however soon the writers are done.
            while round < 20 || !stop.load(Ordering::Relaxed) {
                let name = format!("churn-{}", round % 4);
                let cache = m.get_cache(&name);
                for e in 0..50 {
                    let p = Position::new(100 + round % 4, e);
                    let _ = cache.insert(p, payload(p), (e % 2) as i32, None);
                }
                if let Some(got) = cache.get(Position::new(100 + round % 4, 7)) {
                    check_entry(&got);
                }
                if round % 3 != 0 {
                    m.remove_cache(&name);
                }
                round += 1;
            }
        })
    };
    let evictor = {
        let (m, stop) = (m.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(clock) = &manual {
                    clock.advance_ns(200_000);
                }
                m.run_eviction();
                m.evict_bytes(512).unwrap();
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    evictor.join().unwrap();
    churn.join().unwrap();

    // A background evictor may still be running passes: read between them.
    let settled = m.settled_accounting();
    let (entries, s) = (settled.cached.0, settled.stats);
    assert_eq!(
        settled.accounted, settled.cached,
        "global size drifted from the caches' sizes"
    );
    assert_eq!(
        s.inserted,
        entries + s.evicted + s.invalidated,
        "an entry went missing: {s:?}"
    );
    for name in m.cache_names() {
        let cache = m.get_cache(&name);
        for p in cache.positions() {
            // A background evictor may have taken it since the listing.
            if let Some(got) = cache.get(p) {
                check_entry(&got);
            }
        }
    }
    // Everything can still be evicted, and the queue then holds nothing.
    m.evict_bytes(u64::MAX).unwrap();
    assert_eq!((m.size_bytes(), m.entry_count()), (0, 0));
    assert_eq!(m.removal_queue_len(), 0);
}

#[test]
fn inline_eviction_under_concurrent_inserts_reads_and_removals() {
    run(false, false);
}

#[test]
fn background_eviction_under_concurrent_inserts_reads_and_removals() {
    run(true, true);
}

/// Each cache counts its own lookups (under its lock); a removed cache's counts move to the
/// manager's. While readers look up, caches are removed and made again and `stats` is read all
/// along: every lookup is counted exactly once, and no snapshot ever goes backwards (a count moving
/// from a cache to the manager is never seen twice or not at all).
#[test]
fn lookups_are_counted_once_while_caches_come_and_go() {
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(1 << 20))
        .unwrap();
    let m = Arc::new(EntryCacheManager::new(cfg, Arc::new(ManualClock::new(0)), false).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    const LOOKUPS: i64 = 30_000;
    let readers: Vec<_> = (0..2i64)
        .map(|t| {
            let m = m.clone();
            thread::spawn(move || {
                for e in 0..LOOKUPS {
                    let cache = m.get_cache(&format!("topic-{}", e % 3));
                    let p = Position::new(t, e);
                    if e % 2 == 0 {
                        let _ = cache.insert(p, payload(p), 0, None);
                    }
                    if e % 5 == 0 {
                        let _ = cache.get_range(Position::new(t, e - 4), p);
                    } else if let Some(got) = cache.get(p) {
                        got.release();
                    }
                }
            })
        })
        .collect();
    let remover = {
        let (m, stop) = (m.clone(), stop.clone());
        thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                m.remove_cache(&format!("topic-{}", i % 3));
                i += 1;
                thread::yield_now();
            }
        })
    };
    let mut last = 0u64;
    let mut watched = 0u64;
    while !readers.iter().all(std::thread::JoinHandle::is_finished) {
        let s = m.stats();
        let seen = s.hits + s.misses;
        assert!(seen >= last, "stats went backwards: {seen} after {last}");
        last = seen;
        watched += 1;
    }
    for r in readers {
        r.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    remover.join().unwrap();
    let s = m.stats();
    // Per reader: 4 of 5 positions are single gets (one lookup each), 1 of 5 a range of 5 in one
    // ledger (five lookups; the first range, below entry 0, counts one per position too).
    let per_reader = (0..LOOKUPS)
        .map(|e| if e % 5 == 0 { 5 } else { 1 })
        .sum::<u64>();
    assert_eq!(
        s.hits + s.misses,
        2 * per_reader,
        "after {watched} snapshots"
    );
    assert!(s.hits > 0 && s.misses > 0);
}

/// An eviction pass holds the locks of many caches at once (the queue interleaves their entries).
/// Meanwhile other threads take the table's lock and then a cache's (`stats`, `metadata_bytes`,
/// `remove_cache`), and removed caches' ids go to new caches. Nothing may deadlock (a watchdog fails the
/// test instead of hanging it), and the accounting must come out exact.
#[test]
fn passes_holding_many_caches_do_not_deadlock_with_table_users() {
    // The whole scenario runs on a thread of its own, so that a deadlock anywhere in it fails the
    // test on the watchdog's timeout instead of hanging it.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let scenario = thread::spawn(move || {
        many_caches_scenario();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(()) => scenario.join().unwrap(),
        // The scenario panicked: join shows why.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => scenario.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the scenario did not finish in 60 s: a deadlock")
        }
    }
}

fn many_caches_scenario() {
    const CACHES: i64 = 24;
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(256 * 1024))
        .unwrap();
    cfg.set("eviction_time_threshold_ms", SettingValue::Int(1))
        .unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let m = Arc::new(EntryCacheManager::new(cfg, clock.clone(), false).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    let mut threads = Vec::new();
    for w in 0..2i64 {
        let m = m.clone();
        threads.push(thread::spawn(move || {
            // Round-robin over the caches: consecutive queue items name different caches.
            for e in 0..40_000i64 {
                let c = (e + w) % CACHES;
                let cache = m.get_cache(&format!("topic-{c}"));
                let p = Position::new(c * 10 + w, e / CACHES);
                let _ = cache.insert(p, payload(p), (e % 4 == 0) as i32, None);
                if e % 7 == 0 {
                    if let Some(got) = cache.get(p) {
                        check_entry(&got);
                        got.release();
                    }
                }
            }
        }));
    }
    std::mem::swap(&mut writers, &mut threads);
    {
        let (m, stop) = (m.clone(), stop.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                clock.advance_ns(300_000);
                m.run_eviction();
                m.evict_bytes(4096).unwrap();
            }
        }));
    }
    {
        let (m, stop) = (m.clone(), stop.clone());
        threads.push(thread::spawn(move || {
            let mut i = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("topic-{}", (i / 2) % CACHES);
                if i % 2 == 0 {
                    m.remove_cache(&name);
                } else {
                    // A cache made, filled and removed at once.
                    let scratch = m.get_cache(&format!("scratch-{}", i % 5));
                    let p = Position::new(1000, i);
                    let _ = scratch.insert(p, payload(p), 1, None);
                    drop(scratch);
                    m.remove_cache(&format!("scratch-{}", i % 5));
                }
                i += 1;
                thread::yield_now();
            }
        }));
    }
    {
        let (m, stop) = (m.clone(), stop.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Counters move while they are read, so a snapshot is no consistent cut to check;
                // what matters here is that taking it (table, then each cache) never deadlocks.
                let _ = m.stats();
                let _ = m.metadata_bytes();
            }
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let settled = m.settled_accounting();
    assert_eq!(settled.accounted, settled.cached);
    let s = settled.stats;
    assert_eq!(
        s.inserted,
        settled.cached.0 + s.evicted + s.invalidated,
        "{s:?}"
    );
    m.evict_bytes(u64::MAX).unwrap();
    assert_eq!((m.size_bytes(), m.entry_count()), (0, 0));
    assert_eq!(m.removal_queue_len(), 0);
}

/// A pass keeps the locks of the caches it meets, but every few hundred items it hands each one
/// to a thread waiting for it (`HeldCaches::let_waiters_in`). So a reader of a cache the pass holds
/// gets in while the pass runs, not after it: it still finds the entry the pass would evict last.
#[test]
fn a_reader_waiting_for_a_cache_gets_it_while_a_long_pass_holds_it() {
    const ENTRIES: i64 = 1_000_000;
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(1 << 40))
        .unwrap();
    cfg.set("eviction_time_threshold_ms", SettingValue::Int(1))
        .unwrap();
    // A starved reader (other tests share the cores) can miss one pass; it cannot miss three
    // unless the pass holds the cache to its end.
    let got_in = (0..3).any(|_| {
        let clock = Arc::new(ManualClock::new(0));
        let m = Arc::new(EntryCacheManager::new(cfg.clone(), clock.clone(), false).unwrap());
        // Two caches interleaved in the queue: the pass holds both from its first items on.
        let (a, b) = (m.get_cache("a"), m.get_cache("b"));
        for e in 0..ENTRIES {
            let cache = if e % 2 == 0 { &a } else { &b };
            cache
                .insert(Position::new(0, e / 2), Payload::empty(), 0, Some(1))
                .unwrap();
        }
        let last = Position::new(0, (ENTRIES - 1) / 2);
        clock.advance_ms(2);
        let pass = {
            let m = m.clone();
            thread::spawn(move || m.evict_expired())
        };
        // The pass publishes what it evicted every few hundred items: it has begun, and holds
        // `b`. (A pass that ended without publishing, by a panic, shows at the join.)
        while m.entry_count() == ENTRIES as u64 && !pass.is_finished() {
            std::hint::spin_loop();
        }
        let found = b.get(last).is_some();
        pass.join().unwrap();
        found
    });
    assert!(
        got_in,
        "a reader waited for the cache until the pass had evicted everything"
    );
}
