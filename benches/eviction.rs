//! The scenario of Pulsar's `RangeCacheEvictionBenchmark`: 1,000,000 cached entries, about 10% still
//! expecting a read and about 10% recently accessed (both requeued), evicted by time passes until
//! the cache is empty. Reports ns per entry for the whole eviction (queue walk, map removal, size
//! accounting), with and without requeues.

#[path = "support.rs"]
mod support;

use ledgercache::{CacheConfig, EntryCacheManager, ManualClock, Payload, Position, SettingValue};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const ENTRIES: i64 = 1_000_000;

fn filled(requeues: bool) -> (EntryCacheManager, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(0));
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(1 << 40))
        .unwrap();
    cfg.set("eviction_time_threshold_ms", SettingValue::Int(1))
        .unwrap();
    let m = EntryCacheManager::new(cfg, clock.clone(), false).unwrap();
    let cache = m.get_cache("ledger");
    let mut rng = StdRng::seed_from_u64(1);
    for e in 0..ENTRIES {
        let p = Position::new(0, e);
        let expected = if requeues && rng.random_bool(0.1) {
            1
        } else {
            0
        };
        cache
            .insert(p, Payload::empty(), expected, Some(100))
            .unwrap();
        if requeues && rng.random_bool(0.1) {
            cache.get(p);
        }
    }
    (m, clock)
}

fn evict_all(m: &EntryCacheManager, clock: &ManualClock) -> u32 {
    let mut passes = 0;
    while m.entry_count() > 0 {
        clock.advance_ms(2);
        m.evict_expired();
        passes += 1;
    }
    passes
}

fn main() {
    let rounds = support::rounds(5);
    println!("eviction: {ENTRIES} entries by time passes until empty, best of {rounds}");
    for requeues in [true, false] {
        let mut best = f64::MAX;
        let mut passes = 0;
        for _ in 0..rounds {
            let (m, clock) = filled(requeues);
            let (t, p) = support::best_of(1, || evict_all(&m, &clock));
            best = best.min(support::ns_per(t, ENTRIES as u64));
            passes = p;
            assert_eq!(m.size_bytes(), 0);
        }
        let label = if requeues {
            "10% expected reads + 10% accessed"
        } else {
            "no requeues"
        };
        println!("  {label:<36} {best:>7.1} ns/entry ({passes} passes)");
    }
}
