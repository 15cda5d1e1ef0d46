"""A broker's stats as a workload, and a trace summarized as a broker's stats.

An operator has no trace of their broker, but every broker dumps its topic stats
(``pulsar-admin broker-stats topics``; see :mod:`ledgercache.broker_stats`). :func:`from_broker_stats`
turns such a dump into a workload spec with one ``topicDetails`` entry per topic (see
:mod:`ledgercache.workload`), so that the generated trace publishes and dispatches at the broker's
rates and holds its backlogs. :func:`summarize` goes the other way, from any trace to the stats a
broker running it would report, which is how the report shows the stats beside what was generated
(:func:`side_by_side`) and how a synthetic broker is made from a bundled scenario.

How each field of the stats becomes the workload (the rules are here, once):
- Every persistent topic (each partition of a partitioned topic) is one ``topicDetails`` entry:
  ``producerRate`` is ``msgRateIn``; ``messageSize`` is ``averageMsgSize`` (else
  ``msgThroughputIn / msgRateIn``, else 1024 bytes).
- ``msgBacklog`` counts entries, not messages, whatever its name (Pulsar's
  ``PersistentSubscription.getNumberOfEntriesInBacklog``); entries a second are ``msgRateIn``
  over the messages in an entry that the producers' batching gives at that rate and size (the
  generator's estimate, :func:`ledgercache.workload.estimate`, of a one-topic spec).
- A subscription **tails** when its backlog is at most what its consumers' receiver queues hold
  in flight (``receiverQueueSize`` messages a consumer, at least one consumer's worth) or
  :data:`TAIL_SECONDS` (2) of publishing, whichever is more (acknowledgements trail deliveries): its
  consumers read ``consumer_headroom`` (1.2) times the faster of ``msgRateIn`` and its
  ``msgRateOut``, so they keep up as tailing consumers do, and it opens at the end at time 0.
- A subscription **lags** when its backlog is larger: its consumers read at the rates the stats
  say they dispatch (each consumer's ``msgRateOut``), and it starts ``msgBacklog`` entries' worth of
  publishing into the run at the topic's first entry, so that it begins with the broker's backlog
  and keeps it while its dispatch rate matches the publish rate; one that reads slower (its
  backlog grows) opens earlier and one that drains it later, so that its backlog at the end of
  the run, when the broker was dumped, is the one the stats give (where the run allows: a backlog
  growing or draining fast needs a longer warm-up than the lag; ``calibrate`` says so). The start is capped at
  ``max_backlog_minutes`` (10): a larger backlog is simulated as that many minutes of lag (its
  oldest entries would be storage reads either way); :func:`side_by_side` shows the difference.
  A consumer that dispatched nothing (no permits, say) reads at :data:`STALLED_RATE`: it is
  connected but stalled, as a slow consumer with no permits is.
- A subscription without consumers never reads (its type may be ``None``: Pulsar writes that for
  a subscription without a dispatcher; it is simulated as Exclusive): its cursor opens at the end
  at time 0, whatever its backlog, as a subscription created through the admin API is
  (``PersistentTopic.createSubscription``), and stays active (noted when it has a backlog).
- A topic's ``deduplicationStatus`` (``Enabled``/``Recovering``; ``Disabled``/``Removing``) is its
  ``deduplication``: the ``pulsar.dedup`` cursor (see :mod:`ledgercache.workload`, "Readers"); its
  ``replication`` section's clusters are its ``replicationClusters``, each a
  ``pulsar.repl.<cluster>`` cursor reading at the tail.
- The spec turns ``messageMetadata`` off: ``averageMsgSize`` already counts each message's stored
  bytes, metadata included (``Producer.publishMessage`` records ``headersAndPayload.readableBytes()``).
- Exclusive and Failover subscriptions deliver to
  one consumer: the busiest one is listed first (the generator's active consumer) and gets the
  subscription's whole rate.
- ``redeliveryRate`` is ``msgRateRedeliver / msgRateOut`` (at most 0.5), redelivered after the
  Java client's default ``negativeAckRedeliveryDelay`` (1 minute; the stats do not say the
  clients' own; set ``negativeAckRedeliveryDelayMs`` in ``settings`` if they differ). With a
  Shared or Key_Shared subscription that redelivers, the warm-up is at least that delay, so the
  test sees redeliveries at their steady rate.
- The run simulates the longest lag's start as warm-up (``warmupDurationMinutes``), then
  ``test_duration_minutes`` (2) of test; rates are measured over the test.
- Producers are Pulsar clients with the client's batching defaults (``batchingMaxPublishDelayMs``
  1, ``batchingMaxMessages`` 1000, ``batchingMaxBytes`` 131072; ``ProducerConfigurationData``),
  not OMB's; ``receiverQueueSize`` is the client's 1000.

- A topic nobody publishes to (``msgRateIn`` 0) whose subscriptions have a backlog starts with it in
  storage (``backlogEntries``: the trace begins with ``load`` rows): each subscription with a
  backlog opens ``msgBacklog`` entries plus what its consumers read over the run behind the stored
  end (so that it ends the run with the stats' backlog) and reads at the rates its stats show (a
  catch-up-only subscription: the storage reads an operator asks about); the topic stores as many
  entries as the furthest behind needs, each of ``backlogSize / msgBacklog / messageSize`` messages
  (the topic's ``backlogSize`` is the slowest subscription's; 1 without it). One whose consumers
  receive nothing (``msgRateOut`` 0: a stuck Key_Shared subscription, say) reads at
  :data:`STALLED_RATE`, so it keeps its backlog; one without consumers never reads. Each is noted.

Not simulated: a backlog on a topic that publishes is built by publishing (above), not found in
storage; non-persistent topics are not in the stats the reader keeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import broker_stats as _stats
from . import metrics as _metrics
from . import replay as _replay
from . import trace as _trace
from . import workload as _workload
from .errors import InvalidArgumentError

# Read from a broker's stats into a spec: workload.py holds the conversion, since
# lc.workload.from_broker_stats is it and the conversion needs the generator's estimate.
from .workload import (
    CLIENT_DEFAULTS,
    STALLED_RATE,
    TAIL_SECONDS,
    from_broker_stats,
    workload_and_notes,
)

__all__ = [
    "STALLED_RATE",
    "TAIL_SECONDS",
    "CLIENT_DEFAULTS",
    "Summary",
    "from_broker_stats",
    "dump",
    "summarize",
    "side_by_side",
    "subscriptions_of",
    "tee",
    "window_counts",
    "window_seconds",
    "workload_and_notes",
]


def window_seconds(spec: Mapping[str, Any]) -> tuple[int, int]:
    """The whole seconds ``[first, end)`` of a generated run's test, after its warm-up: the window
    every rate of a synthetic broker and of a calibration is measured over (the seconds of a
    replay's per-second series, and the span :func:`summarize` reads)."""
    settings = _workload.normalize(spec)
    warmup = float(settings.get("warmup_duration_minutes", 0.0))
    test = float(settings.get("test_duration_minutes", 1.0))
    first = math.ceil(warmup * 60 - 1e-9)
    return first, max(first + 1, math.floor((warmup + test) * 60 + 1e-9))


def window_counts(series: pa.Table, window: tuple[int, int], config_index: int | None = None) -> tuple[int, int]:
    """Entries read and hits over a window's seconds, from a replay's per-second series (one
    configuration's rows when ``config_index`` is given)."""
    keep = pc.and_(pc.greater_equal(series.column("second"), window[0]), pc.less(series.column("second"), window[1]))
    if config_index is not None:
        keep = pc.and_(keep, pc.equal(series.column("config_index"), config_index))
    rows = series.filter(keep)
    return pc.sum(rows.column("reads")).as_py() or 0, pc.sum(rows.column("hits")).as_py() or 0


@dataclass
class _Cursor:
    """A cursor, in entry indexes of its topic: entries acknowledged (``upto``, all before it), its
    read position, and the entries dispatched (read or replayed) in the window."""

    upto: int
    read_at: int = 0
    dispatched: int = 0


@dataclass
class _Topic:
    """What :func:`summarize` gathers for a topic while it reads the trace."""

    entries: int = 0
    messages: int = 0
    # Entries found in storage (``load`` rows), not published in the trace.
    loaded: int = 0
    window_messages: int = 0
    window_bytes: int = 0
    # ledger id -> [entries added to the ledger, entries of the topic before it]
    ledgers: dict[int, list[int]] = field(default_factory=dict)
    cursors: dict[str, _Cursor] = field(default_factory=dict)


def _index(t: _Topic, ledger: int | None, entry: int | None) -> int:
    """Entries of the topic up to and including (ledger, entry); -1 below the first."""
    if ledger is None or ledger not in t.ledgers:
        return t.entries - 1 if ledger is None else -1
    return t.ledgers[ledger][1] + min(entry or 0, t.ledgers[ledger][0] - 1)


def summarize(
    trace: _trace.TraceSource,
    *,
    since_us: int = 0,
    until_us: int | None = None,
    subscription: Callable[[str, str], tuple[str, int]] | None = None,
) -> _stats.BrokerStats:
    """The stats a broker running ``trace`` would report: per topic the publish rate, throughput and
    average message size over the window from ``since_us`` to ``until_us`` (default: the trace's
    last event; rows from ``until_us`` on are not read), and per
    subscription (cursor) its dispatch rate over the window (the entries its reads took and its
    replays re-read, as Pulsar's ``msgRateOut`` counts what it sends, in messages: entries times
    the topic's average messages an entry) and its backlog at the end
    (entries published after its last acknowledgement: Pulsar's ``msgBacklog`` counts entries).
    Messages are counted from the ``messages`` column. ``subscription(topic, cursor)`` gives a subscription's type and consumer count
    (:func:`subscriptions_of` reads them from a spec; a trace does not record them; default
    ``Exclusive`` with one consumer).

    Read in one pass, batch by batch; memory holds a few numbers per topic, ledger and cursor.
    """
    summary = Summary(since_us=since_us, until_us=until_us)
    for batch in _trace.batches(trace):
        summary.feed(batch, conformed=True)
    return summary.stats(subscription)


class Summary:
    """:func:`summarize` fed batch by batch, in trace order: what lets a caller summarize a trace in
    the pass that replays it (:func:`tee`) instead of generating it again."""

    def __init__(self, *, since_us: int = 0, until_us: int | None = None) -> None:
        self.since_us, self.until_us = since_us, until_us
        self._topics: dict[str, _Topic] = {}
        self._first_us: int | None = None
        self._last_us: int | None = None

    def feed(self, batch: pa.RecordBatch, *, conformed: bool = False) -> None:
        """Counts the batch's rows (conformed to :data:`ledgercache.trace.SCHEMA` here unless
        ``conformed``)."""
        if not conformed:
            batch = _trace.conform(batch)
        if batch.num_rows == 0:
            return
        since_us, until_us, topics = self.since_us, self.until_us, self._topics
        if until_us is not None:
            batch = batch.filter(pc.less(batch.column("ts_us"), until_us))
            if batch.num_rows == 0:
                return
        ts = batch.column("ts_us")
        lo, hi = pc.min_max(ts).values()
        self._first_us = lo.as_py() if self._first_us is None else self._first_us
        self._last_us = hi.as_py()
        ops = batch.column("op")
        loads = batch.filter(pc.equal(ops, "load"))
        if loads.num_rows:
            _count_loads(topics, loads)
        before = {name: t.entries for name, t in topics.items()}
        is_add = pc.equal(ops, "add")
        adds = batch.filter(is_add)
        if adds.num_rows:
            _count_adds(topics, adds, since_us)
        _cursor_ops(topics, batch, is_add, before, since_us)

    def stats(self, subscription: Callable[[str, str], tuple[str, int]] | None = None) -> _stats.BrokerStats:
        """The stats of what was fed (:func:`summarize` says what each field is)."""
        since_us, until_us, topics = self.since_us, self.until_us, self._topics
        first_us, last_us = self._first_us, self._last_us
        if first_us is None or last_us is None:
            raise InvalidArgumentError("invalid trace: it has no events to summarize")
        end_us = until_us if until_us is not None else last_us
        seconds = max(1e-6, (end_us - max(since_us, first_us)) / 1e6)
        out = []
        for name, t in sorted(topics.items()):
            per_entry = t.messages / t.entries if t.entries else 1.0
            rate_in = t.window_messages / seconds
            subs = []
            for cursor, state in sorted(t.cursors.items()):
                upto = state.upto
                moved = state.dispatched * per_entry / seconds
                kind, n = subscription(name, cursor) if subscription else ("Exclusive", 1)
                backlog = max(0, t.entries - upto)  # entries, as Pulsar counts a backlog
                per = [
                    _stats.ConsumerStats(
                        name=f"{cursor}-consumer-{i}",
                        msg_rate_out=moved / n if n else 0.0,
                        msg_throughput_out=0.0,
                        available_permits=None,
                        unacked_messages=0,
                        msg_rate_redeliver=0.0,
                    )
                    for i in range(n)
                ]
                subs.append(
                    _stats.SubscriptionStats(
                        name=cursor,
                        type=kind,
                        msg_rate_out=moved,
                        msg_throughput_out=0.0,
                        msg_backlog=backlog,
                        unacked_messages=0,
                        msg_rate_redeliver=0.0,
                        consumers=tuple(per),
                    )
                )
            size = t.window_bytes / t.window_messages if t.window_messages else 0.0
            out.append(
                _stats.TopicStats(
                    name=name,
                    namespace=_namespace(name),
                    bundle=None,
                    msg_rate_in=rate_in,
                    msg_throughput_in=t.window_bytes / seconds,
                    average_msg_size=size,
                    msg_rate_out=sum(s.msg_rate_out for s in subs),
                    msg_throughput_out=0.0,
                    storage_size=0,
                    backlog_size=0,
                    publishers=1 if t.entries > t.loaded else 0,
                    subscriptions=tuple(subs),
                )
            )
        return _stats.BrokerStats(topics=tuple(out))


def tee(trace: Callable[[], Any], summary: Summary) -> Callable[[], pa.RecordBatchReader]:
    """``trace`` (a function returning a trace, as :func:`ledgercache.replay` takes one) whose
    first pass also feeds ``summary``, batch by batch: a replay then summarizes the trace as it
    reads it. Later passes (Belady's second) only replay. Replaying with decoding ahead (the
    default), the batches are taken, and so summarized, on a thread of their own while the
    engine replays the batch before."""
    passes = 0

    def source() -> pa.RecordBatchReader:
        nonlocal passes
        passes += 1
        first = passes == 1
        reader = _trace.batches(trace())

        def batches() -> Any:
            for batch in reader:
                if first:
                    summary.feed(batch, conformed=True)
                yield batch

        return pa.RecordBatchReader.from_batches(_trace.SCHEMA, batches())

    return source


_CURSOR_OPS = ("open", "ack", "individual_ack", "read", "replay", "seek", "rewind")
# Codes of _CURSOR_OPS; the first three that follow (read, replay, ack) are all most cursors' rows
# hold, and a batch's rows of such a cursor are counted without a Python step per row.
_OPEN, _ACK, _INDIVIDUAL_ACK, _READ, _REPLAY, _SEEK, _REWIND = range(len(_CURSOR_OPS))


def _cursor_ops(
    topics: dict[str, _Topic],
    batch: pa.RecordBatch,
    is_add: pa.ChunkedArray | pa.Array,
    before: Mapping[str, int],
    since_us: int,
) -> None:
    """Applies the batch's cursor rows (open, ack, individual_ack, read, replay, seek, rewind) to
    the cursors' states, each row seeing the entries its topic had published by then (the batch's
    adds are already in ``topics``' ledgers).

    Cursors are independent of one another, so a batch's rows are taken cursor by cursor (in trace
    order within each). A cursor whose rows in the batch are only reads, replays and acks, none of
    its reads asking for more than was published, is counted at once (its reads move the read
    position by their counts, its last ack sets the acknowledged prefix); any other cursor goes
    row by row, as :func:`_apply` says. Either way the cost is the batch's rows, not the batch's
    rows times its topics."""

    # Made here, not at import: pyarrow's conversion of a Python list imports pandas (when
    # installed), which would add a fifth of a second to every `import ledgercache`.
    op_code = pc.index_in(batch.column("op"), value_set=pa.array(_CURSOR_OPS, pa.string()))
    rows = pc.indices_nonzero(pc.is_valid(op_code)).to_numpy()
    if len(rows) == 0:
        return
    # The entries each row's topic had published by then: the adds of its topic up to the row,
    # counted in one sort by topic (stable, so rows keep their order within a topic).
    topic_all = pc.dictionary_encode(batch.column("topic"))
    names = topic_all.dictionary.to_pylist()
    codes = topic_all.indices.to_numpy(zero_copy_only=False)
    adds = np.asarray(is_add.to_numpy(zero_copy_only=False), dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    running = np.cumsum(adds[order])
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    base = np.zeros(len(names), dtype=np.int64)
    base[sorted_codes[starts]] = np.r_[0, running[starts[1:] - 1]]
    offset = np.array([before.get(name, 0) for name in names], dtype=np.int64)
    published_all = np.empty(len(codes), dtype=np.int64)
    published_all[order] = running - base[sorted_codes] + offset[sorted_codes]

    taken = batch.take(pa.array(rows))
    op = op_code.to_numpy(zero_copy_only=False)[rows].astype(np.int64)
    topic = codes[rows]
    published = published_all[rows]
    cursor_enc = pc.dictionary_encode(taken.column("cursor"))
    # A null cursor is a name of its own (None), after the dictionary's.
    cursor_names = [*cursor_enc.dictionary.to_pylist(), None]
    cursor_code = (
        pc.fill_null(cursor_enc.indices, len(cursor_names) - 1).to_numpy(zero_copy_only=False).astype(np.int64)
    )
    ts = taken.column("ts_us").to_numpy(zero_copy_only=False)
    count = pc.fill_null(taken.column("count"), 0).to_numpy(zero_copy_only=False).astype(np.int64)

    # Group by cursor (topic, cursor name), trace order kept within each group.
    key = topic.astype(np.int64) * len(cursor_names) + cursor_code
    by = np.argsort(key, kind="stable")
    key_sorted = key[by]
    first = np.flatnonzero(np.r_[True, key_sorted[1:] != key_sorted[:-1]])
    last = np.r_[first[1:], len(by)]
    op_sorted = op[by]
    # A group is simple when it holds only reads, replays and acks.
    other = ((op_sorted != _READ) & (op_sorted != _REPLAY) & (op_sorted != _ACK)).astype(np.int64)
    complex_group = np.add.reduceat(other, first) > 0
    is_read = op_sorted == _READ
    c_sorted = np.where(is_read, count[by], 0)
    # Read position before each read, were no read cut short: the group's start plus the counts
    # of its reads before it.
    within = np.cumsum(c_sorted)
    group_of = np.repeat(np.arange(len(first)), last - first)
    before_row = within - c_sorted - np.r_[0, within[first[1:] - 1]][group_of]
    p_sorted = published[by]
    in_window = ts[by] >= since_us
    read_sums = np.add.reduceat(c_sorted, first)
    window_moved = np.add.reduceat(np.where(in_window, c_sorted, 0), first) + np.add.reduceat(
        (op_sorted == _REPLAY) & in_window, first
    ).astype(np.int64)
    ack_rows = np.flatnonzero(op_sorted == _ACK)
    last_ack = np.full(len(first), -1, dtype=np.int64)
    last_ack[group_of[ack_rows]] = ack_rows  # the last one wins: rows are in order

    ledger_col = taken.column("ledger_id")
    entry_col = taken.column("entry_id")
    rows_list = None
    for g in range(len(first)):
        lo, hi = int(first[g]), int(last[g])
        i0 = int(by[lo])
        t = topics.setdefault(names[topic[i0]], _Topic())
        name = cursor_names[cursor_code[i0]]
        state = t.cursors.get(name)
        if not complex_group[g]:
            if state is None:
                continue  # cursor rows before the cursor opened: nothing to count from
            x0 = state.read_at
            reads = slice(lo, hi)
            pos = before_row[reads] + x0
            want = c_sorted[reads]
            # Every read takes its whole count: the vector path is the row-by-row one.
            if np.all(want <= np.maximum(0, p_sorted[reads] - pos)):
                state.read_at = x0 + int(read_sums[g])
                state.dispatched += int(window_moved[g])
                if last_ack[g] >= 0:
                    i = int(by[last_ack[g]])
                    state.upto = _index(t, ledger_col[i].as_py(), entry_col[i].as_py()) + 1
                continue
        if rows_list is None:
            rows_list = {c: taken.column(c).to_pylist() for c in ("ledger_id", "entry_id", "count", "ts_us")}
        for j in by[lo:hi].tolist():
            state = _apply(
                t,
                name,
                state,
                int(op[j]),
                rows_list["ledger_id"][j],
                rows_list["entry_id"][j],
                rows_list["count"][j],
                rows_list["ts_us"][j],
                int(published[j]),
                since_us,
            )


def _apply(
    t: _Topic,
    name: str | None,
    state: _Cursor | None,
    op: int,
    ledger: int | None,
    entry: int | None,
    count: int | None,
    ts_us: int,
    published: int,
    since_us: int,
) -> _Cursor | None:
    """One cursor row applied to its cursor's state (``None`` before it opens); the state after."""
    if op == _OPEN:
        # An open at a position reads from it (the entries before it count as acknowledged);
        # an open without one, from the end.
        start = published if ledger is None else max(0, _index(t, ledger, entry))
        if state is None:
            state = t.cursors[name] = _Cursor(start)  # type: ignore[index]
        state.upto = state.read_at = start
        return state
    if state is None:
        return None  # a cursor row before the cursor opened: nothing to count from
    if op == _ACK:
        state.upto = _index(t, ledger, entry) + 1
    elif op == _INDIVIDUAL_ACK:
        # Counted once it joins the acknowledged prefix (acknowledgements past a gap are
        # not tracked: the backlog counts them until the gap is acknowledged).
        first = _index(t, ledger, entry)
        if first <= state.upto:
            state.upto = max(state.upto, first + max(1, count or 1))
    elif op == _SEEK:
        state.read_at = max(0, _index(t, ledger, entry))
    elif op == _REWIND:
        state.read_at = state.upto
    elif op == _READ:
        # A read takes what was published from the read position on, at most its count.
        taken = min(count or 0, max(0, published - state.read_at))
        state.read_at += taken
        if ts_us >= since_us:
            state.dispatched += taken
    elif op == _REPLAY and ts_us >= since_us:
        state.dispatched += 1
    return state


def _namespace(topic: str) -> str:
    path = topic.split("://", 1)[-1].split("/")
    return "/".join(path[:2]) if len(path) >= 3 else ""


def _count_adds(topics: dict[str, _Topic], adds: pa.RecordBatch, since_us: int) -> None:
    messages = pc.fill_null(adds.column("messages"), 1)
    table = pa.table(
        {
            "topic": adds.column("topic"),
            "ledger_id": adds.column("ledger_id"),
            "messages": messages,
            "size": adds.column("size"),
            "window": pc.greater_equal(adds.column("ts_us"), since_us),
        }
    )
    # Per (topic, ledger) in first-seen order: ledgers of a topic come one after another.
    for row in (
        table.group_by(["topic", "ledger_id"], use_threads=False)
        .aggregate([("messages", "count"), ("messages", "sum")])
        .to_pylist()
    ):
        t = topics.setdefault(row["topic"], _Topic())
        ledger = row["ledger_id"]
        if ledger not in t.ledgers:
            t.ledgers[ledger] = [0, t.entries]
        t.ledgers[ledger][0] += row["messages_count"]
        t.entries += row["messages_count"]
        t.messages += row["messages_sum"]
    window = table.filter(table.column("window"))
    if window.num_rows:
        for row in (
            window.group_by("topic", use_threads=False).aggregate([("messages", "sum"), ("size", "sum")]).to_pylist()
        ):
            t = topics[row["topic"]]
            t.window_messages += row["messages_sum"]
            t.window_bytes += row["size_sum"]


def _count_loads(topics: dict[str, _Topic], loads: pa.RecordBatch) -> None:
    """Entries a broker found in storage (``load`` rows of ledgers not seen before) count as the
    topic's, before what it publishes: a backlog already there when the trace starts. A ledger
    seen again (a topic loaded by its next owner) is not counted twice."""
    columns = [loads.column(c).to_pylist() for c in ("topic", "ledger_id", "count", "messages")]
    for topic, ledger, count, messages in zip(*columns, strict=True):
        t = topics.setdefault(topic, _Topic())
        if ledger is None or ledger in t.ledgers:
            continue
        n = max(0, count or 0)
        t.ledgers[ledger] = [n, t.entries]
        t.entries += n
        t.loaded += n
        t.messages += n * max(1, messages or 1)


def side_by_side(stats: _stats.BrokerStats, generated: _stats.BrokerStats) -> list[dict[str, Any]]:
    """One row per topic and per subscription: the stats' publish or dispatch rate and backlog
    beside the generated trace's (``None`` where the trace has no such topic or subscription)."""
    gen_topics = {t.name: t for t in generated.topics}
    rows = []
    for t in stats.topics:
        g = gen_topics.get(t.name)
        rows.append(
            {
                "topic": t.name,
                "subscription": None,
                "stats_rate": t.msg_rate_in,
                "generated_rate": g.msg_rate_in if g else None,
                "stats_backlog": None,
                "generated_backlog": None,
            }
        )
        gen_subs = {s.name: s for s in g.subscriptions} if g else {}
        for s in t.subscriptions:
            gs = gen_subs.get(s.name)
            rows.append(
                {
                    "topic": t.name,
                    "subscription": s.name,
                    "stats_rate": s.msg_rate_out,
                    "generated_rate": gs.msg_rate_out if gs else None,
                    "stats_backlog": s.msg_backlog,
                    "generated_backlog": gs.msg_backlog if gs else None,
                }
            )
    return rows


def subscriptions_of(spec: Mapping[str, Any]) -> Callable[[str, str], tuple[str, int]]:
    """A spec's subscriptions as :func:`summarize` takes them: (topic, cursor) -> (type, consumers).
    A ``topicDetails`` spec lists them; a homogeneous spec's ``sub-N`` cursors all have its
    ``subscriptionType`` and ``consumerPerSubscription`` (catch-up readers are Exclusive readers)."""
    settings = _workload.normalize(spec)
    details = settings.get("topic_details")
    if details:
        known = {
            (t["name"], s["name"]): (s.get("type", "Exclusive"), len(s.get("consumer_rates", ())))
            for t in details
            for s in t.get("subscriptions", ())
        }
        return lambda topic, cursor: known.get((topic, cursor), ("Exclusive", 1))
    kind = str(settings.get("subscription_type", "Exclusive"))
    n = int(settings.get("consumer_per_subscription", 1))
    return lambda topic, cursor: ("Exclusive", 1) if cursor.startswith("catch-up-") else (kind, n)


def dump(spec: Any, config: Any, *, seed: int = 1) -> tuple[_stats.BrokerStats, _metrics.CacheMetrics]:
    """A synthetic broker: what a broker running ``spec`` (a scenario, file or mapping) with the
    cache ``config`` would report: its stats dump (:func:`summarize` over the test window) and its
    cache metrics (hits and misses a second over the window, from a replay; byte rates from the
    replay's mean entry size; ``used_size`` the cache's bytes at the end)."""
    settings = _workload.resolve(spec)
    window = window_seconds(settings)
    summary, series = _replay.replay(lambda: _workload.stream(settings, seed), [config], with_timeseries=True)
    seconds = window[1] - window[0]
    reads, hits = window_counts(series, window)
    row = summary.to_pylist()[0]
    entry = row["read_bytes"] / row["entries_read"] if row["entries_read"] else 0.0
    inside = series.filter(pc.less(series.column("second"), window[1]))
    stats = summarize(
        lambda: _workload.stream(settings, seed),
        since_us=window[0] * 1_000_000,
        until_us=window[1] * 1_000_000,
        subscription=subscriptions_of(settings),
    )
    metrics = _metrics.CacheMetrics(
        hits_rate=hits / seconds,
        misses_rate=(reads - hits) / seconds,
        hits_throughput=hits * entry / seconds,
        misses_throughput=(reads - hits) * entry / seconds,
        used_size=float(inside.column("cache_bytes")[-1].as_py()) if inside.num_rows else 0.0,
        evictions=None,
        managed_ledgers=float(len(stats.topics)),
    )  # a managed ledger a topic, as a broker opens them
    return stats, metrics
