//! The broker-wide entry cache manager (Pulsar's `RangeEntryCacheManagerImpl` after PIP-430): one
//! size budget and one removal queue for the entry caches of all managed ledgers.

use crate::cache::clock::SharedClock;
use crate::cache::entry::{CachedEntry, Payload};
use crate::cache::inflight_reads::ReadsLimiter;
use crate::cache::position::Position;
pub use crate::cache::range_cache::EntryInfo;
use crate::cache::range_cache::RangeCache;
use crate::cache::read_count::{ReadCount, ReadCountHandler};
use crate::cache::removal_queue::{Evictor, Pass, QueueItem, RemovalQueue};
use crate::cache::stats::{CacheStats, Counters, Lookups};
use crate::config::CacheConfig;
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

mod batch;
mod held;
mod live;
mod pass;
pub use batch::BatchEntry;
pub(crate) use held::HeldCache;
pub use live::LIVE_SETTINGS;

type SharedRangeCache = Arc<Mutex<RangeCache>>;

/// Entry caches by id and by name. A removed cache keeps its id until no queue item names it (its
/// tombstones have drained, see `RangeCache::is_drained`); then the id is reused.
#[derive(Default)]
struct CacheTable {
    by_id: Vec<Option<SharedRangeCache>>,
    free_ids: Vec<u32>,
    by_name: HashMap<String, Arc<EntryCache>>,
}

struct Shared {
    /// As the manager was made: the settings a broker reads only at start-up.
    config: CacheConfig,
    /// `config` with the changes made while running ([`EntryCacheManager::update_config`]):
    /// what passes and size checks read.
    current: RwLock<CacheConfig>,
    /// `current`'s trigger threshold in bytes, read by every insert.
    trigger_bytes: AtomicU64,
    clock: SharedClock,
    size_bytes: AtomicU64,
    entry_count: AtomicU64,
    queue: RemovalQueue,
    caches: RwLock<CacheTable>,
    counters: Counters,
    wake_evictor: Option<(Mutex<bool>, Condvar)>,
}

/// The entry cache of one managed ledger. Obtain it from [`EntryCacheManager::get_cache`].
pub struct EntryCache {
    id: u32,
    name: String,
    state: SharedRangeCache,
    shared: Arc<Shared>,
    closed: AtomicBool,
    /// Made while the cache size was 0: it caches nothing, whatever the size becomes (Pulsar's
    /// `getEntryCache` hands out an `EntryCacheDisabled` then).
    disabled: bool,
}

/// The broker-wide cache manager.
pub struct EntryCacheManager {
    shared: Arc<Shared>,
    background: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    reads_limiter: Arc<ReadsLimiter>,
}

/// (entries, bytes) removed by an operation.
pub type Removed = (u64, u64);

/// See [`EntryCacheManager::settled_accounting`]. Pairs are (entries, bytes).
#[derive(Debug, Clone)]
pub struct SettledAccounting {
    /// The manager's `entry_count()` and `size_bytes()`.
    pub accounted: (u64, u64),
    /// The sum of the caches' own counts (`sum_of_cache_sizes`).
    pub cached: (u64, u64),
    pub stats: CacheStats,
}

impl EntryCacheManager {
    /// A manager for `config`. With `background_eviction`, size passes triggered by inserts and the
    /// periodic eviction (every `eviction_interval_ms`) run on a thread of their own, as in a broker;
    /// otherwise a triggered size pass runs inside the insert that triggered it.
    pub fn new(config: CacheConfig, clock: SharedClock, background_eviction: bool) -> Result<Self> {
        config.validate()?;
        if !config.strategy.design().manager {
            let runs: Vec<String> = crate::config::designs::DESIGNS
                .iter()
                .filter(|d| d.manager)
                .map(|d| format!("{:?}", d.name))
                .collect();
            return Err(Error::Unsupported(format!(
                "strategy {:?} is a replay-lab strategy; the entry cache manager runs {}",
                config.strategy.name(),
                runs.join(" and ")
            )));
        }
        let shared = Arc::new(Shared {
            clock,
            size_bytes: AtomicU64::new(0),
            entry_count: AtomicU64::new(0),
            queue: RemovalQueue::default(),
            caches: RwLock::new(CacheTable::default()),
            counters: Counters::default(),
            wake_evictor: background_eviction.then(|| (Mutex::new(false), Condvar::new())),
            current: RwLock::new(config.clone()),
            trigger_bytes: AtomicU64::new(config.trigger_bytes()),
            config,
        });
        let background = background_eviction.then(|| spawn_background_evictor(&shared));
        let reads_limiter = ReadsLimiter::new(&shared.config, shared.clock.clone());
        Ok(EntryCacheManager {
            shared,
            background,
            reads_limiter,
        })
    }

    /// The configuration the manager was made with. Settings changed since
    /// ([`Self::update_config`]) are in [`Self::current_config`].
    pub fn config(&self) -> &CacheConfig {
        &self.shared.config
    }

    /// The configuration in force: [`Self::config`] with the changes made while running.
    pub fn current_config(&self) -> CacheConfig {
        self.shared.current.read().clone()
    }

    pub fn clock(&self) -> &SharedClock {
        &self.shared.clock
    }

    /// The reads-in-flight limiter its managed ledgers' reads share
    /// (`RangeEntryCacheManagerImpl.getInflightReadsLimiter`).
    pub fn reads_limiter(&self) -> &Arc<ReadsLimiter> {
        &self.reads_limiter
    }

    /// The cache named `name`, created on first use; the same object for the same name.
    pub fn get_cache(&self, name: &str) -> Arc<EntryCache> {
        if let Some(c) = self.shared.caches.read().by_name.get(name) {
            return c.clone();
        }
        let mut table = self.shared.caches.write();
        if let Some(c) = table.by_name.get(name) {
            return c.clone();
        }
        let id = match table.free_ids.pop() {
            Some(id) => id,
            None => {
                table.by_id.push(None);
                (table.by_id.len() - 1) as u32
            }
        };
        let state = Arc::new(Mutex::new(RangeCache::default()));
        table.by_id[id as usize] = Some(state.clone());
        let cache = Arc::new(EntryCache {
            id,
            name: name.to_string(),
            state,
            shared: self.shared.clone(),
            closed: AtomicBool::new(false),
            disabled: self.max_size_bytes() == 0,
        });
        table.by_name.insert(name.to_string(), cache.clone());
        cache
    }

    /// Removes the cache named `name` and drops its entries; `None` if there is no such cache.
    /// Handles to it that callers still hold refuse inserts from now on.
    pub fn remove_cache(&self, name: &str) -> Option<Removed> {
        released_after(|released| self.remove_cache_releasing(name, released))
    }

    /// [`Self::remove_cache`], handing the removed entries' external buffers to `released` (see
    /// [`Self::evict_expired_releasing`]).
    pub fn remove_cache_releasing(
        &self,
        name: &str,
        released: &mut Vec<Payload>,
    ) -> Option<Removed> {
        let cache = {
            let mut table = self.shared.caches.write();
            let cache = table.by_name.remove(name)?;
            self.shared
                .counters
                .retire(std::mem::take(&mut cache.state.lock().lookups));
            cache
        };
        let (removed, drained) = {
            let mut state = cache.state.lock();
            cache.closed.store(true, Ordering::Release);
            state.retired = true;
            (state.clear(released), state.is_drained())
        };
        self.shared.account_invalidated(removed);
        if drained {
            // Between passes only: a pass remembers which cache each id it met named, so an id
            // freed (and taken by a new cache) during one would send the new cache's items to the
            // old cache, where they look stale and are dropped, leaving the new entries unevictable.
            let _between_passes = self.shared.queue.lock();
            self.shared.release_drained_ids(&[cache.id]);
        }
        Some(removed)
    }

    /// Names of the caches that exist.
    pub fn cache_names(&self) -> Vec<String> {
        let mut names: Vec<_> = self.shared.caches.read().by_name.keys().cloned().collect();
        names.sort();
        names
    }

    pub fn size_bytes(&self) -> u64 {
        self.shared.size_bytes.load(Ordering::Acquire)
    }

    pub fn entry_count(&self) -> u64 {
        self.shared.entry_count.load(Ordering::Acquire)
    }

    pub fn max_size_bytes(&self) -> u64 {
        self.shared.current.read().cache_size_bytes
    }

    /// One time pass: evicts entries stamped more than `eviction_time_threshold_ms` ago, extending
    /// the TTL of those that qualify; stops at the first entry that has not expired.
    pub fn evict_expired(&self) -> Removed {
        released_after(|released| self.evict_expired_releasing(released))
    }

    /// [`Self::evict_expired`], handing the evicted payloads that hold external buffers (those made
    /// by `Payload::new`, and slices of a `PayloadGroup`) to `released` instead of dropping them,
    /// so that the caller drops them where that is cheapest: the Python bindings release Python
    /// objects in one go once they hold the GIL again, instead of one deferred decref each. Owned
    /// bytes are freed on the spot. Either way, no external buffer is released while the pass
    /// holds a lock (see `range_cache::set_aside`).
    pub fn evict_expired_releasing(&self, released: &mut Vec<Payload>) -> Removed {
        self.shared
            .evict_expired(&mut self.shared.queue.lock(), released)
    }

    /// One size pass freeing at least `bytes` (or everything), oldest first, honouring requeues.
    pub fn evict_bytes(&self, bytes: u64) -> Result<Removed> {
        released_after(|released| self.evict_bytes_releasing(bytes, released))
    }

    /// [`Self::evict_bytes`], handing the evicted payloads to `released` (see
    /// [`Self::evict_expired_releasing`]).
    pub fn evict_bytes_releasing(
        &self,
        bytes: u64,
        released: &mut Vec<Payload>,
    ) -> Result<Removed> {
        if bytes == 0 {
            return Err(Error::invalid("n", "must be > 0 bytes to free"));
        }
        Ok(self
            .shared
            .evict_size(&mut self.shared.queue.lock(), bytes, released))
    }

    /// What the broker's periodic task does: a time pass, then a size pass down to the watermark if
    /// the cache is above the trigger threshold. Returns the total removed.
    pub fn run_eviction(&self) -> Removed {
        released_after(|released| self.run_eviction_releasing(released))
    }

    /// [`Self::run_eviction`], handing the evicted payloads to `released` (see
    /// [`Self::evict_expired_releasing`]).
    pub fn run_eviction_releasing(&self, released: &mut Vec<Payload>) -> Removed {
        self.shared.run_eviction(released)
    }

    pub fn stats(&self) -> CacheStats {
        // The table's read lock keeps a removal from moving a cache's lookups to the retired
        // counters while they are summed (a removal does that under the write lock), so each
        // lookup is counted once.
        let table = self.shared.caches.read();
        let mut live = Lookups::default();
        for c in table.by_id.iter().flatten() {
            live.add(c.lock().lookups);
        }
        self.shared
            .counters
            .snapshot(self.size_bytes(), self.entry_count(), live)
    }

    /// Items in the removal queue, including stale ones not yet reached (for leak checks).
    pub fn removal_queue_len(&self) -> usize {
        self.shared.queue.lock().len()
    }

    /// Heap bytes of bookkeeping, payload bytes excluded: each cache's slab, index, payload headers
    /// and read-count handlers (see `RangeCache::metadata_bytes`), plus the removal queue's
    /// capacity.
    pub fn metadata_bytes(&self) -> usize {
        let per_cache: usize = {
            let table = self.shared.caches.read();
            table
                .by_id
                .iter()
                .flatten()
                .map(|c| c.lock().metadata_bytes())
                .sum()
        };
        per_cache + self.shared.queue.lock().capacity() * std::mem::size_of::<QueueItem>()
    }

    /// The manager's totals, its caches' own and its statistics, read together between eviction
    /// passes (a pass publishes what it freed as it goes, and its counts at its end, so a reading
    /// during one, even of a background evictor, can see them apart). With no insert or
    /// invalidation running, `accounted == cached` and every inserted entry is cached, evicted or
    /// invalidated.
    pub fn settled_accounting(&self) -> SettledAccounting {
        let _between_passes = self.shared.queue.lock();
        SettledAccounting {
            accounted: (self.entry_count(), self.size_bytes()),
            cached: self.sum_of_cache_sizes(),
            stats: self.stats(),
        }
    }

    /// Sum of the caches' own sizes (must equal `size_bytes()` when no operation is running).
    pub fn sum_of_cache_sizes(&self) -> (u64, u64) {
        let table = self.shared.caches.read();
        table.by_id.iter().flatten().fold((0, 0), |(n, b), c| {
            let c = c.lock();
            (n + c.len() as u64, b + c.size_bytes())
        })
    }
}

impl Drop for EntryCacheManager {
    fn drop(&mut self) {
        // Each cache holds the shared state, and the table in the shared state holds each cache:
        // forgetting the names breaks that cycle, so the entries are freed once the callers' last
        // handle goes. Handles still held keep working (they reach their entries by id).
        let names = std::mem::take(&mut self.shared.caches.write().by_name);
        drop(names);
        if let Some((stop, handle)) = self.background.take() {
            stop.store(true, Ordering::Release);
            if let Some((flag, cv)) = &self.shared.wake_evictor {
                *flag.lock() = true;
                cv.notify_all();
            }
            let _ = handle.join();
        }
    }
}

fn spawn_background_evictor(shared: &Arc<Shared>) -> (Arc<AtomicBool>, JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let interval = Duration::from_millis(shared.config.eviction_interval_ms);
    let stop_flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name("ledgercache-evictor".into())
        .spawn(move || loop {
            let Some(shared) = weak.upgrade() else { return };
            if stop_flag.load(Ordering::Acquire) {
                return;
            }
            if let Some((flag, cv)) = &shared.wake_evictor {
                let mut woken = flag.lock();
                if !*woken {
                    cv.wait_for(&mut woken, interval);
                }
                *woken = false;
            }
            if stop_flag.load(Ordering::Acquire) {
                return;
            }
            released_after(|released| shared.run_eviction(released));
        })
        .expect("spawning the eviction thread");
    (stop, handle)
}

/// Where a pass puts the evicted payloads that hold external buffers, to be released once the
/// pass holds no lock (see `range_cache::set_aside`).
type Released<'a> = &'a mut Vec<Payload>;

/// Runs `f` with a buffer for the external payloads it removes, and releases them after it: by
/// then `f` has let go of every lock it took.
fn released_after<R>(f: impl FnOnce(&mut Vec<Payload>) -> R) -> R {
    let mut released = Vec::new();
    let out = f(&mut released);
    drop(released);
    out
}

impl Shared {
    fn run_eviction(&self, released: Released<'_>) -> Removed {
        let mut evictor = self.queue.lock();
        let (n1, b1) = self.evict_expired(&mut evictor, released);
        let (n2, b2) = self.evict_to_watermark_if_over_threshold(&mut evictor, released);
        (n1 + n2, b1 + b2)
    }

    fn evict_expired(&self, evictor: &mut Evictor<'_>, released: Released<'_>) -> Removed {
        let now = self.clock.now_ns();
        self.counters.time_passes.fetch_add(1, Ordering::Relaxed);
        let ttl_ns = self.current.read().ttl_ns();
        match now.checked_sub(ttl_ns) {
            Some(expire_before_ns) => {
                self.run_pass(evictor, Pass::Time { expire_before_ns }, released)
            }
            // Nothing can be older than the clock's origin.
            None => (0, 0),
        }
    }

    fn evict_size(
        &self,
        evictor: &mut Evictor<'_>,
        bytes_to_free: u64,
        released: Released<'_>,
    ) -> Removed {
        self.counters.size_passes.fetch_add(1, Ordering::Relaxed);
        self.run_pass(evictor, Pass::Size { bytes_to_free }, released)
    }

    /// Reads the size while holding the evictor lock, so a pass that just finished is accounted for
    /// and nothing is evicted twice.
    fn evict_to_watermark_if_over_threshold(
        &self,
        evictor: &mut Evictor<'_>,
        released: Released<'_>,
    ) -> Removed {
        let size = self.size_bytes.load(Ordering::Acquire);
        let (trigger, watermark) = {
            let current = self.current.read();
            (current.trigger_bytes(), current.watermark_bytes())
        };
        if size <= trigger {
            return (0, 0);
        }
        match size.checked_sub(watermark) {
            Some(excess) if excess > 0 => self.evict_size(evictor, excess, released),
            _ => (0, 0),
        }
    }

    /// Whether an insert that grew the cache to `total` bytes calls for a size pass.
    fn pass_due(&self, total: u64) -> bool {
        total > self.trigger_bytes.load(Ordering::Relaxed)
    }

    /// Called after an insert grew the cache to `total` bytes: the size pass (or the background
    /// evictor's wake-up) if it is due.
    fn after_insert(&self, total: u64, released: Released<'_>) {
        if !self.pass_due(total) {
            return;
        }
        match &self.wake_evictor {
            Some((flag, cv)) => {
                *flag.lock() = true;
                cv.notify_one();
            }
            None => {
                self.evict_to_watermark_if_over_threshold(&mut self.queue.lock(), released);
            }
        }
    }

    /// The cache the table holds under `id` now, if any.
    fn cache_by_id(&self, id: u32) -> Option<SharedRangeCache> {
        self.caches.read().by_id.get(id as usize).cloned().flatten()
    }

    /// Frees the ids of removed caches that no queue item names any more, for new caches.
    fn release_drained_ids(&self, ids: &[u32]) {
        if ids.is_empty() {
            return;
        }
        let mut table = self.caches.write();
        for &id in ids {
            let entry = &mut table.by_id[id as usize];
            if entry.as_ref().is_some_and(|c| c.lock().is_drained()) {
                *entry = None;
                table.free_ids.push(id);
            }
        }
    }

    /// Takes removed entries off the manager's totals.
    fn take_off_totals(&self, (entries, bytes): Removed) {
        if entries > 0 {
            self.entry_count.fetch_sub(entries, Ordering::AcqRel);
            self.size_bytes.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    fn account_invalidated(&self, (entries, bytes): Removed) {
        if entries == 0 {
            return;
        }
        self.take_off_totals((entries, bytes));
        self.counters
            .invalidated
            .fetch_add(entries, Ordering::Relaxed);
        self.counters
            .invalidated_bytes
            .fetch_add(bytes, Ordering::Relaxed);
    }
}

impl Drop for EntryCache {
    /// The last handle of a cache whose manager is gone (a removed cache was cleared already):
    /// its entries go now, not with the last handle of some other cache of the same manager.
    fn drop(&mut self) {
        let ours = {
            let mut table = self.shared.caches.write();
            // The lookups this handle made (all of them, or those after a removal retired the
            // rest) are kept: under the table's lock, as `stats` sums them.
            self.shared
                .counters
                .retire(std::mem::take(&mut self.state.lock().lookups));
            // A removed cache stays in the table until its tombstones drain (the evictor then
            // frees its id), and was cleared already.
            match table.by_id.get_mut(self.id as usize) {
                Some(slot)
                    if !self.is_closed()
                        && slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &self.state)) =>
                {
                    *slot = None;
                    true
                }
                _ => false,
            }
        };
        if ours {
            let removed = released_after(|released| self.state.lock().clear(released));
            self.shared.account_invalidated(removed);
        }
    }
}

/// How many entries `[first, last]` names: `None` unless both are in one ledger, in order. The
/// widest range names 2^64, one more than a `u64` holds: it saturates (it counts misses).
fn range_len(first: Position, last: Position) -> Option<u64> {
    (first.ledger_id == last.ledger_id && last.entry_id >= first.entry_id)
        .then(|| last.entry_id.abs_diff(first.entry_id).saturating_add(1))
}

/// What [`EntryCache::insert`]'s arguments make: the read count (`expected_reads` > 0) and the
/// accounted size (`size`, or the payload's length).
pub(crate) fn count_and_size(
    payload: &Payload,
    expected_reads: i32,
    size: Option<u32>,
) -> Result<(ReadCount, u32)> {
    if expected_reads < 0 {
        return Err(Error::invalid(
            "expected_reads",
            format!("must be >= 0, got {expected_reads}"),
        ));
    }
    let size = match size {
        Some(s) => s,
        None => u32::try_from(payload.len()).map_err(|_| {
            Error::invalid(
                "data",
                format!("{} bytes is more than an entry can hold", payload.len()),
            )
        })?,
    };
    Ok((ReadCount::expecting(expected_reads), size))
}

impl EntryCache {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Caches an entry unless its position is already cached (or caching is disabled); returns
    /// whether it was inserted. `expected_reads` > 0 counts the entry's expected reads (a
    /// reader's copy shares the count); `size` overrides the accounted size (default: the payload
    /// length).
    pub fn insert(
        &self,
        position: Position,
        payload: Payload,
        expected_reads: i32,
        size: Option<u32>,
    ) -> Result<bool> {
        let (count, size) = count_and_size(&payload, expected_reads, size)?;
        self.insert_counted(position, payload, count, size)
    }

    /// Caches an entry that shares `handler` with entries handed out elsewhere (the ledger's read
    /// path creates the handler before the entry reaches the cache).
    pub fn insert_with_handler(
        &self,
        position: Position,
        payload: Payload,
        handler: Option<ReadCountHandler>,
        size: u32,
    ) -> Result<bool> {
        self.insert_counted(position, payload, ReadCount::from(handler), size)
    }

    /// Caches an entry with read count `count` and accounted size `size` (what [`Self::insert`]
    /// and [`Self::insert_with_handler`] come to).
    pub fn insert_counted(
        &self,
        position: Position,
        payload: Payload,
        count: ReadCount,
        size: u32,
    ) -> Result<bool> {
        let total = self.insert_leaving_pass(position, payload, count, size)?;
        if let Some(total) = total {
            released_after(|released| self.shared.after_insert(total, released));
        }
        Ok(total.is_some())
    }

    /// [`Self::insert_counted`] up to its size pass, which is left to the caller
    /// ([`Self::finish_insert_releasing`]): the Python binding inserts holding the GIL (letting go
    /// of it and taking it back costs more than the insert) and runs a pass without it. The
    /// manager's caches' total size afterwards if the entry was cached.
    pub(crate) fn insert_leaving_pass(
        &self,
        position: Position,
        payload: Payload,
        count: ReadCount,
        size: u32,
    ) -> Result<Option<u64>> {
        let Some(payload) = self.to_cache(payload) else {
            return Ok(None);
        };
        let refused = self.insert_under(&mut self.state.lock(), position, payload, count, size)?;
        if let Some(payload) = refused {
            // Dropped here, with the lock let go (see `range_cache::set_aside`).
            drop(payload);
            return Ok(None);
        }
        Ok(Some(self.count_insert(size)))
    }

    /// What this cache keeps of an inserted payload: `None` when caching is off, a private copy
    /// with `copy_entries`.
    fn to_cache(&self, payload: Payload) -> Option<Payload> {
        if self.disabled {
            None
        } else if self.shared.config.copy_entries {
            Some(payload.deep_copy())
        } else {
            Some(payload)
        }
    }

    /// The part of an insert under this cache's lock (`state`): the payload comes back if the
    /// position is cached already.
    fn insert_under(
        &self,
        state: &mut RangeCache,
        position: Position,
        payload: Payload,
        count: ReadCount,
        size: u32,
    ) -> Result<Option<Payload>> {
        if self.is_closed() {
            return Err(Error::Closed(format!("entry cache {:?}", self.name)));
        }
        let shared = &self.shared;
        match state.insert(position, payload, count, size, shared.clock.now_ns()) {
            Ok(slot) => {
                // Pushed under the cache lock so this cache's items enter the queue in serial
                // order.
                shared.queue.push(QueueItem {
                    cache: self.id,
                    slot,
                });
                Ok(None)
            }
            Err(payload) => Ok(Some(payload)),
        }
    }

    /// Counts an entry of `size` bytes in the manager's totals; the caches' total size after it.
    fn count_insert(&self, size: u32) -> u64 {
        let shared = &self.shared;
        shared.entry_count.fetch_add(1, Ordering::AcqRel);
        let total = shared.size_bytes.fetch_add(size as u64, Ordering::AcqRel) + size as u64;
        shared.counters.inserted.fetch_add(1, Ordering::Relaxed);
        total
    }

    /// Whether an insert that left the manager's caches at `total` bytes (see
    /// [`Self::insert_leaving_pass`]) calls for a size pass.
    pub(crate) fn pass_due(&self, total: u64) -> bool {
        self.shared.pass_due(total)
    }

    /// Whether size passes run on the manager's background evictor: the rest of an insert then
    /// only wakes it, and evicts (so releases) nothing itself.
    #[cfg(feature = "python")]
    pub(crate) fn evicts_in_background(&self) -> bool {
        self.shared.wake_evictor.is_some()
    }

    /// The rest of an insert that left the manager's caches at `total` bytes: its size pass, if
    /// due, putting the payloads it evicts in `released` (see [`EntryCacheManager::evict_expired_releasing`]).
    pub(crate) fn finish_insert_releasing(&self, total: u64, released: &mut Vec<Payload>) {
        self.shared.after_insert(total, released);
    }

    /// [`Self::finish_insert_releasing`], dropping what the pass evicts.
    pub(crate) fn finish_insert(&self, total: u64) {
        released_after(|released| self.finish_insert_releasing(total, released));
    }

    /// Caches an entry read from storage unless it is cached already, and returns the reader's
    /// entry: it shares its read counter with the cached entry when this call cached it, and keeps
    /// its own when the position was cached already (as Pulsar's `RangeEntryCacheImpl
    /// .readFromStorage` returns the entry it created whether `insert` took it or not, so the
    /// reader's release does not consume an expected read of an entry another read cached).
    pub fn insert_for_reader(
        &self,
        position: Position,
        payload: Payload,
        handler: Option<ReadCountHandler>,
        size: u32,
    ) -> CachedEntry {
        let fresh = CachedEntry::new(position, payload.clone(), size, 0, handler.clone());
        // Whether it was taken or not (cached already, caching off, the cache closed), the reader
        // keeps the entry it read.
        let _ = self.insert_with_handler(position, payload, handler, size);
        fresh
    }

    /// A reader's copy of the entry at `position`; marks it accessed.
    pub fn get(&self, position: Position) -> Option<CachedEntry> {
        let mut state = self.state.lock();
        let found = state.get(position);
        state.lookups.served(&found);
        state.lookups.misses += u64::from(found.is_none());
        found
    }

    /// A look at the cached entry at `position` (its size, expected reads, requeues, whether it was
    /// read since the evictor last looked), without marking it accessed or counting a lookup: a
    /// [`Self::get`] marks it accessed, which extends its TTL at the next time pass.
    pub fn peek(&self, position: Position) -> Option<EntryInfo> {
        self.state.lock().info(position)
    }

    /// This cache's lock, to keep across a run of reads (see [`HeldCache`]).
    pub(crate) fn hold(self: &Arc<Self>) -> HeldCache {
        HeldCache {
            state: self.state.lock_arc(),
            cache: self.clone(),
        }
    }

    /// Undoes [`HeldCache::read_released`] of a still cached entry: gives its expected read back and
    /// returns the reader's copy that [`Self::get`] would have made (not marked accessed again, not
    /// counted as a lookup again). `None` if the entry is no longer cached.
    pub(crate) fn unrelease(&self, position: Position) -> Option<CachedEntry> {
        let copy = self.state.lock().peek_copy(position)?;
        if let Some(h) = copy.read_count_handler() {
            h.increment();
        }
        Some(copy)
    }

    /// Reader copies of the cached entries in `[first, last]` (both inclusive), in position order.
    pub fn get_range(&self, first: Position, last: Position) -> Vec<CachedEntry> {
        let mut state = self.state.lock();
        let found = state.get_range(first, last);
        state.lookups.served(&found);
        if let Some(wanted) = range_len(first, last) {
            state.lookups.missed(wanted - found.len() as u64);
        }
        found
    }

    /// Reader copies of `[first, last]` (one ledger) only if every entry of it is cached; otherwise
    /// `None`, counting them all as misses and marking none accessed (Pulsar 4.0 reads the whole
    /// range from storage unless all of it is cached).
    pub fn get_range_if_complete(
        &self,
        first: Position,
        last: Position,
    ) -> Option<Vec<CachedEntry>> {
        let Some(wanted) = range_len(first, last) else {
            return Some(Vec::new());
        };
        let mut state = self.state.lock();
        let complete = (first.entry_id..=last.entry_id)
            .all(|e| state.contains(Position::new(first.ledger_id, e)));
        if !complete {
            state.lookups.missed(wanted);
            return None;
        }
        let found = state.get_range(first, last);
        state.lookups.served(&found);
        Some(found)
    }

    /// Whether `position` is cached (does not mark it accessed or count a hit).
    pub fn contains(&self, position: Position) -> bool {
        self.state.lock().contains(position)
    }

    /// Remaining expected reads of the cached entry at `position`: `None` if absent, `Some(None)`
    /// if its expected reads are not counted.
    pub fn expected_reads(&self, position: Position) -> Option<Option<i32>> {
        self.state
            .lock()
            .peek(position)
            .map(|s| s.read_count.expected_reads())
    }

    /// One more reader will come for the cached entry at `position` (a Key_Shared hold-back): its
    /// expected reads go up by one; an entry cached without a counter stays without, as Pulsar's
    /// dispatcher skips an entry with no read-count handler. False if the position is not cached.
    pub fn increment_expected_reads(&self, position: Position) -> bool {
        let mut state = self.state.lock();
        let Some(slot) = state.peek_mut(position) else {
            return false;
        };
        slot.read_count.increment();
        true
    }

    /// Removes `[first, last]` (or `[first, last)`); returns (entries, bytes) removed.
    pub fn remove_range(&self, first: Position, last: Position, last_inclusive: bool) -> Removed {
        released_after(|released| {
            self.remove_range_releasing(first, last, last_inclusive, released)
        })
    }

    /// [`Self::remove_range`], handing the removed entries' external buffers to `released` (see
    /// [`EntryCacheManager::evict_expired_releasing`]).
    pub fn remove_range_releasing(
        &self,
        first: Position,
        last: Position,
        last_inclusive: bool,
        released: &mut Vec<Payload>,
    ) -> Removed {
        let removed = self
            .state
            .lock()
            .remove_range(first, last, last_inclusive, released);
        self.shared.account_invalidated(removed);
        removed
    }

    /// Removes every entry; returns (entries, bytes) removed.
    pub fn clear(&self) -> Removed {
        released_after(|released| self.clear_releasing(released))
    }

    /// [`Self::clear`], handing the removed entries' external buffers to `released` (see
    /// [`EntryCacheManager::evict_expired_releasing`]).
    pub fn clear_releasing(&self, released: &mut Vec<Payload>) -> Removed {
        let removed = self.state.lock().clear(released);
        self.shared.account_invalidated(removed);
        removed
    }

    pub fn size_bytes(&self) -> u64 {
        self.state.lock().size_bytes()
    }

    pub fn len(&self) -> usize {
        self.state.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cached positions in order (for checks and debugging).
    pub fn positions(&self) -> Vec<Position> {
        self.state.lock().positions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::clock::ManualClock;

    fn manager() -> EntryCacheManager {
        let mut config = CacheConfig::default();
        config
            .set("cache_size_bytes", crate::SettingValue::Int(1 << 20))
            .unwrap();
        EntryCacheManager::new(config, Arc::new(ManualClock::new(0)), false).unwrap()
    }

    fn ids(m: &EntryCacheManager) -> (usize, Vec<u32>) {
        let table = m.shared.caches.read();
        (table.by_id.len(), table.free_ids.clone())
    }

    #[test]
    fn a_removed_cache_keeps_its_id_until_its_queue_items_are_gone() {
        let m = manager();
        let a = m.get_cache("a");
        a.insert(Position::new(1, 0), Payload::from(vec![1; 4]), 0, None)
            .unwrap();
        m.remove_cache("a");
        assert_eq!(ids(&m), (1, vec![]), "an item still names cache 0");
        assert_eq!(m.get_cache("b").id, 1);
        m.evict_bytes(1).unwrap();
        assert_eq!(ids(&m), (2, vec![0]), "freed once the item was dropped");
        assert_eq!(m.get_cache("c").id, 0, "and reused");
        // A cache removed with nothing queued frees its id at once.
        m.remove_cache("c");
        assert_eq!(ids(&m), (2, vec![0]));
        drop(a);
        assert_eq!(
            ids(&m),
            (2, vec![0]),
            "the last handle of a removed cache changes nothing"
        );
    }

    /// Reads that consume their expected read under the cache's lock with no copy made
    /// (`read_released`, the replay's hits) while readers on other threads take copies and
    /// release them: every read counts. The lock holder's decrement is a plain store only while
    /// no copy exists, so if it took that path with copies out it would lose their releases.
    #[test]
    fn reads_under_the_lock_and_released_copies_all_count() {
        const HOLDERS: i32 = 3;
        const EACH: i32 = 20_000;
        let m = manager();
        let cache = m.get_cache("a");
        let p = Position::new(1, 0);
        let start = 4 * HOLDERS * EACH;
        cache
            .insert(p, Payload::from(vec![1; 8]), start, None)
            .unwrap();
        std::thread::scope(|s| {
            for _ in 0..HOLDERS {
                s.spawn(|| {
                    for _ in 0..EACH {
                        let copy = cache.get(p).expect("cached");
                        assert!(copy.release());
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..HOLDERS * EACH {
                    assert!(cache.hold().read_released(p));
                }
            });
        });
        assert_eq!(
            cache.expected_reads(p),
            Some(Some(start - 2 * HOLDERS * EACH))
        );
    }
}
