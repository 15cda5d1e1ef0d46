"""Inputs that used to spin, read without bound or fail without naming the argument (issue 59):
each would hang, take the memory or raise an anonymous OverflowError without its fix."""

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import ledgercache as lc
from ledgercache import _native, protocol

# ---- integer arguments out of their Rust type's range name the argument ------------------------

HUGE = (2**63, 2**64, 2**200)
NEGATIVE = (-1, -(2**63) - 1, -(2**200))
# Past u64 (2**63 fits).
HUGE_U64 = (2**64, 2**200)
SIGNED_LOW = (-(2**63) - 1, -(2**200))


def _cache():
    return lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20)).get_cache("t")


def _throttle_command() -> bytes:
    return protocol.encode_throttle_producer(1, 1, "TopicProduceQuotaExceeded", 10)


# (what is called, the argument's name, the values it refuses): every public integer argument of
# the bindings in src/python/{config,cache,position,storage,workload,throttle,clock,ledger}.rs.
U32_HIGH = (2**32, 2**64, 2**200)


def _cursor():
    manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20))
    return lc.ManagedLedger("t", manager, lc.MemoryStorage()).open_cursor("c")


def _ledger(**kw):
    return lc.ManagedLedger(
        "t", lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20)), lc.MemoryStorage(), **kw
    )


CASES = [
    ("ManualClock", lc.ManualClock, "start_ns", HUGE + NEGATIVE),
    ("ManualClock", lambda v: lc.ManualClock(start_ns=v), "start_ns", HUGE + NEGATIVE),
    ("ManualClock.advance_ms", lambda v: lc.ManualClock().advance_ms(v), "ms", HUGE + NEGATIVE),
    ("ManualClock.advance_ns", lambda v: lc.ManualClock().advance_ns(v), "ns", HUGE + NEGATIVE),
    *[
        ("ManagedLedger", lambda v, k=k: _ledger(**{k: v}), k, HUGE_U64 + NEGATIVE)
        for k in ("max_entries_per_ledger", "max_bytes_per_ledger", "min_rollover_ms", "max_rollover_ms")
    ],
    ("ManagedLedger.delete_ledger", lambda v: _ledger().delete_ledger(v), "ledger_id", HUGE + SIGNED_LOW),
    *[
        (f"ManagedCursor.{m}", lambda v, m=m: getattr(_cursor(), m)(v), "n", HUGE_U64 + NEGATIVE)
        for m in ("read_entries", "read_data", "read_entries_async", "read_replay", "read_replay_async", "skip")
    ],
    ("ManagedCursor.is_epoch_outdated", lambda v: _cursor().is_epoch_outdated(v), "epoch", U32_HIGH + NEGATIVE),
    (
        "ManagedCursor.set_read_position",
        lambda v: _cursor().set_read_position(lc.Position(1, 0), v),
        "expected_epoch",
        U32_HIGH + NEGATIVE,
    ),
    ("Position", lambda v: lc.Position(v, 0), "ledger_id", HUGE + SIGNED_LOW),
    ("Position", lambda v: lc.Position(0, v), "entry_id", HUGE + SIGNED_LOW),
    ("CacheConfig", lambda v: lc.CacheConfig(cache_size_bytes=v), "cache_size_bytes", HUGE + NEGATIVE),
    ("CacheConfig", lambda v: lc.CacheConfig(eviction_interval_ms=v), "eviction_interval_ms", HUGE + NEGATIVE),
    ("CacheConfig", lambda v: lc.CacheConfig(storage_read_latency_ms=v), "storage_read_latency_ms", HUGE + NEGATIVE),
    (
        "CacheConfig.from_broker_conf",
        lambda v: lc.CacheConfig.from_broker_conf({}, direct_memory_bytes=v),
        "direct_memory_bytes",
        HUGE_U64 + NEGATIVE,
    ),
    (
        "EntryCacheManager.evict_bytes",
        lambda v: lc.EntryCacheManager(lc.CacheConfig()).evict_bytes(v),
        "n",
        HUGE + NEGATIVE,
    ),
    (
        "EntryCache.insert",
        lambda v: _cache().insert(lc.Position(1, 0), b"x", expected_reads=v),
        "expected_reads",
        HUGE + NEGATIVE,
    ),
    ("EntryCache.insert", lambda v: _cache().insert(lc.Position(1, 0), b"x", size=v), "size", HUGE + NEGATIVE),
    (
        "EntryCache.insert_batch",
        lambda v: _cache().insert_batch(v, 0, pa.array([b"x"])),
        "ledger_id",
        HUGE + SIGNED_LOW,
    ),
    (
        "EntryCache.insert_batch",
        lambda v: _cache().insert_batch(1, v, pa.array([b"x"])),
        "first_entry_id",
        HUGE + SIGNED_LOW,
    ),
    ("MemoryStorage.read", lambda v: lc.MemoryStorage().read(v, 0, 0), "ledger_id", HUGE + SIGNED_LOW),
    ("MemoryStorage.read", lambda v: lc.MemoryStorage().read(1, v, 0), "first", HUGE + SIGNED_LOW),
    ("MemoryStorage.read", lambda v: lc.MemoryStorage().read(1, 0, v), "last", HUGE + SIGNED_LOW),
    (
        "CallableStorage",
        lambda v: lc.CallableStorage(lambda *a: [], ledgers={"a": [(1, v)]}),
        "ledgers",
        HUGE_U64 + NEGATIVE,
    ),
    ("stream_workload", lambda v: _native.stream_workload({"topics": 1}, v), "seed", HUGE_U64 + NEGATIVE),
    ("stream_workload", lambda v: _native.stream_workload({"topics": 1}, 0, broker=v), "broker", HUGE + NEGATIVE),
    (
        "stream_workload",
        lambda v: _native.stream_workload({"topics": 1}, 0, batch_rows=v),
        "batch_rows",
        HUGE + NEGATIVE,
    ),
    (
        "stream_workload",
        lambda v: _native.stream_workload({"topics": 1}, 0, memory_budget=v),
        "memory_budget",
        HUGE_U64 + NEGATIVE,
    ),
    ("check_workload", lambda v: _native.check_workload({"topics": 1}, broker=v), "broker", HUGE + NEGATIVE),
    (
        "check_workload",
        lambda v: _native.check_workload({"topics": 1}, memory_budget=v),
        "memory_budget",
        HUGE_U64 + NEGATIVE,
    ),
    (
        "workload.generate",
        lambda v: lc.workload.generate({"topics": 1, "testDurationMinutes": 0.01}, seed=v),
        "seed",
        HUGE_U64 + NEGATIVE,
    ),
    (
        "PublishRateLimiter.set_connection_limits",
        lambda v: lc.PublishRateLimiter().set_connection_limits(max_pending_publish_requests=v),
        "max_pending_publish_requests",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.set_connection_limits",
        lambda v: lc.PublishRateLimiter().set_connection_limits(max_publish_buffer_bytes=v),
        "max_publish_buffer_bytes",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.set_connection_limits",
        lambda v: lc.PublishRateLimiter().set_connection_limits(num_io_threads=v),
        "num_io_threads",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.set_publish_persist_latency",
        lambda v: lc.PublishRateLimiter().set_publish_persist_latency(v),
        "latency_ns",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.on_publish",
        lambda v: lc.PublishRateLimiter().on_publish(v, "t", 0, 1),
        "now_ns",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.on_publish",
        lambda v: lc.PublishRateLimiter().on_publish(0, "t", v, 1),
        "connection",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.on_publish",
        lambda v: lc.PublishRateLimiter().on_publish(0, "t", 0, v),
        "size",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.on_publish",
        lambda v: lc.PublishRateLimiter().on_publish(0, "t", 0, 1, messages=v),
        "messages",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.on_publish_persisted",
        lambda v: lc.PublishRateLimiter().on_publish_persisted(v, 1),
        "connection",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.on_publish_persisted",
        lambda v: lc.PublishRateLimiter().on_publish_persisted(0, v),
        "size",
        HUGE + NEGATIVE,
    ),
    (
        "PublishRateLimiter.connection_recovered",
        lambda v: lc.PublishRateLimiter().connection_recovered(v),
        "connection",
        HUGE + NEGATIVE,
    ),
    ("Producer", lambda v: lc.Producer("t", v), "producer_id", HUGE + NEGATIVE),
    ("Producer", lambda v: lc.Producer("t", 1, send_timeout_ms=v), "send_timeout_ms", HUGE + NEGATIVE),
    (
        "Producer.on_throttle",
        lambda v: lc.Producer("t", 1).on_throttle(v, _throttle_command()),
        "now_ns",
        HUGE + NEGATIVE,
    ),
    ("Producer.is_throttled", lambda v: lc.Producer("t", 1).is_throttled(v), "now_ns", HUGE + NEGATIVE),
    ("Producer.throttle_reason", lambda v: lc.Producer("t", 1).throttle_reason(v), "now_ns", HUGE + NEGATIVE),
    ("Producer.send", lambda v: lc.Producer("t", 1).send(v), "now_ns", HUGE + NEGATIVE),
    ("Producer.acknowledge", lambda v: lc.Producer("t", 1).acknowledge(v), "sequence", HUGE + NEGATIVE),
    ("Producer.expire", lambda v: lc.Producer("t", 1).expire(v), "now_ns", HUGE + NEGATIVE),
    ("PartitionedProducer", lambda v: lc.PartitionedProducer("t", v), "partitions", HUGE + NEGATIVE),
    (
        "PartitionedProducer",
        lambda v: lc.PartitionedProducer("t", 2, first_producer_id=v),
        "first_producer_id",
        HUGE + NEGATIVE,
    ),
    (
        "PartitionedProducer",
        lambda v: lc.PartitionedProducer("t", 2, send_timeout_ms=v),
        "send_timeout_ms",
        HUGE + NEGATIVE,
    ),
    (
        "PartitionedProducer.is_throttled",
        lambda v: lc.PartitionedProducer("t", 2).is_throttled(v),
        "now_ns",
        HUGE + NEGATIVE,
    ),
    (
        "PartitionedProducer.is_partition_throttled",
        lambda v: lc.PartitionedProducer("t", 2).is_partition_throttled(v, 0),
        "partition",
        HUGE + NEGATIVE,
    ),
    (
        "PartitionedProducer.is_partition_throttled",
        lambda v: lc.PartitionedProducer("t", 2).is_partition_throttled(0, v),
        "now_ns",
        HUGE + NEGATIVE,
    ),
    (
        "PartitionedProducer.on_throttle",
        lambda v: lc.PartitionedProducer("t", 2).on_throttle(v, 0, _throttle_command()),
        "partition",
        HUGE + NEGATIVE,
    ),
    (
        "PartitionedProducer.on_throttle",
        lambda v: lc.PartitionedProducer("t", 2).on_throttle(0, v, _throttle_command()),
        "now_ns",
        HUGE + NEGATIVE,
    ),
    ("PartitionedProducer.send", lambda v: lc.PartitionedProducer("t", 2).send(v), "now_ns", HUGE + NEGATIVE),
    (
        "encode_throttle_producer",
        lambda v: protocol.encode_throttle_producer(v, 1, "TopicProduceQuotaExceeded", 1),
        "request_id",
        HUGE + NEGATIVE,
    ),
    (
        "encode_throttle_producer",
        lambda v: protocol.encode_throttle_producer(1, v, "TopicProduceQuotaExceeded", 1),
        "producer_id",
        HUGE + NEGATIVE,
    ),
    (
        "encode_throttle_producer",
        lambda v: protocol.encode_throttle_producer(1, 1, "TopicProduceQuotaExceeded", v),
        "pause_for_millis",
        HUGE + NEGATIVE,
    ),
    (
        "encode_throttle_producer_receipt",
        protocol.encode_throttle_producer_receipt,
        "request_id",
        HUGE + NEGATIVE,
    ),
]


@pytest.mark.parametrize(
    ("call", "name", "value"),
    [
        pytest.param(call, name, v, id=f"{what}-{name}-{v if abs(v) < 2**100 else ('-' if v < 0 else '') + 'big'}")
        for what, call, name, values in CASES
        for v in values
    ],
)
def test_out_of_range_integers_name_their_argument(call, name, value):
    try:
        call(value)
    except (lc.LedgerCacheError, ValueError, OverflowError) as e:
        assert name in str(e), f"{type(e).__name__}: {e}"  # noqa: PT017 -- the call is one of many; pytest.fail below covers acceptance
    else:
        pytest.fail(f"{name}={value} was accepted")


def test_the_named_error_is_an_invalid_argument_error_with_the_range():
    with pytest.raises(
        lc.InvalidArgumentError,
        match=r"invalid ledger_id: must be in \[-9223372036854775808, "
        r"9223372036854775807\], got 9223372036854775808",
    ):
        lc.Position(2**63, 0)
    with pytest.raises(lc.InvalidArgumentError, match=r"invalid seed: .*got a larger int"):
        _native.stream_workload({"topics": 1}, 2**200)
    with pytest.raises(
        lc.InvalidArgumentError,
        match=r"invalid start_ns: must be in \[0, 9223372036854775807\], "
        r"got 9223372036854775808",
    ):
        lc.ManualClock(2**63)
    with pytest.raises(lc.InvalidArgumentError, match=r"invalid ms: must be in \[0, 9223372036854775807\], got -1"):
        lc.ManualClock().advance_ms(-1)
    with pytest.raises(lc.InvalidArgumentError, match=r"invalid ns: .*got a larger int"):
        lc.ManualClock().advance_ns(2**200)
    with pytest.raises(
        lc.InvalidArgumentError,
        match=r"invalid n: must be in \[0, 18446744073709551615\], "
        r"got 18446744073709551616",
    ):
        _cursor().read_entries(2**64)
    with pytest.raises(lc.InvalidArgumentError, match=r"invalid expected_epoch: must be in \[0, 4294967295\]"):
        _cursor().set_read_position(lc.Position(1, 0), -1)
    assert lc.ManualClock(2**63 - 1).now_ns() == 2**63 - 1
    # Values in range and wrong types behave as before.
    assert lc.Position(2**63 - 1, -1).entry_id == -1
    with pytest.raises(TypeError):
        lc.Position("1", 0)
    with pytest.raises(TypeError):
        lc.Position(1.5, 0)


# ---- work and reads bounded by the data, not by values in it ------------------------------------


def run_bounded(code: str, timeout: float = 120) -> str:
    """Runs ``code`` in a fresh interpreter, failing the test if it does not end within ``timeout``
    seconds (the unfixed cases ran for hours or until memory ran out)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s")
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_readers_refuse_a_device_or_a_file_past_their_bound(tmp_path):
    zero_yaml = tmp_path / "zero.yaml"
    zero_yaml.symlink_to("/dev/zero")
    out = run_bounded(f"""
        import ledgercache as lc
        from ledgercache import broker_stats, metrics
        for read in (lambda: lc.CacheConfig.from_broker_conf("/dev/zero"),
                     lambda: lc.workload.settings_from_broker_conf("/dev/zero"),
                     lambda: broker_stats.read("/dev/zero"),
                     lambda: metrics.read("/dev/zero"),
                     lambda: lc.workload.resolve({str(zero_yaml)!r}),
                     lambda: lc.workload.resolve({{"topics": 1}}, driver={str(zero_yaml)!r})):
            try:
                read()
                print("read")
            except lc.InvalidArgumentError as e:
                print(e)
    """)
    lines = out.splitlines()
    assert len(lines) == 6, out
    assert all("/dev/zero" in line or "zero.yaml" in line for line in lines), out
    # Each one line naming the file and why.
    assert "more than 4194304 bytes" in lines[0] and "more than 4194304 bytes" in lines[1]
    assert all("a device, not a file" in line for line in lines[2:]), out


def test_a_file_that_grows_past_the_bound_is_not_read_whole(tmp_path):
    from ledgercache._files import read_text

    path = tmp_path / "stats.json"
    path.write_bytes(b"{}" + b" " * 100)
    with pytest.raises(lc.InvalidArgumentError, match=r"stats\.json: 102 bytes, more than the 10 a stats file"):
        read_text(path, 10, "a stats file")
    fifo = tmp_path / "fifo"
    if hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
        writer = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}, 'wb').write(b'x' * 100_000)"])
        try:
            # A pipe has no size to check first: the read itself stops past the bound.
            with pytest.raises(lc.InvalidArgumentError, match="fifo: longer, more than the 10 a stats file"):
                read_text(fifo, 10, "a stats file")
        finally:
            writer.kill()
            writer.wait()


def test_a_workload_that_publishes_nothing_with_1000_consumers_ends_at_once():
    # Before: the consumers' acknowledgement tick ran every simulated second for 10^9 minutes.
    out = run_bounded(
        """
        import time
        import ledgercache as lc
        spec = {"topicDetails": [{"name": "t", "producerRate": 0, "messageSize": 100,
                 "subscriptions": [{"name": "s", "type": "Shared", "consumerRates": [100.0] * 1000}]}],
                "testDurationMinutes": 1e9}
        start = time.perf_counter()
        trace = lc.workload.stream(spec, seed=1).read_all()
        print(trace.num_rows, trace.column("op").to_pylist(), time.perf_counter() - start)
    """,
        timeout=60,
    )
    rows, ops, took = out.split(" ", 2)[0], out.split("[")[1].split("]")[0], float(out.rsplit(" ", 1)[1])
    assert (rows, ops) == ("1", "'open'")
    assert took < 5


def test_a_replay_with_a_ttl_of_a_century_jumps_over_an_idle_31_years():
    # Before: with an entry cached, every 10 ms eviction tick of the gap ran (10^11 of them).
    out = run_bounded(
        """
        import ledgercache as lc
        import pyarrow as pa
        # (ts_us, op, cursor, entry_id, count, size): as tests/hostile_traces.rs's century test.
        rows = [(0, "open", "c", None, 0, 0), (1000, "add", None, 0, 0, 10), (2000, "add", None, 1, 0, 10),
                (3000, "read", "c", None, 1, 0), (10**15, "add", None, 2, 0, 10), (10**15 + 1000, "read", "c", None, 5, 0)]
        schema = pa.schema([f for f in lc.trace.SCHEMA if f.name not in lc.trace.OPTIONAL])
        trace = pa.table({
            "ts_us": [r[0] for r in rows], "broker": ["b"] * len(rows), "topic": ["t"] * len(rows),
            "op": [r[1] for r in rows], "cursor": [r[2] for r in rows],
            "ledger_id": [None if r[3] is None else 1 for r in rows], "entry_id": [r[3] for r in rows],
            "count": [r[4] for r in rows], "size": [r[5] for r in rows]}, schema=schema)
        century_ms = 100 * 365 * 86_400_000
        for strategy in ("pip430", "pip430-fifo", "legacy"):
            config = lc.CacheConfig(strategy=strategy, eviction_time_threshold_ms=century_ms)
            s = lc.replay(trace, config)
            print(strategy, s.column("entries_read")[0].as_py(), s.column("misses")[0].as_py())
    """,
        timeout=60,
    )
    assert out.split("\n")[:3] == ["pip430 3 0", "pip430-fifo 3 0", "legacy 3 0"], out
