//! The simulated topology, from the spec: the partitions (their ledgers and message index), the
//! subscriptions on them and their consumers, planned one partition at a time
//! ([`partition_plans`]) and set up as one broker's simulation ([`Sim::new`]).

use super::backlog::{BacklogPhase, BacklogTest};
use super::consumer::Consumer;
use super::cursor::Sub;
use super::dispatch::key_shared::key_hash_of;
use super::dispatch::Dispatcher;
use super::events::EventColumns;
use super::generate::{minutes_us, Names, Sim, Task};
use super::initial_backlog::{stored_start, StoredPrefix};
use super::lifecycle::{Life, PartLife};
use super::producer::{producer_streams, ProducerStream};
use super::readers::{self, Dedup};
use super::retention::Retention;
use super::rng::Rng;
use super::spec::{KeyDistributor, StoredBacklog, SubscriptionType, TopicDetail, WorkloadSpec};
use crate::broker::ledger::rollover::{OpenLedger, Rollover};
use crate::broker::positions::acked::AckedRanges;
use crate::cache::position::Position;
use std::collections::{BinaryHeap, VecDeque};
use SubStart::{AtFirst, CatchUp, Stored, Tail};

pub(super) struct Partition {
    pub(super) topic: u32,
    pub(super) broker: u32,
    pub(super) ledgers: Ledgers,
    /// Entries published.
    pub(super) published: u64,
    /// Each entry's first message (messages are numbered per partition).
    pub(super) first_msg: MessageIndex,
    pub(super) messages_published: u64,
    pub(super) bytes_published: u64,
    /// Microseconds between messages (infinite: nothing is published).
    pub(super) interval_us: f64,
    /// Bytes per message.
    pub(super) message_size: u64,
    /// The producers' batches on this partition: one, or one per producer of a topic whose
    /// producers route by time ([`WorkloadSpec::routes_by_time`]).
    pub(super) producers: Vec<ProducerStream>,
    /// Microseconds between one producer's messages while it sends here.
    pub(super) producer_interval_us: f64,
    /// A time-routed producer sends here one switch interval in this many (1: always).
    pub(super) route_period: u64,
    pub(super) subs: Vec<Sub>,
    /// Its part in the broker's life (restarts, moves, storms), when the spec has one.
    pub(super) life: Option<PartLife>,
    /// Its `pulsar.dedup` cursor, with deduplication on.
    pub(super) dedup: Option<Dedup>,
    pub(super) retention: Retention,
}

/// A partition's ledgers: where each starts (in entries published), and the one taking appends.
pub(super) struct Ledgers {
    /// The first entry of each ledger the simulation may still look at; the one at `starts[i]` is
    /// ledger `first_id + i`.
    pub(super) starts: VecDeque<u64>,
    pub(super) first_id: i64,
    /// The partition's first ledger, where entry 0 is (a cursor opening at the first entry).
    pub(super) base_id: i64,
    pub(super) open: OpenLedger,
    /// The entries in storage when the trace starts, before `starts[0]`.
    pub(super) prefix: StoredPrefix,
}

impl Ledgers {
    pub(super) fn new(first_id: i64) -> Self {
        Ledgers {
            starts: VecDeque::from([0]),
            first_id,
            base_id: first_id,
            open: OpenLedger::new(0, false),
            prefix: StoredPrefix::default(),
        }
    }

    /// The position of entry `idx` of a partition that has published `published` entries: one
    /// published and not dropped, the next one to be published, or the first entry of all.
    pub(super) fn position(&self, idx: u64, published: u64) -> Position {
        if self.prefix.holds(idx) {
            return self.prefix.position(idx);
        }
        if idx < self.starts[0] {
            debug_assert_eq!(idx, 0, "entry {idx} is in a ledger dropped");
            return Position::new(self.base_id, 0);
        }
        let i = self.starts.partition_point(|&s| s <= idx) - 1;
        let entry = idx - self.starts[i];
        if idx >= published && self.open.is_full() {
            // Past a full ledger: the next one, which a broker creates as this one closes.
            return Position::new(self.first_id + i as i64 + 1, (idx - published) as i64);
        }
        Position::new(self.first_id + i as i64, entry as i64)
    }

    /// The first entry after the ledger holding entry `idx` (`u64::MAX` in the newest ledger).
    pub(super) fn ledger_end(&self, idx: u64) -> u64 {
        if self.prefix.holds(idx) {
            return self.prefix.ledger_end(idx);
        }
        let i = self.starts.partition_point(|&s| s <= idx);
        self.starts.get(i).copied().unwrap_or(u64::MAX)
    }

    /// Entry `idx` of `bytes` is added at `t`: into a new ledger if the last one was full.
    pub(super) fn add(&mut self, rollover: &Rollover, idx: u64, bytes: u64, t: u64) {
        if self.open.is_full() {
            self.starts.push_back(idx);
        }
        self.open.added(rollover, bytes, t);
    }

    /// Forgets the ledgers wholly before entry `low - 1` (a mark-delete position may name the
    /// entry before the oldest one reachable).
    pub(super) fn drop_below(&mut self, low: u64) {
        while self.starts.len() > 1 && self.starts[1] < low {
            self.starts.pop_front();
            self.first_id += 1;
        }
    }
}

/// Each entry's first message, from the oldest entry the simulation may still look at: entries
/// below every cursor's reach are dropped (see [`Sim::prune_index`]), so the index does not grow
/// with the trace's length.
#[derive(Default)]
pub(super) struct MessageIndex {
    /// The entry `first[0]` belongs to.
    pub(super) base: u64,
    pub(super) first: Vec<u64>,
    /// Entries held when the index is next checked for entries to drop.
    pub(super) check_at: usize,
    /// (entries in storage when the trace starts, messages in each): below `base` at first.
    pub(super) stored: (u64, u64),
}

/// The fewest entries the message index holds before it looks for entries to drop.
pub(super) const INDEX_CHECK_ENTRIES: usize = 4096;

impl MessageIndex {
    pub(super) fn slot(&self, idx: u64) -> usize {
        debug_assert!(idx >= self.base, "entry {idx} was dropped from the index");
        (idx - self.base) as usize
    }

    /// Messages in entry `idx` (`total`: messages published).
    #[inline]
    pub(super) fn messages(&self, idx: u64, total: u64) -> u64 {
        if idx < self.stored.0 {
            return self.stored.1;
        }
        let i = self.slot(idx);
        self.first.get(i + 1).copied().unwrap_or(total) - self.first[i]
    }

    #[inline]
    pub(super) fn first_message(&self, idx: u64, total: u64) -> u64 {
        if idx < self.stored.0 {
            return idx * self.stored.1;
        }
        self.first.get(self.slot(idx)).copied().unwrap_or(total)
    }

    /// The entry holding message `msg`, which was published.
    pub(super) fn entry_of(&self, msg: u64) -> u64 {
        if msg < self.stored.0 * self.stored.1 {
            return msg / self.stored.1;
        }
        debug_assert!(self.first.first().is_some_and(|&f| f <= msg));
        self.base + (self.first.partition_point(|&f| f <= msg) as u64).saturating_sub(1)
    }

    /// Drops the entries below `low`.
    pub(super) fn drop_below(&mut self, low: u64) {
        let n = low.saturating_sub(self.base).min(self.first.len() as u64);
        self.first.drain(..n as usize);
        self.base += n;
        self.check_at = (2 * self.first.len()).max(INDEX_CHECK_ENTRIES);
    }
}

impl Partition {
    pub(super) fn messages(&self, idx: u64) -> u64 {
        self.first_msg.messages(idx, self.messages_published)
    }

    pub(super) fn first_message(&self, idx: u64) -> u64 {
        self.first_msg.first_message(idx, self.messages_published)
    }

    /// The entry holding message `msg` (the end when `msg` is not published yet).
    pub(super) fn entry_of_message(&self, msg: u64) -> u64 {
        if msg >= self.messages_published {
            return self.published;
        }
        self.first_msg.entry_of(msg)
    }
}

/// How a subscription's cursor starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum SubStart {
    /// Opens at the end at time 0 and tails.
    Tail,
    /// Opens at the first entry at this time (µs) and its consumers connect then.
    AtFirst(u64),
    /// A catch-up reader: opens `catch_up_behind_seconds` behind the tail at this time (µs).
    CatchUp(u64),
    /// Opens at time 0 at this entry of the ones in storage when the trace starts.
    Stored(u64),
}

/// A subscription as the simulation sets it up.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SubPlan {
    /// The trace's cursor name.
    pub(super) name: String,
    pub(super) kind: SubscriptionType,
    /// Each consumer's speed, messages per microsecond.
    pub(super) speeds: Vec<f64>,
    /// The workload-wide index of its first consumer (consumers' names on the Key_Shared ring).
    pub(super) first_consumer: u64,
    pub(super) start: SubStart,
    pub(super) redelivery_rate: f64,
    /// One of OMB's consumers, which it pauses to build a backlog.
    pub(super) pauses_for_backlog: bool,
}

/// A partition (managed ledger) as the simulation sets it up: every workload is a list of these,
/// in order ([`partition_plans`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PartitionPlan {
    /// The trace's topic name.
    pub(super) name: String,
    /// Microseconds between messages (infinite: nothing is published).
    pub(super) interval_us: f64,
    pub(super) message_size: u32,
    /// A partitioned topic's partition index: picks a Failover subscription's active consumer.
    pub(super) failover_index: Option<usize>,
    /// (topic, partition index) when the topic's producers route by time.
    pub(super) routed: Option<(u64, u32)>,
    pub(super) subs: Vec<SubPlan>,
}

/// The partition index in a Pulsar partition's name (`...-partition-<n>`).
pub(super) fn partition_index_of(name: &str) -> Option<usize> {
    let (_, n) = name.rsplit_once("-partition-")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The workload's partitions, in order, one at a time (a workload may have millions): the
/// homogeneous shape (`topics` x `partitions_per_topic` identical partitions) or `topic_details`.
pub(super) fn partition_plans(spec: &WorkloadSpec) -> Box<dyn Iterator<Item = PartitionPlan> + '_> {
    match &spec.topic_details {
        Some(topics) => Box::new(
            detailed_plans(topics, &spec.stored_backlogs)
                .zip(topics)
                .map(move |(p, t)| readers::with_readers(spec, p, &t.readers)),
        ),
        None => Box::new(
            homogeneous_plans(spec)
                .map(move |p| readers::with_readers(spec, p, &Default::default())),
        ),
    }
}

/// `topic_details`: each topic its own rate, message size and subscriptions.
pub(super) fn detailed_plans<'a>(
    topics: &'a [TopicDetail],
    stored: &'a [StoredBacklog],
) -> impl Iterator<Item = PartitionPlan> + 'a {
    let mut consumer_index = 0u64;
    let stored_of = move |i: usize| stored.iter().find(|b| b.topic == i);
    topics.iter().enumerate().map(move |(i, t)| PartitionPlan {
        name: t.name.clone(),
        interval_us: if t.producer_rate > 0.0 {
            1e6 / t.producer_rate
        } else {
            f64::INFINITY
        },
        message_size: t.message_size,
        failover_index: partition_index_of(&t.name),
        routed: None,
        subs: t
            .subscriptions
            .iter()
            .enumerate()
            .map(|(j, s)| {
                let first = consumer_index;
                consumer_index += s.consumer_rates.len() as u64;
                SubPlan {
                    name: s.name.clone(),
                    kind: s.subscription_type,
                    speeds: s.consumer_rates.iter().map(|r| r / 1e6).collect(),
                    first_consumer: first,
                    start: match stored_of(i).and_then(|b| stored_start(b, j)) {
                        Some(start) => start,
                        None if s.start_seconds > 0.0 => AtFirst((s.start_seconds * 1e6) as u64),
                        None => Tail,
                    },
                    redelivery_rate: s.redelivery_rate,
                    pauses_for_backlog: false,
                }
            })
            .collect(),
    })
}

/// The homogeneous shape: `topics` x `partitions_per_topic` partitions sharing the (ingest-capped)
/// rate, each with `subscriptions_per_topic` subscriptions of `consumer_per_subscription`
/// consumers (`slow_consumer_fraction` of them, spread evenly over the workload, slow) and
/// `catch_up_readers` readers.
pub(super) fn homogeneous_plans(spec: &WorkloadSpec) -> impl Iterator<Item = PartitionPlan> + '_ {
    // u64: topics x partitions may pass u32::MAX (`WorkloadSpec::check` refuses such specs).
    let partitions = spec.partitions();
    // The rate the brokers ingest: the requested one, or less when it is above capacity.
    let per_partition_rate = spec.ingest().rate / partitions as f64;
    let interval_us = 1e6 / per_partition_rate;
    let normal_speed = per_partition_rate * spec.consumer_headroom / 1e6;
    let catch_up_speed = per_partition_rate * spec.catch_up_speed / 1e6;
    let pauses_for_backlog = spec.backlog_messages().is_some();
    let catch_up_at = (spec.catch_up_start_seconds * 1e6) as u64;
    let n = spec.consumer_per_subscription as usize;
    let share = if spec.subscription_type.has_single_active_consumer() {
        1.0
    } else {
        1.0 / n as f64
    };
    let mut consumer_index = 0u64;
    (0..spec.topics)
        .flat_map(move |t| (0..spec.partitions_per_topic).map(move |k| (t, k)))
        .map(move |(t, k)| {
            let name = if spec.partitions_per_topic == 1 {
                format!("persistent://public/default/topic-{t}")
            } else {
                format!("persistent://public/default/topic-{t}-partition-{k}")
            };
            let mut subs = Vec::new();
            for s in 0..spec.subscriptions_per_topic {
                let first = consumer_index;
                consumer_index += n as u64;
                let speeds = (0..n)
                    .map(|c| {
                        // Exactly the fraction, spread evenly over all consumers of the workload.
                        let g = (first + c as u64) as f64;
                        let f = spec.slow_consumer_fraction;
                        let slow = ((g + 1.0) * f).floor() > (g * f).floor();
                        normal_speed * share * if slow { spec.slow_consumer_speed } else { 1.0 }
                    })
                    .collect();
                subs.push(SubPlan {
                    name: format!("sub-{s}"),
                    kind: spec.subscription_type,
                    speeds,
                    first_consumer: first,
                    start: Tail,
                    redelivery_rate: spec.redelivery_rate,
                    pauses_for_backlog,
                });
            }
            for r in 0..spec.catch_up_readers {
                subs.push(SubPlan {
                    name: format!("catch-up-{r}"),
                    kind: SubscriptionType::Exclusive,
                    speeds: vec![catch_up_speed],
                    first_consumer: 0,
                    start: CatchUp(catch_up_at),
                    redelivery_rate: spec.redelivery_rate,
                    pauses_for_backlog: false,
                });
            }
            PartitionPlan {
                name,
                interval_us,
                message_size: spec.message_size,
                failover_index: (spec.partitions_per_topic > 1).then_some(k as usize),
                routed: spec.routes_by_time().then_some((u64::from(t), k)),
                subs,
            }
        })
}

impl Sim {
    /// One broker's simulation, set up to run (its first rows, the opening cursors, already in
    /// `out`), and the trace's name tables. Its partitions are the workload's
    /// ([`partition_plans`]) placed on this broker, round-robin.
    pub(super) fn new(spec: &WorkloadSpec, seed: u64, broker: u32) -> (Sim, Names) {
        let rng = Rng::new(seed ^ (broker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut out = EventColumns {
            broker_names: (0..spec.brokers).map(|b| format!("broker-{b}")).collect(),
            ..Default::default()
        };
        let mut parts = Vec::new();
        let mut stored_here = Vec::new();
        let mut any_key_shared = false;
        for (index, plan) in partition_plans(spec).enumerate() {
            let topic = out.topic_names.len() as u32;
            out.topic_names.push(plan.name);
            let here = index % spec.brokers as usize == broker as usize;
            let mut subs = Vec::with_capacity(if here { plan.subs.len() } else { 0 });
            for sp in plan.subs {
                let cursor = out.cursor_names.len() as u32;
                out.cursor_names.push(sp.name);
                if !here {
                    continue;
                }
                let kind = sp.kind;
                any_key_shared |= kind == SubscriptionType::KeyShared;
                let consumers: Vec<Consumer> = sp.speeds.into_iter().map(Consumer::new).collect();
                let dispatcher = Dispatcher::new(
                    spec,
                    kind,
                    consumers.len(),
                    sp.first_consumer,
                    plan.failover_index,
                );
                subs.push(Sub {
                    cursor,
                    kind,
                    read_idx: 0,
                    active: false,
                    consumers,
                    dispatcher,
                    scheduled: None,
                    acked_upto: None,
                    waiting: None,
                    rewind_to: 0,
                    acked: AckedRanges::default(),
                    pending_acks: AckedRanges::default(),
                    rewinds: spec.churn_per_minute > 0.0
                        || spec.reconnects_consumers()
                        || (sp.redelivery_rate > 0.0 && kind.has_single_active_consumer()),
                    redelivery_rate: sp.redelivery_rate,
                    start: sp.start,
                    pauses_for_backlog: sp.pauses_for_backlog,
                    paused: false,
                    received: 0,
                    opened: false,
                    away: false,
                    reconnect_at: None,
                    forgotten: false,
                });
            }
            if here {
                let (producers, producer_interval_us, route_period) =
                    producer_streams(spec, seed, plan.interval_us, plan.routed);
                parts.push(Partition {
                    topic,
                    broker,
                    ledgers: Ledgers::new((index as i64 + 1) * 1_000_000),
                    published: 0,
                    first_msg: MessageIndex {
                        check_at: INDEX_CHECK_ENTRIES,
                        ..Default::default()
                    },
                    messages_published: 0,
                    bytes_published: 0,
                    interval_us: plan.interval_us,
                    message_size: plan.message_size as u64,
                    producers,
                    producer_interval_us,
                    route_period,
                    dedup: subs
                        .iter()
                        .position(|s| names_dedup(&out.cursor_names, s.cursor))
                        .map(|sub| Dedup {
                            sub,
                            counter: 0,
                            last_snapshot_us: None,
                        }),
                    subs,
                    life: spec.has_lifecycle().then(|| {
                        let per_topic = match spec.topic_details {
                            Some(_) => 1,
                            None => u64::from(spec.partitions_per_topic),
                        };
                        PartLife::new(spec, seed, index as u64, per_topic)
                    }),
                    retention: Retention::default(),
                });
                if let Some(b) = spec.stored_backlogs.iter().find(|b| b.topic == index) {
                    if spec.topic_details.is_some() {
                        stored_here.push((parts.len() - 1, b));
                    }
                }
            }
        }
        let key_hashes = match spec.key_distributor {
            _ if !any_key_shared => Vec::new(),
            KeyDistributor::NoKey => Vec::new(),
            _ if spec.keys <= 1 << 22 => (0..spec.keys as usize).map(key_hash_of).collect(),
            _ => Vec::new(),
        };
        let mut sim = Sim {
            spec: spec.clone(),
            rng,
            queue: BinaryHeap::new(),
            seq: 0,
            parts,
            out,
            // A backlog test ends earlier once the backlog is drained.
            end_us: minutes_us(spec.max_run_minutes()),
            rollover: spec.rollover(),
            switch_us: spec.partition_switch_us(),
            key_hashes,
            flow_threshold: (spec.receiver_queue_size as u64 / 2).max(1),
            nack_delay_ms: spec.nack_redelivery_delay_ms(),
            grouping: spec.ack_grouping(),
            backlog: None,
            prune_index: spec.seeks_per_minute == 0.0,
            entries_read: 0,
            other_tasks: 0,
            next_quiet_check_us: 0,
            life: Life::new(spec),
            #[cfg(test)]
            acknowledged_delivered: 0,
        };
        for (p, stored) in stored_here {
            sim.store_backlog(p, stored);
        }
        sim.start_retention();
        sim.start_dedup_snapshots();
        for p in 0..sim.parts.len() {
            let pi = p as u32;
            sim.write_loads(p);
            for s in 0..sim.parts[p].subs.len() {
                let has_consumers = !sim.parts[p].subs[s].consumers.is_empty();
                match sim.parts[p].subs[s].start {
                    Stored(at) => {
                        sim.emit_cursor(0, p, s, "open", Some(at));
                        if has_consumers {
                            sim.connect(0, p, s);
                        }
                    }
                    CatchUp(at) => {
                        sim.schedule(at, Task::CatchUp(pi, s as u32));
                        continue;
                    }
                    Tail => {
                        sim.emit_cursor(0, p, s, "open", None);
                        sim.parts[p].subs[s].opened = true;
                        if has_consumers {
                            sim.connect(0, p, s);
                        }
                    }
                    AtFirst(_) => {}
                }
                // Nobody to seek, come and go or acknowledge.
                if !has_consumers {
                    continue;
                }
                if spec.seeks_per_minute > 0.0 {
                    let at = sim.rng.exp(60e6 / spec.seeks_per_minute) as u64;
                    sim.schedule(at, Task::Seek(pi, s as u32));
                }
                if spec.churn_per_minute > 0.0 {
                    let at = sim.rng.exp(60e6 / spec.churn_per_minute) as u64;
                    sim.schedule(at, Task::Churn(pi, s as u32));
                }
                sim.schedule(1_000_000, Task::Ack(pi, s as u32));
            }
            // After the subscriptions' own tasks, in order (the same time: one after the other).
            for s in 0..sim.parts[p].subs.len() {
                if let AtFirst(at) = sim.parts[p].subs[s].start {
                    sim.schedule(at, Task::OpenAtFirst(pi, s as u32));
                }
            }
            if sim.parts[p].interval_us.is_finite() {
                for k in 0..sim.parts[p].producers.len() {
                    let interval = sim.parts[p].producer_interval_us;
                    sim.parts[p].producers[k].next_tau = sim.rng.f64() * interval;
                    let (at, n) = sim.next_batch(p, k);
                    sim.parts[p].producers[k].batch = n;
                    sim.schedule(at, Task::Publish(pi, k as u32));
                }
            }
        }
        sim.start_life();
        if let Some((build_to, drained_at)) = spec.backlog_messages() {
            // This broker's share of OMB's backlog, summed over all partitions.
            let share = sim.parts.len() as f64 / spec.partitions() as f64;
            sim.backlog = Some(BacklogTest {
                phase: BacklogPhase::WarmUp,
                build_to: build_to * share,
                drained_at: drained_at * share,
                test_us: minutes_us(spec.test_duration_minutes),
            });
            sim.schedule(minutes_us(spec.warmup_duration_minutes), Task::Backlog);
        }
        let names = Names {
            brokers: std::mem::take(&mut sim.out.broker_names),
            topics: std::mem::take(&mut sim.out.topic_names),
            cursors: std::mem::take(&mut sim.out.cursor_names),
        };
        (sim, names)
    }
}

/// Whether `cursor` is the deduplication cursor (a name no subscription may take).
fn names_dedup(names: &[String], cursor: u32) -> bool {
    names[cursor as usize] == readers::DEDUP_CURSOR
}
