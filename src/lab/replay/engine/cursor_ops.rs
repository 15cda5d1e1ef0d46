//! The cursor's ops (open, close, acknowledgments, seeks, redeliveries) and the read flow's view
//! of the cursors (where they are, which are active).

use super::super::trace::Event;
use super::cursors::Cursor;
use super::{CacheStrategy, EntryKey, Replayer, Stopped};
use crate::broker::ledger::cursor::{
    ack_individually, mark_delete_after_reset, mark_delete_allowed, mark_delete_over,
};
use crate::broker::read_flow::Invalidation;

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    /// A consumer connects: the cursor is opened (at the trace's position, else the ledger's end) or
    /// reconnected.
    pub(super) fn on_open(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        // The table is bounded by the names (an id past them is refused).
        let named = self.cursor_hashes.len();
        self.topic(e.topic);
        self.load_implicitly(e.topic, now);
        if self.cursors.reconnects(e.cursor) {
            self.metrics.reopens += 1;
            if let Some(s) = self.this_second() {
                s.reopens += 1;
            }
        }
        let t = &mut self.topics[e.topic as usize];
        let start = match e.position {
            Some(p) => t.layout.normalize(p),
            None => t.layout.end(),
        };
        let mark_delete = t.layout.before(start);
        let c = self
            .cursors
            .open(e, named, || Cursor::opened(e.topic, start, mark_delete))?;
        if e.position.is_some() {
            c.read_position = start;
        }
        c.connected = true;
        // Inserted only if new: the set's insert makes room before it looks (the map
        // that held the cursors before made room only for a new key), so a re-open of a
        // topic whose set is full would grow it and change the order deletion moves the
        // cursors in.
        if !t.cursor_ids.contains(&e.cursor) {
            t.cursor_ids.insert(e.cursor);
        }
        // Below `named`: `open` refused the id otherwise.
        t.activity
            .name(e.cursor, self.cursor_hashes[e.cursor as usize]);
        self.check_backlogged(e.topic, now, Some(e.cursor));
        Ok(())
    }

    /// Its last consumer left.
    pub(super) fn on_close(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        let (t, c) = self.topic_and_cursor(e)?;
        c.connected = false;
        // Its last consumer left: the dispatcher drops its replay queue
        // (`PersistentDispatcherMultipleConsumers.clearComponentsAfterRemovedAllConsumers`).
        c.replay.clear();
        if t.activity.deactivate(e.cursor, now) {
            self.invalidate(e.topic);
        }
        Ok(())
    }

    /// A position the dispatcher queues for replay (a negative acknowledgment, a redelivery).
    pub(super) fn on_redeliver(&mut self, e: &Event) -> std::result::Result<(), Stopped> {
        let p = Self::position_of(e)?;
        let c = self.topic_and_cursor(e)?.1;
        if c.replay.insert(p) && self.flow.redelivery_adds_read(e.reason) {
            self.strategy.add_expected_read(EntryKey {
                topic: e.topic,
                position: p,
            });
        }
        Ok(())
    }

    /// A cumulative acknowledgment (a mark-delete).
    pub(super) fn on_ack(&mut self, e: &Event) -> std::result::Result<(), Stopped> {
        let p = Self::position_of(e)?;
        let (t, c) = self.topic_and_cursor(e)?;
        if !mark_delete_allowed(p, &t.layout) {
            // A broker fails such a mark-delete: the cursor stays as it is.
            return Ok(());
        }
        mark_delete_over(
            &mut c.acked,
            &mut c.replay,
            &mut c.mark_delete,
            &mut c.read_position,
            p,
            &t.layout,
        );
        self.cursor_moved(e.topic, e.cursor);
        Ok(())
    }

    /// Individual acknowledgments of `count` entries from the position.
    pub(super) fn on_individual_ack(&mut self, e: &Event) -> std::result::Result<(), Stopped> {
        let p = Self::position_of(e)?;
        let (t, c) = self.topic_and_cursor(e)?;
        let last = p.entry_id.saturating_add(i64::from(e.count.max(1)) - 1);
        ack_individually(
            &mut c.acked,
            &mut c.replay,
            &mut c.mark_delete,
            &mut c.read_position,
            (p.ledger_id, p.entry_id, last),
            &t.layout,
        );
        self.cursor_moved(e.topic, e.cursor);
        Ok(())
    }

    /// A rewind to the first unacknowledged entry.
    pub(super) fn on_rewind(&mut self, e: &Event) -> std::result::Result<(), Stopped> {
        let (t, c) = self.topic_and_cursor(e)?;
        // `ManagedCursorImpl.rewind`: the dispatcher drops the reads under way
        // (`PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages`).
        c.read_position = t.layout.next_after(c.mark_delete);
        c.epoch = c.epoch.wrapping_add(1);
        c.delivered_high = None;
        c.hold = None;
        self.cursor_moved(e.topic, e.cursor);
        Ok(())
    }

    /// A seek (a reset of the cursor to the position).
    pub(super) fn on_seek(&mut self, e: &Event) -> std::result::Result<(), Stopped> {
        let p = Self::position_of(e)?;
        let (t, c) = self.topic_and_cursor(e)?;
        let start = t.layout.normalize(p);
        let before_start = mark_delete_after_reset(start, &t.layout);
        // A seek is a reset (`ManagedCursorImpl.internalResetCursor`): the mark-delete
        // position goes to the entry before the new read position, back or forward.
        c.mark_delete = before_start;
        c.read_position = start;
        c.acked.clear();
        c.replay.clear();
        c.epoch = c.epoch.wrapping_add(1);
        c.delivered_high = None;
        c.hold = None;
        self.cursor_moved(e.topic, e.cursor);
        Ok(())
    }

    /// A cursor's read or mark-delete position moved: the read flow tracks it there, and the
    /// designs that drop what the slowest cursor passed do so.
    pub(super) fn cursor_moved(&mut self, topic: u32, cursor: u32) {
        // A flow that never asks where cursors are (the reference designs, the segmented ring)
        // would keep a position heap up to date on every read for nothing.
        if !self.flow.reads_cursor_positions() {
            return;
        }
        let Some(c) = self.cursors.get_mut(topic, cursor) else {
            return;
        };
        if self.topics[topic as usize].track(&self.flow, cursor, c) {
            self.invalidate(topic);
        }
    }

    pub(super) fn invalidate(&mut self, topic: u32) {
        let t = &mut self.topics[topic as usize];
        match self.flow.invalidation(&mut t.activity) {
            Invalidation::Nothing => {}
            how => self.strategy.invalidate(topic, how),
        }
    }

    /// The broker's check of which cursors count as active and which cache their reads: for one
    /// cursor when a consumer connects, for every cursor of the topic on the stats task.
    pub(super) fn check_backlogged(&mut self, topic: u32, now: u64, only: Option<u32>) {
        // In the order cursors were opened (the library's order too); each one that leaves
        // invalidates at once, as `setInactive` does.
        let mut ids: Vec<u32> = match only {
            Some(id) => vec![id],
            None => self.topics[topic as usize]
                .cursor_ids
                .iter()
                .copied()
                .collect(),
        };
        ids.sort_unstable();
        for &id in &ids {
            let t = &mut self.topics[topic as usize];
            let Some(c) = self.cursors.get(topic, id) else {
                continue;
            };
            if self.flow.active_with_backlog(c.connected, t.backlog(c)) {
                let at = self
                    .flow
                    .tracked_position(c.broker_read_position(), c.mark_delete);
                t.activity.activate(id, at);
            } else if t.activity.deactivate(id, now) {
                self.invalidate(topic);
            }
        }
        if only.is_none() {
            let t = &mut self.topics[topic as usize];
            let backlogs: Vec<(u32, u64)> = ids
                .iter()
                .filter_map(|&id| Some((id, t.backlog(self.cursors.get(topic, id)?))))
                .collect();
            for (id, on) in self
                .flow
                .cursors_caching_reads(&backlogs)
                .into_iter()
                .flatten()
            {
                t.activity.set_cache_read_entry(id, on);
            }
        }
    }
}
