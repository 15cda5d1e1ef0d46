//! An external buffer's release never runs while the manager holds a lock.
//!
//! Releasing a buffer made by `Payload::new` runs its owner's code, and that code may wait for a
//! thread that is itself waiting for the cache: a Python `bytes` (or a pyarrow buffer that wraps a
//! Python object) needs the GIL, and a Python thread holding the GIL may be waiting in `get` for the
//! cache's lock. Here each buffer's release waits (up to a timeout) for another thread to get into
//! its cache and past the evictor; released under either lock, it would wait in vain and is
//! counted as stuck. The ways an entry leaves a cache are tried: time, size and background passes,
//! an insert's own size pass, `remove_range`, `clear`, `remove_cache`, and the payloads an insert
//! refuses or replaces with a copy, one by one, in a batch and for a reader. (The last handle of a cache whose
//! manager is gone clears it the same way; these buffers hold the manager, so that is not tried.)

use ledgercache::cache::entry::PayloadBuffer;
use ledgercache::{
    BatchEntry, CacheConfig, EntryCache, EntryCacheManager, ManualClock, Payload, Position,
    ReadCount, SettingValue,
};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How long a release waits for the other thread before it counts as stuck.
const PATIENCE: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Releases {
    done: AtomicUsize,
    stuck: AtomicUsize,
}

/// A buffer whose release needs another thread to look into `cache`, wait for any running
/// eviction pass and read the manager's table of caches, as a Python object's release needs the
/// GIL.
struct NeedsTheCache {
    bytes: Vec<u8>,
    cache: Arc<EntryCache>,
    manager: Arc<EntryCacheManager>,
    releases: Arc<Releases>,
}

impl PayloadBuffer for NeedsTheCache {
    fn as_slice(&self) -> &[u8] {
        &self.bytes
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for NeedsTheCache {
    fn drop(&mut self) {
        let (cache, manager) = (self.cache.clone(), self.manager.clone());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            cache.contains(Position::new(0, 0));
            manager.removal_queue_len();
            manager.cache_names();
            let _ = tx.send(());
        });
        let counter = match rx.recv_timeout(PATIENCE) {
            Ok(()) => &self.releases.done,
            Err(_) => &self.releases.stuck,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

struct Setup {
    manager: Arc<EntryCacheManager>,
    clock: Arc<ManualClock>,
    releases: Arc<Releases>,
}

impl Setup {
    fn new(settings: &[(&str, SettingValue)], background: bool) -> Self {
        let mut config = CacheConfig::default();
        for (key, value) in settings {
            config.set(key, value.clone()).unwrap();
        }
        let clock = Arc::new(ManualClock::new(0));
        let manager = Arc::new(EntryCacheManager::new(config, clock.clone(), background).unwrap());
        Setup {
            manager,
            clock,
            releases: Arc::default(),
        }
    }

    fn payload(&self, cache: &Arc<EntryCache>, len: usize) -> Payload {
        Payload::new(NeedsTheCache {
            bytes: vec![7; len],
            cache: cache.clone(),
            manager: self.manager.clone(),
            releases: self.releases.clone(),
        })
    }

    /// `n` entries of 100 bytes for `insert_batch`.
    fn batch(&self, cache: &Arc<EntryCache>, n: usize) -> Vec<BatchEntry> {
        (0..n)
            .map(|_| BatchEntry {
                payload: self.payload(cache, 100),
                size: 100,
                read_count: ReadCount::UNCOUNTED,
            })
            .collect()
    }

    /// Three 100-byte entries at (1, 0..3).
    fn fill(&self, cache: &Arc<EntryCache>) {
        for e in 0..3 {
            let p = self.payload(cache, 100);
            assert!(cache.insert(Position::new(1, e), p, 0, None).unwrap());
        }
    }

    /// Asserts that `n` releases happened so far, none of them under a lock.
    fn released(&self, n: usize, what: &str) {
        assert_eq!(
            self.releases.stuck.load(Ordering::SeqCst),
            0,
            "{what}: a release ran under a lock"
        );
        assert_eq!(self.releases.done.load(Ordering::SeqCst), n, "{what}");
    }
}

fn int(v: i64) -> SettingValue {
    SettingValue::Int(v)
}

#[test]
fn passes_release_external_buffers_with_no_lock_held() {
    let s = Setup::new(&[("eviction_time_threshold_ms", int(1))], false);
    let cache = s.manager.get_cache("a");
    s.fill(&cache);
    assert_eq!(s.manager.evict_bytes(150).unwrap(), (2, 200));
    s.released(2, "size pass");
    s.clock.advance_ms(5);
    assert_eq!(s.manager.evict_expired(), (1, 100));
    s.released(3, "time pass");
    s.fill(&cache);
    s.clock.advance_ms(5);
    assert_eq!(s.manager.run_eviction(), (3, 300));
    s.released(6, "the periodic task");
}

#[test]
fn an_inserts_size_pass_releases_with_no_lock_held() {
    // Trigger 343 bytes, watermark 175: the fourth entry takes the cache over the trigger, and a
    // pass evicts the three oldest.
    let s = Setup::new(
        &[
            ("cache_size_bytes", int(350)),
            ("eviction_watermark", SettingValue::Float(0.5)),
        ],
        false,
    );
    let cache = s.manager.get_cache("a");
    s.fill(&cache);
    s.released(0, "under the trigger");
    let p = s.payload(&cache, 100);
    assert!(cache.insert(Position::new(1, 3), p, 0, None).unwrap());
    s.released(3, "an insert over the trigger");
    // The third of these takes it over again: (1, 3), (2, 0) and (2, 1) go.
    assert_eq!(cache.insert_batch(2, 0, s.batch(&cache, 4)).unwrap(), 4);
    s.released(6, "a batch over the trigger");
    assert_eq!(s.manager.stats().evicted, 6);
}

#[test]
fn the_background_evictor_releases_with_no_lock_held() {
    let s = Setup::new(
        &[
            ("eviction_time_threshold_ms", int(1)),
            ("eviction_interval_ms", int(1)),
        ],
        true,
    );
    let cache = s.manager.get_cache("a");
    s.fill(&cache);
    s.clock.advance_ms(5);
    let waited = std::time::Instant::now();
    while s.releases.done.load(Ordering::SeqCst) + s.releases.stuck.load(Ordering::SeqCst) < 3 {
        assert!(waited.elapsed() < 6 * PATIENCE, "the evictor did not evict");
        std::thread::sleep(Duration::from_millis(5));
    }
    s.released(3, "the background evictor");
}

#[test]
fn invalidations_release_with_no_lock_held() {
    let s = Setup::new(&[], false);
    let cache = s.manager.get_cache("a");
    s.fill(&cache);
    assert_eq!(
        cache.remove_range(Position::new(1, 0), Position::new(1, 1), true),
        (2, 200)
    );
    s.released(2, "remove_range");
    assert_eq!(cache.clear(), (1, 100));
    s.released(3, "clear");
    s.fill(&cache);
    assert_eq!(s.manager.remove_cache("a"), Some((3, 300)));
    s.released(6, "remove_cache");
}

#[test]
fn refused_and_copied_payloads_are_released_with_no_lock_held() {
    let s = Setup::new(&[], false);
    let cache = s.manager.get_cache("a");
    s.fill(&cache);
    let again = s.payload(&cache, 100);
    assert!(!cache.insert(Position::new(1, 0), again, 0, None).unwrap());
    s.released(1, "an insert of a cached position");
    // A storage read of a cached entry: the reader keeps what the read returned (the cache
    // refuses its copy), and releases it when done.
    let read = s.payload(&cache, 100);
    let copy = cache.insert_for_reader(Position::new(1, 1), read, None, 100);
    assert_eq!(copy.position(), Position::new(1, 1));
    s.released(
        1,
        "insert_for_reader of a cached position, while the reader holds it",
    );
    drop(copy);
    s.released(2, "the reader's entry of a cached position");
    // Entries 0..3 of ledger 1 are cached: three of the four are refused.
    assert_eq!(cache.insert_batch(1, 0, s.batch(&cache, 4)).unwrap(), 1);
    s.released(5, "a batch's refused payloads");

    let copying = Setup::new(&[("copy_entries", SettingValue::Bool(true))], false);
    let cache = copying.manager.get_cache("a");
    let p = copying.payload(&cache, 100);
    assert!(cache.insert(Position::new(1, 0), p, 0, None).unwrap());
    copying.released(1, "an insert's original, replaced by its copy");
    assert_eq!(
        cache.insert_batch(2, 0, copying.batch(&cache, 2)).unwrap(),
        2
    );
    copying.released(3, "a batch's originals, replaced by their copies");
}
