//! Cache designs the replay engine compares, behind one trait. The engine decides what happens
//! (publishes, reads, redeliveries, who is active); a strategy decides what stays in memory.

mod belady;
mod legacy;
mod lru;
mod pip430;
mod segmented;

pub use belady::{Belady, FutureReads};
pub use legacy::Legacy;
pub use lru::Lru;
pub use pip430::Pip430;
pub use segmented::Segmented;

use crate::position::Position;

/// An entry of a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryKey {
    pub topic: u32,
    pub position: Position,
}

/// Counters a strategy keeps of its own decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StrategyCounters {
    pub evicted_entries: u64,
    pub requeues: u64,
}

pub trait CacheStrategy: Send {
    /// An entry was published; `active_cursors` are connected to the topic, and
    /// `within_grace` says the last one left recently (PIP-430's continue-caching window).
    fn on_publish(
        &mut self,
        now_ns: u64,
        key: EntryKey,
        size: u32,
        active_cursors: u32,
        within_grace: bool,
    );
    /// A cursor wants the entry; true if the cache serves it (a delivered copy is released at once).
    fn read(&mut self, now_ns: u64, key: EntryKey) -> bool;
    /// Storage returned an entry for a reader with `cursors_at_or_before` active cursors at or
    /// before it (itself included when active).
    fn on_storage_read(&mut self, now_ns: u64, key: EntryKey, size: u32, cursors_at_or_before: u32);
    /// The entry was queued for redelivery.
    fn on_redeliver(&mut self, _key: EntryKey) {}
    /// The slowest active reader of a topic moved (legacy invalidation uses this).
    fn on_slowest_reader(&mut self, _topic: u32, _slowest: Option<Position>) {}
    /// A ledger was deleted.
    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64);
    /// The broker's periodic eviction task ran at `now_ns`.
    fn tick(&mut self, _now_ns: u64) {}
    fn cached_bytes(&self) -> u64;
    fn counters(&self) -> StrategyCounters;
    /// Whether the entry is cached (no side effects; for the memory model).
    fn contains(&self, key: EntryKey) -> bool;
}
