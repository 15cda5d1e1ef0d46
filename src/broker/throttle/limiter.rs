//! The broker's publish throttling decisions: per-topic rates (messages and bytes per second),
//! per-resource-group rates, the broker-wide rate, the per-connection limit on pending publish
//! requests and the per-IO-thread share of the publish buffer. Each breach has its reason and how long the client should
//! pause (PIP-385): for topic and resource-group quotas until the quota has its debt and a small
//! target refilled (Pulsar's `AsyncTokenBucket.calculateThrottlingDuration`, see
//! [`super::token_bucket`]), 0 for the connection-level breaches (the broker pauses the
//! connection anyway).

use super::protocol::ThrottlingReason;
use super::token_bucket::{self, TokenBucket};
use crate::cache::fast_hash::FastMap;
use crate::error::{Error, Result};

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
    io_thread: usize,
}

/// Publish bytes read and not yet persisted on one IO thread, over all its connections
/// (`ServerCnx.PendingBytesPerThreadTracker`).
#[derive(Debug, Default, Clone)]
struct IoThreadUse {
    buffered: u64,
    limit_exceeded: bool,
    connections: Vec<u64>,
}

/// Pulsar's `numIOThreads` default is 2 x the broker's processors; the lab has no broker host, so
/// it takes a 4-processor broker's (set it to your brokers' for the buffer limit's share).
pub const DEFAULT_NUM_IO_THREADS: u32 = 8;

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
    /// 0 until set: [`DEFAULT_NUM_IO_THREADS`].
    num_io_threads: u32,
    connections: FastMap<u64, ConnectionUse>,
    io_threads: Vec<IoThreadUse>,
    /// How long the lab's simulation keeps a publish pending before it is persisted.
    persist_latency_ns: u64,
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

    /// The per-connection pending limit, the broker's publish buffer and (if given) the number of
    /// IO threads (see [`Self::set_num_io_threads`]). Every value is checked before any is
    /// applied: a refused call changes nothing.
    pub fn set_connection_limits(
        &mut self,
        max_pending_publish_requests: Option<u32>,
        max_publish_buffer_bytes: Option<u64>,
        num_io_threads: Option<u32>,
    ) -> Result<()> {
        at_least_one(
            "max_pending_publish_requests",
            max_pending_publish_requests.map(u64::from),
        )?;
        at_least_one("max_publish_buffer_bytes", max_publish_buffer_bytes)?;
        at_least_one("num_io_threads", num_io_threads.map(u64::from))?;
        self.max_pending_per_connection = max_pending_publish_requests;
        self.max_publish_buffer_bytes = max_publish_buffer_bytes;
        if let Some(n) = num_io_threads {
            self.set_num_io_threads(n)?;
        }
        Ok(())
    }

    /// The number of IO threads connections are spread over (`numIOThreads`); the publish buffer
    /// limit is shared out among them. Forgets which connection is on which thread.
    pub fn set_num_io_threads(&mut self, num_io_threads: u32) -> Result<()> {
        at_least_one("num_io_threads", Some(u64::from(num_io_threads)))?;
        self.num_io_threads = num_io_threads;
        self.connections.clear();
        self.io_threads.clear();
        Ok(())
    }

    pub fn num_io_threads(&self) -> u32 {
        if self.num_io_threads == 0 {
            DEFAULT_NUM_IO_THREADS
        } else {
            self.num_io_threads
        }
    }

    /// How long a publish stays pending (read, not yet persisted: the bookies' add latency) in
    /// [`super::publish_sim::simulate`]; 0, the default, persists it the moment it is read.
    pub fn set_persist_latency_ns(&mut self, latency_ns: u64) {
        self.persist_latency_ns = latency_ns;
    }

    pub fn persist_latency_ns(&self) -> u64 {
        self.persist_latency_ns
    }

    /// Each IO thread's share of the publish buffer (`maxMessagePublishBufferSizeInMB` over
    /// `numIOThreads`, rounded down, as `ServerCnx`'s constructor shares it); `None`: no limit.
    /// A share of 0 (a buffer smaller than the thread count) is no limit either, as in Pulsar.
    pub fn max_pending_bytes_per_thread(&self) -> Option<u64> {
        self.max_publish_buffer_bytes
            .map(|b| b / u64::from(self.num_io_threads()))
            .filter(|&b| b > 0)
    }

    /// The IO thread of `connection`, assigned on its first publish in turn, as Netty's event
    /// loop group hands each new channel to its next loop.
    fn connection_use(&mut self, connection: u64) -> &mut ConnectionUse {
        let threads = self.num_io_threads() as usize;
        let next = self.connections.len() % threads;
        // Threads get their state as connections reach them: memory follows the connections, not
        // the setting (which may be huge).
        if self.io_threads.len() <= next {
            self.io_threads.resize_with(next + 1, IoThreadUse::default);
        }
        let io_threads = &mut self.io_threads;
        self.connections.entry(connection).or_insert_with(|| {
            io_threads[next].connections.push(connection);
            ConnectionUse {
                pending: 0,
                io_thread: next,
            }
        })
    }

    /// The connections that share `connection`'s IO thread (itself included): a publish buffer
    /// breach pauses them all. Empty for a connection never seen.
    pub fn connections_on_io_thread_of(&self, connection: u64) -> &[u64] {
        self.connections
            .get(&connection)
            .and_then(|c| self.io_threads.get(c.io_thread))
            .map_or(&[], |t| t.connections.as_slice())
    }

    /// Charges a publish (one entry of `messages` messages, `bytes` long) to `topic` arriving on
    /// `connection` at `now_ns`; returns the breach it causes, the first by precedence: connection
    /// limits, broker, resource group, topic. Message quotas are charged `messages` tokens, byte
    /// quotas `bytes`; the connection limits count the entry as one pending request.
    ///
    /// The pending-requests limit breaches when a publish brings the connection's pending
    /// requests to the limit (`ServerCnx.increasePendingSendRequestsAndPublishBytes`:
    /// `++pendingSendRequest == maxPendingSendRequests`). The buffer limit breaches when the
    /// bytes pending on the connection's IO thread go over its share and were not over it
    /// already (`PendingBytesPerThreadTracker.incrementPublishBytes`); every connection on that
    /// thread is paused ([`Self::connections_on_io_thread_of`]).
    pub fn on_publish(
        &mut self,
        now_ns: u64,
        topic: &str,
        connection: u64,
        messages: u32,
        bytes: u64,
    ) -> Option<Breach> {
        let per_thread = self.max_pending_bytes_per_thread();
        let max_pending = self.max_pending_per_connection;
        let conn = self.connection_use(connection);
        conn.pending = conn.pending.saturating_add(1);
        let (pending, io_thread) = (conn.pending, conn.io_thread);
        let mut breaches = Vec::new();
        if max_pending == Some(pending) {
            breaches.push(Breach::connection_level(
                ThrottlingReason::ConnectionPendingMessagesBreach,
            ));
        }
        let thread = &mut self.io_threads[io_thread];
        thread.buffered = thread.buffered.saturating_add(bytes);
        if per_thread.is_some_and(|m| thread.buffered > m) && !thread.limit_exceeded {
            thread.limit_exceeded = true;
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
        let resume_bytes = self.max_pending_bytes_per_thread().map(|m| m / 2);
        let Some(c) = self.connections.get_mut(&connection) else {
            return;
        };
        c.pending = c.pending.saturating_sub(1);
        if let Some(t) = self.io_threads.get_mut(c.io_thread) {
            persisted_on_thread(&mut t.buffered, &mut t.limit_exceeded, bytes, resume_bytes);
        }
    }

    /// Whether `pending` publishes are few enough for a paused connection to resume
    /// (`ServerCnx.completedSendOperation`: `--pendingSendRequest == resumeReadsThreshold`,
    /// `maxPendingSendRequests / 2`).
    fn pending_recovered(&self, pending: u32) -> bool {
        self.max_pending_per_connection
            .is_none_or(|m| pending <= m / 2)
    }

    /// Whether a connection is within its limits again after a connection-level breach: its
    /// pending requests down to half the limit (`ServerCnx.completedSendOperation`:
    /// `--pendingSendRequest == resumeReadsThreshold`, `maxPendingSendRequests / 2`), and its IO
    /// thread's pending bytes down to half the thread's share.
    pub fn connection_recovered(&self, connection: u64) -> bool {
        let Some(c) = self.connections.get(&connection) else {
            return true;
        };
        self.pending_recovered(c.pending)
            && self
                .io_threads
                .get(c.io_thread)
                .is_none_or(|t| !t.limit_exceeded)
    }

    /// After which of `persisted` (publishes persisted in this order: connection, bytes)
    /// `connection` recovers ([`Self::connection_recovered`]): `Some(0)` if it has already,
    /// `Some(i)` after the i-th, `None` if not even after all of them. Computed on the side;
    /// nothing changes.
    pub fn recovers_after(
        &self,
        connection: u64,
        persisted: impl IntoIterator<Item = (u64, u64)>,
    ) -> Option<usize> {
        if self.connection_recovered(connection) {
            return Some(0);
        }
        let c = self.connections.get(&connection)?;
        let thread = self.io_threads.get(c.io_thread)?;
        let resume_bytes = self.max_pending_bytes_per_thread().map(|m| m / 2);
        let (mut pending, mut buffered, mut exceeded) =
            (c.pending, thread.buffered, thread.limit_exceeded);
        for (i, (conn, bytes)) in persisted.into_iter().enumerate() {
            if conn == connection {
                pending = pending.saturating_sub(1);
            }
            if self
                .connections
                .get(&conn)
                .is_some_and(|o| o.io_thread == c.io_thread)
            {
                persisted_on_thread(&mut buffered, &mut exceeded, bytes, resume_bytes);
            }
            if !exceeded && self.pending_recovered(pending) {
                return Some(i + 1);
            }
        }
        None
    }
}

/// A limit that must be at least 1 when given.
fn at_least_one(name: &'static str, value: Option<u64>) -> Result<()> {
    match value {
        Some(0) => Err(Error::invalid(name, "must be at least 1")),
        _ => Ok(()),
    }
}

/// An IO thread's pending bytes once a publish of `bytes` on it is persisted
/// (`PendingBytesPerThreadTracker.decrementPublishBytes`): its connections resume once the bytes
/// are down to `resume_bytes` (half the thread's share; `None`: no limit).
fn persisted_on_thread(
    buffered: &mut u64,
    limit_exceeded: &mut bool,
    bytes: u64,
    resume_bytes: Option<u64>,
) {
    *buffered = buffered.saturating_sub(bytes);
    if *limit_exceeded && resume_bytes.is_none_or(|r| *buffered <= r) {
        *limit_exceeded = false;
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
    fn the_pending_limit_breaches_at_the_limit_and_recovers_at_half() {
        let mut l = PublishRateLimiter::new();
        l.set_connection_limits(Some(4), None, None).unwrap();
        for _ in 0..3 {
            assert!(l.on_publish(0, "t", 7, 1, 10).is_none());
        }
        // The 4th pending request reaches the limit: ServerCnx pauses at the limit, not past it.
        let b = l.on_publish(0, "t", 7, 1, 10).unwrap();
        assert_eq!(
            (b.reason, b.pause_for_millis, b.resume_at_ns),
            (ThrottlingReason::ConnectionPendingMessagesBreach, 0, None)
        );
        assert!(!l.connection_recovered(7));
        // Two of this connection's persisted (another's in between) bring it to 4 / 2.
        assert_eq!(l.recovers_after(7, [(7, 10), (8, 10), (7, 10)]), Some(3));
        assert_eq!(l.recovers_after(7, [(7, 10)]), None);
        l.on_publish_persisted(7, 10);
        assert!(!l.connection_recovered(7));
        l.on_publish_persisted(7, 10);
        assert!(l.connection_recovered(7));
        assert_eq!(l.recovers_after(7, []), Some(0));
        assert!(l.set_connection_limits(Some(0), None, None).is_err());
    }

    #[test]
    fn the_publish_buffer_is_shared_out_per_io_thread() {
        let mut l = PublishRateLimiter::new();
        l.set_connection_limits(None, Some(4000), None).unwrap();
        l.set_num_io_threads(2).unwrap();
        assert_eq!(l.max_pending_bytes_per_thread(), Some(2000));
        // Connections 1 and 3 share thread 0 (assigned in turn), 2 is on thread 1: 2100 bytes on
        // thread 0 are over its 2000, though no connection has more than 1500.
        assert!(l.on_publish(0, "t", 1, 1, 1500).is_none());
        assert!(l.on_publish(0, "t", 2, 1, 1500).is_none());
        let b = l.on_publish(0, "t", 3, 1, 600).unwrap();
        assert_eq!(b.reason, ThrottlingReason::MessageBufferSizeBreach);
        assert_eq!(l.connections_on_io_thread_of(3), &[1, 3]);
        assert!(
            l.on_publish(0, "t", 1, 1, 100).is_none(),
            "a thread over its share breaches once"
        );
        assert!(!l.connection_recovered(1) && !l.connection_recovered(3));
        assert!(l.connection_recovered(2), "the other thread goes on");
        // Half the share, 1000 bytes, resumes the thread's connections.
        assert_eq!(l.recovers_after(3, [(2, 1500), (1, 1500)]), Some(2));
        l.on_publish_persisted(1, 1500);
        assert!(l.connection_recovered(1) && l.connection_recovered(3));
        // Pulsar's default is 2 x the processors (the lab: 8); a share of 0 bytes is no limit.
        let mut l = PublishRateLimiter::new();
        assert_eq!(l.num_io_threads(), DEFAULT_NUM_IO_THREADS);
        l.set_connection_limits(None, Some(7), None).unwrap();
        assert_eq!(l.max_pending_bytes_per_thread(), None);
        assert!(l.set_num_io_threads(0).is_err());
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
