"""ledgercache inside PySpark: one cache per worker process, and the fan-out example on local[2]."""

import os
import socket
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import ledgercache as lc

pyspark = pytest.importorskip("pyspark", reason="make venv installs pyspark; this test needs it")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import spark_fanout  # noqa: E402 -- found through the sys.path entry above


@pytest.fixture(scope="module")
def spark():
    from pyspark import cloudpickle

    # The job's functions live in the example module, which workers cannot import: ship them.
    cloudpickle.register_pickle_by_value(spark_fanout)
    session = lc.spark.local_session("ledgercache-tests", cores=2)
    yield session
    session.stop()


def test_executor_cache_is_one_manager_per_process_and_config():
    a = lc.spark.executor_cache(lc.CacheConfig(cache_size_bytes=1 << 20))
    assert lc.spark.executor_cache(lc.CacheConfig(cache_size_bytes=1 << 20)) is a
    assert lc.spark.executor_cache(lc.CacheConfig(cache_size_bytes=2 << 20)) is not a
    a.get_cache("t").insert(lc.Position(1, 0), b"parent")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child must start with a manager of its own
        child = lc.spark.executor_cache(lc.CacheConfig(cache_size_bytes=1 << 20))
        ok = child is not a and child.entry_count == 0
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"1"
    assert a.entry_count == 1


def test_executor_storage_is_shared_per_path(tmp_path):
    s = lc.spark.executor_storage(tmp_path)
    assert lc.spark.executor_storage(str(tmp_path)) is s
    assert isinstance(s, lc.FileStorage)


def test_executor_storage_refuses_a_missing_directory(tmp_path):
    # On an executor that does not see the driver's directory, FileStorage would create it empty.
    missing = tmp_path / "not-shared"
    with pytest.raises(lc.StorageError, match=f"{missing} does not exist on host {socket.gethostname()}"):
        lc.spark.executor_storage(missing)
    assert not missing.exists()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(lc.StorageError, match="a-file is not a directory"):
        lc.spark.executor_storage(tmp_path / "a-file")


def test_session_keeps_the_master_already_running(spark):
    assert lc.spark.session("again") is spark
    with pytest.warns(UserWarning, match=r"'spark://elsewhere:7077' is ignored: .* already 'local\[2\]'"):
        assert lc.spark.session("again", master="spark://elsewhere:7077") is spark
    with pytest.raises(lc.InvalidArgumentError, match="master: a cluster master URL"):
        lc.spark.cluster_session("local[2]")


def test_cli_master_implies_spark_and_contradicts_local(tmp_path, capsys):
    from ledgercache import cli

    assert cli.main(["compare", "seek-storm", "--local", "--master", "local[1]", "-o", str(tmp_path / "r")]) == 2
    assert "--local and --master local[1] contradict each other" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_second_reader_of_each_partition_is_served_from_the_cache(spark, tmp_path):
    spark_fanout.write_topics(str(tmp_path), topics=4, entries=1_000)
    rows = spark_fanout.run_job(spark, str(tmp_path), topics=4)
    assert len(rows) == 8
    by_reader = {(r["topic"], r["reader"]): r for r in rows}
    for t in range(4):
        first = by_reader[(spark_fanout.topic_name(t), "sub-a")]
        second = by_reader[(spark_fanout.topic_name(t), "sub-b")]
        assert first["entries"] == second["entries"] == 1_000
        assert first["storage_read_entries"] == 1_000 and first["storage_read_ops"] >= 1
        assert second["storage_read_ops"] == 0, f"{second}"
        assert first["pid"] == second["pid"] != os.getpid()


def test_spark_replay_equals_in_process_replay(spark):
    spec = {**lc.workload.SCENARIOS["shared-overflow"], "topics": 6, "brokers": 3, "testDurationMinutes": 0.3}
    configs = [
        lc.CacheConfig(cache_size_bytes=size, strategy=s) for s in ("pip430", "lru") for size in (1 << 20, 4 << 20)
    ]
    df = lc.spark.generate(spark, spec, seed=1)
    assert df.count() == lc.workload.generate(spec, seed=1).num_rows
    key = lambda r: (r["broker"], r["strategy"], r["cache_size_bytes"])
    local = sorted(
        lc.replay(lc.workload.generate(spec, seed=1), configs).drop_columns(["replay_seconds"]).to_pylist(), key=key
    )
    assert len(local) == 12
    for groups, presorted in ((1, False), (2, False), (1, True)):
        rows = [r.asDict() for r in lc.spark.replay(df, configs, config_groups=groups, presorted=presorted).collect()]
        for r in rows:
            del r["replay_seconds"]
        assert sorted(rows, key=key) == local, f"config_groups={groups}, presorted={presorted}"


def test_spark_series_equals_in_process_series_with_its_lifecycle_columns(spark, tmp_path):
    """lc.spark.replay's per-second series carries every series column, the seconds' own values
    (hits, misses and storage reads of the second, not the run's totals), time to warm included."""
    rows = [(0, "open", "t", "c", None, None, 0, 0)]
    rows += [(10 + e, "add", "t", None, 1, e, 0, 100) for e in range(20)]
    rows += [(1000, "read", "t", "c", None, None, 10, 0), (2000, "unload", "t", None, None, None, 0, 0)]
    rows += [(2100, "load", "t", None, 1, 0, 20, 100), (2200, "open", "t", "c", 1, 10, 0, 0)]
    rows += [(3000, "read", "t", "c", None, None, 5, 0), (4000, "read", "t", "c", None, None, 5, 0)]
    schema = pa.schema([f for f in lc.trace.SCHEMA if f.name not in lc.trace.OPTIONAL])
    names = ("ts_us", "broker", "topic", "op", "cursor", "ledger_id", "entry_id", "count", "size")
    table = pa.Table.from_pylist(
        [
            dict(zip(names, (ts * 1000, "b1", topic, op, c, ledger, e, n, size), strict=True))
            for ts, op, topic, c, ledger, e, n, size in rows
        ],
        schema=schema,
    )
    lc.trace.write(table, tmp_path / "t.parquet")
    configs = [lc.CacheConfig(strategy="pip430")]
    _, local = lc.replay(table, configs, with_timeseries=True)
    _, series = lc.spark.replay(spark.read.parquet(str(tmp_path / "t.parquet")), configs, with_timeseries=True)
    assert series.column_names == local.column_names
    assert series.to_pylist() == local.to_pylist()
    assert series.column("loads").to_pylist() == [0, 0, 1, 0, 0]
    assert series.column("misses").to_pylist() == [0, 0, 0, 5, 5]


def test_spark_takes_a_streamed_trace(spark):
    spec = {**lc.workload.SCENARIOS["tailing-fan-out"], "brokers": 2, "testDurationMinutes": 0.1}
    # belady: its second pass reads each partition back from the local copy its first pass wrote.
    configs = [lc.CacheConfig(cache_size_bytes=1 << 20, strategy=s) for s in ("pip430", "lru", "belady")]
    key = lambda r: (r["broker"], r["strategy"])
    local = sorted(
        lc.replay(lc.workload.generate(spec, seed=1), configs).drop_columns(["replay_seconds"]).to_pylist(), key=key
    )
    # A reader is written to a temporary Parquet file batch by batch, then replayed on Spark.
    rows = [r.asDict() for r in lc.spark.replay(lc.workload.stream(spec, seed=1, batch_rows=2000), configs).collect()]
    for r in rows:
        del r["replay_seconds"]
    assert sorted(rows, key=key) == local
    # lc.spark.generate streams each broker's trace in its task: the same rows.
    assert lc.spark.generate(spark, spec, seed=1).toArrow().num_rows == lc.workload.generate(spec, seed=1).num_rows


def test_generate_on_spark_writes_each_brokers_rows_in_order(tmp_path):
    import subprocess

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "t.parquet"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgercache.cli",
            "generate",
            "tailing-fan-out",
            "--brokers",
            "2",
            "--spark",
            "--cores",
            "2",
            "--duration-minutes",
            "0.1",
            "--quiet",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("estimate: ~")
    assert {p.name for p in tmp_path.iterdir()} == {"t.parquet"}, "the Spark parts are gone"
    t = pq.read_table(out)
    local = lc.workload.generate(
        {**lc.workload.SCENARIOS["tailing-fan-out"], "brokers": 2, "testDurationMinutes": 0.1}, seed=1
    )
    assert t.schema == lc.trace.SCHEMA and t.num_rows == local.num_rows
    for b in ("broker-0", "broker-1"):
        assert t.filter(pa.compute.equal(t["broker"], b)).equals(local.filter(pa.compute.equal(local["broker"], b)))


def test_generate_on_spark_refuses_a_spec_over_the_memory_budget_before_any_task(spark):
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    spec = {**lc.workload.SCENARIOS["many-topics-small-cache"], "topics": 20_000}
    with pytest.raises(lc.ResourceLimitError, match="memory"):
        lc.spark.generate(spark, spec, memory_budget=64 << 20)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs, "no Spark job ran"
    # Within its budget the same call makes the frame.
    assert (
        lc.spark.generate(spark, {**spec, "topics": 2, "testDurationMinutes": 0.01}, memory_budget=1 << 30).count() > 0
    )
