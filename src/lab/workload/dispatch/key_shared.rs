//! Key_Shared: keys to consumers by consistent hashing, entries held back in the replay queue
//! while their consumer has no permits or their key already waits there, and the look-ahead limit.

use crate::lab::workload::events::REASON_HOLD_BACK;
use crate::lab::workload::generate::Sim;
use crate::lab::workload::selector::sticky_key_hash;
use crate::lab::workload::spec::KeyDistributor;
use std::io::Write;

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
        let owner = self.parts[p].subs[s].ring.select(hash).unwrap_or(0);
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
            let sub = &mut self.parts[p].subs[s];
            let skip_replay = std::mem::take(&mut sub.skip_next_replay);
            if !skip_replay && sub.replay_len > 0 {
                // Each consumer's oldest entries, as many as it has permits (one an entry), and
                // the entries without a hash, then the oldest of those.
                let mut replay: Vec<u64> = Vec::new();
                for (c, set) in sub.replay.iter().enumerate() {
                    let k = (sub.consumers[c].permits.max(0) as u64).min(cap) as usize;
                    replay.extend(set.iter().take(k).copied());
                }
                replay.extend(sub.unhashed.iter().take(cap as usize).copied());
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
            if sub.waiting.is_some() || sub.replay_len as u64 >= limit {
                return;
            }
            let n = cap.min((limit - sub.replay_len as u64).max(1));
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
        let look_ahead_allowed = (sub.replay_len as u64) < limit;
        let mut left: Vec<i64> = sub.consumers.iter().map(|c| c.permits.max(0)).collect();
        let mut blocked: Vec<u32> = Vec::new();
        let mut dispatched = false;
        for &idx in entries {
            let (hash, c) = self.route(p, s, idx);
            let sub = &self.parts[p].subs[s];
            let send = !blocked.contains(&hash)
                && left[c] > 0
                && (replay || !sub.replay_hashes.contains_key(&hash));
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
            self.parts[p].subs[s].skip_next_replay = true;
        }
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
