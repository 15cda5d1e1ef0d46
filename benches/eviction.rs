//! The scenario of Pulsar's `RangeCacheEvictionBenchmark`: 1,000,000 cached entries, about 10% still
//! expecting a read and about 10% recently accessed (both requeued), evicted by time passes until
//! the cache is empty. Reports ns per entry for the whole eviction (queue walk, map removal, size
//! accounting, freeing the payloads), with and without requeues.
//!
//! The main lines go through the public `EntryCacheManager` with owned 64-byte payloads, which the
//! eviction really frees: what a user pays. Beside them, in the same run, anchors: the same
//! scenario with empty payloads (the bookkeeping alone), and the floor, a queue of u32 indices the
//! consumer owns, drained with the same requeue pattern (no cache at all). A second floor drains
//! the same queue over the memory an entry of the cache takes (a 32-byte record, an owned payload
//! freed as it goes): what the memory traffic alone costs. Compare the ratios.
//!
//! A broker caches many topics at once, and its removal queue interleaves their entries in publish
//! order; a line spreads the same entries round-robin over 100 topics (each topic's entry ids
//! consecutive, as in its ledger), so that the evictor moves from cache to cache at every item.
//! A last line runs the cache in a steady state, inserts and passes interleaved, as a broker's
//! cache lives (see [`steady`]).

#![allow(clippy::print_stdout, reason = "a bench reports its figures on stdout")]

#[path = "support.rs"]
mod support;

use ledgercache::{CacheConfig, EntryCacheManager, ManualClock, Payload, Position, SettingValue};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ENTRIES: i64 = 1_000_000;
const PAYLOAD_BYTES: usize = 64;
/// Pulsar's default `managedLedgerCacheEvictionExtendTTLOfEntriesWithRemainingExpectedReadsMaxTimes`.
const MAX_REQUEUES: u8 = 5;

/// Which entries expect a read and which were read: the same draws for every variant.
fn pattern(requeues: bool) -> Vec<(bool, bool)> {
    let mut rng = StdRng::seed_from_u64(1);
    (0..ENTRIES)
        .map(|_| {
            let expected = requeues && rng.random_bool(0.1);
            let accessed = requeues && rng.random_bool(0.1);
            (expected, accessed)
        })
        .collect()
}

/// Topics of the interleaved line.
const TOPICS: usize = 100;

/// A manager on a manual clock, its size out of reach (only time passes evict), its entries
/// living `ttl_ms`.
fn manager(ttl_ms: i64) -> (EntryCacheManager, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(0));
    let mut cfg = CacheConfig::default();
    cfg.set("cache_size_bytes", SettingValue::Int(1 << 40))
        .unwrap();
    cfg.set("eviction_time_threshold_ms", SettingValue::Int(ttl_ms))
        .unwrap();
    let m = EntryCacheManager::new(cfg, clock.clone(), false).unwrap();
    (m, clock)
}

fn filled(
    pattern: &[(bool, bool)],
    payload: impl Fn() -> Payload,
    topics: usize,
) -> (EntryCacheManager, Arc<ManualClock>) {
    let (m, clock) = manager(1);
    let caches: Vec<_> = (0..topics)
        .map(|t| m.get_cache(&format!("ledger-{t}")))
        .collect();
    for (e, &(expected, accessed)) in pattern.iter().enumerate() {
        let cache = &caches[e % topics];
        let p = Position::new(0, (e / topics) as i64);
        cache
            .insert(p, payload(), i32::from(expected), Some(100))
            .unwrap();
        if accessed {
            cache.get(p);
        }
    }
    (m, clock)
}

/// Where a run's time went: the first pass walks the queue in memory order; the later ones visit
/// only the requeued entries (which the first pass packed side by side; the second pass's
/// removals leave gaps among them). Items visited = entries evicted + requeued.
#[derive(Default, Clone, Copy)]
struct Split {
    first: (Duration, u64),
    later: (Duration, u64),
}

impl Split {
    fn ns_per_item((t, items): (Duration, u64)) -> f64 {
        support::ns_per(t, items.max(1))
    }
}

/// Time passes until the cache is empty; returns the time spent in them, how many ran, and how
/// the time split between the first pass and the later ones.
fn evict_all(m: &EntryCacheManager, clock: &ManualClock) -> (Duration, u32, Split) {
    let mut passes = 0;
    let mut spent = Duration::ZERO;
    let mut split = Split::default();
    let visited = || {
        let s = m.stats();
        s.evicted + s.requeued
    };
    while m.entry_count() > 0 {
        clock.advance_ms(2);
        let before = visited();
        let start = Instant::now();
        m.evict_expired();
        let took = start.elapsed();
        spent += took;
        let part = if passes == 0 {
            &mut split.first
        } else {
            &mut split.later
        };
        *part = (part.0 + took, part.1 + (visited() - before));
        passes += 1;
    }
    (spent, passes, split)
}

/// A floor's state byte for an entry: bit 0 expects a read, bit 1 accessed, the upper bits count
/// its requeues.
fn floor_state((expected, accessed): (bool, bool)) -> u8 {
    u8::from(expected) | (u8::from(accessed) << 1)
}

/// PIP-430's decision on a floor's state byte: whether the entry is requeued (then marked so).
#[inline(always)]
fn floor_requeues(state: &mut u8) -> bool {
    let requeues = *state >> 2;
    let requeue = *state & 2 != 0 || (*state & 1 != 0 && requeues < MAX_REQUEUES);
    if requeue {
        *state = (*state & 1) | ((requeues + 1) << 2);
    }
    requeue
}

/// The floor: the consumer owns a queue of u32 indices and per-entry state bytes
/// ([`floor_state`]), and drains it pass by pass with PIP-430's decision; a pass stops at the first
/// item requeued during it, as a time pass does.
fn floor(pattern: &[(bool, bool)]) -> (Duration, u32) {
    let mut state: Vec<u8> = pattern.iter().copied().map(floor_state).collect();
    let mut queue: VecDeque<u32> = (0..state.len() as u32).collect();
    let start = Instant::now();
    let mut passes = 0;
    while !queue.is_empty() {
        passes += 1;
        let pass_len = queue.len();
        for _ in 0..pass_len {
            let i = queue.pop_front().expect("counted");
            if floor_requeues(&mut state[i as usize]) {
                queue.push_back(i);
            }
        }
    }
    black_box(&state);
    (start.elapsed(), passes)
}

/// A consumer's own record of an entry, as large as the cache's slot (32 bytes) and holding an
/// owned payload of the same length (the cache's blocks are 8 bytes longer, with their header):
/// the memory a pass must touch, without the cache's structure.
#[repr(C, align(32))]
struct Record {
    payload: Option<Box<[u8; PAYLOAD_BYTES]>>,
    timestamp_ns: u64,
    /// As the floor's state byte.
    state: u8,
}

/// The crate's own prefetch hint is not public; the same instruction.
fn hint(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe, reason = "the intrinsic is safe in newer Rust")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The floor over the cache's memory: the floor's queue and decisions, but each entry a 32-byte
/// record with a 64-byte owned payload, freed when the entry goes, and in every pass each record
/// and its payload hinted ahead as the cache's pass hints a run of consecutive slots. Records
/// kept are packed as the cache's first pass packs them, in every pass (the cache keeps one run
/// of vacant slots, so here its later passes do not pack: nothing is inserted between passes to
/// take the first pass's). What touching that memory costs, whatever the structure around it.
fn memory_floor(pattern: &[(bool, bool)]) -> (Duration, u32) {
    // The pass's STREAM_SLOT_AHEAD and STREAM_PAYLOAD_AHEAD (src/cache/manager/pass.rs).
    const RECORD_AHEAD: usize = 128;
    const PAYLOAD_AHEAD: usize = 32;
    let mut records: Vec<Record> = pattern
        .iter()
        .map(|&entry| Record {
            payload: Some(Box::new([7u8; PAYLOAD_BYTES])),
            timestamp_ns: 0,
            state: floor_state(entry),
        })
        .collect();
    let mut queue: VecDeque<u32> = (0..records.len() as u32).collect();
    let start = Instant::now();
    let mut passes = 0;
    while !queue.is_empty() {
        passes += 1;
        let pass_len = queue.len();
        // Records of consecutive items: `packed` is where the next one kept goes, every record
        // from there to the one visited being empty.
        let (mut packed, mut next) = (0u32, u32::MAX);
        for j in 0..pass_len {
            if let Some(&ahead) = queue.get(RECORD_AHEAD) {
                hint(std::ptr::from_ref(&records[ahead as usize]).cast());
            }
            if let Some(&ahead) = queue.get(PAYLOAD_AHEAD) {
                if let Some(p) = &records[ahead as usize].payload {
                    hint(p.as_ptr());
                }
            }
            let i = queue.pop_front().expect("counted");
            if i != next {
                (packed, next) = (i, i);
            }
            next += 1;
            let r = &mut records[i as usize];
            if floor_requeues(&mut r.state) {
                r.timestamp_ns = j as u64;
                records.swap(packed as usize, i as usize);
                queue.push_back(packed);
                packed += 1;
            } else {
                r.payload = None;
            }
        }
    }
    let took = start.elapsed();
    assert!(records.iter().all(|r| r.payload.is_none()));
    (took, passes)
}

/// The steady state of a broker's cache rather than a drain: every millisecond `STEADY_PER_MS`
/// entries arrive (the scenario's share expecting a read, and read back) and a time pass runs;
/// entries live `STEADY_TTL_MS`, those expecting a read up to six times that (five requeues), so
/// that once the first of those go (after `STEADY_WARM_MS`) about a million stay cached and each
/// pass evicts as many as arrived. Between passes inserts allocate what passes freed, so what a
/// pass leaves the allocator to do (glibc's consolidation of freed blocks, triggered by any large
/// allocation or free) shows here and not in a drain. Returns (inserts, reads of the accessed
/// included; passes) in ns per entry, timed after the warm-up, and the entries cached at the end.
fn steady(pattern: &[(bool, bool)]) -> (f64, f64, u64) {
    const STEADY_PER_MS: usize = 6_250;
    const STEADY_TTL_MS: i64 = 100;
    const STEADY_WARM_MS: usize = (MAX_REQUEUES as usize + 2) * STEADY_TTL_MS as usize;
    let (m, clock) = manager(STEADY_TTL_MS);
    let cache = m.get_cache("ledger");
    let (mut inserting, mut passing, mut timed) = (Duration::ZERO, Duration::ZERO, 0u64);
    for (ms, arriving) in pattern.chunks(STEADY_PER_MS).enumerate() {
        let start = Instant::now();
        for (i, &(expected, accessed)) in arriving.iter().enumerate() {
            let p = Position::new(0, (ms * STEADY_PER_MS + i) as i64);
            cache
                .insert(
                    p,
                    Payload::from(vec![7u8; PAYLOAD_BYTES]),
                    i32::from(expected),
                    None,
                )
                .unwrap();
            if accessed {
                cache.get(p);
            }
        }
        let inserted = start.elapsed();
        clock.advance_ms(1);
        let start = Instant::now();
        m.evict_expired();
        let passed = start.elapsed();
        if ms >= STEADY_WARM_MS {
            inserting += inserted;
            passing += passed;
            timed += arriving.len() as u64;
        }
    }
    (
        support::ns_per(inserting, timed),
        support::ns_per(passing, timed),
        m.entry_count(),
    )
}

fn main() {
    let rounds = support::rounds(5);
    /// Issue 12's goal for the owned payloads, ns/entry.
    const GOAL_NS: f64 = 15.0;
    let allocator = if cfg!(feature = "mimalloc") {
        "mimalloc, as in the Python wheel"
    } else {
        "the system allocator"
    };
    println!(
        "eviction: {ENTRIES} entries by time passes until empty (only the passes timed), best of {rounds}; {allocator}"
    );
    for requeues in [true, false] {
        let pattern = pattern(requeues);
        let label = if requeues {
            "10% expected reads + 10% accessed"
        } else {
            "no requeues"
        };
        println!("  {label}:");
        let run = |payload: &dyn Fn() -> Payload, topics: usize| {
            let mut best = (f64::MAX, Split::default());
            let mut passes = 0;
            for _ in 0..rounds {
                let (m, clock) = filled(&pattern, payload, topics);
                let (t, p, split) = evict_all(&m, &clock);
                let ns = support::ns_per(t, ENTRIES as u64);
                if ns < best.0 {
                    best = (ns, split);
                }
                passes = p;
                assert_eq!((m.size_bytes(), m.entry_count()), (0, 0));
                drop(m);
            }
            (best.0, passes, best.1)
        };
        let owned_payload = || Payload::from(vec![7u8; PAYLOAD_BYTES]);
        let (owned, passes, split) = run(&owned_payload, 1);
        let (empty, _, _) = run(&Payload::empty, 1);
        let (floor_ns, floor_passes) = (0..rounds)
            .map(|_| floor(&pattern))
            .map(|(t, p)| (support::ns_per(t, ENTRIES as u64), p))
            .fold((f64::MAX, 0), |a, b| if b.0 < a.0 { b } else { a });
        assert_eq!(passes, floor_passes, "the floor drains in as many passes");
        let (memory_ns, memory_passes) = (0..rounds)
            .map(|_| memory_floor(&pattern))
            .map(|(t, p)| (support::ns_per(t, ENTRIES as u64), p))
            .fold((f64::MAX, 0), |a, b| if b.0 < a.0 { b } else { a });
        assert_eq!(
            passes, memory_passes,
            "the memory floor drains in as many passes"
        );
        println!(
            "    {PAYLOAD_BYTES}-byte owned payloads, freed {owned:>7.1} ns/entry ({passes} passes; goal <= {GOAL_NS})"
        );
        if passes > 1 {
            println!(
                "      of which the first pass {:.1} ns per item visited ({} items, in memory order), the later passes {:.1} ({} items: requeued entries)",
                Split::ns_per_item(split.first),
                split.first.1,
                Split::ns_per_item(split.later),
                split.later.1,
            );
        }
        println!(
            "    empty payloads (bookkeeping only) {empty:>7.1} ns/entry ({:.1}x the owned)",
            empty / owned
        );
        println!(
            "    floor: consumer's VecDeque<u32>   {floor_ns:>7.1} ns/entry (owned payloads cost {:.1}x the floor)",
            owned / floor_ns
        );
        println!(
            "    floor over the cache's memory: 32-byte records, owned payloads {memory_ns:>7.1} ns/entry (owned payloads cost {:.1}x it; the owned line's goal, <= {GOAL_NS}, is {} it)",
            owned / memory_ns,
            if memory_ns > GOAL_NS { "below" } else { "above" }
        );
        let (interleaved, _, _) = run(&owned_payload, TOPICS);
        println!(
            "    owned payloads, {TOPICS} topics interleaved {interleaved:>7.1} ns/entry ({:.1}x one topic)",
            interleaved / owned
        );
    }
    // Seven drains' worth of arrivals: 1,120 ms, of which 700 warm the cache up.
    let arrivals: Vec<_> = (0..7).flat_map(|_| pattern(true)).collect();
    let (inserts, passes, cached) =
        support::best_by(rounds.min(3), |&(i, p, _)| i + p, || steady(&arrivals));
    println!(
        "  steady state, 6,250 entries a ms living 100 ms (10% expecting a read, up to 600 ms; 10% accessed), a pass each ms: passes {passes:.1} ns/entry, inserts {inserts:.1} (owned payloads, {cached} cached at the end; best of {})",
        rounds.min(3)
    );
}
