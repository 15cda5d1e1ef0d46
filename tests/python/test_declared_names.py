"""Names declared once, in Rust, and read everywhere else: the designs registry, the replay's summary
and series columns, the trace format and the workload spec's keys (issue 60, step 3)."""

import importlib

import pyarrow as pa
import pytest

import ledgercache as lc
import ledgercache.calibrate
import ledgercache.cli
from ledgercache import _native

# The module (``lc.replay`` is the function).
replay_module = importlib.import_module("ledgercache.replay")


def small_trace() -> pa.Table:
    return lc.workload.generate({**lc.workload.SCENARIOS["shared-overflow"], "testDurationMinutes": 0.05}, seed=3)


def test_the_replay_returns_the_declared_columns_in_order_with_their_docs():
    configs = [lc.CacheConfig(strategy=d["name"], cache_size_bytes=1 << 20) for d in lc.designs()]
    summary, series = lc.replay(small_trace(), configs, with_timeseries=True)
    assert summary.schema.equals(replay_module.SUMMARY_SCHEMA)
    assert series.schema.equals(replay_module.SERIES_SCHEMA)
    assert list(replay_module.SUMMARY_COLUMNS) == summary.column_names[:-1] and summary.column_names[-1] == "config"
    assert summary.column("strategy").to_pylist() == [d["name"] for d in lc.designs()]
    for schema in (replay_module.SUMMARY_SCHEMA, replay_module.SERIES_SCHEMA):
        docs = replay_module.column_docs(schema)
        assert list(docs) == schema.names and all(docs.values()), docs
    # Each series row belongs to one summary row: the broker's configuration it names.
    assert set(series.column("config_index").to_pylist()) <= set(range(len(configs)))
    first = series.filter(pa.compute.equal(series["config_index"], 0))
    assert set(first.column("strategy").to_pylist()) == {configs[0].strategy}


def test_a_config_column_rebuilds_its_config():
    import json

    config = lc.CacheConfig(strategy="lru", cache_size_bytes=3 << 20)
    summary = lc.replay(small_trace(), [config])
    assert lc.CacheConfig(**json.loads(summary.column("config")[0].as_py())).to_dict() == config.to_dict()


def test_every_reader_of_the_design_names_reads_the_registry():
    names = [d["name"] for d in lc.designs()]
    assert tuple(names) == lc.cli.ALL_STRATEGIES
    assert tuple(d["name"] for d in lc.designs() if d["role"] == "broker") == lc.calibrate.DESIGNS
    assert {d["name"] for d in lc.designs() if d["reads_trace_twice"]} == lc.cli.TWO_PASS_STRATEGIES
    for d in lc.designs():
        assert d["follows"], d["name"]
        assert bool(d["release"]) == (d["role"] == "broker"), d["name"]


@pytest.mark.parametrize("design", lc.designs(), ids=lambda d: d["name"])
def test_the_registry_says_which_designs_the_manager_runs_and_which_read_twice(design):
    config = lc.CacheConfig(strategy=design["name"], cache_size_bytes=1 << 20)
    if design["manager"]:
        lc.EntryCacheManager(config)
    else:
        with pytest.raises(lc.UnsupportedError, match="the entry cache manager runs"):
            lc.EntryCacheManager(config)
    session = _native.ReplaySession([config])
    session.feed(small_trace().to_batches()[0])
    assert session.needs_second_pass() == design["reads_trace_twice"]


def test_the_trace_format_comes_from_rust():
    trace = lc.trace
    assert trace.SCHEMA.names == [c["name"] for c in _native.trace_format()["columns"]]
    assert {"messages", "reason"} == trace.OPTIONAL
    assert set(trace.COLUMN_DOCS) == set(trace.SCHEMA.names) and all(trace.COLUMN_DOCS.values())
    # The generator's batches carry the same columns, strings dictionary-encoded.
    generated = lc.workload.stream({**lc.workload.SCENARIOS["shared-overflow"], "testDurationMinutes": 0.01}, seed=1)
    assert generated.schema.names == trace.SCHEMA.names
    for field in generated.schema:
        plain = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        assert plain == trace.SCHEMA.field(field.name).type, field.name
    # The ops the generator writes are the ones the format names.
    ops = set(pa.Table.from_batches(list(generated)).column("op").cast(pa.string()).unique().to_pylist())
    assert ops <= set(trace.OPS)


def test_the_spec_keys_come_from_rust():
    keys = _native.spec_keys()
    assert set(keys["settings"]) == lc.workload.KNOWN
    assert set(keys["topic_detail"]) == lc.workload.TOPIC_DETAIL_KEYS
    assert set(keys["subscription_detail"]) == lc.workload.SUBSCRIPTION_DETAIL_KEYS
    assert set(keys["shape"]) == lc.workload.SHAPE_SETTINGS and lc.workload.SHAPE_SETTINGS <= lc.workload.KNOWN
    # Every key Python accepts, Rust's spec takes: an unknown one is refused on the Python side.
    with pytest.raises(lc.UnknownSettingError):
        lc.workload.generate({"topicz": 1}, seed=0)
