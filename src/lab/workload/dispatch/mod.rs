//! Pulsar's dispatchers, one module each, each with its own state ([`Dispatcher`]) and its own
//! estimate (what [`WorkloadSpec::estimate`] and [`WorkloadSpec::footprint`] count of it). What
//! they share is here: choosing the dispatcher, the nack timer's request, the replay queue's
//! entry points.

pub(super) mod exclusive;
pub(super) mod key_shared;
pub(super) mod shared;

use super::events::REASON_NACK;
use super::generate::{Sim, Task};
use super::spec::{SubscriptionType, WorkloadSpec};
use exclusive::SingleState;
use key_shared::KeySharedState;
use shared::SharedState;

/// A subscription's dispatcher and what it alone keeps.
pub(in crate::lab::workload) enum Dispatcher {
    /// Exclusive and Failover.
    Single(SingleState),
    Shared(SharedState),
    KeyShared(KeySharedState),
}

impl Dispatcher {
    /// The dispatcher of a subscription of `kind` with `consumers` consumers (the workload-wide
    /// index of its first is `first_consumer`), on a partition whose index picks a Failover
    /// subscription's active consumer (`failover_index`).
    pub(in crate::lab::workload) fn new(
        spec: &WorkloadSpec,
        kind: SubscriptionType,
        consumers: usize,
        first_consumer: u64,
        failover_index: Option<usize>,
    ) -> Self {
        match kind {
            SubscriptionType::Exclusive | SubscriptionType::Failover => {
                Dispatcher::Single(SingleState::new(kind, consumers, failover_index))
            }
            SubscriptionType::Shared => Dispatcher::Shared(SharedState::default()),
            SubscriptionType::KeyShared => {
                Dispatcher::KeyShared(KeySharedState::new(spec, consumers, first_consumer))
            }
        }
    }

    /// The lowest entry the dispatcher holds for redelivery: Exclusive/Failover's nacked
    /// entries, Shared/Key_Shared's replay queue.
    pub(in crate::lab::workload) fn lowest_held(&self) -> Option<u64> {
        match self {
            Dispatcher::Single(st) => st.nacked.first().copied(),
            Dispatcher::Shared(st) => st.replay.first().copied(),
            Dispatcher::KeyShared(st) => st.lowest_held(),
        }
    }

    /// The last consumer left, or the cursor was reset: the replay queue is dropped.
    pub(in crate::lab::workload) fn clear_replay(&mut self) {
        match self {
            Dispatcher::Single(_) => {}
            Dispatcher::Shared(st) => st.replay.clear(),
            Dispatcher::KeyShared(st) => st.clear_replay(),
        }
    }

    /// Exclusive/Failover: the entries negatively acknowledged and not acknowledged since.
    pub(in crate::lab::workload) fn nacked_mut(
        &mut self,
    ) -> Option<&mut std::collections::BTreeSet<u64>> {
        match self {
            Dispatcher::Single(st) => Some(&mut st.nacked),
            _ => None,
        }
    }

    /// Failover: no reads before this time (the active consumer was just chosen).
    pub(in crate::lab::workload) fn resume_at(&self) -> Option<u64> {
        match self {
            Dispatcher::Single(st) => Some(st.resume_at),
            _ => None,
        }
    }
}

/// Share of the entries read that add rows as they come back: negative acks (`nacked`, the share
/// redelivered), and for Shared and Key_Shared overflow and hold-back, often when some consumers
/// are `slow` (`n`: messages an entry).
pub(super) fn redelivered_rows(
    kind: SubscriptionType,
    nacked: f64,
    slow: bool,
    several_consumers: bool,
    n: f64,
) -> f64 {
    match kind {
        SubscriptionType::Exclusive | SubscriptionType::Failover => {
            exclusive::redelivered_rows(nacked)
        }
        SubscriptionType::Shared => shared::redelivered_rows(nacked, slow, several_consumers, n),
        SubscriptionType::KeyShared => key_shared::redelivered_rows(nacked, slow),
    }
}

/// Entries a subscription's replay queue holds when its consumers fall `behind` entries behind
/// the publish rate over the run; None when it has none (Exclusive, Failover).
pub(super) fn replay_held(spec: &WorkloadSpec, kind: SubscriptionType, behind: f64) -> Option<f64> {
    match kind {
        SubscriptionType::Exclusive | SubscriptionType::Failover => None,
        SubscriptionType::Shared => Some(behind),
        SubscriptionType::KeyShared => Some(key_shared::replay_held(spec, behind)),
    }
}

impl Sim {
    pub(in crate::lab::workload) fn dispatch(&mut self, t: u64, p: usize, s: usize) {
        self.consume(t, p, s);
        let sub = &self.parts[p].subs[s];
        if sub.active {
            // Only Failover waits: the others resumed at their last connect, never after now.
            if let Some(at) = sub.dispatcher.resume_at().filter(|&at| t < at) {
                self.schedule_dispatch(at, p, s);
            } else {
                match sub.kind {
                    SubscriptionType::Exclusive | SubscriptionType::Failover => {
                        self.dispatch_single(t, p, s)
                    }
                    SubscriptionType::Shared => self.dispatch_shared(t, p, s),
                    SubscriptionType::KeyShared => self.dispatch_key_shared(t, p, s),
                }
            }
        }
        self.plan_flows(t, p, s);
    }

    /// A consumer's nack timer fires: the client asks for the redelivery of the entries due
    /// (`NegativeAcksTracker.triggerRedelivery` -> `ConsumerImpl.redeliverUnacknowledgedMessages`
    /// with their ids). Shared, Key_Shared: the dispatcher puts them in the replay queue
    /// (`PersistentDispatcherMultipleConsumers.redeliverUnacknowledgedMessages`). Exclusive,
    /// Failover: single messages cannot be redelivered, so the client asks for everything
    /// unacknowledged (see [`Sim::redeliver_unacknowledged`]).
    pub(in crate::lab::workload) fn redeliver_nacked(
        &mut self,
        t: u64,
        p: usize,
        s: usize,
        c: usize,
    ) {
        if !self.parts[p].subs[s].consumers[c].nacks.fires_at(t) {
            return;
        }
        let mut wake = self.consume(t, p, s);
        let (due, next) = self.parts[p].subs[s].consumers[c].nacks.fire(t);
        if let Some(at) = next {
            self.schedule(at, Task::NegativeAcks(p as u32, s as u32, c as u32));
        }
        let sub = &self.parts[p].subs[s];
        if sub.kind.has_single_active_consumer() {
            // While the active consumer's first read waits for the failover delay, the
            // dispatcher ignores the request (`internalRedeliverUnacknowledgedMessages` returns
            // while `readOnActiveConsumerTask` is set); the client's queue is empty then.
            let ignored = sub.kind == SubscriptionType::Failover
                && sub.dispatcher.resume_at().is_some_and(|at| t < at);
            if !due.is_empty() && !ignored {
                self.redeliver_unacknowledged(t, p, s);
                wake = true;
            }
        } else {
            for idx in due {
                // Pulsar's redelivery of positions does not know their sticky-key hash.
                if self.add_to_replay(p, s, idx, false) {
                    self.emit_redeliver(t, p, s, idx, REASON_NACK);
                }
                wake = true;
            }
        }
        if wake {
            self.schedule_dispatch(t, p, s);
        }
    }

    /// Adds an entry to the replay queue; false if it was there already. On Key_Shared an entry
    /// added `with_hash` blocks its key for normal reads and is replayed only when its consumer
    /// has permits; one added without (a negative ack) does neither until a replay read holds it
    /// back, which records its hash.
    pub(in crate::lab::workload) fn add_to_replay(
        &mut self,
        p: usize,
        s: usize,
        idx: u64,
        with_hash: bool,
    ) -> bool {
        let slot = self.replay_slot(p, s, idx);
        match &mut self.parts[p].subs[s].dispatcher {
            Dispatcher::Single(_) => false,
            Dispatcher::Shared(st) => st.replay.insert(idx),
            Dispatcher::KeyShared(st) => {
                let (hash, bucket) = slot.unwrap_or_default();
                st.add(idx, hash, bucket, with_hash)
            }
        }
    }

    /// Where a Key_Shared subscription keeps an entry in its replay queue: its key's hash and
    /// consumer (None on the other types, which use one set).
    fn replay_slot(&self, p: usize, s: usize, idx: u64) -> Option<(u32, usize)> {
        match self.parts[p].subs[s].dispatcher {
            Dispatcher::KeyShared(_) => Some(self.route(p, s, idx)),
            _ => None,
        }
    }

    pub(in crate::lab::workload) fn remove_from_replay(&mut self, p: usize, s: usize, idx: u64) {
        let slot = self.replay_slot(p, s, idx);
        match &mut self.parts[p].subs[s].dispatcher {
            Dispatcher::Single(_) => {}
            Dispatcher::Shared(st) => {
                st.replay.remove(&idx);
            }
            Dispatcher::KeyShared(st) => {
                let (hash, bucket) = slot.unwrap_or_default();
                st.remove(idx, hash, bucket);
            }
        }
    }
}
