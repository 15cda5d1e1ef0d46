//! Memory truth (PIP-430's note on shared buffers): with `copy_entries` off, a cached entry is a
//! slice of the buffer it arrived in, and that buffer stays allocated while any entry sliced from
//! it is cached. Published entries arrive through Netty's adaptive receive buffers (the broker's
//! `brokerAdaptiveRecvByteBufAllocator{Minimum,Initial,Maximum}Size`), entries read back from
//! BookKeeper in buffers of up to 64 KiB. This tracks those buffers and, sampled each second of
//! trace time, how many bytes the cached entries really retain.

use super::strategy::CacheStrategy;
use crate::cache::position::Position;
use crate::cache::prefetch::prefetch;

mod recv;
mod runs;

use recv::{record, size_table, AdaptiveRecv};
use runs::EntryRuns;

const NONE: usize = usize::MAX;

/// How many buffers ahead of its check a sample asks the design to start looking a front up
/// ([`CacheStrategy::prefetch_lookup`]): enough misses in flight to hide most of the wait.
const LOOKUP_AHEAD: usize = 8;

/// How many removals ahead a sample loads the buffer whose front left: that loop does little
/// else than wait for those loads, so it needs more of them in flight than the check's.
const REMOVED_AHEAD: usize = 32;

/// Hints the CPU to load all of `buffer` (two or three cache lines): a sample reads its state,
/// then its entries.
fn prefetch_buffer(buffer: &Buffer) {
    let start: *const u8 = std::ptr::from_ref(buffer).cast();
    let size = std::mem::size_of::<Buffer>();
    for offset in (0..size).step_by(64).chain([size - 1]) {
        prefetch(start.wrapping_add(offset));
    }
}

/// Asks `cache` to start looking up the front of `buffer` if a sample will check it (not live).
fn start_lookup<S: CacheStrategy + ?Sized>(buffer: &Buffer, cache: &S) {
    if let (false, false, Some(key)) = (buffer.live, buffer.watched_new, buffer.entries.front()) {
        cache.prefetch_lookup(key);
    }
}

struct Buffer {
    capacity: u64,
    entries: EntryRuns,
    /// At the last sample its front entry was cached (it is counted in `retained`).
    live: bool,
    /// Entries arrived, or its front entry left the cache, since the last sample: check it.
    dirty: bool,
    /// While following: a new buffer whose first entry the design cached and watches by its
    /// token since its insertion ([`MemoryModel::front_watched`]), and that has not left (its
    /// removal clears this): its check needs no lookup.
    watched_new: bool,
    /// While following: the next live buffer with the same front entry (see
    /// `MemoryModel::following`).
    next_same_front: usize,
    /// The sample that last saw it open (a topic's burst still fills it).
    open_at: u64,
}

/// A topic's producer connection: its allocator state and the burst being read.
struct TopicRecv {
    recv: AdaptiveRecv,
    burst_ms: i64,
    burst_bytes: u64,
    /// The buffer the burst fills and the room left in it.
    open: Option<(usize, u64)>,
}

pub struct MemoryModel {
    table: Vec<u32>,
    start: AdaptiveRecv,
    topics: Vec<TopicRecv>,
    storage_buffer: u64,
    /// Buffers by slot; released slots are reused (`free_slots`), so a topic's open buffer keeps
    /// its slot.
    buffers: Vec<Buffer>,
    free_slots: Vec<usize>,
    /// Slots to check at the next sample (flagged `dirty`).
    dirty: Vec<usize>,
    /// Buffers that back no cached entry but were still open at the last sample.
    idle: Vec<usize>,
    /// The design notes the removal of the entries the model watches (see
    /// [`CacheStrategy::report_removals`]), so the model can follow it.
    can_follow: bool,
    /// Following: the design watches each live buffer's front entry, the removal of which it
    /// reports by the buffer's slot (its token), so that a sample checks only the buffers whose
    /// front left and those that got entries. Live buffers with one front are chained through
    /// `next_same_front` from the one whose token the design keeps. Otherwise a sample checks
    /// every live buffer, and nothing is watched. Which one costs less depends on how long
    /// buffers live ([`MemoryModel::choose_how_to_sample`]).
    following: bool,
    /// The tokens of the fronts that left, as [`CacheStrategy::take_removed`] gives them.
    removed: Vec<u32>,
    /// Buffers live at the last sample.
    live: usize,
    /// Buffers that got entries since the last sample.
    grown: usize,
    retained: u64,
    samples: u64,
    pub peak_retained: u64,
    /// Tests: start and stop following at random (this generator's state) instead of by cost.
    #[cfg(test)]
    switching_at_random: Option<u64>,
}

impl MemoryModel {
    pub fn new(min: u32, initial: u32, max: u32, storage_buffer: u32) -> Self {
        let table = size_table();
        let at = |size: u32| table.partition_point(|&s| s < size).min(table.len() - 1);
        let start = AdaptiveRecv {
            index: at(initial),
            min_index: at(min),
            max_index: at(max),
            decrease_now: false,
        };
        MemoryModel {
            table,
            start,
            topics: Vec::new(),
            storage_buffer: storage_buffer as u64,
            buffers: Vec::new(),
            free_slots: Vec::new(),
            dirty: Vec::new(),
            idle: Vec::new(),
            can_follow: false,
            following: false,
            removed: Vec::new(),
            live: 0,
            grown: 0,
            retained: 0,
            samples: 0,
            peak_retained: 0,
            #[cfg(test)]
            switching_at_random: None,
        }
    }

    /// Samples may check only the buffers that changed, learning from `cache` what left it, when
    /// that costs less than checking every live buffer; for a design that cannot say, every
    /// buffer is checked. The result is the same either way.
    pub fn following<S: CacheStrategy + ?Sized>(mut self, cache: &mut S) -> Self {
        self.can_follow = cache.report_removals();
        self
    }

    fn new_buffer(&mut self, capacity: u64) -> usize {
        let buffer = Buffer {
            capacity,
            entries: EntryRuns::default(),
            live: false,
            dirty: false,
            watched_new: false,
            next_same_front: NONE,
            open_at: 0,
        };
        match self.free_slots.pop() {
            Some(b) => {
                self.buffers[b] = buffer;
                // The next buffer takes the next free slot, released at a sample since and cold by
                // then: its load starts now, a publish or more before it is written.
                if let Some(&next) = self.free_slots.last() {
                    prefetch_buffer(&self.buffers[next]);
                }
                b
            }
            None => {
                self.buffers.push(buffer);
                self.buffers.len() - 1
            }
        }
    }

    fn push(&mut self, b: usize, topic: u32, ledger: i64, entry: i64) {
        let buffer = &mut self.buffers[b];
        buffer.entries.push(topic, ledger, entry);
        if !buffer.dirty {
            buffer.dirty = true;
            self.dirty.push(b);
            self.grown += 1;
        }
    }

    /// A published entry arrives on its topic's producer connection at `ts_us`. Entries published
    /// in the same millisecond arrive in one socket read; the read fills buffers of the allocator's
    /// current guess, and an entry that does not fit the rest of a buffer is copied into one of its
    /// own by the frame decoder.
    ///
    /// Returns the token of the buffer the entry starts, while following: the design may watch
    /// the entry from its insertion ([`CacheStrategy::insert_watched`], then
    /// [`MemoryModel::front_watched`]).
    pub fn on_publish(
        &mut self,
        ts_us: i64,
        topic: u32,
        position: Position,
        size: u32,
    ) -> Option<u32> {
        let t = topic as usize;
        while self.topics.len() <= t {
            self.topics.push(TopicRecv {
                recv: self.start.clone(),
                burst_ms: i64::MIN,
                burst_bytes: 0,
                open: None,
            });
        }
        let ms = ts_us.div_euclid(1000);
        let size = size as u64;
        // The topic is updated where it is: a copy taken out and put back would be stored field
        // by field and loaded back whole, which waits for the stores.
        let table = &self.table;
        let conn = &mut self.topics[t];
        if conn.burst_ms != ms {
            if conn.burst_bytes > 0 {
                record(table, &mut conn.recv, conn.burst_bytes);
            }
            conn.burst_ms = ms;
            conn.burst_bytes = 0;
            conn.open = None;
        }
        conn.burst_bytes += size;
        let mut starts = false;
        let buffer = match conn.open {
            Some((b, room)) if room >= size => {
                conn.open = Some((b, room - size));
                b
            }
            previous => {
                starts = true;
                let guess = table[conn.recv.index] as u64;
                if previous.is_some() {
                    record(table, &mut conn.recv, guess); // the last read filled its buffer
                }
                if size > guess {
                    conn.open = None;
                    self.new_buffer(size)
                } else {
                    let b = self.new_buffer(guess);
                    self.topics[t].open = Some((b, guess - size));
                    b
                }
            }
        };
        self.push(buffer, topic, position.ledger_id, position.entry_id);
        (starts && self.following).then(|| token(buffer))
    }

    /// The design cached the first entry of new buffer `token` (as [`MemoryModel::on_publish`]
    /// returned it) and watches it: until its removal is reported, the buffer is live.
    pub fn front_watched(&mut self, token: u32) {
        self.buffers[token as usize].watched_new = true;
    }

    /// The broker closed the topic: its producers' connections close, so the burst being read
    /// ends and the buffer it fills is filled no more; the next connection's allocator starts
    /// from its initial guess. (Its buffers are released as their entries leave the cache, which
    /// the unload empties of the topic: the next sample finds them.)
    pub fn on_unload(&mut self, topic: u32) {
        if let Some(conn) = self.topics.get_mut(topic as usize) {
            *conn = TopicRecv {
                recv: self.start.clone(),
                burst_ms: i64::MIN,
                burst_bytes: 0,
                open: None,
            };
        }
    }

    /// Entries of one ledger (ids and sizes) one storage read brought back, in order.
    pub fn on_storage_read(&mut self, topic: u32, ledger: i64, entries: &[(i64, u32)]) {
        let mut current: Option<(usize, u64)> = None;
        for &(entry, size) in entries {
            let size = size as u64;
            let b = match current {
                Some((b, room)) if room >= size => {
                    current = Some((b, room - size));
                    b
                }
                _ => {
                    let cap = self.storage_buffer.max(size);
                    let b = self.new_buffer(cap);
                    current = Some((b, cap - size));
                    b
                }
            };
            self.push(b, topic, ledger, entry);
        }
    }

    /// Bytes held by buffers that still back a cached entry; forgets the others.
    ///
    /// A buffer live at the last sample stays live while its front entry (the first one cached
    /// then) stays cached, so only the buffers that got entries or lost their front are checked;
    /// the check drops a buffer's leading entries that are no longer cached, as a check of every
    /// buffer would.
    pub fn sample<S: CacheStrategy + ?Sized>(&mut self, cache: &mut S) -> u64 {
        self.samples += 1;
        let now = self.samples;
        for t in &self.topics {
            if let Some((b, _)) = t.open {
                self.buffers[b].open_at = now;
            }
        }
        if self.can_follow {
            // Taken while not following too: a design that notes removals by key notes those of
            // entries watched before, and forgets them here.
            cache.take_removed(&mut self.removed);
        }
        if self.following {
            for i in 0..self.removed.len() {
                // A buffer whose front left was checked a second or more ago: it misses the CPU's
                // caches, and is loaded several removals ahead.
                if let Some(&ahead) = self.removed.get(i + REMOVED_AHEAD) {
                    prefetch_buffer(&self.buffers[ahead as usize]);
                }
                let mut b = self.removed[i] as usize;
                if !self.buffers[b].live {
                    // A new buffer's first entry, watched from its insertion, left before the
                    // buffer's first check (it is dirty, still to check): it is checked by lookup.
                    debug_assert!(self.buffers[b].watched_new && self.buffers[b].dirty);
                    self.buffers[b].watched_new = false;
                    continue;
                }
                while b != NONE {
                    let buffer = &mut self.buffers[b];
                    debug_assert!(buffer.live, "a token names a live buffer, once");
                    buffer.live = false;
                    self.live -= 1;
                    self.retained -= buffer.capacity;
                    if !buffer.dirty {
                        buffer.dirty = true;
                        self.dirty.push(b);
                    }
                    b = std::mem::replace(&mut buffer.next_same_front, NONE);
                }
            }
            self.removed.clear();
        } else {
            self.removed.clear();
            self.live = 0;
            for (b, buffer) in self.buffers.iter_mut().enumerate() {
                if buffer.live {
                    buffer.live = false;
                    self.retained -= buffer.capacity;
                    if !buffer.dirty {
                        buffer.dirty = true;
                        self.dirty.push(b);
                    }
                }
            }
        }
        let mut idle = Vec::with_capacity(self.idle.len());
        for b in std::mem::take(&mut self.idle) {
            match &self.buffers[b] {
                buffer if buffer.dirty => {} // checked below
                buffer if buffer.open_at == now => idle.push(b),
                _ => self.release(b),
            }
        }
        let dirty = std::mem::take(&mut self.dirty);
        // A check's lookup misses the CPU's caches nearly every time, and so may the buffer that
        // says what to look up: the buffer is loaded two strides before its check, and the design
        // asked to start looking its front up one stride before, so that those misses overlap.
        // Only the buffers the loop checks (not live) are asked about.
        for &b in dirty.iter().take(2 * LOOKUP_AHEAD) {
            prefetch_buffer(&self.buffers[b]);
        }
        for &b in dirty.iter().take(LOOKUP_AHEAD) {
            start_lookup(&self.buffers[b], cache);
        }
        for (i, &b) in dirty.iter().enumerate() {
            if let Some(&ahead) = dirty.get(i + 2 * LOOKUP_AHEAD) {
                prefetch_buffer(&self.buffers[ahead]);
            }
            if let Some(&ahead) = dirty.get(i + LOOKUP_AHEAD) {
                start_lookup(&self.buffers[ahead], cache);
            }
            let buffer = &mut self.buffers[b];
            buffer.dirty = false;
            if buffer.live {
                continue; // only got entries: its front is still cached
            }
            if std::mem::take(&mut buffer.watched_new) {
                // New, and its first entry, watched by its token since its insertion, is still
                // cached: live, the first of its chain, as a check's watch would have made it.
                buffer.live = true;
                self.live += 1;
                self.retained += buffer.capacity;
                continue;
            }
            // While following, the check watches the entry it finds cached, in the same lookup:
            // the one its front is then.
            let mut head = None;
            let cached = if self.following {
                let token = token(b);
                buffer.entries.any_cached(|key| {
                    head = cache.watch_removal(key, token);
                    head.is_some()
                })
            } else {
                buffer.entries.any_cached(|key| cache.contains(key))
            };
            if cached {
                buffer.live = true;
                self.live += 1;
                self.retained += buffer.capacity;
                if let Some(head) = head {
                    self.chain(b, head as usize);
                }
            } else if buffer.open_at == now {
                idle.push(b);
            } else {
                self.release(b);
            }
        }
        self.idle = idle;
        self.peak_retained = self.peak_retained.max(self.retained);
        self.choose_how_to_sample(cache);
        self.retained
    }

    /// Whether the next samples follow the design's removals or check every live buffer.
    ///
    /// Checking every live buffer asks the design about each one, each sample. Following costs
    /// about twice that per buffer that gets entries (a check that watches the front it finds,
    /// its front's removal noted, the check again), whatever its life. So a design whose entries live a second
    /// or two (the default TTL) is cheaper to check, and one with a large cache whose entries live
    /// long (a long TTL, LRU) is cheaper to follow: about one and a half times faster to replay
    /// with a 2 GiB cache whose entries live 30 s (benches/replay_throughput.py). Since a check
    /// watches in its lookup and a design keeps the token, following costs less than that: pip430
    /// with its defaults over the Key_Shared trace (about 5 live buffers per buffer that got
    /// entries) follows from 4 (the model cost 1.47x the replay without it) where 8 kept it
    /// checking (1.70x); 3 or 4 with a bar of 1 or 2 to stop measured alike. The switch costs a
    /// pass over the buffers, and the two thresholds are apart so that it is rare.
    fn choose_how_to_sample<S: CacheStrategy + ?Sized>(&mut self, cache: &mut S) {
        /// Follow once the live buffers are this many times those that got entries...
        const FOLLOW_ABOVE: usize = 4;
        /// ... and at least this many.
        const FOLLOW_FROM: usize = 256;
        /// Check every buffer again once they are fewer than this many times.
        const CHECK_BELOW: usize = 2;
        let grown = std::mem::take(&mut self.grown);
        let follow = if self.following {
            self.live >= CHECK_BELOW.saturating_mul(grown)
        } else {
            self.can_follow
                && self.live >= FOLLOW_FROM
                && self.live > FOLLOW_ABOVE.saturating_mul(grown)
        };
        #[cfg(test)]
        let follow = self.switching_at_random.as_mut().map_or(follow, |state| {
            crate::lab::replay::strategy::xorshift(state) % 3 != 0 && self.can_follow
        });
        if follow == self.following {
            return;
        }
        self.following = follow;
        // Every live buffer was just checked: its front is cached.
        for b in 0..self.buffers.len() {
            let buffer = &mut self.buffers[b];
            if !buffer.live {
                continue;
            }
            let front = buffer.entries.front().expect("a cached entry");
            if follow {
                let head = cache.watch_removal(front, token(b));
                self.chain(b, head.expect("a live buffer's front is cached") as usize);
            } else {
                cache.unwatch(front);
                buffer.next_same_front = NONE;
            }
        }
    }

    /// Whether the samples follow the design's removals now.
    #[cfg(test)]
    fn follows(&self) -> bool {
        self.following
    }

    /// Chains live buffer `b`, whose front the design now watches by the token of buffer `head`
    /// (`b` itself, or the first live buffer found with that front), behind `head`.
    fn chain(&mut self, b: usize, head: usize) {
        if head != b {
            let next = std::mem::replace(&mut self.buffers[head].next_same_front, b);
            self.buffers[b].next_same_front = next;
        }
    }

    fn release(&mut self, b: usize) {
        let buffer = &mut self.buffers[b];
        buffer.entries = EntryRuns::default();
        self.free_slots.push(b);
    }
}

/// Buffer `b`'s token for the design (see [`CacheStrategy::watch_removal`]).
fn token(b: usize) -> u32 {
    u32::try_from(b).expect("fewer than 2^32 buffers (100 bytes each)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::read_flow::Invalidation;
    use crate::config::{CacheConfig, SettingValue};
    use crate::lab::replay::strategy::{EntryKey, Legacy, Lru, Pip430, Segmented};
    use std::collections::HashSet;

    proptest::proptest! {
        /// A buffer's entries kept as runs answer as the list of its entries did: pushed in any
        /// order (consecutive or not, across topics and ledgers, repeated), each check drops the
        /// uncached entries in front, says whether one is left (cached) and which is first.
        #[test]
        fn runs_of_entries_answer_as_the_list_of_entries(
            pushes in proptest::collection::vec((0u32..2, 0i64..3, 0i64..4), 1..60),
            checks in proptest::collection::vec(
                proptest::collection::vec((0u32..2, 0i64..3, 0i64..128), 0..60),
                1..6,
            ),
        ) {
            let key = |topic: u32, ledger: i64, entry: i64| EntryKey {
                topic,
                position: Position::new(ledger, entry),
            };
            let (mut runs, mut list) = (EntryRuns::default(), Vec::new());
            // Mostly the next entry of the last push, sometimes a jump, another ledger or topic.
            let mut at = (0u32, 0i64, 0i64);
            for (topic, ledger, step) in pushes {
                at = match step {
                    0 => (topic, ledger, at.2 + 1),
                    1 => (at.0, at.1, at.2 + 2),
                    2 => (at.0, at.1, at.2),
                    _ => (at.0, at.1, at.2 + 1),
                };
                runs.push(at.0, at.1, at.2);
                list.push(key(at.0, at.1, at.2));
            }
            for cached in checks {
                let cached: HashSet<EntryKey> =
                    cached.into_iter().map(|(t, l, e)| key(t, l, e)).collect();
                let gone = list.iter().take_while(|k| !cached.contains(k)).count();
                list.drain(..gone);
                let any = runs.any_cached(|k| cached.contains(&k));
                proptest::prop_assert_eq!(any, !list.is_empty());
                proptest::prop_assert_eq!(runs.front(), list.first().copied());
            }
        }
    }

    /// The samples that check only changed buffers give what checking every buffer gives, second
    /// by second, with evictions (by size, and by time on the eviction task), entries cached
    /// again from storage, invalidations, and ledgers deleted: for each design that reports
    /// removals. Returns how often the model began and stopped following the design.
    fn samples_as_a_full_check_does(what: &str, cache: &mut dyn CacheStrategy) -> (u32, u32) {
        let mut switches = (0, 0);
        let mut following = MemoryModel::new(64, 2048, 65536, 4096).following(cache);
        let mut full = MemoryModel::new(64, 2048, 65536, 4096);
        let mut seed = 7u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        const LEDGER: i64 = 1;
        let key = |topic: u32, e: i64| EntryKey {
            topic,
            position: Position::new(LEDGER, e),
        };
        let mut next = [0i64; 3];
        for second in 0..200i64 {
            for ms in 0..50i64 {
                let ts = second * 1_000_000 + ms * 1_000;
                let now = ts as u64 * 1_000;
                for _ in 0..rand(4) {
                    let t = rand(3) as u32;
                    let size = 100 + rand(900) as u32;
                    let k = key(t, next[t as usize]);
                    next[t as usize] += 1;
                    let watch = following.on_publish(ts, t, k.position, size);
                    full.on_publish(ts, t, k.position, size);
                    insert(&mut following, cache, now, k, size, 1, watch);
                }
                if rand(5) == 0 {
                    // A reader re-reads a few entries from behind: some come from storage.
                    let t = rand(3) as u32;
                    let from = rand(next[t as usize].max(1) as u64) as i64;
                    let mut missed = Vec::new();
                    for e in from..(from + 5).min(next[t as usize]) {
                        if !cache.read(now, key(t, e)) {
                            missed.push((e, 500));
                        }
                    }
                    following.on_storage_read(t, LEDGER, &missed);
                    full.on_storage_read(t, LEDGER, &missed);
                    for &(e, size) in &missed {
                        cache.insert_read(now, key(t, e), size, 1, 1);
                    }
                    cache.end_read();
                }
                if ms % 10 == 0 {
                    cache.tick(now);
                }
                match rand(400) {
                    0..10 => {
                        let t = rand(3) as u32;
                        let before = rand(next[t as usize].max(1) as u64) as i64;
                        cache.invalidate(t, Invalidation::Before(key(t, before).position));
                    }
                    10 => cache.invalidate(rand(3) as u32, Invalidation::All),
                    _ => {}
                }
            }
            if second == 120 {
                cache.on_ledger_deleted(1, LEDGER);
            }
            if second == 150 {
                // Everything goes: a model that followed has few live buffers left.
                for t in 0..3 {
                    cache.on_ledger_deleted(t, LEDGER);
                }
            }
            let followed = following.follows();
            assert_eq!(
                following.sample(cache),
                full.sample(cache),
                "{what}, second {second}"
            );
            match (followed, following.follows()) {
                (false, true) => switches.0 += 1,
                (true, false) => switches.1 += 1,
                _ => {}
            }
        }
        assert_eq!(following.peak_retained, full.peak_retained, "{what}");
        assert!(full.peak_retained > 0, "{what}");
        switches
    }

    /// Caches a published entry as the replay does: watched from its insertion when it starts a
    /// buffer `model` follows (`watch`, as [`MemoryModel::on_publish`] returned it).
    fn insert(
        model: &mut MemoryModel,
        cache: &mut dyn CacheStrategy,
        now: u64,
        key: EntryKey,
        size: u32,
        expected: i32,
        watch: Option<u32>,
    ) {
        match watch {
            Some(token) => {
                if cache.insert_watched(now, key, size, expected, token) {
                    model.front_watched(token);
                }
            }
            None => cache.insert(now, key, size, expected),
        }
    }

    /// A design that counts the memory model's questions.
    struct Counting<'c> {
        inner: &'c mut dyn CacheStrategy,
        contains: std::cell::Cell<u64>,
    }

    impl CacheStrategy for Counting<'_> {
        fn insert(&mut self, now: u64, key: EntryKey, size: u32, expected: i32) {
            self.inner.insert(now, key, size, expected)
        }
        fn read(&mut self, now: u64, key: EntryKey) -> bool {
            self.inner.read(now, key)
        }
        fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
            self.inner.on_ledger_deleted(topic, ledger)
        }
        fn tick(&mut self, now: u64) {
            self.inner.tick(now)
        }
        fn cached_bytes(&self) -> u64 {
            self.inner.cached_bytes()
        }
        fn counters(&self) -> crate::lab::replay::strategy::StrategyCounters {
            self.inner.counters()
        }
        fn contains(&self, key: EntryKey) -> bool {
            self.contains.set(self.contains.get() + 1);
            self.inner.contains(key)
        }
        fn report_removals(&mut self) -> bool {
            self.inner.report_removals()
        }
        /// A question too: whether `key` is cached.
        fn watch_removal(&mut self, key: EntryKey, token: u32) -> Option<u32> {
            self.contains.set(self.contains.get() + 1);
            self.inner.watch_removal(key, token)
        }
        fn unwatch(&mut self, key: EntryKey) {
            self.inner.unwatch(key)
        }
        fn take_removed(&mut self, out: &mut Vec<u32>) {
            self.inner.take_removed(out)
        }
    }

    /// Once it follows a design that reports removals (after a sample in which many buffers
    /// lived and few got entries), a sample asks about the buffers that changed since the last
    /// one, not about every buffer that still backs a cached entry: over a cache of many buffers
    /// that nothing touches, a second costs nothing, and one that removes a few entries costs a
    /// few questions.
    fn samples_ask_about_what_changed(what: &str, cache: &mut dyn CacheStrategy) {
        const BUFFERS: i64 = 2_000;
        let mut cache = Counting {
            inner: cache,
            contains: Default::default(),
        };
        let mut model = MemoryModel::new(64, 2048, 65536, 4096).following(&mut cache);
        for e in 0..BUFFERS {
            // One entry a millisecond, each in a buffer of its own.
            let (ts, p) = (e * 1_000, Position::new(1, e));
            model.on_publish(ts, 0, p, 100);
            cache.insert(
                ts as u64 * 1_000,
                EntryKey {
                    topic: 0,
                    position: p,
                },
                100,
                1,
            );
        }
        assert!(model.sample(&mut cache) > 0, "{what}");
        let asked = cache.contains.replace(0);
        assert!(
            asked >= BUFFERS as u64,
            "{what}: the new buffers are checked ({asked})"
        );
        assert!(!model.follows(), "{what}: every live buffer is new");
        model.sample(&mut cache);
        assert!(model.follows(), "{what}: many live buffers, none new");
        cache.contains.set(0);
        for _ in 0..3 {
            model.sample(&mut cache);
            assert_eq!(cache.contains.replace(0), 0, "{what}: nothing changed");
        }
        cache
            .inner
            .invalidate(0, Invalidation::Before(Position::new(1, 10)));
        model.sample(&mut cache);
        let asked = cache.contains.replace(0);
        assert!(asked <= 20, "{what}: 10 entries left, {asked} questions");
    }

    /// Every design the model follows, with small caches, whose buffers live a second or less,
    /// and with large ones that hold every entry for minutes (true: the model follows those).
    fn designs() -> [(&'static str, Box<dyn CacheStrategy>, bool); 12] {
        const LARGE: i64 = 16 << 20;
        let config = |strategy: &str, bytes: i64, ttl_ms: i64| {
            let mut config = CacheConfig::default();
            config
                .set_all([
                    ("cache_size_bytes", SettingValue::Int(bytes)),
                    ("eviction_time_threshold_ms", SettingValue::Int(ttl_ms)),
                    ("strategy", SettingValue::Str(strategy.into())),
                ])
                .expect("valid");
            config
        };
        let pip430 = |strategy: &str, bytes: i64, ttl_ms: i64| {
            Box::new(Pip430::new(config(strategy, bytes, ttl_ms)).expect("valid config"))
        };
        let legacy =
            |bytes: i64, ttl_ms: i64| Box::new(Legacy::new(&config("legacy", bytes, ttl_ms)));
        [
            ("lru", Box::new(Lru::new(40_000)), false),
            ("pip430", pip430("pip430", 40_000, 1_000), false),
            ("pip430, short TTL", pip430("pip430", 40_000, 20), false),
            ("pip430-fifo", pip430("pip430-fifo", 40_000, 300), false),
            ("legacy", legacy(40_000, 300), false),
            ("segmented", Box::new(Segmented::new(40_000, 4)), false),
            ("one segment", Box::new(Segmented::new(40_000, 1)), false),
            ("large lru", Box::new(Lru::new(LARGE as u64)), true),
            ("large pip430", pip430("pip430", LARGE, 1_000_000), true),
            (
                "large pip430-fifo",
                pip430("pip430-fifo", LARGE, 1_000_000),
                true,
            ),
            ("large legacy", legacy(LARGE, 1_000_000), true),
            (
                "large segmented",
                Box::new(Segmented::new(LARGE as u64, 4)),
                true,
            ),
        ]
    }

    #[test]
    fn following_the_cache_samples_what_a_full_check_does() {
        let designs = designs();
        for (what, mut cache, large) in designs {
            assert!(cache.report_removals(), "{what}");
            let (began, stopped) = samples_as_a_full_check_does(what, cache.as_mut());
            if large {
                assert!(began >= 1 && stopped >= 1, "{what}: {began} {stopped}");
            }
        }
    }

    #[test]
    fn a_sample_following_the_cache_asks_about_what_changed_only() {
        let mut config = CacheConfig::default();
        config
            .set("eviction_time_threshold_ms", SettingValue::Int(1_000_000))
            .expect("valid");
        let designs: [(&str, Box<dyn CacheStrategy>); 4] = [
            ("lru", Box::new(Lru::new(1 << 30))),
            (
                "pip430",
                Box::new(Pip430::new(config.clone()).expect("valid config")),
            ),
            ("legacy", Box::new(Legacy::new(&config))),
            ("segmented", Box::new(Segmented::new(1 << 30, 4))),
        ];
        for (what, mut cache) in designs {
            samples_ask_about_what_changed(what, cache.as_mut());
        }
    }

    impl MemoryModel {
        /// The model's own bookkeeping, right after a sample: `live` counts the live buffers;
        /// while following, each live buffer is in exactly one chain, of buffers with one front,
        /// whose first buffer's token `cache` keeps for that front; otherwise no front is watched.
        fn check_bookkeeping(&self, cache: &mut dyn CacheStrategy) {
            // A token no buffer has: asked with it, the design tells the token it keeps.
            const ASKING: u32 = u32::MAX - 1;
            let live: Vec<usize> = (0..self.buffers.len())
                .filter(|&b| self.buffers[b].live)
                .collect();
            assert_eq!(live.len(), self.live, "live buffers counted");
            let front = |b: usize| self.buffers[b].entries.front().expect("a live buffer");
            if !self.following {
                for &b in &live {
                    assert_eq!(self.buffers[b].next_same_front, NONE);
                    assert_eq!(cache.watch_removal(front(b), ASKING), Some(ASKING));
                    cache.unwatch(front(b));
                }
                return;
            }
            let mut behind = vec![false; self.buffers.len()];
            for &b in &live {
                let next = self.buffers[b].next_same_front;
                if next != NONE {
                    behind[next] = true;
                }
            }
            let mut chained = vec![0u32; self.buffers.len()];
            for &first in live.iter().filter(|&&b| !behind[b]) {
                let token = cache.watch_removal(front(first), ASKING);
                assert_eq!(
                    token,
                    Some(first as u32),
                    "the design keeps the first's token"
                );
                let mut b = first;
                while b != NONE {
                    chained[b] += 1;
                    assert!(self.buffers[b].live, "a buffer in a chain is live");
                    assert_eq!(front(b), front(first));
                    b = self.buffers[b].next_same_front;
                }
            }
            for &b in &live {
                assert_eq!(chained[b], 1, "live buffer {b} in one chain");
            }
        }
    }

    /// Starting and stopping following at random samples (found by a review of the switch):
    /// every sample gives what a full check gives, over ledgers that roll, storage reads of
    /// entries still cached (an entry in two buffers, two buffers with one front), bursts,
    /// invalidations and deleted ledgers, for each design with small and large caches.
    #[test]
    fn switching_at_any_sample_changes_nothing() {
        for seed in 1..=12u64 {
            for (what, mut cache, _) in designs() {
                let switches = replay_switching_at_random(cache.as_mut(), seed);
                assert!(switches > 20, "{what}, seed {seed}: {switches} switches");
            }
        }
    }

    /// [`switching_at_any_sample_changes_nothing`] for one design and seed; returns how often
    /// the model started or stopped following.
    fn replay_switching_at_random(cache: &mut dyn CacheStrategy, seed: u64) -> u32 {
        use crate::lab::replay::strategy::xorshift;
        let mut following = MemoryModel::new(64, 2048, 65536, 4096).following(cache);
        following.switching_at_random = Some(seed * 104_729 + 3);
        let mut full = MemoryModel::new(64, 2048, 65536, 4096);
        let mut state = (seed * 7_919) | 1;
        let mut rand = move |n: u64| xorshift(&mut state) % n.max(1);
        const TOPICS: usize = 3;
        let (mut ledger, mut next) = ([1i64; TOPICS], [0i64; TOPICS]);
        let key = |topic: u32, ledger: i64, entry: i64| EntryKey {
            topic,
            position: Position::new(ledger, entry),
        };
        let mut switches = 0;
        for second in 0..150i64 {
            let burst = rand(4) == 0;
            for ms in 0..40i64 {
                let ts = second * 1_000_000 + ms * 1_000;
                let now = ts as u64 * 1_000;
                for _ in 0..rand(if burst { 8 } else { 2 }) {
                    let t = rand(TOPICS as u64) as usize;
                    if rand(300) == 0 {
                        ledger[t] += 1;
                        next[t] = 0;
                    }
                    let size = 50 + rand(900) as u32;
                    let k = key(t as u32, ledger[t], next[t]);
                    next[t] += 1;
                    let watch = following.on_publish(ts, t as u32, k.position, size);
                    full.on_publish(ts, t as u32, k.position, size);
                    insert(&mut following, cache, now, k, size, rand(3) as i32, watch);
                }
                if rand(4) == 0 {
                    // A storage read, of entries missed and sometimes of entries still cached.
                    let t = rand(TOPICS as u64) as usize;
                    let l = ledger[t] - rand(2) as i64;
                    let from = rand(next[t].max(1) as u64) as i64;
                    let mut read = Vec::new();
                    for e in from..(from + 1 + rand(6) as i64) {
                        if !cache.read(now, key(t as u32, l, e)) || rand(3) == 0 {
                            read.push((e, 50 + rand(900) as u32));
                        }
                    }
                    following.on_storage_read(t as u32, l, &read);
                    full.on_storage_read(t as u32, l, &read);
                    for &(e, size) in &read {
                        cache.insert_read(now, key(t as u32, l, e), size, 1, 1);
                    }
                    cache.end_read();
                }
                if ms % 7 == 0 {
                    cache.tick(now);
                }
                match rand(600) {
                    0..10 => {
                        let t = rand(TOPICS as u64) as usize;
                        let before = rand(next[t].max(1) as u64) as i64;
                        let p = key(t as u32, ledger[t], before).position;
                        cache.invalidate(t as u32, Invalidation::Before(p));
                    }
                    10 => cache.invalidate(rand(TOPICS as u64) as u32, Invalidation::All),
                    11..14 => {
                        let t = rand(TOPICS as u64) as usize;
                        cache.on_ledger_deleted(t as u32, ledger[t] - rand(3) as i64);
                    }
                    _ => {}
                }
            }
            let followed = following.follows();
            assert_eq!(
                following.sample(cache),
                full.sample(cache),
                "second {second}"
            );
            following.check_bookkeeping(cache);
            switches += u32::from(followed != following.follows());
        }
        assert!(full.peak_retained > 0);
        switches
    }
}
