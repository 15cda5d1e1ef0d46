"""Workloads: an OpenMessaging Benchmark workload file plus Pulsar knobs, simulated into a trace.

>>> import ledgercache as lc
>>> t = lc.workload.generate({"topics": 1, "producerRate": 100, "testDurationMinutes": 0.1}, seed=1)
>>> t.column_names == lc.trace.SCHEMA.names
True

:func:`generate` returns the whole trace as a ``pyarrow.Table``: fine for short traces (the table
takes about 120 bytes an event). :func:`stream` returns the same rows as a
``pyarrow.RecordBatchReader`` that generates each batch when it is read, as simulated time advances,
so memory holds the simulation and one batch, whatever the duration. ``lc.replay``,
``lc.trace.write``, ``lc.spark.replay`` and ``ledgercache generate`` take it:

>>> reader = lc.workload.stream({"topics": 1, "producerRate": 100, "testDurationMinutes": 0.1}, seed=1,
...                             batch_rows=1000)
>>> sum(b.num_rows for b in reader) == t.num_rows
True

A reader is read once. ``belady`` reads the trace twice, so ``lc.replay`` takes a function that
returns a new reader for each pass: ``lc.replay(lambda: lc.workload.stream(spec, seed), configs)``.
:func:`estimate` says beforehand about how many events, bytes and seconds a spec takes.

A spec is a mapping (or a path to an OMB ``.yaml`` or a ``.json`` file). Every setting is accepted
under its camelCase name and its snake_case form; OMB keys that do not shape cache traffic (``name``,
``payloadFile``, ...) are ignored. Besides OMB's workload keys (``topics``, ``partitionsPerTopic``,
``messageSize``, ``subscriptionsPerTopic``, ``consumerPerSubscription``, ``producersPerTopic``,
``producerRate``, ``consumerBacklogSizeGB``, ``testDurationMinutes``, ``keyDistributor``), the knobs,
with their defaults and where each comes from:

Producer batching (OMB's Pulsar driver: ``driver-pulsar/pulsar.yaml`` and ``PulsarBenchmarkDriver``;
an entry is a batch of messages, its ``add`` row carries the batch's bytes and ``messages``):

- ``batchingEnabled`` (true): OMB ``pulsar.yaml`` ``producer.batchingEnabled``. false: one message
  an entry.
- ``batchingMaxPublishDelayMs`` (1): OMB ``pulsar.yaml``; Pulsar client ``batchingMaxPublishDelay``.
- ``batchingMaxBytes`` (131072): OMB ``pulsar.yaml``; Pulsar client ``batchingMaxBytes``.
- ``batchingMaxMessages`` (2147483647): OMB ``PulsarBenchmarkDriver`` sets ``Integer.MAX_VALUE``
  (the Pulsar client's own default is 1000).

Consumers (Pulsar Java client, ``ConsumerImpl``):

- ``receiverQueueSize`` (1000): Pulsar client ``receiverQueueSize`` (its default; OMB's
  ``pulsar.yaml`` sets 10000). Permits are messages; the client sends FLOW once half the queue is
  free.

Broker dispatchers (Pulsar ``ServiceConfiguration`` keys, defaults as on ``master``):

- ``readBatchSize`` or ``dispatcherMaxReadBatchSize`` (100): entries a read asks for at most.
- ``dispatcherMaxRoundRobinBatchSize`` (20): entries a Shared consumer gets per round-robin turn.
- ``dispatcherMaxReadSizeBytes`` (5242880): bytes a read asks for at most (entries estimated from
  the average entry size).
- ``keySharedLookAheadMsgInReplayThresholdPerConsumer`` (4000) and
  ``keySharedLookAheadMsgInReplayThresholdPerSubscription`` (40000): Key_Shared normal reads stop
  once the replay queue holds min(per consumer x consumers, per subscription) entries (0 disables
  one; both 0 fall back on Pulsar's unacked-message limits).
- ``subscriptionKeySharedConsistentHashingReplicaPoints`` (100): points per consumer on the
  Key_Shared consistent-hashing ring.
- ``activeConsumerFailoverDelayTimeMillis`` (1000): a Failover subscription starts reading this long
  after its active consumer is chosen.
- ``managedLedgerNewEntriesCheckDelayInMillis`` (10): a read parked at the end of the topic looks for
  new entries again after this long (reading all that came), then waits to be woken by the next one.

Lab-only knobs (not Pulsar or OMB settings; they shape the simulated traffic):

- ``brokers`` (1): topic partitions are placed round-robin over the brokers.
- ``subscriptionType`` (``Exclusive``): ``Exclusive``, ``Failover``, ``Shared`` or ``Key_Shared``
  (OMB's ``pulsar.yaml`` sets it per driver as ``consumer.subscriptionType``); ``keys`` (1024)
  distinct keys for ``keyDistributor`` ``KEY_ROUND_ROBIN`` / ``RANDOM_NANO`` (an entry's key is its
  first message's).
- ``slowConsumerFraction`` (0) of consumers (spread evenly, exactly that share) run at
  ``slowConsumerSpeed`` (0.5) of normal speed.
- ``redeliveryRate`` (0): share of delivered messages negatively acknowledged (an entry is
  redelivered whole; on Exclusive/Failover a nack rewinds the cursor).
- ``seeksPerMinute`` (0) per subscription, each ``seekBackSeconds`` (30) back.
- ``catchUpReaders`` (0) per partition join at ``catchUpStartSeconds`` (30), ``catchUpBehindSeconds``
  (60) behind the tail, reading ``catchUpSpeed`` (4) times the publish rate.
- ``churnPerMinute`` (0) consumer disconnects per subscription, lasting ``churnDowntimeSeconds`` (5);
  a reconnect rewinds the cursor to the first unacknowledged entry.
- ``maxEntriesPerLedger`` (50000): entries a ledger holds before the next one starts.
- ``consumerHeadroom`` (1.2): a normal consumer's speed over its share of the publish rate.

How each simulated behaviour follows Pulsar's code is in ``docs/fidelity.md``.

The generator is Rust: deterministic per (spec, seed), millions of events per second. Rows are in
time order within each broker; a workload's brokers are simulated side by side and merged by time
(on a tie, the lower-numbered broker first). ``stream`` and ``generate`` give the same rows in the
same order, whatever ``batch_rows``.
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

import pyarrow as pa

from . import _native
from .errors import InvalidArgumentError, LedgerCacheError, UnknownSettingError
from .trace import SCHEMA, conform

__all__ = ["SCENARIOS", "SCENARIO_CACHE_SIZES", "Spec", "estimate", "generate", "load_spec", "normalize", "resolve", "stream"]

DEFAULT_BATCH_ROWS = 65_536

Spec = Union[Mapping[str, Any], str, os.PathLike]

KNOWN = frozenset(
    "topics partitions_per_topic message_size subscriptions_per_topic consumer_per_subscription "
    "producers_per_topic producer_rate consumer_backlog_size_gb test_duration_minutes key_distributor keys "
    "brokers subscription_type slow_consumer_fraction slow_consumer_speed redelivery_rate seeks_per_minute "
    "seek_back_seconds catch_up_readers catch_up_start_seconds catch_up_behind_seconds catch_up_speed "
    "churn_per_minute churn_downtime_seconds max_entries_per_ledger read_batch_size receiver_queue_size "
    "consumer_headroom batching_enabled batching_max_publish_delay_ms batching_max_bytes batching_max_messages "
    "dispatcher_max_round_robin_batch_size dispatcher_max_read_size_bytes dispatcher_max_read_batch_size "
    "key_shared_look_ahead_msg_in_replay_threshold_per_consumer "
    "key_shared_look_ahead_msg_in_replay_threshold_per_subscription "
    "subscription_key_shared_consistent_hashing_replica_points active_consumer_failover_delay_time_millis "
    "managed_ledger_new_entries_check_delay_in_millis".split()
)
# OMB workload keys that do not change what a broker's cache sees.
IGNORED = frozenset(
    "name payload_file use_randomized_payloads random_bytes_ratio randomized_payload_pool_size "
    "producer_start_delay_ms consumer_start_delay_ms warmup_duration_minutes".split()
)


def _snake(key: str) -> str:
    key = key.replace("GB", "Gb")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def normalize(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's settings under the generator's snake_case names."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        name = _snake(str(key))
        if name in IGNORED:
            continue
        if name not in KNOWN:
            raise UnknownSettingError(f"unknown workload setting {key!r}")
        out[name] = value
    return out


def scalar(raw: str) -> Any:
    """A setting's text as a value: an int, a float, true/false, or the text itself."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    return raw


def _parse_flat_yaml(text: str) -> dict[str, Any]:
    """OMB workload files are flat ``key: value`` YAML; that is all this reads."""
    out: dict[str, Any] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            raise InvalidArgumentError(f"invalid spec: line {n}: expected 'key: value', got {line!r}")
        key, raw = (part.strip() for part in line.split(":", 1))
        out[key] = scalar(raw.strip("'\""))
    return out


def load_spec(spec: Spec) -> dict[str, Any]:
    """A spec from a mapping, or from an OMB ``.yaml`` / ``.json`` file."""
    if isinstance(spec, Mapping):
        return normalize(spec)
    path = Path(spec)
    if not path.exists():
        raise InvalidArgumentError(f"invalid spec: {path} does not exist")
    text = path.read_text()
    raw = json.loads(text) if path.suffix == ".json" else _parse_flat_yaml(text)
    return normalize(raw)


def resolve(spec: Spec | str) -> dict[str, Any]:
    """The normalized settings of a spec, a spec file or a scenario name."""
    if isinstance(spec, str) and spec in SCENARIOS:
        spec = SCENARIOS[spec]
    return load_spec(spec)


def _whole(name: str, value: Any, low: int, below: int) -> int:
    try:
        n = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        n = None
    if n is None or not low <= n < below:
        raise InvalidArgumentError(f"invalid {name}: expected a whole number in [{low}, {below}), got {value!r}")
    return n


def stream(spec: Spec | str, seed: int = 0, broker: int | None = None,
           batch_rows: int = DEFAULT_BATCH_ROWS) -> pa.RecordBatchReader:
    """The trace of a workload as a ``pyarrow.RecordBatchReader`` (read once), batches of
    ``batch_rows`` rows (the last one shorter) in :data:`ledgercache.trace.SCHEMA`.

    Each batch is generated when it is read; memory does not grow with the trace's duration. The
    rows are :func:`generate`'s. With ``broker``, only that broker's events.
    """
    settings = resolve(spec)
    seed = _whole("seed", seed, 0, 1 << 64)
    if broker is not None:
        broker = _whole("broker", broker, 0, 1 << 32)
    batch_rows = _whole("batch_rows", batch_rows, 1, 1 << 62)
    native = _native.stream_workload(settings, seed, broker, batch_rows)
    # The generator's string columns are dictionary-encoded; the reader gives the trace schema.
    return pa.RecordBatchReader.from_batches(SCHEMA, _conformed(pa.RecordBatchReader.from_stream(native)))


def _conformed(raw: pa.RecordBatchReader):
    try:
        for batch in raw:
            yield conform(batch)
    except pa.ArrowException as e:  # the generator failed (a bug): still a LedgerCacheError
        raise LedgerCacheError(f"workload generation failed: {e}") from e


def generate(spec: Spec | str, seed: int = 0, broker: int | None = None) -> pa.Table:
    """The trace of a workload (``spec`` may also name one of :data:`SCENARIOS`), in memory.

    With ``broker``, only that broker's events: brokers generated one by one (in parallel, say)
    add up to the whole trace. For long traces use :func:`stream`.
    """
    return stream(spec, seed, broker).read_all()


def estimate(spec: Spec | str) -> dict[str, float]:
    """About how big a workload's trace is, from its rates, duration and subscriptions, before
    generating it: ``events``, ``entries``, ``messages``, ``parquet_bytes`` (a trace file) and
    ``seconds`` (to generate and write it here). Rough: within a factor of two on the bundled
    scenarios and OMB-like workloads.
    """
    e = dict(_native.estimate_workload(resolve(spec)))
    e["parquet_bytes"] = e["events"] * PARQUET_BYTES_PER_EVENT
    e["seconds"] = e["events"] / EVENTS_PER_SECOND
    return e


# Measured on the bundled scenarios and OMB-like workloads (2-core machine): a Parquet trace takes
# 7-8 bytes an event; `ledgercache generate` generates and writes about a million events a second.
PARQUET_BYTES_PER_EVENT = 8.0
EVENTS_PER_SECOND = 1.0e6


MIB = 1 << 20

# Bundled scenarios, at one broker's scale: 10,000-40,000 messages a second (5-40 MB/s), two minutes
# each (many-topics-small-cache, whose 50 topics make one entry a message, at the low end so that
# `make demo` stays within a few minutes). A broker's cache is hundreds of MiB to GiBs (Pulsar's managedLedgerCacheSizeMB defaults to a
# fifth of the direct memory), so each scenario is compared at the sizes in SCENARIO_CACHE_SIZES.
SCENARIOS: dict[str, dict[str, Any]] = {
    # Many subscriptions tail one hot topic: every entry is read several times, right away. The
    # control: every design hits on every read at any size, down to 1 MiB.
    "tailing-fan-out": dict(topics=2, partitionsPerTopic=2, subscriptionsPerTopic=4, producerRate=40000,
                            messageSize=1024, testDurationMinutes=2),
    # Consumers start once a backlog has built up, then catch up while publishing goes on; a reader
    # per partition joins 15 s (600 MB) behind the tail.
    "catch-up-under-pressure": dict(topics=2, subscriptionsPerTopic=2, producerRate=40000, messageSize=1024,
                                    consumerBacklogSizeGB=0.5, consumerHeadroom=1.5, testDurationMinutes=2,
                                    catchUpReaders=1, catchUpStartSeconds=20, catchUpBehindSeconds=15),
    # Key_Shared with a slow consumer: its keys' entries wait in the replay queue.
    "key-shared-slow-consumer": dict(topics=1, subscriptionsPerTopic=1, consumerPerSubscription=4,
                                     subscriptionType="Key_Shared", keyDistributor="KEY_ROUND_ROBIN",
                                     slowConsumerFraction=0.25, slowConsumerSpeed=0.3, producerRate=30000,
                                     testDurationMinutes=2),
    # Shared subscription whose consumers cannot keep up: reads overflow into the replay queue.
    "shared-overflow": dict(topics=1, subscriptionsPerTopic=2, consumerPerSubscription=3, subscriptionType="Shared",
                            consumerHeadroom=0.9, redeliveryRate=0.01, producerRate=30000, testDurationMinutes=2),
    # Many topics, one subscriber each, slow subscribers falling behind: the cache holds seconds of
    # the broker's traffic, not the slow subscribers' lag.
    "many-topics-small-cache": dict(topics=50, subscriptionsPerTopic=2, producerRate=10000, messageSize=512,
                                    slowConsumerFraction=0.3, slowConsumerSpeed=0.5, testDurationMinutes=2),
    # Subscriptions that keep seeking back 10 s (300 MB): re-reads of recent history.
    "seek-storm": dict(topics=2, subscriptionsPerTopic=3, producerRate=30000, seeksPerMinute=6, seekBackSeconds=10,
                       testDurationMinutes=2),
}

# The cache sizes each scenario is compared at by `ledgercache compare` and `make demo`: where its
# designs separate (found with `ledgercache sweep`), from a cache that holds about a second of the
# scenario's traffic to one that holds most of what its readers re-read (tailing-fan-out, the
# control, at the sizes of a broker's cache).
SCENARIO_CACHE_SIZES: dict[str, tuple[int, ...]] = {
    "tailing-fan-out": (16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB),
    "catch-up-under-pressure": (32 * MIB, 128 * MIB, 512 * MIB, 2048 * MIB),
    "key-shared-slow-consumer": (32 * MIB, 128 * MIB, 512 * MIB, 2048 * MIB),
    "shared-overflow": (32 * MIB, 128 * MIB, 512 * MIB, 2048 * MIB),
    "many-topics-small-cache": (8 * MIB, 32 * MIB, 128 * MIB, 512 * MIB),
    "seek-storm": (32 * MIB, 128 * MIB, 512 * MIB, 2048 * MIB),
}
