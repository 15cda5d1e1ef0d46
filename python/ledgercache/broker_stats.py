"""A Pulsar broker's topic stats, read from the JSON that ``pulsar-admin`` prints.

Usage::

    import ledgercache as lc

    stats = lc.broker_stats.read("stats.json")      # or a mapping already parsed
    for topic in stats.topics:
        print(topic.name, topic.msg_rate_in, [s.type for s in topic.subscriptions])
    lc.broker_stats.write(stats, "copy.json")       # the broker-stats topics dump shape again

:func:`read` takes a path to a JSON file or a mapping, and recognises three shapes by their
structure (Pulsar source cited at the mirror of apache/pulsar used for this module, commit
``00a6badafc62c25254f1fa93a04da513c3fc9b66``):

- **The broker's topic stats dump**: ``pulsar-admin broker-stats topics``, REST
  ``GET /admin/v2/broker-stats/topics`` (``BrokerStatsBase.getTopics2``, which streams the buffer
  ``PulsarStats.updateStats`` last built). The nesting is
  ``{namespace: {bundle range: {"persistent": {topic: {...}}, "non-persistent": {...}}}}``; each
  persistent topic's object is written by ``PersistentTopic.updateRates`` into a
  ``StatsOutputStream``, its consumers and publishers by ``StreamingStats.writeConsumerStats`` and
  ``StreamingStats.writePublisherStats``. ``bundle`` is the bundle range key
  (``NamespaceBundle.getBundleRange``, e.g. ``0x00000000_0x40000000``). A broker that owns no
  topic writes ``{}``: that reads as no topics.
- **One topic's stats**: ``pulsar-admin topics stats`` (``TopicStatsImpl`` with
  ``SubscriptionStatsImpl``, ``ConsumerStatsImpl``, ``PublisherStatsImpl``, serialised by
  Jackson under their field names). That output does not name its topic: give ``name=``, or read
  it from a file and the topic is named from the file name (``orders.stats.json`` and
  ``orders.json`` -> ``orders``). A mapping ``{"persistent://t/n/topic": TopicStats, ...}``
  names its topics itself.
- **A partitioned topic's stats**: ``pulsar-admin topics partitioned-stats``
  (``PartitionedTopicStatsImpl``: the aggregate over partitions at the top level, ``metadata``
  with the partition count, and ``partitions`` ``{partition name: TopicStats}``, filled only with
  ``--per-partition``). With partitions, each is a topic of its own; without, the aggregate is one
  topic, named as above.

Partitions are separate topics everywhere (``persistent://t/n/orders-partition-0``, ...), as a
broker sees them. Non-persistent topics are skipped (the dump's ``"non-persistent"`` sections,
and names starting with ``non-persistent://``): they bypass the managed ledger, so its entry cache
never sees their messages.

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
  list empty (``exposePublisherStats=false``); else the length of ``publishers``).
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

Missing fields default to 0 (counts, rates), ``""`` (a consumer's name), ``()`` (subscriptions,
consumers), ``None`` (``availablePermits``, a subscription's type). Unknown fields are ignored:
Pulsar adds fields in most releases. A value of the wrong type (a string for ``msgRateIn``, a
negative rate, NaN, a fractional count) is an :class:`~ledgercache.InvalidArgumentError` naming the
file, the topic and the field path, e.g.
``stats.json: persistent://a/b/c: subscriptions.sub1.msgRateOut: expected a number >= 0, got 'x'``.
So is a file larger than :data:`MAX_FILE_BYTES`, one that is not UTF-8 text or not JSON (with the
line), and JSON of none of the shapes above (one error naming the file and the shapes expected).

:func:`to_dump` and :func:`write` are the inverse: the broker-stats topics dump shape, holding the
fields above. ``read(to_dump(stats)) == stats`` whenever every topic has a bundle (topics read from
``topics stats`` output have ``bundle=None`` and are written under the whole range
``0x00000000_0xffffffff``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from ._files import read_text
from .errors import InvalidArgumentError

__all__ = [
    "BrokerStats",
    "ConsumerStats",
    "FULL_BUNDLE",
    "MAX_FILE_BYTES",
    "SUBSCRIPTION_TYPES",
    "SubscriptionStats",
    "TopicStats",
    "read",
    "to_dump",
    "write",
]

#: The largest stats file :func:`read` opens (256 MiB); a broker with 10,000 topics writes tens of MiB.
MAX_FILE_BYTES = 256 * 1024 * 1024

#: Subscription types as ``PersistentSubscription.getTypeString`` writes them.
SUBSCRIPTION_TYPES = ("Exclusive", "Failover", "Shared", "Key_Shared")

#: The bundle range :func:`to_dump` writes topics without a bundle under: a namespace's whole hash range.
FULL_BUNDLE = "0x00000000_0xffffffff"

Source = Union[str, "os.PathLike[str]", Mapping[str, Any]]


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


@dataclass(frozen=True)
class BrokerStats:
    """Every persistent topic of one stats input, in the input's order."""

    topics: tuple[TopicStats, ...] = ()


# ---------------------------------------------------------------------------------------------
# reading


class _Where:
    """Where a value is, for error messages: ``file: topic: field.path``."""

    def __init__(self, label: str, topic: str | None = None) -> None:
        self.label = label
        self.topic = topic

    def fail(self, path: str, message: str) -> InvalidArgumentError:
        parts = [self.label]
        if self.topic is not None:
            parts.append(self.topic)
        if path:
            parts.append(path)
        return InvalidArgumentError(": ".join(parts) + ": " + message)


def _rate(obj: Mapping[str, Any], key: str, where: _Where, path: str) -> float:
    value = obj.get(key, 0.0)
    full = f"{path}.{key}" if path else key
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.fail(full, f"expected a number >= 0, got {_kind(value)}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise where.fail(full, f"expected a number >= 0, got {_kind(value)}")
    return value


def _count(obj: Mapping[str, Any], key: str, where: _Where, path: str, *,
           signed: bool = False, default: int | None = 0) -> int | None:
    if key not in obj:
        return default
    value = obj[key]
    full = f"{path}.{key}" if path else key
    what = "an integer" if signed else "an integer >= 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.fail(full, f"expected {what}, got {_kind(value)}")
    if isinstance(value, float):
        if not value.is_integer():
            raise where.fail(full, f"expected {what}, got {_kind(value)}")
        value = int(value)
    if value < 0 and not signed:
        raise where.fail(full, f"expected {what}, got {_kind(value)}")
    return value


def _mapping(value: Any, where: _Where, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise where.fail(path, f"expected a JSON object, got {_kind(value)}")
    return value


def _list(value: Any, where: _Where, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise where.fail(path, f"expected a JSON list, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _consumer(raw: Any, where: _Where, path: str) -> ConsumerStats:
    obj = _mapping(raw, where, path)
    name = obj.get("consumerName", "")
    if name is None:
        name = ""
    if not isinstance(name, str):
        raise where.fail(f"{path}.consumerName", f"expected a string, got {_kind(name)}")
    return ConsumerStats(
        name=name,
        msg_rate_out=_rate(obj, "msgRateOut", where, path),
        msg_throughput_out=_rate(obj, "msgThroughputOut", where, path),
        available_permits=_count(obj, "availablePermits", where, path, signed=True, default=None),
        unacked_messages=_count(obj, "unackedMessages", where, path),  # type: ignore[arg-type]
        msg_rate_redeliver=_rate(obj, "msgRateRedeliver", where, path),
    )


def _subscription(name: str, raw: Any, where: _Where) -> SubscriptionStats:
    path = f"subscriptions.{name}"
    obj = _mapping(raw, where, path)
    sub_type = obj.get("type")
    if sub_type in (None, "None"):
        sub_type = None
    elif sub_type not in SUBSCRIPTION_TYPES:
        raise where.fail(f"{path}.type", f"expected one of {', '.join(SUBSCRIPTION_TYPES)} (or \"None\"), "
                                         f"got {sub_type!r}")
    consumers = _list(obj.get("consumers", []), where, f"{path}.consumers")
    return SubscriptionStats(
        name=name,
        type=sub_type,
        msg_rate_out=_rate(obj, "msgRateOut", where, path),
        msg_throughput_out=_rate(obj, "msgThroughputOut", where, path),
        msg_backlog=_count(obj, "msgBacklog", where, path),  # type: ignore[arg-type]
        unacked_messages=_count(obj, "unackedMessages", where, path),  # type: ignore[arg-type]
        msg_rate_redeliver=_rate(obj, "msgRateRedeliver", where, path),
        consumers=tuple(_consumer(c, where, f"{path}.consumers[{i}]") for i, c in enumerate(consumers)),
    )


def _namespace_of(name: str) -> str:
    """``persistent://tenant/ns/topic`` -> ``tenant/ns`` (also the older ``tenant/cluster/ns``)."""
    if "://" not in name:
        return ""
    rest = name.split("://", 1)[1]
    return rest.rsplit("/", 1)[0] if "/" in rest else ""


def _topic(name: str, raw: Any, label: str, *, namespace: str | None, bundle: str | None) -> TopicStats:
    where = _Where(label, name)
    obj = _mapping(raw, where, "")
    publishers = _list(obj.get("publishers", []), where, "publishers")
    count = _count(obj, "producerCount", where, "", default=None)
    subs = _mapping(obj.get("subscriptions", {}), where, "subscriptions")
    rate_in = _rate(obj, "msgRateIn", where, "")
    throughput_in = _rate(obj, "msgThroughputIn", where, "")
    if "averageMsgSize" in obj:
        average = _rate(obj, "averageMsgSize", where, "")
    else:  # what PersistentTopic.updateRates computes
        average = throughput_in / rate_in if rate_in > 0 else 0.0
    return TopicStats(
        name=name,
        namespace=_namespace_of(name) if namespace is None else namespace,
        bundle=bundle,
        msg_rate_in=rate_in,
        msg_throughput_in=throughput_in,
        average_msg_size=average,
        msg_rate_out=_rate(obj, "msgRateOut", where, ""),
        msg_throughput_out=_rate(obj, "msgThroughputOut", where, ""),
        storage_size=_count(obj, "storageSize", where, ""),  # type: ignore[arg-type]
        backlog_size=_count(obj, "backlogSize", where, ""),  # type: ignore[arg-type]
        publishers=len(publishers) if count is None else count,
        subscriptions=tuple(_subscription(str(k), v, where) for k, v in subs.items()),
    )


def _is_persistent(name: str) -> bool:
    return not name.startswith("non-persistent://")


_TOPIC_KEYS = ("msgRateIn", "msgThroughputIn", "subscriptions", "publishers", "storageSize", "msgRateOut")
_SECTIONS = {"persistent", "non-persistent"}


def _looks_like_topic(obj: Any) -> bool:
    return isinstance(obj, Mapping) and sum(k in obj for k in _TOPIC_KEYS) >= 2


def _looks_like_partitioned(obj: Any) -> bool:
    return (isinstance(obj, Mapping) and isinstance(obj.get("metadata"), Mapping)
            and isinstance(obj.get("partitions"), Mapping))


def _looks_like_dump(obj: Mapping[str, Any]) -> bool:
    return all(
        isinstance(bundles, Mapping)
        and all(isinstance(sections, Mapping) and set(sections) <= _SECTIONS for sections in bundles.values())
        for bundles in obj.values()
    )


def _looks_like_named_topics(obj: Mapping[str, Any]) -> bool:
    return bool(obj) and all(
        isinstance(k, str) and (k.startswith("persistent://") or k.startswith("non-persistent://"))
        and (_looks_like_topic(v) or _looks_like_partitioned(v))
        for k, v in obj.items()
    )


_EXPECTED = ("expected one of: the broker's topic stats dump (pulsar-admin broker-stats topics: "
             "{namespace: {bundle: {\"persistent\": {topic: stats}}}}), one topic's stats (pulsar-admin "
             "topics stats, or a mapping {\"persistent://tenant/ns/topic\": stats}), or a partitioned "
             "topic's stats (pulsar-admin topics partitioned-stats)")


def _from_dump(obj: Mapping[str, Any], label: str) -> list[TopicStats]:
    topics = []
    for namespace, bundles in obj.items():
        for bundle, sections in bundles.items():
            persistent = sections.get("persistent", {})
            if not isinstance(persistent, Mapping):
                raise _Where(label).fail(f"{namespace}.{bundle}.persistent",
                                         f"expected a JSON object of topics, got {_kind(persistent)}")
            for name, raw in persistent.items():
                if _is_persistent(name):
                    topics.append(_topic(name, raw, label, namespace=namespace, bundle=bundle))
    return topics


def _from_partitioned(name: str | None, obj: Mapping[str, Any], label: str) -> list[TopicStats]:
    partitions = obj["partitions"]
    if partitions:
        return [_topic(str(p), raw, label, namespace=None, bundle=None)
                for p, raw in partitions.items() if _is_persistent(str(p))]
    if name is None:
        raise InvalidArgumentError(f"{label}: partitioned-stats output without per-partition stats does "
                                   f"not name its topic: pass name=")
    return [_topic(name, obj, label, namespace=None, bundle=None)] if _is_persistent(name) else []


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".json", ".stats"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def _load(path: Path, max_bytes: int) -> Any:
    label = str(path)
    text = read_text(path, max_bytes, "a stats file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidArgumentError(f"{label}: line {e.lineno} column {e.colno}: not JSON: {e.msg}") from None
    except RecursionError:
        raise InvalidArgumentError(f"{label}: not JSON this reader accepts: nested too deeply") from None


def read(source: Source, *, name: str | None = None, max_bytes: int = MAX_FILE_BYTES) -> BrokerStats:
    """Read a broker's topic stats from a JSON file or a mapping (the shapes in the module's docs).

    ``name`` names the topic of one ``topics stats`` output (or of a partitioned topic's aggregate);
    for a file it defaults to the file name without ``.json`` and ``.stats``."""
    if isinstance(source, Mapping):
        label, raw = "<mapping>", source
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        label, raw = str(path), _load(path, max_bytes)
        if name is None:
            name = _stem(path)
    else:
        raise InvalidArgumentError(f"source: expected a path or a mapping, got {type(source).__name__}")

    if not isinstance(raw, Mapping):
        raise InvalidArgumentError(f"{label}: top level is {_kind(raw)}, not a JSON object; {_EXPECTED}")
    if _looks_like_partitioned(raw):
        topics = _from_partitioned(name, raw, label)
    elif _looks_like_topic(raw):
        if name is None:
            raise InvalidArgumentError(f"{label}: one topic's stats (pulsar-admin topics stats) do not name "
                                       f"their topic: pass name=, or a mapping {{topic name: stats}}")
        topics = [_topic(name, raw, label, namespace=None, bundle=None)] if _is_persistent(name) else []
    elif _looks_like_named_topics(raw):
        topics = []
        for topic_name, stats in raw.items():
            if _looks_like_partitioned(stats):
                topics.extend(_from_partitioned(topic_name, stats, label))
            elif _is_persistent(topic_name):
                topics.append(_topic(topic_name, stats, label, namespace=None, bundle=None))
    elif _looks_like_dump(raw):
        topics = _from_dump(raw, label)
    else:
        raise InvalidArgumentError(f"{label}: not Pulsar topic stats; {_EXPECTED}")
    return BrokerStats(topics=tuple(topics))


# ---------------------------------------------------------------------------------------------
# writing


def _consumer_dump(c: ConsumerStats) -> dict[str, Any]:
    out: dict[str, Any] = {"consumerName": c.name}
    if c.available_permits is not None:
        out["availablePermits"] = c.available_permits
    out.update(msgRateOut=c.msg_rate_out, msgThroughputOut=c.msg_throughput_out,
               msgRateRedeliver=c.msg_rate_redeliver, unackedMessages=c.unacked_messages)
    return out


def _topic_dump(t: TopicStats) -> dict[str, Any]:
    return {
        "publishers": [],
        "replication": {},
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
