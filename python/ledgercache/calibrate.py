"""Your broker: the lab's prediction held against a broker's own cache metrics, then its advice.

:func:`calibrate` takes a broker's topic stats (:mod:`ledgercache.broker_stats`), its cache metrics
(:mod:`ledgercache.metrics`) and optionally its ``broker.conf``. It turns the stats into a workload
(:func:`ledgercache.broker_workload.from_broker_stats`), replays it with the broker's current cache
settings and compares the lab's predicted hit ratio and storage read rate (entries a second read
from BookKeeper: cache misses) with what the broker observed (``pulsar_ml_cache_hits_rate`` and
``pulsar_ml_cache_misses_rate``). Then it replays the same trace under each design over a sweep of
cache sizes and recommends, per design, the smallest cache whose hit ratio is within ``margin``
(0.01) of the best that design reaches in the sweep, with the storage reads a second it saves
against the current settings.

Producers batch as the broker's numbers say (:func:`batching_from`: messages dispatched over
entries read from the cache), so the lab reads as many entries as the broker does.

The current settings are ``broker.conf``'s (:meth:`ledgercache.CacheConfig.from_broker_conf`), and
so are the dispatcher and ledger settings the simulated traffic takes
(:func:`ledgercache.workload.settings_from_broker_conf`: ``dispatcherMaxReadBatchSize``,
``managedLedgerMaxEntriesPerLedger``, ...);
without one, the lab's defaults (a 1 GiB cache: pass the broker's ``broker.conf``, as
``managedLedgerCacheSizeMB`` defaults to a fifth of the broker's direct memory, which only the
broker knows). The design is ``design`` (``pip430``, as on Pulsar's master; ``legacy`` for a 4.0
broker). Predictions are measured over the generated run's test window (after the warm-up that
builds the backlogs); the observed figures are the broker's, averaged over its last stats interval.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


from . import broker_stats as _stats
from . import broker_workload as _bw
from . import metrics as _metrics
from . import workload as _workload
from .errors import InvalidArgumentError
from .report import _size

__all__ = ["DESIGNS", "Calibration", "Prediction", "batching_from", "calibrate", "default_sizes"]

# Designs swept by default: every strategy a broker could run, and the lab's reference LRU.
# (belady needs the trace twice; ask for it with designs=.)
DESIGNS = ("pip430", "pip430-fifo", "legacy", "segmented", "lru")
MIB = 1 << 20


@dataclass(frozen=True)
class Prediction:
    """The lab's figures for one configuration over the test window."""

    strategy: str
    cache_size_bytes: int
    hit_ratio: float | None
    reads_per_second: float
    storage_reads_per_second: float


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` found; :meth:`text` and :meth:`markdown` render it."""

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

    def comparison_rows(self) -> list[dict[str, Any]]:
        """The stats' rates and backlogs beside the generated trace's."""
        return _bw.side_by_side(self.stats, self.generated)

    def text(self) -> str:
        return "\n".join(_render(self, markdown=False))

    def markdown(self) -> str:
        return "\n".join(_render(self, markdown=True))


def default_sizes(current: int) -> list[int]:
    """The sweep around the current size: an eighth of it to four times it, each twice the one before."""
    return [max(MIB, current // 8 << k) for k in range(6)]


def calibrate(stats: Any, metrics: Any, *, broker_conf: Any = None, design: str | None = None,
              designs: Iterable[str] = DESIGNS, sizes: Iterable[int] | None = None, margin: float = 0.01,
              seed: int = 1, test_duration_minutes: float = 2.0, max_backlog_minutes: float = 10.0,
              labels: Mapping[str, str] | None = None) -> Calibration:
    """Replays the broker's workload under its settings and a sweep (the module docstring says how).

    ``stats``: a stats dump (path, mapping or ``BrokerStats``); ``metrics``: a Prometheus text or
    monitoring-metrics JSON file (:func:`ledgercache.metrics.read`), or ``BrokerMetrics`` (``labels`` picks one series where it has several); ``broker_conf``: a
    path or mapping; ``design``: the strategy the broker runs (default: the settings'); ``sizes``:
    the sweep's cache sizes (default :func:`default_sizes` of the current size).
    """
    import ledgercache as lc

    if not (isinstance(margin, (int, float)) and not isinstance(margin, bool) and math.isfinite(margin)
            and 0 <= margin < 1):
        raise InvalidArgumentError(f"invalid margin: expected a hit-ratio margin in [0, 1), got {margin!r}")
    stats = stats if isinstance(stats, _stats.BrokerStats) else _stats.read(stats)
    observed = metrics if isinstance(metrics, _metrics.BrokerMetrics) else _metrics.read(metrics, labels=labels)
    conf: dict[str, str] = {}
    if broker_conf is not None:
        # Read once: the cache's settings and the traffic's come from the same lines.
        conf = dict(lc._native.read_broker_conf(broker_conf if isinstance(broker_conf, Mapping) else os.fspath(broker_conf)))
        config = lc.CacheConfig.from_broker_conf(conf)
        source = "broker.conf"
    else:
        config = lc.CacheConfig()
        source = "the lab's defaults (no broker.conf given)"
    if design is not None:
        config = config.replace(strategy=design)
    designs = list(dict.fromkeys(designs))
    sizes = sorted(set(sizes)) if sizes is not None else default_sizes(config.cache_size_bytes)
    if not designs or not sizes:
        raise InvalidArgumentError("invalid sweep: name at least one design and one cache size")
    batching = batching_from(stats, observed.cache)
    # The broker's dispatcher and ledger settings shape its traffic as much as its cache's.
    traffic = _workload.settings_from_broker_conf(conf)
    spec, notes = _bw.workload_and_notes(stats, test_duration_minutes=test_duration_minutes,
                                         max_backlog_minutes=max_backlog_minutes, settings={**batching, **traffic})
    window = _bw.window_seconds(spec)
    # The memory model only adds peak retained bytes, which calibration does not report.
    config = config.replace(memory_model=False)
    configs = [config] + [config.replace(strategy=d, cache_size_bytes=s) for d in designs for s in sizes]
    summary, series = lc.replay(lambda: _workload.stream(spec, seed), configs, with_timeseries=True)
    seconds = window[1] - window[0]
    predictions = []
    for i, c in enumerate(configs):
        reads, hits = _bw.window_counts(series, window, i)
        predictions.append(Prediction(c.strategy, c.cache_size_bytes, hits / reads if reads else None,
                                      reads / seconds, (reads - hits) / seconds))
    current, sweep = predictions[0], tuple(predictions[1:])
    generated = _bw.summarize(lambda: _workload.stream(spec, seed), since_us=window[0] * 1_000_000,
                              until_us=window[1] * 1_000_000, subscription=_bw.subscriptions_of(spec))
    return Calibration(spec=spec, stats=stats, generated=generated, observed=observed.cache, current=current,
                       sweep=sweep, recommendations=tuple(_recommend(current, sweep, margin)), margin=margin,
                       window_seconds=float(seconds), settings_source=source, batching=_batching_text(batching),
                       notes=tuple(notes))


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


def _recommend(current: Prediction, sweep: Iterable[Prediction], margin: float) -> list[dict[str, Any]]:
    by_design: dict[str, list[Prediction]] = {}
    for p in sweep:
        by_design.setdefault(p.strategy, []).append(p)
    out = []
    for strategy, runs in by_design.items():
        ratios = [p.hit_ratio for p in runs if p.hit_ratio is not None]
        if not ratios:
            continue
        best = max(ratios)
        pick = min((p for p in runs if p.hit_ratio is not None and p.hit_ratio >= best - margin),
                   key=lambda p: p.cache_size_bytes)
        out.append({"strategy": strategy, "cache_size_bytes": pick.cache_size_bytes, "hit_ratio": pick.hit_ratio,
                    "best_hit_ratio": best, "storage_reads_per_second": pick.storage_reads_per_second,
                    "storage_reads_saved_per_second": current.storage_reads_per_second - pick.storage_reads_per_second})
    return out


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v + 0.0:,.1f}".replace("-0.0", "0.0")


def _table(markdown: bool, header: list[str], rows: list[list[str]]) -> list[str]:
    if markdown:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    fmt = lambda r: "  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths)))
    return [fmt(header)] + [fmt(r) for r in rows]


def _batching_text(batching: Mapping[str, Any]) -> str:
    """How :func:`batching_from`'s settings read in the report."""
    if not batching:
        return "the Pulsar client's defaults (no dispatch or cache reads to calibrate them)"
    if batching.get("batchingEnabled") is False:
        return "one message an entry (dispatched messages over cache reads)"
    return (f"{batching['batchingMaxMessages']} messages an entry (dispatched messages over cache reads; at most "
            f"{batching.get('batchingMaxBytes', 131072):,} bytes a batch, the client's batchingMaxBytes)")


def _render(c: Calibration, markdown: bool) -> list[str]:
    h = (lambda s: f"## {s}") if markdown else (lambda s: s + ":")
    subs = sum(len(t.subscriptions) for t in c.stats.topics)
    warmup = c.spec.get("warmupDurationMinutes", 0.0)
    lines = [h("Your broker"), "",
             f"{len(c.stats.topics)} topics, {subs} subscriptions; simulated {c.window_seconds:.0f} s of test after "
             f"{warmup * 60:.0f} s of warm-up that builds the backlogs. Settings: {c.settings_source}; design "
             f"{c.current.strategy} at {_size(c.current.cache_size_bytes)}. Producer batching: "
             f"{c.batching}.", ""]
    lines += _table(markdown, ["", "observed (broker)", "predicted (lab)"], [
        ["cache hit ratio", _ratio(c.observed.hit_ratio), _ratio(c.current.hit_ratio)],
        ["storage reads (entries/s)", _rate(c.observed.misses_rate), _rate(c.current.storage_reads_per_second)],
        ["cache reads (entries/s)", _rate(c.observed.hits_rate + c.observed.misses_rate), _rate(c.current.reads_per_second)],
    ])
    lines += ["", h(f"Per design and cache size: hit ratio (storage reads/s)"), ""]
    designs = list(dict.fromkeys(p.strategy for p in c.sweep))
    sizes = sorted({p.cache_size_bytes for p in c.sweep})
    cell = {(p.strategy, p.cache_size_bytes): p for p in c.sweep}
    lines += _table(markdown, ["cache size"] + designs, [
        [_size(s)] + [f"{_ratio(cell[d, s].hit_ratio)} ({_rate(cell[d, s].storage_reads_per_second)})" for d in designs]
        for s in sizes])
    lines += ["", h(f"Recommendation: per design, the smallest cache within {c.margin:g} of its best hit ratio"), ""]
    lines += _table(markdown, ["design", "cache size", "hit ratio", "storage reads/s", "saved vs now (reads/s)"], [
        [r["strategy"], _size(r["cache_size_bytes"]), _ratio(r["hit_ratio"]), _rate(r["storage_reads_per_second"]),
         _rate(r["storage_reads_saved_per_second"])] for r in c.recommendations])
    lines += ["", h("The broker's stats beside the generated workload (messages/s; backlogs in entries, as Pulsar counts them)"), ""]
    lines += _table(markdown, ["topic", "subscription", "stats rate", "generated", "stats backlog", "generated"], [
        [r["topic"], r["subscription"] or "(publish)", _rate(r["stats_rate"]), _rate(r["generated_rate"]),
         "" if r["stats_backlog"] is None else f"{r['stats_backlog']:,}",
         "" if r["generated_backlog"] is None else f"{r['generated_backlog']:,}"]
        for r in c.comparison_rows()])
    if c.notes:
        lines += [""] + [f"- {n}" if markdown else f"note: {n}" for n in c.notes]
    return lines
