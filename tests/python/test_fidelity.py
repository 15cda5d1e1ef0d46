"""Settings marked by where they come from, and broker.conf read as a broker applies it."""

import warnings

import pytest

import ledgercache as lc


def test_every_setting_says_whether_a_broker_reads_it():
    rows = lc.CacheConfig.settings()
    names = [r["name"] for r in rows]
    assert names == list(lc.CacheConfig().to_dict())
    by_name = {r["name"]: r for r in rows}
    assert by_name["cache_size_bytes"]["broker_key"] == "managedLedgerCacheSizeMB"
    assert by_name["cache_size_bytes"]["read_by"] == "4.0, master"
    assert by_name["eviction_by_expected_read_count"]["read_by"] == "master (4.1+)"
    # Proposed in PIP-430, never added to Pulsar: the lab's own.
    assert by_name["eviction_trigger_threshold"]["broker_key"] is None
    assert "0.98" in by_name["eviction_trigger_threshold"]["note"]
    assert by_name["recv_buffer_max_bytes"]["broker_key"] is None
    assert by_name["apply_continue_caching_window"]["default"] is None
    assert by_name["exact_cursor_counts"]["default"] is None
    assert by_name["exact_cursor_counts"]["broker_key"] is None


def test_exact_cursor_counts_is_a_tri_state_setting():
    assert lc.CacheConfig().exact_cursor_counts is None
    assert lc.CacheConfig(exact_cursor_counts=True).exact_cursor_counts is True
    assert lc.CacheConfig().replace(exact_cursor_counts=False).exact_cursor_counts is False
    with pytest.raises((TypeError, ValueError), match="exact_cursor_counts"):
        lc.CacheConfig(exact_cursor_counts="yes")


def test_keys_pulsar_does_not_have_are_not_applied_and_warned_about():
    conf = {
        "managedLedgerCacheSizeMB": "64",
        "managedLedgerCacheEvictionTriggerThresholdPercent": "0.5",
        "brokerAdaptiveRecvByteBufAllocatorMaximumSize": "4096",
    }
    with pytest.warns(lc.BrokerConfWarning) as caught:
        c = lc.CacheConfig.from_broker_conf(conf)
    assert c.cache_size_bytes == 64 << 20
    assert c.eviction_trigger_threshold == 0.98
    assert c.recv_buffer_max_bytes == 1 << 20
    messages = [str(w.message) for w in caught]
    assert any(m.startswith("managedLedgerCacheEvictionTriggerThresholdPercent") for m in messages)
    assert any(m.startswith("brokerAdaptiveRecvByteBufAllocatorMaximumSize") for m in messages)


def test_extend_ttl_keys_apply_only_when_asked(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("managedLedgerCacheEvictionExtendTTLOfRecentlyAccessed=false\n")
    with pytest.warns(lc.BrokerConfWarning, match="extend_ttl_at_startup"):
        c = lc.CacheConfig.from_broker_conf(path)
    assert c.extend_ttl_of_recently_accessed is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = lc.CacheConfig.from_broker_conf(path, extend_ttl_at_startup=True)
    assert c.extend_ttl_of_recently_accessed is False


def test_pulsar_keys_of_the_pre_pip430_flow():
    c = lc.CacheConfig.from_broker_conf(
        {
            "managedLedgerCursorBackloggedThreshold": "-1",
            "statsUpdateFrequencyInSecs": "30",
            "managedLedgerMinimumBacklogCursorsForCaching": "2",
        }
    )
    assert (c.cursor_backlogged_threshold, c.backlog_check_interval_ms, c.min_backlog_cursors_for_caching) == (
        -1,
        30_000,
        2,
    )


def test_a_redelivery_adds_an_expected_read_only_for_a_hold_back():
    manager = lc.EntryCacheManager(lc.CacheConfig(), clock=lc.ManualClock())
    ml = lc.ManagedLedger("t", manager, lc.MemoryStorage())
    c = ml.open_cursor("c", start="latest", active=True)
    p, q = ml.add_entry(b"x"), ml.add_entry(b"y")
    for e in c.read_entries(2):
        e.release()
    assert ml.cache.get(p).expected_reads == 0
    c.add_to_replay([p], reason="nack")
    c.add_to_replay([q], reason="hold-back")
    assert (ml.cache.get(p).expected_reads, ml.cache.get(q).expected_reads) == (0, 1)
    with pytest.raises(lc.InvalidArgumentError, match="reason"):
        c.add_to_replay([p], reason="because")


def test_the_pre_pip430_flow_keeps_a_backlogged_cursor_inactive_until_the_stats_task_sees_it_caught_up():
    # PersistentTopic.checkBackloggedCursor (4.0): active only with fewer than
    # managedLedgerCursorBackloggedThreshold entries to read; re-checked by the stats task.
    config = lc.CacheConfig(eviction_by_expected_read_count=False, cursor_backlogged_threshold=3)
    ml = lc.ManagedLedger("t", lc.EntryCacheManager(config, clock=lc.ManualClock()), lc.MemoryStorage())
    for i in range(5):
        ml.add_entry(b"x%d" % i)
    c = ml.open_cursor("c", start="earliest", active=True)
    assert (c.active, ml.active_cursor_count) == (False, 0)
    ml.add_entry(b"not cached: no active cursor")
    assert len(ml.cache) == 0
    for e in c.read_entries(4):
        e.release()
    assert ml.active_cursor_count == 0, "only the stats task re-activates it"
    ml.check_backlogged_cursors()
    assert (c.active, ml.active_cursor_count) == (True, 1)
    ml.add_entry(b"cached")
    assert len(ml.cache) == 1


# The lines of Pulsar master's conf/broker.conf (as shipped) for the keys whose value a setting
# takes; branch-4.0 ships the same values for the keys it has. Empty values
# (managedLedgerCacheSizeMB, the continue-caching window) mean a computed default and are left out.
PULSAR_BROKER_CONF = """
managedLedgerCacheEvictionWatermark=0.9
managedLedgerCacheEvictionTimeThresholdMillis=1000
managedLedgerCacheEvictionIntervalMs=10
cacheEvictionByExpectedReadCount=true
managedLedgerCacheEvictionExtendTTLOfEntriesWithRemainingExpectedReadsMaxTimes=5
managedLedgerCacheEvictionExtendTTLOfRecentlyAccessed=true
cacheEvictionByMarkDeletedPosition=false
managedLedgerCacheCopyEntries=false
managedLedgerMinimumBacklogCursorsForCaching=0
managedLedgerMinimumBacklogEntriesForCaching=1000
managedLedgerMaxBacklogBetweenCursorsForCaching=1000
managedLedgerCursorBackloggedThreshold=1000
statsUpdateFrequencyInSecs=60
"""


def test_defaults_are_those_pulsar_ships_in_broker_conf(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(PULSAR_BROKER_CONF)
    shipped = lc.CacheConfig.from_broker_conf(path, extend_ttl_at_startup=True)
    keyed = [r["name"] for r in lc.CacheConfig.settings() if r["broker_key"] is not None]
    # Every key of the shipped lines is a setting's, and each default is the shipped value.
    conf_keys = {line.split("=")[0] for line in PULSAR_BROKER_CONF.split()}
    by_key = {r["broker_key"]: r["name"] for r in lc.CacheConfig.settings() if r["broker_key"]}
    assert conf_keys <= set(by_key)
    defaults = lc.CacheConfig().to_dict()
    differing = {
        name: (shipped.to_dict()[name], defaults[name]) for name in keyed if shipped.to_dict()[name] != defaults[name]
    }
    assert differing == {}


def test_the_deprecated_eviction_frequency_sets_the_interval_as_a_broker_does():
    # ServiceConfiguration.getManagedLedgerCacheEvictionIntervalMs: a positive frequency wins.
    with pytest.warns(lc.BrokerConfWarning, match="managedLedgerCacheEvictionFrequency"):
        c = lc.CacheConfig.from_broker_conf(
            {"managedLedgerCacheEvictionFrequency": "20", "managedLedgerCacheEvictionIntervalMs": "5"}
        )
    assert c.eviction_interval_ms == 50
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # 0 (the shipped value) leaves the interval to its own key, capped at 1,000,000 ms.
        c = lc.CacheConfig.from_broker_conf(
            {"managedLedgerCacheEvictionFrequency": "0", "managedLedgerCacheEvictionIntervalMs": "5000000"}
        )
    assert c.eviction_interval_ms == 1_000_000
    with pytest.raises(lc.InvalidArgumentError, match="managedLedgerCacheEvictionFrequency"):
        lc.CacheConfig.from_broker_conf({"managedLedgerCacheEvictionFrequency": "often"})


# Pulsar master's conf/broker.conf lines for ledger rollover (branch-4.0 ships the same).
PULSAR_ROLLOVER_CONF = """
managedLedgerMaxEntriesPerLedger=50000
managedLedgerMinLedgerRolloverTimeMinutes=10
managedLedgerMaxLedgerRolloverTimeMinutes=240
managedLedgerMaxSizePerLedgerMbytes=2048
"""


def test_managed_ledger_defaults_are_the_rollover_rules():
    import inspect

    shipped = dict(line.split("=") for line in PULSAR_ROLLOVER_CONF.split())
    params = inspect.signature(lc.ManagedLedger).parameters
    assert params["max_entries_per_ledger"].default == int(shipped["managedLedgerMaxEntriesPerLedger"])
    assert params["max_bytes_per_ledger"].default == int(shipped["managedLedgerMaxSizePerLedgerMbytes"]) << 20
    assert params["min_rollover_ms"].default == int(shipped["managedLedgerMinLedgerRolloverTimeMinutes"]) * 60_000
    assert params["max_rollover_ms"].default == int(shipped["managedLedgerMaxLedgerRolloverTimeMinutes"]) * 60_000
    # The workload generator takes the same keys (camelCase, as in broker.conf).
    from ledgercache import workload

    for key in shipped:
        assert key in workload.__doc__, key
