"""Python call overhead: `EntryCache.get` (hit) against `dict.get`, measured in one run."""

import timeit

import ledgercache as lc

N = 100_000
cache = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 30)).get_cache("t")
positions = [lc.Position(0, i) for i in range(1000)]
table = {}
for p in positions:
    cache.insert(p, b"x" * 64)
    table[p] = b"x" * 64

p = positions[500]
best = lambda stmt: min(timeit.repeat(stmt, number=N, repeat=7, globals=globals())) / N * 1e9
t_get = best("cache.get(p)")
t_dict = best("table.get(p)")
t_data = best("cache.get(p).data")
print(
    f"python: cache.get hit {t_get:.0f} ns, .get(p).data {t_data:.0f} ns, dict.get {t_dict:.0f} ns "
    f"(cache.get / dict.get = {t_get / t_dict:.1f}x)"
)
