//! One managed ledger's cached entries (Pulsar's `RangeCache`), without locking: the manager wraps
//! each in a mutex. Entries live in a slab so that the removal queue can name them by slot number
//! and serial instead of holding a pointer per queue slot.

use crate::entry::{CachedEntry, Payload};
use crate::position::Position;
use crate::position_index::PositionIndex;
use crate::read_count::ReadCountHandler;

/// A cached entry and the removal queue's bookkeeping for it.
#[derive(Debug)]
pub(crate) struct Slot {
    pub payload: Payload,
    pub read_count: Option<ReadCountHandler>,
    pub position: Position,
    /// When the entry was inserted or last requeued (the TTL counts from here).
    pub timestamp_ns: u64,
    pub size: u32,
    /// Which insert put the current occupant here; a queue item with another serial is stale.
    pub serial: u32,
    pub requeue_count: u16,
    /// Read since the last eviction check.
    pub accessed: bool,
    pub live: bool,
}

impl Slot {
    pub fn has_expected_reads(&self) -> bool {
        self.read_count
            .as_ref()
            .is_some_and(|h| h.has_expected_reads())
    }

    fn copy_for_reader(&self) -> CachedEntry {
        CachedEntry::new(
            self.position,
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

#[derive(Default)]
pub(crate) struct RangeCache {
    slots: Vec<Slot>,
    free: Vec<u32>,
    index: PositionIndex,
    size_bytes: u64,
    next_serial: u32,
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
        if self.contains(position) {
            return None;
        }
        let serial = self.next_serial;
        self.next_serial = self.next_serial.wrapping_add(1);
        let slot = Slot {
            payload,
            read_count,
            position,
            timestamp_ns: now_ns,
            size,
            serial,
            requeue_count: 0,
            accessed: false,
            live: true,
        };
        let n = match self.free.pop() {
            Some(n) => {
                self.slots[n as usize] = slot;
                n
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        let inserted = self.index.insert(position, n);
        debug_assert!(inserted);
        self.size_bytes += size as u64;
        Some(SlotRef { slot: n, serial })
    }

    /// A reader's copy; marks the entry accessed.
    pub fn get(&mut self, p: Position) -> Option<CachedEntry> {
        let n = self.index.get(p)?;
        let slot = &mut self.slots[n as usize];
        slot.accessed = true;
        Some(slot.copy_for_reader())
    }

    /// Cached entries in `[first, last]`, in position order; marks them accessed.
    pub fn get_range(&mut self, first: Position, last: Position) -> Vec<CachedEntry> {
        let found = self.index.range(first, last);
        found
            .into_iter()
            .map(|(_, n)| {
                let slot = &mut self.slots[n as usize];
                slot.accessed = true;
                slot.copy_for_reader()
            })
            .collect()
    }

    /// Looks an entry up without marking it accessed.
    pub fn peek(&self, p: Position) -> Option<&Slot> {
        self.index.get(p).map(|n| &self.slots[n as usize])
    }

    /// The live slot a queue item refers to, if the item is not stale.
    pub fn slot_mut(&mut self, r: SlotRef) -> Option<&mut Slot> {
        self.slots
            .get_mut(r.slot as usize)
            .filter(|s| s.live && s.serial == r.serial)
    }

    /// Removes the entry in slot `n` (which must be live); returns its size.
    pub fn remove_slot(&mut self, n: u32) -> u32 {
        let slot = &mut self.slots[n as usize];
        debug_assert!(slot.live);
        slot.live = false;
        slot.payload = Payload::empty();
        slot.read_count = None;
        let (position, size) = (slot.position, slot.size);
        self.index.remove(position);
        self.size_bytes -= size as u64;
        if self.index.is_empty() {
            // Give the slab's memory back; stale queue items then point past the end, which reads as
            // missing, and serials keep counting so no old item can match a new entry.
            self.slots = Vec::new();
            self.free = Vec::new();
        } else {
            self.free.push(n);
        }
        size
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
            bytes += self.remove_slot(n) as u64;
            entries += 1;
        }
        (entries, bytes)
    }

    /// Removes every entry; returns (entries, bytes) removed.
    pub fn clear(&mut self) -> (u64, u64) {
        let removed = (self.index.len() as u64, self.size_bytes);
        self.slots = Vec::new();
        self.free = Vec::new();
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

    /// Heap bytes of bookkeeping (slab, index), not payloads.
    pub fn metadata_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.free.capacity() * 4
            + self.index.heap_bytes()
    }
}
