"""The settings in two layers: the broker's (a broker.conf key each; they configure a broker or the
library's manager) and the lab's own, as lc.CacheConfig tells them apart."""

import ledgercache as lc


def test_the_layers_split_the_settings_in_declaration_order():
    names = list(lc.CacheConfig().to_dict())
    broker, lab = lc.CacheConfig.BROKER_SETTINGS, lc.CacheConfig.LAB_SETTINGS
    assert isinstance(broker, tuple) and isinstance(lab, tuple)
    assert not set(broker) & set(lab)
    assert sorted(broker + lab) == sorted(names)
    assert list(broker) == [n for n in names if n in broker]
    assert list(lab) == [n for n in names if n in lab]
    assert "cache_size_bytes" in broker and "max_reads_in_flight_bytes" in broker
    for name in ("strategy", "segment_count", "memory_model", "recv_buffer_min_bytes", "storage_read_latency_ms"):
        assert name in lab, name


def test_each_row_says_its_layer_and_a_broker_setting_has_a_key():
    rows = lc.CacheConfig.settings()
    assert [r["name"] for r in rows] == list(lc.CacheConfig().to_dict())
    for r in rows:
        assert r["layer"] == ("broker" if r["broker_key"] is not None else "lab"), r
        assert (r["name"] in lc.CacheConfig.BROKER_SETTINGS) == (r["layer"] == "broker")
        assert r["default"] == getattr(lc.CacheConfig(), r["name"])


def test_a_broker_conf_sets_broker_settings_only():
    keyed = {r["broker_key"]: r for r in lc.CacheConfig.settings() if r["broker_key"]}
    conf = {
        "managedLedgerCacheSizeMB": "100",
        "managedLedgerCacheEvictionTimeThresholdMillis": "2500",
        "managedLedgerMaxReadsInFlightSizeInMB": "0",
    }
    assert set(conf) <= set(keyed)
    config = lc.CacheConfig.from_broker_conf(conf)
    changed = {k for k, v in config.to_dict().items() if v != getattr(lc.CacheConfig(), k)}
    assert changed == {keyed[k]["name"] for k in conf}
    assert changed <= set(lc.CacheConfig.BROKER_SETTINGS)


def test_both_layers_are_set_by_keyword_and_listed_in_the_repr():
    config = lc.CacheConfig(cache_size_bytes=1 << 20, strategy="lru", memory_model=True)
    assert (config.cache_size_bytes, config.strategy, config.memory_model) == (1 << 20, "lru", True)
    text = repr(config)
    positions = [text.index(f"{name}=") for name in config.to_dict()]
    assert positions == sorted(positions)
    assert "CacheConfig" in dir(lc) and {"BROKER_SETTINGS", "LAB_SETTINGS"} <= set(dir(config))
