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

    fn at(&self, now_ns: u64) {
        self.clock.advance_to(now_ns);
    }

    pub fn manager(&self) -> &EntryCacheManager {
        &self.manager
    }
}

impl CacheStrategy for Pip430 {
    fn insert(&mut self, now: u64, key: EntryKey, size: u32, expected: i32) {
        self.at(now);
        let _ = self
            .cache(key.topic)
            .insert(key.position, Payload::empty(), expected, Some(size));
    }

    fn insert_read(&mut self, now: u64, key: EntryKey, size: u32, expected: i32) {
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
        match self.cache(key.topic).get(key.position) {
            Some(e) => {
                self.delivered.push(e);
                true
            }
            None => false,
        }
    }

    fn end_read(&mut self) {
        for e in self.delivered.drain(..) {
            e.release_owned();
        }
    }

    fn add_expected_read(&mut self, key: EntryKey) {
        self.cache(key.topic).increment_expected_reads(key.position);
    }

    fn invalidate(&mut self, topic: u32, how: Invalidation) {
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
        self.cache(topic).remove_range(
            Position::new(ledger, i64::MIN),
            Position::new(ledger, i64::MAX),
            true,
        );
    }

    fn tick(&mut self, now: u64) {
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
