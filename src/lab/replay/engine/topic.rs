//! A topic's ledgers as the replay knows them: the entries the trace added and the sizes a cursor
//! may still read.

use super::cursors::{Cursor, CursorTable};
use crate::broker::ledger::cursor::read_position_after_mark_delete;
use crate::broker::positions::acked::{EntryRuns, Run};
use crate::broker::positions::layout::Layout;
use crate::broker::read_flow::{CursorActivity, ReadFlow};
use crate::cache::fast_hash::FastSet;
use crate::cache::position::Position;
use std::collections::{BTreeMap, VecDeque};

/// The entries the trace added to one ledger, and the sizes of those a cursor may still read.
///
/// Both are kept as runs, never entry by entry across a gap: a trace that adds entry 0 and then
/// entry 2^40 holds two runs, not 2^40 slots. Only added entries exist for reads (see
/// [`Topic::runs_from`]).
#[derive(Debug, Default)]
pub(super) struct LedgerEntries {
    /// First entry -> one past the last, of each run of added entries (one run unless the trace
    /// skipped entries).
    added: BTreeMap<i64, i64>,
    /// Sizes still known, as runs (first entry, sizes from it on), in entry order.
    sizes: VecDeque<(i64, VecDeque<u32>)>,
    total_bytes: u64,
    total_entries: u64,
}

impl LedgerEntries {
    /// A ledger a `load` found in storage: entries `first..end`, each of the mean size `size`.
    /// One run, whatever its length: the sizes are not listed (each reads as the mean).
    pub(super) fn loaded(first: i64, end: i64, size: u32) -> Self {
        let entries = u64::try_from(end.saturating_sub(first)).unwrap_or(0);
        let mut added = BTreeMap::new();
        if entries > 0 {
            added.insert(first, end);
        }
        LedgerEntries {
            added,
            sizes: VecDeque::new(),
            total_bytes: entries.saturating_mul(u64::from(size)),
            total_entries: entries,
        }
    }

    /// Records an add; `entry` is below `i64::MAX` (the decoder checks it), so `entry + 1` fits.
    pub(super) fn add(&mut self, entry: i64, size: u32) {
        let end = entry + 1;
        // The common add extends the last run by one: one map update instead of a search, a
        // removal and an insertion.
        if let Some(mut last) = self.added.last_entry() {
            if *last.get() == entry {
                *last.get_mut() = end;
                self.add_size(entry, size);
                return;
            }
        }
        let before = self
            .added
            .range(..=entry)
            .next_back()
            .map(|(&s, &e)| (s, e));
        match before {
            Some((_, e)) if e > entry => {} // added before (a re-add changes nothing)
            _ => {
                let start = match before {
                    Some((s, e)) if e == entry => s,
                    _ => entry,
                };
                let end = match self.added.remove(&end) {
                    Some(next_end) => next_end,
                    None => end,
                };
                self.added.insert(start, end);
            }
        }
        self.add_size(entry, size);
    }

    /// Records an added entry's size (see [`LedgerEntries::add`]).
    pub(super) fn add_size(&mut self, entry: i64, size: u32) {
        let known_end = self.sizes.back().map(|(f, s)| f + s.len() as i64);
        match (known_end, self.sizes.back_mut()) {
            (Some(e), Some((_, s))) if e == entry => s.push_back(size),
            // Behind the known sizes: a re-add, or an add into an earlier gap; the size stays what
            // it was (or the mean).
            (Some(e), _) if e > entry => {}
            _ => self.sizes.push_back((entry, VecDeque::from([size]))),
        }
        self.total_bytes += u64::from(size);
        self.total_entries += 1;
    }

    /// The entry's size, or the ledger's mean size once it is forgotten (or was never added).
    pub(super) fn size(&self, entry: i64) -> u32 {
        let i = self.sizes.partition_point(|(f, _)| *f <= entry);
        if let Some((first, s)) = i.checked_sub(1).and_then(|i| self.sizes.get(i)) {
            if let Some(&size) = usize::try_from(entry - first).ok().and_then(|k| s.get(k)) {
                return size;
            }
        }
        u32::try_from(
            self.total_bytes
                .checked_div(self.total_entries)
                .unwrap_or(0),
        )
        .unwrap_or(u32::MAX)
    }

    pub(super) fn forget_before(&mut self, entry: i64) {
        while let Some((first, s)) = self.sizes.front_mut() {
            let end = *first + s.len() as i64;
            if end <= entry {
                self.sizes.pop_front();
                continue;
            }
            if *first < entry {
                s.drain(..(entry - *first) as usize);
                *first = entry;
            }
            break;
        }
    }

    pub(super) fn contains(&self, entry: i64) -> bool {
        self.added
            .range(..=entry)
            .next_back()
            .is_some_and(|(_, &e)| entry < e)
    }

    /// Where the search for added entries at or after `from` starts: the start of the run holding
    /// `from`, else `from` itself.
    pub(super) fn run_start(&self, from: i64) -> i64 {
        self.added
            .range(..=from)
            .next_back()
            .filter(|(_, &e)| from < e)
            .map(|(&s, _)| s)
            .unwrap_or(from)
    }

    /// Runs of added entries from `from` on, as (first, last) pairs, up to `*left` entries in all
    /// (decremented by what is taken).
    pub(super) fn take(
        &self,
        ledger: i64,
        from: i64,
        left: &mut u64,
        out: &mut Vec<(i64, i64, i64)>,
    ) {
        let mut push = |s: i64, e: i64, left: &mut u64| {
            let take = u64::try_from(e - s).unwrap_or(0).min(*left);
            if take > 0 {
                out.push((ledger, s, s + take as i64 - 1));
                *left -= take;
            }
        };
        // A tailing read starts in the last run (most ledgers have only one): no search needed.
        if let Some((&s, &e)) = self.added.last_key_value() {
            if s <= from {
                push(from, e, left);
                return;
            }
        }
        let first_run = self.run_start(from);
        for (&s, &e) in self.added.range(first_run..) {
            if *left == 0 {
                break;
            }
            push(s.max(from), e, left);
        }
    }

    /// Runs of added entries with ids in `first..=last`, up to `left` entries (decremented).
    pub(super) fn take_within(
        &self,
        ledger: i64,
        first: i64,
        last: i64,
        left: &mut u64,
        out: &mut Vec<Run>,
    ) {
        for (&s, &e) in self.added.range(self.run_start(first)..) {
            if *left == 0 || s > last {
                break;
            }
            let (lo, hi) = (s.max(first), (e - 1).min(last));
            if lo <= hi {
                let take = u64::try_from(hi - lo).unwrap_or(u64::MAX).min(*left - 1);
                out.push((ledger, lo, lo + take as i64));
                *left -= take + 1;
            }
        }
    }

    /// The first added entry at or after `entry`.
    pub(super) fn first_at_or_after(&self, entry: i64) -> Option<i64> {
        if self.contains(entry) {
            return Some(entry);
        }
        self.added.range(entry..).next().map(|(&s, _)| s)
    }

    /// The last added entry.
    pub(super) fn last(&self) -> Option<i64> {
        self.added.last_key_value().map(|(_, &e)| e - 1)
    }

    /// Added entries at or after `from`.
    pub(super) fn count_from(&self, from: i64) -> u64 {
        let first_run = self.run_start(from);
        self.added
            .range(first_run..)
            .map(|(&s, &e)| u64::try_from(e - s.max(from)).unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }
}

impl EntryRuns for Topic {
    fn runs_from(&self, from: Position, n: u64, out: &mut Vec<Run>) {
        Topic::runs_from(self, from, n, out);
    }

    fn runs_within(&self, ledger: i64, first: i64, last: i64, n: u64, out: &mut Vec<Run>) {
        if let Some(l) = self.ledger(ledger) {
            l.take_within(ledger, first, last, &mut { n }, out);
        }
    }

    fn first_at_or_after(&self, p: Position) -> Option<Position> {
        self.entries.range(p.ledger_id..).find_map(|(&ledger, l)| {
            let from = if ledger == p.ledger_id {
                p.entry_id
            } else {
                i64::MIN
            };
            l.first_at_or_after(from).map(|e| Position::new(ledger, e))
        })
    }

    fn last_of(&self, ledger: i64) -> Option<i64> {
        self.ledger(ledger)?.last()
    }
}

pub(super) struct Topic {
    pub(super) layout: Layout,
    /// Per ledger of the layout: what the trace added to it.
    pub(super) entries: BTreeMap<i64, LedgerEntries>,
    /// The ids of its cursors (in [`CursorTable`]). A hash set for the order it lists them in,
    /// the order ledger deletion moves them in: the order they had as the keys of the map that
    /// held them, which Pulsar's container's counts depend on.
    pub(super) cursor_ids: FastSet<u32>,
    pub(super) activity: CursorActivity,
    /// The broker has the topic's managed ledger open: since a `load`, an `add` or an `open` of
    /// it, until an `unload`.
    pub(super) open: bool,
    /// An `unload` closed it since it was made: its next load starts its cursor state afresh.
    pub(super) unloaded: bool,
}

impl Topic {
    /// A topic the trace first names at `now` (when the broker loads it, for the lab).
    pub(super) fn new(flow: &ReadFlow, now: u64) -> Self {
        Topic {
            layout: Layout::default(),
            entries: BTreeMap::new(),
            cursor_ids: FastSet::default(),
            activity: CursorActivity::new(flow.cursor_tracking(), now),
            open: false,
            unloaded: false,
        }
    }

    /// Entries from the cursor's read position to the end, less those it acknowledged on their
    /// own (`ManagedCursorImpl.getNumberOfEntries`); the read position is the broker's, which a
    /// read under way has not moved yet.
    pub(super) fn backlog(&self, c: &Cursor) -> u64 {
        let from = self.layout.normalize(c.broker_read_position());
        let added =
            |ledger: i64, first: i64| self.entries.get(&ledger).map_or(0, |l| l.count_from(first));
        let all = self
            .entries
            .range(from.ledger_id..)
            .map(|(&ledger, l)| {
                l.count_from(if ledger == from.ledger_id {
                    from.entry_id
                } else {
                    i64::MIN
                })
            })
            .fold(0u64, u64::saturating_add);
        let acked = c
            .acked
            .iter()
            .filter(|&(ledger, _, last)| Position::new(ledger, last) >= from)
            .map(|(ledger, first, last)| {
                let first = if ledger == from.ledger_id {
                    first.max(from.entry_id)
                } else {
                    first
                };
                added(ledger, first).saturating_sub(added(ledger, last.saturating_add(1)))
            })
            .fold(0u64, u64::saturating_add);
        all.saturating_sub(acked)
    }

    /// Up to `n` added entries from `from` on, as (ledger, first, last) runs. Positions the trace
    /// never added (a gap, or entries before a ledger's first add) are not entries: a read passes
    /// over them as Pulsar's read past the last confirmed entry finds nothing, so a read's work is
    /// bounded by what the trace added, never by the positions or the count it names.
    /// Appends them to `out` (a buffer the caller reuses).
    pub(super) fn runs_from(&self, from: Position, n: u64, out: &mut Vec<(i64, i64, i64)>) {
        let from = self.layout.normalize(from);
        let mut left = n;
        // A tailing read is in the topic's newest ledger: nothing after it, so no range search.
        if let Some(l) = self.newest(from.ledger_id) {
            l.take(from.ledger_id, from.entry_id, &mut left, out);
            return;
        }
        for (&ledger, l) in self.entries.range(from.ledger_id..) {
            if left == 0 {
                break;
            }
            let start = if ledger == from.ledger_id {
                from.entry_id
            } else {
                i64::MIN
            };
            l.take(ledger, start, &mut left, out);
        }
    }

    /// Whether the trace added the entry at `p` (and its ledger was not deleted).
    pub(super) fn contains(&self, p: Position) -> bool {
        self.entries
            .get(&p.ledger_id)
            .is_some_and(|l| l.contains(p.entry_id))
    }

    /// Puts a cursor where the read flow tracks it, if it is active; returns whether the slowest
    /// active position changed.
    pub(super) fn track(&mut self, flow: &ReadFlow, cursor: u32, c: &mut Cursor) -> bool {
        // An acknowledgement past where the broker has the read position moves it on at once
        // (`ManagedCursorImpl.setAcknowledgedPosition`), a read under way or not.
        if let Some(h) = &mut c.hold {
            h.at = read_position_after_mark_delete(h.at, c.mark_delete, &self.layout);
        }
        let at = flow.tracked_position(c.broker_read_position(), c.mark_delete);
        self.activity.moved(cursor, at)
    }

    /// The entries of `ledger` (for their sizes: a run of reads looks the ledger up once).
    pub(super) fn ledger(&self, ledger: i64) -> Option<&LedgerEntries> {
        self.newest(ledger).or_else(|| self.entries.get(&ledger))
    }

    /// Ledger `ledger` if it is the topic's newest, where adds and nearly all reads go: found
    /// without a search of the tree.
    pub(super) fn newest(&self, ledger: i64) -> Option<&LedgerEntries> {
        self.entries
            .last_key_value()
            .filter(|(&last, _)| last == ledger)
            .map(|(_, l)| l)
    }

    /// Drops sizes no cursor will read again (unless it seeks back).
    pub(super) fn forget_read_entries(&mut self, topic: u32, cursors: &CursorTable) {
        let Some(low) = self
            .cursor_ids
            .iter()
            .filter_map(|&id| cursors.get(topic, id))
            .map(|c| {
                c.replay
                    .iter()
                    .next()
                    .copied()
                    .unwrap_or(c.read_position)
                    .min(c.read_position)
            })
            .min()
        else {
            return;
        };
        for (&ledger, entries) in &mut self.entries {
            if ledger < low.ledger_id {
                entries.forget_before(i64::MAX);
            } else if ledger == low.ledger_id {
                entries.forget_before(low.entry_id);
            }
        }
    }
}
