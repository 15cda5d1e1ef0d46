//! PIP-430's active cursor container: cursors sorted by position in a doubly linked list of
//! position groups, each group holding the number of cursors at its position or before, so that
//! [`ActiveCursorContainer::count_at_or_before`] is O(1) once pending changes are applied.
//!
//! Changes (add, move, untrack, remove) are recorded in O(1) and applied on the next query, one
//! pending entry per cursor however often it moved. Applying a move walks the groups between its old
//! and new position, adjusting each one's count; when many cursors changed, the list is rebuilt by
//! sorting instead. Unlike Pulsar's container, every node goes through the same group logic (no tail
//! shortcut), untracked cursors leave the list at the next flush and report 0 at once, and memory is
//! bounded without queries: a removed cursor that was never linked is freed immediately, and one that
//! was linked waits as a single slot.

use crate::fast_hash::FastMap;
use crate::position::Position;
use std::hash::Hash;

const NIL: u32 = u32::MAX;

/// Cursors sharing one position.
#[derive(Debug, Clone)]
struct Group {
    position: Position,
    members: u32,
    /// Tracked cursors at this position or before it.
    at_or_before: u32,
    prev: u32,
    next: u32,
}

#[derive(Debug, Clone)]
struct CursorSlot<K> {
    /// `None` once the cursor was removed (the slot waits for the next flush to leave its group).
    key: Option<K>,
    /// Where the cursor wants to be; `None` = untracked.
    target: Option<Position>,
    /// The group it is linked into, or NIL.
    group: u32,
    /// The slot's id sits in `pending` (kept across slot reuse so an id is queued at most once).
    queued: bool,
    free: bool,
    /// Bumped when the slot is freed, so a stale [`CursorId`] matches nothing.
    generation: u32,
}

/// A handle to a registered cursor: the name lookup done once. Stale after the cursor is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CursorId {
    slot: u32,
    generation: u32,
}

/// Counts active cursors at or before a cursor's position. Keys are cursor names.
#[derive(Debug, Clone)]
pub struct ActiveCursorContainer<K: Hash + Eq + Clone> {
    names: FastMap<K, u32>,
    cursors: Vec<CursorSlot<K>>,
    free_cursors: Vec<u32>,
    groups: Vec<Group>,
    free_groups: Vec<u32>,
    head: u32,
    tail: u32,
    /// Cursors linked into groups.
    linked: usize,
    pending: Vec<u32>,
}

impl<K: Hash + Eq + Clone> Default for ActiveCursorContainer<K> {
    fn default() -> Self {
        ActiveCursorContainer {
            names: FastMap::default(),
            cursors: Vec::new(),
            free_cursors: Vec::new(),
            groups: Vec::new(),
            free_groups: Vec::new(),
            head: NIL,
            tail: NIL,
            linked: 0,
            pending: Vec::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> ActiveCursorContainer<K> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registered cursors, tracked or not.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.names.contains_key(key)
    }

    /// Registers a cursor at `position` (`None`: registered but not tracked). Adding a name that
    /// exists moves it. Returns the cursor's handle.
    pub fn add(&mut self, key: K, position: Option<Position>) -> CursorId {
        if let Some(&id) = self.names.get(&key) {
            self.set_target(id, position);
            return self.handle(id);
        }
        let slot = CursorSlot {
            key: Some(key.clone()),
            target: position,
            group: NIL,
            queued: false,
            free: false,
            generation: 0,
        };
        let id = match self.free_cursors.pop() {
            Some(id) => {
                let old = &self.cursors[id as usize];
                let (queued, generation) = (old.queued, old.generation);
                self.cursors[id as usize] = CursorSlot {
                    queued,
                    generation,
                    ..slot
                };
                id
            }
            None => {
                self.cursors.push(slot);
                (self.cursors.len() - 1) as u32
            }
        };
        self.names.insert(key, id);
        if position.is_some() {
            self.enqueue(id);
        }
        self.handle(id)
    }

    fn handle(&self, slot: u32) -> CursorId {
        CursorId {
            slot,
            generation: self.cursors[slot as usize].generation,
        }
    }

    /// The handle of a registered cursor.
    pub fn id_of(&self, key: &K) -> Option<CursorId> {
        self.names.get(key).map(|&id| self.handle(id))
    }

    fn live_slot(&self, id: CursorId) -> Option<u32> {
        let c = self.cursors.get(id.slot as usize)?;
        (!c.free && c.key.is_some() && c.generation == id.generation).then_some(id.slot)
    }

    /// [`Self::update`] by handle; false for a stale handle.
    pub fn update_by_id(&mut self, id: CursorId, position: Option<Position>) -> bool {
        match self.live_slot(id) {
            Some(slot) => {
                self.set_target(slot, position);
                true
            }
            None => false,
        }
    }

    /// [`Self::count_at_or_before`] by handle; 0 for a stale handle.
    pub fn count_by_id(&mut self, id: CursorId) -> u32 {
        self.flush();
        match self.live_slot(id) {
            Some(slot) => self.group_count(slot),
            None => 0,
        }
    }

    fn group_count(&self, slot: u32) -> u32 {
        match self.cursors[slot as usize].group {
            NIL => 0,
            g => self.groups[g as usize].at_or_before,
        }
    }

    /// Moves a cursor (`None` untracks it). Returns false for an unknown cursor.
    pub fn update(&mut self, key: &K, position: Option<Position>) -> bool {
        match self.names.get(key) {
            Some(&id) => {
                self.set_target(id, position);
                true
            }
            None => false,
        }
    }

    /// Forgets a cursor. Returns false for an unknown cursor.
    pub fn remove(&mut self, key: &K) -> bool {
        let Some(id) = self.names.remove(key) else {
            return false;
        };
        let slot = &mut self.cursors[id as usize];
        slot.key = None;
        slot.target = None;
        if slot.group == NIL {
            self.free_cursor(id);
        } else {
            self.enqueue(id);
        }
        true
    }

    /// Tracked cursors whose position is <= this cursor's (itself included); 0 if the cursor is
    /// unknown or untracked.
    pub fn count_at_or_before(&mut self, key: &K) -> u32 {
        self.flush();
        match self.names.get(key) {
            Some(&id) => self.group_count(id),
            None => 0,
        }
    }

    /// The lowest tracked position.
    pub fn slowest_position(&mut self) -> Option<Position> {
        self.flush();
        (self.head != NIL).then(|| self.groups[self.head as usize].position)
    }

    /// The position a cursor was last given (pending or applied).
    pub fn position_of(&self, key: &K) -> Option<Position> {
        self.names
            .get(key)
            .and_then(|&id| self.cursors[id as usize].target)
    }

    /// Changes recorded but not yet applied.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Cursor slots held, live or awaiting their flush (for leak checks).
    pub fn retained_slots(&self) -> usize {
        self.cursors.len() - self.free_cursors.len()
    }

    fn set_target(&mut self, id: u32, position: Option<Position>) {
        self.cursors[id as usize].target = position;
        self.enqueue(id);
    }

    fn enqueue(&mut self, id: u32) {
        let slot = &mut self.cursors[id as usize];
        if !slot.queued {
            slot.queued = true;
            self.pending.push(id);
        }
    }

    fn free_cursor(&mut self, id: u32) {
        let slot = &mut self.cursors[id as usize];
        slot.free = true;
        slot.generation = slot.generation.wrapping_add(1);
        slot.key = None;
        slot.target = None;
        slot.group = NIL;
        self.free_cursors.push(id);
    }

    /// Applies every pending change.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        // Incremental moves cost the distance travelled; a rebuild costs a sort of everything.
        if self.pending.len() >= 16 && self.pending.len() * 2 >= self.linked {
            self.rebuild();
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        for &id in &pending {
            self.apply(id);
        }
        // Reuse the allocation.
        self.pending = pending;
        self.pending.clear();
    }

    fn apply(&mut self, id: u32) {
        let slot = &mut self.cursors[id as usize];
        slot.queued = false;
        if slot.free {
            return;
        }
        let (from, to) = (slot.group, slot.target);
        let removed = slot.key.is_none();
        let new_group = match (from, to) {
            (NIL, None) => NIL,
            (NIL, Some(p)) => self.link_new(p),
            (g, None) => {
                self.leave(g);
                NIL
            }
            (g, Some(p)) => self.move_cursor(g, p),
        };
        if new_group == NIL && from != NIL {
            self.linked -= 1;
        } else if new_group != NIL && from == NIL {
            self.linked += 1;
        }
        self.cursors[id as usize].group = new_group;
        if removed {
            self.free_cursor(id);
        }
    }

    /// Links one more cursor at `p`, searching from the tail (new cursors usually join there).
    fn link_new(&mut self, p: Position) -> u32 {
        let mut g = self.tail;
        while g != NIL && self.groups[g as usize].position > p {
            self.groups[g as usize].at_or_before += 1;
            g = self.groups[g as usize].prev;
        }
        self.join_or_create_after(g, p)
    }

    /// Joins the group `g` if it is at `p`, else creates a group at `p` right after `g` (NIL: at the
    /// head). Groups after the join point must already count the cursor.
    fn join_or_create_after(&mut self, g: u32, p: Position) -> u32 {
        if g != NIL && self.groups[g as usize].position == p {
            let grp = &mut self.groups[g as usize];
            grp.members += 1;
            grp.at_or_before += 1;
            return g;
        }
        let before = if g == NIL {
            0
        } else {
            self.groups[g as usize].at_or_before
        };
        self.insert_group_after(g, p, 1, before + 1)
    }

    /// Unlinks one cursor from group `g`.
    fn leave(&mut self, g: u32) {
        let mut cur = g;
        while cur != NIL {
            self.groups[cur as usize].at_or_before -= 1;
            cur = self.groups[cur as usize].next;
        }
        self.drop_member(g);
    }

    fn drop_member(&mut self, g: u32) {
        let grp = &mut self.groups[g as usize];
        grp.members -= 1;
        if grp.members == 0 {
            self.unlink_group(g);
        }
    }

    /// Moves one cursor from group `g` to position `p`; returns its new group.
    fn move_cursor(&mut self, g: u32, p: Position) -> u32 {
        let old = self.groups[g as usize].position;
        if p == old {
            return g;
        }
        let target = if p > old {
            // The old group and every group passed stop counting the cursor.
            self.groups[g as usize].at_or_before -= 1;
            let mut last_before = g;
            let mut cur = self.groups[g as usize].next;
            while cur != NIL && self.groups[cur as usize].position < p {
                self.groups[cur as usize].at_or_before -= 1;
                last_before = cur;
                cur = self.groups[cur as usize].next;
            }
            if cur != NIL && self.groups[cur as usize].position == p {
                // That group counted the cursor already.
                self.groups[cur as usize].members += 1;
                cur
            } else {
                let before = self.groups[last_before as usize].at_or_before;
                self.insert_group_after(last_before, p, 1, before + 1)
            }
        } else {
            // Every group passed going back starts counting the cursor; the old group still does.
            let mut cur = self.groups[g as usize].prev;
            while cur != NIL && self.groups[cur as usize].position > p {
                self.groups[cur as usize].at_or_before += 1;
                cur = self.groups[cur as usize].prev;
            }
            self.join_or_create_after(cur, p)
        };
        self.drop_member(g);
        target
    }

    fn insert_group_after(
        &mut self,
        after: u32,
        position: Position,
        members: u32,
        at_or_before: u32,
    ) -> u32 {
        let next = if after == NIL {
            self.head
        } else {
            self.groups[after as usize].next
        };
        let group = Group {
            position,
            members,
            at_or_before,
            prev: after,
            next,
        };
        let id = match self.free_groups.pop() {
            Some(id) => {
                self.groups[id as usize] = group;
                id
            }
            None => {
                self.groups.push(group);
                (self.groups.len() - 1) as u32
            }
        };
        if after == NIL {
            self.head = id;
        } else {
            self.groups[after as usize].next = id;
        }
        if next == NIL {
            self.tail = id;
        } else {
            self.groups[next as usize].prev = id;
        }
        id
    }

    fn unlink_group(&mut self, g: u32) {
        let Group { prev, next, .. } = self.groups[g as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.groups[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.groups[next as usize].prev = prev;
        }
        self.free_groups.push(g);
    }

    /// Re-creates the list from every cursor's target.
    fn rebuild(&mut self) {
        for id in std::mem::take(&mut self.pending) {
            let slot = &mut self.cursors[id as usize];
            slot.queued = false;
            if !slot.free && slot.key.is_none() {
                self.free_cursor(id);
            }
        }
        let mut tracked: Vec<(Position, u32)> = self
            .cursors
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.free && c.key.is_some())
            .filter_map(|(id, c)| c.target.map(|p| (p, id as u32)))
            .collect();
        tracked.sort_unstable();
        self.groups.clear();
        self.free_groups.clear();
        self.head = NIL;
        self.tail = NIL;
        for c in self.cursors.iter_mut() {
            c.group = NIL;
        }
        let mut count = 0u32;
        for run in tracked.chunk_by(|a, b| a.0 == b.0) {
            count += run.len() as u32;
            let g = self.insert_group_after(self.tail, run[0].0, run.len() as u32, count);
            for &(_, id) in run {
                self.cursors[id as usize].group = g;
            }
        }
        self.linked = tracked.len();
    }

    /// Checks every invariant against a brute-force recount; for tests. Flushes first.
    pub fn check_invariants(&mut self) -> Result<(), String> {
        self.flush();
        let mut positions: Vec<Position> = self
            .names
            .values()
            .filter_map(|&id| self.cursors[id as usize].target)
            .collect();
        positions.sort_unstable();
        let mut g = self.head;
        let mut prev = NIL;
        let mut members_seen = 0usize;
        let mut last_pos: Option<Position> = None;
        while g != NIL {
            let grp = &self.groups[g as usize];
            if grp.prev != prev {
                return Err(format!("group at {} has a broken prev link", grp.position));
            }
            if last_pos.is_some_and(|l| l >= grp.position) {
                return Err(format!("groups out of order at {}", grp.position));
            }
            let expected = positions.partition_point(|p| *p <= grp.position) as u32;
            if grp.at_or_before != expected {
                return Err(format!(
                    "group at {} counts {} but {} cursors are at or before it",
                    grp.position, grp.at_or_before, expected
                ));
            }
            if grp.members == 0 {
                return Err(format!("empty group at {}", grp.position));
            }
            members_seen += grp.members as usize;
            last_pos = Some(grp.position);
            prev = g;
            g = grp.next;
        }
        if self.tail != prev {
            return Err("tail is not the last group".into());
        }
        if members_seen != positions.len() || self.linked != positions.len() {
            return Err(format!(
                "{members_seen} linked members, {} tracked cursors, linked={}",
                positions.len(),
                self.linked
            ));
        }
        for (&id, _) in self.names.iter().map(|(k, id)| (id, k)) {
            let c = &self.cursors[id as usize];
            match (c.target, c.group) {
                (None, NIL) => {}
                (Some(p), g) if g != NIL && self.groups[g as usize].position == p => {}
                (t, g) => {
                    return Err(format!(
                        "cursor slot {id} targets {t:?} but is in group {g}"
                    ))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(e: i64) -> Option<Position> {
        Some(Position::new(0, e))
    }

    fn container(positions: &[i64]) -> ActiveCursorContainer<String> {
        let mut c = ActiveCursorContainer::new();
        for (i, p) in positions.iter().enumerate() {
            c.add(format!("c{}", i + 1), pos(*p));
        }
        c
    }

    fn counts(c: &mut ActiveCursorContainer<String>, n: usize) -> Vec<u32> {
        (1..=n)
            .map(|i| c.count_at_or_before(&format!("c{i}")))
            .collect()
    }

    #[test]
    fn tail_leaving_its_group_is_counted_right() {
        let mut c = container(&[1, 2, 3, 4, 5, 5]);
        assert_eq!(counts(&mut c, 6), vec![1, 2, 3, 4, 6, 6]);
        c.update(&"c6".to_string(), pos(9));
        assert_eq!(counts(&mut c, 6), vec![1, 2, 3, 4, 5, 6]);
        c.add("c7".into(), pos(5));
        assert_eq!(counts(&mut c, 7), vec![1, 2, 3, 4, 6, 7, 6]);
        c.check_invariants().unwrap();
    }

    #[test]
    fn tail_joining_its_neighbour_is_counted_right() {
        let mut c = container(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(counts(&mut c, 6), vec![1, 2, 3, 4, 5, 6]);
        c.update(&"c6".to_string(), pos(5));
        assert_eq!(counts(&mut c, 6), vec![1, 2, 3, 4, 6, 6]);
        c.check_invariants().unwrap();
    }

    #[test]
    fn untracked_and_unknown_cursors_count_zero() {
        let mut c = container(&[1, 2, 3]);
        c.update(&"c2".to_string(), None);
        assert_eq!(c.count_at_or_before(&"c2".to_string()), 0);
        assert_eq!(c.count_at_or_before(&"c3".to_string()), 2);
        c.update(&"c2".to_string(), None);
        assert_eq!(c.slowest_position(), pos(1));
        assert_eq!(c.count_at_or_before(&"zz".to_string()), 0);
        assert_eq!(c.len(), 3);
        c.update(&"c2".to_string(), pos(0));
        assert_eq!(counts(&mut c, 3), vec![2, 1, 3]);
        c.check_invariants().unwrap();
    }

    #[test]
    fn churn_without_queries_does_not_grow() {
        let mut c = container(&[1]);
        c.slowest_position();
        for i in 0..10_000 {
            let name = format!("x{i}");
            c.add(name.clone(), pos(1));
            assert!(c.remove(&name));
        }
        assert!(c.retained_slots() <= 2, "{}", c.retained_slots());
        assert!(c.pending_len() <= 2, "{}", c.pending_len());
        assert_eq!(c.count_at_or_before(&"c1".to_string()), 1);
        // Linked cursors removed without a query wait as one slot each, not one per operation.
        let mut c = container(&[1, 2, 3, 4]);
        c.slowest_position();
        for round in 0..1000 {
            for i in 1..=4 {
                c.remove(&format!("c{i}"));
                c.add(format!("c{i}"), pos(round + i));
            }
        }
        assert!(c.retained_slots() <= 8, "{}", c.retained_slots());
        c.check_invariants().unwrap();
    }
}
