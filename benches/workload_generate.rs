//! Generator throughput: the in-memory trace (`generate` and one record batch) and the stream of
//! record batches (`TraceStream`), on an OMB-like workload and a multi-broker Shared one.

#![allow(clippy::print_stdout, reason = "a bench reports its figures on stdout")]

use ledgercache::config::SettingValue::{self, Float, Int, Str};
use ledgercache::lab::workload::{generate, TraceStream, WorkloadSpec, DEFAULT_BATCH_ROWS};
use std::time::Instant;

fn spec(settings: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut s = WorkloadSpec::default();
    for (k, v) in settings {
        s.set(k, v).unwrap();
    }
    s
}

fn best(rounds: usize, mut f: impl FnMut() -> usize) -> (usize, f64) {
    let mut best = f64::MAX;
    let mut rows = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        rows = f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (rows, best)
}

fn main() {
    let cases = [
        (
            "omb-1-topic-16-partitions-1kb 50k/s 0.5min",
            spec(&[
                ("partitions_per_topic", Int(16)),
                ("producer_rate", Float(50_000.0)),
                ("test_duration_minutes", Float(0.5)),
            ]),
        ),
        (
            "shared 3 brokers 8 partitions 2 subs x3",
            spec(&[
                ("topics", Int(4)),
                ("partitions_per_topic", Int(2)),
                ("brokers", Int(3)),
                ("subscriptions_per_topic", Int(2)),
                ("subscription_type", Str("Shared".into())),
                ("consumer_per_subscription", Int(3)),
                ("redelivery_rate", Float(0.01)),
                ("producer_rate", Float(20_000.0)),
                ("test_duration_minutes", Float(0.5)),
            ]),
        ),
    ];
    for (name, s) in &cases {
        let (rows, t) = best(3, || generate(s, 1).to_record_batch().num_rows());
        println!(
            "{name}: {rows} events, {:.2} M events/s (in-memory)",
            rows as f64 / t / 1e6
        );
        let (rows, t) = best(3, || {
            let mut stream = TraceStream::new(s, 1);
            let mut n = 0;
            while let Some(b) = stream.next_batch(DEFAULT_BATCH_ROWS) {
                n += b.num_rows();
            }
            n
        });
        println!(
            "{name}: {rows} events, {:.2} M events/s (streamed, {DEFAULT_BATCH_ROWS}-row batches)",
            rows as f64 / t / 1e6
        );
    }
}
