//! Belady's victim order: the cached entries by next read, farthest first.
//!
//! A sorted set would do, but every read of a cached entry moves it (its next read changes), and a
//! tree removal plus insertion per read was an eighth of a Belady replay. A binary heap with lazy
//! deletion is cheaper: a move only pushes the entry's new item, and the old one stays behind as
//! stale. Whoever asks for the farthest entry says which items are current; the others are dropped
//! as they surface. Since an entry's current item is in the heap, the largest current item is what
//! the sorted set's last element was. Stale items are bounded: when a push finds them outnumbering
//! the current ones, the heap is rebuilt from the current ones, so it holds at most about twice the
//! most entries ever cached at once, however long the trace.

use std::collections::BinaryHeap;

/// Below this many items the heap is never compacted (rebuilding a small heap saves nothing).
pub(super) const COMPACT_FLOOR: usize = 1024;

/// Whether an order holding `held` items, `live` of them current, should drop its stale ones.
pub(super) fn stale_outnumber_live(held: usize, live: usize) -> bool {
    held > COMPACT_FLOOR && held > 2 * live
}

/// Items of type `T` (a next read, with what identifies the entry), largest first.
#[derive(Debug)]
pub(super) struct FarthestFirst<T> {
    heap: BinaryHeap<T>,
}

impl<T: Ord> Default for FarthestFirst<T> {
    fn default() -> Self {
        FarthestFirst {
            heap: BinaryHeap::new(),
        }
    }
}

impl<T: Ord + Copy> FarthestFirst<T> {
    /// Records `item`, an entry's place in the order. Any earlier item of the entry becomes
    /// stale; `current` (the current items of every entry, `live` of them at most) lets a
    /// compaction keep exactly those.
    pub fn set(&mut self, item: T, live: usize, current: impl Fn() -> Vec<T>) {
        self.heap.push(item);
        if stale_outnumber_live(self.heap.len(), live) {
            self.heap = BinaryHeap::from(current());
        }
    }

    /// The largest current item: stale items on top are dropped on the way. `is_current(item)`
    /// says whether the item's entry is still there, in that place.
    pub fn farthest(&mut self, is_current: impl Fn(&T) -> bool) -> Option<T> {
        while let Some(&item) = self.heap.peek() {
            if is_current(&item) {
                return Some(item);
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
    use super::super::xorshift;
    use super::*;
    use crate::cache::position::Position;
    use crate::lab::replay::strategy::EntryKey;
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
        let mut step = || xorshift(&mut rng);
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
                    heap.set((n, k), live, || {
                        next.iter().map(|(k, n)| (*n, *k)).collect()
                    });
                }
                // Evict the farthest.
                2 => {
                    let got = heap.farthest(|&(n, k)| next.get(&k) == Some(&n));
                    assert_eq!(got, set.last().copied());
                    if let Some((_, k)) = got {
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
