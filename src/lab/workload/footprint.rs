//! What simulating a workload holds in memory, roughly, before any of it is allocated, and the
//! check that refuses a spec whose simulation cannot fit (or whose ids or times cannot be
//! written).

use super::dispatch::{self, key_shared};
use super::negative_acks::entry_nacked;
use super::spec::{SubscriptionType, TopicDetail, WorkloadSpec};
use crate::error::{Error, Result};

/// What simulating a spec holds in memory, roughly, before any of it is allocated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// Bytes in all (the simulation's state, including `growing_bytes`, and a batch).
    pub bytes: f64,
    /// The part that grows with the simulated duration (entries kept for seeks, a backlog, a
    /// replay queue that consumers cannot empty).
    pub growing_bytes: f64,
    pub partitions: u64,
    /// Cursors over all partitions (subscriptions and catch-up readers).
    pub cursors: u64,
    pub consumers: u64,
}

/// The memory a workload's simulation may take unless told otherwise (`memory_budget`).
pub const DEFAULT_MEMORY_BUDGET: u64 = 4 << 30;

// Bytes of simulation state, from peak RSS of `lc.workload.stream` over 100,000 topics (one
// partition each) with 1 subscription x 1 consumer (257 MiB), 1 x 8 (329 MiB) and 8 x 1
// (564 MiB), less the interpreter and libraries alone (75 MiB): a consumer ~103 bytes, a cursor
// ~340, a partition ~1,380 (its names, producer, message index, tasks). Rounded up.
const BYTES_PER_PARTITION: f64 = 1400.0;
const BYTES_PER_CURSOR: f64 = 350.0;
const BYTES_PER_CONSUMER: f64 = 110.0;
/// A producer's batch on one partition: its next arrival, batch and routing phase, and its task
/// in the simulation's queue (a heap that may hold twice its length).
const BYTES_PER_PRODUCER_STREAM: f64 = 24.0 + 2.0 * 32.0;
/// The names every broker's simulation holds (a topic's, a cursor's), part of the above.
const NAME_BYTES_PER_PARTITION: f64 = 80.0;
const NAME_BYTES_PER_CURSOR: f64 = 32.0;
/// An entry in the message index (`u64`), in a replay queue (`BTreeSet<u64>`, with its nodes).
const INDEX_BYTES_PER_ENTRY: f64 = 8.0;
const REPLAY_BYTES_PER_ENTRY: f64 = 40.0;
/// A nack waiting in a consumer's tracker (a `u64` in a `Vec` under a `BTreeMap` key).
const NACK_BYTES_PER_ENTRY: f64 = 8.0;
/// A range of entries acknowledged on their own (a `BTreeMap` entry of two `i64`s and its share
/// of a node).
const ACKED_RANGE_BYTES: f64 = 48.0;
/// The process itself (the library, Arrow, the allocator) and the batches in flight.
const BASE_BYTES: f64 = 80.0 * 1024.0 * 1024.0;
const BYTES_PER_ROW: f64 = 100.0;
/// A broker's simulation without partitions, and its name in every broker's name table.
const BYTES_PER_BROKER: f64 = 1024.0;

impl WorkloadSpec {
    /// What simulating this spec holds in memory, roughly: state per partition, cursor and
    /// consumer (not per event: the trace streams), plus what grows with the duration. In f64,
    /// so no spec value can overflow it.
    pub fn footprint(&self) -> Footprint {
        if let Some(topics) = &self.topic_details {
            return self.footprint_topics(topics);
        }
        let partitions = self.partitions();
        let cursors_per_partition = self.subscriptions_per_topic as u64
            + self.catch_up_readers as u64
            + self.readers.cursors_per_partition();
        let cursors = partitions.saturating_mul(cursors_per_partition);
        let consumers = partitions
            .saturating_mul(self.subscriptions_per_topic as u64)
            .saturating_mul(self.consumer_per_subscription as u64)
            .saturating_add(partitions.saturating_mul(self.catch_up_readers as u64));
        let (p, c, k) = (partitions as f64, cursors as f64, consumers as f64);
        let seconds = self.simulated_minutes() * 60.0;
        let rate = self.ingest().rate / p;
        let entries_per_s = rate / self.messages_per_entry(rate);
        // A consumer's receiver queue holds up to its permits' worth of entries (a slow one,
        // all of them); the rest of its state is fixed.
        let queued = (self.receiver_queue_size as f64 / self.messages_per_entry(rate))
            .min(entries_per_s.max(1.0) * 2.0);
        // A time-routed topic's partition batches for each of its producers apart.
        let producers = if self.routes_by_time() {
            self.producers_per_topic as f64
        } else {
            1.0
        };
        let entry_bytes = self.messages_per_entry(rate) * self.message_size as f64;
        let mut bytes = BASE_BYTES
            + p * (BYTES_PER_PARTITION
                + producers * BYTES_PER_PRODUCER_STREAM
                + self.lifecycle_bytes(entries_per_s, entry_bytes))
            + c * BYTES_PER_CURSOR
            + k * (BYTES_PER_CONSUMER + queued * INDEX_BYTES_PER_ENTRY);
        let key_shared = self.subscription_type == SubscriptionType::KeyShared;
        if key_shared {
            bytes += key_shared::ring_bytes(self, c * self.consumer_per_subscription as f64);
            if let Some(keys) = key_shared::key_hash_bytes(self) {
                bytes += keys;
            }
        }
        // What grows with the duration. Seeks can go back to any entry: the index keeps them
        // all. A backlog is kept until its consumers pass it. A Shared/Key_Shared subscription
        // whose consumers are slower than the rate keeps the difference in its replay queue.
        let entries = entries_per_s * seconds;
        // The index keeps a `u64` an entry, and where each ledger of the kept entries starts.
        let index_bytes_per_entry =
            INDEX_BYTES_PER_ENTRY + 8.0 / self.entries_per_ledger(entries_per_s);
        let mut growing = 0.0;
        if self.seeks_per_minute > 0.0 {
            growing += p * entries * index_bytes_per_entry;
        } else if self.consumer_backlog_size_gb > 0.0 || self.catch_up_readers > 0 {
            let backlog = if self.consumer_backlog_size_gb > 0.0 {
                entries
            } else {
                self.catch_up_behind_seconds.min(seconds) * entries_per_s
            };
            growing += p * backlog * index_bytes_per_entry;
        }
        // Nacks waiting for their redelivery hold the mark-delete position and so the index: the
        // last `negativeAckRedeliveryDelay` of entries; each also splits the entries acknowledged
        // on their own past it into one more range.
        if self.redelivery_rate > 0.0 {
            let waiting = (self.nack_redelivery_delay_ms() as f64 / 1000.0).min(seconds);
            let nacked = entry_nacked(self.redelivery_rate, self.messages_per_entry(rate));
            growing += p * waiting * entries_per_s * index_bytes_per_entry
                + c * waiting * entries_per_s * nacked * (NACK_BYTES_PER_ENTRY + ACKED_RANGE_BYTES);
        }
        let slower = 1.0
            - self.consumer_headroom
                * (1.0 - self.slow_consumer_fraction * (1.0 - self.slow_consumer_speed));
        if slower > 0.0 {
            if let Some(held) =
                dispatch::replay_held(self, self.subscription_type, entries * slower)
            {
                growing += c * held * REPLAY_BYTES_PER_ENTRY;
            }
        }
        // A batch being made, and per broker: the rows its simulation runs ahead of the merge,
        // its name and its simulation's fixed state.
        bytes += growing + self.batch_and_broker_bytes();
        Footprint {
            bytes,
            growing_bytes: growing,
            partitions,
            cursors,
            consumers,
        }
    }

    /// Refuses, before anything is allocated, a spec the generator cannot simulate: ids past
    /// 32 bits, or a simulation estimated to need more than `budget` bytes. The message names
    /// the estimate and what makes it fit.
    ///
    /// With `broker`, only that broker is simulated: it holds its share of the partitions' state
    /// (and every name, which all brokers share).
    pub fn check(&self, budget: u64, broker: Option<u32>) -> Result<Footprint> {
        let mut f = self.footprint();
        if broker.is_some() && self.brokers > 1 {
            let names = f.partitions as f64 * NAME_BYTES_PER_PARTITION
                + f.cursors as f64 * NAME_BYTES_PER_CURSOR;
            let share = 1.0 / self.brokers as f64;
            f.bytes = BASE_BYTES + names + (f.bytes - BASE_BYTES - names).max(0.0) * share;
            f.growing_bytes *= share;
        }
        // Topics, cursors and consumers are numbered with u32 ids in the trace and the
        // simulation; the trace's dictionary keys are i32.
        if f.partitions > i32::MAX as u64 || f.cursors > i32::MAX as u64 {
            return Err(Error::invalid(
                "spec",
                format!(
                    "{} = {} cursors over {} partitions: the trace numbers them with 32-bit ids (at most {})",
                    if self.topic_details.is_some() {
                        "topicDetails' subscriptions"
                    } else {
                        "topics x partitionsPerTopic x (subscriptionsPerTopic + catchUpReaders)"
                    },
                    f.cursors, f.partitions, i32::MAX
                ),
            ));
        }
        // The trace's timestamps are int64 microseconds.
        if self.max_run_minutes() * 60e6 >= i64::MAX as f64 {
            return Err(Error::invalid(
                "spec",
                format!(
                    "warmupDurationMinutes + testDurationMinutes (+ backlogMaxWaitMinutes with a backlog) = {} minutes: past what the trace's int64 microsecond timestamps hold",
                    self.max_run_minutes()
                ),
            ));
        }
        if self.reconnect_delay_min_ms > self.reconnect_delay_max_ms {
            return Err(Error::invalid(
                "spec",
                format!(
                    "reconnectDelayMinMs = {} is above reconnectDelayMaxMs = {}: give a minimum at most the maximum",
                    self.reconnect_delay_min_ms, self.reconnect_delay_max_ms
                ),
            ));
        }
        if self.consumer_backlog_size_gb > 0.0 && self.producer_rate == 0.0 {
            // OMB's WorkloadGenerator refuses it too: the backlog test needs a known rate.
            return Err(Error::invalid(
                "spec",
                "consumerBacklogSizeGB needs a producerRate: OMB cannot probe the sustainable rate while building a backlog",
            ));
        }
        if f.bytes > budget as f64 {
            let per_broker = self.brokers as f64 * (1024.0 * BYTES_PER_ROW + BYTES_PER_BROKER);
            let fix = if per_broker > f.bytes / 2.0 {
                "use fewer brokers with --brokers (brokers=; more than one a partition adds nothing)"
            } else if f.growing_bytes > f.bytes / 2.0 {
                "shorten it with --duration-minutes (testDurationMinutes), or raise the budget with --memory-budget (memory_budget=)"
            } else {
                "raise the budget with --memory-budget (memory_budget=); with several brokers, generate one broker at a time (broker=, or --spark) to need a share of it"
            };
            return Err(Error::ResourceLimit(format!(
                "the workload's simulation needs ~{} ({} partitions on {} brokers, {} cursors, {} consumers{}), over the memory budget of {}: {fix}",
                human_bytes(f.bytes),
                f.partitions,
                self.brokers,
                f.cursors,
                f.consumers,
                if f.growing_bytes > 0.0 {
                    format!(", ~{} of it growing with the duration", human_bytes(f.growing_bytes))
                } else {
                    String::new()
                },
                human_bytes(budget as f64),
            )));
        }
        Ok(f)
    }

    /// A batch being made, and per broker: the rows its simulation runs ahead of the merge, its
    /// name and its simulation's fixed state.
    fn batch_and_broker_bytes(&self) -> f64 {
        crate::lab::workload::DEFAULT_BATCH_ROWS as f64 * 2.0 * BYTES_PER_ROW
            + self.brokers as f64 * (1024.0 * BYTES_PER_ROW + BYTES_PER_BROKER)
    }

    /// [`WorkloadSpec::footprint`] of `topic_details`: the same model, topic by topic.
    fn footprint_topics(&self, topics: &[TopicDetail]) -> Footprint {
        let seconds = self.simulated_minutes() * 60.0;
        let partitions = topics.len() as u64;
        let mut cursors = 0u64;
        let mut consumers = 0u64;
        let mut bytes = BASE_BYTES + partitions as f64 * BYTES_PER_PARTITION;
        let mut growing = 0.0;
        let mut any_key_shared = false;
        for t in topics {
            let rate = t.producer_rate;
            let per_entry = self.messages_per_entry_of(rate, t.message_size);
            let entries_per_s = rate / per_entry;
            let queued =
                (self.receiver_queue_size as f64 / per_entry).min(entries_per_s.max(1.0) * 2.0);
            let entries = entries_per_s * seconds;
            bytes += self.lifecycle_bytes(entries_per_s, per_entry * t.message_size as f64);
            // The message index: every entry when seeks can go back to any; else from the
            // oldest a late subscription opens at (the first entry) until it passes it.
            let late = t
                .subscriptions
                .iter()
                .any(|s| s.start_seconds > 0.0 && !s.consumer_rates.is_empty());
            if self.seeks_per_minute > 0.0 || late {
                growing += entries * INDEX_BYTES_PER_ENTRY;
            }
            for s in &t.subscriptions {
                let k = s.consumer_rates.len() as f64;
                cursors += 1;
                consumers += s.consumer_rates.len() as u64;
                bytes +=
                    BYTES_PER_CURSOR + k * (BYTES_PER_CONSUMER + queued * INDEX_BYTES_PER_ENTRY);
                let key_shared = s.subscription_type == SubscriptionType::KeyShared;
                if key_shared {
                    any_key_shared = true;
                    bytes += key_shared::ring_bytes(self, k);
                }
                // Shared/Key_Shared consumers slower than the rate: the difference waits in the
                // replay queue.
                let processed: f64 = s.consumer_rates.iter().sum();
                if k > 0.0 && rate > processed {
                    let behind = entries * (1.0 - processed / rate);
                    if let Some(held) = dispatch::replay_held(self, s.subscription_type, behind) {
                        growing += held * REPLAY_BYTES_PER_ENTRY;
                    }
                }
            }
        }
        if any_key_shared {
            if let Some(keys) = key_shared::key_hash_bytes(self) {
                bytes += keys;
            }
        }
        // The readers' cursors (admin subscriptions, replication, dedup), a topic's own clusters
        // counted as the spec's.
        let readers = partitions.saturating_mul(self.readers.cursors_per_partition());
        cursors = cursors.saturating_add(readers);
        bytes += readers as f64 * (BYTES_PER_CURSOR + BYTES_PER_CONSUMER);
        bytes += growing + self.batch_and_broker_bytes();
        Footprint {
            bytes,
            growing_bytes: growing,
            partitions,
            cursors,
            consumers,
        }
    }
}

/// Bytes as "1.5 GiB" or "300.0 MiB".
pub fn human_bytes(n: f64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    if n >= 1024.0 * GIB {
        format!("{:.1} TiB", n / 1024.0 / GIB)
    } else if n >= GIB {
        format!("{:.1} GiB", n / GIB)
    } else {
        format!("{:.1} MiB", n / (1u64 << 20) as f64)
    }
}
