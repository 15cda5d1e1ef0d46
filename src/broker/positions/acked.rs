//! Entries a cursor acknowledged one by one past its mark-delete position (Pulsar's
//! `ManagedCursorImpl.individualDeletedMessages`), and how a cursor's read passes over them.
//!
//! Kept as ranges within a ledger, so memory follows the ranges a consumer left, not the entries it
//! acknowledged: a trace row may acknowledge a whole stretch at once.

use super::layout::Layout;
use crate::cache::position::Position;
use std::collections::BTreeMap;

/// A cursor read's runs, each `(ledger, first, last)` with both ends inclusive.
pub(crate) type Run = (i64, i64, i64);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AckedRanges {
    /// First position of each range -> its last entry id (same ledger). Ranges neither overlap
    /// nor touch within a ledger.
    ranges: BTreeMap<Position, i64>,
}

impl AckedRanges {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// The last entry id of the range holding `p`.
    fn last_of_range_at(&self, p: Position) -> Option<i64> {
        let (&first, &last) = self.ranges.range(..=p).next_back()?;
        (first.ledger_id == p.ledger_id && p.entry_id <= last).then_some(last)
    }

    pub fn contains(&self, p: Position) -> bool {
        self.last_of_range_at(p).is_some()
    }

    /// Acknowledges entries `first..=last` of `ledger`, joining the ranges it overlaps or touches.
    pub fn insert(&mut self, ledger: i64, first: i64, last: i64) {
        if first > last {
            return;
        }
        let (mut lo, mut hi) = (first, last);
        if let Some((&start, &end)) = self
            .ranges
            .range(..=Position::new(ledger, first))
            .next_back()
        {
            if start.ledger_id == ledger && end >= first.saturating_sub(1) {
                lo = start.entry_id;
                hi = hi.max(end);
                self.ranges.remove(&start);
            }
        }
        while let Some((&start, &end)) = self.ranges.range(Position::new(ledger, lo)..).next() {
            if start.ledger_id != ledger || start.entry_id > hi.saturating_add(1) {
                break;
            }
            hi = hi.max(end);
            self.ranges.remove(&start);
        }
        self.ranges.insert(Position::new(ledger, lo), hi);
    }

    /// Forgets every acknowledgement at or before `p` (the mark-delete position moved there).
    pub fn remove_through(&mut self, p: Position) {
        let after = match p.entry_id.checked_add(1) {
            Some(e) => Position::new(p.ledger_id, e),
            None => Position::new(p.ledger_id.saturating_add(1), i64::MIN),
        };
        let mut rest = self.ranges.split_off(&after);
        if let Some(end) = self.last_of_range_at(p) {
            if end > p.entry_id {
                rest.insert(after, end);
            }
        }
        self.ranges = rest;
    }

    /// Forgets the acknowledgements in a deleted ledger.
    pub fn remove_ledger(&mut self, ledger: i64) {
        self.ranges.retain(|p, _| p.ledger_id != ledger);
    }

    /// The last range, as `(ledger, first, last)`.
    pub fn last(&self) -> Option<Run> {
        let (p, &last) = self.ranges.last_key_value()?;
        Some((p.ledger_id, p.entry_id, last))
    }

    /// Ranges in position order, as `(ledger, first, last)`.
    pub fn iter(&self) -> impl Iterator<Item = Run> + '_ {
        self.ranges
            .iter()
            .map(|(p, &last)| (p.ledger_id, p.entry_id, last))
    }

    /// Acknowledged entries that exist in `layout` at or after `from`.
    pub fn count_from(&self, from: Position, layout: &Layout) -> u64 {
        self.iter()
            .filter_map(|(ledger, first, last)| {
                let entries = i64::try_from(layout.get(ledger)?.entries).unwrap_or(i64::MAX);
                let lo = if ledger == from.ledger_id {
                    first.max(from.entry_id)
                } else if ledger > from.ledger_id {
                    first
                } else {
                    return None;
                }
                .max(0);
                let hi = last.min(entries - 1);
                (lo <= hi).then(|| (hi - lo) as u64 + 1)
            })
            .fold(0, u64::saturating_add)
    }

    /// The mark-delete position once the ranges that follow `mark_delete` without a gap join it
    /// (`ManagedCursorImpl.setAcknowledgedPosition`, which walks connected ranges across ledgers);
    /// what it passes is forgotten.
    pub fn absorb_after(&mut self, mark_delete: Position, layout: &Layout) -> Position {
        let mut md = mark_delete;
        loop {
            let next = layout.next_after(md);
            if !layout.contains(next) {
                break;
            }
            match self.last_of_range_at(next) {
                Some(last) => {
                    let entries = layout.get(next.ledger_id).map_or(0, |l| l.entries);
                    let in_ledger = i64::try_from(entries).unwrap_or(i64::MAX) - 1;
                    md = Position::new(next.ledger_id, last.min(in_ledger));
                }
                None => break,
            }
        }
        self.remove_through(md);
        md
    }

    /// The first range start after `p` in `p`'s ledger (`i64::MAX` when none).
    fn next_start_after(&self, p: Position) -> i64 {
        match self.ranges.range(p..).next() {
            Some((start, _)) if start.ledger_id == p.ledger_id => start.entry_id,
            _ => i64::MAX,
        }
    }
}

/// Where a topic's entries are, for [`unacked_runs`]: the library's ledgers hold every id up to
/// their length, the replay lab's hold the ids a trace added (with gaps).
pub(crate) trait EntryRuns {
    /// Up to `n` entries from `from` on, across ledgers, appended to `out` as runs.
    fn runs_from(&self, from: Position, n: u64, out: &mut Vec<Run>);
    /// The entries of `ledger` with ids in `first..=last`, at most `n`, appended to `out` as runs.
    fn runs_within(&self, ledger: i64, first: i64, last: i64, n: u64, out: &mut Vec<Run>);
    /// The first entry at or after `p`, in its ledger or a later one.
    fn first_at_or_after(&self, p: Position) -> Option<Position>;
    /// The id of the last entry of `ledger`.
    fn last_of(&self, ledger: i64) -> Option<i64>;
}

impl EntryRuns for Layout {
    fn runs_from(&self, from: Position, n: u64, out: &mut Vec<Run>) {
        out.extend(Layout::runs_from(self, from, n));
    }

    fn runs_within(&self, ledger: i64, first: i64, last: i64, n: u64, out: &mut Vec<Run>) {
        let Some(end) = self.last_of(ledger) else {
            return;
        };
        let (lo, hi) = (first.max(0), last.min(end));
        if lo <= hi && n > 0 {
            let span = u64::try_from(hi - lo).unwrap_or(u64::MAX);
            let take = span.min(n - 1) as i64;
            out.push((ledger, lo, lo + take));
        }
    }

    fn first_at_or_after(&self, p: Position) -> Option<Position> {
        let q = self.normalize(p);
        self.contains(q).then_some(q)
    }

    fn last_of(&self, ledger: i64) -> Option<i64> {
        let entries = self.get(ledger)?.entries;
        i64::try_from(entries)
            .ok()?
            .checked_sub(1)
            .filter(|&e| e >= 0)
    }
}

/// The runs a cursor's sequential read of `n` entries from `from` reads, as Pulsar reads past
/// individually acknowledged entries (`ManagedLedgerImpl.internalReadFromLedger`'s skip condition,
/// `OpReadEntry.checkReadCompletion`): in a window of the entry ids still wanted, within one
/// ledger, only the first run of unacknowledged entries is read; a window wholly acknowledged
/// moves the read position past the range it ends in (`ManagedCursorImpl.getNextAvailablePosition`);
/// then the next window, until `n` entries are read or there are no more. Ids that hold no entry
/// (a trace's gaps) are passed over, and a run they split is one run per side.
///
/// The work follows the acknowledged ranges and the runs read, not the ids or the count: each
/// step jumps over a range, a gap or a whole window.
///
/// Appends the runs to `out` and returns where the read leaves the cursor when its last step
/// skipped a window (past the last run read otherwise: `None`).
pub(crate) fn unacked_runs(
    acked: &AckedRanges,
    from: Position,
    n: u64,
    layout: &Layout,
    entries: &impl EntryRuns,
    out: &mut Vec<Run>,
) -> Option<Position> {
    if acked.is_empty() {
        entries.runs_from(from, n, out);
        return None;
    }
    let (mut at, mut left, mut skipped_to) = (from, n, None);
    while left > 0 {
        let Some(start) = entries.first_at_or_after(at) else {
            break;
        };
        let ledger = start.ledger_id;
        let in_ledger = entries.last_of(ledger).unwrap_or(start.entry_id);
        let wanted = i64::try_from(left - 1).unwrap_or(i64::MAX);
        let window_end = start.entry_id.saturating_add(wanted).min(in_ledger);
        let mut x = start.entry_id;
        let mut first = None;
        while x <= window_end {
            if let Some(end) = acked.last_of_range_at(Position::new(ledger, x)) {
                x = end.saturating_add(1);
                continue;
            }
            match entries.first_at_or_after(Position::new(ledger, x)) {
                Some(p) if p.ledger_id == ledger && p.entry_id <= window_end => {
                    if acked.contains(p) {
                        x = p.entry_id;
                    } else {
                        first = Some(p.entry_id);
                        break;
                    }
                }
                _ => break,
            }
        }
        let Some(first) = first else {
            let end = acked
                .last_of_range_at(Position::new(ledger, window_end))
                .unwrap_or(window_end);
            at = layout.next_after(Position::new(ledger, end));
            skipped_to = Some(at);
            continue;
        };
        let stop = acked.next_start_after(Position::new(ledger, first));
        let run_last = window_end.min(stop.saturating_sub(1));
        let before = out.len();
        entries.runs_within(ledger, first, run_last, left, out);
        let taken: u64 = out[before..]
            .iter()
            .map(|&(_, a, b)| u64::try_from(b - a).unwrap_or(0) + 1)
            .sum();
        left = left.saturating_sub(taken.max(1));
        let read_last = out.last().map_or(first, |r| r.2);
        at = layout.next_after(Position::new(ledger, read_last));
        skipped_to = None;
    }
    skipped_to
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::positions::layout::LedgerInfo;

    fn layout(entries: &[(i64, u64)]) -> Layout {
        Layout {
            ledgers: entries
                .iter()
                .map(|&(id, entries)| LedgerInfo {
                    id,
                    entries,
                    bytes: 0,
                })
                .collect(),
        }
    }

    fn acked(ranges: &[Run]) -> AckedRanges {
        let mut a = AckedRanges::default();
        for &(l, f, t) in ranges {
            a.insert(l, f, t);
        }
        a
    }

    fn read(a: &AckedRanges, l: &Layout, from: Position, n: u64) -> (Vec<Run>, Option<Position>) {
        let mut out = Vec::new();
        let to = unacked_runs(a, from, n, l, l, &mut out);
        (out, to)
    }

    #[test]
    fn ranges_join_when_they_overlap_or_touch_within_a_ledger() {
        let a = acked(&[
            (1, 5, 7),
            (1, 9, 9),
            (1, 8, 8),
            (1, 20, 30),
            (1, 25, 40),
            (2, 0, 3),
        ]);
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![(1, 5, 9), (1, 20, 40), (2, 0, 3)]
        );
        assert!(a.contains(Position::new(1, 9)) && !a.contains(Position::new(1, 10)));
        let mut b = a.clone();
        b.remove_through(Position::new(1, 25));
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![(1, 26, 40), (2, 0, 3)]);
        b.remove_ledger(1);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![(2, 0, 3)]);
        let l = layout(&[(1, 35), (2, 10)]);
        // Counted only where entries exist.
        assert_eq!(a.count_from(Position::new(1, 6), &l), 4 + 15 + 4);
    }

    #[test]
    fn the_mark_delete_position_takes_the_ranges_that_follow_it_across_ledgers() {
        let l = layout(&[(1, 10), (2, 10)]);
        let mut a = acked(&[(1, 3, 9), (2, 0, 4), (2, 6, 6)]);
        assert_eq!(a.absorb_after(Position::new(1, 1), &l), Position::new(1, 1));
        assert_eq!(a.absorb_after(Position::new(1, 2), &l), Position::new(2, 4));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![(2, 6, 6)]);
    }

    #[test]
    fn a_read_reads_the_first_unacknowledged_run_of_each_window() {
        let l = layout(&[(1, 20), (2, 10)]);
        let a = acked(&[(1, 10, 11)]);
        // Window 10..=12: 12 alone, then 13..=14 as a read of its own (as Pulsar's windows go).
        assert_eq!(
            read(&a, &l, Position::new(1, 10), 3),
            (vec![(1, 12, 12), (1, 13, 14)], None)
        );
        // A run stops at the next acknowledged entry; the rest comes from the next window.
        let a = acked(&[(1, 3, 3), (1, 6, 19)]);
        assert_eq!(
            read(&a, &l, Position::new(1, 0), 6),
            (vec![(1, 0, 2), (1, 4, 5), (2, 0, 0)], None)
        );
        // Nothing left to read past acknowledged entries: the cursor moves past them.
        assert_eq!(
            read(&a, &l, Position::new(1, 6), 5),
            (vec![(2, 0, 4)], None)
        );
        let a = acked(&[(1, 15, 19), (2, 0, 9)]);
        assert_eq!(
            read(&a, &l, Position::new(1, 15), 100),
            (vec![], Some(Position::new(2, 10)))
        );
        // Without acknowledgements, the plain runs.
        assert_eq!(
            read(&AckedRanges::default(), &l, Position::new(1, 18), 5),
            (vec![(1, 18, 19), (2, 0, 2)], None)
        );
    }

    /// Entries at chosen ids of ledger 1 (gaps between them), counting the work asked of it.
    struct Sparse {
        ids: std::collections::BTreeSet<i64>,
        calls: std::cell::Cell<u64>,
    }

    impl EntryRuns for Sparse {
        fn runs_from(&self, _: Position, _: u64, _: &mut Vec<Run>) {
            unreachable!("only without acknowledgements")
        }

        fn runs_within(&self, ledger: i64, first: i64, last: i64, n: u64, out: &mut Vec<Run>) {
            for &e in self.ids.range(first..=last).take(n as usize) {
                self.calls.set(self.calls.get() + 1);
                out.push((ledger, e, e));
            }
        }

        fn first_at_or_after(&self, p: Position) -> Option<Position> {
            self.calls.set(self.calls.get() + 1);
            let from = if p.ledger_id < 1 {
                i64::MIN
            } else {
                p.entry_id
            };
            (p.ledger_id <= 1)
                .then(|| self.ids.range(from..).next().map(|&e| Position::new(1, e)))
                .flatten()
        }

        fn last_of(&self, _: i64) -> Option<i64> {
            self.ids.last().copied()
        }
    }

    #[test]
    fn a_reads_work_follows_ranges_gaps_and_runs_not_ids_or_counts() {
        // 100,000 entries at every third id; every other one acknowledged; one read of them all.
        let ids: std::collections::BTreeSet<i64> = (0..100_000).map(|k| 3 * k).collect();
        let l = layout(&[(1, 300_000)]);
        let mut a = AckedRanges::default();
        for &e in ids.iter().skip(1).step_by(2) {
            a.insert(1, e, e);
        }
        let sparse = Sparse {
            ids,
            calls: Default::default(),
        };
        let mut out = Vec::new();
        unacked_runs(&a, Position::new(1, 0), u64::MAX, &l, &sparse, &mut out);
        assert_eq!(out.len(), 50_000);
        assert!(out.iter().all(|&(_, f, t)| f == t && f % 6 == 0));
        assert!(
            sparse.calls.get() < 10 * 50_000,
            "{} calls",
            sparse.calls.get()
        );
        // 50,000 one-entry ledgers, all but the first acknowledged: one step a ledger.
        let many = layout(&(1..=50_000).map(|id| (id, 1)).collect::<Vec<_>>());
        let mut a = AckedRanges::default();
        for id in 2..=50_000 {
            a.insert(id, 0, 0);
        }
        let mut out = Vec::new();
        let to = unacked_runs(&a, Position::new(1, 0), u64::MAX, &many, &many, &mut out);
        assert_eq!((out, to), (vec![(1, 0, 0)], Some(Position::new(50_000, 1))));
    }

    #[test]
    fn a_windows_work_follows_its_ranges_not_its_entries() {
        // Every other entry acknowledged in a long ledger: one range lookup per entry read.
        let l = layout(&[(1, 2_000_000)]);
        let mut a = AckedRanges::default();
        for e in (1..2_000_000).step_by(2) {
            a.insert(1, e, e);
        }
        let (runs, _) = read(&a, &l, Position::new(1, 0), 1000);
        assert_eq!(runs.len(), 1000);
        assert!(runs.iter().all(|&(_, f, t)| f == t && f % 2 == 0));
        // A huge range is one entry of the set.
        let mut b = AckedRanges::default();
        b.insert(1, 0, i64::MAX - 1);
        assert_eq!(b.iter().count(), 1);
        assert_eq!(read(&b, &l, Position::new(1, 0), u64::MAX).0, vec![]);
    }
}

/// [`unacked_runs`] against Pulsar's read loop written out step by step (dense ledgers, random
/// mark-delete positions, acknowledgements, read positions and counts): the same runs, one storage
/// read each, and the same read position after the read.
#[cfg(test)]
mod against_pulsars_read_loop {
    use super::*;
    use crate::broker::positions::layout::LedgerInfo;
    use std::collections::{BTreeMap, BTreeSet};

    struct R(u64);
    impl R {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Pulsar's read loop, transcribed (ManagedLedgerImpl.asyncReadEntries/internalReadFromLedger,
    /// OpReadEntry.internalReadEntriesComplete/checkReadCompletion, getNextAvailablePosition).
    fn pulsar(
        ledgers: &BTreeMap<i64, i64>,
        md: Position,
        acked: &BTreeSet<Position>,
        read_pos: Position,
        count: u64,
    ) -> (Vec<Run>, Position, bool) {
        let current = *ledgers.keys().last().unwrap();
        let lac = ledgers
            .iter()
            .rev()
            .find(|(_, &n)| n > 0)
            .map(|(&l, &n)| Position::new(l, n - 1))
            .unwrap();
        let deleted = |p: Position| p <= md || acked.contains(&p);
        let range_end = |p: Position| -> Option<i64> {
            if !acked.contains(&p) {
                return None;
            }
            let mut e = p.entry_id;
            while acked.contains(&Position::new(p.ledger_id, e + 1)) {
                e += 1;
            }
            Some(e)
        };
        let start_op = |p: Position| -> Position {
            match ledgers.range(p.ledger_id..).next() {
                Some((&l, _)) if l != p.ledger_id => Position::new(l, 0),
                _ => p,
            }
        };
        let mut cursor_read = read_pos;
        let has_more = |cursor_read: Position| -> bool {
            if lac.entry_id != -1 {
                cursor_read <= lac
            } else {
                // getNumberOfEntries() > 0: entries in [cursor_read, (current,0)) not deleted
                ledgers.iter().any(|(&l, &n)| {
                    (0..n).any(|e| {
                        let p = Position::new(l, e);
                        p >= cursor_read && !acked.contains(&p)
                    })
                })
            }
        };
        let initial_has_more = has_more(cursor_read);
        let mut op_read = start_op(read_pos);
        let mut runs = Vec::new();
        let mut got = 0u64;
        let mut guard = 0;
        loop {
            guard += 1;
            assert!(guard < 10000);
            let lid = op_read.ledger_id;
            let next: Position;
            let info = ledgers.get(&lid).copied();
            if lid != current && (info.is_none() || info == Some(0)) {
                next = Position::new(lid + 1, 0);
            } else {
                let first = op_read.entry_id;
                let last_in = if lid == lac.ledger_id {
                    lac.entry_id
                } else if lid == current {
                    -1
                } else {
                    info.unwrap() - 1
                };
                if first > last_in {
                    if lid != current {
                        next = match ledgers.range(lid + 1..).next() {
                            Some((&l, _)) => Position::new(l, 0),
                            None => Position::new(lid + 1, 0),
                        };
                    } else {
                        next = op_read;
                    }
                } else {
                    let last = (first + (count - got) as i64 - 1).min(last_in);
                    let (mut fv, mut lv) = (-1i64, -1i64);
                    for e in first..=last {
                        if deleted(Position::new(lid, e)) {
                            if fv != -1 {
                                break;
                            }
                        } else {
                            if fv == -1 {
                                fv = e;
                            }
                            lv = e;
                        }
                    }
                    if fv == -1 {
                        let p = Position::new(lid, last);
                        next = match range_end(p) {
                            Some(end) if Position::new(lid, end + 1) > p => {
                                Position::new(lid, end + 1)
                            }
                            _ => Position::new(lid, last + 1),
                        };
                    } else {
                        runs.push((lid, fv, lv));
                        got += (lv - fv + 1) as u64;
                        next = Position::new(lid, lv + 1);
                    }
                }
            }
            // updateReadPosition
            if next > md {
                cursor_read = next;
            }
            // checkReadCompletion
            if got < count && has_more(cursor_read) {
                op_read = start_op(next);
            } else {
                break;
            }
        }
        (runs, cursor_read, initial_has_more)
    }

    #[test]
    fn unacked_runs_matches_pulsar_bruteforce() {
        let mut r = R(0x9e3779b97f4a7c15);
        let mut mismatches = 0;
        let mut pos_mismatch = 0;
        let mut shown = 0;
        let mut skipped_nohm = 0;
        let mut pos_mismatch_nonempty = 0;
        for _case in 0..300_000 {
            let nl = 1 + r.below(4) as i64;
            let mut ledgers = BTreeMap::new();
            let mut id = 1 + r.below(3) as i64;
            for _ in 0..nl {
                ledgers.insert(id, r.below(7) as i64);
                id += 1 + r.below(2) as i64;
            }
            if ledgers.values().all(|&n| n == 0) {
                continue;
            }
            let layout = Layout {
                ledgers: ledgers
                    .iter()
                    .map(|(&id, &n)| LedgerInfo {
                        id,
                        entries: n as u64,
                        bytes: 0,
                    })
                    .collect(),
            };
            let all: Vec<Position> = ledgers
                .iter()
                .flat_map(|(&l, &n)| (0..n).map(move |e| Position::new(l, e)))
                .collect();
            let mdi = r.below(all.len() as u64 + 1) as usize; // md = all[mdi-1] or before first
            let md = if mdi == 0 {
                layout.before(layout.first())
            } else {
                all[mdi - 1]
            };
            let mut acked = BTreeSet::new();
            let mut ar = AckedRanges::default();
            let dens = r.below(4);
            for p in &all[mdi..] {
                if r.below(4) < dens {
                    acked.insert(*p);
                    ar.insert(p.ledger_id, p.entry_id, p.entry_id);
                }
            }
            // read position: an existing entry after md, or the end
            let rpi = mdi + r.below((all.len() - mdi) as u64 + 1) as usize;
            let read_pos = if rpi < all.len() {
                all[rpi]
            } else {
                layout.end()
            };
            let read_pos = layout.normalize(read_pos);
            if read_pos <= md {
                continue;
            }
            let count = 1 + r.below(12);
            let (pr, ppos, hm) = pulsar(&ledgers, md, &acked, read_pos, count);
            let empty_cur = *ledgers.values().last().unwrap() == 0;
            if !hm {
                skipped_nohm += 1;
                continue;
            }
            let mut out = Vec::new();
            let skip = unacked_runs(&ar, read_pos, count, &layout, &layout, &mut out);
            let rpos = match (skip, out.last()) {
                (Some(to), _) => to,
                (None, Some(&(l, _, e))) => layout.next_after(Position::new(l, e)),
                (None, None) => read_pos,
            };
            if out != pr {
                mismatches += 1;
                if shown < 5 {
                    shown += 1;
                    eprintln!("RUNS ledgers={ledgers:?} md={md} acked={acked:?} read={read_pos} n={count}\n  pulsar={pr:?}\n  rust={out:?}");
                }
            } else if layout.normalize(ppos) != layout.normalize(rpos) {
                pos_mismatch += 1;
                if !empty_cur {
                    pos_mismatch_nonempty += 1;
                }
                if shown < 10 && !empty_cur {
                    shown += 1;
                    eprintln!("POS ledgers={ledgers:?} md={md} acked={acked:?} read={read_pos} n={count}\n  runs={pr:?} pulsar_pos={ppos} rust_pos={rpos} skip={skip:?}");
                }
            }
        }
        eprintln!("run mismatches {mismatches}, position mismatches {pos_mismatch} (non-empty current ledger: {pos_mismatch_nonempty}), no-read cases skipped {skipped_nohm}");
        // A read position can differ only while the current ledger is empty and holds the last
        // confirmed entry at (current, -1), which only a new managed ledger has.
        assert_eq!(mismatches + pos_mismatch_nonempty, 0);
    }
}
