//! Simulates publishers, Pulsar's dispatchers and Pulsar's Java client to produce the events a
//! broker sees.
//!
//! Each partition has a producer whose messages arrive at its share of the rate and are batched
//! into entries (a batch closes when its first message is `batching_max_publish_delay_ms` old or
//! when it is full in bytes or messages). Each subscription has a dispatcher with consumers.
//!
//! Consumers follow the Java client: a consumer starts with `receiver_queue_size` permits (counted
//! in messages), drains its receiver queue at its speed (a fluid model) and sends the broker a
//! FLOW with the permits it freed only once half the receiver queue is free, so a saturated
//! consumer's reads come in bursts.
//!
//! Dispatchers follow Pulsar's. A read at the end of the topic parks; the cursor looks again
//! after `managed_ledger_new_entries_check_delay_in_millis` and then waits to be woken by the next
//! entry. A read's entry count is capped by `dispatcher_max_read_size_bytes`.
//! - Exclusive/Failover: one active consumer; a read asks for min(permits, read batch) entries; a
//!   negative acknowledgement, once the client's redelivery delay has passed, makes the client
//!   drop its queue and the broker rewind the cursor to the first unacknowledged entry (a
//!   `rewind`); reads pass over the entries acknowledged on their own.
//! - Shared: replay entries first, else a normal read of min(total permits, read batch) entries;
//!   the entries go round robin, up to `dispatcher_max_round_robin_batch_size` per consumer turn
//!   and as many as its permits cover at the read's average batch size; what no consumer has
//!   permits for goes to the replay queue (`redeliver`, reason `overflow`).
//! - Key_Shared: keys go to consumers by consistent hashing; replay entries first (only those
//!   whose consumer has permits); normal reads stop once the replay queue reaches the look-ahead
//!   limit; a normal read's entry whose consumer has no permits, or whose key already waits in
//!   the replay queue, goes to the replay queue (reason `hold-back`).
//!
//! Negative acknowledgements on Shared/Key_Shared put the entry in the replay queue (reason
//! `nack`) once the client's redelivery delay has passed. A consumer connecting to a subscription
//! without consumers rewinds the cursor to the first unacknowledged entry and clears the replay
//! queue. Seeks, late catch-up readers, backlog-first consumers and consumer churn are Poisson or
//! scheduled. Everything runs on one
//! time-ordered event queue with a seeded generator, so a spec and a seed give the same trace
//! every time. The simulation runs task by task (`Sim::step`), so the trace can be taken as it is
//! made (`super::stream`); its state is bounded by the workload (queues, replay sets, the index of
//! entries a cursor can still reach), not by the trace's length. `docs/fidelity.md` maps each
//! behaviour to the Pulsar code it follows.
//!
//! This file is the simulation's core: the task queue, the driver loop ([`Sim::step`]) and the
//! per-broker runs. The rest lives in rooms: `topology` (partitions, ledgers, plans from the
//! spec, [`Sim::new`]), `producer` (batches), `consumer` (receiver queues, permits, nacks, acks),
//! `cursor` (a subscription's cursor, reads, connects, churn, seeks), `backlog` (OMB's backlog
//! test), and `dispatch/` with one module per dispatcher, each owning its state and its part of
//! the estimate (`estimate`, `footprint`).

use super::ack_grouping::Grouping;
use super::backlog::BacklogTest;
pub use super::events::EventColumns;
use super::events::Row;
use super::lifecycle::Life;
use super::rng::Rng;
use super::spec::WorkloadSpec;
use super::topology::Partition;
use crate::broker::ledger::rollover::Rollover;
use crate::cache::position::Position;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub use super::events::{REASON_HOLD_BACK, REASON_NACK, REASON_OVERFLOW};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Task {
    /// A producer stream's batch is sent: (partition, stream).
    Publish(u32, u32),
    Dispatch(u32, u32),
    /// A consumer's client may send FLOW: (partition, subscription, consumer).
    Flow(u32, u32, u32),
    /// A consumer's nack timer fires: (partition, subscription, consumer).
    NegativeAcks(u32, u32, u32),
    /// OMB's backlog test looks at the backlog ([`Sim::backlog_test`]).
    Backlog,
    Seek(u32, u32),
    Churn(u32, u32),
    Ack(u32, u32),
    /// A cursor opens at the first entry and its consumers connect (backlog-first consumers, a
    /// subscription's `start_seconds`): (partition, subscription).
    OpenAtFirst(u32, u32),
    CatchUp(u32, u32),
    /// Rolling restart `k` ([`Sim::restart`]).
    Restart(u64),
    /// A partition's bundle move ([`Sim::bundle_move`]).
    Move(u32),
    /// A partition loads on its new owner ([`Sim::load`]).
    Load(u32),
    /// A subscription's consumers reconnect: (partition, subscription).
    Reconnect(u32, u32),
    /// A reconnect storm ([`Sim::storm`]).
    Storm,
    /// The broker's periodic check for ledgers to trim ([`Sim::retention_tick`]).
    Retention,
    /// The broker's deduplication snapshot monitor ([`Sim::dedup_snapshot_tick`]).
    DedupSnapshot,
}

pub(super) struct Sim {
    pub(super) spec: WorkloadSpec,
    pub(super) rng: Rng,
    pub(super) queue: BinaryHeap<Reverse<(u64, u64, Task)>>,
    pub(super) seq: u64,
    pub(super) parts: Vec<Partition>,
    pub(super) out: EventColumns,
    pub(super) end_us: u64,
    pub(super) rollover: Rollover,
    /// The producers' `partitionSwitchMs`, in microseconds (time-routed topics).
    pub(super) switch_us: f64,
    /// Sticky-key hash of each key id (Key_Shared only).
    pub(super) key_hashes: Vec<u32>,
    /// The FLOW threshold in messages (half the receiver queue).
    pub(super) flow_threshold: u64,
    /// The clients' `negativeAckRedeliveryDelay`, at least the client's minimum.
    pub(super) nack_delay_ms: u64,
    /// How the clients group their acknowledgements.
    pub(super) grouping: Grouping,
    /// OMB's backlog test, while it runs.
    pub(super) backlog: Option<BacklogTest>,
    /// Whether the message index drops entries no cursor can reach (see [`Sim::prune_index`]).
    pub(super) prune_index: bool,
    /// Entries the normal reads delivered (what the trace's replay must read too).
    pub(super) entries_read: u64,
    /// Tasks in `queue` other than the subscriptions' once-a-second acknowledgements.
    pub(super) other_tasks: u64,
    /// When [`Sim::only_quiet_acks_left`] may look again (at most once a simulated second).
    pub(super) next_quiet_check_us: u64,
    /// The lifecycle schedule (restarts, moves, storms), when the spec has one.
    pub(super) life: Option<Life>,
    /// Entries delivered that the broker had as acknowledged (a read must pass over them).
    #[cfg(test)]
    pub(super) acknowledged_delivered: u64,
}

impl Sim {
    pub(super) fn schedule(&mut self, at: u64, task: Task) -> bool {
        if at <= self.end_us {
            self.seq += 1;
            self.queue.push(Reverse((at, self.seq, task)));
            if !matches!(task, Task::Ack(..) | Task::Retention | Task::DedupSnapshot) {
                self.other_tasks += 1;
            }
            true
        } else {
            false
        }
    }

    pub(super) fn position(&self, p: usize, idx: u64) -> Position {
        let part = &self.parts[p];
        part.ledgers.position(idx, part.published)
    }

    pub(super) fn emit(&mut self, t: u64, p: usize, row: Row) {
        let pos = row.idx.map(|i| self.position(p, i));
        let (broker, topic) = (self.parts[p].broker, self.parts[p].topic);
        self.out.push(t, broker, topic, row, pos);
    }

    pub(super) fn emit_cursor(
        &mut self,
        t: u64,
        p: usize,
        s: usize,
        op: &'static str,
        idx: Option<u64>,
    ) {
        let cursor = self.parts[p].subs[s].cursor;
        self.emit(t, p, Row::new(op, Some(cursor), idx));
    }

    pub(super) fn emit_redeliver(
        &mut self,
        t: u64,
        p: usize,
        s: usize,
        idx: u64,
        reason: &'static str,
    ) {
        let cursor = self.parts[p].subs[s].cursor;
        let row = Row {
            reason: Some(reason),
            ..Row::new("redeliver", Some(cursor), Some(idx))
        };
        self.emit(t, p, row);
    }

    /// Runs the next task; false when the simulation is over.
    pub(super) fn step(&mut self) -> bool {
        let Some(Reverse((t, _, task))) = self.queue.pop() else {
            return false;
        };
        // The backlog test's end can come before tasks already planned.
        if t > self.end_us {
            self.queue.clear();
            return false;
        }
        if !matches!(task, Task::Ack(..) | Task::Retention | Task::DedupSnapshot) {
            self.other_tasks -= 1;
        }
        if self.life.is_some() && self.held_back(t, task) {
            return true;
        }
        match task {
            Task::Publish(p, k) => self.publish(t, p as usize, k as usize),
            Task::Dispatch(p, s) => {
                let (p, s) = (p as usize, s as usize);
                if self.parts[p].subs[s].scheduled == Some(t) {
                    self.parts[p].subs[s].scheduled = None;
                    self.dispatch(t, p, s);
                }
            }
            Task::Flow(p, s, c) => {
                let (p, s) = (p as usize, s as usize);
                // A FLOW planned for a queue since dropped is ignored.
                let con = &mut self.parts[p].subs[s].consumers[c as usize];
                if con.flow_at == Some(t) {
                    con.flow_at = None;
                    if self.consume(t, p, s) {
                        self.schedule_dispatch(t, p, s);
                    }
                    self.plan_flows(t, p, s);
                }
            }
            Task::NegativeAcks(p, s, c) => {
                self.redeliver_nacked(t, p as usize, s as usize, c as usize)
            }
            Task::Backlog => self.backlog_test(t),
            Task::Retention => self.retention_tick(t),
            Task::DedupSnapshot => self.dedup_snapshot_tick(t),
            Task::Seek(p, s) => self.seek(t, p as usize, s as usize),
            Task::Churn(p, s) => self.churn(t, p as usize, s as usize),
            Task::Ack(p, s) => {
                self.ack(t, p as usize, s as usize);
                if self.only_quiet_acks_left(t) {
                    // Nothing is published, read or timed any more: the rest of the run would
                    // only step through its seconds.
                    self.queue.clear();
                    return false;
                }
            }
            Task::OpenAtFirst(p, s) => {
                let (p, s) = (p as usize, s as usize);
                if !self.parts[p].subs[s].active {
                    self.emit_cursor(t, p, s, "open", Some(0));
                    self.parts[p].subs[s].read_idx = 0;
                    self.parts[p].subs[s].opened = true;
                    if !self.parts[p].subs[s].consumers.is_empty() {
                        self.start_consumers(t, p, s);
                        self.connect(t, p, s);
                    }
                }
            }
            Task::CatchUp(p, s) => {
                let (p, s) = (p as usize, s as usize);
                let part = &self.parts[p];
                let behind = (self.spec.catch_up_behind_seconds * 1e6 / part.interval_us) as u64;
                let start = part.entry_of_message(part.messages_published.saturating_sub(behind));
                self.emit_cursor(t, p, s, "open", Some(start));
                self.parts[p].subs[s].read_idx = start;
                self.parts[p].subs[s].opened = true;
                self.start_consumers(t, p, s);
                self.connect(t, p, s);
            }
            Task::Restart(k) => self.restart(t, k),
            Task::Move(p) => self.bundle_move(t, p as usize),
            Task::Load(p) => self.load(t, p as usize),
            Task::Reconnect(p, s) => self.reconnect(t, p as usize, s as usize),
            Task::Storm => self.storm(t),
        }
        true
    }

    /// Whether the tasks left are acknowledgement ticks that will never write a row: then
    /// nothing else can happen (each tick plans only the next), and a long quiet run (nothing
    /// published, a huge duration) would cost work per simulated second per consumer for
    /// nothing. Looks at most once a simulated second, at the cost of one tick of each
    /// subscription.
    pub(super) fn only_quiet_acks_left(&mut self, t: u64) -> bool {
        if self.other_tasks > 0 || t < self.next_quiet_check_us {
            return false;
        }
        self.next_quiet_check_us = t.saturating_add(1_000_000);
        self.queue.iter().all(|Reverse((_, _, task))| match *task {
            Task::Ack(p, s) => self.ack_is_quiet(p as usize, s as usize),
            Task::Retention => self.retention_is_quiet(),
            Task::DedupSnapshot => self.dedup_snapshots_are_quiet(),
            _ => false,
        })
    }

    /// Whether subscription `s`'s acknowledgement ticks write nothing now or later while no other
    /// task runs: its consumers have nothing to process (or are paused) and no acknowledgement
    /// waiting to be sent, and the trace has its mark-delete position.
    pub(super) fn ack_is_quiet(&self, p: usize, s: usize) -> bool {
        let sub = &self.parts[p].subs[s];
        if !sub.active {
            return true;
        }
        let idle = sub
            .consumers
            .iter()
            .all(|c| (c.queued == 0 || sub.paused) && c.acks.lowest(self.grouping).is_none());
        let first = self.first_unacked(p, s);
        idle && (first == 0 || sub.acked_upto.is_some_and(|a| a >= first - 1))
    }

    /// Runs tasks until at least `rows` events wait in `out`, or the simulation is over; false
    /// when it is over.
    pub(super) fn fill(&mut self, rows: usize) -> bool {
        while self.out.len() < rows {
            if !self.step() {
                return false;
            }
        }
        true
    }
}

pub(super) fn minutes_us(minutes: f64) -> u64 {
    // Saturating: a huge duration means "never", not a time that wraps around.
    (minutes * 60e6) as u64
}

/// Generates the events of a workload, in memory; deterministic for a spec and a seed. For long
/// traces, [`TraceStream`](super::TraceStream) gives the same rows batch by batch.
pub fn generate(spec: &WorkloadSpec, seed: u64) -> EventColumns {
    let parts: Vec<EventColumns> = (0..holding_brokers(spec))
        .map(|b| generate_broker(spec, seed, b))
        .collect();
    merge_by_time(parts)
}

/// The brokers that hold a partition (partitions go round-robin from broker 0), at least one: the
/// others write no rows, so their simulations are not run (each names every broker, so running
/// them all cost work by the square of `brokers` for nothing).
pub(super) fn holding_brokers(spec: &WorkloadSpec) -> u32 {
    spec.partitions().clamp(1, u64::from(spec.brokers.max(1))) as u32
}

/// Merges per-broker event streams (each in time order, sharing name tables) into one, in time
/// order, ties broken by broker.
fn merge_by_time(mut parts: Vec<EventColumns>) -> EventColumns {
    if parts.len() == 1 {
        return parts.pop().expect("one part");
    }
    let mut out = EventColumns {
        broker_names: parts[0].broker_names.clone(),
        topic_names: parts[0].topic_names.clone(),
        cursor_names: parts[0].cursor_names.clone(),
        ..Default::default()
    };
    let mut heads: BinaryHeap<Reverse<(i64, usize, usize)>> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(b, p)| Reverse((p.ts_us[0], b, 0)))
        .collect();
    while let Some(Reverse((_, b, i))) = heads.pop() {
        let p = &parts[b];
        out.push_from(p, i);
        if i + 1 < p.len() {
            heads.push(Reverse((p.ts_us[i + 1], b, i + 1)));
        }
    }
    out
}

/// The events one broker sees: its partitions (placed round-robin) simulated with a generator
/// seeded by (seed, broker), so brokers can be generated apart, in parallel, and still add up to
/// [`generate`]'s trace. A partition that moves (restarts, bundle moves) stays with the broker it
/// started on: its rows after the move carry its new broker.
pub fn generate_broker(spec: &WorkloadSpec, seed: u64, broker: u32) -> EventColumns {
    generate_broker_counting_reads(spec, seed, broker).0
}

/// [`generate_broker`], with the number of entries its normal reads delivered: a replay of the
/// trace reads those and the `replay` rows' entries, which holds the replay lab's cursors to the
/// generator's (tests).
#[doc(hidden)]
pub fn generate_broker_counting_reads(
    spec: &WorkloadSpec,
    seed: u64,
    broker: u32,
) -> (EventColumns, u64) {
    let (mut sim, names) = Sim::new(spec, seed, broker);
    while sim.step() {}
    let mut out = sim.out;
    out.broker_names = names.brokers;
    out.topic_names = names.topics;
    out.cursor_names = names.cursors;
    (out, sim.entries_read)
}

/// The names a trace's rows refer to by number (the same for every broker of a workload).
#[derive(Debug, Clone, Default)]
pub(super) struct Names {
    pub brokers: Vec<String>,
    pub topics: Vec<String>,
    pub cursors: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingValue;
    use crate::lab::workload::spec::{SubscriptionDetail, SubscriptionType, TopicDetail};
    use crate::lab::workload::topology::partition_plans;

    fn detailed(topics: Vec<TopicDetail>, minutes: f64) -> WorkloadSpec {
        let mut spec = WorkloadSpec::default();
        spec.set("test_duration_minutes", &SettingValue::Float(minutes))
            .unwrap();
        spec.topic_details = Some(topics);
        spec
    }

    fn sub(name: &str, kind: SubscriptionType, rates: &[f64], start: f64) -> SubscriptionDetail {
        SubscriptionDetail {
            name: name.into(),
            subscription_type: kind,
            consumer_rates: rates.to_vec(),
            start_seconds: start,
            redelivery_rate: 0.0,
        }
    }

    /// The homogeneous shape and the same workload as `topic_details` are the same simulation.
    #[test]
    fn homogeneous_spec_equals_its_topic_details() {
        let mut h = WorkloadSpec::default();
        for (k, v) in [
            ("topics", 3.0),
            ("subscriptions_per_topic", 2.0),
            ("consumer_per_subscription", 2.0),
            ("producer_rate", 3000.0),
            ("brokers", 2.0),
            ("test_duration_minutes", 0.2),
        ] {
            h.set(k, &SettingValue::Float(v)).unwrap();
        }
        h.set("subscription_type", &SettingValue::Str("Shared".into()))
            .unwrap();
        // 1000 msg/s a partition, headroom 1.2, two consumers sharing: 600 msg/s each.
        let topics = (0..3)
            .map(|t| TopicDetail {
                name: format!("persistent://public/default/topic-{t}"),
                producer_rate: 1000.0,
                message_size: 1024,
                subscriptions: (0..2)
                    .map(|s| {
                        sub(
                            &format!("sub-{s}"),
                            SubscriptionType::Shared,
                            &[600.0, 600.0],
                            0.0,
                        )
                    })
                    .collect(),
                readers: Default::default(),
            })
            .collect();
        let mut d = detailed(topics, 0.2);
        d.brokers = 2;
        let a = generate(&h, 3);
        assert!(a.len() > 1000);
        assert_eq!(a, generate(&d, 3));
        // The plans themselves agree.
        let (hp, dp): (Vec<_>, Vec<_>) =
            (partition_plans(&h).collect(), partition_plans(&d).collect());
        assert_eq!(hp, dp);
    }

    #[test]
    fn topics_publish_at_their_own_rates_and_sizes() {
        let topics = vec![
            TopicDetail {
                name: "a".into(),
                producer_rate: 2000.0,
                message_size: 100,
                subscriptions: vec![],
                readers: Default::default(),
            },
            TopicDetail {
                name: "b".into(),
                producer_rate: 200.0,
                message_size: 5000,
                subscriptions: vec![],
                readers: Default::default(),
            },
            TopicDetail {
                name: "quiet".into(),
                producer_rate: 0.0,
                message_size: 5000,
                subscriptions: vec![sub("s", SubscriptionType::Exclusive, &[10.0], 0.0)],
                readers: Default::default(),
            },
        ];
        // Payloads alone: the metadata Pulsar stores with them is `metadata.rs`'s to test.
        let mut spec = detailed(topics, 0.5);
        spec.set("message_metadata", &SettingValue::Bool(false))
            .unwrap();
        let ev = generate(&spec, 1);
        let (mut messages, mut bytes) = ([0i64; 3], [0i64; 3]);
        for i in 0..ev.len() {
            if ev.op[i] == "add" {
                messages[ev.topic[i] as usize] += ev.messages[i].unwrap() as i64;
                bytes[ev.topic[i] as usize] += ev.size[i] as i64;
            }
        }
        assert!((59_000..61_000).contains(&messages[0]), "{messages:?}");
        assert!((5_900..6_100).contains(&messages[1]), "{messages:?}");
        assert_eq!(bytes[0], messages[0] * 100);
        assert_eq!(bytes[1], messages[1] * 5000);
        assert_eq!(messages[2], 0);
        assert_eq!(ev.topic_names, vec!["a", "b", "quiet"]);
    }

    #[test]
    fn a_workload_that_publishes_nothing_ends_once_only_quiet_ticks_are_left() {
        // Before: each subscription's acknowledgement tick ran once a simulated second over its
        // 1,000 consumers for the whole duration (10^9 minutes: 6 x 10^10 ticks, hours).
        for kind in [
            SubscriptionType::Shared,
            SubscriptionType::KeyShared,
            SubscriptionType::Exclusive,
            SubscriptionType::Failover,
        ] {
            let topics = vec![TopicDetail {
                name: "quiet".into(),
                producer_rate: 0.0,
                message_size: 100,
                subscriptions: vec![
                    sub("a", kind, &[100.0; 1000], 0.0),
                    sub("b", kind, &[5.0; 3], 30.0),
                ],
                readers: Default::default(),
            }];
            for minutes in [1e9, 2.0] {
                let spec = detailed(topics.clone(), minutes);
                let (mut sim, _) = Sim::new(&spec, 7, 0);
                let mut steps = 0u64;
                while sim.step() {
                    steps += 1;
                    assert!(steps < 1_000, "{kind:?}: still stepping at {steps}");
                }
                // Both cursors open; nothing to read or acknowledge.
                let ops: Vec<&str> = (0..sim.out.len()).map(|i| sim.out.op[i]).collect();
                assert_eq!(ops, ["open", "open"], "{kind:?} {minutes}");
            }
        }
    }

    #[test]
    fn brokers_without_a_partition_cost_no_simulation() {
        // Before: every one of the 20,000 brokers was simulated, each naming all of them
        // (4 * 10^8 names: about 40 s), for the rows of the one broker holding the topic.
        let topics = vec![TopicDetail {
            name: "t".into(),
            producer_rate: 100.0,
            message_size: 100,
            subscriptions: vec![sub("s", SubscriptionType::Exclusive, &[200.0], 0.0)],
            readers: Default::default(),
        }];
        let mut many = detailed(topics.clone(), 0.05);
        many.set("brokers", &SettingValue::Int(20_000)).unwrap();
        let start = std::time::Instant::now();
        let ev = generate(&many, 3);
        assert!(start.elapsed().as_secs() < 5, "{:?}", start.elapsed());
        assert_eq!(ev.broker_names.len(), 20_000);
        // The same rows as with one broker (broker 0's seed is the same).
        let one = generate(&detailed(topics, 0.05), 3);
        assert!(ev.len() > 10);
        assert_eq!((ev.ts_us.clone(), ev.op.clone()), (one.ts_us, one.op));
    }

    #[test]
    fn late_idle_and_slow_subscriptions() {
        let topics = vec![TopicDetail {
            name: "t".into(),
            producer_rate: 1000.0,
            message_size: 1000,
            subscriptions: vec![
                sub("late", SubscriptionType::Exclusive, &[5000.0], 20.0),
                sub("idle", SubscriptionType::Shared, &[], 0.0),
                sub("slow", SubscriptionType::Failover, &[100.0], 0.0),
                sub("fast", SubscriptionType::Exclusive, &[2000.0], 0.0),
            ],
            readers: Default::default(),
        }];
        let ev = generate(&detailed(topics, 1.0), 2);
        let cursor = |name: &str| ev.cursor_names.iter().position(|c| c == name).unwrap() as u32;
        let rows = |name: &str, op: &str| -> Vec<usize> {
            (0..ev.len())
                .filter(|&i| ev.cursor[i] == Some(cursor(name)) && ev.op[i] == op)
                .collect()
        };
        let open = rows("late", "open");
        assert_eq!(open.len(), 1);
        assert_eq!(ev.ts_us[open[0]], 20_000_000);
        assert_eq!(ev.entry_id[open[0]], Some(0));
        assert!(rows("late", "read")
            .iter()
            .all(|&i| ev.ts_us[i] >= 20_000_000));
        assert!(!rows("late", "read").is_empty());
        assert_eq!(rows("idle", "open").len(), 1);
        assert!(rows("idle", "read").is_empty());
        let read =
            |name: &str| -> i64 { rows(name, "read").iter().map(|&i| ev.count[i] as i64).sum() };
        // The slow consumer processes a tenth of the messages: it reads far fewer entries.
        assert!(
            read("slow") * 3 < read("fast"),
            "{} {}",
            read("slow"),
            read("fast")
        );
    }
}
