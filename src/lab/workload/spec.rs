//! A workload: an OpenMessaging Benchmark workload file's settings plus the Pulsar knobs that
//! shape a broker's cache traffic.

use super::ack_grouping::{self, Grouping};
use super::negative_acks;
use crate::broker::ledger::rollover::{self, Rollover};
use crate::config::SettingValue;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionType {
    Exclusive,
    Failover,
    Shared,
    KeyShared,
}

impl SubscriptionType {
    /// Exclusive and Failover deliver to one active consumer at a time; Shared and Key_Shared
    /// spread entries over their consumers and keep a replay queue.
    pub fn has_single_active_consumer(self) -> bool {
        matches!(
            self,
            SubscriptionType::Exclusive | SubscriptionType::Failover
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDistributor {
    NoKey,
    KeyRoundRobin,
    RandomNano,
}

/// What a broker ingests at most, bytes per second: a 10 Gbit/s NIC sends 1.25 GB/s, and each
/// byte a broker takes in goes out four times at least: to three bookies (OMB's Pulsar driver
/// sets writeQuorum 3) and to one subscription. 1.25e9 / 4 = 312.5 MB/s.
pub const DEFAULT_BROKER_INGEST_BYTES_PER_SECOND: f64 = 312.5e6;
/// What a broker ingests at most, messages per second: a round order of magnitude for a broker's
/// per-message work with batching on (not a measurement; set your brokers' measured figure).
pub const DEFAULT_BROKER_INGEST_MESSAGES_PER_SECOND: f64 = 1.0e6;

/// How many keys OMB's `KeyDistributor` generates (`UNIQUE_COUNT`): `KEY_ROUND_ROBIN` cycles
/// through them and `RANDOM_NANO` draws from them.
pub const OMB_KEYS: u32 = 10_000;

/// The largest `messageSize`, `batchingMaxBytes` and so entry size: OMB and Pulsar's client hold
/// them in a Java `int`, and the trace's `size` column is an int32.
pub const MAX_ENTRY_BYTES: u32 = i32::MAX as u32;

/// Defaults follow OpenMessaging Benchmark's `1-topic-1-partition-1kb` workload, its Pulsar driver's
/// producer settings (`driver-pulsar/pulsar.yaml`, `PulsarBenchmarkDriver`) and Pulsar's broker and
/// client defaults (`ServiceConfiguration` and `ConsumerConfigurationData` on `master`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    pub topics: u32,
    pub partitions_per_topic: u32,
    pub message_size: u32,
    pub subscriptions_per_topic: u32,
    pub consumer_per_subscription: u32,
    pub producers_per_topic: u32,
    /// Messages per second over all partitions; 0 means OMB's "find the maximum sustainable
    /// rate", which the lab takes as the rate a saturated broker ingests (see
    /// [`WorkloadSpec::ingest`]). A rate above that is capped to it.
    pub producer_rate: f64,
    /// OMB's backlog test: after the warm-up its consumers pause until this much backlog (GiB,
    /// summed over the subscriptions) exists, then drain it; the test runs on until the backlog
    /// is down to `1 - backlog_drain_ratio` of it (at least 1000 messages), then
    /// `test_duration_minutes` more. The lab waits at most `backlog_max_wait_minutes` after the pause.
    pub consumer_backlog_size_gb: f64,
    pub backlog_drain_ratio: f64,
    pub backlog_max_wait_minutes: f64,
    pub test_duration_minutes: f64,
    /// OMB's warmupDurationMinutes: traffic simulated before the test (OMB runs the warm-up,
    /// then the test, with the same producers and consumers). 0 here; OMB workload files get
    /// OMB's default of 1 (set by the Python reader).
    pub warmup_duration_minutes: f64,
    /// Lab-only: what one broker ingests at most, in bytes and in messages per second. The
    /// producer rate is capped so that the most loaded broker stays within both.
    pub broker_ingest_bytes_per_second: f64,
    pub broker_ingest_messages_per_second: f64,
    pub key_distributor: KeyDistributor,
    /// Distinct keys a keyed producer cycles through or draws from (OMB's `KeyDistributor`
    /// holds 10,000).
    pub keys: u32,
    pub brokers: u32,
    pub subscription_type: SubscriptionType,
    /// Share of consumers that are slow, and their speed relative to a normal consumer.
    pub slow_consumer_fraction: f64,
    pub slow_consumer_speed: f64,
    /// Share of delivered messages that are negatively acknowledged (redelivered).
    pub redelivery_rate: f64,
    /// The Java client's `negativeAckRedeliveryDelay` (ms): a Shared or Key_Shared consumer asks
    /// for a nacked message again this long after the nack (at least 100 ms, the client's
    /// minimum; see [`WorkloadSpec::negative_ack_redelivery_delay_ms`]).
    pub negative_ack_redelivery_delay_ms: f64,
    /// The Java client's `acknowledgmentGroupTime` (ms; 0 sends each acknowledgement at once) and
    /// `maxAcknowledgmentGroupSize`: acknowledgements reach the broker when the client flushes
    /// them (`src/lab/workload/ack_grouping.rs`).
    pub acknowledgment_group_time_ms: f64,
    pub max_acknowledgment_group_size: u32,
    /// Seeks per subscription per minute, each going back this many seconds of messages.
    pub seeks_per_minute: f64,
    pub seek_back_seconds: f64,
    /// Readers per partition that join late, this far behind the tail, reading this much faster.
    pub catch_up_readers: u32,
    pub catch_up_start_seconds: f64,
    pub catch_up_behind_seconds: f64,
    pub catch_up_speed: f64,
    /// Consumer disconnects per subscription per minute, each lasting this long.
    pub churn_per_minute: f64,
    pub churn_downtime_seconds: f64,
    /// The broker's life (`src/lab/workload/lifecycle.rs`). A rolling restart every
    /// `rolling_restart_interval_seconds` (0: none; whole milliseconds, as the injector of
    /// Pulsar's `BrokerEntryCacheRollingRestartTest` waits), at most `rolling_restart_count` (0: as
    /// many as fit), each broker in turn away `broker_restart_seconds`; a topic is loaded again
    /// `topic_load_delay_ms` after its unload and its consumers reconnect a uniform
    /// `reconnect_delay_min_ms..reconnect_delay_max_ms` after that. Bundle moves per broker per
    /// minute, a reconnect storm every so many seconds (0: none), and a producer that sleeps 100 ms
    /// whenever its messages still owe this many deliveries (0: never; the topic's value, shared by
    /// its partitions).
    pub rolling_restart_interval_seconds: f64,
    pub rolling_restart_count: u32,
    pub broker_restart_seconds: f64,
    pub topic_load_delay_ms: f64,
    pub reconnect_delay_min_ms: f64,
    pub reconnect_delay_max_ms: f64,
    pub bundle_moves_per_minute: f64,
    pub reconnect_storm_every_seconds: f64,
    pub producer_pause_outstanding_deliveries: f64,
    /// When a ledger is full (Pulsar's managedLedgerMaxEntriesPerLedger,
    /// managedLedgerMaxSizePerLedgerMbytes, managedLedgerMinLedgerRolloverTimeMinutes and
    /// managedLedgerMaxLedgerRolloverTimeMinutes; see [`crate::broker::ledger::rollover::Rollover`]).
    pub max_entries_per_ledger: u32,
    pub max_ledger_size_mb: u32,
    pub min_ledger_rollover_minutes: f64,
    pub max_ledger_rollover_minutes: f64,
    /// Pulsar's dispatcherMaxReadBatchSize (entries a read asks for at most) and a consumer's
    /// receiverQueueSize (messages; the client sends FLOW once half of it is free).
    pub read_batch_size: u32,
    pub receiver_queue_size: u32,
    /// A normal consumer's speed relative to its share of the produce rate.
    pub consumer_headroom: f64,
    /// Producer batching (OMB's Pulsar driver): a batch, one entry, closes when its first message
    /// is this old, or when it holds this many bytes or messages.
    pub batching_enabled: bool,
    pub batching_max_publish_delay_ms: f64,
    pub batching_max_bytes: u32,
    pub batching_max_messages: u32,
    /// Pulsar's dispatcherMaxRoundRobinBatchSize: entries a Shared consumer gets per turn.
    pub dispatcher_max_round_robin_batch_size: u32,
    /// Pulsar's dispatcherMaxReadSizeBytes: a read's entry count is capped by this many bytes.
    pub dispatcher_max_read_size_bytes: u64,
    /// Pulsar's Key_Shared look-ahead limits (entries waiting in the replay queue), per connected
    /// consumer and per subscription (0 disables one).
    pub key_shared_look_ahead_per_consumer: u32,
    pub key_shared_look_ahead_per_subscription: u32,
    /// Pulsar's subscriptionKeySharedConsistentHashingReplicaPoints.
    pub key_shared_replica_points: u32,
    /// Pulsar's activeConsumerFailoverDelayTimeMillis: a Failover subscription starts reading this
    /// long after its active consumer is chosen.
    pub active_consumer_failover_delay_ms: f64,
    /// Pulsar's managedLedgerNewEntriesCheckDelayInMillis: a read parked at the end of the topic
    /// looks for new entries again after this long, then waits to be woken by the next entry.
    pub managed_ledger_new_entries_check_delay_ms: f64,
    /// The readers a broker opens besides the subscriptions' (`super::readers`), and the bytes
    /// it stores per entry (`super::metadata`).
    pub readers: Readers,
    /// Retention (broker.conf `defaultRetentionTimeInMinutes`, `defaultRetentionSizeInMB`, -1:
    /// infinite) and how often the broker looks for ledgers to trim
    /// (`retentionCheckIntervalInSeconds`, 0: never); see `super::retention`.
    pub retention_time_minutes: f64,
    pub retention_size_mb: f64,
    pub retention_check_interval_seconds: f64,
    /// What `topic_details` say is in storage when the trace starts, one per topic that says so
    /// (`backlog_entries`; see `super::initial_backlog`).
    pub stored_backlogs: Vec<StoredBacklog>,
    /// `topicDetails`: a broker's topics, each different (one partition each, in this order,
    /// placed round-robin over the brokers). `None`: the homogeneous shape above (`topics` x
    /// `partitions_per_topic` identical partitions). Set with [`WorkloadSpec::set_topic_details`];
    /// it conflicts with the shape settings ([`SHAPE_SETTINGS`]).
    pub topic_details: Option<Vec<TopicDetail>>,
    /// The first shape setting given with [`WorkloadSpec::set`] (they conflict with
    /// `topic_details`).
    shape_setting_given: Option<&'static str>,
}

/// The readers a broker opens on a topic besides its consumers' subscriptions, and whether entry
/// sizes carry Pulsar's metadata bytes (see `super::readers`, `super::metadata`).
#[derive(Debug, Clone, PartialEq)]
pub struct Readers {
    /// broker.conf `brokerDeduplicationEnabled`: each topic has the `pulsar.dedup` cursor.
    pub deduplication: bool,
    /// broker.conf `brokerDeduplicationEntriesInterval`: entries between its snapshots.
    pub deduplication_entries_interval: u32,
    /// broker.conf `brokerDeduplicationSnapshotFrequencyInSeconds`: how often the broker's
    /// snapshot monitor looks at every topic (0: never).
    pub deduplication_snapshot_frequency_seconds: f64,
    /// broker.conf `brokerDeduplicationSnapshotIntervalSeconds`: the time since a topic's last
    /// snapshot after which the monitor takes one (0: never by time).
    pub deduplication_snapshot_interval_seconds: f64,
    /// Subscriptions created through the admin API that no consumer ever joins, per topic.
    pub admin_subscriptions_per_topic: u32,
    /// Remote clusters each partition replicates to (a `pulsar.repl.<cluster>` cursor each).
    pub replication_clusters: u32,
    /// An entry's size includes the metadata Pulsar stores with it; false: payloads only.
    pub message_metadata: bool,
}

impl Default for Readers {
    fn default() -> Self {
        Readers {
            deduplication: false,
            deduplication_entries_interval: 1000,
            deduplication_snapshot_frequency_seconds: 120.0,
            deduplication_snapshot_interval_seconds: 120.0,
            admin_subscriptions_per_topic: 0,
            replication_clusters: 0,
            message_metadata: true,
        }
    }
}

/// A topic's own readers in `topicDetails` (`None`: the spec's setting).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicReaders {
    /// The topic's deduplication status (a namespace or topic policy, a broker's stats).
    pub deduplication: Option<bool>,
    /// The remote clusters it replicates to, by name.
    pub replication_clusters: Option<Vec<String>>,
}

/// Entries a `topic_details` topic has in storage when the trace starts, and where its
/// subscriptions stand in them.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredBacklog {
    /// The topic's index in `topic_details`.
    pub topic: usize,
    /// Entries in storage (`backlog_entries`), numbered from 0; publishing continues after them.
    pub entries: u64,
    /// Messages in each stored entry (`backlog_messages_per_entry`).
    pub messages_per_entry: u32,
    /// (subscription index, its unread entries at the end of the stored ones) for each
    /// subscription with a `backlog_entries` above 0.
    pub subscriptions: Vec<(usize, u64)>,
}

/// One topic of `topicDetails`: one partition (managed ledger) of the simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicDetail {
    /// The trace's topic name, as is.
    pub name: String,
    /// Messages per second published (0: no publishing).
    pub producer_rate: f64,
    /// Bytes per message.
    pub message_size: u32,
    pub subscriptions: Vec<SubscriptionDetail>,
    /// Its deduplication status and replication clusters, when they are its own.
    pub readers: TopicReaders,
}

/// One subscription of a [`TopicDetail`].
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionDetail {
    /// The trace's cursor name, as is.
    pub name: String,
    pub subscription_type: SubscriptionType,
    /// Each consumer's speed, messages per second it processes at most (> 0). Empty: no consumer
    /// is connected and the subscription never reads.
    pub consumer_rates: Vec<f64>,
    /// 0: the cursor opens at the end at time 0 and tails. Above 0: it opens at the topic's first
    /// entry at this time, and its consumers connect then (as backlog-first consumers do).
    pub start_seconds: f64,
    /// Share of its delivered messages negatively acknowledged.
    pub redelivery_rate: f64,
}

/// A `topicDetails` value as given (a JSON-like tree), before [`WorkloadSpec::set_topic_details`]
/// checks it.
#[derive(Debug, Clone, PartialEq)]
pub enum DetailValue {
    Scalar(SettingValue),
    List(Vec<DetailValue>),
    /// Keys in the order given.
    Map(Vec<(String, DetailValue)>),
}

/// The homogeneous shape settings: each conflicts with `topic_details`.
pub const SHAPE_SETTINGS: [&str; 17] = [
    "topics",
    "partitions_per_topic",
    "subscriptions_per_topic",
    "consumer_per_subscription",
    "producers_per_topic",
    "producer_rate",
    "message_size",
    "subscription_type",
    "slow_consumer_fraction",
    "slow_consumer_speed",
    "redelivery_rate",
    "consumer_headroom",
    "consumer_backlog_size_gb",
    "catch_up_readers",
    "catch_up_start_seconds",
    "catch_up_behind_seconds",
    "catch_up_speed",
];

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            topics: 1,
            partitions_per_topic: 1,
            message_size: 1024,
            subscriptions_per_topic: 1,
            consumer_per_subscription: 1,
            producers_per_topic: 1,
            producer_rate: 1000.0,
            consumer_backlog_size_gb: 0.0,
            backlog_drain_ratio: 1.0,
            backlog_max_wait_minutes: 240.0,
            test_duration_minutes: 1.0,
            warmup_duration_minutes: 0.0,
            broker_ingest_bytes_per_second: DEFAULT_BROKER_INGEST_BYTES_PER_SECOND,
            broker_ingest_messages_per_second: DEFAULT_BROKER_INGEST_MESSAGES_PER_SECOND,
            key_distributor: KeyDistributor::NoKey,
            keys: OMB_KEYS,
            brokers: 1,
            subscription_type: SubscriptionType::Exclusive,
            slow_consumer_fraction: 0.0,
            slow_consumer_speed: 0.5,
            redelivery_rate: 0.0,
            negative_ack_redelivery_delay_ms: negative_acks::DEFAULT_DELAY_MS as f64,
            acknowledgment_group_time_ms: ack_grouping::DEFAULT_GROUP_TIME_MS as f64,
            max_acknowledgment_group_size: ack_grouping::DEFAULT_MAX_GROUP_SIZE as u32,
            seeks_per_minute: 0.0,
            seek_back_seconds: 30.0,
            catch_up_readers: 0,
            catch_up_start_seconds: 30.0,
            catch_up_behind_seconds: 60.0,
            catch_up_speed: 4.0,
            churn_per_minute: 0.0,
            churn_downtime_seconds: 5.0,
            rolling_restart_interval_seconds: 0.0,
            rolling_restart_count: 0,
            broker_restart_seconds: 5.0,
            topic_load_delay_ms: 100.0,
            reconnect_delay_min_ms: 100.0,
            reconnect_delay_max_ms: 200.0,
            bundle_moves_per_minute: 0.0,
            reconnect_storm_every_seconds: 0.0,
            producer_pause_outstanding_deliveries: 0.0,
            max_entries_per_ledger: rollover::MAX_ENTRIES as u32,
            max_ledger_size_mb: (rollover::MAX_BYTES >> 20) as u32,
            min_ledger_rollover_minutes: (rollover::MIN_AGE_MS / 60_000) as f64,
            max_ledger_rollover_minutes: (rollover::MAX_AGE_MS / 60_000) as f64,
            read_batch_size: 100,
            receiver_queue_size: 1000,
            consumer_headroom: 1.2,
            batching_enabled: true,
            batching_max_publish_delay_ms: 1.0,
            batching_max_bytes: 131_072,
            // PulsarBenchmarkDriver sets Integer.MAX_VALUE (the client's own default is 1000).
            batching_max_messages: i32::MAX as u32,
            dispatcher_max_round_robin_batch_size: 20,
            dispatcher_max_read_size_bytes: 5 * 1024 * 1024,
            key_shared_look_ahead_per_consumer: 4000,
            key_shared_look_ahead_per_subscription: 40_000,
            key_shared_replica_points: 100,
            active_consumer_failover_delay_ms: 1000.0,
            managed_ledger_new_entries_check_delay_ms: 10.0,
            readers: Readers::default(),
            retention_time_minutes: 0.0,
            retention_size_mb: 0.0,
            retention_check_interval_seconds: 120.0,
            stored_backlogs: Vec::new(),
            topic_details: None,
            shape_setting_given: None,
        }
    }
}

fn number(name: &str, v: &SettingValue) -> Result<f64> {
    match v {
        SettingValue::Int(i) => Ok(*i as f64),
        SettingValue::Float(f) if f.is_finite() => Ok(*f),
        other => Err(Error::InvalidArgument {
            name: "spec",
            reason: format!("{name}: expected a number, got {other:?}"),
        }),
    }
}

fn count(name: &str, v: &SettingValue, min: u32) -> Result<u32> {
    let n = number(name, v)?;
    if n.fract() != 0.0 || n < min as f64 || n > u32::MAX as f64 {
        return Err(Error::InvalidArgument {
            name: "spec",
            reason: format!("{name}: expected a whole number >= {min}, got {n}"),
        });
    }
    Ok(n as u32)
}

fn non_negative(name: &str, v: &SettingValue) -> Result<f64> {
    let n = number(name, v)?;
    if n < 0.0 {
        return Err(Error::InvalidArgument {
            name: "spec",
            reason: format!("{name}: must be >= 0, got {n}"),
        });
    }
    Ok(n)
}

fn positive(name: &str, v: &SettingValue) -> Result<f64> {
    let n = non_negative(name, v)?;
    if n == 0.0 {
        return Err(Error::InvalidArgument {
            name: "spec",
            reason: format!("{name}: must be > 0"),
        });
    }
    Ok(n)
}

fn at_most(name: &str, n: u32, max: u32) -> Result<u32> {
    if n > max {
        return Err(Error::InvalidArgument {
            name: "spec",
            reason: format!(
                "{name}: must be at most {max} (a Java int, as in OMB and Pulsar), got {n}"
            ),
        });
    }
    Ok(n)
}

/// 0 (off), or at least `min`: the lifecycle's schedules tick at most that often, so a tiny
/// period cannot make the simulation step through ticks that write nothing.
fn at_least_or_off(name: &str, v: &SettingValue, min: f64) -> Result<f64> {
    let n = non_negative(name, v)?;
    if n != 0.0 && n < min {
        return Err(Error::InvalidArgument {
            name: "spec",
            reason: format!("{name}: must be 0 (off) or at least {min}, got {n}"),
        });
    }
    Ok(n)
}

fn fraction(name: &str, v: &SettingValue) -> Result<f64> {
    let n = non_negative(name, v)?;
    if n > 1.0 {
        return Err(Error::InvalidArgument {
            name: "spec",
            reason: format!("{name}: must be in [0, 1], got {n}"),
        });
    }
    Ok(n)
}

fn flag(name: &str, v: &SettingValue) -> Result<bool> {
    match v {
        SettingValue::Bool(b) => Ok(*b),
        SettingValue::Int(i @ (0 | 1)) => Ok(*i == 1),
        SettingValue::Str(s)
            if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") =>
        {
            Ok(s.eq_ignore_ascii_case("true"))
        }
        other => Err(Error::InvalidArgument {
            name: "spec",
            reason: format!("{name}: expected true or false, got {other:?}"),
        }),
    }
}

/// A retention limit: -1 (any negative, as Pulsar reads it) is infinite, else >= 0.
fn retention_limit(name: &str, v: &SettingValue) -> Result<f64> {
    let n = number(name, v)?;
    Ok(if n < 0.0 { -1.0 } else { n })
}

fn text<'a>(name: &str, v: &'a SettingValue) -> Result<&'a str> {
    match v {
        SettingValue::Str(s) => Ok(s),
        other => Err(Error::InvalidArgument {
            name: "spec",
            reason: format!("{name}: expected a string, got {other:?}"),
        }),
    }
}

/// The names [`WorkloadSpec::set`] accepts (snake_case; OMB's camelCase keys map onto them).
pub const SPEC_NAMES: [&str; 75] = [
    "topics",
    "partitions_per_topic",
    "message_size",
    "subscriptions_per_topic",
    "consumer_per_subscription",
    "producers_per_topic",
    "producer_rate",
    "consumer_backlog_size_gb",
    "backlog_drain_ratio",
    "backlog_max_wait_minutes",
    "test_duration_minutes",
    "key_distributor",
    "keys",
    "brokers",
    "subscription_type",
    "slow_consumer_fraction",
    "slow_consumer_speed",
    "redelivery_rate",
    "negative_ack_redelivery_delay_ms",
    "acknowledgment_group_time_ms",
    "max_acknowledgment_group_size",
    "seeks_per_minute",
    "seek_back_seconds",
    "catch_up_readers",
    "catch_up_start_seconds",
    "catch_up_behind_seconds",
    "catch_up_speed",
    "churn_per_minute",
    "churn_downtime_seconds",
    "rolling_restart_interval_seconds",
    "rolling_restart_count",
    "broker_restart_seconds",
    "topic_load_delay_ms",
    "reconnect_delay_min_ms",
    "reconnect_delay_max_ms",
    "bundle_moves_per_minute",
    "reconnect_storm_every_seconds",
    "producer_pause_outstanding_deliveries",
    "max_entries_per_ledger",
    "managed_ledger_max_entries_per_ledger",
    "managed_ledger_max_size_per_ledger_mbytes",
    "managed_ledger_min_ledger_rollover_time_minutes",
    "managed_ledger_max_ledger_rollover_time_minutes",
    "read_batch_size",
    "receiver_queue_size",
    "consumer_headroom",
    "batching_enabled",
    "batching_max_publish_delay_ms",
    "batching_max_bytes",
    "batching_max_messages",
    "dispatcher_max_round_robin_batch_size",
    "dispatcher_max_read_size_bytes",
    "key_shared_look_ahead_msg_in_replay_threshold_per_consumer",
    "key_shared_look_ahead_msg_in_replay_threshold_per_subscription",
    "subscription_key_shared_consistent_hashing_replica_points",
    "active_consumer_failover_delay_time_millis",
    "dispatcher_max_read_batch_size",
    "managed_ledger_new_entries_check_delay_in_millis",
    "warmup_duration_minutes",
    "broker_ingest_bytes_per_second",
    "broker_ingest_messages_per_second",
    "topic_details",
    "broker_deduplication_enabled",
    "broker_deduplication_entries_interval",
    "broker_deduplication_snapshot_frequency_in_seconds",
    "broker_deduplication_snapshot_interval_seconds",
    "admin_subscriptions_per_topic",
    "replication_clusters",
    "message_metadata",
    "retention_time_minutes",
    "retention_size_mb",
    "retention_check_interval_seconds",
    "default_retention_time_in_minutes",
    "default_retention_size_in_mb",
    "retention_check_interval_in_seconds",
];

fn subscription_type(name: &str, v: &str) -> Result<SubscriptionType> {
    Ok(match v.to_ascii_lowercase().replace('_', "").as_str() {
        "exclusive" => SubscriptionType::Exclusive,
        "failover" => SubscriptionType::Failover,
        "shared" => SubscriptionType::Shared,
        "keyshared" => SubscriptionType::KeyShared,
        _ => {
            return Err(Error::InvalidArgument {
                name: "spec",
                reason: format!("{name}: {v:?} is not Exclusive, Failover, Shared or Key_Shared"),
            })
        }
    })
}

fn conflict(shape: &str) -> Error {
    Error::InvalidArgument {
        name: "spec",
        reason: format!(
            "topic_details cannot be given with {shape}: each listed topic has its own rates, \
             message size and subscriptions (leave out {shape})"
        ),
    }
}

impl WorkloadSpec {
    /// When the simulated topics' ledgers roll over (a size or an age of 0: no limit).
    pub fn rollover(&self) -> Rollover {
        Rollover {
            max_entries: u64::from(self.max_entries_per_ledger),
            max_bytes: u64::from(self.max_ledger_size_mb) << 20,
            min_age_ms: (self.min_ledger_rollover_minutes * 60_000.0) as u64,
            max_age_ms: (self.max_ledger_rollover_minutes * 60_000.0) as u64,
        }
    }

    /// The delay after which a nacked message is asked for again, as the client applies it: the
    /// configured one raised to the client's minimum (`NegativeAcksTracker.MIN_NACK_DELAY_MS`).
    pub fn nack_redelivery_delay_ms(&self) -> u64 {
        (self.negative_ack_redelivery_delay_ms as u64).max(negative_acks::MIN_DELAY_MS)
    }

    /// How the clients group their acknowledgements (a time past ~584,000 years is never).
    pub(super) fn ack_grouping(&self) -> Grouping {
        Grouping {
            group_us: (self.acknowledgment_group_time_ms * 1000.0) as u64,
            max_size: u64::from(self.max_acknowledgment_group_size),
        }
    }

    pub fn set(&mut self, key: &str, v: &SettingValue) -> Result<()> {
        if let Some(&shape) = SHAPE_SETTINGS.iter().find(|&&n| n == key) {
            if self.topic_details.is_some() {
                return Err(conflict(shape));
            }
            self.shape_setting_given.get_or_insert(shape);
        }
        match key {
            "topic_details" => {
                return Err(Error::InvalidArgument {
                    name: "spec",
                    reason:
                        "topic_details: expected a list of topics (set it with set_topic_details)"
                            .into(),
                })
            }
            "topics" => self.topics = count(key, v, 1)?,
            "partitions_per_topic" => self.partitions_per_topic = count(key, v, 1)?,
            "message_size" => self.message_size = at_most(key, count(key, v, 0)?, MAX_ENTRY_BYTES)?,
            "subscriptions_per_topic" => self.subscriptions_per_topic = count(key, v, 0)?,
            "consumer_per_subscription" => self.consumer_per_subscription = count(key, v, 1)?,
            "producers_per_topic" => self.producers_per_topic = count(key, v, 1)?,
            // 0 is OMB's "find the maximum sustainable rate" (see `ingest`).
            "producer_rate" => self.producer_rate = non_negative(key, v)?,
            "warmup_duration_minutes" => self.warmup_duration_minutes = non_negative(key, v)?,
            "broker_ingest_bytes_per_second" => {
                self.broker_ingest_bytes_per_second = positive(key, v)?
            }
            "broker_ingest_messages_per_second" => {
                self.broker_ingest_messages_per_second = positive(key, v)?
            }
            "consumer_backlog_size_gb" => self.consumer_backlog_size_gb = non_negative(key, v)?,
            "backlog_drain_ratio" => self.backlog_drain_ratio = fraction(key, v)?,
            "backlog_max_wait_minutes" => self.backlog_max_wait_minutes = non_negative(key, v)?,
            "test_duration_minutes" => self.test_duration_minutes = non_negative(key, v)?,
            "key_distributor" => {
                self.key_distributor = match text(key, v)? {
                    "NO_KEY" => KeyDistributor::NoKey,
                    "KEY_ROUND_ROBIN" => KeyDistributor::KeyRoundRobin,
                    "RANDOM_NANO" => KeyDistributor::RandomNano,
                    other => {
                        return Err(Error::InvalidArgument {
                            name: "spec",
                            reason: format!(
                        "key_distributor: {other:?} is not NO_KEY, KEY_ROUND_ROBIN or RANDOM_NANO"
                    ),
                        })
                    }
                }
            }
            "keys" => self.keys = count(key, v, 1)?,
            "brokers" => self.brokers = count(key, v, 1)?,
            "subscription_type" => self.subscription_type = subscription_type(key, text(key, v)?)?,
            "slow_consumer_fraction" => self.slow_consumer_fraction = fraction(key, v)?,
            "slow_consumer_speed" => self.slow_consumer_speed = non_negative(key, v)?,
            "redelivery_rate" => self.redelivery_rate = fraction(key, v)?,
            "negative_ack_redelivery_delay_ms" => {
                self.negative_ack_redelivery_delay_ms = non_negative(key, v)?
            }
            "acknowledgment_group_time_ms" => {
                self.acknowledgment_group_time_ms = non_negative(key, v)?
            }
            "max_acknowledgment_group_size" => {
                self.max_acknowledgment_group_size = count(key, v, 1)?
            }
            "seeks_per_minute" => self.seeks_per_minute = non_negative(key, v)?,
            "seek_back_seconds" => self.seek_back_seconds = non_negative(key, v)?,
            "catch_up_readers" => self.catch_up_readers = count(key, v, 0)?,
            "catch_up_start_seconds" => self.catch_up_start_seconds = non_negative(key, v)?,
            "catch_up_behind_seconds" => self.catch_up_behind_seconds = non_negative(key, v)?,
            "catch_up_speed" => self.catch_up_speed = non_negative(key, v)?,
            "churn_per_minute" => self.churn_per_minute = non_negative(key, v)?,
            "churn_downtime_seconds" => self.churn_downtime_seconds = non_negative(key, v)?,
            "rolling_restart_interval_seconds" => {
                self.rolling_restart_interval_seconds = at_least_or_off(key, v, 1.0)?
            }
            "rolling_restart_count" => self.rolling_restart_count = count(key, v, 0)?,
            "broker_restart_seconds" => self.broker_restart_seconds = non_negative(key, v)?,
            "topic_load_delay_ms" => self.topic_load_delay_ms = non_negative(key, v)?,
            "reconnect_delay_min_ms" => self.reconnect_delay_min_ms = non_negative(key, v)?,
            "reconnect_delay_max_ms" => self.reconnect_delay_max_ms = non_negative(key, v)?,
            "bundle_moves_per_minute" => self.bundle_moves_per_minute = non_negative(key, v)?,
            "reconnect_storm_every_seconds" => {
                self.reconnect_storm_every_seconds = at_least_or_off(key, v, 1.0)?
            }
            "producer_pause_outstanding_deliveries" => {
                self.producer_pause_outstanding_deliveries = non_negative(key, v)?
            }
            "max_entries_per_ledger" | "managed_ledger_max_entries_per_ledger" => {
                self.max_entries_per_ledger = count(key, v, 1)?
            }
            "managed_ledger_max_size_per_ledger_mbytes" => {
                self.max_ledger_size_mb = count(key, v, 0)?
            }
            "managed_ledger_min_ledger_rollover_time_minutes" => {
                self.min_ledger_rollover_minutes = non_negative(key, v)?
            }
            "managed_ledger_max_ledger_rollover_time_minutes" => {
                self.max_ledger_rollover_minutes = non_negative(key, v)?
            }
            "read_batch_size" | "dispatcher_max_read_batch_size" => {
                self.read_batch_size = count(key, v, 1)?
            }
            "receiver_queue_size" => self.receiver_queue_size = count(key, v, 1)?,
            "consumer_headroom" => self.consumer_headroom = non_negative(key, v)?,
            "batching_enabled" => self.batching_enabled = flag(key, v)?,
            "batching_max_publish_delay_ms" => {
                self.batching_max_publish_delay_ms = non_negative(key, v)?
            }
            "batching_max_bytes" => {
                self.batching_max_bytes = at_most(key, count(key, v, 1)?, MAX_ENTRY_BYTES)?
            }
            "batching_max_messages" => self.batching_max_messages = count(key, v, 1)?,
            "dispatcher_max_round_robin_batch_size" => {
                self.dispatcher_max_round_robin_batch_size = count(key, v, 1)?
            }
            "dispatcher_max_read_size_bytes" => {
                self.dispatcher_max_read_size_bytes = count(key, v, 1)? as u64
            }
            "key_shared_look_ahead_msg_in_replay_threshold_per_consumer" => {
                self.key_shared_look_ahead_per_consumer = count(key, v, 0)?
            }
            "key_shared_look_ahead_msg_in_replay_threshold_per_subscription" => {
                self.key_shared_look_ahead_per_subscription = count(key, v, 0)?
            }
            "subscription_key_shared_consistent_hashing_replica_points" => {
                self.key_shared_replica_points = count(key, v, 1)?
            }
            "active_consumer_failover_delay_time_millis" => {
                self.active_consumer_failover_delay_ms = non_negative(key, v)?
            }
            "managed_ledger_new_entries_check_delay_in_millis" => {
                self.managed_ledger_new_entries_check_delay_ms = non_negative(key, v)?
            }
            "broker_deduplication_enabled" => self.readers.deduplication = flag(key, v)?,
            // Pulsar takes a snapshot once the counter reaches the interval: 0 acts as 1.
            "broker_deduplication_entries_interval" => {
                self.readers.deduplication_entries_interval = count(key, v, 1)?
            }
            // Whole seconds in broker.conf: a monitor ticking below a second is refused, not run.
            "broker_deduplication_snapshot_frequency_in_seconds" => {
                self.readers.deduplication_snapshot_frequency_seconds =
                    at_least_or_off(key, v, 1.0)?
            }
            "broker_deduplication_snapshot_interval_seconds" => {
                self.readers.deduplication_snapshot_interval_seconds = non_negative(key, v)?
            }
            "admin_subscriptions_per_topic" => {
                self.readers.admin_subscriptions_per_topic = count(key, v, 0)?
            }
            "replication_clusters" => self.readers.replication_clusters = count(key, v, 0)?,
            "message_metadata" => self.readers.message_metadata = flag(key, v)?,
            "retention_time_minutes" | "default_retention_time_in_minutes" => {
                self.retention_time_minutes = retention_limit(key, v)?
            }
            "retention_size_mb" | "default_retention_size_in_mb" => {
                self.retention_size_mb = retention_limit(key, v)?
            }
            // broker.conf takes whole seconds; a tiny period would tick every microsecond.
            "retention_check_interval_seconds" | "retention_check_interval_in_seconds" => {
                self.retention_check_interval_seconds = at_least_or_off(key, v, 1.0)?
            }
            _ => {
                return Err(Error::UnknownSetting {
                    key: key.to_string(),
                    hint: None,
                });
            }
        }
        Ok(())
    }
}

fn detail_error(reason: String) -> Error {
    Error::InvalidArgument {
        name: "spec",
        reason,
    }
}

fn kind_of(v: &DetailValue) -> &'static str {
    match v {
        DetailValue::Scalar(SettingValue::None) => "nothing",
        DetailValue::Scalar(SettingValue::Bool(_)) => "true/false",
        DetailValue::Scalar(SettingValue::Int(_)) => "an integer",
        DetailValue::Scalar(SettingValue::Float(_)) => "a number",
        DetailValue::Scalar(SettingValue::Str(_)) => "a string",
        DetailValue::List(_) => "a list",
        DetailValue::Map(_) => "a mapping",
    }
}

fn list<'a>(path: &str, v: &'a DetailValue) -> Result<&'a [DetailValue]> {
    match v {
        DetailValue::List(items) => Ok(items),
        other => Err(detail_error(format!(
            "{path}: expected a list, got {}",
            kind_of(other)
        ))),
    }
}

fn scalar<'a>(path: &str, v: &'a DetailValue) -> Result<&'a SettingValue> {
    match v {
        // A bool is not a number here (Python's True is an int).
        DetailValue::Scalar(SettingValue::Bool(_)) => Err(detail_error(format!(
            "{path}: expected a number, got true/false"
        ))),
        DetailValue::Scalar(s) => Ok(s),
        other => Err(detail_error(format!(
            "{path}: expected a number, got {}",
            kind_of(other)
        ))),
    }
}

fn name_of(path: &str, v: &DetailValue) -> Result<String> {
    match v {
        DetailValue::Scalar(SettingValue::Str(s)) if !s.is_empty() => Ok(s.clone()),
        DetailValue::Scalar(SettingValue::Str(_)) => {
            Err(detail_error(format!("{path}: must not be empty")))
        }
        other => Err(detail_error(format!(
            "{path}: expected a string, got {}",
            kind_of(other)
        ))),
    }
}

/// A mapping's fields by name: each key one of `known`, given once; `required` ones present.
fn fields<'a>(
    path: &str,
    v: &'a DetailValue,
    known: &[&'static str],
    required: &[&'static str],
) -> Result<Vec<Option<&'a DetailValue>>> {
    let DetailValue::Map(entries) = v else {
        return Err(detail_error(format!(
            "{path}: expected a mapping, got {}",
            kind_of(v)
        )));
    };
    let mut found: Vec<Option<&DetailValue>> = vec![None; known.len()];
    for (key, value) in entries {
        let Some(i) = known.iter().position(|k| k == key) else {
            return Err(Error::UnknownSetting {
                key: format!("{path}.{key}"),
                hint: None,
            });
        };
        if found[i].replace(value).is_some() {
            return Err(detail_error(format!("{path}.{key}: given twice")));
        }
    }
    for r in required {
        let i = known
            .iter()
            .position(|k| k == r)
            .expect("required is known");
        if found[i].is_none() {
            return Err(detail_error(format!("{path}.{r}: missing")));
        }
    }
    Ok(found)
}

/// The keys of a `topicDetails` topic.
pub const TOPIC_KEYS: [&str; 8] = [
    "name",
    "producer_rate",
    "message_size",
    "subscriptions",
    "deduplication",
    "replication_clusters",
    "backlog_entries",
    "backlog_messages_per_entry",
];
/// The keys of a `topicDetails` topic's subscription.
pub const SUBSCRIPTION_KEYS: [&str; 6] = [
    "name",
    "type",
    "consumer_rates",
    "start_seconds",
    "redelivery_rate",
    "backlog_entries",
];

/// A count of entries, at most [`super::initial_backlog::MAX_STORED_ENTRIES`].
fn stored_entries(path: &str, v: &DetailValue) -> Result<u64> {
    let n = number(path, scalar(path, v)?)?;
    let max = super::initial_backlog::MAX_STORED_ENTRIES;
    if n.fract() != 0.0 || n < 0.0 || n > max as f64 {
        return Err(detail_error(format!(
            "{path}: expected a whole number of entries in [0, {max}], got {n}"
        )));
    }
    Ok(n as u64)
}

/// A subscription and its unread entries in the stored backlog (`backlog_entries`, 0 if not given).
fn subscription_detail(path: &str, v: &DetailValue) -> Result<(SubscriptionDetail, u64)> {
    let f = fields(
        path,
        v,
        &SUBSCRIPTION_KEYS,
        &["name", "type", "consumer_rates"],
    )?;
    let at = |k: &str| format!("{path}.{k}");
    let name = name_of(&at("name"), f[0].expect("required"))?;
    if let Some(whose) = super::readers::reserved(&name) {
        return Err(detail_error(format!(
            "{}: {name:?} is {whose}: the broker keeps it for its own cursor",
            at("name")
        )));
    }
    let kind = match f[1].expect("required") {
        DetailValue::Scalar(SettingValue::Str(s)) => subscription_type(&at("type"), s)?,
        other => {
            return Err(detail_error(format!(
                "{}: expected Exclusive, Failover, Shared or Key_Shared, got {}",
                at("type"),
                kind_of(other)
            )))
        }
    };
    let rates = list(&at("consumer_rates"), f[2].expect("required"))?;
    let consumer_rates = rates
        .iter()
        .enumerate()
        .map(|(c, r)| {
            let p = format!("{}[{c}]", at("consumer_rates"));
            positive(&p, scalar(&p, r)?)
        })
        .collect::<Result<Vec<f64>>>()?;
    let start_seconds = match f[3] {
        Some(v) => non_negative(&at("start_seconds"), scalar(&at("start_seconds"), v)?)?,
        None => 0.0,
    };
    let redelivery_rate = match f[4] {
        Some(v) => fraction(&at("redelivery_rate"), scalar(&at("redelivery_rate"), v)?)?,
        None => 0.0,
    };
    let backlog = match f[5] {
        Some(v) => stored_entries(&at("backlog_entries"), v)?,
        None => 0,
    };
    if backlog > 0 && start_seconds > 0.0 {
        return Err(detail_error(format!(
            "{}: a subscription with a stored backlog opens in it at time 0; leave out \
             start_seconds (or backlog_entries)",
            at("backlog_entries")
        )));
    }
    Ok((
        SubscriptionDetail {
            name,
            subscription_type: kind,
            consumer_rates,
            start_seconds,
            redelivery_rate,
        },
        backlog,
    ))
}

/// A topic and what it has in storage when the trace starts (None: nothing).
fn topic_detail(path: &str, v: &DetailValue) -> Result<(TopicDetail, Option<StoredBacklog>)> {
    let f = fields(
        path,
        v,
        &TOPIC_KEYS,
        &["name", "producer_rate", "message_size"],
    )?;
    let at = |k: &str| format!("{path}.{k}");
    let name = name_of(&at("name"), f[0].expect("required"))?;
    let producer_rate = non_negative(
        &at("producer_rate"),
        scalar(&at("producer_rate"), f[1].expect("required"))?,
    )?;
    let size = at("message_size");
    let message_size = at_most(
        &size,
        count(&size, scalar(&size, f[2].expect("required"))?, 1)?,
        MAX_ENTRY_BYTES,
    )?;
    let entries = match f[6] {
        Some(v) => stored_entries(&at("backlog_entries"), v)?,
        None => 0,
    };
    let per = at("backlog_messages_per_entry");
    let messages_per_entry = match f[7] {
        Some(v) => count(&per, scalar(&per, v)?, 1)?,
        None => 1,
    };
    if u64::from(messages_per_entry) * u64::from(message_size) > u64::from(MAX_ENTRY_BYTES) {
        return Err(detail_error(format!(
            "{per}: {messages_per_entry} messages of {message_size} bytes make an entry larger \
             than {MAX_ENTRY_BYTES} bytes; lower it"
        )));
    }
    let stored_bytes = entries
        .checked_mul(u64::from(messages_per_entry))
        .and_then(|m| m.checked_mul(u64::from(message_size)));
    if stored_bytes.is_none_or(|b| b > 1 << 62) {
        return Err(detail_error(format!(
            "{}: {entries} entries of {messages_per_entry} messages of {message_size} bytes are \
             more than 2^62 bytes; lower it",
            at("backlog_entries")
        )));
    }
    let mut stored_subs = Vec::new();
    let mut subscriptions = Vec::new();
    if let Some(v) = f[3] {
        for (j, s) in list(&at("subscriptions"), v)?.iter().enumerate() {
            let (sub, backlog) = subscription_detail(&format!("{path}.subscriptions[{j}]"), s)?;
            if backlog > entries {
                return Err(detail_error(format!(
                    "{path}.subscriptions[{j}].backlog_entries: {backlog} is more than the \
                     {entries} entries the topic has in storage; raise \
                     {path}.backlog_entries or lower it"
                )));
            }
            if backlog > 0 {
                stored_subs.push((j, backlog));
            }
            if subscriptions
                .iter()
                .any(|o: &SubscriptionDetail| o.name == sub.name)
            {
                return Err(detail_error(format!(
                    "{path}.subscriptions[{j}].name: {:?} is given twice in this topic",
                    sub.name
                )));
            }
            subscriptions.push(sub);
        }
    }
    let deduplication = match f[4] {
        Some(DetailValue::Scalar(v)) => Some(flag(&at("deduplication"), v)?),
        Some(other) => {
            return Err(detail_error(format!(
                "{}: expected true or false, got {}",
                at("deduplication"),
                kind_of(other)
            )))
        }
        None => None,
    };
    let replication_clusters = match f[5] {
        Some(v) => {
            let path = at("replication_clusters");
            let mut clusters: Vec<String> = Vec::new();
            for (c, item) in list(&path, v)?.iter().enumerate() {
                let cluster = name_of(&format!("{path}[{c}]"), item)?;
                if clusters.contains(&cluster) {
                    return Err(detail_error(format!(
                        "{path}[{c}]: {cluster:?} is given twice"
                    )));
                }
                clusters.push(cluster);
            }
            Some(clusters)
        }
        None => None,
    };
    let stored = (entries > 0).then_some(StoredBacklog {
        topic: 0,
        entries,
        messages_per_entry,
        subscriptions: stored_subs,
    });
    Ok((
        TopicDetail {
            name,
            producer_rate,
            message_size,
            subscriptions,
            readers: TopicReaders {
                deduplication,
                replication_clusters,
            },
        },
        stored,
    ))
}

impl WorkloadSpec {
    /// Sets `topic_details` from the list as given (snake_case keys: `name`, `producer_rate`,
    /// `message_size`, `subscriptions` of `name`, `type`, `consumer_rates`, `start_seconds`,
    /// `redelivery_rate`); every field is checked, and an error names it
    /// (`topic_details[i].subscriptions[j].key`). It conflicts with the shape settings
    /// ([`SHAPE_SETTINGS`]), whichever comes first.
    pub fn set_topic_details(&mut self, v: &DetailValue) -> Result<()> {
        if let Some(shape) = self.shape_setting_given {
            return Err(conflict(shape));
        }
        let items = list("topic_details", v)?;
        if items.is_empty() {
            return Err(detail_error(
                "topic_details: expected at least one topic".into(),
            ));
        }
        let mut topics: Vec<TopicDetail> = Vec::with_capacity(items.len());
        let mut stored_backlogs = Vec::new();
        let mut names = std::collections::HashSet::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let (t, stored) = topic_detail(&format!("topic_details[{i}]"), item)?;
            if let Some(b) = stored {
                stored_backlogs.push(StoredBacklog { topic: i, ..b });
            }
            if !names.insert(t.name.clone()) {
                return Err(detail_error(format!(
                    "topic_details[{i}].name: {:?} is given twice",
                    t.name
                )));
            }
            topics.push(t);
        }
        self.topic_details = Some(topics);
        self.stored_backlogs = stored_backlogs;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> DetailValue {
        DetailValue::Scalar(SettingValue::Str(v.into()))
    }
    fn f(v: f64) -> DetailValue {
        DetailValue::Scalar(SettingValue::Float(v))
    }
    fn map(entries: &[(&str, DetailValue)]) -> DetailValue {
        DetailValue::Map(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }
    fn topic(name: &str, subs: Vec<DetailValue>) -> DetailValue {
        map(&[
            ("name", s(name)),
            ("producer_rate", f(100.0)),
            ("message_size", DetailValue::Scalar(SettingValue::Int(512))),
            ("subscriptions", DetailValue::List(subs)),
        ])
    }
    fn sub(name: &str, rates: &[f64]) -> DetailValue {
        map(&[
            ("name", s(name)),
            ("type", s("Key_Shared")),
            (
                "consumer_rates",
                DetailValue::List(rates.iter().map(|&r| f(r)).collect()),
            ),
        ])
    }
    fn error(v: &DetailValue) -> String {
        WorkloadSpec::default()
            .set_topic_details(v)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn topic_details_parse_with_defaults() {
        let mut spec = WorkloadSpec::default();
        let v = DetailValue::List(vec![topic(
            "a",
            vec![sub("s", &[10.0, 20.0]), sub("t", &[])],
        )]);
        spec.set_topic_details(&v).unwrap();
        let t = &spec.topic_details.as_ref().unwrap()[0];
        assert_eq!(
            (t.name.as_str(), t.producer_rate, t.message_size),
            ("a", 100.0, 512)
        );
        let s0 = &t.subscriptions[0];
        assert_eq!(s0.subscription_type, SubscriptionType::KeyShared);
        assert_eq!(s0.consumer_rates, vec![10.0, 20.0]);
        assert_eq!((s0.start_seconds, s0.redelivery_rate), (0.0, 0.0));
        assert!(t.subscriptions[1].consumer_rates.is_empty());
        assert_eq!(spec.partitions(), 1);
    }

    #[test]
    fn topic_details_conflict_with_the_shape_settings_either_way() {
        let v = DetailValue::List(vec![topic("a", vec![])]);
        for name in SHAPE_SETTINGS {
            let value = if name == "subscription_type" {
                SettingValue::Str("Shared".into())
            } else {
                SettingValue::Int(1)
            };
            let mut spec = WorkloadSpec::default();
            spec.set(name, &value).unwrap();
            let e = spec.set_topic_details(&v).unwrap_err().to_string();
            assert!(e.contains(&format!("with {name}:")), "{e}");
            let mut spec = WorkloadSpec::default();
            spec.set_topic_details(&v).unwrap();
            let e = spec.set(name, &value).unwrap_err().to_string();
            assert!(e.contains(&format!("with {name}:")), "{e}");
        }
        // Global settings still apply.
        let mut spec = WorkloadSpec::default();
        spec.set_topic_details(&v).unwrap();
        spec.set("brokers", &SettingValue::Int(3)).unwrap();
        spec.set("read_batch_size", &SettingValue::Int(10)).unwrap();
    }

    #[test]
    fn topic_details_errors_name_the_field() {
        let one = |t: DetailValue| DetailValue::List(vec![t]);
        assert!(error(&DetailValue::List(vec![])).contains("at least one topic"));
        assert!(error(&s("x")).contains("topic_details: expected a list"));
        let e = error(&one(map(&[("name", s("a")), ("producer_rate", f(1.0))])));
        assert!(e.contains("topic_details[0].message_size: missing"), "{e}");
        let e = error(&one(map(&[
            ("name", s("a")),
            ("producer_rate", f(-1.0)),
            ("message_size", f(1.0)),
        ])));
        assert!(
            e.contains("topic_details[0].producer_rate: must be >= 0"),
            "{e}"
        );
        let e = error(&one(map(&[
            ("name", s("a")),
            ("producer_rate", f(f64::NAN)),
            ("message_size", f(1.0)),
        ])));
        assert!(e.contains("topic_details[0].producer_rate"), "{e}");
        let e = error(&one(map(&[
            ("name", s("")),
            ("producer_rate", f(1.0)),
            ("message_size", f(1.0)),
        ])));
        assert!(
            e.contains("topic_details[0].name: must not be empty"),
            "{e}"
        );
        let e = error(&one(map(&[
            ("name", s("a")),
            ("producer_rate", f(1.0)),
            ("message_size", f(0.0)),
        ])));
        assert!(e.contains("topic_details[0].message_size"), "{e}");
        let e = error(&one(topic("a", vec![sub("s", &[1.0, 0.0])])));
        assert!(
            e.contains("topic_details[0].subscriptions[0].consumer_rates[1]: must be > 0"),
            "{e}"
        );
        let e = error(&one(topic("a", vec![sub("s", &[1.0]), sub("s", &[2.0])])));
        assert!(e.contains("topic_details[0].subscriptions[1].name"), "{e}");
        assert!(e.contains("twice"), "{e}");
        let e = error(&DetailValue::List(vec![
            topic("a", vec![]),
            topic("a", vec![]),
        ]));
        assert!(
            e.contains("topic_details[1].name: \"a\" is given twice"),
            "{e}"
        );
        let mut bad = sub("s", &[1.0]);
        if let DetailValue::Map(m) = &mut bad {
            m.push(("speed".into(), f(1.0)));
        }
        let e = error(&one(topic("a", vec![bad])));
        assert!(e.contains("topic_details[0].subscriptions[0].speed"), "{e}");
        let mut bad = sub("s", &[1.0]);
        if let DetailValue::Map(m) = &mut bad {
            m[1].1 = s("Round_Robin");
        }
        let e = error(&one(topic("a", vec![bad])));
        assert!(e.contains("topic_details[0].subscriptions[0].type"), "{e}");
        let mut bad = sub("s", &[1.0]);
        if let DetailValue::Map(m) = &mut bad {
            m.push(("redelivery_rate".into(), f(1.5)));
        }
        let e = error(&one(topic("a", vec![bad])));
        assert!(
            e.contains("subscriptions[0].redelivery_rate: must be in [0, 1]"),
            "{e}"
        );
    }
}
