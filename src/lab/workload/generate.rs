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
//! entries a cursor can still reach), not by the trace's length. `docs/fidelity.md` maps each behaviour to the Pulsar code it follows.

use super::ack_grouping::{Grouping, PendingAcks};
use super::negative_acks::NegativeAcks;
use super::rng::Rng;
use super::selector::{sticky_key_hash, ConsistentHashRing};
use super::spec::{KeyDistributor, SubscriptionType, TopicDetail, WorkloadSpec};
use crate::broker::ledger::rollover::{OpenLedger, Rollover};
use crate::broker::positions::acked::{unacked_runs, AckedRanges};
use crate::broker::positions::layout::{Layout, LedgerInfo};
use crate::cache::fast_hash::FastMap;
use crate::cache::position::Position;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::io::Write;
use std::ops::Range;

/// `reason` of a `redeliver` row: the entry's consumer had no permits, or its key already
/// waited in the replay queue (Key_Shared).
pub const REASON_HOLD_BACK: &str = "hold-back";
/// `reason` of a `redeliver` row: a consumer negatively acknowledged the entry.
pub const REASON_NACK: &str = "nack";
/// `reason` of a `redeliver` row: a read brought more messages than the consumers had permits
/// for (Shared).
pub const REASON_OVERFLOW: &str = "overflow";

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
    /// Messages in the entry (`add`); `None` elsewhere.
    pub messages: Vec<Option<i32>>,
    /// Why an entry was queued for redelivery (`redeliver`); `None` elsewhere.
    pub reason: Vec<Option<&'static str>>,
    pub broker_names: Vec<String>,
    pub topic_names: Vec<String>,
    pub cursor_names: Vec<String>,
}

/// One row, before it is placed (time, broker, topic).
#[derive(Debug, Clone, Copy, Default)]
struct Row {
    op: &'static str,
    cursor: Option<u32>,
    idx: Option<u64>,
    count: i32,
    size: i32,
    messages: Option<i32>,
    reason: Option<&'static str>,
}

impl Row {
    fn new(op: &'static str, cursor: Option<u32>, idx: Option<u64>) -> Self {
        Row {
            op,
            cursor,
            idx,
            ..Default::default()
        }
    }
}

impl EventColumns {
    pub fn len(&self) -> usize {
        self.ts_us.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts_us.is_empty()
    }

    fn push(&mut self, ts: u64, broker: u32, topic: u32, row: Row, pos: Option<Position>) {
        self.ts_us.push(ts as i64);
        self.broker.push(broker);
        self.topic.push(topic);
        self.op.push(row.op);
        self.cursor.push(row.cursor);
        self.ledger_id.push(pos.map(|p| p.ledger_id));
        self.entry_id.push(pos.map(|p| p.entry_id));
        self.count.push(row.count);
        self.size.push(row.size);
        self.messages.push(row.messages);
        self.reason.push(row.reason);
    }

    /// Drops the rows (keeps the name tables and the capacity).
    pub(super) fn clear_rows(&mut self) {
        self.drain_front(self.len());
    }

    /// Drops the first `n` rows.
    pub(super) fn drain_front(&mut self, n: usize) {
        self.ts_us.drain(..n);
        self.broker.drain(..n);
        self.topic.drain(..n);
        self.op.drain(..n);
        self.cursor.drain(..n);
        self.ledger_id.drain(..n);
        self.entry_id.drain(..n);
        self.count.drain(..n);
        self.size.drain(..n);
        self.messages.drain(..n);
        self.reason.drain(..n);
    }

    /// Appends rows `r` of `other`.
    pub(super) fn extend_from(&mut self, other: &EventColumns, r: Range<usize>) {
        self.ts_us.extend_from_slice(&other.ts_us[r.clone()]);
        self.broker.extend_from_slice(&other.broker[r.clone()]);
        self.topic.extend_from_slice(&other.topic[r.clone()]);
        self.op.extend_from_slice(&other.op[r.clone()]);
        self.cursor.extend_from_slice(&other.cursor[r.clone()]);
        self.ledger_id
            .extend_from_slice(&other.ledger_id[r.clone()]);
        self.entry_id.extend_from_slice(&other.entry_id[r.clone()]);
        self.count.extend_from_slice(&other.count[r.clone()]);
        self.size.extend_from_slice(&other.size[r.clone()]);
        self.messages.extend_from_slice(&other.messages[r.clone()]);
        self.reason.extend_from_slice(&other.reason[r]);
    }

    fn push_from(&mut self, other: &EventColumns, i: usize) {
        self.ts_us.push(other.ts_us[i]);
        self.broker.push(other.broker[i]);
        self.topic.push(other.topic[i]);
        self.op.push(other.op[i]);
        self.cursor.push(other.cursor[i]);
        self.ledger_id.push(other.ledger_id[i]);
        self.entry_id.push(other.entry_id[i]);
        self.count.push(other.count[i]);
        self.size.push(other.size[i]);
        self.messages.push(other.messages[i]);
        self.reason.push(other.reason[i]);
    }
}

/// A consumer and its client: the receiver queue, and the permits on both sides of the FLOW.
struct Consumer {
    /// Messages per microsecond.
    speed: f64,
    /// Entries delivered and not fully processed yet, oldest first.
    queue: VecDeque<u64>,
    /// Messages of the front entry already processed.
    front_done: u64,
    /// Messages in the queue not processed yet.
    queued: u64,
    /// The broker's count of messages it may still send (negative when a batch overshot).
    permits: i64,
    /// Messages processed since the client's last FLOW.
    unflowed: u64,
    last_us: u64,
    carry: f64,
    /// When `unflowed` reaches the FLOW threshold, if the queue holds enough to get there (reset
    /// when the queue is dropped, so the planned FLOW is ignored).
    flow_at: Option<u64>,
    /// Processed entries negatively acknowledged, waiting for the client to ask for their
    /// redelivery (Shared, Key_Shared: those entries; Exclusive, Failover: everything
    /// unacknowledged).
    nacks: NegativeAcks,
    /// What it acknowledged on their own and its client has not sent to the broker yet (kept
    /// only for a subscription that can rewind).
    acks: PendingAcks,
}

impl Consumer {
    fn new(speed: f64) -> Self {
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
    fn oldest_held(&self, nacks: bool, grouping: Grouping) -> Option<u64> {
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
    fn connect(&mut self, t: u64, permits: i64) {
        self.drop_queue();
        self.permits = permits;
        self.last_us = t;
    }

    /// The consumer closes: its waiting nacks are forgotten with its tracker.
    fn close(&mut self) {
        self.drop_queue();
        self.nacks.clear();
    }

    fn drop_queue(&mut self) {
        self.queue.clear();
        self.front_done = 0;
        self.queued = 0;
        self.permits = 0;
        self.unflowed = 0;
        self.carry = 0.0;
        self.flow_at = None;
    }
}

struct Sub {
    cursor: u32,
    kind: SubscriptionType,
    /// The cursor's read position (an entry index).
    read_idx: u64,
    active: bool,
    consumers: Vec<Consumer>,
    /// Exclusive/Failover: the consumer that gets the entries.
    active_consumer: usize,
    /// The replay queue: one set for Shared, one per consumer (the keys it owns) for Key_Shared.
    replay: Vec<BTreeSet<u64>>,
    replay_len: usize,
    /// Key_Shared: how many replay entries each sticky-key hash has.
    replay_hashes: FastMap<u32, u32>,
    /// Key_Shared: replay entries queued without their hash (negative acks), until a replay read
    /// holds them back.
    unhashed: BTreeSet<u64>,
    ring: ConsistentHashRing,
    /// Shared: the consumer whose turn is next.
    rr: usize,
    scheduled: Option<u64>,
    acked_upto: Option<u64>,
    /// A normal read parked at the end of the topic: (entries asked for, when the cursor looks
    /// for new entries again; after that, it is woken by the next entry).
    waiting: Option<(u64, u64)>,
    /// Failover: no reads before this time (the active consumer was just chosen).
    resume_at: u64,
    /// The first unacknowledged entry when the last consumer left.
    rewind_to: u64,
    /// Entries its consumers acknowledged on their own past the mark-delete position that the
    /// trace has (`individual_ack` rows): its reads pass over them. Entry indices as positions
    /// of ledger 0.
    acked: AckedRanges,
    /// Acknowledged on their own (at the broker), not in the trace yet: written before the next
    /// rewind, or before a read that would reach them (acknowledgements a client sent after a
    /// rewind), the only times they change what a read reads.
    pending_acks: AckedRanges,
    /// Exclusive, Failover: entries negatively acknowledged and not acknowledged since.
    nacked: BTreeSet<u64>,
    /// Whether it can ever rewind (its consumers come and go, or nacks rewind it), so that what
    /// its consumers acknowledge on their own is worth keeping for the trace.
    rewinds: bool,
    /// Key_Shared: the next read skips the replay queue (looking ahead).
    skip_next_replay: bool,
    /// Share of delivered messages negatively acknowledged.
    redelivery_rate: f64,
    /// How the cursor starts.
    start: SubStart,
    /// One of OMB's consumers, paused to build a backlog ([`BacklogTest`]).
    pauses_for_backlog: bool,
    /// Its consumers process nothing (OMB's paused worker holds each message listener), so they
    /// free no permits and send no FLOW; the broker sends until their permits run out.
    paused: bool,
    /// Messages its consumers processed (OMB's `messagesReceived`).
    received: u64,
}

struct Partition {
    topic: u32,
    broker: u32,
    ledgers: Ledgers,
    /// Entries published.
    published: u64,
    /// Each entry's first message (messages are numbered per partition).
    first_msg: MessageIndex,
    messages_published: u64,
    bytes_published: u64,
    /// Microseconds between messages (infinite: nothing is published).
    interval_us: f64,
    /// Bytes per message.
    message_size: u64,
    /// The producers' batches on this partition: one, or one per producer of a topic whose
    /// producers route by time ([`WorkloadSpec::routes_by_time`]).
    producers: Vec<ProducerStream>,
    /// Microseconds between one producer's messages while it sends here.
    producer_interval_us: f64,
    /// A time-routed producer sends here one switch interval in this many (1: always).
    route_period: u64,
    subs: Vec<Sub>,
}

/// One producer's messages to one partition. Its arrivals run in the producer's own time on this
/// partition (`tau`: the switch intervals it spends here, laid end to end), mapped onto the trace's
/// time by [`Partition::arrival_us`], so a producer that visits one interval in `route_period`
/// sends its whole rate here then and nothing in between.
struct ProducerStream {
    /// When the next message not yet in a batch arrives, in this stream's own time.
    next_tau: f64,
    /// Messages in the batch that this stream's next `Publish` closes.
    batch: u64,
    /// Which switch interval of each `route_period` is this partition's.
    phase: u64,
}

impl Partition {
    /// The trace time of a stream's own time `tau`.
    fn arrival_us(&self, phase: u64, tau: f64, switch_us: f64) -> f64 {
        if self.route_period == 1 {
            return tau;
        }
        let visit = (tau / switch_us).floor();
        let within = tau - visit * switch_us;
        (visit * self.route_period as f64 + phase as f64) * switch_us + within
    }
}

/// A partition's ledgers: where each starts (in entries published), and the one taking appends.
struct Ledgers {
    /// The first entry of each ledger the simulation may still look at; the one at `starts[i]` is
    /// ledger `first_id + i`.
    starts: VecDeque<u64>,
    first_id: i64,
    /// The partition's first ledger, where entry 0 is (a cursor opening at the first entry).
    base_id: i64,
    open: OpenLedger,
}

impl Ledgers {
    fn new(first_id: i64) -> Self {
        Ledgers {
            starts: VecDeque::from([0]),
            first_id,
            base_id: first_id,
            open: OpenLedger::new(0, false),
        }
    }

    /// The position of entry `idx` of a partition that has published `published` entries: one
    /// published and not dropped, the next one to be published, or the first entry of all.
    fn position(&self, idx: u64, published: u64) -> Position {
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
    fn ledger_end(&self, idx: u64) -> u64 {
        let i = self.starts.partition_point(|&s| s <= idx);
        self.starts.get(i).copied().unwrap_or(u64::MAX)
    }

    /// Entry `idx` of `bytes` is added at `t`: into a new ledger if the last one was full.
    fn add(&mut self, rollover: &Rollover, idx: u64, bytes: u64, t: u64) {
        if self.open.is_full() {
            self.starts.push_back(idx);
        }
        self.open.added(rollover, bytes, t);
    }

    /// Forgets the ledgers wholly before entry `low - 1` (a mark-delete position may name the
    /// entry before the oldest one reachable).
    fn drop_below(&mut self, low: u64) {
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
struct MessageIndex {
    /// The entry `first[0]` belongs to.
    base: u64,
    first: Vec<u64>,
    /// Entries held when the index is next checked for entries to drop.
    check_at: usize,
}

/// The fewest entries the message index holds before it looks for entries to drop.
const INDEX_CHECK_ENTRIES: usize = 4096;

impl MessageIndex {
    fn slot(&self, idx: u64) -> usize {
        debug_assert!(idx >= self.base, "entry {idx} was dropped from the index");
        (idx - self.base) as usize
    }

    /// Messages in entry `idx` (`total`: messages published).
    #[inline]
    fn messages(&self, idx: u64, total: u64) -> u64 {
        let i = self.slot(idx);
        self.first.get(i + 1).copied().unwrap_or(total) - self.first[i]
    }

    #[inline]
    fn first_message(&self, idx: u64, total: u64) -> u64 {
        self.first.get(self.slot(idx)).copied().unwrap_or(total)
    }

    /// The entry holding message `msg`, which was published.
    fn entry_of(&self, msg: u64) -> u64 {
        debug_assert!(self.first.first().is_some_and(|&f| f <= msg));
        self.base + (self.first.partition_point(|&f| f <= msg) as u64).saturating_sub(1)
    }

    /// Drops the entries below `low`.
    fn drop_below(&mut self, low: u64) {
        let n = low.saturating_sub(self.base).min(self.first.len() as u64);
        self.first.drain(..n as usize);
        self.base += n;
        self.check_at = (2 * self.first.len()).max(INDEX_CHECK_ENTRIES);
    }
}

impl Partition {
    fn messages(&self, idx: u64) -> u64 {
        self.first_msg.messages(idx, self.messages_published)
    }

    fn first_message(&self, idx: u64) -> u64 {
        self.first_msg.first_message(idx, self.messages_published)
    }

    /// The entry holding message `msg` (the end when `msg` is not published yet).
    fn entry_of_message(&self, msg: u64) -> u64 {
        if msg >= self.messages_published {
            return self.published;
        }
        self.first_msg.entry_of(msg)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Task {
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
}

pub(super) struct Sim {
    spec: WorkloadSpec,
    rng: Rng,
    queue: BinaryHeap<Reverse<(u64, u64, Task)>>,
    seq: u64,
    parts: Vec<Partition>,
    pub(super) out: EventColumns,
    end_us: u64,
    rollover: Rollover,
    /// The producers' `partitionSwitchMs`, in microseconds (time-routed topics).
    switch_us: f64,
    /// Sticky-key hash of each key id (Key_Shared only).
    key_hashes: Vec<u32>,
    /// The FLOW threshold in messages (half the receiver queue).
    flow_threshold: u64,
    /// The clients' `negativeAckRedeliveryDelay`, at least the client's minimum.
    nack_delay_ms: u64,
    /// How the clients group their acknowledgements.
    grouping: Grouping,
    /// OMB's backlog test, while it runs.
    backlog: Option<BacklogTest>,
    /// Whether the message index drops entries no cursor can reach (see [`Sim::prune_index`]).
    prune_index: bool,
    /// Entries the normal reads delivered (what the trace's replay must read too).
    entries_read: u64,
    /// Tasks in `queue` other than the subscriptions' once-a-second acknowledgements.
    other_tasks: u64,
    /// When [`Sim::only_quiet_acks_left`] may look again (at most once a simulated second).
    next_quiet_check_us: u64,
    /// Entries delivered that the broker had as acknowledged (a read must pass over them).
    #[cfg(test)]
    acknowledged_delivered: u64,
}

impl Sim {
    fn schedule(&mut self, at: u64, task: Task) -> bool {
        if at <= self.end_us {
            self.seq += 1;
            self.queue.push(Reverse((at, self.seq, task)));
            if !matches!(task, Task::Ack(..)) {
                self.other_tasks += 1;
            }
            true
        } else {
            false
        }
    }

    fn position(&self, p: usize, idx: u64) -> Position {
        let part = &self.parts[p];
        part.ledgers.position(idx, part.published)
    }

    fn emit(&mut self, t: u64, p: usize, row: Row) {
        let pos = row.idx.map(|i| self.position(p, i));
        let (broker, topic) = (self.parts[p].broker, self.parts[p].topic);
        self.out.push(t, broker, topic, row, pos);
    }

    fn emit_cursor(&mut self, t: u64, p: usize, s: usize, op: &'static str, idx: Option<u64>) {
        let cursor = self.parts[p].subs[s].cursor;
        self.emit(t, p, Row::new(op, Some(cursor), idx));
    }

    fn emit_redeliver(&mut self, t: u64, p: usize, s: usize, idx: u64, reason: &'static str) {
        let cursor = self.parts[p].subs[s].cursor;
        let row = Row {
            reason: Some(reason),
            ..Row::new("redeliver", Some(cursor), Some(idx))
        };
        self.emit(t, p, row);
    }

    // ---- keys -------------------------------------------------------------------------------

    /// The key of message `msg`, under a distributor that gives keys.
    fn key_id(&self, msg: u64) -> usize {
        match self.spec.key_distributor {
            KeyDistributor::NoKey => 0,
            KeyDistributor::KeyRoundRobin => (msg % self.spec.keys as u64) as usize,
            KeyDistributor::RandomNano => {
                let mut z = msg.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                ((z ^ (z >> 29)) % self.spec.keys as u64) as usize
            }
        }
    }

    fn key_hash(&self, key: usize) -> u32 {
        match self.key_hashes.get(key) {
            Some(&h) => h,
            None => key_hash_of(key),
        }
    }

    /// A Key_Shared entry's sticky-key hash (see [`Sim::entry_hash`]) and the consumer that owns
    /// it.
    fn route(&self, p: usize, s: usize, idx: u64) -> (u32, usize) {
        let hash = self.entry_hash(p, idx);
        let owner = self.parts[p].subs[s].ring.select(hash).unwrap_or(0);
        (hash, owner)
    }

    /// The sticky-key hash of entry `idx`: its first message's key (`Commands
    /// .initBatchMessageMetadata` gives a batch its first message's metadata). A message without a
    /// key is keyed by `<producer name>-<sequence id>` (`Commands.resolveStickyKey`, since Pulsar
    /// PR #23219; `NONE_KEY` only for metadata with neither), so keyless entries spread over the
    /// consumers. Each partition has one producer, whose sequence ids number its messages from 0.
    fn entry_hash(&self, p: usize, idx: u64) -> u32 {
        let part = &self.parts[p];
        let first = part.first_message(idx);
        match self.spec.key_distributor {
            KeyDistributor::NoKey => fallback_key_hash(part.topic, first),
            _ => self.key_hash(self.key_id(first)),
        }
    }

    // ---- the replay queue -------------------------------------------------------------------

    /// Adds an entry to the replay queue; false if it was there already. On Key_Shared an entry
    /// added `with_hash` blocks its key for normal reads and is replayed only when its consumer
    /// has permits; one added without (a negative ack) does neither until a replay read holds it
    /// back, which records its hash.
    fn add_to_replay(&mut self, p: usize, s: usize, idx: u64, with_hash: bool) -> bool {
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
    fn replay_slot(&self, p: usize, s: usize, idx: u64) -> (bool, u32, usize) {
        if self.parts[p].subs[s].kind == SubscriptionType::KeyShared {
            let (hash, bucket) = self.route(p, s, idx);
            (true, hash, bucket)
        } else {
            (false, 0, 0)
        }
    }

    fn remove_from_replay(&mut self, p: usize, s: usize, idx: u64) {
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

    fn clear_replay(sub: &mut Sub) {
        sub.replay.iter_mut().for_each(BTreeSet::clear);
        sub.replay_len = 0;
        sub.replay_hashes.clear();
        sub.unhashed.clear();
        sub.skip_next_replay = false;
    }

    /// The first entry nobody has acknowledged: the oldest entry a consumer holds (in its receiver
    /// queue or negatively acknowledged) or in the replay queue, else the read position: the
    /// mark-delete position never passes an entry still to be acknowledged (`ManagedCursorImpl`
    /// moves it over the acknowledged prefix only).
    fn first_unacked(&self, p: usize, s: usize) -> u64 {
        let sub = &self.parts[p].subs[s];
        let single = sub.kind.has_single_active_consumer();
        let grouping = self.grouping;
        sub.consumers
            .iter()
            .filter_map(|c| c.oldest_held(!single, grouping))
            .chain(sub.nacked.first().copied())
            .chain(sub.replay.iter().filter_map(|r| r.first().copied()))
            .chain(sub.unhashed.first().copied())
            .min()
            .unwrap_or(sub.read_idx)
            .min(sub.read_idx)
    }

    // ---- consumers ----------------------------------------------------------------------------

    /// The consumers of a subscription process their queues up to `t`, acknowledging each entry on
    /// its own, or negatively: then it waits in the consumer's tracker for its redelivery request
    /// (see [`Sim::redeliver_nacked`]). A consumer that has freed half its receiver queue sends
    /// FLOW. Returns whether the dispatcher has new work (a FLOW).
    fn consume(&mut self, t: u64, p: usize, s: usize) -> bool {
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
        let single = sub.kind.has_single_active_consumer();
        let mut wake = false;
        let Sub {
            consumers,
            pending_acks,
            nacked,
            rewinds,
            ..
        } = sub;
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
                    if single {
                        nacked.insert(idx);
                    }
                } else {
                    if single {
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

    /// A consumer's nack timer fires: the client asks for the redelivery of the entries due
    /// (`NegativeAcksTracker.triggerRedelivery` -> `ConsumerImpl.redeliverUnacknowledgedMessages`
    /// with their ids). Shared, Key_Shared: the dispatcher puts them in the replay queue
    /// (`PersistentDispatcherMultipleConsumers.redeliverUnacknowledgedMessages`). Exclusive,
    /// Failover: single messages cannot be redelivered, so the client asks for everything
    /// unacknowledged (see [`Sim::redeliver_unacknowledged`]).
    fn redeliver_nacked(&mut self, t: u64, p: usize, s: usize, c: usize) {
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

    /// Exclusive, Failover: the client drops its receiver queue, counting the dropped messages as
    /// freed permits, and asks for everything unacknowledged
    /// (`ConsumerImpl.redeliverUnacknowledgedMessages()`); the dispatcher rewinds the cursor
    /// (`PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages`), and its reads
    /// pass over what was acknowledged.
    fn redeliver_unacknowledged(&mut self, t: u64, p: usize, s: usize) {
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

    /// The cursor reads again from `first`, the first unacknowledged entry (`ManagedCursorImpl
    /// .rewind`): the trace gets the acknowledgements the broker has by then (the mark-delete
    /// position, then what was acknowledged on its own past it), then the `rewind`.
    fn rewind(&mut self, t: u64, p: usize, s: usize, first: u64) {
        self.write_acks(t, p, s, first);
        self.emit_cursor(t, p, s, "rewind", None);
        self.parts[p].subs[s].read_idx = first;
    }

    /// Writes the mark-delete position (the entry before `first`, the first unacknowledged one) if
    /// the trace is behind it; what it passes is acknowledged, whatever the trace has of it.
    fn write_mark_delete(&mut self, t: u64, p: usize, s: usize, first: u64) {
        let Sub {
            consumers,
            pending_acks,
            acked,
            acked_upto,
            ..
        } = &mut self.parts[p].subs[s];
        for c in consumers.iter_mut() {
            c.acks.sent_by(t, self.grouping, pending_acks);
        }
        if first > 0 && acked_upto.is_none_or(|a| a < first - 1) {
            *acked_upto = Some(first - 1);
            let md = Position::new(0, first as i64 - 1);
            pending_acks.remove_through(md);
            acked.remove_through(md);
            self.emit_cursor(t, p, s, "ack", Some(first - 1));
        }
    }

    /// Writes the mark-delete position ([`Sim::write_mark_delete`]) and the entries acknowledged on
    /// their own past it that the trace does not have yet ([`Sim::write_individual_acks`]).
    fn write_acks(&mut self, t: u64, p: usize, s: usize, first: u64) {
        self.write_mark_delete(t, p, s, first);
        self.write_individual_acks(t, p, s);
    }

    /// Writes the entries the broker has as acknowledged on their own and the trace does not,
    /// one `individual_ack` row per run within a ledger.
    fn write_individual_acks(&mut self, t: u64, p: usize, s: usize) {
        let pending_acks = &mut self.parts[p].subs[s].pending_acks;
        let runs: Vec<_> = pending_acks.iter().collect();
        pending_acks.clear();
        let cursor = self.parts[p].subs[s].cursor;
        for (_, lo, hi) in runs {
            self.parts[p].subs[s].acked.insert(0, lo, hi);
            let (mut lo, hi) = (lo as u64, hi as u64);
            while lo <= hi {
                let end = self.parts[p]
                    .ledgers
                    .ledger_end(lo)
                    .min(hi + 1)
                    .min(lo + i32::MAX as u64);
                let row = Row {
                    count: (end - lo) as i32,
                    ..Row::new("individual_ack", Some(cursor), Some(lo))
                };
                self.emit(t, p, row);
                lo = end;
            }
        }
    }

    /// Plans the FLOW of every consumer that has none planned and holds enough to send one.
    fn plan_flows(&mut self, t: u64, p: usize, s: usize) {
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

    fn deliver(&mut self, p: usize, s: usize, c: usize, idx: u64) {
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

    // ---- reads ------------------------------------------------------------------------------

    /// Entries a read may ask for under `dispatcher_max_read_size_bytes`, estimated from the
    /// average entry size plus BookKeeper's read overhead per entry, as
    /// `EntryCountEstimator.estimateEntryCountByBytesSize` estimates.
    fn read_cap(&self, p: usize) -> u64 {
        let part = &self.parts[p];
        if part.published == 0 || part.bytes_published == 0 {
            return u64::MAX;
        }
        let average = (part.bytes_published / part.published).max(1);
        (self.spec.dispatcher_max_read_size_bytes / (average + BOOKKEEPER_READ_OVERHEAD_PER_ENTRY))
            .max(1)
    }

    /// A normal read of `n` entries from the read position: the entries it reads, passing over
    /// those acknowledged on their own (as the trace's replay reads them, [`unacked_runs`]).
    fn read_entries(&mut self, t: u64, p: usize, s: usize, n: u64) -> Vec<u64> {
        let first = self.parts[p].subs[s].read_idx;
        // Acknowledgements a client sent after a rewind, of entries the rewound cursor has yet to
        // reach: the read passes over them, so the trace gets them first.
        let sent_ahead = self.parts[p].subs[s]
            .pending_acks
            .last()
            .is_some_and(|(_, _, last)| last >= first as i64);
        if sent_ahead {
            self.write_individual_acks(t, p, s);
        }
        let cursor = self.parts[p].subs[s].cursor;
        let row = Row {
            count: n as i32,
            ..Row::new("read", Some(cursor), None)
        };
        self.emit(t, p, row);
        let published = self.parts[p].published;
        let sub = &mut self.parts[p].subs[s];
        if sub.acked.is_empty() {
            sub.read_idx += n;
            self.entries_read += n;
            return (first..first + n).collect();
        }
        // Entry indices as the positions of one ledger: which entries a read passes over does
        // not depend on where the ledgers end.
        let layout = Layout {
            ledgers: vec![LedgerInfo {
                id: 0,
                entries: published,
                bytes: 0,
            }],
        };
        let mut runs = Vec::new();
        let skip_to = unacked_runs(
            &sub.acked,
            Position::new(0, first as i64),
            n,
            &layout,
            &layout,
            &mut runs,
        );
        let read: Vec<u64> = runs
            .iter()
            .flat_map(|&(_, a, b)| a as u64..=b as u64)
            .collect();
        sub.read_idx = match (skip_to, read.last()) {
            (Some(to), _) => to.entry_id as u64,
            (None, Some(&last)) => last + 1,
            (None, None) => first,
        };
        self.entries_read += read.len() as u64;
        read
    }

    /// Parks a normal read at the end of the topic: the cursor looks again after
    /// `managed_ledger_new_entries_check_delay_in_millis`, then waits to be woken by an entry.
    fn park(&mut self, t: u64, p: usize, s: usize, entries: u64) {
        let delay = (self.spec.managed_ledger_new_entries_check_delay_ms * 1000.0) as u64;
        self.parts[p].subs[s].waiting = Some((entries, t.saturating_add(delay)));
    }

    /// The parked read, when entries have come and the cursor has looked for them.
    fn parked_read(&mut self, t: u64, p: usize, s: usize) -> Option<Vec<u64>> {
        let (asked, check_at) = self.parts[p].subs[s].waiting?;
        let available = self.parts[p].published - self.parts[p].subs[s].read_idx;
        if available == 0 {
            return None;
        }
        if t < check_at {
            self.schedule_dispatch(check_at, p, s);
            return None;
        }
        self.parts[p].subs[s].waiting = None;
        Some(self.read_entries(t, p, s, asked.min(available)))
    }

    /// (total permits, permits of the first consumer that has any), as Pulsar's multi-consumer
    /// dispatcher counts them.
    fn permit_summary(sub: &Sub) -> (i64, i64) {
        let total = sub.consumers.iter().map(|c| c.permits).sum();
        let first = sub
            .consumers
            .iter()
            .map(|c| c.permits)
            .find(|&x| x > 0)
            .unwrap_or(0);
        (total, first)
    }

    fn dispatch(&mut self, t: u64, p: usize, s: usize) {
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

    /// Exclusive/Failover: read min(permits, read batch) entries for the active consumer while it
    /// has permits; at the end of the topic, park the read until an entry is published.
    fn dispatch_single(&mut self, t: u64, p: usize, s: usize) {
        let batch = self.spec.read_batch_size as u64;
        let c = self.parts[p].subs[s].active_consumer;
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

    /// Shared: replay entries first, else a normal read, each of min(total permits, read batch)
    /// entries, while some consumer has permits.
    fn dispatch_shared(&mut self, t: u64, p: usize, s: usize) {
        let batch = self.spec.read_batch_size as u64;
        loop {
            if let Some(read) = self.parked_read(t, p, s) {
                self.shared_send(t, p, s, &read, false);
                continue;
            }
            let available = self.parts[p].published - self.parts[p].subs[s].read_idx;
            let (total, first) = Self::permit_summary(&self.parts[p].subs[s]);
            let current = total.max(first);
            if current <= 0 || first <= 0 {
                return;
            }
            let to_read = (current as u64).min(batch).min(self.read_cap(p)).max(1);
            if self.parts[p].subs[s].replay_len > 0 {
                let replay: Vec<u64> = self.parts[p].subs[s].replay[0]
                    .iter()
                    .take(to_read as usize)
                    .copied()
                    .collect();
                for &idx in &replay {
                    self.emit_cursor(t, p, s, "replay", Some(idx));
                }
                self.shared_send(t, p, s, &replay, true);
                continue;
            }
            if self.parts[p].subs[s].waiting.is_some() {
                return;
            }
            if available == 0 {
                self.park(t, p, s, to_read);
                return;
            }
            let read: Vec<u64> = self.read_entries(t, p, s, to_read.min(available));
            self.shared_send(t, p, s, &read, false);
        }
    }

    /// Shared: the next consumer with permits, round robin.
    fn next_consumer(sub: &mut Sub) -> Option<usize> {
        let n = sub.consumers.len();
        if sub.rr >= n {
            sub.rr = 0;
        }
        let c = (0..n)
            .map(|k| (sub.rr + k) % n)
            .find(|&c| sub.consumers[c].permits > 0)?;
        sub.rr = c + 1;
        Some(c)
    }

    /// Shared: hands the entries out round robin; each turn gives a consumer as many entries as
    /// its permits cover at the read's average messages per entry (at least one, at most
    /// `dispatcher_max_round_robin_batch_size`). What is left when no consumer has permits goes
    /// to the replay queue.
    fn shared_send(&mut self, t: u64, p: usize, s: usize, entries: &[u64], replay: bool) {
        let round_robin = self.spec.dispatcher_max_round_robin_batch_size as u64;
        let mut remaining: u64 = entries.iter().map(|&i| self.parts[p].messages(i)).sum();
        let average = (remaining / entries.len().max(1) as u64).max(1);
        let mut start = 0usize;
        while start < entries.len() {
            let Some(c) = Self::next_consumer(&mut self.parts[p].subs[s]) else {
                break;
            };
            let permits = self.parts[p].subs[s].consumers[c].permits as u64;
            let most = remaining.min(permits);
            let take = most.div_ceil(average).min(round_robin).max(1) as usize;
            let end = (start + take).min(entries.len());
            for &idx in &entries[start..end] {
                if replay {
                    self.remove_from_replay(p, s, idx);
                }
                remaining -= self.parts[p].messages(idx);
                self.deliver(p, s, c, idx);
            }
            start = end;
        }
        for &idx in &entries[start..] {
            // A replayed entry is still in the replay queue; its row says it is wanted again.
            if self.add_to_replay(p, s, idx, true) || replay {
                self.emit_redeliver(t, p, s, idx, REASON_OVERFLOW);
            }
        }
    }

    /// The Key_Shared look-ahead limit: entries the replay queue may hold before normal reads
    /// stop.
    fn look_ahead_limit(&self, consumers: usize) -> u64 {
        let per_consumer = self.spec.key_shared_look_ahead_per_consumer as u64;
        let per_subscription = self.spec.key_shared_look_ahead_per_subscription as u64;
        let limit = if per_consumer == 0 {
            per_subscription
        } else {
            let l = per_consumer * consumers as u64;
            if per_subscription > 0 && per_subscription < l {
                per_subscription
            } else {
                l
            }
        };
        if limit > 0 {
            limit
        } else {
            // Both disabled: Pulsar falls back on its unacked-message limits (defaults
            // maxUnackedMessagesPerSubscription 200000, maxUnackedMessagesPerConsumer 50000).
            (50_000 * consumers as u64).min(200_000)
        }
    }

    /// Key_Shared: replay entries whose consumers have permits first, else (below the look-ahead
    /// limit) a normal read, each of min(total permits, read batch) entries.
    fn dispatch_key_shared(&mut self, t: u64, p: usize, s: usize) {
        let batch = self.spec.read_batch_size as u64;
        let limit = self.look_ahead_limit(self.parts[p].subs[s].consumers.len());
        loop {
            if let Some(read) = self.parked_read(t, p, s) {
                self.key_shared_send(t, p, s, &read, false, limit);
                continue;
            }
            let available = self.parts[p].published - self.parts[p].subs[s].read_idx;
            let sub = &mut self.parts[p].subs[s];
            let (total, first) = Self::permit_summary(sub);
            let current = total.max(first);
            if current <= 0 || first <= 0 {
                return;
            }
            let cap = (current as u64).min(batch).min(self.read_cap(p)).max(1);
            let sub = &mut self.parts[p].subs[s];
            let skip_replay = std::mem::take(&mut sub.skip_next_replay);
            if !skip_replay && sub.replay_len > 0 {
                // Each consumer's oldest entries, as many as it has permits (one an entry), and
                // the entries without a hash, then the oldest of those.
                let mut replay: Vec<u64> = Vec::new();
                for (c, set) in sub.replay.iter().enumerate() {
                    let k = (sub.consumers[c].permits.max(0) as u64).min(cap) as usize;
                    replay.extend(set.iter().take(k).copied());
                }
                replay.extend(sub.unhashed.iter().take(cap as usize).copied());
                replay.sort_unstable();
                replay.truncate(cap as usize);
                if !replay.is_empty() {
                    for &idx in &replay {
                        self.emit_cursor(t, p, s, "replay", Some(idx));
                    }
                    self.key_shared_send(t, p, s, &replay, true, limit);
                    continue;
                }
            }
            let sub = &self.parts[p].subs[s];
            if sub.waiting.is_some() || sub.replay_len as u64 >= limit {
                return;
            }
            let n = cap.min((limit - sub.replay_len as u64).max(1));
            if available == 0 {
                self.park(t, p, s, n);
                return;
            }
            let read: Vec<u64> = self.read_entries(t, p, s, n.min(available));
            self.key_shared_send(t, p, s, &read, false, limit);
        }
    }

    /// Key_Shared: each entry goes to the consumer owning its key if that consumer has permits
    /// (one an entry) and, for a normal read, no entry with the key waits in the replay queue;
    /// else it is held back in the replay queue, and so are the later entries of its key.
    fn key_shared_send(
        &mut self,
        t: u64,
        p: usize,
        s: usize,
        entries: &[u64],
        replay: bool,
        limit: u64,
    ) {
        let sub = &self.parts[p].subs[s];
        let look_ahead_allowed = (sub.replay_len as u64) < limit;
        let mut left: Vec<i64> = sub.consumers.iter().map(|c| c.permits.max(0)).collect();
        let mut blocked: Vec<u32> = Vec::new();
        let mut dispatched = false;
        for &idx in entries {
            let (hash, c) = self.route(p, s, idx);
            let sub = &self.parts[p].subs[s];
            let send = !blocked.contains(&hash)
                && left[c] > 0
                && (replay || !sub.replay_hashes.contains_key(&hash));
            if send {
                if replay {
                    self.remove_from_replay(p, s, idx);
                }
                self.deliver(p, s, c, idx);
                left[c] -= 1;
                dispatched = true;
            } else {
                if !blocked.contains(&hash) {
                    blocked.push(hash);
                }
                if self.add_to_replay(p, s, idx, true) || replay {
                    self.emit_redeliver(t, p, s, idx, REASON_HOLD_BACK);
                }
            }
        }
        let part = &self.parts[p];
        let sub = &part.subs[s];
        if !replay
            && !dispatched
            && look_ahead_allowed
            && sub.read_idx < part.published
            && sub.consumers.iter().any(|c| c.permits > 0)
        {
            // Nothing could go out, yet a consumer has permits: look further ahead next time.
            self.parts[p].subs[s].skip_next_replay = true;
        }
    }

    fn schedule_dispatch(&mut self, at: u64, p: usize, s: usize) {
        let sub = &mut self.parts[p].subs[s];
        if sub.scheduled.is_some_and(|x| x <= at) {
            return;
        }
        if at <= self.end_us {
            sub.scheduled = Some(at);
        }
        self.schedule(at, Task::Dispatch(p as u32, s as u32));
    }

    // ---- producers ----------------------------------------------------------------------------

    /// The next batch from the partition's next message on: when it closes and how many messages
    /// it holds. A batch closes when its first message is the publish delay old, when the next
    /// message would not fit, or when it is full.
    /// Closes producer stream `k`'s next batch on partition `p`: when it is sent and how many
    /// messages it holds.
    fn next_batch(&mut self, p: usize, k: usize) -> (u64, u64) {
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
    fn prune_index(&mut self, p: usize) {
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
        let part = &mut self.parts[p];
        part.first_msg.drop_below(low);
        part.ledgers.drop_below(low);
    }

    fn publish(&mut self, t: u64, p: usize, k: usize) {
        if self.prune_index
            && self.parts[p].first_msg.first.len() >= self.parts[p].first_msg.check_at
        {
            self.prune_index(p);
        }
        let part = &mut self.parts[p];
        let (idx, n) = (part.published, part.producers[k].batch);
        let size = n * part.message_size;
        part.first_msg.first.push(part.messages_published);
        part.messages_published += n;
        part.bytes_published += size;
        part.published += 1;
        part.ledgers.add(&self.rollover, idx, size, t);
        let row = Row {
            size: size.min(i32::MAX as u64) as i32,
            messages: Some(n.min(i32::MAX as u64) as i32),
            ..Row::new("add", None, Some(idx))
        };
        self.emit(t, p, row);
        for s in 0..self.parts[p].subs.len() {
            let sub = &self.parts[p].subs[s];
            match sub.waiting {
                // The cursor waits to be notified: its read completes now.
                Some((_, check_at)) if sub.active && t >= check_at => self.dispatch(t, p, s),
                Some((_, check_at)) if sub.active => self.schedule_dispatch(check_at, p, s),
                _ => {}
            }
        }
        let (at, n) = self.next_batch(p, k);
        self.parts[p].producers[k].batch = n;
        self.schedule(at.max(t), Task::Publish(p as u32, k as u32));
    }

    // ---- connections --------------------------------------------------------------------------

    /// The subscription's consumers are created: their acknowledgement timers start.
    fn start_consumers(&mut self, t: u64, p: usize, s: usize) {
        let sub = &mut self.parts[p].subs[s];
        sub.consumers.iter_mut().for_each(|c| c.acks.start(t));
    }

    /// The subscription's consumers connect: each sends FLOW for its whole receiver queue.
    fn connect(&mut self, t: u64, p: usize, s: usize) {
        let permits = self.spec.receiver_queue_size as i64;
        let failover_delay = (self.spec.active_consumer_failover_delay_ms * 1000.0) as u64;
        let sub = &mut self.parts[p].subs[s];
        sub.active = true;
        sub.waiting = None;
        sub.consumers.iter_mut().for_each(|c| c.connect(t, permits));
        sub.resume_at = if sub.kind == SubscriptionType::Failover {
            t.saturating_add(failover_delay)
        } else {
            t
        };
        self.schedule_dispatch(t, p, s);
    }

    fn churn(&mut self, t: u64, p: usize, s: usize) {
        if self.parts[p].subs[s].active {
            self.consume(t, p, s);
            // Closing consumers flush their acknowledgements.
            let Sub {
                consumers,
                pending_acks,
                ..
            } = &mut self.parts[p].subs[s];
            consumers.iter_mut().for_each(|c| c.acks.send(pending_acks));
            let first = self.first_unacked(p, s);
            self.emit_cursor(t, p, s, "close", None);
            let sub = &mut self.parts[p].subs[s];
            sub.active = false;
            sub.waiting = None;
            sub.rewind_to = first;
            sub.consumers.iter_mut().for_each(Consumer::close);
            // The last consumer left: the replay queue is dropped.
            Self::clear_replay(sub);
            // Saturating: a huge knob means "never" (past the end), not a time that wraps around.
            let back = t.saturating_add((self.spec.churn_downtime_seconds * 1e6) as u64);
            self.schedule(back, Task::Churn(p as u32, s as u32));
        } else {
            // A consumer joins a subscription without consumers: the cursor rewinds to the first
            // unacknowledged entry.
            self.emit_cursor(t, p, s, "open", None);
            let first = self.parts[p].subs[s].rewind_to;
            self.rewind(t, p, s, first);
            let sub = &mut self.parts[p].subs[s];
            Self::clear_replay(sub);
            self.start_consumers(t, p, s);
            self.connect(t, p, s);
            let next = t.saturating_add(self.rng.exp(60e6 / self.spec.churn_per_minute) as u64);
            self.schedule(next, Task::Churn(p as u32, s as u32));
        }
    }

    fn seek(&mut self, t: u64, p: usize, s: usize) {
        self.consume(t, p, s);
        let part = &self.parts[p];
        let back = (self.spec.seek_back_seconds * 1e6 / part.interval_us) as u64;
        let at = part
            .first_message(part.subs[s].read_idx)
            .saturating_sub(back);
        let to = part.entry_of_message(at);
        self.emit_cursor(t, p, s, "seek", Some(to));
        let sub = &mut self.parts[p].subs[s];
        sub.read_idx = to;
        sub.rewind_to = to;
        sub.acked_upto = to.checked_sub(1);
        sub.waiting = None;
        Self::clear_replay(sub);
        // A reset forgets what was acknowledged on its own (`internalResetCursor`).
        sub.acked.clear();
        sub.pending_acks.clear();
        sub.nacked.clear();
        // The acknowledgements the clients had not sent are dropped too: the reset disconnects
        // the consumers before it replies (`PersistentSubscription.resetCursor`), so the flush
        // at the reply (`flushAndClean`) has no connection to send them on.
        sub.consumers.iter_mut().for_each(|c| c.acks.clear());
        // The clients keep their waiting nacks. On Exclusive and Failover the timer still asks for
        // everything unacknowledged (a rewind). On Shared and Key_Shared the broker redelivers
        // only positions the reconnected consumer was sent and holds unacknowledged
        // (`Consumer.redeliverUnacknowledgedMessages`); they are forgotten here.
        if !sub.kind.has_single_active_consumer() {
            sub.consumers.iter_mut().for_each(|c| c.nacks.clear());
        }
        if sub.active {
            // A reset cursor disconnects the consumers, which come straight back.
            self.connect(t, p, s);
        }
        let next = t.saturating_add(self.rng.exp(60e6 / self.spec.seeks_per_minute) as u64);
        self.schedule(next, Task::Seek(p as u32, s as u32));
    }

    fn ack(&mut self, t: u64, p: usize, s: usize) {
        if self.parts[p].subs[s].active {
            if self.consume(t, p, s) {
                self.schedule_dispatch(t, p, s);
            }
            let first = self.first_unacked(p, s);
            self.write_mark_delete(t, p, s, first);
        }
        self.schedule(t + 1_000_000, Task::Ack(p as u32, s as u32));
    }

    /// OMB's backlog test (`WorkloadGenerator.buildAndDrainBacklog`), one look at a time: at the
    /// end of the warm-up it pauses its consumers, looks once a second until the backlog (messages
    /// published times subscriptions, less messages received) reaches the size asked for, resumes
    /// them, looks every 100 ms until the backlog is drained, and lets the test end
    /// `testDurationMinutes` after that. OMB sums over all topics; each broker's simulation looks
    /// at its own partitions' share, which is the same for all of them.
    fn backlog_test(&mut self, t: u64) {
        let Some(test) = self.backlog else { return };
        let subs: Vec<(usize, usize)> = (0..self.parts.len())
            .flat_map(|p| (0..self.parts[p].subs.len()).map(move |s| (p, s)))
            .filter(|&(p, s)| self.parts[p].subs[s].pauses_for_backlog)
            .collect();
        for &(p, s) in &subs {
            if self.consume(t, p, s) {
                self.schedule_dispatch(t, p, s);
            }
        }
        if test.phase == BacklogPhase::WarmUp {
            for &(p, s) in &subs {
                self.parts[p].subs[s].paused = true;
            }
        }
        // OMB's figure: messages sent times subscriptions, less messages received (redeliveries
        // count as received), over all of them at once.
        let (mut sent, mut received) = (0u64, 0u64);
        for &(p, s) in &subs {
            sent = sent.saturating_add(self.parts[p].messages_published);
            received = received.saturating_add(self.parts[p].subs[s].received);
        }
        let backlog = sent.saturating_sub(received);
        let next = match test.phase {
            BacklogPhase::WarmUp | BacklogPhase::Building if (backlog as f64) < test.build_to => {
                Some((BacklogPhase::Building, 1_000_000))
            }
            BacklogPhase::WarmUp | BacklogPhase::Building => {
                for &(p, s) in &subs {
                    self.resume(t, p, s);
                }
                Some((BacklogPhase::Draining, 0))
            }
            BacklogPhase::Draining if backlog as f64 > test.drained_at => {
                Some((BacklogPhase::Draining, 100_000))
            }
            BacklogPhase::Draining => {
                self.end_us = self.end_us.min(t.saturating_add(test.test_us));
                None
            }
        };
        self.backlog = next.map(|(phase, _)| BacklogTest { phase, ..test });
        if let Some((_, after)) = next {
            self.schedule(t.saturating_add(after), Task::Backlog);
        }
    }

    /// A paused subscription's consumers resume processing from `t` (they were brought up to
    /// `t` just before, processing nothing while paused); their FLOWs follow as they process.
    fn resume(&mut self, t: u64, p: usize, s: usize) {
        self.parts[p].subs[s].paused = false;
        self.plan_flows(t, p, s);
        self.schedule_dispatch(t, p, s);
    }

    /// Runs the next task; false when the simulation is over.
    fn step(&mut self) -> bool {
        let Some(Reverse((t, _, task))) = self.queue.pop() else {
            return false;
        };
        // The backlog test's end can come before tasks already planned.
        if t > self.end_us {
            self.queue.clear();
            return false;
        }
        if !matches!(task, Task::Ack(..)) {
            self.other_tasks -= 1;
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
                self.start_consumers(t, p, s);
                self.connect(t, p, s);
            }
        }
        true
    }

    /// Whether the tasks left are acknowledgement ticks that will never write a row: then
    /// nothing else can happen (each tick plans only the next), and a long quiet run (nothing
    /// published, a huge duration) would cost work per simulated second per consumer for
    /// nothing. Looks at most once a simulated second, at the cost of one tick of each
    /// subscription.
    fn only_quiet_acks_left(&mut self, t: u64) -> bool {
        if self.other_tasks > 0 || t < self.next_quiet_check_us {
            return false;
        }
        self.next_quiet_check_us = t.saturating_add(1_000_000);
        self.queue.iter().all(|Reverse((_, _, task))| match *task {
            Task::Ack(p, s) => self.ack_is_quiet(p as usize, s as usize),
            _ => false,
        })
    }

    /// Whether subscription `s`'s acknowledgement ticks write nothing now or later while no other
    /// task runs: its consumers have nothing to process (or are paused) and no acknowledgement
    /// waiting to be sent, and the trace has its mark-delete position.
    fn ack_is_quiet(&self, p: usize, s: usize) -> bool {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BacklogPhase {
    WarmUp,
    Building,
    Draining,
}

/// OMB's backlog test while it runs: this broker's share of the backlog to build, and of the
/// backlog at or below which it is drained, in messages.
#[derive(Debug, Clone, Copy)]
struct BacklogTest {
    phase: BacklogPhase,
    build_to: f64,
    drained_at: f64,
    test_us: u64,
}

fn minutes_us(minutes: f64) -> u64 {
    // Saturating: a huge duration means "never", not a time that wraps around.
    (minutes * 60e6) as u64
}

/// `RangeEntryCacheImpl.BOOKKEEPER_READ_OVERHEAD_PER_ENTRY`: the bytes a storage read costs per
/// entry beyond its payload, in Pulsar's estimate of how many entries a read's byte cap holds.
const BOOKKEEPER_READ_OVERHEAD_PER_ENTRY: u64 = 64;

/// The sticky-key hash of a key id (the key `key-<id>`).
fn key_hash_of(key: usize) -> u32 {
    sticky_key_hash(format!("key-{key}").as_bytes())
}

/// The sticky-key hash of a keyless message: `<producer name>-<sequence id>`, the producer named
/// after its partition's topic.
fn fallback_key_hash(topic: u32, sequence_id: u64) -> u32 {
    // "producer-" (9) + a u32 (at most 10) + "-" (1) + a u64 (at most 20): 40 bytes always do.
    let mut key = [0u8; 40];
    let mut w = std::io::Cursor::new(&mut key[..]);
    let _ = write!(w, "producer-{topic}-{sequence_id}");
    let len = w.position() as usize;
    sticky_key_hash(&key[..len])
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
/// [`generate`]'s trace.
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

/// How a subscription's cursor starts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum SubStart {
    /// Opens at the end at time 0 and tails.
    Tail,
    /// Opens at the first entry at this time (µs) and its consumers connect then.
    AtFirst(u64),
    /// A catch-up reader: opens `catch_up_behind_seconds` behind the tail at this time (µs).
    CatchUp(u64),
}

/// A subscription as the simulation sets it up.
#[derive(Debug, Clone, PartialEq)]
struct SubPlan {
    /// The trace's cursor name.
    name: String,
    kind: SubscriptionType,
    /// Each consumer's speed, messages per microsecond.
    speeds: Vec<f64>,
    /// The workload-wide index of its first consumer (consumers' names on the Key_Shared ring).
    first_consumer: u64,
    start: SubStart,
    redelivery_rate: f64,
    /// One of OMB's consumers, which it pauses to build a backlog.
    pauses_for_backlog: bool,
}

/// A partition (managed ledger) as the simulation sets it up: every workload is a list of these,
/// in order ([`partition_plans`]).
#[derive(Debug, Clone, PartialEq)]
struct PartitionPlan {
    /// The trace's topic name.
    name: String,
    /// Microseconds between messages (infinite: nothing is published).
    interval_us: f64,
    message_size: u32,
    /// A partitioned topic's partition index: picks a Failover subscription's active consumer.
    failover_index: Option<usize>,
    /// (topic, partition index) when the topic's producers route by time.
    routed: Option<(u64, u32)>,
    subs: Vec<SubPlan>,
}

/// A partition's producer streams, the interval between one producer's messages while it sends
/// there, and its route period (see [`Partition::arrival_us`]).
fn producer_streams(
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
fn partition_plans(spec: &WorkloadSpec) -> Box<dyn Iterator<Item = PartitionPlan> + '_> {
    match &spec.topic_details {
        Some(topics) => Box::new(detailed_plans(topics)),
        None => Box::new(homogeneous_plans(spec)),
    }
}

/// `topic_details`: each topic its own rate, message size and subscriptions.
fn detailed_plans(topics: &[TopicDetail]) -> impl Iterator<Item = PartitionPlan> + '_ {
    let mut consumer_index = 0u64;
    topics.iter().map(move |t| PartitionPlan {
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
            .map(|s| {
                let first = consumer_index;
                consumer_index += s.consumer_rates.len() as u64;
                SubPlan {
                    name: s.name.clone(),
                    kind: s.subscription_type,
                    speeds: s.consumer_rates.iter().map(|r| r / 1e6).collect(),
                    first_consumer: first,
                    start: if s.start_seconds > 0.0 {
                        AtFirst((s.start_seconds * 1e6) as u64)
                    } else {
                        Tail
                    },
                    redelivery_rate: s.redelivery_rate,
                    pauses_for_backlog: false,
                }
            })
            .collect(),
    })
}

use SubStart::{AtFirst, CatchUp, Tail};

/// The homogeneous shape: `topics` x `partitions_per_topic` partitions sharing the (ingest-capped)
/// rate, each with `subscriptions_per_topic` subscriptions of `consumer_per_subscription`
/// consumers (`slow_consumer_fraction` of them, spread evenly over the workload, slow) and
/// `catch_up_readers` readers.
fn homogeneous_plans(spec: &WorkloadSpec) -> impl Iterator<Item = PartitionPlan> + '_ {
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
                let mut ring = ConsistentHashRing::new(spec.key_shared_replica_points);
                let buckets = if kind == SubscriptionType::KeyShared {
                    for c in 0..consumers.len() {
                        ring.add_consumer(c, &format!("consumer-{}", sp.first_consumer + c as u64));
                    }
                    consumers.len().max(1)
                } else {
                    1
                };
                // Failover: a partitioned topic's active consumer is picked by partition index.
                let active_consumer = match plan.failover_index {
                    Some(k) if kind == SubscriptionType::Failover && !consumers.is_empty() => {
                        k % consumers.len()
                    }
                    _ => 0,
                };
                subs.push(Sub {
                    cursor,
                    kind,
                    read_idx: 0,
                    active: false,
                    consumers,
                    active_consumer,
                    replay: vec![BTreeSet::new(); buckets],
                    replay_len: 0,
                    replay_hashes: FastMap::default(),
                    unhashed: BTreeSet::new(),
                    ring,
                    rr: 0,
                    scheduled: None,
                    acked_upto: None,
                    waiting: None,
                    resume_at: 0,
                    rewind_to: 0,
                    acked: AckedRanges::default(),
                    pending_acks: AckedRanges::default(),
                    nacked: BTreeSet::new(),
                    rewinds: spec.churn_per_minute > 0.0
                        || (sp.redelivery_rate > 0.0 && kind.has_single_active_consumer()),
                    skip_next_replay: false,
                    redelivery_rate: sp.redelivery_rate,
                    start: sp.start,
                    pauses_for_backlog: sp.pauses_for_backlog,
                    paused: false,
                    received: 0,
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
                    subs,
                });
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
            #[cfg(test)]
            acknowledged_delivered: 0,
        };
        for p in 0..sim.parts.len() {
            let pi = p as u32;
            for s in 0..sim.parts[p].subs.len() {
                let has_consumers = !sim.parts[p].subs[s].consumers.is_empty();
                match sim.parts[p].subs[s].start {
                    CatchUp(at) => {
                        sim.schedule(at, Task::CatchUp(pi, s as u32));
                        continue;
                    }
                    Tail => {
                        sim.emit_cursor(0, p, s, "open", None);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingValue;
    use crate::lab::workload::spec::{SubscriptionDetail, TopicDetail};

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
            },
            TopicDetail {
                name: "b".into(),
                producer_rate: 200.0,
                message_size: 5000,
                subscriptions: vec![],
            },
            TopicDetail {
                name: "quiet".into(),
                producer_rate: 0.0,
                message_size: 5000,
                subscriptions: vec![sub("s", SubscriptionType::Exclusive, &[10.0], 0.0)],
            },
        ];
        let ev = generate(&detailed(topics, 0.5), 1);
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

    /// A reset reconnects the consumers, whose clients keep their `NegativeAcksTracker`: on
    /// Exclusive its timer still rewinds the cursor when the nacks are due; on Shared the
    /// reconnected consumers hold none of those positions, so the broker would ignore them.
    #[test]
    fn waiting_nacks_outlive_a_reset_on_exclusive_only() {
        for (kind, kept) in [("Exclusive", true), ("Shared", false)] {
            let mut spec = WorkloadSpec::default();
            for (k, v) in [
                ("subscription_type", SettingValue::Str(kind.into())),
                ("redelivery_rate", SettingValue::Float(0.01)),
                ("producer_rate", SettingValue::Float(2000.0)),
                ("negative_ack_redelivery_delay_ms", SettingValue::Int(5000)),
                ("seeks_per_minute", SettingValue::Float(12.0)),
                ("test_duration_minutes", SettingValue::Float(1.0)),
            ] {
                spec.set(k, &v).unwrap();
            }
            let (mut sim, _) = Sim::new(&spec, 4, 0);
            let waiting = |sim: &Sim| -> usize {
                let sub = &sim.parts[0].subs[0];
                sub.consumers.iter().map(|c| c.nacks.len()).sum()
            };
            let mut seeks_with_nacks = 0;
            loop {
                let before = waiting(&sim);
                let rows = sim.out.len();
                let more = sim.step();
                if sim.out.op[rows..].contains(&"seek") && before > 0 {
                    seeks_with_nacks += 1;
                    assert_eq!(waiting(&sim) >= before, kept, "{kind}");
                }
                if !more {
                    break;
                }
            }
            assert!(seeks_with_nacks > 0, "{kind}");
        }
    }
}
