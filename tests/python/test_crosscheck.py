"""Cross-check against libCacheSim: the request stream a replay saw, run through libCacheSim's LRU,
FIFO and Belady, gives the same read hits as our lru, pip430-fifo and belady."""

import csv
import io
import random

import libcachesim as lcs
import pyarrow as pa
import pytest

import ledgercache as lc

INT64_MAX = 2**63 - 1


def _trace_builder():
    """The required trace columns only (the optional ones, messages and reason, may be left out),
    and a function that appends one row of broker b1, topic t."""
    schema = pa.schema([f for f in lc.trace.SCHEMA if f.name not in lc.trace.OPTIONAL])
    cols = {f.name: [] for f in schema}

    def row(ts, op, cursor=None, entry=None, count=0, size=0):
        for k, v in zip(
            cols, (ts, "b1", "t", op, cursor, None if entry is None else 1, entry, count, size), strict=True
        ):
            cols[k].append(v)

    return schema, cols, row


def random_trace(seed: int, events: int = 6000) -> pa.Table:
    rnd = random.Random(seed)
    schema, cols, row = _trace_builder()

    cursors = ["a", "b", "c"]
    for c in cursors:
        row(0, "open", c)
    published, ts = 0, 0
    for _ in range(events):
        ts += 1000
        if rnd.random() < 0.4:
            row(ts, "add", entry=published, size=100)
            published += 1
        elif rnd.random() < 0.03 and published:
            row(ts, "seek", rnd.choice(cursors), entry=rnd.randrange(published))
        else:
            row(ts, "read", rnd.choice(cursors), count=1)  # one entry a read: no batched lookups
    return pa.table(cols, schema=schema)


def libcachesim_read_hits(rows, cache) -> int:
    hits = 0
    for r in rows:
        req = lcs.Request()
        req.obj_id = int(r["obj_id"])
        req.obj_size = int(r["size"])
        nxt = int(r["next_access_vtime"])
        req.next_access_vtime = INT64_MAX if nxt < 0 else nxt
        req.clock_time = int(r["ts_us"]) // 1_000_000
        hit = cache.get(req)
        hits += hit and r["op"] == "read"
    return hits


def test_lru_fifo_and_belady_match_libcachesim(tmp_path):
    trace = random_trace(seed=11)
    path = tmp_path / "requests.csv"
    n = lc.export_requests(trace, None, path, format="csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert n == len(rows) > 1000
    capacity = 40  # entries of 100 bytes
    exact = dict(
        cache_size_bytes=capacity * 100,
        eviction_trigger_threshold=1.0,
        eviction_watermark=1.0,
        eviction_time_threshold_ms=10**12,
    )
    for ours, theirs in (("lru", lcs.LRU), ("pip430-fifo", lcs.FIFO), ("belady", lcs.Belady)):
        our_hits = lc.replay(trace, lc.CacheConfig(strategy=ours, **exact)).column("hits")[0].as_py()
        their_hits = libcachesim_read_hits(rows, theirs(capacity * 100))
        assert our_hits == their_hits, (ours, our_hits, their_hits)
    # Belady in object-count mode (every object size 1) gives the same answer.
    ones = [dict(r, size="1") for r in rows]
    assert (
        libcachesim_read_hits(ones, lcs.Belady(capacity))
        == lc.replay(trace, lc.CacheConfig(strategy="belady", **exact)).column("hits")[0].as_py()
    )


def test_oracle_general_file_reads_in_libcachesim(tmp_path):
    trace = random_trace(seed=5, events=3000)
    path = tmp_path / "requests.oracleGeneral.bin"
    n = lc.export_requests(trace, lc.CacheConfig(), path)
    assert path.stat().st_size == 24 * n
    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss_ratio, _ = lcs.LRU(40 * 100).process_trace(reader)
    csv_path = tmp_path / "requests.csv"
    lc.export_requests(trace, None, csv_path, format="csv")
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    cache = lcs.LRU(40 * 100)
    hits = 0
    for r in rows:
        req = lcs.Request()
        req.obj_id, req.obj_size = int(r["obj_id"]), int(r["size"])
        hits += cache.get(req)
    assert abs(miss_ratio - (1 - hits / len(rows))) < 1e-9


def libcachesim_lru_hits(path, requests: int, cache_bytes: int) -> int:
    """Hits of libCacheSim's LRU over an oracleGeneral file (every insert is a new object: a miss)."""
    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss_ratio, _ = lcs.LRU(cache_bytes).process_trace(reader)
    return requests - round(miss_ratio * requests)


def multi_entry_trace(seed: int, events: int = 4000) -> pa.Table:
    """Reads of up to 8 entries and seeks back: ranges whose hits and misses interleave."""
    rnd = random.Random(seed)
    schema, cols, row = _trace_builder()

    cursors = ["a", "b", "c"]
    for c in cursors:
        row(0, "open", c, entry=0)
    published, ts = 0, 0
    for _ in range(events):
        ts += 1000
        if rnd.random() < 0.5:
            row(ts, "add", entry=published, size=rnd.choice((100, 300, 1000)))
            published += 1
        elif rnd.random() < 0.1 and published:
            row(ts, "seek", rnd.choice(cursors), entry=rnd.randrange(published))
        else:
            row(ts, "read", rnd.choice(cursors), count=rnd.randint(1, 8))
    return pa.table(cols, schema=schema)


def test_export_is_the_stream_lru_replays(tmp_path):
    """A range read takes its hits before it reads its misses: the exported stream follows that
    order for the configuration given, so libCacheSim's LRU on it gives our lru's hits exactly,
    where the entries' own order (a cache that holds nothing) does not."""
    traces = {
        "fan-out": lc.workload.generate(
            {**lc.workload.SCENARIOS["tailing-fan-out"], "testDurationMinutes": 0.1}, seed=1
        ),
        "seek-storm": lc.workload.generate({**lc.workload.SCENARIOS["seek-storm"], "testDurationMinutes": 0.1}, seed=2),
        "ranges": multi_entry_trace(seed=3),
    }
    sizes = {"fan-out": (1 << 20, 4 << 20), "seek-storm": (1 << 20, 16 << 20), "ranges": (2_000, 20_000)}
    entry_order_differs = False
    for name, trace in traces.items():
        for size in sizes[name]:
            config = lc.CacheConfig(strategy="lru", cache_size_bytes=size)
            ours = lc.replay(trace, config).column("hits")[0].as_py()
            path = tmp_path / f"{name}-{size}.bin"
            n = lc.export_requests(trace, config, path)
            assert libcachesim_lru_hits(path, n, size) == ours, (name, size)
            plain = tmp_path / f"{name}-{size}-plain.bin"
            assert lc.export_requests(trace, None, plain) == n
            entry_order_differs |= libcachesim_lru_hits(plain, n, size) != ours
    # What the export wrote before: the check above can fail.
    assert entry_order_differs


def test_export_of_belady_reads_the_trace_twice(tmp_path):
    trace = multi_entry_trace(seed=4, events=2000)
    config = lc.CacheConfig(strategy="belady", cache_size_bytes=5_000)
    path = tmp_path / "belady.csv"
    n = lc.export_requests(trace, config, path, format="csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    ours = lc.replay(trace, config)
    assert n == len(rows) and sum(r["op"] == "read" for r in rows) == ours.column("entries_read")[0].as_py()
    # Its deciding pass's order: libCacheSim's Belady agrees on the ranges too.
    assert libcachesim_read_hits(rows, lcs.Belady(5_000)) == ours.column("hits")[0].as_py()
    with pytest.raises(lc.UnsupportedError, match="belady"):
        lc.export_requests(
            lc.workload.stream({"topics": 1, "producerRate": 100, "testDurationMinutes": 0.05}, seed=1),
            config,
            tmp_path / "one-shot.bin",
        )
