"""broker.conf as a broker reads it: Pulsar's own stock files of 2.10, 3.0 and 4.1, empty values,
the cache size's default from the direct memory, errors that name the file, the key and the value."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import ledgercache as lc

DATA = Path(__file__).parent.parent / "data" / "broker"
STOCK = sorted(DATA.glob("pulsar-*.broker.conf"))
MIB = 1 << 20


def test_the_stock_files_are_here():
    assert [p.name for p in STOCK] == ["pulsar-2.10.broker.conf", "pulsar-3.0.broker.conf", "pulsar-4.1.broker.conf"]


@pytest.mark.parametrize("conf", STOCK, ids=lambda p: p.name)
def test_a_stock_broker_conf_reads_as_pulsars_defaults(conf):
    # Pulsar ships managedLedgerCacheSizeMB= empty (a fifth of the direct memory) and many other
    # keys empty: each keeps its default, as FieldParser.update does.
    assert "\nmanagedLedgerCacheSizeMB=\n" in conf.read_text()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        c = lc.CacheConfig.from_broker_conf(conf)
    said = [str(w.message) for w in seen if issubclass(w.category, lc.BrokerConfWarning)]
    assert any(m.startswith("managedLedgerCacheSizeMB is empty") and "direct memory" in m for m in said), said
    # 4.1 ships the extend-TTL keys too, which a broker applies only when changed at run time.
    assert all(m.startswith(("managedLedgerCacheSizeMB", "managedLedgerCacheEvictionExtendTTL")) for m in said), said
    defaults = lc.CacheConfig()
    assert (c.cache_size_bytes, c.eviction_watermark, c.eviction_time_threshold_ms) == (
        defaults.cache_size_bytes,
        defaults.eviction_watermark,
        defaults.eviction_time_threshold_ms,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lc.BrokerConfWarning)
        sized = lc.CacheConfig.from_broker_conf(conf, direct_memory_bytes=10 << 30)
    assert sized.cache_size_bytes == 2048 * MIB  # a fifth of 10 GiB
    traffic = lc.workload.settings_from_broker_conf(conf)
    assert traffic["managedLedgerMaxEntriesPerLedger"] == 50000


def test_the_default_cache_size_is_a_fifth_of_direct_memory_at_least_64_mib():
    conf = {"managedLedgerCacheSizeMB": ""}
    size = lambda direct: lc.CacheConfig.from_broker_conf(conf, direct_memory_bytes=direct).cache_size_bytes
    assert size(4 << 30) == (4 << 30) // 5 // MIB * MIB
    assert size(256 * MIB) == 64 * MIB
    # Absent is the same default; a written size wins over the direct memory.
    assert lc.CacheConfig.from_broker_conf({}, direct_memory_bytes=5 << 30).cache_size_bytes == 1024 * MIB
    assert (
        lc.CacheConfig.from_broker_conf(
            {"managedLedgerCacheSizeMB": "100"}, direct_memory_bytes=5 << 30
        ).cache_size_bytes
        == 100 * MIB
    )


def test_errors_name_the_file_the_key_and_the_value(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("managedLedgerCacheSizeMB=4g\n")
    with pytest.raises(lc.InvalidArgumentError) as e:
        lc.CacheConfig.from_broker_conf(conf)
    assert str(e.value) == f"{conf}: invalid cache_size_bytes: managedLedgerCacheSizeMB=4g: not a whole number of MiB"
    conf.write_text("managedLedgerCacheEvictionWatermark=2\n")
    with pytest.raises(lc.InvalidArgumentError, match=r"broker.conf: .*managedLedgerCacheEvictionWatermark=2: "):
        lc.CacheConfig.from_broker_conf(conf)


def test_a_file_that_never_ends_is_refused_not_read_to_the_end():
    with pytest.raises(lc.InvalidArgumentError, match="/dev/zero: more than"):
        lc.CacheConfig.from_broker_conf("/dev/zero")


def test_a_broker_key_passed_as_a_setting_suggests_the_setting():
    with pytest.raises(lc.UnknownSettingError, match=r"did you mean .cache_size_bytes, in bytes"):
        lc.CacheConfig(managedLedgerCacheSizeMB=512)


def test_designs_are_declared_once_with_what_a_broker_can_run():
    designs = lc.designs()
    assert [d["name"] for d in designs] == ["pip430", "pip430-fifo", "legacy", "segmented", "lru", "belady"]
    assert {d["name"] for d in designs if d["role"] == "broker"} == {"pip430", "pip430-fifo", "legacy"}
    assert all(d["label"] and d["models"] for d in designs)
