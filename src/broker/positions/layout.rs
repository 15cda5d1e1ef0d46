//! The ledgers of a managed ledger and how positions walk across them.

use crate::cache::position::Position;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerInfo {
    pub id: i64,
    pub entries: u64,
    pub bytes: u64,
}

/// A ledger's length as an entry id bound: entry ids are i64, so a store that reports more
/// entries than that (a `CallableStorage` can declare any length) holds i64::MAX of them.
fn len_i64(entries: u64) -> i64 {
    i64::try_from(entries).unwrap_or(i64::MAX)
}

/// Ledgers in id (creation) order; the last one takes appends.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub ledgers: Vec<LedgerInfo>,
}

impl Layout {
    pub(crate) fn index_of(&self, ledger_id: i64) -> Result<usize, usize> {
        // Appends and tailing reads, most lookups, are in the current ledger; a topic that has
        // rolled over many ledgers would otherwise pay a search of all of them each time.
        match self.ledgers.last() {
            Some(l) if l.id == ledger_id => Ok(self.ledgers.len() - 1),
            _ => self.ledgers.binary_search_by_key(&ledger_id, |l| l.id),
        }
    }

    pub fn get(&self, ledger_id: i64) -> Option<&LedgerInfo> {
        self.index_of(ledger_id).ok().map(|i| &self.ledgers[i])
    }

    pub fn current(&self) -> Option<&LedgerInfo> {
        self.ledgers.last()
    }

    /// The position the next append gets (or where reading past the end waits).
    pub fn end(&self) -> Position {
        match self.ledgers.last() {
            Some(l) => Position::new(l.id, len_i64(l.entries)),
            None => Position::new(0, 0),
        }
    }

    pub fn first(&self) -> Position {
        match self.ledgers.first() {
            Some(l) => Position::new(l.id, 0),
            None => Position::new(0, 0),
        }
    }

    /// The last written entry, if any.
    pub fn last_entry(&self) -> Option<Position> {
        self.ledgers
            .iter()
            .rev()
            .find(|l| l.entries > 0)
            .map(|l| Position::new(l.id, len_i64(l.entries) - 1))
    }

    /// The position itself if an entry is (or will next be) written there; otherwise the first
    /// such position after it (past a ledger's end, or in a deleted ledger).
    pub fn normalize(&self, p: Position) -> Position {
        let mut i = match self.index_of(p.ledger_id) {
            Ok(i) => {
                let l = &self.ledgers[i];
                if p.entry_id < 0 {
                    return Position::new(l.id, 0);
                }
                if (p.entry_id as u64) < l.entries || i + 1 == self.ledgers.len() {
                    return Position::new(l.id, p.entry_id.min(len_i64(l.entries)));
                }
                i + 1
            }
            Err(i) => i,
        };
        // Skip empty ledgers that are not the current one.
        while i < self.ledgers.len() {
            let l = &self.ledgers[i];
            if l.entries > 0 || i + 1 == self.ledgers.len() {
                return Position::new(l.id, 0);
            }
            i += 1;
        }
        self.end()
    }

    pub fn next_after(&self, p: Position) -> Position {
        self.normalize(Position::new(p.ledger_id, p.entry_id.saturating_add(1)))
    }

    /// The position just before `p`, as mark-delete positions are kept (`(ledger, -1)` before a
    /// ledger's first entry).
    pub fn before(&self, p: Position) -> Position {
        let p = self.normalize(p);
        Position::new(p.ledger_id, p.entry_id - 1)
    }

    /// The position before `p` as Pulsar computes a mark-delete position from a read position
    /// (`ManagedLedgerImpl.getPreviousPosition`): the entry before it in its ledger, else the last
    /// entry of the nearest earlier ledger that has one, else `(first ledger, -1)` when earlier
    /// ledgers are all empty, else `(p's ledger, -1)`. Unlike [`Layout::before`], a position at
    /// the start of a ledger answers the last entry of the ledger before: a cursor that read a
    /// full ledger has its mark-delete position there, not at `(next ledger, -1)`.
    pub fn previous(&self, p: Position) -> Position {
        if p.entry_id > 0 {
            return Position::new(p.ledger_id, p.entry_id - 1);
        }
        let earlier = self.ledgers.iter().take_while(|l| l.id < p.ledger_id);
        let mut first = None;
        let mut last_with_entries = None;
        for l in earlier {
            first.get_or_insert(l.id);
            if l.entries > 0 {
                last_with_entries = Some(l);
            }
        }
        match (last_with_entries, first) {
            (Some(l), _) => Position::new(l.id, len_i64(l.entries) - 1),
            (None, Some(id)) => Position::new(id, -1),
            (None, None) => Position::new(p.ledger_id, -1),
        }
    }

    /// Whether an entry exists at `p`.
    pub fn contains(&self, p: Position) -> bool {
        self.get(p.ledger_id)
            .is_some_and(|l| p.entry_id >= 0 && (p.entry_id as u64) < l.entries)
    }

    /// Up to `n` existing positions from `from` on, as (ledger, first, last) runs.
    pub fn runs_from(&self, from: Position, n: u64) -> Vec<(i64, i64, i64)> {
        let mut out = Vec::new();
        let mut left = n;
        let from = self.normalize(from);
        let Ok(start) = self.index_of(from.ledger_id) else {
            return out;
        };
        let mut first = from.entry_id;
        for l in &self.ledgers[start..] {
            if left == 0 {
                break;
            }
            let available = (len_i64(l.entries) - first).max(0) as u64;
            let take = available.min(left);
            if take > 0 {
                out.push((l.id, first, first + take as i64 - 1));
                left -= take;
            }
            first = 0;
        }
        out
    }

    /// Entries at positions in `(after, upto]`. Counted in u64 per ledger and summed saturating:
    /// ledgers whose lengths sum past `u64::MAX` answer `u64::MAX` instead of wrapping.
    pub fn count_between(&self, after: Position, upto: Position) -> u64 {
        // Entry ids as u64 offsets within a ledger: `-1` (before the first entry) is 0 entries.
        let through = |entry_id: i64| u64::try_from(entry_id.saturating_add(1)).unwrap_or(0);
        self.ledgers
            .iter()
            .map(|l| {
                let lo = if l.id < after.ledger_id {
                    l.entries
                } else if l.id == after.ledger_id {
                    through(after.entry_id).min(l.entries)
                } else {
                    0
                };
                let hi = if l.id < upto.ledger_id {
                    l.entries
                } else if l.id == upto.ledger_id {
                    through(upto.entry_id).min(l.entries)
                } else {
                    0
                };
                hi.saturating_sub(lo)
            })
            .fold(0, u64::saturating_add)
    }

    /// Entries in all ledgers, saturating at `u64::MAX`.
    pub fn entry_count(&self) -> u64 {
        self.ledgers
            .iter()
            .map(|l| l.entries)
            .fold(0, u64::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            ledgers: vec![
                LedgerInfo {
                    id: 3,
                    entries: 5,
                    bytes: 0,
                },
                LedgerInfo {
                    id: 4,
                    entries: 0,
                    bytes: 0,
                },
                LedgerInfo {
                    id: 7,
                    entries: 2,
                    bytes: 0,
                },
                LedgerInfo {
                    id: 9,
                    entries: 0,
                    bytes: 0,
                },
            ],
        }
    }

    #[test]
    fn positions_walk_across_ledgers() {
        let l = layout();
        assert_eq!(
            l.normalize(Position::new(3, 5)),
            Position::new(7, 0),
            "past the end skips the empty ledger 4"
        );
        assert_eq!(
            l.normalize(Position::new(5, 0)),
            Position::new(7, 0),
            "a deleted ledger"
        );
        assert_eq!(l.next_after(Position::new(7, 1)), Position::new(9, 0));
        assert_eq!(l.end(), Position::new(9, 0));
        assert_eq!(l.last_entry(), Some(Position::new(7, 1)));
        assert_eq!(l.before(Position::new(3, 0)), Position::new(3, -1));
        assert_eq!(
            l.runs_from(Position::new(3, 3), 10),
            vec![(3, 3, 4), (7, 0, 1)]
        );
        assert_eq!(
            l.runs_from(Position::new(3, 3), 3),
            vec![(3, 3, 4), (7, 0, 0)]
        );
        assert_eq!(
            l.count_between(Position::new(3, -1), Position::new(7, 1)),
            7
        );
        assert_eq!(l.count_between(Position::new(3, 2), Position::new(7, 0)), 3);
    }

    #[test]
    fn previous_is_pulsars_get_previous_position() {
        let l = layout();
        assert_eq!(l.previous(Position::new(7, 1)), Position::new(7, 0));
        assert_eq!(
            l.previous(Position::new(7, 0)),
            Position::new(3, 4),
            "the last entry of the nearest earlier ledger with one (4 is empty)"
        );
        assert_eq!(l.previous(Position::new(9, 0)), Position::new(7, 1));
        assert_eq!(l.previous(Position::new(3, 0)), Position::new(3, -1));
        let empty_first = Layout {
            ledgers: vec![
                LedgerInfo {
                    id: 4,
                    entries: 0,
                    bytes: 0,
                },
                LedgerInfo {
                    id: 9,
                    entries: 0,
                    bytes: 0,
                },
            ],
        };
        assert_eq!(
            empty_first.previous(Position::new(9, 0)),
            Position::new(4, -1)
        );
    }

    #[test]
    fn counts_saturate_over_ledgers_longer_than_u64_in_total() {
        let huge = |id| LedgerInfo {
            id,
            entries: u64::MAX / 2,
            bytes: 0,
        };
        let l = Layout {
            ledgers: vec![huge(1), huge(2), huge(3)],
        };
        assert_eq!(l.entry_count(), u64::MAX);
        let last = l.last_entry().unwrap();
        assert_eq!(last, Position::new(3, i64::MAX - 1));
        assert_eq!(l.count_between(Position::new(1, -1), last), u64::MAX);
        assert_eq!(
            l.count_between(Position::new(2, -1), last),
            u64::MAX - 1,
            "two ledgers of u64::MAX / 2"
        );
        assert_eq!(l.end(), Position::new(3, i64::MAX));
    }

    #[test]
    fn the_current_ledger_shortcut_finds_what_the_search_finds() {
        let mut l = layout();
        for _ in 0..2 {
            for id in -1..12 {
                let searched = l.ledgers.binary_search_by_key(&id, |x| x.id);
                assert_eq!(l.index_of(id), searched, "ledger {id}");
            }
            l.ledgers.truncate(1); // one ledger: the current one is also the first
        }
    }
}
