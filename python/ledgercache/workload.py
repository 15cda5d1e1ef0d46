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
under its camelCase name and its snake_case form. Files are read with a YAML parser (PyYAML's safe
loader: quoting, comments, flow mappings); a key given twice is an error naming the key, the file
and the line, and so is a file that is not UTF-8 text or whose top level is not a mapping: every
problem with a spec is an :class:`~ledgercache.InvalidArgumentError` naming the file and the key.

OMB's workload keys (``Workload.java``), all accepted:

- ``topics``, ``partitionsPerTopic``, ``messageSize`` (at most 2^31 - 1, a Java ``int``),
  ``subscriptionsPerTopic``, ``consumerPerSubscription``, ``producersPerTopic``,
  ``keyDistributor``, ``testDurationMinutes``: as OMB means them. Keyless batched messages to a
  partitioned topic go as the Java client routes them: each producer sends to one partition at a
  time, switching every 10 publish delays (``RoundRobinPartitionMessageRouterImpl``), so each
  partition gets larger batches a share of the time; other messages are spread evenly.
- ``producerRate``: messages per second over all partitions. ``0`` is OMB's "find the maximum
  sustainable rate" (OMB's ``RateController`` ramps the rate up until publishing or consuming falls
  behind): the lab simulates the rate a saturated broker ingests, the capacity below. A rate above
  that capacity is capped to it, as producers blocked by a saturated broker would be;
  :func:`estimate` says so (``capped_by``) and ``ledgercache generate`` prints one line.
- ``warmupDurationMinutes``: OMB runs the warm-up, then the test, with the same producers and
  consumers, so the warm-up is traffic too: the lab simulates warm-up plus test. OMB's default of
  1 applies to OMB workload files; mappings and ``.json`` specs default to 0.
- ``consumerBacklogSizeGB`` and ``backlogDrainRatio`` (1.0): OMB's backlog test
  (``WorkloadGenerator.buildAndDrainBacklog``), as OMB runs it. Consumers read during the warm-up;
  at its end they pause (OMB's paused worker holds each message listener: they process nothing, so
  they send no FLOW and the broker stops once their permits run out) until the backlog, messages
  published times subscriptions less messages received, is ``consumerBacklogSizeGB`` GiB (looked
  at once a second); then they resume and drain it, and the test runs until the backlog is down to
  ``1 - backlogDrainRatio`` of it (at least 1000 messages; looked at every 100 ms), then
  ``testDurationMinutes`` more. So the run is longer than warm-up plus test: :func:`estimate`
  gives ``simulated_seconds`` and ``backlog_start_seconds`` (when the consumers resume). Consumers
  no faster than the publish rate never drain it: the lab waits at most ``backlogMaxWaitMinutes``
  (240, lab-only) after the warm-up, then runs the test's minutes. Each broker of a multi-broker
  spec looks at its own partitions' share of the backlog (OMB sums over all of them).
- Ignored because they do not change what a broker's cache sees: ``name``; ``payloadFile``,
  ``useRandomizedPayloads``, ``randomBytesRatio``, ``randomizedPayloadPoolSize`` (payload bytes;
  only ``messageSize`` matters).

Broker ingest capacity (lab-only knobs; the rule is the Rust ``WorkloadSpec::ingest``):

- ``brokerIngestBytesPerSecond`` (312500000): what one broker takes in at most. A 10 Gbit/s NIC
  sends 1.25 GB/s and each byte a broker takes in goes out at least four times: to three bookies
  (OMB's Pulsar driver sets ``writeQuorum`` 3) and to one subscription: 1.25e9 / 4.
- ``brokerIngestMessagesPerSecond`` (1000000): a round order of magnitude for a broker's
  per-message work with batching on; not a measurement: set your brokers' figure.
- OMB's producers spread the rate evenly over the partitions, placed round robin over the
  brokers, so the broker with the most partitions saturates first: the rate is capped where that
  broker reaches either capacity.

Driver files (``driver=`` here, ``--driver`` on the command line): an OMB Pulsar driver file
(``driver-pulsar/pulsar.yaml``-style, or a mapping of the same shape). ``producer.batchingEnabled``,
``producer.batchingMaxPublishDelayMs``, ``producer.batchingMaxBytes``, ``consumer.receiverQueueSize``
and ``consumer.subscriptionType`` become the settings of the same name; keys the file leaves out
get the driver's Java defaults (``PulsarProducerConfig``: ``batchingMaxBytes`` 1048576, ...).
``client.persistence.deduplicationEnabled: true`` (OMB's ``pulsar-effectively-once.yaml``: the
driver turns deduplication on for its namespace) becomes ``brokerDeduplicationEnabled``: each topic
gets the ``pulsar.dedup`` cursor, which changes what the cache keeps (see "Readers" below).
Ignored: ``name``; the rest of ``client`` (connections, threads, TLS, authentication, the
namespace; ``persistence``'s quorums shape bookie writes);
``producer.blockIfQueueFull`` and ``producer.pendingQueueSize`` (the lab's producers never queue:
the ingest capacity caps the rate instead). ``driverClass`` must be OMB's Pulsar driver; other
keys are errors. An OMB workload file given without a driver gets the values of OMB's own
``pulsar.yaml`` (:data:`OMB_PULSAR_DRIVER`: ``receiverQueueSize`` 10000, ``subscriptionType``
Failover, ``batchingMaxBytes`` 131072); mappings, ``.json`` specs and the bundled scenarios keep
the lab's defaults below. The spec's own settings win over a driver's.

Memory: the simulation's state grows with topics x partitions x subscriptions x consumers (and
keys, for Key_Shared), not with the duration, except what seeks, backlogs and overflowing replay
queues keep. :func:`estimate` gives ``memory_bytes``; :func:`stream` and :func:`generate` refuse a
spec over ``memory_budget`` (4 GiB; ``--memory-budget``) with a
:class:`~ledgercache.ResourceLimitError` naming the estimate and what makes it fit, before
allocating anything.

The lab's knobs, with their defaults and where each comes from:

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
- ``acknowledgmentGroupTimeMs`` (100) and ``maxAcknowledgmentGroupSize`` (1000): Pulsar client
  ``acknowledgmentGroupTime`` and ``maxAcknowledgmentGroupSize`` (its defaults; OMB sets neither).
  The client sends its acknowledgements every group time, or at once when that many are pending
  (0 ms: each at once). A redelivery request does not send them, so an Exclusive or Failover
  rewind re-reads the entries acknowledged since, which the client drops as duplicates.

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
- ``maxEntriesPerLedger`` or ``managedLedgerMaxEntriesPerLedger`` (50000),
  ``managedLedgerMaxSizePerLedgerMbytes`` (2048; 0: no limit),
  ``managedLedgerMaxLedgerRolloverTimeMinutes`` (240; 0: no limit) and
  ``managedLedgerMinLedgerRolloverTimeMinutes`` (10; fractions allowed): a ledger is full once it
  holds that many entries or bytes, or is that old, and in every case only once it is older than
  the minimum (``ManagedLedgerImpl.currentLedgerIsFull``); the entry that finds it full is its last,
  and the next ledger's age counts from then. At OMB's rates a ledger therefore spans 10 minutes,
  not 50000 entries. A topic that stops publishing keeps its ledger open (a broker closes it at the
  maximum time).
- ``retentionTimeMinutes`` or ``defaultRetentionTimeInMinutes`` (0), ``retentionSizeMb`` or
  ``defaultRetentionSizeInMB`` (0; -1: infinite, as Pulsar reads any negative) and
  ``retentionCheckIntervalSeconds`` or ``retentionCheckIntervalInSeconds`` (120; 0: no periodic
  check; else at least 1, broker.conf's whole seconds): the ledgers every subscription has acknowledged wholly are deleted (a ``delete`` row
  each; the replay drops their cached entries), oldest first and never the one taking appends,
  while they are older than the retention time or the topic stays at or above the retention size
  without them (``ManagedLedgerImpl.internalTrimLedgers``: either limit deletes; -1 and -1 keep
  everything). A trim runs when a ledger is closed, when the slowest subscription's mark-delete
  position moves to another ledger, and at each check. With the defaults a consumed ledger goes at
  once.

Lab-only knobs (not Pulsar or OMB settings; they shape the simulated traffic):

- ``brokers`` (1): topic partitions are placed round-robin over the brokers.
- ``subscriptionType`` (``Exclusive``): ``Exclusive``, ``Failover``, ``Shared`` or ``Key_Shared``
  (OMB's ``pulsar.yaml`` sets it per driver as ``consumer.subscriptionType``); ``keys`` (10000,
  OMB's ``KeyDistributor`` count) distinct keys for ``keyDistributor`` ``KEY_ROUND_ROBIN`` /
  ``RANDOM_NANO`` (an entry's key is its first message's).
- ``slowConsumerFraction`` (0) of consumers (spread evenly, exactly that share) run at
  ``slowConsumerSpeed`` (0.5) of normal speed.
- ``redeliveryRate`` (0): share of delivered messages negatively acknowledged (an entry is
  redelivered whole). The consumer asks for it again ``negativeAckRedeliveryDelayMs`` later (60000,
  the Java client's ``negativeAckRedeliveryDelay``; at least its 100 ms minimum; due times in its
  256 ms steps), and it stays unacknowledged until then. On Shared and Key_Shared it is replayed;
  on Exclusive/Failover the client drops its receiver queue and the cursor rewinds to the first
  unacknowledged entry, its reads passing over what was acknowledged.
- ``seeksPerMinute`` (0) per subscription, each ``seekBackSeconds`` (30) back.
- ``catchUpReaders`` (0) per partition join at ``catchUpStartSeconds`` (30), ``catchUpBehindSeconds``
  (60) behind the tail, reading ``catchUpSpeed`` (4) times the publish rate.
- ``churnPerMinute`` (0) consumer disconnects per subscription, lasting ``churnDowntimeSeconds`` (5);
  a reconnect rewinds the cursor to the first unacknowledged entry.
- ``consumerHeadroom`` (1.2): a normal consumer's speed over its share of the publish rate.

The broker's life (lab-only; all off by default, which leaves the trace as it was):

- ``rollingRestartIntervalSeconds`` (0: none; else at least 1) and ``rollingRestartCount`` (0: as
  many as fit): every interval, from the first on, the next broker in order (0, 1, ...) restarts,
  as the injector of Pulsar's ``BrokerEntryCacheRollingRestartTest`` does (it looks at the clock
  after each restart and stops once that is at or after the end minus the interval). The broker
  unloads its topics (``unload`` rows) and is away ``brokerRestartSeconds`` (5); each topic loads
  ``topicLoadDelayMs`` (100) after its unload on the next broker that is up (one broker: itself once
  back), with ``load`` rows for the ledgers its cursors may still read, and takes its adds in a new
  ledger.
- ``bundleMovesPerMinute`` (0): per broker, one of its partitions unloaded and loaded on the next
  broker ``topicLoadDelayMs`` later (load shedding, an admin unload); one move per partition at a
  time.
- ``reconnectStormEverySeconds`` (0: none; else at least 1): every consumer closes and reconnects
  (a client fleet restarting); the topics stay where they are.
- ``reconnectDelayMinMs`` (100) to ``reconnectDelayMaxMs`` (200): a subscription's consumers
  reconnect a uniform delay after its topic loads (or a storm); the cursor opens at its first
  unacknowledged entry, so what was delivered and not acknowledged is delivered again.
- ``producerPauseOutstandingDeliveries`` (0: off): a producer sleeps 100 ms whenever its messages
  still owe this many deliveries (messages sent x subscriptions - messages received; each
  partition its share of the topic's), as the rolling-restart test's producer does.

While a topic is away its producer holds what it sends (up to the Java client's 64 MiB memory
limit, then it blocks) and sends it at the load; nothing is read. A moved partition stays with the
simulation of the broker it started on: ``broker=b`` gives the rows of the partitions that start
on broker ``b``, whichever broker they move to.
Readers a broker opens besides the consumers' subscriptions, and the bytes it caches (Rust
``readers.rs``, ``metadata.rs``; ``docs/fidelity.md`` "Readers a broker opens, and the bytes it
caches"):

- ``brokerDeduplicationEnabled`` (false; broker.conf) and ``brokerDeduplicationEntriesInterval``
  (1000; broker.conf): each partition gets the ``pulsar.dedup`` cursor, opened at the end when the
  topic starts (``MessageDeduplication``); it never reads and mark-deletes the last persisted entry
  every interval entries (its snapshot), and at the broker's snapshot monitor: every
  ``brokerDeduplicationSnapshotFrequencyInSeconds`` (120; 0: off; broker.conf) a topic whose last
  snapshot is ``brokerDeduplicationSnapshotIntervalSeconds`` (120; 0: off; broker.conf) old
  snapshots at its last entry, so a quiet topic's cursor moves too. It is active for ever, so PIP-430 counts one expected
  read per entry nobody makes, and 4.0 always has an active cursor near the tail.
- ``adminSubscriptionsPerTopic`` (0): subscriptions created through the admin API
  (``admin-sub-<i>``) that no consumer joins: opened at the end, never read.
- ``replicationClusters`` (0): remote clusters each partition replicates to; each a
  ``pulsar.repl.cluster-<n>`` cursor read as a tailing reader (``PersistentReplicator``: reads of
  ``readBatchSize`` entries, acknowledged as the remote sends complete), twice as fast as the
  partition's publishing.
- ``messageMetadata`` (true): an entry's size is its stored length, as ``RangeEntryCacheImpl``
  charges the cache: magic, checksum and the ``MessageMetadata`` the Java client writes, and per
  message of a batch its size and ``SingleMessageMetadata``. false: the payloads alone (the
  lab before issue 61).

A topic of ``topicDetails`` may carry its own ``deduplication`` (true/false, over
``brokerDeduplicationEnabled``) and ``replicationClusters`` (a list of cluster names, over
``replicationClusters``); admin subscriptions there are subscriptions with no ``consumerRates``.
Subscription names ``pulsar.dedup`` and ``pulsar.repl.*`` are the broker's own and refused.

Per-topic workloads: ``topicDetails`` (``topic_details``) simulates a broker's topics, each
different (say, from its topic stats), instead of the homogeneous shape above. A list of topics,
each a mapping (keys camelCase or snake_case):

- ``name``: the trace's topic name, as is (non-empty, unique). Each topic is one partition
  (managed ledger), in list order, placed round-robin over ``brokers``; a name ending in
  ``-partition-<n>`` picks a Failover subscription's active consumer by ``n``, as Pulsar does.
- ``producerRate``: messages per second published to it (>= 0; 0 publishes nothing), never
  capped by the broker ingest capacity. ``messageSize``: bytes per message (1 to 2^31 - 1).
  Batching follows the global ``batching*`` settings.
- ``subscriptions`` (default ``[]``), each a mapping: ``name`` (the trace's cursor name, unique
  within the topic); ``type`` (``Exclusive``, ``Failover``, ``Shared`` or ``Key_Shared``);
  ``consumerRates``, one entry per consumer: the messages per second it processes at most (> 0);
  an empty list is a subscription without consumers (its cursor opens and never reads);
  ``startSeconds`` (default 0: the cursor opens at the end at time 0 and tails; above 0 it opens
  at the topic's first entry at that time and its consumers connect then, as backlog-first
  consumers do); ``redeliveryRate`` (default 0): share of its delivered messages nacked;
  ``backlogEntries`` (default 0): its unread entries among the topic's stored ones (at most the
  topic's ``backlogEntries``): the cursor opens that far behind their end at time 0 and its
  consumers read from there (not with ``startSeconds``).
- ``backlogEntries`` (default 0): entries already in storage when the trace starts (at most 2^50),
  ``backlogMessagesPerEntry`` (default 1) messages of ``messageSize`` each. The trace begins with a
  ``load`` row for each of their ledgers (``managedLedgerMaxEntriesPerLedger`` entries each) that a
  subscription can reach within the run; the topic's adds go to a new ledger after them. A
  subscription without its own ``backlogEntries`` opens at the end.

The global settings (``batching*``, ``dispatcher*``, ``readBatchSize``, ``receiverQueueSize``,
``keySharedLookAhead*``, ``keys``, ``keyDistributor``, ``maxEntriesPerLedger``, seeks and churn,
warm-up and test duration, ``activeConsumerFailoverDelayTimeMillis``,
``managedLedgerNewEntriesCheckDelayInMillis``, ``brokers``) apply to every topic. The homogeneous
shape settings conflict with it: giving ``topics``, ``partitionsPerTopic``,
``subscriptionsPerTopic``, ``consumerPerSubscription``, ``producersPerTopic``, ``producerRate``,
``messageSize``, ``subscriptionType``, ``slowConsumerFraction``, ``slowConsumerSpeed``,
``redeliveryRate``, ``consumerHeadroom``, ``consumerBacklogSizeGB``, ``catchUpReaders`` or a
``catchUp*`` knob with it is an :class:`~ledgercache.InvalidArgumentError` naming the setting (a
driver's ``subscriptionType`` is dropped instead). Every field is checked; an error names it
(``topicDetails[0].subscriptions[1].consumerRates[2]``). :func:`estimate` and :func:`check` sum over
the topics (``producer_rate`` is the topics' total; ``ingest_capacity`` the total at which the most
loaded broker would reach its ingest limit). The homogeneous shape is the same simulation: a spec
and its ``topicDetails`` (names ``persistent://public/default/topic-<t>`` and ``sub-<s>``, each
consumer at the partition's rate x ``consumerHeadroom`` x its share) give the same trace.

How each simulated behaviour follows Pulsar's code is in ``docs/fidelity.md``.

The generator is Rust: deterministic per (spec, seed), millions of events per second. Rows are in
time order within each broker; a workload's brokers are simulated side by side and merged by time
(on a tie, the lower-numbered broker first). ``stream`` and ``generate`` give the same rows in the
same order, whatever ``batch_rows``.
"""

from __future__ import annotations

import difflib
import json
import math
import operator
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa
import yaml

from . import _native
from . import broker_stats as _stats
from ._files import read_bounded
from .errors import InvalidArgumentError, LedgerCacheError, ResourceLimitError, UnknownSettingError
from .trace import SCHEMA, conform

__all__ = [
    "BROKER_CONF_KEYS",
    "OMB_PULSAR_DRIVER",
    "SCENARIOS",
    "SCENARIO_CACHE_SIZES",
    "SCENARIO_CONFIGS",
    "Spec",
    "check",
    "estimate",
    "from_broker_stats",
    "generate",
    "load_driver",
    "load_spec",
    "normalize",
    "resolve",
    "settings_from_broker_conf",
    "stream",
]

DEFAULT_BATCH_ROWS = 65_536
# The broker.conf keys (Pulsar ``ServiceConfiguration``) that shape the simulated traffic; a spec
# takes each under the same name (see "Broker dispatchers" above).
BROKER_CONF_KEYS = (
    "dispatcherMaxReadBatchSize",
    "dispatcherMaxReadSizeBytes",
    "dispatcherMaxRoundRobinBatchSize",
    "keySharedLookAheadMsgInReplayThresholdPerConsumer",
    "keySharedLookAheadMsgInReplayThresholdPerSubscription",
    "subscriptionKeySharedConsistentHashingReplicaPoints",
    "activeConsumerFailoverDelayTimeMillis",
    "managedLedgerNewEntriesCheckDelayInMillis",
    "managedLedgerMaxEntriesPerLedger",
    "managedLedgerMaxSizePerLedgerMbytes",
    "managedLedgerMinLedgerRolloverTimeMinutes",
    "managedLedgerMaxLedgerRolloverTimeMinutes",
    "brokerDeduplicationEnabled",
    "brokerDeduplicationEntriesInterval",
    "brokerDeduplicationSnapshotFrequencyInSeconds",
    "brokerDeduplicationSnapshotIntervalSeconds",
    "defaultRetentionTimeInMinutes",
    "defaultRetentionSizeInMB",
    "retentionCheckIntervalInSeconds",
)
# broker.conf keys that are true/false rather than numbers.
_BROKER_CONF_FLAGS = frozenset({"brokerDeduplicationEnabled"})
# The memory a workload's simulation may take unless ``memory_budget`` says otherwise (4 GiB: a
# laptop's share; OMB's largest files need about 1 GiB, see the docs' lab page, "Workloads").
DEFAULT_MEMORY_BUDGET = 4 << 30
# A trace held as a table (``generate``) takes about this much memory an event.
TABLE_BYTES_PER_EVENT = 120

# The largest spec or driver file read (OMB's are under 1 KiB).
MAX_SPEC_FILE_BYTES = 1 << 20

Spec: TypeAlias = Mapping[str, Any] | str | os.PathLike

# The spec's names, as Rust declares them (src/lab/workload/spec.rs): the settings (snake_case; OMB's
# camelCase keys map onto them), ``topicDetails``' keys for each topic and each subscription, and the
# homogeneous shape settings ``topicDetails`` replaces (giving one with it is an error).
_SPEC_KEYS = _native.spec_keys()
KNOWN = frozenset(_SPEC_KEYS["settings"])
TOPIC_DETAIL_KEYS = frozenset(_SPEC_KEYS["topic_detail"])
SUBSCRIPTION_DETAIL_KEYS = frozenset(_SPEC_KEYS["subscription_detail"])
SHAPE_SETTINGS = frozenset(_SPEC_KEYS["shape"])
# OMB workload keys that do not change what a broker's cache sees (the module docstring says why).
IGNORED = frozenset(
    [
        "name",
        "payload_file",
        "use_randomized_payloads",
        "random_bytes_ratio",
        "randomized_payload_pool_size",
        "producer_start_delay_ms",
        "consumer_start_delay_ms",
    ]
)

# OMB's Pulsar driver file, ``driver-pulsar/pulsar.yaml`` (openmessaging/benchmark, Apache-2.0,
# commit 8559989): its settings that shape cache traffic, under our names. They apply to OMB
# workload files (``.yaml``/``.yml``) given without a driver, as OMB runs them with that file.
OMB_PULSAR_DRIVER: dict[str, Any] = {
    "batchingEnabled": True,  # producer.batchingEnabled
    "batchingMaxPublishDelayMs": 1,  # producer.batchingMaxPublishDelayMs
    "batchingMaxBytes": 131072,  # producer.batchingMaxBytes
    "receiverQueueSize": 10000,  # consumer.receiverQueueSize
    "subscriptionType": "Failover",  # consumer.subscriptionType
}
# Workload.java's defaults for keys an OMB workload file leaves out (and that the lab's mapping
# specs default otherwise): OMB warms up for a minute before the test.
OMB_WORKLOAD_DEFAULTS: dict[str, Any] = {"warmupDurationMinutes": 1}

# A driver file's sections and keys (PulsarConfig, PulsarProducerConfig, PulsarConsumerConfig),
# each with our setting, or None with why it does not shape cache traffic; and the Java class
# default a file that leaves the key out gets.
_DRIVER_KEYS: dict[str, dict[str, tuple[str | None, Any]]] = {
    "producer": {
        "batchingEnabled": ("batchingEnabled", True),
        "batchingMaxPublishDelayMs": ("batchingMaxPublishDelayMs", 1),
        "batchingMaxBytes": ("batchingMaxBytes", 1024 * 1024),
        # The lab's producers never wait on a full queue: a rate above what the brokers ingest is
        # capped instead (brokerIngestBytesPerSecond, brokerIngestMessagesPerSecond).
        "blockIfQueueFull": (None, True),
        "pendingQueueSize": (None, 0),
    },
    "consumer": {
        "receiverQueueSize": ("receiverQueueSize", 10000),
        "subscriptionType": ("subscriptionType", "Failover"),
    },
}
# Top-level keys ignored: ``name``; ``client`` (connections, threads, TLS, authentication, the
# namespace, and ``persistence``: ensemble and quorums shape bookie writes, not the broker cache)
# except ``client.persistence.deduplicationEnabled`` (:func:`_driver_deduplication`).
# ``driverClass`` must be OMB's Pulsar driver.
_DRIVER_IGNORED = frozenset({"name", "client", "driverClass"})
_PULSAR_DRIVER_CLASS = "io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver"


def _snake(key: str) -> str:
    key = key.replace("GB", "Gb").replace("MB", "Mb")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def normalize(spec: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """The spec's settings under the generator's snake_case names (``source`` names the spec in
    errors: a file's path)."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        name = _snake(str(key))
        if name in IGNORED:
            continue
        if name not in KNOWN:
            raise UnknownSettingError(
                f"{source}: unknown workload setting {key!r}{_did_you_mean(str(key), [_camel(k) for k in KNOWN])}"
            )
        if value is None:
            raise InvalidArgumentError(f"{source}: {key}: has no value")
        if name == "topic_details":
            out[name] = _topic_details(value, source, str(key))
            continue
        if isinstance(value, str):
            value = scalar(value)  # as OMB's reader (Jackson) takes "1024" for an int
        if not isinstance(value, (bool, int, float, str)):
            raise InvalidArgumentError(
                f"{source}: {key}: expected a number, true/false or text, got {type(value).__name__} {value!r}"
            )
        out[name] = value
    return out


def _detail_items(value: Any, where: str) -> list[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise InvalidArgumentError(f"{where}: expected a list, got {type(value).__name__} {value!r}"[:300])
    return list(value)


def _detail_mapping(value: Any, where: str, known: frozenset[str]) -> dict[str, Any]:
    """A topic's or subscription's mapping under snake_case keys; an unknown key or one given twice
    (``messageSize`` and ``message_size``) is an error naming it."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{where}: expected a mapping, got {type(value).__name__} {value!r}"[:300])
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _snake(str(key))
        if name not in known:
            raise UnknownSettingError(
                f"{where}.{key}: unknown key (expected one of {', '.join(sorted(_camel(k) for k in known))})"
            )
        if name in out:
            raise InvalidArgumentError(f"{where}.{key}: given twice")
        if item is None:
            raise InvalidArgumentError(f"{where}.{key}: has no value")
        out[name] = item
    return out


def _topic_details(value: Any, source: str, key: str) -> list[dict[str, Any]]:
    """``topicDetails`` under the generator's snake_case keys (its values are checked there)."""
    where = f"{source}: {key}"
    topics = []
    for i, topic in enumerate(_detail_items(value, where)):
        t = _detail_mapping(topic, f"{where}[{i}]", TOPIC_DETAIL_KEYS)
        if "subscriptions" in t:
            subs = _detail_items(t["subscriptions"], f"{where}[{i}].subscriptions")
            t["subscriptions"] = [
                _detail_mapping(sub, f"{where}[{i}].subscriptions[{j}]", SUBSCRIPTION_DETAIL_KEYS)
                for j, sub in enumerate(subs)
            ]
            for sub in t["subscriptions"]:
                if isinstance(sub.get("consumer_rates"), tuple):
                    sub["consumer_rates"] = list(sub["consumer_rates"])
        topics.append(t)
    return topics


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


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in a mapping is an error (YAML says keys
    are unique; PyYAML would keep the last one silently)."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def _read_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML or JSON file's top-level mapping; every problem an ``InvalidArgumentError`` naming
    the file (and the line, for YAML)."""
    try:
        # OMB's files are a few hundred bytes: a large file is not a spec (and is not read whole,
        # nor is a device whose size says nothing).
        if path.is_file() and path.stat().st_size > MAX_SPEC_FILE_BYTES:
            raise InvalidArgumentError(
                f"invalid {what}: {path} is {path.stat().st_size:,} bytes, more than a "
                f"settings file's {MAX_SPEC_FILE_BYTES:,}"
            )
        text = read_bounded(path, MAX_SPEC_FILE_BYTES, "a settings file", f"invalid {what}: {path}").decode("utf-8")
    except FileNotFoundError:
        raise InvalidArgumentError(f"invalid {what}: {path} does not exist") from None
    except UnicodeDecodeError as e:
        raise InvalidArgumentError(f"invalid {what}: {path} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise InvalidArgumentError(f"invalid {what}: {path}: {e.strerror or e}") from None
    except InvalidArgumentError:
        raise
    except ValueError as e:  # a path with a NUL byte
        raise InvalidArgumentError(f"invalid {what}: {path!r}: {e}") from None
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=_UniqueKeyLoader)
    except json.JSONDecodeError as e:
        raise InvalidArgumentError(f"invalid {what}: {path}: line {e.lineno}: {e.msg}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InvalidArgumentError(f"invalid {what}: {path}: {where}{problem}") from None
    except RecursionError:
        raise InvalidArgumentError(f"invalid {what}: {path}: nested too deeply") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidArgumentError(
            f"invalid {what}: {path}: expected a mapping of settings, got a {type(raw).__name__}"
        )
    return raw


def _did_you_mean(word: str, choices: list[str]) -> str:
    """`` (did you mean X?)`` for the choice closest to a misspelt name, or nothing when none is close."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


# Files that are traces, not specs: a spec is a few hundred bytes of YAML or JSON.
_TRACE_SUFFIXES = (".parquet", ".arrow", ".feather", ".ipc", ".arrows", ".csv")


def _is_omb_file(spec: Any) -> bool:
    return not isinstance(spec, Mapping) and Path(spec).suffix in (".yaml", ".yml")


def load_spec(spec: Spec) -> dict[str, Any]:
    """A spec's own settings (snake_case), from a mapping, or from an OMB ``.yaml`` / ``.json``
    file. Defaults from a driver are :func:`resolve`'s."""
    if isinstance(spec, Mapping):
        return normalize(spec)
    path = Path(spec)
    if path.suffix.lower() in _TRACE_SUFFIXES:
        raise InvalidArgumentError(
            f"invalid spec: {path} is a trace, not a spec (a .yaml or .json file of settings): "
            f"replay it (ledgercache replay, compare or sweep take it; lc.replay)"
        )
    if not path.suffix and not path.exists():
        # A name without a suffix was meant as a bundled scenario.
        hint = _did_you_mean(str(spec), list(SCENARIOS)) or f" (the scenarios: {', '.join(SCENARIOS)})"
        raise InvalidArgumentError(f"invalid spec: {path} does not exist and is not a bundled scenario{hint}")
    return normalize(_read_mapping(path, "spec"), source=str(path))


def settings_from_broker_conf(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, int | float | bool]:
    """The workload settings a broker's ``broker.conf`` gives (a path, or a mapping of its keys):
    each of :data:`BROKER_CONF_KEYS` it sets, as a number (``brokerDeduplicationEnabled`` as true or
    false, as Pulsar's ``FieldParser`` reads a boolean). An empty value is the broker's default
    (left out); one that is not a number is an :class:`~ledgercache.InvalidArgumentError` naming the
    key. Pass them as a spec's settings (``calibrate`` does, with its ``broker_conf``)."""
    pairs = dict(_native.read_broker_conf(source if isinstance(source, Mapping) else os.fspath(source)))
    settings: dict[str, int | float | bool] = {}
    for key in BROKER_CONF_KEYS:
        raw = pairs.get(key, "").strip()
        if not raw:
            continue
        if key in _BROKER_CONF_FLAGS:
            if raw.lower() not in ("true", "false"):
                raise InvalidArgumentError(f"invalid broker.conf: {key}={raw!r} is not true or false")
            settings[key] = raw.lower() == "true"
            continue
        try:
            settings[key] = int(raw)
        except ValueError:
            try:
                settings[key] = float(raw)
            except ValueError:
                raise InvalidArgumentError(f"invalid broker.conf: {key}={raw!r} is not a number") from None
    return settings


def load_driver(driver: Spec) -> dict[str, Any]:
    """An OMB Pulsar driver file (``driver-pulsar/pulsar.yaml``-style), or a mapping of the same
    shape, as workload settings (snake_case). Keys the file leaves out get the driver's Java
    defaults (``PulsarProducerConfig``, ``PulsarConsumerConfig``); keys that do not shape cache
    traffic are ignored (the module docstring lists them); unknown keys are errors."""
    source = "driver" if isinstance(driver, Mapping) else str(driver)
    raw = dict(driver) if isinstance(driver, Mapping) else _read_mapping(Path(driver), "driver")
    cls = raw.get("driverClass")
    if cls is not None and cls != _PULSAR_DRIVER_CLASS:
        raise InvalidArgumentError(f"{source}: driverClass {cls!r} is not OMB's Pulsar driver ({_PULSAR_DRIVER_CLASS})")
    out: dict[str, Any] = {}
    for section, keys in _DRIVER_KEYS.items():
        given = raw.get(section) or {}
        if not isinstance(given, Mapping):
            raise InvalidArgumentError(f"{source}: {section}: expected a mapping, got {type(given).__name__}")
        for key in given:
            if key not in keys:
                raise UnknownSettingError(f"{source}: unknown driver setting '{section}.{key}'")
        for key, (ours, default) in keys.items():
            if ours is not None:
                out[ours] = given.get(key, default)
    for key in raw:
        if key not in _DRIVER_KEYS and key not in _DRIVER_IGNORED:
            raise UnknownSettingError(f"{source}: unknown driver setting {key!r}")
    if _driver_deduplication(raw.get("client"), source):
        out["brokerDeduplicationEnabled"] = True
    return normalize(out, source=source)


def _driver_deduplication(client: Any, source: str) -> bool:
    """``client.persistence.deduplicationEnabled``: OMB's ``PulsarBenchmarkDriver.initialize``
    sets the namespace's deduplication status from it (``setDeduplicationStatus``), so every topic
    of the benchmark gets the ``pulsar.dedup`` cursor. Absent: off (``PulsarClientConfig``'s
    default), and the spec's own ``brokerDeduplicationEnabled`` decides."""
    if client is None:
        return False
    if not isinstance(client, Mapping):
        raise InvalidArgumentError(f"{source}: client: expected a mapping, got {type(client).__name__}")
    persistence = client.get("persistence")
    if persistence is None:
        return False
    if not isinstance(persistence, Mapping):
        raise InvalidArgumentError(
            f"{source}: client.persistence: expected a mapping, got {type(persistence).__name__}"
        )
    value = persistence.get("deduplicationEnabled", False)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, bool):
        raise InvalidArgumentError(
            f"{source}: client.persistence.deduplicationEnabled: expected true or false, got {value!r}"
        )
    return value


def resolve(spec: Spec | str, driver: Spec | None = None) -> dict[str, Any]:
    """The settings of a spec, a spec file or a scenario name (snake_case), with ``driver``'s
    (an OMB Pulsar driver file or mapping, see :func:`load_driver`) under them. An OMB workload
    file (``.yaml``) without a driver gets :data:`OMB_PULSAR_DRIVER` and OMB's one-minute warm-up;
    mappings, ``.json`` files and scenarios get the lab's defaults. The spec's own settings win."""
    if isinstance(spec, str) and spec in SCENARIOS:
        spec = SCENARIOS[spec]
    own = load_spec(spec)
    base: dict[str, Any] = {}
    if _is_omb_file(spec):
        base.update(normalize(OMB_WORKLOAD_DEFAULTS))
        if driver is None:
            base.update(normalize(OMB_PULSAR_DRIVER))
    if driver is not None:
        base.update(load_driver(driver))
    if "topic_details" in own:
        # Each listed subscription has its own type: the driver's does not apply.
        base.pop("subscription_type", None)
    return {**base, **own}


def _source(spec: Any) -> str:
    return "spec" if isinstance(spec, Mapping) or (isinstance(spec, str) and spec in SCENARIOS) else f"spec {spec}"


def _native_spec(call, source: str, settings: Mapping[str, Any], *args):
    """Calls the generator; an error about a setting names the spec's file and the setting as the
    spec spells it (camelCase)."""
    try:
        return call(dict(settings), *args)
    except InvalidArgumentError as e:
        message = str(e).replace("invalid spec:", f"invalid {source}:", 1)
        message = re.sub(
            r"\b([a-z]+(?:_[a-z0-9]+)+)\b",
            lambda m: _camel(m.group(1)) if m.group(1) in _NAMES else m.group(1),
            message,
        )
        raise type(e)(message) from None


# The names an error from the generator may use, shown as a spec spells them (camelCase).
_NAMES = KNOWN | TOPIC_DETAIL_KEYS | SUBSCRIPTION_DETAIL_KEYS


def _camel(name: str) -> str:
    if name == "consumer_backlog_size_gb":
        return "consumerBacklogSizeGB"
    if name == "default_retention_size_in_mb":
        return "defaultRetentionSizeInMB"
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _whole(name: str, value: Any, low: int, below: int) -> int:
    try:
        n = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        n = None
    if n is None or not low <= n < below:
        raise InvalidArgumentError(f"invalid {name}: expected a whole number in [{low}, {below}), got {value!r}")
    return n


def stream(
    spec: Spec | str,
    seed: int = 0,
    broker: int | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    driver: Spec | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> pa.RecordBatchReader:
    """The trace of a workload as a ``pyarrow.RecordBatchReader`` (read once), batches of
    ``batch_rows`` rows (the last one shorter) in :data:`ledgercache.trace.SCHEMA`.

    Each batch is generated when it is read; memory does not grow with the trace's duration. The
    rows are :func:`generate`'s. With ``broker``, only that broker's events. ``driver``: see
    :func:`resolve`. A simulation estimated to need more than ``memory_budget`` bytes raises
    :class:`~ledgercache.ResourceLimitError` before anything is allocated.
    """
    return _stream(resolve(spec, driver), _source(spec), seed, broker, batch_rows, memory_budget)


def _stream(
    settings: dict[str, Any], source: str, seed: int, broker: int | None, batch_rows: int, memory_budget: int
) -> pa.RecordBatchReader:
    seed = _whole("seed", seed, 0, 1 << 64)
    if broker is not None:
        broker = _whole("broker", broker, 0, 1 << 32)
    batch_rows = _whole("batch_rows", batch_rows, 1, 1 << 62)
    memory_budget = _whole("memory_budget", memory_budget, 1, 1 << 64)
    native = _native_spec(_native.stream_workload, source, settings, seed, broker, batch_rows, memory_budget)
    # The generator's string columns are dictionary-encoded; the reader gives the trace schema.
    return pa.RecordBatchReader.from_batches(SCHEMA, _conformed(pa.RecordBatchReader.from_stream(native)))


def check(
    spec: Spec | str, broker: int | None = None, driver: Spec | None = None, memory_budget: int = DEFAULT_MEMORY_BUDGET
) -> None:
    """Raises what :func:`stream` would raise before generating anything (a bad spec, a broker out
    of range, :class:`~ledgercache.ResourceLimitError` over ``memory_budget``), without setting up
    the simulation: for runs that start the streams elsewhere, such as Spark tasks."""
    if broker is not None:
        broker = _whole("broker", broker, 0, 1 << 32)
    memory_budget = _whole("memory_budget", memory_budget, 1, 1 << 64)
    _native_spec(_native.check_workload, _source(spec), resolve(spec, driver), broker, memory_budget)


def _conformed(raw: pa.RecordBatchReader):
    try:
        for batch in raw:
            yield conform(batch)
    except pa.ArrowException as e:  # the generator failed (a bug): still a LedgerCacheError
        raise LedgerCacheError(f"workload generation failed: {e}") from e


def generate(
    spec: Spec | str,
    seed: int = 0,
    broker: int | None = None,
    driver: Spec | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> pa.Table:
    """The trace of a workload (``spec`` may also name one of :data:`SCENARIOS`), in memory.

    With ``broker``, only that broker's events: brokers generated one by one (in parallel, say)
    add up to the whole trace. For long traces use :func:`stream`: a table estimated to take
    more than ``memory_budget`` bytes (about 120 bytes an event) raises
    :class:`~ledgercache.ResourceLimitError` before generating anything, and so does, as soon as
    it happens, a table that grows past the budget anyway (the estimate is rough).
    """
    settings = resolve(spec, driver)
    memory_budget = _whole("memory_budget", memory_budget, 1, 1 << 64)
    e = _estimate(settings, _source(spec))
    events = e["events"] / (settings.get("brokers", 1) if broker is not None else 1)
    table = events * TABLE_BYTES_PER_EVENT
    if table + e["memory_bytes"] > memory_budget:
        raise ResourceLimitError(
            f"the trace as a table needs ~{table / (1 << 30):,.1f} GiB (~{events:,.0f} events) beside the "
            f"simulation's ~{e['memory_bytes'] / (1 << 30):,.1f} GiB, over the memory budget of "
            f"{memory_budget / (1 << 30):,.1f} GiB: stream it (lc.workload.stream), shorten it "
            f"(testDurationMinutes, --duration-minutes) or raise memory_budget="
        )
    reader = _stream(settings, _source(spec), seed, broker, DEFAULT_BATCH_ROWS, memory_budget)
    # The estimate is rough (lifecycle loads, storms and backlogs can take it past a factor of
    # two): the table's own bytes are checked as it grows, so a run the estimate missed stops at
    # the budget instead of taking the machine's memory.
    batches: list[pa.RecordBatch] = []
    held = 0
    for batch in reader:
        held += batch.get_total_buffer_size()
        if held + e["memory_bytes"] > memory_budget:
            rows = sum(b.num_rows for b in batches) + batch.num_rows
            del batches
            raise ResourceLimitError(
                f"the trace as a table passed the memory budget of {memory_budget / (1 << 30):,.1f} GiB at "
                f"{rows:,} events (estimated ~{events:,.0f}): stream it (lc.workload.stream), shorten it "
                f"(testDurationMinutes, --duration-minutes) or raise memory_budget="
            )
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)


def estimate(spec: Spec | str, driver: Spec | None = None) -> dict[str, Any]:
    """About how big a workload's trace is, from its rates, duration and subscriptions, before
    generating it: ``events``, ``entries``, ``messages``, ``parquet_bytes`` (a trace file) and
    ``seconds`` (to generate and write it here). Rough: within a factor of two on the bundled
    scenarios and OMB-like workloads. Also the rate simulated, ``producer_rate`` (messages/s),
    with ``requested_rate``, ``ingest_capacity`` and ``capped_by`` (``"bytes"``, ``"messages"``
    or None: see ``brokerIngestBytesPerSecond``), and the simulation's memory, ``memory_bytes``
    (``memory_growing_bytes`` of it grow with the duration); ``simulated_seconds`` (warm-up plus
    test, plus the backlog's build and drain with ``consumerBacklogSizeGB``),
    ``nack_redelivery_delay_seconds`` (when a consumer asks for a nacked message again, as the
    client applies ``negativeAckRedeliveryDelayMs``),
    ``backlog_start_seconds`` (when the paused consumers resume to drain the backlog; None without
    one), ``backlog_built`` (False when the backlog is not built within ``backlogMaxWaitMinutes``:
    the consumers never resume; None without one) and ``backlog_wait_capped`` (the backlog is not
    drained within ``backlogMaxWaitMinutes``).
    """
    return _estimate(resolve(spec, driver), _source(spec))


def _estimate(settings: dict[str, Any], source: str) -> dict[str, Any]:
    e = dict(_native_spec(_native.estimate_workload, source, settings))
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
    "tailing-fan-out": dict(
        topics=2,
        partitionsPerTopic=2,
        subscriptionsPerTopic=4,
        producerRate=40000,
        messageSize=1024,
        testDurationMinutes=2,
    ),
    # OMB's backlog test: consumers pause until a backlog of 0.5 GiB has built up, then catch up while
    # publishing goes on; a reader per partition joins 15 s (600 MB) behind the tail.
    "catch-up-under-pressure": dict(
        topics=2,
        subscriptionsPerTopic=2,
        producerRate=40000,
        messageSize=1024,
        consumerBacklogSizeGB=0.5,
        consumerHeadroom=1.5,
        testDurationMinutes=2,
        catchUpReaders=1,
        catchUpStartSeconds=20,
        catchUpBehindSeconds=15,
    ),
    # Key_Shared with a slow consumer: its keys' entries wait in the replay queue.
    "key-shared-slow-consumer": dict(
        topics=1,
        subscriptionsPerTopic=1,
        consumerPerSubscription=4,
        subscriptionType="Key_Shared",
        keyDistributor="KEY_ROUND_ROBIN",
        slowConsumerFraction=0.25,
        slowConsumerSpeed=0.3,
        producerRate=30000,
        testDurationMinutes=2,
    ),
    # Shared subscription whose consumers cannot keep up: reads overflow into the replay queue.
    "shared-overflow": dict(
        topics=1,
        subscriptionsPerTopic=2,
        consumerPerSubscription=3,
        subscriptionType="Shared",
        consumerHeadroom=0.9,
        redeliveryRate=0.01,
        producerRate=30000,
        testDurationMinutes=2,
    ),
    # Many topics, one subscriber each, slow subscribers falling behind: the cache holds seconds of
    # the broker's traffic, not the slow subscribers' lag.
    "many-topics-small-cache": dict(
        topics=50,
        subscriptionsPerTopic=2,
        producerRate=10000,
        messageSize=512,
        slowConsumerFraction=0.3,
        slowConsumerSpeed=0.5,
        testDurationMinutes=2,
    ),
    # Subscriptions that keep seeking back 10 s (300 MB): re-reads of recent history.
    "seek-storm": dict(
        topics=2,
        subscriptionsPerTopic=3,
        producerRate=30000,
        seeksPerMinute=6,
        seekBackSeconds=10,
        testDurationMinutes=2,
    ),
    # Failover (OMB's subscription type) with 1% of messages negatively acknowledged: a Failover
    # client cannot ask for single messages again, so when a nack is due (a minute later, then
    # about every quarter second, its timer's step) it drops its receiver queue and the cursor
    # rewinds to the first unacknowledged entry, passing over what was acknowledged.
    "failover-nacks": dict(
        topics=2,
        subscriptionsPerTopic=2,
        producerRate=30000,
        subscriptionType="Failover",
        redeliveryRate=0.01,
        testDurationMinutes=2,
    ),
    # Pulsar's BrokerEntryCacheRollingRestartTest.testTailingReadsRollingRestart (master,
    # pulsar-broker tests), as its author ran it for PIP-430 (docs/pulsar-tests.md says what each
    # figure comes from): two brokers, one topic of 10 partitions, 50,000 messages/s without
    # batching, each entry charged exactly 8 KiB (its calculateEntryLength), 10 Shared
    # subscriptions of one consumer each from the earliest position, a broker restarted every 7.5 s
    # over 30 s, its topics moving to the other broker. Its four cache configurations are
    # SCENARIO_CONFIGS["rolling-restart"]; Pulsar's published figures are pulsar_reference.py's.
    "rolling-restart": dict(
        brokers=2,
        topics=1,
        partitionsPerTopic=10,
        producerRate=50000,
        batchingEnabled=False,
        messageSize=8192,
        # The test charges an entry 8 KiB whatever its bytes: no metadata on top.
        messageMetadata=False,
        subscriptionsPerTopic=10,
        consumerPerSubscription=1,
        subscriptionType="Shared",
        receiverQueueSize=200,
        acknowledgmentGroupTimeMs=5,
        # The consumers receive and acknowledge as fast as their thread goes; Pulsar's runs show
        # they kept up on average (consumed = 10 x produced). Twice the publish rate: a consumer
        # thread of the test shares the laptop with two brokers, mock BookKeeper and the producer.
        consumerHeadroom=2.0,
        managedLedgerMaxEntriesPerLedger=100000,
        managedLedgerMinLedgerRolloverTimeMinutes=0,
        managedLedgerMaxLedgerRolloverTimeMinutes=1,
        testDurationMinutes=0.5,
        # The injector restarts broker 0, 1, 0 at 7.5, 15 and 22.5 s (its interval is
        # testTimeInSeconds / (numberOfRestarts + 1); its stop check precedes each wait).
        rollingRestartIntervalSeconds=7.5,
        rollingRestartCount=3,
        # restartBroker(): an in-process PulsarService stopped (its bundles unloaded) and started
        # again against mock ZooKeeper and BookKeeper: about two seconds.
        brokerRestartSeconds=2,
        # The lookup and the managed ledger's open on the new owner (the default).
        topicLoadDelayMs=100,
        # The test's connection delay, ThreadLocalRandom.nextLong(20, 40) ms; the client's
        # reconnect backoff (Backoff, initial 100 ms) runs while the topic loads.
        reconnectDelayMinMs=20,
        reconnectDelayMaxMs=40,
        # The producer thread sleeps 100 ms while 500,000 deliveries are outstanding.
        producerPauseOutstandingDeliveries=500000,
    ),
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
    "failover-nacks": (16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB),
    # managedLedgerCacheSizeMB=250 (getManagedLedgerCacheSizeMB), each broker's.
    "rolling-restart": (250 * MIB,),
}

# Scenarios compared under named broker configurations instead of the designs at their sizes:
# each name maps to CacheConfig settings (strategy included), replayed at each of the scenario's
# SCENARIO_CACHE_SIZES by `ledgercache compare` and `make demo` (--strategy/--set override them).
# rolling-restart's are AbstractBrokerEntryCacheMultiBrokerTest.BrokerEntryCacheType's four, each
# as its configure* method sets the broker (all on master, so all the pip430 design).
_PIP430_DISABLED: dict[str, Any] = {
    "strategy": "pip430",
    # disablePIP430: setCacheEvictionByExpectedReadCount(false),
    # setManagedLedgerCacheEvictionExtendTTLOfRecentlyAccessed(false).
    "eviction_by_expected_read_count": False,
    "extend_ttl_of_recently_accessed": False,
}
SCENARIO_CONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "rolling-restart": {
        # configurePIP430: the defaults, set explicitly.
        "PIP430": {
            "strategy": "pip430",
            "eviction_by_expected_read_count": True,
            "extend_ttl_of_recently_accessed": True,
        },
        "PIP430disabled": dict(_PIP430_DISABLED),
        # configureCacheEvictionByMarkDeletedPosition: disablePIP430, then
        # setCacheEvictionByMarkDeletedPosition(true).
        "cacheEvictionByMarkDeletedPosition": {**_PIP430_DISABLED, "eviction_by_mark_deleted_position": True},
        # configurePR12258Caching: disablePIP430, then the backlog-caching settings
        # (managedLedgerMinimumBacklogCursorsForCaching=1, ...MinimumBacklogEntriesForCaching=1,
        # ...MaxBacklogBetweenCursorsForCaching=Integer.MAX_VALUE,
        # managedLedgerCursorBackloggedThreshold=Long.MAX_VALUE). Its extra broker change, a cursor
        # activated when a consumer connects (PersistentSubscription.addConsumerInternal), is
        # master's code, and the replay's `open` runs that check.
        "PR12258": {
            **_PIP430_DISABLED,
            "min_backlog_cursors_for_caching": 1,
            "min_backlog_entries_for_caching": 1,
            "max_backlog_between_cursors_for_caching": (1 << 31) - 1,
            "cursor_backlogged_threshold": (1 << 63) - 1,
        },
    },
}


# A broker's stats as a spec (lc.workload.from_broker_stats; the rules are in broker_workload.py's
# docstring, beside the way back from a trace to stats).
# A subscription at most this many seconds of publishing behind tails (acknowledgements trail
# deliveries; entries this recent are in any cache).
TAIL_SECONDS = 2.0
# Messages/s of a consumer the stats show connected but dispatching nothing.
STALLED_RATE = 0.01
# The Pulsar Java client's producer and consumer defaults (ProducerConfigurationData,
# ConsumerConfigurationData): how an operator's producers batch, unlike OMB's.
CLIENT_DEFAULTS: dict[str, Any] = {
    "batchingEnabled": True,
    "batchingMaxPublishDelayMs": 1,
    "batchingMaxMessages": 1000,
    "batchingMaxBytes": 131072,
    "receiverQueueSize": 1000,
}
_SINGLE = ("Exclusive", "Failover")
_MAX_REDELIVERY = 0.5
_MAX_MESSAGE = (1 << 31) - 1
# startSeconds 0 means "opens at the end"; a lagging subscription opens at the first entry no earlier.
_EARLIEST_START = 1e-3


def _positive(name: str, value: float) -> float:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0):
        raise InvalidArgumentError(f"invalid {name}: expected a number above 0, got {value!r}")
    return float(value)


def from_broker_stats(
    source: Any,
    *,
    test_duration_minutes: float = 2.0,
    max_backlog_minutes: float = 10.0,
    consumer_headroom: float = 1.2,
    receiver_queue_size: int = 1000,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A workload spec (a mapping for :mod:`ledgercache.workload`) reproducing a broker's topics.

    ``source``: a stats dump's path, a mapping, or a :class:`~ledgercache.broker_stats.BrokerStats`
    (:func:`ledgercache.broker_stats.read` says which dumps are accepted). ``settings``: more
    workload settings (dispatcher knobs, ``brokerIngest...``), winning over the defaults here.
    :mod:`ledgercache.broker_workload`'s docstring gives the rules.
    """
    return workload_and_notes(
        source,
        test_duration_minutes=test_duration_minutes,
        max_backlog_minutes=max_backlog_minutes,
        consumer_headroom=consumer_headroom,
        receiver_queue_size=receiver_queue_size,
        settings=settings,
    )[0]


def workload_and_notes(
    source: Any,
    *,
    test_duration_minutes: float = 2.0,
    max_backlog_minutes: float = 10.0,
    consumer_headroom: float = 1.2,
    receiver_queue_size: int = 1000,
    settings: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """:func:`from_broker_stats`'s spec, and a line for each place where the workload cannot give
    what the stats say (a backlog over the cap or out of the run's reach, a subscription nobody
    reads, an idle topic with a backlog)."""
    stats = source if isinstance(source, _stats.BrokerStats) else _stats.read(source)
    notes: list[str] = []
    test = _positive("test_duration_minutes", test_duration_minutes)
    max_lag_s = _positive("max_backlog_minutes", max_backlog_minutes) * 60.0
    headroom = _positive("consumer_headroom", consumer_headroom)
    queue = int(_positive("receiver_queue_size", receiver_queue_size))
    topics: list[dict[str, Any]] = []
    warmup_s = 0.0
    for t in stats.topics:
        rate = t.msg_rate_in
        size = min(
            _MAX_MESSAGE,
            max(1, round(t.average_msg_size or (t.msg_throughput_in / rate if rate > 0 else 0.0) or 1024.0)),
        )
        per_entry = _messages_per_entry(rate, size, settings or {})
        subs = []
        for s in t.subscriptions:
            sub, start = _subscription(s, rate, per_entry, headroom, queue, max_lag_s)
            warmup_s = max(warmup_s, start)
            subs.append(sub)
            where = f"{t.name} {s.name}"
            if rate > 0 and s.msg_backlog * per_entry / rate > max_lag_s:
                notes.append(
                    f"{where}: backlog longer than {max_lag_s / 60:g} min of publishing; simulated as "
                    f"{max_lag_s / 60:g} min of lag"
                )
            if rate == 0 and s.msg_backlog:
                # Nobody publishes: the backlog is in storage when the trace starts.
                sub["backlogEntries"] = s.msg_backlog
                if s.consumers and s.msg_rate_out <= 0:
                    notes.append(
                        f"{where}: a backlog of {s.msg_backlog} entries but its consumers receive nothing "
                        f"(msgRateOut 0): a stuck subscription; it keeps its backlog and barely reads "
                        f"({STALLED_RATE:g} msg/s a consumer)"
                    )
                elif not s.consumers:
                    notes.append(f"{where}: no consumer, so nothing reads it: its backlog stays in storage")
            elif not s.consumers and s.msg_backlog:
                notes.append(
                    f"{where}: no consumer, so nothing reads it: simulated as a cursor opened at the end that never "
                    f"reads (its backlog of {s.msg_backlog} entries is not in the trace)"
                )
        topic: dict[str, Any] = {"name": t.name, "producerRate": rate, "messageSize": size, "subscriptions": subs}
        if rate == 0 and any(s.msg_backlog for s in t.subscriptions):
            topic["backlogMessagesPerEntry"] = _stored_messages_per_entry(t, size)
        if t.deduplication is not None:
            topic["deduplication"] = t.deduplication
        if t.replication_clusters:
            topic["replicationClusters"] = list(t.replication_clusters)
        topics.append(topic)
    if not any(t["producerRate"] > 0 or t["subscriptions"] for t in topics):
        raise InvalidArgumentError(
            "invalid stats: no persistent topic publishes or has a subscription: nothing to simulate"
        )
    if any(sub["redeliveryRate"] > 0 for t in topics for sub in t["subscriptions"]):
        # Nacks come back a redelivery delay after the nack: the warm-up covers it, so the test's
        # redeliveries are at the stats' steady rate.
        warmup_s = max(warmup_s, _nack_delay_seconds(settings or {}))
    end_s = warmup_s + test * 60.0
    for topic in topics:
        if "backlogMessagesPerEntry" in topic:
            notes.extend(_stored_backlog(topic, end_s))
        for sub in topic["subscriptions"]:
            if sub["startSeconds"] > 0 and sub["consumerRates"]:
                sub["startSeconds"], reached = _start_for_backlog_at_end(sub, topic["producerRate"], warmup_s, end_s)
                if not reached:
                    notes.append(
                        f"{topic['name']} {sub['name']}: its backlog changes faster than the run can "
                        f"match (it ends the run with a different backlog; see the comparison)"
                    )
    spec: dict[str, Any] = {
        **CLIENT_DEFAULTS,
        # averageMsgSize is msgThroughputIn / msgRateIn, and a producer's throughput counts each
        # message's stored bytes (`Producer.publishMessage`: `headersAndPayload.readableBytes()`),
        # metadata included: adding it again would count it twice.
        "messageMetadata": False,
        "receiverQueueSize": queue,
        "topicDetails": topics,
        "warmupDurationMinutes": warmup_s / 60.0,
        "testDurationMinutes": test,
    }
    spec.update(settings or {})
    notes.extend(_broker_readers_note(topics, spec))
    return spec, notes


def _broker_readers_note(topics: list[dict[str, Any]], spec: Mapping[str, Any]) -> list[str]:
    """The cursors the broker opens besides the stats' subscriptions (see "Readers" above): named,
    because they change what the cache keeps (an expected read per entry under PIP-430, an active
    cursor near the tail under 4.0) without showing in any subscription of the stats."""
    default = bool(spec.get("brokerDeduplicationEnabled", False))
    dedup = sum(bool(t.get("deduplication", default)) for t in topics)
    repl = sum(bool(t.get("replicationClusters")) for t in topics)

    parts = []
    if dedup:
        source = "deduplicationStatus, else brokerDeduplicationEnabled" if default else "deduplicationStatus"
        parts.append(f"the pulsar.dedup cursor on {_stats._counted(dedup, 'topic')} ({source})")
    if repl:
        parts.append(f"pulsar.repl.<cluster> cursors on {_stats._counted(repl, 'topic')} (their stats' replication)")
    if not parts:
        return []
    return [f"readers besides the subscriptions: {'; '.join(parts)}"]


# The most entries a topic may have in storage when the trace starts, and the most bytes
# (src/lab/workload/initial_backlog.rs, MAX_STORED_ENTRIES; spec.rs).
_MAX_STORED_ENTRIES = 1 << 40
_MAX_STORED_BYTES = 1 << 62


def _stored_messages_per_entry(t: _stats.TopicStats, size: int) -> int:
    """Messages in each stored entry of an idle topic: its ``backlogSize`` (bytes, the slowest
    subscription's backlog) over that backlog's entries and the message size (1 without it)."""
    entries = max(s.msg_backlog for s in t.subscriptions)
    if t.backlog_size <= 0 or entries <= 0:
        return 1
    return max(1, min(_MAX_MESSAGE // size, round(t.backlog_size / entries / size)))


def _stored_backlog(topic: dict[str, Any], end_s: float) -> list[str]:
    """An idle topic's stored backlog: each subscription with a backlog starts that far behind
    the stored end plus what it reads over the run (its consumers' rates), so that it ends the run
    with the stats' backlog (the stats describe the broker when it was dumped); the topic stores
    as many entries as the furthest behind needs. Its notes (a backlog capped)."""
    notes = []
    per = topic["backlogMessagesPerEntry"]
    most = min(_MAX_STORED_ENTRIES, _MAX_STORED_BYTES // (per * topic["messageSize"]))
    for sub in topic["subscriptions"]:
        if "backlogEntries" not in sub:
            continue
        rates = sub["consumerRates"]
        r = (rates[0] if sub["type"] in _SINGLE else sum(rates)) if rates else 0.0
        # Capped before rounding: a huge rate (msgRateOut near the float maximum) makes an infinite
        # product, which math.ceil refuses; anything over `most` is capped below anyway.
        reads = r * end_s / per
        entries = sub["backlogEntries"] + (math.ceil(reads) if reads <= most else most)
        if entries > most:
            notes.append(
                f"{topic['name']} {sub['name']}: a backlog of {entries} entries is more than the lab "
                f"stores ({most}); simulated as {most}"
            )
            entries = most
        sub["backlogEntries"] = entries
    topic["backlogEntries"] = max((s.get("backlogEntries", 0) for s in topic["subscriptions"]), default=0)
    # Only subscriptions with consumers read: the note says which, so that it does not contradict a
    # subscription's own "no consumer" note.
    readers = [s["name"] for s in topic["subscriptions"] if "backlogEntries" in s and s["consumerRates"]]
    if not readers:
        read = "no subscription reads it (none has a consumer)"
    elif len(readers) == sum("backlogEntries" in s for s in topic["subscriptions"]):
        read = "each subscription reads it at the rate its stats show"
    else:
        read = f"{', '.join(readers)} read{'s' if len(readers) == 1 else ''} it at the rate its stats show"
    notes.append(
        f"{topic['name']}: nobody publishes; its backlog ({topic['backlogEntries']} entries of {per} "
        f"message(s)) is in storage when the trace starts, and {read}"
    )
    return notes


def _start_for_backlog_at_end(
    sub: Mapping[str, Any], rate_in: float, warmup_s: float, end_s: float
) -> tuple[float, bool]:
    """When a lagging subscription opens at the topic's first entry so that its backlog at the end
    of the run is the one the stats give (they describe the broker when it was dumped): opened at
    ``s`` and reading at ``r``, it is ``rate_in * end - r * (end - s)`` messages behind at the end.
    Its start as :func:`_subscription` set it (the backlog's seconds of publishing) is where a
    subscription reading at the publish rate opens; one reading slower opens earlier, one draining
    its backlog later, within (0, warm-up]; and whether that start gives the backlog (a backlog
    growing too fast for the run, or draining too fast, cannot be reached)."""
    rates = sub["consumerRates"]
    r = rates[0] if sub["type"] in _SINGLE else sum(rates)
    backlog = sub["startSeconds"] * rate_in
    if r <= STALLED_RATE * len(rates):
        return sub["startSeconds"], False  # stalled: its backlog is whatever was published since it opened
    start = end_s - (rate_in * end_s - backlog) / r
    fitted = min(warmup_s, max(_EARLIEST_START, start))
    return fitted, abs(fitted - start) < 1.0


def _messages_per_entry(rate: float, size: int, settings: Mapping[str, Any]) -> float:
    """Messages in an entry (a producer batch) at this rate and message size: the generator's own
    estimate, so that a backlog in entries becomes the seconds of publishing it simulates."""
    if rate <= 0:
        return 1.0
    e = estimate(
        {
            **CLIENT_DEFAULTS,
            **settings,
            "producerRate": rate,
            "messageSize": size,
            "testDurationMinutes": 1,
            "warmupDurationMinutes": 0,
        }
    )
    return e["messages"] / e["entries"] if e["entries"] else 1.0


def _lags(backlog_messages: float, consumers: int, queue: int, rate_in: float) -> bool:
    return backlog_messages > max(queue * max(1, consumers), TAIL_SECONDS * rate_in)


def _nack_delay_seconds(settings: Mapping[str, Any]) -> float:
    """The clients' negative-ack redelivery delay the workload simulates, in seconds (the Java
    client's one minute unless ``settings`` says otherwise)."""
    return float(estimate({**CLIENT_DEFAULTS, **settings})["nack_redelivery_delay_seconds"])


def _subscription(
    s: _stats.SubscriptionStats, rate_in: float, per_entry: float, headroom: float, queue: int, max_lag_s: float
) -> tuple[dict[str, Any], float]:
    consumers = sorted(s.consumers, key=lambda c: -c.msg_rate_out)  # the busiest is the active one
    redelivery = min(_MAX_REDELIVERY, s.msg_rate_redeliver / s.msg_rate_out) if s.msg_rate_out > 0 else 0.0
    backlog = s.msg_backlog * per_entry
    lags = _lags(backlog, len(consumers), queue, rate_in)
    total = s.msg_rate_out if lags else max(s.msg_rate_out, rate_in) * headroom
    # Without a consumer nothing reads it: a cursor opened at the end, as an admin-created
    # subscription is (`PersistentTopic.createSubscription`), whatever its backlog.
    start = min(backlog / rate_in, max_lag_s) if lags and rate_in > 0 and consumers else 0.0
    rates: list[float] = []
    if consumers:
        if s.type in _SINGLE:
            weights = [1.0] + [0.0] * (len(consumers) - 1)
        else:
            weights = [c.msg_rate_out for c in consumers]
            if sum(weights) <= 0:
                weights = [1.0] * len(consumers)
        rates = [max(STALLED_RATE, total * w / sum(weights)) for w in weights]
    return (
        {
            "name": s.name,
            "type": s.type or "Exclusive",
            "consumerRates": rates,
            "startSeconds": start,
            "redeliveryRate": redelivery,
        },
        start,
    )
