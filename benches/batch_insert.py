"""Inserting from Arrow: `EntryCache.insert_batch` against the per-entry `EntryCache.insert` loop
on the same data, and reading back with `get_range_arrow`, measured in one run (best of N).

1,000,000 entries of 64 bytes in batches of 10,000 (a typical `mapInArrow` batch). Goal: >= 20 M
entries/s for `insert_batch`.
"""

import sys
import time

import pyarrow as pa

import ledgercache as lc

N = 1_000_000
BATCH = 10_000
SIZE = 64
REPEAT = 5
LEDGER = 7

payloads = [bytes([i % 251]) * SIZE for i in range(N)]
chunks = [pa.array(payloads[i : i + BATCH], pa.binary()) for i in range(0, N, BATCH)]


def fresh_cache() -> lc.EntryCache:
    # Big enough that nothing is evicted: this measures inserting, not eviction.
    config = lc.CacheConfig(cache_size_bytes=4 * N * SIZE)
    return lc.EntryCacheManager(config).get_cache("bench")


def best(run, repeat: int = REPEAT) -> float:
    """Best wall time of `repeat` runs of `run(cache)`, each on a fresh cache."""
    times = []
    for _ in range(repeat):
        cache = fresh_cache()
        start = time.perf_counter()
        run(cache)
        times.append(time.perf_counter() - start)
        del cache
    return min(times)


def batched(cache: lc.EntryCache) -> None:
    for k, chunk in enumerate(chunks):
        cache.insert_batch(LEDGER, k * BATCH, chunk)


def per_entry(cache: lc.EntryCache) -> None:
    insert, position = cache.insert, lc.Position
    for i, data in enumerate(payloads):
        insert(position(LEDGER, i), data)


def per_entry_from_arrow(cache: lc.EntryCache) -> None:
    # What a mapInArrow job does without the batch path: one bytes object per element.
    insert, position = cache.insert, lc.Position
    i = 0
    for chunk in chunks:
        for data in chunk.to_pylist():
            insert(position(LEDGER, i), data)
            i += 1


t_batch = best(batched)
t_single = best(per_entry, repeat=3)
t_single_arrow = best(per_entry_from_arrow, repeat=3)

cache = fresh_cache()
batched(cache)
read_times = []
for _ in range(REPEAT):
    start = time.perf_counter()
    for k in range(N // BATCH):
        first = lc.Position(LEDGER, k * BATCH)
        cache.get_range_arrow(first, lc.Position(LEDGER, k * BATCH + BATCH - 1))
    read_times.append(time.perf_counter() - start)
t_read = min(read_times)

rate = lambda t: N / t / 1e6
print(
    f"python insert, {N:,} x {SIZE} B entries, batches of {BATCH:,}: "
    f"insert_batch {rate(t_batch):.1f} M entries/s ({t_batch / N * 1e9:.0f} ns/entry); "
    f"insert loop over bytes {rate(t_single):.2f} M entries/s ({t_single / N * 1e9:.0f} ns/entry), "
    f"over Arrow chunks (to_pylist) {rate(t_single_arrow):.2f} M entries/s; "
    f"insert_batch / insert loop = {t_single / t_batch:.0f}x "
    f"(goal >= 20 M entries/s: {'met' if rate(t_batch) >= 20 else 'NOT met'})"
)
print(f"python read, get_range_arrow of {BATCH:,}-entry ranges: {rate(t_read):.1f} M entries/s")
if "--check" in sys.argv and rate(t_batch) < 20:
    sys.exit(f"insert_batch below the 20 M entries/s goal: {rate(t_batch):.1f}")
