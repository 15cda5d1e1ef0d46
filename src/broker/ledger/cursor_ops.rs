//! What a cursor does besides reading: activity, acknowledgements (`ack`, `mark_delete`), the
//! replay queue, epochs (PIP-269) and moving it (`seek`, `reset`, `rewind`, `skip`,
//! `clear_backlog`).

use super::cursor::{
    mark_delete_allowed, nth_entry_after, nth_unacked_after, read_position_after_read, CursorState,
};
use super::{durable, CursorStats, ManagedCursor, ManagedLedger, SkipMode, State};
use crate::broker::positions::layout::Layout;
use crate::broker::read_flow::RedeliveryReason;
use crate::cache::position::Position;
use crate::error::{Error, Result};

impl ManagedCursor {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn ledger(&self) -> &ManagedLedger {
        &self.ledger
    }

    /// Says whether the cursor has a connected consumer that reads; whether it then counts as
    /// active is the read flow's call (4.0 also wants its backlog under
    /// `cursor_backlogged_threshold`). Without consumers the replay queue is dropped.
    pub fn set_active(&self, active: bool) -> Result<()> {
        let l = &self.ledger;
        let mut st = l.inner.state.lock();
        let c = st
            .cursors
            .get_mut(self.id as usize)
            .and_then(|c| c.as_mut())
            .ok_or_else(|| Error::not_found("cursor", &*self.name))?;
        c.active = active;
        if !active {
            // No consumer left: the dispatcher drops its replay queue
            // (`PersistentDispatcherMultipleConsumers.clearComponentsAfterRemovedAllConsumers`).
            c.replay.clear();
        }
        l.check_active(&mut st, self.id);
        Ok(())
    }

    /// Closes the cursor: it stops counting and its reads in flight fail.
    pub fn close(&self) -> Result<()> {
        self.set_active(false)?;
        let mut st = self.ledger.inner.state.lock();
        st.cursors[self.id as usize] = None;
        st.by_name.remove(&*self.name);
        let now = self.ledger.inner.clock.now_ns();
        st.activity.remove(self.id, now);
        Ok(())
    }

    /// Whether the read flow counts this cursor as active.
    pub fn is_active(&self) -> Result<bool> {
        self.ledger.with_cursor(self.id, |_, _| Ok(()))?;
        Ok(self.ledger.inner.state.lock().activity.is_active(self.id))
    }

    pub fn stats(&self) -> Result<CursorStats> {
        self.ledger.with_cursor(self.id, |c, l| Ok(c.stats(l)))
    }

    /// The next entry a sequential read returns (or, at the end, where the next append goes).
    pub fn read_position(&self) -> Result<Position> {
        self.ledger
            .with_cursor(self.id, |c, layout| Ok(layout.normalize(c.read_position)))
    }

    pub fn mark_delete_position(&self) -> Result<Position> {
        self.ledger.with_cursor(self.id, |c, _| Ok(c.mark_delete))
    }

    /// Entries from the read position to the last entry written, less those acknowledged on
    /// their own (`ManagedCursorImpl.getNumberOfEntries`).
    pub fn entries_to_read(&self) -> Result<u64> {
        self.ledger
            .with_cursor(self.id, |c, l| Ok(c.entries_to_read(l)))
    }

    /// Whether the read position is at or before the last entry written
    /// (`ManagedCursorImpl.hasMoreEntries`).
    pub fn has_more_entries(&self) -> Result<bool> {
        self.ledger
            .with_cursor(self.id, |c, l| Ok(c.has_more_entries(l)))
    }

    /// The entries acknowledged on their own past the mark-delete position, as `(first, last)`
    /// ranges with both ends inclusive (`getIndividuallyDeletedMessagesSet`, which Pulsar prints as
    /// open-closed ranges `(first-1, last]`).
    pub fn individually_acked(&self) -> Result<Vec<(Position, Position)>> {
        self.ledger
            .with_cursor(self.id, |c, _| Ok(c.acked_ranges()))
    }

    pub fn backlog(&self) -> Result<u64> {
        self.ledger.with_cursor(self.id, |c, l| Ok(c.backlog(l)))
    }

    /// Active cursors at or before this one (PIP-430 mode; 0 in legacy mode or when inactive).
    pub fn count_at_or_before(&self) -> u32 {
        let mut st = self.ledger.inner.state.lock();
        st.activity.count_at_or_before(self.id)
    }

    /// Acknowledges one entry on its own; a sequential read passes over it. An error for a
    /// position past the last entry written, which a broker fails as `asyncDelete` does.
    pub fn ack(&self, p: Position) -> Result<()> {
        let (storage, owner) = (&self.ledger.inner.storage, &self.ledger.inner.name);
        self.after_ack(|c, l| {
            if !mark_delete_allowed(p, l) {
                return Err(Error::invalid(
                    "position",
                    format!("{p} is past the last entry written"),
                ));
            }
            c.ack(p, l);
            durable::persist_acked(storage, owner, c, Some(p))
        })
    }

    /// Acknowledges every entry up to `p`; an error for a position past the last entry written,
    /// which a broker fails as an invalid mark-delete position, and for one before the
    /// mark-delete position (`MarkDeletingMarkedPosition`).
    pub fn mark_delete(&self, p: Position) -> Result<()> {
        let (storage, owner) = (&self.ledger.inner.storage, &self.ledger.inner.name);
        self.after_ack(|c, l| {
            if !mark_delete_allowed(p, l) {
                return Err(Error::invalid(
                    "position",
                    format!("{p} is past the last entry written"),
                ));
            }
            if p < c.mark_delete {
                return Err(Error::invalid(
                    "position",
                    format!(
                        "{p} is before the mark-delete position {}: entries are acknowledged up to there already (seek or reset to read them again)",
                        c.mark_delete
                    ),
                ));
            }
            c.mark_delete(p, l);
            durable::persist_acked(storage, owner, c, None)
        })
    }

    fn after_ack(&self, f: impl FnOnce(&mut CursorState, &Layout) -> Result<()>) -> Result<()> {
        let l = &self.ledger;
        l.with_cursor(self.id, f)?;
        let mut st = l.inner.state.lock();
        l.track(&mut st, self.id);
        Ok(())
    }

    /// Queues entries for redelivery. A cached one expects one more read when the read flow says
    /// the reason brings one (Pulsar: a Key_Shared hold-back).
    pub fn add_to_replay(&self, positions: &[Position], reason: RedeliveryReason) -> Result<()> {
        let l = &self.ledger;
        let added: Vec<Position> = l.with_cursor(self.id, |c, _| {
            Ok(positions
                .iter()
                .copied()
                .filter(|p| !c.is_acked(*p) && c.replay.insert(*p))
                .collect())
        })?;
        if l.inner.flow.redelivery_adds_read(reason) {
            for p in added {
                l.inner.cache.increment_expected_reads(p);
            }
        }
        Ok(())
    }

    pub fn replay_queue(&self) -> Result<Vec<Position>> {
        self.ledger
            .with_cursor(self.id, |c, _| Ok(c.replay.iter().copied().collect()))
    }

    /// Phase one of an epoch increase (PIP-269): marks the cursor modified and moves its read
    /// position; returns the epoch before the increase. Fails if an increase is running.
    pub fn start_increase_epoch(&self, new_read_position: Position) -> Result<u32> {
        let l = &self.ledger;
        let epoch = l.with_cursor(self.id, |c, layout| {
            c.start_increase_epoch(layout.normalize(new_read_position))
        })?;
        let mut st = l.inner.state.lock();
        l.track(&mut st, self.id);
        Ok(epoch)
    }

    /// Phase two: bumps the epoch; false if no increase was running.
    pub fn end_increase_epoch(&self) -> Result<bool> {
        self.ledger
            .with_cursor(self.id, |c, _| Ok(c.end_increase_epoch()))
    }

    pub fn epoch(&self) -> Result<u32> {
        self.ledger.with_cursor(self.id, |c, _| Ok(c.epoch))
    }

    pub fn is_epoch_outdated(&self, epoch: u32) -> Result<bool> {
        self.ledger
            .with_cursor(self.id, |c, _| Ok(c.is_epoch_outdated(epoch)))
    }

    /// Sets the read position if the epoch is still `expected_epoch` (what a sequential read does
    /// when it completes); returns whether it did.
    pub fn set_read_position(&self, p: Position, expected_epoch: u32) -> Result<bool> {
        let l = &self.ledger;
        let epochs = l.inner.config.cursor_epochs;
        let set = l.with_cursor(self.id, |c, layout| {
            if epochs && c.is_epoch_outdated(expected_epoch) {
                return Ok(false);
            }
            let next = layout.normalize(p);
            c.read_position = read_position_after_read(c.read_position, next, c.mark_delete);
            Ok(true)
        })?;
        if set {
            l.track(&mut l.inner.state.lock(), self.id);
        }
        Ok(set)
    }

    /// Runs `change` as one epoch increase: both phases under the ledger lock, so no read starts or
    /// completes in between. Fails with a conflict if an increase is already running.
    fn reposition(&self, change: impl FnOnce(&mut CursorState, &Layout) -> Position) -> Result<()> {
        let l = &self.ledger;
        let mut st = l.inner.state.lock();
        let State {
            cursors, layout, ..
        } = &mut *st;
        let c = cursors
            .get_mut(self.id as usize)
            .and_then(|c| c.as_mut())
            .ok_or_else(|| Error::not_found("cursor", &*self.name))?;
        if c.epoch_increase_running {
            return Err(Error::CursorEpochConflict(c.name.clone()));
        }
        let target = change(c, layout);
        c.start_increase_epoch(target)?;
        c.end_increase_epoch();
        l.track(&mut st, self.id);
        Ok(())
    }

    /// Moves the read position only (`ManagedCursorImpl.seek(position, force)`): without `force`
    /// a position at or before the mark-delete position moves it to the entry after the
    /// mark-delete position, so acknowledged entries are not read again; with `force` it goes
    /// there (and a read delivers acknowledged entries again).
    pub fn seek(&self, p: Position, force: bool) -> Result<()> {
        self.reposition(|c, layout| {
            if !force && p <= c.mark_delete {
                layout.next_after(c.mark_delete)
            } else {
                layout.normalize(p)
            }
        })
    }

    /// Resets the subscription to `p` (`reset-cursor`): everything before `p` counts as acknowledged,
    /// nothing from `p` on, and the replay queue is cleared. The mark-delete position is the entry
    /// before `p` as `internalResetCursor` takes it (`getPreviousPosition`).
    pub fn reset(&self, p: Position) -> Result<()> {
        self.reposition(|c, layout| {
            let p = layout.normalize(p);
            c.mark_delete = layout.previous(p);
            c.acked.clear();
            c.replay.clear();
            p
        })?;
        self.persist_state()
    }

    /// Reads again from the first unacknowledged entry.
    pub fn rewind(&self) -> Result<()> {
        self.reposition(|c, layout| layout.next_after(c.mark_delete))
    }

    /// Skips `n` entries from the mark-delete position (`ManagedCursorImpl.skipEntries(n, mode)`):
    /// the mark-delete position moves to the `n`th entry after it, counting entries acknowledged
    /// on their own with [`SkipMode::Include`] and passing over them with [`SkipMode::Exclude`]
    /// (what a broker's skip-messages does). Stops at the last entry written.
    pub fn skip(&self, n: u64, mode: SkipMode) -> Result<()> {
        self.reposition(|c, layout| {
            let Some(last) = layout.last_entry() else {
                return c.read_position;
            };
            let target = match mode {
                SkipMode::Include => nth_entry_after(layout, c.mark_delete, n),
                SkipMode::Exclude => nth_unacked_after(layout, c, n),
            };
            if let Some(p) = target.map(|p| p.min(last)) {
                c.mark_delete(p, layout);
            }
            c.read_position.max(layout.next_after(c.mark_delete))
        })?;
        self.persist_state()
    }

    /// Acknowledges everything (`clear-backlog`).
    pub fn clear_backlog(&self) -> Result<()> {
        self.reposition(|c, layout| {
            if let Some(last) = layout.last_entry() {
                c.mark_delete(last, layout);
            }
            c.acked.clear();
            c.replay.clear();
            layout.end()
        })?;
        self.persist_state()
    }
}
