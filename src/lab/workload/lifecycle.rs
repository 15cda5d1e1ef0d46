//! The broker's life: rolling restarts, bundle moves (a topic unloaded and loaded elsewhere),
//! reconnect storms, and a producer that pauses while its messages owe too many deliveries.
//!
//! A partition stays in the simulation of the broker it started on; only the `broker` its rows
//! carry changes. Every broker's simulation computes the rolling-restart schedule the same way
//! (a function of the spec, [`Life::restart_at`], [`Life::down`]), and a partition's bundle moves
//! and reconnect delays use its own generator ([`PartLife::rng`]), so brokers generated apart
//! still add up to the whole trace.
//!
//! An unload (`PersistentTopic.close` -> `ManagedLedgerImpl.asyncClose`, the cache's entries
//! dropped) writes an `unload` row; the partition is away `topic_load_delay_ms`, then its new
//! owner writes `load` rows (one per ledger some cursor may still read) and starts a new ledger
//! (`ManagedLedgerImpl.initializeBookKeeper`). The producer holds what it sends meanwhile (its
//! pending queue, `blockIfQueueFull`) and sends it at the load. Consumers reconnect a uniform
//! delay after the load: the cursor opens at its first unacknowledged entry, then the entries
//! acknowledged on their own (`individual_ack` rows, the cursor ledger's
//! `individualDeletedMessages`), and the client's receiver queue is cleared
//! (`ConsumerImpl.connectionOpened` -> `clearReceiverQueue`). Its grouped acknowledgements not
//! sent yet are kept and sent on the new connection: `connectionOpened` calls `flushAndClean`
//! only while a seek is under way, and `PersistentAcknowledgmentsGroupingTracker.flush` keeps
//! them while there is no connection.

use super::events::Row;
use super::generate::{minutes_us, Sim, Task};
use super::rng::Rng;
use super::spec::WorkloadSpec;
use crate::broker::ledger::rollover::OpenLedger;
use crate::cache::position::Position;
use std::collections::VecDeque;

/// The Java client's `memoryLimitBytes` default (64 MiB): a producer holding this much while its
/// topic is away blocks (`blockIfQueueFull`) until the topic loads.
pub(super) const CLIENT_MEMORY_LIMIT: u64 = 64 << 20;

/// How long the rolling-restart test's producer sleeps once the deliveries it is owed reach the
/// target (`BrokerEntryCacheRollingRestartTest`: `Thread.sleep(100L)`), in microseconds.
const PAUSE_US: f64 = 100_000.0;

/// The fewest microseconds between a partition's load and its next bundle move: each move is an
/// unload and a lookup, so a huge rate cannot move a topic over and over at one instant.
const MIN_MOVE_GAP_US: f64 = 1000.0;

/// The workload's lifecycle schedule, the same in every broker's simulation.
pub(super) struct Life {
    brokers: u64,
    /// Microseconds between rolling restarts (whole milliseconds); 0: none.
    interval_us: u64,
    /// Restart `k` is at `interval_us * (1 + k * step)` (see [`Life::restart_at`]).
    step: u64,
    /// Restarts at most.
    count: u64,
    /// The injector stops once it looks at or after this time (`end - interval`).
    stop_us: u64,
    /// How long a restarted broker is away.
    restart_us: u64,
    load_delay_us: u64,
    reconnect_us: (u64, u64),
    /// Microseconds between reconnect storms; 0: none.
    pub(super) storm_us: u64,
}

impl Life {
    /// The schedule of `spec`'s lifecycle knobs; `None` when they are all off (the simulation
    /// is then what it was without them).
    pub(super) fn new(spec: &WorkloadSpec) -> Option<Life> {
        if !spec.has_lifecycle() {
            return None;
        }
        let ms_us = |ms: f64| (ms * 1000.0) as u64;
        // The injector counts in whole milliseconds (`testTimeInSeconds * 1000 / (restarts + 1)`).
        let interval_us =
            ((spec.rolling_restart_interval_seconds * 1000.0) as u64).saturating_mul(1000);
        let restart_us = ms_us(spec.broker_restart_seconds * 1000.0);
        let traffic_end = minutes_us(spec.warmup_duration_minutes + spec.test_duration_minutes);
        let (lo, hi) = (spec.reconnect_delay_min_ms, spec.reconnect_delay_max_ms);
        Some(Life {
            brokers: u64::from(spec.brokers.max(1)),
            interval_us,
            step: restart_us
                .checked_div(interval_us)
                .map_or(1, |n| n.saturating_add(1)),
            count: match spec.rolling_restart_count {
                0 => u64::MAX,
                n => u64::from(n),
            },
            stop_us: traffic_end.saturating_sub(interval_us),
            restart_us,
            load_delay_us: ms_us(spec.topic_load_delay_ms),
            reconnect_us: (ms_us(lo.min(hi)), ms_us(lo.max(hi))),
            storm_us: ms_us(spec.reconnect_storm_every_seconds * 1000.0),
        })
    }

    /// When restart `k` (of broker `k % brokers`) starts, if it does. The injector of
    /// `BrokerEntryCacheRollingRestartTest` looks at the clock at its start and after each restart
    /// (the broker back), stops if that is at or after `end - interval`, and otherwise restarts
    /// the next broker at the next multiple of the interval: `interval - elapsed % interval`
    /// later. A restart lasts `broker_restart_seconds`, so the restarts are `1 + restart /
    /// interval` intervals apart.
    pub(super) fn restart_at(&self, k: u64) -> Option<u64> {
        if self.interval_us == 0 || k >= self.count {
            return None;
        }
        let at = |k: u64| {
            k.checked_mul(self.step)
                .and_then(|x| x.checked_add(1))
                .and_then(|x| x.checked_mul(self.interval_us))
        };
        let looked = match k {
            0 => 0,
            _ => at(k - 1)?.checked_add(self.restart_us)?,
        };
        if looked >= self.stop_us {
            return None;
        }
        at(k)
    }

    /// The broker away at `t` (restarting) and when it is back.
    pub(super) fn down(&self, t: u64) -> Option<(u32, u64)> {
        if self.interval_us == 0 || t < self.interval_us {
            return None;
        }
        let k = (t / self.interval_us - 1) / self.step;
        let at = self.restart_at(k)?;
        let up = at.saturating_add(self.restart_us);
        // Fewer than 2^32 brokers: the remainder fits.
        (t < up).then_some(((k % self.brokers) as u32, up))
    }

    /// Where a topic leaving `from` at `t` goes, and when: the next broker in order that is up
    /// (`from` itself last); with one broker, itself once it is back.
    pub(super) fn new_owner(&self, t: u64, from: u32) -> (u32, u64) {
        let down = self.down(t);
        for i in 1..=self.brokers {
            let b = ((u64::from(from) + i) % self.brokers) as u32;
            if down.is_none_or(|(d, _)| d != b) {
                return (b, t);
            }
        }
        (from, down.map_or(t, |(_, up)| up))
    }
}

/// The point `draw` (in [0, 1)) of the way from `lo` to `hi`.
fn uniform(lo: u64, hi: u64, draw: f64) -> u64 {
    lo.saturating_add(((hi - lo) as f64 * draw) as u64)
}

/// A partition's part in the broker's life.
pub(super) struct PartLife {
    /// Its own draws (bundle moves, reconnect delays), seeded by the partition's index.
    pub(super) rng: Rng,
    /// Between an unload and the load that follows.
    pub(super) unloaded: bool,
    /// When the planned load is (a `Load` task at another time is stale).
    pub(super) load_at: Option<u64>,
    /// When the planned bundle move is.
    pub(super) move_at: Option<u64>,
    /// Mean microseconds between its bundle moves (infinite: none).
    pub(super) move_mean_us: f64,
    /// The batches the producer sent while the topic was away, oldest first, as (messages,
    /// batches in a row of that many).
    pub(super) held: VecDeque<(u64, u64)>,
    pub(super) held_bytes: u64,
    pub(super) held_messages: u64,
    /// Producer streams blocked on a full pending queue until the load.
    pub(super) blocked: Vec<u32>,
    /// Tasks that waited for the topic to load or a subscription's consumers to reconnect.
    pub(super) deferred: Vec<Task>,
    /// Deliveries owed at which the producer sleeps (infinite: never).
    pub(super) pause_at: f64,
}

impl PartLife {
    /// Partition `index` (of `partitions`, on `brokers` brokers, `per_topic` to its topic) of a
    /// workload run with `seed`.
    pub(super) fn new(spec: &WorkloadSpec, seed: u64, index: u64, per_topic: u64) -> PartLife {
        let brokers = u64::from(spec.brokers.max(1));
        let partitions = spec.partitions().max(1);
        // Partitions go round robin: broker `b` starts with this many.
        let b = index % brokers;
        let on_broker = (partitions - b).div_ceil(brokers).max(1);
        let move_mean_us = if spec.bundle_moves_per_minute > 0.0 {
            60e6 * on_broker as f64 / spec.bundle_moves_per_minute
        } else {
            f64::INFINITY
        };
        let pause_at = if spec.producer_pause_outstanding_deliveries > 0.0 {
            spec.producer_pause_outstanding_deliveries / per_topic.max(1) as f64
        } else {
            f64::INFINITY
        };
        PartLife {
            rng: Rng::new(seed ^ (index + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)),
            unloaded: false,
            load_at: None,
            move_at: None,
            move_mean_us,
            held: VecDeque::new(),
            held_bytes: 0,
            held_messages: 0,
            blocked: Vec::new(),
            deferred: Vec::new(),
            pause_at,
        }
    }
}

/// Bytes a partition's lifecycle state takes beyond what it holds while away.
const PART_LIFE_BYTES: f64 = 160.0;
/// Bytes a batch held while the topic is away takes (a run of one size).
const HELD_BYTES_PER_BATCH: f64 = 16.0;

impl WorkloadSpec {
    /// Whether any lifecycle knob is on.
    pub(super) fn has_lifecycle(&self) -> bool {
        self.rolling_restart_interval_seconds > 0.0
            || self.bundle_moves_per_minute > 0.0
            || self.reconnect_storm_every_seconds > 0.0
            || self.producer_pause_outstanding_deliveries > 0.0
    }

    /// Whether consumers lose their connections (restarts, moves, storms): their cursors then
    /// reopen at the first unacknowledged entry, so what they acknowledge on their own matters.
    pub(super) fn reconnects_consumers(&self) -> bool {
        self.rolling_restart_interval_seconds > 0.0
            || self.bundle_moves_per_minute > 0.0
            || self.reconnect_storm_every_seconds > 0.0
    }

    /// Seconds a topic is away at an unload, up to the reconnect of its consumers: the load
    /// delay, the restart itself with one broker, and the mean reconnect delay.
    fn seconds_away(&self) -> (f64, f64) {
        let reconnect = (self.reconnect_delay_min_ms + self.reconnect_delay_max_ms) / 2000.0;
        let mut unloaded = self.topic_load_delay_ms / 1000.0;
        if self.brokers <= 1 && self.rolling_restart_interval_seconds > 0.0 {
            unloaded += self.broker_restart_seconds;
        }
        (unloaded, reconnect)
    }

    /// Rolling restarts in the run, as [`Life::restart_at`] counts them, in closed form.
    fn rolling_restarts(&self) -> f64 {
        let interval = (self.rolling_restart_interval_seconds * 1000.0).floor() / 1000.0;
        if interval <= 0.0 {
            return 0.0;
        }
        let stop = (self.warmup_duration_minutes + self.test_duration_minutes) * 60.0 - interval;
        if stop <= 0.0 {
            return 0.0;
        }
        let step = (self.broker_restart_seconds / interval).floor() + 1.0;
        let later = ((stop - self.broker_restart_seconds - interval) / (interval * step)).ceil();
        let n = 1.0 + later.max(0.0);
        match self.rolling_restart_count {
            0 => n,
            c => n.min(f64::from(c)),
        }
    }

    /// The rows one partition's lifecycle adds over `seconds`, with `cursors` cursors that have
    /// consumers, `behind_reads(s)` the reads that catch up `s` seconds of entries. Per unload
    /// (its broker restarting: with two brokers each restart moves about all the topics, with
    /// more a share; a bundle move): `unload`, `load` rows, and each cursor's open,
    /// acknowledgements and catch-up reads. Per storm: each cursor's close, open, rewind,
    /// acknowledgements and catch-up reads.
    pub(super) fn lifecycle_events(
        &self,
        cursors: f64,
        seconds: f64,
        behind_reads: impl Fn(f64) -> f64,
    ) -> f64 {
        if !self.has_lifecycle() {
            return 0.0;
        }
        let (unloaded, reconnect) = self.seconds_away();
        let holding = (self.partitions() as f64).min(f64::from(self.brokers.max(1)));
        let per_broker = self.partitions().max(1) as f64 / holding;
        let unloads = self.rolling_restarts() * (2.0 / holding).min(1.0)
            + self.bundle_moves_per_minute * seconds / 60.0 / per_broker;
        let storms = if self.reconnect_storm_every_seconds > 0.0 {
            // A storm closes only the consumers connected: those away since the last one are
            // back at the first storm after their reconnect delay.
            let every = self.reconnect_storm_every_seconds;
            (seconds / ((reconnect / every).ceil().max(1.0) * every)).floor()
        } else {
            0.0
        };
        unloads * (3.0 + cursors * (3.0 + behind_reads((unloaded + reconnect).min(seconds))))
            + storms * cursors * (4.0 + behind_reads(reconnect.min(seconds)))
    }

    /// The share of the time a subscription's consumers are connected, given the lifecycle's
    /// disconnects: a storm every `S` s closes the connected ones, which come back the mean
    /// reconnect delay `R` later and are closed again at the first storm after that (a cycle of
    /// `ceil(R / S) * S`); each unload takes them away for the time away and the reconnect. The
    /// backlog test's drain is estimated at this share of the consumers' speed: with a reconnect
    /// delay longer than the run they never drain it, and the run goes on to
    /// `backlog_max_wait_minutes`.
    pub(super) fn connected_share(&self) -> f64 {
        if !self.reconnects_consumers() {
            return 1.0;
        }
        let (unloaded, reconnect) = self.seconds_away();
        let mut share = 1.0;
        let every = self.reconnect_storm_every_seconds;
        if every > 0.0 && reconnect > 0.0 {
            let cycle = (reconnect / every).ceil() * every;
            share *= ((cycle - reconnect) / cycle).max(0.0);
        }
        let seconds = (self.warmup_duration_minutes + self.test_duration_minutes) * 60.0;
        let holding = (self.partitions() as f64).min(f64::from(self.brokers.max(1)));
        let per_broker = self.partitions().max(1) as f64 / holding;
        let unloads_per_s = if seconds > 0.0 {
            self.rolling_restarts() * (2.0 / holding).min(1.0) / seconds
        } else {
            0.0
        } + self.bundle_moves_per_minute / 60.0 / per_broker;
        let away = unloads_per_s * (unloaded + reconnect);
        if away.is_finite() {
            share / (1.0 + away)
        } else {
            0.0
        }
    }

    /// Bytes one partition's lifecycle state takes, adding `entries_per_s` entries of
    /// `entry_bytes`: what its producer holds while the topic is away, up to the client's memory
    /// limit.
    pub(super) fn lifecycle_bytes(&self, entries_per_s: f64, entry_bytes: f64) -> f64 {
        if !self.has_lifecycle() {
            return 0.0;
        }
        let away =
            if self.rolling_restart_interval_seconds > 0.0 || self.bundle_moves_per_minute > 0.0 {
                self.seconds_away().0
            } else {
                0.0
            };
        let held = (away * entries_per_s).min(CLIENT_MEMORY_LIMIT as f64 / entry_bytes.max(1.0));
        PART_LIFE_BYTES + held * HELD_BYTES_PER_BATCH
    }
}

impl Sim {
    /// Plans the first restart, storm and bundle moves (after the partitions' own tasks).
    pub(super) fn start_life(&mut self) {
        let Some(life) = &self.life else { return };
        let (restart, storm) = (life.restart_at(0), life.storm_us);
        if let Some(at) = restart {
            self.schedule(at, Task::Restart(0));
        }
        if storm > 0 {
            self.schedule(storm, Task::Storm);
        }
        for p in 0..self.parts.len() {
            self.plan_move(0, p);
        }
    }

    fn part_life(&mut self, p: usize) -> &mut PartLife {
        self.parts[p]
            .life
            .as_mut()
            .expect("a partition has its lifecycle state when the spec has lifecycle knobs")
    }

    pub(super) fn is_unloaded(&self, p: usize) -> bool {
        self.parts[p].life.as_ref().is_some_and(|l| l.unloaded)
    }

    /// Whether `task` waits for the topic to load or its subscription's consumers to reconnect
    /// (then it is kept, or dropped, here): nothing is read, sought or dispatched meanwhile.
    pub(super) fn held_back(&mut self, t: u64, task: Task) -> bool {
        let (p, s) = match task {
            Task::Publish(p, k) => {
                if self.is_unloaded(p as usize) {
                    self.hold(t, p as usize, k as usize);
                    return true;
                }
                return false;
            }
            // A redelivery request without a connection goes nowhere; the reconnect redelivers
            // every unacknowledged entry anyway.
            Task::NegativeAcks(p, s, _) => {
                return self.is_unloaded(p as usize) || self.parts[p as usize].subs[s as usize].away
            }
            Task::Seek(p, s)
            | Task::Churn(p, s)
            | Task::OpenAtFirst(p, s)
            | Task::CatchUp(p, s) => (p as usize, s as usize),
            _ => return false,
        };
        let sub = &self.parts[p].subs[s];
        // A seek waits too for a cursor the new owner has not opened yet (its consumers away
        // since before the move: they reopen it when they come back).
        let unopened = sub.forgotten && matches!(task, Task::Seek(..));
        if !self.is_unloaded(p) && !sub.away && !unopened {
            return false;
        }
        self.part_life(p).deferred.push(task);
        true
    }

    /// Rolling restart `k`: its broker closes every topic it owns (a graceful shutdown unloads
    /// its bundles: `BrokerService.unloadNamespaceBundlesGracefully`, `PersistentTopic.close`).
    pub(super) fn restart(&mut self, t: u64, k: u64) {
        let Some(life) = &self.life else { return };
        let broker = (k % life.brokers) as u32;
        let (next, delay) = (life.restart_at(k.saturating_add(1)), life.load_delay_us);
        for p in 0..self.parts.len() {
            if self.parts[p].broker == broker && !self.is_unloaded(p) {
                self.unload(t, p);
                self.plan_load(t.saturating_add(delay), p);
            }
        }
        if let Some(at) = next {
            self.schedule(at, Task::Restart(k + 1));
        }
    }

    /// A bundle move (load shedding, an admin unload): the topic unloads and loads on the next
    /// broker. One at a time: a move while the topic is away is dropped (the load plans the next).
    pub(super) fn bundle_move(&mut self, t: u64, p: usize) {
        if self.part_life(p).move_at != Some(t) {
            return;
        }
        self.part_life(p).move_at = None;
        if self.is_unloaded(p) {
            return;
        }
        let delay = self.life.as_ref().map_or(0, |l| l.load_delay_us);
        self.unload(t, p);
        self.plan_load(t.saturating_add(delay), p);
    }

    fn plan_move(&mut self, from: u64, p: usize) {
        let life = self.part_life(p);
        if !life.move_mean_us.is_finite() {
            return;
        }
        let gap = life.rng.exp(life.move_mean_us).max(MIN_MOVE_GAP_US);
        let at = (from as f64 + gap).min(u64::MAX as f64) as u64;
        life.move_at = Some(at);
        self.schedule(at, Task::Move(p as u32));
    }

    fn plan_load(&mut self, at: u64, p: usize) {
        self.part_life(p).load_at = Some(at);
        self.schedule(at, Task::Load(p as u32));
    }

    /// The topic closes on its broker: an `unload` row, its cursors forgotten (the new owner
    /// recovers them from the cursor ledger), its consumers' connections dropped. Their clients
    /// keep what is in their receiver queues until they reconnect.
    pub(super) fn unload(&mut self, t: u64, p: usize) {
        self.emit(t, p, Row::new("unload", None, None));
        for s in 0..self.parts[p].subs.len() {
            if self.parts[p].subs[s].active {
                let first = self.first_unacked(p, s);
                let sub = &mut self.parts[p].subs[s];
                sub.active = false;
                sub.waiting = None;
                sub.scheduled = None;
                sub.away = true;
                sub.rewind_to = first;
            }
            let sub = &mut self.parts[p].subs[s];
            sub.reconnect_at = None;
            if sub.opened {
                // The new owner's cursor knows the mark-delete position and what was acknowledged
                // on its own; the trace writes them again when it opens.
                sub.forgotten = true;
                sub.acked_upto = None;
                let runs: Vec<_> = sub.acked.iter().collect();
                for (ledger, lo, hi) in runs {
                    sub.pending_acks.insert(ledger, lo, hi);
                }
                sub.acked.clear();
            }
        }
        self.part_life(p).unloaded = true;
    }

    /// The topic loads on its new owner: `load` rows for the ledgers holding entries a cursor
    /// may still read, a new ledger for the adds, what the producer held sent, the subscriptions
    /// without consumers recovered, and the consumers' reconnects planned.
    pub(super) fn load(&mut self, t: u64, p: usize) {
        if self.part_life(p).load_at != Some(t) {
            return;
        }
        let Some(life) = &self.life else { return };
        let (owner, at) = life.new_owner(t, self.parts[p].broker);
        let (lo, hi) = life.reconnect_us;
        if at > t {
            // One broker, restarting: the topic comes back when it does.
            self.plan_load(at, p);
            return;
        }
        self.parts[p].broker = owner;
        self.write_load_rows(t, p);
        self.parts[p].ledgers.open = OpenLedger::new(t, true);
        let life = self.part_life(p);
        life.unloaded = false;
        life.load_at = None;
        // The new owner's `MessageDeduplication` has taken no snapshot yet (`lastSnapshotTimestamp`
        // 0): its monitor's next look takes one.
        if let Some(d) = self.parts[p].dedup.as_mut() {
            d.last_snapshot_us = None;
        }
        // Subscriptions without consumers are recovered with the managed ledger
        // (`ManagedLedgerImpl.initialize` opens every cursor of the cursor ledger).
        for s in 0..self.parts[p].subs.len() {
            let sub = &self.parts[p].subs[s];
            if sub.opened && sub.consumers.is_empty() && sub.forgotten {
                let first = sub.read_idx;
                self.reopen(t, p, s, first);
            }
        }
        self.send_held(t, p);
        for s in 0..self.parts[p].subs.len() {
            if self.parts[p].subs[s].away {
                let draw = self.part_life(p).rng.f64();
                let at = t.saturating_add(uniform(lo, hi, draw));
                self.parts[p].subs[s].reconnect_at = Some(at);
                self.schedule(at, Task::Reconnect(p as u32, s as u32));
            }
        }
        self.release_deferred(t, p, None);
        self.plan_move(t, p);
    }

    /// One `load` row per ledger holding an entry some cursor may read, with its entry range and
    /// the partition's mean entry size; one without a ledger when there is none.
    fn write_load_rows(&mut self, t: u64, p: usize) {
        let low = self.reach_low(p);
        let part = &self.parts[p];
        let published = part.published;
        if low >= published {
            self.emit(t, p, Row::new("load", None, None));
            return;
        }
        let mean = (part.bytes_published / published.max(1)).min(i32::MAX as u64) as i32;
        let starts: Vec<u64> = part.ledgers.starts.iter().copied().collect();
        let first = starts.partition_point(|&s| s <= low).saturating_sub(1);
        for i in first..starts.len() {
            let end = starts.get(i + 1).copied().unwrap_or(published);
            let mut at = starts[i];
            while at < end {
                let n = (end - at).min(i32::MAX as u64);
                let row = Row {
                    count: n as i32,
                    size: mean,
                    ..Row::new("load", None, Some(at))
                };
                self.emit(t, p, row);
                at += n;
            }
        }
    }

    /// Sends what the producer held while the topic was away (in order, as the batches it made
    /// then) and unblocks it.
    fn send_held(&mut self, t: u64, p: usize) {
        let life = self.part_life(p);
        let held = std::mem::take(&mut life.held);
        let blocked = std::mem::take(&mut life.blocked);
        life.held_bytes = 0;
        life.held_messages = 0;
        for (n, times) in held {
            for _ in 0..times {
                self.add_entry(t, p, n);
            }
        }
        for k in blocked {
            let k = k as usize;
            let part = &mut self.parts[p];
            let now = part.tau_at(part.producers[k].phase, t as f64, self.switch_us);
            part.producers[k].next_tau = part.producers[k].next_tau.max(now);
            let (at, n) = self.next_batch(p, k);
            self.parts[p].producers[k].batch = n;
            self.schedule(at.max(t), Task::Publish(p as u32, k as u32));
        }
    }

    /// A batch closes while the topic is away: the producer keeps it in its pending queue, and
    /// blocks once that holds the client's memory limit.
    fn hold(&mut self, t: u64, p: usize, k: usize) {
        let n = self.parts[p].producers[k].batch;
        // An empty message still takes client memory (its metadata): at least a byte each.
        let bytes = n.saturating_mul(self.parts[p].message_size.max(1));
        let life = self.part_life(p);
        match life.held.back_mut() {
            Some((m, times)) if *m == n => *times += 1,
            _ => life.held.push_back((n, 1)),
        }
        life.held_messages = life.held_messages.saturating_add(n);
        life.held_bytes = life.held_bytes.saturating_add(bytes);
        if life.held_bytes >= CLIENT_MEMORY_LIMIT {
            life.blocked.push(k as u32);
            return;
        }
        self.pause_if_owed(t, p, k);
        let (at, n) = self.next_batch(p, k);
        self.parts[p].producers[k].batch = n;
        self.schedule(at.max(t), Task::Publish(p as u32, k as u32));
    }

    /// The rolling-restart test's producer: after each send, if the deliveries its messages still
    /// owe (messages sent x subscriptions - messages received) reach the target, it sleeps 100 ms.
    pub(super) fn pause_if_owed(&mut self, t: u64, p: usize, k: usize) {
        let part = &self.parts[p];
        let Some(life) = &part.life else { return };
        if !life.pause_at.is_finite() {
            return;
        }
        let sent = part.messages_published.saturating_add(life.held_messages) as f64;
        let (subs, received) = part
            .subs
            .iter()
            .filter(|s| !s.consumers.is_empty())
            .fold((0.0, 0.0), |(n, r), s| (n + 1.0, r + s.received as f64));
        if sent * subs - received < life.pause_at {
            return;
        }
        let part = &mut self.parts[p];
        let now = part.tau_at(part.producers[k].phase, t as f64, self.switch_us);
        let stream = &mut part.producers[k];
        stream.next_tau = stream.next_tau.max(now + PAUSE_US);
    }

    /// Schedules again, at `t`, the deferred tasks of the partition (`None`) or of one of its
    /// subscriptions, except those whose subscription is still waiting for its consumers.
    fn release_deferred(&mut self, t: u64, p: usize, only: Option<usize>) {
        let deferred = std::mem::take(&mut self.part_life(p).deferred);
        let mut keep = Vec::new();
        for task in deferred {
            let s = match task {
                Task::Seek(_, s)
                | Task::Churn(_, s)
                | Task::OpenAtFirst(_, s)
                | Task::CatchUp(_, s) => s as usize,
                _ => continue,
            };
            let sub = &self.parts[p].subs[s];
            let unopened = sub.forgotten && matches!(task, Task::Seek(..));
            if only.is_some_and(|o| o != s) || sub.away || unopened {
                keep.push(task);
            } else {
                self.schedule(t, task);
            }
        }
        self.part_life(p).deferred = keep;
    }

    /// A subscription's consumers reconnect (after a load or a storm): the cursor opens at its
    /// first unacknowledged entry, the clients' receiver queues are cleared, and they read again.
    pub(super) fn reconnect(&mut self, t: u64, p: usize, s: usize) {
        let sub = &mut self.parts[p].subs[s];
        if sub.reconnect_at != Some(t) {
            return;
        }
        sub.reconnect_at = None;
        sub.away = false;
        // The clients handled their receiver queues until now.
        self.consume(t, p, s);
        self.open_at_first_unacked(t, p, s);
        let sub = &mut self.parts[p].subs[s];
        if let Some(nacked) = sub.dispatcher.nacked_mut() {
            nacked.clear();
        }
        sub.consumers.iter_mut().for_each(|c| c.nacks.clear());
        self.connect(t, p, s);
        self.release_deferred(t, p, Some(s));
    }

    /// The new owner opens a forgotten cursor at `first` (mark-delete + 1), then learns what was
    /// acknowledged on its own past it (`individual_ack` rows).
    pub(super) fn reopen(&mut self, t: u64, p: usize, s: usize, first: u64) {
        self.emit_cursor(t, p, s, "open", Some(first));
        let grouping = self.grouping;
        let sub = &mut self.parts[p].subs[s];
        sub.forgotten = false;
        sub.read_idx = first;
        sub.rewind_to = first;
        sub.acked_upto = first.checked_sub(1);
        for c in &mut sub.consumers {
            c.acks.sent_by(t, grouping, &mut sub.pending_acks);
        }
        if let Some(md) = first.checked_sub(1) {
            let md = Position::new(0, md as i64);
            sub.pending_acks.remove_through(md);
            sub.acked.remove_through(md);
        }
        self.write_individual_acks(t, p, s);
        self.release_deferred(t, p, Some(s));
    }

    /// A reconnect storm: every connected consumer of every topic here closes and reconnects
    /// after its delay; the topics stay where they are.
    pub(super) fn storm(&mut self, t: u64) {
        let Some(life) = &self.life else { return };
        let ((lo, hi), every) = (life.reconnect_us, life.storm_us);
        for p in 0..self.parts.len() {
            if self.is_unloaded(p) {
                continue;
            }
            for s in 0..self.parts[p].subs.len() {
                if !self.parts[p].subs[s].active {
                    continue;
                }
                self.close_consumers(t, p, s);
                let draw = self.part_life(p).rng.f64();
                let at = t.saturating_add(uniform(lo, hi, draw));
                let sub = &mut self.parts[p].subs[s];
                sub.away = true;
                sub.reconnect_at = Some(at);
                self.schedule(at, Task::Reconnect(p as u32, s as u32));
            }
        }
        self.schedule(t.saturating_add(every), Task::Storm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingValue::Float;

    fn life(settings: &[(&str, f64)]) -> Life {
        let mut spec = WorkloadSpec::default();
        spec.set("test_duration_minutes", &Float(0.5)).unwrap();
        spec.set("brokers", &Float(2.0)).unwrap();
        for (k, v) in settings {
            spec.set(k, &Float(*v)).unwrap();
        }
        Life::new(&spec).expect("a lifecycle knob is on")
    }

    /// `BrokerEntryCacheRollingRestartTest`'s injector over 30 s with 3 restarts: an interval of
    /// 7.5 s, restarts at 7.5, 15 and 22.5 s; the closed form the estimate uses agrees.
    #[test]
    fn the_schedule_is_the_injectors_and_one_broker_is_down_at_a_time() {
        let l = life(&[("rolling_restart_interval_seconds", 7.5)]);
        let at: Vec<_> = (0..5).map_while(|k| l.restart_at(k)).collect();
        assert_eq!(at, [7_500_000, 15_000_000, 22_500_000]);
        assert_eq!(l.down(7_499_999), None);
        assert_eq!(l.down(7_500_000), Some((0, 12_500_000)));
        assert_eq!(l.down(12_500_000), None);
        assert_eq!(l.down(16_000_000), Some((1, 20_000_000)));
        // Broker 1 is away: its topics go to broker 0, and one moved off broker 0 stays there.
        assert_eq!(l.new_owner(16_000_000, 1), (0, 16_000_000));
        assert_eq!(l.new_owner(16_000_000, 0), (0, 16_000_000));
        assert_eq!(l.new_owner(21_000_000, 0), (1, 21_000_000));
        let mut spec = WorkloadSpec::default();
        spec.set("test_duration_minutes", &Float(0.5)).unwrap();
        spec.set("rolling_restart_interval_seconds", &Float(7.5))
            .unwrap();
        assert_eq!(spec.rolling_restarts(), 3.0);
        spec.set("broker_restart_seconds", &Float(10.0)).unwrap();
        assert_eq!(spec.rolling_restarts(), 2.0);
        // One broker: a topic leaving it waits until it is back.
        let mut one = WorkloadSpec::default();
        one.set("rolling_restart_interval_seconds", &Float(10.0))
            .unwrap();
        let l = Life::new(&one).unwrap();
        assert_eq!(l.new_owner(10_100_000, 0), (0, 15_000_000));
    }

    /// A producer routed by time: the stream time of a trace time maps back onto it, or onto the
    /// start of the stream's next visit.
    #[test]
    fn tau_at_inverts_arrival_us() {
        let mut spec = WorkloadSpec::default();
        spec.set("partitions_per_topic", &Float(4.0)).unwrap();
        let (mut sim, _) = Sim::new(&spec, 1, 0);
        let part = &mut sim.parts[0];
        part.route_period = 4;
        let switch = 10_000.0;
        for phase in 0..4 {
            for t in [0.0, 5_000.0, 12_345.0, 39_999.0, 40_000.0, 1e9 + 7.0] {
                let tau = part.tau_at(phase, t, switch);
                let back = part.arrival_us(phase, tau, switch);
                assert!(back >= t - 1e-6, "{phase} {t} {tau} {back}");
                assert!(back < t + 3.0 * switch + 1e-6, "{phase} {t} {tau} {back}");
            }
        }
    }
}
