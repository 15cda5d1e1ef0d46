//! Publishes through the broker's throttling, in one of three modes, to measure what each topic's
//! publishers wait: `pause-connection` (Pulsar today: a breach stops reading the whole
//! connection), `throttle-producer` (PIP-385: the breaching producer is told to pause and
//! answers), `off` (no limits). The noisy-neighbour effect is the wait of topics under their quota
//! that share a connection with one over it.

use super::exchange::{BrokerAction, ServerConnection};
use super::limiter::PublishRateLimiter;
use super::producer::Producer;
use super::protocol::ThrottlingReason;
use crate::cache::fast_hash::FastMap;
use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottlingMode {
    PauseConnection,
    ThrottleProducer,
    Off,
}

impl std::str::FromStr for ThrottlingMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "pause-connection" => Ok(ThrottlingMode::PauseConnection),
            "throttle-producer" => Ok(ThrottlingMode::ThrottleProducer),
            "off" => Ok(ThrottlingMode::Off),
            other => Err(Error::invalid(
                "publish_throttling",
                format!("{other:?} is not pause-connection, throttle-producer or off"),
            )),
        }
    }
}

/// One publish as requested by a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publish<'a> {
    pub ts_ns: u64,
    pub topic: &'a str,
    pub producer: u64,
    pub connection: u64,
    /// Messages in the entry (a producer's batch): what message-rate quotas are charged.
    pub messages: u32,
    pub bytes: u64,
}

/// What publishers waited, per topic, and how often each reason throttled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PublishDelays {
    /// topic -> sorted delays in nanoseconds.
    pub delays: BTreeMap<String, Vec<u64>>,
    pub throttles: BTreeMap<&'static str, u64>,
    /// topic -> how many of its own publishes breached a quota.
    pub throttles_by_topic: BTreeMap<String, u64>,
    pub connection_pauses: u64,
    pub commands_sent: u64,
    /// When each publish reached the broker (same order as the input).
    pub accepted_at_ns: Vec<u64>,
}

impl PublishDelays {
    /// The `q` quantile (0..=1) of a topic's delays, in nanoseconds.
    pub fn quantile(&self, topic: &str, q: f64) -> Option<u64> {
        let d = self.delays.get(topic)?;
        if d.is_empty() {
            return None;
        }
        let i = ((d.len() - 1) as f64 * q).round() as usize;
        Some(d[i])
    }
}

/// A publish read and not yet persisted: (persisted at, order read, connection, bytes).
type Pending = Reverse<(u64, u64, u64, u64)>;

/// When `connection` recovers from a connection-level breach: the persist time of the pending
/// publish after which it is within its limits again (now, if it is already; never, if it is not
/// even when all are persisted).
fn recovery_time(
    limiter: &PublishRateLimiter,
    pending: &BinaryHeap<Pending>,
    connection: u64,
    now: u64,
) -> u64 {
    let mut in_order: Vec<(u64, u64, u64, u64)> = pending.iter().map(|Reverse(p)| *p).collect();
    in_order.sort_unstable();
    match limiter.recovers_after(connection, in_order.iter().map(|p| (p.2, p.3))) {
        Some(0) => now,
        Some(i) => in_order[i - 1].0.max(now),
        None => u64::MAX,
    }
}

/// Replays publishes (in request-time order) through `limiter` under `mode`. The client acks a
/// throttle command at once (a receipt in time) when the mode is `throttle-producer`. A publish
/// stays pending (counted by the connection limits) for the limiter's persist latency after it
/// is read.
pub fn simulate(
    publishes: &[Publish<'_>],
    mut limiter: PublishRateLimiter,
    mode: ThrottlingMode,
) -> PublishDelays {
    let mut out = PublishDelays::default();
    let mut connections: FastMap<u64, (ServerConnection, u64)> = FastMap::default();
    let mut producers: FastMap<u64, Producer> = FastMap::default();
    let mut pending: BinaryHeap<Pending> = BinaryHeap::new();
    let latency = limiter.persist_latency_ns();
    for (order, p) in publishes.iter().enumerate() {
        let (conn, conn_ready) = connections.entry(p.connection).or_insert_with(|| {
            (
                ServerConnection::new(mode == ThrottlingMode::ThrottleProducer, 100),
                0,
            )
        });
        let producer = producers
            .entry(p.producer)
            .or_insert_with(|| Producer::new(p.topic, p.producer, 30_000).expect("valid timeout"));
        // The message waits for its producer's own pause, then for the connection to be read.
        let mut at = p.ts_ns;
        if producer.is_throttled(at) {
            at = at.max(producer.throttled_until_ns());
        }
        at = at.max(*conn_ready);
        for late in conn.poll(at) {
            if let BrokerAction::PauseConnection { until_ns, .. } = late {
                at = at.max(until_ns.unwrap_or(at));
            }
        }
        out.accepted_at_ns.push(at);
        out.delays
            .entry(p.topic.to_string())
            .or_default()
            .push(at - p.ts_ns);
        if mode == ThrottlingMode::Off {
            continue;
        }
        while let Some(Reverse((persisted_at, _, c, bytes))) = pending.peek().copied() {
            if persisted_at > at {
                break;
            }
            pending.pop();
            limiter.on_publish_persisted(c, bytes);
        }
        let breach = limiter.on_publish(at, p.topic, p.connection, p.messages, p.bytes);
        pending.push(Reverse((
            at.saturating_add(latency),
            order as u64,
            p.connection,
            p.bytes,
        )));
        let Some(breach) = breach else { continue };
        *out.throttles.entry(breach.reason.name()).or_default() += 1;
        *out.throttles_by_topic
            .entry(p.topic.to_string())
            .or_default() += 1;
        let mut paused = Vec::new();
        for action in conn.on_breach(at, p.producer, breach) {
            match action {
                BrokerAction::Send(cmd) => {
                    out.commands_sent += 1;
                    if let Ok(receipt) = producer.on_throttle(at, &cmd) {
                        conn.on_receipt(at, receipt.request_id);
                    }
                }
                BrokerAction::PauseConnection { until_ns, reason } => {
                    out.connection_pauses += 1;
                    match until_ns {
                        Some(until) => *conn_ready = (*conn_ready).max(until),
                        None => {
                            // A connection-level pause lasts until the pending publishes drain
                            // to the resume threshold; a publish buffer breach pauses every
                            // connection on the IO thread.
                            conn.resume();
                            paused = if reason == ThrottlingReason::MessageBufferSizeBreach {
                                limiter.connections_on_io_thread_of(p.connection).to_vec()
                            } else {
                                vec![p.connection]
                            };
                        }
                    }
                }
            }
        }
        for c in paused {
            let until = recovery_time(&limiter, &pending, c, at);
            if let Some((_, ready)) = connections.get_mut(&c) {
                *ready = (*ready).max(until);
            }
        }
    }
    for d in out.delays.values_mut() {
        d.sort_unstable();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::throttle::limiter::Rate;

    /// Two topics on one connection: `hot` publishes 200 msg/s against a 100 msg/s quota, `cold`
    /// 50 msg/s with none, for 10 seconds.
    fn two_topics(mode: ThrottlingMode) -> PublishDelays {
        let mut publishes = Vec::new();
        for i in 0..2000u64 {
            publishes.push(Publish {
                ts_ns: i * 5_000_000,
                topic: "hot",
                producer: 1,
                connection: 1,
                messages: 1,
                bytes: 100,
            });
        }
        for i in 0..500u64 {
            publishes.push(Publish {
                ts_ns: i * 20_000_000 + 1,
                topic: "cold",
                producer: 2,
                connection: 1,
                messages: 1,
                bytes: 100,
            });
        }
        publishes.sort_by_key(|p| p.ts_ns);
        let mut limiter = PublishRateLimiter::new();
        limiter.set_topic_rate("hot", Rate::new(Some(100.0), None).unwrap());
        simulate(&publishes, limiter, mode)
    }

    #[test]
    fn only_the_breaching_producer_waits_when_it_is_told() {
        let told = two_topics(ThrottlingMode::ThrottleProducer);
        let paused = two_topics(ThrottlingMode::PauseConnection);
        let off = two_topics(ThrottlingMode::Off);
        assert_eq!(
            told.quantile("cold", 0.99),
            Some(0),
            "throttle-producer: the neighbour never waits"
        );
        assert!(
            paused.quantile("cold", 0.99).unwrap() > 100_000_000,
            "pause-connection: the neighbour waits with it"
        );
        assert!(
            told.quantile("hot", 0.99).unwrap() > 100_000_000,
            "the hot topic is held to its quota"
        );
        assert_eq!(off.quantile("hot", 1.0), Some(0));
        assert!(told.throttles["TopicProduceQuotaExceeded"] > 0 && told.connection_pauses == 0);
        assert!(paused.connection_pauses > 0 && paused.commands_sent == 0);
    }
}

#[cfg(test)]
mod connection_limit_tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// `n` publishes a millisecond apart on each of `connections` (producer = connection).
    fn every_ms(connections: &[(u64, u64)], n: u64) -> Vec<Publish<'static>> {
        let mut v: Vec<_> = (0..n)
            .flat_map(|i| {
                connections.iter().map(move |&(c, bytes)| Publish {
                    ts_ns: i * MS + c,
                    topic: "t",
                    producer: c,
                    connection: c,
                    messages: 1,
                    bytes,
                })
            })
            .collect();
        v.sort_by_key(|p| p.ts_ns);
        v
    }

    #[test]
    fn the_pending_limit_fires_when_publishes_stay_pending() {
        let publishes = every_ms(&[(1, 100)], 100);
        let mut limiter = PublishRateLimiter::new();
        limiter.set_connection_limits(Some(5), None, None).unwrap();
        let at_once = simulate(&publishes, limiter.clone(), ThrottlingMode::PauseConnection);
        assert!(at_once.throttles.is_empty(), "persisted at once: 1 pending");
        // Persisted 10 ms after they are read: the 5th pending publish (read at 4 ms) pauses the
        // connection until the 3rd is persisted (12 ms), leaving 2 = 5 / 2 pending.
        limiter.set_persist_latency_ns(10 * MS);
        let slow = simulate(&publishes, limiter, ThrottlingMode::PauseConnection);
        assert!(slow.throttles["ConnectionPendingMessagesBreach"] > 0);
        assert_eq!(slow.accepted_at_ns[4], 4 * MS + 1);
        assert_eq!(slow.accepted_at_ns[5], 12 * MS + 1);
        assert!(slow.quantile("t", 1.0).unwrap() > 0);
    }

    #[test]
    fn a_publish_buffer_breach_pauses_the_connections_of_its_io_thread() {
        // Connections 1 and 3 share IO thread 0 of 2; 2 is on thread 1. Each thread's share is
        // 8000 bytes; at 10 ms from read to persisted, connection 1 keeps over 10,000 bytes
        // pending; 3 publishes little but waits with it; 2 keeps about 1,000 and never waits.
        let publishes = every_ms(&[(1, 1000), (2, 100), (3, 10)], 200);
        let mut limiter = PublishRateLimiter::new();
        limiter
            .set_connection_limits(None, Some(16_000), None)
            .unwrap();
        limiter.set_num_io_threads(2).unwrap();
        limiter.set_persist_latency_ns(10 * MS);
        let out = simulate(&publishes, limiter, ThrottlingMode::PauseConnection);
        assert!(out.throttles["MessageBufferSizeBreach"] > 0);
        let waited = |c: u64| {
            publishes
                .iter()
                .zip(&out.accepted_at_ns)
                .filter(|(p, _)| p.connection == c)
                .map(|(p, at)| at - p.ts_ns)
                .max()
                .unwrap()
        };
        assert!(
            waited(1) > 0 && waited(3) > 0,
            "thread 0's connections wait"
        );
        assert_eq!(waited(2), 0, "thread 1 is within its share");
    }
}
