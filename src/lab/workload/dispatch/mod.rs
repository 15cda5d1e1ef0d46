//! Pulsar's dispatchers, one module each; what they share (choosing the dispatcher, the nack
//! timer's request, the replay queue) is here.

pub(super) mod exclusive;
pub(super) mod key_shared;
pub(super) mod shared;

use super::cursor::Sub;
use super::events::REASON_NACK;
use super::generate::{Sim, Task};
use super::spec::SubscriptionType;
use std::collections::BTreeSet;

impl Sim {
    pub(in crate::lab::workload) fn dispatch(&mut self, t: u64, p: usize, s: usize) {
        self.consume(t, p, s);
        let sub = &self.parts[p].subs[s];
        if sub.active {
            if t < sub.resume_at {
                let at = sub.resume_at;
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
    pub(in crate::lab::workload) fn redeliver_nacked(&mut self, t: u64, p: usize, s: usize, c: usize) {
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
            let ignored = sub.kind == SubscriptionType::Failover && t < sub.resume_at;
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
    pub(in crate::lab::workload) fn add_to_replay(&mut self, p: usize, s: usize, idx: u64, with_hash: bool) -> bool {
        let (key_shared, hash, bucket) = self.replay_slot(p, s, idx);
        let sub = &mut self.parts[p].subs[s];
        if key_shared && !with_hash {
            if sub.replay[bucket].contains(&idx) || !sub.unhashed.insert(idx) {
                return false;
            }
            sub.replay_len += 1;
            return true;
        }
        let moved = key_shared && sub.unhashed.remove(&idx);
        if !sub.replay[bucket].insert(idx) {
            return false;
        }
        if key_shared {
            *sub.replay_hashes.entry(hash).or_insert(0) += 1;
        }
        if moved {
            return false;
        }
        sub.replay_len += 1;
        true
    }

    /// Where an entry sits in a subscription's replay queue: Key_Shared keeps it by its key's hash
    /// and consumer; the other types use one bucket. Returns (Key_Shared, hash, bucket).
    pub(in crate::lab::workload) fn replay_slot(&self, p: usize, s: usize, idx: u64) -> (bool, u32, usize) {
        if self.parts[p].subs[s].kind == SubscriptionType::KeyShared {
            let (hash, bucket) = self.route(p, s, idx);
            (true, hash, bucket)
        } else {
            (false, 0, 0)
        }
    }

    pub(in crate::lab::workload) fn remove_from_replay(&mut self, p: usize, s: usize, idx: u64) {
        let (key_shared, hash, bucket) = self.replay_slot(p, s, idx);
        let sub = &mut self.parts[p].subs[s];
        if sub.unhashed.remove(&idx) {
            sub.replay_len -= 1;
            return;
        }
        if !sub.replay[bucket].remove(&idx) {
            return;
        }
        sub.replay_len -= 1;
        if key_shared {
            if let Some(n) = sub.replay_hashes.get_mut(&hash) {
                *n -= 1;
                if *n == 0 {
                    sub.replay_hashes.remove(&hash);
                }
            }
        }
    }

    pub(in crate::lab::workload) fn clear_replay(sub: &mut Sub) {
        sub.replay.iter_mut().for_each(BTreeSet::clear);
        sub.replay_len = 0;
        sub.replay_hashes.clear();
        sub.unhashed.clear();
        sub.skip_next_replay = false;
    }
}
