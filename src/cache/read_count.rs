//! The expected read count of a cached entry (PIP-430's `EntryReadCountHandler`).

use crate::cache::holders::Holders;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};

/// What the cached entry and its copies share: how many handles exist, and the count itself.
struct Shared {
    handles: Holders,
    expected_reads: AtomicI32,
}

/// How many more reads an entry still expects: one atomic integer shared by the cached entry and
/// every copy handed to readers. A cached entry's count moves into one when a reader's copy first
/// needs to share it (see [`ReadCount`]), and the ledger's read path makes one for an entry it
/// hands out as it caches it; `new` makes none for a count <= 0.
///
/// A handle counts its holders itself ([`Holders`]: an `Arc` without weak references, in 32 bits):
/// the shared allocation is 8 bytes, where `Arc<AtomicI32>`'s is 24.
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
        (expected_reads > 0).then(|| Self::with_count(expected_reads))
    }

    /// A handler whatever the count (a cached entry's count, which reads may have taken to 0 or
    /// below, when a reader's copy comes to share it).
    fn with_count(expected_reads: i32) -> Self {
        let shared = Box::new(Shared {
            handles: Holders::one(),
            expected_reads: AtomicI32::new(expected_reads),
        });
        ReadCountHandler(NonNull::from(Box::leak(shared)))
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
    /// plain load and store do, without the locked read-modify-write (the last copy released
    /// leaves the slot's handle alone again). With copies out, they may mark reads concurrently,
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

    /// Whether no other handle shares this one's count (for tests of who holds what).
    #[cfg(test)]
    pub(crate) fn is_only_handle(&self) -> bool {
        self.shared().handles.is_only()
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

/// A cached entry's expected reads as its cache slot keeps them: not counted, the count itself, or
/// a handle on a [`ReadCountHandler`]'s count shared with readers' copies.
///
/// The count stays in the slot until a reader's copy has to share it ([`ReadCount::share`]), so
/// caching an entry that expects reads allocates nothing, and a read consumed under the cache's
/// lock (a replay's hit) or an eviction check reads nothing outside the slot. An entry read with
/// copies, and one cached with a handler made elsewhere (the ledger's read path), shares one.
///
/// One word, as the slot has room for: null when not counted; an odd value, not an address, for a
/// count kept here (the count times two, plus one); otherwise a handle's address (even: its
/// allocation is aligned to 4), and this value owns that handle.
pub struct ReadCount(*mut Shared);

// SAFETY: a count kept here is plain data; a handle is a `ReadCountHandler`, which is Send and Sync.
unsafe impl Send for ReadCount {}
// SAFETY: as above: `&ReadCount` reads the word, or the handle's atomics.
unsafe impl Sync for ReadCount {}

/// What a [`ReadCount`] holds, borrowed from it.
enum Held<'a> {
    Uncounted,
    Here(i32),
    /// The handle, not to be dropped (the `ReadCount` owns it). The lifetime keeps a `Held` from
    /// outliving its `ReadCount`; the handle taken out of it carries none, so it is used only
    /// inside the `match` that took it.
    Shared(ManuallyDrop<ReadCountHandler>, PhantomData<&'a ReadCount>),
}

/// The low bit of a count kept in the word.
const HERE: usize = 1;

// A handle's address has that bit clear.
const _: () = assert!(std::mem::align_of::<Shared>() >= 2);

impl ReadCount {
    /// Not counted: the entry expects no reads and takes none off.
    pub const UNCOUNTED: ReadCount = ReadCount(std::ptr::null_mut());

    /// An entry expecting `expected_reads`, counted in the slot; not counted if it is <= 0 (as
    /// [`ReadCountHandler::new`] makes no handler then).
    pub fn expecting(expected_reads: i32) -> Self {
        if expected_reads > 0 {
            Self::here(expected_reads)
        } else {
            Self::UNCOUNTED
        }
    }

    /// Count `n` in the word; a handle if it does not fit (only where a word is 32 bits).
    fn here(n: i32) -> Self {
        match (n as isize).checked_mul(2) {
            Some(twice) => ReadCount(std::ptr::without_provenance_mut(twice as usize | HERE)),
            None => Self::from_handler(ReadCountHandler::with_count(n)),
        }
    }

    /// A count shared with whoever else holds a handle of `handler`.
    pub fn from_handler(handler: ReadCountHandler) -> Self {
        ReadCount(ManuallyDrop::new(handler).0.as_ptr())
    }

    fn held(&self) -> Held<'_> {
        let word = self.0.addr();
        if word == 0 {
            Held::Uncounted
        } else if word & HERE != 0 {
            // The count was doubled into an `isize` that held it: the shift gives it back.
            Held::Here(((word as isize) >> 1) as i32)
        } else {
            // SAFETY: an even non-null word is the address of a live handle's allocation, which
            // this value owns one handle of (`shared`); the copy is never dropped.
            let handle = ReadCountHandler(unsafe { NonNull::new_unchecked(self.0) });
            Held::Shared(ManuallyDrop::new(handle), PhantomData)
        }
    }

    /// The remaining expected reads; `None` if not counted.
    pub fn expected_reads(&self) -> Option<i32> {
        match self.held() {
            Held::Uncounted => None,
            Held::Here(n) => Some(n),
            Held::Shared(h, _) => Some(h.expected_reads()),
        }
    }

    pub fn has_expected_reads(&self) -> bool {
        self.expected_reads().is_some_and(|n| n >= 1)
    }

    /// One more reader will come (a Key_Shared hold-back). An entry not counted stays so: the
    /// dispatcher adds a read only to an entry with a read-count handler
    /// (`PersistentStickyKeyDispatcherMultipleConsumers.filterAndGroupEntriesForDispatching`), and
    /// one cached expecting no read has none (`EntryReadCountHandlerImpl.maybeCreate`).
    pub fn increment(&mut self) {
        match self.held() {
            Held::Uncounted => {}
            Held::Here(n) => *self = Self::here(n.wrapping_add(1)),
            Held::Shared(h, _) => h.increment(),
        }
    }

    /// One expected read delivered, by the holder of the lock of the cache whose slot holds this
    /// (see [`ReadCountHandler::mark_read_locked`]).
    pub(crate) fn mark_read_locked(&mut self) {
        match self.held() {
            Held::Uncounted => {}
            Held::Here(n) => *self = Self::here(n.wrapping_sub(1)),
            Held::Shared(h, _) => h.mark_read_locked(),
        }
    }

    /// A handle for a reader's copy: the count moves out of the word into a handler the first
    /// time. `None` if not counted.
    pub fn share(&mut self) -> Option<ReadCountHandler> {
        match self.held() {
            Held::Uncounted => None,
            Held::Here(n) => {
                let handler = ReadCountHandler::with_count(n);
                let copy = handler.clone();
                *self = Self::from_handler(handler);
                Some(copy)
            }
            Held::Shared(h, _) => Some(ReadCountHandler::clone(&h)),
        }
    }

    /// The shared count's address, if there is one (for prefetching).
    pub(crate) fn shared_addr(&self) -> Option<*const u8> {
        match self.held() {
            Held::Shared(h, _) => Some(h.as_ptr()),
            Held::Uncounted | Held::Here(_) => None,
        }
    }

    /// Heap bytes this count takes: a shared handler's allocation, or nothing.
    pub fn allocation_bytes(&self) -> usize {
        match self.held() {
            Held::Shared(..) => ReadCountHandler::ALLOCATION_BYTES,
            Held::Uncounted | Held::Here(_) => 0,
        }
    }
}

impl From<Option<ReadCountHandler>> for ReadCount {
    fn from(handler: Option<ReadCountHandler>) -> Self {
        handler.map_or(Self::UNCOUNTED, Self::from_handler)
    }
}

impl Default for ReadCount {
    fn default() -> Self {
        Self::UNCOUNTED
    }
}

impl Drop for ReadCount {
    fn drop(&mut self) {
        if let Held::Shared(h, _) = self.held() {
            drop(ManuallyDrop::into_inner(h));
        }
    }
}

impl std::fmt::Debug for ReadCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.held() {
            Held::Uncounted => f.write_str("ReadCount::Uncounted"),
            Held::Here(n) => f.debug_tuple("ReadCount::Here").field(&n).finish(),
            Held::Shared(h, _) => f
                .debug_tuple("ReadCount::Shared")
                .field(&h.expected_reads())
                .finish(),
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

    #[test]
    fn a_count_stays_in_the_word_until_a_copy_shares_it() {
        assert_eq!(ReadCount::expecting(0).expected_reads(), None);
        assert_eq!(ReadCount::expecting(-3).expected_reads(), None);
        assert_eq!(ReadCount::UNCOUNTED.expected_reads(), None);

        let mut c = ReadCount::expecting(2);
        assert_eq!((c.expected_reads(), c.allocation_bytes()), (Some(2), 0));
        assert!(c.shared_addr().is_none());
        c.mark_read_locked();
        c.increment();
        c.mark_read_locked();
        assert_eq!(c.expected_reads(), Some(1));
        assert!(c.has_expected_reads());

        // The first copy moves the count into a handler; later copies share the same one.
        let first = c.share().unwrap();
        let second = c.share().unwrap();
        assert!(first.same_as(&second));
        assert_eq!(c.allocation_bytes(), ReadCountHandler::ALLOCATION_BYTES);
        assert_eq!(c.shared_addr(), Some(first.as_ptr()));
        first.mark_read();
        assert_eq!(c.expected_reads(), Some(0));
        assert!(!c.has_expected_reads());
        // Consumed under the lock with copies out: every holder sees it.
        c.mark_read_locked();
        c.increment();
        c.increment();
        assert_eq!(second.expected_reads(), 1);
        drop((first, c));
        assert_eq!(
            second.expected_reads(),
            1,
            "the copy's handle outlives the slot's"
        );
        assert!(second.is_only_handle(), "the slot's handle went with it");
    }

    #[test]
    fn counts_at_or_below_zero_and_at_the_ends_of_i32_round_trip() {
        // Reads may take a kept count to zero and below; it stays counted, and a copy shares it.
        let mut c = ReadCount::expecting(1);
        c.mark_read_locked();
        c.mark_read_locked();
        assert_eq!(c.expected_reads(), Some(-1));
        assert_eq!(c.share().unwrap().expected_reads(), -1);
        for n in [i32::MAX, i32::MIN, -1, 0, 1] {
            let c = ReadCount::here(n);
            assert_eq!(c.expected_reads(), Some(n), "{n}");
            if cfg!(target_pointer_width = "64") {
                assert_eq!(c.allocation_bytes(), 0, "every i32 fits in a 64-bit word");
            }
        }
        // Past the top, the count wraps as the shared atomic's would.
        let mut top = ReadCount::here(i32::MAX);
        top.increment();
        assert_eq!(top.expected_reads(), Some(i32::MIN));
        top.mark_read_locked();
        assert_eq!(top.expected_reads(), Some(i32::MAX));
    }

    #[test]
    fn an_uncounted_entry_stays_uncounted_and_a_given_handler_is_shared() {
        let mut c = ReadCount::UNCOUNTED;
        assert!(c.share().is_none());
        c.mark_read_locked();
        assert_eq!(c.expected_reads(), None);
        c.increment();
        assert_eq!((c.expected_reads(), c.allocation_bytes()), (None, 0));

        let outside = ReadCountHandler::new(3).unwrap();
        let mut c = ReadCount::from(Some(outside.clone()));
        assert_eq!(c.allocation_bytes(), ReadCountHandler::ALLOCATION_BYTES);
        c.mark_read_locked();
        assert_eq!(outside.expected_reads(), 2);
        assert!(c.share().unwrap().same_as(&outside));
        assert_eq!(ReadCount::from(None).expected_reads(), None);
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
