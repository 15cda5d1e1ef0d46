//! The cursors a broker opens on a topic besides its consumers' subscriptions: deduplication's,
//! subscriptions created through the admin API that no consumer joins, and geo-replication's.
//! Each goes through `ManagedLedgerImpl.asyncOpenCursor`, so the cache counts it like any
//! other cursor; `docs/fidelity.md` ("Readers a broker opens") cites the code.
//!
//! - `pulsar.dedup` (`MessageDeduplication.checkStatus` opens it with `openCursor(managedLedger,
//!   PersistentTopic.DEDUPLICATION_CURSOR_NAME)` when the topic's deduplication is enabled): it
//!   never reads; `recordMessagePersistedNormal` → `increaseSnapshotCounterAndTakeSnapshotIfNeeded`
//!   mark-deletes the entry just persisted every `brokerDeduplicationEntriesInterval` entries
//!   (`takeSnapshot` → `markDelete`), and the broker's snapshot monitor
//!   (`BrokerService.startDeduplicationSnapshotMonitor`, every
//!   `brokerDeduplicationSnapshotFrequencyInSeconds`) mark-deletes the last confirmed entry of a
//!   topic whose last snapshot is `brokerDeduplicationSnapshotIntervalSeconds` old
//!   (`MessageDeduplication.takeSnapshot()`), so a quiet topic's cursor still moves. It is not a
//!   subscription, so
//!   `PersistentTopic.checkBackloggedCursors` never deactivates it.
//! - An admin subscription (`PersistentTopic.createSubscription` → `asyncOpenCursor`): opened at
//!   the end, never read, never acknowledged.
//! - `pulsar.repl.<cluster>` (`PersistentReplicator`, the cursor named by `replicatorPrefix`
//!   `pulsar.repl`): activated when its producer to the remote cluster connects, it reads batches
//!   of `getMaxReadBatchSize()` = min(`replicationProducerQueueSize`,
//!   `dispatcherMaxReadBatchSize`) entries and deletes each entry once the remote send completes
//!   (`ProducerSendCallback`). The lab runs it as an Exclusive subscription with one consumer
//!   twice as fast as the partition's publishing (the remote producer keeps up), whose
//!   acknowledgements go as the spec groups them.

use super::events::Row;
use super::generate::{Sim, Task};
use super::spec::{Readers, SubscriptionType, TopicReaders, WorkloadSpec};
use super::topology::{PartitionPlan, SubPlan, SubStart};

/// `PersistentTopic.DEDUPLICATION_CURSOR_NAME`.
pub const DEDUP_CURSOR: &str = "pulsar.dedup";
/// `ServiceConfiguration.replicatorPrefix` and the `.` that joins it to the cluster's name.
pub const REPLICATION_CURSOR_PREFIX: &str = "pulsar.repl.";

/// A replicator reads as fast as this many times the partition's publishing (its remote producer
/// keeps up; the lab has no remote cluster to slow it).
const REPLICATOR_SPEEDUP: f64 = 2.0;
/// Messages per second a replicator can send even when the partition publishes nothing.
const REPLICATOR_MIN_RATE: f64 = 1.0;

/// The state of a partition's `pulsar.dedup` cursor.
pub(super) struct Dedup {
    /// The cursor's subscription slot in the partition.
    pub sub: usize,
    /// Entries persisted since the last snapshot (`MessageDeduplication.snapshotCounter`).
    pub counter: u32,
    /// When the last snapshot was taken (`lastSnapshotTimestamp`; None: 0, never).
    pub last_snapshot_us: Option<u64>,
}

/// A name Pulsar keeps for its own cursors, with the reason a subscription cannot take it
/// (`PersistentTopic.subscribe` refuses them as reserved).
pub(super) fn reserved(name: &str) -> Option<&'static str> {
    if name == DEDUP_CURSOR {
        Some("the deduplication cursor's (set the topic's `deduplication` instead)")
    } else if name.starts_with(REPLICATION_CURSOR_PREFIX) {
        Some("a replication cursor's (list the cluster in the topic's `replication_clusters`)")
    } else {
        None
    }
}

impl Readers {
    /// Cursors the readers add to each partition of the homogeneous shape (for the footprint).
    pub(super) fn cursors_per_partition(&self) -> u64 {
        u64::from(self.admin_subscriptions_per_topic)
            + u64::from(self.replication_clusters)
            + u64::from(self.deduplication)
    }
}

/// `plan` with the readers of its topic appended after its subscriptions: admin subscriptions,
/// replication cursors, then `pulsar.dedup`.
pub(super) fn with_readers(
    spec: &WorkloadSpec,
    mut plan: PartitionPlan,
    own: &TopicReaders,
) -> PartitionPlan {
    let r = &spec.readers;
    let sub = |name: String, speeds: Vec<f64>| SubPlan {
        name,
        kind: SubscriptionType::Exclusive,
        speeds,
        first_consumer: 0,
        start: SubStart::Tail,
        redelivery_rate: 0.0,
        pauses_for_backlog: false,
    };
    for i in 0..r.admin_subscriptions_per_topic {
        plan.subs.push(sub(format!("admin-sub-{i}"), Vec::new()));
    }
    let rate = if plan.interval_us.is_finite() {
        1e6 / plan.interval_us
    } else {
        0.0
    };
    let speed = (rate * REPLICATOR_SPEEDUP).max(REPLICATOR_MIN_RATE) / 1e6;
    match &own.replication_clusters {
        Some(clusters) => {
            for c in clusters {
                plan.subs
                    .push(sub(format!("{REPLICATION_CURSOR_PREFIX}{c}"), vec![speed]));
            }
        }
        None => {
            for c in 1..=r.replication_clusters {
                plan.subs.push(sub(
                    format!("{REPLICATION_CURSOR_PREFIX}cluster-{c}"),
                    vec![speed],
                ));
            }
        }
    }
    if own.deduplication.unwrap_or(r.deduplication) {
        plan.subs.push(sub(DEDUP_CURSOR.to_string(), Vec::new()));
    }
    plan
}

impl Sim {
    /// Entry `idx` of partition `p` was persisted at `t`: with deduplication, the snapshot's
    /// mark-delete every `brokerDeduplicationEntriesInterval` entries.
    pub(super) fn dedup_persisted(&mut self, t: u64, p: usize, idx: u64) {
        let interval = self.spec.readers.deduplication_entries_interval;
        let Some(d) = self.parts[p].dedup.as_mut() else {
            return;
        };
        d.counter += 1;
        if d.counter < interval {
            return;
        }
        d.counter = 0;
        self.dedup_snapshot(t, p, idx);
    }

    /// A snapshot of partition `p`'s producers' sequence ids at entry `idx`: the `pulsar.dedup`
    /// cursor mark-deletes it (`MessageDeduplication.takeSnapshot(Position)`).
    fn dedup_snapshot(&mut self, t: u64, p: usize, idx: u64) {
        let Some(d) = self.parts[p].dedup.as_mut() else {
            return;
        };
        d.last_snapshot_us = Some(t);
        let s = d.sub;
        let sub = &mut self.parts[p].subs[s];
        sub.acked_upto = Some(idx);
        sub.read_idx = idx + 1;
        let cursor = sub.cursor;
        self.emit(t, p, Row::new("ack", Some(cursor), Some(idx)));
    }

    /// The snapshot monitor's first look, when deduplication is on somewhere and the monitor
    /// takes snapshots by time at all.
    pub(super) fn start_dedup_snapshots(&mut self) {
        let every = self.dedup_monitor_every_us();
        let by_time = self.spec.readers.deduplication_snapshot_interval_seconds > 0.0;
        if every > 0 && by_time && self.parts.iter().any(|part| part.dedup.is_some()) {
            self.schedule(every, Task::DedupSnapshot);
        }
    }

    /// `BrokerService.startDeduplicationSnapshotMonitor` → `PersistentTopic
    /// .checkDeduplicationSnapshot` → `MessageDeduplication.takeSnapshot()`, for every topic
    /// loaded: one whose last snapshot is at least the interval old, with an entry after its
    /// cursor's mark-delete position, snapshots at its last entry (the entry counter is left as
    /// it is, as Pulsar leaves it). The next look follows at the monitor's fixed rate.
    pub(super) fn dedup_snapshot_tick(&mut self, t: u64) {
        let interval = (self.spec.readers.deduplication_snapshot_interval_seconds * 1e6) as u64;
        for p in 0..self.parts.len() {
            if self.is_unloaded(p) {
                continue;
            }
            let Some(d) = &self.parts[p].dedup else {
                continue;
            };
            if d.last_snapshot_us
                .is_some_and(|last| t.saturating_sub(last) < interval)
            {
                continue;
            }
            if let Some(last) = self.dedup_behind(p) {
                self.dedup_snapshot(t, p, last);
            }
        }
        let every = self.dedup_monitor_every_us();
        self.schedule(t.saturating_add(every), Task::DedupSnapshot);
    }

    /// The snapshot monitor's period in microseconds (0: no monitor).
    fn dedup_monitor_every_us(&self) -> u64 {
        (self.spec.readers.deduplication_snapshot_frequency_seconds * 1e6) as u64
    }

    /// Partition `p`'s last entry, when its `pulsar.dedup` cursor (open on this broker) has not
    /// mark-deleted it.
    fn dedup_behind(&self, p: usize) -> Option<u64> {
        let part = &self.parts[p];
        let sub = &part.subs[part.dedup.as_ref()?.sub];
        let last = part.published.checked_sub(1)?;
        let open = sub.opened && !sub.forgotten;
        // It never reads: its read position is the entry after its mark-delete position.
        (open && sub.read_idx <= last).then_some(last)
    }

    /// Whether the monitor's looks write nothing until some other task runs: every loaded
    /// partition's `pulsar.dedup` cursor is at its last entry (no entry comes without a publish).
    pub(super) fn dedup_snapshots_are_quiet(&self) -> bool {
        (0..self.parts.len()).all(|p| self.is_unloaded(p) || self.dedup_behind(p).is_none())
    }
}
