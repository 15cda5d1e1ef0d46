//! The replayer's cursors, found by trace id.

use super::super::trace::Event;
use super::Stopped;
use crate::broker::positions::acked::AckedRanges;
use crate::cache::position::Position;
use crate::error::Error;
use std::collections::BTreeSet;

///
/// [`CursorActivity`]: crate::broker::read_flow::CursorActivity
#[derive(Debug)]
pub(super) struct Cursor {
    /// The topic that opened it (a cursor id names one topic's cursor).
    pub(super) topic: u32,
    pub(super) read_position: Position,
    /// Has consumers (between `open` and `close`); whether it counts as active is the read flow's
    /// call (see [`CursorActivity`]).
    pub(super) connected: bool,
    /// The last entry of the acknowledged prefix (the position before the first entry while
    /// nothing is acknowledged).
    pub(super) mark_delete: Position,
    /// Entries acknowledged on their own past `mark_delete`: reads pass over them.
    pub(super) acked: AckedRanges,
    pub(super) replay: BTreeSet<Position>,
    /// Bumped by every seek and rewind (PIP-269's cursor epoch).
    pub(super) epoch: u32,
    /// Highest position delivered since the last seek.
    pub(super) delivered_high: Option<Position>,
    /// Set while reads of it that missed are under way (with read latency): the broker moves a
    /// cursor's read position when its read completes (`OpReadEntry.updateReadPosition`), so
    /// until then the read flow sees it where the first of them started, while the trace's next
    /// read starts where this one ends.
    pub(super) hold: Option<Hold>,
    /// Its topic was unloaded since it was opened: the broker forgot it (the trace's next `open`
    /// starts it afresh), and no event finds it meanwhile.
    pub(super) forgotten: bool,
}

/// The cursors this replayer opened, found by trace id. The decoder numbers cursors densely, each
/// id one topic's cursor ([`Names::cursors`]), so an event finds its cursor by two indexings (a read
/// looks its cursor up several times; in a hash map per topic that was a tenth of a replay's time).
/// The index by id holds 4 bytes a trace cursor; the cursors themselves are only those opened here
/// (a broker of a multi-broker replay opens its own topics' cursors, not the trace's).
///
/// [`Names::cursors`]: super::super::trace::Names::cursors
#[derive(Debug, Default)]
pub(super) struct CursorTable {
    /// By trace cursor id: where that cursor is in `opened`, or [`NOT_OPENED`].
    pub(super) slot_of: Vec<u32>,
    pub(super) opened: Vec<Cursor>,
}

/// No slot. A replayer opens at most one cursor per id and ids are below the number of names,
/// which the decoder's u32 ids keep below 2^32, so `opened` holds at most `u32::MAX` cursors, with
/// slots below this one.
pub(super) const NOT_OPENED: u32 = u32::MAX;

impl CursorTable {
    /// Cursor `id` if `topic` opened it.
    #[inline]
    pub(super) fn get(&self, topic: u32, id: u32) -> Option<&Cursor> {
        let slot = *self.slot_of.get(id as usize)?;
        self.opened
            .get(slot as usize)
            .filter(|c| c.topic == topic && !c.forgotten)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, topic: u32, id: u32) -> Option<&mut Cursor> {
        let slot = *self.slot_of.get(id as usize)?;
        self.opened
            .get_mut(slot as usize)
            .filter(|c| c.topic == topic && !c.forgotten)
    }

    /// Whether an open of cursor `id` is a reconnect: this broker opened it before, and it has
    /// no consumer now (closed, or forgotten by its topic's unload).
    pub(super) fn reconnects(&self, id: u32) -> bool {
        self.slot_of
            .get(id as usize)
            .and_then(|&slot| self.opened.get(slot as usize))
            .is_some_and(|c| c.forgotten || !c.connected)
    }

    /// The broker closed the cursor's topic: it forgets the cursor (its positions, replay queue
    /// and reads under way), as a new owner recovers cursors from their stored state.
    pub(super) fn forget(&mut self, topic: u32, id: u32) {
        if let Some(c) = self.get_mut(topic, id) {
            c.forgotten = true;
            c.connected = false;
            c.replay = BTreeSet::new();
            c.acked = AckedRanges::default();
            c.hold = None;
        }
    }

    /// The cursor an event names, or what stops the replay if its topic never opened it.
    #[inline]
    pub(super) fn of_event(&mut self, e: &Event) -> std::result::Result<&mut Cursor, Stopped> {
        self.get_mut(e.topic, e.cursor)
            .ok_or(Stopped::UnknownCursor {
                row: e.row,
                op: e.op,
                cursor: e.cursor,
            })
    }

    /// The cursor an open names, made by `new` if it is new. `named` is how many cursors the
    /// names hold (ids are below it), which bounds the index.
    pub(super) fn open(
        &mut self,
        e: &Event,
        named: usize,
        new: impl FnOnce() -> Cursor,
    ) -> std::result::Result<&mut Cursor, Stopped> {
        let id = e.cursor as usize;
        if id >= named {
            return Err(Error::invalid(
                "trace",
                format!(
                    "row {}: cursor id {} is not among the {named} cursors named",
                    e.row, e.cursor
                ),
            )
            .into());
        }
        if self.slot_of.len() <= id {
            self.slot_of.resize(named, NOT_OPENED);
        }
        let slot = self.slot_of[id];
        if slot == NOT_OPENED {
            // At most one cursor per id below `named`: the slot is below NOT_OPENED.
            self.slot_of[id] = self.opened.len() as u32;
            self.opened.push(new());
            let last = self.opened.len() - 1;
            return Ok(&mut self.opened[last]);
        }
        let c = &mut self.opened[slot as usize];
        if c.forgotten && c.topic == e.topic {
            // Its topic was unloaded: the broker opens it afresh.
            *c = new();
        }
        if c.topic != e.topic {
            return Err(Stopped::CursorOfAnotherTopic {
                row: e.row,
                cursor: e.cursor,
                of: c.topic,
                named_by: e.topic,
            });
        }
        Ok(c)
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Cursor> {
        self.opened.iter_mut()
    }
}

/// Where the read flow sees a cursor while reads of it are under way, and how many.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hold {
    pub(super) at: Position,
    pub(super) reads: u32,
    /// The cursor's epoch when the hold began: a seek or rewind ends it.
    pub(super) epoch: u32,
}

impl Cursor {
    /// A cursor of `topic` as it opens: reading from `read_position`, everything up to
    /// `mark_delete` acknowledged, nothing else known about it.
    pub(super) fn opened(topic: u32, read_position: Position, mark_delete: Position) -> Self {
        Cursor {
            topic,
            read_position,
            connected: false,
            mark_delete,
            acked: AckedRanges::default(),
            replay: BTreeSet::new(),
            epoch: 0,
            delivered_high: None,
            hold: None,
            forgotten: false,
        }
    }

    /// The read position as the broker's read flow sees it (see [`Cursor::hold`]).
    pub(super) fn broker_read_position(&self) -> Position {
        self.hold.map_or(self.read_position, |h| h.at)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::trace::Op;
    use super::*;
    use crate::broker::read_flow::RedeliveryReason;

    fn open_of(topic: u32, cursor: u32) -> Event {
        Event {
            row: u64::from(cursor),
            broker: 0,
            ts_us: 0,
            op: Op::Open,
            topic,
            cursor,
            position: None,
            count: 0,
            size: 0,
            reason: RedeliveryReason::Unspecified,
        }
    }

    fn cursor_of(topic: u32) -> Cursor {
        Cursor::opened(topic, Position::new(0, 0), Position::new(0, -1))
    }

    /// A replayer of a multi-broker replay opens its own topics' cursors among all the trace's:
    /// it holds those, plus an index of 4 bytes a trace cursor, not a cursor slot for every one.
    #[test]
    fn the_table_holds_the_cursors_opened_not_every_cursor_named() {
        const NAMED: usize = 100_000;
        let mut table = CursorTable::default();
        for id in [99_999, 7, 50_000, 7] {
            let topic = id % 3;
            let c = table.open(&open_of(topic, id), NAMED, || cursor_of(topic));
            assert_eq!(c.map(|c| c.topic).ok(), Some(topic));
        }
        assert_eq!(
            table.opened.len(),
            3,
            "one cursor per id opened, a re-open adds none"
        );
        assert_eq!(table.slot_of.len(), NAMED);
        // The memory: an index entry per name, a cursor per open (a cursor per name was 15 MB).
        let held = table.slot_of.capacity() * std::mem::size_of::<u32>()
            + table.opened.capacity() * std::mem::size_of::<Cursor>();
        assert!(held <= NAMED * std::mem::size_of::<u32>() + 4 * std::mem::size_of::<Cursor>());
        for id in [99_999u32, 7, 50_000] {
            assert_eq!(table.get(id % 3, id).map(|c| c.topic), Some(id % 3));
            assert!(table.get(id % 3 + 1, id).is_none(), "another topic's id");
        }
        assert!(table.get(0, 0).is_none() && table.get(0, NAMED as u32).is_none());
        assert!(matches!(
            table.open(&open_of(1, 99_999), NAMED, || cursor_of(1)),
            Err(Stopped::CursorOfAnotherTopic {
                of: 0,
                named_by: 1,
                ..
            })
        ));
        assert_eq!(table.opened.len(), 3);
    }
}
