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
    assert (t.name, t.namespace, t.bundle) == (
        "persistent://public/default/orders",
        "public/default",
        "0x40000000_0x80000000",
    )
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
    assert (slow.name, slow.available_permits, slow.unacked_messages, slow.msg_rate_redeliver) == (
        "proc-3-slow",
        0,
        19800,
        35.5,
    )
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
    stats = bs.read(DATA / "partitioned.stats.json")
    topics = stats.topics
    assert [t.name for t in topics] == [f"persistent://public/default/clicks-partition-{i}" for i in range(3)]
    assert [t.subscriptions[0].msg_backlog for t in topics] == [2, 3, 4]
    assert sum(t.msg_rate_in for t in topics) == pytest.approx(901.25)
    assert stats.notes == ()  # per-partition stats are each partition's own: nothing to say
    raw = json.loads((DATA / "partitioned.stats.json").read_text())
    raw["partitions"] = {}  # without --per-partition: the aggregate split over metadata.partitions
    split = bs.read(raw, name="persistent://public/default/clicks")
    assert [t.name for t in split.topics] == [t.name for t in topics]
    assert all(t.msg_rate_in == pytest.approx(901.25 / 3) and t.average_msg_size == 256.0 for t in split.topics)
    assert [t.subscriptions[0].msg_backlog for t in split.topics] == [3, 3, 3]
    assert [t.backlog_size for t in split.topics] == [3072] * 3 and sum(
        t.storage_size for t in split.topics
    ) == 805306368
    assert split.notes == (
        "partitioned-stats without --per-partition: the aggregate split evenly over its partitions "
        "(run it with --per-partition for each partition's own numbers) in partitioned topic "
        "persistent://public/default/clicks: 3 partitions",
    )


def test_partitioned_aggregate_split_as_pulsar_adds():
    """partitioned-aggregate.stats.json is 4 unequal partitions aggregated as TopicStatsImpl.add does:
    the split keeps every sum, one publisher and the consumer lists a partition has, and the message
    size the rates give (the printed averageMsgSize is an unweighted mean)."""
    stats = bs.read(DATA / "partitioned-aggregate.stats.json")
    topics = stats.topics
    assert [t.name for t in topics] == [f"partitioned-aggregate-partition-{i}" for i in range(4)]
    assert sum(t.msg_rate_in for t in topics) == pytest.approx(2000.0)
    assert sum(t.msg_throughput_in for t in topics) == pytest.approx(1_580_000.0)
    assert {t.average_msg_size for t in topics} == {790.0}  # 1,580,000 B/s / 2000 msg/s, not the printed 850
    assert {t.publishers for t in topics} == {1}
    assert sum(t.backlog_size for t in topics) == 520_000 and sum(t.storage_size for t in topics) == 4 << 28
    ingest = [t.subscriptions[0] for t in topics]
    assert [s.msg_backlog for s in ingest] == [15] * 4 and sum(s.unacked_messages for s in ingest) == 16
    assert [c.name for c in ingest[0].consumers] == ["ingest-a", "ingest-b"]
    assert sum(c.msg_rate_out for s in ingest for c in s.consumers) == pytest.approx(2000.0)
    audit = topics[0].subscriptions[1]
    assert (audit.name, audit.type) == ("audit", "Failover")
    # Seven concatenated entries (2 + 3 + 2 consumers) merged back into the three consumers there are.
    assert [c.name for c in audit.consumers] == ["audit-1", "audit-2", "audit-3"]
    assert sum(c.msg_rate_out for t in topics for c in t.subscriptions[1].consumers) == pytest.approx(2000.0)
    assert stats.notes == (
        "partitioned-stats without --per-partition: the aggregate split evenly over its partitions (run it with "
        "--per-partition for each partition's own numbers) in partitioned topic partitioned-aggregate: 4 partitions",
        "consumers listed under one name several times (partitions with unequal consumer lists are concatenated by "
        "Pulsar's aggregate), merged by name, in subscription partitioned-aggregate audit",
        "averageMsgSize of the aggregate not msgThroughputIn / msgRateIn (Pulsar prints an unweighted mean over "
        "partitions, a sum before 2.2): message size taken from msgThroughputIn / msgRateIn in partitioned topic "
        "partitioned-aggregate: 850 B printed, 790 B from the rates",
        "1 topic whose stats do not name it, named partitioned-aggregate after the file (pulsar-admin topics stats "
        "prints no name: a line with the topic's name before each document names it)",
    )


def test_partitioned_aggregate_average_of_before_2_2_and_bad_partition_counts():
    raw = json.loads((DATA / "partitioned-aggregate.stats.json").read_text())
    # Before 2.2 the aggregate summed averageMsgSize: 1,232,440 B where the rates say 9,622 B.
    raw.update(msgRateIn=100.0, msgThroughputIn=962_200.0, averageMsgSize=1_232_440.0)
    stats = bs.read(raw, name="persistent://t/ns/big")
    assert {t.average_msg_size for t in stats.topics} == {9622.0}
    assert any("1,232,440 B printed, 9,622 B from the rates" in n for n in stats.notes)
    raw["averageMsgSize"] = 9622.0
    assert not any("averageMsgSize" in n for n in bs.read(raw, name="persistent://t/ns/big").notes)
    for bad in (0, -2, "4", None):
        raw["metadata"]["partitions"] = bad
        stats = bs.read(raw, name="persistent://t/ns/big")
        assert [t.name for t in stats.topics] == ["persistent://t/ns/big"]
        assert stats.notes == (
            f"partitioned-stats without a partition count (metadata.partitions), read as one "
            f"topic, in partitioned topic persistent://t/ns/big: {bad!r}",
        )
    raw["metadata"]["partitions"] = bs.MAX_PARTITIONS + 1
    with pytest.raises(
        lc.InvalidArgumentError,
        match=r"^<mapping>: persistent://t/ns/big: metadata.partitions: "
        r"100,001 partitions, more than the 100,000",
    ):
        bs.read(raw, name="persistent://t/ns/big")
    raw["metadata"]["partitions"] = 90_000  # 90,000 x (1 topic + 2 subscriptions + 9 consumer entries): too many
    with pytest.raises(
        lc.InvalidArgumentError,
        match=r"^<mapping>: persistent://t/ns/big: metadata.partitions: "
        r"90,000 partitions of 2 subscriptions make 1,080,000 ",
    ):
        bs.read(raw, name="persistent://t/ns/big")
    bare = {"msgRateIn": 1e5, "msgThroughputIn": 1e7, "metadata": {"partitions": bs.MAX_PARTITIONS}, "partitions": {}}
    assert len(bs.read(bare, name="persistent://t/ns/big").topics) == bs.MAX_PARTITIONS


def test_per_partition_with_partitions_missing_real_2_4():
    # apache/pulsar#4639 (2.4), trimmed to one of its two partitions.
    stats = bs.read(DATA / "pulsar-4639-partitioned-per-partition-2.4.stats.json")
    (t,) = stats.topics
    assert (t.name, t.namespace, [s.name for s in t.subscriptions]) == (
        "persistent://sample/standalone/ns1/pt1-partition-1",
        "sample/standalone/ns1",
        ["sub1"],
    )
    assert stats.notes == (
        "partitioned-stats with stats for 1 of its 2 partitions (metadata.partitions), read as "
        "the partitions it has, in partitioned topic persistent://sample/standalone/ns1/pt1",
    )


def test_non_persistent_topics_are_skipped():
    raw = json.loads((DATA / "one-topic.stats.json").read_text())
    bundle = raw["public/default"]["0x40000000_0x80000000"]
    orders = bundle["persistent"]["persistent://public/default/orders"]
    bundle["non-persistent"] = {"non-persistent://public/default/np": orders}
    skipped = (
        "skipped 1 non-persistent topic (e.g. non-persistent://public/default/np): they bypass the managed "
        "ledger, so the entry cache never sees their messages",
    )
    stats = bs.read(raw)
    assert [t.name for t in stats.topics] == ["persistent://public/default/orders"] and stats.notes == skipped
    # Before 2.0 (apache/pulsar#1235) the dump listed them in the "persistent" section.
    del bundle["non-persistent"]
    bundle["persistent"]["non-persistent://public/default/np"] = orders
    stats = bs.read(raw)
    assert [t.name for t in stats.topics] == ["persistent://public/default/orders"] and stats.notes == skipped
    single = json.loads((DATA / "single-topic.stats.json").read_text())
    stats = bs.read({"non-persistent://a/b/c": single, "persistent://a/b/d": single})
    assert [t.name for t in stats.topics] == ["persistent://a/b/d"] and "non-persistent://a/b/c" in stats.notes[0]


def test_non_persistent_stats_told_apart_by_msg_drop_rate():
    # NonPersistentTopicStatsImpl: msgDropRate on the topic, its publishers and subscriptions.
    single = json.loads((DATA / "single-topic.stats.json").read_text())
    for where in ("topic", "publisher", "subscription"):
        np = json.loads(json.dumps(single))
        target = {"topic": np, "publisher": np["publishers"][0], "subscription": np["subscriptions"]["workers"]}[where]
        target["msgDropRate"] = 0.0
        with pytest.raises(lc.InvalidArgumentError) as e:
            bs.read(np, name="persistent://a/b/looks-persistent")
        assert str(e.value) == (
            "<mapping>: only non-persistent topics (1 topic, e.g. persistent://a/b/looks-persistent): they bypass the "
            "managed ledger, so there is nothing the entry cache sees; take the stats of the broker's persistent "
            "topics (pulsar-admin broker-stats topics)"
        )
    assert bs.read(single, name="persistent://a/b/c").topics  # without msgDropRate it is persistent


def test_non_persistent_only_real_1_19_named_by_its_command_line():
    # apache/pulsar#538: `pulsar-admin non-persistent stats` pasted with its command line.
    path = DATA / "pulsar-538-non-persistent-1.19.stats.txt"
    with pytest.raises(lc.InvalidArgumentError) as e:
        bs.read(path)
    assert str(e.value).startswith(
        f"{path}: only non-persistent topics (1 topic, e.g. "
        f"non-persistent://prop/cluster/ns/my-topic): they bypass the managed ledger"
    )


def test_broker_stats_non_persistent_section_real_2_0():
    # apache/pulsar#1235: the dump with its "non-persistent" section (trimmed).
    stats = bs.read(DATA / "pulsar-1235-broker-stats-non-persistent-section-2.0.stats.json")
    (t,) = stats.topics
    assert (t.name, t.namespace, t.bundle, t.publishers) == (
        "persistent://sample/standalone/ns2/tp3",
        "sample/standalone/ns2",
        "0x00000000_0xffffffff",
        0,
    )
    assert stats.notes == (
        "skipped 1 non-persistent topic (e.g. non-persistent://sample/standalone/ns2/t2): they "
        "bypass the managed ledger, so the entry cache never sees their messages",
    )


@pytest.mark.parametrize(
    ("fixture", "command"),
    [
        ("pulsar-23908-stats-internal-4.x.stats.json", "topics stats-internal"),
        ("pulsar-15609-partitioned-stats-internal-2.8.stats.json", "topics partitioned-stats-internal"),
    ],
)
def test_stats_internal_refused_naming_what_to_run(fixture, command):
    with pytest.raises(lc.InvalidArgumentError) as e:
        bs.read(DATA / fixture)
    message = str(e.value)
    assert message.startswith(f"{DATA / fixture}: this is pulsar-admin {command} output (")
    assert "\n" not in message and "no rates" in message
    assert "pulsar-admin topics partitioned-stats --per-partition TOPIC" in message
    assert "pulsar-admin broker-stats topics" in message
    raw = json.loads((DATA / fixture).read_text())
    with pytest.raises(
        lc.InvalidArgumentError, match=rf"^<mapping>: persistent://a/b/c: this is pulsar-admin {command}"
    ):
        bs.read({"persistent://a/b/c": raw})


def test_real_topics_stats_2_4_and_4_x():
    # apache/pulsar#5894 (2.4.2, trimmed to three of its publishers).
    stats = bs.read(DATA / "pulsar-5894-topics-stats-2.4.stats.json")
    (t,) = stats.topics
    assert (t.name, t.msg_rate_in, t.average_msg_size) == (
        "pulsar-5894-topics-stats-2.4",
        231.6668315416007,
        268.94143882819634,
    )
    assert (t.storage_size, t.backlog_size, t.publishers, t.subscriptions) == (5353680152, 2293765539, 3, ())
    # apache/pulsar#23701 (master of December 2024): the 4.x fields, ignored.
    (t,) = bs.read(DATA / "pulsar-23701-topics-stats-4.x.stats.json").topics
    assert (t.storage_size, t.msg_rate_in, [s.name for s in t.subscriptions]) == (347722, 0.0, ["my-sub"])


def test_real_negative_unacked_1_19_clamped_with_a_note():
    # apache/pulsar#759 (1.19.0-incubating): a consumer's unackedMessages of -49860.
    stats = bs.read(DATA / "pulsar-759-negative-unacked-1.19.stats.json")
    (t,) = stats.topics
    assert t.namespace == "fury/global/948c07dd9c6a4c5faa106651d0d2cafd-account-movements"
    (s,) = t.subscriptions
    assert (s.type, s.msg_backlog, s.unacked_messages) == ("Shared", 1219175, 152277)
    assert [(c.unacked_messages, c.available_permits) for c in s.consumers] == [(0, 91), (118754, 87)]
    assert stats.notes == (
        f"unackedMessages < 0 clamped to 0 in consumer {t.name} {s.name} consumer "
        f"i-09c2ad7fd2a49d057-10.73.103.15: -49860",
    )


def test_concatenated_documents_named_after_the_file(tmp_path):
    stats = bs.read(DATA / "loop.stats.json")
    assert [t.name for t in stats.topics] == ["loop-0", "loop-1", "loop-2"]
    assert [t.msg_rate_in for t in stats.topics] == [120.0, 40.0, 0.0]
    assert stats.topics[1].subscriptions[0].msg_backlog == 9000
    assert stats.notes == (
        "3 topics whose stats do not name them, named loop-0, loop-1, loop-2 after the file "
        "(pulsar-admin topics stats prints no name: a line with the topic's name before each "
        "document names it)",
    )
    assert [t.name for t in bs.read(DATA / "loop.stats.json", name="x").topics] == ["x-0", "x-1", "x-2"]
    # Documents that name their topics mix with them: a dump, then two unnamed.
    path = tmp_path / "mixed.json"
    path.write_text((DATA / "one-topic.stats.json").read_text() + (DATA / "loop.stats.json").read_text())
    names = [t.name for t in bs.read(path).topics]
    assert names == ["persistent://public/default/orders", "mixed-0", "mixed-1", "mixed-2"]


def test_concatenated_documents_named_by_lines_between_them():
    stats = bs.read(DATA / "loop-named.stats.txt")
    assert [t.name for t in stats.topics] == ["persistent://acme/web/clicks", "persistent://acme/web/payments"]
    clicks, payments = stats.topics
    assert clicks.msg_rate_in == 900.0 and clicks.namespace == "acme/web"  # the later of its two documents
    assert [c.available_permits for c in payments.subscriptions[0].consumers] == [100, -3]  # negative: no note
    assert stats.notes == (
        "skipped 2 lines of text that is not JSON between the JSON documents (e.g. line 157: 'Topic not found')",
        "1 topic given more than once (e.g. persistent://acme/web/clicks, 2 times): the last stats of each kept",
        "skipped 1 non-persistent topic (e.g. non-persistent://acme/web/presence): they bypass the managed ledger, "
        "so the entry cache never sees their messages",
    )


def test_concatenated_documents_errors_name_the_document(tmp_path):
    one = (DATA / "single-topic.stats.json").read_text()
    path = tmp_path / "f.json"
    path.write_text(one + "[1, 2]\n")
    lines = one.count("\n") + 1
    with pytest.raises(lc.InvalidArgumentError, match=rf"^{path}: document 2 \(line {lines}\): top level is a list"):
        bs.read(path)
    path.write_text(one + one[: len(one) // 2])
    with pytest.raises(lc.InvalidArgumentError, match=rf"^{path}: line \d+ column \d+: not JSON: "):
        bs.read(path)
    path.write_text(one + '{"workload": "omb"}')
    with pytest.raises(lc.InvalidArgumentError, match=rf"^{path}: document 2 \(line {lines}\): not Pulsar topic stats"):
        bs.read(path)
    path.write_text("Topic not found\n\nReason: Topic not found\n")
    with pytest.raises(lc.InvalidArgumentError) as e:
        bs.read(path)
    assert str(e.value).startswith(
        f"{path}: line 1 column 1: not JSON: expected a JSON object, got 'Topic not found'; "
        f"expected one of: the broker's topic stats dump"
    )
    path.write_text("\n")
    with pytest.raises(lc.InvalidArgumentError, match=rf"^{path}: not JSON: expected a JSON object, the file is empty"):
        bs.read(path)
    # A shell's `set -x` trace names the document after it.
    path.write_text("+ pulsar-admin topics stats persistent://t/n/traced\n" + one)
    stats = bs.read(path)
    assert [t.name for t in stats.topics] == ["persistent://t/n/traced"] and stats.notes == ()


def test_defaults_and_unknown_fields():
    (t,) = bs.read(
        {
            "ns/a": {
                "0x0_0x1": {
                    "persistent": {
                        "persistent://ns/a/t": {
                            "msgRateIn": 10,
                            "msgThroughputIn": 1000,
                            "newFieldOfPulsar9": {"x": 1},
                            "subscriptions": {"s": {"consumers": [{}], "type": "None"}},
                        }
                    }
                }
            }
        }
    ).topics
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
consumers = st.builds(
    bs.ConsumerStats,
    name=st.text(max_size=8),
    msg_rate_out=rates,
    msg_throughput_out=rates,
    available_permits=st.none() | st.integers(-1000, 2**31 - 1),
    unacked_messages=counts,
    msg_rate_redeliver=rates,
)
subscriptions = st.builds(
    bs.SubscriptionStats,
    name=st.text(min_size=1, max_size=8),
    type=st.sampled_from((None, *bs.SUBSCRIPTION_TYPES)),
    msg_rate_out=rates,
    msg_throughput_out=rates,
    msg_backlog=counts,
    unacked_messages=counts,
    msg_rate_redeliver=rates,
    consumers=st.lists(consumers, max_size=3).map(tuple),
)


@st.composite
def broker_stats(draw):
    topics = []
    for _n, ns in enumerate(draw(st.lists(st.sampled_from(["a/b", "c/d", "e/f"]), unique=True, max_size=3))):
        for bundle in draw(
            st.lists(st.sampled_from(["0x00000000_0x80000000", "0x80000000_0xffffffff"]), unique=True, min_size=1)
        ):
            for i in range(draw(st.integers(0, 3))):
                subs = draw(st.lists(subscriptions, max_size=3, unique_by=lambda s: s.name))
                topics.append(
                    bs.TopicStats(
                        name=f"persistent://{ns}/t{bundle[2]}{i}",
                        namespace=ns,
                        bundle=bundle,
                        msg_rate_in=draw(rates),
                        msg_throughput_in=draw(rates),
                        average_msg_size=draw(rates),
                        msg_rate_out=draw(rates),
                        msg_throughput_out=draw(rates),
                        storage_size=draw(counts),
                        backlog_size=draw(counts),
                        publishers=draw(st.integers(0, 100)),
                        subscriptions=tuple(subs),
                    )
                )
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


@pytest.mark.parametrize(
    ("value", "note"),
    [
        (
            "abc",
            "msgRateOut not a number, read as 0, in subscription persistent://public/default/orders billing: 'abc'",
        ),
        (-1.0, "msgRateOut < 0 clamped to 0 in subscription persistent://public/default/orders billing: -1"),
        ("NaN", "msgRateOut not finite (NaN), read as 0, in subscription persistent://public/default/orders billing"),
        (
            float("inf"),
            "msgRateOut not finite (inf), read as 0, in subscription persistent://public/default/orders billing",
        ),
        (True, "msgRateOut not a number, read as 0, in subscription persistent://public/default/orders billing: True"),
        (
            {},
            "msgRateOut not a number, read as 0, in subscription persistent://public/default/orders billing: an object",
        ),
    ],
)
def test_bad_counter_read_as_0_with_a_note(tmp_path, value, note):
    raw = json.loads((DATA / "one-topic.stats.json").read_text())
    topic = raw["public/default"]["0x40000000_0x80000000"]["persistent"]["persistent://public/default/orders"]
    topic["subscriptions"]["billing"]["msgRateOut"] = value
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(raw))
    stats = bs.read(path)
    billing = stats.topics[0].subscriptions[1]
    assert billing.msg_rate_out == 0.0 and billing.consumers[0].msg_rate_out == 1998.112
    assert stats.notes == (note,)


def _dump(topics):
    return {"t/n": {"0x00000000_0xffffffff": {"persistent": topics}}}


def test_repeated_repairs_merge_into_one_note_with_a_count():
    topics = {
        f"persistent://t/n/a{i}": {
            "msgRateIn": 1.0,
            "subscriptions": {
                "sub1": {
                    "type": "Shared",
                    "unackedMessages": -5 - i,
                    "msgBacklog": 3,
                    "consumers": [{"consumerName": "c", "unackedMessages": -1, "availablePermits": -20}],
                }
            },
        }
        for i in range(12)
    }
    stats = bs.read(_dump(topics))
    assert all(
        s.unacked_messages == 0 and s.consumers[0].unacked_messages == 0 and s.consumers[0].available_permits == -20
        for t in stats.topics
        for s in t.subscriptions
    )
    assert stats.notes == (
        "unackedMessages < 0 clamped to 0 in 12 subscriptions (e.g. persistent://t/n/a0 sub1: -5)",
        "unackedMessages < 0 clamped to 0 in 12 consumers (e.g. persistent://t/n/a0 sub1 consumer c: -1)",
    )


def test_every_repair_and_its_note(tmp_path):
    text = json.dumps(
        _dump(
            {
                "persistent://t/n/a": {
                    "msgRateIn": "Infinity",
                    "msgThroughputIn": 5000,
                    "storageSize": 12.5,
                    "backlogSize": 123,
                    "publishers": {"p": 1},
                    "producerCount": -2,
                    "subscriptions": {
                        "s1": {"type": "Broadcast", "msgBacklog": -1, "consumers": "x"},
                        "s2": 5,
                        "s3": {
                            "type": "Exclusive",
                            "consumers": [
                                7,
                                {
                                    "consumerName": 9,
                                    "msgRateRedeliver": float("nan"),
                                    "availablePermits": "12",
                                    "unackedMessages": 2**64,
                                },
                            ],
                        },
                    },
                },
                "persistent://t/n/b": [1, 2],
            }
        )
    ).replace('"backlogSize": 123', '"backlogSize": ' + "9" * 50)  # too long for Python's int(): a bad counter
    path = tmp_path / "bad.json"
    path.write_text(text)
    stats = bs.read(path)
    (t,) = stats.topics
    assert (t.msg_rate_in, t.msg_throughput_in, t.average_msg_size) == (0.0, 5000.0, 0.0)
    assert (t.storage_size, t.backlog_size, t.publishers) == (12, 0, 0)
    s1, s3 = t.subscriptions
    assert (s1.name, s1.type, s1.msg_backlog, s1.consumers) == ("s1", None, 0, ())
    (c,) = s3.consumers
    assert (c.name, c.msg_rate_redeliver, c.available_permits, c.unacked_messages) == ("", 0.0, None, 0)
    a = "persistent://t/n/a"
    assert stats.notes == (
        f"publishers not a JSON list, read as none, in topic {a}: an object",
        f"producerCount < 0 clamped to 0 in topic {a}: -2",
        f"msgRateIn not finite (Infinity), read as 0, in topic {a}",
        f"storageSize not a whole number, rounded in topic {a}: 12.5",
        f"backlogSize not finite (inf), read as 0, in topic {a}",
        f"type not one of Exclusive, Failover, Shared, Key_Shared, read as None (simulated as Exclusive), in "
        f"subscription {a} s1: 'Broadcast'",
        f"consumers not a JSON list, read as none, in subscription {a} s1: 'x'",
        f"msgBacklog < 0 clamped to 0 in subscription {a} s1: -1",
        f"subscription not a JSON object, skipped in topic {a} s2: 5",
        f"consumer entry not a JSON object, skipped in subscription {a} s3: 7",
        f'consumerName not a string, read as "" in subscription {a} s3: 9',
        f"availablePermits not a number, read as unknown, in consumer {a} s3 consumer #1: '12'",
        f"unackedMessages beyond a Java long, read as 0, in consumer {a} s3 consumer #1: {2**64}",
        f"msgRateRedeliver not finite (nan), read as 0, in consumer {a} s3 consumer #1",
        "topic stats not a JSON object, skipped, in topic persistent://t/n/b: a list",
    )


def test_structural_garbage_still_errors():
    with pytest.raises(lc.InvalidArgumentError, match=r"^<mapping>: t/n\.0x0_0x1\.persistent: expected a JSON object"):
        bs.read({"t/n": {"0x0_0x1": {"persistent": [1]}}})
    with pytest.raises(lc.InvalidArgumentError, match=r"^<mapping>: not Pulsar topic stats; expected one of"):
        bs.read({"t/n": {"0x0_0x1": {"other": {}}}})


def test_notes_are_not_data():
    t = bs.TopicStats(name="persistent://a/b/c")
    assert bs.BrokerStats(topics=(t,), notes=("x",)) == bs.BrokerStats(topics=(t,))
    assert hash(bs.BrokerStats(topics=(t,), notes=("x",))) == hash(bs.BrokerStats(topics=(t,)))
    stats = bs.read(DATA / "pulsar-1235-broker-stats-non-persistent-section-2.0.stats.json")
    assert stats.notes and bs.read(bs.to_dump(stats)) == stats and bs.read(bs.to_dump(stats)).notes == ()


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


def test_typographic_quotes_are_named_as_the_cause(tmp_path):
    # A stats dump pasted through an issue editor or a chat (apache/pulsar#21224's has “ ”): the
    # decoder's "Expecting property name" alone does not say what to fix.
    path = tmp_path / "pasted.json"
    path.write_text('{\n  \u201cmsgRateIn\u201d : 0.0,\n  "subscriptions" : { }\n}\n')
    with pytest.raises(lc.InvalidArgumentError) as e:
        bs.read(path)
    assert str(e.value).startswith(f"{path}: line 2 column 3: not JSON: ")
    assert "a typographic quote" in str(e.value) and "'\u201c'" in str(e.value)
    # Any other JSON error says nothing about quotes.
    path.write_text('{\n  "msgRateIn" : ,\n}\n')
    with pytest.raises(lc.InvalidArgumentError) as e:
        bs.read(path)
    assert "a typographic quote" not in str(e.value)


def test_a_topic_reading_more_than_its_subscriptions_and_replicators_is_noted():
    # apache/pulsar#21224's stats as pasted: the topic dispatches 1,009 msg/s, and the one
    # subscription the paste kept reads nothing (the reading one was cut off).
    topic = {
        "msgRateIn": 0.0,
        "msgRateOut": 1009.3990130769382,
        "subscriptions": {"__compaction": {"msgRateOut": 0.0, "consumers": []}},
    }
    stats = bs.read(_dump({"persistent://t/n/a": topic}))
    (note,) = [n for n in stats.notes if "msgRateOut of the topic" in n]
    assert note.endswith("in topic persistent://t/n/a: 1,009.4 msg/s of 1,009.4"), note
    # Accounted for by a replicator (PersistentTopic.getStats adds its msgRateOut), or by the
    # consumers of a subscription whose own rate was unreadable: no note.
    replicated = {**topic, "replication": {"us-east": {"msgRateOut": 1009.0, "connected": True}}}
    assert not any("msgRateOut of the topic" in n for n in bs.read(_dump({"persistent://t/n/a": replicated})).notes)
    consumed = {
        **topic,
        "subscriptions": {"s": {"msgRateOut": "abc", "consumers": [{"msgRateOut": 1009.3}]}},
    }
    assert not any("msgRateOut of the topic" in n for n in bs.read(_dump({"persistent://t/n/a": consumed})).notes)
