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

from ._native import CacheConfig, EntryCacheManager, FileStorage, ManualClock, SystemClock

__all__ = ["executor_cache", "executor_storage", "local_session"]

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
    """This worker process's :class:`FileStorage` for ``path`` (opened on first use)."""
    key = ("file-storage", os.path.abspath(os.fspath(path)))
    return _per_process(key, lambda: FileStorage(path))


def local_session(app_name: str = "ledgercache", cores: int | str = "*", **conf: str) -> Any:
    """A local SparkSession (``local[cores]``) whose Python workers run this interpreter."""
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
