//! Belady's order among the cached entries never read again: largest key first.
//!
//! A binary heap of keys does it, but its keys mostly arrive in ascending order (within a topic,
//! entries stop being read in the order they were published), so each push climbs the whole heap
//! and each pop sifts a 24-byte key down through it, and in a tailing trace nearly every eviction is
//! one of these. Here each topic keeps a lane: a stack of the positions that arrived ascending, and
//! a heap for the few that did not. The largest key is the largest of the top lane's stack top and
//! heap top, so a push and a pop in order cost a vector push and pop. The order is exactly the
//! heap's (largest `(topic, position)` first), so Belady's victims do not change.
//!
//! Stale keys (entries evicted since, or read again) are handled as in
//! [`super::farthest_first::FarthestFirst`]: dropped as they surface, and all of them at once
//! when they outnumber the current ones.

use super::farthest_first::stale_outnumber_live;
use super::EntryKey;
use crate::cache::position::Position;
use std::collections::{BTreeMap, BinaryHeap};

/// One topic's keys.
#[derive(Debug, Default)]
struct Lane {
    /// Keys that arrived at or above the stack's top: ascending.
    ascending: Vec<Position>,
    /// The others.
    rest: BinaryHeap<Position>,
}

impl Lane {
    /// Whether the largest key is on the heap (else on the stack).
    fn largest_is_in_rest(&self) -> bool {
        match (self.ascending.last(), self.rest.peek()) {
            (Some(a), Some(r)) => r > a,
            (a, _) => a.is_none(),
        }
    }

    fn largest(&self) -> Option<Position> {
        if self.largest_is_in_rest() {
            self.rest.peek().copied()
        } else {
            self.ascending.last().copied()
        }
    }

    /// Drops the largest key.
    fn pop(&mut self) {
        if self.largest_is_in_rest() {
            self.rest.pop();
        } else {
            self.ascending.pop();
        }
    }

    fn is_empty(&self) -> bool {
        self.ascending.is_empty() && self.rest.is_empty()
    }
}

/// Keys, largest first, with lazy deletion.
#[derive(Debug, Default)]
pub(super) struct LargestKeyFirst {
    /// Lanes holding at least one key, by topic.
    lanes: BTreeMap<u32, Lane>,
    /// Keys held, stale ones included.
    len: usize,
}

impl LargestKeyFirst {
    /// Records `key`; `current` (every current key, `live` of them at most) lets a compaction
    /// keep exactly those.
    pub fn set(&mut self, key: EntryKey, live: usize, current: impl Fn() -> Vec<EntryKey>) {
        let lane = self.lanes.entry(key.topic).or_default();
        if lane.ascending.last().is_none_or(|&top| key.position >= top) {
            lane.ascending.push(key.position);
        } else {
            lane.rest.push(key.position);
        }
        self.len += 1;
        if stale_outnumber_live(self.len, live) {
            self.rebuild(current());
        }
    }

    /// Replaces the keys with `keys`: sorted, each lane is all stack.
    fn rebuild(&mut self, mut keys: Vec<EntryKey>) {
        keys.sort_unstable();
        self.lanes.clear();
        self.len = keys.len();
        for key in keys {
            self.lanes
                .entry(key.topic)
                .or_default()
                .ascending
                .push(key.position);
        }
    }

    /// The largest current key: stale keys on top are dropped on the way. `is_current(key)` says
    /// whether the key's entry is still one of these.
    pub fn farthest(&mut self, is_current: impl Fn(&EntryKey) -> bool) -> Option<EntryKey> {
        loop {
            let mut top = self.lanes.last_entry()?;
            let topic = *top.key();
            let lane = top.get_mut();
            let position = lane.largest().expect("a listed lane holds a key");
            let key = EntryKey { topic, position };
            if is_current(&key) {
                return Some(key);
            }
            lane.pop();
            self.len -= 1;
            if lane.is_empty() {
                top.remove();
            }
        }
    }

    /// Keys held, stale ones included (for tests of the bound).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::super::farthest_first::COMPACT_FLOOR;
    use super::super::xorshift;
    use super::*;
    use std::collections::{BTreeSet, HashSet};

    /// Keys mostly ascending per topic (as entries stop being read), some out of order, stale ones
    /// among them: the farthest key is always the sorted set's last, and the lanes never hold more
    /// than twice the most keys live at once (past the floor).
    #[test]
    fn agrees_with_a_sorted_set_and_stays_bounded() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut step = || xorshift(&mut rng);
        let mut order = LargestKeyFirst::default();
        let mut set = BTreeSet::new();
        let mut live: HashSet<EntryKey> = HashSet::new();
        let mut next_entry = [0i64; 4];
        let mut peak = 0;
        for _ in 0..200_000 {
            let r = step();
            let topic = (r % 4) as u32;
            match (r >> 20) % 8 {
                // Mostly the next entry of the topic; now and then one from behind, or another
                // ledger (below or above).
                0..=3 => {
                    let position = match (r >> 30) % 16 {
                        0 => Position::new(1, next_entry[topic as usize] - (r >> 40) as i64 % 50),
                        1 => Position::new((r >> 40) as i64 % 3, (r >> 44) as i64 % 1000),
                        _ => {
                            next_entry[topic as usize] += 1;
                            Position::new(1, next_entry[topic as usize])
                        }
                    };
                    let key = EntryKey { topic, position };
                    if live.insert(key) {
                        set.insert(key);
                    }
                    order.set(key, live.len(), || live.iter().copied().collect());
                }
                // Evict the largest.
                4..=6 => {
                    let got = order.farthest(|k| live.contains(k));
                    assert_eq!(got, set.last().copied());
                    if let Some(k) = got {
                        live.remove(&k);
                        set.remove(&k);
                    }
                }
                // Removed by other means (read again, a deleted ledger): only the caller forgets.
                _ => {
                    if let Some(&k) = set.iter().nth((r >> 24) as usize % set.len().max(1)) {
                        live.remove(&k);
                        set.remove(&k);
                    }
                }
            }
            peak = peak.max(live.len());
            assert!(order.len() <= (2 * peak + 1).max(COMPACT_FLOOR + 1));
        }
    }
}
