//! The expected read count of a cached entry (PIP-430's `EntryReadCountHandler`).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// How many more reads an entry still expects: one atomic integer shared by the cached entry and
/// every copy handed to readers. Created only for a positive initial count, so entries nobody is
/// expected to read carry no handler at all.
#[derive(Debug, Clone)]
pub struct ReadCountHandler(Arc<AtomicI32>);

impl ReadCountHandler {
    /// What one handler allocates: `Arc`'s two counts and the counter, padded to the counts'
    /// alignment.
    pub const ALLOCATION_BYTES: usize = (2 * std::mem::size_of::<usize>()
        + std::mem::size_of::<AtomicI32>())
    .next_multiple_of(std::mem::align_of::<usize>());

    /// `None` for a count <= 0: such an entry has no expected reads and needs no shared state.
    pub fn new(expected_reads: i32) -> Option<Self> {
        (expected_reads > 0).then(|| ReadCountHandler(Arc::new(AtomicI32::new(expected_reads))))
    }

    pub fn expected_reads(&self) -> i32 {
        self.0.load(Ordering::Acquire)
    }

    /// A replay-queue add: one more reader will come for this entry.
    pub fn increment(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// One expected read has been delivered.
    pub fn mark_read(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    pub fn has_expected_reads(&self) -> bool {
        self.expected_reads() >= 1
    }

    /// The counter's address (for prefetching).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        Arc::as_ptr(&self.0) as *const u8
    }

    /// True if both handles count the same entry.
    pub fn same_as(&self, other: &ReadCountHandler) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_only_for_positive_counts() {
        assert!(ReadCountHandler::new(0).is_none());
        assert!(ReadCountHandler::new(-1).is_none());
        let h = ReadCountHandler::new(2).unwrap();
        let copy = h.clone();
        copy.mark_read();
        assert_eq!(h.expected_reads(), 1);
        assert!(h.has_expected_reads());
        h.mark_read();
        assert!(!copy.has_expected_reads());
        copy.increment();
        assert!(h.has_expected_reads());
        assert!(h.same_as(&copy));
    }
}
