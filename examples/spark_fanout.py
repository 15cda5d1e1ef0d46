"""Two subscriptions per topic, read inside a PySpark job: the second is served from the cache.

The driver writes T topics into a shared FileStorage directory. A ``mapInArrow`` job gives each
task one topic; the task opens the topic's ManagedLedger on its worker's shared cache
(``lc.spark.executor_cache``) and storage (``lc.spark.executor_storage``), then two subscriptions
read it from the start, one after the other. Each row reports what one reader took from storage.

Run: ``.venv/bin/python examples/spark_fanout.py`` (local Spark, a temporary storage directory). On a
cluster: ``examples/spark_fanout.py --master spark://host:7077 --storage /shared/dir``, with the
``ledgercache`` wheel installed in the executors' Python (``PYSPARK_PYTHON``) and ``--storage`` on a file
system every executor mounts at the same path; or ``spark-submit --master ... examples/spark_fanout.py
--storage /shared/dir``, whose master wins. The job ships this file to the executors (``addPyFile``):
its task function lives here, and ledgercache itself comes from the executors' installation.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Iterator

import pyarrow as pa

import ledgercache as lc

TOPICS = 4
ENTRIES = 2_000
CONFIG = lc.CacheConfig(cache_size_bytes=64 << 20)
SCHEMA = "topic string, reader string, entries long, storage_read_ops long, storage_read_entries long, pid long"


def topic_name(i: int) -> str:
    return f"persistent://public/default/events-{i}"


def write_topics(directory: str, topics: int = TOPICS, entries: int = ENTRIES) -> None:
    """The driver's part: publish `entries` entries of 512 bytes to each topic."""
    manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=0))
    storage = lc.FileStorage(directory)
    for t in range(topics):
        # Written at once, so the ledgers roll by entry count alone (no minimum rollover time).
        ml = lc.ManagedLedger(topic_name(t), manager, storage, max_entries_per_ledger=500, min_rollover_ms=0)
        ml.add_entries([f"{t}:{i}:".encode().ljust(512, b".") for i in range(entries)])


def read_partition(directory: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        manager = lc.spark.executor_cache(CONFIG)
        storage = lc.spark.executor_storage(directory)
        rows: dict[str, list] = {k: [] for k in ("topic", "reader", "entries", "storage_read_ops", "storage_read_entries", "pid")}
        for batch in batches:
            for topic_id in batch.column("id").to_pylist():
                name = topic_name(topic_id)
                ml = lc.ManagedLedger(name, manager, storage)
                readers = [ml.open_cursor(sub, start="earliest") for sub in ("sub-a", "sub-b")]
                for cursor in readers:
                    before = storage.stats()
                    n = 0
                    while chunk := cursor.read_data(500):
                        n += len(chunk)
                    after = storage.stats()
                    for k, v in (
                        ("topic", name),
                        ("reader", cursor.name),
                        ("entries", n),
                        ("storage_read_ops", after["read_ops"] - before["read_ops"]),
                        ("storage_read_entries", after["read_entries"] - before["read_entries"]),
                        ("pid", os.getpid()),
                    ):
                        rows[k].append(v)
                for cursor in readers:
                    cursor.close()
        yield pa.RecordBatch.from_pydict(rows)

    return run


def run_job(spark, directory: str, topics: int = TOPICS) -> list[dict]:
    # The task function is defined in this module: executors import it from the shipped file.
    spark.sparkContext.addPyFile(__file__)
    df = spark.range(topics, numPartitions=topics)
    out = df.mapInArrow(read_partition(directory), SCHEMA)
    # Sorted here, not by Spark: a Spark sort samples its input first, running every task twice
    # (the second run would find the first run's entries cached in its worker).
    return sorted((r.asDict() for r in out.collect()), key=lambda r: (r["topic"], r["reader"]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", help="Spark master (default local[2]; a master set by spark-submit wins)")
    p.add_argument("--storage", help="FileStorage directory every executor sees (default: a temporary one here)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ledgercache-spark-") as scratch:
        directory = args.storage or scratch
        write_topics(directory)
        spark = lc.spark.session("ledgercache-fanout", master=args.master, cores=2)
        try:
            rows = run_job(spark, directory)
        finally:
            spark.stop()
    print(f"{'topic':<40} {'reader':<6} {'entries':>8} {'storage reads':>14} {'entries from storage':>21} {'worker':>8}")
    for r in rows:
        print(
            f"{r['topic']:<40} {r['reader']:<6} {r['entries']:>8} {r['storage_read_ops']:>14} "
            f"{r['storage_read_entries']:>21} {r['pid']:>8}"
        )


if __name__ == "__main__":
    main()
