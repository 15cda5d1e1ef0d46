"""Dictionary-encoded string columns reach the replay engine as they are: a Parquet trace is read
with its string columns as dictionaries (as Parquet stores them), and the engine tells names apart
by index. Results, errors and exported request streams are those of the plain-string trace."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ledgercache as lc
from ledgercache import _native

SPEC = {**lc.workload.SCENARIOS["shared-overflow"], "topics": 3, "testDurationMinutes": 0.2}
STRINGS = [f.name for f in lc.trace.SCHEMA if f.type == pa.string()]
ENGINE_DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def results(table):
    return [{k: v for k, v in r.items() if k != "replay_seconds"} for r in table.to_pylist()]


@pytest.fixture(scope="module")
def trace():
    return lc.workload.generate(SPEC, seed=3)


@pytest.fixture(scope="module")
def parquet_trace(trace, tmp_path_factory):
    return lc.trace.write(trace, tmp_path_factory.mktemp("trace") / "trace.parquet")


def test_a_parquet_trace_reaches_the_engine_as_dictionaries_and_everyone_else_as_strings(parquet_trace):
    engine = next(lc.trace.batches(parquet_trace, keep_dictionaries=True))
    assert all(engine.schema.field(c).type == ENGINE_DICTIONARY for c in STRINGS)
    plain = next(lc.trace.batches(parquet_trace))
    assert plain.schema == lc.trace.SCHEMA
    # The same rows either way.
    decoded = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in engine.columns]
    assert pa.RecordBatch.from_arrays(decoded, schema=lc.trace.SCHEMA).equals(plain)


@pytest.mark.parametrize("strategy", ["pip430", "pip430-fifo", "lru", "legacy", "segmented", "belady"])
def test_a_parquet_trace_replays_as_its_table(trace, parquet_trace, strategy):
    configs = [lc.CacheConfig(cache_size_bytes=size, strategy=strategy) for size in (1 << 20, 16 << 20)]
    assert results(lc.replay(parquet_trace, configs)) == results(lc.replay(trace, configs))


def test_a_dictionary_encoded_table_replays_as_the_plain_one(trace):
    encoded = trace
    for c in STRINGS:
        i = encoded.schema.get_field_index(c)
        column = encoded.column(c).dictionary_encode()
        encoded = encoded.set_column(i, pa.field(c, column.type), column)
    assert encoded.schema.field("topic").type == ENGINE_DICTIONARY
    configs = [lc.CacheConfig(cache_size_bytes=1 << 20, strategy=s) for s in ("pip430", "lru")]
    assert results(lc.replay(encoded, configs)) == results(lc.replay(trace, configs))


def test_only_the_engines_dictionaries_are_kept():
    rows = {
        "ts_us": [1, 2],
        "broker": ["b", "b"],
        "ledger_id": [1, 1],
        "entry_id": [0, 1],
        "count": pa.array([None, None], pa.int32()),
        "size": pa.array([10, 10], pa.int32()),
    }
    batch = pa.RecordBatch.from_pydict(
        {
            **rows,
            "topic": pa.array(["t", "t"]).dictionary_encode(),  # int32 indices: kept
            "op": pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int8()), pa.array(["add"])),
            "cursor": pa.DictionaryArray.from_arrays(
                pa.array([None, None], pa.int32()), pa.array([], pa.large_string())
            ),
        }
    )
    kept = lc.trace.conform(batch, keep_dictionaries=True)
    assert kept.schema.field("topic").type == ENGINE_DICTIONARY
    assert kept.schema.field("op").type == pa.string()
    assert kept.schema.field("cursor").type == pa.string()
    assert lc.trace.conform(batch).schema == lc.trace.SCHEMA


def test_a_bad_name_in_a_parquet_traces_dictionary_names_the_row_and_the_file(trace, tmp_path):
    ops = trace.column("op").to_pylist()
    row = len(ops) // 2
    ops[row] = "publish"
    bad = trace.set_column(trace.schema.get_field_index("op"), "op", pa.array(ops))
    path = lc.trace.write(bad, tmp_path / "bad.parquet")
    with pytest.raises(lc.InvalidArgumentError, match=rf'row {row}, column "op": unknown op "publish".*bad.parquet'):
        lc.replay(path, lc.CacheConfig(cache_size_bytes=1 << 20))


def test_a_null_keys_index_is_never_looked_at(trace):
    # Arrow leaves the index under a null undefined: an out-of-range one there is not an error of
    # the dictionary, the row's null is.
    b = lc.trace.conform(trace.to_batches()[0])
    i = b.schema.get_field_index("topic")
    indices = pa.array([0] * b.num_rows, pa.int32()).to_numpy().copy()
    indices[5] = 1_000
    mask = pa.array([k == 5 for k in range(b.num_rows)])
    topic = pa.DictionaryArray.from_arrays(
        pa.array(indices, mask=mask.to_numpy(zero_copy_only=False)), pa.array([b.column("topic")[0].as_py()])
    )
    session = _native.ReplaySession([lc.CacheConfig(cache_size_bytes=1 << 20)])
    with pytest.raises(lc.InvalidArgumentError, match='row 5, column "topic": is null'):
        session.feed(b.set_column(i, pa.field("topic", topic.type), topic))


def test_export_requests_reads_a_parquet_trace_as_its_table(trace, parquet_trace, tmp_path):
    config = lc.CacheConfig(cache_size_bytes=1 << 20)
    n = lc.export_requests(parquet_trace, config, tmp_path / "from_file.bin")
    assert n == lc.export_requests(trace, config, tmp_path / "from_table.bin")
    assert (tmp_path / "from_file.bin").read_bytes() == (tmp_path / "from_table.bin").read_bytes()


def test_parquet_files_are_written_with_dictionary_pages(parquet_trace):
    # What makes the read above cheap: the writer keeps Parquet's dictionary encoding.
    column = pq.ParquetFile(parquet_trace).metadata.row_group(0).column(lc.trace.SCHEMA.get_field_index("topic"))
    assert column.has_dictionary_page
