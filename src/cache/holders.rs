//! How many handles share an allocation, counted as `Arc` counts its strong references (32 bits,
//! no weak count): the one rule for taking and dropping a handle, used by payloads and read
//! counters, which lay out their shared allocations themselves.

use std::sync::atomic::{fence, AtomicU32, Ordering};

#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct Holders(AtomicU32);

impl Holders {
    /// The count of a new allocation: its first handle.
    pub(crate) fn one() -> Self {
        Holders(AtomicU32::new(1))
    }

    /// One more handle, made from a live one.
    pub(crate) fn add(&self) {
        // Relaxed, as in `Arc`: the new handle is made from a live one, and handing it to another
        // thread synchronises by other means.
        let old = self.0.fetch_add(1, Ordering::Relaxed);
        // As `Arc` does: this many live handles means they leak in a loop; stop before the count
        // wraps and frees what is in use.
        if old > i32::MAX as u32 {
            std::process::abort();
        }
    }

    /// Whether this is the only handle. Acquire: what the holders that went did before their
    /// decrements is seen after this says they have gone.
    pub(crate) fn is_only(&self) -> bool {
        self.0.load(Ordering::Acquire) == 1
    }

    /// One handle goes; true if it was the last, and the caller frees the allocation.
    ///
    /// The last handle (the usual case: an evicted entry nobody reads) has no one to race with,
    /// since a handle is made only from a live one: a plain load decides, and the locked decrement,
    /// which would hold back every later memory access of an eviction pass until this (seldom
    /// cached) count arrives, is skipped. Acquire either way: the other holders' uses happen before
    /// their decrements, and are seen before the free.
    pub(crate) fn drop_one(&self) -> bool {
        if self.is_only() {
            return true;
        }
        if self.0.fetch_sub(1, Ordering::Release) != 1 {
            return false;
        }
        fence(Ordering::Acquire);
        true
    }
}
