//! The broker's publish throttling decisions: per-topic rates (messages and bytes per second),
//! per-resource-group rates, the broker-wide rate, and the per-connection limits on pending
//! publish requests and buffered bytes. Each breach has its reason and how long the client should
//! pause (PIP-385): for topic and resource-group quotas until the quota has its debt and a small
//! target refilled (Pulsar's `AsyncTokenBucket.calculateThrottlingDuration`, see
//! [`super::token_bucket`]), 0 for the connection-level breaches (the broker pauses the
//! connection anyway).

use super::protocol::ThrottlingReason;
use super::token_bucket::{self, TokenBucket};
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;

const MAX_RATE: f64 = 9_007_199_254_740_992.0;

/// A rate in messages and bytes per second (either may be absent).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rate {
    pub messages_per_second: Option<f64>,
    pub bytes_per_second: Option<f64>,
}

impl Rate {
    pub fn new(messages_per_second: Option<f64>, bytes_per_second: Option<f64>) -> Result<Self> {
        for (name, v) in [
            ("messages_per_second", messages_per_second),
            ("bytes_per_second", bytes_per_second),
        ] {
            if let Some(v) = v {
                // Pulsar's rates are whole numbers (Java ints and longs) and its token buckets
                // count whole tokens; 2^53 keeps the value exact as a float.
                if !(v.is_finite() && v >= 1.0 && v.fract() == 0.0 && v <= MAX_RATE) {
                    return Err(Error::invalid(
                        name,
                        format!("must be a whole number from 1 to 2^53 a second, got {v}"),
                    ));
                }
            }
        }
        Ok(Rate {
            messages_per_second,
            bytes_per_second,
        })
    }
}

#[derive(Debug, Clone)]
struct Buckets {
    messages: Option<TokenBucket>,
    bytes: Option<TokenBucket>,
}

impl Buckets {
    fn new(rate: Rate, now: u64) -> Self {
        // Rate::new admits whole numbers up to 2^53 only: the casts are exact.
        Buckets {
            messages: rate
                .messages_per_second
                .map(|r| TokenBucket::new(r as u64, now)),
            bytes: rate
                .bytes_per_second
                .map(|r| TokenBucket::new(r as u64, now)),
        }
    }

    /// Charges a publish of `messages` messages (an entry: a batch counts each of its messages, as
    /// `Producer.startPublishOperation` passes its batch size down to
    /// `PublishRateLimiterImpl.handlePublishThrottling`); `Some(resume_at)` if it throttles. Both
    /// buckets are charged; the resume time is when both have their debt and target back
    /// (`PublishRateLimiterImpl.calculateThrottlingDurationNanos` takes the longer wait).
    fn charge(&mut self, now: u64, messages: u32, bytes: u64) -> Option<u64> {
        let mut throttled = false;
        for (b, n) in [
            (&mut self.messages, u64::from(messages)),
            (&mut self.bytes, bytes),
        ] {
            if let Some(b) = b {
                throttled |= !b.consume(now, n);
            }
        }
        if !throttled {
            return None;
        }
        let mut buckets: Vec<&mut TokenBucket> = [&mut self.messages, &mut self.bytes]
            .into_iter()
            .flatten()
            .collect();
        Some(token_bucket::resume_at(&mut buckets, now))
    }
}

/// A breach: why, how long the client should pause, and until when the broker holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breach {
    pub reason: ThrottlingReason,
    pub pause_for_millis: u64,
    /// When the quota allows publishing again (for connection-level breaches: when the pending
    /// publishes drain, which the caller learns through [`PublishRateLimiter::on_publish_persisted`]).
    pub resume_at_ns: Option<u64>,
}

impl Breach {
    /// A connection-level breach: no pause for the client (the broker pauses the connection), and
    /// no resume time until the pending publishes drain.
    fn connection_level(reason: ThrottlingReason) -> Self {
        Breach {
            reason,
            pause_for_millis: 0,
            resume_at_ns: None,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct ConnectionUse {
    pending: u32,
    buffered: u64,
}

/// Publish throttling state of one broker.
#[derive(Debug, Default, Clone)]
pub struct PublishRateLimiter {
    topic_rates: FastMap<String, Rate>,
    default_topic_rate: Rate,
    topics: FastMap<String, Buckets>,
    group_of: FastMap<String, String>,
    groups: FastMap<String, (Rate, Option<Buckets>)>,
    broker: Option<Buckets>,
    broker_rate: Rate,
    max_pending_per_connection: Option<u32>,
    max_publish_buffer_bytes: Option<u64>,
    connections: FastMap<u64, ConnectionUse>,
}

impl PublishRateLimiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// The rate of every topic without one of its own.
    pub fn set_default_topic_rate(&mut self, rate: Rate) {
        self.default_topic_rate = rate;
        self.topics.clear();
    }

    pub fn set_topic_rate(&mut self, topic: &str, rate: Rate) {
        self.topic_rates.insert(topic.to_string(), rate);
        self.topics.remove(topic);
    }

    /// A resource group's rate, and the topics it covers.
    pub fn set_resource_group(&mut self, group: &str, rate: Rate, topics: &[String]) {
        self.groups.insert(group.to_string(), (rate, None));
        for t in topics {
            self.group_of.insert(t.clone(), group.to_string());
        }
    }

    pub fn set_broker_rate(&mut self, rate: Rate) {
        self.broker_rate = rate;
        self.broker = None;
    }

    pub fn set_connection_limits(
        &mut self,
        max_pending_publish_requests: Option<u32>,
        max_publish_buffer_bytes: Option<u64>,
    ) -> Result<()> {
        if max_pending_publish_requests == Some(0) {
            return Err(Error::invalid(
                "max_pending_publish_requests",
                "must be at least 1",
            ));
        }
        if max_publish_buffer_bytes == Some(0) {
            return Err(Error::invalid(
                "max_publish_buffer_bytes",
                "must be at least 1",
            ));
        }
        self.max_pending_per_connection = max_pending_publish_requests;
        self.max_publish_buffer_bytes = max_publish_buffer_bytes;
        Ok(())
    }

    /// Charges a publish (one entry of `messages` messages, `bytes` long) to `topic` arriving on
    /// `connection` at `now_ns`; returns the breach it causes, the first by precedence: connection
    /// limits, broker, resource group, topic. Message quotas are charged `messages` tokens, byte
    /// quotas `bytes`; the connection limits count the entry as one pending request.
    pub fn on_publish(
        &mut self,
        now_ns: u64,
        topic: &str,
        connection: u64,
        messages: u32,
        bytes: u64,
    ) -> Option<Breach> {
        let conn = self.connections.entry(connection).or_default();
        conn.pending += 1;
        conn.buffered += bytes;
        let mut breaches = Vec::new();
        if self
            .max_pending_per_connection
            .is_some_and(|m| conn.pending > m)
        {
            breaches.push(Breach::connection_level(
                ThrottlingReason::ConnectionPendingMessagesBreach,
            ));
        }
        if self
            .max_publish_buffer_bytes
            .is_some_and(|m| conn.buffered > m)
        {
            breaches.push(Breach::connection_level(
                ThrottlingReason::MessageBufferSizeBreach,
            ));
        }
        let broker_rate = self.broker_rate;
        if let Some(at) = self
            .broker
            .get_or_insert_with(|| Buckets::new(broker_rate, now_ns))
            .charge(now_ns, messages, bytes)
        {
            breaches.push(Breach {
                reason: ThrottlingReason::BrokerProduceQuotaExceeded,
                pause_for_millis: 0,
                resume_at_ns: Some(at),
            });
        }
        if let Some(group) = self.group_of.get(topic) {
            if let Some((rate, buckets)) = self.groups.get_mut(group) {
                let rate = *rate;
                if let Some(at) = buckets
                    .get_or_insert_with(|| Buckets::new(rate, now_ns))
                    .charge(now_ns, messages, bytes)
                {
                    breaches.push(Breach {
                        reason: ThrottlingReason::ResourceGroupProduceQuotaExceeded,
                        pause_for_millis: (at - now_ns).div_ceil(1_000_000),
                        resume_at_ns: Some(at),
                    });
                }
            }
        }
        let rate = self
            .topic_rates
            .get(topic)
            .copied()
            .unwrap_or(self.default_topic_rate);
        let buckets = self
            .topics
            .entry(topic.to_string())
            .or_insert_with(|| Buckets::new(rate, now_ns));
        if let Some(at) = buckets.charge(now_ns, messages, bytes) {
            breaches.push(Breach {
                reason: ThrottlingReason::TopicProduceQuotaExceeded,
                pause_for_millis: (at - now_ns).div_ceil(1_000_000),
                resume_at_ns: Some(at),
            });
        }
        breaches.into_iter().next()
    }

    /// A publish of `bytes` on `connection` was persisted: it no longer counts as pending.
    pub fn on_publish_persisted(&mut self, connection: u64, bytes: u64) {
        if let Some(c) = self.connections.get_mut(&connection) {
            c.pending = c.pending.saturating_sub(1);
            c.buffered = c.buffered.saturating_sub(bytes);
        }
    }

    /// Whether a connection is within its limits again after a connection-level breach: Pulsar
    /// resumes once half of the pending publishes or buffered bytes have drained.
    pub fn connection_recovered(&self, connection: u64) -> bool {
        let Some(c) = self.connections.get(&connection) else {
            return true;
        };
        self.max_pending_per_connection
            .is_none_or(|m| c.pending <= m / 2)
            && self
                .max_publish_buffer_bytes
                .is_none_or(|m| c.buffered <= m / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn topic_quota_breach_pauses_until_the_debt_and_a_token_are_refilled() {
        let mut l = PublishRateLimiter::new();
        l.set_topic_rate("hot", Rate::new(Some(5.0), None).unwrap());
        let results: Vec<_> = (0..6)
            .map(|_| l.on_publish(300 * MS, "hot", 1, 1, 100))
            .collect();
        // The 5th publish takes the last token and throttles (Pulsar throttles when no token is
        // left, AsyncTokenBucket.consumeTokensAndCheckIfContainsTokens).
        assert!(results[..4].iter().all(Option::is_none));
        let b = results[4].unwrap();
        assert_eq!(b.reason, ThrottlingReason::TopicProduceQuotaExceeded);
        // The target after throttling is max(1, 5 / 100) = 1 token, 200 ms at 5/s: it resumes at
        // 0.5 s. The lab used to wait for the next second (700 ms), Pulsar's rule before PIP-322.
        assert_eq!((b.pause_for_millis, b.resume_at_ns), (200, Some(500 * MS)));
        // A caller that publishes through the pause owes one more token: 400 ms.
        let b = results[5].unwrap();
        assert_eq!((b.pause_for_millis, b.resume_at_ns), (400, Some(700 * MS)));
        assert!(
            l.on_publish(300 * MS, "cold", 1, 1, 100).is_none(),
            "other topics are not limited"
        );
    }

    #[test]
    fn a_throttle_with_both_quotas_waits_for_the_slower_one() {
        let mut l = PublishRateLimiter::new();
        l.set_topic_rate("t", Rate::new(Some(10.0), Some(1000.0)).unwrap());
        // 2 messages leave 8 tokens; 1500 bytes owe 500 and the byte target is 10 bytes: 510 ms.
        let b = l.on_publish(0, "t", 1, 2, 1500).unwrap();
        assert_eq!((b.pause_for_millis, b.resume_at_ns), (510, Some(510 * MS)));
        assert!(
            Rate::new(Some(1.5), None).is_err(),
            "Pulsar's rates are whole numbers"
        );
    }

    #[test]
    fn a_batch_is_charged_one_token_per_message() {
        let mut l = PublishRateLimiter::new();
        l.set_topic_rate("t", Rate::new(Some(10.0), None).unwrap());
        // Two entries of 4 messages fit a 10 msg/s quota; a third entry of 4 overdraws it even
        // though only 3 entries were published.
        assert!(l.on_publish(0, "t", 1, 4, 100).is_none());
        assert!(l.on_publish(0, "t", 1, 4, 100).is_none());
        assert_eq!(
            l.on_publish(0, "t", 1, 4, 100).map(|b| b.reason),
            Some(ThrottlingReason::TopicProduceQuotaExceeded)
        );
        // The byte quota is charged the entry's bytes, whatever its message count.
        let mut l = PublishRateLimiter::new();
        l.set_topic_rate("t", Rate::new(None, Some(1000.0)).unwrap());
        assert!(l.on_publish(0, "t", 1, 500, 600).is_none());
    }

    #[test]
    fn connection_limits_are_connection_level_breaches() {
        let mut l = PublishRateLimiter::new();
        l.set_connection_limits(Some(2), None).unwrap();
        assert!(l.on_publish(0, "t", 7, 1, 10).is_none());
        assert!(l.on_publish(0, "t", 7, 1, 10).is_none());
        let b = l.on_publish(0, "t", 7, 1, 10).unwrap();
        assert_eq!(
            (b.reason, b.pause_for_millis),
            (ThrottlingReason::ConnectionPendingMessagesBreach, 0)
        );
        assert!(!l.connection_recovered(7));
        l.on_publish_persisted(7, 10);
        l.on_publish_persisted(7, 10);
        assert!(l.connection_recovered(7));
        assert!(l.set_connection_limits(Some(0), None).is_err());
    }

    #[test]
    fn resource_group_and_broker_quotas() {
        let mut l = PublishRateLimiter::new();
        l.set_resource_group(
            "tenant-a",
            Rate::new(None, Some(1000.0)).unwrap(),
            &["a1".into(), "a2".into()],
        );
        assert!(l.on_publish(0, "a1", 1, 1, 600).is_none());
        let b = l.on_publish(0, "a2", 1, 1, 600).unwrap();
        assert_eq!(
            b.reason,
            ThrottlingReason::ResourceGroupProduceQuotaExceeded
        );
        l.set_broker_rate(Rate::new(Some(2.0), None).unwrap());
        assert!(l.on_publish(0, "x", 2, 1, 1).is_none());
        assert_eq!(
            l.on_publish(0, "x", 2, 1, 1).unwrap().reason,
            ThrottlingReason::BrokerProduceQuotaExceeded
        );
        assert!(Rate::new(Some(-1.0), None).is_err());
    }
}
