//! The workload generator: determinism, the traffic each knob should produce, and traces the
//! replay engine accepts.

use ledgercache::config::SettingValue;
use ledgercache::lab::replay::{replay, TraceDecoder};
use ledgercache::lab::workload::{generate, EventColumns, WorkloadSpec};
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
    assert!(
        published < messages,
        "{published} entries for {messages} messages"
    );
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
fn catch_up_seek_and_churn_knobs_show_up() {
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

/// OMB's backlog test (`WorkloadGenerator.run` / `buildAndDrainBacklog`): consumers read during
/// the warm-up, pause at its end until the backlog (GiB, over the subscriptions) is built, looked
/// at once a second, resume, and the test runs `testDurationMinutes` past the drain.
#[test]
fn omb_backlog_test_pauses_builds_drains_then_runs_its_minutes() {
    let run = |extra: &[(&str, SettingValue)]| {
        let mut settings = vec![
            // 0.01 GiB of 1 KiB messages at 1000 msg/s: 10,486 messages, 11 s to build.
            ("consumer_backlog_size_gb", Float(0.01)),
            ("warmup_duration_minutes", Float(0.1)),
            ("test_duration_minutes", Float(0.5)),
        ];
        settings.extend_from_slice(extra);
        let s = spec(&settings);
        let ev = generate(&s, 1);
        let reads: Vec<i64> = (0..ev.len())
            .filter(|&i| ev.op[i] == "read")
            .map(|i| ev.ts_us[i])
            .collect();
        let gap = reads
            .windows(2)
            .map(|w| (w[1] - w[0], w[0], w[1]))
            .max()
            .unwrap();
        (gap, *ev.ts_us.last().unwrap(), s.simulated_minutes() * 60e6)
    };
    let ((_, paused_at, resumed_at), end, expected_end) = run(&[]);
    // Reads during the warm-up, until the receiver queue's permits run out after the pause.
    assert!((6_000_000..8_000_000).contains(&paused_at), "{paused_at}");
    // Resumed at the first whole second after the pause with the backlog built: 6 s + 11 s.
    assert!(
        (17_000_000..17_100_000).contains(&resumed_at),
        "{resumed_at}"
    );
    // Drained at 1.2x the rate ((10,486 - 1000) / 200 = 47 s), then 30 s of test: the run
    // goes well past warm-up plus test (36 s), and about as long as the estimate says.
    assert!(end > 80_000_000, "{end}");
    let ratio = end as f64 / expected_end;
    assert!((0.9..1.1).contains(&ratio), "{end} against {expected_end}");
    // Drained to half the backlog (5243 messages, not 1000), the test ends about 21 s sooner.
    let (_, half, _) = run(&[("backlog_drain_ratio", Float(0.5))]);
    assert!(
        (end - half - 21_000_000).abs() < 3_000_000,
        "{half} against {end}"
    );
    // Consumers slower than the publish rate never drain it: the lab stops waiting after
    // backlogMaxWaitMinutes, then runs the test's minutes.
    let (_, capped, expected) = run(&[
        ("consumer_headroom", Float(0.9)),
        ("backlog_max_wait_minutes", Float(1.0)),
    ]);
    assert!((95_000_000..=96_000_000).contains(&capped), "{capped}");
    assert_eq!(expected, 96e6, "the estimate knows the wait is capped");
    // So do slow consumers (half of 1.2x the rate), and the estimate says so too.
    let (_, slow, expected) = run(&[
        ("slow_consumer_fraction", Float(1.0)),
        ("backlog_max_wait_minutes", Float(1.0)),
    ]);
    assert!((95_000_000..=96_000_000).contains(&slow), "{slow}");
    assert_eq!(expected, 96e6);
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
        arrow_schema::DataType::Dictionary(..) => {
            let a = c.as_dictionary::<Int32Type>();
            let keys = a.keys();
            let taken =
                Int32Array::from_iter(rows.map(|i| (!keys.is_null(i)).then(|| keys.value(i))));
            Arc::new(
                arrow_array::DictionaryArray::<Int32Type>::try_new(taken, a.values().clone())
                    .unwrap(),
            )
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
    use ledgercache::lab::workload::generate_broker;
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

// ---- Pulsar's dispatchers, producer batching and client flow control --------------------------
//
// Each test names the Pulsar (branch master) or OpenMessaging Benchmark code it follows; see
// docs/fidelity.md.

use ledgercache::lab::workload::{
    ConsistentHashRing, REASON_HOLD_BACK, REASON_NACK, REASON_OVERFLOW,
};
use std::collections::{BTreeSet, HashMap};

fn rows_of<'a>(ev: &'a EventColumns, cursor: &'a str) -> impl Iterator<Item = usize> + 'a {
    (0..ev.len())
        .filter(move |&i| ev.cursor[i].is_some_and(|c| ev.cursor_names[c as usize] == cursor))
}

/// Messages in each entry of the (one-ledger) topic, from the `add` rows.
fn messages_per_entry(ev: &EventColumns) -> Vec<i64> {
    let mut out = Vec::new();
    for i in 0..ev.len() {
        if ev.op[i] == "add" {
            assert_eq!(
                ev.entry_id[i],
                Some(out.len() as i64),
                "one topic, one ledger"
            );
            out.push(ev.messages[i].expect("an add carries its messages") as i64);
        }
    }
    out
}

/// The most entries the cursor's replay queue held at once, replaying the trace's rows.
fn max_replay_queue(ev: &EventColumns, cursor: &str) -> usize {
    let mut queue = BTreeSet::new();
    let mut max = 0;
    for i in rows_of(ev, cursor) {
        let e = ev.entry_id[i];
        match ev.op[i] {
            "redeliver" => {
                queue.insert(e.unwrap());
            }
            "replay" => {
                queue.remove(&e.unwrap());
            }
            "seek" => queue.clear(),
            _ => {}
        }
        max = max.max(queue.len());
    }
    max
}

fn reasons(ev: &EventColumns) -> HashMap<&'static str, usize> {
    let mut out = HashMap::new();
    for i in 0..ev.len() {
        match (ev.op[i], ev.reason[i]) {
            ("redeliver", Some(r)) => *out.entry(r).or_insert(0) += 1,
            ("redeliver", None) => panic!("row {i}: a redeliver without a reason"),
            (op, Some(r)) => panic!("row {i}: {op} with reason {r}"),
            _ => {}
        }
    }
    out
}

/// PersistentDispatcherMultipleConsumers.readMoreEntries / calculateToRead (reads
/// min(total permits, dispatcherMaxReadBatchSize) entries) and trySendMessagesToConsumers (round
/// robin; only what no consumer has permits for goes to replay): a Shared subscription that keeps
/// up and has no negative acks redelivers nothing, even with a one-message receiver queue (where
/// reading a whole batch whenever a permit is free overflows).
#[test]
fn shared_keeping_up_without_nacks_redelivers_nothing() {
    for (rate, receiver_queue, headroom) in [(800.0, 1, 1.1), (3000.0, 1000, 1.2), (800.0, 2, 1.05)]
    {
        let ev = generate(
            &spec(&[
                ("subscription_type", Str("Shared".into())),
                ("consumer_per_subscription", Int(3)),
                ("producer_rate", Float(rate)),
                ("receiver_queue_size", Int(receiver_queue)),
                ("consumer_headroom", Float(headroom)),
            ]),
            1,
        );
        assert_eq!(
            count(&ev, "redeliver"),
            0,
            "rate {rate}, queue {receiver_queue}"
        );
        assert_eq!(count(&ev, "replay"), 0);
        let published = count(&ev, "add") as i64;
        assert!(published - reads_by_cursor(&ev)[0] <= 100);
    }
}

/// PersistentDispatcherMultipleConsumers.trySendMessagesToConsumers / getMaxEntriesInThisBatch:
/// permits are messages and an entry is a batch, so a read of min(permits, 100) entries can
/// bring more messages than the consumers have permits for; the rest is added to replay
/// (`overflow`). Negative acks (redeliverUnacknowledgedMessages with positions) are `nack`.
#[test]
fn shared_overflow_and_nacks_carry_their_reason() {
    let ev = generate(
        &spec(&[
            ("subscription_type", Str("Shared".into())),
            ("consumer_per_subscription", Int(3)),
            ("producer_rate", Float(3000.0)),
            ("consumer_headroom", Float(0.9)),
            ("redelivery_rate", Float(0.01)),
            ("negative_ack_redelivery_delay_ms", Int(1000)),
        ]),
        1,
    );
    let r = reasons(&ev);
    assert!(r.get(REASON_OVERFLOW).copied().unwrap_or(0) > 0, "{r:?}");
    assert!(r.get(REASON_NACK).copied().unwrap_or(0) > 0, "{r:?}");
    assert_eq!(r.get(REASON_HOLD_BACK), None, "{r:?}");
}

fn key_shared_slow(extra: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut s = spec(&[
        ("subscription_type", Str("Key_Shared".into())),
        ("consumer_per_subscription", Int(4)),
        ("key_distributor", Str("KEY_ROUND_ROBIN".into())),
        ("slow_consumer_fraction", Float(0.25)),
        ("slow_consumer_speed", Float(0.2)),
        ("producer_rate", Float(4000.0)),
        ("max_entries_per_ledger", Int(10_000_000)),
    ]);
    for (k, v) in extra {
        s.set(k, v).unwrap();
    }
    s
}

/// PersistentStickyKeyDispatcherMultipleConsumers.isNormalReadAllowed / getMaxEntriesReadLimit /
/// getEffectiveLookAheadLimit: normal reads stop once the replay queue holds
/// min(keySharedLookAheadMsgInReplayThresholdPerConsumer x consumers,
/// keySharedLookAheadMsgInReplayThresholdPerSubscription) entries (4000 x 4 = 16000 by default),
/// and a read never asks for more than the room left; a slow consumer cannot grow it further.
#[test]
fn key_shared_replay_queue_stays_within_the_look_ahead_limit() {
    let ev = generate(
        &key_shared_slow(&[("test_duration_minutes", Float(3.0))]),
        3,
    );
    let max = max_replay_queue(&ev, "sub-0");
    assert!(
        (15_000..=16_000).contains(&max),
        "default limit 16000, held {max}"
    );
    for (per_consumer, per_subscription, limit) in [(100, 40_000, 400), (4000, 300, 300)] {
        let s = key_shared_slow(&[
            (
                "key_shared_look_ahead_msg_in_replay_threshold_per_consumer",
                Int(per_consumer),
            ),
            (
                "key_shared_look_ahead_msg_in_replay_threshold_per_subscription",
                Int(per_subscription),
            ),
        ]);
        let max = max_replay_queue(&generate(&s, 3), "sub-0");
        assert!(
            max <= limit && max + 20 >= limit,
            "limit {limit}, held {max}"
        );
    }
}

/// PersistentStickyKeyDispatcherMultipleConsumers.filterAndGroupEntriesForDispatching /
/// canDispatchEntry: in a normal read, an entry whose sticky key already waits in the replay
/// queue is not sent (ordering) but added to replay too, as `hold-back`; so is one whose
/// consumer has no permits.
#[test]
fn key_shared_normal_read_holds_back_keys_waiting_in_replay() {
    let keys = 64u64;
    let ev = generate(&key_shared_slow(&[("keys", Int(keys as i64))]), 5);
    let per_entry = messages_per_entry(&ev);
    let mut first = Vec::with_capacity(per_entry.len());
    let mut total = 0;
    for m in &per_entry {
        first.push(total);
        total += *m as u64;
    }
    // An entry's key is its first message's (KEY_ROUND_ROBIN: message number mod keys).
    let key = |e: i64| first[e as usize] % keys;
    let mut waiting: HashMap<u64, usize> = HashMap::new();
    let mut in_replay = BTreeSet::new();
    let (mut position, mut checked) = (0i64, 0);
    let rows: Vec<usize> = rows_of(&ev, "sub-0").collect();
    for (k, &i) in rows.iter().enumerate() {
        let e = ev.entry_id[i];
        match ev.op[i] {
            "read" => {
                let held: BTreeSet<i64> = rows[k + 1..]
                    .iter()
                    .take_while(|&&j| ev.op[j] == "redeliver")
                    .map(|&j| ev.entry_id[j].unwrap())
                    .collect();
                for e in position..position + ev.count[i] as i64 {
                    if waiting.get(&key(e)).is_some_and(|&n| n > 0) {
                        assert!(held.contains(&e), "entry {e}: its key waits in replay");
                        checked += 1;
                    }
                }
                position += ev.count[i] as i64;
            }
            "redeliver" => {
                assert_eq!(ev.reason[i], Some(REASON_HOLD_BACK));
                if in_replay.insert(e.unwrap()) {
                    *waiting.entry(key(e.unwrap())).or_insert(0) += 1;
                }
            }
            "replay" if in_replay.remove(&e.unwrap()) => {
                *waiting.get_mut(&key(e.unwrap())).unwrap() -= 1;
            }
            _ => {}
        }
    }
    assert!(checked > 100, "only {checked} entries met a waiting key");
}

/// ConsistentHashingStickyKeyConsumerSelector.addConsumer / removeConsumer / select with
/// subscriptionKeySharedConsistentHashingReplicaPoints = 100: keys spread over the consumers
/// (not key % n), and when a consumer leaves, only its keys move.
#[test]
fn consistent_hashing_spreads_keys_and_keeps_them_when_a_consumer_leaves() {
    use ledgercache::lab::workload::sticky_key_hash;
    let names = ["consumer-0", "consumer-1", "consumer-2", "consumer-3"];
    let mut ring = ConsistentHashRing::new(100);
    for (c, name) in names.iter().enumerate() {
        ring.add_consumer(c, name);
    }
    let keys: Vec<u32> = (0..10_000)
        .map(|k| sticky_key_hash(format!("key-{k}").as_bytes()))
        .collect();
    let before: Vec<usize> = keys.iter().map(|&h| ring.select(h).unwrap()).collect();
    let mut share = [0usize; 4];
    before.iter().for_each(|&c| share[c] += 1);
    assert!(
        share.iter().all(|&n| (1_500..3_500).contains(&n)),
        "{share:?}"
    );
    let modulo = before
        .iter()
        .enumerate()
        .filter(|(k, &c)| k % 4 == c)
        .count();
    assert!(modulo < 4_000, "{modulo} keys sit where key % n puts them");
    ring.remove_consumer(2, names[2]);
    let mut moved = 0;
    for (k, &h) in keys.iter().enumerate() {
        let now = ring.select(h).unwrap();
        assert_ne!(now, 2);
        if before[k] != 2 {
            assert_eq!(now, before[k], "key {k} moved from consumer {}", before[k]);
        } else {
            moved += 1;
        }
    }
    assert_eq!(moved, share[2]);
    ring.add_consumer(2, names[2]);
    assert!(keys
        .iter()
        .zip(&before)
        .all(|(&h, &c)| ring.select(h) == Some(c)));
}

/// PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages (rewinds the cursor;
/// single positions are never replayed) with ConsumerImpl.redeliverUnacknowledgedMessages(Set),
/// which on Exclusive/Failover asks for everything unacknowledged: a nack shows up as a `seek` to
/// the first unacknowledged entry, never as `redeliver`/`replay` rows.
/// `NegativeAcksTracker` then `ConsumerImpl.redeliverUnacknowledgedMessages(Set)` on Exclusive and
/// Failover: a nack waits for the client's delay while the consumer goes on acknowledging the
/// others on their own; then the client asks for everything unacknowledged and the dispatcher
/// rewinds (`PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages`). The
/// trace has the mark-delete position and the individual acks before each `rewind`, and the
/// re-read passes over what was acknowledged.
#[test]
fn exclusive_and_failover_nacks_rewind_after_the_delay_and_reread_the_unacknowledged() {
    for kind in ["Exclusive", "Failover"] {
        let s = spec(&[
            ("subscription_type", Str(kind.into())),
            ("redelivery_rate", Float(0.001)),
            ("producer_rate", Float(2000.0)),
            ("max_entries_per_ledger", Int(10_000_000)),
            ("negative_ack_redelivery_delay_ms", Int(2000)),
            // Each acknowledgement at the broker at once (the next test has the client's grouping).
            ("acknowledgment_group_time_ms", Int(0)),
        ]);
        let ev = generate(&s, 2);
        for op in ["redeliver", "replay", "seek"] {
            assert_eq!(count(&ev, op), 0, "{kind}: {op}");
        }
        let rows: Vec<usize> = rows_of(&ev, "sub-0").collect();
        let rewinds: Vec<usize> = rows
            .iter()
            .copied()
            .filter(|&i| ev.op[i] == "rewind")
            .collect();
        assert!(rewinds.len() > 5, "{kind}: {} rewinds", rewinds.len());
        // No rewind before the first nack's delay has passed.
        let first_read = rows
            .iter()
            .find(|&&i| ev.op[i] == "read")
            .map(|&i| ev.ts_us[i]);
        assert!(
            ev.ts_us[rewinds[0]] >= first_read.unwrap() + 2_000_000,
            "{kind}"
        );
        // Each rewind comes after the acknowledgements: individual acks past the mark-delete
        // position, none at or before it.
        let (mut md, mut individual) = (-1i64, 0);
        for &i in &rows {
            match ev.op[i] {
                "ack" => md = md.max(ev.entry_id[i].unwrap()),
                "individual_ack" => {
                    individual += 1;
                    assert!(ev.entry_id[i].unwrap() > md + 1, "{kind}: row {i}");
                    assert!(ev.count[i] >= 1);
                }
                _ => {}
            }
        }
        assert!(
            individual >= rewinds.len(),
            "{kind}: {individual} individual acks"
        );
        // Replayed, the re-reads take the nacked entries (and the receiver queue dropped), not
        // everything after the mark-delete position: without the individual acks they would.
        let replayed = |keep_individual: bool| {
            let mut d = TraceDecoder::new();
            let mut events = Vec::new();
            d.decode(&ev.to_record_batch(), &mut events).unwrap();
            if !keep_individual {
                events.retain(|e| e.op.name() != "individual_ack");
            }
            replay(&events, &d.names, &CacheConfig::default()).unwrap()
        };
        let (with, without) = (replayed(true), replayed(false));
        let published = count(&ev, "add") as u64;
        let again = with.entries_read - published;
        let again_without = without.entries_read - published;
        assert!(
            again > 0 && again < again_without,
            "{kind}: {with:?} / {without:?}"
        );
        if kind == "Exclusive" {
            // A consumer that keeps up drops a near-empty receiver queue: the re-reads are about
            // the nacked entries alone. (Failover's consumer starts after the failover delay and
            // catches up with a full queue, which each rewind reads again.)
            assert!(again * 5 < again_without, "{again} / {again_without}");
        }
    }
}

/// `PersistentAcknowledgmentsGroupingTracker`: the client sends its acknowledgements every
/// `acknowledgmentGroupTime` (100 ms) or once `maxAcknowledgmentGroupSize` are pending, and a
/// redelivery request does not flush them, so each nack's rewind also re-reads what was
/// acknowledged since the last flush: more the longer the group time, at most a group's worth a
/// rewind, and no more than without grouping once the group size is small.
#[test]
fn a_rewind_rereads_the_acknowledgements_the_client_has_not_sent() {
    let rate = 4000.0;
    let reread = |group_ms: i64, group_size: i64| {
        let s = spec(&[
            ("subscription_type", Str("Exclusive".into())),
            ("redelivery_rate", Float(0.001)),
            ("producer_rate", Float(rate)),
            ("batching_enabled", SettingValue::Bool(false)),
            ("max_entries_per_ledger", Int(10_000_000)),
            ("negative_ack_redelivery_delay_ms", Int(2000)),
            ("acknowledgment_group_time_ms", Int(group_ms)),
            ("max_acknowledgment_group_size", Int(group_size)),
        ]);
        let ev = generate(&s, 2);
        let mut d = TraceDecoder::new();
        let mut events = Vec::new();
        d.decode(&ev.to_record_batch(), &mut events).unwrap();
        let r = replay(&events, &d.names, &CacheConfig::default()).unwrap();
        (
            r.entries_read - count(&ev, "add") as u64,
            count(&ev, "rewind") as u64,
        )
    };
    let (none, rewinds) = reread(0, 1000);
    let (default, _) = reread(100, 1000);
    let (long, _) = reread(1000, 100_000);
    let (small_groups, _) = reread(1000, 1);
    assert!(rewinds > 5, "{rewinds} rewinds");
    assert!(none < default && default < long, "{none} {default} {long}");
    // A group is at most 100 ms of one consumer's acknowledgements (rate x headroom 1.2).
    let group = (rate * 1.2 * 0.1) as u64;
    assert!(
        default - none <= rewinds * group,
        "{default} - {none} > {rewinds} x {group}"
    );
    // A group size of 1 sends each acknowledgement at once, whatever the group time.
    assert!(
        small_groups.abs_diff(none) * 10 < default - none,
        "{small_groups} {none}"
    );
}

/// PersistentDispatcherMultipleConsumers.addConsumer (the first consumer of a subscription
/// without consumers rewinds the cursor; the replay queue is cleared) and
/// PersistentDispatcherSingleActiveConsumer.scheduleReadOnActiveConsumer (rewind when the active
/// consumer is chosen): every reconnect is an `open`, the acknowledgements the broker has (the
/// mark-delete position, the individual acks past it), then a `rewind` to the mark-delete
/// position + 1, behind what was read before the disconnect.
#[test]
fn reconnect_to_an_empty_subscription_rewinds() {
    for kind in ["Shared", "Exclusive", "Key_Shared"] {
        let ev = generate(
            &spec(&[
                ("subscription_type", Str(kind.into())),
                ("consumer_per_subscription", Int(2)),
                ("key_distributor", Str("KEY_ROUND_ROBIN".into())),
                ("churn_per_minute", Float(12.0)),
                ("churn_downtime_seconds", Float(1.0)),
                ("producer_rate", Float(2000.0)),
                ("max_entries_per_ledger", Int(10_000_000)),
            ]),
            4,
        );
        let rows: Vec<usize> = rows_of(&ev, "sub-0").collect();
        // `position` counts what reads asked for: at most where the cursor is, as reads after a
        // rewind pass over acknowledged entries.
        let (mut position, mut acked, mut reopens, mut behind) = (0i64, -1i64, 0, 0);
        let mut at_close = None;
        for (k, &i) in rows.iter().enumerate() {
            match ev.op[i] {
                "read" => position += ev.count[i] as i64,
                "ack" => acked = acked.max(ev.entry_id[i].unwrap()),
                "close" => at_close = Some(position),
                "open" if ev.ts_us[i] > 0 => {
                    let rest: Vec<usize> = rows[k + 1..]
                        .iter()
                        .copied()
                        .take_while(|&j| ev.ts_us[j] == ev.ts_us[i] && ev.op[j] != "read")
                        .collect();
                    let ops: Vec<&str> = rest.iter().map(|&j| ev.op[j]).collect();
                    let rewind = ops.iter().position(|&o| o == "rewind");
                    let Some(r) = rewind else {
                        panic!("{kind}: reopen without rewind: {ops:?}")
                    };
                    assert!(
                        ops[..r]
                            .iter()
                            .all(|&o| o == "ack" || o == "individual_ack"),
                        "{kind}: {ops:?}"
                    );
                    for &j in &rest[..r] {
                        if ev.op[j] == "ack" {
                            acked = acked.max(ev.entry_id[j].unwrap());
                        }
                    }
                    at_close.take().expect("a reopen follows a close");
                    let to = acked + 1;
                    reopens += 1;
                    behind += (to < position) as usize;
                    position = to;
                }
                "seek" => position = ev.entry_id[i].unwrap(),
                _ => {}
            }
        }
        assert!(reopens >= 3, "{kind}: {reopens} reopens");
        assert!(behind >= 1, "{kind}: no reopen went back");
    }
}

/// OpenMessaging Benchmark's Pulsar driver (driver-pulsar/pulsar.yaml: batchingMaxPublishDelayMs
/// 1, batchingMaxBytes 131072; PulsarBenchmarkDriver: batchingMaxMessages Integer.MAX_VALUE) with
/// ProducerImpl.batchFlushTask and BatchMessageContainerImpl.add / haveEnoughSpace: an entry is a
/// batch closed by the publish delay, by bytes or by count; its size is the whole batch.
#[test]
fn entries_are_batches_within_the_batching_limits() {
    let batches = |extra: &[(&str, SettingValue)]| {
        // Payloads alone: an entry's size is messages x message size.
        let mut s = spec(&[
            ("producer_rate", Float(20_000.0)),
            ("test_duration_minutes", Float(0.05)),
            ("message_metadata", SettingValue::Bool(false)),
        ]);
        for (k, v) in extra {
            s.set(k, v).unwrap();
        }
        let ev = generate(&s, 1);
        let mut out = Vec::new();
        for i in 0..ev.len() {
            if ev.op[i] == "add" {
                let m = ev.messages[i].unwrap();
                assert_eq!(ev.size[i], m * s.message_size as i32);
                out.push(m);
            }
        }
        let total: i32 = out.iter().sum();
        assert!((55_000..65_000).contains(&total), "{total} messages");
        out
    };
    // 20 messages a millisecond: the 1 ms publish delay closes the batches.
    let by_delay = batches(&[]);
    let mean = by_delay.iter().sum::<i32>() as f64 / by_delay.len() as f64;
    assert!(
        (18.0..22.0).contains(&mean) && by_delay.iter().all(|&m| m <= 24),
        "{mean}"
    );
    // 10 kB messages: 13 fit in 131072 bytes.
    let by_bytes = batches(&[("message_size", Int(10_000))]);
    assert!(by_bytes.iter().all(|&m| m <= 13));
    assert!(by_bytes.iter().filter(|&&m| m == 13).count() * 10 > by_bytes.len() * 9);
    let by_count = batches(&[("batching_max_messages", Int(5))]);
    assert!(by_count.iter().all(|&m| m <= 5));
    assert!(by_count.iter().filter(|&&m| m == 5).count() * 10 > by_count.len() * 9);
    let off = batches(&[("batching_enabled", SettingValue::Bool(false))]);
    assert!(off.iter().all(|&m| m == 1));
}

/// ConsumerImpl.increaseAvailablePermits: the client sends FLOW only once half the receiver queue
/// is free, and the dispatchers read while permits last
/// (PersistentDispatcherSingleActiveConsumer.readMoreEntries / calculateToRead): a saturated
/// consumer's reads come in bursts of at least half the receiver queue.
#[test]
fn a_saturated_consumers_reads_come_in_bursts() {
    for (batching, at_least) in [(false, 500), (true, 250)] {
        let ev = generate(
            &spec(&[
                ("producer_rate", Float(2000.0)),
                ("consumer_headroom", Float(0.5)),
                ("batching_enabled", SettingValue::Bool(batching)),
                ("max_entries_per_ledger", Int(10_000_000)),
            ]),
            1,
        );
        let per_entry = messages_per_entry(&ev);
        let mut bursts: Vec<(i64, i64)> = Vec::new();
        let mut position = 0i64;
        for i in rows_of(&ev, "sub-0") {
            if ev.op[i] != "read" {
                continue;
            }
            let n = ev.count[i] as i64;
            let messages: i64 = per_entry[position as usize..(position + n) as usize]
                .iter()
                .sum();
            position += n;
            match bursts.last_mut() {
                Some((ts, m)) if *ts == ev.ts_us[i] => *m += messages,
                _ => bursts.push((ev.ts_us[i], messages)),
            }
        }
        let backlogged: Vec<i64> = bursts
            .iter()
            .filter(|(ts, _)| *ts > 5_000_000)
            .map(|&(_, m)| m)
            .collect();
        assert!(backlogged.len() > 20, "{}", backlogged.len());
        assert!(
            backlogged.iter().all(|&m| m >= at_least),
            "batching {batching}: bursts {backlogged:?}"
        );
    }
}

/// PersistentDispatcherSingleActiveConsumer.scheduleReadOnActiveConsumer with
/// activeConsumerFailoverDelayTimeMillis (1000 by default): a Failover subscription starts
/// reading a second after its active consumer is chosen.
#[test]
fn failover_starts_reading_after_the_failover_delay() {
    let ev = generate(&spec(&[("subscription_type", Str("Failover".into()))]), 1);
    let first_read = (0..ev.len()).find(|&i| ev.op[i] == "read").unwrap();
    assert!(
        ev.ts_us[first_read] >= 1_000_000,
        "{}",
        ev.ts_us[first_read]
    );
    let ev = generate(&spec(&[("subscription_type", Str("Exclusive".into()))]), 1);
    let first_read = (0..ev.len()).find(|&i| ev.op[i] == "read").unwrap();
    // (the read parked at the start looks for entries again after 10 ms)
    assert!(ev.ts_us[first_read] <= 11_000, "{}", ev.ts_us[first_read]);
}

/// ManagedCursorImpl.applyMaxSizeCap (EntryCountEstimator) under dispatcherMaxReadSizeBytes
/// (5 MB by default): a read asks for no more entries than that many bytes hold, estimated from
/// the average entry size.
#[test]
fn reads_are_capped_by_dispatcher_max_read_size_bytes() {
    // 1 MB over 100,000-byte entries and BookKeeper's 64 bytes of overhead each: 9 entries
    // (`EntryCountEstimator`).
    for (cap, most) in [(None, 52), (Some(1_000_000), 9)] {
        let mut s = spec(&[
            ("producer_rate", Float(200.0)),
            ("message_size", Int(100_000)),
            ("consumer_backlog_size_gb", Float(0.1)),
            ("consumer_headroom", Float(3.0)),
        ]);
        if let Some(bytes) = cap {
            s.set("dispatcher_max_read_size_bytes", &Int(bytes))
                .unwrap();
        }
        let ev = generate(&s, 1);
        let reads: Vec<i32> = (0..ev.len())
            .filter(|&i| ev.op[i] == "read")
            .map(|i| ev.count[i])
            .collect();
        assert_eq!(reads.iter().max(), Some(&most), "cap {cap:?}");
    }
}

/// The Java client's NegativeAcksTracker: a Shared consumer asks for a nacked message again
/// `negativeAckRedeliveryDelay` after the nack (one minute by default), its due time rounded down
/// to 256 ms (`negativeAckPrecisionBitCnt` 8); a delay under 100 ms is raised to 100 ms. The
/// entry was added before it was processed and nacked, so its `redeliver` row comes at least the
/// delay less 256 ms after its `add`.
#[test]
fn shared_nacks_are_redelivered_after_the_clients_delay() {
    let since_add = |delay: Option<i64>, minutes: f64| {
        let mut settings = vec![
            ("subscription_type", Str("Shared".into())),
            ("consumer_per_subscription", Int(3)),
            ("redelivery_rate", Float(0.02)),
            ("test_duration_minutes", Float(minutes)),
        ];
        if let Some(ms) = delay {
            settings.push(("negative_ack_redelivery_delay_ms", Int(ms)));
        }
        let ev = generate(&spec(&settings), 1);
        let mut added = HashMap::new();
        let mut waits = Vec::new();
        for i in 0..ev.len() {
            let at = (ev.ledger_id[i], ev.entry_id[i]);
            match (ev.op[i], ev.reason[i]) {
                ("add", _) => {
                    added.insert(at, ev.ts_us[i]);
                }
                ("redeliver", Some(REASON_NACK)) => waits.push(ev.ts_us[i] - added[&at]),
                _ => {}
            }
        }
        waits.sort_unstable();
        waits
    };
    let waits = since_add(Some(5000), 0.5);
    assert!(waits.len() > 50, "{} nacks redelivered", waits.len());
    assert!(waits[0] >= 5_000_000 - 256_000, "{waits:?}");
    // Consumers keep up: most are processed within a second of their add.
    assert!(waits[waits.len() / 2] < 6_000_000, "{waits:?}");
    // No delay is still the client's 100 ms, less the rounding.
    let waits = since_add(Some(0), 0.5);
    assert!(
        !waits.is_empty() && waits[waits.len() / 2] < 1_000_000,
        "{waits:?}"
    );
    // With the client's default of a minute, a minute's run redelivers none of its nacks.
    assert_eq!(since_add(None, 1.0), Vec::<i64>::new());
    assert!(!since_add(None, 1.5).is_empty());
}

/// A consumer that closes forgets its waiting nacks (`NegativeAcksTracker.close`; a reconnected
/// consumer's broker state would not hold them anyway, `Consumer.redeliverUnacknowledgedMessages`
/// skips positions not pending on it): while the subscription has no consumers, no nack of its
/// comes back; on reconnecting it rewinds to them instead.
#[test]
fn a_closed_consumers_waiting_nacks_are_not_redelivered() {
    let ev = generate(
        &spec(&[
            ("subscription_type", Str("Shared".into())),
            ("consumer_per_subscription", Int(2)),
            ("redelivery_rate", Float(0.05)),
            ("negative_ack_redelivery_delay_ms", Int(5000)),
            ("churn_per_minute", Float(6.0)),
            ("churn_downtime_seconds", Float(8.0)),
            ("test_duration_minutes", Float(2.0)),
        ]),
        1,
    );
    let mut closed = false;
    let (mut closes, mut nacks) = (0, 0);
    for i in 0..ev.len() {
        match (ev.op[i], ev.reason[i]) {
            ("close", _) => {
                closed = true;
                closes += 1;
            }
            ("open", _) => closed = false,
            ("redeliver", Some(REASON_NACK)) => {
                nacks += 1;
                assert!(
                    !closed,
                    "row {i}: a nack redelivered while no consumer is connected"
                );
            }
            _ => {}
        }
    }
    assert!(closes >= 3 && nacks > 50, "{closes} closes, {nacks} nacks");
}

/// PersistentDispatcherMultipleConsumers.redeliverUnacknowledgedMessages(consumer, positions)
/// (reached from ConsumerImpl.redeliverUnacknowledgedMessages(Set) on Shared and Key_Shared): a
/// negatively acknowledged entry goes to the replay queue (`nack`) and is replayed. On master the
/// position carries no sticky-key hash, so on Key_Shared it does not block its key for normal
/// reads until a replay read holds it back.
#[test]
fn key_shared_nacks_are_replayed() {
    let ev = generate(
        &spec(&[
            ("subscription_type", Str("Key_Shared".into())),
            ("consumer_per_subscription", Int(3)),
            ("key_distributor", Str("KEY_ROUND_ROBIN".into())),
            ("redelivery_rate", Float(0.01)),
            ("negative_ack_redelivery_delay_ms", Int(1000)),
            ("producer_rate", Float(3000.0)),
        ]),
        1,
    );
    let r = reasons(&ev);
    assert!(r.get(REASON_NACK).copied().unwrap_or(0) > 50, "{r:?}");
    let nacked: BTreeSet<i64> = (0..ev.len())
        .filter(|&i| ev.reason[i] == Some(REASON_NACK))
        .map(|i| ev.entry_id[i].unwrap())
        .collect();
    let replayed = (0..ev.len())
        .filter(|&i| ev.op[i] == "replay" && nacked.contains(&ev.entry_id[i].unwrap()))
        .count();
    assert!(
        replayed * 10 >= nacked.len() * 9,
        "{replayed} of {}",
        nacked.len()
    );
}

/// ManagedCursorImpl.asyncReadEntriesWithSkipOrWait / checkForNewEntries with
/// managedLedgerNewEntriesCheckDelayInMillis (10 by default): a read parked at the end of the
/// topic looks again 10 ms later and takes everything that came, so a tailing subscription reads
/// every 10 ms or so, several entries at once; with 0 it is woken by every entry.
#[test]
fn tailing_reads_wait_for_the_new_entries_check_delay() {
    let tailing = |delay: i64| {
        let ev = generate(
            &spec(&[
                ("producer_rate", Float(10_000.0)),
                ("batching_max_publish_delay_ms", Float(0.5)),
                (
                    "managed_ledger_new_entries_check_delay_in_millis",
                    Int(delay),
                ),
            ]),
            1,
        );
        let reads: Vec<usize> = (0..ev.len()).filter(|&i| ev.op[i] == "read").collect();
        let entries: i64 = reads.iter().map(|&i| ev.count[i] as i64).sum();
        let apart = reads
            .windows(2)
            .filter(|w| ev.ts_us[w[1]] - ev.ts_us[w[0]] >= delay * 1000)
            .count();
        (
            entries as f64 / reads.len() as f64,
            apart as f64 / reads.len() as f64,
        )
    };
    let (per_read, apart) = tailing(10);
    assert!(
        per_read > 10.0 && apart > 0.95,
        "{per_read} entries a read, {apart} apart"
    );
    let (per_read, _) = tailing(0);
    assert!(per_read < 1.5, "{per_read}");
}

// ---- the trace of today's generator, kept exactly ---------------------------------------------

/// FNV-1a over every row's values, in order.
#[derive(Default)]
struct Digest(u64, u64);

impl Digest {
    fn bytes(&mut self, b: &[u8]) {
        if self.0 == 0 {
            self.0 = 0xcbf2_9ce4_8422_2325;
        }
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        self.bytes_sep();
    }
    fn bytes_sep(&mut self) {
        self.0 ^= 0xff;
        self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
    }
    fn opt<T: ToString>(&mut self, v: Option<T>) {
        match v {
            Some(v) => self.bytes(v.to_string().as_bytes()),
            None => self.bytes(b"\0null"),
        }
    }
    #[allow(clippy::too_many_arguments, reason = "one argument a trace column")]
    fn row(
        &mut self,
        ts: i64,
        broker: &str,
        topic: &str,
        op: &str,
        cursor: Option<&str>,
        ledger: Option<i64>,
        entry: Option<i64>,
        count: i32,
        size: i32,
        messages: Option<i32>,
        reason: Option<&str>,
    ) {
        self.bytes(ts.to_string().as_bytes());
        self.bytes(broker.as_bytes());
        self.bytes(topic.as_bytes());
        self.bytes(op.as_bytes());
        self.opt(cursor);
        self.opt(ledger);
        self.opt(entry);
        self.bytes(count.to_string().as_bytes());
        self.bytes(size.to_string().as_bytes());
        self.opt(messages);
        self.opt(reason);
        self.1 += 1;
    }
}

/// Per topic: (messages, entries) published, and the 10 ms windows in which it was published.
fn adds_by_topic(ev: &EventColumns) -> Vec<(i64, i64, std::collections::BTreeSet<i64>)> {
    let mut out: Vec<(i64, i64, std::collections::BTreeSet<i64>)> =
        vec![(0, 0, Default::default()); ev.topic_names.len()];
    for i in 0..ev.len() {
        if ev.op[i] == "add" {
            let o = &mut out[ev.topic[i] as usize];
            o.0 += ev.messages[i].unwrap() as i64;
            o.1 += 1;
            o.2.insert(ev.ts_us[i] / 10_000);
        }
    }
    out
}

/// The Java client routes a producer's keyless batched messages to one partition at a time
/// (`RoundRobinPartitionMessageRouterImpl`: each `partitionSwitchMs`, 10 publish delays): each
/// partition gets the producer's whole rate a quarter of the time, in batches four times larger
/// than an even split would make. Keyed messages go by their key and stay spread.
#[test]
fn keyless_batched_producers_send_to_one_partition_at_a_time() {
    let base = [
        ("partitions_per_topic", Int(4)),
        ("producer_rate", Float(8000.0)),
        ("test_duration_minutes", Float(0.5)),
    ];
    let ev = generate(&spec(&base), 1);
    let adds = adds_by_topic(&ev);
    let windows: i64 = 30_000 / 10;
    for (messages, entries, busy) in &adds {
        // Its share of the rate...
        assert!((55_000..65_000).contains(messages), "{adds:?}");
        // ...in batches of one millisecond of the whole topic's rate (8 messages)...
        let per_entry = *messages as f64 / *entries as f64;
        assert!((6.0..=9.0).contains(&per_entry), "{per_entry}");
        // ...sent in about one window in four (a batch may close in the next window).
        let share = busy.len() as f64 / windows as f64;
        assert!((0.2..0.55).contains(&share), "{share}");
    }
    // Keyed: spread evenly, batches of one millisecond of a partition's rate (2 messages).
    let mut keyed = base.to_vec();
    keyed.push(("key_distributor", Str("KEY_ROUND_ROBIN".into())));
    for (messages, entries, busy) in adds_by_topic(&generate(&spec(&keyed), 1)) {
        let per_entry = messages as f64 / entries as f64;
        assert!((1.5..=3.0).contains(&per_entry), "{per_entry}");
        assert!(busy.len() as f64 / windows as f64 > 0.9);
    }
    // Sixteen producers, each at a sixteenth of the rate, batch apart: each visits a partition
    // one window in four, with half a message a millisecond (an even split would batch 2).
    let mut many = base.to_vec();
    many.push(("producers_per_topic", Int(16)));
    for (messages, entries, busy) in adds_by_topic(&generate(&spec(&many), 1)) {
        assert!((55_000..65_000).contains(&messages));
        let per_entry = messages as f64 / entries as f64;
        assert!((1.0..1.5).contains(&per_entry), "{per_entry}");
        assert!(busy.len() as f64 / windows as f64 > 0.6);
    }
}

/// Each ledger's (first add time, last add time, entries) in the trace's one topic.
fn ledgers_of(ev: &EventColumns) -> Vec<(i64, i64, i64)> {
    let mut out: Vec<(i64, i64, i64, i64)> = Vec::new();
    for i in 0..ev.len() {
        if ev.op[i] != "add" {
            continue;
        }
        let (ledger, entry, t) = (
            ev.ledger_id[i].unwrap(),
            ev.entry_id[i].unwrap(),
            ev.ts_us[i],
        );
        match out.last_mut() {
            Some(l) if l.0 == ledger => {
                assert_eq!(entry, l.3, "entries of a ledger are consecutive");
                l.2 = t;
                l.3 += 1;
            }
            _ => {
                assert_eq!(entry, 0, "a ledger starts at entry 0");
                if let Some(l) = out.last() {
                    assert_eq!(ledger, l.0 + 1, "ledgers follow each other");
                }
                out.push((ledger, t, t, 1));
            }
        }
    }
    out.into_iter().map(|(_, a, b, n)| (a, b, n)).collect()
}

/// Pulsar rolls a ledger over at `managedLedgerMaxEntriesPerLedger` entries only once it is older
/// than `managedLedgerMinLedgerRolloverTimeMinutes` (`ManagedLedgerImpl.currentLedgerIsFull`): at
/// 2000 entries a second, a ledger holds far more than 50,000 entries.
#[test]
fn ledgers_roll_over_by_entries_only_after_the_minimum_time() {
    let fast = [
        ("producer_rate", Float(2000.0)),
        ("batching_enabled", SettingValue::Bool(false)),
        ("max_entries_per_ledger", Int(1000)),
        ("test_duration_minutes", Float(2.0)),
    ];
    // The default minimum (10 minutes) is longer than the run: one ledger.
    let ev = generate(&spec(&fast), 1);
    let ledgers = ledgers_of(&ev);
    assert_eq!(ledgers.len(), 1, "{ledgers:?}");
    assert!(ledgers[0].2 > 200_000, "{ledgers:?}");
    // A minimum of half a minute: each ledger closes with the first entry after 30 s.
    let mut half = fast.to_vec();
    half.push((
        "managed_ledger_min_ledger_rollover_time_minutes",
        Float(0.5),
    ));
    let ledgers = ledgers_of(&generate(&spec(&half), 1));
    assert!((4..=5).contains(&ledgers.len()), "{ledgers:?}");
    // A ledger's age counts from the previous one's last entry (its close), and its own last entry
    // is the first one added after 30 s. The last ledger is cut by the end of the run.
    for w in ledgers[..ledgers.len() - 1].windows(2) {
        let span_us = w[1].1 - w[0].1;
        assert!(
            (30_000_000..30_010_000).contains(&span_us),
            "{w:?}: {span_us}"
        );
    }
    // No minimum: by entry count alone.
    let mut none = fast.to_vec();
    none.push(("managed_ledger_min_ledger_rollover_time_minutes", Int(0)));
    let ledgers = ledgers_of(&generate(&spec(&none), 1));
    assert!(ledgers[..ledgers.len() - 1].iter().all(|l| l.2 == 1000));
    // The maximum time closes a ledger whatever it holds (after the minimum).
    let mut aged = half.clone();
    aged.push(("max_entries_per_ledger", Int(50_000_000)));
    aged.push((
        "managed_ledger_max_ledger_rollover_time_minutes",
        Float(0.75),
    ));
    let ledgers = ledgers_of(&generate(&spec(&aged), 1));
    assert!((2..=3).contains(&ledgers.len()), "{ledgers:?}");
}

fn digest_of_columns(ev: &EventColumns) -> (u64, u64) {
    let mut d = Digest::default();
    for i in 0..ev.len() {
        d.row(
            ev.ts_us[i],
            &ev.broker_names[ev.broker[i] as usize],
            &ev.topic_names[ev.topic[i] as usize],
            ev.op[i],
            ev.cursor[i].map(|c| ev.cursor_names[c as usize].as_str()),
            ev.ledger_id[i],
            ev.entry_id[i],
            ev.count[i],
            ev.size[i],
            ev.messages[i],
            ev.reason[i],
        );
    }
    (d.1, d.0)
}

/// Scenarios that exercise every dispatcher and knob, over one and several brokers.
fn golden_scenarios() -> Vec<(&'static str, WorkloadSpec, u64)> {
    // Entry sizes as payloads alone, as the goldens were made (`message_metadata` off must keep
    // every row; the metadata bytes are `tests/workload_readers.rs`'s).
    let payloads = |mut s: WorkloadSpec| {
        s.set("message_metadata", &SettingValue::Bool(false))
            .unwrap();
        s
    };
    let golden = vec![
        ("default", spec(&[]), 1),
        (
            "shared-3-brokers",
            spec(&[
                ("topics", Int(4)),
                ("partitions_per_topic", Int(2)),
                ("brokers", Int(3)),
                ("subscriptions_per_topic", Int(2)),
                ("redelivery_rate", Float(0.02)),
                ("subscription_type", Str("Shared".into())),
                ("consumer_per_subscription", Int(3)),
                ("consumer_headroom", Float(0.9)),
            ]),
            5,
        ),
        (
            "key-shared-slow",
            spec(&[
                ("subscription_type", Str("Key_Shared".into())),
                ("consumer_per_subscription", Int(4)),
                ("key_distributor", Str("KEY_ROUND_ROBIN".into())),
                ("slow_consumer_fraction", Float(0.3)),
                ("slow_consumer_speed", Float(0.2)),
                ("producer_rate", Float(4000.0)),
                ("redelivery_rate", Float(0.005)),
            ]),
            3,
        ),
        (
            "knobs-2-brokers",
            spec(&[
                ("topics", Int(3)),
                ("brokers", Int(2)),
                ("subscriptions_per_topic", Int(2)),
                ("catch_up_readers", Int(1)),
                ("catch_up_start_seconds", Float(10.0)),
                ("catch_up_behind_seconds", Float(5.0)),
                ("seeks_per_minute", Float(6.0)),
                ("churn_per_minute", Float(6.0)),
                ("churn_downtime_seconds", Float(1.0)),
                ("redelivery_rate", Float(0.01)),
                ("max_entries_per_ledger", Int(500)),
                // Rolls by entry count alone, as the golden was made.
                ("managed_ledger_min_ledger_rollover_time_minutes", Int(0)),
            ]),
            7,
        ),
        (
            "backlog-failover-4-brokers",
            spec(&[
                ("topics", Int(2)),
                ("partitions_per_topic", Int(4)),
                ("brokers", Int(4)),
                ("consumer_per_subscription", Int(2)),
                ("subscription_type", Str("Failover".into())),
                ("consumer_backlog_size_gb", Float(0.005)),
                ("batching_enabled", SettingValue::Bool(false)),
            ]),
            11,
        ),
    ];
    golden
        .into_iter()
        .map(|(name, s, seed)| (name, payloads(s), seed))
        .collect()
}

/// Rows and digest of each golden scenario, as the generator gave them before streaming (commit
/// d86a42a): streaming must not change a row. A scenario whose traffic a fidelity fix changed
/// since says which.
const GOLDEN: [(&str, u64, u64); 5] = [
    ("default", 23043, 0x2fac5c40d1f3b9e8),
    // Its nacks wait for the client's one-minute redelivery delay, so a minute's run redelivers
    // none (was 80471 rows, 0xde20f166a65568c1); before that its keyless batched producers came
    // to route by time, one partition each 10 ms (was 80444 rows, 0x54960b08676c8ca8, before that
    // 80497 rows, 0xa7e5d2bafc0678da).
    ("shared-3-brokers", 78011, 0x92893f613d35706f),
    // Its keys are OMB's 10,000 (was 36899 rows, 0xcf5cf1d65cb6a07f, with 1024); before that
    // as shared-3-brokers' nack delay: no nack redelivered in its minute (was 42670 rows,
    // 0x75500e68ee9d9cae); before that as its mark-delete change (was 42676 rows,
    // 0x99ebd8bbc84f58d0).
    ("key-shared-slow", 36934, 0xa6bec7f6b294f412),
    // Its clients send their acknowledgements every 100 ms, so a rewind re-reads those not sent
    // yet (was 42790 rows, 0x8d30e32ad7981be9); before that its Exclusive nacks came to wait for
    // the client's delay, then rewind with the individual acks written first, and its reconnects
    // to rewind instead of resetting (was 41604 rows, 0xe18f94ba4c350f14).
    ("knobs-2-brokers", 42789, 0x9fac6a7161824f45),
    // OMB's backlog test: consumers read from the start, pause to build the backlog, drain it,
    // and the test runs its minutes after the drain, 61 s in all, not 30 (was 48185 rows,
    // 0xcbb8a039475aee16, consumers starting at the backlog built from time 0).
    ("backlog-failover-4-brokers", 107978, 0x96fb40bdcdd3fca1),
];

#[test]
fn the_generator_gives_the_traces_it_gave_before() {
    for ((name, mut s, seed), (golden, rows, digest)) in golden_scenarios().into_iter().zip(GOLDEN)
    {
        assert_eq!(name, golden);
        let got = digest_of_columns(&generate(&s, seed));
        assert_eq!(
            got,
            (rows, digest),
            "{name}: (rows, digest) 0x{:016x}",
            got.1
        );
        if name == "knobs-2-brokers" {
            // Each acknowledgement sent at once: its trace from before the client's grouping.
            s.set("acknowledgment_group_time_ms", &Int(0)).unwrap();
            let got = digest_of_columns(&generate(&s, seed));
            assert_eq!(got, (42790, 0x8d30e32ad7981be9), "0x{:016x}", got.1);
        }
    }
}

// ---- streaming: the same rows, batch by batch ---------------------------------------------------

use arrow_array::{Array, RecordBatch};
use ledgercache::lab::workload::{generate_broker, trace_schema, TraceStream};

/// A string column's value (plain or dictionary-encoded), None when null.
fn text_at(c: &dyn Array, i: usize) -> Option<&str> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    if c.is_null(i) {
        return None;
    }
    match c.data_type() {
        arrow_schema::DataType::Dictionary(..) => {
            let d = c.as_dictionary::<Int32Type>();
            Some(
                d.values()
                    .as_string::<i32>()
                    .value(d.keys().value(i) as usize),
            )
        }
        _ => Some(c.as_string::<i32>().value(i)),
    }
}

fn digest_of_batches<'a>(batches: impl IntoIterator<Item = &'a RecordBatch>) -> (u64, u64) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    let mut d = Digest::default();
    for b in batches {
        let int64 = |n: &str| b.column_by_name(n).unwrap().as_primitive::<Int64Type>();
        let int32 = |n: &str| b.column_by_name(n).unwrap().as_primitive::<Int32Type>();
        let text = |n: &str| b.column_by_name(n).unwrap().as_ref();
        let opt64 = |a: &arrow_array::Int64Array, i| (!a.is_null(i)).then(|| a.value(i));
        let opt32 = |a: &arrow_array::Int32Array, i| (!a.is_null(i)).then(|| a.value(i));
        let (ts, ledger, entry) = (int64("ts_us"), int64("ledger_id"), int64("entry_id"));
        let (count, size, messages) = (int32("count"), int32("size"), int32("messages"));
        for i in 0..b.num_rows() {
            d.row(
                ts.value(i),
                text_at(text("broker"), i).unwrap(),
                text_at(text("topic"), i).unwrap(),
                text_at(text("op"), i).unwrap(),
                text_at(text("cursor"), i),
                opt64(ledger, i),
                opt64(entry, i),
                count.value(i),
                size.value(i),
                opt32(messages, i),
                text_at(text("reason"), i),
            );
        }
    }
    (d.1, d.0)
}

fn streamed(mut stream: TraceStream, batch_rows: usize) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    while let Some(b) = stream.next_batch(batch_rows) {
        out.push(b);
    }
    assert_eq!(
        stream.rows(),
        out.iter().map(|b| b.num_rows() as u64).sum::<u64>()
    );
    out
}

#[test]
fn streamed_batches_are_the_generated_rows_whatever_the_batch_size() {
    for ((name, s, seed), (_, rows, digest)) in golden_scenarios().into_iter().zip(GOLDEN) {
        let whole = generate(&s, seed).to_record_batch();
        assert_eq!(whole.schema(), trace_schema());
        for batch_rows in [1, 7, 4096, 10_000, 1 << 20] {
            let batches = streamed(TraceStream::new(&s, seed), batch_rows);
            assert_eq!(
                digest_of_batches(&batches),
                (rows, digest),
                "{name} by {batch_rows}"
            );
            // Batches are full but the last, and each one is the in-memory trace's slice.
            let mut offset = 0;
            for (k, b) in batches.iter().enumerate() {
                assert!(
                    b.num_rows() == batch_rows
                        || (k + 1 == batches.len() && b.num_rows() <= batch_rows)
                );
                assert_eq!(b.schema(), trace_schema());
                assert_eq!(
                    *b,
                    whole.slice(offset, b.num_rows()),
                    "{name} by {batch_rows}, batch {k}"
                );
                offset += b.num_rows();
            }
            assert_eq!(offset, whole.num_rows());
        }
    }
}

#[test]
fn a_brokers_stream_is_its_generated_rows() {
    for (name, s, seed) in golden_scenarios() {
        for b in 0..s.brokers {
            let whole = generate_broker(&s, seed, b).to_record_batch();
            let batches = streamed(TraceStream::broker(&s, seed, b), 3000);
            let mut offset = 0;
            for batch in &batches {
                assert_eq!(
                    *batch,
                    whole.slice(offset, batch.num_rows()),
                    "{name} broker {b}"
                );
                offset += batch.num_rows();
            }
            assert_eq!(offset, whole.num_rows(), "{name} broker {b}");
        }
    }
}

#[test]
fn the_trace_decoder_reads_dictionary_encoded_batches_as_plain_ones() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    use arrow_array::StringArray;
    use std::sync::Arc;
    let (_, s, seed) = golden_scenarios().swap_remove(1);
    let batches = streamed(TraceStream::new(&s, seed), 5000);
    let mut dict = (TraceDecoder::new(), Vec::new());
    let mut plain = (TraceDecoder::new(), Vec::new());
    for b in &batches {
        dict.0.decode(b, &mut dict.1).unwrap();
        // The same batch with its dictionaries decoded.
        let columns = b
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                arrow_schema::DataType::Dictionary(..) => {
                    let d = c.as_dictionary::<Int32Type>();
                    let values = d.values().as_string::<i32>();
                    Arc::new(StringArray::from_iter(
                        d.keys().iter().map(|k| k.map(|k| values.value(k as usize))),
                    )) as arrow_array::ArrayRef
                }
                _ => c.clone(),
            })
            .collect::<Vec<_>>();
        plain
            .0
            .decode(
                &RecordBatch::try_from_iter(
                    b.schema()
                        .fields()
                        .iter()
                        .map(|f| f.name().clone())
                        .zip(columns),
                )
                .unwrap(),
                &mut plain.1,
            )
            .unwrap();
    }
    assert_eq!(dict.1, plain.1);
    assert_eq!(dict.0.names.topics, plain.0.names.topics);
    assert_eq!(dict.0.names.cursors, plain.0.names.cursors);
    assert!(dict.0.brokers().eq(plain.0.brokers()));
    assert_eq!(dict.1.len() as u64, GOLDEN[1].1);
}

// ---- OMB's rates and sizes: broker ingest capacity, specs too big to simulate -------------------

use ledgercache::lab::workload::DEFAULT_MEMORY_BUDGET;
use ledgercache::Error;

fn published_messages(ev: &EventColumns) -> i64 {
    (0..ev.len())
        .filter(|&i| ev.op[i] == "add")
        .map(|i| ev.messages[i].unwrap() as i64)
        .sum()
}

#[test]
fn producer_rate_0_and_rates_above_capacity_run_at_what_the_brokers_ingest() {
    let capped = |extra: &[(&str, SettingValue)]| spec(extra).ingest();
    // 1 KiB messages: the byte capacity binds (312.5 MB/s / 1024).
    let i = capped(&[("producer_rate", Int(0))]);
    assert_eq!(i.capped_by, Some("bytes"));
    assert!((i.rate - 312.5e6 / 1024.0).abs() < 1e-6);
    let over = capped(&[("producer_rate", Float(1e7))]);
    assert_eq!(
        (over.rate, over.requested, over.capped_by),
        (i.rate, 1e7, Some("bytes"))
    );
    // 100-byte messages: the message capacity binds; four brokers ingest four times as much;
    // three partitions on two brokers saturate the broker holding two of them.
    let small = |partitions: i64, brokers: i64| {
        capped(&[
            ("producer_rate", Int(0)),
            ("message_size", Int(100)),
            ("partitions_per_topic", Int(partitions)),
            ("brokers", Int(brokers)),
        ])
        .rate
    };
    assert_eq!(small(4, 1), 1e6);
    assert_eq!(small(4, 4), 4e6);
    assert_eq!(small(3, 2), 1.5e6);
    // Within capacity: the requested rate, bit for bit (the golden traces above depend on it).
    let within = capped(&[("producer_rate", Float(4000.0))]);
    assert_eq!((within.rate, within.capped_by), (4000.0, None));

    // The generator publishes at the capped rate: 64 KiB messages asked at 10 M/s for 3 seconds.
    let s = spec(&[
        ("producer_rate", Float(1e7)),
        ("message_size", Int(65536)),
        ("test_duration_minutes", Float(0.05)),
    ]);
    let expected = 312.5e6 / 65536.0 * 3.0;
    let got = published_messages(&generate(&s, 1)) as f64;
    assert!(
        (got / expected - 1.0).abs() < 0.05,
        "{got} messages, expected ~{expected}"
    );
}

#[test]
fn the_warm_up_is_traffic_before_the_test() {
    let test = spec(&[("test_duration_minutes", Float(0.05))]);
    let both = spec(&[
        ("test_duration_minutes", Float(0.05)),
        ("warmup_duration_minutes", Float(0.05)),
    ]);
    let (a, b) = (
        published_messages(&generate(&test, 1)),
        published_messages(&generate(&both, 1)),
    );
    assert!((b as f64 / a as f64 - 2.0).abs() < 0.05, "{a} then {b}");
}

#[test]
fn specs_too_big_to_simulate_are_refused_before_allocating() {
    let big = spec(&[
        ("topics", Int(100_000_000)),
        ("consumer_per_subscription", Int(4)),
    ]);
    let started = std::time::Instant::now();
    let Err(Error::ResourceLimit(why)) = TraceStream::checked(&big, 1, None, DEFAULT_MEMORY_BUDGET)
    else {
        panic!("a hundred million topics fit in the default budget");
    };
    assert!(
        started.elapsed().as_secs_f64() < 0.5,
        "checked before anything was allocated"
    );
    assert!(
        why.contains("100000000 partitions") && why.contains("--memory-budget"),
        "{why}"
    );
    // One broker of many holds its share: 8 brokers of 2,000,000 topics fit where all do not.
    let many = spec(&[("topics", Int(2_000_000)), ("brokers", Int(8))]);
    let all = many.footprint().bytes as u64;
    assert!(TraceStream::checked(&many, 1, None, all / 2).is_err());
    assert!(many.check(all / 2, Some(3)).is_ok());
    // Ids past 32 bits: refused whatever the budget (the product overflows u32).
    let ids = spec(&[
        ("topics", Int(u32::MAX as i64)),
        ("partitions_per_topic", Int(u32::MAX as i64)),
    ]);
    assert_eq!(ids.partitions(), u32::MAX as u64 * u32::MAX as u64);
    let err = ids.check(u64::MAX, None).unwrap_err();
    assert!(err.to_string().contains("32-bit ids"), "{err}");
    // Seeks keep every entry: the duration is what to shorten.
    let long = spec(&[
        ("seeks_per_minute", Float(1.0)),
        ("producer_rate", Float(1e6)),
        ("message_size", Int(10)),
        ("batching_enabled", SettingValue::Bool(false)),
        ("test_duration_minutes", Float(1000.0)),
    ]);
    let err = long
        .check(DEFAULT_MEMORY_BUDGET, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--duration-minutes"), "{err}");
}

#[test]
fn entry_sizes_stay_within_an_int32() {
    let mut s = WorkloadSpec::default();
    for key in ["message_size", "batching_max_bytes"] {
        let err = s.set(key, &Int(1 << 31)).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains("2147483647"), "{err}");
    }
    s.set("message_size", &Int(i32::MAX as i64)).unwrap();
    s.set("producer_rate", &Float(10.0)).unwrap();
    s.set("test_duration_minutes", &Float(0.05)).unwrap();
    let ev = generate(&s, 1);
    assert!((0..ev.len())
        .filter(|&i| ev.op[i] == "add")
        .all(|i| ev.size[i] == i32::MAX));
}

#[test]
fn huge_time_knobs_mean_never_and_do_not_wrap() {
    let s = spec(&[
        ("churn_per_minute", Float(1e-300)),
        ("churn_downtime_seconds", Float(1e300)),
        ("seeks_per_minute", Float(1e-300)),
        ("active_consumer_failover_delay_time_millis", Float(1e300)),
        ("subscription_type", Str("Failover".into())),
        (
            "managed_ledger_new_entries_check_delay_in_millis",
            Float(1e300),
        ),
        ("test_duration_minutes", Float(0.05)),
    ]);
    let ev = generate(&s, 1);
    assert!(count(&ev, "add") > 0);
    assert!(ev.ts_us.windows(2).all(|w| w[0] <= w[1]) && ev.ts_us.iter().all(|&t| t <= 3_000_000));
}

/// `Commands.resolveStickyKey` (since Pulsar PR #23219): a message without a key is keyed by
/// `<producer name>-<sequence id>`, so on Key_Shared keyless entries spread over the consumers as
/// keyed ones do (`NONE_KEY`, one hash for all, only for metadata with neither). OMB's default
/// key distributor is NO_KEY.
#[test]
fn keyless_key_shared_entries_spread_over_the_consumers() {
    let hold_backs = |distributor: &str| {
        let s = spec(&[
            ("subscription_type", Str("Key_Shared".into())),
            ("consumer_per_subscription", Int(4)),
            ("key_distributor", Str(distributor.into())),
            ("producer_rate", Float(2000.0)),
        ]);
        let ev = generate(&s, 1);
        let adds = count(&ev, "add");
        (
            reasons(&ev).get(REASON_HOLD_BACK).copied().unwrap_or(0),
            adds,
        )
    };
    let (keyless, adds) = hold_backs("NO_KEY");
    let (keyed, _) = hold_backs("KEY_ROUND_ROBIN");
    // With one hash for all, one consumer takes every entry and the others hold nearly all back.
    assert!(
        keyless <= 2 * keyed.max(adds / 50),
        "{keyless} hold-backs without keys, {keyed} with, {adds} entries"
    );
}

/// A cursor's mark-delete position covers only its acknowledged prefix (`ManagedCursorImpl`): on
/// Shared, a negatively acknowledged entry is replayed behind newer ones, and no `ack` row may
/// pass it before it is redelivered and read again.
#[test]
fn the_mark_delete_position_never_passes_an_entry_still_to_be_redelivered() {
    let s = spec(&[
        ("subscription_type", Str("Shared".into())),
        ("consumer_per_subscription", Int(3)),
        ("redelivery_rate", Float(0.3)),
        ("negative_ack_redelivery_delay_ms", Int(5000)),
        ("receiver_queue_size", Int(10_000)),
        ("consumer_headroom", Float(1.05)),
    ]);
    let ev = generate(&s, 1);
    let mut acked: HashMap<u32, (i64, i64)> = HashMap::new();
    let mut checked = 0;
    for i in 0..ev.len() {
        let (Some(cursor), Some(ledger), Some(entry)) =
            (ev.cursor[i], ev.ledger_id[i], ev.entry_id[i])
        else {
            continue;
        };
        match ev.op[i] {
            "ack" => {
                acked.insert(cursor, (ledger, entry));
            }
            "redeliver" | "replay" => {
                checked += 1;
                if let Some(&md) = acked.get(&cursor) {
                    assert!(
                        (ledger, entry) > md,
                        "row {i}: {} of ({ledger}, {entry}) after an ack of {md:?}",
                        ev.op[i]
                    );
                }
            }
            _ => {}
        }
    }
    assert!(checked > 1000, "{checked} redeliveries and replays");
}

// ---- the replay lab reads what the generator delivered -----------------------------------------

use ledgercache::lab::workload::generate_broker_counting_reads;

/// A replay of a generated trace reads exactly the entries the generator's dispatchers delivered
/// (normal reads, passing over individually acknowledged entries after rewinds, and replays): the
/// lab's cursors, moved only by the trace's rows, stay where the generator's are.
#[test]
fn a_replay_reads_the_entries_the_generator_delivered() {
    let cases: Vec<(&str, Vec<(&str, SettingValue)>)> = vec![
        (
            "exclusive-nacks",
            vec![
                ("subscription_type", Str("Exclusive".into())),
                ("redelivery_rate", Float(0.01)),
            ],
        ),
        (
            "failover-nacks-churn",
            vec![
                ("subscription_type", Str("Failover".into())),
                ("consumer_per_subscription", Int(2)),
                ("redelivery_rate", Float(0.02)),
                ("churn_per_minute", Float(6.0)),
                ("churn_downtime_seconds", Float(1.0)),
            ],
        ),
        (
            "shared-nacks-churn",
            vec![
                ("subscription_type", Str("Shared".into())),
                ("consumer_per_subscription", Int(3)),
                ("redelivery_rate", Float(0.01)),
                ("churn_per_minute", Float(6.0)),
                ("churn_downtime_seconds", Float(1.0)),
            ],
        ),
        (
            "key-shared-slow-churn",
            vec![
                ("subscription_type", Str("Key_Shared".into())),
                ("consumer_per_subscription", Int(3)),
                ("key_distributor", Str("KEY_ROUND_ROBIN".into())),
                ("slow_consumer_fraction", Float(0.34)),
                ("slow_consumer_speed", Float(0.3)),
                ("redelivery_rate", Float(0.01)),
                ("churn_per_minute", Float(6.0)),
                ("churn_downtime_seconds", Float(1.0)),
            ],
        ),
        (
            "exclusive-nacks-seeks-small-ledgers",
            vec![
                ("subscription_type", Str("Exclusive".into())),
                ("redelivery_rate", Float(0.02)),
                ("seeks_per_minute", Float(6.0)),
                ("max_entries_per_ledger", Int(300)),
                ("managed_ledger_min_ledger_rollover_time_minutes", Int(0)),
            ],
        ),
    ];
    for (name, settings) in cases {
        let mut all = vec![
            ("producer_rate", Float(3000.0)),
            ("subscriptions_per_topic", Int(2)),
            ("negative_ack_redelivery_delay_ms", Int(1000)),
        ];
        all.extend(settings);
        let s = spec(&all);
        for seed in [1, 2] {
            let (ev, delivered) = generate_broker_counting_reads(&s, seed, 0);
            let mut d = TraceDecoder::new();
            let mut events = Vec::new();
            d.decode(&ev.to_record_batch(), &mut events).unwrap();
            let m = replay(&events, &d.names, &CacheConfig::default()).unwrap();
            let replays = count(&ev, "replay") as u64;
            assert_eq!(m.entries_read, delivered + replays, "{name} seed {seed}");
        }
    }
}
