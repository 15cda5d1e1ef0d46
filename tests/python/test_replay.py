"""lc.replay and lc.trace: formats, errors that name the row, strategies side by side."""

import time

import pyarrow as pa
import pytest

import ledgercache as lc


def trace(rows, broker="b1"):
    # The required columns only: the optional ones (messages, reason) may be left out.
    schema = pa.schema([f for f in lc.trace.SCHEMA if f.name not in lc.trace.OPTIONAL])
    cols = {f.name: [] for f in schema}
    for ts_ms, op, topic, cursor, ledger, entry, count, size in rows:
        for k, v in zip(cols, (ts_ms * 1000, broker, topic, op, cursor, ledger, entry, count, size), strict=True):
            cols[k].append(v)
    return pa.table(cols, schema=schema)


def fanout(n=200, readers=3, broker="b1"):
    rows = [(0, "open", "t", f"s{i}", None, None, 0, 0) for i in range(readers)]
    for e in range(n):
        rows.append((e + 1, "add", "t", None, 1, e, 0, 1000))
        for i in range(readers):
            rows.append((e + 1, "read", "t", f"s{i}", None, None, 1, 0))
    return trace(rows, broker)


def test_replay_runs_every_strategy_and_reports_the_columns():
    configs = [lc.CacheConfig(cache_size_bytes=50_000, strategy=s) for s in ("pip430", "pip430-fifo", "lru", "belady")]
    out = lc.replay(fanout(), configs)
    assert out.num_rows == 4
    for column in (
        "broker",
        "strategy",
        "cache_size_bytes",
        "entries_read",
        "hits",
        "misses",
        "hit_ratio",
        "storage_read_ops",
        "storage_read_bytes",
        "evicted_entries",
        "invalidated_entries",
        "requeues",
        "peak_cache_bytes",
        "replay_seconds",
    ):
        assert column in out.column_names
    rows = out.to_pylist()
    assert all(r["entries_read"] == 600 for r in rows)
    assert all(r["hits"] == 600 and r["storage_read_ops"] == 0 for r in rows), rows


def test_multi_broker_traces_replay_per_broker_and_keep_row_numbers():
    both = pa.concat_tables([fanout(50, broker="b1"), fanout(50, broker="b2")]).sort_by([("ts_us", "ascending")])
    out = lc.replay(both, lc.CacheConfig(strategy="lru"))
    assert out.column("broker").to_pylist() == ["b1", "b2"]
    bad = both.to_pylist()
    bad[7]["op"] = "publish"
    with pytest.raises(ValueError, match=r"row 7.*unknown op"):
        lc.replay(pa.Table.from_pylist(bad, schema=lc.trace.SCHEMA), lc.CacheConfig())


@pytest.mark.parametrize("suffix", [".parquet", ".arrow", ".csv"])
def test_trace_files_round_trip(tmp_path, suffix):
    path = lc.trace.write(fanout(30), tmp_path / f"trace{suffix}")
    direct = lc.replay(fanout(30), lc.CacheConfig(strategy="lru")).drop_columns(["replay_seconds"])
    from_file = lc.replay(path, lc.CacheConfig(strategy="lru")).drop_columns(["replay_seconds"])
    assert from_file.equals(direct)


def test_bad_traces_fail_with_the_column_and_row():
    good = fanout(5)
    with pytest.raises(ValueError, match="'size' is missing"):
        lc.replay(good.drop_columns(["size"]), lc.CacheConfig())
    with pytest.raises(ValueError, match="'ledger_id' must be int64, is string"):
        lc.replay(good.set_column(5, "ledger_id", pa.array(["x"] * good.num_rows)), lc.CacheConfig())
    rows = good.to_pylist()
    rows[4]["ts_us"] = 0
    with pytest.raises(ValueError, match=r"row 4.*backwards"):
        lc.replay(pa.Table.from_pylist(rows, schema=lc.trace.SCHEMA), lc.CacheConfig())
    with pytest.raises(ValueError, match=r"row 1.*never opened"):
        lc.replay(
            trace([(0, "add", "t", None, 1, 0, 0, 10), (1, "read", "t", "ghost", None, None, 1, 0)]), lc.CacheConfig()
        )
    with pytest.raises(ValueError, match="does not exist"):
        lc.replay("/nonexistent/trace.parquet", lc.CacheConfig())
    with pytest.raises(TypeError):
        lc.replay(42, lc.CacheConfig())


def test_a_rewound_read_passes_over_individually_acknowledged_entries():
    rows = [(0, "open", "t", "c", None, None, 0, 0)]
    rows += [(1 + e, "add", "t", None, 1, e, 0, 100) for e in range(10)]
    rows += [
        (20, "read", "t", "c", None, None, 10, 0),
        (30, "individual_ack", "t", "c", 1, 1, 2, 0),
        (31, "individual_ack", "t", "c", 1, 5, 3, 0),
        (5000, "rewind", "t", "c", None, None, 0, 0),
        (5001, "read", "t", "c", None, None, 10, 0),
    ]
    out = lc.replay(trace(rows), lc.CacheConfig(strategy="pip430")).to_pylist()[0]
    # 0, 3..4 and 8..9 again, from storage: the cache let them go after the TTL.
    assert (out["entries_read"], out["storage_read_ops"]) == (15, 3)
    with pytest.raises(ValueError, match=r"row 11.*individual ack covers at least one entry"):
        lc.replay(trace([*rows[:11], (30, "individual_ack", "t", "c", 1, 1, -1, 0)]), lc.CacheConfig())


def test_belady_needs_a_rereadable_trace_and_timeseries_come_per_second():
    t = fanout(3000, readers=2)
    with pytest.raises(lc.UnsupportedError, match="twice"):
        lc.replay(t.to_reader(), lc.CacheConfig(strategy="belady"))
    summary, ts = lc.replay(t, [lc.CacheConfig(strategy="lru", cache_size_bytes=10_000)], with_timeseries=True)
    assert ts.column("second").to_pylist() == [0, 1, 2, 3]
    assert sum(ts.column("reads").to_pylist()) == summary.column("entries_read")[0].as_py()
    assert set(ts.column_names) >= {"cache_bytes", "hit_ratio"}


def test_replay_is_deterministic():
    configs = [lc.CacheConfig(cache_size_bytes=20_000, strategy=s) for s in ("pip430", "lru", "belady")]
    a = lc.replay(fanout(500), configs).drop_columns(["replay_seconds"])
    b = lc.replay(fanout(500), configs).drop_columns(["replay_seconds"])
    assert a.equals(b)


def test_memory_model_off_changes_only_peak_retained_bytes():
    """The memory model only observes the cache: with it off every design caches, hits and evicts
    the same, and peak_retained_bytes, which it alone measures, is null (not a made-up number)."""
    spec = {**lc.workload.SCENARIOS["many-topics-small-cache"], "testDurationMinutes": 0.1}
    t = lc.workload.generate(spec, seed=2)
    for strategy in ("pip430", "pip430-fifo", "lru", "legacy", "segmented", "belady"):
        on = lc.CacheConfig(strategy=strategy, cache_size_bytes=4 << 20, memory_model=True)
        off = on.replace(memory_model=False)
        (a, a_series), (b, b_series) = (lc.replay(t, c, with_timeseries=True) for c in (on, off))
        a, b = a.to_pylist()[0], b.to_pylist()[0]
        assert a["peak_retained_bytes"] is not None and b["peak_retained_bytes"] is None, strategy
        for k in ("peak_retained_bytes", "replay_seconds", "config"):
            a.pop(k), b.pop(k)
        assert a == b, strategy
        assert a_series.equals(b_series), strategy
    # With copied entries there are no buffers to model: the accounted size either way.
    copied = lc.CacheConfig(strategy="lru", copy_entries=True)
    rows = [lc.replay(t, c).to_pylist()[0] for c in (copied.replace(memory_model=True), copied)]
    assert rows[0]["peak_retained_bytes"] == rows[1]["peak_retained_bytes"] == rows[0]["peak_cache_bytes"]


def test_the_default_replay_leaves_the_memory_model_off_and_the_report_says_what_is_not_measured(tmp_path):
    """lc.replay's default skips the memory model (it costs 1.5x the replay's time): peak retained
    bytes is null, and the terminal table and the report say it was not measured and how to measure it."""
    from ledgercache import report

    assert lc.CacheConfig().memory_model is False
    t = fanout(300)
    summary = lc.replay(t, [lc.CacheConfig(cache_size_bytes=20_000, strategy=s) for s in ("pip430", "lru")])
    assert summary.column("peak_retained_bytes").null_count == 2
    text = report.comparison_text(summary)
    assert "peak retained MiB: no run measures" in text and "memory_model=True" in text
    pytest.importorskip("matplotlib")
    page = report.write_report(summary, None, tmp_path / "r").read_text()
    assert "**Not measured:** peak retained MiB" in page
    measured = lc.replay(t, lc.CacheConfig(cache_size_bytes=20_000, memory_model=True))
    assert measured.column("peak_retained_bytes").null_count == 0
    assert report.retained_note(measured) is None
    assert "Not measured" not in report.write_report(measured, None, tmp_path / "m").read_text()


def test_feed_all_replays_as_feeding_each_batch_and_raises_the_sources_own_error():
    """ReplaySession.feed_all (what lc.replay feeds with) gives what a feed per batch gives; an
    exception the batches' iterator raises comes out as it was raised, after the batches before
    it have been replayed; anything but a record batch among them is a TypeError."""
    t = lc.workload.generate({**lc.workload.SCENARIOS["shared-overflow"], "testDurationMinutes": 0.1}, seed=5)
    batches = t.to_batches(max_chunksize=5000)
    assert len(batches) > 3
    config = lc.CacheConfig(strategy="pip430", cache_size_bytes=4 << 20)

    def results(session: lc._native.ReplaySession) -> list[dict]:
        summary, series = session.finish()
        rows = summary.drop_columns(["replay_seconds"]).to_pylist()
        return rows + series.to_pylist()

    def fed_each(n: int) -> list[dict]:
        session = lc._native.ReplaySession([config], decode_ahead=False)
        for b in batches[:n]:
            session.feed(b)
        return results(session)

    class SourceFailed(Exception):
        pass

    def failing():
        yield from batches[:2]
        raise SourceFailed("the source broke")

    for decode_ahead in (True, False):
        whole = lc._native.ReplaySession([config], decode_ahead=decode_ahead)
        whole.feed_all(iter(batches))
        assert results(whole) == fed_each(len(batches))
        session = lc._native.ReplaySession([config], decode_ahead=decode_ahead)
        with pytest.raises(SourceFailed, match="the source broke"):
            session.feed_all(failing())
        assert results(session) == fed_each(2)
        with pytest.raises(TypeError, match="Arrow record batch"):
            lc._native.ReplaySession([config], decode_ahead=decode_ahead).feed_all([batches[0], 5])
    with pytest.raises(TypeError):
        lc._native.ReplaySession([config]).feed_all(5)


def test_feed_all_with_a_slow_or_reentrant_source_neither_hangs_nor_loses_its_context():
    """The iterable fed to feed_all: Ctrl-C ends the feed while the iterable is slow to give a
    batch (it runs on another thread when decoding ahead); it runs in the caller's contextvars
    context; a call back into the session from it raises UnsupportedError instead of waiting for
    ever (the session is busy)."""
    import contextvars
    import signal

    t = lc.workload.generate({**lc.workload.SCENARIOS["shared-overflow"], "testDurationMinutes": 0.05}, seed=5)
    batches = t.to_batches(max_chunksize=5000)
    config = lc.CacheConfig(strategy="lru", cache_size_bytes=4 << 20)
    for decode_ahead in (True, False):

        def slow():
            yield batches[0]
            time.sleep(5)
            yield from batches[1:]

        session = lc._native.ReplaySession([config], decode_ahead=decode_ahead)
        previous = signal.signal(signal.SIGALRM, signal.default_int_handler)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            start = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                session.feed_all(slow())
            assert time.monotonic() - start < 2.5, (decode_ahead, time.monotonic() - start)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

        where = contextvars.ContextVar("where", default="unset")
        where.set("caller")
        seen = []

        def looking():
            for b in batches[:2]:
                seen.append(where.get())  # noqa: B023 -- called within this iteration
                yield b

        lc._native.ReplaySession([config], decode_ahead=decode_ahead).feed_all(looking())
        assert seen == ["caller", "caller"], decode_ahead

        session = lc._native.ReplaySession([config], decode_ahead=decode_ahead)

        def calling_back():
            yield batches[0]
            session.needs_second_pass()  # noqa: B023 -- called within this iteration
            yield batches[1]

        with pytest.raises(lc.UnsupportedError, match="busy"):
            session.feed_all(calling_back())
        # A call that fails at once takes nothing from the iterable (a one-shot stream stays whole).
        session.finish()
        taken = []

        def counting():
            for b in batches:
                taken.append(b)  # noqa: B023 -- called within this iteration
                yield b

        with pytest.raises(lc.ClosedError):
            session.feed_all(counting())
        assert taken == []


def test_decoding_ahead_changes_nothing_but_the_wall_time():
    """A second thread decodes each batch slices ahead of the replay: every design's results and
    series are those of a replay on the calling thread, a bad row is the same error, and the
    argument is a keyword that must be a bool."""
    spec = {**lc.workload.SCENARIOS["shared-overflow"], "testDurationMinutes": 0.1, "brokers": 2, "topics": 2}
    t = lc.workload.generate(spec, seed=3)
    assert max(b.num_rows for b in t.to_batches()) > 3 * 4096, "batches of several slices"
    configs = [
        lc.CacheConfig(strategy=s, cache_size_bytes=8 << 20)
        for s in ("pip430", "pip430-fifo", "lru", "legacy", "segmented", "belady")
    ]
    (ahead, ahead_series), (serial, serial_series) = (
        lc.replay(t, configs, with_timeseries=True, decode_ahead=d) for d in (True, False)
    )
    assert ahead.num_rows == 12
    assert ahead.drop_columns(["replay_seconds"]).equals(serial.drop_columns(["replay_seconds"]))
    assert ahead_series.equals(serial_series)
    rows = t.to_pylist()
    at = len(rows) - 10
    rows[at]["op"] = "publish"
    bad = pa.Table.from_pylist(rows, schema=t.schema)
    errors = []
    for d in (True, False):
        with pytest.raises(lc.InvalidArgumentError, match=f"row {at}.*unknown op") as e:
            lc.replay(bad, configs[0], decode_ahead=d)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    with pytest.raises(TypeError):
        lc._native.ReplaySession([configs[0]], decode_ahead="yes")
    with pytest.raises(TypeError):
        lc._native.ReplaySession([configs[0]], True)
