"""A Pulsar broker's topic stats, read from the JSON that ``pulsar-admin`` and a broker print.

Usage::

    import ledgercache as lc

    stats = lc.broker_stats.read("stats.json")      # or a mapping already parsed
    for topic in stats.topics:
        print(topic.name, topic.msg_rate_in, [s.type for s in topic.subscriptions])
    for note in stats.notes:                         # what the reader skipped, repaired, split or named
        print("note:", note)
    lc.broker_stats.write(stats, "copy.json")       # the broker-stats topics dump shape again

:func:`read` takes a path to a file or a mapping, and recognises these shapes by their structure,
as Pulsar 1.x to 4.x print them (Pulsar source cited at the mirror of apache/pulsar used for this
module, commit ``00a6badafc62c25254f1fa93a04da513c3fc9b66``; older releases from the pastes in
``tests/data/broker/README.md``):

- **The broker's topic stats dump**: ``pulsar-admin broker-stats topics`` (``broker-stats
  destinations`` before 2.0), REST ``GET /admin/v2/broker-stats/topics``
  (``BrokerStatsBase.getTopics2``, which streams the buffer ``PulsarStats.updateStats`` last built).
  The nesting is ``{namespace: {bundle range: {"persistent": {topic: {...}}, "non-persistent":
  {...}}}}``; each persistent topic's object is written by ``PersistentTopic.updateRates`` into a
  ``StatsOutputStream``, its consumers and publishers by ``StreamingStats.writeConsumerStats`` and
  ``StreamingStats.writePublisherStats``. ``bundle`` is the bundle range key
  (``NamespaceBundle.getBundleRange``, e.g. ``0x00000000_0x40000000``); namespaces may be 1.x's
  ``property/cluster/namespace``. A broker that owns no topic writes ``{}``: that reads as no
  topics.
- **One topic's stats**: ``pulsar-admin topics stats`` (``TopicStatsImpl`` with
  ``SubscriptionStatsImpl``, ``ConsumerStatsImpl``, ``PublisherStatsImpl``, serialised by
  Jackson under their field names). That output does not name its topic: give ``name=``, or read
  it from a file and the topic is named from the file name (``orders.stats.json``,
  ``orders.json`` and ``orders.txt`` -> ``orders``; noted). A mapping ``{"persistent://t/n/topic":
  stats, ...}`` names its topics itself (a value there needs only one topic field, e.g. a trimmed
  paste's ``subscriptions``).
- **Several documents one after another**, as a shell loop writes them (``for t in ...; do
  pulsar-admin topics stats $t; done > f``): every document is read, of any shape here. Unnamed
  ones are named ``NAME-0``, ``NAME-1``, ... after the file (or ``name=``), unless a line before a
  document holds a topic name (``echo $t`` in the loop, a shell's ``set -x`` trace, a pasted
  command line): then that name is the document's. Other lines of text between documents (an
  error ``pulsar-admin`` printed with ``2>&1``) are skipped with a note. A topic in several
  documents is kept once, as the last says, where it first appeared (noted).
- **A partitioned topic's stats**: ``pulsar-admin topics partitioned-stats``
  (``PartitionedTopicStatsImpl``: the aggregate over partitions at the top level, ``metadata`` with
  the partition count, and ``partitions`` ``{partition name: TopicStats}``, filled only with
  ``--per-partition``, always before 2.4). With partitions, each is a topic of its own and the
  aggregate is not read (a count differing from ``metadata.partitions`` is noted: the broker leaves
  out partitions whose stats failed). Without, the aggregate is **split evenly** into
  ``metadata.partitions`` topics ``NAME-partition-0`` ... (noted), undoing
  ``PersistentTopicsBase.internalGetPartitionedStats``' sum (``TopicStatsImpl.add``): each
  partition gets 1/n of every rate, throughput, size and backlog (counts split so they sum
  exactly), every subscription with its type, and as many publishers and consumers as the
  aggregate lists (it merges them index by index, or by name, so it lists what one partition has),
  each consumer at 1/n of its rates. ``SubscriptionStatsImpl.add`` appends instead of merging when
  partitions list unequal numbers of consumers: consumers under one name several times are merged
  back by name (noted). The aggregate's ``averageMsgSize`` cannot be trusted (an unweighted mean
  over partitions, a sum before 2.2, apache/pulsar#2637): where it is not ``msgThroughputIn /
  msgRateIn`` (within 1% and 1 byte), the message size is taken from the rates (noted, with both
  numbers). A ``metadata.partitions`` that is not a count of at least 1 leaves the aggregate as one
  topic (noted); more than :data:`MAX_PARTITIONS`, or a split making over 1,000,000 topic,
  subscription and consumer stats, is an error asking for ``--per-partition``.

Partitions are separate topics everywhere (``persistent://t/n/orders-partition-0``, ...), as a
broker sees them.

**Non-persistent topics** bypass the managed ledger, so its entry cache never sees their messages:
they are skipped, with one note counting them. They are told apart by name
(``non-persistent://``; the dump's ``"non-persistent"`` sections, and the ``"persistent"`` section
before 2.0, apache/pulsar#1235) and by their stats: ``NonPersistentTopicStatsImpl`` (and
``NonPersistentPartitionedTopicStatsImpl``) write ``msgDropRate`` on the topic, its publishers and
its subscriptions, which persistent stats never have. (``pulsar-admin topics stats`` of 2.7 lost
``msgDropRate``, apache/pulsar#10495: its unnamed output of a non-persistent topic reads as
persistent.) An input holding only non-persistent topics is an error: nothing the entry cache sees.

**Not stats**: ``pulsar-admin topics stats-internal`` and ``partitioned-stats-internal``
(``PersistentTopicInternalStats``: ``entriesAddedCounter``, ``ledgers``, ``cursors``, ...;
``PartitionedTopicInternalStats``: ``metadata`` and such ``partitions``) hold no rates: each is
refused with one line naming what it is and the command to run instead (``pulsar-admin topics
stats``, ``topics partitioned-stats --per-partition``, ``broker-stats topics``). So is JSON of
none of the shapes above (one error naming the file, in a file of several documents which one
and its line, and the shapes expected), a file larger than :data:`MAX_FILE_BYTES`, one that is not
UTF-8 text, JSON cut short or broken (with the line and column), and a file with no JSON document.

Fields read (JSON name -> attribute) and their units. Rates and throughputs are not instantaneous:
the broker computes them as averages over its last stats interval (``statsUpdateFrequencyInSecs``,
60 s by default; each ``Producer.updateRates`` / ``Consumer.updateRates`` divides the counts since
the previous update by the time elapsed), and the dump writes them with three decimals, truncated
(``SimpleTextOutputStream.write(double)``).

- Topic: ``msgRateIn`` (msg/s), ``msgThroughputIn`` (bytes/s), ``averageMsgSize`` (bytes;
  ``msgThroughputIn / msgRateIn`` when missing), ``msgRateOut`` (msg/s, summed over
  subscriptions), ``msgThroughputOut`` (bytes/s), ``storageSize`` (bytes in the managed ledger),
  ``backlogSize`` (bytes, estimated from the slowest cursor), ``publishers`` (a count: the dump's
  ``producerCount``, which counts local producers even when the broker leaves the ``publishers``
  list empty (``exposePublisherStats=false``); else the length of ``publishers``),
  ``deduplicationStatus`` (-> ``deduplication``: ``"Enabled"`` or ``"Recovering"`` True,
  ``"Disabled"`` or ``"Removing"`` False, absent None; another value is noted and read as None),
  ``replication`` (-> ``replication_clusters``: the remote clusters' names, its keys, sorted;
  ``PersistentTopic.getStats`` fills it from the topic's replicators; one whose ``connected`` is
  false is left out, noted: its cursor is inactive; in a partitioned-stats aggregate, where false
  means any partition's, or any at all before 2.10.5 / 2.11.2 (apache/pulsar#19248), it is kept,
  noted).
- Subscription (``subscriptions``, a mapping by name): ``type`` (``"Exclusive"``,
  ``"Failover"``, ``"Shared"``, ``"Key_Shared"``; ``None`` where Pulsar writes ``"None"``, a
  subscription without a dispatcher, i.e. no consumer since the topic was loaded), ``msgRateOut``,
  ``msgThroughputOut``, ``msgBacklog`` (**entries**, not messages, despite the name:
  ``ManagedCursorImpl.getNumberOfEntriesInBacklog``; with producer batching one entry holds many
  messages), ``unackedMessages`` (messages; Pulsar writes it only for Shared and Key_Shared),
  ``msgRateRedeliver`` (msg/s), ``consumers``.
- Consumer (``consumers``, a list): ``consumerName``, ``msgRateOut``, ``msgThroughputOut``,
  ``availablePermits`` (messages the consumer may still receive; ``None`` when absent; may be
  negative: a batch is dispatched whole and can overdraw the permits), ``unackedMessages``,
  ``msgRateRedeliver``.

Missing and ``null`` fields default to 0 (counts, rates), ``""`` (a consumer's name), ``()``
(subscriptions, consumers), ``None`` (``availablePermits``, a subscription's type). Unknown fields
are ignored: Pulsar adds fields in most releases.

**One bad counter never refuses a file.** Pulsar has printed negative ``unackedMessages`` and
``msgBacklog`` (apache/pulsar#759, #5755, #6510), Jackson writes a NaN or infinite double as the
string ``"NaN"`` / ``"Infinity"``, and hand-edited files hold anything. A value the reader cannot
take is repaired and noted: a negative rate or count (but ``availablePermits``) is clamped to 0; a
non-finite number (``NaN``, ``Infinity``, either as a string, or an integer of over 40 digits) and
a value of the wrong type (a string, a boolean, an object) is read as its default (0; unknown for
``availablePermits``); a fractional count is rounded; a count outside a Java ``long`` is read as
its default; an unknown subscription ``type`` is read as ``None``; a ``subscriptions`` that is not
an object, or ``consumers`` / ``publishers`` not a list, as none; a topic, subscription or
consumer entry that is not an object is skipped.

**Notes** (``BrokerStats.notes``, a tuple of lines an operator reads, in the order first met): each
repair above, merged by field and repair over the whole input with a count and the first example
(``unackedMessages < 0 clamped to 0 in 12 subscriptions (e.g. persistent://t/n/a sub1: -5)``; one
occurrence reads ``... in subscription persistent://t/n/a sub1: -5``); skipped non-persistent
topics; skipped lines of text; topics named after the file; topics given more than once; a
partitioned aggregate split, its ``averageMsgSize`` replaced, its consumers merged, its partition
count missing; per-partition stats with partitions missing; a topic's ``msgRateOut`` above its
subscriptions' and replicators' (readers missing from the file: a paste cut short); a replicator
not connected, or printed so by a partitioned aggregate. Notes are commentary, not data:
``BrokerStats`` equality and hash ignore them, :func:`to_dump` does not write them, and a dump read
back has none.

:func:`to_dump` and :func:`write` are the inverse: the broker-stats topics dump shape, holding the
fields above. ``read(to_dump(stats)) == stats`` whenever every topic has a bundle (topics read from
``topics stats`` output have ``bundle=None`` and are written under the whole range
``0x00000000_0xffffffff``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Union

from ._files import decode_json_at, read_text
from .errors import InvalidArgumentError

__all__ = [
    "BrokerStats",
    "ConsumerStats",
    "FULL_BUNDLE",
    "MAX_FILE_BYTES",
    "MAX_PARTITIONS",
    "SUBSCRIPTION_TYPES",
    "SubscriptionStats",
    "TopicStats",
    "read",
    "to_dump",
    "write",
]

#: The largest stats file :func:`read` opens (256 MiB); a broker with 10,000 topics writes tens of MiB.
MAX_FILE_BYTES = 256 * 1024 * 1024

#: The most partitions :func:`read` splits a partitioned topic's aggregate into (the lab's
#: ``PartitionedProducer`` makes no more either): ``metadata.partitions`` is one number in the file,
#: and the topics it asks for must stay bounded by the file's size.
MAX_PARTITIONS = 100_000

# The most topic, subscription and consumer stats a split aggregate makes (a few seconds' work).
_MAX_SPLIT_OBJECTS = 1_000_000

#: Subscription types as ``PersistentSubscription.getTypeString`` writes them.
SUBSCRIPTION_TYPES = ("Exclusive", "Failover", "Shared", "Key_Shared")

#: The bundle range :func:`to_dump` writes topics without a bundle under: a namespace's whole hash range.
FULL_BUNDLE = "0x00000000_0xffffffff"

Source = Union[str, "os.PathLike[str]", Mapping[str, Any]]

# MessageDeduplication.Status values with the pulsar.dedup cursor open, and without.
_DEDUP_OPEN = frozenset({"Enabled", "Recovering"})
_DEDUP_CLOSED = frozenset({"Disabled", "Removing"})

# Java's long: no counter Pulsar prints lies outside it.
_LONG_MAX = (1 << 63) - 1
_LONG_MIN = -(1 << 63)


@dataclass(frozen=True)
class ConsumerStats:
    """One consumer of a subscription. Rates in messages/s, throughputs in bytes/s."""

    name: str = ""
    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    available_permits: int | None = None
    unacked_messages: int = 0
    msg_rate_redeliver: float = 0.0


@dataclass(frozen=True)
class SubscriptionStats:
    """One subscription of a topic. ``msg_backlog`` counts entries (see the module's docs)."""

    name: str
    type: str | None = None
    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    msg_backlog: int = 0
    unacked_messages: int = 0
    msg_rate_redeliver: float = 0.0
    consumers: tuple[ConsumerStats, ...] = ()


@dataclass(frozen=True)
class TopicStats:
    """One persistent topic (a partition counts as a topic). ``namespace`` is ``tenant/namespace``
    (``""`` for a topic named only by a file name); ``bundle`` the bundle range, ``None`` outside
    the broker's dump. Rates in messages/s, throughputs in bytes/s, sizes in bytes;
    ``publishers`` is a count."""

    name: str
    namespace: str = ""
    bundle: str | None = None
    msg_rate_in: float = 0.0
    msg_throughput_in: float = 0.0
    average_msg_size: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    storage_size: int = 0
    backlog_size: int = 0
    publishers: int = 0
    subscriptions: tuple[SubscriptionStats, ...] = ()
    #: ``deduplicationStatus``: True while the ``pulsar.dedup`` cursor is open, None when unknown.
    deduplication: bool | None = None
    #: The remote clusters of ``replication`` with a connected replicator (each a
    #: ``pulsar.repl.<cluster>`` cursor), sorted.
    replication_clusters: tuple[str, ...] = ()


@dataclass(frozen=True)
class BrokerStats:
    """Every persistent topic of one stats input, in the input's order, and the reader's notes:
    what it skipped, clamped, split or named, in words for the operator (the module's docs list
    them). Notes are commentary, not data: ``==`` and ``hash`` ignore them, so a copy written by
    :func:`to_dump` and read back equals the original although it reads without notes."""

    topics: tuple[TopicStats, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)
    #: The file the stats were read from (None for a mapping), for messages that name it.
    source: str | None = field(default=None, compare=False)


# ---------------------------------------------------------------------------------------------
# notes


class _Notes:
    """Notes merged by what happened: the same repair in 12 subscriptions is one line with the
    count and the first example, so a broker with 10,000 topics does not print 10,000 lines."""

    def __init__(self) -> None:
        self._merged: dict[tuple[str, str], list[Any]] = {}  # (what, unit) -> [count, example]
        self._order: list[tuple[str, str] | str] = []

    def add(self, what: str, unit: str, example: str) -> None:
        key = (what, unit)
        entry = self._merged.get(key)
        if entry is None:
            self._merged[key] = [1, example]
            self._order.append(key)
        else:
            entry[0] += 1

    def say(self, text: str) -> None:
        if text not in self._order:
            self._order.append(text)

    def lines(self) -> tuple[str, ...]:
        out = []
        for key in self._order:
            if isinstance(key, str):
                out.append(key)
                continue
            what, unit = key
            count, example = self._merged[key]
            if count == 1:
                out.append(f"{what} in {unit} {example}")
            else:
                out.append(f"{what} in {count} {_plural(unit)} (e.g. {example})")
        return tuple(out)


def _plural(unit: str) -> str:
    return unit[:-1] + "ies" if unit.endswith("y") else unit + "s"


def _counted(n: int, unit: str) -> str:
    return f"{n:,} {unit if n == 1 else _plural(unit)}"


# ---------------------------------------------------------------------------------------------
# values


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# Jackson writes a double's NaN and infinities as these strings (WRITE_NAN_AS_STRINGS is on by default).
_NON_FINITE = ("NaN", "Infinity", "-Infinity", "+Infinity")


class _Reader:
    """Reads values field by field, repairing what one bad counter can be repaired to and noting it."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.notes = _Notes()
        self.skipped_non_persistent: list[str] = []

    def _number(self, obj: Mapping[str, Any], key: str, unit: str, where: str, repaired_to: str) -> float | int | None:
        """The value as a finite number, or None after noting why it is not one."""
        value = obj[key]
        if isinstance(value, str) and value.strip() in _NON_FINITE:
            self.notes.add(f"{key} not finite ({value}), read as {repaired_to},", unit, where)
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.notes.add(f"{key} not a number, read as {repaired_to},", unit, f"{where}: {_kind(value)}")
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.notes.add(f"{key} not finite ({value}), read as {repaired_to},", unit, where)
            return None
        return value

    def rate(self, obj: Mapping[str, Any], key: str, unit: str, where: str) -> float:
        if obj.get(key) is None:
            return 0.0
        value = self._number(obj, key, unit, where, "0")
        if value is None:
            return 0.0
        try:
            value = float(value)
        except OverflowError:  # an integer too large for a double, from a mapping
            self.notes.add(f"{key} not finite, read as 0,", unit, where)
            return 0.0
        if value < 0:
            self.notes.add(f"{key} < 0 clamped to 0", unit, f"{where}: {value:g}")
            return 0.0
        return value

    def container(self, obj: Mapping[str, Any], key: str, kind: type, unit: str, where: str) -> Any:
        """``obj[key]`` when it is a JSON list (``kind`` list) or object (``Mapping``); empty, with a
        note, when it is anything else; empty when absent."""
        value = obj.get(key)
        if value is None:
            return [] if kind is list else {}
        if not isinstance(value, kind):
            shape = "list" if kind is list else "object"
            self.notes.add(f"{key} not a JSON {shape}, read as none,", unit, f"{where}: {_kind(value)}")
            return [] if kind is list else {}
        return value

    def count(
        self, obj: Mapping[str, Any], key: str, unit: str, where: str, *, signed: bool = False, default: int | None = 0
    ) -> int | None:
        if obj.get(key) is None:
            return default
        repaired_to = "unknown" if default is None else str(default)
        value = self._number(obj, key, unit, where, repaired_to)
        if value is None:
            return default
        if isinstance(value, float):
            if not value.is_integer():
                self.notes.add(f"{key} not a whole number, rounded", unit, f"{where}: {value:g}")
            value = round(value)
        if not _LONG_MIN <= value <= _LONG_MAX:
            self.notes.add(f"{key} beyond a Java long, read as {repaired_to},", unit, f"{where}: {_kind(value)}")
            return default
        if value < 0 and not signed:
            self.notes.add(f"{key} < 0 clamped to 0", unit, f"{where}: {value}")
            return 0
        return value

    # -- objects ----------------------------------------------------------------------------------

    def consumer(self, raw: Any, where: str, index: int) -> ConsumerStats | None:
        if not isinstance(raw, Mapping):
            self.notes.add("consumer entry not a JSON object, skipped", "subscription", f"{where}: {_kind(raw)}")
            return None
        name = raw.get("consumerName")
        if name is None:
            name = ""
        elif not isinstance(name, str):
            self.notes.add('consumerName not a string, read as ""', "subscription", f"{where}: {_kind(name)}")
            name = ""
        at = f"{where} consumer {name or f'#{index}'}"
        return ConsumerStats(
            name=name,
            msg_rate_out=self.rate(raw, "msgRateOut", "consumer", at),
            msg_throughput_out=self.rate(raw, "msgThroughputOut", "consumer", at),
            # A batch is dispatched whole and can overdraw the permits: negative is legitimate.
            available_permits=self.count(raw, "availablePermits", "consumer", at, signed=True, default=None),
            unacked_messages=self.count(raw, "unackedMessages", "consumer", at),  # type: ignore[arg-type]
            msg_rate_redeliver=self.rate(raw, "msgRateRedeliver", "consumer", at),
        )

    def subscription(self, name: str, raw: Any, topic: str) -> SubscriptionStats | None:
        where = f"{topic} {name}"
        if not isinstance(raw, Mapping):
            self.notes.add("subscription not a JSON object, skipped", "topic", f"{where}: {_kind(raw)}")
            return None
        sub_type = raw.get("type")
        if sub_type in (None, "None"):
            sub_type = None
        elif sub_type not in SUBSCRIPTION_TYPES:
            self.notes.add(
                f"type not one of {', '.join(SUBSCRIPTION_TYPES)}, read as None (simulated as Exclusive),",
                "subscription",
                f"{where}: {_kind(sub_type)}",
            )
            sub_type = None
        consumers = self.container(raw, "consumers", list, "subscription", where)
        read = (self.consumer(c, where, i) for i, c in enumerate(consumers))
        return SubscriptionStats(
            name=name,
            type=sub_type,
            msg_rate_out=self.rate(raw, "msgRateOut", "subscription", where),
            msg_throughput_out=self.rate(raw, "msgThroughputOut", "subscription", where),
            msg_backlog=self.count(raw, "msgBacklog", "subscription", where),  # type: ignore[arg-type]
            unacked_messages=self.count(raw, "unackedMessages", "subscription", where),  # type: ignore[arg-type]
            msg_rate_redeliver=self.rate(raw, "msgRateRedeliver", "subscription", where),
            consumers=tuple(c for c in read if c is not None),
        )

    def topic(
        self, name: str, raw: Any, *, namespace: str | None, bundle: str | None, aggregate: bool = False
    ) -> TopicStats | None:
        if not isinstance(raw, Mapping):
            self.notes.add("topic stats not a JSON object, skipped,", "topic", f"{name}: {_kind(raw)}")
            return None
        publishers = self.container(raw, "publishers", list, "topic", name)
        count = self.count(raw, "producerCount", "topic", name, default=None)
        subs = self.container(raw, "subscriptions", Mapping, "topic", name)
        rate_in = self.rate(raw, "msgRateIn", "topic", name)
        throughput_in = self.rate(raw, "msgThroughputIn", "topic", name)
        if raw.get("averageMsgSize") is not None:
            average = self.rate(raw, "averageMsgSize", "topic", name)
        else:  # what PersistentTopic.updateRates computes
            average = throughput_in / rate_in if rate_in > 0 else 0.0
        read = (self.subscription(str(k), v, name) for k, v in subs.items())
        replication = self.container(raw, "replication", Mapping, "topic", name)
        topic = TopicStats(
            name=name,
            namespace=_namespace_of(name) if namespace is None else namespace,
            bundle=bundle,
            msg_rate_in=rate_in,
            msg_throughput_in=throughput_in,
            average_msg_size=average,
            msg_rate_out=self.rate(raw, "msgRateOut", "topic", name),
            msg_throughput_out=self.rate(raw, "msgThroughputOut", "topic", name),
            storage_size=self.count(raw, "storageSize", "topic", name),  # type: ignore[arg-type]
            backlog_size=self.count(raw, "backlogSize", "topic", name),  # type: ignore[arg-type]
            publishers=len(publishers) if count is None else count,
            subscriptions=tuple(s for s in read if s is not None),
            deduplication=self.deduplication(raw, name),
            replication_clusters=self.replication_clusters(replication, name, aggregate),
        )
        self.unaccounted_rate_out(topic, replication)
        return topic

    def unaccounted_rate_out(self, topic: TopicStats, replication: Mapping[str, Any]) -> None:
        """A topic's ``msgRateOut`` is its subscriptions' plus its replicators' (``PersistentTopic
        .getStats``): one well above theirs says readers are missing from the file (a paste cut
        short, a subscription skipped), whose reads the workload cannot have."""
        # A subscription's rate is its consumers' (one repaired to 0 is not a reader missing).
        known = sum(max(s.msg_rate_out, sum(c.msg_rate_out for c in s.consumers)) for s in topic.subscriptions)
        for r in replication.values():
            value = r.get("msgRateOut") if isinstance(r, Mapping) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                known += max(0.0, float(value))
        rate_out = topic.msg_rate_out
        missing = rate_out - known
        if missing > 1.0 and missing > 0.01 * rate_out:
            self.notes.add(
                "msgRateOut of the topic above its subscriptions' and replicators' (PersistentTopic."
                "getStats adds them up): readers missing from the file, their reads not simulated,",
                "topic",
                f"{topic.name}: {missing:,.1f} msg/s of {rate_out:,.1f}",
            )

    def replication_clusters(self, replication: Mapping[str, Any], where: str, aggregate: bool) -> tuple[str, ...]:
        """The clusters of ``replication`` whose replicator is connected: a disconnected one's cursor
        is inactive and reads nothing (``PersistentReplicator.updateCursorState``), so it is left
        out, noted; ``connected`` absent (before 2.x printed it) counts as connected. In a
        partitioned-stats aggregate ``connected`` is false when any partition's is
        (``ReplicatorStatsImpl.add``), and was false always before 2.10.5 / 2.11.2
        (apache/pulsar#19248): it says nothing of most partitions, so the replicator is kept, noted."""
        clusters = []
        for cluster, raw in replication.items():
            if not str(cluster).strip():
                # A cluster has a name (a replicator is keyed by it): a blank key is a broken dump.
                self.notes.add("replication cluster without a name, skipped,", "topic", where)
                continue
            if aggregate and isinstance(raw, Mapping) and raw.get("connected") is False:
                self.notes.add(
                    "replicator connected false in a partitioned-stats aggregate (false when any "
                    "partition's is, and always before 2.10.5 / 2.11.2, apache/pulsar#19248): simulated "
                    "as connected on every partition (run partitioned-stats --per-partition to see "
                    "which are),",
                    "partitioned topic",
                    f"{where} {cluster}",
                )
            elif isinstance(raw, Mapping) and raw.get("connected") is False:
                self.notes.add(
                    "replicator not connected (its cursor is inactive and reads nothing), not simulated,",
                    "topic",
                    f"{where} {cluster}",
                )
                continue
            clusters.append(str(cluster))
        return tuple(sorted(clusters))

    def deduplication(self, raw: Mapping[str, Any], where: str) -> bool | None:
        """``deduplicationStatus`` (``MessageDeduplication.Status``, 2.x-4.x): ``Enabled`` and
        ``Recovering`` have the cursor open, ``Disabled`` and ``Removing`` not; ``Initialized`` (not
        checked yet), ``Failed`` and anything else are unknown (noted)."""
        value = raw.get("deduplicationStatus")
        if value is None:
            return None
        # Not a string (a list, a mapping): unknown like any other odd value; `in` a frozenset
        # would raise TypeError on an unhashable one.
        if isinstance(value, str) and value in _DEDUP_OPEN:
            return True
        if isinstance(value, str) and value in _DEDUP_CLOSED:
            return False
        self.notes.add(
            "deduplicationStatus not Enabled or Disabled, read as unknown (the broker's setting decides),",
            "topic",
            f"{where}: {value if isinstance(value, str) else _kind(value)}",
        )
        return None

    def skip_non_persistent(self, name: str) -> None:
        self.skipped_non_persistent.append(name)


def _namespace_of(name: str) -> str:
    """``persistent://tenant/ns/topic`` -> ``tenant/ns`` (also the older ``tenant/cluster/ns``)."""
    if "://" not in name:
        return ""
    rest = name.split("://", 1)[1]
    return rest.rsplit("/", 1)[0] if "/" in rest else ""


# ---------------------------------------------------------------------------------------------
# shapes

_TOPIC_KEYS = ("msgRateIn", "msgThroughputIn", "subscriptions", "publishers", "storageSize", "msgRateOut")
_SECTIONS = {"persistent", "non-persistent"}
# ManagedLedgerInternalStats' own fields: a stats-internal document has them and no rates.
_INTERNAL_KEYS = (
    "entriesAddedCounter",
    "numberOfEntries",
    "currentLedgerEntries",
    "lastConfirmedEntry",
    "waitingCursorsCount",
)


def _named_non_persistent(name: str) -> bool:
    return name.startswith("non-persistent://")


def _looks_like_topic(obj: Any) -> bool:
    return isinstance(obj, Mapping) and sum(k in obj for k in _TOPIC_KEYS) >= 2


def _is_non_persistent_stats(obj: Mapping[str, Any]) -> bool:
    """NonPersistentTopicStatsImpl (and its partitioned form) adds ``msgDropRate`` to the topic, its
    subscriptions and its publishers; persistent stats have it nowhere. (``pulsar-admin topics
    stats`` of 2.7 dropped it everywhere, apache/pulsar#10495: such output passes as persistent
    unless its name says otherwise.)"""
    if "msgDropRate" in obj:
        return True
    subs = obj.get("subscriptions")
    if isinstance(subs, Mapping) and any(isinstance(s, Mapping) and "msgDropRate" in s for s in subs.values()):
        return True
    pubs = obj.get("publishers")
    return isinstance(pubs, list) and any(isinstance(p, Mapping) and "msgDropRate" in p for p in pubs)


def _looks_like_internal(obj: Any) -> bool:
    return isinstance(obj, Mapping) and (
        sum(k in obj for k in _INTERNAL_KEYS) >= 2
        or (isinstance(obj.get("ledgers"), list) and isinstance(obj.get("cursors"), Mapping))
    )


def _looks_like_partitioned(obj: Any) -> bool:
    return (
        isinstance(obj, Mapping)
        and isinstance(obj.get("metadata"), Mapping)
        and isinstance(obj.get("partitions"), Mapping)
    )


def _looks_like_partitioned_internal(obj: Any) -> bool:
    # PartitionedTopicInternalStats holds only metadata and partitions: no rates at its top level.
    return (
        _looks_like_partitioned(obj)
        and not any(k in obj for k in _TOPIC_KEYS)
        and all(_looks_like_internal(p) for p in obj["partitions"].values())
    )


def _looks_like_dump(obj: Mapping[str, Any]) -> bool:
    return all(
        isinstance(bundles, Mapping)
        and all(isinstance(sections, Mapping) and set(sections) <= _SECTIONS for sections in bundles.values())
        for bundles in obj.values()
    )


def _looks_like_named_topics(obj: Mapping[str, Any]) -> bool:
    # The names say these are topics: one topic field is enough (a trimmed paste may keep only
    # its subscriptions).
    return bool(obj) and all(
        isinstance(k, str)
        and (k.startswith("persistent://") or _named_non_persistent(k))
        and isinstance(v, Mapping)
        and any(key in v for key in (*_TOPIC_KEYS, "metadata", *_INTERNAL_KEYS))
        for k, v in obj.items()
    )


_EXPECTED = (
    "expected one of: the broker's topic stats dump (pulsar-admin broker-stats topics: "
    '{namespace: {bundle: {"persistent": {topic: stats}}}}), one topic\'s stats (pulsar-admin '
    'topics stats, one or several one after another, or a mapping {"persistent://tenant/ns/topic": '
    "stats}), or a partitioned topic's stats (pulsar-admin topics partitioned-stats, with or without "
    "--per-partition)"
)

_INTERNAL = (
    "this is pulsar-admin topics stats-internal output (PersistentTopicInternalStats: ledgers and cursors, "
    "no rates), which cannot say what the cache serves; run pulsar-admin topics stats TOPIC instead "
    "(pulsar-admin topics partitioned-stats --per-partition TOPIC for a partitioned topic, or pulsar-admin "
    "broker-stats topics for every topic of a broker)"
)
_PARTITIONED_INTERNAL = (
    "this is pulsar-admin topics partitioned-stats-internal output (PartitionedTopicInternalStats: "
    "ledgers and cursors per partition, no rates), which cannot say what the cache serves; "
    "run pulsar-admin topics partitioned-stats --per-partition TOPIC instead (or "
    "pulsar-admin broker-stats topics for every topic of a broker)"
)


# ---------------------------------------------------------------------------------------------
# documents


@dataclass
class _Document:
    value: Any
    line: int
    header: str | None = None  # a topic name on the text line(s) before it


class _Unnamed(Exception):
    """A document names none of its topics and the caller gave no name."""


def _from_dump(r: _Reader, obj: Mapping[str, Any]) -> list[TopicStats]:
    topics = []
    for namespace, bundles in obj.items():
        for bundle, sections in bundles.items():
            persistent = sections.get("persistent", {})
            if not isinstance(persistent, Mapping):
                raise InvalidArgumentError(
                    f"{r.label}: {namespace}.{bundle}.persistent: expected a JSON object "
                    f"of topics, got {_kind(persistent)}"
                )
            for name, raw in persistent.items():
                # Before Pulsar 2.0 (apache/pulsar#1235) non-persistent topics were listed here too.
                if _named_non_persistent(name) or (isinstance(raw, Mapping) and _is_non_persistent_stats(raw)):
                    r.skip_non_persistent(name)
                    continue
                t = r.topic(name, raw, namespace=namespace, bundle=bundle)
                if t is not None:
                    topics.append(t)
            non_persistent = sections.get("non-persistent", {})
            if isinstance(non_persistent, Mapping):
                for name in non_persistent:
                    r.skip_non_persistent(name)
    return topics


def _split_count(total: int, n: int, i: int) -> int:
    """Partition ``i``'s share of ``total`` over ``n``: the shares sum to ``total`` exactly."""
    sign = -1 if total < 0 else 1
    q, rem = divmod(abs(total), n)
    return sign * (q + (1 if i < rem else 0))


def _merge_repeated_consumers(r: _Reader, topic: str, sub: SubscriptionStats) -> SubscriptionStats:
    """``SubscriptionStatsImpl.add`` sums consumer lists index by index when partitions list as many
    consumers as the aggregate has, and appends copies when they do not, so unequal lists come out
    concatenated: one consumer under its name several times. Merge those back, summing."""
    names = [c.name for c in sub.consumers if c.name]
    if len(names) == len(set(names)):
        return sub
    merged: dict[str, ConsumerStats] = {}
    order: list[str | int] = []
    for i, c in enumerate(sub.consumers):
        key: str | int = c.name if c.name else i
        if key not in merged:
            merged[key] = c  # type: ignore[index]
            order.append(key)
            continue
        m = merged[key]  # type: ignore[index]
        permits = (
            None
            if m.available_permits is None and c.available_permits is None
            else (m.available_permits or 0) + (c.available_permits or 0)
        )
        merged[key] = replace(
            m,
            msg_rate_out=m.msg_rate_out + c.msg_rate_out,  # type: ignore[index]
            msg_throughput_out=m.msg_throughput_out + c.msg_throughput_out,
            available_permits=permits,
            unacked_messages=m.unacked_messages + c.unacked_messages,
            msg_rate_redeliver=m.msg_rate_redeliver + c.msg_rate_redeliver,
        )
    r.notes.add(
        "consumers listed under one name several times (partitions with unequal consumer lists are "
        "concatenated by Pulsar's aggregate), merged by name,",
        "subscription",
        f"{topic} {sub.name}",
    )
    return replace(sub, consumers=tuple(merged[k] for k in order))  # type: ignore[index]


def _split_aggregate(r: _Reader, name: str, agg: TopicStats, n: int) -> list[TopicStats]:
    """The aggregate of ``topics partitioned-stats`` without ``--per-partition``, as ``n`` equal
    partitions. ``TopicStatsImpl.add`` sums rates, sizes and backlogs over partitions, so each
    partition gets 1/n; publishers are merged index by index (or by name), so the aggregate lists
    as many as one partition has; consumers likewise (see :func:`_merge_repeated_consumers`)."""
    subs = tuple(_merge_repeated_consumers(r, name, s) for s in agg.subscriptions)
    if agg.msg_rate_in > 0:
        size = agg.msg_throughput_in / agg.msg_rate_in
        if abs(size - agg.average_msg_size) > 0.01 * size + 1.0:
            r.notes.add(
                "averageMsgSize of the aggregate not msgThroughputIn / msgRateIn (Pulsar prints an "
                "unweighted mean over partitions, a sum before 2.2): message size taken from "
                "msgThroughputIn / msgRateIn",
                "partitioned topic",
                f"{name}: {agg.average_msg_size:,.0f} B printed, {size:,.0f} B from the rates",
            )
    else:
        size = agg.average_msg_size
    out = []
    for i in range(n):
        out.append(
            TopicStats(
                name=f"{name}-partition-{i}",
                namespace=agg.namespace,
                bundle=None,
                msg_rate_in=agg.msg_rate_in / n,
                msg_throughput_in=agg.msg_throughput_in / n,
                average_msg_size=size,
                msg_rate_out=agg.msg_rate_out / n,
                msg_throughput_out=agg.msg_throughput_out / n,
                storage_size=_split_count(agg.storage_size, n, i),
                backlog_size=_split_count(agg.backlog_size, n, i),
                publishers=agg.publishers,
                # Policies, not counters: every partition has the aggregate's.
                deduplication=agg.deduplication,
                replication_clusters=agg.replication_clusters,
                subscriptions=tuple(
                    SubscriptionStats(
                        name=s.name,
                        type=s.type,
                        msg_rate_out=s.msg_rate_out / n,
                        msg_throughput_out=s.msg_throughput_out / n,
                        msg_backlog=_split_count(s.msg_backlog, n, i),
                        unacked_messages=_split_count(s.unacked_messages, n, i),
                        msg_rate_redeliver=s.msg_rate_redeliver / n,
                        consumers=tuple(
                            ConsumerStats(
                                name=c.name,
                                msg_rate_out=c.msg_rate_out / n,
                                msg_throughput_out=c.msg_throughput_out / n,
                                available_permits=None
                                if c.available_permits is None
                                else _split_count(c.available_permits, n, i),
                                unacked_messages=_split_count(c.unacked_messages, n, i),
                                msg_rate_redeliver=c.msg_rate_redeliver / n,
                            )
                            for c in s.consumers
                        ),
                    )
                    for s in subs
                ),
            )
        )
    return out


def _from_partitioned(r: _Reader, name: str | None, obj: Mapping[str, Any]) -> list[TopicStats]:
    partitions = obj["partitions"]
    declared = obj["metadata"].get("partitions")
    declared_ok = isinstance(declared, int) and not isinstance(declared, bool)
    if partitions:
        topics = []
        for p, raw in partitions.items():
            p = str(p)
            if _named_non_persistent(p) or (isinstance(raw, Mapping) and _is_non_persistent_stats(raw)):
                r.skip_non_persistent(p)
                continue
            t = r.topic(p, raw, namespace=None, bundle=None)
            if t is not None:
                topics.append(t)
        if declared_ok and declared != len(partitions):
            # The broker leaves out the partitions whose stats failed (internalGetPartitionedStats).
            r.notes.add(
                f"partitioned-stats with stats for {len(partitions):,} of its {declared:,} partitions "
                f"(metadata.partitions), read as the partitions it has,",
                "partitioned topic",
                str(next(iter(partitions))).rsplit("-partition-", 1)[0],
            )
        return topics
    if name is None:
        raise _Unnamed()
    if _named_non_persistent(name) or _is_non_persistent_stats(obj):
        r.skip_non_persistent(name)
        return []
    agg = r.topic(name, obj, namespace=None, bundle=None, aggregate=True)
    if agg is None:
        return []
    if not declared_ok or declared < 1:
        r.notes.add(
            "partitioned-stats without a partition count (metadata.partitions), read as one topic,",
            "partitioned topic",
            f"{name}: {_kind(declared)}",
        )
        return [agg]
    if declared > MAX_PARTITIONS:
        raise InvalidArgumentError(
            f"{r.label}: {name}: metadata.partitions: {declared:,} partitions, more than the "
            f"{MAX_PARTITIONS:,} this reader splits an aggregate into; run pulsar-admin topics "
            f"partitioned-stats --per-partition, or broker-stats topics"
        )
    # Each partition copies the aggregate's subscriptions and consumers: bound what one number asks for.
    objects = declared * (1 + len(agg.subscriptions) + sum(len(x.consumers) for x in agg.subscriptions))
    if objects > _MAX_SPLIT_OBJECTS:
        raise InvalidArgumentError(
            f"{r.label}: {name}: metadata.partitions: {declared:,} partitions of "
            f"{_counted(len(agg.subscriptions), 'subscription')} make {objects:,} topic, "
            f"subscription and consumer stats, more than the {_MAX_SPLIT_OBJECTS:,} this reader "
            f"splits an aggregate into; run pulsar-admin topics partitioned-stats --per-partition"
        )
    r.notes.add(
        "partitioned-stats without --per-partition: the aggregate split evenly over its partitions "
        "(run it with --per-partition for each partition's own numbers)",
        "partitioned topic",
        f"{name}: {_counted(declared, 'partition')}",
    )
    return _split_aggregate(r, name, agg, declared)


def _one_document(r: _Reader, raw: Any, name: str | None, where: str) -> list[TopicStats]:
    """The topics of one JSON document; ``where`` prefixes its errors (the file, and in a file of
    several documents, which one)."""
    if not isinstance(raw, Mapping):
        raise InvalidArgumentError(f"{where}: top level is {_kind(raw)}, not a JSON object; {_EXPECTED}")
    if _looks_like_partitioned_internal(raw):
        raise InvalidArgumentError(f"{where}: {_PARTITIONED_INTERNAL}")
    if _looks_like_internal(raw) and not _looks_like_topic(raw):
        raise InvalidArgumentError(f"{where}: {_INTERNAL}")
    if _looks_like_partitioned(raw):
        return _from_partitioned(r, name, raw)
    if _looks_like_topic(raw):
        if name is None:
            raise _Unnamed()
        if _named_non_persistent(name) or _is_non_persistent_stats(raw):
            r.skip_non_persistent(name)
            return []
        t = r.topic(name, raw, namespace=None, bundle=None)
        return [] if t is None else [t]
    if _looks_like_named_topics(raw):
        topics: list[TopicStats] = []
        for topic_name, stats in raw.items():
            if _looks_like_partitioned_internal(stats):
                raise InvalidArgumentError(f"{where}: {topic_name}: {_PARTITIONED_INTERNAL}")
            if _looks_like_internal(stats) and not _looks_like_topic(stats):
                raise InvalidArgumentError(f"{where}: {topic_name}: {_INTERNAL}")
            if _looks_like_partitioned(stats):
                topics.extend(_from_partitioned(r, topic_name, stats))
            elif _named_non_persistent(topic_name) or _is_non_persistent_stats(stats):
                r.skip_non_persistent(topic_name)
            else:
                t = r.topic(topic_name, stats, namespace=None, bundle=None)
                if t is not None:
                    topics.append(t)
        return topics
    if _looks_like_dump(raw):
        return _from_dump(r, raw)
    raise InvalidArgumentError(f"{where}: not Pulsar topic stats; {_EXPECTED}")


def _names_itself(raw: Any) -> bool:
    """Whether a document names its topics (a dump, a named mapping, per-partition stats)."""
    if not isinstance(raw, Mapping):
        return True
    if _looks_like_partitioned(raw):
        return bool(raw["partitions"])
    return not _looks_like_topic(raw)


# ---------------------------------------------------------------------------------------------
# files


# A topic's name on a line between documents (`echo $t` in the loop, a shell's `set -x` trace).
_TOPIC_NAME = re.compile(r"(?:non-)?persistent://[^\s\"'<>{}\[\],;|]+")


def _parse_int(text: str) -> int | float:
    # Python refuses integers of over 4,300 digits; no counter has 40, so a longer one is a bad
    # counter (read as infinite, then noted), not a bad file.
    if len(text) > 40:
        return float("-inf") if text.startswith("-") else float("inf")
    return int(text)


def _documents(text: str, label: str, notes: _Notes) -> list[_Document]:
    """The JSON documents of ``text``, one after another (a shell loop's output), with the topic
    name a line between them gives; other text between them is skipped with a note. Work is linear
    in the text."""
    decoder = json.JSONDecoder(parse_int=_parse_int)
    docs: list[_Document] = []
    pos, line_no = 0, 1
    header: str | None = None
    skipped: list[tuple[int, str]] = []
    first_text: tuple[int, str] | None = None
    n = len(text)
    while pos < n:
        ch = text[pos]
        if ch == "\n":
            pos += 1
            line_no += 1
            continue
        if ch.isspace() or ch == "\ufeff":
            pos += 1
            continue
        if ch in "{[":
            value, end = decode_json_at(text, pos, label, decoder)
            docs.append(_Document(value, line_no, header))
            header = None
            line_no += text.count("\n", pos, end)
            pos = end
            continue
        end = text.find("\n", pos)
        end = n if end < 0 else end
        line = text[pos:end].strip()
        found = _TOPIC_NAME.findall(line)
        if found:
            header = found[-1]
        else:
            skipped.append((line_no, line))
        if first_text is None:
            first_text = (line_no, line)
        pos = end
    if not docs:
        where = f"line {first_text[0]} column 1: " if first_text else ""
        got = f"got {_kind(first_text[1][:40])}" if first_text else "the file is empty"
        raise InvalidArgumentError(f"{label}: {where}not JSON: expected a JSON object, {got}; {_EXPECTED}")
    if skipped:
        notes.say(
            f"skipped {_counted(len(skipped), 'line')} of text that is not JSON between the JSON documents "
            f"(e.g. line {skipped[0][0]}: {_kind(skipped[0][1][:60])})"
        )
    return docs


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".json", ".txt", ".stats"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def read(source: Source, *, name: str | None = None, max_bytes: int = MAX_FILE_BYTES) -> BrokerStats:
    """Read a broker's topic stats from a JSON file or a mapping (the shapes in the module's docs).

    ``name`` names the topic of one ``topics stats`` output (or of a partitioned topic's aggregate);
    for a file it defaults to the file name without ``.json``, ``.txt`` and ``.stats``. A file of
    several unnamed documents names them ``NAME-0``, ``NAME-1``, ... (or by a topic name on a line
    before each). What was skipped, clamped, split or named is in the result's ``notes``."""
    if isinstance(source, Mapping):
        label = "<mapping>"
        docs = [_Document(source, 1)]
        reader = _Reader(label)
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        label = str(path)
        reader = _Reader(label)
        docs = _documents(read_text(path, max_bytes, "a stats file"), label, reader.notes)
    else:
        raise InvalidArgumentError(f"source: expected a path or a mapping, got {type(source).__name__}")

    from_file = name is None and not isinstance(source, Mapping)
    if name is None and not isinstance(source, Mapping):
        name = _stem(Path(source))
    # Documents that name no topic, numbered among themselves when there are several.
    unnamed = {id(d): k for k, d in enumerate(d for d in docs if d.header is None and not _names_itself(d.value))}
    generated: list[str] = []
    topics: list[TopicStats] = []
    for index, doc in enumerate(docs):
        where = label if len(docs) == 1 else f"{label}: document {index + 1} (line {doc.line})"
        doc_name = doc.header
        if doc_name is None and name is not None and id(doc) in unnamed:
            doc_name = f"{name}-{unnamed[id(doc)]}" if len(unnamed) > 1 else name
            if from_file or len(unnamed) > 1:
                generated.append(doc_name)
        elif doc_name is None:
            doc_name = name
        try:
            topics.extend(_one_document(reader, doc.value, doc_name, where))
        except _Unnamed:
            raise InvalidArgumentError(
                f"{where}: one topic's stats (pulsar-admin topics stats, or partitioned-stats without "
                f"--per-partition) do not name their topic: pass name=, or a mapping {{topic name: stats}}"
            ) from None
    if generated:
        reader.notes.say(
            f"{_counted(len(generated), 'topic')} whose stats do not name "
            f"{'it' if len(generated) == 1 else 'them'}, named "
            f"{_example_list(generated)} after the file (pulsar-admin topics stats prints no name: "
            f"a line with the topic's name before each document names it)"
        )
    return BrokerStats(
        topics=_last_of_each(reader, topics),
        notes=_finish(reader, topics),
        source=None if isinstance(source, Mapping) else label,
    )


def _example_list(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]}, ..., {names[-1]}"


def _last_of_each(r: _Reader, topics: list[TopicStats]) -> tuple[TopicStats, ...]:
    """A topic in several documents (the loop ran twice) is kept once, as the last one says, where it
    first appeared."""
    last: dict[str, TopicStats] = {}
    times: dict[str, int] = {}
    for t in topics:
        times[t.name] = times.get(t.name, 0) + 1
        last[t.name] = t
    repeated = [(n, k) for n, k in times.items() if k > 1]
    if repeated:
        r.notes.say(
            f"{_counted(len(repeated), 'topic')} given more than once (e.g. {repeated[0][0]}, "
            f"{repeated[0][1]} times): the last stats of each kept"
        )
    return tuple(last.values())


def _finish(r: _Reader, topics: list[TopicStats]) -> tuple[str, ...]:
    skipped = list(dict.fromkeys(r.skipped_non_persistent))
    if skipped and not topics:
        raise InvalidArgumentError(
            f"{r.label}: only non-persistent topics ({_counted(len(skipped), 'topic')}, e.g. {skipped[0]}): they "
            f"bypass the managed ledger, so there is nothing the entry cache sees; take the stats of the broker's "
            f"persistent topics (pulsar-admin broker-stats topics)"
        )
    if skipped:
        r.notes.say(
            f"skipped {_counted(len(skipped), 'non-persistent topic')} (e.g. {skipped[0]}): they bypass "
            f"the managed ledger, so the entry cache never sees their messages"
        )
    return r.notes.lines()


# ---------------------------------------------------------------------------------------------
# writing


def _consumer_dump(c: ConsumerStats) -> dict[str, Any]:
    out: dict[str, Any] = {"consumerName": c.name}
    if c.available_permits is not None:
        out["availablePermits"] = c.available_permits
    out.update(
        msgRateOut=c.msg_rate_out,
        msgThroughputOut=c.msg_throughput_out,
        msgRateRedeliver=c.msg_rate_redeliver,
        unackedMessages=c.unacked_messages,
    )
    return out


def _topic_dump(t: TopicStats) -> dict[str, Any]:
    return {
        "publishers": [],
        "replication": {c: {"connected": True} for c in t.replication_clusters},
        "subscriptions": {
            s.name: {
                "consumers": [_consumer_dump(c) for c in s.consumers],
                "msgBacklog": s.msg_backlog,
                "msgRateOut": s.msg_rate_out,
                "msgThroughputOut": s.msg_throughput_out,
                "msgRateRedeliver": s.msg_rate_redeliver,
                "type": s.type if s.type is not None else "None",
                "unackedMessages": s.unacked_messages,
            }
            for s in t.subscriptions
        },
        "producerCount": t.publishers,
        "averageMsgSize": t.average_msg_size,
        "msgRateIn": t.msg_rate_in,
        "msgRateOut": t.msg_rate_out,
        "msgThroughputIn": t.msg_throughput_in,
        "msgThroughputOut": t.msg_throughput_out,
        "storageSize": t.storage_size,
        "backlogSize": t.backlog_size,
        **({} if t.deduplication is None else {"deduplicationStatus": "Enabled" if t.deduplication else "Disabled"}),
    }


def to_dump(stats: BrokerStats) -> dict[str, Any]:
    """``stats`` as the broker-stats topics dump (``{namespace: {bundle: {"persistent": {...}}}}``),
    the fields :func:`read` reads, in the order the broker writes them. Topics keep their order
    within a bundle; namespaces and bundles come in the order they first appear."""
    out: dict[str, Any] = {}
    for t in stats.topics:
        bundles = out.setdefault(t.namespace, {})
        section = bundles.setdefault(t.bundle if t.bundle is not None else FULL_BUNDLE, {"persistent": {}})
        section["persistent"][t.name] = _topic_dump(t)
    return out


def write(stats: BrokerStats, path: str | os.PathLike[str]) -> None:
    """Write :func:`to_dump` ``(stats)`` as indented JSON to ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(to_dump(stats), f, indent=2)
        f.write("\n")
