"""Reading an input file whole, within a size bound, with one clear error for each way it fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import InvalidArgumentError


def read_text(path: Path, max_bytes: int, what: str) -> str:
    """The UTF-8 text of ``path`` (``what`` names the kind of file in the size error). A missing,
    unreadable or oversized file, or bytes that are not UTF-8, raise ``InvalidArgumentError``
    naming the file (and the line of a bad byte)."""
    label = str(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise InvalidArgumentError(f"{label}: {size:,} bytes, more than the {max_bytes:,} {what} "
                                       f"may have (max_bytes=)")
        data = path.read_bytes()
    except FileNotFoundError:
        raise InvalidArgumentError(f"{label}: does not exist") from None
    except OSError as e:
        raise InvalidArgumentError(f"{label}: {e.strerror or e}") from None
    except ValueError as e:  # a path with a NUL byte
        raise InvalidArgumentError(f"{label!r}: {e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InvalidArgumentError(f"{label}: line {line}: not UTF-8 text (byte {e.start})") from None


_DECODER = json.JSONDecoder()


def decode_json_at(text: str, pos: int, label: str, decoder: json.JSONDecoder = _DECODER) -> tuple[Any, int]:
    """The JSON document that starts at ``pos`` of ``text`` and where it ends (files may hold
    several, one after another); ``InvalidArgumentError`` naming ``label`` and the line if it is
    not JSON, or nested deeper than Python's recursion allows."""
    try:
        return decoder.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        raise InvalidArgumentError(f"{label}: line {e.lineno} column {e.colno}: not JSON: {e.msg}") from None
    except RecursionError:
        raise InvalidArgumentError(f"{label}: not JSON this reader accepts: nested too deeply") from None
