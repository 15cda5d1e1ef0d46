//! Which cursors of one topic are active, where they are, and since when none is: the state the
//! read-flow rules consult. The library's managed ledger and the replay engine each keep one per
//! topic and change it only through these methods, so both see the same counts.

use crate::broker::cursors::active::ActiveCursorContainer;
use crate::broker::cursors::heap::SlowestCursorHeap;
use crate::broker::cursors::pulsar_list::PulsarCursorList;
use crate::cache::fast_hash::FastMap;
use crate::cache::position::Position;

/// What keeps a topic's active cursors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorTracking {
    /// The slowest-cursor heap of the designs that only need the slowest reader.
    Slowest,
    /// PIP-430's container as intended: every count right.
    ExactCounts,
    /// PIP-430's container as Pulsar ships it (`ActiveManagedCursorContainerImpl`), counts and
    /// defects alike.
    PulsarCounts,
}

enum Tracker {
    Counting(ActiveCursorContainer<u32>),
    Pulsar(PulsarCursorList),
    Slowest(SlowestCursorHeap<u32>),
}

/// Per cursor: whether it is active, 4.0's `cacheReadEntry` flag, and the `String.hashCode` of
/// its name (which orders Pulsar's container's map).
#[derive(Default, Clone, Copy)]
struct Flags {
    active: bool,
    cache_read_entry: bool,
    name_hash: i32,
}

pub struct CursorActivity {
    tracker: Tracker,
    flags: FastMap<u32, Flags>,
    active: u32,
    last_left_ns: Option<u64>,
}

impl CursorActivity {
    /// The topic loads at `loaded_ns`, which counts as a time the last active cursor left:
    /// Pulsar's container starts its continue-caching window there
    /// (`ActiveManagedCursorContainerImpl`'s constructor sets `cursorRemovedTimestampMillis`).
    pub fn new(tracking: CursorTracking, loaded_ns: u64) -> Self {
        CursorActivity {
            tracker: match tracking {
                CursorTracking::ExactCounts => Tracker::Counting(ActiveCursorContainer::new()),
                CursorTracking::PulsarCounts => Tracker::Pulsar(PulsarCursorList::new()),
                CursorTracking::Slowest => Tracker::Slowest(SlowestCursorHeap::new()),
            },
            flags: FastMap::default(),
            active: 0,
            last_left_ns: Some(loaded_ns),
        }
    }

    pub fn is_active(&self, cursor: u32) -> bool {
        self.flags.get(&cursor).is_some_and(|f| f.active)
    }

    pub fn active_count(&self) -> u32 {
        self.active
    }

    /// When the last active cursor left, or the topic loaded if none ever was active (`None` while
    /// one is active).
    pub fn last_left_ns(&self) -> Option<u64> {
        (self.active == 0).then_some(self.last_left_ns).flatten()
    }

    /// Gives a cursor its name's `String.hashCode` (Pulsar's container keys its map by name):
    /// before it is first activated.
    pub fn name(&mut self, cursor: u32, name_hash: i32) {
        self.flags.entry(cursor).or_default().name_hash = name_hash;
    }

    /// Makes a cursor active at `position` (or moves it there if it is); returns whether it was
    /// inactive before. Pulsar's container is told only of a newly active cursor
    /// (`ManagedLedgerImpl.activateCursor` adds it only if it is not active).
    pub fn activate(&mut self, cursor: u32, position: Position) -> bool {
        let f = self.flags.entry(cursor).or_default();
        let newly = !f.active;
        let name_hash = f.name_hash;
        if newly {
            f.active = true;
            self.active += 1;
        }
        match &mut self.tracker {
            Tracker::Counting(c) => {
                c.add(cursor, Some(position));
            }
            Tracker::Pulsar(c) => {
                if newly {
                    c.add(cursor, name_hash, position);
                }
            }
            Tracker::Slowest(h) => h.add(cursor, Some(position)),
        }
        newly
    }

    /// Makes a cursor inactive; returns whether it was active.
    pub fn deactivate(&mut self, cursor: u32, now_ns: u64) -> bool {
        let Some(f) = self.flags.get_mut(&cursor).filter(|f| f.active) else {
            return false;
        };
        f.active = false;
        self.active -= 1;
        if self.active == 0 {
            self.last_left_ns = Some(now_ns);
        }
        match &mut self.tracker {
            Tracker::Counting(c) => {
                c.add(cursor, None);
            }
            // `deactivateCursor` removes it (`removeCursor`).
            Tracker::Pulsar(c) => {
                c.remove(cursor);
            }
            Tracker::Slowest(h) => h.add(cursor, None),
        }
        true
    }

    /// An active cursor's tracked position moved (inactive cursors are not tracked). Returns
    /// whether the slowest position changed, which is what 4.0 invalidates on; always false for
    /// the counting tracker, whose flow invalidates nothing.
    pub fn moved(&mut self, cursor: u32, position: Position) -> bool {
        if let Tracker::Pulsar(c) = &mut self.tracker {
            // It holds the active cursors only (`deactivate` removes them), so it knows without
            // a look at the flags (a second lookup of the cursor on every read).
            c.update(cursor, position);
            return false;
        }
        if !self.is_active(cursor) {
            return false;
        }
        match &mut self.tracker {
            Tracker::Counting(c) => {
                c.add(cursor, Some(position));
                false
            }
            // Moved above.
            Tracker::Pulsar(_) => false,
            Tracker::Slowest(h) => {
                let before = h.slowest_position();
                h.add(cursor, Some(position));
                h.slowest_position() != before
            }
        }
    }

    /// Forgets a cursor (closed for good).
    pub fn remove(&mut self, cursor: u32, now_ns: u64) {
        self.deactivate(cursor, now_ns);
        self.flags.remove(&cursor);
        match &mut self.tracker {
            Tracker::Counting(c) => {
                c.remove(&cursor);
            }
            Tracker::Pulsar(c) => {
                c.remove(cursor);
            }
            Tracker::Slowest(h) => {
                h.remove(&cursor);
            }
        }
    }

    /// Active cursors at or before `cursor` (itself included); 0 when it is inactive or the
    /// tracker does not count. Pulsar's container may say less (even 0) or more.
    pub fn count_at_or_before(&mut self, cursor: u32) -> u32 {
        match &mut self.tracker {
            Tracker::Counting(c) => c.count_at_or_before(&cursor),
            Tracker::Pulsar(c) => c.count_at_or_before(cursor).max(0) as u32,
            Tracker::Slowest(_) => 0,
        }
    }

    /// The lowest tracked position of the active cursors.
    pub fn slowest(&mut self) -> Option<Position> {
        match &mut self.tracker {
            Tracker::Counting(c) => c.slowest_position(),
            Tracker::Pulsar(c) => c.slowest_position(),
            Tracker::Slowest(h) => h.slowest_position(),
        }
    }

    pub fn cache_read_entry(&self, cursor: u32) -> bool {
        self.flags.get(&cursor).is_some_and(|f| f.cache_read_entry)
    }

    pub fn set_cache_read_entry(&mut self, cursor: u32, on: bool) {
        self.flags.entry(cursor).or_default().cache_read_entry = on;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inactive_cursor_moves_untracked_whatever_keeps_them() {
        let at = |e| Position::new(1, e);
        for tracking in [
            CursorTracking::Slowest,
            CursorTracking::ExactCounts,
            CursorTracking::PulsarCounts,
        ] {
            let mut a = CursorActivity::new(tracking, 0);
            a.name(7, 1);
            a.name(8, 2);
            assert!(!a.moved(7, at(1)), "{tracking:?}");
            assert_eq!(
                a.slowest(),
                None,
                "{tracking:?}: never active, never tracked"
            );
            assert!(a.activate(7, at(5)));
            assert!(a.activate(8, at(9)));
            a.moved(7, at(6));
            assert_eq!(a.slowest(), Some(at(6)), "{tracking:?}");
            assert!(a.deactivate(7, 10));
            a.moved(7, at(2));
            assert_eq!(
                a.slowest(),
                Some(at(9)),
                "{tracking:?}: moved while inactive"
            );
            assert!(!a.is_active(7));
            assert!(a.activate(7, at(12)));
            assert_eq!(a.slowest(), Some(at(9)), "{tracking:?}");
        }
    }
}
