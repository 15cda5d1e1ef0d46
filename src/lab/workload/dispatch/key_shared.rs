//! Key_Shared: keys to consumers by consistent hashing, entries held back in the replay queue
//! while their consumer has no permits or their key already waits there, and the look-ahead limit.

use super::Dispatcher;
use crate::cache::fast_hash::FastMap;
use crate::lab::workload::cursor::Sub;
use crate::lab::workload::events::REASON_HOLD_BACK;
use crate::lab::workload::generate::Sim;
use crate::lab::workload::selector::{sticky_key_hash, ConsistentHashRing};
use crate::lab::workload::spec::{KeyDistributor, WorkloadSpec};
use std::collections::BTreeSet;
use std::io::Write;

/// What a Key_Shared dispatcher keeps.
pub(in crate::lab::workload) struct KeySharedState {
    ring: ConsistentHashRing,
    /// The replay queue: one set per consumer (the keys it owns).
    replay: Vec<BTreeSet<u64>>,
    replay_len: usize,
    /// How many replay entries each sticky-key hash has.
    replay_hashes: FastMap<u32, u32>,
    /// Replay entries queued without their hash (negative acks), until a replay read holds them
    /// back.
    unhashed: BTreeSet<u64>,
    /// The next read skips the replay queue (looking ahead).
    skip_next_replay: bool,
}

impl KeySharedState {
    /// Consumers named `consumer-<workload-wide index>` on the consistent-hashing ring.
    pub(super) fn new(spec: &WorkloadSpec, consumers: usize, first_consumer: u64) -> Self {
        let mut ring = ConsistentHashRing::new(spec.key_shared_replica_points);
        for c in 0..consumers {
            ring.add_consumer(c, &format!("consumer-{}", first_consumer + c as u64));
        }
        KeySharedState {
            ring,
            replay: vec![BTreeSet::new(); consumers.max(1)],
            replay_len: 0,
            replay_hashes: FastMap::default(),
            unhashed: BTreeSet::new(),
            skip_next_replay: false,
        }
    }

    /// Adds entry `idx` (of sticky-key `hash`, owned by consumer `bucket`) to the replay queue;
    /// false if it was there already (see [`Sim::add_to_replay`]).
    pub(super) fn add(&mut self, idx: u64, hash: u32, bucket: usize, with_hash: bool) -> bool {
        if !with_hash {
            if self.replay[bucket].contains(&idx) || !self.unhashed.insert(idx) {
                return false;
            }
            self.replay_len += 1;
            return true;
        }
        let moved = self.unhashed.remove(&idx);
        if !self.replay[bucket].insert(idx) {
            return false;
        }
        *self.replay_hashes.entry(hash).or_insert(0) += 1;
        if moved {
            return false;
        }
        self.replay_len += 1;
        true
    }

    pub(super) fn remove(&mut self, idx: u64, hash: u32, bucket: usize) {
        if self.unhashed.remove(&idx) {
            self.replay_len -= 1;
            return;
        }
        if !self.replay[bucket].remove(&idx) {
            return;
        }
        self.replay_len -= 1;
        if let Some(n) = self.replay_hashes.get_mut(&hash) {
            *n -= 1;
            if *n == 0 {
                self.replay_hashes.remove(&hash);
            }
        }
    }

    pub(super) fn clear_replay(&mut self) {
        self.replay.iter_mut().for_each(BTreeSet::clear);
        self.replay_len = 0;
        self.replay_hashes.clear();
        self.unhashed.clear();
        self.skip_next_replay = false;
    }

    pub(super) fn lowest_held(&self) -> Option<u64> {
        self.replay
            .iter()
            .filter_map(|r| r.first().copied())
            .chain(self.unhashed.first().copied())
            .min()
    }
}

/// Share of the entries read that a Key_Shared subscription holds back in its replay queue and
/// sends again, more when some consumers are `slow`.
fn held_back_share(slow: bool) -> f64 {
    if slow {
        0.2
    } else {
        0.03
    }
}

/// The estimate's rows an entry read adds as it comes back (`nacked`: the share negatively
/// acknowledged and redelivered, plus the hold-back share): a `redeliver` and a `replay` row each.
pub(super) fn redelivered_rows(nacked: f64, slow: bool) -> f64 {
    2.0 * (nacked + held_back_share(slow))
}

/// Entries the replay queue holds when the consumers fall `behind` entries behind: normal reads
/// stop at the look-ahead limit (at least Pulsar's unacked-message fallback).
pub(super) fn replay_held(spec: &WorkloadSpec, behind: f64) -> f64 {
    behind.min(spec.key_shared_look_ahead_per_subscription.max(200_000) as f64)
}

/// Bytes of the consistent-hashing rings of `consumers` consumers (a point is a hash and a
/// consumer).
pub(in crate::lab::workload) fn ring_bytes(spec: &WorkloadSpec, consumers: f64) -> f64 {
    consumers * spec.key_shared_replica_points as f64 * 16.0
}

/// Bytes of the table of the keys' sticky-key hashes, when the simulation keeps one (see
/// `Sim::new`).
pub(in crate::lab::workload) fn key_hash_bytes(spec: &WorkloadSpec) -> Option<f64> {
    (spec.keys <= 1 << 22).then_some(spec.keys as f64 * 4.0)
}

impl Sim {
    /// The key of message `msg`, under a distributor that gives keys.
    pub(in crate::lab::workload) fn key_id(&self, msg: u64) -> usize {
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

    pub(in crate::lab::workload) fn key_hash(&self, key: usize) -> u32 {
        match self.key_hashes.get(key) {
            Some(&h) => h,
            None => key_hash_of(key),
        }
    }

    /// A Key_Shared entry's sticky-key hash (see [`Sim::entry_hash`]) and the consumer that owns
    /// it.
    pub(in crate::lab::workload) fn route(&self, p: usize, s: usize, idx: u64) -> (u32, usize) {
        let hash = self.entry_hash(p, idx);
        let owner = match &self.parts[p].subs[s].dispatcher {
            Dispatcher::KeyShared(st) => st.ring.select(hash).unwrap_or(0),
            _ => 0,
        };
        (hash, owner)
    }

    /// The sticky-key hash of entry `idx`: its first message's key (`Commands
    /// .initBatchMessageMetadata` gives a batch its first message's metadata). A message without a
    /// key is keyed by `<producer name>-<sequence id>` (`Commands.resolveStickyKey`, since Pulsar
    /// PR #23219; `NONE_KEY` only for metadata with neither), so keyless entries spread over the
    /// consumers. Each partition has one producer, whose sequence ids number its messages from 0.
    pub(in crate::lab::workload) fn entry_hash(&self, p: usize, idx: u64) -> u32 {
        let part = &self.parts[p];
        let first = part.first_message(idx);
        match self.spec.key_distributor {
            KeyDistributor::NoKey => fallback_key_hash(part.topic, first),
            _ => self.key_hash(self.key_id(first)),
        }
    }

    /// The Key_Shared look-ahead limit: entries the replay queue may hold before normal reads
    /// stop.
    pub(in crate::lab::workload) fn look_ahead_limit(&self, consumers: usize) -> u64 {
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
    pub(in crate::lab::workload) fn dispatch_key_shared(&mut self, t: u64, p: usize, s: usize) {
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
            let Sub {
                consumers,
                dispatcher: Dispatcher::KeyShared(st),
                ..
            } = &mut self.parts[p].subs[s]
            else {
                return;
            };
            let skip_replay = std::mem::take(&mut st.skip_next_replay);
            if !skip_replay && st.replay_len > 0 {
                // Each consumer's oldest entries, as many as it has permits (one an entry), and
                // the entries without a hash, then the oldest of those.
                let mut replay: Vec<u64> = Vec::new();
                for (c, set) in st.replay.iter().enumerate() {
                    let k = (consumers[c].permits.max(0) as u64).min(cap) as usize;
                    replay.extend(set.iter().take(k).copied());
                }
                replay.extend(st.unhashed.iter().take(cap as usize).copied());
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
            let replay_len = key_shared_replay_len(sub);
            if sub.waiting.is_some() || replay_len >= limit {
                return;
            }
            let n = cap.min((limit - replay_len).max(1));
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
    pub(in crate::lab::workload) fn key_shared_send(
        &mut self,
        t: u64,
        p: usize,
        s: usize,
        entries: &[u64],
        replay: bool,
        limit: u64,
    ) {
        let sub = &self.parts[p].subs[s];
        let look_ahead_allowed = key_shared_replay_len(sub) < limit;
        let mut left: Vec<i64> = sub.consumers.iter().map(|c| c.permits.max(0)).collect();
        let mut blocked: Vec<u32> = Vec::new();
        let mut dispatched = false;
        for &idx in entries {
            let (hash, c) = self.route(p, s, idx);
            let sub = &self.parts[p].subs[s];
            let send = !blocked.contains(&hash) && left[c] > 0 && (replay || !key_waits(sub, hash));
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
            if let Dispatcher::KeyShared(st) = &mut self.parts[p].subs[s].dispatcher {
                st.skip_next_replay = true;
            }
        }
    }
}

/// Entries in a Key_Shared subscription's replay queue.
fn key_shared_replay_len(sub: &Sub) -> u64 {
    match &sub.dispatcher {
        Dispatcher::KeyShared(st) => st.replay_len as u64,
        _ => 0,
    }
}

/// Whether an entry of sticky-key `hash` waits in a Key_Shared subscription's replay queue.
fn key_waits(sub: &Sub, hash: u32) -> bool {
    match &sub.dispatcher {
        Dispatcher::KeyShared(st) => st.replay_hashes.contains_key(&hash),
        _ => false,
    }
}

/// The sticky-key hash of a key id (the key `key-<id>`).
pub(in crate::lab::workload) fn key_hash_of(key: usize) -> u32 {
    sticky_key_hash(format!("key-{key}").as_bytes())
}

/// The sticky-key hash of a keyless message: `<producer name>-<sequence id>`, the producer named
/// after its partition's topic.
pub(in crate::lab::workload) fn fallback_key_hash(topic: u32, sequence_id: u64) -> u32 {
    // "producer-" (9) + a u32 (at most 10) + "-" (1) + a u64 (at most 20): 40 bytes always do.
    let mut key = [0u8; 40];
    let mut w = std::io::Cursor::new(&mut key[..]);
    let _ = write!(w, "producer-{topic}-{sequence_id}");
    let len = w.position() as usize;
    sticky_key_hash(&key[..len])
}
