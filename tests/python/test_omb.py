"""OpenMessaging Benchmark's own files: workload files (every key Workload.java defines), Pulsar
driver files, producerRate 0 and rates above what a broker ingests, and specs too big to simulate,
refused before anything is allocated."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import ledgercache as lc
from ledgercache.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "omb"
WORKLOADS = sorted(p for p in DATA.glob("*.yaml") if not p.name.startswith("pulsar"))
SHORT = ["--duration-minutes", "0.02", "--warmup-minutes", "0", "--quiet"]


def read(path: Path) -> pa.Table:
    return pa.Table.from_batches(list(lc.trace.batches(path)), schema=lc.trace.SCHEMA)


def adds(table: pa.Table) -> pa.Table:
    return table.filter(pc.equal(table["op"], "add"))


def test_the_copies_keep_their_licence_header():
    assert len(WORKLOADS) >= 12
    for path in [*WORKLOADS, DATA / "pulsar.yaml"]:
        assert "Licensed under the Apache License, Version 2.0" in path.read_text(), path


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_omb_workload_files_generate_at_a_short_duration(path, tmp_path, capsys):
    out = tmp_path / "trace.parquet"
    settings = lc.workload.resolve(path)
    # OMB's backlog test builds 100 GiB or more and drains it before the test's minutes: hours
    # of traffic. Here the lab waits three seconds for it, and the CLI says the backlog is not drained.
    backlog = settings["consumer_backlog_size_gb"] > 0
    wait = ["--backlog-max-wait-minutes", "0.05"] if backlog else []
    assert main(["generate", str(path), "-o", str(out), *SHORT, *wait]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("estimate: ~") and "wrote" in printed
    trace = read(out)
    topics = settings["topics"] * settings["partitions_per_topic"]
    ops = set(trace["op"].to_pylist())
    assert {"add", "open", "read"} <= ops
    if backlog:
        assert "backlog: consumers pause after the warm-up" in printed
        assert "within backlogMaxWaitMinutes" in printed  # not built, or not drained
    # Every partition publishes when the test is long enough for one message a partition.
    rate = lc.workload.estimate({**settings, "test_duration_minutes": 0.02, "warmup_duration_minutes": 0})
    if rate["producer_rate"] * 1.2 / topics >= 3:
        assert len(set(adds(trace)["topic"].to_pylist())) == topics, path.name


def test_omb_files_get_the_pulsar_driver_values_and_the_warm_up():
    path = DATA / "simple-workload.yaml"
    settings = lc.workload.resolve(path)
    assert settings["receiver_queue_size"] == 10000 and settings["subscription_type"] == "Failover"
    assert settings["batching_max_bytes"] == 131072 and settings["warmup_duration_minutes"] == 1
    # The bundled table is OMB's pulsar.yaml: applying the real file gives the same settings.
    assert lc.workload.resolve(path, driver=DATA / "pulsar.yaml") == settings
    # The warm-up is traffic: 1 + 0.05 minutes of publishing at 10,000 msg/s.
    short = lc.workload.generate({**settings, "test_duration_minutes": 0.05}, seed=1)
    messages = pc.sum(adds(short)["messages"]).as_py()
    assert 0.95 * 10_000 * 63 < messages < 1.05 * 10_000 * 63
    # Mappings and .json specs keep the lab's defaults.
    assert "receiver_queue_size" not in lc.workload.resolve({"topics": 1})


def test_a_driver_file_shapes_the_traffic(tmp_path):
    spec = {
        "topics": 1,
        "partitionsPerTopic": 2,
        "consumerPerSubscription": 3,
        "producerRate": 2000,
        "testDurationMinutes": 0.05,
    }
    driver = tmp_path / "shared.yaml"
    driver.write_text(
        (DATA / "pulsar.yaml").read_text().replace("subscriptionType: Failover", "subscriptionType: Shared")
    )
    shared = lc.workload.generate(spec, seed=1, driver=driver)
    assert lc.workload.resolve(spec, driver=driver)["subscription_type"] == "Shared"
    assert not shared.equals(lc.workload.generate(spec, seed=1, driver=DATA / "pulsar.yaml"))
    # A key the file leaves out gets the driver's Java default (PulsarProducerConfig: 1 MiB).
    once = lc.workload.resolve(spec, driver=DATA / "pulsar-effectively-once.yaml")
    assert once["batching_max_bytes"] == 1 << 20 and once["receiver_queue_size"] == 10000
    # The spec's own settings win over the driver's.
    assert lc.workload.resolve({**spec, "receiverQueueSize": 7}, driver=driver)["receiver_queue_size"] == 7
    bad = tmp_path / "bad.yaml"
    bad.write_text("producer:\n  batchingMaxByte: 10\n")
    with pytest.raises(lc.UnknownSettingError, match=r"bad.yaml: unknown driver setting 'producer.batchingMaxByte'"):
        lc.workload.resolve(spec, driver=bad)
    bad.write_text("driverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver\n")
    with pytest.raises(lc.InvalidArgumentError, match="not OMB's Pulsar driver"):
        lc.workload.resolve(spec, driver=bad)
    out = tmp_path / "t.parquet"
    assert main(["generate", _json(tmp_path, spec), "-o", str(out), "--driver", str(driver), "--quiet"]) == 0
    assert read(out).equals(shared)


def _json(tmp_path, spec) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return str(path)


def test_producer_rate_0_is_what_a_saturated_broker_ingests(tmp_path, capsys):
    path = DATA / "max-rate-1-topic-16-partitions-1kb.yaml"
    assert lc.workload.resolve(path)["producer_rate"] == 0
    e = lc.workload.estimate(path)
    capacity = 312.5e6 / 1024  # brokerIngestBytesPerSecond over 1 KiB messages
    assert e["capped_by"] == "bytes" and e["producer_rate"] == pytest.approx(capacity)
    assert main(["generate", str(path), "-o", str(tmp_path / "t.parquet"), *SHORT]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line == (
        "rate: producerRate 0 (find the maximum sustainable rate): simulating 305,176 msg/s, "
        "the saturated brokers' rate (brokerIngestBytesPerSecond)"
    )
    trace = read(tmp_path / "t.parquet")
    published = pc.sum(adds(trace)["messages"]).as_py()
    assert 0.95 * capacity * 1.2 < published < 1.05 * capacity * 1.2
    # 100-byte messages: the message capacity binds; with 4 brokers, four times as much.
    small = {"producerRate": 0, "messageSize": 100, "partitionsPerTopic": 16}
    assert lc.workload.estimate(small)["producer_rate"] == pytest.approx(1e6)
    assert lc.workload.estimate({**small, "brokers": 4})["producer_rate"] == pytest.approx(4e6)
    # 3 partitions on 2 brokers: the broker with 2 of them saturates first.
    assert lc.workload.estimate({**small, "partitionsPerTopic": 3, "brokers": 2})["producer_rate"] == pytest.approx(
        1.5e6
    )
    assert lc.workload.estimate({**small, "brokerIngestMessagesPerSecond": 5000})["producer_rate"] == pytest.approx(
        5000
    )
    # A rate within capacity is simulated as it is.
    assert lc.workload.estimate({"producerRate": 1000})["capped_by"] is None


PEAK = """
import sys
from ledgercache.cli import main
assert main(sys.argv[1:]) == 0
print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")), file=sys.stderr)
"""


def test_a_max_rate_file_is_capped_and_streams_in_little_memory(tmp_path):
    # producerRate 10,000,000 of 64 KiB messages (655 GB/s) for a minute: capped to what a broker
    # ingests, generated in a fresh process whose peak memory is measured.
    path = DATA / "max-rate-1-topic-1-partition-1p-1c-64kb.yaml"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK,
            "generate",
            str(path),
            "-o",
            str(tmp_path / "t.parquet"),
            "--duration-minutes",
            "1",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == (
        "rate: producerRate 10,000,000 msg/s is above what the brokers ingest: simulating 4,768 "
        "msg/s, the saturated brokers' rate (brokerIngestBytesPerSecond)"
    )
    peak_mib = int(r.stderr.strip().splitlines()[-1]) / 1024
    print(f"\nmax-rate 64 KiB, 1 + 1 minutes: peak {peak_mib:.0f} MiB; {lines[-1]}")
    assert peak_mib < 400


def test_specs_too_big_to_simulate_stop_before_allocating(tmp_path):
    huge = {"topics": 100_000_000, "consumerPerSubscription": 4}
    start = time.monotonic()
    with pytest.raises(
        lc.ResourceLimitError,
        match=r"needs ~[\d.]+ GiB \(100000000 partitions on 1 brokers.*memory budget "
        r"of 4.0 GiB: raise the budget with --memory-budget",
    ):
        lc.workload.stream(huge)
    with pytest.raises(lc.ResourceLimitError):
        lc.workload.generate(huge)
    assert time.monotonic() - start < 2, "refused before allocating"
    # The estimate says what it needs; a budget that covers it lets it through.
    need = lc.workload.estimate({"topics": 20_000, "testDurationMinutes": 0.01})["memory_bytes"]
    with pytest.raises(lc.ResourceLimitError):
        lc.workload.stream({"topics": 20_000, "testDurationMinutes": 0.01}, memory_budget=int(need / 2))
    lc.workload.stream({"topics": 20_000, "testDurationMinutes": 0.01}, memory_budget=int(need * 1.1))
    # State that grows with the duration (seeks keep every entry): shorten it.
    with pytest.raises(lc.ResourceLimitError, match="shorten it with --duration-minutes"):
        lc.workload.stream(
            {
                "seeksPerMinute": 1,
                "producerRate": 1e6,
                "messageSize": 10,
                "batchingEnabled": False,
                "testDurationMinutes": 1000,
            }
        )
    # A table of the trace is counted too: stream it instead.
    with pytest.raises(lc.ResourceLimitError, match=r"the trace as a table needs .*lc.workload.stream"):
        lc.workload.generate({"testDurationMinutes": 100_000})
    with pytest.raises(lc.ResourceLimitError, match="use fewer brokers with --brokers"):
        lc.workload.stream({"brokers": 10**9})
    # Ids past 32 bits are refused whatever the budget.
    with pytest.raises(lc.InvalidArgumentError, match="32-bit ids"):
        lc.workload.stream({"topics": 2**32 - 1, "partitionsPerTopic": 2**32 - 1}, memory_budget=2**64 - 1)
    # The command line: one line naming the estimate and the flag.
    spec = _json(tmp_path, huge)
    r = subprocess.run(
        [sys.executable, "-m", "ledgercache.cli", "generate", spec, "-o", str(tmp_path / "t.parquet")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert (
        r.stderr.startswith("ledgercache: error: the workload's simulation needs ~") and "--memory-budget" in r.stderr
    )


def test_generate_refuses_memory_before_disk_and_a_trace_the_disk_cannot_hold(tmp_path, monkeypatch, capsys):
    import shutil
    from collections import namedtuple

    full = namedtuple("usage", "total used free")(10**12, 10**12 - 1000, 1000)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: full)
    out = str(tmp_path / "t.parquet")
    # Too big for memory and for the disk: the memory refusal (it does not depend on the disk) comes first.
    assert main(["generate", _json(tmp_path, {"topics": 100_000_000, "consumerPerSubscription": 4}), "-o", out]) == 2
    assert "the workload's simulation needs ~" in capsys.readouterr().err
    # Fits in memory, not on a disk with 1000 bytes free: refused before writing anything.
    assert main(["generate", _json(tmp_path, {"topics": 1, "testDurationMinutes": 0.01}), "-o", out]) == 2
    err = capsys.readouterr().err
    assert "the trace needs ~" in err and "0.0 MB free" in err and "--duration-minutes" in err, err
    assert not (tmp_path / "t.parquet").exists()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (b"topics: 1\ntopics: 2\n", r"w.yaml: line 2: duplicate key 'topics'"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", r"w.yaml is not UTF-8 text"),
        (b"- topics: 1\n", r"w.yaml: expected a mapping of settings, got a list"),
        (b"topics: [1, 2]\n", r"w.yaml: topics: expected a number"),
        (b"topics:\n", r"w.yaml: topics: has no value"),
        (b"topics: 1\n  bad indent: [\n", r"w.yaml: line \d+"),
        (b"messageSize: 3000000000\n", r"w.yaml: messageSize: must be at most 2147483647"),
        (b"batchingMaxBytes: 4294967295\n", r"w.yaml: batchingMaxBytes: must be at most"),
        (b"topics: 1\nproducerRate: -5\n", r"w.yaml: producerRate: must be >= 0"),
    ],
)
def test_bad_yaml_files_are_invalid_argument_errors_naming_the_file(tmp_path, text, match):
    path = tmp_path / "w.yaml"
    path.write_bytes(text)
    with pytest.raises(lc.InvalidArgumentError, match=match):
        lc.workload.estimate(path)


def test_files_too_large_to_be_specs_are_refused_unread(tmp_path):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as f:
        f.truncate(lc.workload.MAX_SPEC_FILE_BYTES + 1)
    with pytest.raises(lc.InvalidArgumentError, match=r"big.yaml is 1,048,577 bytes"):
        lc.workload.resolve(path)
    with pytest.raises(lc.InvalidArgumentError, match="does not exist"):
        lc.workload.resolve(tmp_path / "none.yaml")
    with pytest.raises(lc.InvalidArgumentError, match=str(tmp_path)):
        lc.workload.resolve(tmp_path / ".." / tmp_path.name)  # a directory
    with pytest.raises(lc.InvalidArgumentError, match="embedded null"):
        lc.workload.resolve("a\0b.yaml")
    with pytest.raises(lc.InvalidArgumentError, match="int64 microsecond"):
        lc.workload.stream({"testDurationMinutes": 1e300})


def test_bad_json_files_are_invalid_argument_errors(tmp_path):
    path = tmp_path / "w.json"
    for text, match in (
        ("[1, 2]", "expected a mapping of settings, got a list"),
        ("{", "w.json: line 1"),
        ('{"topics": {"a": 1}}', "topics: expected a number"),
    ):
        path.write_text(text)
        with pytest.raises(lc.InvalidArgumentError, match=match):
            lc.workload.generate(path)


def test_yaml_quoting_and_comments_are_read_as_yaml(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(
        "topics: \"2\"  # quoted, as Jackson reads an int\nkeyDistributor: 'NO_KEY'\n"
        'name: "a # not a comment"\nproducerRate: 500\ntestDurationMinutes: 0.05\n'
    )
    s = lc.workload.resolve(path)
    assert s["topics"] == 2 and s["key_distributor"] == "NO_KEY" and s["producer_rate"] == 500


def test_huge_time_knobs_neither_hang_nor_wrap():
    spec = {
        "churnPerMinute": 1e-300,
        "churnDowntimeSeconds": 1e300,
        "seeksPerMinute": 1e-300,
        "activeConsumerFailoverDelayTimeMillis": 1e300,
        "subscriptionType": "Failover",
        "managedLedgerNewEntriesCheckDelayInMillis": 1e300,
        "catchUpStartSeconds": 1e300,
        "testDurationMinutes": 0.05,
    }
    start = time.monotonic()
    t = lc.workload.generate(spec, seed=1)
    assert t.num_rows > 0 and time.monotonic() - start < 10
    assert pc.min(t["ts_us"]).as_py() >= 0


@pytest.mark.skipif(
    not os.environ.get("LEDGERCACHE_OMB_WORKLOADS"),
    reason="set LEDGERCACHE_OMB_WORKLOADS to an OMB checkout's workloads/ directory",
)
def test_all_omb_workloads(tmp_path):
    """Every workload file of an OMB checkout generates at a very short duration (about 5
    minutes for OMB's 130 files, 281 s here: its 1m-topic files set up a million partitions each)."""
    files = sorted(Path(os.environ["LEDGERCACHE_OMB_WORKLOADS"]).glob("*.yaml"))
    assert files
    failed = {}
    for path in files:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "ledgercache.cli",
                "generate",
                str(path),
                "-o",
                str(tmp_path / "t.parquet"),
                "--duration-minutes",
                "0.01",
                "--warmup-minutes",
                "0",
                "--quiet",
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            failed[path.name] = r.stderr.strip()
    assert not failed, failed


def test_any_spec_values_give_a_trace_or_a_ledgercache_error():
    """Wild values for every setting (huge, tiny, negative, wrong type): a trace's first batch, or
    a LedgerCacheError; never another exception, a panic or a hang."""
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st

    value = st.one_of(
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([0, 1, 2**31, 2**32, 2**63, 1e300, 1e-300, "Shared", "x", True, None]),
    )
    names = sorted(lc.workload.KNOWN - {"test_duration_minutes", "warmup_duration_minutes"})

    @hsettings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.dictionaries(st.sampled_from(names), value, max_size=4))
    def check(spec):
        spec = {**spec, "test_duration_minutes": 0.02}
        try:
            lc.workload.estimate(spec)
            reader = lc.workload.stream(spec, seed=1, batch_rows=1000, memory_budget=1 << 30)
            next(iter(reader), None)
        except lc.LedgerCacheError:
            pass

    check()
