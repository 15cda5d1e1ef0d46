"""Type stubs for the Rust extension module ``ledgercache._native``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal, final

import pyarrow as pa
from typing_extensions import disjoint_base

__all__ = [
    "__version__",
    "_allocator",
    "Position",
    "ManualClock",
    "SystemClock",
    "CacheConfig",
    "EntryCacheManager",
    "EntryCache",
    "CachedEntry",
    "EntryInfo",
    "InflightReadsHandle",
    "InflightReadsLimiter",
    "ActiveCursorContainer",
    "CursorHandle",
    "SlowestCursorHeap",
    "Storage",
    "MemoryStorage",
    "FileStorage",
    "CallableStorage",
    "ManagedLedger",
    "ManagedCursor",
    "ReadHandle",
    "ReplaySession",
    "RequestRecorder",
    "summary_schema",
    "series_schema",
    "trace_format",
    "WorkloadStream",
    "stream_workload",
    "estimate_workload",
    "check_workload",
    "spec_keys",
    "read_broker_conf",
    "designs",
    "PublishRateLimiter",
    "Producer",
    "PartitionedProducer",
    "encode_throttle_producer",
    "decode_throttle_producer",
    "encode_throttle_producer_receipt",
    "decode_throttle_producer_receipt",
    "supports_throttle_producer",
    "simulate_publishes",
]

__version__: str
# The global allocator the extension was built with: "mimalloc" (the wheel) or "system".
_allocator: str

# A design's name: one of ``designs()``'s (the registry in src/config/designs.rs lists them once).
_StrategyName = str
_BytesLike = bytes | bytearray | memoryview | Any  # anything exporting a buffer (pyarrow.Buffer, ...)
# An Arrow binary/large_binary/string/large_string array: anything with __arrow_c_array__ (one
# chunk) or __arrow_c_stream__ (a pyarrow.ChunkedArray, ...).
_ArrowBinaryArray = Any
# One integer per entry: an Arrow integer array (chunked or not), a list, a range, a NumPy array.
_Integers = Any

@final
class Position:
    """Where an entry sits in a managed ledger; ordered by (ledger_id, entry_id)."""

    def __new__(cls, ledger_id: int, entry_id: int) -> Position: ...
    @property
    def ledger_id(self) -> int: ...
    @property
    def entry_id(self) -> int: ...
    def __lt__(self, other: Position, /) -> bool: ...
    def __le__(self, other: Position, /) -> bool: ...
    def __gt__(self, other: Position, /) -> bool: ...
    def __ge__(self, other: Position, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class ManualClock:
    """A clock that moves only when told to (nanoseconds)."""

    def __new__(cls, start_ns: int = 0) -> ManualClock: ...
    def now_ns(self) -> int: ...
    def advance_ms(self, ms: int) -> int: ...
    def advance_ns(self, ns: int) -> int: ...

@final
class SystemClock:
    """The system monotonic clock, the default everywhere."""

    def __new__(cls) -> SystemClock: ...
    def now_ns(self) -> int: ...

_Clock = ManualClock | SystemClock

@final
class CacheConfig:
    """Frozen entry-cache settings; keywords are snake_case Pulsar broker settings."""

    cache_size_bytes: int
    eviction_watermark: float
    eviction_trigger_threshold: float
    eviction_time_threshold_ms: int
    eviction_interval_ms: int
    eviction_by_expected_read_count: bool
    extend_ttl_max_times: int
    extend_ttl_of_recently_accessed: bool
    continue_caching_after_last_active_cursor_leaves_ms: int | None
    eviction_by_mark_deleted_position: bool
    copy_entries: bool
    strategy: _StrategyName
    segment_count: int
    recv_buffer_min_bytes: int
    recv_buffer_initial_bytes: int
    recv_buffer_max_bytes: int
    storage_read_buffer_bytes: int
    storage_read_latency_ms: int
    cursor_epochs: bool
    min_backlog_cursors_for_caching: int
    min_backlog_entries_for_caching: int
    max_backlog_between_cursors_for_caching: int
    cursor_backlogged_threshold: int
    backlog_check_interval_ms: int
    apply_continue_caching_window: bool | None
    exact_cursor_counts: bool | None
    expected_read_on_every_redelivery: bool
    memory_model: bool

    def __new__(
        cls,
        *,
        cache_size_bytes: int = ...,
        eviction_watermark: float = ...,
        eviction_trigger_threshold: float = ...,
        eviction_time_threshold_ms: int = ...,
        eviction_interval_ms: int = ...,
        eviction_by_expected_read_count: bool = ...,
        extend_ttl_max_times: int = ...,
        extend_ttl_of_recently_accessed: bool = ...,
        continue_caching_after_last_active_cursor_leaves_ms: int | None = ...,
        eviction_by_mark_deleted_position: bool = ...,
        copy_entries: bool = ...,
        strategy: _StrategyName = ...,
        segment_count: int = ...,
        recv_buffer_min_bytes: int = ...,
        recv_buffer_initial_bytes: int = ...,
        recv_buffer_max_bytes: int = ...,
        storage_read_buffer_bytes: int = ...,
        storage_read_latency_ms: int = ...,
        cursor_epochs: bool = ...,
        min_backlog_cursors_for_caching: int = ...,
        min_backlog_entries_for_caching: int = ...,
        max_backlog_between_cursors_for_caching: int = ...,
        cursor_backlogged_threshold: int = ...,
        backlog_check_interval_ms: int = ...,
        apply_continue_caching_window: bool | None = ...,
        exact_cursor_counts: bool | None = ...,
        expected_read_on_every_redelivery: bool = ...,
        memory_model: bool = ...,
    ) -> CacheConfig: ...
    def replace(self, **changes: Any) -> CacheConfig: ...
    @staticmethod
    def from_broker_conf(
        source: str | PathLike[str] | Mapping[str, Any],
        *,
        extend_ttl_at_startup: bool = False,
        direct_memory_bytes: int | None = None,
    ) -> CacheConfig: ...
    BROKER_SETTINGS: ClassVar[tuple[str, ...]]
    """The broker's settings (a broker.conf key each), in declaration order."""
    LAB_SETTINGS: ClassVar[tuple[str, ...]]
    """The lab's own settings (no broker reads them), in declaration order."""
    @staticmethod
    def settings() -> list[dict[str, Any]]:
        """Rows of name, default, broker_key, layer ("broker"/"lab"), read_by, note, live."""
    def to_dict(self) -> dict[str, Any]: ...
    def __getnewargs_ex__(self) -> tuple[tuple[()], dict[str, Any]]: ...  # pickling

@final
class CachedEntry:
    """A reader's copy of a cached entry; release() consumes one expected read, once."""

    @property
    def position(self) -> Position: ...
    @property
    def data(self) -> bytes: ...
    @property
    def size(self) -> int: ...
    @property
    def expected_reads(self) -> int | None: ...
    @property
    def requeue_count(self) -> int: ...
    @property
    def released(self) -> bool: ...
    def release(self) -> bool: ...
    def __enter__(self) -> CachedEntry: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...
    def __len__(self) -> int: ...

@final
class EntryInfo:
    """A cached entry as the evictor sees it (``EntryCache.peek``): looking did not mark it accessed."""

    @property
    def position(self) -> Position: ...
    @property
    def size(self) -> int: ...
    @property
    def expected_reads(self) -> int | None: ...
    @property
    def requeue_count(self) -> int: ...
    @property
    def accessed(self) -> bool: ...
    @property
    def timestamp_ns(self) -> int: ...

@final
class EntryCache:
    """The entry cache of one managed ledger."""

    @property
    def name(self) -> str: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def insert(
        self, position: Position, data: _BytesLike, expected_reads: int = 0, size: int | None = None
    ) -> bool: ...
    def insert_batch(
        self,
        ledger_id: int,
        first_entry_id: int,
        data: _ArrowBinaryArray,
        *,
        expected_reads: int | _Integers = 0,
        sizes: _Integers | None = None,
    ) -> int:
        """Caches the elements of ``data`` at (ledger_id, first_entry_id), (ledger_id,
        first_entry_id + 1), ... without copying their bytes; returns how many were inserted.

        Each cached payload is a slice of the array's values buffer, which stays alive while any
        entry or reader copy refers to it (``copy_entries=True`` copies, as for ``insert``).
        Positions already cached are skipped, as by ``insert``. ``expected_reads`` is one count
        for every entry or one per entry; ``sizes`` (one per entry) overrides the accounted sizes
        (default: the payload lengths). Nulls are refused with ``InvalidArgumentError`` naming the
        first null's index, as are arrays of another type or length and an entry id past 2**63 - 1;
        nothing is inserted then. The cache ends up as if each element had been passed to
        ``insert`` in order (one timestamp for the batch; a size pass runs whenever an entry takes
        the cache over its trigger threshold).
        """
    def get(self, position: Position) -> CachedEntry | None: ...
    def peek(self, position: Position) -> EntryInfo | None:
        """A look at the cached entry at ``position`` (size, expected reads, requeues, whether it
        was read since the evictor last looked), or None; unlike ``get`` it does not mark the entry
        accessed (which extends its TTL) nor count a lookup."""
    def get_range(self, first: Position, last: Position) -> list[CachedEntry]: ...
    def get_range_arrow(self, first: Position, last: Position, *, release: bool = False) -> pa.RecordBatch:
        """The cached entries from ``first`` to ``last`` (both inclusive) as a record batch with
        columns ``ledger_id`` (int64), ``entry_id`` (int64) and ``data`` (binary; large_binary past
        2 GiB), in position order; hits, misses and accessed marks as for ``get_range``.

        ``data`` shares the cached bytes when the entries lie back to back in one Arrow buffer
        (entries of one ``insert_batch``, read in order); otherwise it is one copy of them into a
        new buffer. With ``release``, each entry's expected read is consumed as if its reader copy
        were released (``get_range``'s copies consume nothing until released).
        """
    def remove_range(self, first: Position, last: Position, last_inclusive: bool) -> tuple[int, int]: ...
    def clear(self) -> tuple[int, int]: ...
    def positions(self) -> list[Position]: ...
    def __len__(self) -> int: ...
    def __contains__(self, position: object, /) -> bool: ...

@final
class EntryCacheManager:
    """The broker-wide cache: one size budget and one removal queue for all entry caches."""

    def __new__(
        cls,
        config: CacheConfig | None = None,
        clock: _Clock | None = None,
        background_eviction: bool = False,
    ) -> EntryCacheManager: ...
    @property
    def config(self) -> CacheConfig: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def entry_count(self) -> int: ...
    @property
    def max_size_bytes(self) -> int: ...
    def get_cache(self, name: str) -> EntryCache: ...
    def remove_cache(self, name: str) -> tuple[int, int]: ...
    def cache_names(self) -> list[str]: ...
    def evict_expired(self) -> tuple[int, int]: ...
    def evict_bytes(self, n: int) -> tuple[int, int]: ...
    def run_eviction(self) -> tuple[int, int]: ...
    def stats(self) -> dict[str, int]: ...
    def removal_queue_len(self) -> int: ...
    def metadata_bytes(self) -> int: ...
    def reads_in_flight(self) -> dict[str, int]:
        """The reads-in-flight limiter its managed ledgers share: ``max_bytes``,
        ``remaining_bytes``, ``waiting``, and the counts ``acquired``, ``released``, ``queued``,
        ``timed_out``, ``refused``."""
    def update_config(self, **changes: Any) -> tuple[int, int]:
        """Changes settings while the manager runs, as a broker's dynamic configuration does: only
        ``cache_size_bytes``, ``eviction_watermark``, ``eviction_time_threshold_ms``,
        ``extend_ttl_max_times`` and ``extend_ttl_of_recently_accessed``; any other raises
        ``UnsupportedError`` naming it (it needs a restart). A cache left above its trigger
        threshold evicts down to the new watermark at once; returns the (entries, bytes) this
        call evicted."""

@final
class InflightReadsHandle:
    """Permits a read holds (Pulsar's ``InflightReadsLimiter.Handle``)."""

    @property
    def permits(self) -> int: ...
    @property
    def success(self) -> bool: ...
    @property
    def created_ns(self) -> int: ...

@final
class InflightReadsLimiter:
    """Pulsar's limiter of the bytes managed-ledger reads hold (managedLedgerMaxReadsInFlightSizeInMB);
    0 or less disables it. Queued reads' callbacks run in ``release`` and ``check_timeouts``."""

    def __new__(
        cls,
        max_reads_in_flight_bytes: int,
        acquire_queue_size: int = 50000,
        acquire_timeout_ms: int = 60000,
        clock: _Clock | None = None,
    ) -> InflightReadsLimiter: ...
    @property
    def disabled(self) -> bool: ...
    @property
    def remaining_bytes(self) -> int: ...
    @property
    def queued(self) -> int: ...
    def acquire(
        self, permits: int, callback: Callable[[InflightReadsHandle], object] | None = None
    ) -> InflightReadsHandle | None: ...
    def release(self, handle: InflightReadsHandle) -> None: ...
    def check_timeouts(self) -> int: ...
    def stats(self) -> dict[str, int]: ...

@final
class ActiveCursorContainer:
    """Active cursors sorted by position; counts the cursors at or before a cursor in O(log n)."""

    def __new__(cls) -> ActiveCursorContainer: ...
    def add(self, name: str, position: Position | None) -> CursorHandle: ...
    def cursor(self, name: str) -> CursorHandle: ...
    def update(self, name: str, position: Position | None) -> None: ...
    def remove(self, name: str) -> None: ...
    def count_at_or_before(self, name: str) -> int: ...
    def slowest_position(self) -> Position | None: ...
    def slowest_cursor(self) -> str | None: ...
    def position_of(self, name: str) -> Position | None: ...
    def __len__(self) -> int: ...
    def __contains__(self, name: object, /) -> bool: ...

@final
class CursorHandle:
    """A cursor of an ActiveCursorContainer with its name looked up once; stale once removed."""

    def update(self, position: Position | None) -> None: ...
    def count_at_or_before(self) -> int: ...
    @property
    def name(self) -> str: ...

@final
class SlowestCursorHeap:
    """The pre-PIP-430 container: a min-heap tracking the slowest cursor."""

    def __new__(cls) -> SlowestCursorHeap: ...
    def add(self, name: str, position: Position | None) -> None: ...
    def update(self, name: str, position: Position | None) -> None: ...
    def remove(self, name: str) -> None: ...
    def slowest_position(self) -> Position | None: ...
    def slowest_cursor(self) -> str | None: ...
    def __len__(self) -> int: ...
    def __contains__(self, name: object, /) -> bool: ...

@disjoint_base
class Storage:
    """Base of the stores a ManagedLedger uses; counts storage reads."""

    def stats(self) -> dict[str, int]: ...
    def ledgers(self, owner: str) -> list[tuple[int, int]]: ...
    def read(self, ledger_id: int, first: int, last: int) -> list[bytes]: ...

@final
class MemoryStorage(Storage):
    """Ledgers kept in memory."""

    def __new__(cls) -> MemoryStorage: ...

@final
class FileStorage(Storage):
    """Ledgers persisted as segment files under a directory; reopening resumes them.

    One writer per directory (an exclusive lock); read-only opens share theirs. ``create=False``
    refuses a missing directory; ``sync`` is ``"never"`` (the default) or ``"always"``."""

    def __new__(
        cls,
        path: str | PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        sync: Literal["always", "never"] = "never",
    ) -> FileStorage: ...
    @property
    def path(self) -> str: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def sync(self) -> Literal["always", "never"]: ...
    @property
    def recovered(self) -> list[tuple[Path, int, str]]: ...
    def damaged(self) -> list[tuple[int, Path, int, str]]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> FileStorage: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

@final
class CallableStorage(Storage):
    """A read-only store read through ``load(ledger_id, first, last) -> list[bytes]``."""

    def __new__(
        cls,
        load: Callable[[int, int, int], list[bytes]],
        ledgers: Mapping[str, list[tuple[int, int]]] | None = None,
    ) -> CallableStorage: ...

@final
class ReadHandle:
    """A read in flight; see ManagedLedger.poll()."""

    @property
    def done(self) -> bool: ...
    @property
    def discarded(self) -> bool: ...
    def result(self) -> list[CachedEntry]: ...

@final
class ManagedCursor:
    """A subscription's cursor: read position, acknowledgements, replay queue, epoch."""

    @property
    def name(self) -> str: ...
    def read_entries(self, n: int) -> list[CachedEntry]: ...
    def read_data(self, n: int) -> list[bytes]: ...
    def read_entries_async(self, n: int) -> ReadHandle: ...
    def read_replay(self, n: int) -> list[CachedEntry]: ...
    def read_replay_async(self, n: int) -> ReadHandle: ...
    def add_to_replay(
        self, positions: list[Position], reason: Literal["hold-back", "nack", "overflow"] = "hold-back"
    ) -> None: ...
    @property
    def replay_queue(self) -> list[Position]: ...
    def ack(self, position: Position) -> None: ...
    def mark_delete(self, position: Position) -> None: ...
    active: bool
    def close(self) -> None: ...
    def seek(self, position: Position, force: bool = False) -> None: ...
    def reset(self, position: Position) -> None: ...
    def rewind(self) -> None: ...
    def skip(self, n: int, individually_acked: Literal["exclude", "include"] = "exclude") -> None: ...
    @property
    def entries_to_read(self) -> int: ...
    def has_more_entries(self) -> bool: ...
    @property
    def individually_acked(self) -> list[tuple[Position, Position]]:
        """Entries acknowledged on their own past the mark-delete position: (first, last), both inclusive."""
    def clear_backlog(self) -> None: ...
    def start_increase_epoch(self, new_read_position: Position) -> int: ...
    def end_increase_epoch(self) -> bool: ...
    @property
    def epoch(self) -> int: ...
    def is_epoch_outdated(self, epoch: int) -> bool: ...
    def set_read_position(self, position: Position, expected_epoch: int) -> bool: ...
    @property
    def read_position(self) -> Position: ...
    @property
    def mark_delete_position(self) -> Position: ...
    @property
    def backlog(self) -> int: ...
    def count_at_or_before(self) -> int: ...
    def stats(self) -> dict[str, Any]: ...

@final
class ManagedLedger:
    """One topic partition over a Storage, cached through an EntryCacheManager (PIP-430)."""

    def __new__(
        cls,
        name: str,
        manager: EntryCacheManager,
        storage: Storage,
        *,
        max_entries_per_ledger: int = 50_000,
        max_bytes_per_ledger: int = 2_147_483_648,
        min_rollover_ms: int = 600_000,
        max_rollover_ms: int = 14_400_000,
        cursor_epochs: bool = True,
        read_latency_ms: float = 0.0,
        read_latency_per_entry_us: float = 0.0,
        read_latency_per_kib_us: float = 0.0,
    ) -> ManagedLedger: ...
    @property
    def name(self) -> str: ...
    @property
    def cache(self) -> EntryCache: ...
    @property
    def storage(self) -> Storage: ...
    def add_entry(self, data: _BytesLike) -> Position: ...
    def add_entries(self, entries: list[_BytesLike]) -> list[Position]: ...
    def open_cursor(
        self, name: str, start: Literal["latest", "earliest"] | Position | None = None, active: bool = True
    ) -> ManagedCursor: ...
    def cursor(self, name: str) -> ManagedCursor | None: ...
    def cursor_names(self) -> list[str]: ...
    def delete_cursor(self, name: str) -> None: ...
    def delete_ledger(self, ledger_id: int) -> None: ...
    @property
    def slowest_reader_position(self) -> Position | None: ...
    def slowest_consumer(self) -> ManagedCursor | None: ...
    @property
    def ledgers(self) -> list[tuple[int, int, int]]: ...
    @property
    def last_position(self) -> Position | None: ...
    @property
    def entry_count(self) -> int: ...
    @property
    def active_cursor_count(self) -> int: ...
    def storage_stats(self) -> dict[str, int]: ...
    def poll(self) -> int: ...
    def check_backlogged_cursors(self) -> None: ...
    @property
    def reads_in_flight(self) -> int: ...

@final
class WorkloadStream:
    """A workload's trace, generated batch by batch when read; ``pyarrow.RecordBatchReader.from_stream``
    reads it (once). String columns are dictionary-encoded."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...

def stream_workload(
    settings: dict[str, Any],
    seed: int,
    broker: int | None = None,
    batch_rows: int = 65536,
    memory_budget: int = 4294967296,
) -> WorkloadStream: ...
def estimate_workload(settings: dict[str, Any]) -> dict[str, float | str | None]: ...
def check_workload(settings: dict[str, Any], broker: int | None = None, memory_budget: int = 4294967296) -> None: ...
def read_broker_conf(source: str | PathLike[str] | Mapping[str, Any]) -> list[tuple[str, str]]: ...
def summary_schema() -> pa.Schema:
    """The replay summary's columns, each field's doc in its metadata under ``b"doc"``."""

def series_schema() -> pa.Schema:
    """The per-second series' columns, each field's doc in its metadata under ``b"doc"``."""

def spec_keys() -> dict[str, list[str]]:
    """The workload spec's names: settings, topic_detail, subscription_detail and shape."""

def trace_format() -> dict[str, Any]:
    """The trace format: ``columns`` (dicts of name, type, optional, doc), ``ops`` and ``reasons``."""

def designs() -> list[dict[str, Any]]:
    """The cache designs: name, label (as operators know it), models, role (broker, proposal,
    reference or bound), broker_settings (how a broker runs it), follows (what of Pulsar's code the
    simulation follows), manager (whether ``EntryCacheManager`` runs it), reads_trace_twice and
    release (the version a broker running it reports; empty for the others)."""

@final
class ReplaySession:
    """One broker's replay under several configurations (used by ledgercache.replay)."""

    def __new__(cls, configs: list[CacheConfig], *, decode_ahead: bool = True) -> ReplaySession: ...
    def feed(self, batch: object) -> None: ...
    def feed_all(self, batches: Iterable[object]) -> None: ...
    def needs_second_pass(self) -> bool: ...
    def start_second_pass(self) -> None: ...
    def finish(self) -> tuple[pa.RecordBatch, pa.RecordBatch]:
        """The summary and the per-second series (the columns ``summary_schema()`` and
        ``series_schema()`` declare)."""

@final
class RequestRecorder:
    """Records a trace's request stream for export (used by ledgercache.export_requests)."""

    def __new__(cls, config: CacheConfig | None = None) -> RequestRecorder: ...
    def feed(self, batch: object) -> None: ...
    def needs_second_pass(self) -> bool: ...
    def start_second_pass(self) -> None: ...
    def write(self, path: str | PathLike[str], format: str) -> int: ...

@final
class PublishRateLimiter:
    def __new__(cls) -> PublishRateLimiter: ...
    def set_default_topic_rate(
        self, messages_per_second: float | None = None, bytes_per_second: float | None = None
    ) -> None: ...
    def set_topic_rate(
        self, topic: str, messages_per_second: float | None = None, bytes_per_second: float | None = None
    ) -> None: ...
    def set_resource_group(
        self,
        group: str,
        topics: list[str],
        messages_per_second: float | None = None,
        bytes_per_second: float | None = None,
    ) -> None: ...
    def set_broker_rate(
        self, messages_per_second: float | None = None, bytes_per_second: float | None = None
    ) -> None: ...
    def set_connection_limits(
        self,
        max_pending_publish_requests: int | None = None,
        max_publish_buffer_bytes: int | None = None,
        num_io_threads: int | None = None,
    ) -> None: ...
    def set_publish_persist_latency(self, latency_ns: int) -> None: ...
    def on_publish(
        self, now_ns: int, topic: str, connection: int, size: int, messages: int = 1
    ) -> dict[str, Any] | None: ...
    def on_publish_persisted(self, connection: int, size: int) -> None: ...
    def connection_recovered(self, connection: int) -> bool: ...

@final
class Producer:
    def __new__(cls, topic: str, producer_id: int, send_timeout_ms: int = 30000) -> Producer: ...
    @property
    def topic(self) -> str: ...
    @property
    def producer_id(self) -> int: ...
    def on_throttle(self, now_ns: int, command: bytes) -> bytes: ...
    def is_throttled(self, now_ns: int) -> bool: ...
    def throttle_reason(self, now_ns: int) -> str | None: ...
    def send(self, now_ns: int) -> tuple[int, int | None]: ...
    def acknowledge(self, sequence: int) -> None: ...
    def expire(self, now_ns: int) -> list[BaseException]: ...
    def throttled_times(self) -> dict[tuple[str, str], int]: ...

@final
class PartitionedProducer:
    def __new__(
        cls, topic: str, partitions: int, first_producer_id: int = 0, send_timeout_ms: int = 30000
    ) -> PartitionedProducer: ...
    def __len__(self) -> int: ...
    def is_throttled(self, now_ns: int) -> bool: ...
    def is_partition_throttled(self, partition: int, now_ns: int) -> bool: ...
    def on_throttle(self, partition: int, now_ns: int, command: bytes) -> bytes: ...
    def send(self, now_ns: int) -> tuple[int, int, int | None]: ...

def encode_throttle_producer(request_id: int, producer_id: int, reason: str, pause_for_millis: int) -> bytes: ...
def decode_throttle_producer(data: bytes) -> dict[str, Any]: ...
def encode_throttle_producer_receipt(request_id: int) -> bytes: ...
def decode_throttle_producer_receipt(data: bytes) -> int: ...
def supports_throttle_producer(feature_flags: bytes) -> bool: ...
def simulate_publishes(limiter: PublishRateLimiter, batch: Any, mode: str) -> dict[str, Any]: ...
