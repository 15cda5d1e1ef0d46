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

use super::spec::{SubscriptionType, WorkloadSpec};

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

impl WorkloadSpec {
    /// Messages in an entry, on average (a producer batch).
    fn messages_per_entry(&self, rate: f64) -> f64 {
        if !self.batching_enabled {
            return 1.0;
        }
        let within = self.batching_max_publish_delay_ms / 1000.0 * rate;
        let mut n = 1.0 + (within - 0.5).max(0.0);
        if self.message_size > 0 {
            n = n.min((self.batching_max_bytes as f64 / self.message_size as f64).floor());
        }
        n.min(self.batching_max_messages as f64).max(1.0)
    }

    /// The size of the trace this spec generates, roughly.
    pub fn estimate(&self) -> Estimate {
        let seconds = self.test_duration_minutes * 60.0;
        let partitions = (self.topics as f64) * (self.partitions_per_topic as f64);
        let rate = self.producer_rate / partitions; // messages/s of a partition
        let n = self.messages_per_entry(rate);
        let entries_per_s = rate / n;
        let check = self.managed_ledger_new_entries_check_delay_ms / 1000.0;
        let tail_reads_per_s = if check > 0.0 {
            entries_per_s.min(1.0 / check)
        } else {
            entries_per_s
        };
        // A cursor behind reads what its consumer's permits allow: half a receiver queue.
        let entries_per_read =
            (self.receiver_queue_size as f64 / 2.0 / n).clamp(1.0, self.read_batch_size as f64);
        let shared = matches!(
            self.subscription_type,
            SubscriptionType::Shared | SubscriptionType::KeyShared
        );
        // Share of the entries read that come back: negative acks, and for Shared and Key_Shared
        // overflow and hold-back (often when some consumers are slow).
        let nacked = 1.0 - (1.0 - self.redelivery_rate).powf(n);
        let slow = self.slow_consumer_fraction > 0.0 || self.consumer_headroom < 1.0;
        let held_back = match self.subscription_type {
            SubscriptionType::KeyShared if slow => 0.2,
            SubscriptionType::KeyShared => 0.03,
            SubscriptionType::Shared if slow && self.consumer_per_subscription > 1 => 0.2,
            _ => 0.0,
        };
        let redelivered = if shared {
            2.0 * (nacked + held_back) // a `redeliver` and a `replay` row each
        } else {
            2.0 * nacked // a `seek` and a re-read
        };
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
            let catch_up_entries = catching_up * speed * entries_per_s;
            let tail = active - catching_up;
            let reads = catch_up_entries / entries_per_read + tail * tail_reads_per_s;
            let entries_read = catch_up_entries + tail * entries_per_s;
            1.0 + reads + active + entries_read * redelivered
        };
        let regular = if self.consumer_backlog_size_gb > 0.0 {
            let backlog = self.consumer_backlog_size_gb * 1e9
                / partitions
                / (self.message_size.max(1) as f64);
            cursor(backlog / rate, backlog, self.consumer_headroom)
        } else {
            cursor(0.0, 0.0, self.consumer_headroom)
        };
        let catch_up = cursor(
            self.catch_up_start_seconds,
            (self.catch_up_behind_seconds * rate).min(self.catch_up_start_seconds * rate),
            self.catch_up_speed,
        );
        let minutes = seconds / 60.0;
        // A seek goes back and reads again; churn closes, reopens and catches up the downtime.
        let seeks = self.seeks_per_minute
            * minutes
            * (1.0 + self.seek_back_seconds * entries_per_s / entries_per_read);
        let churn = self.churn_per_minute
            * minutes
            * (3.0 + self.churn_downtime_seconds * entries_per_s / entries_per_read);
        let per_partition = entries_per_s * seconds
            + self.subscriptions_per_topic as f64 * (regular + seeks + churn)
            + self.catch_up_readers as f64 * catch_up;
        Estimate {
            messages: self.producer_rate * seconds,
            entries: entries_per_s * seconds * partitions,
            events: per_partition * partitions,
        }
    }
}
