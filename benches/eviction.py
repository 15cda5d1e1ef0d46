"""The eviction scenario of benches/eviction.rs from Python: 1,000,000 entries of 64-byte `bytes`
inserted through `lc.EntryCache.insert`, ~10% expecting a read, ~10% read back, then time passes
(`evict_expired`) until the cache is empty. Only the passes are timed, best of N; the payloads are
freed by them. Given the Rust figure (ns/entry, owned payloads, with requeues) on the command line,
prints the ratio beside it."""

from __future__ import annotations

import os
import random
import sys
import time

import ledgercache as lc

ENTRIES = 1_000_000
ROUNDS = int(os.environ.get("LEDGERCACHE_BENCH_ROUNDS", "3"))


def run(copy_entries: bool, requeues: bool) -> tuple[float, int]:
    clock = lc.ManualClock()
    config = lc.CacheConfig(cache_size_bytes=1 << 40, eviction_time_threshold_ms=1, copy_entries=copy_entries)
    manager = lc.EntryCacheManager(config, clock=clock)
    cache = manager.get_cache("ledger")
    rng = random.Random(1)
    for e in range(ENTRIES):
        p = lc.Position(0, e)
        expected = 1 if requeues and rng.random() < 0.1 else 0
        # A distinct object per entry, as payloads arriving from a client are.
        cache.insert(p, e.to_bytes(8, "little") * 8, expected, 100)
        if requeues and rng.random() < 0.1:
            cache.get(p)
    spent, passes = 0.0, 0
    while manager.entry_count > 0:
        clock.advance_ms(2)
        start = time.perf_counter()
        manager.evict_expired()
        spent += time.perf_counter() - start
        passes += 1
    return spent / ENTRIES * 1e9, passes


def python_free_ns() -> float:
    """The anchor: Python's own cost of freeing the payloads, the same objects dropped from a list
    in insertion order (what an eviction pass without copies must do for each evicted entry)."""
    best = float("inf")
    for _ in range(ROUNDS):
        payloads = [e.to_bytes(8, "little") * 8 for e in range(ENTRIES)]
        start = time.perf_counter()
        del payloads
        best = min(best, time.perf_counter() - start)
    return best / ENTRIES * 1e9


def main() -> None:
    rust = float(sys.argv[1]) if len(sys.argv) > 1 else None
    print(f"eviction from Python: {ENTRIES} entries of 64-byte bytes, time passes until empty, best of {ROUNDS}")
    print(
        f"  anchor: Python frees the same 64-byte bytes from a list in {python_free_ns():.1f} ns/object "
        "(with copy_entries=False each evicted entry's object is freed by the pass)"
    )
    for requeues in (True, False):
        label = "10% expected reads + 10% accessed" if requeues else "no requeues"
        for copy_entries in (False, True):
            ns, passes = min(run(copy_entries, requeues) for _ in range(ROUNDS))
            line = f"  {label:<34} copy_entries={copy_entries!s:<5} {ns:7.1f} ns/entry ({passes} passes; goal <= 30)"
            if rust is not None and requeues:
                line += f"; Rust {rust:.1f} ns/entry, Python / Rust = {ns / rust:.1f}x"
            print(line)


if __name__ == "__main__":
    main()
