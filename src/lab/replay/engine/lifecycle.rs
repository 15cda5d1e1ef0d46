//! A topic's life on a broker: unloaded (closed) and loaded (its managed ledger opened).
//!
//! Unload follows the broker closing a topic (a graceful shutdown, a bundle unload):
//! `PersistentTopic.close` (master) closes the managed ledger, `ManagedLedgerImpl.asyncClose`
//! closes its cursors (`closeAllCursors`) and `ManagedLedgerFactoryImpl.close(ManagedLedger)`
//! drops its entry cache (`RangeEntryCacheManagerImpl.removeEntryCache` ->
//! `RangeEntryCacheImpl.clear`, whose removals `entriesRemoved` counts as evicted entries: the
//! lab's `invalidated_entries`).
//!
//! Load follows a broker opening the managed ledger (`ManagedLedgerImpl.initialize` reads the
//! ledger list from the metadata store, `initializeBookKeeper` keeps the ledgers that hold entries
//! and creates a new ledger for writes): the trace says which ledgers hold which entries, and the
//! adds that follow name the new ledger. Cursors come back with `open` rows at their read position
//! (`ManagedCursorImpl.recover` / `recoverFromLedger`: mark-delete + 1) and `individual_ack` rows
//! for `individualDeletedMessages`.
//!
//! A row of a topic this broker does not have open: an `add` or an `open` loads it implicitly (so
//! a trace without `load` rows replays as it always did), a `load` loads it; the ops of a cursor
//! the unload forgot fail as those of a cursor never opened; a `delete` removes the ledger as
//! ever; an `unload` of a topic not open here changes nothing.

use super::topic::LedgerEntries;
use super::{CacheStrategy, Replayer};
use crate::broker::positions::layout::LedgerInfo;
use crate::broker::read_flow::CursorActivity;
use crate::error::Error;
use crate::lab::replay::engine::Stopped;
use crate::lab::replay::trace::Event;

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    /// The broker closes the topic: its cached entries leave the cache, its cursors are
    /// forgotten, and its reads under way (deliveries and storage reads) are discarded.
    pub(super) fn on_unload(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        let topic = e.topic;
        let Some(t) = self.topics.get_mut(topic as usize).filter(|t| t.open) else {
            // Not open on this broker: closing it changes nothing.
            return Ok(());
        };
        t.open = false;
        t.unloaded = true;
        let mut ids: Vec<u32> = std::mem::take(&mut t.cursor_ids).into_iter().collect();
        ids.sort_unstable();
        let ledgers: Vec<i64> = t.entries.keys().copied().collect();
        self.metrics.unloads += 1;
        if let Some(s) = self.this_second() {
            s.unloads += 1;
        }
        self.discard_reads_of(topic, now);
        for id in ids {
            self.cursors.forget(topic, id);
        }
        // `RangeEntryCacheImpl.clear`: every entry of the topic, whichever ledger; each design
        // removes them as it removes a deleted ledger's (and counts them the same way).
        for ledger in ledgers {
            self.strategy.on_ledger_deleted(topic, ledger);
        }
        if let Some(m) = &mut self.memory {
            m.on_unload(topic);
        }
        Ok(())
    }

    /// Reads of the topic under way go with it: a closed managed ledger completes them with an
    /// error (`ManagedLedgerAlreadyClosedException`), so they cache and deliver nothing. The
    /// copies and permits they hold are given back now.
    fn discard_reads_of(&mut self, topic: u32, now: u64) {
        for r in &mut self.storage_reads {
            if r.topic == topic {
                r.dropped = true;
            }
        }
        self.storage_read_ranges.retain(|&(t, _), _| t != topic);
        self.discard_waiting_reads(topic);
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|r| r.topic == topic);
        self.in_flight = kept.into();
        for r in gone {
            if r.kept != 0 {
                self.strategy.release_kept(r.kept);
            }
            if let Some(permits) = r.held {
                self.release_permits(permits, now);
            }
        }
    }

    /// The broker opens the topic's managed ledger and finds `count` entries from the row's
    /// position in storage, of mean size `size` (a null position: none). A ledger the topic
    /// already knows stays as it is known; a new one joins the layout in id order, as one run of
    /// entries (no work per entry).
    pub(super) fn on_load(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        self.topic(e.topic);
        if !self.topics[e.topic as usize].open {
            self.metrics.loads += 1;
            if let Some(s) = self.this_second() {
                s.loads += 1;
            }
        }
        self.load_implicitly(e.topic, now);
        let Some(p) = e.position.filter(|_| e.count > 0) else {
            return Ok(());
        };
        let end = p
            .entry_id
            .checked_add(i64::from(e.count))
            .filter(|_| p.entry_id >= 0)
            .ok_or_else(|| {
                Error::invalid(
                    "trace",
                    format!(
                        "row {}, column \"entry_id\": a load's entries {} + {} must be ids in \
                         0..={}",
                        e.row,
                        p.entry_id,
                        e.count,
                        i64::MAX - 1
                    ),
                )
            })?;
        let t = &mut self.topics[e.topic as usize];
        if t.entries.contains_key(&p.ledger_id) {
            return Ok(());
        }
        t.entries
            .insert(p.ledger_id, LedgerEntries::loaded(p.entry_id, end, e.size));
        if let Err(at) = t.layout.index_of(p.ledger_id) {
            t.layout.ledgers.insert(
                at,
                LedgerInfo {
                    id: p.ledger_id,
                    // As the layout counts a ledger's entries: one past the last id.
                    entries: u64::try_from(end).unwrap_or(0),
                    bytes: u64::from(e.count).saturating_mul(u64::from(e.size)),
                },
            );
        }
        Ok(())
    }

    /// A row that needs the topic open (an `add`, an `open`, a `load`) opens it if it is not:
    /// after an unload, the new managed ledger's cursor container starts empty, its
    /// continue-caching window at the load (`ActiveManagedCursorContainerImpl`'s constructor).
    pub(super) fn load_implicitly(&mut self, topic: u32, now: u64) {
        let t = &mut self.topics[topic as usize];
        if t.open {
            return;
        }
        t.open = true;
        if t.unloaded {
            t.activity = CursorActivity::new(self.flow.cursor_tracking(), now);
        }
    }
}
