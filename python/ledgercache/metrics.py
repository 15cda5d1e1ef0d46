"""A Pulsar broker's managed-ledger cache metrics, read from its Prometheus ``/metrics`` text or
from ``pulsar-admin broker-stats monitoring-metrics`` JSON.

Usage::

    import ledgercache as lc

    m = lc.metrics.read("broker.metrics.txt")        # Prometheus text or monitoring-metrics JSON
    print(m.cache.hits_rate, m.cache.misses_rate, m.cache.hit_ratio, m.labels)
    m = lc.metrics.read("federated.txt", labels={"cluster": "east"})   # several brokers in one file

:func:`read` takes a path and detects the format: a file whose first non-blank character is ``[`` or
``{`` is monitoring-metrics JSON (:func:`read_monitoring_metrics`), anything else Prometheus text
(:func:`read_prometheus`, which also takes the text itself). Both return :class:`BrokerMetrics`.

Where the numbers come from (apache/pulsar, mirror commit ``00a6badafc62c25254f1fa93a04da513c3fc9b66``):
``ManagedLedgerCacheMetrics.generate`` puts ``brk_ml_cache_*`` values, read from
``ManagedLedgerFactoryMBeanImpl``, into one ``Metrics`` with no dimensions.
``PrometheusMetricsGenerator.parseMetricsToPrometheusMetrics`` writes each as a Prometheus sample,
replacing the ``brk_`` prefix by ``pulsar_`` (``writeNameReplacingBrkPrefix``), with the label
``cluster`` only, a ``# TYPE ... gauge`` line (every one is typed gauge, counters too) and no
``# HELP``. ``MetricsGenerator.generate`` (REST ``/admin/v2/broker-stats/metrics``) returns the same
values under their ``brk_`` names, merged with every other metric that has no dimensions.

Units and kinds (``ManagedLedgerFactoryMBeanImpl`` and ``Rate``). The rates are not per scrape: the
managed-ledger factory recomputes them every ``managedLedgerStatsPeriodSeconds`` (60 s by default;
``ManagedLedgerFactoryImpl.refreshStats``) as the events of that period divided by its length, so
a scrape sees the average over the last whole period:

- ``hits_rate``, ``misses_rate`` (``pulsar_ml_cache_hits_rate``, ``..._misses_rate``): entries
  per second (entries, not messages: one read of a batched entry is one hit or miss), averaged
  over the last stats period.
- ``hits_throughput``, ``misses_throughput`` (``..._hits_throughput``, ``..._misses_throughput``):
  bytes per second, same period.
- ``used_size`` (``pulsar_ml_cache_used_size``): bytes cached now, a gauge.
- ``evictions`` (``pulsar_ml_cache_evictions``): how many eviction passes
  (``RangeEntryCacheManagerImpl.doEvictToWatermarkWhenOverThreshold``) ran in the last stats
  period: a count per period, neither a rate nor a running total; ``None`` when absent.
- ``entries`` (``pulsar_ml_cache_entries``): entries cached now. ``inserted_entries_total``,
  ``evicted_entries_total``: running totals since the broker started (typed gauge all the same).
- ``managed_ledgers`` (``pulsar_ml_count``): managed ledgers open on the broker.
- ``pool_allocated``, ``pool_used`` (bytes), ``pool_active_allocations`` and its ``_small``,
  ``_normal``, ``_huge`` parts: the cache's Netty allocator (``PooledByteBufAllocatorStats`` of
  ``RangeEntryCacheImpl.ALLOCATOR``).

The five series ``hits_rate`` through ``used_size`` are required; the others are ``None`` when the
broker (an older release) does not write them. :attr:`CacheMetrics.hit_ratio` is
``hits_rate / (hits_rate + misses_rate)``.

One file may hold several brokers' series (a federation or a scrape of several brokers, told
apart by labels such as ``cluster`` or ``instance``). The reader does not add them up: it raises an
:class:`~ledgercache.InvalidArgumentError` listing the label sets found, and ``labels={...}`` picks
the one whose labels include those given. Other errors, all ``InvalidArgumentError`` naming the
file: no ``pulsar_ml_cache_*`` series (or a required one missing), text that the Prometheus parser
rejects (its message), JSON that is not monitoring-metrics, and a file over :data:`MAX_FILE_BYTES`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ._files import read_text
from .errors import InvalidArgumentError, MissingDependencyError

__all__ = [
    "BrokerMetrics",
    "CacheMetrics",
    "MAX_FILE_BYTES",
    "read",
    "read_monitoring_metrics",
    "read_prometheus",
    "to_prometheus",
    "write_prometheus",
]

#: The largest metrics file the readers open (256 MiB).
MAX_FILE_BYTES = 256 * 1024 * 1024

# CacheMetrics attribute -> the name without its prefix (``pulsar_`` in Prometheus, ``brk_`` in JSON).
_REQUIRED = {
    "hits_rate": "ml_cache_hits_rate",
    "misses_rate": "ml_cache_misses_rate",
    "hits_throughput": "ml_cache_hits_throughput",
    "misses_throughput": "ml_cache_misses_throughput",
    "used_size": "ml_cache_used_size",
}
_OPTIONAL = {
    "evictions": "ml_cache_evictions",
    "entries": "ml_cache_entries",
    "inserted_entries_total": "ml_cache_inserted_entries_total",
    "evicted_entries_total": "ml_cache_evicted_entries_total",
    "managed_ledgers": "ml_count",
    "pool_allocated": "ml_cache_pool_allocated",
    "pool_used": "ml_cache_pool_used",
    "pool_active_allocations": "ml_cache_pool_active_allocations",
    "pool_active_allocations_small": "ml_cache_pool_active_allocations_small",
    "pool_active_allocations_normal": "ml_cache_pool_active_allocations_normal",
    "pool_active_allocations_huge": "ml_cache_pool_active_allocations_huge",
}

Labels = dict[str, str]
Sample = tuple[str, Labels, float]


@dataclass(frozen=True)
class CacheMetrics:
    """The broker-wide entry cache's metrics (units in the module's docs)."""

    hits_rate: float
    misses_rate: float
    hits_throughput: float
    misses_throughput: float
    used_size: float
    evictions: float | None = None
    entries: float | None = None
    inserted_entries_total: float | None = None
    evicted_entries_total: float | None = None
    managed_ledgers: float | None = None
    pool_allocated: float | None = None
    pool_used: float | None = None
    pool_active_allocations: float | None = None
    pool_active_allocations_small: float | None = None
    pool_active_allocations_normal: float | None = None
    pool_active_allocations_huge: float | None = None

    @property
    def hit_ratio(self) -> float | None:
        """Hits over hits plus misses, in entries; ``None`` when both rates are 0."""
        total = self.hits_rate + self.misses_rate
        return self.hits_rate / total if total > 0 else None


@dataclass(frozen=True)
class BrokerMetrics:
    """The cache metrics of one broker, the labels (Prometheus) or dimensions (JSON) of the series
    they came from, and every sample of the input as ``(name, labels, value)``."""

    cache: CacheMetrics
    labels: Labels = field(default_factory=dict, hash=False)
    samples: tuple[Sample, ...] = field(default=(), hash=False, repr=False)


def _fmt(labels: Mapping[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _select(samples: list[Sample], prefix: str, label: str, labels: Mapping[str, str] | None,
            expected: str) -> BrokerMetrics:
    """Group the cache samples by label set, pick one, build the result."""
    names = {prefix + short: attr for attr, short in {**_REQUIRED, **_OPTIONAL}.items()}
    groups: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    for name, sample_labels, value in samples:
        if name in names:
            key = tuple(sorted(sample_labels.items()))
            groups.setdefault(key, {})[names[name]] = value
    # A label set that has none of the required series (e.g. only pulsar_ml_count) is not a cache.
    groups = {k: v for k, v in groups.items() if any(a in v for a in _REQUIRED)}
    if not groups:
        raise InvalidArgumentError(f"{label}: no managed-ledger cache series; expected {expected}")
    if labels is not None:
        wanted = {str(k): str(v) for k, v in labels.items()}
        chosen = {k: v for k, v in groups.items() if wanted.items() <= dict(k).items()}
        if len(chosen) != 1:
            found = "; ".join(_fmt(dict(k)) for k in groups)
            how = "no" if not chosen else f"{len(chosen)}"
            raise InvalidArgumentError(f"{label}: {how} cache series match labels={_fmt(wanted)}; "
                                       f"label sets found: {found}")
        groups = chosen
    elif len(groups) > 1:
        found = "; ".join(_fmt(dict(k)) for k in groups)
        raise InvalidArgumentError(f"{label}: cache series for {len(groups)} label sets ({found}); pick one "
                                   f"with labels={{...}} (the reader does not add brokers together)")
    key, values = next(iter(groups.items()))
    missing = [prefix + short for attr, short in _REQUIRED.items() if attr not in values]
    if missing:
        raise InvalidArgumentError(f"{label}: cache series {_fmt(dict(key))} lack {', '.join(missing)}")
    for attr, value in values.items():
        if not math.isfinite(value) or value < 0:
            raise InvalidArgumentError(f"{label}: {[n for n, a in names.items() if a == attr][0]}"
                                       f"{_fmt(dict(key))}: expected a number >= 0, got {value!r}")
    return BrokerMetrics(cache=CacheMetrics(**values), labels=dict(key), samples=tuple(samples))


def _read_text(path: Path, max_bytes: int) -> str:
    return read_text(path, max_bytes, "a metrics file")


def read_prometheus(source: Union[str, "os.PathLike[str]"], *, labels: Mapping[str, str] | None = None,
                    max_bytes: int = MAX_FILE_BYTES) -> BrokerMetrics:
    """Read Prometheus text exposition: a path (``os.PathLike``, or a ``str`` without a newline)
    or the text itself (a ``str`` with a newline). ``labels`` picks one broker's series."""
    if isinstance(source, str) and "\n" in source:
        return _parse_prometheus(source, "<text>", labels)
    if isinstance(source, (str, os.PathLike)):
        return _parse_prometheus(_read_text(Path(source), max_bytes), str(source), labels)
    raise InvalidArgumentError(f"source: expected a path or Prometheus text, got {type(source).__name__}")


def _parse_prometheus(text: str, label: str, labels: Mapping[str, str] | None) -> BrokerMetrics:
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:  # a declared dependency; only a broken install lacks it
        raise MissingDependencyError("ledgercache.metrics needs prometheus_client: pip install prometheus-client",
                                     ("prometheus_client",)) from None
    samples: list[Sample] = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples.append((s.name, dict(s.labels), float(s.value)))
    except (ValueError, TypeError, IndexError, KeyError) as e:
        raise InvalidArgumentError(f"{label}: not Prometheus text: {e}") from None
    return _select(samples, "pulsar_", label, labels,
                   "pulsar_ml_cache_hits_rate, pulsar_ml_cache_misses_rate, pulsar_ml_cache_hits_throughput, "
                   "pulsar_ml_cache_misses_throughput, pulsar_ml_cache_used_size (a Pulsar broker's /metrics)")


def _json_values(text: str, label: str) -> list[Any]:
    """The REST endpoint returns a JSON list; ``pulsar-admin broker-stats monitoring-metrics``
    prints the list's objects one after another (``CmdBrokerStats.CmdMonitoringMetrics``), without
    separators or, with ``-i``, separated by blank lines: accept both."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return values
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"{label}: line {e.lineno} column {e.colno}: not JSON: {e.msg}") from None
        except RecursionError:
            raise InvalidArgumentError(f"{label}: not JSON this reader accepts: nested too deeply") from None
        if isinstance(value, list):
            values.extend(value)
        else:
            values.append(value)


def read_monitoring_metrics(source: Union[str, "os.PathLike[str]", list[Any]], *,
                            labels: Mapping[str, str] | None = None,
                            max_bytes: int = MAX_FILE_BYTES) -> BrokerMetrics:
    """Read ``pulsar-admin broker-stats monitoring-metrics`` output (a path, or the parsed list of
    ``{"dimensions": {...}, "metrics": {...}}``). ``labels`` matches the dimensions; the cache's
    own are empty. Samples keep their ``brk_`` names."""
    if isinstance(source, list):
        label, values = "<list>", source
    elif isinstance(source, (str, os.PathLike)):
        label = str(source)
        values = _json_values(_read_text(Path(source), max_bytes), label)
    else:
        raise InvalidArgumentError(f"source: expected a path or a list, got {type(source).__name__}")
    return _from_monitoring_values(values, label, labels)


def _from_monitoring_values(values: list[Any], label: str, labels: Mapping[str, str] | None) -> BrokerMetrics:
    samples: list[Sample] = []
    for i, item in enumerate(values):
        if not (isinstance(item, Mapping) and isinstance(item.get("metrics"), Mapping)
                and isinstance(item.get("dimensions", {}), Mapping)):
            raise InvalidArgumentError(f"{label}: item {i} is not {{\"dimensions\": {{...}}, \"metrics\": {{...}}}}; "
                                       f"expected pulsar-admin broker-stats monitoring-metrics output")
        dims = {str(k): str(v) for k, v in item.get("dimensions", {}).items()}
        for name, value in item["metrics"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                samples.append((str(name), dims, float(value)))
    return _select(samples, "brk_", label, labels,
                   "brk_ml_cache_hits_rate, brk_ml_cache_misses_rate, brk_ml_cache_hits_throughput, "
                   "brk_ml_cache_misses_throughput, brk_ml_cache_used_size (ManagedLedgerCacheMetrics)")


def read(source: Union[str, "os.PathLike[str]"], *, labels: Mapping[str, str] | None = None,
         max_bytes: int = MAX_FILE_BYTES) -> BrokerMetrics:
    """Read a metrics file of either format, detected from its first non-blank character
    (``[`` or ``{``: monitoring-metrics JSON; else Prometheus text)."""
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidArgumentError(f"source: expected a path, got {type(source).__name__}")
    label = str(source)
    text = _read_text(Path(source), max_bytes)
    if text.lstrip()[:1] in ("[", "{"):
        return _from_monitoring_values(_json_values(text, label), label, labels)
    return _parse_prometheus(text, label, labels)


def to_prometheus(cache: CacheMetrics, labels: Mapping[str, str] | None = None) -> str:
    """The cache metrics as a broker's ``/metrics`` writes them: each set series under its
    ``pulsar_`` name with a ``# TYPE ... gauge`` line and the given labels (default
    ``cluster="standalone"``); :func:`read_prometheus` reads it back. How ``ledgercache
    broker-dump`` writes a synthetic broker's metrics."""
    labels = {"cluster": "standalone"} if labels is None else dict(labels)
    text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    lines = []
    for attr, name in sorted({**_REQUIRED, **_OPTIONAL}.items(), key=lambda kv: kv[1]):
        value = getattr(cache, attr)
        if value is None:
            continue
        lines += [f"# TYPE pulsar_{name} gauge", f"pulsar_{name}{{{text}}} {float(value)!r}"]
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def write_prometheus(cache: CacheMetrics, path: Union[str, "os.PathLike[str]"],
                     labels: Mapping[str, str] | None = None) -> None:
    """Writes :func:`to_prometheus`'s text to ``path``."""
    Path(path).write_text(to_prometheus(cache, labels))
