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
    "ClosedError",
    "UnknownCursorError",
]


class LedgerCacheError(Exception):
    """Root of ledgercache's exceptions."""


class InvalidArgumentError(LedgerCacheError, ValueError):
    """An argument is out of range or malformed; the message names the argument."""


class UnknownSettingError(InvalidArgumentError, TypeError):
    """A settings keyword that does not exist (the message suggests the closest one)."""


class UnsupportedError(LedgerCacheError):
    """The object cannot do what its configuration asks (e.g. a replay-only strategy)."""


class ClosedError(LedgerCacheError):
    """The object was closed or removed and cannot be used any more."""


class UnknownCursorError(LedgerCacheError, KeyError):
    """No cursor has that name."""

    def __str__(self) -> str:  # KeyError would quote the message again
        return str(self.args[0]) if self.args else ""
