//! Shared: entries round robin over the consumers, what none has permits for to the replay queue.

use crate::lab::workload::cursor::Sub;
use crate::lab::workload::events::REASON_OVERFLOW;
use crate::lab::workload::generate::Sim;

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
            if self.parts[p].subs[s].replay_len > 0 {
                let replay: Vec<u64> = self.parts[p].subs[s].replay[0]
                    .iter()
                    .take(to_read as usize)
                    .copied()
                    .collect();
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
    pub(in crate::lab::workload) fn next_consumer(sub: &mut Sub) -> Option<usize> {
        let n = sub.consumers.len();
        if sub.rr >= n {
            sub.rr = 0;
        }
        let c = (0..n)
            .map(|k| (sub.rr + k) % n)
            .find(|&c| sub.consumers[c].permits > 0)?;
        sub.rr = c + 1;
        Some(c)
    }

    /// Shared: hands the entries out round robin; each turn gives a consumer as many entries as
    /// its permits cover at the read's average messages per entry (at least one, at most
    /// `dispatcher_max_round_robin_batch_size`). What is left when no consumer has permits goes
    /// to the replay queue.
    pub(in crate::lab::workload) fn shared_send(&mut self, t: u64, p: usize, s: usize, entries: &[u64], replay: bool) {
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
