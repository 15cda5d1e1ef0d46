//! What an eviction pass asks of the allocator once the cache is in its steady state.
//!
//! glibc's malloc, on any request of 1 KiB or more, first consolidates every small block freed
//! since the last time (payloads the pass has just freed, which the next inserts would otherwise
//! take back as they are). A pass that grew a buffer of its own each time made such a request at
//! every pass (the removal queue's `Staged::requeued` says what that cost, and where it did not).
//! This test fails if a pass over one topic makes such a request again.
//!
//! The watching allocator must be the process's global allocator, which the `mimalloc` feature
//! takes for itself: with that feature (never on in `make test`) this file compiles to nothing.
#![cfg(not(feature = "mimalloc"))]

use ledgercache::{CacheConfig, EntryCacheManager, ManualClock, Payload, Position, SettingValue};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

/// The system allocator, noting the largest request made on a thread while it watches.
struct Watching;

thread_local! {
    /// `Some(largest request so far)` while the thread watches.
    static LARGEST: Cell<Option<usize>> = const { Cell::new(None) };
}

fn note(size: usize) {
    // `try_with`: the allocator may be called while the thread-local is being torn down.
    let _ = LARGEST.try_with(|largest| {
        if let Some(seen) = largest.get() {
            largest.set(Some(seen.max(size)));
        }
    });
}

// SAFETY: every call is passed on to `System` unchanged; noting a size allocates nothing.
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Watching = Watching;

/// The largest allocation `f` requests on this thread (0: none).
fn largest_request(f: impl FnOnce()) -> usize {
    LARGEST.with(|largest| largest.set(Some(0)));
    f();
    LARGEST.with(std::cell::Cell::take).unwrap_or(0)
}

#[test]
fn a_steady_pass_with_requeues_requests_no_large_block() {
    const PER_MS: i64 = 2_000;
    const TTL_MS: i64 = 10;
    let clock = Arc::new(ManualClock::new(0));
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(1 << 40))
        .unwrap();
    cfg.set("eviction_time_threshold_ms", SettingValue::Int(TTL_MS))
        .unwrap();
    let m = EntryCacheManager::new(cfg, clock.clone(), false).unwrap();
    let cache = m.get_cache("ledger");
    let mut largest = Vec::new();
    for ms in 0..12 * TTL_MS {
        for i in 0..PER_MS {
            let p = Position::new(0, ms * PER_MS + i);
            // A tenth expects a read (requeued by every pass that meets it, up to five times),
            // another tenth is read (requeued once).
            let expected = i32::from(i % 10 == 0);
            cache
                .insert(p, Payload::from(vec![7u8; 64]), expected, None)
                .unwrap();
            if i % 10 == 5 {
                cache.get(p);
            }
        }
        clock.advance_ms(1);
        let stats = m.stats();
        let request = largest_request(|| {
            m.evict_expired();
        });
        let requeued = m.stats().requeued - stats.requeued;
        // Past the warm-up (an entry that expects a read lives six TTLs: five requeues, and the
        // queue grows until the first of them go), each pass requeues hundreds of items.
        if ms >= 8 * TTL_MS {
            assert!(requeued >= 200, "pass at {ms} ms requeued only {requeued}");
            largest.push(request);
        }
    }
    assert!(
        largest.iter().all(|&size| size < 1024),
        "a steady pass requested {} bytes at once (largest of each pass: {largest:?})",
        largest.iter().max().unwrap_or(&0)
    );
}
