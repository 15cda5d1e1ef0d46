//! Active cursor container: random forward seeks with a count query every 1 / 10 / 100 seeks, at
//! 10, 100 and 1000 cursors, against an O(N) sorted-set reference (the NAVIGABLE_SET variant of
//! Pulsar's JMH benchmark). Prints throughput and the speed-up over the reference.

#[path = "support.rs"]
mod support;

use ledgercache::cursors::active::ActiveCursorContainer;
use ledgercache::Position;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::hint::black_box;

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

/// Cursors hold their handle, as a managed cursor does.
fn run_container(n: u32, every: usize, ops: &[(u32, i64)]) -> u64 {
    let mut c = ActiveCursorContainer::<u32>::new();
    let mut pos: Vec<i64> = (0..n as i64).collect();
    let ids: Vec<_> = (0..n)
        .map(|i| c.add(i, Some(Position::new(0, i as i64))))
        .collect();
    let mut sum = 0u64;
    for (k, &(i, d)) in ops.iter().enumerate() {
        pos[i as usize] += d;
        let id = ids[i as usize];
        c.update_by_id(id, Some(Position::new(0, pos[i as usize])));
        if k % every == 0 {
            sum += c.count_by_id(id) as u64;
        }
    }
    sum
}

/// The same, looking cursors up by name on every call.
fn run_container_by_name(n: u32, every: usize, ops: &[(u32, i64)]) -> u64 {
    let mut c = ActiveCursorContainer::<String>::new();
    let names: Vec<String> = (0..n).map(|i| format!("subscription-{i}")).collect();
    let mut pos: Vec<i64> = (0..n as i64).collect();
    for (i, name) in names.iter().enumerate() {
        c.add(name.clone(), Some(Position::new(0, i as i64)));
    }
    let mut sum = 0u64;
    for (k, &(i, d)) in ops.iter().enumerate() {
        pos[i as usize] += d;
        let name = &names[i as usize];
        c.update(name, Some(Position::new(0, pos[i as usize])));
        if k % every == 0 {
            sum += c.count_at_or_before(name) as u64;
        }
    }
    sum
}

fn run_reference(n: u32, every: usize, ops: &[(u32, i64)]) -> u64 {
    let mut r = SortedSetReference::new(n);
    let mut sum = 0u64;
    for (k, &(i, d)) in ops.iter().enumerate() {
        let to = Position::new(0, r.pos[i as usize].entry_id + d);
        r.seek(i, to);
        if k % every == 0 {
            sum += r.count(i) as u64;
        }
    }
    sum
}

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
    for n in [10u32, 100, 1000] {
        let ops = seeks(n);
        for every in [1usize, 10, 100] {
            let (t_c, a) = support::best_of(rounds, || black_box(run_container(n, every, &ops)));
            let (t_n, b) =
                support::best_of(rounds, || black_box(run_container_by_name(n, every, &ops)));
            let (t_r, c) = support::best_of(rounds, || black_box(run_reference(n, every, &ops)));
            assert!(a == c && b == c, "all must count the same");
            let mops = |t: std::time::Duration| OPS as f64 / t.as_secs_f64() / 1e6;
            let ratio = |t: std::time::Duration| t_r.as_secs_f64() / t.as_secs_f64();
            println!(
                "{n:>8} {every:>12} {:>14.2} {:>14.2} {:>14.2} {:>8.1}x {:>8.1}x",
                mops(t_c),
                mops(t_n),
                mops(t_r),
                ratio(t_c),
                ratio(t_n)
            );
        }
    }
}
