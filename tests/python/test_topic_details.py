"""``topicDetails``: a broker's topics, each different, simulated by the one generator."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import ledgercache as lc

FIRST = {"name": "persistent://public/default/topic-0", "producerRate": 1000.0, "messageSize": 1024}


def _counts(t: pa.Table) -> dict[tuple[str, str | None, str], int]:
    g = t.group_by(["topic", "cursor", "op"]).aggregate([("ts_us", "count")])
    return {(r["topic"], r["cursor"], r["op"]): r["ts_us_count"] for r in g.to_pylist()}


def test_homogeneous_spec_and_its_topic_details_give_the_same_trace():
    homogeneous = dict(
        topics=3,
        subscriptionsPerTopic=2,
        consumerPerSubscription=2,
        subscriptionType="Shared",
        producerRate=3000,
        brokers=2,
        testDurationMinutes=0.25,
        redeliveryRate=0.0,
    )
    # The generator's own names and rates: 1000 msg/s a partition; each consumer at
    # perPartitionRate * consumerHeadroom (1.2) * share (1/2) = 600 msg/s. The simulation draws its
    # random numbers in the same order for both, so the traces are equal row for row.
    details = {
        "topicDetails": [
            {
                "name": f"persistent://public/default/topic-{t}",
                "producerRate": 1000.0,
                "messageSize": 1024,
                "subscriptions": [
                    {"name": f"sub-{s}", "type": "Shared", "consumerRates": [600.0, 600.0]} for s in range(2)
                ],
            }
            for t in range(3)
        ],
        "brokers": 2,
        "testDurationMinutes": 0.25,
    }
    a = lc.workload.generate(homogeneous, seed=4)
    b = lc.workload.generate(details, seed=4)
    assert a.num_rows > 10_000
    assert a.equals(b)
    # The estimate is the same model, topic by topic.
    ea, eb = lc.workload.estimate(homogeneous), lc.workload.estimate(details)
    for key in ("messages", "entries", "producer_rate", "simulated_seconds"):
        assert eb[key] == pytest.approx(ea[key], rel=1e-9), key
    assert eb["events"] == pytest.approx(ea["events"], rel=0.05)


def test_topics_publish_their_own_rates_and_message_sizes():
    spec = {
        "topicDetails": [
            {
                "name": "persistent://t/ns/orders-partition-0",
                "producerRate": 1200.0,
                "message_size": 900,
                "subscriptions": [{"name": "billing", "type": "Shared", "consumerRates": [800.0, 800.0]}],
            },
            {"name": "persistent://t/ns/clicks", "producer_rate": 150.0, "messageSize": 20000, "subscriptions": []},
        ],
        "testDurationMinutes": 1,
        "messageMetadata": False,  # payloads alone (the metadata bytes: test_readers.py)
    }
    t = lc.workload.generate(spec, seed=2)
    adds = t.filter(pc.equal(t["op"], "add"))
    for name, rate, size in (
        ("persistent://t/ns/orders-partition-0", 1200.0, 900),
        ("persistent://t/ns/clicks", 150.0, 20000),
    ):
        mine = adds.filter(pc.equal(adds["topic"], name))
        messages = pc.sum(mine["messages"]).as_py()
        nbytes = pc.sum(mine["size"]).as_py()
        assert messages / 60 == pytest.approx(rate, rel=0.02), name
        assert nbytes / 60 == pytest.approx(rate * size, rel=0.02), name
    # Each topic is its own ledgers.
    ledgers = {
        name: set(adds.filter(pc.equal(adds["topic"], name))["ledger_id"].to_pylist())
        for name in ("persistent://t/ns/orders-partition-0", "persistent://t/ns/clicks")
    }
    assert not ledgers["persistent://t/ns/orders-partition-0"] & ledgers["persistent://t/ns/clicks"]
    e = lc.workload.estimate(spec)
    assert e["producer_rate"] == pytest.approx(1350.0)
    assert e["messages"] == pytest.approx(1350.0 * 60)
    assert e["simulated_seconds"] == 60
    assert e["capped_by"] is None
    assert 0.5 < e["events"] / t.num_rows < 2.0
    lc.workload.check(spec)
    # Streamed, the same rows.
    streamed = pa.Table.from_batches(list(lc.workload.stream(spec, seed=2, batch_rows=1000)))
    assert streamed.equals(t)


def test_late_idle_and_slow_subscriptions():
    spec = {
        "topicDetails": [
            dict(
                FIRST,
                subscriptions=[
                    {"name": "late", "type": "Exclusive", "consumerRates": [5000.0], "startSeconds": 20},
                    {"name": "idle", "type": "Key_Shared", "consumerRates": []},
                    {
                        "name": "slow",
                        "type": "Failover",
                        "consumerRates": [50.0],
                        "startSeconds": 0,
                        "redeliveryRate": 0,
                    },
                    {"name": "tail", "type": "Exclusive", "consumerRates": [2000.0]},
                ],
            )
        ],
        "testDurationMinutes": 1,
    }
    t = lc.workload.generate(spec, seed=3)

    def rows(cursor, op):
        return t.filter(pc.and_(pc.equal(t["cursor"], cursor), pc.equal(t["op"], op)))

    opened = rows("late", "open")
    assert opened.num_rows == 1
    assert opened["ts_us"][0].as_py() == 20_000_000
    assert opened["entry_id"][0].as_py() == 0
    first_ledger = pc.min(t.filter(pc.equal(t["op"], "add"))["ledger_id"]).as_py()
    assert opened["ledger_id"][0].as_py() == first_ledger
    reads = rows("late", "read")
    assert reads.num_rows > 0
    assert pc.min(reads["ts_us"]).as_py() == 20_000_000
    # No consumers: an open and nothing else.
    assert rows("idle", "open").num_rows == 1
    assert t.filter(pc.equal(t["cursor"], "idle")).num_rows == 1
    # A consumer at 50 msg/s behind 1000 msg/s: its acknowledged position falls further behind.
    adds = t.filter(pc.equal(t["op"], "add"))
    acks = rows("slow", "ack")
    lags = []
    for second in (10, 30, 55):
        before = lambda tab: tab.filter(pc.less_equal(tab["ts_us"], second * 1_000_000))  # noqa: B023 -- called within this iteration
        published = before(adds).num_rows
        acked = pc.max(before(acks)["entry_id"]).as_py() + 1
        lags.append(published - acked)
    assert lags[0] < lags[1] < lags[2], lags
    tail_read = pc.sum(rows("tail", "read")["count"]).as_py()
    slow_read = pc.sum(rows("slow", "read")["count"]).as_py()
    assert slow_read * 5 < tail_read


def _error(spec):
    with pytest.raises(lc.InvalidArgumentError) as e:
        lc.workload.estimate(spec)
    return str(e.value)


@pytest.mark.parametrize(
    "setting",
    [
        "topics",
        "partitionsPerTopic",
        "subscriptionsPerTopic",
        "producerRate",
        "messageSize",
        "subscriptionType",
        "consumerHeadroom",
        "catchUpReaders",
        "consumerBacklogSizeGB",
        "slowConsumerFraction",
        "redeliveryRate",
    ],
)
def test_shape_settings_conflict(setting):
    value = "Shared" if setting == "subscriptionType" else 1
    message = _error({"topicDetails": [FIRST], setting: value})
    assert "topicDetails" in message and setting in message


def test_errors_name_the_field():
    sub = {"name": "s", "type": "Shared", "consumerRates": [10.0]}
    topic = dict(FIRST, subscriptions=[sub])
    cases = [
        ({"topicDetails": [dict(topic, subscriptions=[dict(sub, speed=2)])]}, "topicDetails[0].subscriptions[0].speed"),
        ({"topicDetails": [dict(FIRST, colour="red")]}, "topicDetails[0].colour"),
        ({"topicDetails": [dict(FIRST, producerRate="fast")]}, "topicDetails[0].producerRate"),
        ({"topicDetails": [dict(FIRST, producerRate=-5)]}, "topicDetails[0].producerRate: must be >= 0"),
        ({"topicDetails": [dict(FIRST, messageSize=0)]}, "topicDetails[0].messageSize"),
        ({"topicDetails": [dict(FIRST, messageSize=2**31)]}, "topicDetails[0].messageSize"),
        ({"topicDetails": [dict(FIRST, producerRate=float("inf"))]}, "topicDetails[0].producerRate"),
        (
            {"topicDetails": [dict(topic, subscriptions=[dict(sub, consumerRates=[1.0, -1.0])])]},
            "topicDetails[0].subscriptions[0].consumerRates[1]",
        ),
        (
            {"topicDetails": [dict(topic, subscriptions=[dict(sub, consumerRates=5)])]},
            "topicDetails[0].subscriptions[0].consumerRates",
        ),
        (
            {"topicDetails": [dict(topic, subscriptions=[dict(sub, type="Round_Robin")])]},
            "topicDetails[0].subscriptions[0].type",
        ),
        (
            {"topicDetails": [dict(topic, subscriptions=[dict(sub, startSeconds=-1)])]},
            "topicDetails[0].subscriptions[0].startSeconds",
        ),
        (
            {"topicDetails": [dict(topic, subscriptions=[dict(sub, redeliveryRate=2)])]},
            "topicDetails[0].subscriptions[0].redeliveryRate",
        ),
        ({"topicDetails": [dict(topic, subscriptions=[sub, sub])]}, "topicDetails[0].subscriptions[1].name"),
        ({"topicDetails": [FIRST, FIRST]}, "topicDetails[1].name"),
        ({"topicDetails": [dict(FIRST, name="")]}, "topicDetails[0].name"),
        ({"topicDetails": [{"name": "a", "producerRate": 1}]}, "topicDetails[0].messageSize: missing"),
        ({"topicDetails": []}, "at least one topic"),
        ({"topicDetails": "persistent://a"}, "topicDetails: expected a list"),
        ({"topicDetails": [["a"]]}, "topicDetails[0]: expected a mapping"),
        ({"topicDetails": [dict(FIRST, subscriptions=[None])]}, "topicDetails[0].subscriptions[0]"),
        ({"topicDetails": [dict(FIRST, producerRate=True)]}, "topicDetails[0].producerRate"),
    ]
    for spec, needle in cases:
        message = _error(spec)
        assert needle in message, (needle, message)
    assert "twice" in _error({"topicDetails": [FIRST, FIRST]})
    assert "twice" in _error({"topicDetails": [dict(topic, subscriptions=[sub, sub])]})
    with pytest.raises(lc.UnknownSettingError):
        lc.workload.generate({"topicDetails": [dict(FIRST, colour="red")]})


def test_snake_case_and_files(tmp_path):
    spec = {
        "topic_details": [
            {
                "name": "a",
                "producer_rate": 100,
                "message_size": 10,
                "subscriptions": [
                    {
                        "name": "s",
                        "type": "exclusive",
                        "consumer_rates": [200],
                        "start_seconds": 1.5,
                        "redelivery_rate": 0.0,
                    }
                ],
            }
        ],
        "test_duration_minutes": 0.05,
    }
    t = lc.workload.generate(spec, seed=1)
    assert set(t["topic"].to_pylist()) == {"a"}
    assert set(filter(None, t["cursor"].to_pylist())) == {"s"}
    path = tmp_path / "broker.yaml"
    path.write_text(
        "topicDetails:\n  - name: a\n    producerRate: 100\n    messageSize: 10\n"
        "    subscriptions:\n      - {name: s, type: Exclusive, consumerRates: [200], startSeconds: 1.5}\n"
        "testDurationMinutes: 0.05\n"
    )
    # An OMB workload file: the default driver's subscription type does not apply to topicDetails.
    f = lc.workload.generate(path, seed=1)
    assert set(f["topic"].to_pylist()) == {"a"}
