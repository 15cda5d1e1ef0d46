//! The workload generator: determinism, the traffic each knob should produce, and traces the
//! replay engine accepts.

use ledgercache::config::SettingValue;
use ledgercache::replay::{replay, TraceDecoder};
use ledgercache::workload::{generate, EventColumns, WorkloadSpec};
use ledgercache::CacheConfig;

fn spec(settings: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut s = WorkloadSpec::default();
    s.set("test_duration_minutes", &SettingValue::Float(0.5))
        .unwrap();
    for (k, v) in settings {
        s.set(k, v).unwrap();
    }
    s
}

fn count(ev: &EventColumns, op: &str) -> usize {
    ev.op.iter().filter(|o| **o == op).count()
}

fn reads_by_cursor(ev: &EventColumns) -> Vec<i64> {
    let mut per = vec![0i64; ev.cursor_names.len()];
    for i in 0..ev.len() {
        if ev.op[i] == "read" {
            per[ev.cursor[i].unwrap() as usize] += ev.count[i] as i64;
        }
    }
    per
}

use SettingValue::{Float, Int, Str};

#[test]
fn same_spec_and_seed_same_trace() {
    let s = spec(&[
        ("subscriptions_per_topic", Int(3)),
        ("redelivery_rate", Float(0.01)),
        ("seeks_per_minute", Float(2.0)),
    ]);
    assert_eq!(generate(&s, 7), generate(&s, 7));
    assert_ne!(generate(&s, 7).ts_us, generate(&s, 8).ts_us);
}

#[test]
fn tailing_fan_out_reads_everything_published() {
    let s = spec(&[
        ("subscriptions_per_topic", Int(3)),
        ("producer_rate", Float(2000.0)),
    ]);
    let ev = generate(&s, 1);
    // Messages are batched into entries: count the messages, and read entries against entries.
    let messages: i64 = ev.messages.iter().map(|m| m.unwrap_or(0) as i64).sum();
    assert!((55_000..65_000).contains(&messages), "{messages}");
    let published = count(&ev, "add") as i64;
    assert!(published < messages, "{published} entries for {messages} messages");
    for (c, n) in reads_by_cursor(&ev).iter().enumerate() {
        assert!(published - n <= 100, "cursor {c} read {n} of {published}");
    }
    assert!(ev.ts_us.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(count(&ev, "redeliver"), 0);
}

#[test]
fn key_shared_slow_consumer_fills_the_replay_queue() {
    let s = spec(&[
        ("subscription_type", Str("Key_Shared".into())),
        ("consumer_per_subscription", Int(4)),
        ("key_distributor", Str("KEY_ROUND_ROBIN".into())),
        ("slow_consumer_fraction", Float(0.3)),
        ("slow_consumer_speed", Float(0.2)),
        ("producer_rate", Float(4000.0)),
    ]);
    let ev = generate(&s, 3);
    assert!(count(&ev, "redeliver") > 100, "{}", count(&ev, "redeliver"));
    assert!(count(&ev, "replay") > 100, "{}", count(&ev, "replay"));
}

#[test]
fn catch_up_backlog_seek_and_churn_knobs_show_up() {
    let ev = generate(
        &spec(&[
            ("catch_up_readers", Int(1)),
            ("catch_up_start_seconds", Float(20.0)),
            ("catch_up_behind_seconds", Float(15.0)),
        ]),
        1,
    );
    let opens: Vec<usize> = (0..ev.len())
        .filter(|&i| {
            ev.op[i] == "open" && ev.cursor_names[ev.cursor[i].unwrap() as usize] == "catch-up-0"
        })
        .collect();
    assert_eq!(opens.len(), 1);
    assert!(ev.ts_us[opens[0]] >= 20_000_000 && ev.entry_id[opens[0]].unwrap() > 0);
    let ev = generate(&spec(&[("consumer_backlog_size_gb", Float(0.01))]), 1);
    let first_open = ev.op.iter().position(|o| *o == "open").unwrap();
    assert!(
        ev.ts_us[first_open] > 5_000_000,
        "consumers wait for the backlog"
    );
    let ev = generate(
        &spec(&[
            ("seeks_per_minute", Float(10.0)),
            ("churn_per_minute", Float(10.0)),
            ("churn_downtime_seconds", Float(1.0)),
        ]),
        1,
    );
    assert!(count(&ev, "seek") >= 1 && count(&ev, "close") >= 1);
}

#[test]
fn brokers_split_the_partitions_and_every_trace_replays() {
    let s = spec(&[
        ("topics", Int(4)),
        ("partitions_per_topic", Int(2)),
        ("brokers", Int(3)),
        ("subscriptions_per_topic", Int(2)),
        ("redelivery_rate", Float(0.02)),
        ("subscription_type", Str("Shared".into())),
        ("consumer_per_subscription", Int(3)),
    ]);
    let ev = generate(&s, 5);
    assert_eq!(ev.broker_names.len(), 3);
    let batch = ev.to_record_batch();
    for b in 0..3u32 {
        let rows: Vec<u32> = (0..ev.len() as u32)
            .filter(|&i| ev.broker[i as usize] == b)
            .collect();
        let indices = arrow_array::UInt32Array::from(rows);
        let columns = batch
            .columns()
            .iter()
            .map(|c| arrow_select_take(c, &indices))
            .collect::<Vec<_>>();
        let part = arrow_array::RecordBatch::try_new(batch.schema(), columns).unwrap();
        let mut d = TraceDecoder::new();
        let mut events = Vec::new();
        d.decode(&part, &mut events).unwrap();
        for strategy in ["pip430", "pip430-fifo", "lru", "belady"] {
            let mut c = CacheConfig::default();
            c.set("cache_size_bytes", Int(4 << 20)).unwrap();
            c.set("strategy", Str(strategy.into())).unwrap();
            let m = replay(&events, &d.names, &c).unwrap();
            assert!(
                m.entries_read > 0 && m.hits <= m.entries_read,
                "{strategy}: {m:?}"
            );
        }
    }
}

/// `take` without arrow-select: rebuild each column from the selected rows.
fn arrow_select_take(
    c: &arrow_array::ArrayRef,
    idx: &arrow_array::UInt32Array,
) -> arrow_array::ArrayRef {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::{Array, Int32Array, Int64Array, StringArray};
    use std::sync::Arc;
    let rows = idx.values().iter().map(|&i| i as usize);
    match c.data_type() {
        arrow_schema::DataType::Int64 => {
            let a = c.as_primitive::<Int64Type>();
            Arc::new(Int64Array::from_iter(
                rows.map(|i| (!a.is_null(i)).then(|| a.value(i))),
            ))
        }
        arrow_schema::DataType::Int32 => {
            let a = c.as_primitive::<Int32Type>();
            Arc::new(Int32Array::from_iter(
                rows.map(|i| (!a.is_null(i)).then(|| a.value(i))),
            ))
        }
        _ => {
            let a = c.as_string::<i32>();
            Arc::new(StringArray::from_iter(
                rows.map(|i| (!a.is_null(i)).then(|| a.value(i))),
            ))
        }
    }
}

#[test]
fn brokers_generated_apart_add_up_to_the_whole_trace() {
    use ledgercache::workload::generate_broker;
    let s = spec(&[
        ("topics", Int(5)),
        ("brokers", Int(3)),
        ("subscriptions_per_topic", Int(2)),
    ]);
    let whole = generate(&s, 9);
    for b in 0..3u32 {
        let part = generate_broker(&s, 9, b);
        let rows: Vec<usize> = (0..whole.len()).filter(|&i| whole.broker[i] == b).collect();
        assert_eq!(part.len(), rows.len());
        assert!(rows
            .iter()
            .enumerate()
            .all(|(k, &i)| part.ts_us[k] == whole.ts_us[i]
                && part.op[k] == whole.op[i]
                && part.entry_id[k] == whole.entry_id[i]));
        assert!(part.broker.iter().all(|&x| x == b));
    }
}
