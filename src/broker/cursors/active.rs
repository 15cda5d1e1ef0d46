//! PIP-430's active cursor container: how many active cursors are at or before a cursor's position,
//! kept in a [`PositionCounts`] (sorted positions in contiguous chunks, each chunk knowing how many
//! cursors lie before it), so that a query costs a binary search and a short sum, whatever the number
//! of cursors.
//!
//! Changes (add, move, untrack, remove) are recorded in O(1) and applied on the next query, one
//! pending entry per cursor however often it moved; when many cursors changed, the counts are rebuilt
//! by sorting instead. Unlike Pulsar's container (a linked list of position groups with a tail
//! shortcut), every position goes through the same logic, untracked cursors leave at the next flush
//! and report 0 at once, and memory is bounded without queries: a removed cursor that was never
//! counted is freed immediately, and one that was waits as a single slot.

use super::position_counts::{Hint, PositionCounts};
use crate::cache::fast_hash::FxHasher;
use crate::cache::position::Position;
use hashbrown::HashTable;
use std::borrow::Borrow;
use std::cell::Cell;
use std::hash::{BuildHasher, BuildHasherDefault, Hash};

/// What a cursor slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum SlotState {
    Live = 0,
    /// The cursor was removed; the slot waits for the next flush to take it out of the counts.
    Removed = 1,
    /// On the free list.
    Free = 2,
}

const STATE_BITS: u32 = 2;
const STATE_MASK: u32 = (1 << STATE_BITS) - 1;

/// A slot's generation (bumped when the slot is freed) and its state in one word, so that a
/// handle, which holds the stamp of its slot when live, is checked with one compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Stamp(u32);

impl Stamp {
    const NEW: Stamp = Stamp(SlotState::Live as u32);

    fn state(self) -> SlotState {
        match self.0 & STATE_MASK {
            0 => SlotState::Live,
            1 => SlotState::Removed,
            _ => SlotState::Free,
        }
    }

    fn with(self, state: SlotState) -> Stamp {
        Stamp(self.0 & !STATE_MASK | state as u32)
    }

    /// Free, in the next generation: handles of the slot's cursor match nothing from then on (until
    /// the generation wraps, after 2^30 reuses of one slot).
    fn freed(self) -> Stamp {
        Stamp((self.0 & !STATE_MASK).wrapping_add(1 << STATE_BITS) | SlotState::Free as u32)
    }
}

/// What an operation on a cursor touches, without its name (kept apart, in `keys`) and without
/// where it was last moved to (kept in `pending` until applied): 32 bytes, two slots a cache line.
/// Among 100,000 cursors the slots then take 3.2 MB, not 6.4 (the 64-byte slot of before), which
/// keeps more of them in the caches that a seek's miss reaches first (a seek and count by handle at
/// 100,000 cursors: 179 -> 153 ns).
///
/// No flag of a byte: the state is in the stamp, "not counted" is a hint. A slot with byte flags
/// beside a packed hint fits 32 bytes too, but its flags and the hint's index were then loaded as
/// one word just after being stored apart, a load that waits for the stores to reach the cache:
/// a seek and count among 100 cursors took a third longer.
#[derive(Debug, Clone)]
struct CursorSlot {
    /// Where the cursor is counted now, if `hint` is not [`Hint::NOWHERE`].
    counted: Position,
    /// Where in the counts `counted` was last seen; [`Hint::NOWHERE`] if the cursor is not counted.
    hint: Hint,
    stamp: Stamp,
    /// The index of the slot's change in `pending`, or [`NOT_QUEUED`] (kept across slot reuse so
    /// that an id is queued at most once).
    pending: u32,
}

const _: () = assert!(std::mem::size_of::<CursorSlot>() == 32);

/// A slot without a change in `pending`.
const NOT_QUEUED: u32 = u32::MAX;

impl CursorSlot {
    fn counted(&self) -> Option<Position> {
        (self.hint != Hint::NOWHERE).then_some(self.counted)
    }

    /// Counted at `at` (`None`: not counted), found at `hint` in the counts.
    fn set_counted(&mut self, at: Option<Position>, hint: Hint) {
        self.counted = at.unwrap_or_default();
        self.hint = if at.is_some() { hint } else { Hint::NOWHERE };
    }

    fn state(&self) -> SlotState {
        self.stamp.state()
    }
}

/// A cursor's change not yet applied to the counts: where it was last moved (`target`, if
/// `tracked`; else untracked).
#[derive(Debug, Clone, Copy)]
struct Change {
    target: Position,
    slot: u32,
    tracked: bool,
}

impl Change {
    fn new(slot: u32, target: Option<Position>) -> Self {
        Change {
            target: target.unwrap_or_default(),
            slot,
            tracked: target.is_some(),
        }
    }

    fn target(&self) -> Option<Position> {
        self.tracked.then_some(self.target)
    }
}

/// A cursor's name with its hash, kept so that a lookup hashes the name it is given once and
/// compares names only where the hashes agree (a name compared is a load from where it lives).
#[derive(Debug, Clone)]
struct Named<K> {
    hash: u64,
    key: K,
}

fn hash_of<Q: Hash + ?Sized>(key: &Q) -> u64 {
    BuildHasherDefault::<FxHasher>::default().hash_one(key)
}

/// A handle to a registered cursor: the name lookup done once. Stale after the cursor is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CursorId {
    slot: u32,
    stamp: Stamp,
}

/// Counts active cursors at or before a cursor's position. Keys are cursor names.
#[derive(Debug, Clone)]
pub struct ActiveCursorContainer<K: Hash + Eq + Clone> {
    /// The slots of the named cursors, by the hash of their names (kept in `keys`).
    names: HashTable<u32>,
    /// The slot of the last name looked up: callers name the same cursor several times in a row
    /// (move it, then ask for its count), and checking this guess (its hash first, so a wrong guess
    /// costs no look at its name) saves probing the table, a cache miss among many cursors.
    last_named: Cell<u32>,
    cursors: Vec<CursorSlot>,
    /// The name of the cursor in each slot and its hash (`None` once removed): read by name
    /// lookups, and by `names` when it grows.
    keys: Vec<Option<Named<K>>>,
    free_cursors: Vec<u32>,
    counts: PositionCounts,
    /// At most one change per slot (a slot's `pending` is the index of its change here). Changes
    /// are only pushed, or all taken out at once, so that an index stays right until then.
    pending: Vec<Change>,
}

impl<K: Hash + Eq + Clone> Default for ActiveCursorContainer<K> {
    fn default() -> Self {
        ActiveCursorContainer {
            names: HashTable::new(),
            last_named: Cell::new(u32::MAX),
            cursors: Vec::new(),
            keys: Vec::new(),
            free_cursors: Vec::new(),
            counts: PositionCounts::default(),
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

    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.find_slot(hash_of(key), key).is_some()
    }

    /// Registers a cursor at `position` (`None`: registered but not tracked). Adding a name that
    /// exists moves it. Returns the cursor's handle.
    #[inline(always)]
    pub fn add(&mut self, key: K, position: Option<Position>) -> CursorId {
        // Inline, and the position not handed to the out-of-line registering of a new name (the
        // rare case), so that it goes into the slot from where it was made: a position passed
        // through memory is stored in parts and loaded back whole, which waits for the stores.
        let hash = hash_of(&key);
        let id = match self.find_slot(hash, &key) {
            Some(id) => id,
            None => {
                let id = self.register_untracked(hash, key);
                if position.is_none() {
                    return self.handle(id);
                }
                id
            }
        };
        self.set_target(id, position);
        self.handle(id)
    }

    /// A new cursor named `key` (of hash `hash`), untracked (its position, if any, is set by the
    /// caller, as a move).
    #[inline(never)]
    fn register_untracked(&mut self, hash: u64, key: K) -> u32 {
        let slot = CursorSlot {
            counted: Position::default(),
            hint: Hint::NOWHERE,
            stamp: Stamp::NEW,
            pending: NOT_QUEUED,
        };
        let id = match self.free_cursors.pop() {
            Some(id) => {
                // A freed slot's change (if still queued) was reset to untracked.
                let old = &self.cursors[id as usize];
                let (pending, stamp) = (old.pending, old.stamp.with(SlotState::Live));
                self.cursors[id as usize] = CursorSlot {
                    pending,
                    stamp,
                    ..slot
                };
                id
            }
            None => {
                self.cursors.push(slot);
                self.keys.push(None);
                (self.cursors.len() - 1) as u32
            }
        };
        self.keys[id as usize] = Some(Named { hash, key });
        let keys = &self.keys;
        self.names
            .insert_unique(hash, id, |&slot| Self::hash_in(keys, slot));
        id
    }

    /// The hash of the name in slot `slot` (named).
    fn hash_in(keys: &[Option<Named<K>>], slot: u32) -> u64 {
        keys[slot as usize].as_ref().map_or(0, |named| named.hash)
    }

    /// Whether slot `slot` holds the name `key` of hash `hash`.
    fn is_named<Q>(keys: &[Option<Named<K>>], slot: u32, hash: u64, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        keys.get(slot as usize)
            .and_then(Option::as_ref)
            .is_some_and(|named| named.hash == hash && named.key.borrow() == key)
    }

    /// The slot of the cursor named `key`, whose hash is `hash`.
    fn find_slot<Q>(&self, hash: u64, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.names
            .find(hash, |&slot| Self::is_named(&self.keys, slot, hash, key))
            .copied()
    }

    fn handle(&self, slot: u32) -> CursorId {
        CursorId {
            slot,
            stamp: self.cursors[slot as usize].stamp,
        }
    }

    /// The handle of a registered cursor.
    pub fn id_of<Q>(&self, key: &Q) -> Option<CursorId>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.slot_named(key).map(|id| self.handle(id))
    }

    /// The slot of the cursor named `key`. The name is hashed even when the guess is right: a
    /// hash of a short name in hand costs less than reading a wrong guess's name from memory.
    fn slot_named<Q>(&self, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = hash_of(key);
        let last = self.last_named.get();
        if Self::is_named(&self.keys, last, hash, key) {
            return Some(last);
        }
        let id = self.find_slot(hash, key)?;
        self.last_named.set(id);
        Some(id)
    }

    fn live_slot(&self, id: CursorId) -> Option<u32> {
        let c = self.cursors.get(id.slot as usize)?;
        // A handle's stamp is that of a live slot.
        (c.stamp == id.stamp).then_some(id.slot)
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
        match self.live_slot(id) {
            Some(slot) => self.flush_and_count(slot),
            None => {
                self.flush();
                0
            }
        }
    }

    /// Flushes, then counts at the position of live cursor `slot`.
    fn flush_and_count(&mut self, slot: u32) -> u32 {
        // The usual call comes right after the cursor's own move, the one change pending: applying
        // it leaves the cursor's hint exact, so the count reads it without checking it against the
        // position (a second look-up of the same entry).
        if self.pending.len() == 1 && self.pending[0].slot == slot {
            let to = self.pending[0].target();
            self.pending.clear();
            self.apply(slot, to);
            let c = &self.cursors[slot as usize];
            return c
                .counted()
                .map_or(0, |p| self.counts.count_at_hint(p, c.hint));
        }
        self.flush();
        let c = &self.cursors[slot as usize];
        c.counted().map_or(0, |p| self.counts.count_at(p, c.hint))
    }

    /// Moves a cursor (`None` untracks it). Returns false for an unknown cursor.
    pub fn update<Q>(&mut self, key: &Q, position: Option<Position>) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        match self.slot_named(key) {
            Some(id) => {
                self.set_target(id, position);
                true
            }
            None => false,
        }
    }

    /// Forgets a cursor. Returns false for an unknown cursor.
    pub fn remove<Q>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = hash_of(key);
        let keys = &self.keys;
        let Ok(entry) = self
            .names
            .find_entry(hash, |&slot| Self::is_named(keys, slot, hash, key))
        else {
            return false;
        };
        let (id, _) = entry.remove();
        self.keys[id as usize] = None;
        let slot = &mut self.cursors[id as usize];
        slot.stamp = slot.stamp.with(SlotState::Removed);
        if slot.counted().is_some() {
            self.set_target(id, None);
        } else {
            self.free_cursor(id);
        }
        true
    }

    /// Tracked cursors whose position is <= this cursor's (itself included); 0 if the cursor is
    /// unknown or untracked.
    pub fn count_at_or_before<Q>(&mut self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        match self.slot_named(key) {
            Some(id) => self.flush_and_count(id),
            None => {
                self.flush();
                0
            }
        }
    }

    /// The lowest tracked position.
    pub fn slowest_position(&mut self) -> Option<Position> {
        self.flush();
        self.counts.first()
    }

    /// The slowest cursor and its position: the name of a tracked cursor at the lowest tracked
    /// position (Pulsar's `ManagedCursorContainer.getSlowestCursor` with
    /// `getCursorWithOldestPosition`). Among cursors tied there, the one in the lowest slot: Pulsar's
    /// heap names any of them. The counts keep positions, not names, so this looks at every
    /// cursor (O(cursors)); `slowest_position` stays O(1).
    pub fn slowest_cursor(&mut self) -> Option<(&K, Position)> {
        let at = self.slowest_position()?;
        let slot = self
            .cursors
            .iter()
            .position(|c| c.state() == SlotState::Live && c.counted() == Some(at))?;
        self.keys[slot].as_ref().map(|named| (&named.key, at))
    }

    /// The position a cursor was last given (pending or applied).
    pub fn position_of<Q>(&self, key: &Q) -> Option<Position>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = &self.cursors[self.find_slot(hash_of(key), key)? as usize];
        match slot.pending {
            NOT_QUEUED => slot.counted(),
            i => self.pending[i as usize].target(),
        }
    }

    /// Changes recorded but not yet applied.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Cursor slots held, live or awaiting their flush (for leak checks).
    pub fn retained_slots(&self) -> usize {
        self.cursors.len() - self.free_cursors.len()
    }

    /// Records that cursor `id` is to be counted at `position` (`None`: not counted), replacing
    /// its change not yet applied, if any.
    #[inline]
    fn set_target(&mut self, id: u32, position: Option<Position>) {
        let slot = &mut self.cursors[id as usize];
        match slot.pending {
            NOT_QUEUED => {
                // One change per slot, and slots are numbered by u32.
                slot.pending = self.pending.len() as u32;
                self.pending.push(Change::new(id, position));
            }
            i => self.pending[i as usize] = Change::new(id, position),
        }
    }

    fn free_cursor(&mut self, id: u32) {
        let slot = &mut self.cursors[id as usize];
        slot.stamp = slot.stamp.freed();
        slot.set_counted(None, Hint::NOWHERE);
        if slot.pending != NOT_QUEUED {
            // The change stays queued for the slot's next cursor, which must not inherit a move.
            self.pending[slot.pending as usize].tracked = false;
        }
        self.free_cursors.push(id);
    }

    /// Applies every pending change.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        // Incremental moves cost the distance travelled; a rebuild costs a sort of everything.
        if self.pending.len() >= 16 && self.pending.len() * 2 >= self.counts.total() as usize {
            self.rebuild();
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        for change in &pending {
            self.apply(change.slot, change.target());
        }
        // Reuse the allocation.
        self.pending = pending;
        self.pending.clear();
    }

    /// Applies slot `id`'s change, a move to `to`. The change itself is out of `pending` already
    /// (the caller took the list, or clears it), so the slot's index into it is reset here.
    #[inline]
    fn apply(&mut self, id: u32, to: Option<Position>) {
        let slot = &mut self.cursors[id as usize];
        slot.pending = NOT_QUEUED;
        let state = slot.state();
        if state == SlotState::Free {
            return;
        }
        let (from, hint) = (slot.counted(), slot.hint);
        // The position written now, from where the caller has it: written after the counts'
        // update (with the hint, in `set_counted`), a seek and count among 10,000 cursors took
        // 2.5% longer.
        slot.counted = to.unwrap_or_default();
        let removed = state == SlotState::Removed;
        let hint = match (from, to) {
            (None, None) => Hint::NOWHERE,
            (None, Some(p)) => self.counts.insert(p),
            (Some(p), None) => {
                self.counts.remove(p, hint);
                Hint::NOWHERE
            }
            (Some(from), Some(to)) => self.counts.move_one(from, to, hint),
        };
        self.cursors[id as usize].hint = hint;
        if removed {
            self.free_cursor(id);
        }
    }

    /// Re-counts from every cursor's last move.
    fn rebuild(&mut self) {
        for change in std::mem::take(&mut self.pending) {
            let slot = &mut self.cursors[change.slot as usize];
            slot.pending = NOT_QUEUED;
            match slot.state() {
                // Counted at its target once the counts are rebuilt; where, nobody knows yet.
                SlotState::Live => slot.set_counted(change.target(), Hint::UNKNOWN),
                SlotState::Removed => self.free_cursor(change.slot),
                SlotState::Free => {}
            }
        }
        // Every slot not live is free now, and not counted.
        let mut tracked: Vec<Position> = self
            .cursors
            .iter()
            .filter_map(CursorSlot::counted)
            .collect();
        tracked.sort_unstable();
        self.counts.rebuild(
            tracked
                .chunk_by(|a, b| a == b)
                .map(|run| (run[0], run.len() as u32)),
        );
    }

    /// Checks every invariant against a brute-force recount; for tests. Flushes first.
    pub fn check_invariants(&mut self) -> Result<(), String> {
        for (i, change) in self.pending.iter().enumerate() {
            let slot = &self.cursors[change.slot as usize];
            if slot.pending as usize != i {
                return Err(format!(
                    "change {i} is slot {}'s, which names change {}",
                    change.slot, slot.pending
                ));
            }
            if slot.state() != SlotState::Live && change.tracked {
                return Err(format!(
                    "slot {} is not live but its change moves it",
                    change.slot
                ));
            }
        }
        let queued = self
            .cursors
            .iter()
            .filter(|c| c.pending != NOT_QUEUED)
            .count();
        if queued != self.pending.len() {
            return Err(format!(
                "{queued} slots name a change, {} changes",
                self.pending.len()
            ));
        }
        self.flush();
        self.counts.check()?;
        let mut positions: Vec<Position> = self
            .names
            .iter()
            .filter_map(|&id| self.cursors[id as usize].counted())
            .collect();
        positions.sort_unstable();
        let counted: Vec<(Position, u32)> = self.counts.iter().collect();
        let expected: Vec<(Position, u32)> = positions
            .chunk_by(|a, b| a == b)
            .map(|run| (run[0], run.len() as u32))
            .collect();
        if counted != expected {
            return Err(format!(
                "counted {} positions ({} cursors), {} tracked positions ({} cursors)",
                counted.len(),
                self.counts.total(),
                expected.len(),
                positions.len()
            ));
        }
        for &(p, _) in &counted {
            let brute = positions.partition_point(|q| *q <= p) as u32;
            let got = self.counts.count_at_or_before(p);
            if got != brute {
                return Err(format!("{got} counted at or before {p}, {brute} tracked"));
            }
        }
        let free = self
            .cursors
            .iter()
            .filter(|c| c.state() == SlotState::Free)
            .count();
        if free != self.free_cursors.len() {
            return Err(format!(
                "{free} free slots, {} on the free list",
                self.free_cursors.len()
            ));
        }
        for (id, c) in self.cursors.iter().enumerate() {
            if c.state() == SlotState::Removed {
                return Err(format!(
                    "cursor slot {id} was removed and is still held after a flush"
                ));
            }
            if c.state() != SlotState::Live && c.counted().is_some() {
                return Err(format!("cursor slot {id} is counted but not live"));
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

    /// Handles moved and counted one at a time (the count applies that move alone and reads the
    /// hint it leaves) and with other moves pending, against a brute-force count.
    #[test]
    fn counts_by_handle_after_own_and_other_moves() {
        let mut c = ActiveCursorContainer::new();
        let mut at: Vec<i64> = (0..300).map(|i| i * 7 % 301).collect();
        let ids: Vec<CursorId> = at
            .iter()
            .enumerate()
            .map(|(i, &e)| c.add(i, pos(e)))
            .collect();
        let mut x = 3u64;
        for step in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (x >> 33) as usize % at.len();
            at[i] = ((x >> 13) % 400) as i64;
            c.update_by_id(ids[i], pos(at[i]));
            if step % 3 == 0 {
                // Another cursor's move pending too.
                let k = (i + 1) % at.len();
                at[k] += 1;
                c.update_by_id(ids[k], pos(at[k]));
            }
            let expected = at.iter().filter(|&&e| e <= at[i]).count() as u32;
            assert_eq!(c.count_by_id(ids[i]), expected, "step {step}");
        }
        c.check_invariants().unwrap();
        // A stale handle counts 0; a cursor moved below every other one counts itself.
        c.remove(&0);
        c.update_by_id(ids[1], pos(-1));
        assert_eq!(c.count_by_id(ids[0]), 0);
        assert_eq!(c.count_by_id(ids[1]), 1);
    }

    /// A cursor removed before any query leaves a change queued in its slot; the cursor that
    /// takes the slot next, untracked, must not inherit the move.
    #[test]
    fn a_reused_slot_does_not_inherit_the_queued_move() {
        let mut c = container(&[5]);
        c.slowest_position();
        c.add("a".into(), pos(3));
        assert!(c.remove(&"a".to_string()));
        let b = c.add("b".into(), None);
        assert_eq!(c.position_of(&"b".to_string()), None);
        assert_eq!(c.count_by_id(b), 0);
        assert_eq!(c.slowest_position(), pos(5));
        c.check_invariants().unwrap();
    }

    /// A handle names one cursor: after its removal (flushed or not) it matches none of the
    /// cursors that reuse its slot, and a live handle keeps working while others come and go.
    #[test]
    fn handles_go_stale_with_their_cursor_not_with_their_slot() {
        let mut c = container(&[5]);
        let kept = c.id_of(&"c1".to_string()).unwrap();
        let gone = c.add("x".into(), pos(3));
        assert_eq!(c.count_by_id(gone), 1);
        c.remove(&"x".to_string());
        assert!(!c.update_by_id(gone, pos(1)), "removed, not yet flushed");
        for round in 0..1000 {
            let name = format!("y{round}");
            let id = c.add(name.clone(), if round % 2 == 0 { pos(4) } else { None });
            assert_ne!(id, gone);
            assert!(!c.update_by_id(gone, pos(1)));
            assert_eq!(c.count_by_id(gone), 0);
            assert_eq!(c.count_by_id(id), u32::from(round % 2 == 0));
            assert_eq!(c.count_by_id(kept), 1 + u32::from(round % 2 == 0));
            c.remove(&name);
        }
        assert!(c.retained_slots() <= 3, "{}", c.retained_slots());
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
