//! A rough size of a workload's trace, from its rates, duration and subscriptions, before any of
//! it is generated (so a caller can say what a run will take, or refuse one that cannot fit).
//!
//! The model follows what the generator does at steady state: producers batch messages for
//! `batching_max_publish_delay_ms`; a cursor at the tail reads at most once per
//! `managed_ledger_new_entries_check_delay_in_millis` (every entry when entries are rarer); a
//! cursor behind (backlog-first consumers, catch-up readers) reads a receiver queue's half worth of
//! entries a read; every cursor acknowledges once a second. Redeliveries, Shared overflow and
//! Key_Shared hold-backs are counted as shares of the entries read. Within a factor of two of the
//! generated trace on the bundled scenarios and OMB-like workloads (a test checks).

use super::dispatch::{self, exclusive};
use super::spec::{KeyDistributor, TopicDetail, WorkloadSpec};

/// About how big a workload's trace is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Messages published, over all partitions.
    pub messages: f64,
    /// Entries published (producer batches).
    pub entries: f64,
    /// Rows of the trace.
    pub events: f64,
}

/// How one partition's entries come and are read, at steady state.
struct PartitionFlow {
    /// Messages in an entry.
    messages_per_entry: f64,
    entries_per_s: f64,
    /// Reads a second of a cursor at the tail.
    tail_reads_per_s: f64,
    /// Entries a read of a cursor behind takes.
    entries_per_read: f64,
}

impl PartitionFlow {
    /// Reads that catch up `seconds` of entries.
    fn behind_reads(&self, seconds: f64) -> f64 {
        seconds * self.entries_per_s / self.entries_per_read
    }

    /// The rows of one cursor active for `active` seconds, `catching_up` of them behind the tail
    /// at `speed` times the publish rate: its open, its reads, an ack a second, and the rows that
    /// `redelivered` (a share of the entries read) adds.
    fn cursor_events(&self, active: f64, catching_up: f64, speed: f64, redelivered: f64) -> f64 {
        let catch_up_entries = catching_up * speed * self.entries_per_s;
        let tail = active - catching_up;
        let reads = catch_up_entries / self.entries_per_read + tail * self.tail_reads_per_s;
        let entries_read = catch_up_entries + tail * self.entries_per_s;
        1.0 + reads + active + entries_read * redelivered
    }
}

impl WorkloadSpec {
    /// A partition publishing `rate` messages of `message_size` bytes a second.
    fn partition_flow(&self, rate: f64, message_size: u32) -> PartitionFlow {
        let n = self.messages_per_entry_of(self.batching_rate(rate), message_size);
        let entries_per_s = rate / n;
        let check = self.managed_ledger_new_entries_check_delay_ms / 1000.0;
        PartitionFlow {
            messages_per_entry: n,
            entries_per_s,
            tail_reads_per_s: self.tail_reads_per_s(entries_per_s, check),
            // A cursor behind reads what its consumer's permits allow: half a receiver queue.
            entries_per_read: (self.receiver_queue_size as f64 / 2.0 / n)
                .clamp(1.0, self.read_batch_size as f64),
        }
    }

    /// Reads a second of a cursor at the tail of a partition adding `entries_per_s` entries: one
    /// an entry, or one a new-entries check (`check` seconds) when entries come faster. Entries of
    /// time-routed producers come in bursts (a switch interval's worth, each producer's visit one
    /// interval in `partitions`): a burst takes one read and one a check after it.
    fn tail_reads_per_s(&self, entries_per_s: f64, check: f64) -> f64 {
        let steady = if check > 0.0 {
            entries_per_s.min(1.0 / check)
        } else {
            entries_per_s
        };
        if !self.routes_by_time() {
            return steady;
        }
        let switch_s = self.partition_switch_us() / 1e6;
        let visits_per_s = (self.producers_per_topic as f64
            / (self.partitions_per_topic as f64 * switch_s))
            .min(1.0 / switch_s);
        let per_visit = if check > 0.0 {
            1.0 + switch_s / check
        } else {
            f64::INFINITY
        };
        steady.min(visits_per_s * per_visit)
    }

    /// The rows a subscription's seeks (each goes back and reads again) and churn (each closes,
    /// reopens and catches up the downtime) add over `minutes`.
    fn seek_and_churn_events(&self, flow: &PartitionFlow, minutes: f64) -> f64 {
        let behind_reads = |seconds: f64| seconds * flow.entries_per_s / flow.entries_per_read;
        self.seeks_per_minute * minutes * (1.0 + behind_reads(self.seek_back_seconds))
            + self.churn_per_minute * minutes * (3.0 + behind_reads(self.churn_downtime_seconds))
    }

    /// Whether the producers send keyless batched messages to a partitioned topic, which the
    /// Java client routes by time (`RoundRobinPartitionMessageRouterImpl.choosePartition`: the
    /// partition `(now_ms / partitionSwitchMs + startPtnIdx) % partitions`), so that each
    /// partition gets a producer's whole rate one switch interval in `partitions`. Keyed messages
    /// go by their key's hash and unbatched ones round robin, message by message: both spread
    /// evenly enough to keep one even stream a partition.
    pub(super) fn routes_by_time(&self) -> bool {
        self.topic_details.is_none()
            && self.partitions_per_topic > 1
            && self.batching_enabled
            && self.key_distributor == KeyDistributor::NoKey
    }

    /// The client's `partitionSwitchMs`: `batchingPartitionSwitchFrequencyByPublishDelay` (10)
    /// publish delays, in whole milliseconds, at least 1 (`ProducerConfigurationData
    /// .batchingPartitionSwitchFrequencyIntervalMicros`), in microseconds.
    pub(super) fn partition_switch_us(&self) -> f64 {
        let delay_us = (self.batching_max_publish_delay_ms * 1000.0) as u64;
        (delay_us.saturating_mul(10) / 1000).max(1) as f64 * 1000.0
    }

    /// The rate a producer batch fills at, on a partition publishing `rate` messages a second: a
    /// time-routed producer sends its whole share of the topic's rate to one partition at a time.
    fn batching_rate(&self, rate: f64) -> f64 {
        if self.routes_by_time() {
            rate * self.partitions_per_topic as f64 / self.producers_per_topic as f64
        } else {
            rate
        }
    }

    /// Entries a ledger holds, at least one, on a partition adding `entries_per_s` entries a
    /// second: it is full at the maximum entries (or age), but not before the minimum age.
    pub(super) fn entries_per_ledger(&self, entries_per_s: f64) -> f64 {
        let r = self.rollover();
        let mut seconds = f64::from(self.max_entries_per_ledger) / entries_per_s.max(1e-9);
        if r.max_age_ms > 0 {
            seconds = seconds.min(r.max_age_ms as f64 / 1000.0);
        }
        seconds = seconds.max(r.min_age_ms as f64 / 1000.0);
        (entries_per_s * seconds).max(1.0)
    }

    /// Messages in an entry, on average (a producer batch).
    pub(super) fn messages_per_entry(&self, rate: f64) -> f64 {
        self.messages_per_entry_of(self.batching_rate(rate), self.message_size)
    }

    /// Messages in an entry of a partition publishing `rate` messages of `message_size` bytes a
    /// second.
    pub(super) fn messages_per_entry_of(&self, rate: f64, message_size: u32) -> f64 {
        if !self.batching_enabled {
            return 1.0;
        }
        let within = self.batching_max_publish_delay_ms / 1000.0 * rate;
        let mut n = 1.0 + (within - 0.5).max(0.0);
        if message_size > 0 {
            n = n.min((self.batching_max_bytes as f64 / message_size as f64).floor());
        }
        n.min(self.batching_max_messages as f64).max(1.0)
    }

    /// The size of the trace this spec generates, roughly.
    pub fn estimate(&self) -> Estimate {
        if let Some(topics) = &self.topic_details {
            return self.estimate_topics(topics);
        }
        let seconds = self.simulated_minutes() * 60.0;
        let partitions = self.partitions() as f64;
        let total_rate = self.ingest().rate;
        let rate = total_rate / partitions; // messages/s of a partition
        let flow = self.partition_flow(rate, self.message_size);
        let (n, entries_per_s) = (flow.messages_per_entry, flow.entries_per_s);
        // Share of the entries read that come back: negative acks, and for Shared and Key_Shared
        // overflow and hold-back.
        let nacked = self.nacks_redelivered(self.redelivery_rate, n, seconds);
        let slow = self.slow_consumer_fraction > 0.0 || self.consumer_headroom < 1.0;
        let redelivered = dispatch::redelivered_rows(
            self.subscription_type,
            nacked,
            slow,
            self.consumer_per_subscription > 1,
            n,
        );
        // One cursor from `start` on: it catches up `behind` messages at `speed` times the
        // publish rate, then reads at the tail.
        let cursor = |start: f64, behind: f64, speed: f64| -> f64 {
            let active = (seconds - start).max(0.0);
            if active <= 0.0 {
                return 0.0;
            }
            let catching_up = if behind > 0.0 {
                if speed > 1.0 {
                    (behind / ((speed - 1.0) * rate)).min(active)
                } else {
                    active
                }
            } else {
                0.0
            };
            flow.cursor_events(active, catching_up, speed, redelivered)
        };
        let regular = if let Some((build, _)) = self.backlog_phases() {
            // Paused while the backlog builds (it reads nothing then), then behind by it.
            cursor(build, build * rate, self.consumer_headroom)
        } else {
            cursor(0.0, 0.0, self.consumer_headroom)
        };
        let catch_up = cursor(
            self.catch_up_start_seconds,
            (self.catch_up_behind_seconds * rate).min(self.catch_up_start_seconds * rate),
            self.catch_up_speed,
        );
        let seeks_and_churn = self.seek_and_churn_events(&flow, seconds / 60.0);
        let cursors = self.subscriptions_per_topic as f64 + self.catch_up_readers as f64;
        let per_partition = entries_per_s * seconds
            + self.subscriptions_per_topic as f64 * (regular + seeks_and_churn)
            + self.catch_up_readers as f64 * catch_up
            + self.lifecycle_events(cursors, seconds, |s| flow.behind_reads(s));
        Estimate {
            messages: total_rate * seconds,
            entries: entries_per_s * seconds * partitions,
            events: per_partition * partitions,
        }
    }
}

/// The producer rate the lab simulates: the requested one, unless the brokers cannot ingest it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ingest {
    /// `producer_rate` as given (0: OMB's "find the maximum sustainable rate").
    pub requested: f64,
    /// Messages per second over all partitions, as simulated.
    pub rate: f64,
    /// The most the brokers ingest: the rate at which the most loaded broker is saturated.
    pub capacity: f64,
    /// Why the rate is below the requested one: `"bytes"` or `"messages"` (the capacity that
    /// binds), `None` when the requested rate is simulated as it is.
    pub capped_by: Option<&'static str>,
}

impl WorkloadSpec {
    /// Topic partitions over all topics (no overflow: at most 2^64 - 2^33 + 1).
    pub fn partitions(&self) -> u64 {
        match &self.topic_details {
            Some(topics) => topics.len() as u64,
            None => self.topics as u64 * self.partitions_per_topic as u64,
        }
    }

    /// Minutes simulated: the warm-up, then the test; with a backlog (OMB's backlog test) the
    /// test goes on while the backlog builds and drains, as expected from the rates
    /// ([`WorkloadSpec::backlog_phases`]).
    pub fn simulated_minutes(&self) -> f64 {
        let backlog = self
            .backlog_phases()
            .map_or(0.0, |(build, drain)| build + drain);
        self.warmup_duration_minutes + backlog / 60.0 + self.test_duration_minutes
    }

    /// The backlog OMB builds (`consumerBacklogSizeGB` GiB summed over the subscriptions), in
    /// messages, and the backlog at or below which it is drained: `1 - backlogDrainRatio` of it,
    /// at least 1000 messages (`WorkloadGenerator.buildAndDrainBacklog`). None without one.
    pub fn backlog_messages(&self) -> Option<(f64, f64)> {
        if self.consumer_backlog_size_gb <= 0.0 || self.topic_details.is_some() {
            return None;
        }
        let requested = self.consumer_backlog_size_gb * (1u64 << 30) as f64;
        let capacity = (requested / self.message_size.max(1) as f64).floor();
        let empty = ((1.0 - self.backlog_drain_ratio) * capacity)
            .floor()
            .max(1000.0);
        Some((requested / self.message_size.max(1) as f64, empty))
    }

    /// Seconds the backlog takes to build after the warm-up (checked once a second, as OMB does)
    /// and then to drain, from the rates: the drain at the slowest subscription's speed over the
    /// publish rate (it holds the last of the backlog), for the share of the time its consumers
    /// are connected (`WorkloadSpec::connected_share`). Both within `backlog_max_wait_minutes`
    /// together. None without a backlog.
    pub fn backlog_phases(&self) -> Option<(f64, f64)> {
        let (build_to, drained_at) = self.backlog_messages()?;
        let limit = self.backlog_max_wait_minutes * 60.0;
        let subscribed = self.ingest().rate * self.subscriptions_per_topic as f64;
        if subscribed <= 0.0 {
            return Some((limit, 0.0));
        }
        let build = (build_to / subscribed).ceil().min(limit);
        // Consumers away (storms, unloads) drain nothing meanwhile.
        let speed = self.slowest_subscription_speed() * self.connected_share();
        let drain = if speed > 1.0 {
            (build_to - drained_at).max(0.0) / (subscribed * (speed - 1.0))
        } else {
            f64::INFINITY
        };
        Some((build, drain.min(limit - build)))
    }

    /// The slowest subscription's speed over its share of the publish rate: an Exclusive or
    /// Failover one with a slow consumer, else a Shared or Key_Shared one whose consumers are
    /// slow in the workload's proportion.
    fn slowest_subscription_speed(&self) -> f64 {
        let single = self.subscription_type.has_single_active_consumer();
        let f = self.slow_consumer_fraction;
        if single && f > 0.0 {
            self.consumer_headroom * self.slow_consumer_speed
        } else {
            self.consumer_headroom * (1.0 - f * (1.0 - self.slow_consumer_speed))
        }
    }

    /// The longest the simulation may run, in minutes: the warm-up, the test, and with a backlog
    /// the most the lab waits for it (the generator ends there unless the backlog drains first).
    pub fn max_run_minutes(&self) -> f64 {
        let backlog = if self.backlog_messages().is_some() {
            self.backlog_max_wait_minutes
        } else {
            0.0
        };
        self.warmup_duration_minutes + backlog + self.test_duration_minutes
    }

    /// The rate simulated. OMB's producers spread their rate evenly over the partitions, which
    /// are placed round robin over the brokers, so the broker with the most partitions saturates
    /// first: the rate is capped where that broker ingests `broker_ingest_bytes_per_second` or
    /// `broker_ingest_messages_per_second`, as producers blocked by a saturated broker would be.
    /// `producer_rate` 0 (OMB: find the maximum sustainable rate) is that capacity.
    pub fn ingest(&self) -> Ingest {
        if let Some(topics) = &self.topic_details {
            return self.ingest_topics(topics);
        }
        let partitions = self.partitions().max(1);
        let most = partitions.div_ceil(self.brokers.max(1) as u64) as f64;
        let partitions = partitions as f64;
        let by_messages = self.broker_ingest_messages_per_second * partitions / most;
        let by_bytes = if self.message_size > 0 {
            self.broker_ingest_bytes_per_second * partitions / (most * self.message_size as f64)
        } else {
            f64::INFINITY
        };
        let (capacity, binding) = if by_bytes < by_messages {
            (by_bytes, "bytes")
        } else {
            (by_messages, "messages")
        };
        let requested = self.producer_rate;
        if requested == 0.0 || requested > capacity {
            Ingest {
                requested,
                rate: capacity,
                capacity,
                capped_by: Some(binding),
            }
        } else {
            Ingest {
                requested,
                rate: requested,
                capacity,
                capped_by: None,
            }
        }
    }

    /// When the paused consumers resume to drain the backlog, in microseconds, as expected from
    /// the rates (the generator resumes them when the backlog it simulates is built). None
    /// without a backlog.
    pub fn backlog_start_us(&self) -> Option<f64> {
        let (build, _) = self.backlog_phases()?;
        Some((self.warmup_duration_minutes * 60.0 + build) * 1e6)
    }
}

impl WorkloadSpec {
    /// [`WorkloadSpec::ingest`] of `topic_details`: each topic publishes its own rate, never
    /// capped; `capacity` is the total rate at which the most loaded broker (in bytes or
    /// messages) would reach its ingest limit, the topics' rates scaled alike (infinite when
    /// nothing is published).
    fn ingest_topics(&self, topics: &[TopicDetail]) -> Ingest {
        let brokers = (self.brokers.max(1) as usize).min(topics.len()).max(1);
        let mut messages = vec![0.0f64; brokers];
        let mut bytes = vec![0.0f64; brokers];
        for (i, t) in topics.iter().enumerate() {
            messages[i % brokers] += t.producer_rate;
            bytes[i % brokers] += t.producer_rate * t.message_size as f64;
        }
        let rate: f64 = topics.iter().map(|t| t.producer_rate).sum();
        let most = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let scale = |limit: f64, load: f64| {
            if load > 0.0 {
                limit / load
            } else {
                f64::INFINITY
            }
        };
        let by_messages = scale(self.broker_ingest_messages_per_second, most(&messages));
        let by_bytes = scale(self.broker_ingest_bytes_per_second, most(&bytes));
        let capacity = if rate > 0.0 {
            rate * by_messages.min(by_bytes)
        } else {
            f64::INFINITY
        };
        Ingest {
            requested: rate,
            rate,
            capacity,
            capped_by: None,
        }
    }

    /// [`WorkloadSpec::estimate`] of `topic_details`: the same model, topic by topic and
    /// subscription by subscription.
    fn estimate_topics(&self, topics: &[TopicDetail]) -> Estimate {
        let seconds = self.simulated_minutes() * 60.0;
        let minutes = seconds / 60.0;
        let (mut messages, mut entries, mut events) = (0.0, 0.0, 0.0);
        for (i, t) in topics.iter().enumerate() {
            let rate = t.producer_rate;
            let flow = self.partition_flow(rate, t.message_size);
            let (n, entries_per_s) = (flow.messages_per_entry, flow.entries_per_s);
            messages += rate * seconds;
            entries += entries_per_s * seconds;
            events += entries_per_s * seconds + self.stored_events(i, t, seconds);
            let cursors = t
                .subscriptions
                .iter()
                .filter(|s| !s.consumer_rates.is_empty())
                .count();
            events += self.lifecycle_events(cursors as f64, seconds, |s| flow.behind_reads(s));
            for s in &t.subscriptions {
                if s.consumer_rates.is_empty() {
                    // It opens, and never reads.
                    events += if s.start_seconds < seconds { 1.0 } else { 0.0 };
                    continue;
                }
                let single = s.subscription_type.has_single_active_consumer();
                // What the subscription processes a second: its active consumer's, or all of
                // theirs; relative to the publish rate.
                let speed_rate = if single {
                    let k = exclusive::active_consumer(
                        s.subscription_type,
                        s.consumer_rates.len(),
                        super::topology::partition_index_of(&t.name),
                    );
                    s.consumer_rates[k]
                } else {
                    s.consumer_rates.iter().sum()
                };
                let speed = if rate > 0.0 { speed_rate / rate } else { 1.0 };
                let slowest = s
                    .consumer_rates
                    .iter()
                    .copied()
                    .fold(f64::INFINITY, f64::min);
                let slow = speed < 1.0 || slowest * (s.consumer_rates.len() as f64) < rate;
                let nacked = self.nacks_redelivered(s.redelivery_rate, n, seconds);
                let redelivered = dispatch::redelivered_rows(
                    s.subscription_type,
                    nacked,
                    slow,
                    s.consumer_rates.len() > 1,
                    n,
                );
                let start = s.start_seconds;
                let active = (seconds - start).max(0.0);
                if active <= 0.0 {
                    continue;
                }
                // From `start` on it catches up the backlog (all published so far) at its
                // speed, then reads at the tail; slower than the rate, it never catches up.
                let behind = start * rate;
                let catching_up = if speed < 1.0 {
                    active
                } else if behind > 0.0 {
                    if speed > 1.0 {
                        (behind / ((speed - 1.0) * rate)).min(active)
                    } else {
                        active
                    }
                } else {
                    0.0
                };
                events += flow.cursor_events(active, catching_up, speed.min(1e9), redelivered);
                events += self.seek_and_churn_events(&flow, minutes);
            }
        }
        Estimate {
            messages,
            entries,
            events,
        }
    }
}
