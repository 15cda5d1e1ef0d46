//! One managed ledger's cached entries (Pulsar's `RangeCache`), without locking: the manager wraps
//! each in a mutex. Entries live in a slab so that the removal queue can name them by slot number
//! and serial instead of holding a pointer per queue slot.

use crate::entry::{CachedEntry, Payload};
use crate::pages::Pages;
use crate::position::Position;
use crate::position_index::PositionIndex;
use crate::prefetch::prefetch;
use crate::read_count::ReadCountHandler;
use crate::stats::Lookups;

/// A cached entry and the removal queue's bookkeeping for it, in 40 bytes: its position is not
/// stored but named by (index chunk, lane), since every slot is per-entry memory.
#[derive(Debug)]
pub(crate) struct Slot {
    pub payload: Payload,
    pub read_count: Option<ReadCountHandler>,
    /// When the entry was inserted or last requeued (the TTL counts from here).
    pub timestamp_ns: u64,
    pub size: u32,
    /// Which insert put the current occupant here; a queue item with another serial is stale.
    pub serial: u32,
    /// Live: the index chunk holding this position (saves a tree lookup on removal). Free: the next
    /// free slot ([`NO_SLOT`] ends the list), so the free list needs no memory of its own and a
    /// removal never allocates.
    chunk: u32,
    pub requeue_count: u16,
    /// Read since the last eviction check.
    pub accessed: bool,
    /// [`LIVE`] if occupied, and the position's lane in `chunk`.
    lane_live: u8,
}

/// The occupied bit of `Slot::lane_live` (lanes take the low 4 bits).
const LIVE: u8 = 0x80;

/// The end of the free list.
const NO_SLOT: u32 = u32::MAX;

impl Slot {
    /// Marks the slot free and hands over its payload (the caller decides where it is dropped).
    fn vacate(&mut self) -> Payload {
        self.lane_live &= !LIVE;
        self.read_count = None;
        std::mem::take(&mut self.payload)
    }

    pub fn is_live(&self) -> bool {
        self.lane_live & LIVE != 0
    }

    fn lane(&self) -> u8 {
        self.lane_live & !LIVE
    }

    pub fn has_expected_reads(&self) -> bool {
        self.read_count
            .as_ref()
            .is_some_and(|h| h.has_expected_reads())
    }

    fn copy_for_reader(&self, position: Position) -> CachedEntry {
        CachedEntry::new(
            position,
            self.payload.clone(),
            self.size,
            self.requeue_count,
            self.read_count.clone(),
        )
    }
}

/// Where an insert put the entry, for the removal queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotRef {
    pub slot: u32,
    pub serial: u32,
}

pub(crate) struct RangeCache {
    slots: Pages<Slot>,
    /// Head of the free list threaded through the vacated slots' `chunk` fields.
    free_head: u32,
    index: PositionIndex,
    size_bytes: u64,
    next_serial: u32,
    /// Counted by the entry cache's reads (which hold this cache's lock); not reset by `clear`.
    pub(crate) lookups: Lookups,
}

impl Default for RangeCache {
    fn default() -> Self {
        RangeCache {
            slots: Pages::default(),
            free_head: NO_SLOT,
            index: PositionIndex::default(),
            size_bytes: 0,
            next_serial: 0,
            lookups: Lookups::default(),
        }
    }
}

impl RangeCache {
    /// A cache whose serials start at `first_serial`, so that queue items of an earlier cache that
    /// had the same id can never match an entry of this one.
    pub fn with_first_serial(first_serial: u32) -> Self {
        RangeCache {
            next_serial: first_serial,
            ..Default::default()
        }
    }

    pub fn next_serial(&self) -> u32 {
        self.next_serial
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn contains(&self, p: Position) -> bool {
        self.index.get(p).is_some()
    }

    /// Inserts if absent; `None` (and no change) if the position is already cached.
    pub fn insert(
        &mut self,
        position: Position,
        payload: Payload,
        read_count: Option<ReadCountHandler>,
        size: u32,
        now_ns: u64,
    ) -> Option<SlotRef> {
        let reused = (self.free_head != NO_SLOT).then_some(self.free_head);
        let n = reused.unwrap_or(self.slots.len() as u32);
        // The index says whether the position is cached already, in the same lookup that adds it.
        let chunk = self.index.insert(position, n)?;
        let serial = self.next_serial;
        self.next_serial = self.next_serial.wrapping_add(1);
        let slot = Slot {
            payload,
            read_count,
            timestamp_ns: now_ns,
            size,
            serial,
            chunk,
            requeue_count: 0,
            accessed: false,
            lane_live: LIVE | PositionIndex::lane_of(position),
        };
        match reused {
            Some(r) => {
                let next_free = self.slots[r as usize].chunk;
                self.slots[r as usize] = slot;
                self.free_head = next_free;
            }
            None => self.slots.push(slot),
        }
        self.size_bytes += size as u64;
        Some(SlotRef { slot: n, serial })
    }

    /// A reader's copy; marks the entry accessed.
    pub fn get(&mut self, p: Position) -> Option<CachedEntry> {
        let n = self.index.get(p)?;
        let slot = &mut self.slots[n as usize];
        slot.accessed = true;
        Some(slot.copy_for_reader(p))
    }

    /// Cached entries in `[first, last]`, in position order; marks them accessed.
    pub fn get_range(&mut self, first: Position, last: Position) -> Vec<CachedEntry> {
        let found = self.index.range(first, last);
        found
            .into_iter()
            .map(|(p, n)| {
                let slot = &mut self.slots[n as usize];
                slot.accessed = true;
                slot.copy_for_reader(p)
            })
            .collect()
    }

    /// Looks an entry up without marking it accessed.
    pub fn peek(&self, p: Position) -> Option<&Slot> {
        self.index.get(p).map(|n| &self.slots[n as usize])
    }

    pub fn peek_mut(&mut self, p: Position) -> Option<&mut Slot> {
        self.index.get(p).map(|n| &mut self.slots[n as usize])
    }

    /// The live slot a queue item refers to, if the item is not stale.
    pub fn slot_mut(&mut self, r: SlotRef) -> Option<&mut Slot> {
        self.slots
            .get_mut(r.slot as usize)
            .filter(|s| s.is_live() && s.serial == r.serial)
    }

    /// Removes the entry in slot `n` (which must be live); returns its size and its payload, which
    /// the caller drops (or hands on to be dropped later, outside locks or under the GIL).
    pub fn remove_slot(&mut self, n: u32) -> (u32, Payload) {
        let slot = &mut self.slots[n as usize];
        debug_assert!(slot.is_live());
        let payload = slot.vacate();
        let (lane, size, chunk) = (slot.lane(), slot.size, slot.chunk);
        let position = self.index.position_at(chunk, lane);
        let slot = &mut self.slots[n as usize];
        slot.chunk = self.free_head;
        self.index.remove_in(position, chunk);
        self.size_bytes -= size as u64;
        if self.index.is_empty() {
            // Give the slab's memory back; stale queue items then point past the end, which reads as
            // missing, and serials keep counting so no old item can match a new entry.
            self.release_slab();
        } else {
            self.free_head = n;
        }
        (size, payload)
    }

    /// Frees the slab once no slot is live.
    fn release_slab(&mut self) {
        debug_assert!(self.slots.iter().all(|s| !s.is_live()));
        // SAFETY: vacated slots own nothing (no payload, no handler), so skipping their destructors
        // leaks nothing; it saves a pass over the whole slab.
        unsafe { self.slots.forget_all() };
        self.free_head = NO_SLOT;
    }

    /// Hints the CPU to load slot `r` soon (the evictor looks ahead in its queue).
    #[inline]
    pub fn prefetch_slot(&self, r: SlotRef) {
        let start = self.slots.addr(r.slot as usize) as *const u8;
        prefetch(start);
        // A 40-byte slot may straddle two cache lines.
        prefetch(start.wrapping_add(std::mem::size_of::<Slot>() - 1));
    }

    /// Hints the CPU to load what removing or judging slot `r` touches besides the slot itself.
    #[inline]
    pub fn prefetch_dependents(&self, r: SlotRef) {
        if let Some(slot) = self.slots.get(r.slot as usize) {
            prefetch(self.index.chunk_addr(slot.chunk));
            if let Some(h) = &slot.read_count {
                prefetch(h.as_ptr());
            }
            if let Some(p) = slot.payload.header_addr() {
                prefetch(p);
            }
        }
    }

    /// Removes `[first, last]` or `[first, last)`; returns (entries, bytes) removed.
    pub fn remove_range(
        &mut self,
        first: Position,
        last: Position,
        last_inclusive: bool,
    ) -> (u64, u64) {
        let (mut entries, mut bytes) = (0, 0);
        for (p, n) in self.index.range(first, last) {
            if !last_inclusive && p == last {
                continue;
            }
            bytes += self.remove_slot(n).0 as u64;
            entries += 1;
        }
        (entries, bytes)
    }

    /// Removes every entry; returns (entries, bytes) removed.
    pub fn clear(&mut self) -> (u64, u64) {
        let removed = (self.index.len() as u64, self.size_bytes);
        self.slots.iter_mut().filter(|s| s.is_live()).for_each(|s| {
            s.vacate();
        });
        self.release_slab();
        self.index.clear();
        self.size_bytes = 0;
        removed
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
            .map(|s| {
                s.payload.overhead_bytes()
                    + s.read_count
                        .as_ref()
                        .map_or(0, |_| ReadCountHandler::ALLOCATION_BYTES)
            })
            .sum();
        self.slots.capacity() * std::mem::size_of::<Slot>() + self.index.heap_bytes() + per_entry
    }
}

const _: () = assert!(std::mem::size_of::<Slot>() == 40);
