"""A topic's life on a broker in the replay: unload, load, reconnects, and time to warm."""

import pyarrow as pa
import pytest

import ledgercache as lc

SIZE = 100


def trace(rows):
    """Rows of (ts_ms, broker, op, topic, cursor, ledger, entry, count, size), sorted by time."""
    schema = pa.schema([f for f in lc.trace.SCHEMA if f.name not in lc.trace.OPTIONAL])
    cols = {f.name: [] for f in schema}
    for ts_ms, broker, op, topic, cursor, ledger, entry, count, size in sorted(rows, key=lambda r: r[0]):
        for k, v in zip(cols, (ts_ms * 1000, broker, topic, op, cursor, ledger, entry, count, size), strict=True):
            cols[k].append(v)
    return pa.table(cols, schema=schema)


def moved_topic():
    """Topic t on broker a: subscriptions x, y and z read ledger 1's entries 0..9 as they are
    published; x reads all ten, y and z five. At 2.0 s a unloads t (a restart); at 2.1 s b loads it
    (ledger 1's entries 0..9 in storage, 100 bytes each) and the consumers reconnect at their read
    positions (mark-delete + 1). At 3 s y reads its five entries (misses) and z the same five; new
    entries go to ledger 2. Broker b also has topic u, a tailing reader hitting every second, so
    its hit ratio before the load is 1.0."""
    rows = [(0, "a", "open", "t", c, None, None, 0, 0) for c in "xyz"]
    rows += [(100 + e, "a", "add", "t", None, 1, e, 0, SIZE) for e in range(10)]
    rows += [
        (1000, "a", "read", "t", "x", None, None, 10, 0),
        (1000, "a", "read", "t", "y", None, None, 5, 0),
        (1000, "a", "read", "t", "z", None, None, 5, 0),
        (1001, "a", "ack", "t", "x", 1, 9, 0, 0),
        (1001, "a", "ack", "t", "y", 1, 4, 0, 0),
        (1001, "a", "ack", "t", "z", 1, 4, 0, 0),
        (2000, "a", "unload", "t", None, None, None, 0, 0),
        (2100, "b", "load", "t", None, 1, 0, 10, SIZE),
        (2200, "b", "open", "t", "x", 1, 10, 0, 0),
        (2200, "b", "open", "t", "y", 1, 5, 0, 0),
        (2200, "b", "open", "t", "z", 1, 5, 0, 0),
        (3000, "b", "read", "t", "y", None, None, 5, 0),
        (3001, "b", "read", "t", "z", None, None, 5, 0),
    ]
    rows += [(3500 + e, "b", "add", "t", None, 2, e, 0, SIZE) for e in range(3)]
    rows += [(4000, "b", "read", "t", c, None, None, 3, 0) for c in "xyz"]
    # Broker b's own topic u: one entry published and read each second, from second 0 to 5.
    rows += [(0, "b", "open", "u", "w", None, None, 0, 0)]
    for s in range(6):
        rows += [(s * 1000 + 500, "b", "add", "u", None, 7, s, 0, SIZE)]
        rows += [(s * 1000 + 600, "b", "read", "u", "w", None, None, 1, 0)]
    return trace(rows)


def by_broker(table):
    return {r["broker"]: r for r in table.to_pylist()}


def series_of(series, broker):
    return {r["second"]: r for r in series.to_pylist() if r["broker"] == broker}


def test_a_moved_topic_is_dropped_from_its_old_broker_and_read_from_storage_on_the_new():
    summary, series = lc.replay(moved_topic(), lc.CacheConfig(strategy="pip430"), with_timeseries=True)
    rows = by_broker(summary)
    a, b = series_of(series, "a"), series_of(series, "b")
    # Broker a: the unload empties the cache of t's entries (y and z had five still to read),
    # counted as invalidated.
    assert a[1]["cache_bytes"] > 0
    assert a[2]["unloads"] == 1 and a[2]["cache_bytes"] == 0
    assert rows["a"]["invalidated_entries"] >= 5
    # Broker b: the load second is marked; y's read of the backlog goes to storage (a miss each,
    # one storage read) and, under PIP-430, z behind it hits what that read cached.
    assert b[2]["loads"] == 1 and b[2]["reopens"] == 0, "first opens on b are not reconnects"
    assert (b[3]["misses"], b[3]["storage_read_ops"]) == (5, 1)
    assert b[3]["hits"] == 5 + 1, "z's five from y's storage read, and u's tailing read"
    assert rows["b"]["storage_read_ops"] == 1
    # Time to warm: the load second's baseline is u's 1.0; second 3 is cold (6 of 11), second 4
    # back (x, y, z and u hit): one cold second after the event.
    assert b[2]["time_to_warm_seconds"] == 1.0
    assert rows["b"]["lifecycle_events"] == 1
    assert rows["b"]["mean_time_to_warm_seconds"] == rows["b"]["max_time_to_warm_seconds"] == 1.0
    # Broker a's unload second only took readers away: nothing to warm, no time to warm (timing
    # from it would count the time until topics come back as cold).
    assert a[2]["time_to_warm_seconds"] is None
    assert rows["a"]["lifecycle_events"] == 1 and rows["a"]["max_time_to_warm_seconds"] is None
    assert all(s["time_to_warm_seconds"] is None for sec, s in b.items() if sec != 2)


def test_without_storage_reads_under_way_the_old_broker_keeps_nothing_of_the_topic():
    """Every design empties the topic at the unload, as RangeEntryCacheImpl.clear does (the
    segmented ring, which frees no space early, only stops finding them, as for a deleted ledger)."""
    for design in ("pip430", "pip430-fifo", "lru", "legacy", "belady"):
        _, series = lc.replay(
            moved_topic(), lc.CacheConfig(strategy=design, cache_size_bytes=1 << 20), with_timeseries=True
        )
        assert series_of(series, "a")[2]["cache_bytes"] == 0, design


def test_a_reconnect_counts_as_a_reopen():
    rows = [(0, "b1", "open", "t", "c", None, None, 0, 0)]
    rows += [(10 + e, "b1", "add", "t", None, 1, e, 0, SIZE) for e in range(4)]
    rows += [
        (500, "b1", "read", "t", "c", None, None, 2, 0),
        (1500, "b1", "close", "t", "c", None, None, 0, 0),
        (1600, "b1", "open", "t", "c", None, None, 0, 0),
        # A second consumer of a cursor already connected is no reconnect.
        (1700, "b1", "open", "t", "c", None, None, 0, 0),
        (2500, "b1", "read", "t", "c", None, None, 2, 0),
    ]
    summary, series = lc.replay(trace(rows), lc.CacheConfig(strategy="pip430"), with_timeseries=True)
    s = series_of(series, "b1")
    assert [s[sec]["reopens"] for sec in sorted(s)] == [0, 1, 0]
    assert summary.column("lifecycle_events").to_pylist() == [1]
    # The baseline is second 0's reads (both hits); second 2's reads hit: back at once.
    assert s[1]["time_to_warm_seconds"] == 0.0


def test_a_trace_without_lifecycle_rows_has_no_events_and_null_warm_times():
    rows = [(0, "b1", "open", "t", "c", None, None, 0, 0)]
    for e in range(5):
        rows += [
            (e * 1000, "b1", "add", "t", None, 1, e, 0, SIZE),
            (e * 1000 + 1, "b1", "read", "t", "c", None, None, 1, 0),
        ]
    summary, series = lc.replay(trace(rows), lc.CacheConfig(), with_timeseries=True)
    row = summary.to_pylist()[0]
    assert row["lifecycle_events"] == 0
    assert row["mean_time_to_warm_seconds"] is None and row["max_time_to_warm_seconds"] is None
    assert series.column("time_to_warm_seconds").null_count == series.num_rows == 5
    assert series.column("misses").to_pylist() == [0] * 5
    for name in ("loads", "unloads", "reopens", "storage_read_ops"):
        assert series.column(name).to_pylist() == [0] * 5, name


def test_reads_of_a_cursor_its_topic_forgot_name_the_row():
    rows = [
        (0, "b1", "open", "t", "c", None, None, 0, 0),
        (1, "b1", "add", "t", None, 1, 0, 0, SIZE),
        (2, "b1", "unload", "t", None, None, None, 0, 0),
        (3, "b1", "read", "t", "c", None, None, 1, 0),
    ]
    with pytest.raises(lc.errors.InvalidArgumentError, match=r"row 3: \"read\" on cursor \"c\".*unloaded"):
        lc.replay(trace(rows), lc.CacheConfig())


@pytest.mark.parametrize(
    ("entry", "count", "size", "column"),
    [(0, -1, SIZE, "count"), (0, 5, -1, "size"), (2**63 - 3, 5, SIZE, "entry_id"), (-1, 5, SIZE, "entry_id")],
)
def test_a_bad_load_row_names_its_row_and_column(entry, count, size, column):
    rows = [(0, "b1", "open", "t", "c", None, None, 0, 0), (1, "b1", "load", "t", None, 1, entry, count, size)]
    with pytest.raises(lc.errors.InvalidArgumentError, match=rf'row 1, column "{column}"'):
        lc.replay(trace(rows), lc.CacheConfig())


def test_a_load_of_any_length_costs_nothing_and_reads_at_its_mean_size():
    rows = [
        (0, "b1", "load", "t", None, 1, 0, 2**31 - 1, SIZE),
        (1, "b1", "open", "t", "c", 1, 2**31 - 4, 0, 0),
        (2, "b1", "read", "t", "c", None, None, 3, 0),
    ]
    summary = lc.replay(trace(rows), lc.CacheConfig()).to_pylist()[0]
    assert (summary["misses"], summary["storage_read_bytes"]) == (3, 3 * SIZE)


def single_broker_moves():
    """Topic t unloaded from and loaded back onto one broker (a restart with one broker)."""
    rows = [(0, "b1", "open", "t", "c", None, None, 0, 0)]
    rows += [(10 + e, "b1", "add", "t", None, 1, e, 0, SIZE) for e in range(6)]
    rows += [
        (500, "b1", "read", "t", "c", None, None, 3, 0),
        (1000, "b1", "unload", "t", None, None, None, 0, 0),
        (1100, "b1", "load", "t", None, 1, 0, 6, SIZE),
        (1200, "b1", "open", "t", "c", 1, 3, 0, 0),
        (1300, "b1", "add", "t", None, 2, 0, 0, SIZE),
        (2000, "b1", "read", "t", "c", None, None, 4, 0),
    ]
    return trace(rows)


def test_export_requests_takes_lifecycle_rows_and_adds_no_request_for_them(tmp_path):
    path = tmp_path / "requests.csv"
    n = lc.export_requests(single_broker_moves(), lc.CacheConfig(strategy="lru"), path, format="csv")
    # Seven publishes and seven entries read; the unload and the load are no requests.
    assert n == 14
    ops = [line.split(",")[-1] for line in path.read_text().splitlines()[1:]]
    assert ops.count("insert") == 7 and ops.count("read") == 7


def test_the_memory_model_follows_an_unload():
    """The unload empties the cache of the topic, so its buffers are released at the next sample;
    the memory model replays lifecycle rows under every design."""
    configs = [lc.CacheConfig(strategy=d["name"], memory_model=True, copy_entries=False) for d in lc.designs()]
    summary, series = lc.replay(single_broker_moves(), configs, with_timeseries=True)
    assert all(r["peak_retained_bytes"] is not None for r in summary.to_pylist())
    assert all(r["misses"] >= 3 for r in summary.to_pylist()), "entries 3..5 come back from storage"
    assert series.column("loads").to_pylist().count(1) == len(configs)
