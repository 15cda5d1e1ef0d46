//! Simulates publishers and Pulsar's dispatchers to produce the events a broker sees.
//!
//! Each partition has a producer publishing at its share of the rate and, per subscription, a
//! dispatcher with consumers. A consumer drains its receiver queue at its speed (a fluid model);
//! the dispatcher reads up to `read_batch_size` entries when consumers have permits, replay entries
//! first. Key_Shared routes an entry by its key; an entry whose consumer has no permits goes to the
//! replay queue (a `redeliver`), as do nacked messages and, for Shared, what a read brought beyond
//! the permits. Seeks, late catch-up readers, backlog-first consumers and consumer churn are
//! Poisson or scheduled. Everything runs on one time-ordered event queue with a seeded generator,
//! so a spec and a seed give the same trace every time.

use super::rng::Rng;
use super::spec::{KeyDistributor, SubscriptionType, WorkloadSpec};
use crate::position::Position;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

/// The generated events, column by column (the trace format's columns).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct EventColumns {
    pub ts_us: Vec<i64>,
    pub broker: Vec<u32>,
    pub topic: Vec<u32>,
    pub op: Vec<&'static str>,
    pub cursor: Vec<Option<u32>>,
    pub ledger_id: Vec<Option<i64>>,
    pub entry_id: Vec<Option<i64>>,
    pub count: Vec<i32>,
    pub size: Vec<i32>,
    pub broker_names: Vec<String>,
    pub topic_names: Vec<String>,
    pub cursor_names: Vec<String>,
}

impl EventColumns {
    pub fn len(&self) -> usize {
        self.ts_us.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts_us.is_empty()
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        ts: u64,
        broker: u32,
        topic: u32,
        op: &'static str,
        cursor: Option<u32>,
        pos: Option<Position>,
        count: i32,
        size: i32,
    ) {
        self.ts_us.push(ts as i64);
        self.broker.push(broker);
        self.topic.push(topic);
        self.op.push(op);
        self.cursor.push(cursor);
        self.ledger_id.push(pos.map(|p| p.ledger_id));
        self.entry_id.push(pos.map(|p| p.entry_id));
        self.count.push(count);
        self.size.push(size);
    }
}

struct Consumer {
    /// Messages per microsecond.
    speed: f64,
    queue: VecDeque<u64>,
    last_us: u64,
    carry: f64,
}

struct Sub {
    cursor: u32,
    kind: SubscriptionType,
    read_idx: u64,
    active: bool,
    consumers: Vec<Consumer>,
    replay: BTreeSet<u64>,
    rr: usize,
    scheduled: Option<u64>,
    acked_upto: Option<u64>,
}

struct Partition {
    topic: u32,
    broker: u32,
    ledger_base: i64,
    published: u64,
    interval_us: f64,
    subs: Vec<Sub>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Task {
    Publish(u32),
    Dispatch(u32, u32),
    Seek(u32, u32),
    Churn(u32, u32),
    Ack(u32, u32),
    StartBacklogConsumers(u32),
    CatchUp(u32, u32),
}

struct Sim<'a> {
    spec: &'a WorkloadSpec,
    rng: Rng,
    queue: BinaryHeap<Reverse<(u64, u64, Task)>>,
    seq: u64,
    parts: Vec<Partition>,
    out: EventColumns,
    end_us: u64,
    max_per_ledger: u64,
}

impl Sim<'_> {
    fn schedule(&mut self, at: u64, task: Task) {
        if at <= self.end_us {
            self.seq += 1;
            self.queue.push(Reverse((at, self.seq, task)));
        }
    }

    fn position(&self, p: usize, idx: u64) -> Position {
        Position::new(
            self.parts[p].ledger_base + (idx / self.max_per_ledger) as i64,
            (idx % self.max_per_ledger) as i64,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        t: u64,
        p: usize,
        op: &'static str,
        cursor: Option<u32>,
        idx: Option<u64>,
        count: i32,
        size: i32,
    ) {
        let pos = idx.map(|i| self.position(p, i));
        let (broker, topic) = (self.parts[p].broker, self.parts[p].topic);
        self.out
            .push(t, broker, topic, op, cursor, pos, count, size);
    }

    fn key_of(&self, idx: u64) -> u64 {
        match self.spec.key_distributor {
            KeyDistributor::NoKey => 0,
            KeyDistributor::KeyRoundRobin => idx % self.spec.keys as u64,
            KeyDistributor::RandomNano => {
                let mut z = idx.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                (z ^ (z >> 29)) % self.spec.keys as u64
            }
        }
    }

    /// Consumers drain their queues up to `t`; nacked messages go to the replay queue.
    fn consume(&mut self, t: u64, p: usize, s: usize) {
        let nack = self.spec.redelivery_rate;
        let cursor = self.parts[p].subs[s].cursor;
        let mut nacked = Vec::new();
        for c in &mut self.parts[p].subs[s].consumers {
            let budget = c.carry + (t.saturating_sub(c.last_us)) as f64 * c.speed;
            let n = (budget.floor() as usize).min(c.queue.len());
            c.carry = if c.queue.len() > n {
                budget - n as f64
            } else {
                0.0
            };
            c.last_us = t;
            for _ in 0..n {
                let idx = c.queue.pop_front().expect("n <= len");
                if nack > 0.0 && self.rng.chance(nack) {
                    nacked.push(idx);
                }
            }
        }
        for idx in nacked {
            if self.parts[p].subs[s].replay.insert(idx) {
                self.emit(t, p, "redeliver", Some(cursor), Some(idx), 0, 0);
            }
        }
    }

    /// The consumer an entry goes to, if one has a permit.
    fn route(&mut self, p: usize, s: usize, idx: u64) -> Option<usize> {
        let rq = self.spec.receiver_queue_size as usize;
        let key = self.key_of(idx);
        let sub = &mut self.parts[p].subs[s];
        let n = sub.consumers.len();
        match sub.kind {
            SubscriptionType::Exclusive | SubscriptionType::Failover => {
                (sub.consumers[0].queue.len() < rq).then_some(0)
            }
            SubscriptionType::KeyShared => {
                let c = (key % n as u64) as usize;
                (sub.consumers[c].queue.len() < rq).then_some(c)
            }
            SubscriptionType::Shared => {
                for k in 0..n {
                    let c = (sub.rr + k) % n;
                    if sub.consumers[c].queue.len() < rq {
                        sub.rr = (c + 1) % n;
                        return Some(c);
                    }
                }
                None
            }
        }
    }

    fn dispatch(&mut self, t: u64, p: usize, s: usize) {
        self.parts[p].subs[s].scheduled = None;
        self.consume(t, p, s);
        if !self.parts[p].subs[s].active {
            return;
        }
        let rq = self.spec.receiver_queue_size as u64;
        let batch = self.spec.read_batch_size as u64;
        let cursor = self.parts[p].subs[s].cursor;
        let permits: u64 = self.parts[p].subs[s]
            .consumers
            .iter()
            .map(|c| rq.saturating_sub(c.queue.len() as u64))
            .sum();
        // Replay entries first, each to its consumer if it has room.
        let replay: Vec<u64> = self.parts[p].subs[s]
            .replay
            .iter()
            .take(permits.min(batch) as usize)
            .copied()
            .collect();
        for idx in replay {
            if let Some(c) = self.route(p, s, idx) {
                self.parts[p].subs[s].replay.remove(&idx);
                self.emit(t, p, "replay", Some(cursor), Some(idx), 0, 0);
                self.parts[p].subs[s].consumers[c].queue.push_back(idx);
            }
        }
        let permits: u64 = self.parts[p].subs[s]
            .consumers
            .iter()
            .map(|c| rq.saturating_sub(c.queue.len() as u64))
            .sum();
        let available = self.parts[p]
            .published
            .saturating_sub(self.parts[p].subs[s].read_idx);
        let want = match self.parts[p].subs[s].kind {
            // Shared and Key_Shared read a full batch when any permit is free: what does not fit goes
            // to the replay queue.
            SubscriptionType::Shared | SubscriptionType::KeyShared if permits > 0 => batch,
            _ => permits.min(batch),
        };
        let n = available.min(want);
        if n > 0 {
            let first = self.parts[p].subs[s].read_idx;
            self.emit(t, p, "read", Some(cursor), None, n as i32, 0);
            self.parts[p].subs[s].read_idx += n;
            for idx in first..first + n {
                match self.route(p, s, idx) {
                    Some(c) => self.parts[p].subs[s].consumers[c].queue.push_back(idx),
                    None => {
                        if self.parts[p].subs[s].replay.insert(idx) {
                            self.emit(t, p, "redeliver", Some(cursor), Some(idx), 0, 0);
                        }
                    }
                }
            }
        }
        // More to do: come back when a consumer has drained a quarter batch.
        let sub = &self.parts[p].subs[s];
        let backlog = self.parts[p].published > sub.read_idx || !sub.replay.is_empty();
        if backlog {
            let need = (batch / 4).max(1) as f64;
            let wait = sub
                .consumers
                .iter()
                .filter(|c| c.speed > 0.0)
                .map(|c| need / c.speed)
                .fold(f64::INFINITY, f64::min);
            if wait.is_finite() {
                self.schedule_dispatch(t + wait.ceil().max(1.0) as u64, p, s);
            }
        }
    }

    fn schedule_dispatch(&mut self, at: u64, p: usize, s: usize) {
        let sub = &mut self.parts[p].subs[s];
        if sub.scheduled.is_some_and(|x| x <= at) {
            return;
        }
        sub.scheduled = Some(at);
        self.schedule(at, Task::Dispatch(p as u32, s as u32));
    }

    fn run(&mut self) {
        while let Some(Reverse((t, _, task))) = self.queue.pop() {
            match task {
                Task::Publish(p) => {
                    let p = p as usize;
                    let idx = self.parts[p].published;
                    let size = self.spec.message_size as i32;
                    self.emit(t, p, "add", None, Some(idx), 0, size);
                    self.parts[p].published += 1;
                    for s in 0..self.parts[p].subs.len() {
                        let sub = &self.parts[p].subs[s];
                        if sub.active && sub.scheduled.is_none() && sub.read_idx == idx {
                            self.schedule_dispatch(t, p, s);
                        }
                    }
                    let jitter = 0.9 + 0.2 * self.rng.f64();
                    let next = t + (self.parts[p].interval_us * jitter).max(1.0) as u64;
                    self.schedule(next, Task::Publish(p as u32));
                }
                Task::Dispatch(p, s) => {
                    if self.parts[p as usize].subs[s as usize].scheduled == Some(t) {
                        self.dispatch(t, p as usize, s as usize);
                    }
                }
                Task::Seek(p, s) => {
                    let (p, s) = (p as usize, s as usize);
                    let back =
                        (self.spec.seek_back_seconds * 1e6 / self.parts[p].interval_us) as u64;
                    let to = self.parts[p].subs[s].read_idx.saturating_sub(back);
                    let cursor = self.parts[p].subs[s].cursor;
                    self.emit(t, p, "seek", Some(cursor), Some(to), 0, 0);
                    let sub = &mut self.parts[p].subs[s];
                    sub.read_idx = to;
                    sub.replay.clear();
                    sub.consumers.iter_mut().for_each(|c| c.queue.clear());
                    self.schedule_dispatch(t, p, s);
                    let next = t + self.rng.exp(60e6 / self.spec.seeks_per_minute) as u64;
                    self.schedule(next, Task::Seek(p as u32, s as u32));
                }
                Task::Churn(p, s) => {
                    let (pi, si) = (p as usize, s as usize);
                    let cursor = self.parts[pi].subs[si].cursor;
                    if self.parts[pi].subs[si].active {
                        self.consume(t, pi, si);
                        self.emit(t, pi, "close", Some(cursor), None, 0, 0);
                        let sub = &mut self.parts[pi].subs[si];
                        sub.active = false;
                        // Undelivered messages return for redelivery when consumers come back.
                        let pending: Vec<u64> = sub
                            .consumers
                            .iter_mut()
                            .flat_map(|c| c.queue.drain(..))
                            .collect();
                        sub.replay.extend(pending);
                        let back = t + (self.spec.churn_downtime_seconds * 1e6) as u64;
                        self.schedule(back, Task::Churn(p, s));
                    } else {
                        self.emit(t, pi, "open", Some(cursor), None, 0, 0);
                        let sub = &mut self.parts[pi].subs[si];
                        sub.active = true;
                        sub.consumers.iter_mut().for_each(|c| c.last_us = t);
                        self.schedule_dispatch(t, pi, si);
                        let next = t + self.rng.exp(60e6 / self.spec.churn_per_minute) as u64;
                        self.schedule(next, Task::Churn(p, s));
                    }
                }
                Task::Ack(p, s) => {
                    let (pi, si) = (p as usize, s as usize);
                    self.consume(t, pi, si);
                    let sub = &self.parts[pi].subs[si];
                    let outstanding = sub
                        .consumers
                        .iter()
                        .filter_map(|c| c.queue.front().copied())
                        .chain(sub.replay.iter().next().copied())
                        .min()
                        .unwrap_or(sub.read_idx);
                    if outstanding > 0 && sub.acked_upto.is_none_or(|a| a < outstanding - 1) {
                        let cursor = sub.cursor;
                        self.parts[pi].subs[si].acked_upto = Some(outstanding - 1);
                        self.emit(t, pi, "ack", Some(cursor), Some(outstanding - 1), 0, 0);
                    }
                    self.schedule(t + 1_000_000, Task::Ack(p, s));
                }
                Task::StartBacklogConsumers(p) => {
                    let pi = p as usize;
                    for s in 0..self.parts[pi].subs.len() {
                        if !self.parts[pi].subs[s].active {
                            let cursor = self.parts[pi].subs[s].cursor;
                            self.emit(t, pi, "open", Some(cursor), Some(0), 0, 0);
                            let sub = &mut self.parts[pi].subs[s];
                            sub.active = true;
                            sub.consumers.iter_mut().for_each(|c| c.last_us = t);
                            self.schedule_dispatch(t, pi, s);
                        }
                    }
                }
                Task::CatchUp(p, s) => {
                    let (pi, si) = (p as usize, s as usize);
                    let behind = (self.spec.catch_up_behind_seconds * 1e6
                        / self.parts[pi].interval_us) as u64;
                    let start = self.parts[pi].published.saturating_sub(behind);
                    let cursor = self.parts[pi].subs[si].cursor;
                    self.emit(t, pi, "open", Some(cursor), Some(start), 0, 0);
                    let sub = &mut self.parts[pi].subs[si];
                    sub.read_idx = start;
                    sub.active = true;
                    sub.consumers.iter_mut().for_each(|c| c.last_us = t);
                    self.schedule_dispatch(t, pi, si);
                }
            }
        }
    }
}

/// Generates the events of a workload; deterministic for a spec and a seed.
pub fn generate(spec: &WorkloadSpec, seed: u64) -> EventColumns {
    let parts: Vec<EventColumns> = (0..spec.brokers)
        .map(|b| generate_broker(spec, seed, b))
        .collect();
    merge_by_time(parts)
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
        out.ts_us.push(p.ts_us[i]);
        out.broker.push(p.broker[i]);
        out.topic.push(p.topic[i]);
        out.op.push(p.op[i]);
        out.cursor.push(p.cursor[i]);
        out.ledger_id.push(p.ledger_id[i]);
        out.entry_id.push(p.entry_id[i]);
        out.count.push(p.count[i]);
        out.size.push(p.size[i]);
        if i + 1 < p.len() {
            heads.push(Reverse((p.ts_us[i + 1], b, i + 1)));
        }
    }
    out
}

/// The events one broker sees: its partitions (placed round-robin) simulated with a generator
/// seeded by (seed, broker), so brokers can be generated apart, in parallel, and still add up to
/// [`generate`]'s trace.
pub fn generate_broker(spec: &WorkloadSpec, seed: u64, broker: u32) -> EventColumns {
    let partitions = spec.topics * spec.partitions_per_topic;
    let per_partition_rate = spec.producer_rate / partitions as f64;
    let interval_us = 1e6 / per_partition_rate;
    let rng = Rng::new(seed ^ (broker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut index = 0usize;
    let mut consumer_index = 0u64;
    let mut out = EventColumns {
        broker_names: (0..spec.brokers).map(|b| format!("broker-{b}")).collect(),
        ..Default::default()
    };
    let backlog_mode = spec.consumer_backlog_size_gb > 0.0;
    let normal_speed = per_partition_rate * spec.consumer_headroom / 1e6;
    let mut parts = Vec::new();
    for t in 0..spec.topics {
        for k in 0..spec.partitions_per_topic {
            let name = if spec.partitions_per_topic == 1 {
                format!("persistent://public/default/topic-{t}")
            } else {
                format!("persistent://public/default/topic-{t}-partition-{k}")
            };
            let topic = out.topic_names.len() as u32;
            out.topic_names.push(name.clone());
            let here = index as u32 % spec.brokers == broker;
            let mut subs = Vec::new();
            let mut add_sub = |name: String,
                               kind: SubscriptionType,
                               consumers: Vec<Consumer>,
                               out: &mut EventColumns| {
                let cursor = out.cursor_names.len() as u32;
                out.cursor_names.push(name);
                subs.push(Sub {
                    cursor,
                    kind,
                    read_idx: 0,
                    active: false,
                    consumers,
                    replay: BTreeSet::new(),
                    rr: 0,
                    scheduled: None,
                    acked_upto: None,
                });
            };
            for s in 0..spec.subscriptions_per_topic {
                let n = spec.consumer_per_subscription as usize;
                let share = match spec.subscription_type {
                    SubscriptionType::Exclusive | SubscriptionType::Failover => 1.0,
                    _ => 1.0 / n as f64,
                };
                let first = consumer_index;
                consumer_index += n as u64;
                let consumers = (0..if here { n } else { 0 })
                    .map(|c| {
                        // Exactly the fraction, spread evenly over all consumers of the workload.
                        let g = (first + c as u64) as f64;
                        let f = spec.slow_consumer_fraction;
                        let slow = ((g + 1.0) * f).floor() > (g * f).floor();
                        let speed = normal_speed
                            * share
                            * if slow { spec.slow_consumer_speed } else { 1.0 };
                        Consumer {
                            speed,
                            queue: VecDeque::new(),
                            last_us: 0,
                            carry: 0.0,
                        }
                    })
                    .collect();
                add_sub(
                    format!("sub-{s}"),
                    spec.subscription_type,
                    consumers,
                    &mut out,
                );
            }
            for r in 0..spec.catch_up_readers {
                let speed = per_partition_rate * spec.catch_up_speed / 1e6;
                let consumers = vec![Consumer {
                    speed,
                    queue: VecDeque::new(),
                    last_us: 0,
                    carry: 0.0,
                }];
                add_sub(
                    format!("catch-up-{r}"),
                    SubscriptionType::Exclusive,
                    consumers,
                    &mut out,
                );
            }
            if here {
                parts.push(Partition {
                    topic,
                    broker,
                    ledger_base: (index as i64 + 1) * 1_000_000,
                    published: 0,
                    interval_us,
                    subs,
                });
            }
            index += 1;
        }
    }
    let mut sim = Sim {
        spec,
        rng,
        queue: BinaryHeap::new(),
        seq: 0,
        parts,
        out,
        end_us: (spec.test_duration_minutes * 60e6) as u64,
        max_per_ledger: spec.max_entries_per_ledger as u64,
    };
    for p in 0..sim.parts.len() {
        let regular = spec.subscriptions_per_topic as usize;
        for s in 0..sim.parts[p].subs.len() {
            let pi = p as u32;
            if s >= regular {
                let at = (spec.catch_up_start_seconds * 1e6) as u64;
                sim.schedule(at, Task::CatchUp(pi, s as u32));
                continue;
            }
            if !backlog_mode {
                let cursor = sim.parts[p].subs[s].cursor;
                sim.emit(0, p, "open", Some(cursor), None, 0, 0);
                sim.parts[p].subs[s].active = true;
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
        if backlog_mode {
            let bytes_per_partition = spec.consumer_backlog_size_gb * 1e9 / partitions as f64;
            let entries = bytes_per_partition / spec.message_size.max(1) as f64;
            sim.schedule(
                (entries * interval_us) as u64,
                Task::StartBacklogConsumers(p as u32),
            );
        }
        let first = (sim.rng.f64() * interval_us) as u64;
        sim.schedule(first, Task::Publish(p as u32));
    }
    sim.run();
    sim.out
}
