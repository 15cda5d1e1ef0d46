//! A cache that keeps nothing: every read misses. What a pass runs that only records the trace's
//! requests (Belady's first pass, the request export), where no cache decision may change them.

use super::{CacheStrategy, EntryKey, StrategyCounters};

#[derive(Debug, Default, Clone, Copy)]
pub struct NoCache;

impl CacheStrategy for NoCache {
    fn insert(&mut self, _now_ns: u64, _key: EntryKey, _size: u32, _expected_reads: i32) {}

    fn read(&mut self, _now_ns: u64, _key: EntryKey) -> bool {
        false
    }

    fn on_ledger_deleted(&mut self, _topic: u32, _ledger: i64) {}

    fn cached_bytes(&self) -> u64 {
        0
    }

    fn counters(&self) -> StrategyCounters {
        StrategyCounters::default()
    }

    fn contains(&self, _key: EntryKey) -> bool {
        false
    }
}
