//! A cache's lock held across calls (the replay's hits and inserts).

use super::EntryCache;
use crate::cache::entry::Payload;
use crate::cache::position::Position;
use crate::cache::range_cache::RangeCache;
use crate::cache::read_count::ReadCount;
use crate::error::Result;
use parking_lot::{ArcMutexGuard, RawMutex};
use std::sync::Arc;

/// An entry cache's lock kept across many calls by the only thread that uses its manager: the
/// replay holds the caches it reads from and inserts into from one call to the next, since a lock
/// and an unlock per hit were a tenth of its time. Every other use of the cache waits while it is
/// held, its holder's own included (the lock is not reentrant), so the holder lets go before
/// anything that locks a cache: a size pass, a tick, an invalidation, statistics. Holding several
/// caches at once is safe only with no other thread on the manager (see `manager/pass.rs`).
pub(crate) struct HeldCache {
    // The guard goes first: dropping the last handle of the cache locks it.
    pub(super) state: ArcMutexGuard<RawMutex, RangeCache>,
    pub(super) cache: Arc<EntryCache>,
}

impl HeldCache {
    /// [`EntryCache::insert_leaving_pass`] under the held lock, of an entry with no bytes (the
    /// replay's, which are sizes only; a refused payload is then nothing to drop): the manager's
    /// caches' total size after it if the entry was cached. The caller lets go before the size
    /// pass ([`EntryCache::finish_insert`]), if it is due ([`EntryCache::pass_due`]).
    pub(crate) fn insert_sized(
        &mut self,
        position: Position,
        count: ReadCount,
        size: u32,
    ) -> Result<Option<u64>> {
        let cache = &self.cache;
        let Some(payload) = cache.to_cache(Payload::empty()) else {
            return Ok(None);
        };
        Ok(
            match cache.insert_under(&mut self.state, position, payload, count, size)? {
                Some(_refused) => None,
                None => Some(cache.count_insert(size)),
            },
        )
    }

    /// [`EntryCache::get`] with the copy released at once, without making it (the replay's hits,
    /// whose copies nothing reads). True if the entry was cached.
    pub(crate) fn read_released(&mut self, position: Position) -> bool {
        let state = &mut self.state;
        let size = state.read_released(position);
        match size {
            Some(size) => state.lookups.hit(size),
            None => state.lookups.misses += 1,
        }
        size.is_some()
    }

    /// [`EntryCache::contains`] under the held lock.
    pub(crate) fn contains(&self, position: Position) -> bool {
        self.state.contains(position)
    }

    /// Under the held lock: notes the removal of the entry at `position`, if it is cached, for
    /// [`HeldCache::take_watched_gone`] (see [`RangeCache::watch_removal`]).
    pub(crate) fn watch_removal(&mut self, position: Position) -> bool {
        self.state.watch_removal(position)
    }

    /// Under the held lock: the watched entries removed since the last call, in the order they
    /// went.
    pub(crate) fn take_watched_gone(&mut self) -> Vec<Position> {
        self.state.take_watched_gone()
    }
}
