"""ledgercache.broker_stats: the fixtures in tests/data/broker (shapes cited in their README.md)
read with their numbers, the round trip through the dump shape, and every error naming its file and
field path."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledgercache as lc
from ledgercache import broker_stats as bs

DATA = Path(__file__).resolve().parents[1] / "data" / "broker"


def test_one_topic_dump():
    stats = bs.read(DATA / "one-topic.stats.json")
    (t,) = stats.topics
    assert (t.name, t.namespace, t.bundle) == ("persistent://public/default/orders", "public/default",
                                              "0x40000000_0x80000000")
    assert t.msg_rate_in == 2001.457 and t.average_msg_size == 1024.0
    assert t.msg_throughput_in == pytest.approx(2001.457 * 1024)
    assert t.msg_rate_out == pytest.approx(2001.457 + 1998.112)
    assert t.publishers == 1
    assert (t.storage_size, t.backlog_size) == (3221225472, 122880)
    audit, billing = t.subscriptions
    assert (audit.name, audit.type, audit.msg_backlog, audit.unacked_messages) == ("audit-exclusive", "Exclusive", 3, 0)
    assert (billing.name, billing.type, billing.msg_backlog) == ("billing", "Failover", 12)
    (c,) = billing.consumers
    assert (c.name, c.msg_rate_out, c.available_permits, c.unacked_messages) == ("billing-0", 1998.112, 517, 0)


def test_key_shared_backlog_dump():
    (t,) = bs.read(DATA / "key-shared-backlog.stats.json").topics
    assert t.publishers == 2 and t.msg_rate_in == 5000.0 and t.average_msg_size == 512.0
    ks, shared = t.subscriptions
    assert (ks.type, shared.type) == ("Key_Shared", "Shared")
    assert ks.msg_backlog == 600_000 and t.backlog_size == 1_536_000_000
    assert len(ks.consumers) == 4 and ks.msg_rate_redeliver == 35.5 and ks.unacked_messages == 24315
    slow = min(ks.consumers, key=lambda c: c.msg_rate_out)
    assert (slow.name, slow.available_permits, slow.unacked_messages, slow.msg_rate_redeliver) == \
        ("proc-3-slow", 0, 19800, 35.5)
    assert all(c.available_permits > 0 for c in ks.consumers if c is not slow)
    assert shared.msg_backlog == 41 and len(shared.consumers) == 2 and shared.unacked_messages == 605


def test_many_small_topics_dump():
    topics = bs.read(DATA / "many-small-topics.stats.json").topics
    assert len(topics) == 60
    assert {t.namespace for t in topics} == {"retail/web-events", "retail/inventory", "ops/audit"}
    assert len({(t.namespace, t.bundle) for t in topics}) == 6
    assert all(5 <= t.msg_rate_in <= 50 and 100 <= t.average_msg_size <= 300 for t in topics)
    assert all(len(t.subscriptions) == 1 and t.subscriptions[0].type == "Exclusive" for t in topics)
    behind = [t for t in topics if t.subscriptions[0].msg_backlog > 1000]
    assert [int(t.name.rsplit("-", 1)[1]) for t in behind] == list(range(3, 60, 7))


def test_many_small_topics_is_what_the_script_writes(tmp_path, monkeypatch):
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_many", DATA / "make_many_small_topics.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "HERE", tmp_path)
    module.main()
    for name in ("many-small-topics.stats.json", "many-small-topics.metrics.txt"):
        assert (tmp_path / name).read_text() == (DATA / name).read_text(), name


def test_single_topic_stats_named_from_the_file_or_name():
    (t,) = bs.read(DATA / "single-topic.stats.json").topics
    assert (t.name, t.namespace, t.bundle, t.publishers) == ("single-topic", "", None, 1)
    (sub,) = t.subscriptions
    assert (sub.type, sub.msg_backlog, sub.unacked_messages, len(sub.consumers)) == ("Shared", 7, 218, 2)
    raw = json.loads((DATA / "single-topic.stats.json").read_text())
    (named,) = bs.read(raw, name="persistent://t/ns/x").topics
    assert (named.name, named.namespace) == ("persistent://t/ns/x", "t/ns")
    assert bs.read({"persistent://t/ns/x": raw}).topics == (named,)
    with pytest.raises(lc.InvalidArgumentError, match="pass name="):
        bs.read(raw)


def test_partitioned_stats_per_partition_and_aggregate():
    topics = bs.read(DATA / "partitioned.stats.json").topics
    assert [t.name for t in topics] == [f"persistent://public/default/clicks-partition-{i}" for i in range(3)]
    assert [t.subscriptions[0].msg_backlog for t in topics] == [2, 3, 4]
    assert sum(t.msg_rate_in for t in topics) == pytest.approx(901.25)
    raw = json.loads((DATA / "partitioned.stats.json").read_text())
    raw["partitions"] = {}  # without --per-partition: the aggregate is one topic
    (agg,) = bs.read(raw, name="persistent://public/default/clicks").topics
    assert agg.msg_rate_in == 901.25 and len(agg.subscriptions[0].consumers) == 3


def test_non_persistent_topics_are_skipped():
    raw = json.loads((DATA / "one-topic.stats.json").read_text())
    bundle = raw["public/default"]["0x40000000_0x80000000"]
    bundle["non-persistent"] = {"non-persistent://public/default/np": bundle["persistent"]["persistent://public/default/orders"]}
    assert [t.name for t in bs.read(raw).topics] == ["persistent://public/default/orders"]
    single = json.loads((DATA / "single-topic.stats.json").read_text())
    assert bs.read({"non-persistent://a/b/c": single}).topics == ()


def test_defaults_and_unknown_fields():
    (t,) = bs.read({"ns/a": {"0x0_0x1": {"persistent": {"persistent://ns/a/t": {
        "msgRateIn": 10, "msgThroughputIn": 1000, "newFieldOfPulsar9": {"x": 1},
        "subscriptions": {"s": {"consumers": [{}], "type": "None"}}}}}}}).topics
    assert (t.average_msg_size, t.publishers, t.storage_size, t.msg_rate_out) == (100.0, 0, 0, 0.0)
    (s,) = t.subscriptions
    assert s.type is None and s.consumers == (bs.ConsumerStats(),)
    assert s.consumers[0].available_permits is None
    assert bs.read({}).topics == ()  # a broker that owns no topic


def test_round_trip_fixtures(tmp_path):
    for name in ("one-topic", "key-shared-backlog", "many-small-topics"):
        stats = bs.read(DATA / f"{name}.stats.json")
        assert bs.read(bs.to_dump(stats)) == stats
        bs.write(stats, tmp_path / "out.json")
        assert bs.read(tmp_path / "out.json") == stats


rates = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=2**62)
consumers = st.builds(bs.ConsumerStats, name=st.text(max_size=8), msg_rate_out=rates, msg_throughput_out=rates,
                      available_permits=st.none() | st.integers(-1000, 2**31 - 1), unacked_messages=counts,
                      msg_rate_redeliver=rates)
subscriptions = st.builds(bs.SubscriptionStats, name=st.text(min_size=1, max_size=8),
                          type=st.sampled_from((None,) + bs.SUBSCRIPTION_TYPES), msg_rate_out=rates,
                          msg_throughput_out=rates, msg_backlog=counts, unacked_messages=counts,
                          msg_rate_redeliver=rates, consumers=st.lists(consumers, max_size=3).map(tuple))


@st.composite
def broker_stats(draw):
    topics = []
    for n, ns in enumerate(draw(st.lists(st.sampled_from(["a/b", "c/d", "e/f"]), unique=True, max_size=3))):
        for bundle in draw(st.lists(st.sampled_from(["0x00000000_0x80000000", "0x80000000_0xffffffff"]),
                                    unique=True, min_size=1)):
            for i in range(draw(st.integers(0, 3))):
                subs = draw(st.lists(subscriptions, max_size=3, unique_by=lambda s: s.name))
                topics.append(bs.TopicStats(
                    name=f"persistent://{ns}/t{bundle[2]}{i}", namespace=ns, bundle=bundle,
                    msg_rate_in=draw(rates), msg_throughput_in=draw(rates), average_msg_size=draw(rates),
                    msg_rate_out=draw(rates), msg_throughput_out=draw(rates), storage_size=draw(counts),
                    backlog_size=draw(counts), publishers=draw(st.integers(0, 100)), subscriptions=tuple(subs)))
    return bs.BrokerStats(topics=tuple(topics))


@settings(max_examples=60, deadline=None)
@given(broker_stats())
def test_round_trip_property(stats):
    dump = bs.to_dump(stats)
    assert bs.read(json.loads(json.dumps(dump))) == stats


def test_not_stats_is_one_clear_error():
    with pytest.raises(lc.InvalidArgumentError) as e:
        bs.read(DATA / "not-stats.json")
    message = str(e.value)
    assert message.startswith(str(DATA / "not-stats.json") + ": not Pulsar topic stats")
    assert "broker-stats topics" in message and "topics stats" in message and "partitioned-stats" in message
    with pytest.raises(lc.InvalidArgumentError, match="top level is a list"):
        bs.read(DATA / "monitoring-metrics.json")


@pytest.mark.parametrize("value, expected", [
    ("abc", "got 'abc'"), (-1.0, "got -1.0"), (float("nan"), "got nan"), (True, "got True"), ({}, "got an object"),
])
def test_bad_field_names_its_path(tmp_path, value, expected):
    raw = json.loads((DATA / "one-topic.stats.json").read_text())
    topic = raw["public/default"]["0x40000000_0x80000000"]["persistent"]["persistent://public/default/orders"]
    topic["subscriptions"]["billing"]["msgRateOut"] = value
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(lc.InvalidArgumentError) as e:
        bs.read(path)
    assert str(e.value) == (f"{path}: persistent://public/default/orders: subscriptions.billing.msgRateOut: "
                            f"expected a number >= 0, {expected}")


def test_bad_consumer_and_type_fields():
    raw = json.loads((DATA / "key-shared-backlog.stats.json").read_text())
    topic = raw["acme/payments"]["0x00000000_0x40000000"]["persistent"]["persistent://acme/payments/events"]
    topic["subscriptions"]["processors"]["consumers"][3]["unackedMessages"] = 1.5
    with pytest.raises(lc.InvalidArgumentError,
                       match=r"^<mapping>: persistent://acme/payments/events: "
                             r"subscriptions\.processors\.consumers\[3\]\.unackedMessages: expected an integer >= 0"):
        bs.read(raw)
    topic["subscriptions"]["processors"]["consumers"][3]["unackedMessages"] = 7
    topic["subscriptions"]["audit"]["type"] = "Broadcast"
    with pytest.raises(lc.InvalidArgumentError, match=r"subscriptions\.audit\.type: expected one of Exclusive"):
        bs.read(raw)
    topic["subscriptions"]["audit"]["type"] = "Shared"
    topic["storageSize"] = "12"
    with pytest.raises(lc.InvalidArgumentError, match=r"events: storageSize: expected an integer >= 0, got '12'"):
        bs.read(raw)


def test_truncated_json_names_the_line(tmp_path):
    text = (DATA / "one-topic.stats.json").read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(lc.InvalidArgumentError, match=rf"^{path}: line \d+ column \d+: not JSON: "):
        bs.read(path)
    lines = text[: len(text) // 2].count("\n")
    with pytest.raises(lc.InvalidArgumentError) as e:
        bs.read(path)
    assert int(str(e.value).split("line ")[1].split()[0]) >= lines


def test_not_utf8_size_cap_and_missing_file(tmp_path):
    path = tmp_path / "bin.json"
    path.write_bytes(b'{\n"a":\n"\xff"}')
    with pytest.raises(lc.InvalidArgumentError, match=r"bin.json: line 3: not UTF-8 text \(byte 8\)"):
        bs.read(path)
    with pytest.raises(lc.InvalidArgumentError, match=r"more than the 100 a stats file may have"):
        bs.read(DATA / "one-topic.stats.json", max_bytes=100)
    assert bs.MAX_FILE_BYTES == 256 * 1024 * 1024
    with pytest.raises(lc.InvalidArgumentError, match="does not exist"):
        bs.read(tmp_path / "nope.json")
    with pytest.raises(lc.InvalidArgumentError, match="expected a path or a mapping"):
        bs.read(42)
