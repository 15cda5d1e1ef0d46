//! Entries a cursor acknowledged one by one past its mark-delete position (Pulsar's
//! `ManagedCursorImpl.individualDeletedMessages`), and how a cursor's read passes over them.
//!
//! Kept as ranges within a ledger, so memory follows the ranges a consumer left, not the entries it
//! acknowledged: a trace row may acknowledge a whole stretch at once.

use super::layout::Layout;
use crate::position::Position;
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
                };
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

/// The runs a cursor's sequential read of `n` entries from `from` reads, as Pulsar reads past
/// individually acknowledged entries (`ManagedLedgerImpl.internalReadFromLedger`'s skip condition,
/// `OpReadEntry.checkReadCompletion`): in a window of the entries still wanted, within one ledger,
/// only the first run of unacknowledged ones is read; a window wholly acknowledged moves the read
/// position past the range it ends in (`ManagedCursorImpl.getNextAvailablePosition`); then the next
/// window, until `n` entries are read or there are no more. A run a gap splits (positions never
/// written) stays one run per side. `runs_from(p, k, out)` appends the runs of up to `k` existing
/// entries from `p` on.
///
/// Appends the runs to `out` and returns where the read leaves the cursor when its last step
/// skipped a window (past the last run read otherwise: `None`).
pub(crate) fn unacked_runs(
    acked: &AckedRanges,
    from: Position,
    n: u64,
    layout: &Layout,
    mut runs_from: impl FnMut(Position, u64, &mut Vec<Run>),
    out: &mut Vec<Run>,
) -> Option<Position> {
    if acked.is_empty() {
        runs_from(from, n, out);
        return None;
    }
    let mut window = Vec::new();
    let (mut at, mut left, mut skipped_to) = (from, n, None);
    while left > 0 {
        window.clear();
        runs_from(at, left, &mut window);
        let Some(&(ledger, _, _)) = window.first() else {
            break;
        };
        window.retain(|r| r.0 == ledger);
        let mut found = None;
        for (i, &(_, first, last)) in window.iter().enumerate() {
            let start = match acked.last_of_range_at(Position::new(ledger, first)) {
                Some(end) => end.saturating_add(1),
                None => first,
            };
            if start <= last {
                found = Some((i, start));
                break;
            }
        }
        let Some((i, start)) = found else {
            let (_, _, last) = *window.last().expect("not empty");
            let end = acked
                .last_of_range_at(Position::new(ledger, last))
                .unwrap_or(last);
            at = layout.next_after(Position::new(ledger, end));
            skipped_to = Some(at);
            continue;
        };
        let stop = acked.next_start_after(Position::new(ledger, start));
        let mut read_last = start;
        for (j, &(_, first, last)) in window.iter().enumerate().skip(i) {
            let first = if j == i { start } else { first };
            if first >= stop {
                break;
            }
            let last = last.min(stop - 1);
            out.push((ledger, first, last));
            left -= (last - first) as u64 + 1;
            read_last = last;
            if last == stop - 1 {
                break;
            }
        }
        at = layout.next_after(Position::new(ledger, read_last));
        skipped_to = None;
    }
    skipped_to
}

#[cfg(test)]
mod tests {
    use super::super::layout::LedgerInfo;
    use super::*;

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
        let to = unacked_runs(
            a,
            from,
            n,
            l,
            |p, k, o| o.extend(l.runs_from(p, k)),
            &mut out,
        );
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
