//! Counters of the entry cache manager.

use crate::cache::entry::CachedEntry;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default, Debug)]
pub(crate) struct Counters {
    pub inserted: AtomicU64,
    pub evicted: AtomicU64,
    pub evicted_bytes: AtomicU64,
    pub requeued: AtomicU64,
    pub invalidated: AtomicU64,
    pub invalidated_bytes: AtomicU64,
    /// Lookups of caches that are gone (removed); a live cache keeps its own ([`Lookups`]).
    pub hits: AtomicU64,
    pub hit_bytes: AtomicU64,
    pub misses: AtomicU64,
    pub time_passes: AtomicU64,
    pub size_passes: AtomicU64,
}

/// A point-in-time copy of the manager's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries inserted (inserts of an already cached position are not counted).
    pub inserted: u64,
    /// Entries removed by eviction passes (time or size).
    pub evicted: u64,
    pub evicted_bytes: u64,
    /// TTL extensions: entries moved to the tail of the removal queue instead of being evicted.
    pub requeued: u64,
    /// Entries removed by `remove_range`, `clear` and `remove_cache`.
    pub invalidated: u64,
    pub invalidated_bytes: u64,
    /// Entries served from the cache by `get` / `get_range`.
    pub hits: u64,
    pub hit_bytes: u64,
    /// Lookups that found nothing (for ranges within one ledger: each absent position).
    pub misses: u64,
    /// Time passes run.
    pub time_passes: u64,
    /// Size passes run with something to free (Pulsar's "evictions" counter).
    pub size_passes: u64,
    /// Bytes and entries cached right now.
    pub size_bytes: u64,
    pub entry_count: u64,
}

impl CacheStats {
    /// (name, value) pairs, for dictionaries and reports.
    pub fn fields(&self) -> [(&'static str, u64); 13] {
        [
            ("inserted", self.inserted),
            ("evicted", self.evicted),
            ("evicted_bytes", self.evicted_bytes),
            ("requeued", self.requeued),
            ("invalidated", self.invalidated),
            ("invalidated_bytes", self.invalidated_bytes),
            ("hits", self.hits),
            ("hit_bytes", self.hit_bytes),
            ("misses", self.misses),
            ("time_passes", self.time_passes),
            ("size_passes", self.size_passes),
            ("size_bytes", self.size_bytes),
            ("entry_count", self.entry_count),
        ]
    }
}

/// One cache's lookup counts, kept under the cache's lock as plain integers: a read takes that lock
/// anyway, while counters shared by every cache would add two atomic operations to each read, on a
/// cache line every reading thread writes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lookups {
    pub hits: u64,
    pub hit_bytes: u64,
    pub misses: u64,
}

impl Lookups {
    /// Counts the entries a lookup served.
    pub fn served<'a>(&mut self, found: impl IntoIterator<Item = &'a CachedEntry>) {
        for e in found {
            self.hit(e.size());
        }
    }

    /// Counts one entry of `size` bytes served.
    pub fn hit(&mut self, size: u32) {
        self.hits += 1;
        self.hit_bytes += u64::from(size);
    }

    /// Counts `n` entries looked up and not found. A range read names its entries by two
    /// positions, so `n` comes from the caller's values: the count saturates rather than wraps.
    pub fn missed(&mut self, n: u64) {
        self.misses = self.misses.saturating_add(n);
    }

    pub fn add(&mut self, other: Lookups) {
        self.hits += other.hits;
        self.hit_bytes += other.hit_bytes;
        self.missed(other.misses);
    }
}

impl Counters {
    /// Keeps the lookups of a cache that is going away.
    pub fn retire(&self, lookups: Lookups) {
        self.hits.fetch_add(lookups.hits, Relaxed);
        self.hit_bytes.fetch_add(lookups.hit_bytes, Relaxed);
        // Saturating, as `Lookups::missed`: a removed cache's misses may be near the limit.
        let _ = self
            .misses
            .fetch_update(Relaxed, Relaxed, |m| Some(m.saturating_add(lookups.misses)));
    }

    /// The counters, with `live`: the lookups of the caches that exist now.
    pub fn snapshot(&self, size_bytes: u64, entry_count: u64, live: Lookups) -> CacheStats {
        CacheStats {
            inserted: self.inserted.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            evicted_bytes: self.evicted_bytes.load(Relaxed),
            requeued: self.requeued.load(Relaxed),
            invalidated: self.invalidated.load(Relaxed),
            invalidated_bytes: self.invalidated_bytes.load(Relaxed),
            hits: self.hits.load(Relaxed) + live.hits,
            hit_bytes: self.hit_bytes.load(Relaxed) + live.hit_bytes,
            misses: self.misses.load(Relaxed).saturating_add(live.misses),
            time_passes: self.time_passes.load(Relaxed),
            size_passes: self.size_passes.load(Relaxed),
            size_bytes,
            entry_count,
        }
    }
}
