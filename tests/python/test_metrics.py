"""ledgercache.metrics: the pulsar_ml_cache_* series of each fixture's Prometheus text (and the
monitoring-metrics JSON), the other series kept as samples, and the errors: several brokers'
series without labels=, no cache series, text the Prometheus parser rejects."""

import json
from pathlib import Path

import pytest

import ledgercache as lc
from ledgercache import metrics

DATA = Path(__file__).resolve().parents[1] / "data" / "broker"


def test_one_topic_metrics():
    m = metrics.read(DATA / "one-topic.metrics.txt")
    c = m.cache
    assert (c.hits_rate, c.misses_rate, c.hits_throughput, c.misses_throughput) == (397.6, 2.35, 4071424.0, 24064.0)
    assert (c.used_size, c.evictions, c.entries, c.managed_ledgers) == (26214400, 14, 2560, 1)
    assert (c.inserted_entries_total, c.evicted_entries_total) == (1438670, 1436110)
    assert (c.pool_allocated, c.pool_used, c.pool_active_allocations_normal) == (33554432, 26214400, 2560)
    assert c.hit_ratio == pytest.approx(397.6 / 399.95)
    assert m.labels == {"cluster": "standalone"}
    names = {name for name, _, _ in m.samples}
    assert {"jvm_memory_bytes_used", "pulsar_topics_count", "pulsar_rate_in"} <= names
    assert ("jvm_memory_bytes_used", {"cluster": "standalone", "area": "heap"}, 452984832.0) in m.samples
    # entries dispatched a second by the two subscriptions (10 messages an entry) ~ hits + misses
    (t,) = lc.broker_stats.read(DATA / "one-topic.stats.json").topics
    assert c.hits_rate + c.misses_rate == pytest.approx(t.msg_rate_out / 10, rel=0.01)


def test_key_shared_backlog_metrics_misses_substantial():
    c = metrics.read(DATA / "key-shared-backlog.metrics.txt").cache
    assert (c.hits_rate, c.misses_rate) == (1012.4, 851.3)
    assert c.hit_ratio == pytest.approx(0.5432, abs=1e-4)
    assert c.misses_throughput == 851.3 * 2560


def test_many_small_topics_metrics():
    m = metrics.read(DATA / "many-small-topics.metrics.txt")
    assert m.cache.managed_ledgers == 60 and m.labels == {"cluster": "prod-eu"}
    topics = lc.broker_stats.read(DATA / "many-small-topics.stats.json").topics
    dispatched = sum(t.msg_rate_out for t in topics) / 2  # 2 messages an entry
    assert m.cache.hits_rate + m.cache.misses_rate == pytest.approx(dispatched, rel=1e-3)


def test_monitoring_metrics_json_same_numbers_as_prometheus():
    j = metrics.read(DATA / "monitoring-metrics.json")
    p = metrics.read(DATA / "one-topic.metrics.txt")
    assert j.cache == p.cache and j.labels == {}
    assert ("jvm_heap_used", {"metric": "jvm_metrics"}, 452984832.0) in j.samples
    items = json.loads((DATA / "monitoring-metrics.json").read_text())
    assert metrics.read_monitoring_metrics(items).cache == p.cache


def test_monitoring_metrics_as_the_cli_prints_it(tmp_path):
    items = json.loads((DATA / "monitoring-metrics.json").read_text())
    for sep, indent in (("", None), ("\n\n", 2)):  # pulsar-admin prints the items one after another
        path = tmp_path / "cli.json"
        path.write_text(sep.join(json.dumps(i, indent=indent) for i in items))
        assert metrics.read(path).cache.hits_rate == 397.6


def test_prometheus_text_itself_and_path_string():
    text = (DATA / "one-topic.metrics.txt").read_text()
    assert metrics.read_prometheus(text).cache == metrics.read_prometheus(str(DATA / "one-topic.metrics.txt")).cache


def two_brokers() -> str:
    a = (DATA / "one-topic.metrics.txt").read_text()
    b = (DATA / "key-shared-backlog.metrics.txt").read_text()
    # as a federation of two brokers would: both under the same names, told apart by labels
    body = [line for line in b.splitlines() if line.startswith("pulsar_ml_")]
    return a + "\n".join(body) + "\n"


def test_ambiguous_labels_refused_unless_selected(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text(two_brokers())
    with pytest.raises(lc.InvalidArgumentError) as e:
        metrics.read(path)
    message = str(e.value)
    assert message.startswith(f"{path}: cache series for 2 label sets")
    assert '{cluster="standalone"}' in message and '{cluster="prod-us"}' in message and "labels=" in message
    assert metrics.read(path, labels={"cluster": "prod-us"}).cache.misses_rate == 851.3
    assert metrics.read(path, labels={"cluster": "standalone"}).cache.misses_rate == 2.35
    with pytest.raises(lc.InvalidArgumentError, match=r"no cache series match labels=\{cluster=\"west\"\}"):
        metrics.read(path, labels={"cluster": "west"})


def test_no_cache_series(tmp_path):
    path = tmp_path / "jvm.txt"
    path.write_text(
        '# TYPE jvm_threads_current gauge\njvm_threads_current{cluster="a"} 10\n'
        '# TYPE pulsar_ml_count gauge\npulsar_ml_count{cluster="a"} 3\n'
    )
    with pytest.raises(
        lc.InvalidArgumentError, match=rf"^{path}: no managed-ledger cache series; expected pulsar_ml_cache_hits_rate, "
    ):
        metrics.read(path)
    with pytest.raises(
        lc.InvalidArgumentError, match=r"^<list>: no managed-ledger cache series; expected brk_ml_cache_"
    ):
        metrics.read_monitoring_metrics([{"metrics": {"brk_in_tps": 1.0}, "dimensions": {}}])


def test_required_series_missing(tmp_path):
    text = (
        "\n".join(line for line in (DATA / "one-topic.metrics.txt").read_text().splitlines() if "used_size" not in line)
        + "\n"
    )
    with pytest.raises(
        lc.InvalidArgumentError, match=r'cache series \{cluster="standalone"\} lack pulsar_ml_cache_used_size'
    ):
        metrics.read_prometheus(text)


def test_malformed_text(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text('# TYPE pulsar_ml_cache_hits_rate gauge\npulsar_ml_cache_hits_rate{cluster="a" 1.0\n')
    with pytest.raises(lc.InvalidArgumentError, match=rf"^{path}: not Prometheus text: "):
        metrics.read(path)
    path.write_text('pulsar_ml_cache_hits_rate{cluster="a"} lots\n')
    with pytest.raises(lc.InvalidArgumentError, match="not Prometheus text"):
        metrics.read(path)


def test_bad_json_and_shapes(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('[{"metrics": {"brk_ml_cache_hits_rate": 1.0},\n "dimensions": {}')
    with pytest.raises(lc.InvalidArgumentError, match=rf"^{path}: line 2 column \d+: not JSON"):
        metrics.read(path)
    path.write_text('[{"a": 1}]')
    with pytest.raises(lc.InvalidArgumentError, match=r"item 0 is not .*monitoring-metrics"):
        metrics.read(path)
    with pytest.raises(lc.InvalidArgumentError, match="does not exist"):
        metrics.read(tmp_path / "missing.txt")
    with pytest.raises(lc.InvalidArgumentError, match="more than the 10 a metrics file may have"):
        metrics.read(DATA / "one-topic.metrics.txt", max_bytes=10)


def test_negative_cache_value_read_as_zero_with_a_note():
    text = (DATA / "one-topic.metrics.txt").read_text().replace("} 2.35", "} -2.35")
    m = metrics.read_prometheus(text)
    assert m.cache.misses_rate == 0.0 and m.cache.hits_rate == 397.6
    assert m.notes == ('pulsar_ml_cache_misses_rate{cluster="standalone"}: negative (-2.35); read as 0',)


def test_hit_ratio_none_when_idle():
    assert metrics.CacheMetrics(0, 0, 0, 0, 0).hit_ratio is None
    assert metrics.CacheMetrics(3, 1, 0, 0, 0).hit_ratio == 0.75


# Every release's /metrics shape (tests/data/broker/README.md says which lines are real pastes).

MIB = 1 << 20


def test_pre_2_6_broker_real_paste_refused_with_the_monitoring_metrics_hint():
    # apache/pulsar#3112 (February 2019): topic series with timestamps, no pulsar_ml_cache_* yet.
    path = DATA / "pulsar-2.2-issue-3112.metrics.txt"
    with pytest.raises(lc.InvalidArgumentError) as e:
        metrics.read(path)
    message = str(e.value)
    assert message.startswith(f"{path}: no managed-ledger cache series; expected pulsar_ml_cache_hits_rate, ")
    assert "brokers before Pulsar 2.6 do not write them to /metrics" in message
    assert "pulsar-admin broker-stats monitoring-metrics" in message and "pulsar_version_info" not in message


def test_no_cache_series_from_a_release_that_writes_them_says_so():
    text = (
        "\n".join(
            line for line in (DATA / "pulsar-3.0.7-topic.metrics.txt").read_text().splitlines() if "_ml_" not in line
        )
        + "\n"
    )
    with pytest.raises(
        lc.InvalidArgumentError,
        match=r"pulsar_version_info says 3\.0\.7, a release that writes them: "
        r"was the file cut short or filtered",
    ):
        metrics.read_prometheus(text)


def test_2_6_1_negative_used_size_read_as_zero_with_a_note():
    # The used-size line is apache/pulsar#10016's; 2.6 writes timestamps, the _tiny pool series, the
    # cluster-only zeros (printDefaultBrokerStats) and no pulsar_version_info (2.7).
    m = metrics.read(DATA / "pulsar-2.6.1-issue-10016.metrics.txt")
    assert m.cache.used_size == 0.0 and m.cache.pool_active_allocations_tiny == 0 and m.cache.entries is None
    assert m.cache.hit_ratio == pytest.approx(55.2 / 60)
    assert m.notes == (
        'pulsar_ml_cache_used_size{cluster="platform-pulsar"}: negative (-312); read as 0 '
        "(brokers before Pulsar 2.8 could print a negative size: apache/pulsar#10016)",
    )
    # the cluster-only zeros are not a namespace: the rates are the two partitions' sums
    assert (m.topics, m.rate_in, m.rate_out, m.rates_level) == (2, 300.0, 600.0, "topic")
    assert m.version is None and m.version_numbers is None and m.labels == {"cluster": "platform-pulsar"}
    # 4 GiB of direct memory: a fifth, in whole MiB, is 819 MiB (858783744 B, the CacheMaxSize a
    # broker logged in streamnative/aop#132, as one with 4 GiB and the default would)
    assert m.direct_memory_max_bytes == 4 << 30
    assert m.default_cache_size_bytes() == 819 * MIB == 858783744


def test_namespace_level_paste_with_the_cluster_only_zeros():
    # apache/pulsar#14023's lines: exposeTopicLevelMetricsInPrometheus=false, rate_in 0 in both forms
    m = metrics.read(DATA / "namespace-level-issue-14023.metrics.txt")
    assert (m.topics, m.rate_in, m.rate_out, m.rates_level) == (1, 0.0, 0.0, "namespace")
    assert m.cache.hit_ratio is None and m.cache.managed_ledgers == 1 and m.notes == ()
    assert m.default_cache_size_bytes() == 409 * MIB  # 2 GiB / 5 = 409.6 MiB, rounded down


def test_2_10_4_partitions_count_as_topics():
    m = metrics.read(DATA / "pulsar-2.10.4-topic-partition.metrics.txt")
    # events partitions 0 and 1 (topic label without the suffix, splitTopicAndPartitionIndexLabel) and audit (-1)
    assert (m.topics, m.rates_level) == (3, "topic") and m.cache.managed_ledgers == 3
    assert (m.rate_in, m.rate_out) == (2510.5, 5021.0)
    assert (m.version, m.version_numbers) == ("2.10.4", (2, 10, 4)) and m.version_numbers < (4, 1)
    assert m.direct_memory_max_bytes == 8 << 30 and m.default_cache_size_bytes() == 1638 * MIB
    assert m.notes == ()


def test_3_0_7_topic_sums_match_the_broker_totals():
    m = metrics.read(DATA / "pulsar-3.0.7-topic.metrics.txt")
    assert (m.topics, m.rate_in, m.rate_out, m.rates_level) == (3, 500.0, 920.25, "topic")
    broker = {name: value for name, _, value in m.samples if name.startswith("pulsar_broker_")}
    assert (
        broker["pulsar_broker_topics_count"],
        broker["pulsar_broker_rate_in"],
        broker["pulsar_broker_rate_out"],
    ) == (m.topics, m.rate_in, m.rate_out)
    assert (m.cache.entries, m.cache.inserted_entries_total, m.cache.evicted_entries_total) == (1536, 2206346, 2204810)
    assert m.version == "3.0.7" and m.cache.managed_ledgers == 2  # the non-persistent topic has no ledger


def test_4_0_4_per_namespace_and_the_4_1_boundary():
    text = (DATA / "pulsar-4.0.4-namespace.metrics.txt").read_text()
    m = metrics.read_prometheus(text)
    assert (m.topics, m.rate_in, m.rate_out, m.rates_level) == (5, 1000.0, 1900.0, "namespace")
    assert m.version_numbers == (4, 0, 4) and m.version_numbers < (4, 1)
    later = metrics.read_prometheus(text.replace('version="4.0.4"', 'version="4.1.0-SNAPSHOT"'))
    assert later.version == "4.1.0-SNAPSHOT" and later.version_numbers == (4, 1, 0) >= (4, 1)
    fork = metrics.read_prometheus(text.replace('version="4.0.4"', 'version="2.10.5.3"'))
    assert fork.version_numbers == (2, 10, 5, 3)
    odd = metrics.read_prometheus(text.replace('version="4.0.4"', 'version="${project.version}"'))
    assert odd.version == "${project.version}" and odd.version_numbers is None


def test_broker_totals_when_neither_topic_nor_namespace_series():
    text = (
        "\n".join(
            line
            for line in (DATA / "pulsar-4.0.4-namespace.metrics.txt").read_text().splitlines()
            if "namespace=" not in line
        )
        + "\n"
    )
    m = metrics.read_prometheus(text)
    assert (m.topics, m.rate_in, m.rate_out, m.rates_level) == (5, 1000.0, 1900.0, "broker")


def test_cache_series_only_leave_the_new_fields_unknown():
    text = "".join(line + "\n" for line in (DATA / "one-topic.metrics.txt").read_text().splitlines() if "_ml_" in line)
    m = metrics.read_prometheus(text)
    assert (m.version, m.direct_memory_max_bytes, m.topics, m.rate_in, m.rate_out, m.rates_level, m.notes) == (
        None,
        None,
        None,
        None,
        None,
        None,
        (),
    )
    assert m.default_cache_size_bytes() is None


def test_default_cache_size_has_a_64_mib_floor():
    cache = metrics.CacheMetrics(0, 0, 0, 0, 0)
    assert metrics.BrokerMetrics(cache, direct_memory_max_bytes=256 * MIB).default_cache_size_bytes() == 64 * MIB
    assert metrics.BrokerMetrics(cache, direct_memory_max_bytes=5 * 65 * MIB - 1).default_cache_size_bytes() == 64 * MIB
    assert metrics.BrokerMetrics(cache, direct_memory_max_bytes=5 * 65 * MIB).default_cache_size_bytes() == 65 * MIB


def test_monitoring_metrics_json_matches_the_same_brokers_prometheus():
    j = metrics.read(DATA / "pulsar-2.10.4-monitoring-metrics.json")
    p = metrics.read(DATA / "pulsar-2.10.4-topic-partition.metrics.txt")
    assert j.cache == p.cache and (j.rate_in, j.rate_out) == (p.rate_in, p.rate_out) == (2510.5, 5021.0)
    assert j.direct_memory_max_bytes == p.direct_memory_max_bytes and j.default_cache_size_bytes() == 1638 * MIB
    # the JSON has namespaces only, and no version
    assert (j.rates_level, j.topics, j.version, j.notes) == ("namespace", None, None, ())


def test_monitoring_metrics_json_non_finite_strings(tmp_path):
    # Jackson writes a NaN or infinite double as a quoted string
    items = json.loads((DATA / "pulsar-2.10.4-monitoring-metrics.json").read_text())
    items[1]["metrics"]["brk_out_rate"] = "NaN"
    items[2]["metrics"]["brk_ml_cache_hits_rate"] = "Infinity"
    items[3]["metrics"]["jvm_max_direct_memory"] = -1
    m = metrics.read_monitoring_metrics(items)
    assert (m.rate_in, m.rate_out) == (2510.5, 5000.0) and m.cache.hits_rate == 0.0
    assert m.direct_memory_max_bytes is None and m.default_cache_size_bytes() is None
    assert set(m.notes) == {
        'brk_out_rate{namespace="acme/audit"}: not a number (NaN); left out of rate_out',
        "brk_ml_cache_hits_rate{}: infinite (+Inf); read as 0",
        'jvm_max_direct_memory{metric="jvm_metrics"}: negative (-1); direct memory left unknown',
    }


def test_nan_and_negative_rates_dropped_with_merged_notes():
    text = (DATA / "pulsar-3.0.7-topic.metrics.txt").read_text()
    labels = '{cluster="eu-1",namespace="shop/orders",topic="persistent://shop/orders/%s"}'
    for before, after in (
        (f"pulsar_rate_in{labels % 'created'} 420.25", f"pulsar_rate_in{labels % 'created'} NaN"),
        (f"pulsar_rate_in{labels % 'paid'} 79.75", f"pulsar_rate_in{labels % 'paid'} NaN"),
        (f"pulsar_rate_out{labels % 'paid'} 79.75", f"pulsar_rate_out{labels % 'paid'} -79.75"),
    ):
        assert before in text
        text = text.replace(before, after)
    m = metrics.read_prometheus(text)
    assert (m.topics, m.rate_in, m.rate_out) == (3, 0.0, 840.5)
    assert m.notes == (
        'pulsar_rate_in{cluster="eu-1", namespace="shop/orders", topic="persistent://shop/orders/created"}: '
        "not a number (NaN); left out of rate_in (and 1 more pulsar_rate_in samples like it)",
        'pulsar_rate_out{cluster="eu-1", namespace="shop/orders", topic="persistent://shop/orders/paid"}: '
        "negative (-79.75); counted as 0 in rate_out",
    )


def test_thousands_of_bad_samples_give_one_note():
    lines = ["# TYPE pulsar_rate_in gauge"]
    lines += [f'pulsar_rate_in{{cluster="c",namespace="a/b",topic="persistent://a/b/t{i}"}} NaN' for i in range(5000)]
    lines += [f'pulsar_rate_in{{cluster="c",namespace="a/b",topic="persistent://a/b/u{i}"}} -{i + 1}' for i in range(3)]
    lines += ['pulsar_rate_in{cluster="c",namespace="a/b",topic="persistent://a/b/v"} +Inf']
    text = (
        "\n".join(lines)
        + "\n"
        + "".join(
            line.replace('cluster="standalone"', 'cluster="c"') + "\n"
            for line in (DATA / "one-topic.metrics.txt").read_text().splitlines()
            if "_ml_" in line
        )
    )
    m = metrics.read_prometheus(text)
    assert (m.topics, m.rate_in) == (5004, 0.0)
    nan, negative, infinite = m.notes  # one a kind of problem, not one a sample
    assert nan.endswith("not a number (NaN); left out of rate_in (and 4999 more pulsar_rate_in samples like it)")
    assert negative.endswith('u0"}: negative (-1); counted as 0 in rate_in (and 2 more pulsar_rate_in samples like it)')
    assert infinite.endswith('v"}: infinite (+Inf); left out of rate_in')


def test_cache_nan_and_infinite_values():
    text = (DATA / "one-topic.metrics.txt").read_text()
    text = text.replace('hits_rate{cluster="standalone"} 397.6', 'hits_rate{cluster="standalone"} NaN')
    text = text.replace('evictions{cluster="standalone"} 14', 'evictions{cluster="standalone"} +Inf')
    m = metrics.read_prometheus(text)
    assert m.cache.hits_rate == 0.0 and m.cache.evictions is None and m.cache.misses_rate == 2.35
    assert set(m.notes) == {
        'pulsar_ml_cache_hits_rate{cluster="standalone"}: not a number (NaN); read as 0',
        'pulsar_ml_cache_evictions{cluster="standalone"}: infinite (+Inf); left out',
    }


def test_per_namespace_beside_per_topic_not_counted_twice():
    text = (DATA / "pulsar-2.10.4-topic-partition.metrics.txt").read_text()
    text += (
        'pulsar_rate_in{cluster="prod-us",namespace="acme/payments"} 2510.5 1681234567890\n'
        'pulsar_rate_out{cluster="prod-us",namespace="acme/payments"} 5021.0 1681234567890\n'
    )
    m = metrics.read_prometheus(text)
    assert (m.rate_in, m.rate_out, m.topics) == (2510.5, 5021.0, 3)
    assert m.notes == tuple(
        f'{name}{{cluster="prod-us", namespace="acme/payments"}}: a per-namespace series beside per-topic ones; '
        f"read the per-topic ones only (both would count each message twice)"
        for name in ("pulsar_rate_in", "pulsar_rate_out")
    )


def test_repeated_samples_counted_once():
    text = (DATA / "pulsar-3.0.7-topic.metrics.txt").read_text()
    line = 'pulsar_rate_in{cluster="eu-1",namespace="shop/orders",topic="persistent://shop/orders/paid"} 79.75\n'
    assert line in text
    m = metrics.read_prometheus(text.replace(line, line * 3))
    assert m.rate_in == 500.0
    assert m.notes == ("pulsar_rate_in{}: 2 samples repeat another's labels; each label set counted once in rate_in",)
    cache_line = 'pulsar_ml_cache_misses_rate{cluster="eu-1"} 4.0\n'
    m = metrics.read_prometheus(text.replace(cache_line, cache_line + cache_line.replace("4.0", "5.0")))
    assert m.cache.misses_rate == 5.0
    assert m.notes == (
        'pulsar_ml_cache_misses_rate{cluster="eu-1"}: 2 samples with the same labels; '
        "read the last (were two brokers' files joined?)",
    )


def test_direct_memory_unusable_left_unknown():
    text = (DATA / "pulsar-3.0.7-topic.metrics.txt").read_text().replace("} 4.294967296E9", "} NaN")
    m = metrics.read_prometheus(text)
    assert m.direct_memory_max_bytes is None and m.default_cache_size_bytes() is None
    assert m.notes == ('jvm_memory_direct_bytes_max{cluster="eu-1"}: not a number (NaN); direct memory left unknown',)


def test_two_brokers_new_fields_come_from_the_chosen_one(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text(
        (DATA / "pulsar-3.0.7-topic.metrics.txt").read_text()
        + (DATA / "pulsar-4.0.4-namespace.metrics.txt").read_text()
    )
    with pytest.raises(lc.InvalidArgumentError, match="cache series for 2 label sets"):
        metrics.read(path)
    eu = metrics.read(path, labels={"cluster": "eu-1"})
    us = metrics.read(path, labels={"cluster": "use"})
    assert (eu.version, eu.topics, eu.rate_in, eu.rates_level, eu.direct_memory_max_bytes) == (
        "3.0.7",
        3,
        500.0,
        "topic",
        4 << 30,
    )
    assert (us.version, us.topics, us.rate_in, us.rates_level, us.direct_memory_max_bytes) == (
        "4.0.4",
        5,
        1000.0,
        "namespace",
        2 << 30,
    )
    assert eu.notes == us.notes == ()


def test_several_versions_for_one_broker_left_unknown():
    text = (DATA / "pulsar-4.0.4-namespace.metrics.txt").read_text()
    text += 'pulsar_version_info{cluster="use",version="4.0.5",commit="x"} 1.0\n'
    m = metrics.read_prometheus(text)
    assert m.version is None
    assert m.notes == ("pulsar_version_info{}: 2 versions (4.0.4, 4.0.5); version left unknown",)
