//! PIP-430 (and, with both extensions off, plain FIFO with a TTL) through the real entry cache
//! manager, on the replay's manual clock.

use super::{CacheStrategy, EntryKey, StrategyCounters};
use crate::clock::ManualClock;
use crate::config::CacheConfig;
use crate::entry::{CachedEntry, Payload};
use crate::error::Result;
use crate::manager::{EntryCache, EntryCacheManager};
use crate::position::Position;
use crate::read_count::ReadCountHandler;
use crate::read_flow::Invalidation;
use std::sync::Arc;

pub struct Pip430 {
    manager: EntryCacheManager,
    clock: Arc<ManualClock>,
    caches: Vec<Arc<EntryCache>>,
    /// Copies delivered by the read in progress, released when it ends.
    delivered: Vec<CachedEntry>,
    /// Hits of the read in progress whose copies were released as they were taken, ahead of the
    /// read's end: nothing sees an entry's expected reads while the read only reads (the manager
    /// runs no background eviction here: its passes run inside inserts and ticks), so this is
    /// the same as holding the copy until the end, without making one (two atomic updates and a
    /// copy fewer per hit). Anything else that touches the cache first turns them back into held
    /// copies ([`Pip430::hold_released`]).
    released_early: Vec<EntryKey>,
}

impl Pip430 {
    /// `config.strategy` must be `pip430` or `pip430-fifo`.
    pub fn new(config: CacheConfig) -> Result<Self> {
        let clock = Arc::new(ManualClock::new(0));
        let manager = EntryCacheManager::new(config, clock.clone(), false)?;
        Ok(Pip430 {
            manager,
            clock,
            caches: Vec::new(),
            delivered: Vec::new(),
            released_early: Vec::new(),
        })
    }

    fn cache(&mut self, topic: u32) -> &Arc<EntryCache> {
        while self.caches.len() <= topic as usize {
            let id = self.caches.len();
            self.caches
                .push(self.manager.get_cache(&format!("topic-{id}")));
        }
        &self.caches[topic as usize]
    }

    /// Before an insert (and its size pass), a tick, an invalidation or an added expected read:
    /// the hits released early give their expected reads back and are held as copies until the
    /// read ends, as `get` leaves them. Each is still cached: only reads ran since it was taken.
    fn hold_released(&mut self) {
        for key in self.released_early.drain(..) {
            if let Some(copy) = self.caches[key.topic as usize].unrelease(key.position) {
                self.delivered.push(copy);
            }
        }
    }

    fn at(&self, now_ns: u64) {
        self.clock.advance_to(now_ns);
    }

    pub fn manager(&self) -> &EntryCacheManager {
        &self.manager
    }
}

impl CacheStrategy for Pip430 {
    fn insert(&mut self, now: u64, key: EntryKey, size: u32, expected: i32) {
        self.hold_released();
        self.at(now);
        let _ = self
            .cache(key.topic)
            .insert(key.position, Payload::empty(), expected, Some(size));
    }

    fn insert_read(&mut self, now: u64, key: EntryKey, size: u32, expected: i32) {
        self.hold_released();
        self.at(now);
        let copy = self.cache(key.topic).insert_for_reader(
            key.position,
            Payload::empty(),
            ReadCountHandler::new(expected),
            size,
        );
        self.delivered.push(copy);
    }

    fn read(&mut self, now: u64, key: EntryKey) -> bool {
        self.at(now);
        let hit = self.cache(key.topic).read_released(key.position);
        if hit {
            self.released_early.push(key);
        }
        hit
    }

    fn end_read(&mut self) {
        self.released_early.clear();
        for e in self.delivered.drain(..) {
            e.release_owned();
        }
    }

    fn add_expected_read(&mut self, key: EntryKey) {
        self.hold_released();
        self.cache(key.topic).increment_expected_reads(key.position);
    }

    fn invalidate(&mut self, topic: u32, how: Invalidation) {
        self.hold_released();
        let cache = self.cache(topic);
        match how {
            Invalidation::Nothing => {}
            Invalidation::Before(p) => {
                cache.remove_range(Position::new(i64::MIN, i64::MIN), p, false);
            }
            Invalidation::All => {
                cache.clear();
            }
        }
    }

    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
        self.hold_released();
        self.cache(topic).remove_range(
            Position::new(ledger, i64::MIN),
            Position::new(ledger, i64::MAX),
            true,
        );
    }

    fn tick(&mut self, now: u64) {
        self.hold_released();
        self.at(now);
        self.manager.run_eviction();
    }

    fn tick_is_idle(&self) -> bool {
        // An empty cache has nothing to expire or requeue; a tick would only drop stale queue
        // items, which no count sees.
        self.manager.entry_count() == 0
    }

    fn cached_bytes(&self) -> u64 {
        self.manager.size_bytes()
    }

    fn counters(&self) -> StrategyCounters {
        let s = self.manager.stats();
        StrategyCounters {
            evicted_entries: s.evicted,
            requeues: s.requeued,
        }
    }

    fn contains(&self, key: EntryKey) -> bool {
        self.caches
            .get(key.topic as usize)
            .is_some_and(|c| c.contains(key.position))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(entry: i64) -> EntryKey {
        EntryKey {
            topic: 0,
            position: Position::new(1, entry),
        }
    }

    fn expected(s: &mut Pip430, entry: i64) -> Option<Option<i32>> {
        s.cache(0).expected_reads(key(entry).position)
    }

    #[test]
    fn a_hit_gives_its_expected_read_back_until_the_read_ends() {
        let mut s = Pip430::new(CacheConfig::default()).expect("valid config");
        s.insert(0, key(0), 100, 2);
        assert!(s.read(1, key(0)));
        assert!(!s.read(1, key(1)));
        // What an insert's size pass (or a tick, an invalidation) would see: the read still holds
        // its copy, so the entry expects both reads.
        s.insert_read(1, key(1), 100, 1);
        assert_eq!(expected(&mut s, 0), Some(Some(2)));
        s.end_read();
        assert_eq!(expected(&mut s, 0), Some(Some(1)));
        assert_eq!(expected(&mut s, 1), Some(Some(0)));

        // A read of hits only consumes the read as the copy's release would.
        assert!(s.read(2, key(0)));
        s.end_read();
        assert_eq!(expected(&mut s, 0), Some(Some(0)));
        let stats = s.manager().stats();
        assert_eq!((stats.hits, stats.misses, stats.hit_bytes), (2, 1, 200));
    }

    #[test]
    fn each_touch_of_the_cache_mid_read_holds_the_hits_as_copies() {
        type Touch = fn(&mut Pip430);
        let touches: [(&str, Touch); 5] = [
            ("insert", |s| s.insert(1, key(5), 10, 0)),
            ("tick", |s| s.tick(2)),
            ("expected read", |s| s.add_expected_read(key(5))),
            ("invalidate", |s| s.invalidate(0, Invalidation::Nothing)),
            ("ledger deleted", |s| s.on_ledger_deleted(0, 7)),
        ];
        for (what, touch) in touches {
            let mut s = Pip430::new(CacheConfig::default()).expect("valid config");
            s.insert(0, key(0), 100, 1);
            assert!(s.read(1, key(0)));
            touch(&mut s);
            assert_eq!(expected(&mut s, 0), Some(Some(1)), "{what}");
            s.end_read();
            assert_eq!(expected(&mut s, 0), Some(Some(0)), "{what}");
        }
    }
}
