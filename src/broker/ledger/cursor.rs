//! One subscription's state (Pulsar's `ManagedCursorImpl`): where it reads next, what it has
//! acknowledged, what waits for redelivery, and its epoch (PIP-269).

use crate::broker::positions::acked::AckedRanges;
use crate::broker::positions::layout::Layout;
use crate::cache::position::Position;
use crate::error::{Error, Result};
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub struct CursorState {
    pub name: String,
    /// The next entry a sequential read returns.
    pub read_position: Position,
    /// Every entry up to here (inclusive) is acknowledged.
    pub mark_delete: Position,
    /// Acknowledged entries after `mark_delete`.
    pub acked: AckedRanges,
    /// Entries waiting to be read again (Shared / Key_Shared redelivery).
    pub replay: BTreeSet<Position>,
    pub active: bool,
    pub epoch: u32,
    pub epoch_increase_running: bool,
    pub epoch_increases: u64,
    /// Highest position delivered since the last epoch increase, for out-of-order accounting.
    pub delivered_high: Option<Position>,
    pub delivered: u64,
    pub out_of_order: u64,
    pub discarded_reads: u64,
}

/// A cursor's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorStats {
    pub read_position: Position,
    pub mark_delete_position: Position,
    pub backlog: u64,
    pub active: bool,
    pub epoch: u32,
    pub epoch_increase_count: u64,
    pub epoch_increase_running: bool,
    pub replay_queue: usize,
    pub delivered: u64,
    pub out_of_order_deliveries: u64,
    pub discarded_reads: u64,
}

impl CursorState {
    /// A sequential read has read through `last`: the read position moves past it (see
    /// [`read_position_after_read`]).
    pub(crate) fn read_through(&mut self, last: Position, layout: &Layout) {
        self.read_position = read_position_past(self.read_position, last, self.mark_delete, layout);
    }

    /// A cursor reading next at `read_position`, everything before it acknowledged: its
    /// mark-delete position is the entry before (`ManagedCursorImpl.initializeCursorPosition` with
    /// `ManagedLedgerImpl.getPreviousPosition`), so one opened at the end of a full ledger `L`
    /// whose successor `L+1` is still empty sits at `(L, last)` / `(L+1, 0)`.
    pub fn new(name: &str, read_position: Position, layout: &Layout, active: bool) -> Self {
        CursorState {
            name: name.to_string(),
            read_position,
            mark_delete: layout.previous(read_position),
            acked: AckedRanges::default(),
            replay: BTreeSet::new(),
            active,
            epoch: 0,
            epoch_increase_running: false,
            epoch_increases: 0,
            delivered_high: None,
            delivered: 0,
            out_of_order: 0,
            discarded_reads: 0,
        }
    }

    /// Whether a read that started at `epoch` must be discarded.
    pub fn is_epoch_outdated(&self, epoch: u32) -> bool {
        self.epoch_increase_running || epoch != self.epoch
    }

    /// Phase one of an epoch increase: marks the cursor as being modified and moves the read
    /// position. Returns the epoch before the increase.
    pub fn start_increase_epoch(&mut self, new_read_position: Position) -> Result<u32> {
        if self.epoch_increase_running {
            return Err(Error::CursorEpochConflict(self.name.clone()));
        }
        self.epoch_increase_running = true;
        self.read_position = new_read_position;
        Ok(self.epoch)
    }

    /// Phase two: bumps the epoch and ends the modification. False if none was running.
    pub fn end_increase_epoch(&mut self) -> bool {
        if !self.epoch_increase_running {
            return false;
        }
        self.epoch_increase_running = false;
        self.epoch = self.epoch.wrapping_add(1);
        self.epoch_increases += 1;
        self.delivered_high = None;
        true
    }

    /// Records a delivery; a sequential delivery below an earlier one (since the last epoch
    /// increase) is out of order. Redeliveries are below by nature and only raise the mark.
    pub fn record_delivery(&mut self, p: Position, redelivery: bool) {
        self.delivered += 1;
        match self.delivered_high {
            Some(high) if p < high => {
                if !redelivery {
                    self.out_of_order += 1;
                }
            }
            _ => self.delivered_high = Some(p),
        }
    }

    pub fn is_acked(&self, p: Position) -> bool {
        p <= self.mark_delete || self.acked.contains(p)
    }

    /// Acknowledges entries `first..=last` of `ledger` each on its own (see [`ack_individually`]).
    pub fn ack_range(&mut self, ledger: i64, first: i64, last: i64, layout: &Layout) {
        ack_individually(
            &mut self.acked,
            &mut self.replay,
            &mut self.mark_delete,
            &mut self.read_position,
            (ledger, first, last),
            layout,
        );
    }

    /// Acknowledges one entry.
    pub fn ack(&mut self, p: Position, layout: &Layout) {
        self.ack_range(p.ledger_id, p.entry_id, p.entry_id, layout);
    }

    /// Acknowledges everything up to `p` inclusive (see [`mark_delete_over`]).
    pub fn mark_delete(&mut self, p: Position, layout: &Layout) {
        mark_delete_over(
            &mut self.acked,
            &mut self.replay,
            &mut self.mark_delete,
            &mut self.read_position,
            p,
            layout,
        );
    }

    pub fn backlog(&self, layout: &Layout) -> u64 {
        match layout.last_entry() {
            Some(last) => layout
                .count_between(self.mark_delete, last)
                .saturating_sub(self.acked.count_from(self.mark_delete, layout)),
            None => 0,
        }
    }

    /// Entries from the read position to the end, less those acknowledged on their own (Pulsar's
    /// `ManagedCursorImpl.getNumberOfEntries`).
    pub fn entries_to_read(&self, layout: &Layout) -> u64 {
        match layout.last_entry() {
            Some(last) => layout
                .count_between(layout.before(self.read_position), last)
                .saturating_sub(self.acked.count_from(self.read_position, layout)),
            None => 0,
        }
    }

    /// Whether a sequential read would find an entry (`ManagedCursorImpl.hasMoreEntries`): the
    /// read position is at or before the last entry written. Like Pulsar's, it does not look at
    /// individually acknowledged entries, which [`CursorState::entries_to_read`] leaves out.
    pub fn has_more_entries(&self, layout: &Layout) -> bool {
        layout
            .last_entry()
            .is_some_and(|last| layout.normalize(self.read_position) <= last)
    }

    /// The individually acknowledged entries past the mark-delete position, as
    /// `(first, last)` positions, both inclusive, in position order.
    pub fn acked_ranges(&self) -> Vec<(Position, Position)> {
        self.acked
            .iter()
            .map(|(l, first, last)| (Position::new(l, first), Position::new(l, last)))
            .collect()
    }

    pub fn stats(&self, layout: &Layout) -> CursorStats {
        CursorStats {
            read_position: layout.normalize(self.read_position),
            mark_delete_position: self.mark_delete,
            backlog: self.backlog(layout),
            active: self.active,
            epoch: self.epoch,
            epoch_increase_count: self.epoch_increases,
            epoch_increase_running: self.epoch_increase_running,
            replay_queue: self.replay.len(),
            delivered: self.delivered,
            out_of_order_deliveries: self.out_of_order,
            discarded_reads: self.discarded_reads,
        }
    }
}

/// Acknowledges entries `first..=last` of `ledger` each on its own (Pulsar's individual
/// acknowledgement, `ManagedCursorImpl.asyncDelete`): those at or before the mark-delete position
/// are acknowledged already, those past the last entry written are refused (a broker fails the
/// call at the first of them, keeping the ones before), and the others leave the replay queue;
/// then the mark-delete position moves over what follows it ([`mark_delete_over`]). The library's
/// cursors and the replay lab's share it.
pub(crate) fn ack_individually(
    acked: &mut AckedRanges,
    replay: &mut BTreeSet<Position>,
    mark_delete: &mut Position,
    read_position: &mut Position,
    (ledger, first, last): (i64, i64, i64),
    layout: &Layout,
) {
    let Some(written) = layout.last_entry() else {
        return;
    };
    let last = match ledger.cmp(&written.ledger_id) {
        std::cmp::Ordering::Less => last,
        std::cmp::Ordering::Equal => last.min(written.entry_id),
        std::cmp::Ordering::Greater => return,
    };
    // Nothing at or before the mark-delete position, nor before a ledger's first entry.
    let first = match ledger.cmp(&mark_delete.ledger_id) {
        std::cmp::Ordering::Less => return,
        std::cmp::Ordering::Equal => first.max(mark_delete.entry_id.saturating_add(1)),
        std::cmp::Ordering::Greater => first,
    }
    .max(0);
    if first > last {
        return;
    }
    acked.insert(ledger, first, last);
    let (from, to) = (Position::new(ledger, first), Position::new(ledger, last));
    let waiting: Vec<Position> = replay.range(from..=to).copied().collect();
    for p in waiting {
        replay.remove(&p);
    }
    let md = *mark_delete;
    mark_delete_over(acked, replay, mark_delete, read_position, md, layout);
}

/// Acknowledges everything up to `p` (when past the mark-delete position) and then the entries
/// acknowledged on their own that follow without a gap (`ManagedCursorImpl.setAcknowledgedPosition`);
/// the replay queue forgets what the mark-delete position passed, and a read position at or behind
/// it moves on ([`read_position_after_mark_delete`]). The library's cursors and the replay lab's
/// share it.
pub(crate) fn mark_delete_over(
    acked: &mut AckedRanges,
    replay: &mut BTreeSet<Position>,
    mark_delete: &mut Position,
    read_position: &mut Position,
    p: Position,
    layout: &Layout,
) {
    let p = acked.absorb_after(p.max(*mark_delete), layout);
    if p > *mark_delete {
        *mark_delete = p;
        *replay = replay.split_off(&layout.next_after(p));
    }
    *read_position = read_position_after_mark_delete(*read_position, *mark_delete, layout);
}

/// Whether a mark-delete to `p` is taken: not past the last entry written
/// (`ManagedCursorImpl.asyncMarkDelete` fails it as an "Invalid mark deleted position").
pub(crate) fn mark_delete_allowed(p: Position, layout: &Layout) -> bool {
    layout.last_entry().is_some_and(|last| p <= last)
}

/// Where a cursor reads next once a read moves it on to `next`: only a position past the
/// mark-delete position is taken (`ManagedCursorImpl.setReadPosition`), so an ack that went past
/// the entries of a read under way keeps the read position it gave.
pub(crate) fn read_position_after_read(
    current: Position,
    next: Position,
    mark_delete: Position,
) -> Position {
    if next > mark_delete {
        next
    } else {
        current
    }
}

/// Where a cursor reads next once a sequential read has read through `last` (see
/// [`read_position_after_read`]).
pub(crate) fn read_position_past(
    current: Position,
    last: Position,
    mark_delete: Position,
    layout: &Layout,
) -> Position {
    read_position_after_read(current, layout.next_after(last), mark_delete)
}

/// The mark-delete position a reset to `p` leaves: the entry before it, back or forward
/// (`ManagedCursorImpl.internalResetCursor`).
pub(crate) fn mark_delete_after_reset(p: Position, layout: &Layout) -> Position {
    layout.before(p)
}

/// Where a cursor reads next once its mark-delete position is `mark_delete`: only a read position
/// at or behind it moves, to the entry after it (`ManagedCursorImpl.setAcknowledgedPosition`); one
/// at the end of a ledger is left as it is. The library's cursors and the replay lab's share it.
pub(crate) fn read_position_after_mark_delete(
    read_position: Position,
    mark_delete: Position,
    layout: &Layout,
) -> Position {
    if read_position <= mark_delete {
        layout.next_after(mark_delete)
    } else {
        read_position
    }
}

/// A cursor's mark-delete position once ledger `deleted` is gone: one inside it moves to just before
/// the cursor's (normalized) read position, or before the next entry that is left, whichever is
/// lower.
pub(crate) fn mark_delete_after_ledger_deleted(
    mark_delete: Position,
    read_position: Position,
    deleted: i64,
    layout: &Layout,
) -> Position {
    if mark_delete.ledger_id == deleted {
        layout
            .before(read_position)
            .min(layout.before(layout.normalize(mark_delete)))
    } else {
        mark_delete
    }
}

/// Whether `ManagedCursor::skip` counts entries acknowledged on their own
/// (`ManagedCursor.IndividualDeletedEntries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipMode {
    /// They count among the `n` skipped.
    Include,
    /// They are passed over: `n` unacknowledged entries are skipped.
    Exclude,
}

/// The `n`th entry after `p` (`ManagedLedgerImpl.getPositionAfterN(p, n, startExcluded)`), or
/// `None` for `n == 0`; past the last entry, the end.
pub(crate) fn nth_entry_after(layout: &Layout, p: Position, n: u64) -> Option<Position> {
    if n == 0 {
        return None;
    }
    let runs = layout.runs_from(layout.next_after(p), n);
    runs.last()
        .map(|&(l, _, last)| Position::new(l, last))
        .or(Some(p))
}

/// The `n`th entry after the mark-delete position not acknowledged on its own; past the last one,
/// the last entry. Steps over the acknowledged ranges, not their entries.
pub(crate) fn nth_unacked_after(layout: &Layout, c: &CursorState, n: u64) -> Option<Position> {
    if n == 0 {
        return None;
    }
    let mut left = n;
    let mut at = c.mark_delete;
    for (ledger, first, last) in c.acked.iter() {
        let range_first = Position::new(ledger, first);
        // Unacknowledged entries between `at` and the range.
        let gap = layout.count_between(at, layout.previous(range_first).max(at));
        if gap >= left {
            break;
        }
        left -= gap;
        at = Position::new(ledger, last).max(at);
    }
    nth_entry_after(layout, at, left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::positions::layout::LedgerInfo;

    fn layout() -> Layout {
        Layout {
            ledgers: vec![
                LedgerInfo {
                    id: 1,
                    entries: 10,
                    bytes: 0,
                },
                LedgerInfo {
                    id: 2,
                    entries: 5,
                    bytes: 0,
                },
            ],
        }
    }

    #[test]
    fn acks_compact_into_the_mark_delete_position() {
        let l = layout();
        let mut c = CursorState::new("s", Position::new(1, 0), &l, true);
        assert_eq!(c.mark_delete, Position::new(1, -1));
        assert_eq!(c.backlog(&l), 15);
        c.ack(Position::new(1, 1), &l);
        assert_eq!(c.mark_delete, Position::new(1, -1));
        assert_eq!(c.backlog(&l), 14);
        c.ack(Position::new(1, 0), &l);
        assert_eq!(c.mark_delete, Position::new(1, 1));
        c.mark_delete(Position::new(1, 9), &l);
        assert_eq!(c.read_position, Position::new(2, 0));
        assert_eq!(c.backlog(&l), 5);
        c.ack(Position::new(2, 0), &l);
        assert_eq!(c.mark_delete, Position::new(2, 0));
    }

    #[test]
    fn individual_acks_hold_only_entries_past_the_mark_delete_position() {
        let l = layout();
        let mut c = CursorState::new("s", Position::new(1, 0), &l, true);
        c.mark_delete(Position::new(1, 3), &l);
        c.ack_range(1, 0, 5, &l);
        c.ack_range(2, -7, 1, &l);
        c.ack_range(0, 0, 9, &l);
        assert_eq!(c.mark_delete, Position::new(1, 5));
        assert_eq!(c.acked.iter().collect::<Vec<_>>(), vec![(2, 0, 1)]);
        assert_eq!(c.backlog(&l), 4 + 3);
    }

    #[test]
    fn epoch_increase_has_two_phases() {
        let l = layout();
        let mut c = CursorState::new("s", Position::new(1, 5), &l, true);
        assert_eq!(c.start_increase_epoch(Position::new(1, 0)).unwrap(), 0);
        assert!(c.is_epoch_outdated(0));
        assert!(matches!(
            c.start_increase_epoch(Position::new(1, 1)),
            Err(Error::CursorEpochConflict(_))
        ));
        assert!(c.end_increase_epoch());
        assert!(!c.end_increase_epoch());
        assert_eq!(
            (c.epoch, c.epoch_increases, c.read_position),
            (1, 1, Position::new(1, 0))
        );
        assert!(c.is_epoch_outdated(0) && !c.is_epoch_outdated(1));
    }
}
