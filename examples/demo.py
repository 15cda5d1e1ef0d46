"""The PIP-430 entry cache at work on one topic (run with `make demo`).

A producer publishes one entry per millisecond; two subscriptions tail the topic and a third reads
two seconds behind, longer than the cache's one-second TTL. Published entries are cached with one
expected read per active cursor; a reader that misses reads "storage" and caches what it read with
the number of cursors at or before it (PIP-430's read path). The same traffic runs under the final
PIP-430 design, which extends the TTL of entries that still expect reads, and under plain FIFO with
a TTL (``pip430-fifo``); the table shows how many reads each one had to send to storage.
"""

from __future__ import annotations

import ledgercache as lc

ENTRIES = 20_000
ENTRY_SIZE = 1024
LAG = 2_000  # entries (= milliseconds) the slow subscription stays behind
CACHE_BYTES = 16 << 20  # ample room: here time, not size, decides what is evicted
READ_BATCH = 50


def run(strategy: str) -> dict[str, float]:
    clock = lc.ManualClock()
    config = lc.CacheConfig(cache_size_bytes=CACHE_BYTES, strategy=strategy, eviction_time_threshold_ms=1000)
    manager = lc.EntryCacheManager(config, clock=clock)
    cache = manager.get_cache("persistent://public/default/orders")
    cursors = lc.ActiveCursorContainer()
    read_pos = {"tail-a": 0, "tail-b": 0, "slow": 0}
    for name in read_pos:
        cursors.add(name, lc.Position(1, 0))
    storage_reads = 0

    def read(name: str, upto: int) -> None:
        nonlocal storage_reads
        start = read_pos[name]
        for entry_id in range(start, upto):
            pos = lc.Position(1, entry_id)
            entry = cache.get(pos)
            if entry is None:
                storage_reads += 1
                # PIP-430 read path: cache what storage returned with the cursors at or before us.
                expected = cursors.count_at_or_before(name) - 1
                if expected > 0:
                    cache.insert(pos, bytes(ENTRY_SIZE), expected_reads=expected)
            else:
                entry.release()
        read_pos[name] = upto
        cursors.update(name, lc.Position(1, upto))

    for entry_id in range(ENTRIES):
        clock.advance_ms(1)
        cache.insert(lc.Position(1, entry_id), bytes(ENTRY_SIZE), expected_reads=len(cursors))
        if entry_id % READ_BATCH == READ_BATCH - 1:
            read("tail-a", entry_id + 1)
            read("tail-b", entry_id + 1)
            if entry_id + 1 > LAG:
                read("slow", entry_id + 1 - LAG)
        if entry_id % 10 == 0:
            manager.run_eviction()
    stats = manager.stats()
    reads = stats["hits"] + stats["misses"]
    return {
        "reads": reads,
        "hits": stats["hits"],
        "storage_reads": storage_reads,
        "hit_ratio": stats["hits"] / reads,
        "requeued": stats["requeued"],
        "evicted": stats["evicted"],
    }


def main() -> None:
    print(__doc__.strip().splitlines()[0])
    print(f"{ENTRIES} entries of {ENTRY_SIZE} B, 1 per ms; TTL 1 s; one subscription {LAG} ms behind\n")
    header = f"{'strategy':<12} {'reads':>8} {'hits':>8} {'storage reads':>14} {'hit ratio':>10} {'requeued':>9} {'evicted':>8}"
    print(header)
    print("-" * len(header))
    results = {s: run(s) for s in ("pip430", "pip430-fifo")}
    for s, r in results.items():
        print(
            f"{s:<12} {r['reads']:>8} {r['hits']:>8} {r['storage_reads']:>14} {r['hit_ratio']:>10.3f} "
            f"{r['requeued']:>9} {r['evicted']:>8}"
        )
    saved = results["pip430-fifo"]["storage_reads"] - results["pip430"]["storage_reads"]
    print(f"\nPIP-430's expected-read tracking saved {saved} storage reads over plain FIFO on this traffic.")


if __name__ == "__main__":
    main()
