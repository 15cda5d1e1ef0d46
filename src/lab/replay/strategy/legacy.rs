//! Pulsar's entry cache before PIP-430: a cache per managed ledger, keyed by position.
//!
//! - A published entry is cached when the topic has an active cursor; a storage read when the
//!   reader is active. No read counters.
//! - Size eviction (`EntryCacheDefaultEvictionPolicy`), started by an insert that finds the cache
//!   above the trigger: the largest caches holding half the total size are chosen and each frees
//!   its share of the excess in proportion to its size, lowest positions first. This can evict a
//!   newer entry from a big cache while an older one survives in a small cache: the flaw PIP-430
//!   describes. An insert that finds the cache at or over its maximum is refused.
//! - Time eviction (the timer's only eviction) walks each cache from its lowest position and stops
//!   at the first entry that has not expired (it assumes position order is time order).
//! - Entries behind the slowest active reader are invalidated as cursors move.

use super::{CacheStrategy, EntryKey, StrategyCounters};
use crate::broker::read_flow::Invalidation;
use crate::cache::position::Position;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// `EntryCacheDefaultEvictionPolicy.PercentOfSizeToConsiderForEviction`: the share of the total
/// size whose caches are chosen.
const SHARE_OF_SIZE_TO_CONSIDER: f64 = 0.5;

/// A cached entry of a [`TopicCache`].
struct Cached {
    size: u32,
    /// When it was cached (time eviction compares it).
    inserted_ns: u64,
    /// The token its removal is noted by (see [`CacheStrategy::watch_removal`]), or
    /// [`UNWATCHED`].
    watch: u32,
}

const UNWATCHED: u32 = u32::MAX;

#[derive(Default)]
struct TopicCache {
    entries: BTreeMap<Position, Cached>,
    bytes: u64,
    /// The tokens of the watched entries removed since the memory model last asked.
    watched_gone: Vec<u32>,
}

impl TopicCache {
    fn remove_front_while(
        &mut self,
        mut keep_going: impl FnMut(&Position, &Cached, u64) -> bool,
    ) -> (u64, u64) {
        let (mut n, mut freed) = (0, 0);
        while let Some((p, v)) = self.entries.first_key_value() {
            if !keep_going(p, v, freed) {
                break;
            }
            let (_, gone) = self.entries.pop_first().expect("non-empty");
            freed += self.forget(gone);
            n += 1;
        }
        (n, freed)
    }

    /// Accounts for an entry taken out of `entries`; returns its size.
    fn forget(&mut self, gone: Cached) -> u64 {
        if gone.watch != UNWATCHED {
            self.watched_gone.push(gone.watch);
        }
        self.bytes -= u64::from(gone.size);
        u64::from(gone.size)
    }
}

pub struct Legacy {
    max: u64,
    trigger: u64,
    watermark: u64,
    ttl_ns: u64,
    topics: Vec<TopicCache>,
    total: u64,
    counters: StrategyCounters,
}

impl Legacy {
    pub fn new(config: &crate::config::CacheConfig) -> Self {
        Legacy {
            max: config.cache_size_bytes,
            trigger: config.trigger_bytes(),
            watermark: config.watermark_bytes(),
            ttl_ns: config.ttl_ns(),
            topics: Vec::new(),
            total: 0,
            counters: StrategyCounters::default(),
        }
    }

    fn topic(&mut self, t: u32) -> &mut TopicCache {
        while self.topics.len() <= t as usize {
            self.topics.push(TopicCache::default());
        }
        &mut self.topics[t as usize]
    }

    /// `RangeEntryCacheImpl.insert`, which first asks `RangeEntryCacheManagerImpl
    /// .hasSpaceInCache` with the size before the insert: over the trigger, that starts a size
    /// eviction of the excess over the watermark (on the broker's executor; here at once, after
    /// this insert), and at or over the maximum the entry is not cached.
    fn add(&mut self, now: u64, key: EntryKey, size: u32) {
        if self.max == 0 {
            return;
        }
        let before = self.total;
        if before < self.max {
            let t = self.topic(key.topic);
            // An entry cached already stays as it is (`RangeCache.put` is a `putIfAbsent`).
            if let Entry::Vacant(vacant) = t.entries.entry(key.position) {
                vacant.insert(Cached {
                    size,
                    inserted_ns: now,
                    watch: UNWATCHED,
                });
                t.bytes += size as u64;
                self.total += size as u64;
            }
        }
        if before > self.trigger {
            self.evict(before.saturating_sub(self.watermark));
        }
    }

    /// `EntryCacheDefaultEvictionPolicy.doEviction`: the largest caches that together hold half
    /// the size each free their share of `to_free`, rounded down, lowest positions first
    /// (`RangeCache.evictLeastAccessedEntries`).
    fn evict(&mut self, to_free: u64) {
        if to_free == 0 {
            return;
        }
        let mut order: Vec<usize> = (0..self.topics.len())
            .filter(|&i| self.topics[i].bytes > 0)
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.topics[i].bytes));
        let to_consider = (self.total as f64 * SHARE_OF_SIZE_TO_CONSIDER) as u64;
        let (mut chosen, mut considered) = (Vec::new(), 0u64);
        for i in order {
            if considered >= to_consider {
                break;
            }
            chosen.push(i);
            considered += self.topics[i].bytes;
        }
        for i in chosen {
            let share = (to_free as f64 * (self.topics[i].bytes as f64 / considered as f64)) as u64;
            if share == 0 {
                continue;
            }
            let (n, freed) = self.topics[i].remove_front_while(|_, _, freed| freed < share);
            self.total -= freed;
            self.counters.evicted_entries += n;
        }
    }
}

impl CacheStrategy for Legacy {
    fn insert(&mut self, now: u64, key: EntryKey, size: u32, _expected: i32) {
        self.add(now, key, size);
    }

    fn read(&mut self, _now: u64, key: EntryKey) -> bool {
        self.topics
            .get(key.topic as usize)
            .is_some_and(|t| t.entries.contains_key(&key.position))
    }

    fn invalidate(&mut self, topic: u32, how: Invalidation) {
        let t = self.topic(topic);
        let (n, freed) = match how {
            Invalidation::Nothing => (0, 0),
            Invalidation::Before(slowest) => t.remove_front_while(|p, _, _| *p < slowest),
            Invalidation::All => t.remove_front_while(|_, _, _| true),
        };
        self.total -= freed;
        self.counters.invalidated_entries += n;
    }

    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
        let t = self.topic(topic);
        let doomed: Vec<Position> = t
            .entries
            .range(Position::new(ledger, i64::MIN)..=Position::new(ledger, i64::MAX))
            .map(|(p, _)| *p)
            .collect();
        let (mut freed, removed) = (0, doomed.len() as u64);
        for p in doomed {
            let gone = t.entries.remove(&p).expect("listed");
            freed += t.forget(gone);
        }
        self.total -= freed;
        self.counters.invalidated_entries += removed;
    }

    fn tick(&mut self, now: u64) {
        if let Some(before) = now.checked_sub(self.ttl_ns) {
            for t in &mut self.topics {
                // `RangeCache.evictLEntriesBeforeTimestamp` takes an entry inserted at the limit
                // too (`<=`); master's removal queue does not.
                let (n, freed) = t.remove_front_while(|_, e, _| e.inserted_ns <= before);
                self.total -= freed;
                self.counters.evicted_entries += n;
            }
        }
        // The 4.0 timer (`ManagedLedgerFactoryImpl.doCacheEviction`) evicts by time only; size
        // eviction starts from an insert.
    }

    fn tick_is_idle(&self) -> bool {
        self.topics.iter().all(|t| t.entries.is_empty())
    }

    fn next_tick_change_ns(&self) -> u64 {
        // A tick removes a cache's lowest entry once it is `ttl` old, and only then the next.
        self.topics
            .iter()
            .filter_map(|t| t.entries.first_key_value())
            .map(|(_, e)| e.inserted_ns.saturating_add(self.ttl_ns))
            .min()
            .unwrap_or(u64::MAX)
    }

    fn cached_bytes(&self) -> u64 {
        self.total
    }

    fn counters(&self) -> StrategyCounters {
        self.counters
    }

    fn contains(&self, key: EntryKey) -> bool {
        self.topics
            .get(key.topic as usize)
            .is_some_and(|t| t.entries.contains_key(&key.position))
    }

    fn report_removals(&mut self) -> bool {
        true
    }

    fn watch_removal(&mut self, key: EntryKey, token: u32) -> Option<u32> {
        let t = self.topics.get_mut(key.topic as usize)?;
        let e = t.entries.get_mut(&key.position)?;
        if e.watch == UNWATCHED {
            e.watch = token;
        }
        Some(e.watch)
    }

    fn unwatch(&mut self, key: EntryKey) {
        let cached = self.topics.get_mut(key.topic as usize);
        if let Some(e) = cached.and_then(|t| t.entries.get_mut(&key.position)) {
            e.watch = UNWATCHED;
        }
    }

    fn take_removed(&mut self, out: &mut Vec<u32>) {
        for t in &mut self.topics {
            out.append(&mut t.watched_gone);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CacheConfig, SettingValue};
    use crate::lab::replay::strategy::test_key as k;

    /// An entry cached again (a range read from storage because part of it was missing) keeps
    /// its first time: `RangeCache.put` is a `putIfAbsent`, so time eviction drops it when the
    /// first copy expires, not later.
    #[test]
    fn an_entry_cached_again_keeps_its_first_time() {
        let mut config = CacheConfig::default();
        config
            .set("eviction_time_threshold_ms", SettingValue::Int(100))
            .expect("valid");
        let mut legacy = Legacy::new(&config);
        let ms = 1_000_000;
        legacy.insert(0, k(0), 10, 0);
        legacy.insert(90 * ms, k(0), 30, 0);
        assert_eq!(legacy.cached_bytes(), 10, "the size stays the first one's");
        legacy.tick(150 * ms);
        assert!(
            !legacy.contains(k(0)),
            "expired 100 ms after it was first cached"
        );
        assert_eq!(legacy.cached_bytes(), 0);
    }
}
