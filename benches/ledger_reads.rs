//! Sequential tailing reads: 10 active cursors follow a producer over 1,000,000 published 1 KiB
//! entries (published in rounds of 1,000; after each round every cursor reads 10 batches of 100).
//! Reports entries read per second through the Rust API; `benches/ledger_reads.py` does the same
//! through Python batch reads (`read_data`) and prints the ratio.

#![allow(clippy::print_stdout, reason = "a bench reports its figures on stdout")]

#[path = "support.rs"]
mod support;

use ledgercache::broker::ledger::{LedgerConfig, ManagedLedger, ReadOutcome, StartAt};
use ledgercache::broker::storage::{MemoryStorage, StorageHandle};
use ledgercache::{CacheConfig, EntryCacheManager, Payload, SettingValue, SystemClock};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ENTRIES: usize = 1_000_000;
const CURSORS: usize = 10;
const ROUND: usize = 1_000;
const BATCH: u64 = 100;

fn run() -> (Duration, u64, u64) {
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(256 << 20))
        .unwrap();
    let manager = EntryCacheManager::new(cfg, Arc::new(SystemClock), false).unwrap();
    let ml = ManagedLedger::open(
        "t",
        &manager,
        StorageHandle::new(Arc::new(MemoryStorage::new())),
        LedgerConfig::default(),
    )
    .unwrap();
    let cursors: Vec<_> = (0..CURSORS)
        .map(|i| {
            ml.open_cursor(&format!("sub-{i}"), StartAt::Latest, true)
                .unwrap()
        })
        .collect();
    let payload = Payload::from(vec![7u8; 1024]);
    let mut read_time = Duration::ZERO;
    let mut read = 0u64;
    for _ in 0..ENTRIES / ROUND {
        for _ in 0..ROUND {
            ml.add_entry(payload.clone()).unwrap();
        }
        let start = Instant::now();
        for c in &cursors {
            for _ in 0..ROUND as u64 / BATCH {
                if let ReadOutcome::Delivered(entries) = c.read_entries(BATCH).unwrap() {
                    for e in &entries {
                        e.release();
                    }
                    read += entries.len() as u64;
                }
            }
        }
        read_time += start.elapsed();
    }
    (read_time, read, ml.storage_stats().read_ops)
}

fn main() {
    let rounds = support::rounds(3);
    let (t, read, storage_reads) = support::best_by(rounds, |r| r.0, run);
    println!(
        "ledger reads (Rust): {CURSORS} tailing cursors x {ENTRIES} entries of 1 KiB, batches of {BATCH}: {:.2} M entries/s ({read} entries, {storage_reads} storage reads), best of {rounds}",
        read as f64 / t.as_secs_f64() / 1e6
    );
}
