"""A broker's stats as a workload, a trace summarized as stats, and `calibrate` (issue 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest

import ledgercache as lc
from ledgercache import broker_workload as bw

DATA = Path(__file__).resolve().parent.parent / "data" / "broker"
MIB = 1 << 20

# Two topics at different rates and sizes: a tailing Exclusive subscription each, and on the first
# a Shared subscription that runs 20 s behind at exactly the publish rate (a steady backlog).
STEADY = {
    # One message an entry: backlogs (entries, as Pulsar counts them) read as messages.
    "batchingEnabled": False,
    # Payloads alone: a broker's msgThroughputIn counts the metadata too (test_readers.py).
    "messageMetadata": False,
    "warmupDurationMinutes": 0.5,
    "testDurationMinutes": 1,
    "topicDetails": [
        {
            "name": "persistent://t/ns/fast",
            "producerRate": 3000,
            "messageSize": 700,
            "subscriptions": [
                {"name": "tail", "type": "Exclusive", "consumerRates": [3600]},
                {"name": "behind", "type": "Shared", "consumerRates": [1500, 1500], "startSeconds": 20},
            ],
        },
        {
            "name": "persistent://t/ns/slow",
            "producerRate": 400,
            "messageSize": 2000,
            "subscriptions": [
                {"name": "tail", "type": "Failover", "consumerRates": [480, 480]},
            ],
        },
    ],
}


def _summary(spec, seed=1):
    settings = lc.workload.resolve(spec)
    first, end = bw.window_seconds(settings)
    return bw.summarize(
        lambda: lc.workload.stream(settings, seed),
        since_us=first * 1_000_000,
        until_us=end * 1_000_000,
        subscription=bw.subscriptions_of(settings),
    )


def _by_name(stats):
    return {t.name: t for t in stats.topics}


def test_summarize_measures_the_given_rates_and_backlogs():
    stats = _by_name(_summary(STEADY))
    fast, slow = stats["persistent://t/ns/fast"], stats["persistent://t/ns/slow"]
    assert fast.msg_rate_in == pytest.approx(3000, rel=0.03)
    assert slow.msg_rate_in == pytest.approx(400, rel=0.03)
    assert fast.average_msg_size == pytest.approx(700, rel=0.01)
    subs = {s.name: s for s in fast.subscriptions}
    assert subs["tail"].msg_rate_out == pytest.approx(3000, rel=0.05)
    assert subs["tail"].msg_backlog < 3000 * 2  # tailing: about a second of acknowledgements behind
    assert subs["behind"].type == "Shared" and len(subs["behind"].consumers) == 2
    assert subs["behind"].msg_backlog == pytest.approx(20 * 3000, rel=0.1)
    assert subs["behind"].msg_rate_out == pytest.approx(3000, rel=0.05)


def test_round_trip_spec_stats_spec_keeps_rates_and_backlogs(tmp_path):
    first = _summary(STEADY)
    lc.broker_stats.write(first, tmp_path / "stats.json")
    spec = lc.workload.from_broker_stats(
        tmp_path / "stats.json", test_duration_minutes=1, settings={"batchingEnabled": False}
    )
    second = _by_name(_summary(spec, seed=2))
    for t in first.topics:
        again = second[t.name]
        assert again.msg_rate_in == pytest.approx(t.msg_rate_in, rel=0.03), t.name
        assert again.average_msg_size == pytest.approx(t.average_msg_size, rel=0.02), t.name
        subs = {s.name: s for s in again.subscriptions}
        for s in t.subscriptions:
            assert subs[s.name].type == s.type
            assert subs[s.name].msg_rate_out == pytest.approx(s.msg_rate_out, rel=0.05), (t.name, s.name)
            if s.msg_backlog > 10_000:
                assert subs[s.name].msg_backlog == pytest.approx(s.msg_backlog, rel=0.05), (t.name, s.name)


def test_lagging_subscription_starts_behind_and_slow_consumers_keep_their_rates():
    stats = lc.broker_stats.read(DATA / "key-shared-backlog.stats.json")
    spec = lc.workload.from_broker_stats(stats)
    topic = max(spec["topicDetails"], key=lambda t: max((s["startSeconds"] for s in t["subscriptions"]), default=0))
    lagging = max(topic["subscriptions"], key=lambda s: s["startSeconds"])
    assert lagging["type"] == "Key_Shared"
    # It opens at the first entry within the warm-up, which is the longest lag (10 minutes at most).
    assert 0 < lagging["startSeconds"] <= spec["warmupDurationMinutes"] * 60 <= 600
    rates = lagging["consumerRates"]
    assert len(rates) == 4 and min(rates) < max(rates) / 5  # the slow consumer stays slow


def test_backlog_beyond_the_cap_is_capped():
    stats = lc.broker_stats.read(DATA / "key-shared-backlog.stats.json")
    # (Its Key_Shared subscriptions redeliver: a short nack delay keeps the warm-up the capped lag.)
    spec = lc.workload.from_broker_stats(
        stats, max_backlog_minutes=0.5, settings={"negativeAckRedeliveryDelayMs": 1000}
    )
    assert spec["warmupDurationMinutes"] == pytest.approx(0.5)
    assert 0 < max(s["startSeconds"] for t in spec["topicDetails"] for s in t["subscriptions"]) <= 30


def test_a_growing_backlog_ends_the_run_at_the_stats_backlog():
    # A subscription reading at 60% of the publish rate, 40,000 entries behind when dumped.
    stats = lc.broker_stats.BrokerStats(
        topics=(
            lc.broker_stats.TopicStats(
                name="persistent://t/ns/grow",
                msg_rate_in=2000,
                average_msg_size=500,
                subscriptions=(
                    lc.broker_stats.SubscriptionStats(
                        name="lag",
                        type="Exclusive",
                        msg_rate_out=1200,
                        msg_backlog=40_000,
                        consumers=(lc.broker_stats.ConsumerStats(msg_rate_out=1200),),
                    ),
                ),
            ),
        )
    )
    spec, notes = bw.workload_and_notes(stats, test_duration_minutes=0.5, settings={"batchingEnabled": False})
    assert notes == []
    sub = spec["topicDetails"][0]["subscriptions"][0]
    assert sub["startSeconds"] < 20  # opens earlier than 40,000 / 2,000 s: its backlog grows meanwhile
    # Over 2 minutes the backlog would grow past 40,000 whenever it opened: said, not hidden.
    assert any("faster than the run" in n for n in bw.workload_and_notes(stats, settings={"batchingEnabled": False})[1])
    generated = _by_name(_summary(spec))["persistent://t/ns/grow"].subscriptions[0]
    assert generated.msg_backlog == pytest.approx(40_000, rel=0.05)
    assert generated.msg_rate_out == pytest.approx(1200, rel=0.05)


@pytest.mark.parametrize(
    "name", ["one-topic", "key-shared-backlog", "many-small-topics", "partitioned", "single-topic"]
)
def test_every_fixture_becomes_a_workload_with_its_topics(name):
    stats = lc.broker_stats.read(DATA / f"{name}.stats.json")
    spec = lc.workload.from_broker_stats(stats)
    assert [t["name"] for t in spec["topicDetails"]] == [t.name for t in stats.topics]
    estimate = lc.workload.estimate(spec)
    assert estimate["events"] > 0


def test_a_lagging_subscription_without_consumers_is_read_by_nobody_and_said_so():
    stats = lc.broker_stats.BrokerStats(
        topics=(
            lc.broker_stats.TopicStats(
                name="persistent://t/ns/orphan",
                msg_rate_in=100,
                average_msg_size=200,
                subscriptions=(lc.broker_stats.SubscriptionStats(name="gone", type=None, msg_backlog=5000),),
            ),
        )
    )
    spec, notes = bw.workload_and_notes(stats, test_duration_minutes=0.2)
    sub = spec["topicDetails"][0]["subscriptions"][0]
    assert sub["type"] == "Exclusive" and sub["consumerRates"] == []
    assert any("no consumer" in n for n in notes)
    reads = lc.workload.generate(spec).filter(pc.equal(pc.field("op"), "read"))
    assert reads.num_rows == 0


def test_stats_with_nothing_to_simulate_get_a_clear_error():
    stats = lc.broker_stats.BrokerStats(topics=(lc.broker_stats.TopicStats(name="persistent://t/ns/idle"),))
    with pytest.raises(lc.InvalidArgumentError, match="nothing to simulate"):
        lc.workload.from_broker_stats(stats)


def test_the_window_is_the_test_in_whole_seconds():
    assert bw.window_seconds({"warmupDurationMinutes": 0.5, "testDurationMinutes": 0.2}) == (30, 42)
    assert bw.window_seconds({"testDurationMinutes": 2}) == (0, 120)


def test_stats_that_are_not_stats_get_one_clear_error():
    with pytest.raises(lc.InvalidArgumentError, match=r"not-stats\.json"):
        lc.workload.from_broker_stats(DATA / "not-stats.json")


def test_calibration_recovers_the_hit_ratio_of_a_synthetic_broker():
    # A broker whose cache holds about three seconds of a 20 s lag: some of its reads miss.
    spec = {
        "testDurationMinutes": 1.5,
        "topicDetails": [
            {
                "name": "persistent://t/ns/a",
                "producerRate": 4000,
                "messageSize": 1024,
                "subscriptions": [
                    {"name": "tail", "type": "Exclusive", "consumerRates": [4800]},
                    {"name": "behind", "type": "Exclusive", "consumerRates": [4000], "startSeconds": 20},
                ],
            }
        ],
    }
    config = lc.CacheConfig(cache_size_bytes=16 * MIB, strategy="lru")
    stats, observed = bw.dump(spec, config, seed=3)
    assert observed.hit_ratio is not None and 0.3 < observed.hit_ratio < 0.9
    result = lc.calibrate.calibrate(
        stats,
        lc.metrics.BrokerMetrics(cache=observed, labels={}, samples=()),
        broker_conf={"managedLedgerCacheSizeMB": "16"},
        design="lru",
        designs=["lru", "pip430"],
        sizes=[8 * MIB, 16 * MIB, 64 * MIB],
        seed=4,
    )
    assert result.current.cache_size_bytes == 16 * MIB and result.current.strategy == "lru"
    assert result.current.hit_ratio == pytest.approx(observed.hit_ratio, abs=0.05)
    assert result.current.storage_reads_per_second == pytest.approx(observed.misses_rate, rel=0.15)
    # The sweep: a bigger cache never hits less under LRU, and the recommendation is the smallest
    # size within the margin of the best.
    lru = sorted((p for p in result.sweep if p.strategy == "lru"), key=lambda p: p.cache_size_bytes)
    assert [p.hit_ratio for p in lru] == sorted(p.hit_ratio for p in lru)
    rec = {r["strategy"]: r for r in result.references}["lru"]  # LRU: a reference, no broker runs it
    assert rec["hit_ratio"] >= rec["best_hit_ratio"] - 0.01
    assert rec["cache_size_bytes"] == min(
        p.cache_size_bytes for p in lru if p.hit_ratio >= rec["best_hit_ratio"] - 0.01
    )
    text = result.text()
    assert "YOUR BROKER" in text and "The answer" in text
    assert result.markdown().startswith("# Your broker")


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ledgercache.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_calibrate_command_on_a_fixture(tmp_path):
    r = _cli(
        "calibrate",
        "--stats",
        str(DATA / "one-topic.stats.json"),
        "--metrics",
        str(DATA / "one-topic.metrics.txt"),
        "--cache-size",
        "16MiB",
        "--cache-size",
        "64MiB",
        "--strategy",
        "pip430",
        "--strategy",
        "lru",
        "--duration-minutes",
        "0.5",
        "-o",
        str(tmp_path / "out"),
        "--quiet",
        "--current-cache-size",
        "64MiB",
    )
    assert r.returncode == 0, r.stderr
    assert "observed (broker)" in r.stdout and "predicted (lab)" in r.stdout
    assert "persistent://public/default/orders" in r.stdout
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.startswith("# Your broker")


def test_broker_dump_then_calibrate_on_a_bundled_scenario(tmp_path):
    r = _cli(
        "broker-dump", "tailing-fan-out", "-o", str(tmp_path), "--cache-size", "16MiB", "--duration-minutes", "0.25"
    )
    assert r.returncode == 0, r.stderr
    dumped = lc.broker_stats.read(tmp_path / "stats.json")
    assert sorted(t.name for t in dumped.topics) == [
        f"persistent://public/default/topic-{t}-partition-{k}" for t in range(2) for k in range(2)
    ]
    assert all(len(t.subscriptions) == 4 and t.msg_rate_in > 0 for t in dumped.topics)
    observed = lc.metrics.read(tmp_path / "metrics.txt").cache
    assert (tmp_path / "broker.conf").read_text() == "managedLedgerCacheSizeMB=16\n"
    r = _cli(
        "calibrate",
        "--stats",
        str(tmp_path / "stats.json"),
        "--metrics",
        str(tmp_path / "metrics.txt"),
        "--broker-conf",
        str(tmp_path / "broker.conf"),
        "--cache-size",
        "16MiB",
        "--strategy",
        "pip430",
        "--duration-minutes",
        "0.25",
        "--quiet",
    )
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("cache hit ratio"))
    assert line.split()[-3] == f"{observed.hit_ratio:.3f}"  # observed, as the synthetic broker reported it
    # Its metrics give the release that runs the design, and calibrate takes the design from it.
    assert "runs PIP-430 (Pulsar 4.1+) with a 16 MiB cache (Pulsar 4.1.0 runs PIP-430" in r.stdout


def test_generate_from_stats(tmp_path):
    out = tmp_path / "trace.parquet"
    r = _cli(
        "generate",
        "--from-stats",
        str(DATA / "one-topic.stats.json"),
        "--duration-minutes",
        "0.2",
        "-o",
        str(out),
        "--quiet",
    )
    assert r.returncode == 0, r.stderr
    import pyarrow.parquet as pq

    topics = set(pq.read_table(out, columns=["topic"]).column("topic").to_pylist())
    assert topics == {"persistent://public/default/orders"}


def test_generate_needs_a_spec_or_stats(tmp_path):
    r = _cli("generate", "-o", str(tmp_path / "t.parquet"))
    assert r.returncode == 2 and "--from-stats" in r.stderr


def test_calibrate_refuses_a_metrics_file_without_cache_series(tmp_path):
    bad = tmp_path / "metrics.txt"
    bad.write_text("# TYPE jvm_threads gauge\njvm_threads 12\n")
    r = _cli("calibrate", "--stats", str(DATA / "one-topic.stats.json"), "--metrics", str(bad), "--quiet")
    assert r.returncode == 2 and "pulsar_ml_cache" in r.stderr


def test_the_broker_conf_shapes_the_traffic_as_well_as_the_cache(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# a broker's own settings\n"
        "managedLedgerCacheSizeMB=16\n"
        "dispatcherMaxReadBatchSize=7\n"
        "managedLedgerMaxEntriesPerLedger=1000\n"
        "managedLedgerMinLedgerRolloverTimeMinutes=0\n"
        "dispatcherMaxReadSizeBytes=\n"
        "brokerServicePort=6650\n"
    )
    assert lc.workload.settings_from_broker_conf(conf) == {
        "dispatcherMaxReadBatchSize": 7,
        "managedLedgerMaxEntriesPerLedger": 1000,
        "managedLedgerMinLedgerRolloverTimeMinutes": 0,
    }
    with pytest.raises(lc.InvalidArgumentError, match="dispatcherMaxReadBatchSize"):
        lc.workload.settings_from_broker_conf({"dispatcherMaxReadBatchSize": "many"})
    stats, observed = bw.dump(
        {
            "testDurationMinutes": 0.3,
            "topicDetails": [
                {
                    "name": "persistent://t/ns/a",
                    "producerRate": 2000,
                    "messageSize": 512,
                    "subscriptions": [{"name": "tail", "type": "Exclusive", "consumerRates": [2400]}],
                }
            ],
        },
        lc.CacheConfig(cache_size_bytes=16 * MIB),
        seed=3,
    )
    result = lc.calibrate.calibrate(
        stats,
        lc.metrics.BrokerMetrics(cache=observed, labels={}, samples=()),
        broker_conf=conf,
        designs=["lru"],
        sizes=[16 * MIB],
        test_duration_minutes=0.3,
    )
    assert result.spec["dispatcherMaxReadBatchSize"] == 7
    assert result.spec["managedLedgerMaxEntriesPerLedger"] == 1000
    assert result.current.cache_size_bytes == 16 * MIB


def test_redelivering_subscriptions_warm_up_for_the_nack_delay(tmp_path):
    import json

    raw = json.loads((DATA / "one-topic.stats.json").read_text())
    topic = raw["public/default"]["0x40000000_0x80000000"]["persistent"]["persistent://public/default/orders"]
    sub = topic["subscriptions"]["billing"]
    sub["type"], sub["msgRateRedeliver"] = "Shared", 20.0
    (tmp_path / "stats.json").write_text(json.dumps(raw))
    spec = lc.workload.from_broker_stats(tmp_path / "stats.json")
    billing = next(s for s in spec["topicDetails"][0]["subscriptions"] if s["name"] == "billing")
    assert billing["redeliveryRate"] > 0
    # The nacks of the warm-up come back in the test, as in a broker that has run for a while.
    assert spec["warmupDurationMinutes"] >= 1
    spec = lc.workload.from_broker_stats(tmp_path / "stats.json", settings={"negativeAckRedeliveryDelayMs": 5000})
    assert 5 - 1e-9 <= spec["warmupDurationMinutes"] * 60 < 60
    # Exclusive and Failover nacks wait for the delay too (then rewind).
    sub["type"] = "Failover"
    (tmp_path / "stats.json").write_text(json.dumps(raw))
    assert lc.workload.from_broker_stats(tmp_path / "stats.json")["warmupDurationMinutes"] >= 1
    sub["msgRateRedeliver"] = 0.0
    (tmp_path / "stats.json").write_text(json.dumps(raw))
    assert lc.workload.from_broker_stats(tmp_path / "stats.json")["warmupDurationMinutes"] < 1


# --- issue 58: a stock broker.conf, the design from the version, the fit, cross-checks, verdicts ---


def test_a_stock_broker_conf_calibrates_with_the_direct_memory_of_the_metrics(tmp_path):
    # Pulsar 4.1's own broker.conf leaves managedLedgerCacheSizeMB empty: the broker caches a fifth
    # of its direct memory, which a 4.0.4 broker's /metrics give (2 GiB -> 409 MiB); its version
    # says it runs the Pulsar 4.0 cache.
    result = lc.calibrate.calibrate(
        DATA / "one-topic.stats.json",
        DATA / "pulsar-4.0.4-namespace.metrics.txt",
        broker_conf=DATA / "pulsar-4.1.broker.conf",
        designs=["pip430", "legacy", "lru"],
        sizes=[64 * MIB, 512 * MIB],
        test_duration_minutes=0.2,
        widen=False,
    )
    assert result.current.cache_size_bytes == (2 << 30) // 5 // MIB * MIB
    assert result.current.strategy == "legacy" and "4.0.4" in result.design_source
    assert "jvm_memory_direct_bytes_max" in result.size_source
    # One topic in the stats, five managed ledgers on the broker: said first.
    assert result.mismatches and "the stats hold 1 persistent topic," in result.mismatches[0]
    text = result.text()
    assert text.index("Check first") < text.index("The answer") < text.index("How well the lab fits")


def test_an_empty_cache_size_without_direct_memory_asks_for_the_current_size(tmp_path):
    with pytest.raises(
        lc.InvalidArgumentError,
        match=r"pulsar-4.1.broker.conf leaves managedLedgerCacheSizeMB "
        r"empty.*--current-cache-size",
    ):
        lc.calibrate.calibrate(
            DATA / "one-topic.stats.json",
            DATA / "one-topic.metrics.txt",
            broker_conf=DATA / "pulsar-4.1.broker.conf",
            designs=["lru"],
            sizes=[MIB],
        )
    result = lc.calibrate.calibrate(
        DATA / "one-topic.stats.json",
        DATA / "one-topic.metrics.txt",
        broker_conf=DATA / "pulsar-4.1.broker.conf",
        designs=["lru"],
        sizes=[MIB],
        current_cache_size=96 * MIB,
        test_duration_minutes=0.2,
        widen=False,
    )
    assert result.current.cache_size_bytes == 96 * MIB and result.size_source == "--current-cache-size"
    # The version is unknown here: the Pulsar 4.0 cache assumed (no version: before 2.7), and the report says so.
    assert result.current.strategy == "legacy" and "--design pip430" in result.design_source


def test_the_stock_conf_through_the_command_line(tmp_path):
    r = _cli(
        "calibrate",
        "--stats",
        str(DATA / "one-topic.stats.json"),
        "--metrics",
        str(DATA / "one-topic.metrics.txt"),
        "--broker-conf",
        str(DATA / "pulsar-3.0.broker.conf"),
        "--quiet",
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "managedLedgerCacheSizeMB" in r.stderr and "pulsar-3.0.broker.conf" in r.stderr
    assert "--current-cache-size" in r.stderr
    r = _cli(
        "calibrate",
        "--stats",
        str(DATA / "one-topic.stats.json"),
        "--metrics",
        str(DATA / "one-topic.metrics.txt"),
        "--broker-conf",
        str(DATA / "pulsar-3.0.broker.conf"),
        "--current-cache-size",
        "2g",
        "--strategy",
        "pip430",
        "--cache-size",
        "1GiB",
        "--duration-minutes",
        "0.2",
        "-o",
        str(tmp_path / "out"),
        "--quiet",
    )
    assert r.returncode == 0, r.stderr
    assert "current cache size: 2 GiB" in r.stdout and "with a 2 GiB cache" in r.stdout
    assert {"report.md", "calibrate.png"} <= {p.name for p in (tmp_path / "out").iterdir()}


def test_recommendations_name_only_designs_a_broker_runs():
    stats, observed = bw.dump(
        {
            "testDurationMinutes": 0.3,
            "topicDetails": [
                {
                    "name": "persistent://t/ns/a",
                    "producerRate": 2000,
                    "messageSize": 512,
                    "subscriptions": [
                        {"name": "tail", "type": "Exclusive", "consumerRates": [2400]},
                        {"name": "behind", "type": "Exclusive", "consumerRates": [2000], "startSeconds": 10},
                    ],
                }
            ],
        },
        lc.CacheConfig(cache_size_bytes=4 * MIB),
        seed=3,
    )
    result = lc.calibrate.calibrate(
        stats,
        lc.metrics.BrokerMetrics(cache=observed),
        broker_conf={"managedLedgerCacheSizeMB": "4"},
        sizes=[2 * MIB, 4 * MIB, 16 * MIB],
        test_duration_minutes=0.3,
        widen=False,
    )
    broker = {d["name"] for d in lc.designs() if d["role"] == "broker"}
    assert {r["strategy"] for r in result.recommendations} == broker & set(lc.calibrate.DESIGNS)
    # LRU at the broker's size, by default; no broker runs it.
    assert [(r["strategy"], r["cache_size_bytes"]) for r in result.references] == [("lru", 4 * MIB)]
    assert all(r["verdict"] in ("unchanged", "recommended", "qualified", "withheld") for r in result.recommendations)
    labels = {d["label"] for d in lc.designs()}
    d_role = {d["label"]: d["role"] for d in lc.designs()}.get
    text = result.text()
    assert "LRU (reference)" in text and "PIP-430 (Pulsar 4.1+)" in text and " lru " not in text
    assert all(label in result.markdown() for label in labels if d_role(label) in ("broker", "reference"))


def test_a_change_within_the_models_error_is_withheld():
    cal = lc.calibrate
    current = cal.Prediction("pip430", 64 * MIB, 0.79, 100.0, 30.0)
    poor = cal.Fit(
        observed_hit_ratio=0.84, predicted_hit_ratio=0.79, observed_storage_reads=20.0, predicted_storage_reads=30.0
    )
    close = cal.Fit(0.80, 0.79, 29.0, 30.0)
    assert (poor.quality, close.quality) == ("poor", "close")
    pick = lambda size, saved: {"strategy": "pip430", "cache_size_bytes": size, "storage_reads_saved_per_second": saved}
    # 8x smaller at the same storage reads: only on a close fit.
    assert cal._qualified(pick(8 * MIB, 0.0), poor, current)["verdict"] == "withheld"
    assert cal._qualified(pick(8 * MIB, 0.0), close, current)["verdict"] == "recommended"
    # Bigger, saving 5 reads/s where the model is off by 10: withheld; by 15: qualified; by 25: recommended
    # on a close fit (error 1), qualified on a poor one.
    assert cal._qualified(pick(256 * MIB, 5.0), poor, current)["verdict"] == "withheld"
    assert cal._qualified(pick(256 * MIB, 15.0), poor, current)["verdict"] == "qualified"
    assert cal._qualified(pick(256 * MIB, 25.0), poor, current)["verdict"] == "qualified"
    assert cal._qualified(pick(256 * MIB, 25.0), close, current)["verdict"] == "recommended"
    assert cal._qualified(pick(64 * MIB, 0.0), poor, current)["verdict"] == "unchanged"


def test_a_sweep_whose_answer_sits_on_an_edge_is_widened():
    P = lc.calibrate.Prediction
    still_gaining = [P("lru", s * MIB, h, 1.0, 1.0) for s, h in ((8, 0.5), (16, 0.6), (32, 0.8))]
    assert lc.calibrate._widening(still_gaining, 0.01) == [("lru", 64 * MIB)]
    # Flat: the bottom edge is not widened (every size does as well); a note says so.
    flat = [P("lru", s * MIB, h, 1.0, 1.0) for s, h in ((8, 0.8), (16, 0.805), (32, 0.8))]
    assert lc.calibrate._widening(flat, 0.01) == []
    assert lc.calibrate._flat_notes(flat, 0.01)[0].startswith(
        "LRU (reference): the same hit ratio (within 0.01) at every size from 8 MiB to 32 MiB"
    )
    assert lc.calibrate._flat_notes(still_gaining, 0.01) == []
    inside = [P("lru", s * MIB, h, 1.0, 1.0) for s, h in ((8, 0.5), (16, 0.8), (32, 0.8))]
    assert lc.calibrate._widening(inside, 0.01) == []


def test_notes_about_many_subscriptions_are_merged():
    notes = [f"persistent://t/n/topic-{i} sub-1: its backlog changes faster" for i in range(30)]
    notes += ["persistent://t/n/x: a backlog but no publishing", "the sweep was widened"]
    merged = lc.calibrate.merge_notes(notes)
    assert merged == [
        "30 subscriptions: its backlog changes faster (e.g. persistent://t/n/topic-0 sub-1)",
        "persistent://t/n/x: a backlog but no publishing",
        "the sweep was widened",
    ]


def test_stats_and_metrics_of_different_brokers_are_said_to_disagree():
    stats = lc.broker_stats.read(DATA / "many-small-topics.stats.json")
    metrics = lc.metrics.read(DATA / "pulsar-4.0.4-namespace.metrics.txt")
    found = lc.calibrate.cross_check(stats, metrics)
    assert any("60 persistent topics" in m and "5 managed ledgers" in m for m in found)
    assert any("publish" in m and "pulsar_rate_in" in m for m in found)
    same = lc.calibrate.cross_check(
        lc.broker_stats.read(DATA / "one-topic.stats.json"), lc.metrics.read(DATA / "one-topic.metrics.txt")
    )
    assert same == []


def test_the_default_sweep_is_in_whole_mib_around_the_current_size():
    assert lc.calibrate.default_sizes(409 * MIB) == [m * MIB for m in (51, 102, 204, 409, 818, 1636)]
    assert lc.calibrate.default_sizes(4 * MIB) == [m * MIB for m in (1, 2, 4, 8, 16)]


def test_a_sweep_replays_only_the_sizes_that_could_differ_and_gets_what_replaying_all_gives():
    # A tailing subscription and one 20 s behind: an LRU cache under 80 MB misses the second's
    # reads, a larger one holds them; PIP-430's TTL keeps its cache small at any size.
    spec = {
        "testDurationMinutes": 1.0,
        "topicDetails": [
            {
                "name": "persistent://t/ns/a",
                "producerRate": 4000,
                "messageSize": 1024,
                "subscriptions": [
                    {"name": "tail", "type": "Exclusive", "consumerRates": [4800]},
                    {"name": "behind", "type": "Exclusive", "consumerRates": [4000], "startSeconds": 20},
                ],
            }
        ],
    }
    stats, observed = bw.dump(spec, lc.CacheConfig(cache_size_bytes=16 * MIB, strategy="lru"), seed=3)
    sizes = [2 * MIB, 8 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB]
    designs = ["pip430", "legacy", "lru"]
    replayed = []
    real = lc.calibrate._Sweep._replay

    def counting(self, pairs, trace=None):
        replayed.extend(pairs)
        return real(self, pairs, trace)

    import unittest.mock

    with unittest.mock.patch.object(lc.calibrate._Sweep, "_replay", counting):
        result = lc.calibrate.calibrate(
            stats,
            lc.metrics.BrokerMetrics(cache=observed),
            broker_conf={"managedLedgerCacheSizeMB": "16"},
            design="pip430",
            designs=designs,
            sizes=sizes,
            test_duration_minutes=0.3,
            widen=False,
            seed=5,
        )
    # Every (design, size) replayed on its own gives the figures the sweep reports.
    spec_run = result.spec
    configs = [lc.CacheConfig(cache_size_bytes=s, strategy=d, memory_model=False) for d in designs for s in sizes]
    _, series = lc.replay(lambda: lc.workload.stream(spec_run, 5), configs, with_timeseries=True)
    window = bw.window_seconds(spec_run)
    got = {(p.strategy, p.cache_size_bytes): p for p in result.sweep}
    for i, c in enumerate(configs):
        reads, hits = bw.window_counts(series, window, i)
        p = got[c.strategy, c.cache_size_bytes]
        assert p.hit_ratio == (hits / reads if reads else None), (c.strategy, c.cache_size_bytes)
    lru = [got["lru", s].hit_ratio for s in sizes]
    assert lru[0] < 0.7 and lru[-1] == 1.0, lru  # the sizes differ: a copied figure would be caught
    # ... while the sizes a design's cache never half filled were not replayed.
    assert len(replayed) < len(configs), replayed
    assert ("lru", 2 * MIB) in replayed, replayed  # a size the cache filled is replayed
    assert ("pip430", 1024 * MIB) in replayed and ("pip430", 256 * MIB) not in replayed


def test_generate_from_stats_says_what_the_reader_repaired(tmp_path):
    # A real 1.19 paste with a negative unackedMessages, on a topic nobody publishes to.
    r = _cli(
        "generate",
        "--from-stats",
        str(DATA / "pulsar-759-negative-unacked-1.19.stats.json"),
        "--duration-minutes",
        "0.1",
        "-o",
        str(tmp_path / "t.parquet"),
        "--quiet",
    )
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("note: ")]
    assert any("unackedMessages < 0 clamped to 0" in n for n in notes), r.stderr
    assert any("nobody publishes; its backlog" in n for n in notes), r.stderr
