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
    path.write_text("# TYPE jvm_threads_current gauge\njvm_threads_current{cluster=\"a\"} 10\n"
                    "# TYPE pulsar_ml_count gauge\npulsar_ml_count{cluster=\"a\"} 3\n")
    with pytest.raises(lc.InvalidArgumentError,
                       match=rf"^{path}: no managed-ledger cache series; expected pulsar_ml_cache_hits_rate, "):
        metrics.read(path)
    with pytest.raises(lc.InvalidArgumentError, match=r"^<list>: no managed-ledger cache series; expected brk_ml_cache_"):
        metrics.read_monitoring_metrics([{"metrics": {"brk_in_tps": 1.0}, "dimensions": {}}])


def test_required_series_missing(tmp_path):
    text = "\n".join(line for line in (DATA / "one-topic.metrics.txt").read_text().splitlines()
                     if "used_size" not in line) + "\n"
    with pytest.raises(lc.InvalidArgumentError, match=r'cache series \{cluster="standalone"\} lack pulsar_ml_cache_used_size'):
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
