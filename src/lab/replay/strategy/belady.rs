//! Belady's MIN, the offline optimum for the read stream: every entry offered is cached, and when
//! room is needed the cached entry whose next read is farthest in the future (or never) goes. This
//! is the classic form (admission is not optional), the one libCacheSim implements, so the two agree
//! exactly. It needs the whole future, so the engine first records the read stream
//! ([`FutureReads`]) and then replays again. Optimal in hits for uniform sizes among caches that
//! keep what they are offered; an upper bound to compare the online designs against.
//!
//! The future is kept compact: the recording holds, per read, the low half of the entry id (4
//! bytes), and a group (topic, ledger, high half of the id) per run of reads of one group. The
//! deciding pass turns it into, per read, the index of the next read of the same entry (in place of
//! the recorded entry, for a u32 future), and per entry the index of its next unserved read (a u32 each when the read
//! count fits, else a u64).
//! A group whose reads cover its entries densely (cursors reading a ledger forward) addresses them
//! directly, at most two slots per read; the other groups' entries are found by sorting their
//! reads and addressed through runs of consecutive ids. Memory and work are bounded by the number
//! of reads, never by the values of the ids.

use super::farthest_first::FarthestFirst;
use super::largest_key_first::LargestKeyFirst;
use super::{CacheStrategy, EntryKey, StrategyCounters, WatchTokens};
use crate::cache::fast_hash::FastMap;
use std::cell::Cell;

/// Entries are grouped by topic, ledger and the high half of the entry id, and kept within their
/// group by the low half: 4 bytes per read instead of 8, for every id.
type GroupKey = (u32, i64, i32);

/// `key`'s group and its place in the group.
fn split(key: &EntryKey) -> (GroupKey, u32) {
    let entry = key.position.entry_id;
    // The high half of an i64 always fits an i32, and the low half a u32.
    let (high, low) = ((entry >> 32) as i32, entry as u32);
    ((key.topic, key.position.ledger_id, high), low)
}

/// The read stream, in order: per read, the low half of its entry id, and its group kept per run
/// of reads of one group (reads come in runs of one ledger, so a group per read would mostly
/// repeat itself). All of it is written fresh, and fresh pages cost more than the writes.
#[derive(Debug, Default, Clone)]
pub struct FutureReads {
    groups: FastMap<GroupKey, u32>,
    /// The group of the last read.
    last: Option<(GroupKey, u32)>,
    /// Where each run of reads of one group starts in `read_entry`, and its group.
    group_runs: Vec<(usize, u32)>,
    read_entry: Vec<u32>,
}

impl FutureReads {
    pub fn record(&mut self, key: EntryKey) {
        let (group, low) = split(&key);
        if !matches!(self.last, Some((l, _)) if l == group) {
            let fresh = u32::try_from(self.groups.len()).expect("fewer than 2^32 groups read");
            let g = *self.groups.entry(group).or_insert(fresh);
            self.last = Some((group, g));
            self.group_runs.push((self.read_entry.len(), g));
        }
        self.read_entry.push(low);
    }

    pub fn len(&self) -> u64 {
        self.read_entry.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.read_entry.is_empty()
    }
}

/// Each run of reads of one group (`group_runs` of [`FutureReads`], over `reads` reads): the reads'
/// indices and the group (either way round).
fn reads_by_group(
    group_runs: &[(usize, u32)],
    reads: usize,
) -> impl DoubleEndedIterator<Item = (std::ops::Range<usize>, u32)> + '_ {
    (0..group_runs.len()).map(move |k| {
        let (start, g) = group_runs[k];
        let end = group_runs.get(k + 1).map_or(reads, |&(next, _)| next);
        (start..end, g)
    })
}

const NEVER: u64 = u64::MAX;

/// An index into the read stream, or none (the type's maximum).
trait ReadIndex: Copy + Send + 'static {
    const NONE: Self;
    /// A read index and a place, as one integer of twice the width ordered by the index: stored
    /// and compared in one step.
    type Item: Copy + Ord + Send;
    /// `i` as an index; panics if it does not fit (the caller chose the type by the read count).
    fn of(i: usize) -> Self;
    fn get(self) -> Option<usize>;
    fn item(next: usize, place: u32) -> Self::Item;
    fn next_of(item: Self::Item) -> usize;
    fn place_of(item: Self::Item) -> u32;
    /// Where [`NextReads::build`] turns each read's entry into its next read.
    type Store: NextStore<Self>;
    fn store(read_entry: Vec<u32>) -> Self::Store;
}

/// The recording's entry of each read, which [`NextReads::build`] replaces by the read's next read.
/// It reads a read's entry only before it writes the read's next read, so a `u32` future is
/// built in place, in the recording's own 4 bytes a read.
trait NextStore<I> {
    /// Read `i`'s entry (the low half of its id); only until its next read is set.
    fn entry(&self, i: usize) -> u32;
    fn set_next(&mut self, i: usize, next: I);
    /// Every read's next read (each one was set).
    fn into_next(self) -> Vec<I>;
}

/// A `u32` future: entries and next reads share the recording's vector.
struct InPlace(Vec<u32>);

impl NextStore<u32> for InPlace {
    fn entry(&self, i: usize) -> u32 {
        self.0[i]
    }
    fn set_next(&mut self, i: usize, next: u32) {
        self.0[i] = next;
    }
    fn into_next(self) -> Vec<u32> {
        self.0
    }
}

/// A `u64` future (over 2^32 reads): the next reads beside the entries.
struct Beside {
    entries: Vec<u32>,
    next: Vec<u64>,
}

impl NextStore<u64> for Beside {
    fn entry(&self, i: usize) -> u32 {
        self.entries[i]
    }
    fn set_next(&mut self, i: usize, next: u64) {
        self.next[i] = next;
    }
    fn into_next(self) -> Vec<u64> {
        self.next
    }
}

impl ReadIndex for u32 {
    const NONE: Self = u32::MAX;
    fn of(i: usize) -> Self {
        u32::try_from(i)
            .ok()
            .filter(|&v| v != u32::MAX)
            .expect("read index fits in u32")
    }
    fn get(self) -> Option<usize> {
        (self != u32::MAX).then_some(self as usize)
    }
    type Item = u64;
    fn item(next: usize, place: u32) -> u64 {
        (u64::from(Self::of(next)) << 32) | u64::from(place)
    }
    fn next_of(item: u64) -> usize {
        (item >> 32) as usize
    }
    fn place_of(item: u64) -> u32 {
        item as u32
    }
    type Store = InPlace;
    fn store(read_entry: Vec<u32>) -> InPlace {
        InPlace(read_entry)
    }
}

impl ReadIndex for u64 {
    const NONE: Self = u64::MAX;
    fn of(i: usize) -> Self {
        u64::try_from(i)
            .ok()
            .filter(|&v| v != u64::MAX)
            .expect("read index fits in u64")
    }
    fn get(self) -> Option<usize> {
        if self == u64::MAX {
            None
        } else {
            Some(usize::try_from(self).expect("read index fits in usize"))
        }
    }
    type Item = u128;
    fn item(next: usize, place: u32) -> u128 {
        (u128::from(Self::of(next)) << 32) | u128::from(place)
    }
    fn next_of(item: u128) -> usize {
        usize::try_from(item >> 32).expect("read index fits in usize")
    }
    fn place_of(item: u128) -> u32 {
        item as u32
    }
    type Store = Beside;
    fn store(read_entry: Vec<u32>) -> Beside {
        Beside {
            next: vec![u64::NONE; read_entry.len()],
            entries: read_entry,
        }
    }
}

/// Consecutive entry ids of one group that are read: the distinct entries `first..` own the
/// cursors from `start` up to the next run's start.
#[derive(Debug, Clone, Copy)]
struct Run {
    group: u32,
    first: u32,
    start: usize,
}

/// The future in the form the deciding pass reads it.
struct NextReads<I> {
    groups: FastMap<GroupKey, u32>,
    runs: Vec<Run>,
    /// Per read: the index of the next read of the same entry.
    next: Vec<I>,
    /// Per distinct entry read (in run order): the index of its next read not yet served.
    cursors: Vec<I>,
    /// Per topic: the ledger, the high half and the run of its last found entry. Reads and
    /// publishes of a topic move along a few runs, so most lookups land in the remembered one and
    /// skip the map and the search.
    last_run: Vec<Cell<(i64, i32, usize)>>,
}

/// `NextReads::last_run` of a topic not looked up yet: no run has this index.
const NO_RUN: (i64, i32, usize) = (0, 0, usize::MAX);

impl<I: ReadIndex> NextReads<I> {
    fn build(future: FutureReads) -> Self {
        let FutureReads {
            groups: group_keys,
            group_runs,
            read_entry,
            ..
        } = future;
        let n = read_entry.len();
        let groups = group_keys.len();
        // Per group: its reads, and the lowest and highest entry read.
        let mut reads_of = vec![0usize; groups];
        let mut span = vec![(u32::MAX, 0u32); groups];
        for (reads, g) in reads_by_group(&group_runs, n) {
            let g = g as usize;
            reads_of[g] += reads.len();
            for &e in &read_entry[reads] {
                span[g] = (span[g].0.min(e), span[g].1.max(e));
            }
        }
        // A group is dense when its entries span at most twice its reads (cursors reading a
        // ledger forward): its entries are then addressed directly, the few never read among
        // them included, with no sort. Every group has a read, so its span is not empty.
        let width = |g: usize| (span[g].1 - span[g].0) as usize + 1;
        let dense: Vec<bool> = (0..groups)
            .map(|g| width(g) as u64 <= 2 * reads_of[g] as u64)
            .collect();
        // The sparse groups' reads by group (a counting sort, stable: in stream order within a
        // group).
        let mut bounds = vec![0usize; groups + 1];
        for g in 0..groups {
            let sorted = if dense[g] { 0 } else { reads_of[g] };
            bounds[g + 1] = bounds[g] + sorted;
        }
        let mut fill = bounds.clone();
        let mut order = vec![I::NONE; bounds[groups]];
        for (reads, g) in reads_by_group(&group_runs, n) {
            let g = g as usize;
            if !dense[g] {
                for i in reads {
                    order[fill[g]] = I::of(i);
                    fill[g] += 1;
                }
            }
        }
        drop(fill);
        // From here a read's entry is only read before its next read is written over it.
        let mut store = I::store(read_entry);
        let dense_slots: usize = (0..groups).filter(|&g| dense[g]).map(width).sum();
        let mut cursors = Vec::with_capacity(dense_slots + order.len());
        let mut runs = Vec::new();
        // Where each dense group's entries start among the cursors.
        let mut dense_start = vec![0usize; groups];
        for g in 0..groups {
            let group = u32::try_from(g).expect("group numbers are u32");
            if dense[g] {
                dense_start[g] = cursors.len();
                runs.push(Run {
                    group,
                    first: span[g].0,
                    start: cursors.len(),
                });
                cursors.resize(cursors.len() + width(g), I::NONE);
                continue;
            }
            let reads = &mut order[bounds[g]..bounds[g + 1]];
            // By entry id, then stream order: the group's reads are in stream order already, so a
            // stable sort by entry id keeps it; and they come mostly in ascending runs (cursors
            // reading forward), which the stable sort merges instead of partitioning.
            reads.sort_by_key(|&i| store.entry(i.get().expect("an index")));
            // Each read's next read is the following one of its entry, if any: set when that one
            // comes, or to none when the next entry starts (and after the last read).
            let mut prev: Option<(u32, usize)> = None;
            for &r in reads.iter() {
                let i = r.get().expect("an index");
                let entry = store.entry(i);
                match prev {
                    Some((e, p)) if e == entry => store.set_next(p, r),
                    _ => {
                        if let Some((_, p)) = prev {
                            store.set_next(p, I::NONE);
                        }
                        let consecutive =
                            prev.is_some_and(|(e, _)| e.checked_add(1) == Some(entry));
                        if !consecutive {
                            runs.push(Run {
                                group,
                                first: entry,
                                start: cursors.len(),
                            });
                        }
                        cursors.push(r);
                    }
                }
                prev = Some((entry, i));
            }
            if let Some((_, p)) = prev {
                store.set_next(p, I::NONE);
            }
        }
        drop(order);
        // The dense groups' reads, backwards: a read's next read is the one of its entry seen
        // last, and an entry's cursor ends at its first read.
        for (reads, g) in reads_by_group(&group_runs, n).rev() {
            let g = g as usize;
            if !dense[g] {
                continue;
            }
            let (base, first) = (dense_start[g], span[g].0);
            for i in reads.rev() {
                let slot = &mut cursors[base + (store.entry(i) - first) as usize];
                store.set_next(i, *slot);
                *slot = I::of(i);
            }
        }
        let next = store.into_next();
        cursors.shrink_to_fit();
        runs.shrink_to_fit();
        // A memo per topic id up to the number of groups: the decoder numbers topics densely, so
        // that covers every topic read, and a caller's sparse ids cannot size the table.
        let topics = group_keys
            .keys()
            .map(|&(t, _, _)| t as usize + 1)
            .max()
            .unwrap_or(0)
            .min(group_keys.len());
        NextReads {
            groups: group_keys,
            runs,
            next,
            cursors,
            last_run: vec![Cell::new(NO_RUN); topics],
        }
    }

    /// The cursor of `key`, if it is ever read.
    fn slot(&self, key: &EntryKey) -> Option<usize> {
        let (group_key, entry) = split(key);
        let (_, ledger, high) = group_key;
        let memo = self.last_run.get(key.topic as usize);
        if let Some((last_ledger, last_high, run)) = memo.map(Cell::get) {
            if (last_ledger, last_high) == (ledger, high) {
                if let Some(slot) = self.slot_in_run(run, entry) {
                    return Some(slot);
                }
            }
        }
        let group = *self.groups.get(&group_key)?;
        let after = self
            .runs
            .partition_point(|r| (r.group, r.first) <= (group, entry));
        let run = after.checked_sub(1)?;
        if self.runs[run].group != group {
            return None;
        }
        let slot = self.slot_in_run(run, entry)?;
        if let Some(memo) = memo {
            memo.set((ledger, high, run));
        }
        Some(slot)
    }

    /// The cursor of `entry` (the low half of its id) if run `run` (of the entry's group) exists
    /// and holds it.
    fn slot_in_run(&self, run: usize, entry: u32) -> Option<usize> {
        let r = *self.runs.get(run)?;
        let end = self
            .runs
            .get(run + 1)
            .map_or(self.cursors.len(), |r| r.start);
        let offset = entry.checked_sub(r.first)? as usize;
        let slot = r.start.checked_add(offset)?;
        (slot < end).then_some(slot)
    }

    /// How many entries are ever read: slots are below this.
    fn slots(&self) -> usize {
        self.cursors.len()
    }

    /// The next unserved read of the entry in `slot`.
    fn next_at(&self, slot: usize) -> u64 {
        self.cursors[slot].get().map_or(NEVER, |i| i as u64)
    }

    /// The entry in `slot` was read: its next unserved read is the one after, returned.
    fn advance_at(&mut self, slot: usize) -> u64 {
        if let Some(i) = self.cursors[slot].get() {
            self.cursors[slot] = self.next[i];
        }
        self.next_at(slot)
    }

    #[cfg(test)]
    fn next_use(&self, key: &EntryKey) -> u64 {
        self.slot(key).map_or(NEVER, |s| self.next_at(s))
    }

    #[cfg(test)]
    fn advance(&mut self, key: &EntryKey) -> u64 {
        self.slot(key).map_or(NEVER, |s| self.advance_at(s))
    }
}

/// A cached entry, in its place.
#[derive(Debug, Clone, Copy)]
struct Cached {
    key: EntryKey,
    size: u32,
    /// Its next read, or [`NEVER`] (also a free place's, so that no stale item in the victim order
    /// matches it).
    next: u64,
    /// Its slot in the future, or [`UNREAD`] for an entry never read.
    slot: usize,
    /// The place holds a cached entry (a freed one does not).
    live: bool,
}

/// [`Cached::slot`] of an entry that is never read (it has no slot).
const UNREAD: usize = usize::MAX;

/// [`Belady::place_by_slot`] of an entry not cached.
const NO_PLACE: u32 = u32::MAX;

/// Belady's deciding pass over `future`, with the future in the narrowest index type that holds
/// its reads.
pub fn belady(capacity: u64, future: FutureReads) -> Box<dyn CacheStrategy> {
    if future.len() < u32::MAX as u64 {
        Box::new(Belady::<u32>::new(capacity, NextReads::build(future)))
    } else {
        Box::new(Belady::<u64>::new(capacity, NextReads::build(future)))
    }
}

/// The victim order is kept in two parts. An entry that will be read again is ordered by its next
/// read, and no two entries share one (a read is of one entry), so its item is the next read and
/// the entry's place, packed: 8 bytes for a `u32` future, stored and compared in one step. The
/// entries never read again all tie there; they go first, largest key first, as in the single
/// order of `(next read, key)` this replaces (so the victims, and every result, are the same).
struct Belady<I: ReadIndex> {
    capacity: u64,
    used: u64,
    future: NextReads<I>,
    /// Per entry ever read, by its slot in the future (which a read looks up anyway): its place
    /// in `places` if cached, else [`NO_PLACE`]. So finding a cached entry hashes no key.
    place_by_slot: Vec<u32>,
    /// The cached entries never read, by key: their place.
    unread: FastMap<EntryKey, u32>,
    /// How many entries are cached.
    live: usize,
    places: Vec<Cached>,
    /// Places free for reuse.
    free: Vec<u32>,
    /// Cached entries read again: their next read and place.
    by_next_use: FarthestFirst<I::Item>,
    /// Cached entries never read again.
    never_again: LargestKeyFirst,
    counters: StrategyCounters,
    /// Entries removed since the memory model last asked (when it asks: see
    /// [`CacheStrategy::report_removals`]).
    removed: Option<Vec<EntryKey>>,
    tokens: WatchTokens,
}

impl<I: ReadIndex> Belady<I> {
    fn new(capacity: u64, future: NextReads<I>) -> Self {
        Belady {
            capacity,
            used: 0,
            place_by_slot: vec![NO_PLACE; future.slots()],
            future,
            unread: FastMap::default(),
            live: 0,
            places: Vec::new(),
            free: Vec::new(),
            by_next_use: FarthestFirst::default(),
            never_again: LargestKeyFirst::default(),
            counters: StrategyCounters::default(),
            removed: None,
            tokens: WatchTokens::default(),
        }
    }

    /// The place of cached entry `key`, if it is cached.
    fn place_of(&self, key: &EntryKey) -> Option<u32> {
        match self.future.slot(key) {
            Some(slot) => Some(self.place_by_slot[slot]).filter(|&p| p != NO_PLACE),
            None => self.unread.get(key).copied(),
        }
    }

    /// The place of the cached entry whose next read is farthest (never read again first,
    /// largest key first).
    fn farthest(&mut self) -> Option<u32> {
        // Taken out for the call, so that the check can look places up through `self` (an empty
        // order allocates nothing).
        let mut never_again = std::mem::take(&mut self.never_again);
        let never = never_again.farthest(|key| {
            self.place_of(key)
                .is_some_and(|p| self.places[p as usize].next == NEVER)
        });
        self.never_again = never_again;
        if let Some(key) = never {
            return self.place_of(&key);
        }
        let places = &self.places;
        self.by_next_use
            .farthest(|&item| places[I::place_of(item) as usize].next == I::next_of(item) as u64)
            .map(I::place_of)
    }

    fn admit(&mut self, key: EntryKey, size: u32) {
        let slot = self.future.slot(&key);
        let cached = match slot {
            Some(s) => self.place_by_slot[s] != NO_PLACE,
            None => self.unread.contains_key(&key),
        };
        if cached || size as u64 > self.capacity {
            return;
        }
        // Make room among the entries already cached, farthest next read first.
        while self.used + size as u64 > self.capacity {
            let victim = self.farthest().expect("over capacity means non-empty");
            self.evict(victim);
            self.counters.evicted_entries += 1;
        }
        let entry = Cached {
            key,
            size,
            next: slot.map_or(NEVER, |s| self.future.next_at(s)),
            slot: slot.unwrap_or(UNREAD),
            live: true,
        };
        let place = match self.free.pop() {
            Some(p) => {
                self.places[p as usize] = entry;
                p
            }
            None => {
                // Each place holds a cached entry of at least a byte, with its key: 2^32 of them
                // would not fit in memory first.
                let p = u32::try_from(self.places.len()).expect("fewer than 2^32 entries cached");
                self.places.push(entry);
                p
            }
        };
        match slot {
            Some(s) => self.place_by_slot[s] = place,
            None => {
                self.unread.insert(key, place);
            }
        }
        self.live += 1;
        self.order(place);
        self.used += size as u64;
    }

    /// Puts the entry at `place` in the victim order, by its next read.
    fn order(&mut self, place: u32) {
        let entry = self.places[place as usize];
        let places = &self.places;
        if entry.next == NEVER {
            self.never_again.set(entry.key, self.live, || {
                places
                    .iter()
                    .filter(|c| c.live && c.next == NEVER)
                    .map(|c| c.key)
                    .collect()
            });
        } else {
            let item =
                |next: u64, place| I::item(usize::try_from(next).expect("a read index"), place);
            self.by_next_use
                .set(item(entry.next, place), self.live, || {
                    (0u32..)
                        .zip(places)
                        .filter(|(_, c)| c.live && c.next != NEVER)
                        .map(|(p, c)| item(c.next, p))
                        .collect()
                });
        }
    }

    /// Forgets the entry at `place` (which must be cached); its item in the victim order goes
    /// stale.
    fn evict(&mut self, place: u32) {
        let entry = &mut self.places[place as usize];
        debug_assert!(entry.live, "evicting a free place");
        self.used -= entry.size as u64;
        entry.next = NEVER;
        entry.live = false;
        match entry.slot {
            UNREAD => {
                self.unread.remove(&entry.key);
            }
            slot => self.place_by_slot[slot] = NO_PLACE,
        }
        self.live -= 1;
        self.free.push(place);
        if let Some(removed) = &mut self.removed {
            removed.push(entry.key);
        }
    }
}

impl<I: ReadIndex> CacheStrategy for Belady<I> {
    fn insert(&mut self, _now: u64, key: EntryKey, size: u32, _expected: i32) {
        self.admit(key, size);
    }

    fn read(&mut self, _now: u64, key: EntryKey) -> bool {
        let (next, place) = match self.future.slot(&key) {
            Some(slot) => {
                let next = self.future.advance_at(slot);
                (
                    next,
                    Some(self.place_by_slot[slot]).filter(|&p| p != NO_PLACE),
                )
            }
            // Not in the recording: read again never, as far as it knows.
            None => (NEVER, self.unread.get(&key).copied()),
        };
        match place {
            Some(place) => {
                self.places[place as usize].next = next;
                self.order(place);
                true
            }
            None => false,
        }
    }

    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64) {
        let doomed: Vec<u32> = (0u32..)
            .zip(&self.places)
            .filter(|(_, c)| c.live && c.key.topic == topic && c.key.position.ledger_id == ledger)
            .map(|(p, _)| p)
            .collect();
        self.counters.invalidated_entries += doomed.len() as u64;
        for place in doomed {
            self.evict(place);
        }
    }

    fn cached_bytes(&self) -> u64 {
        self.used
    }

    fn counters(&self) -> StrategyCounters {
        self.counters
    }

    fn contains(&self, key: EntryKey) -> bool {
        self.place_of(&key).is_some()
    }

    fn report_removals(&mut self) -> bool {
        self.removed.get_or_insert_with(Vec::new);
        true
    }

    fn watch_removal(&mut self, key: EntryKey, token: u32) -> Option<u32> {
        self.place_of(&key)?;
        Some(self.tokens.watch(key, token))
    }

    fn unwatch(&mut self, key: EntryKey) {
        self.tokens.unwatch(key);
    }

    fn take_removed(&mut self, out: &mut Vec<u32>) {
        if let Some(removed) = &mut self.removed {
            self.tokens.take(removed.drain(..), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::xorshift;
    use super::*;
    use crate::cache::position::Position;
    use std::collections::{HashMap, VecDeque};

    fn key(topic: u32, ledger: i64, entry: i64) -> EntryKey {
        EntryKey {
            topic,
            position: Position::new(ledger, entry),
        }
    }

    /// The plain form: per entry, the queue of its read indices.
    #[derive(Default)]
    struct Queues(HashMap<EntryKey, VecDeque<u64>>);

    impl Queues {
        fn next_use(&self, k: &EntryKey) -> u64 {
            self.0
                .get(k)
                .and_then(|q| q.front().copied())
                .unwrap_or(NEVER)
        }
        fn advance(&mut self, k: &EntryKey) {
            if let Some(q) = self.0.get_mut(k) {
                q.pop_front();
            }
        }
    }

    /// Random reads over a few topics and ledgers with gaps, huge and negative ids; then serves
    /// them (skipping some, as the engine does for a run missing in whole) and compares every
    /// next use with the plain form, also for keys never read.
    fn agrees_with_queues<I: ReadIndex>() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let bases = [0i64, 1_000_000, i64::MAX - 40, i64::MIN, -20];
        let mut stream = Vec::new();
        for _ in 0..4000 {
            let r = xorshift(&mut rng);
            let topic = (r % 3) as u32;
            let ledger = ((r >> 8) % 4) as i64 * 1_000_000_007;
            let base = bases[((r >> 16) % bases.len() as u64) as usize];
            let entry = base + ((r >> 24) % 40) as i64;
            stream.push(key(topic, ledger, entry));
        }
        let mut recorded = FutureReads::default();
        let mut queues = Queues::default();
        for (i, k) in stream.iter().enumerate() {
            recorded.record(*k);
            queues.0.entry(*k).or_default().push_back(i as u64);
        }
        assert_eq!(recorded.len(), stream.len() as u64);
        let mut future = NextReads::<I>::build(recorded);
        let strangers = [
            key(7, 0, 0),
            key(0, 0, 41),
            key(1, 5, 3),
            key(2, 0, i64::MAX),
        ];
        for k in stream.iter().chain(&strangers) {
            assert_eq!(future.next_use(k), queues.next_use(k), "{k:?}");
        }
        for (i, k) in stream.iter().enumerate() {
            if xorshift(&mut rng) % 5 != 0 {
                assert_eq!(future.next_use(k), queues.next_use(k), "before read {i}");
                let next = future.advance(k);
                queues.advance(k);
                assert_eq!(next, queues.next_use(k), "advance's answer at read {i}");
            }
            assert_eq!(future.next_use(k), queues.next_use(k), "after read {i}");
            let other = stream[(xorshift(&mut rng) % stream.len() as u64) as usize];
            assert_eq!(future.next_use(&other), queues.next_use(&other));
        }
        for k in stream.iter().chain(&strangers) {
            let next = future.advance(k);
            queues.advance(k);
            assert_eq!(future.next_use(k), queues.next_use(k));
            assert_eq!(next, queues.next_use(k));
        }
    }

    #[test]
    fn next_uses_agree_with_per_entry_queues_u32() {
        agrees_with_queues::<u32>();
    }

    #[test]
    fn next_uses_agree_with_per_entry_queues_u64() {
        agrees_with_queues::<u64>();
    }

    #[test]
    fn topic_ids_do_not_size_the_memo() {
        let mut recorded = FutureReads::default();
        recorded.record(key(u32::MAX, 1, 5));
        recorded.record(key(u32::MAX, 1, 6));
        recorded.record(key(u32::MAX, 1, 5));
        let mut future = NextReads::<u32>::build(recorded);
        assert!(future.last_run.len() <= 1);
        assert_eq!(future.next_use(&key(u32::MAX, 1, 5)), 0);
        assert_eq!(future.advance(&key(u32::MAX, 1, 5)), 2);
        assert_eq!(future.next_use(&key(u32::MAX, 1, 6)), 1);
        assert_eq!(future.next_use(&key(u32::MAX, 1, 7)), NEVER);
    }

    #[test]
    fn entries_never_read_are_still_cached() {
        let mut b = belady(10, FutureReads::default());
        b.insert(0, key(0, 1, 1), 1, 0);
        assert!(b.read(0, key(0, 1, 1)));
        assert!(b.contains(key(0, 1, 1)));
    }

    /// A deleted ledger's entries leave, read or not, and their places serve later entries: the
    /// rest of the cache keeps its order.
    #[test]
    fn a_deleted_ledger_leaves_and_its_places_are_reused() {
        let reads = [
            key(0, 1, 0),
            key(0, 2, 0),
            key(0, 1, 1),
            key(0, 2, 1),
            key(0, 1, 0),
            key(0, 2, 0),
        ];
        let mut future = FutureReads::default();
        for k in reads {
            future.record(k);
        }
        let mut b = belady(10, future);
        for &k in &reads[..4] {
            b.insert(0, k, 1, 0);
        }
        let unread = key(0, 2, 9);
        b.insert(0, unread, 1, 0);
        assert_eq!(b.cached_bytes(), 5);
        b.on_ledger_deleted(0, 2);
        for gone in [key(0, 2, 0), key(0, 2, 1), unread] {
            assert!(!b.contains(gone), "{gone:?}");
        }
        assert!(b.contains(key(0, 1, 0)) && b.contains(key(0, 1, 1)));
        assert_eq!(b.cached_bytes(), 2);
        // Entries never read fill the cache, then each one admitted evicts the largest before
        // it; the entry read again stays.
        for e in 0..20 {
            b.insert(0, key(0, 3, e), 1, 0);
        }
        assert_eq!(b.cached_bytes(), 10);
        assert!(b.contains(key(0, 1, 0)) && b.contains(key(0, 1, 1)));
        assert!(b.contains(key(0, 3, 6)) && b.contains(key(0, 3, 19)));
        assert!((7..19).all(|e| !b.contains(key(0, 3, e))));
        assert!(b.read(0, key(0, 1, 0)));
        // Re-inserted after the deletion: cached again.
        b.insert(0, key(0, 2, 0), 1, 0);
        assert!(b.contains(key(0, 2, 0)));
    }

    /// Records `reads` as the future, then reads them in order through a Belady of `capacity`
    /// entries of size 1, inserting each miss: the cache and whether each read hit.
    fn read_through(capacity: u64, reads: &[EntryKey]) -> (Box<dyn CacheStrategy>, Vec<bool>) {
        let mut future = FutureReads::default();
        for &k in reads {
            future.record(k);
        }
        let mut belady = belady(capacity, future);
        let hits = reads
            .iter()
            .map(|&k| {
                let hit = belady.read(0, k);
                if !hit {
                    belady.insert(0, k, 1, 0);
                }
                hit
            })
            .collect();
        (belady, hits)
    }

    /// A handmade stream where the optimal victim is known: capacity 2, reads a b c a b a d c.
    #[test]
    fn evicts_the_entry_read_farthest_ahead() {
        let (a, b, c, d) = (key(0, 3, 0), key(0, 3, 1), key(1, 3, 0), key(0, 9, 5));
        let (belady, hits) = read_through(2, &[a, b, c, a, b, a, d, c]);
        // a, b miss; c (next read 7) evicts b (4), keeping a (3); a hits; b (never again) evicts c
        // (7), keeping a (5); a hits; d evicts b (both never again: the larger key goes); c evicts
        // d (never again, larger than a). A wrong next use changes a victim and a hit.
        assert_eq!(hits, [false, false, false, true, false, true, false, false]);
        assert!(belady.contains(c));
        assert_eq!(belady.counters().evicted_entries, 4);

        // a b c b c a: c evicts a (next read 5), not b (3), though a was read first; b and c hit;
        // a evicts c (never again, larger than b). A future that kept each entry's first read as
        // its next one would evict b and miss it.
        let (belady, hits) = read_through(2, &[a, b, c, b, c, a]);
        assert_eq!(hits, [false, false, false, true, true, false]);
        assert!(belady.contains(a) && belady.contains(b));
        assert_eq!(belady.counters().evicted_entries, 2);
    }
}
