//! The workload generator's ledger trimming by retention (`delete` rows, as
//! `ManagedLedgerImpl.internalTrimLedgers` deletes ledgers) and the backlogs in storage when a
//! trace starts (`load` rows, `topic_details`' `backlog_entries`).

use ledgercache::config::SettingValue::{self, Float, Int, Str};
use ledgercache::lab::replay::{replay, ReplayMetrics, TraceDecoder};
use ledgercache::lab::workload::{generate, DetailValue, EventColumns, WorkloadSpec};
use ledgercache::CacheConfig;
use std::collections::HashMap;

fn spec(settings: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut s = WorkloadSpec::default();
    for (k, v) in settings {
        s.set(k, v).unwrap();
    }
    s
}

/// Ledgers of 1,000 entries that roll at once (no minimum age), unbatched at 2,000 msg/s: a
/// ledger every half second.
fn rolling(extra: &[(&str, SettingValue)]) -> WorkloadSpec {
    let mut s = spec(&[
        ("producer_rate", Float(2000.0)),
        ("batching_enabled", SettingValue::Bool(false)),
        ("managed_ledger_max_entries_per_ledger", Int(1000)),
        (
            "managed_ledger_min_ledger_rollover_time_minutes",
            Float(0.0),
        ),
        ("subscriptions_per_topic", Int(2)),
        ("test_duration_minutes", Float(0.5)),
    ]);
    for (k, v) in extra {
        s.set(k, v).unwrap();
    }
    s
}

fn rows<'a>(ev: &'a EventColumns, op: &'a str) -> impl Iterator<Item = usize> + 'a {
    (0..ev.len()).filter(move |&i| ev.op[i] == op)
}

/// Each ledger's time of its last add, and the ledger each `delete` row names, with its time.
fn ledgers(ev: &EventColumns) -> (HashMap<i64, i64>, Vec<(i64, i64)>) {
    let mut last_add = HashMap::new();
    for i in rows(ev, "add") {
        last_add.insert(ev.ledger_id[i].unwrap(), ev.ts_us[i]);
    }
    let deletes = rows(ev, "delete")
        .map(|i| (ev.ledger_id[i].unwrap(), ev.ts_us[i]))
        .collect();
    (last_add, deletes)
}

fn replayed(ev: &EventColumns, keep: impl Fn(&str) -> bool) -> ReplayMetrics {
    let mut d = TraceDecoder::new();
    let mut events = Vec::new();
    d.decode(&ev.to_record_batch(), &mut events).unwrap();
    events.retain(|e| keep(e.op.name()));
    let mut c = CacheConfig::default();
    c.set("cache_size_bytes", Int(64 << 20)).unwrap();
    replay(&events, &d.names, &c).unwrap()
}

/// broker.conf's defaults (0 minutes, 0 MB): a ledger is deleted once every subscription has
/// acknowledged it wholly, never the ledger taking appends, and nothing is added to it after.
#[test]
fn consumed_ledgers_are_deleted_with_the_default_retention() {
    let ev = generate(&rolling(&[]), 3);
    let (last_add, deletes) = ledgers(&ev);
    assert!(last_add.len() > 50, "{} ledgers", last_add.len());
    // All but the newest few are consumed within the run.
    assert!(deletes.len() + 5 >= last_add.len(), "{deletes:?}");
    let newest = *last_add.keys().max().unwrap();
    for &(ledger, at) in &deletes {
        assert!(ledger < newest);
        assert!(
            last_add[&ledger] <= at,
            "ledger {ledger} written after its delete"
        );
    }
    // Each ledger once, oldest first.
    assert!(deletes.windows(2).all(|w| w[0].0 < w[1].0), "{deletes:?}");
    // Only what every cursor has acknowledged: a delete follows both subscriptions' acks past it.
    let mut acked: HashMap<u32, i64> = HashMap::new();
    for i in 0..ev.len() {
        match ev.op[i] {
            "ack" => {
                acked.insert(ev.cursor[i].unwrap(), ev.ledger_id[i].unwrap());
            }
            "delete" => {
                let ledger = ev.ledger_id[i].unwrap();
                assert_eq!(acked.len(), 2);
                assert!(acked.values().all(|&l| l >= ledger), "{ledger} {acked:?}");
            }
            _ => {}
        }
    }
}

/// -1 is infinite (Pulsar's `retentionTimeMs >= 0`, `retentionSizeInMB >= 0`): no ledger goes.
/// Either limit alone still deletes (a ledger goes when it has expired OR is over the quota).
#[test]
fn infinite_retention_keeps_every_ledger_and_either_limit_deletes() {
    let none = generate(
        &rolling(&[
            ("retention_time_minutes", Int(-1)),
            ("retention_size_mb", Int(-1)),
        ]),
        3,
    );
    assert_eq!(rows(&none, "delete").count(), 0);
    // broker.conf spellings, camelCase in a spec file, snake_case here.
    let by_size = generate(
        &rolling(&[
            ("default_retention_time_in_minutes", Int(-1)),
            ("default_retention_size_in_mb", Int(0)),
        ]),
        3,
    );
    assert!(rows(&by_size, "delete").count() > 40);
    // Without deletes, the rest of the trace is the same.
    let kept: Vec<usize> = rows(&by_size, "add").collect();
    assert_eq!(kept.len(), rows(&none, "add").count());
}

/// `isLedgerRetentionOverSizeQuota`: ledgers go only while the managed ledger stays at or above
/// the quota without them. 1 MB of 1 KiB entries: about a thousand entries are kept.
#[test]
fn a_size_quota_keeps_the_newest_ledgers() {
    let ev = generate(
        &rolling(&[
            ("retention_time_minutes", Int(-1)),
            ("retention_size_mb", Int(1)),
        ]),
        3,
    );
    let (last_add, deletes) = ledgers(&ev);
    let kept = last_add.len() - deletes.len();
    // 1 MiB is about one ledger of 1,000 KiB entries: the open one and one or two closed ones.
    assert!((2..=4).contains(&kept), "{kept} kept of {}", last_add.len());
}

/// A subscription without consumers is a durable cursor that never moves: it holds every ledger;
/// a slow one holds those it has not acknowledged.
#[test]
fn a_slow_or_idle_subscription_keeps_its_ledgers() {
    let mut idle = WorkloadSpec::default();
    idle.set_topic_details(&topics(&[(
        "t",
        2000.0,
        &[("fast", &[4000.0]), ("idle", &[])],
    )]))
    .unwrap();
    for k in [
        ("batching_enabled", SettingValue::Bool(false)),
        ("managed_ledger_max_entries_per_ledger", Int(1000)),
        (
            "managed_ledger_min_ledger_rollover_time_minutes",
            Float(0.0),
        ),
        ("test_duration_minutes", Float(0.5)),
    ] {
        idle.set(k.0, &k.1).unwrap();
    }
    assert_eq!(rows(&generate(&idle, 3), "delete").count(), 0);

    let slow = generate(
        &rolling(&[
            ("slow_consumer_fraction", Float(0.5)),
            ("slow_consumer_speed", Float(0.2)),
        ]),
        3,
    );
    let fast = generate(&rolling(&[]), 3);
    let (d_slow, d_fast) = (rows(&slow, "delete").count(), rows(&fast, "delete").count());
    assert!(d_slow * 2 < d_fast, "slow {d_slow}, fast {d_fast}");
}

/// `BrokerService.startConsumedLedgersMonitor`: with a retention time, a consumed ledger that
/// nothing else trims (no ledger closes, no cursor moves) goes at the first check after it has
/// expired, every `retention_check_interval_seconds`.
#[test]
fn expired_ledgers_go_at_the_periodic_check() {
    let mut s = stored(10_000, 10_000, 2000.0, 2.0);
    for (k, v) in [
        ("managed_ledger_max_entries_per_ledger", Int(1000)),
        ("retention_time_minutes", Int(1)),
        ("retention_size_mb", Int(-1)),
        ("retention_check_interval_seconds", Int(7)),
    ] {
        s.set(k, &v).unwrap();
    }
    let ev = generate(&s, 1);
    let (_, deletes) = ledgers(&ev);
    // Read within ~5 s; closed at time 0, expired after 60 s; the check at 63 s deletes the ten.
    assert_eq!(deletes.len(), 10, "{deletes:?}");
    assert!(
        deletes.iter().all(|&(_, at)| at == 63_000_000),
        "{deletes:?}"
    );
    // The checks stop mattering once nothing can be trimmed: the run ends early (quiet).
    let stored_ledger = ev.ledger_id[rows(&ev, "load").next().unwrap()].unwrap();
    assert_eq!(deletes[0].0, stored_ledger);
}

/// The replay drops a deleted ledger's entries (`RangeEntryCacheImpl.invalidateAllEntries`):
/// the same trace without its `delete` rows keeps them, so fewer are invalidated and the hit
/// ratio is no better.
#[test]
fn replaying_deletes_invalidates_the_deleted_ledgers_entries() {
    // A slow subscription leaves entries cached behind the fast one; the deletes drop them once
    // both have acknowledged.
    let ev = generate(&rolling(&[("slow_consumer_fraction", Float(0.5))]), 5);
    assert!(rows(&ev, "delete").count() > 0);
    let with = replayed(&ev, |_| true);
    let without = replayed(&ev, |op| op != "delete");
    assert!(
        with.invalidated_entries > without.invalidated_entries,
        "{} vs {}",
        with.invalidated_entries,
        without.invalidated_entries
    );
    assert!(
        with.hits >= without.hits,
        "{} vs {}",
        with.hits,
        without.hits
    );
    assert_eq!(with.entries_read, without.entries_read);
}

// ---- backlogs in storage when the trace starts ----

fn s(v: &str) -> DetailValue {
    DetailValue::Scalar(Str(v.into()))
}
fn f(v: f64) -> DetailValue {
    DetailValue::Scalar(Float(v))
}
fn map(entries: Vec<(&str, DetailValue)>) -> DetailValue {
    DetailValue::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

type SubSpec<'a> = (&'a str, &'a [f64]);

fn topics(list: &[(&str, f64, &[SubSpec])]) -> DetailValue {
    DetailValue::List(
        list.iter()
            .map(|(name, rate, subs)| {
                map(vec![
                    ("name", s(name)),
                    ("producer_rate", f(*rate)),
                    ("message_size", f(1024.0)),
                    (
                        "subscriptions",
                        DetailValue::List(
                            subs.iter()
                                .map(|(n, rates)| {
                                    map(vec![
                                        ("name", s(n)),
                                        ("type", s("Shared")),
                                        (
                                            "consumer_rates",
                                            DetailValue::List(
                                                rates.iter().map(|&r| f(r)).collect(),
                                            ),
                                        ),
                                    ])
                                })
                                .collect(),
                        ),
                    ),
                ])
            })
            .collect(),
    )
}

/// One topic nobody publishes to with `entries` in storage, and one Shared subscription
/// `behind` entries from their end reading at `rate` msg/s, for `minutes`.
fn stored(entries: u64, behind: u64, rate: f64, minutes: f64) -> WorkloadSpec {
    let sub = map(vec![
        ("name", s("catch-up")),
        ("type", s("Shared")),
        ("consumer_rates", DetailValue::List(vec![f(rate)])),
        ("backlog_entries", DetailValue::Scalar(Int(behind as i64))),
    ]);
    let topic = map(vec![
        ("name", s("persistent://public/default/stuck")),
        ("producer_rate", f(0.0)),
        ("message_size", f(2048.0)),
        ("subscriptions", DetailValue::List(vec![sub])),
        ("backlog_entries", DetailValue::Scalar(Int(entries as i64))),
    ]);
    let mut spec = WorkloadSpec::default();
    spec.set_topic_details(&DetailValue::List(vec![topic]))
        .unwrap();
    spec.set("test_duration_minutes", &Float(minutes)).unwrap();
    spec
}

/// A topic at rate 0 with a stored backlog and a subscription reading it: `load` rows at time 0
/// (one per ledger of at most `managed_ledger_max_entries_per_ledger`), the cursor opens at its
/// first unread entry, and it reads at its consumers' rate (before: the cursor opened at the end
/// and the trace had no read).
#[test]
fn a_stored_backlog_is_loaded_and_read_at_the_consumers_rate() {
    let mut spec = stored(100_000, 80_000, 500.0, 1.0);
    spec.set("managed_ledger_max_entries_per_ledger", &Int(10_000))
        .unwrap();
    let ev = generate(&spec, 2);
    let loads: Vec<usize> = rows(&ev, "load").collect();
    // It opens at entry 20,000 and reads ~30,000 entries plus its prefetch in a minute: entries
    // 20,000..60,000 in ledgers of 10,000; what it cannot reach is one ledger on each side.
    let counts: Vec<i32> = loads.iter().map(|&i| ev.count[i]).collect();
    assert_eq!(counts, [20_000, 10_000, 10_000, 10_000, 10_000, 40_000]);
    let first = ev.ledger_id[loads[0]].unwrap();
    for (k, &i) in loads.iter().enumerate() {
        assert_eq!(ev.ts_us[i], 0);
        assert_eq!(ev.ledger_id[i], Some(first + k as i64));
        assert_eq!((ev.entry_id[i], ev.size[i]), (Some(0), 2048));
    }
    let open = rows(&ev, "open").next().unwrap();
    assert!(open > *loads.last().unwrap(), "the loads come first");
    assert_eq!(
        (ev.ledger_id[open], ev.entry_id[open]),
        (Some(first + 1), Some(0))
    );
    let read: i64 = rows(&ev, "read").map(|i| i64::from(ev.count[i])).sum();
    assert!(
        (27_000..33_000).contains(&read),
        "{read} entries read in 60 s at 500/s"
    );
    assert_eq!(rows(&ev, "add").count(), 0);
}

/// Adds after a stored backlog go to a new ledger, after the stored ones; a subscription without
/// a `backlog_entries` opens at the end.
#[test]
fn adds_after_a_stored_backlog_go_to_a_new_ledger() {
    let sub = |name: &str, behind: Option<i64>| {
        let mut m = vec![
            ("name", s(name)),
            ("type", s("Exclusive")),
            ("consumer_rates", DetailValue::List(vec![f(3000.0)])),
        ];
        if let Some(b) = behind {
            m.push(("backlog_entries", DetailValue::Scalar(Int(b))));
        }
        map(m)
    };
    let topic = map(vec![
        ("name", s("t")),
        ("producer_rate", f(1000.0)),
        ("message_size", f(100.0)),
        (
            "subscriptions",
            DetailValue::List(vec![sub("behind", Some(2500)), sub("tail", None)]),
        ),
        ("backlog_entries", DetailValue::Scalar(Int(2500))),
        ("backlog_messages_per_entry", DetailValue::Scalar(Int(4))),
    ]);
    let mut spec = WorkloadSpec::default();
    spec.set_topic_details(&DetailValue::List(vec![topic]))
        .unwrap();
    spec.set("managed_ledger_max_entries_per_ledger", &Int(1000))
        .unwrap();
    spec.set("test_duration_minutes", &Float(0.2)).unwrap();
    let ev = generate(&spec, 1);
    let loads: Vec<usize> = rows(&ev, "load").collect();
    // 2,500 entries: two full ledgers and one of 500, 400 bytes each (4 messages of 100).
    let counts: Vec<i32> = loads.iter().map(|&i| ev.count[i]).collect();
    assert_eq!(counts, [1000, 1000, 500]);
    assert!(loads.iter().all(|&i| ev.size[i] == 400));
    let last_stored = ev.ledger_id[loads[2]].unwrap();
    let add = rows(&ev, "add").next().unwrap();
    assert_eq!(
        (ev.ledger_id[add], ev.entry_id[add]),
        (Some(last_stored + 1), Some(0))
    );
    let opens: Vec<usize> = rows(&ev, "open").collect();
    assert_eq!(ev.entry_id[opens[0]], Some(0));
    assert_eq!(
        ev.ledger_id[opens[1]], None,
        "the tail subscription opens at the end"
    );
}

/// Bounded by the data: 10^12 entries in storage cost a row per ledger a reader reaches, and the
/// rest one ledger in pieces of at most `i32::MAX` entries (a row's `count`), not a row per
/// entry or per 50,000.
#[test]
fn a_huge_stored_backlog_costs_rows_only_where_readers_reach() {
    let spec = stored(1_000_000_000_000, 1_000_000_000_000, 1000.0, 0.5);
    let start = std::time::Instant::now();
    let ev = generate(&spec, 1);
    assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
    let loads: Vec<usize> = rows(&ev, "load").collect();
    // 30 s at 1,000/s plus the prefetch: under a ledger of 50,000 entries; then the rest.
    assert_eq!(ev.count[loads[0]], 50_000);
    assert_eq!(
        loads.len(),
        1 + (1_000_000_000_000u64 - 50_000).div_ceil(i32::MAX as u64) as usize
    );
    let stored: u64 = loads.iter().map(|&i| ev.count[i] as u64).sum();
    assert_eq!(stored, 1_000_000_000_000);
    assert!(ev.len() < 100_000, "{} rows", ev.len());
    let deletes = rows(&ev, "delete").count();
    assert_eq!(deletes, 0, "it acknowledged nothing wholly in a ledger");
}

/// The replay reads a stored backlog from storage: misses at about the subscription's rate.
#[test]
fn replaying_a_stored_backlog_reads_it_from_storage() {
    let ev = generate(&stored(100_000, 100_000, 500.0, 1.0), 2);
    let m = replayed(&ev, |_| true);
    assert!((27_000..33_000).contains(&m.misses), "{m:?}");
    assert!(m.storage_read_ops > 0);
}

/// A periodic check more often than once a second is refused, naming the setting: broker.conf
/// takes whole seconds, and 1e-6 s made the simulation tick every microsecond of the run (a
/// 5-minute trace of one topic took 11 s instead of milliseconds).
#[test]
fn a_sub_second_retention_check_interval_is_refused() {
    for key in [
        "retention_check_interval_seconds",
        "retention_check_interval_in_seconds",
    ] {
        let mut s = WorkloadSpec::default();
        let err = s.set(key, &Float(1e-6)).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains("at least 1"), "{err}");
        s.set(key, &Float(0.0)).unwrap();
        s.set(key, &Float(1.0)).unwrap();
    }
}
