"""ledgercache inside PySpark jobs.

Spark runs Python code in worker processes that it reuses across tasks (``spark.python.worker.reuse``,
on by default). :func:`executor_cache` gives each such process one :class:`EntryCacheManager` per
configuration, created on first use, so tasks that read the same ledgers in that process share
cached entries: a second subscription, or a later stage, is served from memory instead of storage.
:func:`executor_storage` does the same for a :class:`FileStorage` directory, so its read counters
are per executor. Both are safe after ``fork``: a child process starts with none of its parent's.

:func:`local_session` starts a local Spark session whose workers run this interpreter, so a fresh
``.venv`` works without setting ``PYSPARK_PYTHON`` by hand.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from . import _extras
from ._native import CacheConfig, EntryCacheManager, FileStorage, ManualClock, SystemClock

__all__ = ["executor_cache", "executor_storage", "local_session", "trace_frame"]

T = TypeVar("T")

_lock = threading.Lock()
_objects: dict[Hashable, tuple[int, Any]] = {}


def _reset_after_fork() -> None:
    # The parent's lock may be held by a thread that does not exist in the child.
    global _lock
    _lock = threading.Lock()
    _objects.clear()


os.register_at_fork(after_in_child=_reset_after_fork)


def _per_process(key: Hashable, make: Callable[[], T]) -> T:
    pid = os.getpid()
    with _lock:
        found = _objects.get(key)
        if found is None or found[0] != pid:
            found = (pid, make())
            _objects[key] = found
        return found[1]


def executor_cache(
    config: CacheConfig | None = None,
    clock: ManualClock | SystemClock | None = None,
    background_eviction: bool = False,
) -> EntryCacheManager:
    """The cache manager of this worker process for ``config`` (created on first use).

    Calls with an equal configuration get the same manager for as long as the process lives, so
    every task Spark runs in the process shares its cached entries.
    """
    config = config if config is not None else CacheConfig()
    key = ("cache", tuple(sorted(config.to_dict().items())), background_eviction)
    return _per_process(key, lambda: EntryCacheManager(config, clock=clock, background_eviction=background_eviction))


def executor_storage(path: str | os.PathLike[str]) -> FileStorage:
    """This worker process's :class:`FileStorage` for ``path`` (opened on first use), read-only.

    Read-only because every worker process opens the store at once, and a directory has one
    writer at a time; ``create=False`` because an executor that cannot see the driver's directory
    must fail naming it (:class:`~ledgercache.errors.StorageError`), not read an empty new store.
    """
    key = ("file-storage", os.path.abspath(os.fspath(path)))
    return _per_process(key, lambda: FileStorage(path, create=False, read_only=True))


def local_session(app_name: str = "ledgercache", cores: int | str = "*", **conf: str) -> Any:
    """A local SparkSession (``local[cores]``) whose Python workers run this interpreter.

    Needs pyspark and pandas (the ``lab`` extra): without them,
    :class:`~ledgercache.errors.MissingDependencyError` names the extra."""
    _extras.require("ledgercache.spark.local_session", _extras.SPARK)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=WARN")
    )
    for k, v in conf.items():
        builder = builder.config(k.replace("_", "."), v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _spark_schema(schema) -> str:
    names = {"string": "string", "int64": "long", "double": "double", "int32": "int"}
    return ", ".join(f"{f.name} {names[str(f.type)]}" for f in schema)


def generate(spark: Any, spec: Any, brokers: int | None = None, seed: int = 0) -> Any:
    """Generates a workload's trace on Spark, one task per broker (see :mod:`ledgercache.workload`).

    ``brokers`` overrides the spec's broker count. The DataFrame holds the same rows as
    ``lc.workload.generate(spec, seed)``, each broker's in time order. Each task streams its
    broker's trace batch by batch (``lc.workload.stream``): a worker holds one batch, not the trace.
    """
    from . import trace as _trace
    from . import workload as _workload

    _extras.require("ledgercache.spark.generate", _extras.SPARK)
    settings = _workload.resolve(spec)
    if brokers is not None:
        settings["brokers"] = int(brokers)
    n = int(settings.get("brokers", 1))

    def run(batches):
        import ledgercache as lc

        for batch in batches:
            for broker in batch.column("id").to_pylist():
                yield from lc.workload.stream(settings, seed, broker=broker, batch_rows=65_536)

    return spark.range(n, numPartitions=n).mapInArrow(run, _spark_schema(_trace.SCHEMA))


def _temporary_parquet(session: Any, trace: Any) -> Any:
    """A DataFrame over ``trace`` (a reader, table or function) written to a temporary Parquet file
    batch by batch. DataFrames are lazy, and any DataFrame derived from this one reads the file
    again, so the file stays until the interpreter exits."""
    import atexit
    import shutil
    import tempfile

    from . import trace as _trace

    directory = tempfile.mkdtemp(prefix="ledgercache-trace-")
    atexit.register(shutil.rmtree, directory, True)
    try:
        _trace.write(trace, os.path.join(directory, "trace.parquet"))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return session.read.parquet(directory)


def trace_frame(session: Any, trace: Any) -> Any:
    """A Spark DataFrame of a trace: a DataFrame as it is, a path read by Spark (every executor must
    see it), anything else :mod:`ledgercache.trace` reads (a ``pyarrow.Table``, a
    ``RecordBatchReader`` such as ``lc.workload.stream(...)``, a function returning one) written to
    a temporary Parquet file on this machine first, batch by batch, removed when the interpreter
    exits (for a cluster, write the trace where the executors can read it and pass that path)."""
    if hasattr(trace, "sparkSession") and hasattr(trace, "mapInArrow"):
        return trace
    if isinstance(trace, (str, os.PathLike)):
        return session.read.parquet(os.fspath(trace))
    return _temporary_parquet(session, trace)


def replay(
    trace_df: Any,
    configs: Any,
    *,
    partitions: int | None = None,
    config_groups: int = 1,
    with_timeseries: bool = False,
    presorted: bool = False,
) -> Any:
    """Replays a trace DataFrame on Spark and returns one row per (broker, configuration).

    Rows are repartitioned by broker (and, with ``config_groups`` > 1, by group of configurations,
    so a sweep spreads over more tasks), sorted within partitions by time (ties keep the trace's
    order), and each partition streams its batches through ``mapInArrow`` into the Rust engine:
    the same numbers as ``lc.replay`` on the same trace. Works unchanged on a cluster when the
    ``ledgercache`` wheel is installed on the executors.

    ``presorted=True`` skips the shuffle and the sort: use it when every broker's rows already sit
    in one partition, in trace order (as ``generate`` and a Parquet file it wrote deliver them).

    ``trace_df`` is a DataFrame, or any trace :func:`trace_frame` takes (a path, a table, a
    ``RecordBatchReader`` from ``lc.workload.stream``: read once, written to a temporary Parquet
    file batch by batch).
    """
    _extras.require("ledgercache.spark.replay", _extras.SPARK)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from .replay import SUMMARY_SCHEMA, _configs

    configs = _configs(configs)
    if not (hasattr(trace_df, "sparkSession") and hasattr(trace_df, "mapInArrow")):
        session = SparkSession.getActiveSession()
        if session is None:
            from .errors import InvalidArgumentError

            raise InvalidArgumentError("trace_df: a trace that is not a DataFrame needs an active SparkSession")
        trace_df = trace_frame(session, trace_df)
    groups = max(1, min(int(config_groups), len(configs)))
    chunks = [configs[g::groups] for g in range(groups)]
    df = trace_df.withColumn("__seq", F.monotonically_increasing_id())
    if groups > 1:
        df = df.crossJoin(trace_df.sparkSession.range(groups).withColumnRenamed("id", "__group"))
    else:
        df = df.withColumn("__group", F.lit(0).cast("long"))
    if not presorted or groups > 1:
        n = partitions or max(1, trace_df.sparkSession.sparkContext.defaultParallelism)
        df = df.repartition(n, "broker", "__group").sortWithinPartitions("__group", "broker", "ts_us", "__seq")

    def run(batches):
        import pyarrow as pa

        import ledgercache as lc
        from ledgercache.replay import run_session, tables

        import json

        summary_row_series: list[str] = []
        by_group: dict[int, list] = {}
        for batch in batches:
            groups_here = batch.column("__group").unique().to_pylist()
            for g in groups_here:
                part = batch if len(groups_here) == 1 else batch.filter(pa.compute.equal(batch.column("__group"), g))
                by_group.setdefault(g, []).append(lc.trace.conform(part))
        for g, parts in sorted(by_group.items()):
            summary, series = tables(run_session(lambda parts=parts: iter(parts), chunks[g]))
            per_key: dict[tuple, list] = {}
            for r in series.to_pylist():
                per_key.setdefault((r["broker"], r["config_index"]), []).append(
                    [r["second"], r["cache_bytes"], r["reads"], r["hits"], r["config_index"]])
            index_of = {}
            for r in summary.to_pylist():
                n = index_of.get(r["broker"], 0)
                index_of[r["broker"]] = n + 1
                r_series = per_key.get((r["broker"], n), [])
                summary_row_series.append(json.dumps(r_series))
            summary = summary.append_column("per_second", pa.array(summary_row_series, pa.string()))
            summary_row_series.clear()
            yield from summary.to_batches()

    out = df.mapInArrow(run, _spark_schema(SUMMARY_SCHEMA) + ", per_second string")
    if not with_timeseries:
        return out.drop("per_second")
    # The series is small (a row per trace second and configuration): built on the driver.
    import json

    import pyarrow as pa

    from .replay import SERIES_SCHEMA

    rows = out.collect()
    series: dict[str, list] = {f.name: [] for f in SERIES_SCHEMA}
    for r in rows:
        for second, cache_bytes, reads, hits, index in json.loads(r["per_second"]):
            for k, v in (("broker", r["broker"]), ("strategy", r["strategy"]), ("cache_size_bytes", r["cache_size_bytes"]),
                         ("config_index", index), ("second", second), ("cache_bytes", cache_bytes), ("reads", reads),
                         ("hits", hits), ("hit_ratio", hits / reads if reads else 0.0)):
                series[k].append(v)
    summary = out.sparkSession.createDataFrame([r.asDict() for r in rows], out.schema).drop("per_second")
    return summary, pa.table(series, schema=SERIES_SCHEMA)
