//! Pulsar's active cursor container as it ships (`ActiveManagedCursorContainerImpl`, master),
//! defects included, so that the lab's PIP-430 numbers are the ones a broker gets
//! (`exact_cursor_counts=False`). [`super::active::ActiveCursorContainer`] is the container as
//! intended.
//!
//! Pulsar keeps the active cursors in a list sorted by position, where the cursors at one position
//! share one counter of the cursors at or before it. Changes wait: a moved cursor waits in a
//! priority queue (highest current position first), a removed one in a map. A query (a count, the
//! slowest position) applies them first: it rebuilds the whole list, exactly, when at least half
//! as many cursors wait as are listed (integer division), and otherwise moves them one by one.
//! A move that leaves a cursor between the same neighbours only re-points its counter, and at the
//! tail it does nothing at all: the group it left keeps counting it and it keeps sharing that
//! group's counter, so counts drift until the next rebuild. Those moves, the queue's order (Java's
//! `PriorityQueue`, whose order among equal positions and whose ordering of a cursor queued twice
//! are its heap's), and the rebuild's order among cursors at one position (the
//! `ConcurrentHashMap`'s iteration order of cursor names, see [`super::java_hash_map`]) are all
//! followed here, so the counts are Pulsar's, not only as wrong as Pulsar's.
//!
//! Only what the managed ledger calls is offered: cursors are added, moved and removed at real
//! positions (Pulsar's `null` position, "untracked", is never passed by `ManagedLedgerImpl`). As in
//! Pulsar, a cursor removed and added back before a query is queued once more each time; the queue
//! empties at the next query of the ledger.

use super::java_hash_map::{Flavor, JavaHashOrder};
use crate::cache::fast_hash::FastMap;
use crate::cache::position::Position;
use std::cmp::Ordering;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Node {
    /// The `String.hashCode` of the cursor's name: where it sits in the maps.
    name_hash: i32,
    position: Option<Position>,
    pending_position: Option<Position>,
    /// The shared counter (`numberOfCursorsAtSamePositionOrBefore`), NIL until first listed.
    counter: u32,
    prev: u32,
    next: u32,
    /// How many times the node sits in the queue (Java may queue a node again before a query).
    queued: u32,
    in_map: bool,
    /// Waits as removed (Pulsar's `pendingRemove`: with real positions only, a node is marked so
    /// exactly while it sits in `pendingRemovedCursors`).
    in_removed: bool,
}

#[derive(Debug, Clone, Copy)]
struct Counter {
    value: i32,
    holders: u32,
}

/// Pulsar's container, keyed by cursor id.
#[derive(Debug, Clone)]
pub struct PulsarCursorList {
    nodes: Vec<Node>,
    free_nodes: Vec<u32>,
    counters: Vec<Counter>,
    free_counters: Vec<u32>,
    head: u32,
    tail: u32,
    /// `trackedNodeCount`: nodes in the list.
    tracked: i32,
    /// `cursorCount`.
    cursor_count: i32,
    /// `cursors` (a `ConcurrentHashMap` by name): lookups and its iteration order.
    by_cursor: FastMap<u32, u32>,
    map_order: JavaHashOrder,
    /// `pendingRemovedCursors` (a `HashMap` by name).
    removed: FastMap<u32, u32>,
    removed_order: JavaHashOrder,
    /// `pendingPositionUpdates`: a binary heap laid out as Java's `PriorityQueue`.
    queue: Vec<u32>,
    /// The nodes a rebuild lists, kept between rebuilds so that one allocates nothing.
    rebuilt: Vec<u32>,
}

impl Default for PulsarCursorList {
    fn default() -> Self {
        PulsarCursorList {
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            counters: Vec::new(),
            free_counters: Vec::new(),
            head: NIL,
            tail: NIL,
            tracked: 0,
            cursor_count: 0,
            by_cursor: FastMap::default(),
            map_order: JavaHashOrder::new(Flavor::Concurrent),
            removed: FastMap::default(),
            removed_order: JavaHashOrder::new(Flavor::Plain),
            queue: Vec::new(),
            rebuilt: Vec::new(),
        }
    }
}

impl PulsarCursorList {
    pub fn new() -> Self {
        Self::default()
    }

    /// `size()`: cursors added and not removed.
    pub fn len(&self) -> usize {
        self.cursor_count.max(0) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.cursor_count <= 0
    }

    /// `add(cursor, position)`: `name_hash` is the `hashCode` of the cursor's name.
    pub fn add(&mut self, cursor: u32, name_hash: i32, position: Position) {
        if let Some(&n) = self.by_cursor.get(&cursor) {
            self.wait_at(n, position);
            return;
        }
        let n = match self.removed.remove(&cursor) {
            Some(n) => {
                self.removed_order.remove(cursor);
                let node = &mut self.nodes[n as usize];
                node.in_removed = false;
                n
            }
            None => self.new_node(name_hash),
        };
        // Queued even if a copy of it is queued already (a node reused from the removals).
        self.nodes[n as usize].pending_position = Some(position);
        self.offer(n);
        self.nodes[n as usize].in_map = true;
        self.by_cursor.insert(cursor, n);
        self.map_order
            .insert(cursor, self.nodes[n as usize].name_hash);
        self.cursor_count += 1;
    }

    /// `updateCursor(cursor, position)`: false (and nothing done) for a cursor not added.
    pub fn update(&mut self, cursor: u32, position: Position) -> bool {
        let Some(&n) = self.by_cursor.get(&cursor) else {
            return false;
        };
        self.wait_at(n, position);
        true
    }

    /// A listed or waiting node's move to `position`: queued once until a query applies it.
    fn wait_at(&mut self, n: u32, position: Position) {
        if self.nodes[n as usize].pending_position.is_none() {
            self.offer(n);
        }
        self.nodes[n as usize].pending_position = Some(position);
    }

    /// `removeCursor(name)`: whether the cursor was there.
    pub fn remove(&mut self, cursor: u32) -> bool {
        let Some(n) = self.by_cursor.remove(&cursor) else {
            return false;
        };
        self.map_order.remove(cursor);
        let node = &mut self.nodes[n as usize];
        node.in_map = false;
        if node.position.is_some() {
            node.in_removed = true;
            let hash = node.name_hash;
            self.removed.insert(cursor, n);
            self.removed_order.insert(cursor, hash);
        }
        self.nodes[n as usize].pending_position = None;
        self.cursor_count -= 1;
        self.free_if_unreachable(n);
        true
    }

    /// `getNumberOfCursorsAtSamePositionOrBefore`: what the cursor's shared counter says after
    /// the waiting changes are applied (0 for a cursor not listed). It can be wrong, and even 0 or
    /// less, where Pulsar's is.
    pub fn count_at_or_before(&mut self, cursor: u32) -> i32 {
        self.apply_pending();
        match self.by_cursor.get(&cursor) {
            Some(&n) if self.nodes[n as usize].position.is_some() => {
                let c = self.nodes[n as usize].counter;
                if c == NIL {
                    0
                } else {
                    self.counters[c as usize].value
                }
            }
            _ => 0,
        }
    }

    /// `getSlowestCursorPosition`: the list's head after the waiting changes are applied.
    pub fn slowest_position(&mut self) -> Option<Position> {
        self.apply_pending();
        (self.head != NIL)
            .then(|| self.nodes[self.head as usize].position)
            .flatten()
    }

    /// Nodes held (listed, waiting or queued): what memory follows.
    pub fn retained_nodes(&self) -> usize {
        self.nodes.len() - self.free_nodes.len()
    }

    /// Entries in the queue of waiting moves.
    pub fn pending_len(&self) -> usize {
        self.queue.len()
    }

    /// Whether the next query rebuilds the list (and so counts right), rather than applying the
    /// waiting changes one by one.
    pub fn next_query_rebuilds(&self) -> bool {
        !(self.removed.is_empty() && self.queue.is_empty())
            && self.queue.len() as i64 >= i64::from(self.tracked / 2)
    }

    fn new_node(&mut self, name_hash: i32) -> u32 {
        let node = Node {
            name_hash,
            position: None,
            pending_position: None,
            counter: NIL,
            prev: NIL,
            next: NIL,
            queued: 0,
            in_map: false,
            in_removed: false,
        };
        place(&mut self.nodes, &mut self.free_nodes, node)
    }

    /// Java would collect a node nothing refers to: the map, the removals, the queue. (A node in
    /// the list is in the map or waiting as removed.)
    fn free_if_unreachable(&mut self, n: u32) {
        let node = &self.nodes[n as usize];
        if node.in_map || node.in_removed || node.queued > 0 {
            return;
        }
        let counter = node.counter;
        self.nodes[n as usize].counter = NIL;
        self.release_counter(counter);
        self.free_nodes.push(n);
    }

    // --- counters (`MutableInt`s shared by the nodes at one position) ---

    fn new_counter(&mut self, value: i32) -> u32 {
        let c = Counter { value, holders: 0 };
        place(&mut self.counters, &mut self.free_counters, c)
    }

    fn release_counter(&mut self, c: u32) {
        if c == NIL {
            return;
        }
        let counter = &mut self.counters[c as usize];
        counter.holders -= 1;
        if counter.holders == 0 {
            self.free_counters.push(c);
        }
    }

    fn set_counter(&mut self, n: u32, c: u32) {
        self.counters[c as usize].holders += 1;
        let old = std::mem::replace(&mut self.nodes[n as usize].counter, c);
        self.release_counter(old);
    }

    fn counter_of(&self, n: u32) -> u32 {
        self.nodes[n as usize].counter
    }

    fn value_of(&self, n: u32) -> i32 {
        match self.counter_of(n) {
            NIL => 0,
            c => self.counters[c as usize].value,
        }
    }

    fn bump(&mut self, n: u32, by: i32) {
        let c = self.counter_of(n);
        if c != NIL {
            let v = &mut self.counters[c as usize].value;
            *v = v.wrapping_add(by);
        }
    }

    fn pos(&self, n: u32) -> Position {
        // Every listed node has a position; a missing one sorts first, as no real one does.
        self.nodes[n as usize]
            .position
            .unwrap_or(Position::new(i64::MIN, i64::MIN))
    }

    // --- the queue (`PriorityQueue` with Pulsar's comparator) ---

    /// Pulsar's comparator: a node without a position after any other, else highest position
    /// first.
    fn queue_order(&self, a: u32, b: u32) -> Ordering {
        match (
            self.nodes[a as usize].position,
            self.nodes[b as usize].position,
        ) {
            (None, _) => Ordering::Greater,
            (_, None) => Ordering::Less,
            (Some(pa), Some(pb)) => pb.cmp(&pa),
        }
    }

    fn offer(&mut self, n: u32) {
        self.nodes[n as usize].queued += 1;
        let mut k = self.queue.len();
        self.queue.push(n);
        while k > 0 {
            let parent = (k - 1) >> 1;
            let e = self.queue[parent];
            if self.queue_order(n, e) != Ordering::Less {
                break;
            }
            self.queue[k] = e;
            k = parent;
        }
        self.queue[k] = n;
    }

    fn poll(&mut self) -> Option<u32> {
        let first = *self.queue.first()?;
        let x = self.queue.pop()?;
        let n = self.queue.len();
        if n > 0 {
            let mut k = 0;
            let half = n >> 1;
            while k < half {
                let mut child = 2 * k + 1;
                let mut c = self.queue[child];
                let right = child + 1;
                if right < n && self.queue_order(c, self.queue[right]) == Ordering::Greater {
                    child = right;
                    c = self.queue[child];
                }
                if self.queue_order(x, c) != Ordering::Greater {
                    break;
                }
                self.queue[k] = c;
                k = child;
            }
            self.queue[k] = x;
        }
        self.nodes[first as usize].queued -= 1;
        Some(first)
    }

    fn clear_queue(&mut self) {
        for n in std::mem::take(&mut self.queue) {
            self.nodes[n as usize].queued -= 1;
            self.free_if_unreachable(n);
        }
    }

    // --- applying the waiting changes (`processPendingPositions`) ---

    fn apply_pending(&mut self) {
        if self.removed.is_empty() && self.queue.is_empty() {
            return;
        }
        if self.next_query_rebuilds() {
            self.rebuild();
            self.clear_queue();
        } else {
            self.apply_one_by_one();
        }
    }

    /// `performIncrementalUpdate`: removals in the removal map's order, then moves in the queue's.
    fn apply_one_by_one(&mut self) {
        if !self.removed.is_empty() {
            let order: Vec<u32> = self.removed_order.iter().collect();
            for cursor in order {
                let n = self.removed[&cursor];
                self.unlist(n);
            }
            for (_, n) in std::mem::take(&mut self.removed) {
                self.nodes[n as usize].in_removed = false;
                self.free_if_unreachable(n);
            }
            self.removed_order.clear();
        }
        while let Some(n) = self.poll() {
            if let Some(to) = self.nodes[n as usize].pending_position {
                match self.nodes[n as usize].position {
                    None => {
                        self.nodes[n as usize].position = Some(to);
                        self.list(n);
                    }
                    Some(from) => self.shift(n, from, to),
                }
                self.nodes[n as usize].pending_position = None;
            }
            self.free_if_unreachable(n);
        }
    }

    /// `rebuildEntireList`: every cursor of the map that has a position, sorted stably from the
    /// map's iteration order, counters made afresh.
    fn rebuild(&mut self) {
        self.head = NIL;
        self.tail = NIL;
        self.tracked = 0;
        let mut listed = std::mem::take(&mut self.rebuilt);
        listed.clear();
        for cursor in self.map_order.iter() {
            let n = self.by_cursor[&cursor];
            let node = &mut self.nodes[n as usize];
            if let Some(to) = node.pending_position.take() {
                node.position = Some(to);
            }
            // A node of the map never waits as removed (only `removeCursor` marks one, and it
            // leaves the map), so Pulsar's `!node.pendingRemove` holds here.
            if node.position.is_some() {
                listed.push(n);
                self.tracked += 1;
            }
        }
        for (_, n) in std::mem::take(&mut self.removed) {
            self.nodes[n as usize].in_removed = false;
            self.free_if_unreachable(n);
        }
        self.removed_order.clear();
        listed.sort_by_key(|&n| self.pos(n));
        let mut prev = NIL;
        let mut counter = NIL;
        let mut last: Option<Position> = None;
        let mut running = 0i32;
        for &n in &listed {
            self.nodes[n as usize].prev = prev;
            self.nodes[n as usize].next = NIL;
            if prev == NIL {
                self.head = n;
            } else {
                self.nodes[prev as usize].next = n;
            }
            let p = self.pos(n);
            running += 1;
            if last != Some(p) {
                counter = self.new_counter(running);
                last = Some(p);
            } else {
                self.counters[counter as usize].value += 1;
            }
            self.set_counter(n, counter);
            prev = n;
        }
        self.tail = prev;
        self.rebuilt = listed;
    }

    /// `insertNodeIntoList`: after every node at or before its position.
    fn list(&mut self, n: u32) {
        self.tracked += 1;
        if self.head == NIL {
            self.head = n;
            self.tail = n;
            let c = self.new_counter(1);
            self.set_counter(n, c);
            return;
        }
        let at = self.pos(n);
        let mut current = self.head;
        let mut before = 0i32;
        let mut first_same = NIL;
        while current != NIL {
            match self.pos(current).cmp(&at) {
                Ordering::Greater => break,
                Ordering::Equal => {
                    if first_same == NIL {
                        first_same = current;
                    }
                }
                Ordering::Less => before += 1,
            }
            current = self.nodes[current as usize].next;
        }
        let c = if first_same != NIL {
            self.counter_of(first_same)
        } else {
            self.new_counter(before + 1)
        };
        self.set_counter(n, c);
        if current == NIL {
            self.link_after(n, self.tail);
        } else {
            self.link_before(n, current);
        }
        let start = if first_same != NIL {
            first_same
        } else {
            self.nodes[n as usize].next
        };
        self.bump_groups_from(start, 1);
    }

    /// `updateCounters`: adds `by` to the counter of each position group from `start` to the end
    /// (the first node of each run of equal positions).
    fn bump_groups_from(&mut self, start: u32, by: i32) {
        let mut current = start;
        let mut last: Option<Position> = None;
        while current != NIL {
            let p = self.pos(current);
            if last != Some(p) {
                last = Some(p);
                self.bump(current, by);
            }
            current = self.nodes[current as usize].next;
        }
    }

    /// `removeNodeFromList`.
    fn unlist(&mut self, n: u32) {
        let at = self.pos(n);
        let mut first_same_before = NIL;
        let mut current = self.nodes[n as usize].prev;
        while current != NIL && self.pos(current) == at {
            first_same_before = current;
            current = self.nodes[current as usize].prev;
        }
        let next = self.nodes[n as usize].next;
        self.unlink(n);
        let start = if first_same_before != NIL {
            first_same_before
        } else {
            next
        };
        self.bump_groups_from(start, -1);
        self.nodes[n as usize].prev = NIL;
        self.nodes[n as usize].next = NIL;
        self.tracked -= 1;
    }

    /// Takes `n` out of the chain, leaving its own links as they were.
    fn unlink(&mut self, n: u32) {
        let Node { prev, next, .. } = self.nodes[n as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    /// Puts `n` after `after` (NIL: at the head).
    fn link_after(&mut self, n: u32, after: u32) {
        let next = if after == NIL {
            self.head
        } else {
            self.nodes[after as usize].next
        };
        self.nodes[n as usize].prev = after;
        self.nodes[n as usize].next = next;
        if after == NIL {
            self.head = n;
        } else {
            self.nodes[after as usize].next = n;
        }
        if next == NIL {
            self.tail = n;
        } else {
            self.nodes[next as usize].prev = n;
        }
    }

    /// Puts `n` before `before`, which is in the list.
    fn link_before(&mut self, n: u32, before: u32) {
        let prev = self.nodes[before as usize].prev;
        self.link_after(n, prev);
    }

    /// `moveNodeToNewPosition`, with its shortcuts.
    fn shift(&mut self, n: u32, from: Position, to: Position) {
        if from == to {
            return;
        }
        let forward = from < to;
        if self.fits_between_neighbours(n, to) {
            self.nodes[n as usize].position = Some(to);
            if n == self.tail {
                // Pulsar's tail shortcut: no counter is touched.
                return;
            }
            if forward {
                self.bump(n, -1);
            }
            let Node { prev, next, .. } = self.nodes[n as usize];
            if prev != NIL && self.pos(prev) == to {
                let c = self.counter_of(prev);
                self.set_counter(n, c);
                self.bump(n, 1);
            } else if next != NIL && self.pos(next) == to {
                let c = self.counter_of(next);
                self.set_counter(n, c);
            } else {
                let base = if prev != NIL { self.value_of(prev) } else { 0 };
                let c = self.new_counter(base.wrapping_add(1));
                self.set_counter(n, c);
            }
            return;
        }
        self.unlink(n);
        if forward {
            self.bump(n, -1);
            let mut last = from;
            let mut current = self.nodes[n as usize].next;
            while current != NIL && self.pos(current) < to {
                if self.pos(current) != last {
                    self.bump(current, -1);
                    last = self.pos(current);
                }
                current = self.nodes[current as usize].next;
            }
            self.place_moving_forward(n, current, to);
        } else {
            let mut last = from;
            let mut current = self.nodes[n as usize].prev;
            while current != NIL && self.pos(current) > to {
                if self.pos(current) != last {
                    self.bump(current, 1);
                    last = self.pos(current);
                }
                current = self.nodes[current as usize].prev;
            }
            self.place_moving_backward(n, current, to);
        }
        self.nodes[n as usize].position = Some(to);
    }

    /// `isAlreadyInCorrectPosition`.
    fn fits_between_neighbours(&self, n: u32, to: Position) -> bool {
        let Node { prev, next, .. } = self.nodes[n as usize];
        let prev_past = prev != NIL && self.pos(prev) > to;
        let next_before = next != NIL && self.pos(next) < to;
        !prev_past && !next_before
    }

    /// `insertNodeAtNewPositionForward`: `current` is the first node at or past `to` (NIL: none).
    fn place_moving_forward(&mut self, n: u32, current: u32, to: Position) {
        if current == NIL {
            let prev = self.tail;
            self.link_after(n, prev);
            let base = if prev != NIL { self.value_of(prev) } else { 0 };
            let c = self.new_counter(base.wrapping_add(1));
            self.set_counter(n, c);
            return;
        }
        self.link_before(n, current);
        if self.pos(current) == to {
            let c = self.counter_of(current);
            self.set_counter(n, c);
        } else {
            let prev = self.nodes[n as usize].prev;
            let base = if prev != NIL { self.value_of(prev) } else { 0 };
            let c = self.new_counter(base.wrapping_add(1));
            self.set_counter(n, c);
        }
    }

    /// `insertNodeAtNewPositionBackward`: `current` is the last node at or before `to` (NIL:
    /// none).
    fn place_moving_backward(&mut self, n: u32, current: u32, to: Position) {
        if current == NIL {
            self.link_after(n, NIL);
            let c = self.new_counter(1);
            self.set_counter(n, c);
            return;
        }
        self.link_after(n, current);
        if self.pos(current) == to {
            let c = self.counter_of(current);
            self.set_counter(n, c);
            self.bump(n, 1);
        } else {
            let base = self.value_of(current);
            let c = self.new_counter(base.wrapping_add(1));
            self.set_counter(n, c);
        }
    }
}

/// Puts `item` in a free slot of `items` (or a new one) and returns its index.
fn place<T>(items: &mut Vec<T>, free: &mut Vec<u32>, item: T) -> u32 {
    match free.pop() {
        Some(i) => {
            items[i as usize] = item;
            i
        }
        None => {
            items.push(item);
            (items.len() - 1) as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(e: i64) -> Position {
        Position::new(0, e)
    }

    /// Four cursors, two of them (1 and 2) at the tail position; hashes put 1 before 2 in the
    /// map, so 2 is the tail after the first query's rebuild.
    fn four() -> PulsarCursorList {
        let mut c = PulsarCursorList::new();
        c.add(1, 1, p(5));
        c.add(2, 2, p(5));
        c.add(3, 3, p(3));
        c.add(4, 4, p(1));
        assert_eq!(c.count_at_or_before(1), 4);
        c
    }

    #[test]
    fn moving_the_tail_alone_leaves_its_old_group_counting_it() {
        let mut c = four();
        c.update(2, p(7));
        // One waiting move among four listed: applied one by one, through the tail shortcut.
        assert_eq!(
            c.count_at_or_before(1),
            4,
            "Pulsar's count (3 cursors are at or before)"
        );
        assert_eq!(c.count_at_or_before(2), 4);
        assert_eq!(c.count_at_or_before(3), 2);
        // Two moves at once rebuild the list: right again.
        c.update(3, p(4));
        c.update(4, p(2));
        assert_eq!(c.count_at_or_before(1), 3);
        assert_eq!(c.count_at_or_before(2), 4);
    }

    #[test]
    fn a_move_before_the_tail_is_counted_right() {
        let mut c = four();
        c.update(3, p(4));
        assert_eq!(c.count_at_or_before(3), 2);
        assert_eq!(c.count_at_or_before(1), 4);
        c.update(4, p(5));
        assert_eq!(c.count_at_or_before(4), 4);
        assert_eq!(c.count_at_or_before(3), 1);
    }

    #[test]
    fn the_map_order_decides_which_tied_cursor_is_the_tail() {
        // The same moves with the hashes swapped: 1 is the tail, so moving 2 is counted right.
        let mut c = PulsarCursorList::new();
        c.add(1, 2, p(5));
        c.add(2, 1, p(5));
        c.add(3, 3, p(3));
        c.add(4, 4, p(1));
        c.count_at_or_before(1);
        c.update(2, p(7));
        assert_eq!(c.count_at_or_before(1), 3);
        assert_eq!(c.count_at_or_before(2), 4);
    }

    #[test]
    fn removals_wait_for_a_query_and_nodes_are_freed() {
        let mut c = four();
        assert!(c.remove(3));
        assert!(!c.remove(3));
        assert_eq!(c.len(), 3);
        assert_eq!(c.slowest_position(), Some(p(1)));
        assert_eq!(c.count_at_or_before(1), 3);
        for round in 0..1000 {
            c.remove(4);
            c.add(4, 4, p(round % 7));
            c.count_at_or_before(4);
        }
        assert!(c.retained_nodes() <= 4, "{} nodes", c.retained_nodes());
        assert!(c.counters.len() - c.free_counters.len() <= 4);
    }
}
