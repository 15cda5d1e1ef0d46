"""Spark local[2] replay of a ~10,000,000-event trace against lc.replay in-process, in one run.
Run: .venv/bin/python benches/spark_replay.py"""

from __future__ import annotations

import tempfile
import time

import ledgercache as lc

SPEC = {**lc.workload.SCENARIOS["tailing-fan-out"], "brokers": 4, "topics": 4, "testDurationMinutes": 8.5}
CONFIGS = [lc.CacheConfig(cache_size_bytes=16 << 20, strategy=s) for s in ("pip430", "lru")]


def main() -> None:
    trace = lc.workload.generate(SPEC, seed=1)
    print(f"trace: {trace.num_rows:,} events, 4 brokers")
    start = time.perf_counter()
    lc.replay(trace, CONFIGS)
    local = time.perf_counter() - start
    print(f"in-process lc.replay: {local:.2f} s ({trace.num_rows / local / 1e6:.1f} M events/s)")
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/trace.parquet"
        lc.trace.write(trace, path)
        start = time.perf_counter()
        spark = lc.spark.local_session("bench", cores=2)
        up = time.perf_counter() - start
        df = spark.read.parquet(path)
        start = time.perf_counter()
        rows = lc.spark.replay(df, CONFIGS, partitions=2).collect()
        on_spark = time.perf_counter() - start
        gen = lc.spark.generate(spark, SPEC, seed=1).cache()
        gen.count()
        start = time.perf_counter()
        lc.spark.replay(gen, CONFIGS, presorted=True).collect()
        presorted = time.perf_counter() - start
        spark.stop()
    print(
        f"Spark local[2], shuffled and sorted: {on_spark:.2f} s once the session is up ({up:.1f} s to start it); "
        f"{len(rows)} rows; Spark / in-process = {on_spark / local:.2f}x"
    )
    print(
        f"Spark local[2], presorted (one partition per broker): {presorted:.2f} s; Spark / in-process = {presorted / local:.2f}x"
    )


if __name__ == "__main__":
    main()
