//! One managed ledger's cached entries (Pulsar's `RangeCache`), without locking: the manager wraps
//! each in a mutex. Entries live in a slab so that the removal queue can name them by slot number
//! instead of holding a pointer per queue slot.
//!
//! Each occupied slot has exactly one removal-queue item, and a slot is reused only once its item
//! has left the queue. An entry removed by other means (`remove_range`, `clear`) therefore leaves
//! its slot behind as a tombstone, which the evictor frees when the item reaches the head (as
//! Pulsar's removal queue drops an entry that was removed from its cache when it gets to it). So
//! an item needs no serial to tell a stale reference from a new occupant.

use crate::cache::entry::{CachedEntry, Payload};
use crate::cache::pages::Pages;
use crate::cache::payload::SizedPayload;
use crate::cache::position::Position;
use crate::cache::position_index::PositionIndex;
use crate::cache::prefetch::prefetch;
use crate::cache::read_count::ReadCount;
use crate::cache::removal_queue::{Candidate, EvictionPolicy, EvictionResult};
use crate::cache::stats::Lookups;

/// A cached entry and the removal queue's bookkeeping for it, in 32 bytes: its position is not
/// stored (the slot's (index chunk, lane) finds its place in the index, which is all a removal
/// needs), and its size is carried by the payload word (see [`SizedPayload`]), since every slot is
/// per-entry memory.
#[derive(Debug)]
pub(crate) struct Slot {
    payload: SizedPayload,
    pub read_count: ReadCount,
    /// When the entry was inserted or last requeued (the TTL counts from here).
    pub timestamp_ns: u64,
    /// Live: the index chunk holding this position (saves a tree lookup on removal). Free: the next
    /// free slot ([`NO_SLOT`] ends the list), so the free list needs no memory of its own and a
    /// removal never allocates.
    chunk: u32,
    pub requeue_count: u16,
    /// Read since the last eviction check.
    pub accessed: bool,
    /// [`LIVE`], [`TOMBSTONE`] or neither (free), [`SIZE_ASIDE`], [`WATCHED`], and the
    /// position's lane in `chunk` (the low 4 bits).
    state: u8,
}

/// A cached entry as the evictor sees it, looked at without touching it (see
/// [`crate::EntryCache::peek`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryInfo {
    pub position: Position,
    /// The accounted size.
    pub size: u32,
    /// Remaining expected reads; `None` if the entry was cached without a count.
    pub expected_reads: Option<i32>,
    /// How many times the evictor extended its TTL.
    pub requeue_count: u16,
    /// Read since the evictor last looked at it (its TTL is extended once if the
    /// recently-accessed extension is on).
    pub accessed: bool,
    /// When it was inserted or last requeued (its TTL counts from here), on the manager's clock.
    pub timestamp_ns: u64,
}

/// What the evictor's visit of a slot came to (see [`RangeCache::visit`]).
pub(crate) enum Visit {
    /// No live entry: a tombstone, now freed.
    Stale,
    /// The entry stays, requeued (the judge marked it), in the slot given (see
    /// [`RangeCache::visit_in_stream`], which may move it).
    Requeued(u32),
    /// The entry stays, and the pass ends here.
    Stopped,
    /// The entry was removed: its size, and its payload for [`set_aside`].
    Removed(u32, Payload),
}

/// Holds a cached entry.
const LIVE: u8 = 0x80;
/// Held an entry removed by other means; freed when its queue item reaches the head.
const TOMBSTONE: u8 = 0x40;
/// The accounted size is in `RangeCache::sizes_aside`, not carried by the payload word.
const SIZE_ASIDE: u8 = 0x20;
/// Its removal is noted in `RangeCache::watched_gone` (see [`RangeCache::watch_removal`]).
const WATCHED: u8 = 0x10;
const LANE: u8 = 0x0f;

/// The end of the free list.
const NO_SLOT: u32 = u32::MAX;

impl Slot {
    /// What the removal queue's eviction decision looks at.
    #[inline]
    pub(crate) fn candidate(&self) -> Candidate {
        Candidate {
            timestamp_ns: self.timestamp_ns,
            accessed: self.accessed,
            has_expected_reads: self.has_expected_reads(),
            requeue_count: self.requeue_count,
        }
    }

    /// Marks the entry requeued: fresh timestamp, not accessed, one more extension used.
    #[inline]
    pub(crate) fn mark_requeued(&mut self, now_ns: u64) {
        self.timestamp_ns = now_ns;
        self.accessed = false;
        self.requeue_count = self.requeue_count.saturating_add(1);
    }

    /// Hints the CPU to load the header of the payload, which removing the entry reads.
    #[inline]
    fn prefetch_payload(&self) {
        if let Some(p) = self.payload.payload().header_addr() {
            prefetch(p);
        }
    }

    /// Hands over the payload (the caller decides where it is dropped) and the counter.
    fn vacate(&mut self) -> Payload {
        self.read_count = ReadCount::UNCOUNTED;
        self.payload.take()
    }

    pub fn is_live(&self) -> bool {
        self.state & LIVE != 0
    }

    fn is_tombstone(&self) -> bool {
        self.state & TOMBSTONE != 0
    }

    fn lane(&self) -> u8 {
        self.state & LANE
    }

    pub fn has_expected_reads(&self) -> bool {
        self.read_count.has_expected_reads()
    }

    /// The accounted size of the entry in this slot, number `n` of a cache whose sizes set aside
    /// are `aside`.
    #[inline(always)]
    fn size(&self, n: u32, aside: &Pages<u32>) -> u32 {
        if self.state & SIZE_ASIDE != 0 {
            aside[n as usize]
        } else {
            self.payload.carried_size()
        }
    }
}

/// Takes the entry out of live `slot`, number `n` of a cache whose parts are the rest: out of its
/// `index` and its `size_bytes`; returns the entry's size and payload. The caller gives the slot its
/// next state (free or tombstone). The cache's parts rather than the cache, so that the evictor's
/// visit, which holds the slot already, does not look it up again.
#[inline(always)]
fn take_entry(
    slot: &mut Slot,
    n: u32,
    aside: &Pages<u32>,
    index: &mut PositionIndex,
    size_bytes: &mut u64,
    watched_gone: &mut Option<Box<WatchedGone>>,
) -> (u32, Payload) {
    debug_assert!(slot.is_live());
    let size = slot.size(n, aside);
    let payload = slot.vacate();
    if slot.state & WATCHED != 0 {
        note_gone(slot, index, watched_gone);
    }
    index.remove_lane(slot.chunk, slot.lane());
    *size_bytes -= u64::from(size);
    (size, payload)
}

/// Notes that the watched entry in `slot` leaves (see [`RangeCache::watch_removal`]): only the
/// lab watches entries, so this stays out of the eviction loop's code.
#[cold]
#[inline(never)]
fn note_gone(slot: &Slot, index: &PositionIndex, watched_gone: &mut Option<Box<WatchedGone>>) {
    let gone = watched_gone.get_or_insert_with(Box::default);
    gone.0.push(index.position_at(slot.chunk, slot.lane()));
}

/// The positions of watched entries removed, oldest first, which a cache holds behind one
/// pointer (see `RangeCache::watched_gone`).
#[derive(Default)]
struct WatchedGone(Vec<Position>);

/// Where a payload removed under a cache's lock goes: an external buffer into `released`, which
/// the caller drops once it holds none of the manager's locks; owned bytes are freed at once.
///
/// Dropping an external buffer runs its release, which may wait for a lock of its producer's: a
/// Python object's needs the GIL, and so does pyarrow's release of a buffer that wraps a Python
/// object. A thread holding the GIL may itself be waiting for this cache's lock (`get`), so such a
/// release under the lock would wait for ever.
#[inline(always)]
pub(crate) fn set_aside(payload: Payload, released: &mut Vec<Payload>) {
    if payload.is_foreign() {
        released.push(payload);
    }
}

/// Where [`RangeCache::insert`] takes its slot from.
enum Taken {
    Vacant,
    FreeList,
    New,
}

pub(crate) struct RangeCache {
    slots: Pages<Slot>,
    /// Head of the free list threaded through the free slots' `chunk` fields.
    free_head: u32,
    /// Free slots on no free list, `[start, end)`: what a pass over consecutive slots emptied
    /// behind the entries it kept (see [`RangeCache::visit_in_stream`]). Inserts take these first.
    vacant: (u32, u32),
    index: PositionIndex,
    size_bytes: u64,
    /// Slots whose entry is gone but whose queue item is not yet.
    tombstones: usize,
    /// Accounted sizes that the payload word cannot carry, by slot (see [`SIZE_ASIDE`]): empty
    /// until the first such entry, then as long as the slab at most. An array, not a map, since
    /// where overrides occur at all (a lab's or a benchmark's accounting) every entry tends to
    /// have one.
    sizes_aside: Pages<u32>,
    /// Removed from its manager: takes no more entries, and its id is free once no tombstone is
    /// left (until then queue items still name it).
    pub(crate) retired: bool,
    /// Counted by the entry cache's reads (which hold this cache's lock); not reset by `clear`.
    pub(crate) lookups: Lookups,
    /// Watched entries removed since the last [`RangeCache::take_watched_gone`]; made at the
    /// first such removal. Only the lab watches entries, and a larger cache struct was slower to
    /// evict from with topics interleaved (benches/eviction.rs, 100 topics: 3%).
    watched_gone: Option<Box<WatchedGone>>,
}

impl Default for RangeCache {
    fn default() -> Self {
        RangeCache {
            slots: Pages::default(),
            free_head: NO_SLOT,
            vacant: (0, 0),
            index: PositionIndex::default(),
            size_bytes: 0,
            tombstones: 0,
            sizes_aside: Pages::default(),
            retired: false,
            lookups: Lookups::default(),
            watched_gone: None,
        }
    }
}

impl RangeCache {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn contains(&self, p: Position) -> bool {
        self.index.get(p).is_some()
    }

    /// Retired, and no queue item names this cache any more: its id may go to another cache.
    pub fn is_drained(&self) -> bool {
        self.retired && self.tombstones == 0
    }

    /// Inserts if absent and returns the slot, for the removal queue. If the position is already
    /// cached nothing changes and the payload comes back, for the caller to drop once it has let
    /// go of this cache's lock (see [`set_aside`]).
    pub fn insert(
        &mut self,
        position: Position,
        payload: Payload,
        read_count: ReadCount,
        size: u32,
        now_ns: u64,
    ) -> Result<u32, Payload> {
        let (vacant_start, vacant_end) = self.vacant;
        let (n, taken) = if vacant_start < vacant_end {
            (vacant_start, Taken::Vacant)
        } else if self.free_head != NO_SLOT {
            (self.free_head, Taken::FreeList)
        } else {
            (self.slots.len() as u32, Taken::New)
        };
        // The index says whether the position is cached already, in the same lookup that adds it.
        let Some(chunk) = self.index.insert(position, n) else {
            return Err(payload);
        };
        let (payload, carried) = SizedPayload::new(payload, size);
        let mut state = LIVE | PositionIndex::lane_of(position);
        if !carried {
            state |= SIZE_ASIDE;
            // Bounded by the slab: `n` is at most its length.
            while self.sizes_aside.len() <= n as usize {
                self.sizes_aside.push(0);
            }
            self.sizes_aside[n as usize] = size;
        }
        let slot = Slot {
            payload,
            read_count,
            timestamp_ns: now_ns,
            chunk,
            requeue_count: 0,
            accessed: false,
            state,
        };
        match taken {
            Taken::Vacant => {
                self.slots[n as usize] = slot;
                self.vacant.0 += 1;
            }
            Taken::FreeList => {
                let next_free = self.slots[n as usize].chunk;
                self.slots[n as usize] = slot;
                self.free_head = next_free;
            }
            Taken::New => self.slots.push(slot),
        }
        self.size_bytes += size as u64;
        Ok(n)
    }

    /// The accounted size of the entry in slot `n`.
    #[inline(always)]
    fn size_of(&self, n: u32) -> u32 {
        self.slots[n as usize].size(n, &self.sizes_aside)
    }

    fn copy_for_reader(&mut self, n: u32, position: Position) -> CachedEntry {
        let size = self.size_of(n);
        let slot = &mut self.slots[n as usize];
        CachedEntry::new(
            position,
            slot.payload.payload().clone(),
            size,
            slot.requeue_count,
            slot.read_count.share(),
        )
    }

    /// A reader got the entry in slot `n`: it counts as recently read at the next eviction check.
    fn mark_accessed(&mut self, n: u32) -> &mut Slot {
        let slot = &mut self.slots[n as usize];
        slot.accessed = true;
        slot
    }

    /// A reader's copy; marks the entry accessed.
    pub fn get(&mut self, p: Position) -> Option<CachedEntry> {
        let n = self.index.get(p)?;
        self.mark_accessed(n);
        Some(self.copy_for_reader(n, p))
    }

    /// What [`Self::get`] and releasing its copy at once do: marks the entry accessed and consumes
    /// one expected read, with no copy. The entry's size if it is cached.
    pub fn read_released(&mut self, p: Position) -> Option<u32> {
        let n = self.index.get(p)?;
        // `&mut self`: the caller holds this cache's lock.
        self.mark_accessed(n).read_count.mark_read_locked();
        Some(self.size_of(n))
    }

    /// Cached entries in `[first, last]`, in position order; marks them accessed.
    pub fn get_range(&mut self, first: Position, last: Position) -> Vec<CachedEntry> {
        let found = self.index.range(first, last);
        found
            .into_iter()
            .map(|(p, n)| {
                self.mark_accessed(n);
                self.copy_for_reader(n, p)
            })
            .collect()
    }

    /// A reader's copy without marking the entry accessed.
    pub fn peek_copy(&mut self, p: Position) -> Option<CachedEntry> {
        self.index.get(p).map(|n| self.copy_for_reader(n, p))
    }

    /// What the evictor knows of the entry at `p`, without marking it accessed.
    pub fn info(&self, p: Position) -> Option<EntryInfo> {
        let n = self.index.get(p)?;
        let slot = &self.slots[n as usize];
        Some(EntryInfo {
            position: p,
            size: self.size_of(n),
            expected_reads: slot.read_count.expected_reads(),
            requeue_count: slot.requeue_count,
            accessed: slot.accessed,
            timestamp_ns: slot.timestamp_ns,
        })
    }

    /// Looks an entry up without marking it accessed.
    pub fn peek(&self, p: Position) -> Option<&Slot> {
        self.index.get(p).map(|n| &self.slots[n as usize])
    }

    pub fn peek_mut(&mut self, p: Position) -> Option<&mut Slot> {
        self.index.get(p).map(|n| &mut self.slots[n as usize])
    }

    /// The evictor's visit of slot `n`, whose queue item has reached the head of the removal
    /// queue: a tombstone is freed; a live entry is judged by `judge` (which may mark it, as a
    /// requeue does), and on [`EvictionResult::Remove`] taken out and its slot freed. One slab
    /// lookup serves the check, the judging and the taking out: this is the eviction loop's work
    /// per entry.
    #[inline]
    pub fn visit(&mut self, n: u32, judge: impl FnOnce(&mut Slot) -> EvictionResult) -> Visit {
        self.visit_as::<false>(n, judge)
    }

    /// [`Self::visit`] for a pass that visits slot after slot (each `n` the one after the last,
    /// as in a first pass over entries inserted in order), which also packs the entries it keeps:
    /// the slots it empties stay in [`Self::vacant`], off the free list, and an entry it requeues
    /// moves down into the first of them. The entries such a pass requeues (a fifth in Pulsar's
    /// benchmark) then lie side by side, in queue order, where the pass found them a few slots
    /// apart each, and the next pass over them reads whole cache lines in order, not one slot in
    /// each line of the slab. Moving an entry costs a copy of its slot and a write to its index
    /// chunk, both in cache in a first pass (its neighbours were just removed); in a later pass
    /// that packs, the index chunks may be out of cache.
    ///
    /// Only one run of vacant slots is kept: while another stream's are there (until inserts
    /// take them), or at an `n` that does not follow them, this is [`Self::visit`].
    #[inline]
    pub fn visit_in_stream(
        &mut self,
        n: u32,
        judge: impl FnOnce(&mut Slot) -> EvictionResult,
    ) -> Visit {
        let (start, end) = self.vacant;
        if start != end && end != n {
            return self.visit(n, judge);
        }
        self.visit_as::<true>(n, judge)
    }

    /// [`Self::visit`], and with `PACK` [`Self::visit_in_stream`] once it found that `n` follows
    /// the vacant slots, if any: one implementation, the choice made at compile time so that the
    /// plain visit pays nothing for packing.
    #[inline(always)]
    fn visit_as<const PACK: bool>(
        &mut self,
        n: u32,
        judge: impl FnOnce(&mut Slot) -> EvictionResult,
    ) -> Visit {
        // Where an entry kept goes: the first vacant slot before it, or its own.
        let (start, end) = self.vacant;
        let to = if PACK && start != end { start } else { n };
        let Some(slot) = self.slots.get_mut(n as usize) else {
            return Visit::Stale;
        };
        if !slot.is_live() {
            if slot.is_tombstone() {
                slot.state = 0;
                self.tombstones -= 1;
                self.emptied::<PACK>(to, n);
            }
            return Visit::Stale;
        }
        match judge(slot) {
            EvictionResult::Remove => {}
            EvictionResult::Requeue if to == n => return Visit::Requeued(n),
            EvictionResult::Requeue => {
                self.move_entry(n, to);
                self.vacant = (to + 1, n + 1);
                return Visit::Requeued(to);
            }
            EvictionResult::Stop => return Visit::Stopped,
        }
        let (size, payload) = take_entry(
            slot,
            n,
            &self.sizes_aside,
            &mut self.index,
            &mut self.size_bytes,
            &mut self.watched_gone,
        );
        slot.state = 0;
        self.emptied::<PACK>(to, n);
        Visit::Removed(size, payload)
    }

    /// Slot `n` was just emptied (its state cleared): the whole slab goes back once no slot is
    /// live or a tombstone (no queue item names this cache then); otherwise the slot goes on the
    /// free list, or with `PACK` joins the vacant slots, which become `start..=n`.
    #[inline(always)]
    fn emptied<const PACK: bool>(&mut self, start: u32, n: u32) {
        if self.index.is_empty() && self.tombstones == 0 {
            self.release_slab();
        } else if PACK {
            self.vacant = (start, n + 1);
        } else {
            self.slots[n as usize].chunk = self.free_head;
            self.free_head = n;
        }
    }

    /// Moves the entry in live slot `from` to free slot `to` (on no free list), which takes
    /// `from`'s place in the index; `from` is left free, on no free list.
    fn move_entry(&mut self, from: u32, to: u32) {
        self.slots.swap(from as usize, to as usize);
        let slot = &self.slots[to as usize];
        self.index.set_slot(slot.chunk, slot.lane(), to);
        if slot.state & SIZE_ASIDE != 0 {
            // `from` has a size aside, so the array reaches it, and `to` below it.
            self.sizes_aside[to as usize] = self.sizes_aside[from as usize];
        }
    }

    /// Removes the entry in live slot `n` before its queue item reaches the head: the slot stays a
    /// tombstone until then. Its payload goes to [`set_aside`].
    fn remove_early(&mut self, n: u32, released: &mut Vec<Payload>) -> u32 {
        let (size, payload) = take_entry(
            &mut self.slots[n as usize],
            n,
            &self.sizes_aside,
            &mut self.index,
            &mut self.size_bytes,
            &mut self.watched_gone,
        );
        set_aside(payload, released);
        self.slots[n as usize].state = TOMBSTONE;
        self.tombstones += 1;
        size
    }

    /// Frees the slab once no slot is live or a tombstone.
    fn release_slab(&mut self) {
        debug_assert!(self.slots.iter().all(|s| s.state & (LIVE | TOMBSTONE) == 0));
        // SAFETY: vacated slots own nothing (no payload, no handler), so skipping their destructors
        // leaks nothing; it saves a pass over the whole slab.
        unsafe { self.slots.forget_all() };
        self.sizes_aside = Pages::default();
        self.free_head = NO_SLOT;
        self.vacant = (0, 0);
    }

    /// Hints the CPU to load slot `n` soon (the evictor looks ahead in its queue), and its size set
    /// aside if the cache has any: an entry removed in a later pass, sparse in memory, waited for
    /// it (a fifth of those passes' time over 100 interleaved topics).
    #[inline]
    pub fn prefetch_slot(&self, n: u32) {
        let start = self.slots.addr(n as usize).cast::<u8>();
        prefetch(start);
        // A slot straddles two cache lines if its page is not 32-aligned.
        prefetch(start.wrapping_add(std::mem::size_of::<Slot>() - 1));
        if self.sizes_aside.len() != 0 {
            prefetch(self.sizes_aside.addr(n as usize).cast::<u8>());
        }
    }

    /// Hints the CPU to load the header of slot `n`'s payload, which removing its entry reads
    /// (the slot itself should be in cache by now).
    #[inline]
    pub fn prefetch_payload(&self, n: u32) {
        if let Some(slot) = self.slots.get(n as usize) {
            slot.prefetch_payload();
        }
    }

    /// Hints the CPU to load what judging slot `n` touches besides the slot itself (a shared
    /// read count), and what removing its entry touches (its index chunk, its payload's header)
    /// unless `policy` will requeue it, as far as the slot tells: an entry that still expects reads
    /// is requeued pass after pass, and loading what its removal would touch at each took memory
    /// bandwidth from the entries removed (benches/eviction.rs: a twentieth of the scenario).
    #[inline]
    pub fn prefetch_dependents(&self, n: u32, policy: &EvictionPolicy) {
        if let Some(slot) = self.slots.get(n as usize) {
            if let Some(count) = slot.read_count.shared_addr() {
                // Whether it expects reads is in the count: prefetch all.
                prefetch(count);
            } else if policy.should_requeue(
                slot.accessed,
                slot.has_expected_reads(),
                slot.requeue_count,
            ) {
                return;
            }
            prefetch(self.index.chunk_addr(slot.chunk));
            slot.prefetch_payload();
        }
    }

    /// Removes `[first, last]` or `[first, last)`; returns (entries, bytes) removed. Their payloads
    /// go to [`set_aside`].
    pub fn remove_range(
        &mut self,
        first: Position,
        last: Position,
        last_inclusive: bool,
        released: &mut Vec<Payload>,
    ) -> (u64, u64) {
        let (mut entries, mut bytes) = (0, 0);
        for (p, n) in self.index.range(first, last) {
            if !last_inclusive && p == last {
                continue;
            }
            bytes += u64::from(self.remove_early(n, released));
            entries += 1;
        }
        (entries, bytes)
    }

    /// Removes every entry; returns (entries, bytes) removed. Their payloads go to [`set_aside`].
    pub fn clear(&mut self, released: &mut Vec<Payload>) -> (u64, u64) {
        let removed = (self.index.len() as u64, self.size_bytes);
        let mut now_tombstones = 0;
        for s in self.slots.iter_mut().filter(|s| s.is_live()) {
            if s.state & WATCHED != 0 {
                note_gone(s, &self.index, &mut self.watched_gone);
            }
            set_aside(s.vacate(), released);
            s.state = TOMBSTONE;
            now_tombstones += 1;
        }
        self.tombstones += now_tombstones;
        self.index.clear();
        self.size_bytes = 0;
        if self.tombstones == 0 {
            self.release_slab();
        }
        removed
    }

    /// Asks to hear when the entry at `p` leaves the cache, however it goes (evicted, removed,
    /// cleared): its position is then kept for [`RangeCache::take_watched_gone`]. For the lab's
    /// memory model, which wants to know when the first entry of a network buffer goes, without
    /// asking about every buffer each second. False if `p` is not cached.
    pub fn watch_removal(&mut self, p: Position) -> bool {
        self.peek_mut(p).map(|s| s.state |= WATCHED).is_some()
    }

    /// The watched entries removed since the last call, in the order they went (a `clear`
    /// takes them in slot order). The list goes with them, so that a large removal (a ledger
    /// deleted) keeps no memory here.
    pub fn take_watched_gone(&mut self) -> Vec<Position> {
        self.watched_gone
            .as_mut()
            .map(|gone| std::mem::take(&mut gone.0))
            .unwrap_or_default()
    }

    /// Positions and slots of every entry, for checks.
    pub fn positions(&self) -> Vec<Position> {
        self.index
            .range(
                Position::new(i64::MIN, i64::MIN),
                Position::new(i64::MAX, i64::MAX),
            )
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    /// Heap bytes of bookkeeping, not payload bytes: the slab (all of its capacity), the index,
    /// and per cached entry what its payload's allocation adds to the bytes (the header) and its
    /// read-count handler, if it has one (counted in full even when reader copies share it).
    pub fn metadata_bytes(&self) -> usize {
        let per_entry: usize = self
            .slots
            .iter()
            .filter(|s| s.is_live())
            .map(|s| s.payload.payload().overhead_bytes() + s.read_count.allocation_bytes())
            .sum();
        let aside = self.sizes_aside.capacity() * std::mem::size_of::<u32>();
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.index.heap_bytes()
            + aside
            + per_entry
    }
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

#[cfg(test)]
mod tests {
    use super::*;

    /// However an entry leaves (eviction's `visit`, `remove_range`, `clear`), the slot's
    /// handle on a count that readers' copies share goes with it, and the copies keep counting.
    #[test]
    fn a_removed_entry_leaves_its_shared_count_to_the_copies_out() {
        let p = |e| Position::new(1, e);
        for how in ["visit", "remove_range", "clear"] {
            let mut cache = RangeCache::default();
            let mut released = Vec::new();
            let n = cache
                .insert(p(0), Payload::empty(), ReadCount::expecting(2), 0, 0)
                .unwrap();
            let copy = cache.get(p(0)).unwrap();
            let handle = copy.read_count_handler().unwrap();
            assert!(!handle.is_only_handle(), "the slot shares it");
            match how {
                "visit" => assert!(matches!(
                    cache.visit(n, |_| EvictionResult::Remove),
                    Visit::Removed(0, _)
                )),
                "remove_range" => {
                    assert_eq!(cache.remove_range(p(0), p(0), true, &mut released), (1, 0))
                }
                _ => assert_eq!(cache.clear(&mut released), (1, 0)),
            }
            assert!(handle.is_only_handle(), "{how}");
            assert!(copy.release());
            assert_eq!(handle.expected_reads(), 1, "{how}");
        }
    }

    /// A pass over consecutive slots that requeues every fifth entry leaves those entries in the
    /// first slots, side by side and in order, each with its size, read and found by position;
    /// inserts then take the slots the pass emptied, in order, before the free list or new ones.
    #[test]
    fn a_stream_packs_what_it_requeues_and_inserts_take_the_slots_it_emptied() {
        let p = |e| Position::new(1, e);
        let mut cache = RangeCache::default();
        for e in 0..100 {
            // Sizes other than the payload's go aside, and move with their entry.
            let n = cache
                .insert(
                    p(e),
                    Payload::from(vec![e as u8; 3]),
                    ReadCount::UNCOUNTED,
                    1000 + e as u32,
                    0,
                )
                .unwrap();
            assert_eq!(n, e as u32);
        }
        let mut kept = Vec::new();
        for n in 0..100u32 {
            let decision = if n % 5 == 4 {
                EvictionResult::Requeue
            } else {
                EvictionResult::Remove
            };
            match cache.visit_in_stream(n, |_| decision) {
                Visit::Requeued(m) => kept.push(m),
                Visit::Removed(size, _) => assert_eq!(size, 1000 + n),
                _ => panic!("slot {n}: wrong visit"),
            }
        }
        assert_eq!(kept, (0..20).collect::<Vec<_>>());
        assert_eq!(cache.len(), 20);
        assert_eq!(
            cache.size_bytes(),
            (0..20).map(|i| 1004 + 5 * i).sum::<u64>()
        );
        for (i, &m) in kept.iter().enumerate() {
            let e = 5 * i as i64 + 4;
            assert_eq!(cache.index.get(p(e)), Some(m));
            assert_eq!(cache.size_of(m), 1000 + e as u32);
            assert_eq!(cache.get(p(e)).unwrap().data(), [e as u8; 3]);
        }
        // A visit that does not follow the vacant slots is a plain one: nothing moves.
        assert!(matches!(
            cache.visit_in_stream(0, |_| EvictionResult::Requeue),
            Visit::Requeued(0)
        ));
        // A plain visit's slot goes on the free list, which inserts take after the vacant slots.
        assert!(matches!(
            cache.visit(1, |_| EvictionResult::Remove),
            Visit::Removed(1009, _)
        ));
        for e in 100..182 {
            let n = cache
                .insert(p(e), Payload::empty(), ReadCount::UNCOUNTED, 0, 0)
                .unwrap();
            let expected = match e {
                ..180 => e as u32 - 80,
                180 => 1,
                _ => 100,
            };
            assert_eq!(n, expected, "insert {e}");
        }
    }

    /// However a watched entry leaves, its position is noted, once; unwatched entries and a slot
    /// reused after a watched one are not.
    #[test]
    fn the_removal_of_a_watched_entry_is_noted_however_it_goes() {
        let positions = [
            Position::new(1, 0),
            Position::new(1, 17),
            Position::new(-3, -1),
            Position::new(i64::MIN, i64::MIN),
            Position::new(i64::MAX, i64::MAX - 1),
        ];
        for how in ["visit", "remove_range", "clear"] {
            let mut cache = RangeCache::default();
            let mut released = Vec::new();
            let insert = |cache: &mut RangeCache, p| {
                cache
                    .insert(p, Payload::empty(), ReadCount::UNCOUNTED, 10, 0)
                    .unwrap()
            };
            let slots: Vec<u32> = positions.iter().map(|&p| insert(&mut cache, p)).collect();
            let other = insert(&mut cache, Position::new(1, 1));
            assert!(!cache.watch_removal(Position::new(1, 2)), "not cached");
            for &p in &positions {
                assert!(cache.watch_removal(p));
            }
            for (&p, &n) in positions.iter().zip(&slots) {
                match how {
                    "visit" => {
                        assert!(matches!(
                            cache.visit(n, |_| EvictionResult::Remove),
                            Visit::Removed(10, _)
                        ));
                    }
                    "remove_range" => {
                        assert_eq!(cache.remove_range(p, p, true, &mut released), (1, 10));
                    }
                    _ => {}
                }
            }
            if how == "clear" {
                cache.clear(&mut released);
            } else {
                cache.visit(other, |_| EvictionResult::Remove);
            }
            let mut gone = cache.take_watched_gone();
            gone.sort();
            let mut expected = positions.to_vec();
            expected.sort();
            assert_eq!(gone, expected, "{how}");
            assert_eq!(cache.take_watched_gone().len(), 0, "{how}: noted once");
            // A slot that held a watched entry holds an unwatched one next.
            let mut cache = RangeCache::default();
            let n = insert(&mut cache, positions[0]);
            insert(&mut cache, positions[1]); // keeps the slab
            cache.watch_removal(positions[0]);
            cache.visit(n, |_| EvictionResult::Remove);
            assert_eq!(cache.take_watched_gone().len(), 1);
            let m = insert(&mut cache, positions[0]);
            assert_eq!(m, n, "the slot is reused");
            cache.visit(m, |_| EvictionResult::Remove);
            assert_eq!(cache.take_watched_gone().len(), 0, "{how}");
        }
    }
}

#[cfg(test)]
mod visit_model_tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::btree_map::Entry;
    use std::collections::{BTreeMap, HashMap, VecDeque};

    #[derive(Clone, Copy, PartialEq, Debug)]
    enum M {
        Live(Position, u32),
        Tomb,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// One cache and its queue items against a model: inserts (sizes carried or set aside),
        /// reads, remove_range, clear, retire, and visits at the head that remove, requeue or
        /// stop; tombstones interleave with requeued items.
        #[test]
        fn visit_matches_a_model(ops in prop::collection::vec((0u8..8, 0i64..48, 0i64..48, 0u8..3, 0usize..40), 1..300)) {
            let mut cache = RangeCache::default();
            let mut queue: VecDeque<u32> = VecDeque::new();
            let mut slots: HashMap<u32, M> = HashMap::new();
            let mut entries: BTreeMap<Position, (u32, u32)> = BTreeMap::new();
            let mut released = Vec::new();
            for (op, a, b, d, len) in ops {
                let p = |e| Position::new(7, e);
                match op {
                    0..=2 if !cache.retired => {
                        // The size: the bytes' length (carried by the payload word), another
                        // (kept aside), or that of an entry without bytes (tagged in the word).
                        let (payload, size) = match d {
                            0 => (Payload::from(vec![1u8; len]), len as u32),
                            1 => (Payload::from(vec![1u8; len + 1]), len as u32 + 1000),
                            _ => (Payload::empty(), len as u32),
                        };
                        let r = cache.insert(p(a), payload, ReadCount::UNCOUNTED, size, 0);
                        match entries.entry(p(a)) {
                            Entry::Occupied(_) => prop_assert!(r.is_err()),
                            Entry::Vacant(vacant) => {
                                let n = r.ok().unwrap();
                                prop_assert!(!queue.contains(&n), "slot {} reused while named", n);
                                prop_assert!(!slots.contains_key(&n));
                                slots.insert(n, M::Live(p(a), size));
                                vacant.insert((n, size));
                                queue.push_back(n);
                            }
                        }
                    }
                    3 => {
                        let got = cache.get(p(a)).map(|c| c.size());
                        prop_assert_eq!(got, entries.get(&p(a)).map(|&(_, s)| s));
                    }
                    4 => {
                        let (lo, hi) = (a.min(b), a.max(b));
                        let incl = d == 0;
                        let gone: Vec<_> = entries
                            .range(p(lo)..=p(hi))
                            .filter(|(&q, _)| incl || q != p(hi))
                            .map(|(&q, &v)| (q, v))
                            .collect();
                        let expect = (gone.len() as u64, gone.iter().map(|(_, (_, s))| u64::from(*s)).sum::<u64>());
                        prop_assert_eq!(cache.remove_range(p(lo), p(hi), incl, &mut released), expect);
                        for (q, (n, _)) in gone {
                            entries.remove(&q);
                            slots.insert(n, M::Tomb);
                        }
                    }
                    5 if d == 0 => {
                        let expect = (entries.len() as u64, entries.values().map(|&(_, s)| u64::from(s)).sum::<u64>());
                        if a % 4 == 0 {
                            cache.retired = true;
                        }
                        prop_assert_eq!(cache.clear(&mut released), expect);
                        for (_, (n, _)) in std::mem::take(&mut entries) {
                            slots.insert(n, M::Tomb);
                        }
                    }
                    _ => {
                        // Visit the head (several times for long runs of visits).
                        for _ in 0..(1 + len % 4) {
                            let Some(n) = queue.pop_front() else { break };
                            let decision = match (d + len as u8) % 3 {
                                0 => EvictionResult::Remove,
                                1 => EvictionResult::Requeue,
                                _ => EvictionResult::Stop,
                            };
                            let mut judged = false;
                            let judge = |_: &mut Slot| { judged = true; decision };
                            // Half the visits as a pass over consecutive slots does, which
                            // moves the entries it requeues.
                            let v = if b % 2 == 0 { cache.visit_in_stream(n, judge) } else { cache.visit(n, judge) };
                            match (slots[&n], v) {
                                (M::Tomb, Visit::Stale) => {
                                    prop_assert!(!judged);
                                    slots.remove(&n);
                                }
                                (M::Live(q, s), Visit::Removed(size, _)) => {
                                    prop_assert_eq!(decision, EvictionResult::Remove);
                                    prop_assert_eq!(size, s);
                                    entries.remove(&q);
                                    slots.remove(&n);
                                }
                                (M::Live(q, s), Visit::Requeued(m)) => {
                                    prop_assert_eq!(decision, EvictionResult::Requeue);
                                    if m != n {
                                        prop_assert!(b % 2 == 0 && m < n, "moved from {} to {}", n, m);
                                        prop_assert!(!slots.contains_key(&m), "moved onto slot {} in use", m);
                                        slots.remove(&n);
                                        slots.insert(m, M::Live(q, s));
                                        entries.insert(q, (m, s));
                                    }
                                    queue.push_back(m);
                                }
                                (M::Live(_, _), Visit::Stopped) => {
                                    prop_assert_eq!(decision, EvictionResult::Stop);
                                    queue.push_front(n);
                                    break;
                                }
                                (m, _) => prop_assert!(false, "slot {} in state {:?}: wrong visit", n, m),
                            }
                        }
                    }
                }
                // Invariants after every step.
                prop_assert_eq!(cache.len(), entries.len());
                prop_assert_eq!(cache.size_bytes(), entries.values().map(|&(_, s)| u64::from(s)).sum::<u64>());
                prop_assert_eq!(cache.positions(), entries.keys().copied().collect::<Vec<_>>());
                let tombs = slots.values().filter(|m| **m == M::Tomb).count();
                prop_assert_eq!(cache.tombstones, tombs);
                prop_assert_eq!(cache.is_drained(), cache.retired && queue.is_empty());
                if queue.is_empty() {
                    prop_assert_eq!(cache.slots.len(), 0, "slab released when nothing is named");
                }
                for (&q, &(n, _)) in &entries {
                    prop_assert_eq!(cache.index.get(q), Some(n));
                }
            }
        }
    }
}
