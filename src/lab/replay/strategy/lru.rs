//! A plain global least-recently-used cache: every published and every read-back entry is cached;
//! the least recently used goes first when room is needed.

use super::{CacheStrategy, EntryKey, StrategyCounters};
use crate::cache::fast_hash::FxHasher;
use crate::cache::prefetch::prefetch;
use hashbrown::HashTable;
use std::hash::{Hash, Hasher};

const NIL: u32 = u32::MAX;

struct Node {
    key: EntryKey,
    size: u32,
    prev: u32,
    next: u32,
    /// The token its removal is reported by ([`CacheStrategy::watch_removal`]), or [`NIL`]: in
    /// the node, whose 40 bytes had room for it, the memory model needs no map of its fronts.
    watch: u32,
}

pub struct Lru {
    capacity: u64,
    used: u64,
    /// The cached entries' nodes, found by key. The table holds node indices only (4 bytes a slot,
    /// where keys would take 24): it stays in the core's cache, and a lookup compares against the
    /// node it is about to move anyway, so a hit costs one miss instead of two.
    index: HashTable<u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    tail: u32,
    counters: StrategyCounters,
    /// The tokens of the watched entries removed since the memory model last asked (when it
    /// asks: see [`CacheStrategy::report_removals`]). Only the watched ones: the model wants the
    /// fronts of its buffers, a few of the entries, and a report of every removal was about a
    /// twentieth of the LRU replay's profile with the model (a key stored per removal, looked up
    /// at each sample).
    removed: Option<Vec<u32>>,
}

fn hash_of(key: &EntryKey) -> u64 {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    h.finish()
}

impl Lru {
    pub fn new(capacity: u64) -> Self {
        Lru {
            capacity,
            used: 0,
            index: HashTable::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            counters: StrategyCounters::default(),
            removed: None,
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The node of a cached entry.
    fn find(&self, key: &EntryKey) -> Option<u32> {
        let nodes = &self.nodes;
        self.index
            .find(hash_of(key), |&n| nodes[n as usize].key == *key)
            .copied()
    }

    fn unlink(&mut self, n: u32) {
        let (prev, next) = (self.nodes[n as usize].prev, self.nodes[n as usize].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, n: u32) {
        self.nodes[n as usize].prev = NIL;
        self.nodes[n as usize].next = self.head;
        if self.head != NIL {
            self.nodes[self.head as usize].prev = n;
        }
        self.head = n;
        if self.tail == NIL {
            self.tail = n;
        }
    }

    fn remove_node(&mut self, n: u32) {
        self.unlink(n);
        let node = &self.nodes[n as usize];
        self.used -= node.size as u64;
        let (key, watch) = (node.key, node.watch);
        if let Ok(slot) = self.index.find_entry(hash_of(&key), |&m| m == n) {
            slot.remove();
        }
        if let (true, Some(removed)) = (watch != NIL, &mut self.removed) {
            removed.push(watch);
        }
        self.free.push(n);
    }

    pub fn admit(&mut self, key: EntryKey, size: u32) {
        self.admit_watched(key, size, NIL);
    }

    /// Caches `key` as a new entry whose removal is reported by `watch` (or [`NIL`]); false if
    /// it is cached already or larger than the cache.
    fn admit_watched(&mut self, key: EntryKey, size: u32, watch: u32) -> bool {
        if self.find(&key).is_some() || size as u64 > self.capacity {
            return false;
        }
        while self.used + size as u64 > self.capacity && self.tail != NIL {
            self.remove_node(self.tail);
            self.counters.evicted_entries += 1;
        }
        let node = Node {
            key,
            size,
            prev: NIL,
            next: NIL,
            watch,
        };
        let n = match self.free.pop() {
            Some(n) => {
                self.nodes[n as usize] = node;
                n
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.push_front(n);
        let nodes = &self.nodes;
        self.index
            .insert_unique(hash_of(&key), n, |&m| hash_of(&nodes[m as usize].key));
        self.used += size as u64;
        true
    }

    /// Marks `key` used; true if cached.
    pub fn touch(&mut self, key: EntryKey) -> bool {
        match self.find(&key) {
            Some(n) => {
                self.unlink(n);
                self.push_front(n);
                true
            }
            None => false,
        }
    }
}

impl CacheStrategy for Lru {
    fn insert(&mut self, _now: u64, key: EntryKey, size: u32, _expected: i32) {
        self.admit(key, size);
    }

    fn insert_watched(
        &mut self,
        _now: u64,
        key: EntryKey,
        size: u32,
        _expected: i32,
        token: u32,
    ) -> bool {
        // Watched only once reporting (the model asks for reports before it follows).
        let watch = if self.removed.is_some() { token } else { NIL };
        self.admit_watched(key, size, watch) && watch != NIL
    }

    fn read(&mut self, _now: u64, key: EntryKey) -> bool {
        self.touch(key)
    }

    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
        let nodes = &self.nodes;
        let doomed: Vec<u32> = self
            .index
            .iter()
            .copied()
            .filter(|&n| {
                let k = nodes[n as usize].key;
                k.topic == topic && k.position.ledger_id == ledger
            })
            .collect();
        self.counters.invalidated_entries += doomed.len() as u64;
        for n in doomed {
            self.remove_node(n);
        }
    }

    fn cached_bytes(&self) -> u64 {
        self.used
    }

    fn counters(&self) -> StrategyCounters {
        self.counters
    }

    fn contains(&self, key: EntryKey) -> bool {
        self.find(&key).is_some()
    }

    fn prefetch_lookup(&self, key: EntryKey) {
        // The probe's own loads (a control group, a 4-byte slot) are waited for here; the node a
        // lookup then compares against, the larger miss (62% of the memory model's sample in a
        // profile), is only prefetched. Each node the probe meets is (refusing them all shows
        // every candidate: one, nearly always).
        let nodes = &self.nodes;
        let _ = self.index.find(hash_of(&key), |&n| {
            if let Some(node) = nodes.get(n as usize) {
                // A node is 40 bytes: its key may straddle two cache lines.
                let key: *const u8 = std::ptr::from_ref(&node.key).cast();
                prefetch(key);
                prefetch(key.wrapping_add(std::mem::size_of::<EntryKey>() - 1));
            }
            false
        });
    }

    fn report_removals(&mut self) -> bool {
        self.removed.get_or_insert_with(Vec::new);
        true
    }

    fn watch_removal(&mut self, key: EntryKey, token: u32) -> Option<u32> {
        let n = self.find(&key)?;
        let node = &mut self.nodes[n as usize];
        if node.watch == NIL {
            node.watch = token;
        }
        Some(node.watch)
    }

    fn unwatch(&mut self, key: EntryKey) {
        if let Some(n) = self.find(&key) {
            self.nodes[n as usize].watch = NIL;
        }
    }

    fn take_removed(&mut self, out: &mut Vec<u32>) {
        if let Some(removed) = &mut self.removed {
            out.append(removed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::replay::strategy::test_key as k;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut lru = Lru::new(30);
        for e in 0..3 {
            lru.admit(k(e), 10);
        }
        assert!(lru.touch(k(0)));
        lru.admit(k(3), 10); // evicts 1, the least recently used
        assert!(!lru.touch(k(1)));
        assert!(lru.touch(k(0)) && lru.touch(k(2)) && lru.touch(k(3)));
        lru.admit(k(4), 25); // needs room for 25: evicts 0, 2 and 3 in LRU order
        assert_eq!((lru.len(), lru.cached_bytes()), (1, 25));
        assert_eq!(lru.counters().evicted_entries, 4);
        lru.admit(k(5), 31); // larger than the cache: not admitted
        assert!(!lru.touch(k(5)));
    }

    #[test]
    fn reports_the_removal_of_watched_entries_only() {
        let mut lru = Lru::new(30);
        assert!(lru.report_removals());
        for e in 0..3 {
            lru.admit(k(e), 10);
        }
        assert_eq!(lru.watch_removal(k(1), 7), Some(7));
        assert_eq!(lru.watch_removal(k(1), 8), Some(7), "the first token stays");
        assert_eq!(lru.watch_removal(k(2), 9), Some(9));
        lru.unwatch(k(2));
        assert_eq!(
            lru.watch_removal(k(9), 1),
            None,
            "not cached: nothing to watch"
        );
        for e in 3..6 {
            lru.admit(k(e), 10); // evicts 0, 1 and 2
        }
        let mut removed = Vec::new();
        lru.take_removed(&mut removed);
        assert_eq!(removed, [7]);
        // Cached again, the entry is a new one, unwatched until the model asks.
        lru.admit(k(1), 10);
        lru.on_ledger_deleted(0, 1);
        removed.clear();
        lru.take_removed(&mut removed);
        assert!(
            removed.is_empty(),
            "nothing watched left since: {removed:?}"
        );
    }
}
