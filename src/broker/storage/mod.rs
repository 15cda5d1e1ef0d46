//! Where a managed ledger's entries live (BookKeeper's place): the [`Storage`] trait, an in-memory
//! store, a file-backed store, and the read accounting and latency model the lab uses.

mod file;
mod memory;

pub use file::{FileOptions, FileStorage, Recovered, SyncPolicy, MAX_ENTRY_BYTES};
pub use memory::MemoryStorage;

use crate::cache::entry::Payload;
use crate::cache::position::Position;
use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// A ledger store. Ledger ids are unique within a store; entries of a ledger are numbered from 0 in
/// append order. Implementations must be safe to share between threads.
pub trait Storage: Send + Sync {
    /// Creates an empty ledger belonging to managed ledger `owner`; returns its id.
    fn create_ledger(&self, owner: &str) -> Result<i64>;
    /// The ledgers of `owner` with their entry counts, oldest first.
    fn ledgers(&self, owner: &str) -> Result<Vec<(i64, u64)>>;
    /// Appends an entry; returns its entry id.
    fn append(&self, ledger_id: i64, data: &[u8]) -> Result<i64>;
    /// Entries `first..=last` of a ledger, in order. A store that finds entry `k > first` damaged
    /// may return `first..k` instead (never fewer than one entry): the reader gets the good
    /// entries before the damage, and its next read, starting at `k`, gets the error.
    fn read(&self, ledger_id: i64, first: i64, last: i64) -> Result<Vec<Payload>>;
    /// Deletes a ledger and its entries.
    fn delete_ledger(&self, ledger_id: i64) -> Result<()>;
    /// A short description for messages and reprs.
    fn describe(&self) -> String;
    /// Whether the store keeps cursors ([`Storage::persist_cursor`]); when false the ledger does
    /// not build the updates at all.
    fn keeps_cursors(&self) -> bool {
        false
    }
    /// Records a change to cursor `update.name()` of managed ledger `owner`. A store that keeps
    /// cursors has it durable, with the guarantee its entries have, when this returns.
    fn persist_cursor(&self, owner: &str, update: &CursorUpdate<'_>) -> Result<()> {
        let _ = (owner, update);
        Ok(())
    }
    /// The cursors of `owner` as persisted, by name.
    fn load_cursors(&self, owner: &str) -> Result<Vec<DurableCursor>> {
        let _ = owner;
        Ok(Vec::new())
    }
}

/// A cursor as a store keeps it: what Pulsar persists of a `ManagedCursorImpl` (its mark-delete
/// position and individually deleted ranges); the read position is derived from them at recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableCursor {
    pub name: String,
    pub mark_delete: Position,
    /// Ranges acknowledged past the mark-delete position, `(ledger, first, last)` inclusive, in
    /// position order.
    pub acked: Vec<(i64, i64, i64)>,
}

/// One change to a durable cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CursorUpdate<'a> {
    /// The whole state (a new cursor, a reset, a skip, a cleared backlog).
    Full(&'a DurableCursor),
    /// An acknowledgement: `acked` (when it is still acknowledged on its own after the call)
    /// joins the ranges, then the mark-delete position moves to `mark_delete` and the ranges up to
    /// it are dropped. Mark-delete positions only move forward this way, so the change is exact
    /// without the ledger's layout.
    Acked {
        name: &'a str,
        acked: Option<Position>,
        mark_delete: Position,
    },
    /// The cursor is deleted.
    Deleted { name: &'a str },
}

impl CursorUpdate<'_> {
    pub fn name(&self) -> &str {
        match self {
            CursorUpdate::Full(c) => &c.name,
            CursorUpdate::Acked { name, .. } | CursorUpdate::Deleted { name } => name,
        }
    }
}

/// Reads served by a store: operations, entries and bytes.
#[derive(Debug, Default)]
pub struct StorageCounters {
    read_ops: AtomicU64,
    read_entries: AtomicU64,
    read_bytes: AtomicU64,
    appends: AtomicU64,
    appended_bytes: AtomicU64,
}

/// A snapshot of [`StorageCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageStats {
    pub read_ops: u64,
    pub read_entries: u64,
    pub read_bytes: u64,
    pub appends: u64,
    pub appended_bytes: u64,
}

impl StorageStats {
    pub fn fields(&self) -> [(&'static str, u64); 5] {
        [
            ("read_ops", self.read_ops),
            ("read_entries", self.read_entries),
            ("read_bytes", self.read_bytes),
            ("appends", self.appends),
            ("appended_bytes", self.appended_bytes),
        ]
    }
}

/// How long a storage read takes in simulated time: `fixed + per_entry x entries + per_kib x KiB`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadLatency {
    pub fixed_ns: u64,
    pub per_entry_ns: u64,
    pub per_kib_ns: u64,
}

impl ReadLatency {
    pub fn of(&self, entries: u64, bytes: u64) -> u64 {
        self.fixed_ns + self.per_entry_ns * entries + self.per_kib_ns * bytes / 1024
    }
}

/// A store together with its read accounting; what managed ledgers hold. Cheap to clone.
#[derive(Clone)]
pub struct StorageHandle {
    store: Arc<dyn Storage>,
    counters: Arc<StorageCounters>,
}

impl StorageHandle {
    pub fn new(store: Arc<dyn Storage>) -> Self {
        StorageHandle {
            store,
            counters: Arc::new(StorageCounters::default()),
        }
    }

    pub fn store(&self) -> &Arc<dyn Storage> {
        &self.store
    }

    pub fn create_ledger(&self, owner: &str) -> Result<i64> {
        self.store.create_ledger(owner)
    }

    pub fn ledgers(&self, owner: &str) -> Result<Vec<(i64, u64)>> {
        self.store.ledgers(owner)
    }

    pub fn append(&self, ledger_id: i64, data: &[u8]) -> Result<i64> {
        let id = self.store.append(ledger_id, data)?;
        self.counters.appends.fetch_add(1, Relaxed);
        self.counters
            .appended_bytes
            .fetch_add(data.len() as u64, Relaxed);
        Ok(id)
    }

    /// Reads and counts one storage operation.
    pub fn read(&self, ledger_id: i64, first: i64, last: i64) -> Result<Vec<Payload>> {
        let entries = self.store.read(ledger_id, first, last)?;
        self.counters.read_ops.fetch_add(1, Relaxed);
        self.counters
            .read_entries
            .fetch_add(entries.len() as u64, Relaxed);
        self.counters
            .read_bytes
            .fetch_add(entries.iter().map(|e| e.len() as u64).sum(), Relaxed);
        Ok(entries)
    }

    pub fn delete_ledger(&self, ledger_id: i64) -> Result<()> {
        self.store.delete_ledger(ledger_id)
    }

    pub fn keeps_cursors(&self) -> bool {
        self.store.keeps_cursors()
    }

    pub fn persist_cursor(&self, owner: &str, update: &CursorUpdate<'_>) -> Result<()> {
        self.store.persist_cursor(owner, update)
    }

    pub fn load_cursors(&self, owner: &str) -> Result<Vec<DurableCursor>> {
        self.store.load_cursors(owner)
    }

    pub fn stats(&self) -> StorageStats {
        let c = &self.counters;
        StorageStats {
            read_ops: c.read_ops.load(Relaxed),
            read_entries: c.read_entries.load(Relaxed),
            read_bytes: c.read_bytes.load(Relaxed),
            appends: c.appends.load(Relaxed),
            appended_bytes: c.appended_bytes.load(Relaxed),
        }
    }
}

/// Checks a read range against a ledger's entry count.
pub(crate) fn check_range(ledger_id: i64, first: i64, last: i64, count: u64) -> Result<()> {
    if first < 0 || first > last || last as u64 >= count {
        return Err(crate::error::Error::invalid(
            "range",
            format!(
                "entries {first}..={last} are not in ledger {ledger_id}, which has {count} entries"
            ),
        ));
    }
    Ok(())
}
