#![allow(dead_code, reason = "each bench uses part of this")]
//! A small timing harness shared by the benches: best-of-N wall time, so that a noisy shared
//! machine disturbs the figures as little as possible. Ratios within one run are what to compare.

use std::time::{Duration, Instant};

/// Runs `f` `rounds` times and returns the fastest run.
pub fn best_of<T>(rounds: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    best_by(
        rounds,
        |t: &(Duration, T)| t.0,
        || {
            let start = Instant::now();
            let out = f();
            (start.elapsed(), out)
        },
    )
}

/// Runs `f` `rounds` times and keeps the result with the smallest `key`.
pub fn best_by<T, K: PartialOrd>(
    rounds: usize,
    key: impl Fn(&T) -> K,
    mut f: impl FnMut() -> T,
) -> T {
    let mut best: Option<T> = None;
    for _ in 0..rounds {
        let out = f();
        if best.as_ref().is_none_or(|b| key(&out) < key(b)) {
            best = Some(out);
        }
    }
    best.expect("rounds >= 1")
}

/// Rounds from the environment (`LEDGERCACHE_BENCH_ROUNDS`), default `default`.
pub fn rounds(default: usize) -> usize {
    std::env::var("LEDGERCACHE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn ns_per(d: Duration, n: u64) -> f64 {
    d.as_nanos() as f64 / n as f64
}
