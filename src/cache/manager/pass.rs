//! One eviction pass over the removal queue: the manager's side of `Evictor::run`, which judges each
//! item's entry with PIP-430's policy under its cache's lock.
//!
//! The queue interleaves the entries of every topic in publish order, so a pass moves from cache to
//! cache at nearly every item. It keeps the locks it takes, so that coming back to a cache costs no
//! lock; every [`MAX_RUN`] items it hands each one it holds to a thread waiting for it, if there is
//! one, and takes it back after (a check of the lock word where nobody waits: letting go of every
//! lock and taking them again cost 10% of a pass over 100 interleaved topics), and it looks into the
//! caches of the items ahead to prefetch what judging them will touch.
//!
//! Why holding many caches at once cannot deadlock: other threads take a cache's lock either alone
//! or after the table's (`remove_cache`, `stats`, a cache's drop), never a second cache's, and never
//! wait for the queue while holding one (inserts push without waiting). So the pass lets go of every
//! cache before it looks in the table, and otherwise waits only for caches, whose holders wait for
//! nothing the pass holds. (The replay's `HeldCache`s hold several caches of a manager that no
//! other thread uses, and let go of them all before a pass.)

use super::{Released, Removed, Shared, SharedRangeCache};
use crate::cache::range_cache::{set_aside, RangeCache, Slot, Visit};
use crate::cache::removal_queue::{
    EvictionPolicy, EvictionResult, Evictor, Pass, QueueItem, Requeues, LOOKAHEAD, MAX_RUN,
};
use parking_lot::{ArcMutexGuard, MutexGuard, RawMutex};
use std::cell::OnceCell;
use std::sync::atomic::Ordering;

/// How far ahead the evictor prefetches in a run that is not a stream: the slot at the far
/// distance, what the slot points to at the near one (by then the slot is in cache). Measured
/// (benches/eviction.rs' scenario, one topic and 100): 32/10 beat 16/6 and 24/8 by 5-10% on one
/// topic and matched them on 100; 64/24 lost on 100 topics.
const LOOKAHEAD_FAR: usize = 32;
const LOOKAHEAD_NEAR: usize = 10;
/// How far ahead a run over consecutive slots (see `run_pass`) hints its slots, and then their
/// payloads' headers. A stream is bound by how many lines can be on their way at once: at 32/16
/// the hint for the payload's header waited for its slot (a third of a pass over empty payloads
/// on that one load), and with the slots hinted further ahead the hints themselves wait, for a
/// free line buffer. benches/eviction.rs, 32/16 -> 128/32 alternated 3x: the scenario 30.2-30.3
/// -> 29.2-29.6 ns/entry, without requeues 16.1-16.3 -> 15.3-15.5 (with empty payloads 14.1-14.4
/// -> 10.9-11.0); 100 topics and the steady state unchanged. 96 and 160 did about as well as
/// 128, and payloads hinted 48 or 64 ahead no better than 32.
const STREAM_SLOT_AHEAD: usize = LOOKAHEAD;
const STREAM_PAYLOAD_AHEAD: usize = 32;
// A run sees LOOKAHEAD items after it: every distance above must be within them, or the last items
// of each run would go unhinted.
const _: () = assert!(
    LOOKAHEAD_FAR <= LOOKAHEAD && LOOKAHEAD_NEAR <= LOOKAHEAD && STREAM_PAYLOAD_AHEAD <= LOOKAHEAD
);

/// Each cache of the table a pass started with, looked up in the table the first time the pass
/// meets it: moving from one cache to another is then no table lookup and no reference-count
/// update. Ids are freed only after a pass (`release_drained_ids`), and a cache that leaves the
/// table was cleared first, so its items are tombstones either way; an id with no cache when the
/// pass met it (a new cache may take it) is looked up each time.
type Listed = Vec<OnceCell<Option<SharedRangeCache>>>;

/// Where a run's cache comes from.
enum Found<'l> {
    /// A listed cache, locked (held over from an earlier run, or locked now).
    Held(MutexGuard<'l, RangeCache>),
    /// A cache the pass's list does not have (added since it met the id), locked for this run
    /// only.
    Added(ArcMutexGuard<RawMutex, RangeCache>),
    /// The cache is gone: every item naming it is stale.
    Gone,
}

/// The locks a pass holds, by cache id.
struct HeldCaches<'l> {
    shared: &'l Shared,
    listed: &'l OnceCell<Listed>,
    guards: Vec<Option<MutexGuard<'l, RangeCache>>>,
    /// The ids whose guards are held, to let go of them without a walk over every cache.
    taken: Vec<u32>,
}

impl<'l> HeldCaches<'l> {
    fn listed(&mut self) -> &'l Listed {
        let shared = self.shared;
        // Made at the pass's first `take`, before it holds any cache, so the table is read with
        // no cache held.
        let listed = self.listed.get_or_init(|| {
            (0..shared.caches.read().by_id.len())
                .map(|_| OnceCell::new())
                .collect()
        });
        if self.guards.len() < listed.len() {
            self.guards.resize_with(listed.len(), || None);
        }
        listed
    }

    /// Lets every waiting thread at the caches held.
    fn release_all(&mut self) {
        for id in self.taken.drain(..) {
            self.guards[id as usize] = None;
        }
    }

    /// Hands each cache held to a thread waiting for it, if any, and takes it back after (a
    /// reader of a cache waits for at most [`MAX_RUN`] items of the pass, not the whole pass).
    fn let_waiters_in(&mut self) {
        for &id in &self.taken {
            if let Some(guard) = &mut self.guards[id as usize] {
                MutexGuard::bump(guard);
            }
        }
    }

    /// Cache `id`, locked, for a run of its items; its guard goes back with [`Self::put_back`].
    fn take(&mut self, id: u32) -> Found<'l> {
        let shared = self.shared;
        if let Some(cell) = self.listed().get(id as usize) {
            if let Some(guard) = self.guards[id as usize].take() {
                return Found::Held(guard);
            }
            if cell.get().is_none() {
                // The table is read with no cache held.
                self.release_all();
            }
            if let Some(state) = cell.get_or_init(|| shared.cache_by_id(id)) {
                self.taken.push(id);
                return Found::Held(state.lock());
            }
        }
        // Not in the table when the pass met it, or past its end: a cache may have taken the id
        // since (the id of a cache that drained before the pass), so the table is read again.
        self.release_all();
        match shared.cache_by_id(id) {
            Some(state) => Found::Added(state.lock_arc()),
            None => Found::Gone,
        }
    }

    fn put_back(&mut self, id: u32, guard: MutexGuard<'l, RangeCache>) {
        self.guards[id as usize] = Some(guard);
    }

    /// Cache `id` if it is held, or free to take now without waiting (and known already), for
    /// prefetching. Inlined: with topics interleaved the pass peeks twice an item, nearly always
    /// at a cache it holds.
    #[inline(always)]
    fn peek(&mut self, id: u32) -> Option<&RangeCache> {
        let id = id as usize;
        if self.guards.get(id)?.is_none() && !self.try_take(id) {
            return None;
        }
        self.guards[id].as_deref()
    }

    /// Takes cache `id` for [`Self::peek`] if it is known and free: whether it did.
    #[cold]
    #[inline(never)]
    fn try_take(&mut self, id: usize) -> bool {
        let Some(state) = self
            .listed
            .get()
            .and_then(|listed| listed.get(id)?.get()?.as_ref())
        else {
            return false;
        };
        let Some(guard) = state.try_lock() else {
            return false;
        };
        self.guards[id] = Some(guard);
        self.taken.push(id as u32);
        true
    }
}

/// The cache of `item` if the pass can look into it now: the run's own (`run` is its id and
/// cache), or one held or free to take.
#[inline(always)]
fn viewable<'a>(
    held: &'a mut HeldCaches<'_>,
    (run_id, run_cache): (u32, &'a RangeCache),
    item: QueueItem,
) -> Option<&'a RangeCache> {
    if item.cache == run_id {
        Some(run_cache)
    } else {
        held.peek(item.cache)
    }
}

impl Shared {
    /// Runs one pass over the removal queue.
    pub(super) fn run_pass(
        &self,
        evictor: &mut Evictor<'_>,
        pass: Pass,
        released: Released<'_>,
    ) -> Removed {
        let now = self.clock.now_ns();
        let policy = EvictionPolicy::from_config(&self.current.read());
        let listed = OnceCell::new();
        let mut held = HeldCaches {
            shared: self,
            listed: &listed,
            guards: Vec::new(),
            taken: Vec::new(),
        };
        let (mut removed, mut freed, mut requeued) = (0u64, 0u64, 0u64);
        // Evicted but not yet taken off the manager's totals: published every `MAX_RUN` items
        // (at each hand-over to waiters) and at the end, not per run (with topics interleaved, a
        // run is often one item).
        let mut unpublished = (0u64, 0u64);
        let mut since_hand_over = 0usize;
        let mut drained = Vec::new();
        evictor.run(
            policy.max_requeues,
            |run: &[QueueItem], ahead: &[QueueItem], requeues: &mut Requeues| {
                let id = run[0].cache;
                let mut listed_guard: Option<MutexGuard<'_, RangeCache>> = None;
                let mut added_guard: Option<ArcMutexGuard<RawMutex, RangeCache>> = None;
                let cache: &mut RangeCache = match held.take(id) {
                    Found::Held(g) => listed_guard.insert(g),
                    Found::Added(g) => added_guard.insert(g),
                    Found::Gone => return run.len(),
                };
                // The item `k` places after the run's first, in this run or after it.
                let item_at = |k: usize| run.get(k).or_else(|| ahead.get(k - run.len()));
                let (mut run_removed, mut run_freed) = (0u64, 0u64);
                let mut handled = run.len();
                // A run over consecutive slots (a pass over entries inserted in order; told by its
                // ends, len - 1 apart, so an unordered run may pass too, and only loses its
                // prefetching, as do the first items after the run) walks its slab, index and
                // payloads as streams. The CPU's own prefetcher follows the queue and the index,
                // but not the slab nor the payloads well enough: without hints, half of such a
                // pass waited for slots, or for payload headers. So a stream hints each slot and
                // then its payload's header, and nothing else: hinting the index and the read
                // counts, as a sparse run does, only cost, and so did skipping the headers of
                // entries the pass will requeue (a fifth of the scenario's first pass: 17.0-17.4
                // -> 18.6-19.0 ns an item). benches/eviction.rs, old and new alternated 3x: the
                // scenario 36.4-37.5 -> 33.4-33.9 ns/entry (its first pass 19.1-20.5 -> 16.5-16.8
                // an item), without requeues 18.2-19.5 -> 16.8-17.5. Runs over 100 interleaved
                // topics are single items, and runs over entries left here and there are not
                // consecutive: they hint as below. A stream also packs the entries it requeues
                // into the slots it emptied (`RangeCache::visit_in_stream`), so that the next pass
                // over them is a stream too, reading whole lines (and the passes after it half
                // lines, not one slot in two to five lines): 33.0-33.2 -> 29.6-29.9 ns/entry
                // (later passes 27.9-28.6 -> 21.6-21.7 an item), old and new alternated twice.
                let stream = run.len() > 1
                    && run[run.len() - 1].slot.wrapping_sub(run[0].slot) as usize == run.len() - 1;
                for (k, &item) in run.iter().enumerate() {
                    if stream {
                        // Items of the run's own cache only (the next run is mostly the same
                        // cache's: runs end at MAX_RUN items); another cache's are not looked up.
                        if let Some(&far) = item_at(k + STREAM_SLOT_AHEAD) {
                            if far.cache == id {
                                cache.prefetch_slot(far.slot);
                            }
                        }
                        if let Some(&near) = item_at(k + STREAM_PAYLOAD_AHEAD) {
                            if near.cache == id {
                                cache.prefetch_payload(near.slot);
                            }
                        }
                    } else {
                        if let Some(&far) = item_at(k + LOOKAHEAD_FAR) {
                            if let Some(c) = viewable(&mut held, (id, cache), far) {
                                c.prefetch_slot(far.slot);
                            }
                        }
                        if let Some(&near) = item_at(k + LOOKAHEAD_NEAR) {
                            if let Some(c) = viewable(&mut held, (id, cache), near) {
                                c.prefetch_dependents(near.slot, &policy);
                            }
                        }
                    }
                    let judge = |slot: &mut Slot| {
                        let decided = policy.decide(
                            pass,
                            slot.candidate(),
                            freed + run_freed,
                            requeues.allowed(),
                        );
                        if decided == EvictionResult::Requeue {
                            slot.mark_requeued(now);
                        }
                        decided
                    };
                    let judged = if stream {
                        cache.visit_in_stream(item.slot, judge)
                    } else {
                        cache.visit(item.slot, judge)
                    };
                    match judged {
                        Visit::Stale => {
                            if cache.is_drained() {
                                drained.push(id);
                            }
                        }
                        Visit::Removed(size, payload) => {
                            // Owned bytes are freed on the spot, while their header is in cache;
                            // external buffers go back, to be released with no lock held.
                            set_aside(payload, released);
                            run_removed += 1;
                            run_freed += u64::from(size);
                        }
                        Visit::Requeued(slot) => {
                            requeues.push(QueueItem::new(id, slot));
                            requeued += 1;
                        }
                        Visit::Stopped => {
                            handled = k;
                            break;
                        }
                    }
                }
                if let Some(g) = listed_guard {
                    held.put_back(id, g);
                }
                drop(added_guard);
                unpublished = (unpublished.0 + run_removed, unpublished.1 + run_freed);
                removed += run_removed;
                freed += run_freed;
                // Counted from the last hand-over to waiters, not from one `take` made to read the
                // table, so that publishing keeps its period however often new caches turn up.
                since_hand_over += run.len();
                if since_hand_over >= MAX_RUN {
                    since_hand_over = 0;
                    held.let_waiters_in();
                    self.take_off_totals(std::mem::take(&mut unpublished));
                }
                handled
            },
        );
        held.release_all();
        self.take_off_totals(unpublished);
        self.release_drained_ids(&drained);
        self.counters.evicted.fetch_add(removed, Ordering::Relaxed);
        self.counters
            .evicted_bytes
            .fetch_add(freed, Ordering::Relaxed);
        self.counters
            .requeued
            .fetch_add(requeued, Ordering::Relaxed);
        (removed, freed)
    }
}
