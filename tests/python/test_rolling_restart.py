"""The rolling-restart scenario (Pulsar's BrokerEntryCacheRollingRestartTest), its four named
configurations, `ledgercache compare` replaying them, and the report beside Pulsar's figures."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ledgercache as lc
from ledgercache import cli, pulsar_reference
from ledgercache.workload import _snake

SCENARIO = "rolling-restart"
NAMES = ["PIP430", "PIP430disabled", "cacheEvictionByMarkDeletedPosition", "PR12258"]


def test_the_scenario_is_pulsars_test():
    # BrokerEntryCacheRollingRestartTest.testTailingReadsRollingRestart and
    # AbstractBrokerEntryCacheMultiBrokerTest.configureDefaults / numberOfAdditionalBrokers.
    spec = {_snake(k): v for k, v in lc.workload.SCENARIOS[SCENARIO].items()}
    assert spec["brokers"] == 2  # numberOfAdditionalBrokers() = 1
    assert (spec["topics"], spec["partitions_per_topic"]) == (1, 10)
    assert spec["producer_rate"] == 50000 and spec["batching_enabled"] is False
    assert spec["message_size"] == 8192 and spec["message_metadata"] is False  # calculateEntryLength: 8 KiB
    assert (spec["subscriptions_per_topic"], spec["consumer_per_subscription"]) == (10, 1)
    assert spec["subscription_type"] == "Shared" and spec["receiver_queue_size"] == 200
    assert spec["acknowledgment_group_time_ms"] == 5
    assert spec["managed_ledger_max_entries_per_ledger"] == 100000
    assert spec["managed_ledger_min_ledger_rollover_time_minutes"] == 0
    assert spec["managed_ledger_max_ledger_rollover_time_minutes"] == 1
    # testTimeInSeconds 30, numberOfRestarts 3: a restart every 30 / (3 + 1) s.
    assert spec["test_duration_minutes"] * 60 == 30
    assert spec["rolling_restart_interval_seconds"] == 30 / (3 + 1) and spec["rolling_restart_count"] == 3
    assert spec["producer_pause_outstanding_deliveries"] == 500000  # targetMessagesInFlight
    assert (spec["reconnect_delay_min_ms"], spec["reconnect_delay_max_ms"]) == (20, 40)  # nextLong(20, 40)
    assert lc.workload.SCENARIO_CACHE_SIZES[SCENARIO] == (250 << 20,)  # CACHE_SIZE_MB = 250


def test_the_named_configurations_are_the_tests_configure_methods():
    # AbstractBrokerEntryCacheMultiBrokerTest.configurePIP430 / disablePIP430 /
    # configureCacheEvictionByMarkDeletedPosition / configurePR12258Caching.
    named = lc.workload.SCENARIO_CONFIGS[SCENARIO]
    assert list(named) == NAMES
    configs = {n: lc.CacheConfig(cache_size_bytes=250 << 20, **s) for n, s in named.items()}
    assert {c.strategy for c in configs.values()} == {"pip430"}  # every one is master's broker
    pip430, disabled, by_mark, pr12258 = (configs[n] for n in NAMES)
    assert pip430.eviction_by_expected_read_count and pip430.extend_ttl_of_recently_accessed
    for c in (disabled, by_mark, pr12258):
        assert not c.eviction_by_expected_read_count and not c.extend_ttl_of_recently_accessed
    assert by_mark.eviction_by_mark_deleted_position
    assert not any(c.eviction_by_mark_deleted_position for c in (pip430, disabled, pr12258))
    assert (pr12258.min_backlog_cursors_for_caching, pr12258.min_backlog_entries_for_caching) == (1, 1)
    assert pr12258.max_backlog_between_cursors_for_caching == 2**31 - 1  # Integer.MAX_VALUE
    assert pr12258.cursor_backlogged_threshold == 2**63 - 1  # Long.MAX_VALUE
    # Everything else as the broker ships it.
    default = lc.CacheConfig(cache_size_bytes=250 << 20).to_dict()
    for name, c in configs.items():
        changed = {k for k, v in c.to_dict().items() if v != default[k]}
        assert changed <= set(named[name]), name


def test_pulsars_figures_agree_with_themselves():
    # The test's hit percentage is 100 * (consumed - bk_read_entries) / consumed, per run, averaged
    # over five runs: from the averaged counts it comes within a point of the printed average.
    checked = 0
    for run in pulsar_reference.runs(SCENARIO):
        assert set(run["figures"]) == set(NAMES)
        for name, f in run["figures"].items():
            if f["consumed"] is None:
                continue
            assert pulsar_reference.hit_percent(f["consumed"], f["bk_read_entries"]) == pytest.approx(
                f["hit_percent"], abs=1.0
            ), (run["name"], name)
            # Ten subscriptions each read what was produced, at most.
            assert f["consumed"] <= 10 * f["produced"] * 1.01
            checked += 1
    assert checked == 8
    # PIP-430 first with the fewest BookKeeper reads in every published run.
    for run in pulsar_reference.runs(SCENARIO):
        figures = run["figures"]
        assert max(figures, key=lambda n: figures[n]["hit_percent"]) == "PIP430"
    assert pulsar_reference.reference("tailing-fan-out") is None and pulsar_reference.runs("x") == ()


def test_the_scenario_generates_without_the_unmerged_keys():
    spec = {**lc.workload.SCENARIOS[SCENARIO], "testDurationMinutes": 0.02}
    t = lc.workload.generate(spec, seed=1)
    adds = t.filter(pa.compute.equal(t["op"], "add"))
    assert set(adds["size"].to_pylist()) == {8192} and set(adds["messages"].to_pylist()) == {1}
    assert set(t["broker"].to_pylist()) == {"broker-0", "broker-1"}
    assert len(set(adds["topic"].to_pylist())) == 10
    opens = t.filter(pa.compute.equal(t["op"], "open"))
    assert len(set(zip(opens["topic"].to_pylist(), opens["cursor"].to_pylist(), strict=True))) == 100
    assert adds.num_rows == pytest.approx(50000 * 1.2, rel=0.05)


def compare(tmp_path, *args):
    out = tmp_path / "report"
    assert (
        cli.main(["compare", SCENARIO, "-o", str(out), "--local", "--quiet", "--duration-minutes", "0.05", *args]) == 0
    )
    return out, pq.read_table(out / "summary.parquet"), pq.read_table(out / "timeseries.parquet")


def test_compare_replays_the_named_configurations(tmp_path, capsys):
    out, summary, series = compare(tmp_path)
    named = lc.workload.SCENARIO_CONFIGS[SCENARIO]
    rows = summary.to_pylist()
    # Each broker under each named configuration, at the scenario's size, named.
    assert sorted((r["broker"], r["config_name"]) for r in rows) == sorted(
        (b, n) for b in ("broker-0", "broker-1") for n in NAMES
    )
    for r in rows:
        config = json.loads(r["config"])
        assert config["cache_size_bytes"] == 250 << 20
        assert {k: config[k] for k in named[r["config_name"]]} == named[r["config_name"]]
    # The series' rows carry the same names as their summary rows.
    assert set(series.column("config_name").to_pylist()) == set(NAMES)
    printed = capsys.readouterr().out
    assert "configuration" in printed and "Pulsar 2025-08-22 i9: PIP430 72.28%" in printed
    report = (out / "report.md").read_text()
    assert "| configuration | lab hit ratio | lab hit % |" in report
    assert "| PIP430 | " in report and "| 98.40 | 98.68 | 72.28 | 205,249 | 4,192,224 |" in report
    assert "Where and why the lab differs" in report
    for png in ("named-hit-rolling-restart.png", "named-storage-reads-rolling-restart.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_strategy_and_set_still_override_the_named_configurations(tmp_path):
    _, summary, series = compare(tmp_path, "--strategy", "lru", "--strategy", "legacy")
    assert summary.column("strategy").to_pylist().count("lru") == 2
    assert summary.column("config_name").null_count == summary.num_rows
    assert series.column("config_name").null_count == series.num_rows
    _, summary, _ = compare(tmp_path, "--set", "eviction_by_mark_deleted_position=true", "--force")
    assert sorted(set(summary.column("strategy").to_pylist())) == sorted(cli.ALL_STRATEGIES)
    assert summary.column("config_name").null_count == summary.num_rows


def test_other_scenarios_are_unnamed(tmp_path):
    out = tmp_path / "report"
    args = ["compare", "tailing-fan-out", "-o", str(out), "--local", "--quiet", "--strategy", "pip430"]
    assert cli.main([*args, "--duration-minutes", "0.02", "--cache-size", "4MiB"]) == 0
    summary = pq.read_table(out / "summary.parquet")
    assert summary.column("config_name").null_count == summary.num_rows
    assert "| configuration |" not in (out / "report.md").read_text()


def lifecycle_tables():
    """A summary and series as H1's replay gives them for a restart at second 5 (its columns
    `misses`, `loads`, `unloads`, `reopens`, `time_to_warm_seconds`, and the summary's time to warm),
    built here so that the report's use of them is tested before the engine has them."""
    names = NAMES[:2]
    configs = {n: lc.CacheConfig(cache_size_bytes=8 << 20, **lc.workload.SCENARIO_CONFIGS[SCENARIO][n]) for n in names}
    summary, series = [], []
    for i, n in enumerate(names):
        summary.append(
            {
                "broker": "broker-0",
                "strategy": "pip430",
                "cache_size_bytes": 8 << 20,
                "entries_read": 1000,
                "read_bytes": 1000 * 8192,
                "hits": 900 - 100 * i,
                "misses": 100 + 100 * i,
                "hit_ratio": (900 - 100 * i) / 1000,
                "storage_read_ops": 10 + i,
                "storage_read_bytes": (100 + 100 * i) * 8192,
                "lifecycle_events": 2,
                "mean_time_to_warm_seconds": 1.5 + i,
                "max_time_to_warm_seconds": 2.0 + i,
                "config": json.dumps(configs[n].to_dict()),
                "config_name": n,
                "scenario": SCENARIO,
            }
        )
        for second in range(10):
            event = second in (5, 6)
            hits = 60 if second in (5, 6) else 100 - 10 * i
            series.append(
                {
                    "broker": "broker-0",
                    "strategy": "pip430",
                    "cache_size_bytes": 8 << 20,
                    "config_index": i,
                    "second": second,
                    "cache_bytes": (second + 1) << 20,
                    "reads": 100,
                    "hits": hits,
                    "hit_ratio": hits / 100,
                    "misses": 100 - hits,
                    "storage_read_ops": 1,
                    "loads": int(second == 6),
                    "unloads": int(second == 5),
                    "reopens": int(second == 6),
                    "time_to_warm_seconds": (1.0 + i + (second == 6)) if event else None,
                    "config_name": n,
                    "scenario": SCENARIO,
                }
            )
    return pa.Table.from_pylist(summary), pa.Table.from_pylist(series)


def test_the_report_marks_lifecycle_events_and_the_time_to_warm(tmp_path):
    summary, series = lifecycle_tables()
    lc.report.write_report(summary, series, tmp_path)
    report = (tmp_path / "report.md").read_text()
    # The time to warm in the table of every run: the brokers' events, their mean and max.
    assert "| lifecycle events | mean time to warm (s) | max time to warm (s) |" in report
    assert "| 2 | 1.5 | 2.0 |" in report and "| 2 | 2.5 | 3.0 |" in report
    assert "![rolling-restart: hit ratio, storage reads a second, bytes cached and the time to warm" in report
    assert (tmp_path / "lifecycle-rolling-restart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = lc.report.comparison_text(summary)
    assert "mean time to warm (s)" in text and "PIP430disabled" in text


def test_the_lifecycle_plot_gets_the_events_and_the_time_to_warm(tmp_path, monkeypatch):
    summary, series = lifecycle_tables()
    drawn = {}
    monkeypatch.setattr(
        lc.report, "plot_lifecycle", lambda groups, events, path, **kw: drawn.update(groups=groups, events=events)
    )
    lc.report.write_report(summary, series, tmp_path)
    assert drawn["events"] == {"unloads": [5], "loads": [6], "reopens": [6]}
    assert list(drawn["groups"]) == NAMES[:2]
    first = drawn["groups"]["PIP430"]
    assert first[5]["time_to_warm"] == 1.0 and first[6]["time_to_warm"] == 2.0 and first[4]["time_to_warm"] is None
    assert first[5]["storage_reads"] == 40 and first[0]["hit_ratio"] == 1.0
    assert drawn["groups"]["PIP430disabled"][0]["storage_reads"] == 10


def test_old_results_without_the_lifecycle_columns_still_report(tmp_path):
    summary, series = lifecycle_tables()
    old_summary = summary.drop_columns(["lifecycle_events", "mean_time_to_warm_seconds", "max_time_to_warm_seconds"])
    old_series = series.drop_columns(
        ["misses", "storage_read_ops", "loads", "unloads", "reopens", "time_to_warm_seconds"]
    )
    lc.report.write_report(old_summary, old_series, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "time to warm (s) |" not in report
    assert (tmp_path / "lifecycle-rolling-restart.png").exists()  # named runs are still drawn over time


def test_the_whole_scenario_restarts_each_broker_in_turn():
    # BrokerEntryCacheRollingRestartTest's injector: broker 0, 1, 0 at 7.5, 15 and 22.5 s.
    t = lc.workload.generate(SCENARIO, seed=1)
    unloads = t.filter(pa.compute.equal(t["op"], "unload")).to_pylist()
    loads = t.filter(pa.compute.equal(t["op"], "load")).to_pylist()
    # A restart unloads all of the broker's topics at once: one (broker, half second) each.
    restarts = sorted({(r["ts_us"] // 500_000, r["broker"]) for r in unloads})
    assert [b for _, b in restarts] == ["broker-0", "broker-1", "broker-0"]
    assert [half / 2 for half, _ in restarts] == [7.5, 15.0, 22.5]
    # The other broker loads them (a trace may also load topics at its start).
    first = min(u["ts_us"] for u in unloads)
    assert {r["broker"] for r in loads if r["ts_us"] > first} == {"broker-0", "broker-1"}
    adds = t.filter(pa.compute.equal(t["op"], "add"))
    assert set(adds["size"].to_pylist()) == {8192}  # messageMetadata false: exactly 8 KiB


def test_compare_puts_pip430_first_with_the_fewest_storage_reads(tmp_path):
    # Issue 61's "done when", as every published run of Pulsar's test has it.
    out = tmp_path / "report"
    assert cli.main(["compare", SCENARIO, "-o", str(out), "--local", "--quiet"]) == 0
    summary = pq.read_table(out / "summary.parquet").to_pylist()
    hits, misses = {}, {}
    for r in summary:
        hits[r["config_name"]] = hits.get(r["config_name"], 0) + r["hits"]
        misses[r["config_name"]] = misses.get(r["config_name"], 0) + r["misses"]
    assert min(misses.values()) > 0  # the restarts cost every configuration storage reads
    assert max(hits, key=hits.get) == "PIP430" and min(misses, key=misses.get) == "PIP430"
    series = pq.read_table(out / "timeseries.parquet")
    assert sum(series.column("unloads").to_pylist()) > 0 and sum(series.column("loads").to_pylist()) > 0
    assert "PIP430 first, with the fewest storage reads" in (out / "report.md").read_text()


def test_designs_compared_over_lifecycle_events_get_the_time_plot_too(tmp_path, monkeypatch):
    # A scenario without named configurations (say, with bundle moves) is drawn per design.
    summary, series = lifecycle_tables()
    strategies = {"PIP430": "pip430", "PIP430disabled": "legacy"}
    summary = summary.set_column(
        summary.schema.get_field_index("strategy"),
        "strategy",
        pa.array([strategies[n] for n in summary["config_name"].to_pylist()]),
    ).drop_columns(["config_name"])
    series = series.set_column(
        series.schema.get_field_index("strategy"),
        "strategy",
        pa.array([strategies[n] for n in series["config_name"].to_pylist()]),
    ).drop_columns(["config_name"])
    drawn = {}
    monkeypatch.setattr(
        lc.report, "plot_lifecycle", lambda groups, events, path, **kw: drawn.update(groups=groups, events=events)
    )
    lc.report.write_report(summary, series, tmp_path)
    assert list(drawn["groups"]) == ["pip430", "legacy"] and drawn["events"]["unloads"] == [5]
    report = (tmp_path / "report.md").read_text()
    assert "| configuration |" not in report and "mean time to warm (s)" in report
    # Without events in the series, no time plot: the report stays as it was.
    drawn.clear()
    quiet = series.drop_columns(["loads", "unloads", "reopens"])
    lc.report.write_report(summary, quiet, tmp_path / "quiet")
    assert drawn == {}
