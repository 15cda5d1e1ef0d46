//! Shared: entries round robin over the consumers, what none has permits for to the replay queue.

use super::Dispatcher;
use crate::lab::workload::consumer::Consumer;
use crate::lab::workload::cursor::Sub;
use crate::lab::workload::events::REASON_OVERFLOW;
use crate::lab::workload::generate::Sim;
use std::collections::BTreeSet;

/// What a Shared dispatcher keeps.
#[derive(Default)]
pub(in crate::lab::workload) struct SharedState {
    /// The replay queue.
    pub(in crate::lab::workload) replay: BTreeSet<u64>,
    /// The consumer whose turn is next.
    rr: usize,
}

/// Share of the entries read that a Shared subscription sends round its replay queue again
/// (overflow), often when some consumers are `slow` (`n`: messages an entry).
fn held_back_share(slow: bool, several_consumers: bool, n: f64) -> f64 {
    if slow && several_consumers {
        // A read behind the tail asks for up to `readBatchSize` entries whatever their size
        // (permits count messages, the read counts entries), a consumer takes what its permits
        // cover (about permits / n entries) and the rest goes round the replay queue again, read
        // by read (docs/fidelity.md, Shared): the re-adds grow with n.
        (0.1 * n).max(0.2)
    } else {
        0.0
    }
}

/// The estimate's rows an entry read adds as it comes back (`nacked`: the share negatively
/// acknowledged and redelivered, plus the overflow share): a `redeliver` and a `replay` row each.
pub(super) fn redelivered_rows(nacked: f64, slow: bool, several_consumers: bool, n: f64) -> f64 {
    2.0 * (nacked + held_back_share(slow, several_consumers, n))
}

impl Sim {
    /// Shared: replay entries first, else a normal read, each of min(total permits, read batch)
    /// entries, while some consumer has permits.
    pub(in crate::lab::workload) fn dispatch_shared(&mut self, t: u64, p: usize, s: usize) {
        let batch = self.spec.read_batch_size as u64;
        loop {
            if let Some(read) = self.parked_read(t, p, s) {
                self.shared_send(t, p, s, &read, false);
                continue;
            }
            let available = self.parts[p].published - self.parts[p].subs[s].read_idx;
            let (total, first) = Self::permit_summary(&self.parts[p].subs[s]);
            let current = total.max(first);
            if current <= 0 || first <= 0 {
                return;
            }
            let to_read = (current as u64).min(batch).min(self.read_cap(p)).max(1);
            let Dispatcher::Shared(st) = &self.parts[p].subs[s].dispatcher else {
                return;
            };
            if !st.replay.is_empty() {
                let replay: Vec<u64> = st.replay.iter().take(to_read as usize).copied().collect();
                for &idx in &replay {
                    self.emit_cursor(t, p, s, "replay", Some(idx));
                }
                self.shared_send(t, p, s, &replay, true);
                continue;
            }
            if self.parts[p].subs[s].waiting.is_some() {
                return;
            }
            if available == 0 {
                self.park(t, p, s, to_read);
                return;
            }
            let read: Vec<u64> = self.read_entries(t, p, s, to_read.min(available));
            self.shared_send(t, p, s, &read, false);
        }
    }

    /// Shared: the next consumer with permits, round robin.
    fn next_consumer(sub: &mut Sub) -> Option<usize> {
        let Sub {
            consumers,
            dispatcher: Dispatcher::Shared(SharedState { rr, .. }),
            ..
        } = sub
        else {
            return None;
        };
        next_with_permits(consumers, rr)
    }

    /// Shared: hands the entries out round robin; each turn gives a consumer as many entries as
    /// its permits cover at the read's average messages per entry (at least one, at most
    /// `dispatcher_max_round_robin_batch_size`). What is left when no consumer has permits goes
    /// to the replay queue.
    pub(in crate::lab::workload) fn shared_send(
        &mut self,
        t: u64,
        p: usize,
        s: usize,
        entries: &[u64],
        replay: bool,
    ) {
        let round_robin = self.spec.dispatcher_max_round_robin_batch_size as u64;
        let mut remaining: u64 = entries.iter().map(|&i| self.parts[p].messages(i)).sum();
        let average = (remaining / entries.len().max(1) as u64).max(1);
        let mut start = 0usize;
        while start < entries.len() {
            let Some(c) = Self::next_consumer(&mut self.parts[p].subs[s]) else {
                break;
            };
            let permits = self.parts[p].subs[s].consumers[c].permits as u64;
            let most = remaining.min(permits);
            let take = most.div_ceil(average).min(round_robin).max(1) as usize;
            let end = (start + take).min(entries.len());
            for &idx in &entries[start..end] {
                if replay {
                    self.remove_from_replay(p, s, idx);
                }
                remaining -= self.parts[p].messages(idx);
                self.deliver(p, s, c, idx);
            }
            start = end;
        }
        for &idx in &entries[start..] {
            // A replayed entry is still in the replay queue; its row says it is wanted again.
            if self.add_to_replay(p, s, idx, true) || replay {
                self.emit_redeliver(t, p, s, idx, REASON_OVERFLOW);
            }
        }
    }
}

/// The consumer with permits from `rr` on, round robin; `rr` moves past it.
fn next_with_permits(consumers: &[Consumer], rr: &mut usize) -> Option<usize> {
    let n = consumers.len();
    if *rr >= n {
        *rr = 0;
    }
    let c = (0..n)
        .map(|k| (*rr + k) % n)
        .find(|&c| consumers[c].permits > 0)?;
    *rr = c + 1;
    Some(c)
}
