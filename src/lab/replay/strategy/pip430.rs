//! PIP-430 (and, with both extensions off, plain FIFO with a TTL) through the real entry cache
//! manager, on the replay's manual clock.

use super::{CacheStrategy, EntryKey, StrategyCounters, WatchTokens};
use crate::broker::read_flow::Invalidation;
use crate::cache::clock::ManualClock;
use crate::cache::entry::{CachedEntry, Payload};
use crate::cache::fast_hash::FastMap;
use crate::cache::manager::{count_and_size, EntryCache, EntryCacheManager, HeldCache};
use crate::cache::position::Position;
use crate::cache::read_count::ReadCountHandler;
use crate::config::CacheConfig;
use crate::error::Result;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;

pub struct Pip430 {
    manager: EntryCacheManager,
    clock: Arc<ManualClock>,
    caches: Vec<Arc<EntryCache>>,
    /// Copies delivered by the read in progress, released when it ends.
    delivered: Vec<CachedEntry>,
    /// Hits of the read in progress whose copies were released as they were taken, ahead of the
    /// read's end: nothing sees an entry's expected reads while the read only reads (the manager
    /// runs no background eviction here: its passes run inside inserts and ticks), so this is
    /// the same as holding the copy until the end, without making one (two atomic updates and a
    /// copy fewer per hit). Whatever looks at expected reads (a size pass, a tick, an invalidation,
    /// an added expected read) first turns them back into held copies ([`Pip430::hold_released`]).
    released_early: Vec<EntryKey>,
    /// Copies of the reads that wait for storage, until they are dispatched (see
    /// [`CacheStrategy::keep_read`]), by the number `keep_read` gave; the last number given.
    kept: FastMap<u64, Vec<CachedEntry>>,
    last_kept: u64,
    /// Locks of the topic caches that reads, inserts and `contains` went to (see [`HeldCache`]):
    /// the reads of each subscription, the publishes and the memory model's checks lock each
    /// cache once, not once per entry. Whatever may lock a cache itself (a size pass, a tick, an
    /// invalidation, statistics, a storage read's insert) lets go of them all first
    /// ([`Pip430::let_go`]); `counters` does so through `&self`, hence the cell (which makes a
    /// `Pip430` `Send` but not `Sync`). The manager is this strategy's own and no other thread
    /// uses it, which holding several caches at once needs.
    held: RefCell<HeldLocks>,
    /// The memory model has asked to watch an entry's removal (see
    /// [`CacheStrategy::watch_removal`]).
    watching: bool,
    /// The watched entries' tokens: the entry cache's slots have no room for them, and only the
    /// lab watches entries.
    tokens: WatchTokens,
    /// When the removal queue's items may be stamped: the starts of the [`Self::stamp_ns`]-long
    /// spans in which an entry was inserted or may have been requeued, ascending, the spans whose
    /// items a tick has certainly passed dropped. The first is at or before the queue head's
    /// stamp, so no tick can expire anything until it is `ttl` old
    /// ([`CacheStrategy::next_tick_change_ns`]); the manager does not show its stamps.
    stamps: VecDeque<u64>,
    /// The span of [`Self::stamps`]: the eviction interval, so a span costs at most two ticks.
    stamp_ns: u64,
}

impl Pip430 {
    /// `config.strategy` must be `pip430` or `pip430-fifo`.
    pub fn new(config: CacheConfig) -> Result<Self> {
        let clock = Arc::new(ManualClock::new(0));
        let stamp_ns = config.eviction_interval_ms.saturating_mul(1_000_000).max(1);
        let manager = EntryCacheManager::new(config, clock.clone(), false)?;
        Ok(Pip430 {
            manager,
            clock,
            caches: Vec::new(),
            delivered: Vec::new(),
            released_early: Vec::new(),
            kept: FastMap::default(),
            last_kept: 0,
            held: RefCell::default(),
            watching: false,
            tokens: WatchTokens::default(),
            stamps: VecDeque::new(),
            stamp_ns,
        })
    }

    /// Notes that entries may be stamped `now` (or later: the clock never goes back).
    fn stamp(&mut self, now: u64) {
        let span = now - now % self.stamp_ns;
        match self.stamps.back() {
            Some(&last) if last == span => {}
            Some(&last) if last > span => {
                // The replay's times do not go back; kept right if they did.
                if let Err(at) = self.stamps.binary_search(&span) {
                    self.stamps.insert(at, span);
                }
            }
            _ => {
                if self.manager.entry_count() == 0 {
                    // Nothing cached: the items left in the queue are stale.
                    self.stamps.clear();
                }
                self.stamps.push_back(span);
            }
        }
    }

    /// Whether a size pass is due (a tick runs one then, whatever the stamps).
    fn over_trigger(&self) -> bool {
        self.manager.size_bytes() > self.manager.config().trigger_bytes()
    }

    /// Lets go of the locks held for reads, before anything but a read touches the manager.
    fn let_go(&self) {
        self.held.borrow_mut().let_go();
    }

    /// Topic `topic`'s cache, with no lock held for reads: anything may be done with it.
    fn cache(&mut self, topic: u32) -> &Arc<EntryCache> {
        self.let_go();
        while self.caches.len() <= topic as usize {
            let id = self.caches.len();
            self.caches
                .push(self.manager.get_cache(&format!("topic-{id}")));
        }
        &self.caches[topic as usize]
    }

    /// Topic `topic`'s cache and its lock, taken now unless held already. The other locks held
    /// stay as they are, unless the cache is new: it is made with none held, as anywhere else.
    fn held_cache(&mut self, topic: u32) -> (&Arc<EntryCache>, &mut HeldCache) {
        if self.caches.len() <= topic as usize {
            self.cache(topic);
        }
        let cache = &self.caches[topic as usize];
        (cache, self.held.get_mut().lock(topic, cache))
    }

    /// Before an insert's size pass, a tick, an invalidation or an added expected read:
    /// the hits released early give their expected reads back and are held as copies until the
    /// read ends, as `get` leaves them. Each is still cached: only reads and inserts without a
    /// size pass, which remove nothing, ran since it was taken.
    fn hold_released(&mut self) {
        self.let_go();
        for key in self.released_early.drain(..) {
            if let Some(copy) = self.caches[key.topic as usize].unrelease(key.position) {
                self.delivered.push(copy);
            }
        }
    }

    fn at(&self, now_ns: u64) {
        self.clock.advance_to(now_ns);
    }

    #[cfg(test)]
    fn manager(&mut self) -> &EntryCacheManager {
        self.let_go();
        &self.manager
    }
}

impl CacheStrategy for Pip430 {
    fn insert(&mut self, now: u64, key: EntryKey, size: u32, expected: i32) {
        self.at(now);
        self.stamp(now);
        let Ok((count, size)) = count_and_size(&Payload::empty(), expected, Some(size)) else {
            return;
        };
        let (cache, held) = self.held_cache(key.topic);
        // Under the lock the reads hold: only a size pass needs them let go (and looks at the
        // hits released early).
        let Ok(Some(total)) = held.insert_sized(key.position, count, size) else {
            return;
        };
        if cache.pass_due(total) {
            self.hold_released();
            self.caches[key.topic as usize].finish_insert(total);
        }
    }

    fn insert_read(&mut self, now: u64, key: EntryKey, size: u32, expected: i32, copies: u32) {
        self.hold_released();
        self.at(now);
        self.stamp(now);
        let copy = self.cache(key.topic).insert_for_reader(
            key.position,
            Payload::empty(),
            ReadCountHandler::new(expected),
            size,
        );
        // Bounded by the reads under way, which the trace's rows bound.
        for _ in 1..copies {
            self.delivered.push(copy.copy());
        }
        self.delivered.push(copy);
    }

    fn read(&mut self, now: u64, key: EntryKey) -> bool {
        self.at(now);
        let (_, held) = self.held_cache(key.topic);
        let hit = held.read_released(key.position);
        if hit {
            self.released_early.push(key);
        }
        hit
    }

    fn end_read(&mut self) {
        self.released_early.clear();
        for e in self.delivered.drain(..) {
            e.release_owned();
        }
    }

    fn keep_read(&mut self) -> u64 {
        // The hits released early become copies again: they are held past this instant.
        self.hold_released();
        if self.delivered.is_empty() {
            return 0;
        }
        self.last_kept = self.last_kept.wrapping_add(1).max(1);
        let copies = std::mem::take(&mut self.delivered);
        self.kept.insert(self.last_kept, copies);
        self.last_kept
    }

    fn release_kept(&mut self, kept: u64) {
        for e in self.kept.remove(&kept).into_iter().flatten() {
            e.release_owned();
        }
    }

    fn add_expected_read(&mut self, key: EntryKey) {
        self.hold_released();
        self.cache(key.topic).increment_expected_reads(key.position);
    }

    fn invalidate(&mut self, topic: u32, how: Invalidation) {
        self.hold_released();
        let cache = self.cache(topic);
        match how {
            Invalidation::Nothing => {}
            Invalidation::Before(p) => {
                cache.remove_range(Position::new(i64::MIN, i64::MIN), p, false);
            }
            Invalidation::All => {
                cache.clear();
            }
        }
    }

    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
        self.hold_released();
        self.cache(topic).remove_range(
            Position::new(ledger, i64::MIN),
            Position::new(ledger, i64::MAX),
            true,
        );
    }

    fn tick(&mut self, now: u64) {
        self.hold_released();
        self.at(now);
        let expire_before = now.checked_sub(self.manager.config().ttl_ns());
        let oldest = self.stamps.front().copied();
        // A requeued item is stamped `now`: one may be if an item may expire or a size pass runs.
        let may_requeue =
            expire_before.is_some_and(|e| oldest.is_some_and(|o| o < e)) || self.over_trigger();
        self.manager.run_eviction();
        if let Some(e) = expire_before {
            // The time pass took every item stamped before `e`: the queue is in stamp order.
            while self
                .stamps
                .front()
                .is_some_and(|&s| s.saturating_add(self.stamp_ns) <= e)
            {
                self.stamps.pop_front();
            }
        }
        if may_requeue {
            self.stamp(now);
        }
    }

    fn next_tick_change_ns(&self) -> u64 {
        if self.tick_is_idle() {
            return u64::MAX;
        }
        if self.over_trigger() {
            return 0;
        }
        // An item stamped `s` expires on the first tick after `s + ttl`.
        self.stamps.front().map_or(0, |&oldest| {
            oldest
                .saturating_add(self.manager.config().ttl_ns())
                .saturating_add(1)
        })
    }

    fn tick_is_idle(&self) -> bool {
        // An empty cache has nothing to expire or requeue; a tick would only drop stale queue
        // items, which no count sees.
        self.manager.entry_count() == 0
    }

    fn cached_bytes(&self) -> u64 {
        self.manager.size_bytes()
    }

    fn counters(&self) -> StrategyCounters {
        self.let_go();
        let s = self.manager.stats();
        StrategyCounters {
            evicted_entries: s.evicted,
            invalidated_entries: s.invalidated,
            requeues: s.requeued,
        }
    }

    fn report_removals(&mut self) -> bool {
        true
    }

    /// The entry cache's note stays on an entry unwatched: its removal finds no token.
    fn watch_removal(&mut self, key: EntryKey, token: u32) -> Option<u32> {
        if (key.topic as usize) >= self.caches.len() {
            return None;
        }
        self.watching = true;
        if !self.held_cache(key.topic).1.watch_removal(key.position) {
            return None;
        }
        Some(self.tokens.watch(key, token))
    }

    fn unwatch(&mut self, key: EntryKey) {
        self.tokens.unwatch(key);
    }

    /// The caches note the removal of the entries watched, however they go (the passes of ticks
    /// and inserts, invalidations, deleted ledgers), so they are asked here, each under its lock;
    /// none until something is watched.
    fn take_removed(&mut self, out: &mut Vec<u32>) {
        if !self.watching {
            return;
        }
        for topic in 0..self.caches.len() as u32 {
            let gone = self.held_cache(topic).1.take_watched_gone();
            let keys = gone
                .into_iter()
                .map(|position| EntryKey { topic, position });
            self.tokens.take(keys, out);
        }
    }

    fn contains(&self, key: EntryKey) -> bool {
        self.caches.get(key.topic as usize).is_some_and(|cache| {
            self.held
                .borrow_mut()
                .lock(key.topic, cache)
                .contains(key.position)
        })
    }
}

/// The caches' locks a [`Pip430`] holds for reads, by topic.
#[derive(Default)]
struct HeldLocks {
    by_topic: Vec<Option<HeldCache>>,
    /// The topics whose locks are held, to let go without a walk over every topic.
    taken: Vec<u32>,
}

impl HeldLocks {
    /// The lock of `topic`'s cache, taken now unless held already.
    fn lock(&mut self, topic: u32, cache: &Arc<EntryCache>) -> &mut HeldCache {
        let t = topic as usize;
        if self.by_topic.len() <= t {
            self.by_topic.resize_with(t + 1, || None);
        }
        self.by_topic[t].get_or_insert_with(|| {
            self.taken.push(topic);
            cache.hold()
        })
    }

    fn let_go(&mut self) {
        for topic in self.taken.drain(..) {
            self.by_topic[topic as usize] = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingValue;
    use crate::lab::replay::strategy::test_key as key;

    fn expected(s: &mut Pip430, entry: i64) -> Option<Option<i32>> {
        s.cache(0).expected_reads(key(entry).position)
    }

    #[test]
    fn a_hit_gives_its_expected_read_back_until_the_read_ends() {
        let mut s = Pip430::new(CacheConfig::default()).expect("valid config");
        s.insert(0, key(0), 100, 2);
        assert!(s.read(1, key(0)));
        assert!(!s.read(1, key(1)));
        // What an insert's size pass (or a tick, an invalidation) would see: the read still holds
        // its copy, so the entry expects both reads.
        s.insert_read(1, key(1), 100, 1, 1);
        assert_eq!(expected(&mut s, 0), Some(Some(2)));
        s.end_read();
        assert_eq!(expected(&mut s, 0), Some(Some(1)));
        assert_eq!(expected(&mut s, 1), Some(Some(0)));

        // A read of hits only consumes the read as the copy's release would.
        assert!(s.read(2, key(0)));
        s.end_read();
        assert_eq!(expected(&mut s, 0), Some(Some(0)));
        let stats = s.manager().stats();
        assert_eq!((stats.hits, stats.misses, stats.hit_bytes), (2, 1, 200));
    }

    /// A cache of `bytes` whose passes judge an entry by its expected reads alone (an access
    /// extends nothing, expected reads once), with a TTL of 1 ms: a pass mid-read tells a hit held
    /// as a copy from one consumed early.
    fn judging_by_expected_reads(bytes: i64) -> CacheConfig {
        let mut config = CacheConfig::default();
        for (key, value) in [
            ("cache_size_bytes", SettingValue::Int(bytes)),
            ("eviction_time_threshold_ms", SettingValue::Int(1)),
            ("extend_ttl_max_times", SettingValue::Int(1)),
            ("extend_ttl_of_recently_accessed", SettingValue::Bool(false)),
        ] {
            config.set(key, value).expect("valid");
        }
        config
    }

    /// Whatever looks at an entry's expected reads mid-read sees the hit's copy held. An insert
    /// only does when its size pass runs: this one's pass keeps entry 0 for its expected read
    /// (it would evict it with the read consumed) and evicts entry 5 instead.
    #[test]
    fn each_touch_of_the_cache_mid_read_holds_the_hits_as_copies() {
        type Touch = fn(&mut Pip430);
        let touches: [(&str, Touch); 5] = [
            ("insert and its size pass", |s| s.insert(1, key(5), 150, 0)),
            ("tick", |s| s.tick(2)),
            ("expected read", |s| s.add_expected_read(key(5))),
            ("invalidate", |s| s.invalidate(0, Invalidation::Nothing)),
            ("ledger deleted", |s| s.on_ledger_deleted(0, 7)),
        ];
        for (what, touch) in touches {
            let mut s = Pip430::new(judging_by_expected_reads(200)).expect("valid config");
            s.insert(0, key(0), 100, 1);
            assert!(s.read(1, key(0)));
            touch(&mut s);
            assert_eq!(expected(&mut s, 0), Some(Some(1)), "{what}");
            s.end_read();
            assert_eq!(expected(&mut s, 0), Some(Some(0)), "{what}");
        }
        let mut s = Pip430::new(judging_by_expected_reads(200)).expect("valid config");
        s.insert(0, key(0), 100, 1);
        assert!(s.read(1, key(0)));
        s.insert(1, key(5), 150, 0);
        assert_eq!(expected(&mut s, 5), None, "the pass evicted entry 5");
    }

    /// What a strategy does, one step of a random sequence: `(op, topic, entry, size, expected)`.
    type Step = (u8, u32, i64, u32, i32);

    /// How [`answers`] drives a strategy.
    #[derive(Clone, Copy, Debug)]
    enum Drive {
        /// As the replay does.
        AsIs,
        /// Letting go of the held locks after every step.
        LettingGo,
        /// Turning the hits consumed early back into copies before every insert (where it was
        /// done before inserts without a size pass skipped it).
        HoldingHitsBeforeInserts,
    }

    /// Runs `steps` on `s`; returns what every step answered, then the statistics.
    fn answers(s: &mut Pip430, steps: &[Step], drive: Drive) -> Vec<String> {
        let mut out = Vec::new();
        let mut now = 0;
        for &(op, topic, entry, size, expected) in steps {
            now += 300_000;
            let key = EntryKey {
                topic,
                position: Position::new(1 + entry / 8, entry),
            };
            let answer = match op {
                0 | 1 => {
                    if let Drive::HoldingHitsBeforeInserts = drive {
                        s.hold_released();
                    }
                    s.insert(now, key, size, expected);
                    String::new()
                }
                2 => {
                    s.insert_read(now, key, size, expected, 1);
                    String::new()
                }
                3..=5 => format!("read {}", s.read(now, key)),
                6 => {
                    s.end_read();
                    String::new()
                }
                7 => format!("contains {}", s.contains(key)),
                8 => {
                    s.tick(now);
                    format!("cached {}", s.cached_bytes())
                }
                9 => {
                    s.add_expected_read(key);
                    String::new()
                }
                10 => format!("{:?}", s.counters()),
                11 => {
                    s.invalidate(topic, Invalidation::Before(key.position));
                    String::new()
                }
                _ => {
                    s.on_ledger_deleted(topic, key.position.ledger_id);
                    String::new()
                }
            };
            out.push(answer);
            if let Drive::LettingGo = drive {
                s.let_go();
            }
        }
        s.end_read();
        let stats = s.manager().stats();
        out.push(format!("{stats:?}"));
        out
    }

    /// Runs `f` on a thread of its own; fails if it has not returned within seconds (a call that
    /// waits for a lock the strategy holds itself never returns).
    fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("returns: no call waits for a lock the strategy holds")
    }

    proptest::proptest! {
        // Few shrinking steps: a case that hangs costs the whole deadline each.
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            max_shrink_iters: 32,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Keeping the caches' locks from one call to the next changes no answer (hits, contents,
        /// evictions, statistics) against a twin that lets go after every step, nor does turning
        /// the hits consumed early back into copies only before a size pass, against a twin that
        /// does so before every insert; and no order of calls waits for a lock the strategy
        /// holds itself.
        #[test]
        fn holding_locks_for_reads_changes_nothing(
            steps in proptest::collection::vec((0u8..13, 0u32..3, 0i64..24, 1u32..400, 0i32..3), 1..120),
        ) {
            let [as_is, letting_go, holding_hits] = within_deadline(move || {
                [Drive::AsIs, Drive::LettingGo, Drive::HoldingHitsBeforeInserts].map(|drive| {
                    answers(&mut Pip430::new(judging_by_expected_reads(600)).expect("valid"), &steps, drive)
                })
            });
            proptest::prop_assert_eq!(&as_is, &letting_go);
            proptest::prop_assert_eq!(&as_is, &holding_hits);
        }
    }

    /// A strategy dropped mid-read, holding its caches' locks, and a cache's held lock outliving
    /// its manager and every other handle of the cache, go without waiting.
    #[test]
    fn held_locks_go_with_their_holder() {
        within_deadline(|| {
            let mut s = Pip430::new(CacheConfig::default()).expect("valid config");
            s.insert(0, key(0), 100, 1);
            assert!(s.read(1, key(0)));
            assert!(s.contains(key(0)));
            drop(s);

            let manager = EntryCacheManager::new(
                CacheConfig::default(),
                Arc::new(ManualClock::new(0)),
                false,
            )
            .expect("valid config");
            let held = manager.get_cache("a").hold();
            drop(manager);
            drop(held);
        });
    }
}
