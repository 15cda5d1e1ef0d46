"""Positions, clocks and settings."""

import pickle

import pytest

import ledgercache as lc


def test_position_value_semantics():
    a, b = lc.Position(3, 5), lc.Position(3, 5)
    assert a == b and a is not b and hash(a) == hash(b)
    assert repr(a) == "Position(3, 5)"
    assert (a.ledger_id, a.entry_id) == (3, 5)
    assert sorted([lc.Position(2, 0), lc.Position(1, 9), lc.Position(1, 2)]) == [
        lc.Position(1, 2),
        lc.Position(1, 9),
        lc.Position(2, 0),
    ]
    assert lc.Position(1, 9) < lc.Position(2, 0)
    assert {a: 1}[b] == 1
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.entry_id = 6  # type: ignore[misc]
    with pytest.raises(TypeError):
        lc.Position("3", 5)  # type: ignore[arg-type]


def test_manual_clock():
    c = lc.ManualClock(start_ns=10)
    assert c.now_ns() == 10
    assert c.advance_ms(2) == 2_000_010
    assert c.advance_ns(5) == 2_000_015
    with pytest.raises(ValueError, match="ms"):
        c.advance_ms(-1)
    assert c.now_ns() == 2_000_015
    s = lc.SystemClock()
    assert s.now_ns() <= s.now_ns()


def test_config_defaults_and_validation():
    c = lc.CacheConfig()
    assert c.eviction_watermark == 0.9
    assert c.eviction_trigger_threshold == 0.98
    assert c.eviction_time_threshold_ms == 1000
    assert c.eviction_interval_ms == 10
    assert c.eviction_by_expected_read_count is True
    assert c.extend_ttl_max_times == 5
    assert c.extend_ttl_of_recently_accessed is True
    assert c.continue_caching_after_last_active_cursor_leaves_ms is None
    assert c.eviction_by_mark_deleted_position is False
    assert c.copy_entries is False
    assert c.strategy == "pip430"
    with pytest.raises(TypeError, match="cache_size_bytes"):
        lc.CacheConfig(cache_size_byte=1)
    with pytest.raises(lc.UnknownSettingError):
        lc.CacheConfig(nonsense=True)
    for bad in [
        dict(cache_size_bytes=-1),
        dict(eviction_watermark=1.5),
        dict(strategy="fifo"),
        dict(eviction_interval_ms=0),
        dict(copy_entries="yes"),
        dict(cache_size_bytes=1.5),
    ]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            lc.CacheConfig(**bad)
    with pytest.raises(TypeError):
        lc.CacheConfig(cache_size_bytes=[1])


def test_config_is_frozen_and_replace_returns_a_copy():
    c = lc.CacheConfig(cache_size_bytes=100)
    d = c.replace(eviction_watermark=0.5, strategy="pip430-fifo")
    assert (c.eviction_watermark, d.eviction_watermark) == (0.9, 0.5)
    assert d.cache_size_bytes == 100 and d.strategy == "pip430-fifo"
    assert c != d and c == lc.CacheConfig(cache_size_bytes=100)
    with pytest.raises(AttributeError):
        c.cache_size_bytes = 5  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"eviction_watermark: must be in \(0, 1\], got 2"):
        c.replace(eviction_watermark=2.0)
    assert pickle.loads(pickle.dumps(d)) == d
    assert d.to_dict()["strategy"] == "pip430-fifo"


def test_config_from_broker_conf(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# Pulsar broker\n"
        "brokerServicePort=6650\n"
        "managedLedgerCacheSizeMB=64\n"
        "cacheEvictionByExpectedReadCount=false\n"
        "managedLedgerCacheEvictionWatermark = 0.5\n"
        "managedLedgerCacheEvictionExtendTTLOfEntriesWithRemainingExpectedReadsMaxTimes=3\n"
    )
    # A broker applies the extend-TTL keys only when changed at run time: not from broker.conf.
    with pytest.warns(lc.BrokerConfWarning, match="ExtendTTL"):
        c = lc.CacheConfig.from_broker_conf(conf)
    assert c.cache_size_bytes == 64 << 20
    assert c.eviction_by_expected_read_count is False
    assert c.eviction_watermark == 0.5
    assert c.extend_ttl_max_times == 5
    assert lc.CacheConfig.from_broker_conf(conf, extend_ttl_at_startup=True).extend_ttl_max_times == 3
    m = lc.CacheConfig.from_broker_conf(
        {"managedLedgerCacheSizeMB": 1, "managedLedgerCacheCopyEntries": True, "other": "x"}
    )
    assert (m.cache_size_bytes, m.copy_entries) == (1 << 20, True)
    with pytest.raises(ValueError, match="cache_size_bytes"):
        lc.CacheConfig.from_broker_conf({"managedLedgerCacheSizeMB": "lots"})
    with pytest.raises(ValueError, match=r"missing\.conf: cannot read it"):
        lc.CacheConfig.from_broker_conf(tmp_path / "missing.conf")
    with pytest.raises(TypeError):
        lc.CacheConfig.from_broker_conf(42)


def test_error_hierarchy():
    assert issubclass(lc.InvalidArgumentError, lc.LedgerCacheError)
    assert issubclass(lc.InvalidArgumentError, ValueError)
    assert issubclass(lc.UnknownSettingError, TypeError)
    assert issubclass(lc.UnknownCursorError, KeyError)
    with pytest.raises(lc.UnsupportedError, match="replay"):
        lc.EntryCacheManager(lc.CacheConfig(strategy="lru"))


def test_settings_relations_do_not_depend_on_keyword_order():
    # Both orders give the same config (the relation is checked once all keywords are in).
    a = lc.CacheConfig(eviction_trigger_threshold=0.5, eviction_watermark=0.4)
    b = lc.CacheConfig(eviction_watermark=0.4, eviction_trigger_threshold=0.5)
    assert (
        (a.eviction_trigger_threshold, a.eviction_watermark)
        == (b.eviction_trigger_threshold, b.eviction_watermark)
        == (0.5, 0.4)
    )
    for kwargs in (
        {"eviction_trigger_threshold": 0.5, "eviction_watermark": 0.6},
        {"eviction_watermark": 0.6, "eviction_trigger_threshold": 0.5},
    ):
        with pytest.raises(lc.InvalidArgumentError, match=r"eviction_watermark 0\.6|0\.6 is above"):
            lc.CacheConfig(**kwargs)


def test_manual_clock_refuses_to_overflow():
    clock = lc.ManualClock(5)
    with pytest.raises(lc.InvalidArgumentError, match="ms"):
        clock.advance_ms(2**63 - 1)
    clock.advance_ns(2**63 - 1)
    with pytest.raises(lc.InvalidArgumentError, match="ns"):
        clock.advance_ns(2**63 - 1)
    assert clock.now_ns() >= 5
    before = clock.now_ns()
    with pytest.raises(lc.InvalidArgumentError):
        clock.advance_ns(2**63 - 1)
    assert clock.now_ns() == before, "a refused advance leaves the clock as it was"
