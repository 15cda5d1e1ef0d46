"""Your broker: the lab's prediction held against a broker's own cache metrics, then its advice.

:func:`calibrate` takes a broker's topic stats (:mod:`ledgercache.broker_stats`), its metrics
(:mod:`ledgercache.metrics`) and optionally its ``broker.conf``, and answers in this order:

1. **Do the files agree?** (:func:`cross_check`) The stats' topic count against the broker's
   managed ledgers (``pulsar_ml_count``), the stats' publish and dispatch rates against
   ``pulsar_rate_in`` / ``pulsar_rate_out``, and cache reads against dispatch. Files taken from
   different brokers or at different times give a confident prediction of the wrong broker: a
   mismatch is the first thing the report says.
2. **How good is the lab's model of this broker?** It turns the stats into a workload
   (:func:`ledgercache.broker_workload.from_broker_stats`), replays it with the broker's settings
   and design, and sets the predicted hit ratio and storage reads (entries a second read from
   BookKeeper: cache misses) beside the observed ones (``pulsar_ml_cache_hits_rate``,
   ``..._misses_rate``): the gap is the model's error on this broker (:class:`Fit`).
3. **What would help?** The same trace under each design over a sweep of cache sizes. Per design a
   broker can run (``lc.designs()`` with role ``"broker"``: PIP-430 and Pulsar 4.0's cache), the
   smallest cache within ``margin`` (0.01) of the best hit ratio it reaches, with the storage reads
   a second (and MB/s) it saves against now. A change whose effect on storage reads is smaller than
   the model's own error is *withheld*; one less than twice it is *qualified*. LRU is replayed at
   the broker's size as a reference (:data:`REFERENCES`; PIP-174's ring, LRU and Belady's MIN swept
   over the sizes with ``designs=``): no broker runs them. A sweep whose design still gains at its
   largest size is widened (up to :data:`MAX_WIDENINGS` doublings) and the report says so; a design
   whose hit ratio is the same at every size swept is said to be so.

Replays are what a calibration costs (each replays the whole workload), so the sweep replays only
configurations that could differ (:class:`_Sweep`): each design at its largest size first, then
only the sizes its cache filled enough to evict for size.

The current settings: ``broker.conf``'s (:meth:`ledgercache.CacheConfig.from_broker_conf`, which
keeps Pulsar's default for an empty value), with the dispatcher and ledger keys that shape the
traffic (:func:`ledgercache.workload.settings_from_broker_conf`). The cache size, when the file
leaves ``managedLedgerCacheSizeMB`` empty or has no such key (as Pulsar ships it), is the broker's
default, a fifth of its direct memory: taken from ``jvm_memory_direct_bytes_max`` in the metrics,
else from ``current_cache_size``, else an error saying which to give. The design follows the
broker's version (``pulsar_version_info``: before 4.1 a broker runs Pulsar 4.0's cache,
``legacy``; without a version, too), unless ``design`` says otherwise.

Producers batch as the broker's numbers say (:func:`batching_from`). Predictions are measured over
the generated run's test window (after the warm-up that builds the backlogs); the observed figures
are the broker's, averaged over its last stats interval.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import _native
from . import broker_stats as _stats
from . import broker_workload as _bw
from . import metrics as _metrics
from . import workload as _workload
from .calibrate_report import render
from .errors import InvalidArgumentError
from .report_common import design_label, format_size

__all__ = [
    "DESIGNS",
    "MAX_WIDENINGS",
    "REFERENCES",
    "UNFILLED_SHARE",
    "Calibration",
    "Fit",
    "Prediction",
    "batching_from",
    "calibrate",
    "cross_check",
    "default_sizes",
    "merge_notes",
]

#: Designs swept by default: those a broker can run (role "broker" in ``lc.designs()``).
DESIGNS = tuple(d["name"] for d in _native.designs() if d["role"] == "broker")
#: Designs replayed at the broker's cache size only, for reference (swept when named in designs=;
#: LRU and PIP-174's ring at large sizes hold every entry published, which costs memory).
REFERENCES = ("lru",)
MIB = 1 << 20
#: How many times a sweep is doubled past its largest size while a design still gains there.
MAX_WIDENINGS = 3
# The release that first runs PIP-430 (Pulsar 4.1).
_PIP430_SINCE = (4, 1)


@dataclass(frozen=True)
class Prediction:
    """The lab's figures for one configuration over the test window."""

    strategy: str
    cache_size_bytes: int
    hit_ratio: float | None
    reads_per_second: float
    storage_reads_per_second: float


@dataclass(frozen=True)
class Fit:
    """The lab's prediction for the broker as it runs, beside what the broker observed."""

    observed_hit_ratio: float | None
    predicted_hit_ratio: float | None
    observed_storage_reads: float
    predicted_storage_reads: float

    @property
    def storage_reads_gap(self) -> float:
        """Predicted minus observed storage reads a second: the model's error on this broker."""
        return self.predicted_storage_reads - self.observed_storage_reads

    @property
    def relative_gap(self) -> float | None:
        """The gap over the observed storage reads (None when the broker read none)."""
        return self.storage_reads_gap / self.observed_storage_reads if self.observed_storage_reads > 0 else None

    @property
    def quality(self) -> str:
        """``"close"`` (storage reads within 10% or 1 read/s, hit ratio within 0.02), ``"rough"``
        (within 30% and 0.05) or ``"poor"``."""
        gap = abs(self.storage_reads_gap)
        rel = abs(self.relative_gap) if self.relative_gap is not None else (0.0 if gap < 1 else math.inf)
        dh = (
            abs(self.predicted_hit_ratio - self.observed_hit_ratio)
            if self.predicted_hit_ratio is not None and self.observed_hit_ratio is not None
            else 0.0
        )
        if (rel <= 0.10 or gap < 1) and dh <= 0.02:
            return "close"
        if (rel <= 0.30 or gap < 1) and dh <= 0.05:
            return "rough"
        return "poor"


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` found; :meth:`text` and :meth:`markdown` render it
    (:mod:`ledgercache.calibrate_report`)."""

    spec: dict[str, Any]
    stats: _stats.BrokerStats
    generated: _stats.BrokerStats
    observed: _metrics.CacheMetrics
    current: Prediction
    sweep: tuple[Prediction, ...]
    recommendations: tuple[dict[str, Any], ...]
    margin: float
    window_seconds: float
    settings_source: str
    batching: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Where the stats and the metrics disagree, each in plain words (empty when they agree).
    mismatches: tuple[str, ...] = ()
    fit: Fit | None = None
    #: Designs no broker runs, at their best: dicts as in ``recommendations``, for reference.
    references: tuple[dict[str, Any], ...] = ()
    #: Bytes an entry holds on average (for MB/s), from the metrics or the stats.
    entry_bytes: float = 0.0
    #: How the current design and cache size were decided.
    design_source: str = ""
    size_source: str = ""
    #: The broker's version, when the metrics give it.
    version: str | None = None

    def comparison_rows(self) -> list[dict[str, Any]]:
        """The stats' rates and backlogs beside the generated trace's."""
        return _bw.side_by_side(self.stats, self.generated)

    def text(self, top: int = 10) -> str:
        return "\n".join(render(self, markdown=False, top=top))

    def markdown(self) -> str:
        return "\n".join(render(self, markdown=True, top=None))


def default_sizes(current: int) -> list[int]:
    """The sweep around the current size: an eighth of it to four times it, each twice the one
    before, in whole MiB (at least 1 MiB)."""
    return sorted({max(MIB, round(current * 2.0**k / MIB) * MIB) for k in range(-3, 3)})


def _design_for(version: tuple[int, ...] | None, text: str | None) -> tuple[str, str]:
    if version is None:
        # Brokers that print no version are older than 2.7 or give monitoring-metrics JSON; most
        # brokers in service run a release before 4.1.
        return "legacy", (
            "the Pulsar 4.0 cache assumed: the metrics do not give the broker's version "
            "(pulsar_version_info, printed since 2.7); pass --design pip430 for Pulsar 4.1 or later"
        )
    if version[:2] < _PIP430_SINCE:
        return "legacy", f"Pulsar {text} runs the Pulsar 4.0 cache (PIP-430 came in 4.1)"
    return "pip430", f"Pulsar {text} runs PIP-430"


def _current_config(
    lc: Any,
    conf: Mapping[str, str],
    conf_label: str | None,
    observed: _metrics.BrokerMetrics,
    current_cache_size: int | None,
) -> tuple[Any, str]:
    """The broker's cache settings and where its size came from."""

    key = "managedLedgerCacheSizeMB"
    written = (conf.get(key) or "").strip()
    direct = observed.direct_memory_max_bytes
    if written:
        source = f"{key}={written} ({conf_label})"
        direct = None
    elif current_cache_size is not None:
        source = "--current-cache-size"
        direct = None
    elif direct is not None:
        source = (
            f"{key} {'empty' if key in conf else 'not set'}: a fifth of the broker's direct memory "
            f"({direct / (1 << 30):.2f} GiB, jvm_memory_direct_bytes_max)"
        )
    else:
        fix = "pass --current-cache-size (current_cache_size= from Python; e.g. 1GiB: -XX:MaxDirectMemorySize / 5)"
        if conf_label is None:
            raise InvalidArgumentError(
                f"the broker's cache size is unknown: no broker.conf was given, and the metrics do not give the "
                f"direct memory a broker takes its default from (no jvm_memory_direct_bytes_max): pass --broker-conf, "
                f"or {fix}"
            )
        where = f"{conf_label} leaves {key} empty" if key in conf else f"{conf_label} does not set {key}"
        raise InvalidArgumentError(
            f"{where}, so the broker caches a fifth of its JVM's direct memory, and the metrics do not say how "
            f"much that is (no jvm_memory_direct_bytes_max): {fix}, or set {key} in the broker.conf"
        )
    with warnings.catch_warnings():
        # The one warning this would raise (an empty cache size) is answered above.
        warnings.simplefilter("ignore", lc.BrokerConfWarning)
        config = lc.CacheConfig.from_broker_conf(dict(conf), direct_memory_bytes=direct)
    if current_cache_size is not None and not written:
        config = config.replace(cache_size_bytes=current_cache_size)
    return config, source


def calibrate(
    stats: Any,
    metrics: Any,
    *,
    broker_conf: Any = None,
    design: str | None = None,
    designs: Iterable[str] = DESIGNS,
    references: Iterable[str] = REFERENCES,
    sizes: Iterable[int] | None = None,
    margin: float = 0.01,
    seed: int = 1,
    test_duration_minutes: float = 2.0,
    max_backlog_minutes: float = 10.0,
    labels: Mapping[str, str] | None = None,
    current_cache_size: int | None = None,
    widen: bool = True,
) -> Calibration:
    """Replays the broker's workload under its settings and a sweep (the module docstring says how).

    ``stats``: a stats dump (path, mapping or ``BrokerStats``); ``metrics``: a Prometheus text or
    monitoring-metrics JSON file (:func:`ledgercache.metrics.read`), or ``BrokerMetrics``
    (``labels`` picks one series where it has several); ``broker_conf``: a path or mapping;
    ``design``: the strategy the broker runs (default: from its version); ``sizes``: the sweep's
    cache sizes (default :func:`default_sizes` of the current size); ``current_cache_size``: the
    broker's cache in bytes where its ``broker.conf`` leaves it to the direct memory and the
    metrics do not give that; ``widen``: widen a sweep whose answer sits on its edge.
    """
    import ledgercache as lc  # noqa: PLC0415 -- the package (lc.replay, lc.designs): its __init__ imports this module

    if not (
        isinstance(margin, (int, float)) and not isinstance(margin, bool) and math.isfinite(margin) and 0 <= margin < 1
    ):
        raise InvalidArgumentError(f"invalid margin: expected a hit-ratio margin in [0, 1), got {margin!r}")
    stats = stats if isinstance(stats, _stats.BrokerStats) else _stats.read(stats)
    stats_label = stats.source
    observed = metrics if isinstance(metrics, _metrics.BrokerMetrics) else _metrics.read(metrics, labels=labels)
    conf: dict[str, str] = {}
    conf_label: str | None = None
    if broker_conf is not None:
        # Read once: the cache's settings and the traffic's come from the same lines.
        conf = dict(
            lc._native.read_broker_conf(broker_conf if isinstance(broker_conf, Mapping) else os.fspath(broker_conf))
        )
        conf_label = "the broker.conf" if isinstance(broker_conf, Mapping) else os.fspath(broker_conf)
    config, size_source = _current_config(lc, conf, conf_label, observed, current_cache_size)
    if design is not None:
        design_source = "as given (--design)"
    else:
        design, design_source = _design_for(observed.version_numbers, observed.version)
    config = config.replace(strategy=design)
    designs = list(dict.fromkeys(designs))
    given_sizes = sizes is not None
    sizes = sorted(set(sizes)) if sizes is not None else default_sizes(config.cache_size_bytes)
    if not designs or not sizes:
        raise InvalidArgumentError("invalid sweep: name at least one design and one cache size")
    batching = batching_from(stats, observed.cache)
    traffic = _workload.settings_from_broker_conf(conf)
    try:
        spec, notes = _bw.workload_and_notes(
            stats,
            test_duration_minutes=test_duration_minutes,
            max_backlog_minutes=max_backlog_minutes,
            settings={**batching, **traffic},
        )
    except InvalidArgumentError as e:
        if stats_label is None:
            raise
        raise InvalidArgumentError(f"{stats_label}: {e}") from None
    window = _bw.window_seconds(spec)
    seconds = window[1] - window[0]
    # The memory model only adds peak retained bytes, which calibration does not report.
    config = config.replace(memory_model=False)

    # The first replay also summarizes the trace it reads (on the thread that takes its batches),
    # rather than generating it once more for the summary.
    summary = _bw.Summary(since_us=window[0] * 1_000_000, until_us=window[1] * 1_000_000)

    def run_group(configs: list[Any], trace: Any) -> list[tuple[Prediction, int]]:
        result, series = lc.replay(trace, configs, with_timeseries=True)
        peaks = result.column("peak_cache_bytes").to_pylist()
        out = []
        for i, c in enumerate(configs):
            reads, hits = _bw.window_counts(series, window, i)
            out.append(
                (
                    Prediction(
                        c.strategy,
                        c.cache_size_bytes,
                        hits / reads if reads else None,
                        reads / seconds,
                        (reads - hits) / seconds,
                    ),
                    peaks[i],
                )
            )
        return out

    def run(configs: list[Any], trace: Any = None) -> list[tuple[Prediction, int]]:
        """Each configuration's prediction and the peak bytes its cache held. ``trace`` (read by
        the first group) or the workload's own stream."""
        fresh = lambda: _workload.stream(spec, seed)
        # The group reading ``trace`` also summarizes it (in Python): it takes one configuration.
        first = 1 if trace is not None else _CONFIGS_A_PASS
        groups = [configs[:first]] + [
            configs[i : i + _CONFIGS_A_PASS] for i in range(first, len(configs), _CONFIGS_A_PASS)
        ]
        traces = [trace or fresh] + [fresh] * (len(groups) - 1)
        workers = min(len(groups), os.cpu_count() or 1)
        if workers <= 1:
            results = [run_group(g, t) for g, t in zip(groups, traces, strict=True)]
        else:
            with ThreadPoolExecutor(workers) as pool:  # replays run in Rust, without the GIL
                results = list(pool.map(run_group, groups, traces))
        return [r for group in results for r in group]

    sweeper = _Sweep(config, run)
    # The broker's own configuration is the sweep's design at its size, in the same passes.
    first = _bw.tee(lambda: _workload.stream(spec, seed), summary)
    refs = [(r, config.cache_size_bytes) for r in dict.fromkeys(references) if r not in designs]
    current, *runs = sweeper.predict(
        [(design, config.cache_size_bytes)] + refs + [(d, s) for d in designs for s in sizes], first
    )
    reference_runs, sweep = runs[: len(refs)], runs[len(refs) :]
    widened: list[str] = []
    for _ in range(MAX_WIDENINGS if widen else 0):
        extra = _widening(sweep, margin)
        if not extra:
            break
        sweep += sweeper.predict(extra)
        widened += [f"{d} at {s >> 20} MiB" for d, s in extra]
    if widened:
        notes.append(
            f"the sweep was widened where a design still gained at its largest size ({len(widened)} runs "
            f"added: {', '.join(widened[:4])}{', ...' if len(widened) > 4 else ''})"
            + (" beyond the sizes given" if given_sizes else "")
        )
    notes += _flat_notes(sweep, margin)
    fit = Fit(observed.cache.hit_ratio, current.hit_ratio, observed.cache.misses_rate, current.storage_reads_per_second)
    entry_bytes = _entry_bytes(stats, observed.cache)
    roles = {d["name"]: d["role"] for d in lc.designs()}
    picks = _picks(current, sweep, margin, entry_bytes)
    recommendations = tuple(_qualified(p, fit, current) for p in picks if roles.get(p["strategy"]) == "broker")
    reference_picks = tuple(
        p for p in picks + _picks(current, reference_runs, margin, entry_bytes) if roles.get(p["strategy"]) != "broker"
    )
    generated = summary.stats(_bw.subscriptions_of(spec))
    return Calibration(
        spec=spec,
        stats=stats,
        generated=generated,
        observed=observed.cache,
        current=current,
        sweep=tuple(sweep),
        recommendations=recommendations,
        margin=margin,
        window_seconds=float(seconds),
        settings_source=conf_label or "the lab's defaults (no broker.conf)",
        batching=_batching_text(batching),
        notes=tuple(merge_notes(list(stats.notes) + list(observed.notes) + notes)),
        mismatches=tuple(cross_check(stats, observed)),
        fit=fit,
        references=reference_picks,
        entry_bytes=entry_bytes,
        design_source=design_source,
        size_source=size_source,
        version=observed.version,
    )


#: Configurations one replay pass takes: more, and their states crowd each other out of the CPU's
#: caches as each batch goes through all of them (4 in one pass took 2x as long each as 2 at
#: 1,000 topics); the passes run on threads of their own, a core each.
_CONFIGS_A_PASS = 2

#: A run whose cache never held more than this share of its size evicted nothing for size: every
#: design evicts for size only past its trigger (PIP-430 and Pulsar 4.0 at 0.98 of the size, LRU
#: and Belady when full, PIP-174's ring when it wraps, a segment before the end), so the same
#: design at any size this share covers replays the same, and is not replayed again.
UNFILLED_SHARE = 0.5


class _Sweep:
    """Predictions for (design, size) pairs, replaying only what could differ: first each design
    at its largest size asked for, then only the smaller sizes its cache filled enough to evict
    for size (:data:`UNFILLED_SHARE`); the others take the largest size's figures. A sweep over a
    broker whose cache holds a second of traffic replays each design once, not once a size."""

    def __init__(self, config: Any, run: Any) -> None:
        self._config, self._run = config, run
        # design -> (the peak bytes of a run that evicted nothing for size, its prediction)
        self._unfilled: dict[str, tuple[int, Prediction]] = {}

    def _known(self, design: str, size: int) -> Prediction | None:
        seen = self._unfilled.get(design)
        if seen is None or seen[0] > UNFILLED_SHARE * size:
            return None
        p = seen[1]
        return Prediction(design, size, p.hit_ratio, p.reads_per_second, p.storage_reads_per_second)

    def _replay(self, pairs: list[tuple[str, int]], trace: Any = None) -> dict[tuple[str, int], Prediction]:
        configs = [self._config.replace(strategy=d, cache_size_bytes=s) for d, s in pairs]
        results = self._run(configs) if trace is None else self._run(configs, trace)
        out = {}
        for (d, s), (p, peak) in zip(pairs, results, strict=True):
            if peak <= UNFILLED_SHARE * s and (d not in self._unfilled or peak < self._unfilled[d][0]):
                self._unfilled[d] = (peak, p)
            out[d, s] = p
        return out

    def predict(self, pairs: list[tuple[str, int]], trace: Any = None) -> list[Prediction]:
        """Each pair's prediction, in order; ``trace`` (the first pass's, which must be read) or a
        fresh stream of the workload."""
        done: dict[tuple[str, int], Prediction] = {}
        todo = []
        for pair in dict.fromkeys(pairs):
            known = self._known(*pair)
            if known is None:
                todo.append(pair)
            else:
                done[pair] = known
        tops: dict[str, int] = {}
        for d, s in todo:
            tops[d] = max(s, tops.get(d, 0))
        if tops:  # never empty on the first call, which reads ``trace``: nothing is known yet
            done.update(self._replay(sorted(tops.items()), trace))
        rest = []
        for pair in todo:
            known = None if pair in done else self._known(*pair)
            if known is not None:
                done[pair] = known
            elif pair not in done:
                rest.append(pair)
        if rest:
            done.update(self._replay(rest))
        return [done[pair] for pair in pairs]


def _entry_bytes(stats: _stats.BrokerStats, cache: _metrics.CacheMetrics) -> float:
    """Bytes an entry read from the cache holds: the cache's own throughput over its rate, else the
    stats' dispatched bytes over the entries the cache serves."""
    reads = cache.hits_rate + cache.misses_rate
    if reads > 0 and cache.hits_throughput + cache.misses_throughput > 0:
        return (cache.hits_throughput + cache.misses_throughput) / reads
    out = sum(t.msg_throughput_out for t in stats.topics)
    return out / reads if reads > 0 else 0.0


def _widening(sweep: list[Prediction], margin: float) -> list[tuple[str, int]]:
    """The runs that widen the sweep where a design's answer sits on its top edge: twice the
    largest size while the hit ratio still gains more than ``margin`` from the size before. (At
    the bottom edge a design's hit ratio is within ``margin`` of its best at every size swept:
    :func:`_flat_notes` says so rather than replaying smaller caches.)"""
    extra = []
    for strategy, runs in _by_design(sweep).items():
        if len(runs) < 2:
            continue
        best = max(p.hit_ratio for p in runs)  # type: ignore[type-var]
        top, below = runs[-1], runs[-2]
        if top.hit_ratio >= best - 1e-12 and top.hit_ratio - below.hit_ratio > margin:  # type: ignore[operator]
            extra.append((strategy, top.cache_size_bytes * 2))
    return extra


def _by_design(sweep: Iterable[Prediction]) -> dict[str, list[Prediction]]:
    """Each design's runs with a hit ratio, by size."""
    by_design: dict[str, list[Prediction]] = {}
    for p in sweep:
        if p.hit_ratio is not None:
            by_design.setdefault(p.strategy, []).append(p)
    return {d: sorted(runs, key=lambda p: p.cache_size_bytes) for d, runs in by_design.items()}


def _flat_notes(sweep: Iterable[Prediction], margin: float) -> list[str]:
    """A note for the designs whose hit ratio is within ``margin`` at every size swept."""

    def spread(runs: list[Prediction]) -> float:
        ratios = [p.hit_ratio for p in runs if p.hit_ratio is not None]
        return max(ratios) - min(ratios)

    flat = {d: runs for d, runs in _by_design(sweep).items() if len(runs) > 1 and spread(runs) <= margin}
    if not flat:
        return []
    runs = next(iter(flat.values()))
    return [
        f"{', '.join(design_label(d) for d in flat)}: the same hit ratio (within {margin:g}) at every size from "
        f"{format_size(runs[0].cache_size_bytes)} to {format_size(runs[-1].cache_size_bytes)}: here the cache size "
        f"does not change the storage reads (those come from reads behind what any of these caches holds); "
        f"smaller sizes were not replayed"
    ]


def _picks(current: Prediction, sweep: Iterable[Prediction], margin: float, entry_bytes: float) -> list[dict[str, Any]]:
    by_design: dict[str, list[Prediction]] = {}
    for p in sweep:
        by_design.setdefault(p.strategy, []).append(p)
    out = []
    for strategy, runs in by_design.items():
        ratios = [p.hit_ratio for p in runs if p.hit_ratio is not None]
        if not ratios:
            continue
        best = max(ratios)
        pick = min(
            (p for p in runs if p.hit_ratio is not None and p.hit_ratio >= best - margin),
            key=lambda p: p.cache_size_bytes,
        )
        saved = current.storage_reads_per_second - pick.storage_reads_per_second
        out.append(
            {
                "strategy": strategy,
                "cache_size_bytes": pick.cache_size_bytes,
                "hit_ratio": pick.hit_ratio,
                "best_hit_ratio": best,
                "storage_reads_per_second": pick.storage_reads_per_second,
                "storage_reads_saved_per_second": saved,
                "storage_mb_saved_per_second": saved * entry_bytes / 1e6,
            }
        )
    return out


def _qualified(pick: dict[str, Any], fit: Fit, current: Prediction) -> dict[str, Any]:
    """A broker design's pick with its verdict against the model's error on this broker:
    ``unchanged`` (the current design and size), ``withheld`` (the change it makes to storage reads
    is no larger than the gap between the lab and the broker, or it shrinks the cache on a fit that
    is not close), ``qualified`` (less than twice the gap, or a poor fit), ``recommended``."""
    saved = pick["storage_reads_saved_per_second"]
    error = abs(fit.storage_reads_gap)
    off = f"the lab misses this broker's storage reads by {error:,.1f}/s"
    if pick["strategy"] == current.strategy and pick["cache_size_bytes"] == current.cache_size_bytes:
        verdict, why = "unchanged", "what the broker runs"
    elif pick["cache_size_bytes"] < current.cache_size_bytes and saved >= -max(1.0, error):
        # Memory saved at about the same storage reads: a model that misses the broker's own hit
        # ratio by more than a close fit cannot tell whether a smaller cache loses that much.
        if fit.quality == "close":
            verdict, why = "recommended", "the same storage reads with less memory, on a close fit"
        else:
            verdict, why = (
                "withheld",
                (f"a smaller cache needs a close fit to trust, and this one is {fit.quality} ({off})"),
            )
    elif abs(saved) <= error:
        verdict, why = "withheld", f"the change ({abs(saved):,.1f} storage reads/s) is within the lab's error ({off})"
    elif abs(saved) < 2 * error or fit.quality == "poor":
        verdict, why = (
            "qualified",
            (
                f"worth trying: the change ({abs(saved):,.1f} storage reads/s) is larger than the "
                f"lab's error, but {'less than twice it' if abs(saved) < 2 * error else 'the fit is poor'}"
            ),
        )
    else:
        verdict, why = "recommended", f"the change is more than twice the lab's error ({off})"
    return {**pick, "verdict": verdict, "why": why, "model_error_per_second": error}


def cross_check(stats: _stats.BrokerStats, metrics: _metrics.BrokerMetrics) -> list[str]:
    """Where the stats and the metrics disagree, in plain words: they should come from one broker
    at one time, or the prediction is of another broker than the one observed."""
    out = []
    topics = len(stats.topics)
    ledgers = metrics.cache.managed_ledgers if metrics.cache.managed_ledgers is not None else metrics.topics
    label = "managed ledgers (pulsar_ml_count)" if metrics.cache.managed_ledgers is not None else "topics in its series"
    if ledgers is not None and not _close(topics, ledgers, rel=0.10, absolute=1):
        out.append(
            f"the stats hold {_stats._counted(topics, 'persistent topic')}, the metrics' broker has {ledgers:,.0f} {label}: "
            f"{'the stats cover part of the broker' if topics < ledgers else 'the stats cover more than this broker'}"
            f" (take both from the same broker: `pulsar-admin broker-stats topics` and its /metrics)"
        )
    for what, mine, theirs, series in (
        ("publish", sum(t.msg_rate_in for t in stats.topics), metrics.rate_in, "pulsar_rate_in"),
        ("dispatch", sum(t.msg_rate_out for t in stats.topics), metrics.rate_out, "pulsar_rate_out"),
    ):
        if theirs is not None and not _close(mine, theirs, rel=0.25, absolute=1.0):
            out.append(
                f"the stats {what} {mine:,.1f} msg/s, the metrics {theirs:,.1f} msg/s ({series}): "
                f"taken at different times or from different brokers?"
            )
    dispatched = sum(t.msg_rate_out for t in stats.topics)
    reads = metrics.cache.hits_rate + metrics.cache.misses_rate
    if dispatched > 1 and reads == 0:
        out.append(
            f"the stats dispatch {dispatched:,.1f} msg/s but the broker's cache served no reads "
            f"(pulsar_ml_cache_hits_rate + misses_rate = 0): these metrics are not of this broker at this time"
        )
    elif dispatched == 0 and reads > 1:
        out.append(
            f"the broker's cache serves {reads:,.1f} entries/s but the stats dispatch nothing: "
            f"the stats are not of this broker at this time"
        )
    return out


def _close(a: float, b: float, *, rel: float, absolute: float) -> bool:
    return abs(a - b) <= max(absolute, rel * max(abs(a), abs(b)))


_NOTE_SUBJECT = re.compile(r"^((?:non-)?persistent://\S+(?: \S+)?): (.+)$", re.S)


def merge_notes(notes: Iterable[str]) -> list[str]:
    """Notes about many topics or subscriptions that say the same thing, as one line with the count
    and the first example; others as they are, in order."""
    merged: dict[str, list[Any]] = {}
    order: list[str] = []
    for note in notes:
        m = _NOTE_SUBJECT.match(note)
        key, subject = (m.group(2), m.group(1)) if m else (note, None)
        if key not in merged:
            merged[key] = [0, subject]
            order.append(key)
        merged[key][0] += 1
    out = []
    for key in order:
        count, subject = merged[key]
        if subject is None:
            out.append(key if count == 1 else f"{key} (x{count})")
        elif count == 1:
            out.append(f"{subject}: {key}")
        else:
            kind = "subscriptions" if " " in subject else "topics"
            out.append(f"{count} {kind}: {key} (e.g. {subject})")
    return out


def batching_from(stats: _stats.BrokerStats, cache: _metrics.CacheMetrics) -> dict[str, Any]:
    """Producer batching that gives the broker's messages an entry: the messages its subscriptions
    dispatch a second over the entries its cache serves a second (hits plus misses: the cache
    counts entries). Batches then close at that many messages (or after a second); about one
    message an entry turns batching off. No dispatch or no cache reads: the client's defaults."""
    messages = sum(t.msg_rate_out for t in stats.topics)
    entries = cache.hits_rate + cache.misses_rate
    if messages <= 0 or entries <= 0:
        return {}
    per_entry = messages / entries
    if per_entry < 1.5:
        return {"batchingEnabled": False}
    return {"batchingEnabled": True, "batchingMaxMessages": round(per_entry), "batchingMaxPublishDelayMs": 1000}


def _batching_text(batching: Mapping[str, Any]) -> str:
    """How :func:`batching_from`'s settings read in the report."""
    if not batching:
        return "the Pulsar client's defaults (no dispatch or cache reads to calibrate them)"
    if batching.get("batchingEnabled") is False:
        return "one message an entry (dispatched messages over cache reads)"
    return (
        f"{batching['batchingMaxMessages']} messages an entry (dispatched messages over cache reads; at most "
        f"{batching.get('batchingMaxBytes', 131072):,} bytes a batch, the client's batchingMaxBytes)"
    )
