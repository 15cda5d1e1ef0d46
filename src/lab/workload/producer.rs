//! The producers of a simulated partition: each producer stream's arrivals and batches (the
//! Java client's batching and time-based partition routing), and the entries they add.

use super::events::Row;
use super::generate::{Sim, Task};
use super::rng::Rng;
use super::spec::WorkloadSpec;
use super::topology::Partition;

/// One producer's messages to one partition. Its arrivals run in the producer's own time on this
/// partition (`tau`: the switch intervals it spends here, laid end to end), mapped onto the trace's
/// time by [`Partition::arrival_us`], so a producer that visits one interval in `route_period`
/// sends its whole rate here then and nothing in between.
pub(super) struct ProducerStream {
    /// When the next message not yet in a batch arrives, in this stream's own time.
    pub(super) next_tau: f64,
    /// Messages in the batch that this stream's next `Publish` closes.
    pub(super) batch: u64,
    /// Which switch interval of each `route_period` is this partition's.
    pub(super) phase: u64,
}

impl Partition {
    /// The trace time of a stream's own time `tau`.
    pub(super) fn arrival_us(&self, phase: u64, tau: f64, switch_us: f64) -> f64 {
        if self.route_period == 1 {
            return tau;
        }
        let visit = (tau / switch_us).floor();
        let within = tau - visit * switch_us;
        (visit * self.route_period as f64 + phase as f64) * switch_us + within
    }

    /// The stream's own time at trace time `t`, or at the start of its next visit when `t` is
    /// outside one (the inverse of [`Partition::arrival_us`]).
    pub(super) fn tau_at(&self, phase: u64, t: f64, switch_us: f64) -> f64 {
        if self.route_period == 1 {
            return t;
        }
        let period = self.route_period as f64;
        let slot = (t / switch_us).floor();
        let visit = ((slot - phase as f64) / period).floor();
        if visit * period + phase as f64 == slot {
            visit * switch_us + (t - slot * switch_us)
        } else {
            (visit + 1.0).max(0.0) * switch_us
        }
    }
}

/// A partition's producer streams, the interval between one producer's messages while it sends
/// there, and its route period (see [`Partition::arrival_us`]).
pub(super) fn producer_streams(
    spec: &WorkloadSpec,
    seed: u64,
    interval_us: f64,
    routed: Option<(u64, u32)>,
) -> (Vec<ProducerStream>, f64, u64) {
    let stream = |phase| ProducerStream {
        next_tau: 0.0,
        batch: 1,
        phase,
    };
    let Some((topic, partition)) = routed else {
        return (vec![stream(0)], interval_us, 1);
    };
    let period = u64::from(spec.partitions_per_topic);
    let producers = spec.producers_per_topic;
    let streams = (0..producers)
        .map(|k| {
            // A producer's `startPtnIdx` is random (`PartitionedProducerImpl.getMessageRouter`),
            // the same for every partition of its topic, whichever broker simulates them.
            let key = topic.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(k).rotate_left(32);
            let start = Rng::new(seed ^ key).next_u64() % period;
            stream((u64::from(partition) + period - start) % period)
        })
        .collect();
    let interval = interval_us * f64::from(producers) / period as f64;
    (streams, interval, period)
}

impl Sim {
    /// The next batch from the partition's next message on: when it closes and how many messages
    /// it holds. A batch closes when its first message is the publish delay old, when the next
    /// message would not fit, or when it is full.
    /// Closes producer stream `k`'s next batch on partition `p`: when it is sent and how many
    /// messages it holds.
    pub(super) fn next_batch(&mut self, p: usize, k: usize) -> (u64, u64) {
        let Sim {
            parts,
            rng,
            spec,
            switch_us,
            ..
        } = self;
        let part = &mut parts[p];
        let size = part.message_size;
        let interval = part.producer_interval_us;
        let mut gap = || interval * (0.9 + 0.2 * rng.f64());
        let phase = part.producers[k].phase;
        let at = |tau: f64| part.arrival_us(phase, tau, *switch_us);
        let first = part.producers[k].next_tau;
        let (next_tau, sent, n) = 'batch: {
            if !spec.batching_enabled {
                break 'batch (first + gap(), at(first), 1);
            }
            let (max_bytes, max_messages) = (
                spec.batching_max_bytes as u64,
                spec.batching_max_messages as u64,
            );
            let full = |n: u64, bytes: u64| bytes >= max_bytes || n >= max_messages;
            let (mut n, mut bytes, mut last) = (1u64, size, first);
            if full(n, bytes) {
                break 'batch (first + gap(), at(first), n);
            }
            let deadline = at(first) + spec.batching_max_publish_delay_ms * 1000.0;
            loop {
                let next = last + gap();
                if at(next) > deadline {
                    break 'batch (next, deadline, n);
                }
                if bytes + size > max_bytes || n >= max_messages {
                    // The message does not fit: the batch goes now, the message starts the next one.
                    break 'batch (next, at(next), n);
                }
                n += 1;
                bytes += size;
                last = next;
                if full(n, bytes) {
                    break 'batch (last + gap(), at(last), n);
                }
            }
        };
        part.producers[k].next_tau = next_tau;
        (sent as u64, n)
    }

    /// Drops the message index's entries that no cursor can reach any more: below every
    /// subscription's read position, receiver queues, replay queue and (when it has no consumers)
    /// the position it rewinds to on reconnecting. Only without seeks (`seeks_per_minute` 0): a
    /// seek goes back from the read position, and seek after seek can reach any entry.
    pub(super) fn prune_index(&mut self, p: usize) {
        let low = self.reach_low(p);
        let part = &mut self.parts[p];
        part.first_msg.drop_below(low);
        part.ledgers.drop_below(low);
    }

    /// The lowest entry a subscription with consumers may still read (see [`Sim::prune_index`]).
    pub(super) fn reach_low(&self, p: usize) -> u64 {
        let mut low = self.parts[p].published;
        for (s, sub) in self.parts[p].subs.iter().enumerate() {
            // A subscription without consumers never reads: it does not hold the index.
            if sub.consumers.is_empty() {
                continue;
            }
            low = low.min(if sub.active {
                self.first_unacked(p, s)
            } else {
                sub.read_idx.min(sub.rewind_to)
            });
        }
        low
    }

    pub(super) fn publish(&mut self, t: u64, p: usize, k: usize) {
        let n = self.parts[p].producers[k].batch;
        self.add_entry(t, p, n);
        self.pause_if_owed(t, p, k);
        let (at, n) = self.next_batch(p, k);
        self.parts[p].producers[k].batch = n;
        self.schedule(at.max(t), Task::Publish(p as u32, k as u32));
    }

    /// An entry of `n` messages is added at `t`, and the cursors waiting for one are woken.
    pub(super) fn add_entry(&mut self, t: u64, p: usize, n: u64) {
        if self.prune_index
            && self.parts[p].first_msg.first.len() >= self.parts[p].first_msg.check_at
        {
            self.prune_index(p);
        }
        let idx = self.parts[p].published;
        let size = self.entry_bytes(p, n);
        let part = &mut self.parts[p];
        part.first_msg.first.push(part.messages_published);
        part.messages_published += n;
        part.bytes_published += size;
        part.published += 1;
        part.ledgers.add(&self.rollover, idx, size, t);
        self.retention_added(t, p, size);
        let row = Row {
            size: size.min(i32::MAX as u64) as i32,
            messages: Some(n.min(i32::MAX as u64) as i32),
            ..Row::new("add", None, Some(idx))
        };
        self.emit(t, p, row);
        self.dedup_persisted(t, p, idx);
        for s in 0..self.parts[p].subs.len() {
            let sub = &self.parts[p].subs[s];
            match sub.waiting {
                // The cursor waits to be notified: its read completes now.
                Some((_, check_at)) if sub.active && t >= check_at => self.dispatch(t, p, s),
                Some((_, check_at)) if sub.active => self.schedule_dispatch(check_at, p, s),
                _ => {}
            }
        }
    }
}
