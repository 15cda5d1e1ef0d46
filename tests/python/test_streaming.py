"""Streaming generation: lc.workload.stream, readers through lc.replay and lc.trace.write, the
`ledgercache generate` estimate, and memory that does not grow with a trace's duration."""

import json
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ledgercache as lc
from ledgercache import _native

SPEC = {**lc.workload.SCENARIOS["shared-overflow"], "topics": 3, "brokers": 2, "testDurationMinutes": 0.2}


def results(table):
    return [{k: v for k, v in r.items() if k != "replay_seconds"} for r in table.to_pylist()]


@pytest.mark.parametrize("batch_rows", [1, 999, 65_536])
def test_the_stream_is_the_generated_trace_whatever_the_batch_size(batch_rows):
    spec = {**SPEC, "testDurationMinutes": 0.02} if batch_rows == 1 else SPEC
    whole = lc.workload.generate(spec, seed=4)
    reader = lc.workload.stream(spec, seed=4, batch_rows=batch_rows)
    assert isinstance(reader, pa.RecordBatchReader) and reader.schema == lc.trace.SCHEMA
    batches = list(reader)
    assert all(b.num_rows == batch_rows for b in batches[:-1]) and 0 < batches[-1].num_rows <= batch_rows
    assert all(b.schema == lc.trace.SCHEMA for b in batches)
    assert pa.Table.from_batches(batches).equals(whole)
    assert list(reader) == [], "a reader is read once"
    for broker in range(2):
        alone = lc.workload.stream(spec, seed=4, broker=broker, batch_rows=batch_rows).read_all()
        assert alone.equals(lc.workload.generate(spec, seed=4, broker=broker))
        mask = pa.compute.equal(whole["broker"], f"broker-{broker}")
        assert alone.equals(whole.filter(mask))


def test_the_native_stream_is_read_once():
    native = _native.stream_workload(lc.workload.resolve(SPEC), 1, None, 1000)
    first = pa.RecordBatchReader.from_stream(native)
    with pytest.raises(lc.ClosedError, match="read once"):
        pa.RecordBatchReader.from_stream(native)
    assert sum(b.num_rows for b in first) == lc.workload.generate(SPEC, seed=1).num_rows


def test_the_engine_takes_the_generators_dictionary_encoded_batches_as_they_are():
    from ledgercache.replay import run_session, tables

    native = _native.stream_workload(lc.workload.resolve(SPEC), 1, None, 5000)
    raw = list(pa.RecordBatchReader.from_stream(native))
    assert pa.types.is_dictionary(raw[0].schema.field("topic").type)
    configs = [lc.CacheConfig(cache_size_bytes=1 << 20)]
    as_they_are, _ = tables(run_session(lambda: iter(raw), configs))
    assert results(as_they_are) == results(lc.replay(lc.workload.generate(SPEC, seed=1), configs))
    # A dictionary key past its names (a foreign producer's bug) is an error naming the column.
    b = raw[0]
    i = b.schema.get_field_index("topic")
    bad = pa.DictionaryArray.from_arrays(pa.array([7] * b.num_rows, pa.int32()), pa.array(["t"]), safe=False)
    with pytest.raises(lc.InvalidArgumentError, match='column "topic": dictionary key 7'):
        _native.ReplaySession(configs).feed(b.set_column(i, b.schema.field(i), bad))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"batch_rows": 0}, "batch_rows"),
        ({"batch_rows": 1.5}, "batch_rows"),
        ({"broker": -1}, "broker"),
        ({"broker": 2}, "broker"),
        ({"seed": -3}, "seed"),
    ],
)
def test_bad_stream_arguments_name_themselves(kwargs, name):
    with pytest.raises(lc.InvalidArgumentError, match=name):
        lc.workload.stream(SPEC, **{"seed": 1, **kwargs})


def test_a_reader_replays_like_the_table_and_belady_takes_a_function():
    configs = [lc.CacheConfig(cache_size_bytes=1 << 20, strategy=s) for s in ("pip430", "lru")]
    table = lc.workload.generate(SPEC, seed=2)
    expected = results(lc.replay(table, configs))
    assert results(lc.replay(lc.workload.stream(SPEC, seed=2, batch_rows=5000), configs)) == expected
    belady = [lc.CacheConfig(cache_size_bytes=1 << 20, strategy="belady")]
    with pytest.raises(lc.UnsupportedError, match="trace: strategy 'belady' reads the trace twice"):
        lc.replay(lc.workload.stream(SPEC, seed=2), belady)
    # A function is called once per pass: the trace is generated twice.
    calls = []

    def again():
        calls.append(1)
        return lc.workload.stream(SPEC, seed=2)

    assert results(lc.replay(again, belady)) == results(lc.replay(table, belady))
    assert len(calls) == 2
    assert results(lc.replay(again, configs)) == expected and len(calls) == 3


@pytest.mark.parametrize("suffix", [".parquet", ".arrow", ".csv"])
def test_trace_write_takes_a_reader_batch_by_batch(tmp_path, suffix, monkeypatch):
    monkeypatch.setattr(lc.trace, "ROW_GROUP_ROWS", 10_000)
    table = lc.workload.generate(SPEC, seed=3)
    seen = []
    path = lc.trace.write(
        lc.workload.stream(SPEC, seed=3, batch_rows=4096),
        tmp_path / f"t{suffix}",
        on_batch=lambda b: seen.append(b.num_rows),
    )
    assert sum(seen) == table.num_rows and max(seen) == 4096
    back = pa.Table.from_batches(list(lc.trace.batches(path)), schema=lc.trace.SCHEMA)
    assert back.equals(table)
    if suffix == ".parquet":
        groups = pq.ParquetFile(path).metadata.num_row_groups
        assert groups == -(-table.num_rows // 12_288), "row groups of whole batches, about ROW_GROUP_ROWS rows each"
    # An empty trace still writes a valid, empty file.
    empty = lc.trace.write(table.slice(0, 0), tmp_path / f"empty{suffix}")
    if suffix != ".csv":
        assert sum(b.num_rows for b in lc.trace.batches(empty)) == 0


def test_the_estimate_is_within_a_factor_of_two():
    for name, spec in lc.workload.SCENARIOS.items():
        spec = {**spec, "testDurationMinutes": 0.3}
        e = lc.workload.estimate(spec)
        rows = sum(b.num_rows for b in lc.workload.stream(spec, seed=1))
        assert 0.5 <= rows / e["events"] <= 2.0, (name, rows, e)
        assert e["parquet_bytes"] == e["events"] * lc.workload.PARQUET_BYTES_PER_EVENT
        assert e["seconds"] > 0 and e["messages"] == pytest.approx(spec["producerRate"] * e["simulated_seconds"])
        # OMB's backlog test runs on while the backlog builds and drains.
        backlog = spec.get("consumerBacklogSizeGB", 0) > 0
        assert (e["simulated_seconds"] > 18) if backlog else (e["simulated_seconds"] == pytest.approx(18))
    with pytest.raises(lc.InvalidArgumentError, match="topics"):
        lc.workload.estimate({"topics": 0})


# ---- Generating a long trace streams ---------------------------------------------------------

# OpenMessaging Benchmark's 1-topic-16-partitions-1kb.yaml (its rate and shape).
OMB_1_TOPIC_16_PARTITIONS_1KB = {
    "name": "1 topic / 16 partitions / 1Kb",
    "topics": 1,
    "partitionsPerTopic": 16,
    "messageSize": 1024,
    "payloadFile": "payload/payload-1Kb.data",
    "subscriptionsPerTopic": 1,
    "consumerPerSubscription": 1,
    "producersPerTopic": 1,
    "producerRate": 50000,
    "consumerBacklogSizeGB": 0,
    "testDurationMinutes": 15,
}


# Runs Python code in a fresh process, then prints that process's peak resident memory. The peak is
# the kernel's VmHWM: counted from the process's exec, so the parent's memory (which a child's
# ru_maxrss, or RUSAGE_SELF inside it, inherits when forked from a large pytest process) does not count.
PROBE = """
import resource, sys
code = sys.argv[1]
sys.argv = sys.argv[1:]
exec(code)
try:
    peak_kib = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except OSError:
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"peak_kib={peak_kib}", file=sys.stderr)
"""


def _peak_mib(code, cwd, *args):
    """Runs ``code`` in a fresh Python process: its peak resident memory in MiB, seconds, stdout."""
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", PROBE, code, *args], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    peak = int(r.stderr.rsplit("peak_kib=", 1)[1])
    return peak / 1024, time.monotonic() - start, r.stdout


def test_generating_a_long_trace_streams(tmp_path):
    spec = tmp_path / "1-topic-16-partitions-1kb.json"
    spec.write_text(json.dumps(OMB_1_TOPIC_16_PARTITIONS_1KB))
    # About 2.2 M events; 4x that is about 8.8 M (the producer's 50 KB batches, one partition at a time).
    minutes = 30
    cli = "from ledgercache.cli import main; assert main(sys.argv[1:]) == 0"
    runs = {}
    for label, d in (("D", minutes), ("4D", 4 * minutes)):
        out = tmp_path / f"{label}.parquet"
        runs[label] = _peak_mib(
            cli, tmp_path, "generate", str(spec), "-o", str(out), "--duration-minutes", str(d), "--quiet"
        )
        assert runs[label][2].startswith("estimate: ~"), runs[label][2]
        runs[label] += (pq.ParquetFile(out).metadata.num_rows,)
    # The same 4D trace generated in memory as a table, then written: what streaming avoids.
    in_memory = (
        "import json, ledgercache as lc; s = json.load(open(sys.argv[1])); s['testDurationMinutes'] = "
        "float(sys.argv[2]); lc.trace.write(lc.workload.generate(s, seed=1), sys.argv[3])"
    )
    runs["4D in memory"] = (
        *_peak_mib(in_memory, tmp_path, str(spec), str(4 * minutes), "in-memory.parquet"),
        pq.ParquetFile(tmp_path / "in-memory.parquet").metadata.num_rows,
    )
    report = ", ".join(f"{k}: {mib:.0f} MiB peak, {rows:,} events, {s:.1f}s" for k, (mib, s, _, rows) in runs.items())
    print(f"\ngenerating a long trace: {report}")
    (short, _, _, short_rows), (long, _, _, long_rows), (whole, *_) = runs.values()
    assert 3.9 < long_rows / short_rows < 4.1 and short_rows > 2_000_000, report
    assert runs["4D in memory"][3] == long_rows
    assert long <= short + max(30, 0.15 * short), f"peak memory grew with the duration: {report}"
    assert whole > 3 * long, f"the in-memory run should need far more: {report}"
