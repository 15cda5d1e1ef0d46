//! A managed ledger (one topic partition, Pulsar's `ManagedLedgerImpl`) over a [`Storage`], with its
//! cursors, and the read-count flow of PIP-430 between them and the entry cache:
//!
//! - an added entry is cached with one expected read per active cursor (while some cursor is active,
//!   or within the continue-caching window after the last one left);
//! - a read serves cached entries as copies sharing the entry's read counter, reads each contiguous
//!   missing sub-range from storage once (joining an in-flight read that covers it), and caches what
//!   storage returned with the number of active cursors at or before the reader;
//! - a delivered copy consumes one expected read when released; a replay-queue add adds one.
//!
//! Reads are asynchronous: a read is started, its storage reads complete at `now + latency` on the
//! ledger's clock, and [`ManagedLedger::poll`] completes them in (time, start order), so runs on a
//! manual clock are deterministic. A read carries its cursor's epoch; if the epoch moved on (a seek,
//! reset, rewind, skip or clear-backlog) before it completes, it is discarded (PIP-269).
//!
//! Which of these happen is decided by the broker read flow ([`crate::broker::read_flow`]), which the replay
//! lab drives too: with `eviction_by_expected_read_count` off the ledger behaves as Pulsar did
//! before PIP-430 (no read counters, storage reads cached only for cursors 4.0 marks, the cache
//! invalidated up to the slowest active cursor, backlogged cursors inactive, ranges served from the
//! cache only when all of them is there).

mod activity;
pub(crate) mod cursor;
mod cursor_ops;
mod durable;
mod read;
pub mod rollover;
mod storage_reads;

pub use crate::broker::positions::layout::LedgerInfo;
pub use cursor::{CursorStats, SkipMode};
pub use read::{ReadId, ReadOutcome};

use crate::broker::cursors::java_hash_map::java_string_hash;
use crate::broker::positions::layout::Layout;
use crate::broker::read_flow::{Context, CursorActivity, ReadFlow};
use crate::broker::storage::{ReadLatency, StorageHandle, StorageStats};
use crate::cache::clock::SharedClock;
use crate::cache::entry::Payload;
use crate::cache::fast_hash::FastMap;
use crate::cache::inflight_reads::ReadsLimiter;
use crate::cache::manager::{EntryCache, EntryCacheManager};
use crate::cache::position::Position;
use crate::cache::read_count::ReadCount;
use crate::error::{Error, Result};
use cursor::{mark_delete_after_ledger_deleted, CursorState};
use parking_lot::Mutex;
use read::ReadOp;
use rollover::{OpenLedger, Rollover};
use std::sync::Arc;
use storage_reads::PendingRead;

/// Settings of a managed ledger (beyond the cache's).
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerConfig {
    /// Roll over to a new ledger after this many entries (Pulsar's managedLedgerMaxEntriesPerLedger).
    pub max_entries_per_ledger: u64,
    /// ... or this many bytes (0: no limit; Pulsar's managedLedgerMaxSizePerLedgerMbytes, 2048 MiB).
    pub max_bytes_per_ledger: u64,
    /// ... or once the ledger is this old (0: no limit; managedLedgerMaxLedgerRolloverTimeMinutes,
    /// 240 minutes), and in every case only once it is older than `min_rollover_ms`
    /// (managedLedgerMinLedgerRolloverTimeMinutes, 10 minutes; 0: no minimum). See [`Rollover`].
    pub max_rollover_ms: u64,
    pub min_rollover_ms: u64,
    /// Discard reads whose cursor epoch moved on, and fail reads during an epoch increase (PIP-269).
    pub cursor_epochs: bool,
    /// Simulated storage read latency.
    pub read_latency: ReadLatency,
}

impl LedgerConfig {
    fn rollover(&self) -> Rollover {
        Rollover {
            max_entries: self.max_entries_per_ledger,
            max_bytes: self.max_bytes_per_ledger,
            min_age_ms: self.min_rollover_ms,
            max_age_ms: self.max_rollover_ms,
        }
    }
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            max_entries_per_ledger: rollover::MAX_ENTRIES,
            max_bytes_per_ledger: rollover::MAX_BYTES,
            max_rollover_ms: rollover::MAX_AGE_MS,
            min_rollover_ms: rollover::MIN_AGE_MS,
            cursor_epochs: true,
            read_latency: ReadLatency::default(),
        }
    }
}

/// The most entries one read returns; a caller reads again for more (a broker's dispatcher reads
/// in far smaller batches: `dispatcherMaxReadBatchSize`, 100).
pub const MAX_ENTRIES_PER_READ: u64 = 1 << 20;

/// Where a new cursor starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    Earliest,
    Latest,
    At(Position),
}

struct State {
    layout: Layout,
    /// The ledger taking appends, as far as rolling over goes.
    open_ledger: OpenLedger,
    cursors: Vec<Option<CursorState>>,
    by_name: FastMap<String, u32>,
    activity: CursorActivity,
    ops: FastMap<u64, ReadOp>,
    next_op: u64,
    pending: Vec<PendingRead>,
    next_seq: u64,
    /// Cursors restored from the store and not opened since: their first `open_cursor` sets
    /// whether they are active.
    recovered_cursors: crate::cache::fast_hash::FastSet<u32>,
}

struct Inner {
    name: String,
    cache: Arc<EntryCache>,
    flow: ReadFlow,
    storage: StorageHandle,
    clock: SharedClock,
    config: LedgerConfig,
    state: Mutex<State>,
    limiter: Arc<ReadsLimiter>,
}

impl Drop for Inner {
    /// The ledger created for appends that never came is deleted when the managed ledger goes:
    /// Pulsar deletes it at the next open (`initializeBookKeeper`), which here would leave an
    /// empty segment file behind each open of a `FileStorage` until then.
    fn drop(&mut self) {
        let st = self.state.get_mut();
        if let Some(l) = st.layout.current() {
            if l.entries == 0 {
                let _ = self.storage.delete_ledger(l.id);
            }
        }
    }
}

/// A managed ledger. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct ManagedLedger {
    inner: Arc<Inner>,
}

/// A cursor of a managed ledger.
#[derive(Clone)]
pub struct ManagedCursor {
    ledger: ManagedLedger,
    id: u32,
    name: Arc<str>,
}

impl ManagedLedger {
    /// Opens the managed ledger `name` in `storage`, resuming the ledgers it already has there.
    /// Its entries are cached in `manager`'s cache of the same name.
    pub fn open(
        name: &str,
        manager: &EntryCacheManager,
        storage: StorageHandle,
        config: LedgerConfig,
    ) -> Result<Self> {
        if config.max_entries_per_ledger == 0 {
            return Err(Error::invalid(
                "max_entries_per_ledger",
                "must be at least 1",
            ));
        }
        let loaded_ns = manager.clock().now_ns();
        let mut ledgers: Vec<LedgerInfo> = Vec::new();
        for (id, entries) in storage.ledgers(name)? {
            if entries > 0 {
                ledgers.push(LedgerInfo {
                    id,
                    entries,
                    bytes: 0,
                });
            } else {
                // Pulsar drops the empty ledgers it finds at open
                // (`ManagedLedgerImpl.initializeBookKeeper`); they hold nothing, so a store that
                // cannot delete them (read-only) only keeps a file it would have dropped.
                let _ = storage.delete_ledger(id);
            }
        }
        let mut layout = Layout { ledgers };
        // A broker opening a managed ledger creates the ledger that takes its appends at once (the
        // ones before are closed), so a cursor opened now sits in it: `(L,-1)` / `(L,0)` on a new
        // topic. A read-only store creates none; its appends fail as before.
        let created = match storage.create_ledger(name) {
            Ok(id) => {
                layout.ledgers.push(LedgerInfo {
                    id,
                    entries: 0,
                    bytes: 0,
                });
                true
            }
            Err(Error::Unsupported(_)) => false,
            Err(e) => return Err(e),
        };
        let flow = ReadFlow::new(manager.config(), Context::Library);
        let mut state = State {
            open_ledger: OpenLedger::new(loaded_ns / 1000, !created && layout.current().is_some()),
            layout,
            cursors: Vec::new(),
            by_name: FastMap::default(),
            activity: CursorActivity::new(flow.cursor_tracking(), loaded_ns),
            ops: FastMap::default(),
            next_op: 0,
            pending: Vec::new(),
            next_seq: 0,
            recovered_cursors: Default::default(),
        };
        durable::restore_all(&mut state, &storage, name)?;
        let _ = durable::advance_consumed(&mut state, &storage, name);
        Ok(ManagedLedger {
            inner: Arc::new(Inner {
                name: name.to_string(),
                cache: manager.get_cache(name),
                flow,
                storage,
                clock: manager.clock().clone(),
                config,
                state: Mutex::new(state),
                limiter: manager.reads_limiter().clone(),
            }),
        })
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn cache(&self) -> &Arc<EntryCache> {
        &self.inner.cache
    }

    pub fn storage(&self) -> &StorageHandle {
        &self.inner.storage
    }

    pub fn config(&self) -> &LedgerConfig {
        &self.inner.config
    }

    pub fn storage_stats(&self) -> StorageStats {
        self.inner.storage.stats()
    }

    pub fn ledgers(&self) -> Vec<LedgerInfo> {
        self.inner.state.lock().layout.ledgers.clone()
    }

    /// The last entry written, if any.
    pub fn last_position(&self) -> Option<Position> {
        self.inner.state.lock().layout.last_entry()
    }

    /// Entries written in all ledgers not deleted (saturating at `u64::MAX`: a store can declare
    /// ledgers whose lengths sum past it).
    pub fn entry_count(&self) -> u64 {
        self.inner.state.lock().layout.entry_count()
    }

    /// Cursors the read flow counts as active.
    pub fn active_cursor_count(&self) -> usize {
        self.inner.state.lock().activity.active_count() as usize
    }

    /// Appends an entry to storage, then caches it (PIP-430's add path); returns its position.
    pub fn add_entry(&self, payload: Payload) -> Result<Position> {
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        // A ledger whose cache was removed is closed: refuse before anything is stored, so that
        // a caller who retries after the error does not store the entry twice.
        if inner.cache.is_closed() {
            return Err(Error::Closed(format!(
                "managed ledger {:?} (its entry cache was removed)",
                inner.name
            )));
        }
        let now = inner.clock.now_ns();
        let ledger = match st.layout.current() {
            // A ledger created for an append that then failed is still empty: it takes this one.
            Some(l) if !st.open_ledger.is_full() || l.entries == 0 => l.id,
            _ => {
                let id = inner.storage.create_ledger(&inner.name)?;
                st.layout.ledgers.push(LedgerInfo {
                    id,
                    entries: 0,
                    bytes: 0,
                });
                id
            }
        };
        let entry_id = inner.storage.append(ledger, payload.as_slice())?;
        let info = st
            .layout
            .ledgers
            .last_mut()
            .expect("the current ledger exists");
        info.entries += 1;
        info.bytes += payload.len() as u64;
        let rule = inner.config.rollover();
        st.open_ledger
            .added(&rule, payload.len() as u64, now / 1000);
        if st.open_ledger.is_full() {
            // Pulsar closes a full ledger and creates the next at once
            // (`ledgerClosed` -> `createLedgerAfterClosed`): a cursor that reads past it sits at
            // `(L+1,0)`. The entry is stored: a failed creation is not this add's error; the next
            // add creates the ledger (and reports the failure if it persists).
            if let Ok(id) = inner.storage.create_ledger(&inner.name) {
                st.layout.ledgers.push(LedgerInfo {
                    id,
                    entries: 0,
                    bytes: 0,
                });
                let _ = durable::advance_consumed(&mut st, &inner.storage, &inner.name);
            }
        }
        let position = Position::new(ledger, entry_id);
        if let Some(expected) = inner.flow.on_add(&st.activity, now) {
            let size = payload.len() as u32;
            match inner.cache.insert_counted(
                position,
                payload,
                ReadCount::expecting(expected),
                size,
            ) {
                // The cache was removed while the entry was being stored: the entry is stored and
                // acknowledged; it is only not cached.
                Ok(_) | Err(Error::Closed(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(position)
    }

    /// Opens (or returns) the cursor `name`. A new cursor starts at `start`; one the store kept
    /// (a durable cursor of a `FileStorage`) is recovered where it was instead.
    pub fn open_cursor(&self, name: &str, start: StartAt, active: bool) -> Result<ManagedCursor> {
        let mut st = self.inner.state.lock();
        let known = st.by_name.get(name).copied();
        let known = match known {
            Some(id) => Some(id),
            None => durable::restore_one(&mut st, &self.inner.storage, &self.inner.name, name)?,
        };
        if let Some(id) = known {
            let first_open = st.recovered_cursors.remove(&id);
            drop(st);
            let cursor = self.cursor_handle(id, name);
            if first_open && active {
                cursor.set_active(true)?;
            }
            return Ok(cursor);
        }
        let read_position = match start {
            StartAt::Earliest => st.layout.first(),
            StartAt::Latest => st.layout.end(),
            StartAt::At(p) => st.layout.normalize(p),
        };
        let id = st.cursors.len() as u32;
        let state = CursorState::new(name, read_position, &st.layout, false);
        durable::persist_full(&self.inner.storage, &self.inner.name, &state)?;
        st.cursors.push(Some(state));
        st.by_name.insert(name.to_string(), id);
        st.activity.name(id, java_string_hash(name));
        drop(st);
        let cursor = self.cursor_handle(id, name);
        if active {
            cursor.set_active(true)?;
        }
        Ok(cursor)
    }

    fn cursor_handle(&self, id: u32, name: &str) -> ManagedCursor {
        ManagedCursor {
            ledger: self.clone(),
            id,
            name: Arc::from(name),
        }
    }

    pub fn cursor(&self, name: &str) -> Option<ManagedCursor> {
        let st = self.inner.state.lock();
        st.by_name.get(name).map(|&id| self.cursor_handle(id, name))
    }

    pub fn cursor_names(&self) -> Vec<String> {
        let st = self.inner.state.lock();
        let mut names: Vec<_> = st.by_name.keys().cloned().collect();
        names.sort();
        names
    }

    /// The lowest read position among the cursors (`ManagedCursorContainer.getSlowestReaderPosition`,
    /// over all cursors as `ManagedLedgerImpl.getCursors().getSlowestReaderPosition()`); `None`
    /// without cursors.
    pub fn slowest_reader_position(&self) -> Option<Position> {
        let st = self.inner.state.lock();
        st.cursors
            .iter()
            .flatten()
            .map(|c| st.layout.normalize(c.read_position))
            .min()
    }

    /// The cursor with the lowest mark-delete position (`ManagedLedgerImpl.getSlowestConsumer`,
    /// the cursor `ManagedCursorContainer.getSlowestCursor` holds); the first opened among equals.
    pub fn slowest_consumer(&self) -> Option<ManagedCursor> {
        let st = self.inner.state.lock();
        let (id, c) = st
            .cursors
            .iter()
            .enumerate()
            .filter_map(|(id, c)| Some((id, c.as_ref()?)))
            .min_by_key(|(id, c)| (c.mark_delete, *id))?;
        Some(self.cursor_handle(id as u32, &c.name))
    }

    /// Deletes a ledger (not the current one) and drops its cached entries; cursors in it move on.
    pub fn delete_ledger(&self, ledger_id: i64) -> Result<()> {
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        let Some(index) = st.layout.ledgers.iter().position(|l| l.id == ledger_id) else {
            return Err(Error::not_found("ledger", ledger_id));
        };
        if index + 1 == st.layout.ledgers.len() {
            return Err(Error::invalid(
                "ledger_id",
                format!("{ledger_id} is the current ledger, which takes appends"),
            ));
        }
        inner.storage.delete_ledger(ledger_id)?;
        st.layout.ledgers.remove(index);
        inner.cache.remove_range(
            Position::new(ledger_id, i64::MIN),
            Position::new(ledger_id, i64::MAX),
            true,
        );
        let layout = st.layout.clone();
        for id in 0..st.cursors.len() as u32 {
            let Some(c) = st.cursors[id as usize].as_mut() else {
                continue;
            };
            c.read_position = layout.normalize(c.read_position);
            c.replay.retain(|p| p.ledger_id != ledger_id);
            c.acked.remove_ledger(ledger_id);
            c.mark_delete = mark_delete_after_ledger_deleted(
                c.mark_delete,
                c.read_position,
                ledger_id,
                &layout,
            );
            self.track(&mut st, id);
        }
        Ok(())
    }

    fn with_cursor<T>(
        &self,
        id: u32,
        f: impl FnOnce(&mut CursorState, &Layout) -> Result<T>,
    ) -> Result<T> {
        let mut st = self.inner.state.lock();
        let State {
            cursors, layout, ..
        } = &mut *st;
        let c = cursors
            .get_mut(id as usize)
            .and_then(|c| c.as_mut())
            .ok_or_else(|| Error::not_found("cursor", id))?;
        f(c, layout)
    }
}
