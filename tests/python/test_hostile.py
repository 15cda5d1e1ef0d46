"""Hostile input from Python: damaged trace files, extreme values, interrupts, property tests.

Every failure is a ``LedgerCacheError`` naming the input; nothing aborts, hangs or wraps round.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgercache as lc
from ledgercache import protocol

REQUIRED = pa.schema([f for f in lc.trace.SCHEMA if f.name not in lc.trace.OPTIONAL])


def trace(rows) -> pa.Table:
    """Rows of (ts_us, op, topic, cursor, ledger, entry, count, size)."""
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in range(8)]
    ts, op, topic, cursor, ledger, entry, count, size = cols
    return pa.table(
        [
            list(ts),
            ["b"] * len(ts),
            list(topic),
            list(op),
            list(cursor),
            list(ledger),
            list(entry),
            list(count),
            list(size),
        ],
        schema=REQUIRED,
    )


def small_trace() -> pa.Table:
    rows = [(0, "open", "t", "c", None, None, 0, 0)]
    rows += [(e + 1, "add", "t", None, 1, e, 0, 100) for e in range(20)]
    rows += [(30, "read", "t", "c", None, None, 20, 0)]
    return trace(rows)


# ---- trace files that cannot be read ----------------------------------------------------------


def test_a_truncated_parquet_file_is_an_error_naming_it(tmp_path) -> None:
    good = tmp_path / "good.parquet"
    pq.write_table(small_trace(), good)
    data = good.read_bytes()
    bad = tmp_path / "truncated.parquet"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(lc.InvalidArgumentError, match=r"cannot read .*truncated\.parquet"):
        lc.replay(bad, lc.CacheConfig())
    # A directory holding it names the damaged file.
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "part-0.parquet").write_bytes(data[:100])
    with pytest.raises(lc.LedgerCacheError, match=r"part-0\.parquet"):
        lc.replay(tmp_path / "dir", lc.CacheConfig())


@pytest.mark.parametrize("content", [bytes(range(256)) * 8, b"\xff\xfe,\xc3\n1,2\n", b""])
def test_a_binary_csv_is_an_error_naming_it(tmp_path, content: bytes) -> None:
    path = tmp_path / "binary.csv"
    path.write_bytes(content)
    with pytest.raises(lc.InvalidArgumentError, match=r"binary\.csv"):
        lc.replay(path, lc.CacheConfig())


def test_a_damaged_arrow_file_is_an_error_naming_it(tmp_path) -> None:
    path = tmp_path / "damaged.arrow"
    path.write_bytes(b"ARROW1" + bytes(200))
    with pytest.raises(lc.InvalidArgumentError, match=r"damaged\.arrow"):
        lc.replay(path, lc.CacheConfig())


def test_a_bad_value_in_a_csv_names_the_file_and_the_column(tmp_path) -> None:
    path = lc.trace.write(small_trace(), tmp_path / "trace.csv")
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace(",100", ",lots")
    path.write_text("\n".join(lines) + "\n")
    # pyarrow's streaming CSV reader knows the column, not the row.
    with pytest.raises(lc.InvalidArgumentError, match=r"trace\.csv.*column #8.*'lots'"):
        lc.replay(path, lc.CacheConfig())


def test_engine_and_column_errors_name_the_trace_file(tmp_path) -> None:
    t = small_trace()
    pq.write_table(t.drop_columns(["size"]), tmp_path / "nosize.parquet")
    with pytest.raises(lc.InvalidArgumentError, match=r"'size' is missing.*nosize\.parquet"):
        lc.replay(tmp_path / "nosize.parquet", lc.CacheConfig())
    rows = t.to_pylist()
    rows[3]["op"] = "zzz"
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), tmp_path / "badrow.parquet")
    with pytest.raises(lc.InvalidArgumentError, match=r"row 3.*unknown op.*badrow\.parquet"):
        lc.replay(tmp_path / "badrow.parquet", lc.CacheConfig())


def test_replay_command_on_a_zero_row_trace_fails_clearly_and_writes_nothing(tmp_path) -> None:
    empty = tmp_path / "empty.parquet"
    pq.write_table(trace([]), empty)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "ledgercache.cli", "replay", str(empty), "-o", str(out), "--strategy", "lru"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done
    assert "has no events" in done.stderr and "empty.parquet" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()
    # The library answers an empty trace with an empty table, which the report prints.
    summary = lc.replay(trace([]), lc.CacheConfig())
    assert summary.num_rows == 0
    assert "hit ratio" in lc.report.comparison_text(summary)


# ---- extreme values in a trace ----------------------------------------------------------------


def test_a_gap_of_2_to_the_40_entries_and_a_read_of_2_to_the_31_finish_at_once() -> None:
    rows = [
        (0, "open", "t", "c", 1, 0, 0, 0),
        (1, "add", "t", None, 1, 0, 0, 10),
        (2, "add", "t", None, 1, 1 << 40, 0, 10),
        (3, "read", "t", "c", None, None, 2**31 - 1, 0),
    ]
    start = time.monotonic()
    out = lc.replay(trace(rows), [lc.CacheConfig(strategy=s) for s in ("pip430", "legacy", "lru", "belady")])
    assert time.monotonic() - start < 5
    assert out.column("entries_read").to_pylist() == [2] * 4


def test_adds_at_entry_2_to_the_63_minus_1_are_an_error_naming_the_row() -> None:
    rows = [(0, "add", "t", None, 1, 2**63 - 1, 0, 10), (1, "add", "t", None, 1, 2**63 - 1, 0, 10)]
    with pytest.raises(lc.InvalidArgumentError, match=r"row 0.*entry_id"):
        lc.replay(trace(rows), lc.CacheConfig())


def test_a_time_jump_to_10_to_the_15_us_replays_at_once() -> None:
    rows = [
        (0, "open", "t", "c", None, None, 0, 0),
        (1, "add", "t", None, 1, 0, 0, 10),
        (10**15, "add", "t", None, 1, 1, 0, 10),
        (10**15 + 1, "read", "t", "c", None, None, 5, 0),
    ]
    start = time.monotonic()
    out = lc.replay(trace(rows), [lc.CacheConfig(strategy=s) for s in ("pip430", "legacy")])
    assert time.monotonic() - start < 5
    assert out.column("entries_read").to_pylist() == [2, 2]


def _long_batch(n: int) -> pa.RecordBatch:
    """One record batch (replayed in one call) of n adds, each read by a cursor."""
    ts = np.repeat(np.arange(n, dtype=np.int64) * 1000, 2)
    ops = np.tile(np.array(["add", "read"], dtype=object), n)
    entry = np.repeat(np.arange(n, dtype=np.int64), 2)
    is_add = ops == "add"
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.concatenate([[0], ts])),
            pa.array(["b"] * (2 * n + 1)),
            pa.array(["t"] * (2 * n + 1)),
            pa.array(["open", *list(ops)]),
            pa.array(["c"] + [None if a else "c" for a in is_add]),
            pa.array([None] + [1 if a else None for a in is_add], pa.int64()),
            pa.array([None] + [int(e) if a else None for a, e in zip(is_add, entry, strict=True)], pa.int64()),
            pa.array([0] + [0 if a else 1 for a in is_add], pa.int32()),
            pa.array([0] + [100 if a else 0 for a in is_add], pa.int32()),
        ],
        schema=REQUIRED,
    )


def test_ctrl_c_interrupts_a_long_replay_of_one_batch() -> None:
    batch = _long_batch(300_000)
    configs = [
        lc.CacheConfig(strategy=s, cache_size_bytes=1 << 20) for s in ("pip430", "legacy", "lru", "segmented")
    ] * 3
    start = time.monotonic()
    lc.replay(batch, configs)
    full = time.monotonic() - start
    previous = signal.signal(signal.SIGALRM, signal.default_int_handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, full / 10)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            lc.replay(batch, configs)
        interrupted = time.monotonic() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # Without signal checks the handler would run only once the whole batch had replayed.
    assert interrupted < full / 2, (interrupted, full)


# ---- publish throttling: wire values at the ends of their types -------------------------------


def test_a_pause_of_java_forever_saturates_instead_of_wrapping() -> None:
    p = lc.Producer("t", 1)
    now = 10**18
    forever = protocol.encode_throttle_producer(1, 1, "TopicProduceQuotaExceeded", 2**63 - 1)
    protocol.decode_throttle_producer_receipt(p.on_throttle(now, forever))
    assert p.is_throttled(now)
    assert p.is_throttled(2**63 - 1), "forever means forever"
    _seq, deferred = p.send(now + 1)
    assert deferred == 2**64 - 1
    assert p.throttled_times() == {("TopicProduceQuotaExceeded", "t"): 2**63 - 1}
    p.on_throttle(now, forever)
    p.on_throttle(now, forever)  # three times 2^63-1 ms: the counter saturates too
    assert p.throttled_times() == {("TopicProduceQuotaExceeded", "t"): 2**64 - 1}


def test_empty_and_truncated_commands_are_rejected() -> None:
    full = protocol.encode_throttle_producer(7, 3, "MessageBufferSizeBreach", 250)
    for cut in range(len(full)):
        with pytest.raises(lc.InvalidArgumentError):
            protocol.decode_throttle_producer(full[:cut])
    with pytest.raises(lc.InvalidArgumentError):
        protocol.decode_throttle_producer_receipt(b"")
    with pytest.raises(lc.InvalidArgumentError):
        lc.Producer("t", 3).on_throttle(0, b"")


# ---- property tests ---------------------------------------------------------------------------

BOUNDED = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
I64 = st.one_of(
    st.integers(0, 8), st.sampled_from([2**63 - 1, 2**63 - 2, -(2**63), -1, 1 << 40]), st.integers(-(2**63), 2**63 - 1)
)
I32 = st.one_of(st.integers(0, 8), st.sampled_from([2**31 - 1, -(2**31)]), st.integers(-(2**31), 2**31 - 1))
ROW = st.tuples(
    st.one_of(st.integers(0, 1000), st.just(10**15), st.integers(0, 2**62)),
    st.sampled_from([*list(lc.trace.OPS), "bogus"]),
    st.sampled_from(["t0", "t1"]),
    st.sampled_from([None, "a", "b"]),
    st.none() | I64,
    st.none() | I64,
    st.none() | I32,
    st.none() | I32,
)


@BOUNDED
@given(st.lists(ROW, max_size=30), st.sampled_from(["pip430", "legacy", "segmented", "lru", "belady"]))
def test_any_trace_replays_or_raises_a_ledgercache_error(rows, strategy) -> None:
    ts, timed = 0, []
    for step, *rest in rows:
        ts = min(ts + step, 2**63 - 1)
        timed.append((ts, *rest))
    try:
        out = lc.replay(trace(timed), lc.CacheConfig(strategy=strategy, cache_size_bytes=1000))
    except lc.LedgerCacheError:
        return
    adds = sum(1 for r in timed if r[1] == "add")
    reads = sum(1 for r in timed if r[1] in ("read", "replay"))
    assert all(n <= adds * reads for n in out.column("entries_read").to_pylist())


@BOUNDED
@given(st.binary(max_size=64))
def test_protocol_decoders_take_any_bytes(data: bytes) -> None:
    for decode in (
        protocol.decode_throttle_producer,
        protocol.decode_throttle_producer_receipt,
        protocol.supports_throttle_producer,
    ):
        with contextlib.suppress(lc.InvalidArgumentError):
            decode(data)


@BOUNDED
@given(
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.sampled_from(protocol.THROTTLING_REASONS),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
)
def test_commands_round_trip_and_a_pause_never_wraps(request_id, producer_id, reason, pause, now) -> None:
    data = protocol.encode_throttle_producer(request_id, producer_id, reason, pause)
    assert protocol.decode_throttle_producer(data) == {
        "request_id": request_id,
        "producer_id": producer_id,
        "reason": reason,
        "pause_for_millis": pause,
    }
    p = lc.Producer("t", producer_id)
    assert protocol.decode_throttle_producer_receipt(p.on_throttle(now, data)) == request_id
    # Throttled from now until now + pause (saturated): never a time already past.
    assert p.is_throttled(now) == (pause > 0)
    end = now + pause * 1_000_000
    if pause > 0 and end - 1 <= 2**63 - 1:
        assert p.is_throttled(end - 1)


# ---- all of the above under a memory limit ----------------------------------------------------

HOSTILE_UNDER_LIMIT = r"""
import resource, sys, time
import pyarrow as pa
import ledgercache as lc
sys.path.insert(0, sys.argv[1])
from test_hostile import trace

# pyarrow imports pandas (when installed) at its first conversion of Python objects, which
# `import ledgercache` no longer makes: make one before the limit, which is for our allocations.
pa.array(["warm-up"])
limit = 1 << 30  # data segment and anonymous mappings: an allocation sized by a value fails here
resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
cases = {
    "gap 2^40, read 2^31-1": lambda: lc.replay(trace([
        (0, "open", "t", "c", 1, 0, 0, 0), (1, "add", "t", None, 1, 0, 0, 10),
        (2, "add", "t", None, 1, 1 << 40, 0, 10), (3, "read", "t", "c", None, None, 2**31 - 1, 0)]),
        [lc.CacheConfig(strategy=s) for s in ("pip430", "pip430-fifo", "legacy", "segmented", "lru", "belady")]),
    "two adds at 2^63-1": lambda: lc.replay(trace([
        (0, "add", "t", None, 1, 2**63 - 1, 0, 10), (1, "add", "t", None, 1, 2**63 - 1, 0, 10)]), lc.CacheConfig()),
    "ts_us jump to 1e15": lambda: lc.replay(trace([
        (0, "open", "t", "c", None, None, 0, 0), (1, "add", "t", None, 1, 0, 0, 10),
        (10**15, "add", "t", None, 1, 1, 0, 10), (10**15 + 1, "read", "t", "c", None, None, 5, 0)]),
        [lc.CacheConfig(strategy=s) for s in ("pip430", "legacy")]),
    "huge topics": lambda: lc.workload.stream({"topics": 100_000_000, "consumerPerSubscription": 4}),
    "huge partitions": lambda: lc.workload.stream({"partitionsPerTopic": 2**31 - 1}),
    "huge consumers": lambda: lc.workload.stream({"consumerPerSubscription": 2**31 - 1}),
    "huge brokers": lambda: lc.workload.generate({"brokers": 2**31 - 1, "testDurationMinutes": 0.01}),
    "huge duration": lambda: lc.workload.generate({"testDurationMinutes": 1e12}),
    "huge message size": lambda: lc.workload.stream({"messageSize": 2**32 - 1}),
}
for name, run in cases.items():
    start = time.monotonic()
    try:
        run()
        outcome = "result"
    except lc.LedgerCacheError as e:
        outcome = type(e).__name__
    took = time.monotonic() - start
    print(f"{name}|{outcome}|{took:.2f}", flush=True)
"""


def test_hostile_traces_and_specs_end_within_seconds_under_a_memory_limit(tmp_path) -> None:
    import os
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c", HOSTILE_UNDER_LIMIT, os.path.dirname(__file__)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, f"aborted or failed under the limit: {child.returncode}\n{child.stderr[-2000:]}"
    results = {
        name: (outcome, float(took)) for name, outcome, took in (line.split("|") for line in child.stdout.splitlines())
    }
    assert len(results) == 9, child.stdout
    for name, (_outcome, took) in results.items():
        assert took < 10, f"{name} took {took:.1f} s"
    assert results["gap 2^40, read 2^31-1"][0] == "result"
    assert results["ts_us jump to 1e15"][0] == "result"
    assert results["two adds at 2^63-1"][0] == "InvalidArgumentError"
    for name in (
        "huge topics",
        "huge partitions",
        "huge consumers",
        "huge brokers",
        "huge duration",
        "huge message size",
    ):
        assert results[name][0] in ("ResourceLimitError", "InvalidArgumentError"), (name, results[name])
