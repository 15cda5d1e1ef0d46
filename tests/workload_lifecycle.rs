//! The broker's life in the workload generator: rolling restarts, bundle moves, reconnect storms
//! and the pausing producer of Pulsar's `BrokerEntryCacheRollingRestartTest`.

use ledgercache::config::SettingValue::{self, Float, Int, Str};
use ledgercache::lab::workload::{
    generate, generate_broker, EventColumns, TraceStream, WorkloadSpec,
};

fn spec(settings: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut s = WorkloadSpec::default();
    s.set("test_duration_minutes", &Float(0.5)).unwrap();
    for (k, v) in settings {
        s.set(k, v).unwrap();
    }
    s
}

fn rows(ev: &EventColumns, op: &str) -> Vec<usize> {
    (0..ev.len()).filter(|&i| ev.op[i] == op).collect()
}

fn broker_of(ev: &EventColumns, i: usize) -> &str {
    &ev.broker_names[ev.broker[i] as usize]
}

fn pos(ev: &EventColumns, i: usize) -> (i64, i64) {
    (ev.ledger_id[i].unwrap(), ev.entry_id[i].unwrap())
}

fn messages(ev: &EventColumns) -> i64 {
    ev.messages.iter().map(|m| m.unwrap_or(0) as i64).sum()
}

/// Pulsar's test, at a small scale: two brokers, one topic of two partitions (one on each),
/// Shared subscriptions, a broker restarted every 7.5 s over 30 s.
fn rolling(extra: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut settings = vec![
        ("brokers", Int(2)),
        ("partitions_per_topic", Int(2)),
        ("subscriptions_per_topic", Int(2)),
        ("subscription_type", Str("Shared".into())),
        ("producer_rate", Float(2000.0)),
        ("rolling_restart_interval_seconds", Float(7.5)),
    ];
    settings.extend(extra.iter().cloned());
    spec(&settings)
}

const MS: i64 = 1000;
const S: i64 = 1_000_000;

/// `BrokerEntryCacheRollingRestartTest.testTailingReadsRollingRestart`'s injector: restarts at
/// 7.5, 15 and 22.5 s (broker 0, 1, 0); each broker's topics go to the other one 100 ms later;
/// the load rows cover what the cursors have left to read; the adds after a load go to a new
/// ledger; the cursors reopen at their first unacknowledged entry within the reconnect delays;
/// the producer's held messages go out at the load, none lost.
#[test]
fn a_rolling_restart_moves_each_brokers_topics_to_the_other_and_back() {
    let ev = generate(&rolling(&[]), 3);
    let unloads = rows(&ev, "unload");
    let at_broker: Vec<(i64, &str, u32)> = unloads
        .iter()
        .map(|&i| (ev.ts_us[i], broker_of(&ev, i), ev.topic[i]))
        .collect();
    // Partition 0 starts on broker 0, partition 1 on broker 1.
    assert_eq!(
        at_broker,
        vec![
            (7_500 * MS, "broker-0", 0),
            (15 * S, "broker-1", 0),
            (15 * S, "broker-1", 1),
            (22_500 * MS, "broker-0", 0),
            (22_500 * MS, "broker-0", 1),
        ]
    );
    for topic in 0..2u32 {
        let of: Vec<usize> = (0..ev.len()).filter(|&i| ev.topic[i] == topic).collect();
        let mut last_ledger = 0;
        let mut k = 0;
        while k < of.len() {
            let i = of[k];
            if ev.op[i] != "unload" {
                if ev.op[i] == "add" {
                    last_ledger = last_ledger.max(ev.ledger_id[i].unwrap());
                }
                k += 1;
                continue;
            }
            // The last read position of each cursor before the unload, and its last ack.
            let before = &of[..k];
            let unloaded_at = ev.ts_us[i];
            let from = broker_of(&ev, i).to_string();
            // Nothing of the topic until its load, 100 ms later, on the other broker.
            let j = of[k + 1];
            assert_eq!(ev.op[j], "load", "topic {topic} at {unloaded_at}");
            assert_eq!(ev.ts_us[j], unloaded_at + 100 * MS);
            assert_ne!(broker_of(&ev, j), from);
            let to = broker_of(&ev, j).to_string();
            let loads: Vec<usize> = of[k + 1..]
                .iter()
                .copied()
                .take_while(|&x| ev.op[x] == "load")
                .collect();
            let covered: Vec<(i64, i64, i64)> = loads
                .iter()
                .map(|&x| {
                    let (l, e) = pos(&ev, x);
                    (l, e, e + ev.count[x] as i64)
                })
                .collect();
            assert!(loads.iter().all(|&x| ev.size[x] > 0 && ev.count[x] > 0));
            // Every row after the load is on the new owner, until the next unload.
            let after: Vec<usize> = of[k + 1 + loads.len()..]
                .iter()
                .copied()
                .take_while(|&x| ev.op[x] != "unload")
                .collect();
            assert!(after.iter().all(|&x| broker_of(&ev, x) == to));
            // The held messages go out at the load, in a new ledger from entry 0.
            let first_add = after.iter().copied().find(|&x| ev.op[x] == "add").unwrap();
            assert_eq!(ev.ts_us[first_add], ev.ts_us[j]);
            assert!(ev.ledger_id[first_add].unwrap() > last_ledger);
            assert_eq!(ev.entry_id[first_add], Some(0));
            let held: i64 = after
                .iter()
                .filter(|&&x| ev.op[x] == "add" && ev.ts_us[x] == ev.ts_us[j])
                .map(|&x| ev.messages[x].unwrap() as i64)
                .sum();
            // 1000 msg/s a partition, away 100 ms.
            assert!((80..=120).contains(&held), "{held}");
            // Each cursor reopens 100-200 ms after the load, at or after its last mark-delete
            // position + 1, within what the load found or at the new ledger's first entry.
            for cursor in 0..ev.cursor_names.len() as u32 {
                let opens: Vec<usize> = after
                    .iter()
                    .copied()
                    .filter(|&x| ev.cursor[x] == Some(cursor) && ev.op[x] == "open")
                    .collect();
                if !before.iter().any(|&x| ev.cursor[x] == Some(cursor)) {
                    continue;
                }
                assert_eq!(opens.len(), 1, "topic {topic} cursor {cursor}");
                let o = opens[0];
                let delay = ev.ts_us[o] - ev.ts_us[j];
                assert!((100 * MS..=200 * MS).contains(&delay), "{delay}");
                // No read of the cursor before it reopens.
                assert!(after
                    .iter()
                    .take_while(|&&x| x != o)
                    .all(|&x| ev.cursor[x] != Some(cursor)));
                let at = pos(&ev, o);
                let last_ack = before
                    .iter()
                    .rev()
                    .find(|&&x| ev.cursor[x] == Some(cursor) && ev.op[x] == "ack")
                    .map(|&x| pos(&ev, x));
                if let Some(ack) = last_ack {
                    assert!(at > ack, "{at:?} {ack:?}");
                }
                let in_load = covered
                    .iter()
                    .any(|&(l, lo, hi)| at.0 == l && (lo..hi).contains(&at.1));
                assert!(
                    in_load || (at.0 > last_ledger && at.1 == 0),
                    "{at:?} {covered:?}"
                );
            }
            k += 1;
        }
    }
    // Published: 2000 msg/s for 30 s, none lost in the moves.
    let published = messages(&ev);
    assert!((58_800..=61_200).contains(&published), "{published}");
    // Rows are in time order.
    assert!(ev.ts_us.windows(2).all(|w| w[0] <= w[1]));
}

/// The injector's stop rule, counted as Pulsar's test does: it looks at the clock after each
/// restart and stops at or after `end - interval`, so a longer restart leaves fewer restarts.
#[test]
fn the_injector_stops_as_pulsars_does() {
    let count =
        |extra: &[(&str, SettingValue)]| rows(&generate(&rolling(extra), 1), "unload").len();
    // 7.5, 15, 22.5 s: broker 0 moves 1 topic, then 2 and 2.
    assert_eq!(count(&[]), 5);
    // Away 10 s: the injector looks at 17.5 s and restarts at 22.5 s; then at 32.5 s it stops.
    let ev = generate(&rolling(&[("broker_restart_seconds", Float(10.0))]), 1);
    let at: Vec<i64> = rows(&ev, "unload").iter().map(|&i| ev.ts_us[i]).collect();
    assert_eq!(at, vec![7_500 * MS, 22_500 * MS, 22_500 * MS]);
    assert_eq!(count(&[("rolling_restart_count", Int(1))]), 1);
}

/// One broker: the topic is away while its broker restarts and comes back to it.
#[test]
fn a_one_broker_restart_brings_the_topic_back_after_the_restart() {
    let s = spec(&[
        ("producer_rate", Float(1000.0)),
        // Three times the rate: it catches up the 5 s away in 2.5 s.
        ("consumer_headroom", Float(3.0)),
        ("rolling_restart_interval_seconds", Float(10.0)),
        ("rolling_restart_count", Int(1)),
    ]);
    let ev = generate(&s, 2);
    let unloads = rows(&ev, "unload");
    let loads = rows(&ev, "load");
    assert_eq!(
        unloads.iter().map(|&i| ev.ts_us[i]).collect::<Vec<_>>(),
        vec![10 * S]
    );
    assert!(!loads.is_empty());
    assert!(loads
        .iter()
        .all(|&i| ev.ts_us[i] == 15 * S && broker_of(&ev, i) == "broker-0"));
    // Nothing between the unload and the load.
    assert!((unloads[0] + 1..loads[0]).all(|i| ev.ts_us[i] >= 15 * S));
    // The 5 s of messages held go out at the load.
    let held: i64 = (0..ev.len())
        .filter(|&i| ev.op[i] == "add" && ev.ts_us[i] == 15 * S)
        .map(|i| ev.messages[i].unwrap() as i64)
        .sum();
    assert!((4_800..=5_200).contains(&held), "{held}");
    let opens: Vec<usize> = rows(&ev, "open");
    assert_eq!(opens.len(), 2);
    assert!((15_100 * MS..=15_200 * MS).contains(&ev.ts_us[opens[1]]));
    let published = messages(&ev);
    assert!((29_400..=30_600).contains(&published), "{published}");
    // The consumer caught up: it read about everything published.
    let read: i64 = rows(&ev, "read").iter().map(|&i| ev.count[i] as i64).sum();
    let adds = rows(&ev, "add").len() as i64;
    assert!(read >= adds - 50 && read <= adds + 200, "{read} {adds}");
}

/// Load shedding: each broker moves one of its partitions at the rate given, to the next
/// broker, 100 ms after the unload; a topic is never moved while it is away.
#[test]
fn bundle_moves_come_at_their_rate() {
    let s = spec(&[
        ("brokers", Int(2)),
        ("partitions_per_topic", Int(4)),
        ("producer_rate", Float(4000.0)),
        ("bundle_moves_per_minute", Float(6.0)),
        ("test_duration_minutes", Float(2.0)),
    ]);
    let ev = generate(&s, 5);
    let unloads = rows(&ev, "unload");
    // 6 a minute on each of 2 brokers over 2 minutes: 24 expected.
    assert!((10..=45).contains(&unloads.len()), "{}", unloads.len());
    for &u in &unloads {
        let next = (u + 1..ev.len())
            .find(|&i| ev.topic[i] == ev.topic[u])
            .unwrap();
        assert_eq!(ev.op[next], "load");
        assert_eq!(ev.ts_us[next], ev.ts_us[u] + 100 * MS);
        assert_ne!(ev.broker[next], ev.broker[u]);
    }
    assert!(rows(&ev, "load").len() >= unloads.len());
    // Every published message is still there.
    let published = messages(&ev);
    assert!((470_000..=490_000).contains(&published), "{published}");
}

/// A client fleet restarting: every consumer closes and reopens after its reconnect delay; the
/// topics stay where they are.
#[test]
fn a_reconnect_storm_closes_and_reopens_every_consumer() {
    let s = spec(&[
        ("brokers", Int(2)),
        ("partitions_per_topic", Int(2)),
        ("subscriptions_per_topic", Int(3)),
        ("producer_rate", Float(2000.0)),
        ("reconnect_storm_every_seconds", Float(10.0)),
        ("test_duration_minutes", Float(0.4)),
    ]);
    let ev = generate(&s, 4);
    assert!(rows(&ev, "unload").is_empty() && rows(&ev, "load").is_empty());
    let closes = rows(&ev, "close");
    // Two storms (10 s, 20 s), 2 partitions x 3 subscriptions each.
    assert_eq!(closes.len(), 12);
    for &c in &closes {
        assert!([10 * S, 20 * S].contains(&ev.ts_us[c]));
        let open = (c + 1..ev.len())
            .find(|&i| ev.cursor[i] == ev.cursor[c] && ev.topic[i] == ev.topic[c])
            .unwrap();
        assert_eq!(ev.op[open], "open");
        let delay = ev.ts_us[open] - ev.ts_us[c];
        assert!((100 * MS..=200 * MS).contains(&delay), "{delay}");
        // Then the cursor rewinds to its first unacknowledged entry.
        let rewind = (open + 1..ev.len())
            .find(|&i| {
                ev.cursor[i] == ev.cursor[c]
                    && ev.topic[i] == ev.topic[c]
                    && ev.op[i] != "ack"
                    && ev.op[i] != "individual_ack"
            })
            .unwrap();
        assert_eq!(ev.op[rewind], "rewind");
    }
}

/// `BrokerEntryCacheRollingRestartTest`'s producer sleeps 100 ms whenever the deliveries it is
/// owed reach its target: with consumers slower than the rate, it publishes far less.
#[test]
fn a_producer_owed_too_many_deliveries_pauses() {
    let base = [
        ("partitions_per_topic", Int(2)),
        ("subscriptions_per_topic", Int(2)),
        ("subscription_type", Str("Shared".into())),
        ("batching_enabled", Str("false".into())),
        ("producer_rate", Float(2000.0)),
        ("consumer_headroom", Float(0.5)),
    ];
    let free = messages(&generate(&spec(&base), 1));
    let mut paused = base.to_vec();
    paused.push(("producer_pause_outstanding_deliveries", Float(4000.0)));
    let ev = generate(&spec(&paused), 1);
    let held = messages(&ev);
    assert!((58_000..=62_000).contains(&free), "{free}");
    // The consumers take 1000 msg/s of each partition's 1000 x 2 subscriptions owed: the
    // producer runs at about their pace once 2000 deliveries a partition are owed.
    assert!(held < free * 3 / 4, "{held} {free}");
    assert!(held > free / 3, "{held} {free}");
}

/// Lifecycle knobs left off leave the trace as it was, whatever their delays.
#[test]
fn the_delays_alone_change_nothing() {
    let base = [
        ("subscriptions_per_topic", Int(2)),
        ("brokers", Int(2)),
        ("topics", Int(3)),
    ];
    let mut with = base.to_vec();
    with.extend([
        ("broker_restart_seconds", Float(9.0)),
        ("topic_load_delay_ms", Float(7.0)),
        ("reconnect_delay_min_ms", Float(1.0)),
        ("reconnect_delay_max_ms", Float(3.0)),
        ("rolling_restart_count", Int(4)),
    ]);
    assert_eq!(generate(&spec(&base), 1), generate(&spec(&with), 1));
}

fn everything() -> WorkloadSpec {
    rolling(&[
        ("topics", Int(2)),
        ("bundle_moves_per_minute", Float(4.0)),
        ("reconnect_storm_every_seconds", Float(9.0)),
        ("churn_per_minute", Float(3.0)),
        ("churn_downtime_seconds", Float(1.0)),
        ("redelivery_rate", Float(0.01)),
        ("producer_pause_outstanding_deliveries", Float(50_000.0)),
    ])
}

/// The same spec and seed give the same trace, in memory and streamed, and brokers generated
/// apart add up to the whole (a moved partition stays with the simulation it started in).
#[test]
fn lifecycle_traces_are_deterministic_and_add_up_by_broker() {
    let s = everything();
    let ev = generate(&s, 9);
    assert_eq!(ev, generate(&s, 9));
    assert!(!rows(&ev, "unload").is_empty() && !rows(&ev, "close").is_empty());
    let whole = ev.to_record_batch();
    let mut stream = TraceStream::new(&s, 9);
    let mut offset = 0;
    while let Some(b) = stream.next_batch(777) {
        assert_eq!(b, whole.slice(offset, b.num_rows()));
        offset += b.num_rows();
    }
    assert_eq!(offset, ev.len());
    // Broker by broker, merged by time (ties: the lower broker first), as `generate` merges.
    let parts: Vec<EventColumns> = (0..s.brokers).map(|b| generate_broker(&s, 9, b)).collect();
    let mut order: Vec<(i64, usize, usize)> = parts
        .iter()
        .enumerate()
        .flat_map(|(b, p)| (0..p.len()).map(move |i| (p.ts_us[i], b, i)))
        .collect();
    order.sort();
    assert_eq!(order.len(), ev.len());
    for (k, &(ts, b, i)) in order.iter().enumerate() {
        assert_eq!(
            (ts, parts[b].op[i], parts[b].topic[i]),
            (ev.ts_us[k], ev.op[k], ev.topic[k])
        );
        assert_eq!(parts[b].broker[i], ev.broker[k]);
    }
}

/// Pathological knobs end quickly: moves are one at a time per partition, at most one a
/// millisecond; schedules ticking faster than a second are refused with the knob named.
#[test]
fn extreme_lifecycle_knobs_are_bounded_or_refused() {
    let s = spec(&[
        ("bundle_moves_per_minute", Float(1e300)),
        ("topic_load_delay_ms", Float(0.0)),
        ("reconnect_delay_max_ms", Float(1e300)),
        ("broker_restart_seconds", Float(1e300)),
        ("rolling_restart_interval_seconds", Float(1.0)),
        ("test_duration_minutes", Float(0.02)),
    ]);
    let start = std::time::Instant::now();
    let ev = generate(&s, 1);
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    // 1.2 s, one move a millisecond at most.
    assert!(
        rows(&ev, "unload").len() <= 1_200,
        "{}",
        rows(&ev, "unload").len()
    );
    let mut refused = WorkloadSpec::default();
    for key in [
        "rolling_restart_interval_seconds",
        "reconnect_storm_every_seconds",
    ] {
        let err = refused.set(key, &Float(0.5)).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains("at least 1"), "{err}");
        refused.set(key, &Float(0.0)).unwrap();
    }
    for key in [
        "bundle_moves_per_minute",
        "topic_load_delay_ms",
        "reconnect_delay_min_ms",
    ] {
        let err = refused.set(key, &Float(-1.0)).unwrap_err().to_string();
        assert!(err.contains(key), "{err}");
    }
}

/// The estimate counts the lifecycle's rows: within a factor of two of the generated trace, as
/// for every other knob, and more rows than without the knobs.
#[test]
fn the_estimate_counts_the_lifecycles_rows() {
    let cases = [
        ("rolling", rolling(&[])),
        (
            "rolling 10 s away",
            rolling(&[("broker_restart_seconds", Float(10.0))]),
        ),
        (
            "one broker",
            spec(&[
                ("rolling_restart_interval_seconds", Float(10.0)),
                ("consumer_headroom", Float(3.0)),
            ]),
        ),
        (
            "moves",
            spec(&[
                ("brokers", Int(2)),
                ("partitions_per_topic", Int(4)),
                ("bundle_moves_per_minute", Float(30.0)),
                ("test_duration_minutes", Float(2.0)),
            ]),
        ),
        (
            "storms",
            spec(&[
                ("subscriptions_per_topic", Int(4)),
                ("reconnect_storm_every_seconds", Float(2.0)),
            ]),
        ),
        (
            // Consumers away longer than a storm's interval: each storm after the first finds
            // them away and closes nothing until they are back.
            "storms shorter than the reconnect",
            spec(&[
                ("subscriptions_per_topic", Int(4)),
                ("reconnect_storm_every_seconds", Float(1.0)),
                ("reconnect_delay_min_ms", Float(9000.0)),
                ("reconnect_delay_max_ms", Float(9000.0)),
                ("producer_rate", Float(10000.0)),
            ]),
        ),
        ("everything", everything()),
    ];
    for (name, s) in cases {
        let mut plain = s.clone();
        for key in [
            "rolling_restart_interval_seconds",
            "bundle_moves_per_minute",
            "reconnect_storm_every_seconds",
            "producer_pause_outstanding_deliveries",
        ] {
            plain.set(key, &Float(0.0)).unwrap();
        }
        let rows = generate(&s, 1).len() as f64;
        let estimated = s.estimate().events;
        assert!(
            estimated > rows / 2.0 && estimated < rows * 2.0,
            "{name}: estimated {estimated:.0} rows, generated {rows:.0}"
        );
        assert!(estimated > plain.estimate().events, "{name}");
    }
}

/// Every row of a topic after its unload waits for its load, on the new owner; a cursor's rows
/// on a broker come after its `open` there (seeks, churn, nacks and storms mixed in).
#[test]
fn no_row_of_a_moved_topic_or_cursor_comes_before_its_load_or_open() {
    use std::collections::{HashMap, HashSet};
    let s = rolling(&[
        ("brokers", Int(3)),
        ("partitions_per_topic", Int(5)),
        ("subscriptions_per_topic", Int(3)),
        ("subscription_type", Str("Failover".into())),
        ("redelivery_rate", Float(0.01)),
        ("negative_ack_redelivery_delay_ms", Int(2000)),
        ("churn_per_minute", Float(6.0)),
        ("churn_downtime_seconds", Float(2.0)),
        ("seeks_per_minute", Float(6.0)),
        ("rolling_restart_interval_seconds", Float(4.0)),
        ("bundle_moves_per_minute", Float(6.0)),
        ("reconnect_storm_every_seconds", Float(5.0)),
        ("test_duration_minutes", Float(1.0)),
    ]);
    let ev = generate(&s, 11);
    // topic -> (broker, loaded); (topic, cursor) -> broker it was opened on.
    let mut topics: HashMap<u32, (u32, bool)> = HashMap::new();
    let mut opened: HashSet<(u32, u32, u32)> = HashSet::new();
    let mut checked = 0;
    for i in 0..ev.len() {
        let (topic, broker) = (ev.topic[i], ev.broker[i]);
        match ev.op[i] {
            "unload" => {
                assert_eq!(topics.get(&topic), Some(&(broker, true)), "row {i}");
                topics.insert(topic, (broker, false));
                opened.retain(|&(t, _, _)| t != topic);
            }
            "load" => {
                topics.insert(topic, (broker, true));
            }
            op => {
                let here = *topics.entry(topic).or_insert((broker, true));
                assert_eq!(here, (broker, true), "row {i}: {op}");
                if let Some(c) = ev.cursor[i] {
                    if op == "open" {
                        opened.insert((topic, c, broker));
                    } else {
                        assert!(opened.contains(&(topic, c, broker)), "row {i}: {op}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(rows(&ev, "unload").len() > 20 && rows(&ev, "seek").len() > 5);
    assert!(checked > 1000);
}

/// OMB's backlog test with consumers that a storm takes away for longer than the run: the
/// backlog never drains, so the run goes on to `backlog_max_wait_minutes`, and the estimate says
/// so (it assumed a drain at the consumers' full speed: 0.2 simulated minutes for a 1.2-minute
/// trace, so `lc.workload.generate` built a table far over its memory budget; with the default
/// 240-minute wait, 43 million rows and an out-of-memory kill).
#[test]
fn the_estimate_counts_a_backlog_that_away_consumers_never_drain() {
    let s = spec(&[
        ("message_size", Int(5000)),
        ("producer_rate", Float(3000.0)),
        ("test_duration_minutes", Float(0.1)),
        ("warmup_duration_minutes", Float(0.0)),
        ("consumer_backlog_size_gb", Float(0.0001)),
        ("backlog_max_wait_minutes", Float(1.0)),
        ("reconnect_storm_every_seconds", Float(2.0)),
        ("reconnect_delay_max_ms", Float(1e15)),
    ]);
    let ev = generate(&s, 7);
    let ran_minutes = *ev.ts_us.iter().max().unwrap() as f64 / 60e6;
    let estimated = s.simulated_minutes();
    assert!(ran_minutes > 1.0, "{ran_minutes}");
    assert!(
        (estimated - ran_minutes).abs() < 0.2 * ran_minutes,
        "estimated {estimated} min, ran {ran_minutes} min"
    );
}
