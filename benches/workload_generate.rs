//! Generator throughput (baseline: in-memory generate + one record batch).
use ledgercache::config::SettingValue::{self, Float, Int, Str};
use ledgercache::workload::{generate, WorkloadSpec};
use std::time::Instant;

fn spec(settings: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut s = WorkloadSpec::default();
    for (k, v) in settings {
        s.set(k, v).unwrap();
    }
    s
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
        let mut best = f64::MAX;
        let mut rows = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let b = generate(s, 1).to_record_batch();
            rows = b.num_rows();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{name}: {rows} events, {:.2} M events/s (in-memory)",
            rows as f64 / best / 1e6
        );
    }
}
