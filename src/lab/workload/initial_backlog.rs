//! Entries already in storage when the trace starts (a `topic_details` topic's
//! `backlog_entries`), and the subscriptions that read them.
//!
//! A broker that takes over a topic opens its managed ledger and finds the ledgers still holding
//! entries (`ManagedLedgerImpl.initialize`); the trace says so with `load` rows, one per ledger,
//! and the adds that follow go to a new ledger (`initializeBookKeeper` always creates one). The
//! stored entries are numbered 0..`entries` in ledgers of `managed_ledger_max_entries_per_ledger`
//! entries each; a subscription with a `backlog_entries` opens that far behind their end and
//! reads at its consumers' rates, the others open at the end.
//!
//! Nothing here costs work or memory per stored entry: their positions and messages follow from
//! arithmetic ([`StoredPrefix`]), and `load` rows are written only for the ledgers a reader can
//! reach within the run (its consumers' rates times the duration, plus what their receiver
//! queues prefetch, from where it opens). The ledgers nobody can reach are in storage too (they
//! count in retention's size) but get no row: no read of the trace touches them. A seek that would
//! go back before the first ledger its subscription can reach lands on that ledger's first entry.

use super::events::Row;
use super::generate::Sim;
use super::retention::Closed;
use super::spec::StoredBacklog;
use super::topology::SubStart;
use crate::cache::position::Position;

/// The most entries `backlog_entries` may give (2^50): positions, messages and bytes stay within
/// 64 bits whatever the other values.
pub const MAX_STORED_ENTRIES: u64 = 1 << 50;

/// The stored entries of a partition: entry `idx` < `entries` is entry `idx % per_ledger` of
/// ledger `first_ledger + idx / per_ledger` and holds `messages_per_entry` messages.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct StoredPrefix {
    pub(super) entries: u64,
    pub(super) messages_per_entry: u64,
    pub(super) per_ledger: u64,
    pub(super) first_ledger: i64,
}

impl StoredPrefix {
    #[inline]
    pub(super) fn holds(&self, idx: u64) -> bool {
        idx < self.entries
    }

    pub(super) fn position(&self, idx: u64) -> Position {
        Position::new(
            self.first_ledger + (idx / self.per_ledger) as i64,
            (idx % self.per_ledger) as i64,
        )
    }

    /// The first entry after the stored ledger holding `idx`.
    pub(super) fn ledger_end(&self, idx: u64) -> u64 {
        (idx / self.per_ledger + 1)
            .saturating_mul(self.per_ledger)
            .min(self.entries)
    }

    pub(super) fn ledgers(&self) -> u64 {
        self.entries.div_ceil(self.per_ledger)
    }

    pub(super) fn messages(&self) -> u64 {
        self.entries * self.messages_per_entry
    }
}

/// Where a subscription with a stored backlog opens: `backlog` entries before the stored end.
pub(super) fn stored_start(stored: &StoredBacklog, sub: usize) -> Option<SubStart> {
    stored
        .subscriptions
        .iter()
        .find(|&&(s, _)| s == sub)
        .map(|&(_, backlog)| SubStart::Stored(stored.entries - backlog))
}

impl Sim {
    /// Partition `p` starts with `stored`'s entries in storage: its counters and message index
    /// continue after them, and its ledgers after theirs.
    pub(super) fn store_backlog(&mut self, p: usize, stored: &StoredBacklog) {
        let per_ledger = u64::from(self.spec.max_entries_per_ledger).max(1);
        let part = &mut self.parts[p];
        let prefix = StoredPrefix {
            entries: stored.entries,
            messages_per_entry: u64::from(stored.messages_per_entry),
            per_ledger,
            first_ledger: part.ledgers.base_id,
        };
        part.ledgers.prefix = prefix;
        part.ledgers.first_id = prefix.first_ledger + prefix.ledgers() as i64;
        part.ledgers.starts = [prefix.entries].into();
        part.first_msg.prefix = prefix;
        part.first_msg.base = prefix.entries;
        part.published = prefix.entries;
        part.messages_published = prefix.messages();
        part.bytes_published = prefix.messages() * part.message_size;
        for s in 0..part.subs.len() {
            let sub = &mut part.subs[s];
            let at = match sub.start {
                SubStart::Stored(at) => at,
                // Opens at the end: nothing stored is its to read.
                SubStart::Tail => prefix.entries,
                SubStart::AtFirst(_) | SubStart::CatchUp(_) => continue,
            };
            sub.read_idx = at;
            sub.rewind_to = at;
            sub.acked_upto = at.checked_sub(1);
        }
    }

    /// The first entry subscription `s` can reach in partition `p`'s stored ledgers (0 without
    /// any): the first entry of the ledger it opens in.
    pub(super) fn stored_floor(&self, p: usize, s: usize) -> u64 {
        let prefix = self.parts[p].ledgers.prefix;
        if prefix.entries == 0 {
            return 0;
        }
        match self.parts[p].subs[s].start {
            SubStart::Stored(at) => at / prefix.per_ledger * prefix.per_ledger,
            SubStart::Tail => prefix.entries,
            SubStart::AtFirst(_) | SubStart::CatchUp(_) => 0,
        }
    }

    /// The stored entries [from, to) of partition `p` that its subscriptions can reach in the run.
    fn reachable(&self, p: usize) -> Vec<(u64, u64)> {
        let part = &self.parts[p];
        let prefix = part.ledgers.prefix;
        let run_us = self.end_us as f64;
        let mut windows: Vec<(u64, u64)> = (0..part.subs.len())
            .filter_map(|s| {
                let sub = &part.subs[s];
                let from = self.stored_floor(p, s);
                if from >= prefix.entries {
                    return None;
                }
                // Messages processed, plus each consumer's prefetch: at least that many entries
                // (an entry holds one message or more) from where it opens.
                let speed: f64 = sub.consumers.iter().map(|c| c.speed).sum();
                let prefetch = (u64::from(self.spec.receiver_queue_size)
                    + u64::from(self.spec.read_batch_size))
                .saturating_mul(sub.consumers.len() as u64);
                let start = match sub.start {
                    SubStart::Stored(at) => at,
                    _ => 0,
                };
                // Saturating: a huge rate or duration reaches the end of what is stored.
                let reach = ((speed * run_us).ceil() as u64).saturating_add(prefetch);
                Some((from, start.saturating_add(reach).max(start + 1)))
            })
            .map(|(from, to)| (from, prefix.ledger_end(to.min(prefix.entries) - 1)))
            .collect();
        windows.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(windows.len());
        for (from, to) in windows {
            match merged.last_mut() {
                Some(last) if from <= last.1 => last.1 = last.1.max(to),
                _ => merged.push((from, to)),
            }
        }
        merged
    }

    /// Writes partition `p`'s `load` rows at time 0 (one per stored ledger a subscription can
    /// reach) and hands every stored ledger to retention, which may trim them.
    pub(super) fn write_loads(&mut self, p: usize) {
        let prefix = self.parts[p].ledgers.prefix;
        if prefix.entries == 0 {
            return;
        }
        let entry_bytes = prefix.messages_per_entry * self.parts[p].message_size;
        let size = entry_bytes.min(i32::MAX as u64) as i32;
        let mut next = 0u64;
        let mut runs = Vec::new();
        // Ledgers from `from` (a ledger's first entry) to `to` (one's end or the stored end).
        let run = |from: u64, to: u64, written: bool, runs: &mut Vec<Closed>| {
            let per = prefix.per_ledger;
            let full_to = to - (to % per);
            if full_to > from {
                runs.push(Closed {
                    first_id: prefix.position(from).ledger_id,
                    count: (full_to - from) / per,
                    first_end: from + per,
                    entries_each: per,
                    bytes_each: per * entry_bytes,
                    closed_us: 0,
                    written,
                });
            }
            if to > full_to.max(from) {
                let from = full_to.max(from);
                runs.push(Closed {
                    first_id: prefix.position(from).ledger_id,
                    count: 1,
                    first_end: to,
                    entries_each: to - from,
                    bytes_each: (to - from) * entry_bytes,
                    closed_us: 0,
                    written,
                });
            }
        };
        for (from, to) in self.reachable(p) {
            run(next, from, false, &mut runs);
            run(from, to, true, &mut runs);
            next = to;
        }
        run(next, prefix.entries, false, &mut runs);
        for r in runs.iter().filter(|r| r.written) {
            for k in 0..r.count {
                let first = r.first_end - r.entries_each + k * r.entries_each;
                let row = Row {
                    count: r.entries_each.min(i32::MAX as u64) as i32,
                    size,
                    ..Row::new("load", None, Some(first))
                };
                self.emit(0, p, row);
            }
        }
        self.parts[p].retention.closed.extend(runs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_positions_follow_from_arithmetic() {
        let prefix = StoredPrefix {
            entries: 250,
            messages_per_entry: 3,
            per_ledger: 100,
            first_ledger: 7,
        };
        assert_eq!(prefix.position(0), Position::new(7, 0));
        assert_eq!(prefix.position(199), Position::new(8, 99));
        assert_eq!(prefix.position(249), Position::new(9, 49));
        assert_eq!(prefix.ledger_end(120), 200);
        assert_eq!(prefix.ledger_end(249), 250);
        assert_eq!((prefix.ledgers(), prefix.messages()), (3, 750));
    }
}
