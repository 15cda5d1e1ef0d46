"""``replay()``: traces through cache designs, in Rust, one broker at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pyarrow as pa

from . import _native
from . import publish as _publish
from . import trace as _trace
from ._native import CacheConfig, PublishRateLimiter, ReplaySession, RequestRecorder
from .errors import UnsupportedError

__all__ = ["replay", "export_requests", "SUMMARY_COLUMNS", "SUMMARY_SCHEMA", "SERIES_SCHEMA", "column_docs"]

# Declared once, in Rust (src/lab/replay/summary.rs): each field's doc is in its metadata (b"doc").
SUMMARY_SCHEMA: pa.Schema = _native.summary_schema()
SERIES_SCHEMA: pa.Schema = _native.series_schema()
# The measured columns: the summary's, but the configuration itself.
SUMMARY_COLUMNS: tuple[str, ...] = tuple(n for n in SUMMARY_SCHEMA.names if n != "config")


def column_docs(schema: pa.Schema = SUMMARY_SCHEMA) -> dict[str, str]:
    """Each column of ``schema`` and what it means, in order."""
    return {f.name: (f.metadata or {}).get(b"doc", b"").decode() for f in schema}


def _two_pass() -> frozenset[str]:
    """The designs whose replay reads the trace twice (the registry says which)."""
    return frozenset(d["name"] for d in _native.designs() if d["reads_trace_twice"])


def run_session(
    batches: Callable[[], Iterable[pa.RecordBatch]], configs: list[CacheConfig] | ReplaySession
) -> ReplaySession:
    """Replays conformed batches (``batches()`` is called again for Belady's second pass).

    ``configs`` may be a fresh session instead: a caller that must know beforehand whether a
    second pass will come (``session.needs_second_pass()``, to keep a copy of a one-shot stream)
    makes the session itself."""
    session = configs if isinstance(configs, ReplaySession) else ReplaySession(configs)
    # One call for all the batches: decoding ahead, the next batch is taken (and conformed) on
    # the decoding thread while the engine replays the current one.
    session.feed_all(batches())
    if session.needs_second_pass():
        session.start_second_pass()
        session.feed_all(batches())
    return session


def tables(session: ReplaySession) -> tuple[pa.Table, pa.Table]:
    """The summary (one row per broker and configuration) and the per-second series."""
    summary, series = session.finish()
    return pa.Table.from_batches([summary]), pa.Table.from_batches([series])


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
    publish_throttling: str | None = None,
    publish_limiter: PublishRateLimiter | None = None,
    decode_ahead: bool = True,
    on_batch: Callable[[pa.RecordBatch], None] | None = None,
) -> pa.Table | tuple[pa.Table, pa.Table]:
    """Replays a trace under each configuration and returns one row per (broker, configuration).

    The trace (see :mod:`ledgercache.trace`) is streamed in record batches into the Rust engine; no
    Python runs per event. Each broker's events replay on their own, on a clock driven by ``ts_us``
    with the periodic eviction every ``eviction_interval_ms`` of trace time. A
    ``RecordBatchReader`` (such as :func:`ledgercache.workload.stream`) is read once, batch by
    batch, in memory that does not grow with the trace. ``belady`` needs the future, so it reads the
    trace twice: pass a table, a path, or a function that returns a new reader for each pass
    (``lambda: lc.workload.stream(spec, seed)``: the trace is generated twice); a reader itself
    raises ``UnsupportedError``.

    With ``with_timeseries=True`` also returns a per-second table (cache bytes, reads, hits,
    misses, storage reads, the seconds' loads, unloads and reopens, and each such event second's
    time to warm: ``SERIES_SCHEMA`` documents every column).

    With ``publish_throttling`` (``"pause-connection"``, ``"throttle-producer"`` or ``"off"``) the
    publishes first go through ``publish_limiter`` and every ``add`` moves to when the broker read
    it (see :mod:`ledgercache.publish`; the delays themselves come from
    :func:`ledgercache.publish.throttle_publishes`).

    With ``decode_ahead=True`` (the default) a second thread decodes the next rows of a batch while
    the engine replays the current ones, so a replay takes up to two cores; ``False`` keeps it on
    the calling thread. The results, and the error a bad trace raises, are the same.

    ``on_batch`` is called with each batch as the engine takes it in, on every pass (for progress).
    """
    configs = _configs(configs)
    if publish_throttling is not None:
        if publish_limiter is None and publish_throttling != "off":
            raise ValueError("publish_throttling needs publish_limiter (a PublishRateLimiter)")
        trace, _ = _publish.throttle_publishes(trace, publish_limiter or PublishRateLimiter(), publish_throttling)
    elif publish_limiter is not None:
        raise ValueError("publish_limiter is used only with publish_throttling")
    twice = next((c.strategy for c in configs if c.strategy in _two_pass()), None)
    if _trace.is_one_shot(trace) and twice is not None:
        raise UnsupportedError(
            f"trace: strategy {twice!r} reads the trace twice, and a RecordBatchReader can be read only once: pass a "
            "Table, a path, or a function that returns a new reader for each pass "
            "(e.g. lambda: lc.workload.stream(spec, seed))"
        )
    with _trace.naming(trace):
        session = ReplaySession(configs, decode_ahead=decode_ahead)
        summary, series = tables(
            run_session(lambda: _reported(_trace.batches(trace, keep_dictionaries=True), on_batch), session)
        )
    return (summary, series) if with_timeseries else summary


def _reported(
    batches: Iterable[pa.RecordBatch], on_batch: Callable[[pa.RecordBatch], None] | None
) -> Iterable[pa.RecordBatch]:
    """``batches``, each handed to ``on_batch`` first (when given)."""
    for batch in batches:
        if on_batch is not None:
            on_batch(batch)
        yield batch


def export_requests(trace: _trace.TraceSource, config: CacheConfig | None, path, format: str = "oracleGeneral") -> int:
    """Writes the request stream the replay of ``trace`` under ``config`` sees, to cross-check with
    other simulators.

    Every publish (an insert) and every entry a cursor reads (a lookup) becomes one request: object
    id (one per position), size, time and the index of the object's next request. ``format`` is
    ``"oracleGeneral"`` (libCacheSim's binary: ``u32 seconds, u64 id, u32 size, i64 next``) or
    ``"csv"`` (``ts_us,obj_id,size,next_access_vtime,op`` with op ``insert`` or ``read``). Only
    single-broker traces are accepted. Returns the number of requests written.

    The requests come in the order the replay touches the cache: a read of several entries takes
    its hits first, then reads its misses from storage and caches them, so within a read the order
    depends on ``config``'s design and size (with ``storage_read_latency_ms`` the misses still follow
    their read's hits, though the replay caches them when storage returns them). ``config=None``
    stands for a cache that holds nothing (each read's entries in their order). ``belady`` reads
    the trace twice, as :func:`replay` does.

    To compare hit ratios, count hits on ``read`` requests only: an ``insert`` is a publish, a miss
    in any simulator's eyes. libCacheSim's LRU on the stream of an ``lru`` configuration, and its
    Belady on a ``belady`` one, give that replay's hits exactly; with reads of one entry each the
    stream is the same for every design, and ``pip430-fifo`` (trigger and watermark 1.0, no TTL)
    matches libCacheSim's FIFO exactly too.

    ``unload`` and ``load`` rows add no request: these formats have no removal, so where an unload
    empties the cache of its topic (as a ``delete`` empties it of a ledger) another simulator keeps
    those entries, and its hits on the topic's later reads can exceed the replay's.
    """
    if config is not None and not isinstance(config, CacheConfig):
        raise TypeError("config must be a CacheConfig or None")
    if config is not None and config.strategy in _two_pass() and _trace.is_one_shot(trace):
        raise UnsupportedError(
            f"trace: strategy {config.strategy!r} reads the trace twice, and a RecordBatchReader can be read only once: pass a "
            "Table, a path, or a function that returns a new reader for each pass"
        )
    recorder = RequestRecorder(config)
    with _trace.naming(trace):
        for _ in range(2):
            brokers: set[str] = set()
            for batch in _trace.batches(trace, keep_dictionaries=True):
                brokers.update(batch.column("broker").unique().drop_null().to_pylist())
                if len(brokers) > 1:
                    raise ValueError(f"export_requests takes one broker's trace; this one has {sorted(brokers)}")
                recorder.feed(batch)
            if not recorder.needs_second_pass():
                break
            recorder.start_second_pass()
    return recorder.write(str(path), format)
