"""A topic's life: publish, three subscriptions (one slow), a seek; then hits, misses, storage reads."""

import ledgercache as lc

clock = lc.ManualClock()
manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=4 << 20), clock=clock)
topic = lc.ManagedLedger("persistent://public/default/orders", manager, lc.MemoryStorage())
fast, audit = topic.open_cursor("billing"), topic.open_cursor("audit")
slow = topic.open_cursor("reporting", start="earliest", active=False)   # connects later
for round_ in range(20):                                    # 20 rounds of 100 entries, 250 ms apart
    clock.advance_ms(250)
    topic.add_entries([f"order-{round_}-{i}".encode() for i in range(100)])
    fast.read_data(100), audit.read_data(100)               # tailing readers keep up
    manager.run_eviction()
slow.active = True                                           # the slow one catches up from storage
while slow.read_data(500):
    pass
audit.seek(topic.cursor("billing").read_position)          # audit skips ahead to billing
s, st = manager.stats(), topic.storage_stats()
print(f"hits={s['hits']} misses={s['misses']} storage_reads={st['read_ops']} "
      f"entries_from_storage={st['read_entries']} backlog(reporting)={slow.backlog}")
