"""Issue 59's cache-side API: a look at a cached entry that does not touch it, the slowest cursor of
a container, settings changed while the manager runs, and the reads-in-flight limiter (library,
Python class and replay lab)."""

import gc
import random
import sys
import threading
import warnings

import pytest

import ledgercache as lc
from conftest import make_manager

P = lc.Position


# --- peek -----------------------------------------------------------------------------------------


def test_peek_shows_the_evictors_view_without_touching_the_entry(clock):
    m = make_manager(clock)
    c = m.get_cache("t")
    c.insert(P(1, 0), bytes(10), expected_reads=2)
    c.insert(P(1, 1), b"abc")
    info = c.peek(P(1, 0))
    assert (info.position, info.size, info.expected_reads, info.requeue_count, info.accessed) == (
        P(1, 0),
        10,
        2,
        0,
        False,
    )
    assert info.timestamp_ns == clock.now_ns()
    assert c.peek(P(1, 1)).expected_reads is None
    assert c.peek(P(1, 2)) is None
    assert (m.stats()["hits"], m.stats()["misses"]) == (0, 0), "a peek is not a lookup"
    c.get(P(1, 0))
    assert c.peek(P(1, 0)).accessed, "a get marks it accessed; the peek shows it"
    assert "expected_reads=2" in repr(c.peek(P(1, 0)))


def test_a_peek_does_not_extend_the_ttl_where_a_get_does(clock):
    """With the recently-accessed extension on, an entry read since the last time pass lives one
    TTL longer; one only peeked at does not."""
    m = make_manager(clock, eviction_time_threshold_ms=100, extend_ttl_of_recently_accessed=True)
    c = m.get_cache("t")
    c.insert(P(1, 0), bytes(10))
    c.insert(P(1, 1), bytes(10))
    c.get(P(1, 0))
    assert c.peek(P(1, 1)) is not None
    clock.advance_ms(150)
    assert m.evict_expired() == (1, 10)
    assert c.positions() == [P(1, 0)]
    assert c.peek(P(1, 0)).requeue_count == 1 and not c.peek(P(1, 0)).accessed


def test_a_peek_does_not_keep_an_entry_from_a_size_pass_where_a_get_does(clock):
    m = make_manager(clock, extend_ttl_of_recently_accessed=True)
    c = m.get_cache("t")
    for e in range(3):
        c.insert(P(1, e), bytes(10))
    c.get(P(1, 0))
    c.peek(P(1, 1))
    assert m.evict_bytes(10) == (1, 10)
    assert c.positions() == [P(1, 0), P(1, 2)], "the peeked entry went first; the read one was requeued"


# --- the slowest cursor ---------------------------------------------------------------------------


@pytest.mark.parametrize("container", [lc.ActiveCursorContainer, lc.SlowestCursorHeap])
def test_slowest_reader(container):
    """ManagedCursorContainerTest.testSlowestReader: 100 cursors added in a random order, 100 times;
    the slowest is cursor1."""
    rng = random.Random(59)
    for _ in range(100):
        c = container()
        cursors = [(f"cursor{i}", P(0, i)) for i in range(1, 101)]
        rng.shuffle(cursors)
        for name, p in cursors:
            c.add(name, p)
        assert c.slowest_cursor() == "cursor1"


@pytest.mark.parametrize("container", [lc.ActiveCursorContainer, lc.SlowestCursorHeap])
def test_the_slowest_cursor_follows_moves_and_removals(container):
    c = container()
    assert c.slowest_cursor() is None
    c.add("a", P(1, 5))
    c.add("b", P(1, 3))
    c.add("idle", None)
    assert (c.slowest_cursor(), c.slowest_position()) == ("b", P(1, 3))
    c.update("b", P(2, 0))
    assert (c.slowest_cursor(), c.slowest_position()) == ("a", P(1, 5))
    c.remove("a")
    assert c.slowest_cursor() == "b"
    c.update("b", None)
    assert c.slowest_cursor() is None, "untracked cursors are not the slowest"


# --- settings changed while running ---------------------------------------------------------------


def test_a_smaller_cache_size_evicts_at_once(clock):
    """EntryCacheManagerTest.cacheSizeUpdate's cache (200 bytes, watermark 0.8, settled at 155),
    then updateCacheSizeAndThreshold(100) as the broker's managedLedgerCacheSizeMB listener does:
    the cache is above its new trigger and evicts down to the new watermark (80 bytes)."""
    m = make_manager(clock, cache_size_bytes=200, eviction_watermark=0.8, eviction_time_threshold_ms=20_000)
    c = m.get_cache("cache1")
    for i in range(20):
        c.insert(P(1, i), bytes(i + 1))
    assert m.size_bytes == 155
    removed = m.update_config(cache_size_bytes=100)
    assert m.size_bytes <= 80 and removed[1] == 155 - m.size_bytes
    assert (m.max_size_bytes, m.config.cache_size_bytes) == (100, 100)
    assert m.update_config(cache_size_bytes=1000) == (0, 0), "a bigger cache evicts nothing"


def test_a_lower_watermark_applies_from_the_next_pass(clock):
    m = make_manager(clock, cache_size_bytes=100, eviction_time_threshold_ms=20_000)
    c = m.get_cache("t")
    for i in range(9):
        c.insert(P(1, i), bytes(10))
    assert m.size_bytes == 90
    assert m.update_config(eviction_watermark=0.5) == (0, 0), "below the trigger: nothing to do yet"
    c.insert(P(1, 9), bytes(10))
    assert m.size_bytes <= 50


def test_time_threshold_and_extensions_change_live(clock):
    m = make_manager(clock, eviction_time_threshold_ms=1000, extend_ttl_max_times=5)
    c = m.get_cache("t")
    c.insert(P(1, 0), bytes(10), expected_reads=1)
    c.insert(P(1, 1), bytes(10))
    c.get(P(1, 1))
    clock.advance_ms(200)
    assert m.evict_expired() == (0, 0)
    m.update_config(eviction_time_threshold_ms=100, extend_ttl_max_times=0, extend_ttl_of_recently_accessed=False)
    assert m.evict_expired() == (2, 20), "the shorter TTL and no extensions, at the next time pass"
    cfg = m.config
    assert (cfg.eviction_time_threshold_ms, cfg.extend_ttl_max_times, cfg.extend_ttl_of_recently_accessed) == (
        100,
        0,
        False,
    )


def test_settings_a_broker_reads_at_start_up_only_are_refused(clock):
    m = make_manager(clock)
    with pytest.raises(
        lc.UnsupportedError, match=r"eviction_interval_ms.*managedLedgerCacheEvictionIntervalMs.*restart"
    ):
        m.update_config(eviction_interval_ms=5)
    with pytest.raises(lc.UnsupportedError, match=r"strategy.*restart"):
        m.update_config(cache_size_bytes=10, strategy="lru")
    with pytest.raises(lc.UnknownSettingError, match="cache_size_bytes"):
        m.update_config(cache_size_byte=10)
    with pytest.raises(lc.InvalidArgumentError, match="eviction_watermark"):
        m.update_config(eviction_watermark=0.99)
    with pytest.raises(lc.InvalidArgumentError, match="cache_size_bytes"):
        m.update_config(cache_size_bytes=-1)
    assert m.config == lc.CacheConfig(), "nothing changed"
    live = {s["name"] for s in lc.CacheConfig.settings() if s["live"]}
    assert live == {
        "cache_size_bytes",
        "eviction_watermark",
        "eviction_time_threshold_ms",
        "extend_ttl_max_times",
        "extend_ttl_of_recently_accessed",
    }


def test_a_cache_made_while_the_size_was_zero_stays_disabled(clock):
    m = make_manager(clock, cache_size_bytes=0)
    off = m.get_cache("off")
    m.update_config(cache_size_bytes=1000)
    assert off.insert(P(1, 0), b"x") is False
    assert m.get_cache("new").insert(P(1, 0), b"x") is True


def test_the_background_evictor_applies_a_smaller_size():
    import time

    m = lc.EntryCacheManager(
        lc.CacheConfig(cache_size_bytes=10_000, eviction_interval_ms=60_000),
        clock=lc.ManualClock(),
        background_eviction=True,
    )
    c = m.get_cache("t")
    for i in range(50):
        c.insert(P(0, i), bytes(100))
    assert m.size_bytes == 5000
    assert m.update_config(cache_size_bytes=2000) == (0, 0), "the evictor does it"
    deadline = time.monotonic() + 10
    while m.size_bytes > 1800 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert m.size_bytes <= 1800


def test_updates_while_threads_insert_and_the_evictor_runs(clock):
    m = lc.EntryCacheManager(
        lc.CacheConfig(cache_size_bytes=50_000, eviction_interval_ms=1), clock=clock, background_eviction=True
    )
    stop = threading.Event()

    def insert(t):
        c = m.get_cache(f"t{t}")
        i = 0
        while not stop.is_set():
            c.insert(P(1, i), bytes(100))
            i += 1

    threads = [threading.Thread(target=insert, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for k in range(200):
        m.update_config(cache_size_bytes=20_000 + 1000 * (k % 30), eviction_watermark=0.5 + (k % 4) / 10)
    stop.set()
    for th in threads:
        th.join()
    m.update_config(cache_size_bytes=10_000, eviction_watermark=0.9)
    m.run_eviction()
    assert m.size_bytes <= 10_000
    assert m.size_bytes == sum(m.get_cache(f"t{t}").size_bytes for t in range(3))


# --- the limiter: settings ------------------------------------------------------------------------


def test_the_limiter_settings_come_from_broker_conf():
    c = lc.CacheConfig()
    assert (
        c.max_reads_in_flight_bytes,
        c.reads_in_flight_acquire_timeout_ms,
        c.reads_in_flight_acquire_queue_size,
    ) == (768 << 20, 60_000, 50_000)
    c = lc.CacheConfig.from_broker_conf(
        {
            "managedLedgerMaxReadsInFlightSizeInMB": "100",
            "managedLedgerMaxReadsInFlightPermitsAcquireTimeoutMillis": "500",
            "managedLedgerMaxReadsInFlightPermitsAcquireQueueSize": "10",
        }
    )
    assert (
        c.max_reads_in_flight_bytes,
        c.reads_in_flight_acquire_timeout_ms,
        c.reads_in_flight_acquire_queue_size,
    ) == (100 << 20, 500, 10)
    # Unset, master's default: 15% of the direct memory, at least dispatcherMaxReadSizeBytes.
    assert lc.CacheConfig.from_broker_conf({}, direct_memory_bytes=10 << 30).max_reads_in_flight_bytes == int(
        (10 << 30) * 0.15
    )
    assert lc.CacheConfig.from_broker_conf({}, direct_memory_bytes=1 << 20).max_reads_in_flight_bytes == 5 << 20
    with pytest.warns(lc.BrokerConfWarning, match="dispatcherMaxReadSizeBytes"):
        lc.CacheConfig.from_broker_conf({"managedLedgerMaxReadsInFlightSizeInMB": "1"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            lc.CacheConfig.from_broker_conf({"managedLedgerMaxReadsInFlightSizeInMB": "0"}).max_reads_in_flight_bytes
            == 0
        )
    with pytest.raises(lc.InvalidArgumentError, match="reads_in_flight_acquire_queue_size"):
        lc.CacheConfig(reads_in_flight_acquire_queue_size=1 << 31)


# --- the limiter: InflightReadsLimiterTest from Python --------------------------------------------


def limiter(clock, max_bytes=100, queue=10_000, timeout_ms=100):
    return lc.InflightReadsLimiter(max_bytes, queue, timeout_ms, clock=clock)


@pytest.mark.parametrize(("size", "disabled"), [(0, True), (-1, True), (1, False)])
def test_disabled(clock, size, disabled):
    """InflightReadsLimiterTest.testDisabled"""
    assert limiter(clock, size).disabled is disabled


def test_basic_acquire_release(clock):
    """InflightReadsLimiterTest.testBasicAcquireRelease"""
    lim = limiter(clock)
    h = lim.acquire(100)
    assert (h.success, h.permits, lim.remaining_bytes) == (True, 100, 0)
    lim.release(h)
    assert lim.remaining_bytes == 100


def test_not_enough_permits(clock):
    """InflightReadsLimiterTest.testNotEnoughPermits"""
    lim = limiter(clock)
    h = lim.acquire(100)
    got = []
    assert lim.acquire(100, got.append) is None and lim.remaining_bytes == 0
    lim.release(h)
    assert len(got) == 1 and got[0].success
    lim.release(got[0])
    assert lim.remaining_bytes == 100


def test_acquire_timeout(clock):
    """InflightReadsLimiterTest.testAcquireTimeout: the scheduled check fails the queued read."""
    lim = limiter(clock)
    lim.acquire(100)
    got = []
    assert lim.acquire(100, got.append) is None
    clock.advance_ms(99)
    assert lim.check_timeouts() == 0 and got == []
    clock.advance_ms(101)
    assert lim.check_timeouts() == 1
    assert [h.success for h in got] == [False]


def test_multiple_queued_entries_with_exception_in_first_callback(clock):
    """InflightReadsLimiterTest.testMultipleQueuedEntriesWithExceptionInFirstCallback: the first
    callback raises (reported, as Pulsar logs it) and the second still gets its permits."""
    lim = limiter(clock)
    h1 = lim.acquire(100)
    got2, got3 = [], []

    def raising(h):
        got2.append(h)
        raise RuntimeError("Callback exception")

    assert lim.acquire(50, raising) is None
    assert lim.acquire(50, got3.append) is None
    reported = []
    old, sys.unraisablehook = sys.unraisablehook, reported.append
    try:
        lim.release(h1)
    finally:
        sys.unraisablehook = old
    assert [type(r.exc_value) for r in reported] == [RuntimeError]
    assert got2[0].success and got3[0].success and lim.remaining_bytes == 0
    lim.release(got3[0])
    assert lim.remaining_bytes == 50
    # Pulsar's test releases handle3 a second time (in place of handle2); a handle given back twice
    # counts twice there and here alike.
    lim.release(got3[0])
    assert lim.remaining_bytes == 100


def test_multiple_queued_entries_with_timeouts_that_are_timed_out_when_permits_are_available(clock):
    """InflightReadsLimiterTest.testMultipleQueuedEntriesWithTimeoutsThatAreTimedOutWhenPermitsAreAvailable:
    no scheduled check ran, so the release finds the timed-out reads."""
    lim = limiter(clock)
    h1 = lim.acquire(100)
    got = {k: [] for k in (2, 3, 4, 5)}
    assert lim.acquire(50, got[2].append) is None
    assert lim.acquire(50, got[3].append) is None
    clock.advance_ms(200)
    assert lim.acquire(50, got[4].append) is None
    assert lim.acquire(100, got[5].append) is None
    lim.release(h1)
    assert [got[k][0].success for k in (2, 3, 4)] == [False, False, True] and got[5] == []
    assert lim.remaining_bytes == 50
    lim.release(got[4][0])
    assert got[5][0].success
    lim.release(got[5][0])
    assert lim.remaining_bytes == 100


def test_multiple_queued_entries_with_timeout_and_exception_in_first_callback(clock):
    """InflightReadsLimiterTest.testMultipleQueuedEntriesWithTimeoutAndExceptionInFirstCallback"""
    lim = limiter(clock)
    h1 = lim.acquire(100)
    got2, got3 = [], []

    def raising(h):
        got2.append(h)
        raise RuntimeError("Callback exception on timeout")

    assert lim.acquire(50, raising) is None
    clock.advance_ms(50)
    assert lim.acquire(50, got3.append) is None
    clock.advance_ms(200)
    reported = []
    old, sys.unraisablehook = sys.unraisablehook, reported.append
    try:
        assert lim.check_timeouts() == 2
    finally:
        sys.unraisablehook = old
    assert len(reported) == 1
    assert not got2[0].success and not got3[0].success and lim.remaining_bytes == 0
    lim.release(h1)
    assert lim.remaining_bytes == 100


def test_acquire_release_count_metrics(clock):
    """InflightReadsLimiterTest.testAcquireReleaseCountMetrics, as stats()."""
    lim = limiter(clock)

    def counts():
        s = lim.stats()
        return s["acquired"], s["released"]

    h1 = lim.acquire(50)
    h2 = lim.acquire(50)
    assert counts() == (2, 0)
    got = []
    assert lim.acquire(50, got.append) is None and counts() == (2, 0)
    lim.release(h1)
    assert got[0].success and counts() == (3, 1)
    lim.release(h2)
    assert counts() == (3, 2)
    lim.release(got[0])
    assert counts() == (3, 3)


def test_acquire_count_metrics_exceeding_max(clock):
    """InflightReadsLimiterTest.testAcquireCountMetricsExceedingMax, as stats()."""
    lim = limiter(clock)
    h1 = lim.acquire(200)
    assert (h1.success, h1.permits) == (True, 100) and lim.stats()["acquired"] == 1
    got = []
    assert lim.acquire(200, got.append) is None
    lim.release(h1)
    assert (got[0].success, got[0].permits) == (True, 100)
    assert (lim.stats()["acquired"], lim.stats()["released"]) == (2, 1)
    lim.release(got[0])
    assert lim.stats()["released"] == 2


def test_queue_size_limit_reached(clock):
    """InflightReadsLimiterTest.testQueueSizeLimitReached"""
    lim = limiter(clock, queue=4)
    assert lim.acquire(100).success
    for _ in range(4):
        assert lim.acquire(50, lambda h: None) is None
    assert lim.acquire(50).success is False
    assert lim.stats()["refused"] == 1


@pytest.mark.parametrize("first_in_queue", [True, False])
def test_acquire_exceeding_max_reads_in_flight_size(clock, first_in_queue):
    """InflightReadsLimiterTest.testAcquireExceedingMaxReadsInFlightSize"""
    lim = limiter(clock)
    h1 = lim.acquire(100)
    got2, big = [], []
    if not first_in_queue:
        assert lim.acquire(50, got2.append) is None
    assert lim.acquire(200, big.append) is None
    lim.release(h1)
    if not first_in_queue:
        assert (got2[0].success, got2[0].permits) == (True, 50)
        lim.release(got2[0])
    assert (big[0].success, big[0].permits) == (True, 100)
    lim.release(big[0])
    assert lim.remaining_bytes == 100


def test_acquire_exceeding_max_reads_when_all_permits_available(clock):
    """InflightReadsLimiterTest.testAcquireExceedingMaxReadsWhenAllPermitsAvailable"""
    lim = limiter(clock)
    h = lim.acquire(200)
    assert (h.success, h.permits, lim.remaining_bytes) == (True, 100, 0)
    lim.release(h)
    assert lim.remaining_bytes == 100


# --- the limiter in the library's managed ledger ---------------------------------------------------


def limited_ledger(clock, limit, timeout_ms=1000, queue=50_000):
    manager = lc.EntryCacheManager(
        lc.CacheConfig(
            cache_size_bytes=1 << 20,
            max_reads_in_flight_bytes=limit,
            reads_in_flight_acquire_timeout_ms=timeout_ms,
            reads_in_flight_acquire_queue_size=queue,
        ),
        clock=clock,
    )
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage(), read_latency_ms=10)
    clock.advance_ms(3_000)  # past the continue-caching window: reads go to storage
    ml.add_entries([bytes(1000) for _ in range(10)])
    return manager, ml


def test_a_ledger_read_waits_for_permits_until_the_read_before_it_is_taken(clock):
    # Each read of 4 entries of 1000 bytes asks for 4 x (1000 + 64) permits; the limit holds one.
    manager, ml = limited_ledger(clock, limit=5000)
    a, b = ml.open_cursor("a", start="earliest"), ml.open_cursor("b", start="earliest")
    ha = a.read_entries_async(4)
    hb = b.read_entries_async(4)
    stats = manager.reads_in_flight()
    assert (stats["remaining_bytes"], stats["waiting"]) == (5000 - 4256, 1)
    clock.advance_ms(10)
    assert ml.poll() == 1 and ml.reads_in_flight == 1
    clock.advance_ms(10)
    ml.poll()
    assert ml.reads_in_flight == 1, "a's entries are cached, but b waits while a's finished read holds its permits"
    # A handle's first look (done, result) takes the read: its entries are handed over and its
    # permits come back.
    assert ha.done and len(ha.result()) == 4
    assert ml.poll() == 0 and hb.done, "then b reads, from the cache a's read filled"
    assert len(hb.result()) == 4 and ml.storage.stats()["read_ops"] == 1
    stats = manager.reads_in_flight()
    assert (stats["remaining_bytes"], stats["acquired"], stats["queued"]) == (5000, 2, 1)


def test_a_ledger_read_that_waits_too_long_fails(clock):
    manager, ml = limited_ledger(clock, limit=5000, timeout_ms=50)
    a, b = ml.open_cursor("a", start="earliest"), ml.open_cursor("b", start="earliest")
    ha = a.read_entries_async(4)  # noqa: F841 -- kept: a dropped handle gives its permits back
    start = b.read_position
    hb = b.read_entries_async(4)
    clock.advance_ms(60)
    ml.poll()
    with pytest.raises(lc.ResourceLimitError, match="reads_in_flight_acquire_timeout_ms"):
        hb.result()
    assert b.read_position == start, "a failed read moves nothing"
    assert manager.reads_in_flight()["timed_out"] == 1


def test_a_synchronous_read_cannot_wait_and_a_full_queue_refuses(clock):
    manager, ml = limited_ledger(clock, limit=5000, queue=1)
    a, b, c = (ml.open_cursor(n, start="earliest") for n in "abc")
    ha = a.read_entries_async(4)  # noqa: F841 -- kept: a dropped handle gives its permits back
    with pytest.raises(lc.ResourceLimitError, match="cannot wait"):
        b.read_entries(4)
    assert manager.reads_in_flight()["waiting"] == 0, "it left the queue"
    hb = b.read_entries_async(4)  # noqa: F841 -- kept: it holds the queue's one place
    with pytest.raises(lc.ResourceLimitError, match="reads_in_flight_acquire_queue_size"):
        c.read_entries_async(4).result()


def test_a_dropped_read_handle_gives_its_permits_back(clock):
    """A read holds its permits until its outcome is taken; a handle dropped unchecked, running,
    finished or waiting for permits, discards its read, so later reads get permits at once."""
    manager, ml = limited_ledger(clock, limit=5000)
    a, b, c = (ml.open_cursor(n, start="earliest") for n in "abc")
    ha, hb = a.read_entries_async(4), b.read_entries_async(4)
    assert ml.reads_in_flight == 2 and manager.reads_in_flight()["waiting"] == 1
    del hb  # waiting for permits: it leaves the queue
    gc.collect()
    assert ml.reads_in_flight == 1 and manager.reads_in_flight()["waiting"] == 0
    clock.advance_ms(10)
    # Finished, not taken (looking at `ha` would take it): its permits are still held.
    assert ml.poll() == 1 and ml.reads_in_flight == 0
    assert manager.reads_in_flight()["remaining_bytes"] == 5000 - 4256
    del ha  # finished, never checked
    gc.collect()
    assert manager.reads_in_flight()["remaining_bytes"] == 5000
    assert len(c.read_entries(4)) == 4, "a synchronous read, which cannot wait, gets permits at once"
    # Many reads started and forgotten while in flight.
    for _ in range(20):
        c.read_entries_async(4)
    gc.collect()
    assert ml.reads_in_flight == 0
    stats = manager.reads_in_flight()
    assert (stats["remaining_bytes"], stats["waiting"], stats["timed_out"]) == (5000, 0, 0)
    hb = b.read_entries_async(4)
    assert manager.reads_in_flight()["waiting"] == 0, "the next read is admitted at once"
    clock.advance_ms(10)
    ml.poll()
    assert hb.done and len(hb.result()) == 4


def test_the_default_limit_changes_nothing_for_small_reads(clock):
    manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20), clock=clock)
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage(), read_latency_ms=10)
    ml.add_entries([bytes(1000) for _ in range(10)])
    handles = [ml.open_cursor(f"c{i}", start="earliest").read_entries_async(10) for i in range(5)]
    clock.advance_ms(10)
    ml.poll()
    assert all(h.done and len(h.result()) == 10 for h in handles)
    assert manager.reads_in_flight()["queued"] == 0


# --- the limiter in the replay lab ----------------------------------------------------------------


def test_the_lab_with_instant_reads_is_the_same_whatever_the_limit():
    spec = {**lc.workload.SCENARIOS["many-topics-small-cache"], "testDurationMinutes": 0.1}
    t = lc.workload.generate(spec, seed=2)
    for strategy in ("pip430", "lru", "legacy"):
        default = lc.CacheConfig(strategy=strategy, cache_size_bytes=4 << 20)
        rows = [
            lc.replay(t, c).drop_columns(["replay_seconds", "config"]).to_pylist()[0]
            for c in (
                default,
                default.replace(max_reads_in_flight_bytes=0),
                default.replace(max_reads_in_flight_bytes=1, reads_in_flight_acquire_queue_size=0),
            )
        ]
        assert rows[0] == rows[1] == rows[2], strategy
        assert rows[0]["reads_waited_for_permits"] == rows[0]["reads_failed_for_permits"] == 0


def catch_up_trace():
    from test_replay import trace

    rows = [(0, "open", "t", f"s{i}", None, None, 0, 0) for i in range(4)]
    rows += [(1, "add", "t", None, 1, e, 0, 10_000) for e in range(400)]
    rows += [(1000 + k * 10, "read", "t", f"s{i}", None, None, 20, 0) for k in range(20) for i in range(4)]
    return trace(rows)


def test_the_lab_with_slow_reads_and_a_small_limit_makes_reads_wait_or_fail():
    t = catch_up_trace()
    base = lc.CacheConfig(cache_size_bytes=100_000, storage_read_latency_ms=100)

    def row(c):
        return lc.replay(t, c).drop_columns(["replay_seconds", "config"]).to_pylist()[0]

    default, off = row(base), row(base.replace(max_reads_in_flight_bytes=0))
    assert default == off, "the default limit is far above what these reads hold"
    small = row(base.replace(max_reads_in_flight_bytes=1 << 20))
    assert small["reads_waited_for_permits"] > 0 and small["reads_failed_for_permits"] == 0
    # The limiter delays deliveries only: what is read and cached stays the same.
    for k in ("hits", "misses", "storage_read_ops", "evicted_entries"):
        assert small[k] == off[k], k
    timing_out = row(base.replace(max_reads_in_flight_bytes=1 << 20, reads_in_flight_acquire_timeout_ms=150))
    assert timing_out["reads_failed_for_permits"] > 0
    full = row(base.replace(max_reads_in_flight_bytes=1 << 20, reads_in_flight_acquire_queue_size=0))
    assert full["reads_waited_for_permits"] == 0 and full["reads_failed_for_permits"] > 0
