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
use super::spec::{StoredBacklog, TopicDetail, WorkloadSpec};
use super::topology::SubStart;
use crate::cache::position::Position;

/// The most entries `backlog_entries` may give (2^40): positions, messages and bytes stay within
/// 64 bits whatever the other values, and a stretch no reader reaches takes at most 512 rows.
pub const MAX_STORED_ENTRIES: u64 = 1 << 40;

/// A stretch of stored ledgers alike: from entry `start`, ledgers of `per_ledger` entries (the
/// last one may hold fewer), the first being `first_ledger`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Segment {
    pub(super) start: u64,
    pub(super) per_ledger: u64,
    pub(super) first_ledger: i64,
}

/// The stored entries of a partition, 0..`entries`, each holding `messages_per_entry` messages,
/// in `segments` (in order, the first from 0): stretches a subscription can reach are in ledgers
/// of `managed_ledger_max_entries_per_ledger` (`per_ledger`) entries, the ones between them are
/// one ledger each (in pieces of at most `i32::MAX` entries, a `load` row's `count`): no read goes
/// there, so how they are split changes nothing but the rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct StoredPrefix {
    pub(super) entries: u64,
    pub(super) messages_per_entry: u64,
    pub(super) per_ledger: u64,
    pub(super) segments: Vec<Segment>,
}

impl StoredPrefix {
    #[inline]
    pub(super) fn holds(&self, idx: u64) -> bool {
        idx < self.entries
    }

    /// The segment holding `idx` and where it ends.
    fn segment(&self, idx: u64) -> (Segment, u64) {
        let i = self.segments.partition_point(|g| g.start <= idx) - 1;
        let end = self.segments.get(i + 1).map_or(self.entries, |g| g.start);
        (self.segments[i], end)
    }

    pub(super) fn position(&self, idx: u64) -> Position {
        let (g, _) = self.segment(idx);
        let within = idx - g.start;
        Position::new(
            g.first_ledger + (within / g.per_ledger) as i64,
            (within % g.per_ledger) as i64,
        )
    }

    /// The first entry after the stored ledger holding `idx`.
    pub(super) fn ledger_end(&self, idx: u64) -> u64 {
        let (g, end) = self.segment(idx);
        let k = (idx - g.start) / g.per_ledger + 1;
        g.start
            .saturating_add(k.saturating_mul(g.per_ledger))
            .min(end)
    }

    /// The ledger after the last stored one.
    pub(super) fn next_ledger(&self) -> i64 {
        match self.segments.last() {
            Some(g) => g.first_ledger + (self.entries - g.start).div_ceil(g.per_ledger) as i64,
            None => 0,
        }
    }

    pub(super) fn messages(&self) -> u64 {
        self.entries * self.messages_per_entry
    }

    /// Each stored ledger: (its id, its first entry, its entries).
    pub(super) fn ledgers(&self) -> impl Iterator<Item = (i64, u64, u64)> + '_ {
        self.segments.iter().enumerate().flat_map(move |(i, g)| {
            let end = self.segments.get(i + 1).map_or(self.entries, |n| n.start);
            (0..(end - g.start).div_ceil(g.per_ledger)).map(move |k| {
                let from = g.start + k * g.per_ledger;
                (
                    g.first_ledger + k as i64,
                    from,
                    g.per_ledger.min(end - from),
                )
            })
        })
    }

    /// The segments for stretches `windows` (sorted, apart, on ledger boundaries of
    /// `per_ledger`) reached by subscriptions, the rest in between as one ledger each.
    fn laid_out(entries: u64, per_ledger: u64, first_ledger: i64, windows: &[(u64, u64)]) -> Self {
        let mut segments = Vec::new();
        let mut next_id = first_ledger;
        let mut at = 0u64;
        let mut push = |from: u64, to: u64, per: u64, segments: &mut Vec<Segment>| {
            if to > from {
                segments.push(Segment {
                    start: from,
                    per_ledger: per,
                    first_ledger: next_id,
                });
                next_id += (to - from).div_ceil(per) as i64;
            }
        };
        let gap_piece = i32::MAX as u64;
        for &(from, to) in windows {
            push(at, from, gap_piece.min(from - at).max(1), &mut segments);
            push(from, to, per_ledger, &mut segments);
            at = to;
        }
        push(
            at,
            entries,
            gap_piece.min(entries - at).max(1),
            &mut segments,
        );
        StoredPrefix {
            entries,
            messages_per_entry: 1,
            per_ledger,
            segments,
        }
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

impl WorkloadSpec {
    /// The rows topic `topic` (`t`) adds over `seconds` for its stored backlog: a `load` row a
    /// ledger read and one for each stretch between, and the reads of the subscriptions behind in
    /// it (half a receiver queue a read, as a cursor behind reads), at their consumers' rates.
    pub(super) fn stored_events(&self, topic: usize, t: &TopicDetail, seconds: f64) -> f64 {
        let Some(stored) = self.stored_backlogs.iter().find(|b| b.topic == topic) else {
            return 0.0;
        };
        let per_entry = f64::from(stored.messages_per_entry);
        let per_read = (f64::from(self.receiver_queue_size) / 2.0 / per_entry)
            .clamp(1.0, f64::from(self.read_batch_size));
        let per_ledger = f64::from(self.max_entries_per_ledger.max(1));
        let mut events = 0.0;
        for &(s, backlog) in &stored.subscriptions {
            let rate: f64 = t.subscriptions[s].consumer_rates.iter().sum();
            let read = (rate * seconds / per_entry).min(backlog as f64);
            events += read / per_read + read / per_ledger + 2.0;
        }
        events
    }
}

impl Sim {
    /// Partition `p` starts with `stored`'s entries in storage: its counters and message index
    /// continue after them, and its ledgers after theirs.
    pub(super) fn store_backlog(&mut self, p: usize, stored: &StoredBacklog) {
        let per_ledger = u64::from(self.spec.max_entries_per_ledger).max(1);
        let windows = self.reachable(p, stored.entries, per_ledger);
        let part = &mut self.parts[p];
        let prefix = StoredPrefix {
            messages_per_entry: u64::from(stored.messages_per_entry),
            ..StoredPrefix::laid_out(stored.entries, per_ledger, part.ledgers.base_id, &windows)
        };
        part.ledgers.first_id = prefix.next_ledger();
        part.ledgers.starts = [prefix.entries].into();
        part.first_msg.stored = (prefix.entries, prefix.messages_per_entry);
        part.first_msg.base = prefix.entries;
        part.published = prefix.entries;
        part.messages_published = prefix.messages();
        part.bytes_published = prefix.messages() * part.message_size;
        for sub in &mut part.subs {
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
        part.ledgers.prefix = prefix;
    }

    /// The first entry subscription `s` can reach in partition `p`'s stored ledgers (0 without
    /// any): the first entry of the ledger it opens in.
    pub(super) fn stored_floor(&self, p: usize, s: usize) -> u64 {
        let prefix = &self.parts[p].ledgers.prefix;
        if prefix.entries == 0 {
            return 0;
        }
        match self.parts[p].subs[s].start {
            SubStart::Stored(at) => at / prefix.per_ledger * prefix.per_ledger,
            SubStart::Tail => prefix.entries,
            SubStart::AtFirst(_) | SubStart::CatchUp(_) => 0,
        }
    }

    /// The stored entries [from, to) of partition `p` (of `entries` in ledgers of `per_ledger`)
    /// that its subscriptions can reach in the run, on ledger boundaries, sorted and apart.
    fn reachable(&self, p: usize, entries: u64, per_ledger: u64) -> Vec<(u64, u64)> {
        let part = &self.parts[p];
        let run_us = self.end_us as f64;
        let ledger_end = |idx: u64| {
            (idx / per_ledger + 1)
                .saturating_mul(per_ledger)
                .min(entries)
        };
        let mut windows: Vec<(u64, u64)> = part
            .subs
            .iter()
            .filter_map(|sub| {
                let start = match sub.start {
                    SubStart::Stored(at) => at,
                    SubStart::AtFirst(_) | SubStart::CatchUp(_) => 0,
                    SubStart::Tail => return None,
                };
                // Messages processed, plus each consumer's prefetch: at least that many entries
                // (an entry holds one message or more) from where it opens.
                let speed: f64 = sub.consumers.iter().map(|c| c.speed).sum();
                let prefetch = (u64::from(self.spec.receiver_queue_size)
                    + u64::from(self.spec.read_batch_size))
                .saturating_mul(sub.consumers.len() as u64);
                // Saturating: a huge rate or duration reaches the end of what is stored.
                let reach = ((speed * run_us).ceil() as u64).saturating_add(prefetch);
                let last = start.saturating_add(reach).min(entries - 1);
                Some((start / per_ledger * per_ledger, ledger_end(last)))
            })
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

    /// Writes partition `p`'s `load` rows at time 0, one per stored ledger, and hands the stored
    /// ledgers to retention, which may trim them.
    pub(super) fn write_loads(&mut self, p: usize) {
        let prefix = std::mem::take(&mut self.parts[p].ledgers.prefix);
        if prefix.entries > 0 {
            let entry_bytes = prefix.messages_per_entry * self.parts[p].message_size;
            let size = entry_bytes.min(i32::MAX as u64) as i32;
            let (broker, topic) = (self.parts[p].broker, self.parts[p].topic);
            let mut runs: Vec<Closed> = Vec::new();
            for (id, from, entries) in prefix.ledgers() {
                let row = Row {
                    count: entries as i32,
                    size,
                    // Messages in each entry, as an add's `messages` says for its one.
                    messages: Some(prefix.messages_per_entry.min(i32::MAX as u64) as i32),
                    ..Row::new("load", None, None)
                };
                self.out
                    .push(0, broker, topic, row, Some(Position::new(id, 0)));
                // Ledgers alike in a row make one run.
                match runs.last_mut() {
                    Some(r) if r.entries_each == entries && r.first_id + r.count as i64 == id => {
                        r.count += 1
                    }
                    _ => runs.push(Closed {
                        first_id: id,
                        count: 1,
                        first_end: from + entries,
                        entries_each: entries,
                        bytes_each: entries * entry_bytes,
                        closed_us: 0,
                        written: true,
                    }),
                }
            }
            self.parts[p].retention.closed.extend(runs);
        }
        self.parts[p].ledgers.prefix = prefix;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_positions_follow_from_arithmetic() {
        // Reached: entries [100, 300) in ledgers of 100; the rest one ledger each.
        let mut prefix = StoredPrefix::laid_out(450, 100, 7, &[(100, 300)]);
        prefix.messages_per_entry = 3;
        assert_eq!(prefix.position(0), Position::new(7, 0));
        assert_eq!(prefix.position(99), Position::new(7, 99));
        assert_eq!(prefix.position(199), Position::new(8, 99));
        assert_eq!(prefix.position(299), Position::new(9, 99));
        assert_eq!(prefix.position(449), Position::new(10, 149));
        assert_eq!(prefix.ledger_end(120), 200);
        assert_eq!(prefix.ledger_end(320), 450);
        assert_eq!((prefix.next_ledger(), prefix.messages()), (11, 1350));
        let ledgers: Vec<_> = prefix.ledgers().collect();
        assert_eq!(
            ledgers,
            [(7, 0, 100), (8, 100, 100), (9, 200, 100), (10, 300, 150)]
        );
        // A stretch past i32::MAX entries goes in pieces a row's count can hold.
        let huge = StoredPrefix::laid_out(1 << 40, 100, 1, &[]);
        assert_eq!(huge.ledgers().count(), 513);
        assert!(huge.ledgers().all(|(_, _, n)| i32::try_from(n).is_ok()));
    }
}
