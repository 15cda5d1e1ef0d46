//! Belady's victim order: the cached entries by next read, farthest first.
//!
//! A sorted set would do, but every read of a cached entry moves it (its next read changes), and a
//! tree removal plus insertion per read was an eighth of a Belady replay. A binary heap with lazy
//! deletion is cheaper: a move only pushes the new `(next read, key)`, and the old item stays behind
//! as stale. Whoever asks for the farthest entry says what each key's current next read is; items
//! that disagree are dropped as they surface. Since a key's current item is in the heap, the
//! farthest current item is what the sorted set's last element was, ties broken the same way (by
//! key). Stale items are bounded: when a push finds them outnumbering the current ones, the heap is
//! rebuilt from the current ones, so it holds at most about twice the most entries ever cached at
//! once, however long the trace.

use super::EntryKey;
use std::collections::BinaryHeap;

/// Below this many items the heap is never compacted (rebuilding a small heap saves nothing).
const COMPACT_FLOOR: usize = 1024;

#[derive(Debug, Default)]
pub(super) struct FarthestFirst {
    heap: BinaryHeap<(u64, EntryKey)>,
}

impl FarthestFirst {
    /// Records `key`'s next read. Any earlier item of `key` becomes stale; `current` (a key's next
    /// read if cached) lets a compaction keep exactly the current items.
    pub fn set(
        &mut self,
        next: u64,
        key: EntryKey,
        live: usize,
        current: impl Fn() -> Vec<(u64, EntryKey)>,
    ) {
        self.heap.push((next, key));
        if self.heap.len() > COMPACT_FLOOR && self.heap.len() > 2 * live {
            self.heap = BinaryHeap::from(current());
        }
    }

    /// The cached key whose next read is farthest: stale items on top are dropped on the way.
    /// `current(key)` is the key's next read if it is cached, else `None`.
    pub fn farthest(&mut self, current: impl Fn(&EntryKey) -> Option<u64>) -> Option<EntryKey> {
        while let Some(&(next, key)) = self.heap.peek() {
            if current(&key) == Some(next) {
                return Some(key);
            }
            self.heap.pop();
        }
        None
    }

    /// Items held, stale ones included (for tests of the bound).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::Position;
    use std::collections::{BTreeSet, HashMap};

    fn key(e: i64) -> EntryKey {
        EntryKey {
            topic: (e % 3) as u32,
            position: Position::new(e % 5, e),
        }
    }

    /// Random moves, insertions and removals: the farthest key is always the sorted set's last, and
    /// the heap never holds more than twice the most keys live at once (past the floor).
    #[test]
    fn agrees_with_a_sorted_set_and_stays_bounded() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut step = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut heap = FarthestFirst::default();
        let mut set = BTreeSet::new();
        let mut next: HashMap<EntryKey, u64> = HashMap::new();
        let mut peak = 0;
        for _ in 0..200_000 {
            let r = step();
            let k = key((r % 3000) as i64);
            match (r >> 20) % 4 {
                // Insert or move: a new next read (ties and the "never" value included).
                0 | 1 => {
                    let n = if (r >> 30) % 10 == 0 {
                        u64::MAX
                    } else {
                        (r >> 32) % 5000
                    };
                    if let Some(old) = next.insert(k, n) {
                        set.remove(&(old, k));
                    }
                    set.insert((n, k));
                    let live = next.len();
                    heap.set(n, k, live, || next.iter().map(|(k, n)| (*n, *k)).collect());
                }
                // Evict the farthest.
                2 => {
                    let got = heap.farthest(|k| next.get(k).copied());
                    assert_eq!(got, set.last().map(|&(_, k)| k));
                    if let Some(k) = got {
                        let n = next.remove(&k).expect("current");
                        set.remove(&(n, k));
                    }
                }
                // Removed by other means (a deleted ledger): only the caller forgets it.
                _ => {
                    if let Some(n) = next.remove(&k) {
                        set.remove(&(n, k));
                    }
                }
            }
            peak = peak.max(next.len());
            assert!(heap.len() <= (2 * peak + 1).max(COMPACT_FLOOR + 1));
        }
    }
}
