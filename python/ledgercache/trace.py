"""The trace format: one row per event a broker sees.

========== ======== ==================================================================================
column     type     meaning
========== ======== ==================================================================================
ts_us      int64    time of the event in microseconds; non-decreasing within a broker
broker     string   the broker that saw it
topic      string   the topic (managed ledger)
op         string   ``open``, ``close``, ``add``, ``read``, ``replay``, ``redeliver``, ``ack``, ``seek``,
                    ``delete``, ``individual_ack``, ``rewind``, ``unload``, ``load``
cursor     string   the subscription's cursor; null for ``add``, ``delete``, ``unload`` and ``load``
ledger_id  int64    ledger of the position (``add``, ``replay``, ``redeliver``, ``ack``,
                    ``individual_ack``, ``seek``, ``delete``; ``open`` at a position; null: the end;
                    ``load``: the ledger found in storage, null: none)
entry_id   int64    entry of the position
count      int32    entries asked for by a ``read`` (from the cursor's read position); entries an
                    ``individual_ack`` acknowledges from its position (null or 0: one); entries a
                    ``load`` found from its position
size       int32    bytes of an ``add`` (the whole entry: with producer batching, all its messages);
                    a ``load``'s mean entry size
messages   int32    optional: messages in the entry of an ``add`` (a batch); null or absent means 1
reason     string   optional: why a ``redeliver`` queued the entry: ``hold-back`` (Key_Shared: its
                    consumer had no permits, or its key already waited for redelivery), ``nack`` (a
                    negative acknowledgement) or ``overflow`` (Shared: a read brought more messages
                    than the consumers had permits for); null elsewhere or when unknown
========== ======== ==================================================================================

The last two columns are optional: a trace without them is valid everywhere, and readers fill them
with nulls (:data:`OPTIONAL`).

Readers accept a ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader`` (or any object with
``__arrow_c_stream__``), a path to a Parquet file or a directory of them, an Arrow IPC file
(``.arrow``, ``.feather``, ``.ipc``) or a CSV file, or a function of no arguments that returns one
of these (called once per pass: how a two-pass replay such as ``belady`` reads a stream twice).
String columns may be plain, large or dictionary-encoded strings. Columns are checked by name and
type; every row is checked when replayed, and an error names the column and the row (counted from
0 over the whole trace). A ``RecordBatchReader`` is read once, batch by batch, never held whole.
A file that cannot be read (truncated, damaged, not the format its suffix says, bytes that are not
text) raises :class:`~ledgercache.errors.InvalidArgumentError` naming the file.

An ``ack`` is cumulative: the cursor's mark-delete position moves to its position (a read position
at or behind it moves on to the next entry; an ``ack`` past the last ``add`` changes nothing, as a
broker refuses it). An ``individual_ack`` acknowledges its entries each on its own (Pulsar's
individual acknowledgement): a ``read`` passes over them, as a broker's cursor reads do, and the
mark-delete position moves over them once nothing before them is left unacknowledged. A ``seek`` is
a reset: the read position goes to its position and the mark-delete position to the entry before
it, back or forward, and individual acknowledgements are forgotten. A ``rewind`` sends the read
position back to the first unacknowledged entry (a Failover or Exclusive consumer's redelivery
request); reads under way are dropped. A ``close`` (the subscription's last consumer left)
drops the cursor's replay queue, as the broker's dispatcher does.

An ``unload`` is the broker closing the topic (a restart, a bundle unload): its cached entries leave
the cache (counted in ``invalidated_entries``), its cursors are forgotten and its reads under way
discarded. A ``load`` is a broker opening the topic's managed ledger and finding ``count`` entries of
ledger ``ledger_id`` from ``entry_id`` in storage, ``size`` bytes each on average (one row per
ledger; a null ``ledger_id``: nothing in storage); it costs the same whatever ``count``. Consumers
come back with ``open`` rows at their read position, and ``individual_ack`` rows for what was
acknowledged on its own. An ``add`` or an ``open`` of a topic the broker does not have open loads it
too (a trace without ``load`` rows); a row of a cursor the unload forgot fails as one of a cursor
never opened, naming the row. A load's ``entry_id + count`` must stay an entry id, and its
``count`` and ``size`` not negative: an error names the row and the column.

Entry ids of ``add`` rows are 0..2^63-2, and ``ts_us`` may run up to 292 years past a broker's first
event. Positions the trace never added (a gap, or entries before a ledger's first ``add``) hold no
entry: a ``read`` passes over them, taking at most the entries that were added (or loaded), whatever
its ``count``, and at most 2^20 entries in one row.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import csv, ipc

from . import _native
from .errors import InvalidArgumentError

__all__ = [
    "SCHEMA",
    "COLUMN_DOCS",
    "OPS",
    "OPTIONAL",
    "REASONS",
    "ROW_GROUP_ROWS",
    "TraceSource",
    "batches",
    "conform",
    "is_one_shot",
    "write",
]

# Declared once, in Rust (src/lab/replay/trace_schema.rs).
_FORMAT = _native.trace_format()
SCHEMA = pa.schema([(c["name"], pa.type_for_alias(c["type"])) for c in _FORMAT["columns"]])
# What each column means, in order.
COLUMN_DOCS = {c["name"]: c["doc"] for c in _FORMAT["columns"]}
OPS = tuple(_FORMAT["ops"])
# Columns a trace may leave out (they read as nulls).
OPTIONAL = frozenset(c["name"] for c in _FORMAT["columns"] if c["optional"])
REASONS = tuple(_FORMAT["reasons"])

TraceSource: TypeAlias = pa.Table | pa.RecordBatch | pa.RecordBatchReader | str | os.PathLike | Callable[[], Any]

# Rows of a Parquet row group when a trace is written batch by batch.
ROW_GROUP_ROWS = 262_144

_WIDER_OK = {
    pa.int64(): (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32()),
    pa.int32(): (pa.int8(), pa.int16(), pa.uint8(), pa.uint16()),
    pa.string(): (pa.large_string(), pa.string_view()),
}


# What the replay engine reads as it is: a string column dictionary-encoded with int32 indices.
# The engine then tells names apart by their index, where plain strings are compared byte by byte.
_ENGINE_DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def conform(batch: pa.RecordBatch, keep_dictionaries: bool = False) -> pa.RecordBatch:
    """The batch with the trace's columns, in order, with their exact types.

    Lossless conversions are made (narrower integers, large or dictionary-encoded strings); the
    optional columns (:data:`OPTIONAL`) are filled with nulls when absent; anything else raises
    ``InvalidArgumentError`` naming the column. With ``keep_dictionaries``, string columns encoded
    as ``dictionary<int32, string>`` stay so (for the replay engine, which reads them faster than
    plain strings); the batch's schema then says so.
    """
    columns = []
    fields = []
    for field in SCHEMA:
        if field.name not in batch.schema.names:
            if field.name in OPTIONAL:
                columns.append(pa.nulls(batch.num_rows, field.type))
                fields.append(field)
                continue
            raise InvalidArgumentError(
                f"invalid trace: column {field.name!r} is missing (columns: {batch.schema.names})"
            )
        col = batch.column(field.name)
        t = col.type
        if keep_dictionaries and t == _ENGINE_DICTIONARY:
            columns.append(col)
            fields.append(pa.field(field.name, t))
            continue
        if pa.types.is_dictionary(t) and t.value_type in (pa.string(), pa.large_string()):
            col, t = col.dictionary_decode(), t.value_type
        if t != field.type:
            if t in _WIDER_OK.get(field.type, ()) or (pa.types.is_null(t)):
                col = col.cast(field.type)
            else:
                raise InvalidArgumentError(f"invalid trace: column {field.name!r} must be {field.type}, is {t}")
        columns.append(col)
        fields.append(field)
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def batches(source: TraceSource, batch_rows: int = 65_536, keep_dictionaries: bool = False) -> Iterator[pa.RecordBatch]:
    """The trace's record batches, conformed to :data:`SCHEMA` (see :func:`conform` for
    ``keep_dictionaries``; with it, Parquet files are also read with their string columns as
    dictionaries, as they are stored, instead of as one string per row)."""
    for batch in _raw_batches(source, batch_rows, keep_dictionaries):
        if batch.num_rows:
            yield conform(batch, keep_dictionaries)


def is_one_shot(source: TraceSource) -> bool:
    """Whether the source can be read only once (a reader or another Arrow stream)."""
    return isinstance(source, pa.RecordBatchReader) or (
        not isinstance(source, (pa.Table, pa.RecordBatch)) and hasattr(source, "__arrow_c_stream__")
    )


def _raw_batches(source: TraceSource, batch_rows: int, dictionaries: bool = False) -> Iterator[pa.RecordBatch]:
    if callable(source) and not hasattr(source, "__arrow_c_stream__"):
        made = source()
        if callable(made) and not hasattr(made, "__arrow_c_stream__"):
            raise TypeError("a trace function must return a trace (a Table, reader or path), not another function")
        yield from _raw_batches(made, batch_rows, dictionaries)
    elif isinstance(source, pa.Table):
        yield from source.to_batches(max_chunksize=batch_rows)
    elif isinstance(source, pa.RecordBatch):
        yield source
    elif isinstance(source, pa.RecordBatchReader):
        yield from source
    elif isinstance(source, (str, os.PathLike)):
        yield from _read_path(Path(source), batch_rows, dictionaries)
    elif hasattr(source, "__arrow_c_stream__"):
        yield from pa.RecordBatchReader.from_stream(source)
    else:
        raise TypeError(
            f"a trace is a pyarrow Table, RecordBatch, RecordBatchReader or a path, not {type(source).__name__}"
        )


def _unreadable(path: Path, exc: BaseException) -> InvalidArgumentError:
    """The error for a trace file that cannot be read (damaged, truncated, not the format its
    suffix says, bytes that are not text): an ``InvalidArgumentError`` naming the file, with the
    reader's own message (which names the row or column where it knows them)."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return InvalidArgumentError(f"invalid trace: cannot read {path}: {detail.rstrip(': ')}")


def _file_batches(path: Path, open_batches: Callable[[], Iterator[pa.RecordBatch]]) -> Iterator[pa.RecordBatch]:
    """The batches of one trace file; whatever the reader raises becomes :func:`_unreadable`.

    Only the reader's own failures are translated (pyarrow's errors, OS errors, undecodable bytes:
    ``UnicodeDecodeError`` is a ``ValueError``); the consumer's exceptions never pass through here.
    """
    try:
        it = iter(open_batches())
    except InvalidArgumentError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _unreadable(path, exc) from exc
    while True:
        try:
            batch = next(it)
            _ = batch.schema.names  # column names that are not UTF-8 (a binary file) fail here
        except StopIteration:
            return
        except InvalidArgumentError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _unreadable(path, exc) from exc
        yield batch


@contextlib.contextmanager
def naming(source: Any) -> Iterator[None]:
    """Adds the trace file's name to an ``InvalidArgumentError`` raised inside (a column the file
    lacks, a row the engine rejects), when the source is a path and the message does not name it."""
    try:
        yield
    except InvalidArgumentError as exc:
        if not isinstance(source, (str, os.PathLike)) or str(source) in str(exc):
            raise
        raise type(exc)(f"{exc} (trace file {source})") from exc


def _parquet_batches(path: Path, batch_rows: int, dictionaries: bool) -> Iterator[pa.RecordBatch]:
    # Parquet stores the string columns dictionary-encoded: read that way, a batch holds each name
    # once plus an index per row, not one string per row.
    file = pq.ParquetFile(path)
    if dictionaries:
        stored = file.schema_arrow
        strings = [f.name for f in SCHEMA if f.name in stored.names and stored.field(f.name).type == pa.string()]
        # The footer read above is handed over, not read again.
        file = pq.ParquetFile(path, read_dictionary=strings, metadata=file.metadata)
    return file.iter_batches(batch_size=batch_rows)


def _read_path(path: Path, batch_rows: int, dictionaries: bool = False) -> Iterator[pa.RecordBatch]:
    if not path.exists():
        raise InvalidArgumentError(f"invalid trace: {path} does not exist")
    suffix = path.suffix.lower()
    if path.is_dir() or suffix == ".parquet":
        files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
        if not files:
            raise InvalidArgumentError(f"invalid trace: no .parquet files under {path}")
        for f in files:
            yield from _file_batches(f, functools.partial(_parquet_batches, f, batch_rows, dictionaries))
    elif suffix in (".arrow", ".feather", ".ipc", ".arrows"):

        def ipc_batches() -> Iterator[pa.RecordBatch]:
            try:
                reader = ipc.open_file(path)
            except pa.ArrowInvalid:  # not the file format: the stream format
                yield from ipc.open_stream(path)
                return
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

        yield from _file_batches(path, ipc_batches)
    elif suffix == ".csv":
        # Types for the trace's columns; a CSV without the optional ones is fine (conform fills them).
        options = csv.ConvertOptions(column_types={f.name: f.type for f in SCHEMA}, strings_can_be_null=True)
        yield from _file_batches(path, lambda: csv.open_csv(path, convert_options=options))
    else:
        raise InvalidArgumentError(f"invalid trace: {path} is not .parquet, .arrow/.feather/.ipc or .csv")


def write(
    trace: TraceSource, path: str | os.PathLike[str], on_batch: Callable[[pa.RecordBatch], None] | None = None
) -> Path:
    """Writes a trace as Parquet (or Arrow IPC / CSV by the suffix); returns the path.

    The trace is written batch by batch (Parquet: a row group every :data:`ROW_GROUP_ROWS` rows),
    so a ``RecordBatchReader`` such as :func:`ledgercache.workload.stream` is written in memory
    that does not grow with its length. ``on_batch`` is called with each batch as it is taken in (a
    progress bar, say).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    done = on_batch or (lambda batch: None)
    if suffix in (".arrow", ".feather", ".ipc"):
        # Feather version 2 is the Arrow IPC file format, uncompressed.
        with pa.ipc.new_file(path, SCHEMA) as writer:
            for batch in batches(trace):
                writer.write_batch(batch)
                done(batch)
    elif suffix == ".csv":
        with csv.CSVWriter(path, SCHEMA) as writer:
            for batch in batches(trace):
                writer.write_batch(batch)
                done(batch)
    else:
        with pq.ParquetWriter(path, SCHEMA) as writer:
            group: list[pa.RecordBatch] = []
            rows = 0
            for batch in batches(trace):
                group.append(batch)
                rows += batch.num_rows
                done(batch)
                if rows >= ROW_GROUP_ROWS:
                    writer.write_table(pa.Table.from_batches(group, schema=SCHEMA), row_group_size=rows)
                    group, rows = [], 0
            if group:
                writer.write_table(pa.Table.from_batches(group, schema=SCHEMA), row_group_size=rows)
    return path
