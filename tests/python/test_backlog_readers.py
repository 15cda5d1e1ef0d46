"""Backlogs already in storage when a trace starts (``topicDetails``' ``backlogEntries``), read by
the subscriptions a broker's stats show reading them, and ledgers trimmed by retention.

Before issue 61 a subscription with a backlog on a topic nobody publishes to was only noted: its
cursor opened at the end and the trace had no read of it."""

from __future__ import annotations

import copy

import pyarrow.compute as pc
import pytest

import ledgercache as lc
from ledgercache import workload as w

TOPIC = "persistent://acme/ledger/settlements"


def _dump(msg_backlog: int, rate_out: float, *, consumers: int = 1, backlog_size: int = 0) -> dict:
    """A broker's ``pulsar-admin broker-stats topics`` dump (the shape 2.x to 4.x write) with one
    topic nobody publishes to and one Shared subscription behind by ``msg_backlog`` entries."""
    sub = {
        "consumers": [
            {"consumerName": f"c-{i}", "msgRateOut": rate_out / consumers, "msgThroughputOut": 0.0}
            for i in range(consumers)
        ],
        "msgRateOut": rate_out,
        "msgThroughputOut": rate_out * 2048,
        "msgBacklog": msg_backlog,
        "type": "Shared",
        "unackedMessages": 0,
        "msgRateRedeliver": 0.0,
    }
    topic = {
        "publishers": [],
        "replication": {},
        "subscriptions": {"reconcile": sub},
        "producerCount": 0,
        "averageMsgSize": 2048.0,
        "msgRateIn": 0.0,
        "msgThroughputIn": 0.0,
        "msgRateOut": rate_out,
        "msgThroughputOut": rate_out * 2048,
        "storageSize": msg_backlog * 2048,
        "backlogSize": backlog_size,
    }
    return {"acme/ledger": {"0x00000000_0xffffffff": {"persistent": {TOPIC: topic}}}}


def _ops(table) -> dict[str, int]:
    return {r["op"]: r["op_count"] for r in table.group_by("op").aggregate([("op", "count")]).to_pylist()}


def _read_entries(table) -> int:
    reads = table.filter(pc.equal(table.column("op"), "read"))
    return pc.sum(reads.column("count")).as_py() or 0


def test_a_catch_up_only_subscription_reads_its_stored_backlog_at_its_stats_rate():
    spec, notes = w.workload_and_notes(_dump(200_000, 500.0), test_duration_minutes=1.0)
    (topic,) = spec["topicDetails"]
    (sub,) = topic["subscriptions"]
    # It ends the run with the stats' backlog: it starts that plus a minute of reads behind.
    assert sub["backlogEntries"] == 200_000 + 30_000
    assert topic["backlogEntries"] == sub["backlogEntries"]
    assert any("nobody publishes; its backlog" in n for n in notes), notes
    trace = w.generate(spec, 1)
    ops = _ops(trace)
    assert ops.get("load", 0) > 0 and ops.get("add", 0) == 0, ops
    # Before: no read at all (the cursor opened at the end).
    assert 27_000 <= _read_entries(trace) <= 33_000
    # The trace summarized as stats: the backlog at the end is the stats' (within a few acks).
    stats = lc.broker_workload.summarize(trace)
    (s,) = stats.topics[0].subscriptions
    assert abs(s.msg_backlog - 200_000) < 2_000, s.msg_backlog
    assert stats.topics[0].publishers == 0


def test_a_backlog_no_subscription_reads_is_not_said_to_be_read():
    """A Key_Shared subscription left with a backlog and no consumer on an idle topic (the stats
    pasted in apache/pulsar#12800): the topic's note says nobody reads the stored backlog, as the
    subscription's own note does, rather than that each subscription reads it."""
    dump = _dump(377_000, 0.0, consumers=0)
    notes = w.workload_and_notes(dump, test_duration_minutes=1.0)[1]
    (topic_note,) = [n for n in notes if "nobody publishes; its backlog" in n]
    assert "no subscription reads it" in topic_note, notes
    assert any("no consumer, so nothing reads it" in n for n in notes), notes
    # With a reading subscription beside it, the note names the one that reads.
    topics = dump["acme/ledger"]["0x00000000_0xffffffff"]["persistent"]
    reading = _dump(1_000, 50.0)["acme/ledger"]["0x00000000_0xffffffff"]["persistent"][TOPIC]
    topics[TOPIC]["subscriptions"]["reconcile-2"] = reading["subscriptions"]["reconcile"]
    notes = w.workload_and_notes(dump, test_duration_minutes=1.0)[1]
    (topic_note,) = [n for n in notes if "nobody publishes; its backlog" in n]
    assert topic_note.endswith("reconcile-2 reads it at the rate its stats show"), topic_note


def test_a_stuck_subscription_keeps_its_backlog_and_is_noted():
    spec, notes = w.workload_and_notes(_dump(50_000, 0.0, consumers=2), test_duration_minutes=0.5)
    (sub,) = spec["topicDetails"][0]["subscriptions"]
    assert any("stuck subscription" in n for n in notes), notes
    trace = w.generate(spec, 1)
    # Its consumers' receiver queues fill as they connect, then nothing moves.
    assert _read_entries(trace) <= 2 * (1000 + 100), _read_entries(trace)
    assert sub["backlogEntries"] <= 50_000 + 1


def test_messages_an_entry_come_from_the_backlog_size():
    # 10,000 entries holding 40 MiB of 2 KiB messages: two messages an entry.
    spec = w.from_broker_stats(_dump(10_000, 100.0, backlog_size=10_000 * 4096), test_duration_minutes=0.2)
    assert spec["topicDetails"][0]["backlogMessagesPerEntry"] == 2
    trace = w.generate(spec, 1)
    loads = trace.filter(pc.equal(trace.column("op"), "load"))
    assert set(loads.column("size").to_pylist()) == {4096}
    assert set(loads.column("messages").to_pylist()) == {2}


def test_a_huge_backlog_is_bounded_by_the_data():
    spec = w.from_broker_stats(_dump(10**12, 1000.0), test_duration_minutes=0.2)
    trace = w.generate(spec, 1)
    # A row per ledger the reader reaches, the rest in pieces of at most 2^31 - 1 entries.
    assert trace.num_rows < 20_000, trace.num_rows
    loads = trace.filter(pc.equal(trace.column("op"), "load"))
    assert pc.sum(loads.column("count")).as_py() == spec["topicDetails"][0]["backlogEntries"]


def test_a_huge_dispatch_rate_caps_the_stored_backlog_instead_of_overflowing():
    # msgRateOut near the float maximum: the reads over the run are infinite (math.ceil raised
    # OverflowError); the backlog is capped at what the lab stores, and noted.
    spec, notes = w.workload_and_notes(_dump(1000, 1e308), test_duration_minutes=0.2)
    (topic,) = spec["topicDetails"]
    assert topic["backlogEntries"] == 1 << 40
    assert any("more than the lab stores" in n for n in notes), notes


def test_publishing_topics_keep_building_their_backlog_by_publishing():
    dump = _dump(100_000, 500.0)
    topic = dump["acme/ledger"]["0x00000000_0xffffffff"]["persistent"][TOPIC]
    topic["publishers"] = [{"msgRateIn": 1000.0, "msgThroughputIn": 2048000.0, "averageMsgSize": 2048.0}]
    topic["msgRateIn"], topic["msgThroughputIn"] = 1000.0, 2048000.0
    spec = w.from_broker_stats(copy.deepcopy(dump), test_duration_minutes=0.2)
    assert "backlogEntries" not in spec["topicDetails"][0]


def test_stored_backlog_keys_are_checked():
    base = {"name": "t", "producerRate": 0, "messageSize": 100}
    with pytest.raises(lc.InvalidArgumentError, match=r"subscriptions\[0\]\.backlogEntries: 20 is more than"):
        w.generate(
            {
                "topicDetails": [
                    {
                        **base,
                        "backlogEntries": 10,
                        "subscriptions": [{"name": "s", "type": "Shared", "consumerRates": [1], "backlogEntries": 20}],
                    }
                ]
            },
            1,
        )
    with pytest.raises(lc.InvalidArgumentError, match="backlogEntries"):
        w.generate({"topicDetails": [{**base, "backlogEntries": -1}]}, 1)


def test_retention_settings_take_broker_conf_names():
    spec = {
        "producerRate": 2000,
        "batchingEnabled": False,
        "managedLedgerMaxEntriesPerLedger": 1000,
        "managedLedgerMinLedgerRolloverTimeMinutes": 0,
        "testDurationMinutes": 0.3,
    }

    def deletes(extra: dict) -> int:
        return _ops(w.generate({**spec, **extra}, 1)).get("delete", 0)

    assert deletes({}) > 20  # broker.conf's defaults: consumed ledgers go
    assert deletes({"defaultRetentionTimeInMinutes": -1, "defaultRetentionSizeInMB": -1}) == 0
    assert deletes({"retentionTimeMinutes": -1, "retentionSizeMb": -1}) == 0
    assert w.settings_from_broker_conf({"defaultRetentionSizeInMB": "-1", "retentionCheckIntervalInSeconds": "60"}) == {
        "defaultRetentionSizeInMB": -1,
        "retentionCheckIntervalInSeconds": 60,
    }


def test_replaying_a_catch_up_only_subscription_reads_storage_at_its_rate():
    spec = w.from_broker_stats(_dump(200_000, 500.0), test_duration_minutes=1.0)
    (row,) = lc.replay(lambda: w.stream(spec, 1), lc.CacheConfig(cache_size_bytes=64 << 20)).to_pylist()
    # The catch-up reads are storage reads at about 500 entries a second.
    assert 27_000 <= row["misses"] <= 33_000, row
    assert row["storage_read_ops"] > 0
