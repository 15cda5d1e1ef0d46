//! Belady's MIN, the offline optimum for the read stream: every entry offered is cached, and when
//! room is needed the cached entry whose next read is farthest in the future (or never) goes. This
//! is the classic form (admission is not optional), the one libCacheSim implements, so the two agree
//! exactly. It needs the whole future, so the engine first records the read stream
//! ([`FutureReads`]) and then replays again. Optimal in hits for uniform sizes among caches that
//! keep what they are offered; an upper bound to compare the online designs against.

use super::{CacheStrategy, EntryKey, StrategyCounters};
use crate::fast_hash::FastMap;
use std::collections::{BTreeSet, VecDeque};

/// For every entry, the indices (in the read stream) at which it is read.
#[derive(Debug, Default, Clone)]
pub struct FutureReads {
    reads: FastMap<EntryKey, VecDeque<u64>>,
    total: u64,
}

impl FutureReads {
    pub fn record(&mut self, key: EntryKey) {
        self.reads.entry(key).or_default().push_back(self.total);
        self.total += 1;
    }

    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

const NEVER: u64 = u64::MAX;

pub struct Belady {
    capacity: u64,
    used: u64,
    future: FutureReads,
    /// Reads served so far: the index of the next read.
    clock: u64,
    cached: FastMap<EntryKey, (u32, u64)>,
    by_next_use: BTreeSet<(u64, EntryKey)>,
    counters: StrategyCounters,
}

impl Belady {
    pub fn new(capacity: u64, future: FutureReads) -> Self {
        Belady {
            capacity,
            used: 0,
            future,
            clock: 0,
            cached: FastMap::default(),
            by_next_use: BTreeSet::new(),
            counters: StrategyCounters::default(),
        }
    }

    fn next_use(&self, key: &EntryKey) -> u64 {
        self.future
            .reads
            .get(key)
            .and_then(|q| q.front().copied())
            .unwrap_or(NEVER)
    }

    fn admit(&mut self, key: EntryKey, size: u32) {
        if self.cached.contains_key(&key) || size as u64 > self.capacity {
            return;
        }
        // Make room among the entries already cached, farthest next read first.
        while self.used + size as u64 > self.capacity {
            let &(_, victim) = self
                .by_next_use
                .iter()
                .next_back()
                .expect("over capacity means non-empty");
            self.evict(victim);
            self.counters.evicted_entries += 1;
        }
        let next = self.next_use(&key);
        self.by_next_use.insert((next, key));
        self.cached.insert(key, (size, next));
        self.used += size as u64;
    }

    fn evict(&mut self, key: EntryKey) {
        if let Some((size, next)) = self.cached.remove(&key) {
            self.by_next_use.remove(&(next, key));
            self.used -= size as u64;
        }
    }
}

impl CacheStrategy for Belady {
    fn insert(&mut self, _now: u64, key: EntryKey, size: u32, _expected: i32) {
        self.admit(key, size);
    }

    fn read(&mut self, _now: u64, key: EntryKey) -> bool {
        self.clock += 1;
        if let Some(q) = self.future.reads.get_mut(&key) {
            q.pop_front();
            if q.is_empty() {
                self.future.reads.remove(&key);
            }
        }
        let next = self.next_use(&key);
        match self.cached.get(&key).copied() {
            Some((size, old)) => {
                self.by_next_use.remove(&(old, key));
                self.cached.insert(key, (size, next));
                self.by_next_use.insert((next, key));
                true
            }
            None => false,
        }
    }

    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
        let doomed: Vec<EntryKey> = self
            .cached
            .keys()
            .filter(|k| k.topic == topic && k.position.ledger_id == ledger)
            .copied()
            .collect();
        for k in doomed {
            self.evict(k);
        }
    }

    fn cached_bytes(&self) -> u64 {
        self.used
    }

    fn counters(&self) -> StrategyCounters {
        self.counters
    }

    fn contains(&self, key: EntryKey) -> bool {
        self.cached.contains_key(&key)
    }
}
