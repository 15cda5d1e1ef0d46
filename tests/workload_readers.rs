//! The readers a broker opens besides its consumers' subscriptions (deduplication, admin
//! subscriptions, replication) and the bytes it stores per entry, as the workload generator
//! writes them and as the replay's designs then see them.

use ledgercache::config::SettingValue;
use ledgercache::lab::replay::{replay, ReplayMetrics, TraceDecoder};
use ledgercache::lab::workload::{generate, DetailValue, EventColumns, WorkloadSpec};
use ledgercache::CacheConfig;
use SettingValue::{Bool, Float, Int, Str};

fn spec(settings: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut s = WorkloadSpec::default();
    s.set("test_duration_minutes", &Float(0.2)).unwrap();
    for (k, v) in settings {
        s.set(k, v).unwrap();
    }
    s
}

fn rows<'a>(ev: &'a EventColumns, cursor: &'a str, op: &'a str) -> Vec<usize> {
    // Each partition's cursors have their own ids, under the same name.
    (0..ev.len())
        .filter(|&i| {
            ev.op[i] == op && ev.cursor[i].is_some_and(|c| ev.cursor_names[c as usize] == cursor)
        })
        .collect()
}

fn adds(ev: &EventColumns) -> Vec<usize> {
    (0..ev.len()).filter(|&i| ev.op[i] == "add").collect()
}

fn run(ev: &EventColumns, strategy: &str, cache_bytes: i64) -> ReplayMetrics {
    let mut d = TraceDecoder::new();
    let mut events = Vec::new();
    d.decode(&ev.to_record_batch(), &mut events).unwrap();
    let mut c = CacheConfig::default();
    c.set("cache_size_bytes", Int(cache_bytes)).unwrap();
    c.set("strategy", Str(strategy.into())).unwrap();
    replay(&events, &d.names, &c).unwrap()
}

/// `MessageDeduplication`: `pulsar.dedup` opens with the topic, never reads, and its snapshot
/// mark-deletes the entry just persisted every `brokerDeduplicationEntriesInterval` entries
/// (`increaseSnapshotCounterAndTakeSnapshotIfNeeded` → `takeSnapshot`).
#[test]
fn the_dedup_cursor_opens_at_the_end_never_reads_and_snapshots_every_interval() {
    let ev = generate(
        &spec(&[
            ("batching_enabled", Bool(false)),
            ("broker_deduplication_enabled", Bool(true)),
            ("broker_deduplication_entries_interval", Int(100)),
        ]),
        3,
    );
    let open = rows(&ev, "pulsar.dedup", "open");
    assert_eq!(open.len(), 1);
    assert_eq!((ev.ts_us[open[0]], ev.entry_id[open[0]]), (0, None));
    assert!(rows(&ev, "pulsar.dedup", "read").is_empty());
    let added = adds(&ev);
    let acks = rows(&ev, "pulsar.dedup", "ack");
    assert!(added.len() > 10_000, "{}", added.len());
    assert_eq!(acks.len(), added.len() / 100);
    for (k, &a) in acks.iter().enumerate() {
        // The 100th, 200th, ... entry, at the moment it is added.
        let add = added[100 * k + 99];
        assert_eq!(
            (ev.ledger_id[a], ev.entry_id[a], ev.ts_us[a]),
            (ev.ledger_id[add], ev.entry_id[add], ev.ts_us[add])
        );
    }
}

/// Defaults and knobs off give the trace as before the readers existed (no cursor, no row).
#[test]
fn readers_off_leave_the_trace_as_it_was() {
    let base = [("message_metadata", Bool(false)), ("topics", Int(2))];
    let plain = generate(&spec(&base), 5);
    let mut off = base.to_vec();
    off.extend([
        ("broker_deduplication_enabled", Bool(false)),
        ("admin_subscriptions_per_topic", Int(0)),
        ("replication_clusters", Int(0)),
    ]);
    assert_eq!(plain, generate(&spec(&off), 5));
    assert_eq!(plain.cursor_names, ["sub-0", "sub-0"]);
    assert_eq!(plain.len(), generate(&spec(&[("topics", Int(2))]), 5).len());
}

/// `PersistentTopic.createSubscription` → `ManagedLedgerImpl.asyncOpenCursor`: an admin
/// subscription is a cursor at the end that no consumer reads or acknowledges.
#[test]
fn admin_subscriptions_open_at_the_end_and_never_read() {
    let ev = generate(
        &spec(&[
            ("topics", Int(3)),
            ("admin_subscriptions_per_topic", Int(2)),
        ]),
        1,
    );
    for name in ["admin-sub-0", "admin-sub-1"] {
        let open = rows(&ev, name, "open");
        assert_eq!(open.len(), 3, "{name}: one a topic");
        assert!(open
            .iter()
            .all(|&i| ev.ts_us[i] == 0 && ev.entry_id[i].is_none()));
        for op in ["read", "ack", "individual_ack", "close", "rewind"] {
            assert!(rows(&ev, name, op).is_empty(), "{name} {op}");
        }
    }
}

/// `PersistentReplicator`: each remote cluster's `pulsar.repl.<cluster>` cursor reads what is
/// published, batches of at most `dispatcherMaxReadBatchSize`, and acknowledges it.
#[test]
fn a_replication_cursor_tails_and_acknowledges() {
    let ev = generate(
        &spec(&[
            ("batching_enabled", Bool(false)),
            ("producer_rate", Float(2000.0)),
            ("replication_clusters", Int(2)),
        ]),
        2,
    );
    let published = adds(&ev).len() as i64;
    for name in ["pulsar.repl.cluster-1", "pulsar.repl.cluster-2"] {
        let reads = rows(&ev, name, "read");
        let entries: i64 = reads.iter().map(|&i| ev.count[i] as i64).sum();
        assert!(
            entries > published * 95 / 100 && entries <= published,
            "{name}: {entries} of {published}"
        );
        assert!(reads.iter().all(|&i| ev.count[i] <= 100), "{name}");
        assert!(rows(&ev, name, "ack").len() > 5, "{name}");
    }
}

fn detail_topic(extra: Vec<(&str, DetailValue)>, subs: Vec<DetailValue>) -> DetailValue {
    let s = |v: &str| DetailValue::Scalar(Str(v.into()));
    let mut fields = vec![
        ("name".to_string(), s("t")),
        ("producer_rate".into(), DetailValue::Scalar(Float(500.0))),
        ("message_size".into(), DetailValue::Scalar(Int(100))),
        ("subscriptions".into(), DetailValue::List(subs)),
    ];
    fields.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
    DetailValue::Map(fields)
}

/// A topic of `topicDetails` names its own deduplication status and remote clusters (a broker's
/// stats give them); a subscription may not take a name the broker keeps for its cursors.
#[test]
fn topic_details_carry_their_own_readers_and_refuse_reserved_names() {
    let clusters = DetailValue::List(vec![
        DetailValue::Scalar(Str("us-east".into())),
        DetailValue::Scalar(Str("eu-west".into())),
    ]);
    let mut s = spec(&[("broker_deduplication_enabled", Bool(false))]);
    s.set_topic_details(&DetailValue::List(vec![detail_topic(
        vec![
            ("deduplication", DetailValue::Scalar(Bool(true))),
            ("replication_clusters", clusters),
        ],
        vec![],
    )]))
    .unwrap();
    let ev = generate(&s, 1);
    assert_eq!(
        ev.cursor_names,
        ["pulsar.repl.us-east", "pulsar.repl.eu-west", "pulsar.dedup"]
    );
    assert!(!rows(&ev, "pulsar.repl.eu-west", "read").is_empty());
    for reserved in ["pulsar.dedup", "pulsar.repl.other"] {
        let sub = DetailValue::Map(vec![
            ("name".into(), DetailValue::Scalar(Str(reserved.into()))),
            ("type".into(), DetailValue::Scalar(Str("Shared".into()))),
            ("consumer_rates".into(), DetailValue::List(vec![])),
        ]);
        let err = spec(&[])
            .set_topic_details(&DetailValue::List(vec![detail_topic(vec![], vec![sub])]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("subscriptions[0].name"), "{err}");
        assert!(err.contains("the broker keeps it"), "{err}");
    }
}

/// `RangeEntryCacheImpl.insert` charges an entry's stored length: 100-byte messages sent one
/// an entry by producer `pulsar-0-0` (10 bytes) carry 10 header bytes and a `MessageMetadata` of
/// producer_name 12 + sequence_id 1 + varint(seq) + publish_time 7 + uncompressed_size 2 =
/// 22 + varint(seq): 133 bytes for sequence ids 0-127, 134 from 128.
#[test]
fn an_entry_is_charged_its_metadata_bytes() {
    let one = [
        ("batching_enabled", Bool(false)),
        ("message_size", Int(100)),
    ];
    let ev = generate(&spec(&one), 4);
    let sizes: Vec<i32> = adds(&ev).iter().map(|&i| ev.size[i]).collect();
    assert!(sizes.len() > 200);
    assert!(sizes[..128].iter().all(|&s| s == 133), "{:?}", &sizes[..3]);
    assert!(sizes[128..].iter().take(16_000).all(|&s| s == 134));
    let mut off = one.to_vec();
    off.push(("message_metadata", Bool(false)));
    let ev = generate(&spec(&off), 4);
    assert!(adds(&ev).iter().all(|&i| ev.size[i] == 100));
    // Batched, each message adds its size prefix and SingleMessageMetadata.
    let ev = generate(&spec(&[("message_size", Int(100))]), 4);
    for i in adds(&ev) {
        let n = ev.messages[i].unwrap();
        if n > 1 {
            assert!(
                ev.size[i] >= n * (100 + 4 + 2 + 2) + 10,
                "{n} {}",
                ev.size[i]
            );
        }
    }
}

/// The direction the issue gives: 4.0 keeps entries while a cursor is active and drops those
/// before the slowest active cursor; the dedup cursor, active for ever and up to an interval
/// behind the tail, holds up to an interval of entries in 4.0's cache.
#[test]
fn under_4_0_the_dedup_cursor_keeps_an_interval_of_entries_cached() {
    let base = [
        ("batching_enabled", Bool(false)),
        ("producer_rate", Float(2000.0)),
        ("message_size", Int(1000)),
        ("message_metadata", Bool(false)),
    ];
    let mut on = base.to_vec();
    on.push(("broker_deduplication_enabled", Bool(true)));
    let (before, after) = (generate(&spec(&base), 9), generate(&spec(&on), 9));
    let (b, a) = (
        run(&before, "legacy", 64 << 20),
        run(&after, "legacy", 64 << 20),
    );
    // Tailing consumers alone keep a handful of entries; the dedup cursor up to 1000.
    assert!(
        a.peak_cache_bytes > 500 * 1000 && a.peak_cache_bytes > 10 * b.peak_cache_bytes,
        "before {} after {}",
        b.peak_cache_bytes,
        a.peak_cache_bytes
    );
    assert!(a.hits >= b.hits);
}

/// `BrokerService.startDeduplicationSnapshotMonitor`: every
/// `brokerDeduplicationSnapshotFrequencyInSeconds` (120) the broker looks at each topic, and one
/// whose last snapshot is `brokerDeduplicationSnapshotIntervalSeconds` (120) old (never, at
/// first) snapshots at its last entry (`MessageDeduplication.takeSnapshot()`). A topic of 2
/// entries a second never reaches the 1,000-entry interval in 5 minutes; the monitor still moves
/// its cursor at 120 and 240 s.
#[test]
fn the_snapshot_monitor_moves_a_quiet_topics_dedup_cursor() {
    let base = [
        ("test_duration_minutes", Float(5.0)),
        ("producer_rate", Float(2.0)),
        ("batching_enabled", Bool(false)),
        ("broker_deduplication_enabled", Bool(true)),
    ];
    let snapshots = |extra: &[(&str, SettingValue)]| {
        let mut settings = base.to_vec();
        settings.extend(extra.iter().cloned());
        let ev = generate(&spec(&settings), 4);
        let added = adds(&ev);
        assert!((550..=650).contains(&added.len()), "{}", added.len());
        rows(&ev, "pulsar.dedup", "ack")
            .into_iter()
            .map(|a| {
                // At the last entry added before the look.
                let last = added
                    .iter()
                    .rev()
                    .find(|&&i| ev.ts_us[i] <= ev.ts_us[a])
                    .unwrap();
                assert_eq!(
                    (ev.ledger_id[a], ev.entry_id[a]),
                    (ev.ledger_id[*last], ev.entry_id[*last])
                );
                ev.ts_us[a]
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(snapshots(&[]), [120_000_000, 240_000_000]);
    // A snapshot younger than the interval is kept: after 120 s, the next is due at 420 s.
    assert_eq!(
        snapshots(&[("broker_deduplication_snapshot_interval_seconds", Int(300))]),
        [120_000_000]
    );
    // The monitor off, or snapshots by time off: only the entry counter, which 600 entries miss.
    assert!(
        snapshots(&[("broker_deduplication_snapshot_frequency_in_seconds", Int(0))]).is_empty()
    );
    assert!(snapshots(&[("broker_deduplication_snapshot_interval_seconds", Int(0))]).is_empty());
}

/// broker.conf takes whole seconds: a monitor looking more often than once a second would cost
/// a pass over every partition per microsecond of the run; it is refused, naming the key.
#[test]
fn a_sub_second_dedup_snapshot_monitor_is_refused() {
    let mut s = WorkloadSpec::default();
    let err = s
        .set(
            "broker_deduplication_snapshot_frequency_in_seconds",
            &Float(1e-6),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("broker_deduplication_snapshot_frequency_in_seconds")
            && err.contains("at least 1"),
        "{err}"
    );
}
