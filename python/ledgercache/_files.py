"""Reading an input file whole, within a size bound, with one clear error for each way it fails."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from .errors import InvalidArgumentError


def read_bounded(path: Path, max_bytes: int, what: str, label: str | None = None) -> bytes:
    """At most ``max_bytes`` of ``path``, read as far as one byte past the bound (its stat size
    is no bound: a device such as ``/dev/zero`` says 0, a file may grow). A device, a directory or
    more than ``max_bytes`` raise ``OSError``/``InvalidArgumentError`` naming the file
    (``label``, else the path); ``what`` names the kind of file in the size error."""
    label = str(path) if label is None else label
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            raise InvalidArgumentError(f"{label}: a device, not a file")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        size = f"{st.st_size:,} bytes" if st.st_size > max_bytes else "longer"
        raise InvalidArgumentError(f"{label}: {size}, more than the {max_bytes:,} {what} may have (max_bytes=)")
    return data


def read_text(path: Path, max_bytes: int, what: str) -> str:
    """The UTF-8 text of ``path`` (``what`` names the kind of file in the size error). A missing,
    unreadable or oversized file, a device, or bytes that are not UTF-8, raise
    ``InvalidArgumentError`` naming the file (and the line of a bad byte)."""
    label = str(path)
    try:
        data = read_bounded(path, max_bytes, what)
    except FileNotFoundError:
        raise InvalidArgumentError(f"{label}: does not exist") from None
    except OSError as e:
        raise InvalidArgumentError(f"{label}: {e.strerror or e}") from None
    except ValueError as e:  # a path with a NUL byte
        if isinstance(e, InvalidArgumentError):
            raise
        raise InvalidArgumentError(f"{label!r}: {e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InvalidArgumentError(f"{label}: line {line}: not UTF-8 text (byte {e.start})") from None


_DECODER = json.JSONDecoder()

# Quotes a chat, an issue editor or a word processor puts in place of JSON's straight ones: a pasted
# stats dump with them fails at its first key, and the decoder's message alone does not say why.
_TYPOGRAPHIC_QUOTES = "\u201c\u201d\u2018\u2019\u201e\u00ab\u00bb"


def _typographic_hint(text: str, pos: int) -> str:
    """The fix, where the JSON error is at a typographic quote."""
    if 0 <= pos < len(text) and text[pos] in _TYPOGRAPHIC_QUOTES:
        return (
            f" (found {text[pos]!r}, a typographic quote: the text went through an editor that "
            f"replaced JSON's straight quotes; dump it again, or replace them with \")"
        )
    return ""


def decode_json_at(text: str, pos: int, label: str, decoder: json.JSONDecoder = _DECODER) -> tuple[Any, int]:
    """The JSON document that starts at ``pos`` of ``text`` and where it ends (files may hold
    several, one after another); ``InvalidArgumentError`` naming ``label`` and the line if it is
    not JSON, or nested deeper than Python's recursion allows."""
    try:
        return decoder.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        raise InvalidArgumentError(
            f"{label}: line {e.lineno} column {e.colno}: not JSON: {e.msg}{_typographic_hint(text, e.pos)}"
        ) from None
    except RecursionError:
        raise InvalidArgumentError(f"{label}: not JSON this reader accepts: nested too deeply") from None
