//! Active cursor container: random forward seeks with a count query every 1 / 10 / 100 seeks, at
//! 10 to 100,000 cursors (only the ops timed: each container is built first, as in a JMH setup),
//! against an O(N) sorted-set reference (the NAVIGABLE_SET variant of
//! Pulsar's JMH benchmark). Prints throughput, the speed-up over the reference and the goal line;
//! every count is checked against an independent Fenwick tree. Then the lab's port of Pulsar's own
//! container (`PulsarCursorList`) in the same runs: its speed, and how many of its counts are
//! wrong, as Pulsar's are.

#![allow(clippy::print_stdout, reason = "a bench reports its figures on stdout")]

#[path = "support.rs"]
mod support;

use ledgercache::broker::cursors::active::ActiveCursorContainer;
use ledgercache::broker::cursors::java_hash_map::java_string_hash;
use ledgercache::broker::cursors::pulsar_list::PulsarCursorList;
use ledgercache::Position;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

const OPS: usize = 200_000;

/// The reference: a sorted set of (position, cursor); a count walks the set up to the position.
struct SortedSetReference {
    set: BTreeSet<(Position, u32)>,
    pos: Vec<Position>,
}

impl SortedSetReference {
    fn new(n: u32) -> Self {
        let pos: Vec<_> = (0..n).map(|i| Position::new(0, i as i64)).collect();
        SortedSetReference {
            set: pos
                .iter()
                .enumerate()
                .map(|(i, p)| (*p, i as u32))
                .collect(),
            pos,
        }
    }
    fn seek(&mut self, c: u32, to: Position) {
        self.set.remove(&(self.pos[c as usize], c));
        self.pos[c as usize] = to;
        self.set.insert((to, c));
    }
    fn count(&self, c: u32) -> u32 {
        self.set.range(..=(self.pos[c as usize], u32::MAX)).count() as u32
    }
}

fn seeks(n: u32) -> Vec<(u32, i64)> {
    let mut rng = StdRng::seed_from_u64(1);
    (0..OPS)
        .map(|_| (rng.random_range(0..n), rng.random_range(1..100)))
        .collect()
}

/// Readers close together: ten cursors start at each position and move 1 to 3 entries at a time,
/// so many share a position (where Pulsar's container miscounts).
fn bunched_seeks(n: u32) -> Vec<(u32, i64)> {
    let mut rng = StdRng::seed_from_u64(2);
    (0..OPS)
        .map(|_| (rng.random_range(0..n), rng.random_range(1..4)))
        .collect()
}

/// Where cursor `i` starts: `i`, or `i / 10` when `bunched`.
fn start(i: u32, bunched: bool) -> i64 {
    if bunched {
        i64::from(i / 10)
    } else {
        i64::from(i)
    }
}

/// Whether each op in turn also counts: every `every`-th op, from the first. A countdown, not
/// `k % every` (a 64-bit division per op, about 5% of an op at 10,000 cursors, is the harness's
/// cost, not the container's).
fn counting_every(every: usize) -> impl FnMut() -> bool {
    assert!(every > 0, "a count every 0 ops");
    let mut until = 0;
    move || {
        let now = until == 0;
        until = if now { every - 1 } else { until - 1 };
        now
    }
}

/// Cursors hold their handle, as a managed cursor does. Like the runs below, it returns the time the
/// ops took (the container is built, and its first count taken, before the clock starts) and the
/// sum of the counts.
fn run_container(n: u32, every: usize, ops: &[(u32, i64)]) -> (Duration, u64) {
    let mut c = ActiveCursorContainer::<u32>::new();
    let mut pos: Vec<i64> = (0..n as i64).collect();
    let ids: Vec<_> = (0..n)
        .map(|i| c.add(i, Some(Position::new(0, i as i64))))
        .collect();
    c.count_by_id(ids[0]);
    let start = Instant::now();
    let mut sum = 0u64;
    let mut counts = counting_every(every);
    for &(i, d) in ops {
        pos[i as usize] += d;
        let id = ids[i as usize];
        c.update_by_id(id, Some(Position::new(0, pos[i as usize])));
        if counts() {
            sum += c.count_by_id(id) as u64;
        }
    }
    (start.elapsed(), sum)
}

/// The same, looking cursors up by name on every call.
fn run_container_by_name(n: u32, every: usize, ops: &[(u32, i64)]) -> (Duration, u64) {
    let mut c = ActiveCursorContainer::<String>::new();
    let names: Vec<String> = (0..n).map(|i| format!("subscription-{i}")).collect();
    let mut pos: Vec<i64> = (0..n as i64).collect();
    for (i, name) in names.iter().enumerate() {
        c.add(name.clone(), Some(Position::new(0, i as i64)));
    }
    c.count_at_or_before(&names[0]);
    let start = Instant::now();
    let mut sum = 0u64;
    let mut counts = counting_every(every);
    for &(i, d) in ops {
        pos[i as usize] += d;
        let name = &names[i as usize];
        c.update(name, Some(Position::new(0, pos[i as usize])));
        if counts() {
            sum += c.count_at_or_before(name) as u64;
        }
    }
    (start.elapsed(), sum)
}

fn run_reference(n: u32, every: usize, ops: &[(u32, i64)]) -> (Duration, u64) {
    let mut r = SortedSetReference::new(n);
    let start = Instant::now();
    let mut sum = 0u64;
    let mut counts = counting_every(every);
    for &(i, d) in ops {
        let to = Position::new(0, r.pos[i as usize].entry_id + d);
        r.seek(i, to);
        if counts() {
            sum += r.count(i) as u64;
        }
    }
    (start.elapsed(), sum)
}

/// Pulsar's container as the lab runs it: the time and every count it gave.
fn run_pulsar(n: u32, bunched: bool, ops: &[(u32, i64)]) -> (Duration, Vec<u32>) {
    let mut c = PulsarCursorList::new();
    let mut pos: Vec<i64> = (0..n).map(|i| start(i, bunched)).collect();
    for i in 0..n {
        let name = format!("subscription-{i}");
        c.add(
            i,
            java_string_hash(&name),
            Position::new(0, pos[i as usize]),
        );
    }
    c.count_at_or_before(0);
    let mut out = Vec::with_capacity(ops.len());
    let began = Instant::now();
    for &(i, d) in ops {
        pos[i as usize] += d;
        c.update(i, Position::new(0, pos[i as usize]));
        out.push(c.count_at_or_before(i).max(0) as u32);
    }
    (began.elapsed(), out)
}

/// An independent check of every count: a Fenwick tree over entry ids (the bench's positions are
/// all in ledger 0 and bounded by `n + 99 * OPS`). Every count, in order.
fn exact_counts(n: u32, bunched: bool, every: usize, ops: &[(u32, i64)]) -> Vec<u32> {
    let size = n as usize + 100 * ops.len() + 2;
    let mut tree = vec![0u32; size + 1];
    let add = |tree: &mut Vec<u32>, at: i64, delta: i32| {
        let mut i = at as usize + 1;
        while i <= size {
            tree[i] = tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    };
    let count = |tree: &Vec<u32>, at: i64| {
        let (mut i, mut sum) = (at as usize + 1, 0u32);
        while i > 0 {
            sum += tree[i];
            i &= i - 1;
        }
        sum
    };
    let mut pos: Vec<i64> = (0..n).map(|i| start(i, bunched)).collect();
    for &p in &pos {
        add(&mut tree, p, 1);
    }
    let mut out = Vec::with_capacity(ops.len() / every + 1);
    let mut counts = counting_every(every);
    for &(i, d) in ops {
        add(&mut tree, pos[i as usize], -1);
        pos[i as usize] += d;
        add(&mut tree, pos[i as usize], 1);
        if counts() {
            out.push(count(&tree, pos[i as usize]));
        }
    }
    out
}

/// The goal of issue 12: a seek and a count per op at 10,000 cursors.
const GOAL_CURSORS: u32 = 10_000;
const GOAL_MOPS: f64 = 9.0;

fn main() {
    let rounds = support::rounds(5);
    println!("cursor container: {OPS} random forward seeks (+1..99 entries), best of {rounds}");
    println!(
        "{:>8} {:>12} {:>14} {:>14} {:>14} {:>9} {:>9}",
        "cursors",
        "query every",
        "handle Mops/s",
        "name Mops/s",
        "ref Mops/s",
        "speed-up",
        "(by name)"
    );
    let mops = |t: Duration| OPS as f64 / t.as_secs_f64() / 1e6;
    let mut goal = None;
    // LEDGERCACHE_BENCH_CURSORS=N runs one size only (for profiling).
    let only: Option<u32> = std::env::var("LEDGERCACHE_BENCH_CURSORS")
        .ok()
        .and_then(|v| v.parse().ok());
    for n in [10u32, 100, 1000, GOAL_CURSORS, 100_000] {
        if only.is_some_and(|o| o != n) {
            continue;
        }
        let ops = seeks(n);
        for every in [1usize, 10, 100] {
            let fastest = |run: &dyn Fn() -> (Duration, u64)| {
                support::best_by(rounds, |r: &(Duration, u64)| r.0, || black_box(run()))
            };
            let (t_c, a) = fastest(&|| run_container(n, every, &ops));
            let (t_n, b) = fastest(&|| run_container_by_name(n, every, &ops));
            let exact = exact_counts(n, false, every, &ops);
            let right: u64 = exact.iter().map(|&c| u64::from(c)).sum();
            assert!(a == right && b == right, "every count must be right");
            if n == GOAL_CURSORS && every == 1 {
                goal = Some((mops(t_c), mops(t_n)));
            }
            // The sorted-set reference walks the set for each count: past 10,000 cursors one run takes
            // minutes, so it runs once, and not at all where it would take longer than that.
            let reference = (n <= GOAL_CURSORS || every >= 100).then(|| {
                let reps = if n >= GOAL_CURSORS { 1 } else { rounds };
                let (t_r, c) = support::best_by(
                    reps,
                    |r: &(Duration, u64)| r.0,
                    || black_box(run_reference(n, every, &ops)),
                );
                assert_eq!(c, right, "the reference must count right");
                t_r
            });
            let ratio = |t: Duration| match reference {
                Some(t_r) => format!("{:>8.1}x", t_r.as_secs_f64() / t.as_secs_f64()),
                None => format!("{:>9}", "-"),
            };
            println!(
                "{n:>8} {every:>12} {:>14.2} {:>14.2} {:>14} {} {}",
                mops(t_c),
                mops(t_n),
                reference.map_or("-".into(), |t| format!("{:.2}", mops(t))),
                ratio(t_c),
                ratio(t_n)
            );
        }
    }
    println!(
        "Pulsar's container as the lab runs it (PulsarCursorList), a seek and a count each op: the \
         seeks above (spread; vs ours: its speed over ActiveCursorContainer's by handle), and ten \
         cursors a position moving 1-3 entries (bunched)"
    );
    println!(
        "{:>8} {:>14} {:>9} {:>15} {:>15}",
        "cursors", "spread Mops/s", "vs ours", "spread wrong", "bunched wrong"
    );
    for n in [10u32, 100, 1000, GOAL_CURSORS, 100_000] {
        if only.is_some_and(|o| o != n) {
            continue;
        }
        let wrong = |got: &[u32], exact: &[u32]| {
            let wrong = got.iter().zip(exact).filter(|(a, b)| a != b).count();
            100.0 * wrong as f64 / exact.len() as f64
        };
        let ops = seeks(n);
        let (t_p, got) = support::best_by(
            rounds,
            |r: &(Duration, Vec<u32>)| r.0,
            || black_box(run_pulsar(n, false, &ops)),
        );
        let (t_c, _) = support::best_by(
            rounds,
            |r: &(Duration, u64)| r.0,
            || black_box(run_container(n, 1, &ops)),
        );
        let spread = wrong(&got, &exact_counts(n, false, 1, &ops));
        let ops = bunched_seeks(n);
        let bunched = wrong(
            &run_pulsar(n, true, &ops).1,
            &exact_counts(n, true, 1, &ops),
        );
        println!(
            "{n:>8} {:>14.2} {:>8.2}x {:>14.1}% {:>14.1}%",
            mops(t_p),
            t_c.as_secs_f64() / t_p.as_secs_f64(),
            spread,
            bunched
        );
    }
    let Some((by_handle, by_name)) = goal else {
        return;
    };
    println!(
        "goal: >= {GOAL_MOPS} M seek+count ops/s at {GOAL_CURSORS} cursors, every count right: \
         {by_handle:.2} by handle, {by_name:.2} by name ({})",
        if by_handle >= GOAL_MOPS {
            "met"
        } else {
            "NOT met"
        }
    );
}
