"""What a durable cursor costs (issue 59, item 3): acks/s and mark-deletes/s on a FileStorage with
sync="never" and sync="always", beside entry appends/s on the same store and MemoryStorage's acks
(no persistence), in one run, through the Python API (the same call overhead in every line).

Usage: python benches/durable_cursors.py [DIR]   (DIR: where the stores go; default a temp dir, so
pass a directory on the disk you care about: tmpfs syncs cost nothing).
"""

import sys
import tempfile
import time

import ledgercache as lc

N = {"never": 20_000, "always": 1_000}


def ledger(store):
    manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 24), clock=lc.ManualClock())
    return lc.ManagedLedger("persistent://bench/ns/durable", manager, store)


def rate(n, f):
    start = time.perf_counter()
    f()
    return n / (time.perf_counter() - start)


def measure(store, n):
    ml = ledger(store)
    c = ml.open_cursor("sub")
    payload = b"x" * 100
    positions = []
    appends = rate(n, lambda: positions.extend(ml.add_entry(payload) for _ in range(n)))
    # Every other entry acked on its own (each leaves a hole, the ranges grow), then mark-deletes.
    acks = rate(n // 2, lambda: [c.ack(p) for p in positions[1::2]])
    mds = rate(n // 2, lambda: [c.mark_delete(p) for p in positions[: n // 2]])
    return appends, acks, mds


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory(dir=base) as d:
        print(f"stores under {d}")
        print(f"{'store':<24}{'appends/s':>12}{'acks/s':>12}{'mark-deletes/s':>16}")
        rows = [("MemoryStorage", lc.MemoryStorage(), N["never"])]
        for sync, n in N.items():
            rows.append((f'FileStorage sync="{sync}"', lc.FileStorage(f"{d}/{sync}", sync=sync), n))
        for name, store, n in rows:
            appends, acks, mds = measure(store, n)
            print(f"{name:<24}{appends:>12,.0f}{acks:>12,.0f}{mds:>16,.0f}")
            if isinstance(store, lc.FileStorage):
                store.close()


if __name__ == "__main__":
    main()
