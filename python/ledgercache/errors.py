"""Exceptions raised by ledgercache.

Every exception the library raises on purpose derives from :class:`LedgerCacheError`. Argument errors
also derive from the built-in exception a Python user would expect (``ValueError``, ``TypeError``,
``KeyError``), so either can be caught.
"""

from __future__ import annotations

__all__ = [
    "LedgerCacheError",
    "InvalidArgumentError",
    "UnknownSettingError",
    "UnsupportedError",
    "MissingDependencyError",
    "ClosedError",
    "NotFoundError",
    "UnknownCursorError",
    "StorageError",
    "CorruptSegmentError",
    "ResourceLimitError",
    "CursorModifyingException",
    "CursorEpochConflictException",
    "ProducerSendTimeoutException",
    "ProducerThrottledException",
    "BrokerConfWarning",
]


class LedgerCacheError(Exception):
    """Root of ledgercache's exceptions."""


class InvalidArgumentError(LedgerCacheError, ValueError):
    """An argument is out of range or malformed; the message names the argument."""


class UnknownSettingError(InvalidArgumentError, TypeError):
    """A settings keyword that does not exist (the message suggests the closest one)."""


class UnsupportedError(LedgerCacheError):
    """The object cannot do what its configuration asks (e.g. a replay-only strategy)."""


class MissingDependencyError(LedgerCacheError, ImportError):
    """An optional dependency is not installed: Spark jobs need pyspark and pandas, reports need
    matplotlib, all in the ``lab`` extra. The message names the modules and the install command
    (``pip install "ledgercache[lab]"``); ``missing`` holds the module names. Raised before any work
    is done."""

    def __init__(self, message: str, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message, name=missing[0] if missing else None)
        self.missing = missing


class ClosedError(LedgerCacheError):
    """The object was closed or removed and cannot be used any more."""


class NotFoundError(LedgerCacheError, KeyError):
    """No cursor, ledger or entry has that name or id."""

    def __str__(self) -> str:  # KeyError would quote the message again
        return str(self.args[0]) if self.args else ""


class UnknownCursorError(NotFoundError):
    """No cursor has that name."""


class StorageError(LedgerCacheError, OSError):
    """The storage backend failed: I/O, or the loader a user supplied. Also: a ``FileStorage``
    directory that is locked by another opener (the message names the directory and, for a
    writer, its pid), or missing when opened with ``create=False``."""


class CorruptSegmentError(StorageError):
    """A segment file is damaged; the message names the file and the byte offset. Entries before
    the damage, and every other file, stay readable; appends to the damaged ledger are refused.
    See docs/storage.md."""


class ResourceLimitError(LedgerCacheError, MemoryError):
    """An input would need more memory than its budget (a workload's simulation, a trace held as a
    table). Raised before anything is allocated; the message names the estimate and the argument
    or flag that makes it fit (``memory_budget=`` / ``--memory-budget``, ``--duration-minutes``)."""


class CursorModifyingException(LedgerCacheError):
    """A read was started while the cursor's epoch was being increased (a seek, reset, rewind, skip
    or clear-backlog in progress); retry once it has ended."""


class CursorEpochConflictException(LedgerCacheError):
    """An epoch increase was started while another one was running on the same cursor."""


class ProducerSendTimeoutException(LedgerCacheError, TimeoutError):
    """A send was not acknowledged within the producer's send timeout.

    Attributes: ``topic``, ``sequence``, and ``reason`` (``None`` for a plain timeout)."""

    topic: str
    sequence: int
    reason: str | None


class ProducerThrottledException(ProducerSendTimeoutException):
    """A send timed out while the broker had throttled the producer (PIP-385): ``reason`` names
    why (``TopicProduceQuotaExceeded``, ``ResourceGroupProduceQuotaExceeded``,
    ``ConnectionPendingMessagesBreach``, ``MessageBufferSizeBreach``, ``BrokerProduceQuotaExceeded``)."""


class BrokerConfWarning(UserWarning):
    """A ``broker.conf`` key that a Pulsar broker does not apply as written (no release reads it,
    it is applied only at run time, or it is read but never applied); the message names the key
    and what the lab did with it."""
