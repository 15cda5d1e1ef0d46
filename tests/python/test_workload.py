"""lc.workload: specs (OMB files and mappings), scenarios, determinism."""

import pyarrow as pa
import pytest

import ledgercache as lc


def test_same_spec_and_seed_give_byte_identical_traces():
    spec = {"topics": 2, "subscriptionsPerTopic": 2, "producerRate": 500, "testDurationMinutes": 0.2,
            "redeliveryRate": 0.01, "seeksPerMinute": 3}
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
    adds = t.filter(pa.compute.equal(t["op"], "add")).num_rows
    assert 8_000 < adds < 11_000


def test_scenarios_have_their_traffic():
    for name in lc.workload.SCENARIOS:
        ops = set(lc.workload.generate({**lc.workload.SCENARIOS[name], "testDurationMinutes": 0.5}, seed=1)["op"].to_pylist())
        assert {"open", "add", "read"} <= ops, name
    ks = lc.workload.generate({**lc.workload.SCENARIOS["key-shared-slow-consumer"], "testDurationMinutes": 0.3}, seed=1)
    assert {"redeliver", "replay"} <= set(ks["op"].to_pylist())
    storm = lc.workload.generate({**lc.workload.SCENARIOS["seek-storm"], "testDurationMinutes": 0.5}, seed=1)
    assert "seek" in set(storm["op"].to_pylist())


def test_bad_specs():
    with pytest.raises(lc.UnknownSettingError, match="producerRat"):
        lc.workload.generate({"producerRat": 10})
    with pytest.raises(ValueError, match="subscription_type"):
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
