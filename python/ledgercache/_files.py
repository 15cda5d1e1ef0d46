"""Reading an input file whole, within a size bound, with one clear error for each way it fails."""

from __future__ import annotations

from pathlib import Path

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
