"""``replay()``: traces through cache designs, in Rust, one broker at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from . import trace as _trace
from ._native import CacheConfig, ReplaySession, RequestRecorder
from .errors import UnsupportedError

__all__ = ["replay", "export_requests", "SUMMARY_COLUMNS"]

SUMMARY_COLUMNS = (
    "broker",
    "strategy",
    "cache_size_bytes",
    "events",
    "entries_read",
    "read_bytes",
    "hits",
    "misses",
    "hit_ratio",
    "storage_read_ops",
    "storage_read_bytes",
    "published_entries",
    "published_bytes",
    "evicted_entries",
    "requeues",
    "peak_cache_bytes",
    "peak_retained_bytes",
    "out_of_order_deliveries",
    "discarded_reads",
    "replay_seconds",
)


SUMMARY_SCHEMA = pa.schema(
    [(c, pa.string()) if c in ("broker", "strategy") else (c, pa.float64()) if c in ("hit_ratio", "replay_seconds") else (c, pa.int64())
     for c in SUMMARY_COLUMNS]
    + [("config", pa.string())]
)
SERIES_SCHEMA = pa.schema(
    [("broker", pa.string()), ("strategy", pa.string()), ("cache_size_bytes", pa.int64()), ("config_index", pa.int64()),
     ("second", pa.int64()), ("cache_bytes", pa.int64()), ("reads", pa.int64()), ("hits", pa.int64()),
     ("hit_ratio", pa.float64())]
)


def _feed(sessions: dict[str, ReplaySession], batches: Iterable[pa.RecordBatch], configs, second_pass: bool) -> None:
    offset = 0
    for batch in batches:
        brokers = batch.column("broker").unique().drop_null().to_pylist()
        if len(brokers) > 1 or len(sessions) > 1 or (sessions and brokers and brokers[0] not in sessions):
            # Split by broker, keeping each row's number in the whole trace for error messages.
            rows = pa.array(range(offset, offset + batch.num_rows), pa.int64())
            batch = batch.append_column("__row", rows)
        offset += batch.num_rows
        for broker in brokers:
            part = batch if len(brokers) == 1 else batch.filter(pc.equal(batch.column("broker"), broker))
            if second_pass:
                if broker in sessions:
                    sessions[broker].feed(part)
            else:
                session = sessions.get(broker)
                if session is None:
                    session = sessions[broker] = ReplaySession(configs)
                session.feed(part)


def run_sessions(batches: Callable[[], Iterable[pa.RecordBatch]], configs: list[CacheConfig]) -> dict[str, ReplaySession]:
    """Replays conformed batches (``batches()`` is called again for Belady's second pass)."""
    sessions: dict[str, ReplaySession] = {}
    _feed(sessions, batches(), configs, second_pass=False)
    if any(s.needs_second_pass() for s in sessions.values()):
        for s in sessions.values():
            s.start_second_pass()
        _feed(sessions, batches(), configs, second_pass=True)
    return sessions


def tables(sessions: dict[str, ReplaySession]) -> tuple[pa.Table, pa.Table]:
    """The summary (one row per broker and configuration) and the per-second series."""
    summary: dict[str, list] = {c: [] for c in SUMMARY_SCHEMA.names}
    series: dict[str, list] = {c: [] for c in SERIES_SCHEMA.names}
    for broker in sorted(sessions):
        for index, result in enumerate(sessions[broker].finish()):
            for c in SUMMARY_COLUMNS:
                summary[c].append(result[c])
            summary["config"].append(json.dumps(result["config"].to_dict(), sort_keys=True))
            for second, cache_bytes, reads, hits in result["per_second"]:
                for k, v in (
                    ("broker", broker),
                    ("strategy", result["strategy"]),
                    ("cache_size_bytes", result["cache_size_bytes"]),
                    ("config_index", index),
                    ("second", second),
                    ("cache_bytes", cache_bytes),
                    ("reads", reads),
                    ("hits", hits),
                    ("hit_ratio", hits / reads if reads else 0.0),
                ):
                    series[k].append(v)
    return pa.table(summary, schema=SUMMARY_SCHEMA), pa.table(series, schema=SERIES_SCHEMA)


def _configs(configs: CacheConfig | Iterable[CacheConfig]) -> list[CacheConfig]:
    configs = [configs] if isinstance(configs, CacheConfig) else list(configs)
    if not configs:
        raise ValueError("configs must name at least one CacheConfig")
    if not all(isinstance(c, CacheConfig) for c in configs):
        raise TypeError("configs must be CacheConfig objects")
    return configs


def replay(
    trace: _trace.TraceSource,
    configs: CacheConfig | Iterable[CacheConfig],
    *,
    with_timeseries: bool = False,
) -> pa.Table | tuple[pa.Table, pa.Table]:
    """Replays a trace under each configuration and returns one row per (broker, configuration).

    The trace (see :mod:`ledgercache.trace`) is streamed in record batches into the Rust engine; no
    Python runs per event. Each broker's events replay on their own, on a clock driven by ``ts_us``
    with the periodic eviction every ``eviction_interval_ms`` of trace time. ``belady`` needs the
    future, so it reads the trace twice: pass a table or a path, not a one-shot reader.

    With ``with_timeseries=True`` also returns a per-second table (cache bytes, reads, hits).
    """
    configs = _configs(configs)
    if isinstance(trace, pa.RecordBatchReader) and any(c.strategy == "belady" for c in configs):
        raise UnsupportedError("strategy 'belady' reads the trace twice: pass a Table or a path, not a RecordBatchReader")
    summary, series = tables(run_sessions(lambda: _trace.batches(trace), configs))
    return (summary, series) if with_timeseries else summary


def export_requests(trace: _trace.TraceSource, config: CacheConfig | None, path, format: str = "oracleGeneral") -> int:
    """Writes the request stream a replay of ``trace`` sees, to cross-check with other simulators.

    Every publish (an insert) and every entry a cursor reads (a lookup) becomes one request: object
    id (one per position), size, time and the index of the object's next request. ``format`` is
    ``"oracleGeneral"`` (libCacheSim's binary: ``u32 seconds, u64 id, u32 size, i64 next``) or
    ``"csv"`` (``ts_us,obj_id,size,next_access_vtime,op`` with op ``insert`` or ``read``). The stream
    does not depend on the cache design, so ``config`` only names which replay it stands for. Only
    single-broker traces are accepted. Returns the number of requests written.

    To compare hit ratios, count hits on ``read`` requests only: an ``insert`` is a publish, a miss
    in any simulator's eyes. With reads of one entry each, ``lru``, ``pip430-fifo`` (trigger and
    watermark 1.0, no TTL) and ``belady`` match libCacheSim's LRU, FIFO and Belady exactly.
    """
    if config is not None and not isinstance(config, CacheConfig):
        raise TypeError("config must be a CacheConfig or None")
    recorder = RequestRecorder()
    brokers: set[str] = set()
    for batch in _trace.batches(trace):
        brokers.update(batch.column("broker").unique().drop_null().to_pylist())
        if len(brokers) > 1:
            raise ValueError(f"export_requests takes one broker's trace; this one has {sorted(brokers)}")
        recorder.feed(batch)
    return recorder.write(str(path), format)
