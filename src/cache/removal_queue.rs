//! PIP-430's broker-wide removal queue: every cached entry of every ledger, in insertion order.
//!
//! Producers (inserting threads) push lock-free onto an ingestion queue (crossbeam's `Injector`). The
//! queue proper is a plain `VecDeque` owned by whoever holds the evictor lock, so one evictor runs at
//! a time and walks the queue without atomics; it moves ingested items over in batches (one CAS per
//! batch, not per item) before it looks at the tail. Items name an entry by (cache id, slot) instead
//! of holding a pointer, so the queue is 8 bytes per entry. A slot whose entry was removed by other
//! means stays a tombstone until its item reaches the head (MISSING), so an item never names a newer
//! occupant (see `range_cache`).

use crossbeam_deque::{Injector, Steal, Worker};
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;

/// One entry's place in the queue: which cache, which slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueItem {
    pub(crate) cache: u32,
    pub(crate) slot: u32,
}

impl QueueItem {
    /// An item naming slot `slot` of cache `cache`.
    pub fn new(cache: u32, slot: u32) -> Self {
        QueueItem { cache, slot }
    }
}

/// What an eviction pass does with the entry at the head of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionResult {
    /// Evict it.
    Remove,
    /// Keep it: move it to the tail with a fresh timestamp (its TTL is extended).
    Requeue,
    /// Leave it at the head and end the pass.
    Stop,
}

/// What kind of pass runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Evict entries stamped before `expire_before_ns`; stop at the first that is not.
    Time { expire_before_ns: u64 },
    /// Evict oldest-first until `bytes_to_free` are freed; timestamps play no part.
    Size { bytes_to_free: u64 },
}

/// The two TTL extensions of PIP-430.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictionPolicy {
    /// How many times an entry that still expects reads may be requeued (0: never).
    pub max_requeues: u32,
    /// Requeue an entry that was read since its last check.
    pub extend_recently_accessed: bool,
}

impl EvictionPolicy {
    pub fn from_config(config: &crate::config::CacheConfig) -> Self {
        EvictionPolicy {
            max_requeues: config.effective_max_requeues(),
            extend_recently_accessed: config.effective_extend_recently_accessed(),
        }
    }

    pub fn should_requeue(
        &self,
        accessed: bool,
        has_expected_reads: bool,
        requeue_count: u16,
    ) -> bool {
        (self.extend_recently_accessed && accessed)
            || (has_expected_reads && u32::from(requeue_count) < self.max_requeues)
    }

    /// The decision for one live entry. `freed` is what this pass has freed so far; when
    /// `requeue_allowed` is false the pass has run out of requeues (see [`Evictor::run`]).
    pub(crate) fn decide(
        &self,
        pass: Pass,
        entry: Candidate,
        freed: u64,
        requeue_allowed: bool,
    ) -> EvictionResult {
        let requeue = || {
            requeue_allowed
                && self.should_requeue(
                    entry.accessed,
                    entry.has_expected_reads,
                    entry.requeue_count,
                )
        };
        match pass {
            Pass::Time { expire_before_ns } => {
                if entry.timestamp_ns >= expire_before_ns {
                    EvictionResult::Stop
                } else if requeue() {
                    EvictionResult::Requeue
                } else {
                    EvictionResult::Remove
                }
            }
            Pass::Size { bytes_to_free } => {
                if freed >= bytes_to_free {
                    EvictionResult::Stop
                } else if requeue() {
                    EvictionResult::Requeue
                } else {
                    EvictionResult::Remove
                }
            }
        }
    }
}

/// What the eviction decision looks at of an entry. The queue names entries by slot and knows
/// nothing of how a cache stores them; the cache hands this over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// When the entry was inserted or last requeued.
    pub timestamp_ns: u64,
    /// Read since its last check.
    pub accessed: bool,
    pub has_expected_reads: bool,
    pub requeue_count: u16,
}

/// The queue. Push from any thread; evict through [`RemovalQueue::lock`].
#[derive(Default)]
pub struct RemovalQueue {
    ingest: Injector<QueueItem>,
    order: Mutex<Staged>,
}

/// The evictor's side: the ordered queue, a buffer that ingested batches pass through, and one that
/// requeued items pass through.
struct Staged {
    order: VecDeque<QueueItem>,
    batch: Worker<QueueItem>,
    /// Empty between passes, keeping its capacity (16 KiB at most: it never holds more than a
    /// stretch and a run of items). Grown afresh each pass, it asked glibc's malloc for blocks of
    /// KiBs, on which malloc first consolidates every small block freed since (the payloads the
    /// pass had just freed, which the next inserts would have reused as they were). With the
    /// system allocator, 10,000 entries a ms timed while the cache still grew: passes 95-98 ->
    /// 60-61 ns/entry; in benches/eviction.rs' steady state glibc's free of each payload dominates
    /// and both were 134-136. tests/pass_allocations.rs fails if a steady pass asks for such a
    /// block again.
    requeued: Vec<QueueItem>,
}

impl Default for Staged {
    fn default() -> Self {
        Staged {
            order: VecDeque::new(),
            batch: Worker::new_fifo(),
            requeued: Vec::new(),
        }
    }
}

impl RemovalQueue {
    /// Items in the queue (waits for a running evictor).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends an entry; callable from any thread, never waits. When no evictor is running the item
    /// goes straight into the ordered queue; otherwise onto the lock-free ingestion queue, which the
    /// evictor (or the next direct push) moves over first, so insertion order is kept either way.
    pub fn push(&self, item: QueueItem) {
        self.push_all(std::slice::from_ref(&item));
    }

    /// Appends `items` in order, as [`RemovalQueue::push`] of each would, looking at the lock once.
    pub fn push_all(&self, items: &[QueueItem]) {
        match self.order.try_lock() {
            Some(mut staged) => {
                if !self.ingest.is_empty() {
                    move_ingested(&self.ingest, &mut staged);
                }
                staged.order.extend(items.iter().copied());
            }
            None => items.iter().for_each(|&item| self.ingest.push(item)),
        }
    }

    /// Becomes the evictor, waiting for the current one to finish.
    pub(crate) fn lock(&self) -> Evictor<'_> {
        Evictor {
            ingest: &self.ingest,
            staged: self.order.lock(),
        }
    }
}

/// Moves everything ingested so far to the tail of the ordered queue; returns how many.
fn move_ingested(ingest: &Injector<QueueItem>, staged: &mut Staged) -> usize {
    let Staged { order, batch, .. } = staged;
    let before = order.len();
    loop {
        match ingest.steal_batch(batch) {
            Steal::Success(()) => order.extend(std::iter::from_fn(|| batch.pop())),
            Steal::Empty => break,
            Steal::Retry => std::hint::spin_loop(),
        }
    }
    order.len() - before
}

/// The most items of one cache a visitor gets at once. The manager holds that cache's lock for a
/// run, so this bounds how long other threads wait for it; a longer stretch of one cache's items
/// comes as several runs.
pub(crate) const MAX_RUN: usize = 256;

/// At most how many items a pass handles between two updates of the queue (see [`Evictor::run`]).
const STRETCH: usize = 4 * MAX_RUN;

/// How many items after a run its visitor also sees, to prefetch what they will touch (the
/// farthest any visitor looks ahead: see `manager::pass`).
pub(crate) const LOOKAHEAD: usize = 128;

/// A pass's allowance of requeues, and the items requeued during the current run (they go to the
/// tail when the run ends).
pub(crate) struct Requeues {
    budget: u64,
    items: Vec<QueueItem>,
}

impl Requeues {
    /// Whether the pass may still requeue (see [`Evictor::run`]).
    #[inline]
    pub fn allowed(&self) -> bool {
        self.budget > 0
    }

    /// Moves `item` (the one being visited) to the tail.
    #[inline]
    pub fn push(&mut self, item: QueueItem) {
        self.budget = self.budget.saturating_sub(1);
        self.items.push(item);
    }
}

/// Exclusive access to the queue for one eviction pass.
pub(crate) struct Evictor<'a> {
    ingest: &'a Injector<QueueItem>,
    staged: MutexGuard<'a, Staged>,
}

impl Evictor<'_> {
    fn take_ingested(&mut self) -> usize {
        if self.ingest.is_empty() {
            return 0;
        }
        move_ingested(self.ingest, &mut self.staged)
    }

    /// Items the queue has room for without growing, and its requeue buffer's (what they take in
    /// memory).
    pub(crate) fn capacity(&mut self) -> usize {
        self.take_ingested();
        self.staged.order.capacity() + self.staged.requeued.capacity()
    }

    /// Items in the queue, stale ones included.
    pub(crate) fn len(&mut self) -> usize {
        self.take_ingested();
        self.staged.order.len()
    }

    /// Runs one pass. `visit` gets the items at the head in runs: consecutive items of one cache,
    /// at most [`MAX_RUN`], and up to [`LOOKAHEAD`] of the items after the run (to prefetch for;
    /// they come again as runs of their own). For each item in order it decides and acts on the
    /// entry (removes it, drops a stale item, or marks it requeued and pushes it onto
    /// `requeues`), and returns how many items it handled; fewer than the run's length ends the
    /// pass, leaving the first unhandled item at the head (STOP). The handled items leave the
    /// head, and the requeued ones go to the tail after everything inserted until then, at the
    /// end of each stretch of at most [`STRETCH`] items (and at STOP). Ends on STOP or an empty
    /// queue.
    ///
    /// A requeue is allowed while the pass has budget. Single-threaded, an entry is requeued at
    /// most `max_requeues + 1` times per pass (once for an access, then for expected reads), so a
    /// pass gets that many requeues per item it can see; only readers touching entries
    /// concurrently, over and over, could exhaust it, and then the pass removes instead of cycling
    /// forever.
    pub fn run(
        &mut self,
        max_requeues: u32,
        mut visit: impl FnMut(&[QueueItem], &[QueueItem], &mut Requeues) -> usize,
    ) {
        self.take_ingested();
        let per_item = u64::from(max_requeues) + 1;
        let mut requeues = Requeues {
            budget: self.staged.order.len() as u64 * per_item,
            items: std::mem::take(&mut self.staged.requeued),
        };
        // Items handled but still at the head: they leave it, and the requeued ones join the tail,
        // once per stretch of up to STRETCH items rather than after every run (with topics
        // interleaved a run is often one item, and that update cost about as much as judging it).
        // A requeued item is met again only after every item ahead of it either way, so nothing
        // a single thread does changes order.
        let mut done = 0;
        loop {
            let head = &self.staged.order.as_slices().0[done..];
            let (len, handled) = match head.first() {
                Some(first) => {
                    let len = head
                        .iter()
                        .take(MAX_RUN)
                        .take_while(|item| item.cache == first.cache)
                        .count();
                    let ahead = &head[len..head.len().min(len + LOOKAHEAD)];
                    (len, visit(&head[..len], ahead, &mut requeues).min(len))
                }
                None => (0, 0),
            };
            done += handled;
            let stop = handled < len;
            if len == 0 || stop || done >= STRETCH {
                self.staged.order.drain(..done);
                done = 0;
                // Everything inserted until now goes ahead of the requeued entries.
                requeues.budget += self.take_ingested() as u64 * per_item;
                self.staged.order.extend(requeues.items.drain(..));
                if stop || self.staged.order.is_empty() {
                    break;
                }
            }
        }
        // Drained above; kept for the next pass.
        self.staged.requeued = requeues.items;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(cache: u32, slot: u32) -> QueueItem {
        QueueItem::new(cache, slot)
    }

    #[test]
    fn keeps_insertion_order_and_puts_requeued_items_behind_later_inserts() {
        let q = RemovalQueue::default();
        q.push(item(0, 1));
        q.push(item(0, 2));
        let mut seen = Vec::new();
        let mut e = q.lock();
        e.run(5, |run, _, requeues| {
            for &it in run {
                seen.push(it.slot);
                if it.slot == 1 && seen.len() == 1 {
                    q.push(item(0, 3));
                    requeues.push(it);
                }
            }
            run.len()
        });
        assert_eq!(seen, vec![1, 2, 3, 1]);
        assert_eq!(e.len(), 0);
    }

    #[test]
    fn push_all_keeps_order_with_an_evictor_running_or_not() {
        let q = RemovalQueue::default();
        q.push(item(0, 1));
        q.push_all(&[item(0, 2), item(0, 3)]);
        let mut seen = Vec::new();
        q.lock().run(0, |run, _, _| {
            for &it in run {
                seen.push(it.slot);
                if it.slot == 1 {
                    // The evictor holds the queue: these go through the ingestion queue.
                    q.push_all(&[item(0, 4), item(0, 5)]);
                    q.push(item(0, 6));
                }
            }
            run.len()
        });
        assert_eq!(seen, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn runs_are_one_cache_each_and_at_most_max_run_long() {
        let q = RemovalQueue::default();
        let caches = [0, 0, 1, 1, 1, 0];
        for (slot, &cache) in caches.iter().enumerate() {
            q.push(item(cache, slot as u32));
        }
        for slot in 0..(MAX_RUN as u32 + 44) {
            q.push(item(2, slot));
        }
        let mut runs = Vec::new();
        q.lock().run(0, |run, ahead, _| {
            runs.push((run[0].cache, run.len(), ahead.len()));
            assert!(run.iter().all(|it| it.cache == run[0].cache));
            run.len()
        });
        // Each run sees the items after it, up to LOOKAHEAD.
        let after = |n: usize| n.min(LOOKAHEAD);
        assert_eq!(
            runs,
            vec![
                (0, 2, after(4 + MAX_RUN + 44)),
                (1, 3, after(1 + MAX_RUN + 44)),
                (0, 1, after(MAX_RUN + 44)),
                (2, MAX_RUN, after(44)),
                (2, 44, 0),
            ]
        );
    }

    #[test]
    fn a_stop_inside_a_run_keeps_the_unhandled_items_and_the_requeued_ones() {
        let q = RemovalQueue::default();
        for slot in 0..4 {
            q.push(item(0, slot));
        }
        let mut e = q.lock();
        e.run(1, |run, _, requeues| {
            requeues.push(run[0]);
            1
        });
        // Item 0 went to the tail; items 1..3 stay, 1 at the head.
        let mut seen = Vec::new();
        e.run(0, |run, _, _| {
            seen.extend(run.iter().map(|it| it.slot));
            run.len()
        });
        assert_eq!(seen, vec![1, 2, 3, 0]);
    }

    #[test]
    fn stop_leaves_the_head_in_place() {
        let q = RemovalQueue::default();
        q.push(item(0, 1));
        q.lock().run(0, |_, _, _| 0);
        assert_eq!(q.lock().len(), 1);
    }

    proptest::proptest! {
        /// Passes over queues several stretches long (runs of any length, a quarter of the items
        /// requeued, passes stopped now and then) visit items in the order of the plain model, a
        /// queue that pops its head and pushes a requeued item onto its tail, and leave as many
        /// items behind.
        #[test]
        fn passes_visit_in_the_order_of_a_plain_queue(
            caches in proptest::collection::vec(0u32..3, 1..3 * STRETCH),
            requeued in proptest::collection::vec(proptest::bool::weighted(0.25), 1..512),
            stops in proptest::collection::btree_set(0usize..4 * STRETCH, 0..4),
        ) {
            let q = RemovalQueue::default();
            let mut model: VecDeque<QueueItem> = VecDeque::new();
            // A few items first, taken off the head, so that the ring buffer wraps.
            for slot in 0..7 {
                q.push(item(9, slot));
            }
            q.lock().run(0, |run, _, _| run.len());
            for (slot, &cache) in caches.iter().enumerate() {
                q.push(item(cache, slot as u32));
                model.push_back(item(cache, slot as u32));
            }
            // The visit with index n: whether it requeues, whether a pass stops at it (once).
            let requeue = |n: usize| requeued[n % requeued.len()];
            let (mut seen, mut expected) = (Vec::new(), Vec::new());
            let (mut stops_model, mut stops_real) = (stops.clone(), stops.clone());
            let mut e = q.lock();
            for _ in 0..=stops.len() {
                let mut budget = model.len() as u64 * 2;
                while let Some(&it) = model.front() {
                    if stops_model.remove(&expected.len()) {
                        break;
                    }
                    expected.push(it);
                    model.pop_front();
                    if requeue(expected.len()) && budget > 0 {
                        budget -= 1;
                        model.push_back(it);
                    }
                }
                e.run(1, |run, _, requeues| {
                    for (i, &it) in run.iter().enumerate() {
                        if stops_real.remove(&seen.len()) {
                            return i;
                        }
                        seen.push(it);
                        if requeue(seen.len()) && requeues.allowed() {
                            requeues.push(it);
                        }
                    }
                    run.len()
                });
                proptest::prop_assert_eq!(&seen, &expected);
            }
            proptest::prop_assert_eq!(e.len(), model.len());
        }
    }

    #[test]
    fn requeue_budget_ends_a_pass_that_would_cycle() {
        let q = RemovalQueue::default();
        for i in 0..10 {
            q.push(item(0, i));
        }
        let mut visits = 0;
        q.lock().run(2, |run, _, requeues| {
            for &it in run {
                visits += 1;
                if requeues.allowed() {
                    requeues.push(it);
                }
            }
            run.len()
        });
        assert_eq!(visits, 10 * 3 + 10);
        assert_eq!(q.lock().len(), 0);
    }
}
