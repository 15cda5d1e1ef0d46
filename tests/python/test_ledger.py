"""ManagedLedger, ManagedCursor and the storage classes from Python."""

import pytest

import ledgercache as lc

P = lc.Position


@pytest.fixture
def world():
    clock = lc.ManualClock()
    manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20), clock=clock)
    return clock, manager


def test_read_count_flow(world):
    _clock, manager = world
    ml = lc.ManagedLedger("persistent://t/n/a", manager, lc.MemoryStorage())
    assert ml.cache is manager.get_cache("persistent://t/n/a")
    subs = [ml.open_cursor(f"sub-{i}") for i in range(3)]
    p = ml.add_entry(b"hello")
    assert ml.cache.get(p).expected_reads == 3
    for i, s in enumerate(subs):
        with s.read_entries(10)[0] as e:
            assert e.data == b"hello"
        assert ml.cache.get(p).expected_reads == 2 - i
    assert ml.storage_stats()["read_ops"] == 0
    assert subs[0].read_entries(10) == []


def test_read_data_releases_at_once_and_backlog_moves(world):
    _, manager = world
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage(), max_entries_per_ledger=3, min_rollover_ms=0)
    c = ml.open_cursor("c", start="latest")
    ps = ml.add_entries([f"m{i}".encode() for i in range(7)])
    assert len(ml.ledgers) == 3
    assert c.read_data(5) == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert ml.cache.get(ps[0]).expected_reads == 0
    assert c.backlog == 7
    c.mark_delete(ps[4])
    assert c.backlog == 2 and c.mark_delete_position == ps[4]
    c.ack(ps[6])
    assert c.backlog == 1
    assert c.read_position == ps[5]


def test_ledgers_roll_over_by_entries_only_after_the_minimum_time(world):
    clock, manager = world
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage(), max_entries_per_ledger=3)
    ml.add_entries([b"x"] * 7)
    assert [entries for _, entries, _ in ml.ledgers] == [7], "Pulsar's 10 minutes have not passed"
    clock.advance_ms(600_001)
    ml.add_entries([b"x"] * 2)
    assert [entries for _, entries, _ in ml.ledgers] == [8, 1]


def test_replay_queue_and_epoch_operations(world):
    _, manager = world
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage())
    c = ml.open_cursor("ks", start="earliest")
    ps = ml.add_entries([b"a", b"b", b"c"])
    assert len(c.read_entries(3)) == 3
    c.add_to_replay([ps[1]])
    assert c.replay_queue == [ps[1]]
    assert [e.position for e in c.read_replay(5)] == [ps[1]]
    epoch = c.start_increase_epoch(ps[0])
    with pytest.raises(lc.CursorModifyingException):
        c.read_entries(1)
    with pytest.raises(lc.CursorEpochConflictException):
        c.rewind()
    assert c.end_increase_epoch() is True
    assert c.epoch == epoch + 1 and c.is_epoch_outdated(epoch)
    assert c.set_read_position(ps[2], epoch) is False
    c.reset(ps[1])
    assert c.stats()["epoch_increase_count"] == 2
    assert [e.position for e in c.read_entries(5)] == ps[1:]
    c.clear_backlog()
    assert c.backlog == 0


def test_async_reads_complete_on_the_clock_and_are_discarded_after_a_seek(world):
    clock, manager = world
    storage = lc.MemoryStorage()
    ml = lc.ManagedLedger("t", manager, storage, read_latency_ms=5)
    # No cursor yet, and past the continue-caching window that runs from the ledger's load (2 s,
    # twice the TTL): nothing cached.
    clock.advance_ms(3_000)
    ps = ml.add_entries([bytes([i]) for i in range(10)])
    c = ml.open_cursor("c", start="earliest")
    h = c.read_entries_async(4)
    assert not h.done and ml.reads_in_flight == 1
    with pytest.raises(lc.LedgerCacheError, match="poll"):
        h.result()
    clock.advance_ms(5)
    assert ml.poll() == 1
    assert [e.position for e in h.result()] == ps[:4]
    h2 = c.read_entries_async(4)
    c.seek(ps[0])
    clock.advance_ms(5)
    ml.poll()
    assert h2.done and h2.discarded and h2.result() == []
    assert c.read_position == ps[0]
    assert storage.stats()["read_ops"] == 2


def test_file_storage_reopens_and_reports_damage(tmp_path, world):
    _, manager = world
    ml = lc.ManagedLedger("persistent://t/n/f", manager, lc.FileStorage(tmp_path))
    ps = ml.add_entries([f"entry-{i}".encode() for i in range(20)])
    del ml  # one writer per directory: the store closes with its last user
    again = lc.ManagedLedger("persistent://t/n/f", lc.EntryCacheManager(lc.CacheConfig()), lc.FileStorage(tmp_path))
    assert again.entry_count == 20
    assert again.open_cursor("r", start="earliest").read_data(3) == [b"entry-0", b"entry-1", b"entry-2"]
    del again
    (seg,) = list(tmp_path.rglob("*.seg"))
    data = bytearray(seg.read_bytes()[:-5])  # a torn last record, as a killed writer leaves
    data[-20] ^= 0xFF  # and a flipped payload byte in entry 18
    seg.write_bytes(bytes(data))
    store = lc.FileStorage(tmp_path)
    assert store.ledgers("persistent://t/n/f") == [(ps[0].ledger_id, 19)]
    assert [r[0] for r in store.recovered] == [seg]
    assert store.read(ps[0].ledger_id, 17, 18) == [b"entry-17"], "the entries before the damage"
    with pytest.raises(lc.CorruptSegmentError, match=str(seg)) as err:
        store.read(ps[0].ledger_id, 18, 18)
    assert isinstance(err.value, OSError)
    assert store.read(ps[0].ledger_id, 0, 0) == [b"entry-0"]


def test_callable_storage_reads_a_users_store(world):
    _, manager = world
    calls = []

    def load(ledger_id, first, last):
        calls.append((ledger_id, first, last))
        return [f"{ledger_id}:{e}".encode() for e in range(first, last + 1)]

    storage = lc.CallableStorage(load, ledgers={"t": [(5, 100)]})
    ml = lc.ManagedLedger("t", manager, storage)
    a = ml.open_cursor("a", start="earliest")
    b = ml.open_cursor("b", start="earliest")
    assert a.read_data(10)[3] == b"5:3"
    assert b.read_data(10)[9] == b"5:9"
    assert calls == [(5, 0, 9)], "b was served from the cache"
    with pytest.raises(lc.UnsupportedError, match="read-only"):
        ml.add_entry(b"x")

    bad = lc.ManagedLedger(
        "t", lc.EntryCacheManager(lc.CacheConfig()), lc.CallableStorage(lambda *a: [b"x"], {"t": [(1, 5)]})
    )
    with pytest.raises(lc.StorageError, match="returned 1 entries"):
        bad.open_cursor("c", start="earliest").read_data(3)
    with pytest.raises(TypeError):
        lc.CallableStorage("not callable")


def test_bad_arguments(world):
    _, manager = world
    with pytest.raises(ValueError, match="max_entries_per_ledger"):
        lc.ManagedLedger("t", manager, lc.MemoryStorage(), max_entries_per_ledger=0)
    with pytest.raises(ValueError, match="read_latency_ms"):
        lc.ManagedLedger("t", manager, lc.MemoryStorage(), read_latency_ms=-1)
    with pytest.raises(ValueError, match="min_rollover_ms"):
        lc.ManagedLedger("t", manager, lc.MemoryStorage(), min_rollover_ms=-1)
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage())
    with pytest.raises(ValueError, match="start"):
        ml.open_cursor("c", start="middle")
    c = ml.open_cursor("c")
    with pytest.raises(ValueError, match="n"):
        c.read_entries(-1)
    with pytest.raises(lc.NotFoundError):
        ml.delete_ledger(42)
    c.close()
    with pytest.raises(lc.UnknownCursorError):
        c.read_entries(1)
    assert ml.cursor("c") is None


def test_legacy_mode_from_python(world):
    clock, _ = world
    manager = lc.EntryCacheManager(lc.CacheConfig(eviction_by_expected_read_count=False), clock=clock)
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage())
    c1, c2 = ml.open_cursor("c1"), ml.open_cursor("c2")
    ml.add_entries([b"x"] * 10)
    c1.read_data(10)
    assert len(ml.cache) == 10
    c2.read_data(10)
    assert len(ml.cache) == 0


def test_python_loader_and_other_threads_do_not_deadlock(world):
    import threading
    import time

    _, manager = world

    def slow_load(ledger_id, first, last):
        time.sleep(0.002)  # holds the ledger's lock while Python runs: other threads must wait, not hang
        return [b"x"] * (last - first + 1)

    ml = lc.ManagedLedger("t", manager, lc.CallableStorage(slow_load, {"t": [(1, 2_000)]}))
    done = threading.Event()

    def reader():
        c = ml.open_cursor("reader", start="earliest", active=False)
        while c.read_data(100):
            pass
        done.set()

    def poker():
        while not done.is_set():
            ml.entry_count, ml.ledgers, ml.cursor_names(), repr(ml)

    threads = [threading.Thread(target=reader), threading.Thread(target=poker)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert done.is_set() and not any(t.is_alive() for t in threads)
