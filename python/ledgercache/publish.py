"""Publish throttling in the replay lab (PIP-385): what publishers wait, and who waits for whom.

Message-rate quotas are charged the ``messages`` of each ``add`` (a batch counts each of its
messages, as Pulsar's ``PublishRateLimiterImpl.handlePublishThrottling`` does; null or absent: 1),
byte-rate quotas its ``size``. A trace may carry two more columns on its ``add`` rows (older traces
stay valid without them):

========== ======== ==================================================================================
column     type     meaning
========== ======== ==================================================================================
producer   int64    the producer that published the entry (default: one producer per broker and topic)
connection int64    the client connection it came over (default: the producer's own connection)
========== ======== ==================================================================================

:func:`throttle_publishes` replays the ``add`` rows through a :class:`~ledgercache.PublishRateLimiter`
in one of :data:`MODES` and moves each ``add`` to when the broker read it:

- ``pause-connection``: Pulsar before PIP-385; a breach stops reading the whole connection, so
  every topic on it waits (the noisy neighbour);
- ``throttle-producer``: PIP-385; the broker tells the breaching producer to pause (it answers in
  time), other producers on the connection go on;
- ``off``: no limits, nothing moves.

A consumer cannot read an entry before it is published, so every other event of a topic moves to
no earlier than the latest ``add`` before it. Pass ``publish_throttling=`` and ``publish_limiter=``
to :func:`ledgercache.replay` to replay the moved trace.

>>> import ledgercache as lc
>>> trace = lc.publish.noisy_neighbour(seconds=3)
>>> _, delays = lc.publish.throttle_publishes(trace, lc.publish.noisy_neighbour_limiter(), "throttle-producer")
>>> {r["topic"]: r["p99_ms"] for r in delays.to_pylist()}["cold"]
0.0
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import trace as _trace
from ._native import PublishRateLimiter, simulate_publishes
from .errors import InvalidArgumentError

__all__ = [
    "MODES",
    "DELAY_SCHEMA",
    "compare_modes",
    "noisy_neighbour",
    "noisy_neighbour_limiter",
    "throttle_counts",
    "throttle_publishes",
]

MODES = ("pause-connection", "throttle-producer", "off")

DELAY_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("mode", pa.string()),
        ("topic", pa.string()),
        ("publishes", pa.int64()),
        ("p50_ms", pa.float64()),
        ("p99_ms", pa.float64()),
        ("max_ms", pa.float64()),
        ("throttles", pa.int64()),
        ("under_quota", pa.bool_()),
    ]
)
"""One row per (broker, topic): publish delays; ``throttles`` counts the topic's own breaches, and
``under_quota`` topics never breached, so whatever they waited they waited for a neighbour."""

_EXTRA = {"producer": pa.int64(), "connection": pa.int64()}


def _table(source: _trace.TraceSource) -> pa.Table:
    raw = list(_trace._raw_batches(source, 1 << 20))
    if not raw:
        return pa.table(
            {**{f.name: pa.array([], f.type) for f in _trace.SCHEMA}, **{k: pa.array([], t) for k, t in _EXTRA.items()}}
        )
    table = pa.Table.from_batches(raw)
    conformed = pa.Table.from_batches(
        [_trace.conform(b) for b in table.to_batches() if b.num_rows], schema=_trace.SCHEMA
    )
    for name, typ in _EXTRA.items():
        if name in table.column_names:
            col = table.column(name)
            if not (pa.types.is_integer(col.type) or pa.types.is_null(col.type)):
                raise InvalidArgumentError(f"invalid trace: column {name!r} must be {typ}, is {col.type}")
            conformed = conformed.append_column(name, col.cast(typ))
        else:
            conformed = conformed.append_column(name, pa.nulls(conformed.num_rows, typ))
    return conformed


def _ms(ns: int) -> float:
    """Nanoseconds as milliseconds, at microsecond precision."""
    return ns // 1_000 / 1_000


def _default_producer(broker: str, topic: pa.Array) -> np.ndarray:
    """One producer id per (broker, topic), computed per distinct topic, not per row."""
    encoded = pc.dictionary_encode(topic)
    ids = np.array([zlib.crc32(f"{broker}/{t}".encode()) for t in encoded.dictionary.to_pylist()], dtype=np.int64)
    return (
        ids[encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)] if len(ids) else np.zeros(len(topic), np.int64)
    )


def throttle_publishes(trace: _trace.TraceSource, limiter: PublishRateLimiter, mode: str) -> tuple[pa.Table, pa.Table]:
    """Replays the trace's publishes through ``limiter`` under ``mode`` (one of :data:`MODES`).

    Returns the moved trace (the columns of :data:`ledgercache.trace.SCHEMA` plus ``producer`` and
    ``connection``, time-ordered within each broker) and the delays (:data:`DELAY_SCHEMA`). Each
    broker has its own limiter state (a copy of ``limiter``). The delay table's schema metadata
    holds the totals: ``throttles`` (JSON: reason -> breaches), ``connection_pauses`` and
    ``commands_sent``; :func:`throttle_counts` reads them.
    """
    if mode not in MODES:
        raise InvalidArgumentError(f"publish_throttling: {mode!r} is not one of {', '.join(MODES)}")
    if not isinstance(limiter, PublishRateLimiter):
        raise TypeError("limiter must be a PublishRateLimiter")
    table = _table(trace)
    moved: list[Any] = []
    rows: dict[str, list[Any]] = {c: [] for c in DELAY_SCHEMA.names}
    totals: dict[str, int] = {}
    pauses = commands = 0
    for broker in pc.unique(table.column("broker")).to_pylist():
        part = (
            table.filter(pc.equal(table.column("broker"), broker))
            if broker is not None
            else table.filter(pc.is_null(table.column("broker")))
        )
        ts = part.column("ts_us").to_numpy(zero_copy_only=False).astype(np.int64)
        is_add = pc.equal(part.column("op"), "add").to_numpy(zero_copy_only=False).astype(bool)
        adds = part.filter(pa.array(is_add))
        topic = adds.column("topic").combine_chunks()
        producer = adds.column("producer").combine_chunks()
        default = _default_producer(str(broker), topic)
        producer = np.where(
            producer.is_null().to_numpy(zero_copy_only=False),
            default,
            producer.fill_null(0).to_numpy(zero_copy_only=False),
        )
        connection = adds.column("connection").combine_chunks()
        connection = np.where(
            connection.is_null().to_numpy(zero_copy_only=False),
            producer,
            connection.fill_null(0).to_numpy(zero_copy_only=False),
        )
        publishes = pa.record_batch(
            {
                "ts_us": adds.column("ts_us").combine_chunks(),
                "topic": topic,
                "producer": pa.array(producer, pa.int64()),
                "connection": pa.array(connection, pa.int64()),
                "size": adds.column("size").combine_chunks().fill_null(0),
                # A message-rate quota is charged each message of a batch (null: one message).
                "messages": adds.column("messages").combine_chunks(),
            }
        )
        result = simulate_publishes(limiter, publishes, mode)
        accepted = np.frombuffer(result["accepted_at_us"], dtype="<i8")
        new_ts = ts.copy()
        new_ts[is_add] = accepted
        # Each topic's events keep their order: nothing is read before the add it follows.
        codes = (
            pc.dictionary_encode(part.column("topic").combine_chunks())
            .indices.fill_null(-1)
            .to_numpy(zero_copy_only=False)
        )
        by_topic_rows = np.argsort(codes, kind="stable")
        starts = np.flatnonzero(np.diff(codes[by_topic_rows], prepend=-2))
        for idx in np.split(by_topic_rows, starts[1:]):
            new_ts[idx] = np.maximum.accumulate(new_ts[idx])
        order = np.argsort(new_ts, kind="stable")
        part = part.set_column(0, "ts_us", pa.array(new_ts, pa.int64()))
        moved.append(part.take(pa.array(order)))
        by_topic = result["throttles_by_topic"]
        for t, (publishes, p50, p99, most) in sorted(result["delays"].items()):
            for k, v in (
                ("broker", broker),
                ("mode", mode),
                ("topic", t),
                ("publishes", publishes),
                ("p50_ms", _ms(p50)),
                ("p99_ms", _ms(p99)),
                ("max_ms", _ms(most)),
                ("throttles", by_topic.get(t, 0)),
                ("under_quota", by_topic.get(t, 0) == 0),
            ):
                rows[k].append(v)
        for reason, n in result["throttles"].items():
            totals[reason] = totals.get(reason, 0) + n
        pauses += result["connection_pauses"]
        commands += result["commands_sent"]
    metadata = {
        "throttles": json.dumps(dict(sorted(totals.items()))),
        "connection_pauses": str(pauses),
        "commands_sent": str(commands),
    }
    delays = pa.table(rows, schema=DELAY_SCHEMA.with_metadata(metadata))
    out = pa.concat_tables(moved) if moved else table
    return out, delays


def throttle_counts(delays: pa.Table) -> dict[str, object]:
    """The totals of a delay table: ``{"throttles": {reason: n}, "connection_pauses": n, "commands_sent": n}``."""
    meta = delays.schema.metadata or {}
    if b"throttles" not in meta:
        raise InvalidArgumentError("not a delay table from throttle_publishes (no throttle counts in its metadata)")
    return {
        "throttles": json.loads(meta[b"throttles"]),
        "connection_pauses": int(meta[b"connection_pauses"]),
        "commands_sent": int(meta[b"commands_sent"]),
    }


def noisy_neighbour_limiter(hot_messages_per_second: float = 100.0) -> PublishRateLimiter:
    """The bundled scenario's limits: topic ``hot`` may publish ``hot_messages_per_second``."""
    limiter = PublishRateLimiter()
    limiter.set_topic_rate("hot", messages_per_second=hot_messages_per_second)
    return limiter


def noisy_neighbour(seconds: int = 10, hot_rate: int = 200, cold_rate: int = 50, size: int = 1024) -> pa.Table:
    """The bundled throttling scenario: two topics published over one connection (1) by two
    producers, ``hot`` at ``hot_rate`` msg/s (twice its quota in :func:`noisy_neighbour_limiter`)
    and ``cold`` at ``cold_rate`` msg/s (no quota), each read by one tailing subscription."""
    if seconds <= 0 or hot_rate <= 0 or cold_rate <= 0 or size <= 0:
        raise InvalidArgumentError("noisy_neighbour: seconds, rates and size must be positive")
    events: list[tuple[Any, ...]] = []  # (ts_us, order, topic, op, cursor, entry_id, count, producer)
    for topic, rate, producer, offset in (("hot", hot_rate, 1, 0), ("cold", cold_rate, 2, 1)):
        events.append((0, 0, topic, "open", "sub", None, None, None))
        step = 1_000_000 // rate
        for i in range(seconds * rate):
            t = i * step + offset
            events.append((t, 1, topic, "add", None, i, None, producer))
            events.append((t, 2, topic, "read", "sub", None, 1, None))
    events.sort(key=lambda e: (e[0], e[1]))
    cols = list(zip(*events, strict=True))
    n = len(events)
    return pa.table(
        {
            "ts_us": pa.array(cols[0], pa.int64()),
            "broker": pa.array(["broker-0"] * n, pa.string()),
            "topic": pa.array(cols[2], pa.string()),
            "op": pa.array(cols[3], pa.string()),
            "cursor": pa.array(cols[4], pa.string()),
            "ledger_id": pa.array([1 if op == "add" else None for op in cols[3]], pa.int64()),
            "entry_id": pa.array(cols[5], pa.int64()),
            "count": pa.array(cols[6], pa.int32()),
            "size": pa.array([size if op == "add" else None for op in cols[3]], pa.int32()),
            "producer": pa.array(cols[7], pa.int64()),
            "connection": pa.array([1 if op == "add" else None for op in cols[3]], pa.int64()),
        }
    )


def compare_modes(
    trace: _trace.TraceSource,
    limiter: PublishRateLimiter,
    modes: tuple[str, ...] = ("pause-connection", "throttle-producer"),
) -> pa.Table:
    """The delay tables of several modes, one after the other (for a side-by-side report)."""
    table = _table(trace)  # read a file once, not once per mode
    tables = [throttle_publishes(table, limiter, m)[1] for m in modes]
    return pa.concat_tables([t.replace_schema_metadata(None) for t in tables])
