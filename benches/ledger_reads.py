"""Sequential tailing reads through Python batch reads (`ManagedCursor.read_data`), the same
workload as benches/ledger_reads.rs; prints entries/s and, given the Rust figure, the ratio."""

from __future__ import annotations

import sys
import time

import ledgercache as lc

ENTRIES, CURSORS, ROUND, BATCH = 1_000_000, 10, 1_000, 100


def run() -> tuple[float, int]:
    manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=256 << 20))
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage())
    cursors = [ml.open_cursor(f"sub-{i}") for i in range(CURSORS)]
    payloads = [bytes(1024)] * ROUND
    read_time, read = 0.0, 0
    for _ in range(ENTRIES // ROUND):
        ml.add_entries(payloads)
        start = time.perf_counter()
        for c in cursors:
            for _ in range(ROUND // BATCH):
                read += len(c.read_data(BATCH))
        read_time += time.perf_counter() - start
    return read_time, read


def main() -> None:
    t, read = min(run() for _ in range(3))
    rate = read / t / 1e6
    line = f"ledger reads (Python read_data): {rate:.2f} M entries/s ({read} entries), best of 3"
    if len(sys.argv) > 1:  # the Rust figure, M entries/s
        line += f"; Python / Rust = {rate / float(sys.argv[1]):.0%}"
    print(line)


if __name__ == "__main__":
    main()
