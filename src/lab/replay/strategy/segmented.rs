//! PIP-174's broker-wide ring of segments (like BookKeeper's read cache): the cache is split into
//! `segment_count` segments of equal size written in turn; when the current one is full, the next
//! is emptied wholesale and written. Eviction is a rotation: no per-entry bookkeeping, no TTL.
//! Entries are cached as in the broker (published with an active cursor, read by an active reader).

use super::{CacheStrategy, EntryKey, StrategyCounters, WatchTokens};
use crate::cache::fast_hash::FastMap;

/// Where an entry was written: its segment, and how often that segment had been emptied then (the
/// entry is cached while the two agree).
struct Place {
    segment: u32,
    generation: u64,
    /// Listed in its segment's watched entries (see [`CacheStrategy::watch_removal`]).
    watched: bool,
}

pub struct Segmented {
    segment_bytes: u64,
    /// Bytes written into each segment since it was last emptied, and how many entries.
    used: Vec<(u64, u64)>,
    /// How many times each segment has been emptied; an entry is valid if it names the current one.
    generation: Vec<u64>,
    current: usize,
    index: FastMap<EntryKey, Place>,
    counters: StrategyCounters,
    /// Per segment, the entries in it whose removal is noted (see
    /// [`CacheStrategy::watch_removal`]): they all go when it is emptied.
    watched: Vec<Vec<EntryKey>>,
    /// Watched entries removed since the memory model last asked.
    watched_gone: Vec<EntryKey>,
    tokens: WatchTokens,
}

impl Segmented {
    pub fn new(cache_size_bytes: u64, segments: u32) -> Self {
        let n = segments.max(1) as usize;
        Segmented {
            segment_bytes: cache_size_bytes / n as u64,
            used: vec![(0, 0); n],
            generation: vec![0; n],
            current: 0,
            index: FastMap::default(),
            counters: StrategyCounters::default(),
            watched: vec![Vec::new(); n],
            watched_gone: Vec::new(),
            tokens: WatchTokens::default(),
        }
    }

    fn valid(&self, key: &EntryKey) -> bool {
        self.index
            .get(key)
            .is_some_and(|p| self.generation[p.segment as usize] == p.generation)
    }

    fn add(&mut self, key: EntryKey, size: u32) {
        if self.segment_bytes == 0 || size as u64 > self.segment_bytes || self.valid(&key) {
            return;
        }
        if self.used[self.current].0 + size as u64 > self.segment_bytes {
            self.current = (self.current + 1) % self.used.len();
            self.counters.evicted_entries += self.used[self.current].1;
            self.used[self.current] = (0, 0);
            self.generation[self.current] += 1;
            self.watched_gone.append(&mut self.watched[self.current]);
            // Entries of emptied segments stay in the index as stale until overwritten; drop them
            // when they outnumber the valid ones so the index stays the size of the cache.
            if self.index.len() > 4 * self.used.iter().map(|u| u.1).sum::<u64>().max(1024) as usize
            {
                let generation = self.generation.clone();
                self.index
                    .retain(|_, p| generation[p.segment as usize] == p.generation);
            }
        }
        self.used[self.current].0 += size as u64;
        self.used[self.current].1 += 1;
        let place = Place {
            segment: self.current as u32,
            generation: self.generation[self.current],
            watched: false,
        };
        self.index.insert(key, place);
    }
}

impl CacheStrategy for Segmented {
    fn insert(&mut self, _now: u64, key: EntryKey, size: u32, _expected: i32) {
        self.add(key, size);
    }

    fn read(&mut self, _now: u64, key: EntryKey) -> bool {
        self.valid(&key)
    }

    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
        // The ring does not free space early; deleted entries just stop being found.
        // Only entries still cached count as removed (stale ones went with their segment, which
        // counted them), and their segment's rotation does not count them again.
        let deleted = |k: &EntryKey| k.topic == topic && k.position.ledger_id == ledger;
        let (generation, used) = (&self.generation, &mut self.used);
        let mut removed = 0;
        self.index.retain(|k, p| {
            if !deleted(k) {
                return true;
            }
            if generation[p.segment as usize] == p.generation {
                used[p.segment as usize].1 -= 1;
                removed += 1;
            }
            false
        });
        self.counters.invalidated_entries += removed;
        let gone = &mut self.watched_gone;
        for watched in &mut self.watched {
            watched.retain(|k| {
                let keep = !deleted(k);
                if !keep {
                    gone.push(*k);
                }
                keep
            });
        }
    }

    fn cached_bytes(&self) -> u64 {
        self.used.iter().map(|u| u.0).sum()
    }

    fn counters(&self) -> StrategyCounters {
        self.counters
    }

    fn contains(&self, key: EntryKey) -> bool {
        self.valid(&key)
    }

    fn report_removals(&mut self) -> bool {
        true
    }

    fn watch_removal(&mut self, key: EntryKey, token: u32) -> Option<u32> {
        let p = self.index.get_mut(&key)?;
        if self.generation[p.segment as usize] != p.generation {
            return None;
        }
        // Listed once: the model may ask again (a front shared by two buffers, or when it starts
        // following again), and the list only empties when the segment does.
        if !p.watched {
            p.watched = true;
            self.watched[p.segment as usize].push(key);
        }
        Some(self.tokens.watch(key, token))
    }

    /// The entry stays listed: its removal is noted, and finds no token.
    fn unwatch(&mut self, key: EntryKey) {
        self.tokens.unwatch(key);
    }

    fn take_removed(&mut self, out: &mut Vec<u32>) {
        self.tokens.take(self.watched_gone.drain(..), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::replay::strategy::test_key as k;

    /// An entry watched again (the memory model asks once per buffer it fronts, and again each
    /// time it starts following) is listed once, and its removal noted once; so its segment's
    /// list holds at most the segment's entries, however often the model asks.
    #[test]
    fn an_entry_watched_again_is_noted_once() {
        let mut ring = Segmented::new(300, 3); // 100 bytes a segment
        assert!(ring.report_removals());
        ring.insert(0, k(0), 60, 0);
        for token in 0..5 {
            assert_eq!(
                ring.watch_removal(k(0), token),
                Some(0),
                "the first token stays"
            );
        }
        assert_eq!(ring.watched.iter().map(Vec::len).sum::<usize>(), 1);
        for e in 1..4 {
            ring.insert(0, k(e), 60, 0); // each fills a segment: the third empties the first
        }
        assert!(!ring.contains(k(0)));
        let mut removed = Vec::new();
        ring.take_removed(&mut removed);
        assert_eq!(removed, [0]);
        // Cached again, it is a new entry: watched anew, noted anew (here: its ledger deleted).
        ring.insert(0, k(0), 60, 0);
        assert_eq!(ring.watch_removal(k(0), 7), Some(7));
        assert_eq!(ring.watch_removal(k(0), 8), Some(7));
        ring.insert(0, k(1), 30, 0);
        assert_eq!(ring.watch_removal(k(1), 9), Some(9));
        ring.unwatch(k(1)); // still listed, no longer reported
        ring.on_ledger_deleted(0, 1);
        removed.clear();
        ring.take_removed(&mut removed);
        assert_eq!(removed, [7]);
    }
}
