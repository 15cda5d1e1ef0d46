//! Which sorted map should index a ledger's cached positions? The candidates the design card names
//! (crossbeam-skiplist's lock-free `SkipMap`, a `BTreeMap` under a lock) against the chunked
//! `PositionIndex` the range cache uses, on the cache's access pattern: inserts in position order,
//! random lookups, removals oldest-first (eviction), and 100-entry range scans. Single-threaded
//! figures include taking the lock (the skip list needs none), as the cache would.

#![allow(clippy::print_stdout, reason = "a bench reports its figures on stdout")]

#[path = "support.rs"]
mod support;

use crossbeam_skiplist::SkipMap;
use ledgercache::cache::position_index::PositionIndex;
use ledgercache::Position;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::hint::black_box;

const N: i64 = 1_000_000;

fn p(e: i64) -> Position {
    Position::new(0, e)
}

trait Candidate: Sync {
    fn name(&self) -> &'static str;
    fn insert(&self, p: Position, v: u32);
    fn get(&self, p: Position) -> Option<u32>;
    fn remove(&self, p: Position) -> Option<u32>;
    fn range_len(&self, a: Position, b: Position) -> usize;
}

struct Skip(SkipMap<Position, u32>);
struct Tree(Mutex<BTreeMap<Position, u32>>);
struct Chunked(Mutex<PositionIndex>);

impl Candidate for Skip {
    fn name(&self) -> &'static str {
        "crossbeam SkipMap"
    }
    fn insert(&self, p: Position, v: u32) {
        self.0.insert(p, v);
    }
    fn get(&self, p: Position) -> Option<u32> {
        self.0.get(&p).map(|e| *e.value())
    }
    fn remove(&self, p: Position) -> Option<u32> {
        self.0.remove(&p).map(|e| *e.value())
    }
    fn range_len(&self, a: Position, b: Position) -> usize {
        self.0.range(a..=b).count()
    }
}

impl Candidate for Tree {
    fn name(&self) -> &'static str {
        "Mutex<BTreeMap>"
    }
    fn insert(&self, p: Position, v: u32) {
        self.0.lock().insert(p, v);
    }
    fn get(&self, p: Position) -> Option<u32> {
        self.0.lock().get(&p).copied()
    }
    fn remove(&self, p: Position) -> Option<u32> {
        self.0.lock().remove(&p)
    }
    fn range_len(&self, a: Position, b: Position) -> usize {
        self.0.lock().range(a..=b).count()
    }
}

impl Candidate for Chunked {
    fn name(&self) -> &'static str {
        "Mutex<PositionIndex>"
    }
    fn insert(&self, p: Position, v: u32) {
        self.0.lock().insert(p, v);
    }
    fn get(&self, p: Position) -> Option<u32> {
        self.0.lock().get(p)
    }
    fn remove(&self, p: Position) -> Option<u32> {
        self.0.lock().remove(p)
    }
    fn range_len(&self, a: Position, b: Position) -> usize {
        self.0.lock().range(a, b).len()
    }
}

fn measure(make: &dyn Fn() -> Box<dyn Candidate>, rounds: usize) {
    let mut ins = f64::MAX;
    let mut get = f64::MAX;
    let mut scan = f64::MAX;
    let mut rem = f64::MAX;
    let mut both = f64::MAX;
    let mut name = "";
    for _ in 0..rounds {
        let m = make();
        name = m.name();
        let (t, _) = support::best_of(1, || (0..N).for_each(|e| m.insert(p(e), e as u32)));
        ins = ins.min(support::ns_per(t, N as u64));
        let (t, _) = support::best_of(1, || {
            black_box((0..N).filter_map(|e| m.get(p((e * 7919) % N))).count())
        });
        get = get.min(support::ns_per(t, N as u64));
        let (t, _) = support::best_of(1, || {
            black_box(
                (0..10_000)
                    .map(|r| m.range_len(p((r * 97) % (N - 100)), p((r * 97) % (N - 100) + 99)))
                    .sum::<usize>(),
            )
        });
        scan = scan.min(support::ns_per(t, 10_000));
        let (t, _) = support::best_of(1, || {
            black_box((0..N).filter_map(|e| m.remove(p(e))).count())
        });
        rem = rem.min(support::ns_per(t, N as u64));
        // Eviction racing a writer: one thread appends positions N.., the other removes 0.. .
        for e in 0..N {
            m.insert(p(e), 0);
        }
        let (t, _) = support::best_of(1, || {
            std::thread::scope(|s| {
                let m = &m;
                s.spawn(move || (N..2 * N).for_each(|e| m.insert(p(e), 0)));
                s.spawn(move || {
                    (0..N).for_each(|e| {
                        black_box(m.remove(p(e)));
                    })
                });
            })
        });
        both = both.min(support::ns_per(t, 2 * N as u64));
    }
    println!("  {name:<22} {ins:>8.1} {get:>8.1} {scan:>10.1} {rem:>8.1} {both:>12.1}");
}

fn main() {
    let rounds = support::rounds(3);
    println!("sorted map candidates, {N} positions, best of {rounds} (ns per operation)");
    println!(
        "  {:<22} {:>8} {:>8} {:>10} {:>8} {:>12}",
        "map", "insert", "get", "range 100", "remove", "2 threads"
    );
    measure(&|| Box::new(Skip(SkipMap::new())), rounds);
    measure(&|| Box::new(Tree(Mutex::new(BTreeMap::new()))), rounds);
    measure(
        &|| Box::new(Chunked(Mutex::new(PositionIndex::default()))),
        rounds,
    );
}
