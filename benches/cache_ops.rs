//! Cache operations: insert, get hit, get_range of 100, removal-queue push from 2 threads, and the
//! bookkeeping bytes per cached entry beyond the payload.

#![allow(clippy::print_stdout, reason = "a bench reports its figures on stdout")]

#[path = "support.rs"]
mod support;

use ledgercache::cache::removal_queue::{QueueItem, RemovalQueue};
use ledgercache::{CacheConfig, EntryCacheManager, Payload, Position, SettingValue, SystemClock};
use std::hint::black_box;
use std::sync::Arc;

const N: i64 = 1_000_000;

fn manager() -> EntryCacheManager {
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(1 << 40))
        .unwrap();
    EntryCacheManager::new(cfg, Arc::new(SystemClock), false).unwrap()
}

fn main() {
    let rounds = support::rounds(5);
    println!("cache operations, best of {rounds}");
    let payload = Payload::from(vec![1u8; 64]);

    let (t, m) = support::best_of(rounds, || {
        let m = manager();
        let c = m.get_cache("t");
        for e in 0..N {
            c.insert(Position::new(0, e), payload.clone(), (e % 2) as i32, None)
                .unwrap();
        }
        m
    });
    println!(
        "  insert                 {:>7.1} ns/op",
        support::ns_per(t, N as u64)
    );
    let c = m.get_cache("t");

    let (t, _) = support::best_of(rounds, || {
        let mut sum = 0usize;
        for e in 0..N {
            sum += c
                .get(Position::new(0, (e * 7919) % N))
                .map_or(0, |x| x.data().len());
        }
        black_box(sum)
    });
    println!(
        "  get hit (random)       {:>7.1} ns/op",
        support::ns_per(t, N as u64)
    );

    let ranges = 10_000i64;
    let (t, _) = support::best_of(rounds, || {
        let mut sum = 0usize;
        for r in 0..ranges {
            let first = (r * 97) % (N - 100);
            sum += c
                .get_range(Position::new(0, first), Position::new(0, first + 99))
                .len();
        }
        black_box(sum)
    });
    println!(
        "  get_range of 100       {:>7.1} ns/op ({:.1} ns/entry)",
        support::ns_per(t, ranges as u64),
        support::ns_per(t, ranges as u64 * 100)
    );

    let per_thread = 5_000_000u32;
    let (t, _) = support::best_of(rounds, || {
        let q = RemovalQueue::default();
        std::thread::scope(|s| {
            for th in 0..2u32 {
                let q = &q;
                s.spawn(move || {
                    for i in 0..per_thread {
                        q.push(QueueItem::new(th, i));
                    }
                });
            }
        });
        black_box(q.len())
    });
    println!(
        "  queue push, 2 threads  {:>7.1} M/s in total",
        (2 * per_thread) as f64 / t.as_secs_f64() / 1e6
    );

    // Everything per entry the cache allocates that is not payload bytes: the slab slot (the slab's
    // whole capacity), the index, the removal queue (its capacity), the payload's allocation header,
    // and the read-count handler of the half of the entries inserted with expected reads (made when
    // the gets above first share an entry's count with a reader's copy).
    let meta = m.metadata_bytes() as f64 / m.entry_count() as f64;
    println!(
        "  bookkeeping            {meta:>7.1} bytes/entry beyond the payload (goal <= 64): slab + index + queue + payload header + read-count handler (half the entries)"
    );
    println!(
        "    of which handlers    {:>7.1} bytes/entry ({} bytes per entry that has one)",
        ledgercache::ReadCountHandler::ALLOCATION_BYTES as f64 / 2.0,
        ledgercache::ReadCountHandler::ALLOCATION_BYTES
    );
}
