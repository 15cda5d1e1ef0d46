//! The client side of a subscription: each consumer's receiver queue, processed at its speed (a
//! fluid model), the permits it gives back in FLOWs, its negative acks and grouped
//! acknowledgements, as Pulsar's Java client does.

use super::ack_grouping::{Grouping, PendingAcks};
use super::cursor::Sub;
use super::generate::{Sim, Task};
use super::negative_acks::NegativeAcks;
#[cfg(test)]
use crate::cache::position::Position;
use std::collections::VecDeque;

/// A consumer and its client: the receiver queue, and the permits on both sides of the FLOW.
pub(super) struct Consumer {
    /// Messages per microsecond.
    pub(super) speed: f64,
    /// Entries delivered and not fully processed yet, oldest first.
    pub(super) queue: VecDeque<u64>,
    /// Messages of the front entry already processed.
    pub(super) front_done: u64,
    /// Messages in the queue not processed yet.
    pub(super) queued: u64,
    /// The broker's count of messages it may still send (negative when a batch overshot).
    pub(super) permits: i64,
    /// Messages processed since the client's last FLOW.
    pub(super) unflowed: u64,
    pub(super) last_us: u64,
    pub(super) carry: f64,
    /// When `unflowed` reaches the FLOW threshold, if the queue holds enough to get there (reset
    /// when the queue is dropped, so the planned FLOW is ignored).
    pub(super) flow_at: Option<u64>,
    /// Processed entries negatively acknowledged, waiting for the client to ask for their
    /// redelivery (Shared, Key_Shared: those entries; Exclusive, Failover: everything
    /// unacknowledged).
    pub(super) nacks: NegativeAcks,
    /// What it acknowledged on their own and its client has not sent to the broker yet (kept
    /// only for a subscription that can rewind).
    pub(super) acks: PendingAcks,
}

impl Consumer {
    pub(super) fn new(speed: f64) -> Self {
        Consumer {
            speed,
            queue: VecDeque::new(),
            front_done: 0,
            queued: 0,
            permits: 0,
            unflowed: 0,
            last_us: 0,
            carry: 0.0,
            flow_at: None,
            nacks: NegativeAcks::default(),
            acks: PendingAcks::default(),
        }
    }

    /// The lowest entry this consumer holds unacknowledged as the broker sees it: in its receiver
    /// queue (not in entry order: a replayed entry comes after newer ones), acknowledged but not
    /// sent yet, or, with `nacks`, negatively acknowledged and waiting (on Exclusive and Failover
    /// a rewind may have redelivered a waiting one, which the tracker keeps until it is due: the
    /// subscription's `nacked` says what is unacknowledged).
    pub(super) fn oldest_held(&self, nacks: bool, grouping: Grouping) -> Option<u64> {
        let waiting = if nacks { self.nacks.lowest() } else { None };
        let unsent = self.acks.lowest(grouping);
        self.queue
            .iter()
            .copied()
            .chain(waiting)
            .chain(unsent)
            .min()
    }

    /// A (re)connected consumer: an empty queue and a FLOW for the whole receiver queue. Its
    /// client's trackers live on (`ConsumerImpl.connectionOpened` clears the receiver queue only).
    pub(super) fn connect(&mut self, t: u64, permits: i64) {
        self.drop_queue();
        self.permits = permits;
        self.last_us = t;
    }

    /// The consumer closes: its waiting nacks are forgotten with its tracker.
    pub(super) fn close(&mut self) {
        self.drop_queue();
        self.nacks.clear();
    }

    pub(super) fn drop_queue(&mut self) {
        self.queue.clear();
        self.front_done = 0;
        self.queued = 0;
        self.permits = 0;
        self.unflowed = 0;
        self.carry = 0.0;
        self.flow_at = None;
    }
}

impl Sim {
    /// The consumers of a subscription process their queues up to `t`, acknowledging each entry on
    /// its own, or negatively: then it waits in the consumer's tracker for its redelivery request
    /// (see [`Sim::redeliver_nacked`]). A consumer that has freed half its receiver queue sends
    /// FLOW. Returns whether the dispatcher has new work (a FLOW).
    pub(super) fn consume(&mut self, t: u64, p: usize, s: usize) -> bool {
        let threshold = self.flow_threshold;
        let delay_ms = self.nack_delay_ms;
        let grouping = self.grouping;
        let mut timers = Vec::new();
        let Sim { parts, rng, .. } = self;
        let part = &mut parts[p];
        let (first_msg, total) = (&part.first_msg, part.messages_published);
        let messages = |idx: u64| first_msg.messages(idx, total);
        let sub = &mut part.subs[s];
        let nack = sub.redelivery_rate;
        let paused = sub.paused;
        let mut received = 0;
        let mut wake = false;
        let Sub {
            consumers,
            pending_acks,
            dispatcher,
            rewinds,
            ..
        } = sub;
        // Exclusive, Failover: what is nacked and not acknowledged since.
        let mut nacked = dispatcher.nacked_mut();
        for (ci, c) in consumers.iter_mut().enumerate() {
            let since = c.last_us;
            let elapsed = t.saturating_sub(since) as f64;
            c.last_us = t;
            if c.queued == 0 || paused {
                c.carry = 0.0;
                continue;
            }
            let budget = c.carry + elapsed * c.speed;
            let mut can = (budget + 1e-9) as u64;
            let mut used = 0u64;
            while can > 0 {
                let Some(&idx) = c.queue.front() else { break };
                let m = messages(idx);
                let left = m - c.front_done;
                if can < left {
                    c.front_done += can;
                    used += can;
                    break;
                }
                can -= left;
                used += left;
                c.front_done = 0;
                c.queue.pop_front();
                // Processed `used` messages into this call's budget.
                let (carry, speed) = (c.carry, c.speed);
                let done = || {
                    let at = since as f64 + (used as f64 - carry).max(0.0) / speed;
                    (at as u64).clamp(since, t)
                };
                if nack > 0.0 && rng.chance(1.0 - (1.0 - nack).powi(m.min(i32::MAX as u64) as i32))
                {
                    if let Some(at) = c.nacks.add(done(), t, idx, delay_ms) {
                        timers.push((ci, at));
                    }
                    if let Some(nacked) = nacked.as_deref_mut() {
                        nacked.insert(idx);
                    }
                } else {
                    if let Some(nacked) = nacked.as_deref_mut() {
                        nacked.remove(&idx);
                    }
                    if *rewinds {
                        c.acks.ack(done(), idx, grouping, pending_acks);
                    }
                }
            }
            c.queued -= used;
            c.unflowed += used;
            received += used;
            c.carry = if c.queued > 0 {
                (budget - used as f64).max(0.0)
            } else {
                0.0
            };
            if c.unflowed >= threshold {
                c.permits += c.unflowed as i64;
                c.unflowed = 0;
                wake = true;
            }
        }
        // What the clients' timers sent by now, every ack of this call made.
        if *rewinds && grouping.group_us > 0 {
            for c in consumers.iter_mut() {
                c.acks.sent_by(t, grouping, pending_acks);
            }
        }
        sub.received += received;
        for (c, at) in timers {
            self.schedule(at, Task::NegativeAcks(p as u32, s as u32, c as u32));
        }
        wake
    }

    /// Plans the FLOW of every consumer that has none planned and holds enough to send one.
    pub(super) fn plan_flows(&mut self, t: u64, p: usize, s: usize) {
        let threshold = self.flow_threshold;
        if self.parts[p].subs[s].paused {
            return;
        }
        for c in 0..self.parts[p].subs[s].consumers.len() {
            let con = &self.parts[p].subs[s].consumers[c];
            if con.flow_at.is_some() || con.speed <= 0.0 {
                continue;
            }
            let need = threshold.saturating_sub(con.unflowed);
            if need == 0 || con.queued < need {
                continue;
            }
            let wait = ((need as f64 - con.carry) / con.speed).ceil().max(1.0);
            let at = (con.last_us as f64 + wait).min(u64::MAX as f64 / 2.0) as u64;
            let at = at.max(t);
            if self.schedule(at, Task::Flow(p as u32, s as u32, c as u32)) {
                self.parts[p].subs[s].consumers[c].flow_at = Some(at);
            }
        }
    }

    pub(super) fn deliver(&mut self, p: usize, s: usize, c: usize, idx: u64) {
        let m = self.parts[p].messages(idx);
        let (threshold, grouping) = (self.flow_threshold, self.grouping);
        #[cfg(test)]
        {
            let sub = &self.parts[p].subs[s];
            let at = Position::new(0, idx as i64);
            if sub.acked.contains(at) || sub.pending_acks.contains(at) {
                self.acknowledged_delivered += 1;
            }
        }
        let con = &mut self.parts[p].subs[s].consumers[c];
        con.permits -= m as i64;
        if con.acks.holds(idx, grouping) {
            // Acknowledged and not sent yet (a rewind re-read it): the client drops the
            // duplicate and frees its permits (`ConsumerImpl.messageReceived`).
            con.unflowed += m;
            if con.unflowed >= threshold {
                con.permits += con.unflowed as i64;
                con.unflowed = 0;
            }
            return;
        }
        con.queue.push_back(idx);
        con.queued += m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingValue;
    use crate::lab::workload::spec::WorkloadSpec;

    /// `ConsumerImpl.messageReceived`: a redelivered entry the consumer acknowledged and has not
    /// sent yet is a duplicate it drops, giving its permits back; it never reaches the queue.
    #[test]
    fn a_consumer_drops_what_it_acknowledged_and_has_not_sent() {
        let mut spec = WorkloadSpec::default();
        for (k, v) in [
            ("subscription_type", SettingValue::Str("Exclusive".into())),
            ("redelivery_rate", SettingValue::Float(0.01)),
            ("producer_rate", SettingValue::Float(10000.0)),
            (
                "negative_ack_redelivery_delay_ms",
                SettingValue::Int(20_000),
            ),
            ("acknowledgment_group_time_ms", SettingValue::Int(500)),
            ("max_acknowledgment_group_size", SettingValue::Int(100_000)),
            ("test_duration_minutes", SettingValue::Float(0.6)),
        ] {
            spec.set(k, &v).unwrap();
        }
        let (mut sim, _) = Sim::new(&spec, 3, 0);
        // Steps after which the cursor is to read again an entry a consumer holds unsent (a
        // rewind came before the client's flush).
        let mut rereads_ahead = 0;
        while sim.step() {
            let sub = &sim.parts[0].subs[0];
            let at_broker = |i: u64| {
                let p = Position::new(0, i as i64);
                sub.acked.contains(p) || sub.pending_acks.contains(p)
            };
            for c in &sub.consumers {
                assert!(
                    c.queue.iter().all(|&i| !c.acks.holds(i, sim.grouping)),
                    "a duplicate reached the queue"
                );
                // What the broker has as acknowledged, a read passes over.
                assert!(
                    !c.queue.iter().any(|&i| at_broker(i)),
                    "an acknowledged entry was read"
                );
                if let Some(unsent) = c.acks.lowest(sim.grouping) {
                    if unsent >= sub.read_idx {
                        rereads_ahead += 1;
                    }
                    // The mark-delete position stays before what the broker does not have.
                    assert!(sub.acked_upto.is_none_or(|md| md < unsent));
                }
            }
        }
        assert!(rereads_ahead > 0);
        assert_eq!(sim.acknowledged_delivered, 0);
        // The bundled failover-nacks scenario, once its nacks are due: a rewind a minute back
        // re-reads enough nacked entries to run out of permits before it reaches what was
        // acknowledged and not sent, which the client sends meanwhile.
        let mut spec = WorkloadSpec::default();
        for (k, v) in [
            ("topics", SettingValue::Int(2)),
            ("subscriptions_per_topic", SettingValue::Int(2)),
            ("producer_rate", SettingValue::Float(30000.0)),
            ("subscription_type", SettingValue::Str("Failover".into())),
            ("redelivery_rate", SettingValue::Float(0.01)),
            ("test_duration_minutes", SettingValue::Float(1.3)),
        ] {
            spec.set(k, &v).unwrap();
        }
        let (mut sim, _) = Sim::new(&spec, 1, 0);
        while sim.step() {}
        assert_eq!(sim.acknowledged_delivered, 0);
        // Every rewind re-read what the client had not sent: the trace reads more than it
        // published.
        assert!(sim.entries_read > sim.parts[0].published);
    }
}
