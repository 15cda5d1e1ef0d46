//! The container Pulsar used before PIP-430 (`ManagedCursorContainerImpl`): a binary min-heap of
//! cursor positions that answers "where is the slowest cursor" in O(1) and updates in O(log n).
//! Unlike Pulsar's, a removal restores the heap property in both directions, and re-adding a name
//! moves the existing cursor instead of leaving a stale duplicate.

use crate::cache::position::Position;
use std::collections::HashMap;
use std::hash::Hash;

const NOT_IN_HEAP: usize = usize::MAX;

#[derive(Debug, Clone)]
struct Cursor<K> {
    key: K,
    position: Option<Position>,
    heap_index: usize,
}

#[derive(Debug, Clone)]
pub struct SlowestCursorHeap<K: Hash + Eq + Clone> {
    names: HashMap<K, usize>,
    cursors: Vec<Cursor<K>>,
    /// Indices into `cursors`, heap-ordered by position.
    heap: Vec<usize>,
}

impl<K: Hash + Eq + Clone> Default for SlowestCursorHeap<K> {
    fn default() -> Self {
        SlowestCursorHeap {
            names: HashMap::new(),
            cursors: Vec::new(),
            heap: Vec::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> SlowestCursorHeap<K> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.names.contains_key(key)
    }

    pub fn position_of(&self, key: &K) -> Option<Position> {
        self.names.get(key).and_then(|&i| self.cursors[i].position)
    }

    /// Registers a cursor (`None`: registered, not ordered); an existing name is moved.
    pub fn add(&mut self, key: K, position: Option<Position>) {
        if self.names.contains_key(&key) {
            self.update(&key, position);
            return;
        }
        let i = self.cursors.len();
        self.cursors.push(Cursor {
            key: key.clone(),
            position: None,
            heap_index: NOT_IN_HEAP,
        });
        self.names.insert(key, i);
        self.set_position(i, position);
    }

    /// Moves a cursor (`None`: stop ordering it). False for an unknown cursor.
    pub fn update(&mut self, key: &K, position: Option<Position>) -> bool {
        match self.names.get(key) {
            Some(&i) => {
                self.set_position(i, position);
                true
            }
            None => false,
        }
    }

    pub fn remove(&mut self, key: &K) -> bool {
        let Some(i) = self.names.remove(key) else {
            return false;
        };
        self.set_position(i, None);
        // Keep `cursors` dense: move the last cursor into slot i.
        let last = self.cursors.len() - 1;
        self.cursors.swap_remove(i);
        if i != last {
            let moved = &self.cursors[i];
            *self
                .names
                .get_mut(&moved.key)
                .expect("moved cursor is registered") = i;
            if moved.heap_index != NOT_IN_HEAP {
                self.heap[moved.heap_index] = i;
            }
        }
        true
    }

    /// The lowest position among ordered cursors.
    /// The slowest cursor and its position (Pulsar's `getSlowestCursor`): the heap's top.
    pub fn slowest_cursor(&self) -> Option<(&K, Position)> {
        let c = &self.cursors[*self.heap.first()?];
        c.position.map(|p| (&c.key, p))
    }

    pub fn slowest_position(&self) -> Option<Position> {
        self.heap.first().and_then(|&i| self.cursors[i].position)
    }

    fn set_position(&mut self, i: usize, position: Option<Position>) {
        let at = self.cursors[i].heap_index;
        self.cursors[i].position = position;
        match (at == NOT_IN_HEAP, position.is_some()) {
            (true, true) => {
                self.heap.push(i);
                let at = self.heap.len() - 1;
                self.cursors[i].heap_index = at;
                self.sift_up(at);
            }
            (false, true) => self.restore(at),
            (false, false) => {
                let last = self.heap.len() - 1;
                self.swap(at, last);
                self.heap.pop();
                self.cursors[i].heap_index = NOT_IN_HEAP;
                if at < self.heap.len() {
                    self.restore(at);
                }
            }
            (true, false) => {}
        }
    }

    fn key_at(&self, heap_index: usize) -> Position {
        self.cursors[self.heap[heap_index]]
            .position
            .expect("heap members have positions")
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.cursors[self.heap[a]].heap_index = a;
        self.cursors[self.heap[b]].heap_index = b;
    }

    fn restore(&mut self, at: usize) {
        let at = self.sift_up(at);
        self.sift_down(at);
    }

    fn sift_up(&mut self, mut at: usize) -> usize {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.key_at(parent) <= self.key_at(at) {
                break;
            }
            self.swap(parent, at);
            at = parent;
        }
        at
    }

    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (l, r) = (2 * at + 1, 2 * at + 2);
            let mut smallest = at;
            if l < self.heap.len() && self.key_at(l) < self.key_at(smallest) {
                smallest = l;
            }
            if r < self.heap.len() && self.key_at(r) < self.key_at(smallest) {
                smallest = r;
            }
            if smallest == at {
                return;
            }
            self.swap(at, smallest);
            at = smallest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(e: i64) -> Option<Position> {
        Some(Position::new(0, e))
    }

    #[test]
    fn removal_restores_order_in_both_directions() {
        // The sequence that makes a sift-down-only removal report 10 while a cursor sits at 3.
        let mut h = SlowestCursorHeap::new();
        for (name, e) in [
            ("a", 1),
            ("b", 10),
            ("c", 2),
            ("d", 11),
            ("e", 12),
            ("f", 3),
        ] {
            h.add(name, p(e));
        }
        h.remove(&"d");
        h.update(&"c", p(50));
        h.update(&"a", p(60));
        assert_eq!(h.slowest_position(), p(3));
    }

    #[test]
    fn re_adding_a_name_moves_it() {
        let mut h = SlowestCursorHeap::new();
        h.add("a", p(1));
        h.add("a", p(5));
        h.add("b", None);
        assert_eq!(h.len(), 2);
        assert_eq!(h.slowest_position(), p(5));
        h.update(&"b", p(2));
        assert_eq!(h.slowest_position(), p(2));
        h.update(&"b", None);
        assert_eq!(h.slowest_position(), p(5));
    }

    proptest! {
        #[test]
        fn slowest_matches_a_scan(ops in prop::collection::vec((0u8..3, 0usize..12, prop::option::weighted(0.85, 0i64..30)), 1..300)) {
            let mut h = SlowestCursorHeap::new();
            let mut model: HashMap<usize, Option<Position>> = HashMap::new();
            for (op, k, e) in ops {
                let pos = e.map(|e| Position::new(0, e));
                match op {
                    0 => { h.add(k, pos); model.insert(k, pos); }
                    1 => { prop_assert_eq!(h.update(&k, pos), model.contains_key(&k)); if let Some(v) = model.get_mut(&k) { *v = pos; } }
                    _ => { prop_assert_eq!(h.remove(&k), model.remove(&k).is_some()); }
                }
                prop_assert_eq!(h.slowest_position(), model.values().flatten().min().copied());
                prop_assert_eq!(h.len(), model.len());
            }
        }
    }
}
