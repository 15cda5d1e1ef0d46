"""A Pulsar broker's managed-ledger cache metrics, and what the rest of its metrics say about it
(release, direct memory, topics, message rates), read from its Prometheus ``/metrics`` text or from
``pulsar-admin broker-stats monitoring-metrics`` JSON.

Usage::

    import ledgercache as lc

    m = lc.metrics.read("broker.metrics.txt")        # Prometheus text or monitoring-metrics JSON
    print(m.cache.hits_rate, m.cache.misses_rate, m.cache.hit_ratio, m.labels)
    print(m.version, m.version_numbers, m.direct_memory_max_bytes, m.default_cache_size_bytes())
    print(m.topics, m.cache.managed_ledgers, m.rate_in, m.rate_out, m.rates_level)
    for note in m.notes:                              # values the reader clamped or left out
        print(note)
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
- ``managed_ledgers`` (``pulsar_ml_count``): managed ledgers open on the broker (one a persistent
  topic or partition it serves; non-persistent topics have none).
- ``pool_allocated``, ``pool_used`` (bytes), ``pool_active_allocations`` and its ``_small``,
  ``_normal``, ``_huge`` (and, 2.6 to 2.8, ``_tiny``) parts: the cache's Netty allocator
  (``PooledByteBufAllocatorStats`` of ``RangeEntryCacheImpl.ALLOCATOR``).

The five series ``hits_rate`` through ``used_size`` are required; the others are ``None`` when the
broker (an older release) does not write them. :attr:`CacheMetrics.hit_ratio` is
``hits_rate / (hits_rate + misses_rate)``.

What each release writes to ``/metrics`` (found in the mirror's history; the reader takes them all):

- Before 2.6: no ``pulsar_ml_cache_*`` series at all. apache/pulsar#6705 (April 2020, first in 2.6.0)
  added them. :func:`read_prometheus` refuses such a file, naming it, and says that
  ``pulsar-admin broker-stats monitoring-metrics`` has them: the JSON carries ``brk_ml_cache_*`` in
  every release (``MetricsGenerator`` has included ``ManagedLedgerCacheMetrics`` since 1.x).
- 2.3 to 2.11: every topic series also appears once with the ``cluster`` label only and the value 0
  (``printDefaultBrokerStats``, #2805); the reader leaves these out. Up to 2.10 the ``pulsar_*``
  samples carry a timestamp after the value (#15558 and #17419 removed them in 2.11), and the
  samples of one series may be scattered under a single ``# TYPE`` line; 2.6 to 2.8 have
  ``pulsar_ml_cache_pool_active_allocations_tiny`` (removed by #12012 in 2.9).
- 2.7 and later: ``pulsar_version_info{cluster, version, commit} 1.0`` (#7908, ``MetricsExports``).
- 2.9 and later: with ``splitTopicAndPartitionIndexLabel``, a partition's series carry the
  partitioned topic's name in ``topic`` and its index in ``partition`` (``-1`` for a topic that is
  not partitioned; #12225).
- 2.11 and later: ``pulsar_ml_cache_entries`` and the inserted/evicted totals (#17248).
- 3.0 and later: ``pulsar_broker_topics_count``, ``pulsar_broker_rate_in``, ``pulsar_broker_rate_out``
  (PIP-214, #19047) in place of the cluster-only zeros.
- 4.1 runs PIP-430's cache (#24623); the cache's series are the same, so the version is the only
  sign of which design a broker runs (before 4.1: the legacy one).

The other fields of :class:`BrokerMetrics`, all ``None`` when the file does not have them:

- ``version``: ``pulsar_version_info``'s ``version`` label, as printed (``"2.10.4"``,
  ``"4.1.0-SNAPSHOT"``, a vendor's ``"2.10.5.3"``); :attr:`BrokerMetrics.version_numbers` gives its
  leading numbers as a tuple to compare (``m.version_numbers < (4, 1)``). Prometheus only.
- ``direct_memory_max_bytes``: ``jvm_memory_direct_bytes_max`` (Prometheus) or
  ``jvm_max_direct_memory`` (JSON, item ``{"metric": "jvm_metrics"}``), both
  ``DirectMemoryUtils.jvmMaxDirectMemory``, the value ``ServiceConfiguration`` sizes the cache from:
  :meth:`BrokerMetrics.default_cache_size_bytes` is ``max(64, direct memory / 5 / MiB)`` MiB, the
  cache a broker takes when its ``broker.conf`` leaves ``managedLedgerCacheSizeMB`` empty (as the one
  Pulsar ships does, since 2.3; before 2.3 the default was 1024 MiB).
- ``topics``, ``rate_in``, ``rate_out`` and ``rates_level``: the topics the broker serves (each
  partition one, as in its topic stats) and the messages a second published to and dispatched from
  them, summed from the finest series the file has (``rates_level``): per topic (``"topic"``: the
  distinct ``namespace``/``topic``/``partition`` label sets of ``pulsar_rate_in``,
  ``pulsar_rate_out``, ``pulsar_subscriptions_count``, ``pulsar_producers_count`` and
  ``pulsar_consumers_count``, which ``TopicStats.printTopicStats`` writes for every topic, and the
  sums of ``pulsar_rate_in`` / ``pulsar_rate_out``), else per namespace (``"namespace"``: the sums
  of ``pulsar_topics_count``, ``pulsar_rate_in`` and ``pulsar_rate_out`` with a ``namespace`` label),
  else the broker's totals (``"broker"``: ``pulsar_broker_*``, 3.0 and later). A broker writes per
  topic series when ``exposeTopicLevelMetricsInPrometheus`` is true (the default) and per namespace
  ones otherwise, never both (``NamespaceStatsAggregator.generate``); a file with both (joined from
  two scrapes) is read per topic, with a note, so no message counts twice. The JSON has per
  namespace ``brk_in_rate`` and ``brk_out_rate`` (``NamespaceStats.add``), so ``rates_level`` is
  ``"namespace"`` and ``topics`` ``None``.
- ``notes``: what the reader changed or left out, in plain words. A cache value that is negative
  (``pulsar_ml_cache_used_size`` can be: apache/pulsar#10016, fixed in 2.8), or not a finite number,
  is read as 0 (an optional series that is NaN or infinite is left out); a NaN or infinite rate or
  topic count is left out of its sum and a negative one counted as 0; an unusable direct memory is
  left unknown; repeated samples (the same series and labels) count once; several versions for one
  broker leave the version unknown. Notes of one kind on one series are merged: the first is quoted
  and the rest counted (``... (and 4999 more pulsar_rate_in samples like it)``). None of these
  refuse the file; a required series that is missing does.

One file may hold several brokers' series (a federation or a scrape of several brokers, told
apart by labels such as ``cluster`` or ``instance``). The reader does not add them up: it raises an
:class:`~ledgercache.InvalidArgumentError` listing the label sets found, and ``labels={...}`` picks
the one whose labels include those given. The other fields are read from the samples whose labels
include the chosen cache series' labels (every series of a broker carries its ``cluster``, and a
federation's ``instance``). Other errors, all ``InvalidArgumentError`` naming the file: no
``pulsar_ml_cache_*`` series (with the hint above), a required one missing, text that the
Prometheus parser rejects (its message), JSON that is not monitoring-metrics, and a file over
:data:`MAX_FILE_BYTES`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._files import decode_json_at, read_text
from ._native import CacheConfig
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
    "pool_active_allocations_tiny": "ml_cache_pool_active_allocations_tiny",
    "pool_active_allocations_small": "ml_cache_pool_active_allocations_small",
    "pool_active_allocations_normal": "ml_cache_pool_active_allocations_normal",
    "pool_active_allocations_huge": "ml_cache_pool_active_allocations_huge",
}

# Series TopicStats.printTopicStats writes for every topic the broker serves, whatever its traffic,
# when exposeTopicLevelMetricsInPrometheus is true (the default): the topics are counted from these.
_PER_TOPIC = (
    "pulsar_rate_in",
    "pulsar_rate_out",
    "pulsar_subscriptions_count",
    "pulsar_producers_count",
    "pulsar_consumers_count",
)

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
    pool_active_allocations_tiny: float | None = None

    @property
    def hit_ratio(self) -> float | None:
        """Hits over hits plus misses, in entries; ``None`` when both rates are 0."""
        total = self.hits_rate + self.misses_rate
        return self.hits_rate / total if total > 0 else None


@dataclass(frozen=True)
class BrokerMetrics:
    """The cache metrics of one broker, the labels (Prometheus) or dimensions (JSON) of the series
    they came from, every sample of the input as ``(name, labels, value)``, and what the rest of
    the broker's series say about it (the module's docs say where each comes from)."""

    cache: CacheMetrics
    labels: Labels = field(default_factory=dict, hash=False)
    samples: tuple[Sample, ...] = field(default=(), hash=False, repr=False)
    #: ``pulsar_version_info``'s ``version`` label (Prometheus, Pulsar 2.7 and later), as printed.
    version: str | None = None
    #: ``jvm_memory_direct_bytes_max`` (Prometheus) or ``jvm_max_direct_memory`` (JSON), bytes.
    direct_memory_max_bytes: int | None = None
    #: Topics the broker serves (partitions count one each), from the finest series the file has.
    topics: int | None = None
    #: Messages a second published to / dispatched by the broker, summed over its topics or namespaces.
    rate_in: float | None = None
    rate_out: float | None = None
    #: Which series ``topics``, ``rate_in`` and ``rate_out`` were read from: ``"topic"``,
    #: ``"namespace"`` or ``"broker"``; ``None`` when the file has none of them.
    rates_level: str | None = None
    #: What the reader changed or left out, in plain words (implausible values, repeated series).
    notes: tuple[str, ...] = ()

    @property
    def version_numbers(self) -> tuple[int, ...] | None:
        """The version's leading numbers (``"4.0.4"`` -> ``(4, 0, 4)``, ``"2.10.5.3"`` ->
        ``(2, 10, 5, 3)``, ``"4.1.0-SNAPSHOT"`` -> ``(4, 1, 0)``), to compare with tuples such as
        ``(4, 1)``; ``None`` when the version is unknown or does not start with a number."""
        match = re.match(r"\d+(?:\.\d+)*", self.version or "")
        return tuple(int(n) for n in match.group().split(".")) if match else None

    def default_cache_size_bytes(self) -> int | None:
        """The cache size the broker takes when ``managedLedgerCacheSizeMB`` is unset (empty in
        the ``broker.conf`` Pulsar ships): ``max(64, direct memory / 5 / MiB)`` MiB, in whole MiB
        (``ServiceConfiguration.managedLedgerCacheSizeMB``, since Pulsar 2.3; a fixed 1024 MiB
        before). ``None`` when the file does not give the direct memory."""
        if self.direct_memory_max_bytes is None:
            return None

        # One implementation of Pulsar's rule: the one broker.conf reading applies.
        return CacheConfig.from_broker_conf({}, direct_memory_bytes=self.direct_memory_max_bytes).cache_size_bytes


class _Notes:
    """Notes in plain words, one per kind of problem and series: the first occurrence is quoted
    and the rest counted, so a file with 10,000 NaN topics gives one line, not 10,000."""

    def __init__(self) -> None:
        self._notes: dict[tuple[str, str, str], list[Any]] = {}

    def add(self, name: str, labels: Mapping[str, str], problem: str, action: str) -> None:
        # Keyed by the kind of problem without its value: -1 and -312 are both "negative".
        kind = problem.split(" (", maxsplit=1)[0]
        entry = self._notes.setdefault((name, kind, action), [f"{name}{_fmt(labels)}: {problem}; {action}", 0])
        entry[1] += 1

    def text(self) -> tuple[str, ...]:
        return tuple(
            first if n == 1 else f"{first} (and {n - 1} more {name} samples like it)"
            for (name, _, _), (first, n) in self._notes.items()
        )


def _problem(value: float) -> str | None:
    """What is implausible about a value every series here must have finite and >= 0, or None."""
    if math.isnan(value):
        return "not a number (NaN)"
    if math.isinf(value):
        return "infinite (+Inf)" if value > 0 else "infinite (-Inf)"
    if value < 0:
        return f"negative ({value:g})"
    return None


def _fmt(labels: Mapping[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _select(
    samples: list[Sample], prefix: str, label: str, labels: Mapping[str, str] | None, expected: str, hint: str = ""
) -> tuple[tuple[tuple[str, str], ...], dict[str, float], _Notes]:
    """Group the cache samples by label set and pick one: its labels, its values (implausible
    ones clamped, with a note) and the notes."""
    names = {prefix + short: attr for attr, short in {**_REQUIRED, **_OPTIONAL}.items()}
    groups: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for name, sample_labels, value in samples:
        if name in names:
            key = _key(sample_labels)
            groups.setdefault(key, {})[names[name]] = value
            seen[name, key] = seen.get((name, key), 0) + 1
    # A label set that has none of the required series (e.g. only pulsar_ml_count) is not a cache.
    groups = {k: v for k, v in groups.items() if any(a in v for a in _REQUIRED)}
    if not groups:
        raise InvalidArgumentError(f"{label}: no managed-ledger cache series; expected {expected}{hint}")
    if labels is not None:
        wanted = {str(k): str(v) for k, v in labels.items()}
        chosen = {k: v for k, v in groups.items() if wanted.items() <= dict(k).items()}
        if len(chosen) != 1:
            found = "; ".join(_fmt(dict(k)) for k in groups)
            how = "no" if not chosen else f"{len(chosen)}"
            raise InvalidArgumentError(
                f"{label}: {how} cache series match labels={_fmt(wanted)}; label sets found: {found}"
            )
        groups = chosen
    elif len(groups) > 1:
        found = "; ".join(_fmt(dict(k)) for k in groups)
        raise InvalidArgumentError(
            f"{label}: cache series for {len(groups)} label sets ({found}); pick one "
            f"with labels={{...}} (the reader does not add brokers together)"
        )
    key, values = next(iter(groups.items()))
    missing = [prefix + short for attr, short in _REQUIRED.items() if attr not in values]
    if missing:
        raise InvalidArgumentError(f"{label}: cache series {_fmt(dict(key))} lack {', '.join(missing)}")
    notes = _Notes()
    by_attr = {attr: name for name, attr in names.items()}
    for attr in list(values):
        name, value = by_attr[attr], values[attr]
        if seen[name, key] > 1:
            # Two brokers' files pasted together without a label to tell them apart look like this.
            notes.add(
                name,
                dict(key),
                f"{seen[name, key]} samples with the same labels",
                "read the last (were two brokers' files joined?)",
            )
        problem = _problem(value)
        if problem is None:
            continue
        if value < 0:
            why = (
                " (brokers before Pulsar 2.8 could print a negative size: apache/pulsar#10016)"
                if attr == "used_size"
                else ""
            )
            values[attr] = 0.0
            notes.add(name, dict(key), problem, f"read as 0{why}")
        elif attr in _REQUIRED:
            values[attr] = 0.0
            notes.add(name, dict(key), problem, "read as 0")
        else:
            del values[attr]
            notes.add(name, dict(key), problem, "left out")
    return key, values, notes


def _broker_samples(samples: Iterable[Sample], key: tuple[tuple[str, str], ...]) -> list[Sample]:
    """The samples of the broker whose cache series carry the labels ``key``: every one of a
    broker's series carries its cluster (and a federation's instance) labels, plus its own."""
    want = dict(key).items()
    return [s for s in samples if want <= s[1].items()]


def _sum_unique(samples: list[Sample], what: str, notes: _Notes) -> float:
    """The sum of samples of one series, each label set once, implausible values left out with a note."""
    values: dict[tuple[tuple[str, str], ...], Sample] = {}
    for s in samples:
        values[_key(s[1])] = s
    if len(values) < len(samples):
        notes.add(
            samples[0][0],
            {},
            f"{len(samples) - len(values)} samples repeat another's labels",
            f"each label set counted once in {what}",
        )
    total = 0.0
    for name, labels, value in values.values():
        problem = _problem(value)
        if problem is None:
            total += value
        elif value < 0:
            notes.add(name, labels, problem, f"counted as 0 in {what}")
        else:
            notes.add(name, labels, problem, f"left out of {what}")
    return total


def _version(samples: list[Sample], notes: _Notes) -> str | None:
    found = {s[1].get("version", "") for s in samples if s[0] == "pulsar_version_info"} - {""}
    if len(found) > 1:
        notes.add(
            "pulsar_version_info", {}, f"{len(found)} versions ({', '.join(sorted(found))})", "version left unknown"
        )
        return None
    return found.pop() if found else None


def _direct_memory(samples: list[Sample], name: str, notes: _Notes) -> int | None:
    found = [s for s in samples if s[0] == name]
    if not found:
        return None
    _, labels, value = found[-1]
    if math.isfinite(value) and value > 0:
        return int(value)
    notes.add(name, labels, _problem(value) or f"{value:g}", "direct memory left unknown")
    return None


def _prometheus_traffic(samples: list[Sample], notes: _Notes) -> dict[str, Any]:
    """Topics and message rates from a broker's topic, namespace or broker series, whichever is the
    finest the file has. A broker writes per-topic series (labels namespace and topic, and partition
    with splitTopicAndPartitionIndexLabel) when exposeTopicLevelMetricsInPrometheus is true, else
    per-namespace ones (NamespaceStatsAggregator: never both, they would count the same messages
    twice); 2.3 to 2.11 also write every series once with the cluster label only and the value 0
    (printDefaultBrokerStats), which is left out; 3.0 and later add pulsar_broker_* totals."""
    per_topic = [s for s in samples if s[0] in _PER_TOPIC and "topic" in s[1]]
    if per_topic:
        # A per-namespace series beside per-topic ones is not one broker's output (a file joined
        # from two scrapes, or from two brokers' settings): count each message once.
        for name in ("pulsar_rate_in", "pulsar_rate_out"):
            ns = [s for s in samples if s[0] == name and "namespace" in s[1] and "topic" not in s[1]]
            if ns:
                notes.add(
                    name,
                    ns[0][1],
                    "a per-namespace series beside per-topic ones",
                    "read the per-topic ones only (both would count each message twice)",
                )
        names = {(s[1].get("namespace"), s[1]["topic"], s[1].get("partition")) for s in per_topic}
        return {
            "rates_level": "topic",
            "topics": len(names),
            "rate_in": _total(per_topic, "pulsar_rate_in", "rate_in", notes),
            "rate_out": _total(per_topic, "pulsar_rate_out", "rate_out", notes),
        }
    per_ns = [
        s
        for s in samples
        if "namespace" in s[1]
        and "topic" not in s[1]
        and s[0] in ("pulsar_rate_in", "pulsar_rate_out", "pulsar_topics_count")
    ]
    if per_ns:
        topics = _total(per_ns, "pulsar_topics_count", "topics", notes)
        return {
            "rates_level": "namespace",
            "topics": None if topics is None else round(topics),
            "rate_in": _total(per_ns, "pulsar_rate_in", "rate_in", notes),
            "rate_out": _total(per_ns, "pulsar_rate_out", "rate_out", notes),
        }
    broker = [s for s in samples if s[0].startswith("pulsar_broker_")]
    topics = _total(broker, "pulsar_broker_topics_count", "topics", notes)
    traffic = {
        "topics": None if topics is None else round(topics),
        "rate_in": _total(broker, "pulsar_broker_rate_in", "rate_in", notes),
        "rate_out": _total(broker, "pulsar_broker_rate_out", "rate_out", notes),
    }
    return {"rates_level": "broker", **traffic} if any(v is not None for v in traffic.values()) else {}


def _total(samples: list[Sample], name: str, what: str, notes: _Notes) -> float | None:
    """The sum of the series ``name`` among ``samples``; ``None`` when it has no sample."""
    found = [s for s in samples if s[0] == name]
    return _sum_unique(found, what, notes) if found else None


def _read_text(path: Path, max_bytes: int) -> str:
    return read_text(path, max_bytes, "a metrics file")


def read_prometheus(
    source: str | os.PathLike[str], *, labels: Mapping[str, str] | None = None, max_bytes: int = MAX_FILE_BYTES
) -> BrokerMetrics:
    """Read Prometheus text exposition: a path (``os.PathLike``, or a ``str`` without a newline)
    or the text itself (a ``str`` with a newline). ``labels`` picks one broker's series."""
    if isinstance(source, str) and "\n" in source:
        return _parse_prometheus(source, "<text>", labels)
    if isinstance(source, (str, os.PathLike)):
        return _parse_prometheus(_read_text(Path(source), max_bytes), str(source), labels)
    raise InvalidArgumentError(f"source: expected a path or Prometheus text, got {type(source).__name__}")


def _parse_prometheus(text: str, label: str, labels: Mapping[str, str] | None) -> BrokerMetrics:
    try:
        from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415 -- guarded: a broken install gets an error naming the package
    except ImportError:  # a declared dependency; only a broken install lacks it
        raise MissingDependencyError(
            "ledgercache.metrics needs prometheus_client: pip install prometheus-client", ("prometheus_client",)
        ) from None
    samples: list[Sample] = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples.append((s.name, dict(s.labels), float(s.value)))
    except (ValueError, TypeError, IndexError, KeyError) as e:
        raise InvalidArgumentError(f"{label}: not Prometheus text: {e}") from None
    key, values, notes = _select(
        samples,
        "pulsar_",
        label,
        labels,
        "pulsar_ml_cache_hits_rate, pulsar_ml_cache_misses_rate, "
        "pulsar_ml_cache_hits_throughput, pulsar_ml_cache_misses_throughput, "
        "pulsar_ml_cache_used_size (a Pulsar broker's /metrics)",
        _no_cache_hint(samples),
    )
    mine = _broker_samples(samples, key)
    return BrokerMetrics(
        cache=CacheMetrics(**values),
        labels=dict(key),
        samples=tuple(samples),
        version=_version(mine, notes),
        direct_memory_max_bytes=_direct_memory(mine, "jvm_memory_direct_bytes_max", notes),
        **_prometheus_traffic(mine, notes),
        notes=notes.text(),
    )


def _no_cache_hint(samples: list[Sample]) -> str:
    """Why a /metrics may lack the cache's series, and what to pass instead."""
    versions = sorted({s[1].get("version", "") for s in samples if s[0] == "pulsar_version_info"} - {""})
    hint = (
        "; brokers before Pulsar 2.6 do not write them to /metrics: for such a broker save "
        "`pulsar-admin broker-stats monitoring-metrics > metrics.json` (it has them, as brk_ml_cache_*, "
        "on every release) and pass that file instead"
    )
    if versions:
        # pulsar_version_info came in 2.7, whose brokers write the cache's series: not an old broker.
        hint += (
            f"; but this file's pulsar_version_info says {', '.join(versions)}, a release that writes "
            f"them: was the file cut short or filtered, or is it not a broker's /metrics?"
        )
    return hint


def _json_values(text: str, label: str) -> list[Any]:
    """The REST endpoint returns a JSON list; ``pulsar-admin broker-stats monitoring-metrics``
    prints the list's objects one after another (``CmdBrokerStats.CmdMonitoringMetrics``), without
    separators or, with ``-i``, separated by blank lines: accept both."""
    values: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return values
        value, pos = decode_json_at(text, pos, label)
        if isinstance(value, list):
            values.extend(value)
        else:
            values.append(value)


def read_monitoring_metrics(
    source: str | os.PathLike[str] | list[Any],
    *,
    labels: Mapping[str, str] | None = None,
    max_bytes: int = MAX_FILE_BYTES,
) -> BrokerMetrics:
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


# Jackson writes a double that is NaN or infinite as a quoted string (QUOTE_NON_NUMERIC_NUMBERS).
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _from_monitoring_values(values: list[Any], label: str, labels: Mapping[str, str] | None) -> BrokerMetrics:
    samples: list[Sample] = []
    for i, item in enumerate(values):
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("metrics"), Mapping)
            and isinstance(item.get("dimensions", {}), Mapping)
        ):
            raise InvalidArgumentError(
                f'{label}: item {i} is not {{"dimensions": {{...}}, "metrics": {{...}}}}; '
                f"expected pulsar-admin broker-stats monitoring-metrics output"
            )
        dims = {str(k): str(v) for k, v in item.get("dimensions", {}).items()}
        for name, value in item["metrics"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                samples.append((str(name), dims, float(value)))
            elif isinstance(value, str) and value in _NON_FINITE:
                samples.append((str(name), dims, _NON_FINITE[value]))
    key, values_, notes = _select(
        samples,
        "brk_",
        label,
        labels,
        "brk_ml_cache_hits_rate, brk_ml_cache_misses_rate, brk_ml_cache_hits_throughput, "
        "brk_ml_cache_misses_throughput, brk_ml_cache_used_size (ManagedLedgerCacheMetrics)",
    )
    mine = _broker_samples(samples, key)
    # NamespaceStats.add: one item a namespace, with the sums over its topics; no per-topic items
    # and no topic count (the JSON has no version either).
    per_ns = [s for s in mine if s[0] in ("brk_in_rate", "brk_out_rate") and "namespace" in s[1]]
    traffic: dict[str, Any] = {}
    if per_ns:
        traffic = {
            "rates_level": "namespace",
            "rate_in": _total(per_ns, "brk_in_rate", "rate_in", notes),
            "rate_out": _total(per_ns, "brk_out_rate", "rate_out", notes),
        }
    return BrokerMetrics(
        cache=CacheMetrics(**values_),
        labels=dict(key),
        samples=tuple(samples),
        direct_memory_max_bytes=_direct_memory(mine, "jvm_max_direct_memory", notes),
        **traffic,
        notes=notes.text(),
    )


def read(
    source: str | os.PathLike[str], *, labels: Mapping[str, str] | None = None, max_bytes: int = MAX_FILE_BYTES
) -> BrokerMetrics:
    """Read a metrics file of either format, detected from its first non-blank character
    (``[`` or ``{``: monitoring-metrics JSON; else Prometheus text)."""
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidArgumentError(f"source: expected a path, got {type(source).__name__}")
    label = str(source)
    text = _read_text(Path(source), max_bytes)
    if text.lstrip()[:1] in ("[", "{"):
        return _from_monitoring_values(_json_values(text, label), label, labels)
    return _parse_prometheus(text, label, labels)


def to_prometheus(
    cache: CacheMetrics,
    labels: Mapping[str, str] | None = None,
    *,
    version: str | None = None,
    topic_rates: Iterable[tuple[str, str, float, float]] = (),
) -> str:
    """The cache metrics as a broker's ``/metrics`` writes them: each set series under its
    ``pulsar_`` name with a ``# TYPE ... gauge`` line and the given labels (default
    ``cluster="standalone"``); :func:`read_prometheus` reads it back. How ``ledgercache
    broker-dump`` writes a synthetic broker's metrics. ``version`` adds ``pulsar_version_info``;
    ``topic_rates`` (topic, namespace, msg/s in, msg/s out) add the per-topic ``pulsar_rate_in`` and
    ``pulsar_rate_out`` a broker writes by default (``exposeTopicLevelMetricsInPrometheus``)."""
    labels = {"cluster": "standalone"} if labels is None else dict(labels)
    text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    lines = []
    for attr, name in sorted({**_REQUIRED, **_OPTIONAL}.items(), key=lambda kv: kv[1]):
        value = getattr(cache, attr)
        if value is None:
            continue
        lines += [f"# TYPE pulsar_{name} gauge", f"pulsar_{name}{{{text}}} {float(value)!r}"]
    rates = list(topic_rates)
    for i, name in ((2, "rate_in"), (3, "rate_out")):
        if rates:
            lines.append(f"# TYPE pulsar_{name} gauge")
        for r in rates:
            lines.append(f'pulsar_{name}{{{text},namespace="{_escape(r[1])}",topic="{_escape(r[0])}"}} {float(r[i])!r}')
    if version is not None:
        lines += ["# TYPE pulsar_version_info gauge", f'pulsar_version_info{{{text},version="{_escape(version)}"}} 1.0']
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def write_prometheus(
    cache: CacheMetrics,
    path: str | os.PathLike[str],
    labels: Mapping[str, str] | None = None,
    *,
    version: str | None = None,
    topic_rates: Iterable[tuple[str, str, float, float]] = (),
) -> None:
    """Writes :func:`to_prometheus`'s text to ``path``."""
    Path(path).write_text(to_prometheus(cache, labels, version=version, topic_rates=topic_rates))
