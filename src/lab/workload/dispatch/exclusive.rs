//! Exclusive and Failover: one active consumer, reads of min(permits, read batch) entries, and
//! negative acks that rewind the cursor.

use super::Dispatcher;
use crate::lab::workload::generate::Sim;
use crate::lab::workload::spec::SubscriptionType;
use std::collections::BTreeSet;

/// What an Exclusive or Failover dispatcher keeps.
pub(in crate::lab::workload) struct SingleState {
    /// The consumer that gets the entries.
    pub(in crate::lab::workload) active_consumer: usize,
    /// Failover: no reads before this time (the active consumer was just chosen).
    pub(in crate::lab::workload) resume_at: u64,
    /// Entries negatively acknowledged and not acknowledged since.
    pub(in crate::lab::workload) nacked: BTreeSet<u64>,
}

impl SingleState {
    pub(super) fn new(
        kind: SubscriptionType,
        consumers: usize,
        failover_index: Option<usize>,
    ) -> Self {
        SingleState {
            active_consumer: active_consumer(kind, consumers, failover_index),
            resume_at: 0,
            nacked: BTreeSet::new(),
        }
    }
}

/// The active consumer: on Failover, a partitioned topic's is picked by partition index
/// (`failover_index`); else the first.
pub(in crate::lab::workload) fn active_consumer(
    kind: SubscriptionType,
    consumers: usize,
    failover_index: Option<usize>,
) -> usize {
    match failover_index {
        Some(k) if kind == SubscriptionType::Failover && consumers > 0 => k % consumers,
        _ => 0,
    }
}

/// The estimate's rows a negative ack adds (`nacked`: the share of entries read redelivered): an
/// `individual_ack`, a `rewind` and a re-read each.
pub(super) fn redelivered_rows(nacked: f64) -> f64 {
    3.0 * nacked
}

impl Sim {
    /// Exclusive/Failover: read min(permits, read batch) entries for the active consumer while it
    /// has permits; at the end of the topic, park the read until an entry is published.
    pub(in crate::lab::workload) fn dispatch_single(&mut self, t: u64, p: usize, s: usize) {
        let batch = self.spec.read_batch_size as u64;
        let Dispatcher::Single(st) = &self.parts[p].subs[s].dispatcher else {
            return;
        };
        let c = st.active_consumer;
        loop {
            if let Some(read) = self.parked_read(t, p, s) {
                for idx in read {
                    self.deliver(p, s, c, idx);
                }
                continue;
            }
            if self.parts[p].subs[s].waiting.is_some() {
                return;
            }
            let available = self.parts[p].published - self.parts[p].subs[s].read_idx;
            let permits = self.parts[p].subs[s].consumers[c].permits;
            if permits <= 0 {
                return;
            }
            let n = (permits as u64).min(batch).min(self.read_cap(p)).max(1);
            if available == 0 {
                self.park(t, p, s, n);
                return;
            }
            for idx in self.read_entries(t, p, s, n.min(available)) {
                self.deliver(p, s, c, idx);
            }
        }
    }

    /// Exclusive, Failover: the client drops its receiver queue, counting the dropped messages as
    /// freed permits, and asks for everything unacknowledged
    /// (`ConsumerImpl.redeliverUnacknowledgedMessages()`); the dispatcher rewinds the cursor
    /// (`PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages`), and its reads
    /// pass over what was acknowledged.
    pub(in crate::lab::workload) fn redeliver_unacknowledged(
        &mut self,
        t: u64,
        p: usize,
        s: usize,
    ) {
        let threshold = self.flow_threshold;
        let first = self.first_unacked(p, s);
        for c in &mut self.parts[p].subs[s].consumers {
            c.unflowed += c.queued;
            c.queue.clear();
            c.queued = 0;
            c.front_done = 0;
            c.carry = 0.0;
            c.flow_at = None;
            if c.unflowed >= threshold {
                c.permits += c.unflowed as i64;
                c.unflowed = 0;
            }
        }
        self.rewind(t, p, s, first);
        self.parts[p].subs[s].waiting = None;
    }
}
