//! The entries a buffer holds, as runs of consecutive entries.

use super::super::strategy::EntryKey;
use crate::cache::position::Position;
use std::collections::VecDeque;

/// Consecutive entries of one ledger of one topic, `first..=last`.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyRun {
    pub(super) topic: u32,
    pub(super) ledger: i64,
    pub(super) first: i64,
    pub(super) last: i64,
}

impl KeyRun {
    pub(super) fn key(&self, entry: i64) -> EntryKey {
        EntryKey {
            topic: self.topic,
            position: Position::new(self.ledger, entry),
        }
    }
}

/// A buffer's entries in arrival order, as runs of consecutive entries: a socket read brings a
/// topic's next entries and a storage read a ledger's, so nearly every buffer holds one run,
/// kept inline (no allocation, whatever the number of entries).
#[derive(Default)]
pub(super) struct EntryRuns {
    pub(super) first: Option<KeyRun>,
    pub(super) rest: VecDeque<KeyRun>,
}

impl EntryRuns {
    pub(super) fn push(&mut self, topic: u32, ledger: i64, entry: i64) {
        let last = self.rest.back_mut().or(self.first.as_mut());
        match last {
            Some(run)
                if run.topic == topic
                    && run.ledger == ledger
                    && run.last.checked_add(1) == Some(entry) =>
            {
                run.last = entry;
            }
            _ => {
                let run = KeyRun {
                    topic,
                    ledger,
                    first: entry,
                    last: entry,
                };
                if self.first.is_none() {
                    self.first = Some(run);
                } else {
                    self.rest.push_back(run);
                }
            }
        }
    }

    /// Drops the uncached entries in front (entries leave mostly oldest first) and says whether
    /// one is still cached.
    pub(super) fn any_cached(&mut self, mut cached: impl FnMut(EntryKey) -> bool) -> bool {
        while let Some(run) = &mut self.first {
            loop {
                if cached(run.key(run.first)) {
                    return true;
                }
                if run.first == run.last {
                    break;
                }
                run.first += 1;
            }
            self.first = self.rest.pop_front();
        }
        false
    }

    pub(super) fn front(&self) -> Option<EntryKey> {
        self.first.map(|run| run.key(run.first))
    }
}
