//! Which cursors count as active, where the read flow tracks them, and what the cache drops when
//! the slowest active cursor moves.

use super::{ManagedLedger, State};
use crate::broker::read_flow::Invalidation;
use crate::cache::position::Position;

impl ManagedLedger {
    /// Moves an active cursor to where the read flow tracks it (its read position, or the entry
    /// after its mark-delete position), then drops what the flow says no active cursor will read
    /// when the slowest active position changed (as 4.0's `updateActiveCursor`).
    pub(super) fn track(&self, st: &mut State, id: u32) {
        let Some(c) = st.cursors[id as usize].as_ref() else {
            return;
        };
        let at = self
            .inner
            .flow
            .tracked_position(c.read_position, c.mark_delete);
        if st.activity.moved(id, at) {
            self.invalidate(st);
        }
    }

    /// Sets whether a cursor counts as active: it has consumers and (4.0's
    /// `checkBackloggedCursor`) not too much backlog.
    pub(super) fn check_active(&self, st: &mut State, id: u32) {
        let Some(c) = st.cursors[id as usize].as_ref() else {
            return;
        };
        let flow = &self.inner.flow;
        if flow.active_with_backlog(c.active, c.entries_to_read(&st.layout)) {
            let at = flow.tracked_position(c.read_position, c.mark_delete);
            st.activity.activate(id, at);
        } else if st.activity.deactivate(id, self.inner.clock.now_ns()) {
            self.invalidate(st);
        }
    }

    pub(super) fn invalidate(&self, st: &mut State) {
        match self.inner.flow.invalidation(&mut st.activity) {
            Invalidation::Nothing => {}
            Invalidation::Before(p) => {
                self.inner
                    .cache
                    .remove_range(Position::new(i64::MIN, i64::MIN), p, false);
            }
            Invalidation::All => {
                self.inner.cache.clear();
            }
        }
    }

    /// The broker's once-a-`backlog_check_interval_ms` task (`checkBackloggedCursors` and
    /// `checkCursorsToCacheEntries`): which cursors count as active, and which cache their storage
    /// reads. Designs with nothing to check ignore it.
    pub fn check_backlogged_cursors(&self) {
        let mut st = self.inner.state.lock();
        let ids: Vec<u32> = (0..st.cursors.len() as u32)
            .filter(|&id| st.cursors[id as usize].is_some())
            .collect();
        for &id in &ids {
            self.check_active(&mut st, id);
        }
        let backlogs: Vec<(u32, u64)> = ids
            .iter()
            .filter_map(|&id| {
                let c = st.cursors[id as usize].as_ref()?;
                Some((id, c.entries_to_read(&st.layout)))
            })
            .collect();
        for (id, on) in self
            .inner
            .flow
            .cursors_caching_reads(&backlogs)
            .into_iter()
            .flatten()
        {
            st.activity.set_cache_read_entry(id, on);
        }
    }
}
