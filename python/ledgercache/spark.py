"""ledgercache inside PySpark jobs.

Spark runs Python code in worker processes that it reuses across tasks (``spark.python.worker.reuse``,
on by default). :func:`executor_cache` gives each such process one :class:`EntryCacheManager` per
configuration, created on first use, so tasks that read the same ledgers in that process share
cached entries: a second subscription, or a later stage, is served from memory instead of storage.
:func:`executor_storage` does the same for a :class:`FileStorage` directory, so its read counters
are per executor. Both are safe after ``fork``: a child process starts with none of its parent's.

:func:`local_session` starts a local Spark session whose workers run this interpreter, so a fresh
``.venv`` works without setting ``PYSPARK_PYTHON`` by hand; :func:`cluster_session` connects to a
cluster master (``spark://``, ``yarn``, ``k8s://``) and checks that the executors can import this
package; :func:`session` picks one of the two from a master URL, and uses the master that
``spark-submit`` (or an active session) already set, so a job never overrides ``--master``.

On a cluster the ``ledgercache`` wheel must be installed in the executors' Python (or shipped in a
packed environment with ``--archives``): PySpark cannot import an extension module from
``--py-files``. A :class:`FileStorage` directory used by tasks must be one that every executor sees
(a shared file system): :func:`executor_storage` refuses a directory that is missing on the
executor instead of creating an empty one.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import socket
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from . import _extras
from . import trace as _trace
from . import workload as _workload
from ._native import CacheConfig, EntryCacheManager, FileStorage, ManualClock, ReplaySession, SystemClock, __version__
from .errors import InvalidArgumentError, MissingDependencyError, StorageError
from .replay import SERIES_SCHEMA, SUMMARY_SCHEMA, _configs, run_session, tables
from .trace import SCHEMA

__all__ = [
    "cluster_session",
    "executor_cache",
    "executor_storage",
    "executors",
    "generate",
    "local_session",
    "replay",
    "session",
    "trace_frame",
]

T = TypeVar("T")

_lock = threading.Lock()
_objects: dict[Hashable, tuple[int, Any]] = {}


def _reset_after_fork() -> None:
    # The parent's lock may be held by a thread that does not exist in the child.
    global _lock  # noqa: PLW0603 -- a fork handler rebinds the lock: nothing else can
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

    The directory must exist where the task runs: on a cluster, a path on a file system that every
    executor mounts (the driver writes the segments there, the tasks read them). A missing
    directory raises :class:`~ledgercache.errors.StorageError` naming the path and the host, not
    an empty new store from which the task would read no entries. Read-only because every worker
    process opens the store at once and a directory has one writer at a time: the driver closes
    its read-write store before the tasks run.
    """
    path = os.path.abspath(os.fspath(path))
    key = ("file-storage", path)

    def open_existing() -> FileStorage:
        if not os.path.isdir(path):
            what = "is not a directory" if os.path.exists(path) else "does not exist"
            raise StorageError(
                f"executor_storage: {path} {what} on host {socket.gethostname()}: a FileStorage directory used "
                "by Spark tasks must be on a file system every executor sees, at the same path"
            )
        return FileStorage(path, create=False, read_only=True)

    return _per_process(key, open_existing)


def local_session(app_name: str = "ledgercache", cores: int | str = "*", **conf: str) -> Any:
    """A local SparkSession (``local[cores]``) whose Python workers run this interpreter.

    ``conf`` adds Spark settings (``spark_executor_memory="2g"``: underscores become dots). Needs
    pyspark and pandas (the ``lab`` extra): without them,
    :class:`~ledgercache.errors.MissingDependencyError` names the extra. If a session is already
    running, Spark returns that one whatever its master: :func:`session` says so."""
    _extras.require("ledgercache.spark.local_session", _extras.SPARK)
    # The driver's interpreter runs the tasks: it has this package, whatever PYSPARK_PYTHON says
    # elsewhere. SPARK_LOCAL_IP: a local session listens on the loopback interface only.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {"spark.pyspark.python": sys.executable, "spark.sql.shuffle.partitions": "8"}
    return _start(app_name, f"local[{cores}]", settings, conf)


def cluster_session(
    master: str,
    app_name: str = "ledgercache",
    *,
    python: str | None = None,
    archives: str | None = None,
    check: bool = True,
    **conf: str,
) -> Any:
    """A SparkSession on a cluster ``master`` (``spark://host:port``, ``yarn``, ``k8s://...``).

    The executors run their own Python: ``python`` is its path on the executors
    (``spark.pyspark.python``; by default ``PYSPARK_PYTHON`` if set, else Spark's ``python3``), and
    it must have the ``ledgercache`` wheel and pyarrow installed. ``archives`` ships a packed
    environment instead (``"env.tar.gz#env"`` with ``python="./env/bin/python"``; see the docs' PySpark page, docs/spark.md).
    With ``check`` (the default) a first small job imports ``ledgercache`` in the executors
    (:func:`executors`); where it is missing or another version, the session is stopped and
    :class:`~ledgercache.errors.MissingDependencyError` names the host and interpreter, before any
    real work.
    """
    _extras.require("ledgercache.spark.cluster_session", _extras.SPARK)
    if not isinstance(master, str) or not master or master.startswith("local"):
        raise InvalidArgumentError(
            f"master: a cluster master URL such as spark://host:7077, got {master!r} (use local_session for local[N])"
        )
    settings: dict[str, str] = {"spark.sql.shuffle.partitions": "8"}
    if python is not None:
        # Read where the Python side creates its context (PYSPARK_PYTHON) and by the JVM (the conf).
        os.environ["PYSPARK_PYTHON"] = python
        settings["spark.pyspark.python"] = python
    if archives is not None:
        settings["spark.archives"] = archives
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = _start(app_name, master, settings, conf)
    if check:
        _check_executors(spark)
    return spark


def session(
    app_name: str = "ledgercache",
    master: str | None = None,
    *,
    cores: int | str = "*",
    python: str | None = None,
    archives: str | None = None,
    **conf: str,
) -> Any:
    """The SparkSession a job runs on: what ``ledgercache --master`` uses.

    A master already set wins: an active session's, or the one ``spark-submit --master`` gave this
    interpreter (then ``master``, if it names another one, only warns). Otherwise ``master`` (default
    ``local[cores]``): ``local[...]`` starts :func:`local_session`, anything else
    :func:`cluster_session` (with ``python`` and ``archives``).
    """
    _extras.require("ledgercache.spark.session", _extras.SPARK)
    from pyspark.sql import SparkSession

    given = _master_already_set()
    if given is not None:
        if master is not None and master != given:
            warnings.warn(
                f"master: {master!r} is ignored: this interpreter's Spark master is already {given!r} "
                "(set by spark-submit or a running session)",
                stacklevel=2,
            )
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        if given.startswith("local"):
            return local_session(app_name, given[len("local[") : -1] if given.startswith("local[") else 1, **conf)
        spark = _start(app_name, None, {}, conf)
        _check_executors(spark)
        return spark
    master = master or f"local[{cores}]"
    if master.startswith("local"):
        cores = master[len("local[") : -1] if master.startswith("local[") else 1
        return local_session(app_name, cores, **conf)
    return cluster_session(master, app_name, python=python, archives=archives, check=True, **conf)


def _master_already_set() -> str | None:
    """The master of a running SparkContext, or the one ``spark-submit`` passed to this interpreter
    (its JVM, which launched us, holds the submitted configuration), or None."""
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return active.master
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # started by spark-submit / the pyspark shell
        SparkContext._ensure_initialized()
        return SparkConf().get("spark.master", None)
    return None


def _start(app_name: str, master: str | None, settings: dict[str, str], conf: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.ui.enabled": "false",
        "spark.pyspark.driver.python": sys.executable,
        "spark.python.worker.reuse": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=WARN",
        **settings,
    }
    for k, v in {**settings, **{k.replace("_", "."): v for k, v in conf.items()}}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def executors(spark: Any, tasks: int | None = None) -> list[dict[str, str]]:
    """What the executors' Python sees: one row per task (``tasks``, by default the session's
    default parallelism) with ``host``, ``python`` (its interpreter), ``version`` (the
    ``ledgercache`` it imports, ``""`` if none) and ``error`` (why the import failed)."""
    n = int(tasks or max(1, spark.sparkContext.defaultParallelism))

    def probe(_: int) -> dict[str, str]:
        # Shipped by value and importing only the standard library (an RDD task, not an Arrow one,
        # so not even pyarrow): it runs in an executor Python that lacks ledgercache, and says so.
        import socket  # noqa: PLC0415 -- runs on a Spark executor, shipped by value: it imports there
        import sys  # noqa: PLC0415 -- runs on a Spark executor, shipped by value: it imports there

        try:
            import ledgercache  # noqa: PLC0415 -- runs on a Spark executor, shipped by value: it imports there

            version, error = ledgercache.__version__, ""
        except Exception as e:  # reported to the driver, which names the host
            version, error = "", f"{type(e).__name__}: {e}"
        return {"host": socket.gethostname(), "python": sys.executable, "version": version, "error": error}

    return spark.sparkContext.parallelize(range(n), n).map(probe).collect()


def _check_executors(spark: Any) -> None:
    """Raises (and stops the session, which would hold the cluster's cores for nothing) when an
    executor's Python cannot import this version of ledgercache."""

    bad = [r for r in executors(spark) if r["version"] != __version__]
    if bad:
        spark.stop()
        r = bad[0]
        found = f"version {r['version']} (the driver has {__version__})" if r["version"] else r["error"]
        raise MissingDependencyError(
            f"the executors cannot use ledgercache: {r['python']} on host {r['host']}: {found}; install the same "
            "ledgercache wheel in the executors' Python (pip install ledgercache-*.whl) or ship a packed "
            "environment with --archives; --py-files cannot carry its extension module",
            missing=("ledgercache",),
        )


_SPARK_TYPES = {"string": "string", "int64": "long", "double": "double", "int32": "int"}


def _spark_schema(schema) -> str:
    return ", ".join(f"{f.name} {_SPARK_TYPES[str(f.type)]}" for f in schema)


# The series' columns that name the run, which its summary row holds with the same values.
_RUN_COLUMNS = ("broker", "strategy", "cache_size_bytes")


def _nested_series_fields() -> list:
    """The series' fields a summary row does not already hold (it names the broker and the
    configuration): each summary row carries its seconds as a list of these. A column the summary
    also has under the same name (``hits``, ``misses``, ``storage_read_ops``: the run's totals
    there, the second's here) is the second's."""
    return [f for f in SERIES_SCHEMA if f.name not in _RUN_COLUMNS or f.name not in SUMMARY_SCHEMA.names]


def _per_second_ddl() -> str:
    fields = ", ".join(f"{f.name}: {_SPARK_TYPES[str(f.type)]}" for f in _nested_series_fields())
    return f"per_second array<struct<{fields}>>"


def generate(spark: Any, spec: Any, brokers: int | None = None, seed: int = 0, memory_budget: int | None = None) -> Any:
    """Generates a workload's trace on Spark, one task per broker (see :mod:`ledgercache.workload`).

    ``brokers`` overrides the spec's broker count. The DataFrame holds the same rows as
    ``lc.workload.generate(spec, seed)``, each broker's in time order. Each task streams its
    broker's trace batch by batch (``lc.workload.stream``): a worker holds one batch, not the trace.
    ``memory_budget`` (default ``lc.workload.DEFAULT_MEMORY_BUDGET``) bounds each task's
    simulation; a spec over it raises :class:`~ledgercache.errors.ResourceLimitError` here, on
    the driver, before any task starts.
    """

    _extras.require("ledgercache.spark.generate", _extras.SPARK)
    settings = _workload.resolve(spec)
    if brokers is not None:
        settings["brokers"] = int(brokers)
    n = int(settings.get("brokers", 1))
    budget = _workload.DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
    # The check each task makes, made once here so that a spec that cannot fit fails at once.
    _workload.check(settings, broker=0, memory_budget=budget)

    def run(batches):
        import ledgercache as lc  # noqa: PLC0415 -- runs on a Spark executor, shipped by value: it imports there

        for batch in batches:
            for broker in batch.column("id").to_pylist():
                yield from lc.workload.stream(settings, seed, broker=broker, batch_rows=65_536, memory_budget=budget)

    return spark.range(n, numPartitions=n).mapInArrow(run, _spark_schema(_trace.SCHEMA))


def _temporary_parquet(session: Any, trace: Any) -> Any:
    """A DataFrame over ``trace`` (a reader, table or function) written to a temporary Parquet file
    batch by batch. DataFrames are lazy, and any DataFrame derived from this one reads the file
    again, so the file stays until the interpreter exits."""

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


def _group_runs(batches: Any) -> Any:
    """``(group, batch)`` for each run of equal ``__group`` values in the partition's batches (the
    partition is sorted by group, so a batch holds at most a few runs, in order)."""

    for batch in batches:
        if not batch.num_rows:
            continue
        groups = batch.column("__group").to_numpy(zero_copy_only=False)
        cuts = [0, *(np.flatnonzero(groups[1:] != groups[:-1]) + 1).tolist(), batch.num_rows]
        for a, b in itertools.pairwise(cuts):
            yield int(groups[a]), batch.slice(a, b - a)


def _replay_partition(batches: Any, chunks: list[list[CacheConfig]]) -> Any:
    """Replays one partition as it streams in and yields one summary batch per group of configurations.

    Each group's batches go into the Rust engine one at a time, so the Python worker holds one
    batch and the engine's state (the caches and cursors), not the partition. Belady's MIN reads
    its trace twice: for a group that needs it, the first pass also writes the batches to a local
    Arrow IPC file, and the second pass reads that file back batch by batch."""

    runs = _group_runs(batches)
    pending = next(runs, None)
    while pending is not None:
        group = pending[0]

        def this_group():
            nonlocal pending
            while pending is not None and pending[0] == group:  # noqa: B023 -- called within this iteration
                yield _trace.conform(pending[1])
                pending = next(runs, None)

        session = ReplaySession(chunks[group])
        with _Spill(session.needs_second_pass()) as spill:
            passes = iter((spill.through(this_group()), spill.back()))
            summary, series = tables(run_session(lambda: next(passes), session))  # noqa: B023 -- called within this iteration
        # Each summary row carries its own per-second series (a list of structs): mapInArrow
        # returns one table.
        nested = _nested_series_fields()
        per_key: dict[tuple, list] = {}
        for r in series.to_pylist():
            per_key.setdefault((r["broker"], r["config_index"]), []).append({f.name: r[f.name] for f in nested})
        index_of: dict[str, int] = {}
        column = []
        for broker in summary.column("broker").to_pylist():
            n = index_of.get(broker, 0)
            index_of[broker] = n + 1
            column.append(per_key.get((broker, n), []))
        per_second = pa.array(column, pa.list_(pa.struct(nested)))
        yield from summary.append_column("per_second", per_second).to_batches()


class _Spill:
    """A local copy of a one-shot stream for a second pass (an Arrow IPC file on the executor's
    local disk: the first of ``SPARK_LOCAL_DIRS``, which Spark gives its Python workers for their
    own spills; the system's temporary directory elsewhere), or nothing when none is needed."""

    def __init__(self, needed: bool) -> None:
        self.path = None
        if needed:
            local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None
            fd, self.path = tempfile.mkstemp(prefix="ledgercache-second-pass-", suffix=".arrow", dir=local)
            os.close(fd)

    def __enter__(self) -> _Spill:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.path is not None:
            os.unlink(self.path)

    def through(self, batches: Any) -> Any:
        if self.path is None:
            yield from batches
            return

        with pa.ipc.new_file(self.path, SCHEMA) as writer:
            for batch in batches:
                writer.write_batch(batch)
                yield batch

    def back(self) -> Any:
        with pa.memory_map(self.path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


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
    order), and each partition streams its batches through ``mapInArrow`` into the Rust engine,
    one batch at a time: a Python worker's memory follows the engine's state (caches and cursors),
    not the partition's length. The same numbers as ``lc.replay`` on the same trace. Works
    unchanged on a cluster when the ``ledgercache`` wheel is installed on the executors (see
    :func:`cluster_session`). ``belady`` reads each partition twice: its first pass also writes
    the partition to a local Arrow file on the executor, which the second pass reads back.

    ``presorted=True`` skips the shuffle and the sort: use it when every broker's rows already sit
    in one partition, in trace order (as ``generate`` and a Parquet file it wrote deliver them).

    ``trace_df`` is a DataFrame, or any trace :func:`trace_frame` takes (a path, a table, a
    ``RecordBatchReader`` from ``lc.workload.stream``: read once, written to a temporary Parquet
    file batch by batch).
    """
    _extras.require("ledgercache.spark.replay", _extras.SPARK)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    configs = _configs(configs)
    if not (hasattr(trace_df, "sparkSession") and hasattr(trace_df, "mapInArrow")):
        session = SparkSession.getActiveSession()
        if session is None:
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
        from ledgercache.spark import _replay_partition  # noqa: PLC0415 -- runs on a Spark executor, shipped by value: it imports there

        yield from _replay_partition(batches, chunks)

    out = df.mapInArrow(run, _spark_schema(SUMMARY_SCHEMA) + ", " + _per_second_ddl())
    if not with_timeseries:
        return out.drop("per_second")
    # The series is small (a row per trace second and configuration): built on the driver.

    rows = out.collect()
    series: dict[str, list] = {f.name: [] for f in SERIES_SCHEMA}
    for r in rows:
        for second in r["per_second"]:
            values = second.asDict()
            for name, column in series.items():
                column.append(values[name] if name in values else r[name])
    summary = out.sparkSession.createDataFrame([r.asDict() for r in rows], out.schema).drop("per_second")
    return summary, pa.table(series, schema=SERIES_SCHEMA)
