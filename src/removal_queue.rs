//! PIP-430's broker-wide removal queue: every cached entry of every ledger, in insertion order.
//!
//! Producers (inserting threads) push lock-free onto an ingestion queue. The queue proper is a plain
//! `VecDeque` owned by whoever holds the evictor lock, so one evictor runs at a time and walks the
//! queue without atomics; it moves ingested items over before it looks at the tail. Items name an
//! entry by (cache id, slot, serial) instead of holding a pointer, so the queue is 12 bytes per entry
//! and an entry removed by other means is recognised as stale (MISSING) when it reaches the head.

use crate::range_cache::{Slot, SlotRef};
use crossbeam_queue::SegQueue;
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;

/// One entry's place in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueItem {
    pub cache: u32,
    pub slot: SlotRef,
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
    /// It was already removed by other means; drop the queue item.
    Missing,
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
        slot: &Slot,
        freed: u64,
        requeue_allowed: bool,
    ) -> EvictionResult {
        let requeue = || {
            requeue_allowed
                && self.should_requeue(slot.accessed, slot.has_expected_reads(), slot.requeue_count)
        };
        match pass {
            Pass::Time { expire_before_ns } => {
                if slot.timestamp_ns >= expire_before_ns {
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

/// Marks a slot requeued: fresh timestamp, not accessed, one more extension used.
pub(crate) fn mark_requeued(slot: &mut Slot, now_ns: u64) {
    slot.timestamp_ns = now_ns;
    slot.accessed = false;
    slot.requeue_count = slot.requeue_count.saturating_add(1);
}

#[derive(Default)]
pub(crate) struct RemovalQueue {
    ingest: SegQueue<QueueItem>,
    order: Mutex<VecDeque<QueueItem>>,
}

impl RemovalQueue {
    /// Appends an entry; lock-free, callable from any thread.
    pub fn push(&self, item: QueueItem) {
        self.ingest.push(item);
    }

    /// Becomes the evictor, waiting for the current one to finish.
    pub fn lock(&self) -> Evictor<'_> {
        Evictor {
            ingest: &self.ingest,
            order: self.order.lock(),
        }
    }
}

/// Exclusive access to the queue for one eviction pass.
pub(crate) struct Evictor<'a> {
    ingest: &'a SegQueue<QueueItem>,
    order: MutexGuard<'a, VecDeque<QueueItem>>,
}

impl Evictor<'_> {
    fn take_ingested(&mut self) -> usize {
        let mut n = 0;
        while let Some(item) = self.ingest.pop() {
            self.order.push_back(item);
            n += 1;
        }
        n
    }

    /// Items in the queue, stale ones included.
    pub fn len(&mut self) -> usize {
        self.take_ingested();
        self.order.len()
    }

    /// Runs one pass: `visit` decides for the head item (and performs the removal or the requeue
    /// marking on the entry); the queue moves the item accordingly. Ends on STOP or an empty queue.
    ///
    /// `visit` also gets whether a requeue is still allowed. Single-threaded, an entry is requeued at
    /// most `max_requeues + 1` times per pass (once for an access, then for expected reads), so a pass
    /// gets that many requeues per item it can see; only readers touching entries concurrently, over
    /// and over, could exhaust it, and then the pass removes instead of cycling forever.
    pub fn run(
        &mut self,
        max_requeues: u32,
        mut visit: impl FnMut(QueueItem, bool) -> EvictionResult,
    ) {
        self.take_ingested();
        let per_item = u64::from(max_requeues) + 1;
        let mut requeue_budget = self.order.len() as u64 * per_item;
        loop {
            let Some(&head) = self.order.front() else {
                let n = self.take_ingested();
                if n == 0 {
                    break;
                }
                requeue_budget += n as u64 * per_item;
                continue;
            };
            match visit(head, requeue_budget > 0) {
                EvictionResult::Stop => break,
                EvictionResult::Remove | EvictionResult::Missing => {
                    self.order.pop_front();
                }
                EvictionResult::Requeue => {
                    self.order.pop_front();
                    // Everything inserted before this moment goes ahead of the requeued entry.
                    requeue_budget += self.take_ingested() as u64 * per_item;
                    requeue_budget = requeue_budget.saturating_sub(1);
                    self.order.push_back(head);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(cache: u32, slot: u32) -> QueueItem {
        QueueItem {
            cache,
            slot: SlotRef { slot, serial: 0 },
        }
    }

    #[test]
    fn keeps_insertion_order_and_puts_requeued_items_behind_later_inserts() {
        let q = RemovalQueue::default();
        q.push(item(0, 1));
        q.push(item(0, 2));
        let mut seen = Vec::new();
        let mut e = q.lock();
        e.run(5, |it, _| {
            seen.push(it.slot.slot);
            match it.slot.slot {
                1 if seen.len() == 1 => {
                    q.push(item(0, 3));
                    EvictionResult::Requeue
                }
                _ => EvictionResult::Remove,
            }
        });
        assert_eq!(seen, vec![1, 2, 3, 1]);
        assert_eq!(e.len(), 0);
    }

    #[test]
    fn stop_leaves_the_head_in_place() {
        let q = RemovalQueue::default();
        q.push(item(0, 1));
        q.lock().run(0, |_, _| EvictionResult::Stop);
        assert_eq!(q.lock().len(), 1);
    }

    #[test]
    fn requeue_budget_ends_a_pass_that_would_cycle() {
        let q = RemovalQueue::default();
        for i in 0..10 {
            q.push(item(0, i));
        }
        let mut visits = 0;
        q.lock().run(2, |_, allowed| {
            visits += 1;
            if allowed {
                EvictionResult::Requeue
            } else {
                EvictionResult::Remove
            }
        });
        assert_eq!(visits, 10 * 3 + 10);
        assert_eq!(q.lock().len(), 0);
    }
}
