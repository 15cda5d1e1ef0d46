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
//! Which of these happen is decided by the broker read flow ([`crate::read_flow`]), which the replay
//! lab drives too: with `eviction_by_expected_read_count` off the ledger behaves as Pulsar did
//! before PIP-430 (no read counters, storage reads cached only for cursors 4.0 marks, the cache
//! invalidated up to the slowest active cursor, backlogged cursors inactive, ranges served from the
//! cache only when all of them is there).

pub(crate) mod acked;
pub(crate) mod cursor;
mod durable;
pub(crate) mod layout;
pub mod rollover;

pub use cursor::{CursorStats, SkipMode};
pub use layout::LedgerInfo;

use crate::clock::SharedClock;
use crate::cursors::java_hash_map::java_string_hash;
use crate::entry::{CachedEntry, Payload};
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::manager::{EntryCache, EntryCacheManager};
use crate::position::Position;
use crate::read_count::{ReadCount, ReadCountHandler};
use crate::read_flow::inflight::{Admission, ReadPermits, ReadsLimiter};
use crate::read_flow::{
    plan_storage_reads, Context, CursorActivity, EntryRange, Invalidation, ReadFlow, ReadKind,
    RedeliveryReason, StorageReadAdmission,
};
use crate::storage::{ReadLatency, StorageHandle, StorageStats};
use acked::unacked_runs;
use cursor::{
    mark_delete_after_ledger_deleted, mark_delete_allowed, nth_entry_after, nth_unacked_after,
    read_position_after_read, CursorState,
};
use layout::Layout;
use parking_lot::Mutex;
use rollover::{OpenLedger, Rollover};
use std::collections::VecDeque;
use std::sync::Arc;

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

/// A read of `positions` asks the reads-in-flight limiter for permits, estimated from the
/// average entry of the first position's ledger: its permits, whether it reads now, or why it
/// fails (see [`ReadPermits::acquire`]).
fn admit(
    limiter: &Arc<ReadsLimiter>,
    layout: &Layout,
    positions: &[Position],
    now_only: bool,
) -> (Option<ReadPermits>, bool, Option<Error>) {
    let average = positions
        .first()
        .and_then(|p| layout.get(p.ledger_id))
        .filter(|l| l.entries > 0 && l.bytes > 0)
        .map(|l| l.bytes / l.entries);
    match ReadPermits::acquire(limiter, positions.len() as u64, average, !now_only) {
        Ok((permits, Admission::Go(_))) => (Some(permits), true, None),
        Ok((permits, Admission::Wait)) => (Some(permits), false, None),
        Err(e) => (None, false, Some(e)),
    }
}

/// What a completed read produced.
#[derive(Debug)]
pub enum ReadOutcome {
    /// The entries, in position order; each consumes one expected read when released.
    Delivered(Vec<CachedEntry>),
    /// The cursor's epoch moved on while the read was in flight; nothing was delivered.
    Discarded,
}

/// Identifies a started read until its result is taken. It is a plain id: the read, and the
/// reads-in-flight permits it holds, stay in the ledger until [`ManagedLedger::take_read`] takes
/// its outcome, so a caller who drops the id without taking the outcome must call
/// [`ManagedLedger::discard_read`], or later reads wait for permits that never come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadId(u64);

struct ReadOp {
    cursor: u32,
    kind: ReadKind,
    epoch: u32,
    positions: Vec<Position>,
    entries: Vec<Option<CachedEntry>>,
    waiting: usize,
    retried: bool,
    outcome: Option<Result<ReadOutcome>>,
    /// The runs not read yet, in order: a sequential read reads one ledger's run at a time.
    units: VecDeque<(i64, i64, i64)>,
    /// The runs of the step under way: what a failed sub-read falls back to reading whole.
    step: Vec<(i64, i64, i64)>,
    /// Its storage reads complete at once and join no storage read that completes later.
    now_only: bool,
    /// A storage read of the step under way failed after the retry (not the first step's).
    step_failed: bool,
    /// Where a sequential read whose last window was all acknowledged leaves its cursor.
    skip_to: Option<Position>,
    /// Its reads-in-flight permits (given back when the read is taken), or its place in their
    /// queue.
    permits: Option<ReadPermits>,
}

/// Where `p` is among a read's positions. They are in position order without repeats (a
/// sequential read's runs, a replay read's queue order), so a read of `n` entries costs
/// `O(n log n)` to fill, not `O(n^2)`.
fn slot_of(positions: &[Position], p: Position) -> Option<usize> {
    positions.binary_search(&p).ok()
}

/// A storage read in flight; several reads may wait for it.
struct PendingRead {
    seq: u64,
    ledger: i64,
    first: i64,
    last: i64,
    complete_at: u64,
    /// The cursor whose read issued it: expected reads are counted from its position.
    reader: u32,
    /// Whether what it returns is cached, as known when it was issued.
    admission: StorageReadAdmission,
    result: Result<Vec<Payload>>,
    /// The reads waiting for it, each with the entries of it that read takes.
    waiters: Vec<(u64, EntryRange)>,
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
    recovered_cursors: crate::fast_hash::FastSet<u32>,
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

    /// Completes every storage read due by now, in (completion time, start) order; returns how many
    /// reads finished.
    pub fn poll(&self) -> usize {
        let mut st = self.inner.state.lock();
        let failed = self.start_permitted(&mut st);
        failed + self.complete_due(&mut st, self.inner.clock.now_ns())
    }

    /// Starts the reads whose permits came, from when they came, and fails those that waited
    /// past the timeout; returns how many failed.
    fn start_permitted(&self, st: &mut State) -> usize {
        let mut waiting: Vec<u64> = st
            .ops
            .iter()
            .filter(|(_, op)| op.permits.as_ref().is_some_and(ReadPermits::is_waiting))
            .map(|(id, _)| *id)
            .collect();
        // In the order they were started (the map's order is arbitrary).
        waiting.sort_unstable();
        let mut failed = 0;
        for id in waiting {
            let op = st.ops.get_mut(&id).expect("a waiting read");
            match op.permits.as_mut().and_then(ReadPermits::poll) {
                Some(Ok(at)) => self.continue_read(st, id, at),
                Some(Err(e)) => {
                    op.outcome = Some(Err(e));
                    failed += 1;
                }
                None => {}
            }
        }
        failed
    }

    /// Whether a started read has finished.
    pub fn is_read_done(&self, id: ReadId) -> bool {
        self.inner
            .state
            .lock()
            .ops
            .get(&id.0)
            .is_some_and(|op| op.outcome.is_some())
    }

    /// The outcome of a finished read (taken: a second call returns `None`); `None` while it runs.
    pub fn take_read(&self, id: ReadId) -> Option<Result<ReadOutcome>> {
        let mut st = self.inner.state.lock();
        st.ops.get(&id.0)?.outcome.as_ref()?;
        st.ops.remove(&id.0).and_then(|op| op.outcome)
    }

    /// Forgets a started read, finished or not, whose outcome nobody will take: its permits go
    /// back to the reads-in-flight limiter (or its place in their queue is given up), and the
    /// storage reads it waits for complete for the other reads waiting on them. Returns whether
    /// the read was there (it was not if its outcome was taken or it was discarded before).
    pub fn discard_read(&self, id: ReadId) -> bool {
        let op = self.inner.state.lock().ops.remove(&id.0);
        // Dropped after the ledger's lock is let go: its entries release their expected reads
        // into the cache and its permits go back to the limiter, neither of which needs the ledger.
        op.is_some()
    }

    /// Reads in flight (started, not finished).
    pub fn reads_in_flight(&self) -> usize {
        self.inner
            .state
            .lock()
            .ops
            .values()
            .filter(|op| op.outcome.is_none())
            .count()
    }

    /// Moves an active cursor to where the read flow tracks it (its read position, or the entry
    /// after its mark-delete position), then drops what the flow says no active cursor will read
    /// when the slowest active position changed (as 4.0's `updateActiveCursor`).
    fn track(&self, st: &mut State, id: u32) {
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
    fn check_active(&self, st: &mut State, id: u32) {
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

    fn invalidate(&self, st: &mut State) {
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

    /// A replay read of positions that hold no entry fails, as Pulsar's `asyncReplayEntries` fails
    /// reading a ledger that does not exist: the error names them, and they leave the replay queue
    /// so that the next replay read proceeds. Looks at the `n` unacknowledged positions the read
    /// would take (acknowledged ones are passed over, as Pulsar filters them before reading).
    fn drop_missing_replays(st: &mut State, cursor: u32, n: u64) -> Result<()> {
        let State {
            cursors, layout, ..
        } = st;
        let Some(c) = cursors.get_mut(cursor as usize).and_then(|c| c.as_mut()) else {
            return Ok(());
        };
        let missing: Vec<Position> = c
            .replay
            .iter()
            .filter(|p| !c.is_acked(**p))
            .take(usize::try_from(n).unwrap_or(usize::MAX))
            .filter(|p| !layout.contains(**p))
            .copied()
            .collect();
        let Some(first) = missing.first() else {
            return Ok(());
        };
        for p in &missing {
            c.replay.remove(p);
        }
        let why = match layout.get(first.ledger_id) {
            Some(_) => "past the ledger's last entry",
            None => "its ledger does not exist (deleted, or never created)",
        };
        Err(Error::not_found(
            "entry",
            format!(
                "{first} in the replay queue of cursor {:?}: {why}; {} position(s) with no entry left the queue, read again to replay the rest",
                c.name,
                missing.len()
            ),
        ))
    }

    /// Starts a read for `cursor`. With `now_only`, its storage reads complete at once (latency is
    /// not simulated) and it joins no in-flight read that completes later.
    fn start_read(&self, cursor: u32, kind: ReadKind, n: u64, now_only: bool) -> Result<ReadId> {
        // A read holds a slot per entry it returns: capped, so that a count a caller means as
        // "all of them" costs what the entries cost, not what `n` says (a store can declare
        // ledgers of 2**63 entries).
        let n = n.min(MAX_ENTRIES_PER_READ);
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        if kind == ReadKind::Replay {
            Self::drop_missing_replays(&mut st, cursor, n)?;
        }
        let c = st
            .cursors
            .get(cursor as usize)
            .and_then(|c| c.as_ref())
            .ok_or_else(|| Error::not_found("cursor", cursor))?;
        if inner.config.cursor_epochs && c.epoch_increase_running {
            return Err(Error::CursorModifying(c.name.clone()));
        }
        let epoch = c.epoch;
        let (positions, units, skip_to): (Vec<Position>, VecDeque<_>, _) = match kind {
            ReadKind::Sequential => {
                let layout = &st.layout;
                let mut runs = Vec::new();
                let skip_to = unacked_runs(&c.acked, c.read_position, n, layout, layout, &mut runs);
                let positions = runs
                    .iter()
                    .flat_map(|&(l, first, last)| (first..=last).map(move |e| Position::new(l, e)))
                    .collect();
                (positions, runs.into(), skip_to)
            }
            ReadKind::Replay => {
                let positions: Vec<Position> = c
                    .replay
                    .iter()
                    .filter(|p| !c.is_acked(**p))
                    .take(usize::try_from(n).unwrap_or(usize::MAX))
                    .copied()
                    .collect();
                // Pulsar's `asyncReplayEntries` reads each position on its own.
                let units = positions
                    .iter()
                    .map(|p| (p.ledger_id, p.entry_id, p.entry_id))
                    .collect();
                (positions, units, None)
            }
        };
        let (permits, go, failed) = admit(&inner.limiter, &st.layout, &positions, now_only);
        let op_id = st.next_op;
        st.next_op += 1;
        st.ops.insert(
            op_id,
            ReadOp {
                cursor,
                kind,
                epoch,
                entries: (0..positions.len()).map(|_| None).collect(),
                positions,
                waiting: 0,
                retried: false,
                outcome: failed.map(Err),
                units,
                step: Vec::new(),
                now_only,
                step_failed: false,
                skip_to,
                permits,
            },
        );
        if go {
            let now = self.inner.clock.now_ns();
            self.continue_read(&mut st, op_id, now);
        }
        Ok(ReadId(op_id))
    }

    /// Takes a read on once its step under way has all its entries: issues the next step, or
    /// finalizes the read when none is left. A sequential read reads one ledger's run at a time and
    /// moves its cursor's read position past each before reading the next (Pulsar's `OpReadEntry`
    /// sets the read position when a ledger's entries arrive, then `checkReadCompletion` reads the
    /// next ledger), so the next ledger's lookup sees what this one's storage reads cached or
    /// evicted, and its storage read counts the cursors at or before the moved reader. A replay read
    /// issues all its positions at once, as `asyncReplayEntries` does.
    ///
    /// `now` is when the step before completed: the next ledger's read starts then, so a read
    /// spanning ledgers completes in one poll once the clock has passed all of their latencies.
    fn continue_read(&self, st: &mut State, op_id: u64, now: u64) {
        loop {
            let op = st.ops.get_mut(&op_id).expect("continuing a known read");
            if op.waiting > 0 || op.outcome.is_some() {
                return;
            }
            if let Some(&(ledger, _, last)) = op.step.last() {
                let through = Position::new(ledger, last);
                let read =
                    slot_of(&op.positions, through).expect("a step reads requested positions");
                if op.step_failed {
                    // A later ledger's storage read failed: the read delivers the ledgers before
                    // it, as `OpReadEntry.internalReadEntriesFailed` completes with the entries
                    // it has (the first ledger's failure fails the read).
                    let first = op.step.first().map(|&(l, f, _)| Position::new(l, f));
                    if let Some(from) = first.and_then(|f| slot_of(&op.positions, f)) {
                        op.entries[from..].iter_mut().for_each(|e| *e = None);
                    }
                    op.units.clear();
                } else if !op.entries[..=read].iter().all(Option::is_some) {
                    // A storage read came back short: the read ends at the gap (see `finalize`).
                    op.units.clear();
                } else if op.kind == ReadKind::Sequential && !op.units.is_empty() {
                    self.read_past(st, op_id, through);
                }
            }
            let op = st.ops.get_mut(&op_id).expect("continuing a known read");
            if op.units.is_empty() {
                self.finalize(st, op_id);
                return;
            }
            let step: Vec<_> = match op.kind {
                ReadKind::Sequential => op.units.pop_front().into_iter().collect(),
                ReadKind::Replay => op.units.drain(..).collect(),
            };
            op.retried = false;
            // One for issuing: the step cannot finish while its units are being issued.
            op.waiting += 1;
            for &unit in &step {
                self.read_unit(st, op_id, unit, now);
            }
            let op = st.ops.get_mut(&op_id).expect("continuing a known read");
            op.step = step;
            op.waiting -= 1;
        }
    }

    /// Between the ledgers of a sequential read: its cursor's read position moves past `through`,
    /// the last entry read so far. A read that its cursor's epoch outdated reads no further (it
    /// will be discarded); without epochs it moves the cursor as a broker's read does.
    fn read_past(&self, st: &mut State, op_id: u64, through: Position) {
        let State {
            cursors,
            layout,
            ops,
            ..
        } = &mut *st;
        let op = ops.get_mut(&op_id).expect("known read");
        let cursor = op.cursor;
        let Some(c) = cursors.get_mut(cursor as usize).and_then(|c| c.as_mut()) else {
            // Closed: `finalize` reports it.
            op.units.clear();
            return;
        };
        if self.inner.config.cursor_epochs && c.is_epoch_outdated(op.epoch) {
            op.units.clear();
            return;
        }
        c.read_through(through, layout);
        self.track(st, cursor);
    }

    /// Reads one run of a read: its cached entries from the cache, then each contiguous gap as one
    /// storage read (the whole run when the design serves ranges all or nothing and something is
    /// missing).
    fn read_unit(
        &self,
        st: &mut State,
        op_id: u64,
        (ledger, first, last): (i64, i64, i64),
        now: u64,
    ) {
        let inner = &*self.inner;
        let (from, to) = (Position::new(ledger, first), Position::new(ledger, last));
        let found = if inner.flow.all_or_nothing_ranges() {
            inner
                .cache
                .get_range_if_complete(from, to)
                .unwrap_or_default()
        } else {
            inner.cache.get_range(from, to)
        };
        let op = st.ops.get_mut(&op_id).expect("reading for a known read");
        let (cursor, kind, now_only) = (op.cursor, op.kind, op.now_only);
        let base = slot_of(&op.positions, from).expect("unit start is requested");
        let mut gaps = Vec::new();
        let mut found = found.into_iter().peekable();
        let mut gap_start: Option<i64> = None;
        for e in first..=last {
            let slot = base + (e - first) as usize;
            if found.peek().is_some_and(|x| x.position().entry_id == e) {
                op.entries[slot] = found.next();
                if let Some(g) = gap_start.take() {
                    gaps.push((g, e - 1));
                }
            } else if gap_start.is_none() {
                gap_start = Some(e);
            }
        }
        if let Some(g) = gap_start {
            gaps.push((g, last));
        }
        for (first, last) in gaps {
            self.read_from_storage(st, op_id, cursor, kind, ledger, first, last, now, now_only);
        }
    }

    /// Reads `first..=last` from storage for read `op_id`: it waits for the storage reads under
    /// way that share entries with it and issues storage reads of the rest (the rule in
    /// [`plan_storage_reads`]). A read that completes at once (`now_only`) joins only reads due by
    /// `now`, and one that will fail none.
    #[allow(clippy::too_many_arguments)]
    fn read_from_storage(
        &self,
        st: &mut State,
        op_id: u64,
        reader: u32,
        kind: ReadKind,
        ledger: i64,
        first: i64,
        last: i64,
        now: u64,
        now_only: bool,
    ) {
        // In the order they were issued (completions reorder `pending`).
        let mut under_way: Vec<(u64, usize, EntryRange)> = st
            .pending
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.ledger == ledger && p.result.is_ok() && (!now_only || p.complete_at <= now)
            })
            .map(|(i, p)| (p.seq, i, (p.first, p.last)))
            .collect();
        under_way.sort_unstable_by_key(|&(seq, _, _)| seq);
        let plan = plan_storage_reads(
            under_way.into_iter().map(|(_, i, range)| (i, range)),
            (first, last),
        );
        let mut waits = 0;
        // One wait for each part: a read whose gaps (between cache hits) meet one storage read
        // takes only those gaps' entries of it.
        for (i, served) in plan.joined {
            st.pending[i].waiters.push((op_id, served));
            waits += 1;
        }
        let admission = self
            .inner
            .flow
            .on_storage_read_issued(kind, &st.activity, reader);
        for (first, last) in plan.issued {
            let result = self.inner.storage.read(ledger, first, last);
            let latency = match (&result, now_only) {
                (Ok(entries), false) => self.inner.config.read_latency.of(
                    entries.len() as u64,
                    entries.iter().map(|e| e.len() as u64).sum(),
                ),
                _ => 0,
            };
            let seq = st.next_seq;
            st.next_seq += 1;
            st.pending.push(PendingRead {
                seq,
                ledger,
                first,
                last,
                complete_at: now + latency,
                reader,
                admission,
                result,
                waiters: vec![(op_id, (first, last))],
            });
            waits += 1;
        }
        st.ops
            .get_mut(&op_id)
            .expect("reading for a known read")
            .waiting += waits;
    }

    fn complete_due(&self, st: &mut State, now: u64) -> usize {
        let mut finished = 0;
        while let Some(i) = Self::next_due(st, now) {
            let p = st.pending.swap_remove(i);
            finished += self.complete_storage_read(st, p);
        }
        finished
    }

    /// The storage read that completes first among those due by `now`.
    fn next_due(st: &State, now: u64) -> Option<usize> {
        st.pending
            .iter()
            .enumerate()
            .filter(|(_, p)| p.complete_at <= now)
            .min_by_key(|(_, p)| (p.complete_at, p.seq))
            .map(|(i, _)| i)
    }

    /// Caches what a storage read returned and hands copies to the reads waiting for it.
    fn complete_storage_read(&self, st: &mut State, p: PendingRead) -> usize {
        let inner = &*self.inner;
        // What the reads waiting for it do next, they do when it completed.
        let now = p.complete_at;
        let entries = match p.result {
            Ok(payloads) => {
                let admitted = p.admission.on_completion(&mut st.activity, p.reader);
                let (cache_it, expected) = (admitted.is_some(), admitted.unwrap_or(0));
                Ok(payloads
                    .into_iter()
                    .zip(p.first..=p.last)
                    .map(|(payload, e)| {
                        let position = Position::new(p.ledger, e);
                        if cache_it {
                            let size = payload.len() as u32;
                            inner.cache.insert_for_reader(
                                position,
                                payload,
                                ReadCountHandler::new(expected),
                                size,
                            )
                        } else {
                            CachedEntry::uncached(position, payload)
                        }
                    })
                    .collect::<Vec<_>>())
            }
            Err(e) => Err(e),
        };
        let mut finished = 0;
        for (op_id, (take_from, take_to)) in p.waiters {
            let Some(op) = st.ops.get_mut(&op_id) else {
                continue;
            };
            match &entries {
                Ok(entries) => {
                    let taken = entries
                        .iter()
                        .filter(|e| (take_from..=take_to).contains(&e.position().entry_id));
                    for e in taken {
                        if let Some(slot) = slot_of(&op.positions, e.position()) {
                            op.entries[slot] = Some(e.copy());
                        }
                    }
                    op.waiting -= 1;
                }
                Err(_) if !op.retried => {
                    // A failed sub-read falls back to one full read of each run of the step (as
                    // `RangeEntryCacheImpl` reads a ledger's whole range when a partial read fails).
                    op.retried = true;
                    let step = op.step.clone();
                    for (slot, p) in op.positions.iter().enumerate() {
                        if step.iter().any(|&(l, first, last)| {
                            p.ledger_id == l && (first..=last).contains(&p.entry_id)
                        }) {
                            op.entries[slot] = None;
                        }
                    }
                    let (cursor, kind) = (op.cursor, op.kind);
                    op.waiting -= 1;
                    for (ledger, first, last) in step {
                        self.read_from_storage(
                            st, op_id, cursor, kind, ledger, first, last, now, true,
                        );
                    }
                    continue;
                }
                Err(err) => {
                    op.waiting -= 1;
                    let first_step = op.step.first().map(|&(l, f, _)| Position::new(l, f))
                        == op.positions.first().copied();
                    if first_step {
                        op.outcome = Some(Err(err.clone()));
                        continue;
                    }
                    op.step_failed = true;
                }
            }
            if op.waiting == 0 && op.outcome.is_none() {
                self.continue_read(st, op_id, now);
                if st.ops.get(&op_id).is_some_and(|op| op.outcome.is_some()) {
                    finished += 1;
                }
            }
        }
        finished
    }

    /// Delivers a read whose entries are all in, or discards it if its cursor's epoch moved on.
    fn finalize(&self, st: &mut State, op_id: u64) {
        let inner = &*self.inner;
        let op = st.ops.get_mut(&op_id).expect("finalizing a known read");
        let (cursor, kind, epoch) = (op.cursor, op.kind, op.epoch);
        let (wanted, skip_to) = (op.positions.len(), op.skip_to);
        // Every entry is in unless a storage read came back short (it found damage after its
        // first entry, see `Storage::read`): then the entries before the gap are delivered, and
        // the cursor's next read starts at the damaged entry and reports it.
        let entries: Vec<CachedEntry> = op.entries.iter_mut().map_while(|e| e.take()).collect();
        let layout = st.layout.clone();
        let Some(c) = st.cursors.get_mut(cursor as usize).and_then(|c| c.as_mut()) else {
            st.ops.get_mut(&op_id).expect("known").outcome =
                Some(Err(Error::not_found("cursor", cursor)));
            return;
        };
        let outcome = if inner.config.cursor_epochs && c.is_epoch_outdated(epoch) {
            c.discarded_reads += 1;
            ReadOutcome::Discarded
        } else {
            if let (ReadKind::Sequential, Some(last)) = (kind, entries.last()) {
                c.read_through(last.position(), &layout);
            }
            if let (Some(to), true) = (skip_to, entries.len() == wanted) {
                c.read_position = read_position_after_read(c.read_position, to, c.mark_delete);
            }
            for e in &entries {
                c.record_delivery(e.position(), kind == ReadKind::Replay);
                if kind == ReadKind::Replay {
                    c.replay.remove(&e.position());
                }
            }
            ReadOutcome::Delivered(entries)
        };
        if matches!(outcome, ReadOutcome::Delivered(_)) && kind == ReadKind::Sequential {
            self.track(st, cursor);
        }
        st.ops.get_mut(&op_id).expect("known").outcome = Some(Ok(outcome));
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

impl ManagedCursor {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn ledger(&self) -> &ManagedLedger {
        &self.ledger
    }

    /// Reads up to `n` entries from the read position and completes at once (storage latency is
    /// not simulated); advances the read position. An empty list at the end of the ledger. At most
    /// [`MAX_ENTRIES_PER_READ`] entries, whatever `n` (each read variant alike).
    pub fn read_entries(&self, n: u64) -> Result<ReadOutcome> {
        self.read_now(ReadKind::Sequential, n)
    }

    /// Starts a read of up to `n` entries; it completes when its storage reads do (see
    /// [`ManagedLedger::poll`]).
    pub fn read_entries_async(&self, n: u64) -> Result<ReadId> {
        self.ledger
            .start_read(self.id, ReadKind::Sequential, n, false)
    }

    /// Reads up to `n` entries of the replay queue, lowest first, at once.
    pub fn read_replay(&self, n: u64) -> Result<ReadOutcome> {
        self.read_now(ReadKind::Replay, n)
    }

    pub fn read_replay_async(&self, n: u64) -> Result<ReadId> {
        self.ledger.start_read(self.id, ReadKind::Replay, n, false)
    }

    fn read_now(&self, kind: ReadKind, n: u64) -> Result<ReadOutcome> {
        let id = self.ledger.start_read(self.id, kind, n, true)?;
        let l = &self.ledger;
        {
            let mut st = l.inner.state.lock();
            let now = l.inner.clock.now_ns();
            l.complete_due(&mut st, now);
        }
        l.take_read(id)
            .expect("a read that does not wait for time completes at once")
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
