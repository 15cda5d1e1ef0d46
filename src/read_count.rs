//! The expected read count of a cached entry (PIP-430's `EntryReadCountHandler`).

use crate::holders::Holders;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};

/// What the cached entry and its copies share: how many handles exist, and the count itself.
struct Shared {
    handles: Holders,
    expected_reads: AtomicI32,
}

/// How many more reads an entry still expects: one atomic integer shared by the cached entry and
/// every copy handed to readers. Created only for a positive initial count, so entries nobody is
/// expected to read carry no handler at all.
///
/// A handle counts its holders itself ([`Holders`]: an `Arc` without weak references, in 32 bits):
/// the shared allocation is 8 bytes, where `Arc<AtomicI32>`'s is 24, and every cached entry that
/// expects a read carries one.
pub struct ReadCountHandler(NonNull<Shared>);

// SAFETY: the shared state is atomics only; a handle is a counted reference to it, as `Arc` is.
unsafe impl Send for ReadCountHandler {}
// SAFETY: as above: every access through `&ReadCountHandler` is atomic.
unsafe impl Sync for ReadCountHandler {}

impl ReadCountHandler {
    /// What one handler allocates: the holder count and the read count.
    pub const ALLOCATION_BYTES: usize = std::mem::size_of::<Shared>();

    /// `None` for a count <= 0: such an entry has no expected reads and needs no shared state.
    pub fn new(expected_reads: i32) -> Option<Self> {
        (expected_reads > 0).then(|| {
            let shared = Box::new(Shared {
                handles: Holders::one(),
                expected_reads: AtomicI32::new(expected_reads),
            });
            ReadCountHandler(NonNull::from(Box::leak(shared)))
        })
    }

    fn shared(&self) -> &Shared {
        // SAFETY: a live handle keeps the allocation alive (it is freed with the last handle).
        unsafe { self.0.as_ref() }
    }

    pub fn expected_reads(&self) -> i32 {
        self.shared().expected_reads.load(Ordering::Acquire)
    }

    /// A replay-queue add: one more reader will come for this entry.
    pub fn increment(&self) {
        self.shared().expected_reads.fetch_add(1, Ordering::AcqRel);
    }

    /// One expected read has been delivered.
    pub fn mark_read(&self) {
        self.shared().expected_reads.fetch_sub(1, Ordering::AcqRel);
    }

    /// [`Self::mark_read`] by the holder of the lock of the cache that holds this handle.
    ///
    /// A handle is made only from a live one, and the cached entry's handle is reached only under
    /// its cache's lock, so while it is the only handle nothing else can change the count: a
    /// plain load and store do, without the locked read-modify-write (a replay's hits consume
    /// their reads this way, without copies). With copies out, they may mark reads concurrently,
    /// and the decrement is atomic as usual.
    pub(crate) fn mark_read_locked(&self) {
        let shared = self.shared();
        if shared.handles.is_only() {
            let n = shared.expected_reads.load(Ordering::Relaxed);
            shared
                .expected_reads
                .store(n.wrapping_sub(1), Ordering::Relaxed);
        } else {
            self.mark_read();
        }
    }

    pub fn has_expected_reads(&self) -> bool {
        self.expected_reads() >= 1
    }

    /// The counter's address (for prefetching).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.0.as_ptr() as *const u8
    }

    /// True if both handles count the same entry.
    pub fn same_as(&self, other: &ReadCountHandler) -> bool {
        self.0 == other.0
    }
}

impl Clone for ReadCountHandler {
    fn clone(&self) -> Self {
        self.shared().handles.add();
        ReadCountHandler(self.0)
    }
}

impl Drop for ReadCountHandler {
    fn drop(&mut self) {
        if self.shared().handles.drop_one() {
            // SAFETY: this was the last handle; the allocation came from `Box::leak` in `new`.
            drop(unsafe { Box::from_raw(self.0.as_ptr()) });
        }
    }
}

impl std::fmt::Debug for ReadCountHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReadCountHandler")
            .field(&self.expected_reads())
            .finish()
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
        assert!(!h.same_as(&ReadCountHandler::new(1).unwrap()));
        assert_eq!(ReadCountHandler::ALLOCATION_BYTES, 8);
    }

    /// Handles cloned, marked and dropped on several threads at once: every mark counts, and the
    /// shared count is freed exactly once, by whichever thread drops the last handle (a double
    /// free or a use after free aborts under the test allocator, or is reported by Miri and
    /// sanitizers).
    #[test]
    fn handles_shared_across_threads_count_every_read_and_free_once() {
        for round in 0..200 {
            let h = ReadCountHandler::new(1_000).unwrap();
            let handles: Vec<Vec<ReadCountHandler>> = (0..4)
                .map(|_| (0..50).map(|_| h.clone()).collect())
                .collect();
            std::thread::scope(|s| {
                for mine in handles {
                    s.spawn(move || {
                        for c in mine {
                            c.mark_read();
                            let again = c.clone();
                            drop(c);
                            drop(again);
                        }
                    });
                }
            });
            assert_eq!(h.expected_reads(), 1_000 - 200, "round {round}");
            // The last handle goes on the other thread half the time.
            if round % 2 == 0 {
                std::thread::spawn(move || drop(h)).join().unwrap();
            }
        }
    }
}
