//! What the cache hands to readers: a copy of a cached entry that shares its payload and its
//! expected-read counter with the cached original.

pub use crate::payload::{Payload, PayloadBuffer, PayloadGroup};
use crate::position::Position;
use crate::read_count::ReadCountHandler;
use std::sync::atomic::{AtomicBool, Ordering};

/// A reader's copy of a cached entry. Releasing it consumes one expected read, once.
#[derive(Debug)]
pub struct CachedEntry {
    position: Position,
    payload: Payload,
    size: u32,
    requeue_count: u16,
    read_count: Option<ReadCountHandler>,
    released: AtomicBool,
}

impl CachedEntry {
    pub(crate) fn new(
        position: Position,
        payload: Payload,
        size: u32,
        requeue_count: u16,
        read_count: Option<ReadCountHandler>,
    ) -> Self {
        CachedEntry {
            position,
            payload,
            size,
            requeue_count,
            read_count,
            released: AtomicBool::new(false),
        }
    }

    pub fn position(&self) -> Position {
        self.position
    }

    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    pub fn data(&self) -> &[u8] {
        self.payload.as_slice()
    }

    /// The accounted size (may differ from the payload length when the caller said so).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// How often the cached entry's TTL had been extended when this copy was taken.
    pub fn requeue_count(&self) -> u16 {
        self.requeue_count
    }

    /// Remaining expected reads of the cached entry; `None` if it was cached without any.
    pub fn expected_reads(&self) -> Option<i32> {
        self.read_count.as_ref().map(|h| h.expected_reads())
    }

    pub fn read_count_handler(&self) -> Option<&ReadCountHandler> {
        self.read_count.as_ref()
    }

    /// Another unreleased copy of the same entry (same payload, same read counter).
    pub fn copy(&self) -> CachedEntry {
        CachedEntry::new(
            self.position,
            self.payload.clone(),
            self.size,
            self.requeue_count,
            self.read_count.clone(),
        )
    }

    /// A copy for an entry that is not cached: no counter, nothing to consume.
    pub fn uncached(position: Position, payload: Payload) -> CachedEntry {
        let size = payload.len() as u32;
        CachedEntry::new(position, payload, size, 0, None)
    }

    /// Consumes one expected read the first time it is called; returns whether this call did.
    pub fn release(&self) -> bool {
        if self.released.swap(true, Ordering::AcqRel) {
            return false;
        }
        if let Some(h) = &self.read_count {
            h.mark_read();
        }
        true
    }

    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }
}
