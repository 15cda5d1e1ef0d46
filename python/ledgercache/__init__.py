"""ledgercache: Apache Pulsar's PIP-430 broker entry cache as a library.

A consumer-aware read cache for message logs: entries that cursors are still expected to read stay
cached, entries nobody will read again go first. The core is Rust; this package is its Python face.

>>> import ledgercache as lc
>>> cache = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20)).get_cache("topic-0")
>>> cache.insert(lc.Position(1, 0), b"hello", expected_reads=2)
True
>>> with cache.get(lc.Position(1, 0)) as entry:
...     bytes(entry.data)
b'hello'
"""

from __future__ import annotations

from . import (
    broker_stats,
    broker_workload,
    calibrate,
    errors,
    metrics,
    protocol,
    publish,
    report,
    spark,
    trace,
    workload,
)
from ._native import (
    ActiveCursorContainer,
    CacheConfig,
    CachedEntry,
    CallableStorage,
    CursorHandle,
    EntryCache,
    EntryCacheManager,
    EntryInfo,
    FileStorage,
    InflightReadsHandle,
    InflightReadsLimiter,
    ManagedCursor,
    ManagedLedger,
    ManualClock,
    MemoryStorage,
    PartitionedProducer,
    Position,
    Producer,
    PublishRateLimiter,
    ReadHandle,
    SlowestCursorHeap,
    Storage,
    SystemClock,
    __version__,
    designs,
)
from .errors import (
    BrokerConfWarning,
    ClosedError,
    CorruptSegmentError,
    CursorEpochConflictException,
    CursorModifyingException,
    InvalidArgumentError,
    LedgerCacheError,
    MissingDependencyError,
    NotFoundError,
    ProducerSendTimeoutException,
    ProducerThrottledException,
    ResourceLimitError,
    StorageError,
    UnknownCursorError,
    UnknownSettingError,
    UnsupportedError,
)
from .replay import export_requests, replay

__all__ = [
    "ActiveCursorContainer",
    "BrokerConfWarning",
    "CacheConfig",
    "CachedEntry",
    "CallableStorage",
    "ClosedError",
    "CorruptSegmentError",
    "CursorEpochConflictException",
    "CursorHandle",
    "CursorModifyingException",
    "EntryCache",
    "EntryCacheManager",
    "EntryInfo",
    "FileStorage",
    "InflightReadsHandle",
    "InflightReadsLimiter",
    "InvalidArgumentError",
    "LedgerCacheError",
    "ManagedCursor",
    "ManagedLedger",
    "ManualClock",
    "MemoryStorage",
    "MissingDependencyError",
    "NotFoundError",
    "PartitionedProducer",
    "Position",
    "Producer",
    "ProducerSendTimeoutException",
    "ProducerThrottledException",
    "PublishRateLimiter",
    "ReadHandle",
    "ResourceLimitError",
    "SlowestCursorHeap",
    "Storage",
    "StorageError",
    "SystemClock",
    "UnknownCursorError",
    "UnknownSettingError",
    "UnsupportedError",
    "__version__",
    "broker_stats",
    "broker_workload",
    "calibrate",
    "designs",
    "errors",
    "export_requests",
    "metrics",
    "protocol",
    "publish",
    "replay",
    "report",
    "spark",
    "trace",
    "workload",
]
