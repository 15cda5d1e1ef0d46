"""The entry cache from Python: the API contract and the PIP-430 behaviours."""

import threading

import pyarrow as pa
import pytest

import ledgercache as lc
from conftest import make_manager

P = lc.Position


def test_insert_get_and_zero_copy_bytes(clock):
    m = make_manager(clock)
    c = m.get_cache("t")
    assert c is m.get_cache("t")
    data = b"payload-0"
    assert c.insert(P(1, 0), data) is True
    assert c.insert(P(1, 0), b"other") is False
    e = c.get(P(1, 0))
    assert e.data is data, "bytes come back as the same object"
    assert (e.position, e.size, e.expected_reads, e.requeue_count) == (P(1, 0), 9, None, 0)
    assert c.get(P(1, 1)) is None
    assert P(1, 0) in c and P(1, 1) not in c and "x" not in c
    assert (len(c), c.size_bytes, m.size_bytes, m.entry_count) == (1, 9, 9, 1)
    s = m.stats()
    assert (s["inserted"], s["hits"], s["misses"]) == (1, 1, 1)


def test_other_buffers_are_accepted(clock):
    c = make_manager(clock).get_cache("t")
    c.insert(P(1, 0), bytearray(b"ab"))
    c.insert(P(1, 1), memoryview(b"cde"))
    c.insert(P(1, 2), pa.py_buffer(b"fghi"))
    assert [bytes(e.data) for e in c.get_range(P(1, 0), P(1, 2))] == [b"ab", b"cde", b"fghi"]
    assert c.size_bytes == 9
    with pytest.raises(TypeError, match="bytes-like"):
        c.insert(P(1, 3), "text")
    with pytest.raises(TypeError, match="bytes-like"):
        c.insert(P(1, 3), 12)


def test_size_override_and_expected_reads(clock):
    m = make_manager(clock)
    c = m.get_cache("t")
    c.insert(P(1, 0), b"", size=1000, expected_reads=2)
    e = c.get(P(1, 0))
    assert (e.size, e.expected_reads, len(e)) == (1000, 2, 0)
    assert e.release() is True and e.release() is False
    with c.get(P(1, 0)) as e2:
        assert e2.expected_reads == 1
    assert e2.released and c.get(P(1, 0)).expected_reads == 0
    # Dropping a copy without releasing it consumes nothing.
    c.get(P(1, 0))
    assert c.get(P(1, 0)).expected_reads == 0


def test_get_range_remove_range_clear(clock):
    c = make_manager(clock).get_cache("t")
    for e in [0, 1, 3, 5, 8]:
        c.insert(P(0, e), str(e).encode())
    assert [x.position.entry_id for x in c.get_range(P(0, 1), P(0, 8))] == [1, 3, 5, 8]
    assert c.get_range(P(0, 9), P(0, 1)) == []
    assert c.remove_range(P(0, 1), P(0, 5), False) == (2, 2)
    assert c.remove_range(P(0, 5), P(0, 5), True) == (1, 1)
    assert c.positions() == [P(0, 0), P(0, 8)]
    assert c.clear() == (2, 2)
    assert (len(c), c.size_bytes) == (0, 0)


def test_range_misses_saturate_instead_of_wrapping(clock):
    # The widest range names 2**64 entries, one more than the counter holds: it stays at its
    # maximum (it wrapped to 0 before), through a second range, a complete-range read and the
    # cache's removal.
    m = make_manager(clock)
    c = m.get_cache("t")
    c.get_range(P(0, -(2**63)), P(0, 2**63 - 1))
    assert m.stats()["misses"] == 2**64 - 1
    c.get_range_arrow(P(0, 0), P(0, 2**63 - 1))
    assert m.stats()["misses"] == 2**64 - 1
    m.remove_cache("t")
    assert m.stats()["misses"] == 2**64 - 1


def test_insert_over_the_trigger_evicts_oldest_before_returning(clock):
    m = make_manager(clock, cache_size_bytes=10, eviction_watermark=0.8)
    c1, c2 = m.get_cache("cache1"), m.get_cache("cache2")
    c1.insert(P(1, 1), b"aaaa")
    c1.insert(P(1, 0), b"bbb")
    c2.insert(P(2, 0), b"c")
    c2.insert(P(2, 1), b"d")
    assert m.size_bytes == 9
    c2.insert(P(2, 3), b"e")
    assert (m.size_bytes, c1.size_bytes, c2.size_bytes) == (6, 3, 3)
    assert P(1, 1) not in c1
    assert m.remove_cache("cache1") == (1, 3)
    assert m.size_bytes == 3
    assert m.cache_names() == ["cache2"]
    with pytest.raises(lc.ClosedError):
        c1.insert(P(1, 5), b"x")
    assert m.get_cache("cache1") is not c1


def test_settles_at_155(clock):
    m = make_manager(clock, cache_size_bytes=200, eviction_watermark=0.8, eviction_time_threshold_ms=20_000)
    c = m.get_cache("cache1")
    for i in range(20):
        assert c.insert(P(1, i), bytes(i + 1))
    assert m.size_bytes == 155


def test_cache_size_zero_caches_nothing(clock):
    m = make_manager(clock, cache_size_bytes=0)
    c = m.get_cache("cache1")
    assert c.insert(P(1, 0), b"abcd") is False
    assert (m.size_bytes, len(c), m.stats()["inserted"]) == (0, 0, 0)


def test_time_pass_with_requeues(clock):
    m = make_manager(clock, extend_ttl_max_times=1, extend_ttl_of_recently_accessed=False, eviction_time_threshold_ms=1)
    c = m.get_cache("t")
    c.insert(P(2, 1), bytes(10), expected_reads=1)
    c.insert(P(2, 2), bytes(10))
    clock.advance_ms(10)
    assert m.evict_expired() == (1, 10)
    assert c.get(P(2, 1)).requeue_count == 1
    clock.advance_ms(10)
    assert m.evict_expired() == (1, 10)
    assert m.stats()["requeued"] == 1 and m.removal_queue_len() == 0


def test_size_pass_keeps_expected_reads_last(clock):
    m = make_manager(clock, extend_ttl_max_times=5)
    c = m.get_cache("t")
    c.insert(P(11, 1), bytes(40))
    c.insert(P(11, 2), bytes(50), expected_reads=3)
    c.insert(P(11, 3), bytes(30))
    c.get(P(11, 1))
    assert m.evict_bytes(35) == (2, 70)
    assert c.positions() == [P(11, 2)]


def test_eviction_releases_the_evicted_bytes(clock):
    """Every eviction pass from Python gives the evicted ``bytes`` back to Python right away (the
    bindings drop them in one batch under the GIL), whichever call ran it."""
    import sys

    m = make_manager(clock, eviction_time_threshold_ms=1)
    c = m.get_cache("t")
    payloads = [bytes([i]) * 64 for i in range(3)]
    before = [sys.getrefcount(b) for b in payloads]
    for i in range(3):
        c.insert(P(0, i), payloads[i])
    assert [sys.getrefcount(b) for b in payloads] == [n + 1 for n in before], "the cache holds each"
    assert m.evict_bytes(64) == (1, 64)
    clock.advance_ms(2)
    c.insert(P(0, 3), payloads[0])
    assert m.evict_expired() == (2, 128)
    assert [sys.getrefcount(b) for b in payloads] == [before[0] + 1, before[1], before[2]]
    clock.advance_ms(10)
    assert m.run_eviction() == (1, 64)
    assert [sys.getrefcount(b) for b in payloads] == before


def test_an_inserts_size_pass_releases_the_evicted_bytes_before_it_returns(clock):
    """The ``bytes`` that an insert's size pass evicts are given back to Python by the time
    ``insert`` returns (the pass runs without the GIL and hands them back), and a refused
    insert keeps nothing."""
    import sys

    m = make_manager(clock, cache_size_bytes=200, eviction_watermark=0.5)
    c = m.get_cache("t")
    payloads = [bytes([i]) * 64 for i in range(4)]
    before = [sys.getrefcount(b) for b in payloads]
    for i in range(3):
        assert c.insert(P(0, i), payloads[i])
    assert m.size_bytes == 192
    assert c.insert(P(0, 3), payloads[3]), "over the trigger: a pass down to the watermark (100)"
    assert (m.size_bytes, c.positions()) == (64, [P(0, 3)])
    assert [sys.getrefcount(b) for b in payloads] == [*before[:3], before[3] + 1]
    assert not c.insert(P(0, 3), payloads[0]), "already cached: nothing changes"
    assert sys.getrefcount(payloads[0]) == before[0], "and the refused bytes are not kept"


def test_removing_entries_gives_their_bytes_back_before_it_returns(clock):
    """``remove_range``, ``clear`` and ``remove_cache`` release the removed ``bytes`` by the time
    they return (released with the GIL once the cache's lock is let go), and keep the rest."""
    import sys

    m = make_manager(clock)
    payloads = [bytes([i]) * 64 for i in range(6)]
    before = [sys.getrefcount(b) for b in payloads]
    c, d = m.get_cache("c"), m.get_cache("d")
    for i in range(4):
        assert c.insert(P(0, i), payloads[i])
    for i in (4, 5):
        assert d.insert(P(0, i), payloads[i])
    assert c.remove_range(P(0, 0), P(0, 2), False) == (2, 128)
    held = [x + 1 for x in before]
    assert [sys.getrefcount(b) for b in payloads] == before[:2] + held[2:]
    assert c.clear() == (2, 128)
    assert [sys.getrefcount(b) for b in payloads] == before[:4] + held[4:]
    assert m.remove_cache("d") == (2, 128)
    assert [sys.getrefcount(b) for b in payloads] == before
    assert (m.entry_count, m.size_bytes) == (0, 0)


# Run in a process of its own, so that a hang fails the test instead of the whole run.
_EVICTOR_RELEASES_PYTHON_MEMORY = """
import threading, time
import pyarrow as pa
import ledgercache as lc

clock = lc.ManualClock()
config = lc.CacheConfig(cache_size_bytes=1 << 30, eviction_time_threshold_ms=1, eviction_interval_ms=1)
m = lc.EntryCacheManager(config, clock=clock, background_eviction=True)
c = m.get_cache("t")
stop = False

def reader():
    i = 0
    while not stop:
        c.get(lc.Position(0, 0))
        c.insert(lc.Position(1 << 20, i), b"x" * 16)
        i += 1

t = threading.Thread(target=reader)
t.start()
for ledger in range(200):
    n = 1000
    # A binary array whose values live in a Python bytes object (pyarrow wraps it in a buffer whose
    # release takes the GIL): once the array is gone here, the cache's slices hold the last
    # reference, and the evictor's release of them needs the GIL.
    data = pa.py_buffer(bytes(range(256)) * 32)
    offsets = pa.array([i * 8 for i in range(n + 1)], pa.int32()).buffers()[1]
    c.insert_batch(ledger, 0, pa.Array.from_buffers(pa.binary(), n, [None, offsets, data]))
    del data
    clock.advance_ms(5)
    time.sleep(0.001)
stop = True
t.join()
m.run_eviction()
# The manager's last handle stops the evictor and waits for it, without the GIL, which the
# evictor may be waiting for.
del c, m
print("done")
"""


_MANAGER_DROPPED_WHILE_ITS_EVICTOR_RELEASES = """
import random, time
import pyarrow as pa
import ledgercache as lc

for k in range(300):
    clock = lc.ManualClock()
    config = lc.CacheConfig(cache_size_bytes=1 << 30, eviction_time_threshold_ms=1, eviction_interval_ms=1)
    m = lc.EntryCacheManager(config, clock=clock, background_eviction=True)
    c = m.get_cache("t")
    n = 2000
    data = pa.py_buffer(bytes(range(256)) * 64)
    offsets = pa.array([i * 8 for i in range(n + 1)], pa.int32()).buffers()[1]
    c.insert_batch(0, 0, pa.Array.from_buffers(pa.binary(), n, [None, offsets, data]))
    del data
    clock.advance_ms(5)
    # Dropped at a moment of the evictor's pass or of its release of what the pass evicted.
    until = time.perf_counter() + random.random() * 0.002
    while time.perf_counter() < until:
        pass
    del c, m
print("done")
"""


def _runs_to_the_end(script: str, hang: str) -> None:
    import subprocess
    import sys

    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(hang)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"


def test_the_background_evictor_releases_python_memory_with_no_lock_held():
    """The background evictor releases what it evicts once it holds no cache lock: released under
    one, a buffer whose release takes the GIL waited for a thread that held the GIL and waited for
    that lock (``get``, ``insert``), and both hung."""
    _runs_to_the_end(
        _EVICTOR_RELEASES_PYTHON_MEMORY, "the evictor and a reader hung, each waiting for what the other holds"
    )


def test_the_last_manager_handle_waits_for_its_evictor_without_the_gil():
    """Dropping a manager stops its background evictor and waits for it; the evictor may be
    waiting for the GIL to release a pyarrow buffer of Python memory, so the wait lets go of the
    GIL (holding it, both hung)."""
    _runs_to_the_end(
        _MANAGER_DROPPED_WHILE_ITS_EVICTOR_RELEASES,
        "a dropped manager and its evictor hung, each waiting for the other",
    )


def test_threads_insert_while_the_background_evictor_runs(clock):
    """Inserts (holding the GIL) and the background evictor (without it) take the same caches'
    locks: the totals agree afterwards and stay within the budget."""
    config = lc.CacheConfig(cache_size_bytes=20_000, eviction_time_threshold_ms=1, eviction_interval_ms=1)
    m = lc.EntryCacheManager(config, clock=clock, background_eviction=True)

    def writer(t):
        c = m.get_cache(f"t{t}")
        for i in range(20_000):
            c.insert(P(t, i), bytes([i % 256]) * 100, expected_reads=i % 2)
            if i % 100 == 0:
                clock.advance_ms(1)
            c.get(P(t, i // 2))

    threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a writer is stuck"
    m.run_eviction()
    assert m.size_bytes == sum(m.get_cache(n).size_bytes for n in m.cache_names())
    assert m.size_bytes <= 20_000


def test_dropping_the_manager_and_its_caches_releases_the_payloads(clock):
    # The caches and the manager's table used to hold each other, so nothing was ever freed.
    import sys

    payload = bytes(range(64))
    before = sys.getrefcount(payload)
    m = make_manager(clock)
    for name in ("a", "b"):
        m.get_cache(name).insert(P(0, 0), payload)
    kept = m.get_cache("c")
    kept.insert(P(0, 0), payload)
    assert sys.getrefcount(payload) == before + 3
    del m
    assert sys.getrefcount(payload) == before + 1, "the caches nobody holds are freed with the manager"
    assert kept.get(P(0, 0)).data == payload, "a handle still held keeps working"
    del kept
    assert sys.getrefcount(payload) == before


def test_run_eviction_and_background_thread(clock):
    m = lc.EntryCacheManager(
        lc.CacheConfig(cache_size_bytes=1000, eviction_interval_ms=1), clock=clock, background_eviction=True
    )
    c = m.get_cache("t")
    for i in range(20):
        c.insert(P(0, i), bytes(100))
    import time

    deadline = time.monotonic() + 10
    while m.size_bytes > 900 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert m.size_bytes <= 900


def test_bad_input_raises_and_leaves_the_cache_intact(clock):
    m = make_manager(clock, cache_size_bytes=1000)
    c = m.get_cache("t")
    c.insert(P(0, 0), b"abc", expected_reads=1)
    before = (m.size_bytes, m.entry_count, c.positions(), m.stats())
    with pytest.raises(ValueError, match="expected_reads"):
        c.insert(P(0, 1), b"x", expected_reads=-1)
    with pytest.raises(ValueError, match="size"):
        c.insert(P(0, 1), b"x", size=-5)
    with pytest.raises(TypeError):
        c.insert((0, 1), b"x")
    with pytest.raises(TypeError):
        c.get("0:1")
    with pytest.raises(ValueError, match="n"):
        m.evict_bytes(0)
    with pytest.raises(ValueError, match="got -3"):
        m.evict_bytes(-3)
    with pytest.raises(TypeError):
        m.evict_bytes("10")
    with pytest.raises(TypeError):
        lc.EntryCacheManager(lc.CacheConfig(), clock="now")
    assert (m.size_bytes, m.entry_count, c.positions(), m.stats()) == before
    assert c.get(P(0, 0)).expected_reads == 1


def test_threads_insert_read_and_evict(clock):
    m = make_manager(clock, cache_size_bytes=50_000)
    errors = []

    def writer(t):
        c = m.get_cache(f"t{t}")
        for i in range(5000):
            c.insert(P(t, i), f"{t}:{i}".encode(), expected_reads=i % 2)
            got = c.get(P(t, i // 2))
            if got is not None and bytes(got.data) != f"{t}:{i // 2}".encode():
                errors.append((t, i))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    evictor = threading.Thread(target=lambda: [m.run_eviction() for _ in range(200)])
    for t in [*threads, evictor]:
        t.start()
    for t in [*threads, evictor]:
        t.join()
    assert not errors
    assert m.size_bytes == sum(m.get_cache(n).size_bytes for n in m.cache_names())
    s = m.stats()
    assert s["inserted"] == s["entry_count"] + s["evicted"] + s["invalidated"]
