"""Replay throughput through lc.replay (events/s, one core) for each strategy on a ~10,000,000-event
trace, and the generator's throughput. Run: .venv/bin/python benches/replay_throughput.py"""

from __future__ import annotations

import time

import ledgercache as lc

SPEC = {**lc.workload.SCENARIOS["tailing-fan-out"], "testDurationMinutes": 8.5}
STRATEGIES = ("pip430", "pip430-fifo", "lru", "legacy", "segmented", "belady")


def main() -> None:
    start = time.perf_counter()
    trace = lc.workload.generate(SPEC, seed=1)
    took = time.perf_counter() - start
    print(f"generator: {trace.num_rows:,} events in {took:.2f} s = {trace.num_rows / took / 1e6:.1f} M events/s")
    # Warm-up: pyarrow imports pandas on its first pa.array() call; keep that out of the first timing.
    lc.replay(trace.slice(0, 10_000), lc.CacheConfig(cache_size_bytes=1 << 20))
    for strategy in STRATEGIES:
        config = lc.CacheConfig(cache_size_bytes=64 << 20, strategy=strategy)
        start = time.perf_counter()
        out = lc.replay(trace, config).to_pylist()[0]
        wall = time.perf_counter() - start
        engine = out["replay_seconds"]
        passes = 2 if strategy == "belady" else 1
        print(
            f"replay {strategy:<12} {trace.num_rows / wall / 1e6:6.1f} M events/s through lc.replay "
            f"({trace.num_rows * passes / engine / 1e6:6.1f} M/s in the engine{', 2 passes' if passes == 2 else ''}), "
            f"hit ratio {out['hit_ratio']:.3f}"
        )


if __name__ == "__main__":
    main()
