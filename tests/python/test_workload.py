"""lc.workload: specs (OMB files and mappings), scenarios, determinism."""

import pyarrow as pa
import pytest

import ledgercache as lc


def test_same_spec_and_seed_give_byte_identical_traces():
    spec = {
        "topics": 2,
        "subscriptionsPerTopic": 2,
        "producerRate": 500,
        "testDurationMinutes": 0.2,
        "redeliveryRate": 0.01,
        "seeksPerMinute": 3,
    }
    a, b = lc.workload.generate(spec, seed=3), lc.workload.generate(spec, seed=3)
    assert a.equals(b)
    assert a.schema == lc.trace.SCHEMA
    sink_a, sink_b = pa.BufferOutputStream(), pa.BufferOutputStream()
    for t, sink in ((a, sink_a), (b, sink_b)):
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
    assert sink_a.getvalue().equals(sink_b.getvalue())
    assert not lc.workload.generate(spec, seed=4).equals(a)


def test_omb_workload_file(tmp_path):
    path = tmp_path / "1-topic-16-partitions-1kb.yaml"
    path.write_text(
        "name: 1 topic / 16 partitions / 1kb\n"
        "topics: 1\npartitionsPerTopic: 16\nmessageSize: 1024\npayloadFile: payload/payload-1Kb.data\n"
        "subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 1\n"
        "producerRate: 1600  # messages/s\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 0.1\n"
        "keyDistributor: NO_KEY\n"
    )
    t = lc.workload.generate(path, seed=1)
    assert len(set(t.column("topic").to_pylist())) == 16
    added = t.filter(pa.compute.equal(t["op"], "add"))
    messages = pa.compute.sum(added["messages"]).as_py()
    # OMB's one-minute warm-up comes first (Workload.java's default): 1.1 minutes at 1600/s.
    assert 88_000 < messages < 121_000
    # The producer sends its keyless batches to one partition at a time: 1.6 messages a
    # millisecond make batches of about two, not the one message of 100/s on each partition.
    assert 1.4 < messages / added.num_rows < 2.2


def test_scenarios_have_their_traffic():
    for name in lc.workload.SCENARIOS:
        ops = set(
            lc.workload.generate({**lc.workload.SCENARIOS[name], "testDurationMinutes": 0.5}, seed=1)["op"].to_pylist()
        )
        assert {"open", "add", "read"} <= ops, name
    ks = lc.workload.generate({**lc.workload.SCENARIOS["key-shared-slow-consumer"], "testDurationMinutes": 0.3}, seed=1)
    assert {"redeliver", "replay"} <= set(ks["op"].to_pylist())
    storm = lc.workload.generate({**lc.workload.SCENARIOS["seek-storm"], "testDurationMinutes": 0.5}, seed=1)
    assert "seek" in set(storm["op"].to_pylist())
    # Its nacks come back after the client's minute, each as a rewind.
    failover = lc.workload.generate({**lc.workload.SCENARIOS["failover-nacks"], "testDurationMinutes": 1.2}, seed=1)
    assert {"rewind", "individual_ack"} <= set(failover["op"].to_pylist())


def test_bad_specs():
    with pytest.raises(lc.UnknownSettingError, match="producerRat"):
        lc.workload.generate({"producerRat": 10})
    with pytest.raises(ValueError, match="subscriptionType"):
        lc.workload.generate({"subscriptionType": "Broadcast"})
    with pytest.raises(ValueError, match="topics"):
        lc.workload.generate({"topics": 0})
    with pytest.raises(ValueError, match="does not exist"):
        lc.workload.generate("no-such-scenario-or-file.yaml")


def test_generated_traces_replay_under_every_strategy():
    t = lc.workload.generate({**lc.workload.SCENARIOS["shared-overflow"], "testDurationMinutes": 0.2}, seed=2)
    configs = [lc.CacheConfig(cache_size_bytes=1 << 20, strategy=s) for s in ("pip430", "pip430-fifo", "lru", "belady")]
    out = lc.replay(t, configs).to_pylist()
    belady = out[3]["hits"]
    assert all(r["entries_read"] == out[0]["entries_read"] > 0 for r in out)
    assert all(belady >= r["hits"] for r in out)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def test_every_knob_is_documented_under_its_camel_case_name():
    doc = lc.workload.__doc__
    aliases = {
        "consumer_backlog_size_gb": "consumerBacklogSizeGB",
        "default_retention_size_in_mb": "defaultRetentionSizeInMB",
    }
    for name in lc.workload.KNOWN:
        assert aliases.get(name, _camel(name)) in doc, name


def test_pulsar_and_omb_knobs_under_camel_case_and_snake_case(tmp_path):
    knobs = {
        "batchingMaxPublishDelayMs": 5,
        "batchingMaxBytes": 65536,
        "batchingMaxMessages": 50,
        "batchingEnabled": True,
        "dispatcherMaxRoundRobinBatchSize": 10,
        "dispatcherMaxReadBatchSize": 50,
        "dispatcherMaxReadSizeBytes": 1 << 20,
        "keySharedLookAheadMsgInReplayThresholdPerConsumer": 100,
        "keySharedLookAheadMsgInReplayThresholdPerSubscription": 300,
        "subscriptionKeySharedConsistentHashingReplicaPoints": 50,
        "activeConsumerFailoverDelayTimeMillis": 0,
    }
    base = {
        "subscriptionType": "Key_Shared",
        "consumerPerSubscription": 3,
        "keyDistributor": "KEY_ROUND_ROBIN",
        "slowConsumerFraction": 0.34,
        "slowConsumerSpeed": 0.2,
        "producerRate": 3000,
        "testDurationMinutes": 0.2,
    }
    camel = lc.workload.generate({**base, **knobs}, seed=1)
    snake = lc.workload.generate({**base, **{lc.workload._snake(k): v for k, v in knobs.items()}}, seed=1)
    assert camel.equals(snake)
    path = tmp_path / "w.yaml"
    path.write_text(
        "".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}\n" for k, v in {**base, **knobs}.items())
    )
    # An OMB workload file gets OMB's Pulsar driver values and warm-up under its own settings; a
    # .json spec, like a mapping, the lab's defaults.
    omb = {**lc.workload.OMB_PULSAR_DRIVER, **lc.workload.OMB_WORKLOAD_DEFAULTS, **base, **knobs}
    assert lc.workload.generate(path, seed=1).equals(lc.workload.generate(omb, seed=1))
    (tmp_path / "w.json").write_text(__import__("json").dumps({**base, **knobs}))
    assert lc.workload.generate(tmp_path / "w.json", seed=1).equals(camel)
    assert not camel.equals(lc.workload.generate(base, seed=1))
    with pytest.raises(ValueError, match="batchingEnabled"):
        lc.workload.generate({"batchingEnabled": "maybe"})


def test_adds_carry_messages_and_redeliveries_their_reason():
    spec = {
        **lc.workload.SCENARIOS["shared-overflow"],
        "testDurationMinutes": 0.3,
        "messageSize": 100,
        "negativeAckRedeliveryDelayMs": 1000,
        "messageMetadata": False,  # payloads alone (the metadata bytes: test_readers.py)
    }
    t = lc.workload.generate(spec, seed=1).to_pydict()
    adds = [(m, s) for op, m, s in zip(t["op"], t["messages"], t["size"], strict=True) if op == "add"]
    assert all(m >= 1 and s == 100 * m for m, s in adds)
    assert sum(m for m, _ in adds) > len(adds)  # 3000 messages/s in 1 ms batches: several an entry
    reasons = {r for op, r in zip(t["op"], t["reason"], strict=True) if op == "redeliver"}
    assert reasons <= set(lc.trace.REASONS) and {"nack", "overflow"} <= reasons
    assert all(r is None for op, r in zip(t["op"], t["reason"], strict=True) if op != "redeliver")
    assert all(m is None for op, m in zip(t["op"], t["messages"], strict=True) if op != "add")
    off = lc.workload.generate({**spec, "batchingEnabled": False}, seed=1).to_pydict()
    assert {m for op, m in zip(off["op"], off["messages"], strict=True) if op == "add"} == {1}


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".arrow"])
def test_traces_with_and_without_the_optional_columns(tmp_path, suffix):
    t = lc.workload.generate({**lc.workload.SCENARIOS["key-shared-slow-consumer"], "testDurationMinutes": 0.2}, seed=3)
    path = lc.trace.write(t, tmp_path / f"full{suffix}")
    back = pa.Table.from_batches(list(lc.trace.batches(path)), schema=lc.trace.SCHEMA)
    assert back.equals(t)
    # The same trace without messages/reason (as older traces and other tools write it).
    required = t.drop_columns(sorted(lc.trace.OPTIONAL))
    if suffix == ".csv":
        from pyarrow import csv

        csv.write_csv(required, tmp_path / f"old{suffix}")
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        pq.write_table(required, tmp_path / f"old{suffix}")
    else:
        from pyarrow import feather

        feather.write_feather(required, tmp_path / f"old{suffix}", compression="uncompressed")
    old = pa.Table.from_batches(list(lc.trace.batches(tmp_path / f"old{suffix}")), schema=lc.trace.SCHEMA)
    assert old.schema == lc.trace.SCHEMA
    assert old.column("messages").null_count == old.num_rows and old.column("reason").null_count == old.num_rows
    assert old.drop_columns(sorted(lc.trace.OPTIONAL)).equals(required)
    config = lc.CacheConfig(cache_size_bytes=1 << 20)

    def results(trace):
        return [{k: v for k, v in r.items() if k != "replay_seconds"} for r in lc.replay(trace, config).to_pylist()]

    # Old traces do not say why a position was redelivered: the replay treats those rows as of no
    # stated reason (no expected read added), the same as the full trace with its reasons blanked.
    i = t.schema.get_field_index("reason")
    unstated = t.set_column(i, t.schema.field(i), pa.nulls(t.num_rows, pa.string()))
    assert results(required) == results(unstated)


def test_check_refuses_what_stream_refuses_without_generating():
    huge = {"topics": 100_000_000, "consumerPerSubscription": 4}
    with pytest.raises(lc.ResourceLimitError):
        lc.workload.check(huge)
    with pytest.raises(lc.InvalidArgumentError, match="broker"):
        lc.workload.check({"brokers": 2}, broker=2)
    assert lc.workload.check("tailing-fan-out", broker=0) is None


def test_the_estimate_follows_producers_routed_by_time():
    # OMB's 1-topic-16-partitions-1kb: its producer's batches reach each partition in bursts, one
    # switch interval in 16, and a tailing cursor reads a burst in about two reads.
    spec = {
        "topics": 1,
        "partitionsPerTopic": 16,
        "messageSize": 1024,
        "subscriptionsPerTopic": 1,
        "consumerPerSubscription": 1,
        "producersPerTopic": 1,
        "producerRate": 50000,
        "testDurationMinutes": 3,
    }
    for extra in ({}, {"producersPerTopic": 4}):
        s = {**spec, **extra}
        events = sum(b.num_rows for b in lc.workload.stream(s, seed=1))
        assert 0.9 < events / lc.workload.estimate(s)["events"] < 1.1, extra


def test_omb_backlog_specs_are_checked_and_estimated():
    # OMB refuses a backlog test without a producer rate (it cannot probe the rate meanwhile).
    with pytest.raises(lc.InvalidArgumentError, match="consumerBacklogSizeGB needs a producerRate"):
        lc.workload.generate({"consumerBacklogSizeGB": 1, "producerRate": 0})
    # A wait past what int64 microsecond timestamps hold is refused before anything runs.
    with pytest.raises(lc.InvalidArgumentError, match="backlogMaxWaitMinutes"):
        lc.workload.generate({"consumerBacklogSizeGB": 1, "backlogMaxWaitMinutes": 1e15})
    e = lc.workload.estimate({"consumerBacklogSizeGB": 0.01, "testDurationMinutes": 0.5})
    assert e["backlog_built"] and not e["backlog_wait_capped"] and e["simulated_seconds"] > 60
    e = lc.workload.estimate({"consumerBacklogSizeGB": 0.01, "consumerHeadroom": 0.9, "backlogMaxWaitMinutes": 2})
    assert e["backlog_built"] and e["backlog_wait_capped"] and e["simulated_seconds"] == pytest.approx(180)
    e = lc.workload.estimate({"consumerBacklogSizeGB": 100, "backlogMaxWaitMinutes": 1})
    assert e["backlog_built"] is False and e["backlog_wait_capped"]
    assert lc.workload.estimate({})["backlog_built"] is None


def test_waiting_nacks_count_in_the_memory_estimate():
    shared = {"subscriptionType": "Shared", "redeliveryRate": 0.05, "testDurationMinutes": 5}
    short = lc.workload.estimate({**shared, "negativeAckRedeliveryDelayMs": 100})
    long = lc.workload.estimate({**shared, "negativeAckRedeliveryDelayMs": 120_000})
    assert long["memory_growing_bytes"] > short["memory_growing_bytes"] + 100_000


def test_generate_stops_at_the_memory_budget_when_the_trace_outgrows_its_estimate():
    # Topics moved ten times a second with ledgers of 10 entries: every load lists the ledgers its
    # readers may still read, so the trace is ~4x the estimate. Before, generate trusted the
    # estimate and held whatever came (a longer run of this took 20 GB and was killed).
    spec = {
        "topics": 2,
        "partitionsPerTopic": 2,
        "messageSize": 1,
        "producerRate": 500,
        "subscriptionsPerTopic": 1,
        "testDurationMinutes": 3,
        "warmupDurationMinutes": 0.05,
        "brokers": 2,
        "bundleMovesPerMinute": 600,
        "reconnectStormEverySeconds": 1,
        "reconnectDelayMaxMs": 100,
        "managedLedgerMaxEntriesPerLedger": 10,
        "managedLedgerMinLedgerRolloverTimeMinutes": 0,
        "churnPerMinute": 5,
        "subscriptionType": "Shared",
    }
    e = lc.workload.estimate(spec)
    fits_the_estimate = int(e["memory_bytes"] + 1.5 * e["events"] * lc.workload.TABLE_BYTES_PER_EVENT)
    whole = lc.workload.generate(spec, seed=1)
    assert whole.get_total_buffer_size() > 3 * e["events"] * lc.workload.TABLE_BYTES_PER_EVENT
    with pytest.raises(lc.ResourceLimitError, match=r"passed the memory budget .* at [\d,]+ events \(estimated"):
        lc.workload.generate(spec, seed=1, memory_budget=fits_the_estimate)
