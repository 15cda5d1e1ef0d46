"""The readers a broker opens besides its consumers' subscriptions, from every input that says they
are there (spec keys, broker.conf, OMB's driver, a broker's stats), and the bytes it caches."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import ledgercache as lc

SHORT = {"testDurationMinutes": 0.1, "batchingEnabled": False, "producerRate": 1000}


def _rows(trace: pa.Table, cursor: str, op: str) -> pa.Table:
    return trace.filter(pc.and_(pc.equal(trace["cursor"], cursor), pc.equal(trace["op"], op)))


def test_dedup_from_camel_case_spec_keys_snapshots_every_interval():
    # MessageDeduplication: the pulsar.dedup cursor never reads and mark-deletes every
    # brokerDeduplicationEntriesInterval entries.
    t = lc.workload.generate(
        {**SHORT, "brokerDeduplicationEnabled": True, "brokerDeduplicationEntriesInterval": 50}, seed=1
    )
    adds = t.filter(pc.equal(t["op"], "add")).num_rows
    assert _rows(t, "pulsar.dedup", "open").num_rows == 1
    assert _rows(t, "pulsar.dedup", "read").num_rows == 0
    assert _rows(t, "pulsar.dedup", "ack").num_rows == adds // 50
    assert adds > 1000


def test_effectively_once_driver_turns_dedup_on(tmp_path):
    # The keys of OMB's driver-pulsar/pulsar-effectively-once.yaml that matter here (its
    # client.persistence section); PulsarBenchmarkDriver sets the namespace's deduplication.
    driver = tmp_path / "pulsar-effectively-once.yaml"
    driver.write_text(
        "name: Pulsar-effectively-once\n"
        "driverClass: io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver\n"
        "client:\n  clusterName: local\n  persistence:\n    ensembleSize: 3\n    writeQuorum: 3\n"
        "    ackQuorum: 2\n    deduplicationEnabled: true\n"
        "producer:\n  batchingEnabled: true\n  batchingMaxPublishDelayMs: 1\n"
    )
    assert lc.workload.load_driver(driver)["broker_deduplication_enabled"] is True
    t = lc.workload.generate({"testDurationMinutes": 0.05}, seed=1, driver=driver)
    assert _rows(t, "pulsar.dedup", "open").num_rows == 1
    # A driver without it leaves it to the spec; a bad value names the key.
    assert "broker_deduplication_enabled" not in lc.workload.load_driver({"client": {"persistence": {}}})
    with pytest.raises(lc.InvalidArgumentError, match=r"client\.persistence\.deduplicationEnabled"):
        lc.workload.load_driver({"client": {"persistence": {"deduplicationEnabled": "sometimes"}}})


def test_broker_conf_dedup_keys():
    conf = {"brokerDeduplicationEnabled": "true", "brokerDeduplicationEntriesInterval": "500"}
    assert lc.workload.settings_from_broker_conf(conf) == {
        "brokerDeduplicationEnabled": True,
        "brokerDeduplicationEntriesInterval": 500,
    }
    with pytest.raises(lc.InvalidArgumentError, match="brokerDeduplicationEnabled"):
        lc.workload.settings_from_broker_conf({"brokerDeduplicationEnabled": "yes"})


def test_admin_subscriptions_and_replication_clusters():
    t = lc.workload.generate({**SHORT, "adminSubscriptionsPerTopic": 1, "replicationClusters": 1}, seed=2)
    assert _rows(t, "admin-sub-0", "open").num_rows == 1
    assert set(t.filter(pc.equal(t["cursor"], "admin-sub-0"))["op"].to_pylist()) == {"open"}
    reads = _rows(t, "pulsar.repl.cluster-1", "read")
    published = t.filter(pc.equal(t["op"], "add")).num_rows
    assert 0.95 * published < pc.sum(reads["count"]).as_py() <= published


# apache/pulsar#6438 (a topic's stats pasted in the issue, trimmed): one remote cluster whose
# replicator was not connected, and deduplicationStatus.
ISSUE_6438 = {
    "msgRateIn": 1410.798423526815,
    "msgThroughputIn": 556605.2280307647,
    "msgRateOut": 0.0,
    "msgThroughputOut": 0.0,
    "averageMsgSize": 394.5320740005671,
    "storageSize": 2455313235,
    "publishers": [],
    "subscriptions": {},
    "replication": {
        "jp-west": {
            "msgRateIn": 1410.798423526815,
            "msgThroughputIn": 556605.2280307647,
            "msgRateOut": 0.0,
            "msgThroughputOut": 0.0,
            "msgRateExpired": 0.0,
            "replicationBacklog": 6258001,
            "connected": False,
            "replicationDelayInSeconds": 0,
            "inboundConnection": "/xxx.xxx.xxx.xxx:40710",
            "inboundConnectedSince": "2020-01-08T01:38:23.565+09:00",
        }
    },
    "deduplicationStatus": "Disabled",
}


def test_broker_stats_read_deduplication_status_and_replication():
    name = "persistent://t/n/replicated"
    stats = lc.broker_stats.read({name: ISSUE_6438})
    (topic,) = stats.topics
    assert topic.deduplication is False
    assert topic.replication_clusters == ()  # not connected: its cursor is inactive
    assert any("jp-west" in n and "not connected" in n for n in stats.notes)
    connected = {**ISSUE_6438, "deduplicationStatus": "Enabled"}
    connected["replication"] = {"jp-west": {**ISSUE_6438["replication"]["jp-west"], "connected": True}}
    stats = lc.broker_stats.read({name: connected})
    assert stats.topics[0].replication_clusters == ("jp-west",)
    assert lc.broker_stats.read(lc.broker_stats.to_dump(stats)).topics[0].replication_clusters == ("jp-west",)
    spec, notes = lc.workload.workload_and_notes(stats, test_duration_minutes=0.05)
    assert "readers besides the subscriptions: the pulsar.dedup cursor on 1 topic" in " ".join(notes), notes
    assert "pulsar.repl.<cluster> cursors on 1 topic" in " ".join(notes), notes
    (detail,) = spec["topicDetails"]
    assert detail["deduplication"] is True
    assert detail["replicationClusters"] == ["jp-west"]
    # averageMsgSize already counts the stored bytes (Producer.publishMessage): not added twice.
    assert spec["messageMetadata"] is False
    t = lc.workload.generate(spec, seed=1)
    assert set(t["cursor"].drop_null().to_pylist()) == {"pulsar.repl.jp-west", "pulsar.dedup"}
    assert _rows(t, "pulsar.repl.jp-west", "read").num_rows > 0


def test_a_partitioned_aggregate_keeps_a_replicator_it_prints_as_not_connected():
    """apache/pulsar#19248: ``partitioned-stats`` printed ``connected: false`` for a replicator every
    partition had connected (before 2.10.5 / 2.11.2; since, the aggregate is false when any
    partition's is). The aggregate's false keeps the replicator on every partition, noted; a
    partition's own false (``--per-partition``) still leaves it out of that partition."""
    repl = {"Cluster-2": {"msgRateIn": 0.0, "msgRateOut": 0.0, "replicationBacklog": 0, "connected": False}}
    aggregate = {
        "msgRateIn": 200.0,
        "msgThroughputIn": 200_000.0,
        "publishers": [],
        "subscriptions": {},
        "replication": repl,
        "metadata": {"partitions": 2},
        "partitions": {},
    }
    stats = lc.broker_stats.read({"persistent://tenant1/ns1/topic1": aggregate})
    assert [t.replication_clusters for t in stats.topics] == [("Cluster-2",), ("Cluster-2",)]
    assert any("#19248" in n and "Cluster-2" in n for n in stats.notes), stats.notes
    per_partition = {
        **aggregate,
        "partitions": {
            f"persistent://tenant1/ns1/topic1-partition-{i}": {
                "msgRateIn": 100.0,
                "msgThroughputIn": 100_000.0,
                "replication": {"Cluster-2": {**repl["Cluster-2"], "connected": i == 0}},
            }
            for i in range(2)
        },
    }
    stats = lc.broker_stats.read({"persistent://tenant1/ns1/topic1": per_partition})
    assert [t.replication_clusters for t in stats.topics] == [("Cluster-2",), ()]
    assert not any("#19248" in n for n in stats.notes), stats.notes


def test_a_replication_cluster_without_a_name_is_skipped_with_a_note():
    # A blank key once reached the generator, which refused the spec it was given
    # (replicationClusters[0]: must not be empty), naming no stats file.
    raw = {**ISSUE_6438, "replication": {"": {"connected": True}, " ": {}, "us-east": {"connected": True}}}
    stats = lc.broker_stats.read({"persistent://t/n/a": raw})
    assert stats.topics[0].replication_clusters == ("us-east",)
    assert any("replication cluster without a name, skipped" in n for n in stats.notes), stats.notes
    spec = lc.workload.from_broker_stats(stats, test_duration_minutes=0.05)
    assert lc.workload.generate(spec, seed=1).num_rows > 0


def test_broker_conf_deduplication_is_named_in_the_notes():
    # calibrate passes broker.conf's keys as settings: the dedup cursor it adds to every topic whose
    # stats do not say otherwise is named, since no subscription in the stats shows it.
    stats = lc.broker_stats.read(
        {"persistent://t/n/a": {k: v for k, v in ISSUE_6438.items() if k not in ("replication", "deduplicationStatus")}}
    )
    notes = lc.workload.workload_and_notes(stats, test_duration_minutes=0.05)[1]
    assert not any("readers besides" in n for n in notes), notes
    notes = lc.workload.workload_and_notes(
        stats, test_duration_minutes=0.05, settings={"brokerDeduplicationEnabled": True}
    )[1]
    assert any(
        "pulsar.dedup cursor on 1 topic (deduplicationStatus, else brokerDeduplicationEnabled)" in n for n in notes
    )


def test_an_odd_deduplication_status_is_noted_never_refused():
    stats = lc.broker_stats.read({"persistent://t/n/a": {**ISSUE_6438, "deduplicationStatus": "Failed"}})
    assert stats.topics[0].deduplication is None
    assert any("deduplicationStatus" in n and "Failed" in n for n in stats.notes)
    spec = lc.workload.from_broker_stats(stats, test_duration_minutes=0.05)
    assert "deduplication" not in spec["topicDetails"][0]


def test_a_deduplication_status_of_another_type_is_noted_never_a_type_error():
    for odd in ([1], {"a": 1}, 1):
        stats = lc.broker_stats.read({"persistent://t/n/a": {**ISSUE_6438, "deduplicationStatus": odd}})
        assert stats.topics[0].deduplication is None
        assert any("deduplicationStatus" in n for n in stats.notes), odd


def test_a_subscription_without_consumers_opens_at_the_end_and_never_reads():
    # PersistentTopic.createSubscription: an admin-created subscription nobody joined, with a
    # backlog in the stats; before, it opened at the first entry some minutes into the run.
    stats = {
        "persistent://t/n/a": {
            "msgRateIn": 1000.0,
            "msgThroughputIn": 1_000_000.0,
            "subscriptions": {
                "admin": {"type": "None", "msgBacklog": 500_000, "consumers": []},
                "live": {"type": "Exclusive", "msgRateOut": 1000.0, "consumers": [{"msgRateOut": 1000.0}]},
            },
        }
    }
    spec, notes = lc.workload.workload_and_notes(stats, test_duration_minutes=0.05)
    admin = next(s for s in spec["topicDetails"][0]["subscriptions"] if s["name"] == "admin")
    assert admin["startSeconds"] == 0 and admin["consumerRates"] == []
    assert spec["warmupDurationMinutes"] == 0
    assert any("admin" in n and "never reads" in n for n in notes)
    t = lc.workload.generate(spec, seed=1)
    opened = _rows(t, "admin", "open")
    assert opened["ts_us"].to_pylist() == [0] and opened["entry_id"].to_pylist() == [None]
    assert t.filter(pc.equal(t["cursor"], "admin")).num_rows == 1


def test_entries_carry_pulsars_metadata_bytes_unless_turned_off():
    # RangeEntryCacheImpl.insert charges the stored entry: 100-byte messages one an entry by
    # producer "pulsar-0-0": 10 header bytes + MessageMetadata 22 + varint(sequence id) = 133 for
    # sequence ids below 128.
    spec = {**SHORT, "messageSize": 100}
    on = lc.workload.generate(spec, seed=1)
    off = lc.workload.generate({**spec, "messageMetadata": False}, seed=1)
    sizes_on = on.filter(pc.equal(on["op"], "add"))["size"].to_pylist()
    sizes_off = off.filter(pc.equal(off["op"], "add"))["size"].to_pylist()
    assert sizes_on[:128] == [133] * 128 and set(sizes_on[128:]) == {134}
    assert set(sizes_off) == {100}
