//! What the cache hands to readers: a copy of a cached entry that shares its payload and its
//! expected-read counter with the cached original.

pub use crate::cache::payload::{Payload, PayloadBuffer, PayloadGroup};
use crate::cache::position::Position;
use crate::cache::read_count::ReadCountHandler;
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
        self.read_count
            .as_ref()
            .map(ReadCountHandler::expected_reads)
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
        self.consume_read();
        true
    }

    /// [`Self::release`] of a copy the caller owns, which then goes: nobody else can release it
    /// meanwhile, so the once-only check needs no atomic exchange (a reader that releases each copy
    /// it is done with pays one atomic fewer per entry).
    pub fn release_owned(mut self) -> bool {
        if std::mem::replace(self.released.get_mut(), true) {
            return false;
        }
        self.consume_read();
        true
    }

    /// What a release does, once: the entry expects one read fewer.
    fn consume_read(&self) {
        if let Some(h) = &self.read_count {
            h.mark_read();
        }
    }

    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_consumes_one_expected_read_however_it_is_released() {
        let counter = ReadCountHandler::new(3).unwrap();
        let copy = |c: &ReadCountHandler| {
            CachedEntry::new(Position::new(1, 2), Payload::empty(), 0, 0, Some(c.clone()))
        };
        assert!(copy(&counter).release_owned());
        assert_eq!(counter.expected_reads(), 2);
        let shared = copy(&counter);
        assert!(shared.release());
        assert!(!shared.release());
        assert!(!shared.release_owned(), "released already");
        assert_eq!(counter.expected_reads(), 1);
        drop(copy(&counter));
        assert_eq!(
            counter.expected_reads(),
            1,
            "a copy dropped unreleased consumes nothing"
        );
    }
}
