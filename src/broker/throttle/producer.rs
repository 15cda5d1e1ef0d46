//! The client side of PIP-385: a producer that pauses itself when told to, defers sends while
//! throttled, reports a throttled timeout as such, and counts its throttling; and a partitioned
//! producer whose round robin skips throttled partitions.

use super::protocol::{CommandThrottleProducer, CommandThrottleProducerReceipt, ThrottlingReason};
use crate::cache::fast_hash::FastMap;
use crate::error::{Error, Result};
use std::collections::VecDeque;

/// What happened to a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// Written to the connection now.
    Sent,
    /// Queued: it goes out when the throttle ends, at this time.
    Deferred { until_ns: u64 },
}

/// A send that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFailure {
    /// The send timed out while the producer was throttled: the broker's reason, not a plain timeout.
    Throttled {
        sequence: u64,
        reason: ThrottlingReason,
    },
    TimedOut {
        sequence: u64,
    },
}

#[derive(Debug)]
pub struct Producer {
    topic: String,
    producer_id: u64,
    send_timeout_ns: u64,
    throttled_until_ns: u64,
    reason: Option<ThrottlingReason>,
    /// The reason of the latest throttle, kept after it ends so a timeout can still name it.
    last_reason: Option<(ThrottlingReason, u64)>,
    next_sequence: u64,
    /// (sequence, enqueued at) of sends not yet acknowledged.
    pending: VecDeque<(u64, u64)>,
    /// `throttled_times{reason, topic}`: milliseconds throttled, per reason.
    throttled_ms: FastMap<ThrottlingReason, u64>,
}

impl Producer {
    pub fn new(topic: &str, producer_id: u64, send_timeout_ms: u64) -> Result<Self> {
        if send_timeout_ms == 0 {
            return Err(Error::invalid("send_timeout_ms", "must be at least 1"));
        }
        Ok(Producer {
            topic: topic.to_string(),
            producer_id,
            // Saturating: a timeout past u64 nanoseconds (584 years) is forever.
            send_timeout_ns: send_timeout_ms.saturating_mul(1_000_000),
            throttled_until_ns: 0,
            reason: None,
            last_reason: None,
            next_sequence: 0,
            pending: VecDeque::new(),
            throttled_ms: FastMap::default(),
        })
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn producer_id(&self) -> u64 {
        self.producer_id
    }

    /// Handles the broker's command: pauses, counts, and returns the receipt to send back.
    pub fn on_throttle(
        &mut self,
        now_ns: u64,
        cmd: &CommandThrottleProducer,
    ) -> Result<CommandThrottleProducerReceipt> {
        if cmd.producer_id != self.producer_id {
            return Err(Error::invalid(
                "producer_id",
                format!(
                    "command for producer {} sent to producer {}",
                    cmd.producer_id, self.producer_id
                ),
            ));
        }
        let reason = cmd.reason()?;
        // The pause is the broker's wire value: a pause past the end of u64 nanoseconds (Java's
        // Long.MAX_VALUE ms for "until told otherwise") saturates to forever instead of wrapping
        // round to a time already past, which would throttle nothing.
        let until = now_ns.saturating_add(cmd.pause_for_millis.saturating_mul(1_000_000));
        self.throttled_until_ns = self.throttled_until_ns.max(until);
        self.reason = Some(reason);
        self.last_reason = Some((reason, now_ns));
        let ms = self.throttled_ms.entry(reason).or_default();
        *ms = ms.saturating_add(cmd.pause_for_millis);
        Ok(CommandThrottleProducerReceipt {
            request_id: cmd.request_id,
        })
    }

    /// Whether the producer is throttled at `now_ns` (cleared lazily once the pause has passed).
    pub fn is_throttled(&mut self, now_ns: u64) -> bool {
        if self.reason.is_some() && now_ns >= self.throttled_until_ns {
            self.reason = None;
        }
        self.reason.is_some()
    }

    /// When the current throttle ends (meaningful while [`Self::is_throttled`]).
    pub fn throttled_until_ns(&self) -> u64 {
        self.throttled_until_ns
    }

    pub fn throttle_reason(&mut self, now_ns: u64) -> Option<ThrottlingReason> {
        self.is_throttled(now_ns);
        self.reason
    }

    /// Sends a message: now, or deferred until the throttle ends. Returns its sequence and outcome.
    pub fn send(&mut self, now_ns: u64) -> (u64, SendOutcome) {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.pending.push_back((sequence, now_ns));
        let outcome = if self.is_throttled(now_ns) {
            SendOutcome::Deferred {
                until_ns: self.throttled_until_ns,
            }
        } else {
            SendOutcome::Sent
        };
        (sequence, outcome)
    }

    /// The broker acknowledged everything up to `sequence`.
    pub fn acknowledge(&mut self, sequence: u64) {
        while self.pending.front().is_some_and(|(s, _)| *s <= sequence) {
            self.pending.pop_front();
        }
    }

    /// Sends that timed out by `now_ns`: a timeout during (or right after) a throttle fails with the
    /// throttling reason instead of a plain timeout.
    pub fn expire(&mut self, now_ns: u64) -> Vec<SendFailure> {
        let mut failed = Vec::new();
        while let Some(&(sequence, at)) = self.pending.front() {
            let deadline = at.saturating_add(self.send_timeout_ns);
            if now_ns < deadline {
                break;
            }
            self.pending.pop_front();
            let throttled_meanwhile = self
                .last_reason
                .filter(|(_, since)| *since <= deadline && self.throttled_until_ns > at);
            failed.push(match throttled_meanwhile {
                Some((reason, _)) => SendFailure::Throttled { sequence, reason },
                None => SendFailure::TimedOut { sequence },
            });
        }
        failed
    }

    /// `throttled_times{reason, topic}`: milliseconds throttled per reason.
    pub fn throttled_times(&self) -> Vec<(ThrottlingReason, &str, u64)> {
        let mut v: Vec<_> = self
            .throttled_ms
            .iter()
            .map(|(r, ms)| (*r, self.topic.as_str(), *ms))
            .collect();
        v.sort();
        v
    }
}

/// The most partitions a [`PartitionedProducer`] takes. Each is a producer made up front, and
/// choosing a partition may look at every one, so the count bounds memory and the work per
/// message; a count from a caller must not decide them alone (10^8 asked for 2.4 GB and aborted).
/// Pulsar's own topics rarely have more than a few thousand partitions.
pub const MAX_PARTITIONS: u32 = 100_000;

/// A producer over a partitioned topic: round robin that skips throttled partitions.
#[derive(Debug)]
pub struct PartitionedProducer {
    partitions: Vec<Producer>,
    next: usize,
}

impl PartitionedProducer {
    pub fn new(
        topic: &str,
        partitions: u32,
        first_producer_id: u64,
        send_timeout_ms: u64,
    ) -> Result<Self> {
        if partitions == 0 {
            return Err(Error::invalid("partitions", "must be at least 1"));
        }
        if partitions > MAX_PARTITIONS {
            return Err(Error::invalid(
                "partitions",
                format!(
                    "at most {MAX_PARTITIONS} (each is a producer of its own), got {partitions}"
                ),
            ));
        }
        if first_producer_id
            .checked_add(u64::from(partitions - 1))
            .is_none()
        {
            return Err(Error::invalid(
                "first_producer_id",
                format!("{first_producer_id} leaves no room for {partitions} producer ids"),
            ));
        }
        let partitions = (0..partitions)
            .map(|p| {
                Producer::new(
                    &format!("{topic}-partition-{p}"),
                    first_producer_id + u64::from(p),
                    send_timeout_ms,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PartitionedProducer {
            partitions,
            next: 0,
        })
    }

    pub fn partition(&mut self, p: usize) -> Option<&mut Producer> {
        self.partitions.get_mut(p)
    }

    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// True if any partition is throttled.
    pub fn is_throttled(&mut self, now_ns: u64) -> bool {
        self.partitions.iter_mut().any(|p| p.is_throttled(now_ns))
    }

    /// The partition the next message goes to: the next one in turn that is not throttled (or the
    /// next one in turn when all are).
    pub fn choose_partition(&mut self, now_ns: u64) -> usize {
        let n = self.partitions.len();
        let start = self.next;
        let chosen = (0..n)
            .map(|k| (start + k) % n)
            .find(|&p| !self.partitions[p].is_throttled(now_ns))
            .unwrap_or(start % n);
        self.next = (chosen + 1) % n;
        chosen
    }

    /// Sends to the chosen partition; returns (partition, sequence, outcome).
    pub fn send(&mut self, now_ns: u64) -> (usize, u64, SendOutcome) {
        let p = self.choose_partition(now_ns);
        let (seq, outcome) = self.partitions[p].send(now_ns);
        (p, seq, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_counts_and_producer_ids_are_bounded_before_anything_is_made() {
        let too_many = PartitionedProducer::new("t", MAX_PARTITIONS + 1, 0, 1000).unwrap_err();
        assert!(too_many.to_string().contains("partitions"), "{too_many}");
        let ids = PartitionedProducer::new("t", 3, u64::MAX - 1, 1000).unwrap_err();
        assert!(ids.to_string().contains("first_producer_id"), "{ids}");
        assert_eq!(
            PartitionedProducer::new("t", 2, u64::MAX - 1, 1000)
                .unwrap()
                .len(),
            2
        );
    }
}
