"""The lab's behaviour, pinned: a hash of the trace each bundled scenario and each OMB workload file
generates at a short duration, and of the summaries and per-second series its replay gives under
every design. A restructuring of the generator, the replay engine or the ledger must leave every
hash unchanged; a change that means to move a number updates ``tests/data/pinned.json`` in the same
commit, so the diff shows which scenarios it moved:

    LEDGERCACHE_REPIN=1 .venv/bin/python -m pytest tests/python/test_pinned_behaviour.py
"""

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

import ledgercache as lc

DATA = Path(__file__).resolve().parents[1] / "data"
PINNED = DATA / "pinned.json"
OMB = sorted(p for p in (DATA / "omb").glob("*.yaml") if not p.name.startswith("pulsar"))
MIB = 1 << 20
# Short enough for the whole file to run in about a minute; long enough for every scenario's
# mechanism (slow consumers, nacks, seeks, the backlog pause and the catch-up readers) to show.
SHORT = {"test_duration_minutes": 0.5, "warmup_duration_minutes": 0}
SCENARIO_SHORT = {
    "failover-nacks": {"test_duration_minutes": 1.2},  # a nack is due a minute later
    "catch-up-under-pressure": {
        "consumer_backlog_size_gb": 0.05,
        "catch_up_start_seconds": 4,
        "catch_up_behind_seconds": 2,
    },
}
OMB_SHORT = {"test_duration_minutes": 0.02, "warmup_duration_minutes": 0, "backlog_max_wait_minutes": 0.05}


def column_digest(digest: "hashlib._Hash", column: pa.ChunkedArray) -> None:
    """Feeds the column's values, not its buffers, so chunking and dictionary encoding do not count."""
    values = column.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    digest.update(str(values.type).encode())
    digest.update(json.dumps(values.to_pylist(), default=repr).encode())


def table_digest(table: pa.Table) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps(table.column_names).encode())
    for name in table.column_names:
        column_digest(digest, table[name])
    return digest.hexdigest()[:16]


def configs(cache_size: int) -> list[lc.CacheConfig]:
    return [lc.CacheConfig(strategy=d["name"], cache_size_bytes=cache_size, memory_model=True) for d in lc.designs()]


def pins(spec, cache_size: int) -> dict[str, str]:
    trace = lc.workload.generate(spec, seed=7)
    summary, series = lc.replay(trace, configs(cache_size), with_timeseries=True)
    # Wall-clock figures are not behaviour.
    summary = summary.drop_columns(["replay_seconds"])
    return {
        "rows": str(trace.num_rows),
        "trace": table_digest(trace),
        "summary": table_digest(summary),
        "series": table_digest(series),
    }


CASES = {
    f"scenario/{name}": (
        {**settings, **SHORT, **SCENARIO_SHORT.get(name, {})},
        lc.workload.SCENARIO_CACHE_SIZES[name][0],
    )
    for name, settings in lc.workload.SCENARIOS.items()
}
CASES |= {f"omb/{path.stem}": (path, 16 * MIB) for path in OMB}
# A broker's own stats, read into a spec (broker_stats.py and broker_workload.py).
STATS = [
    "key-shared-backlog.stats.json",
    "partitioned.stats.json",
    "single-topic.stats.json",
    "many-small-topics.stats.json",
]
CASES |= {f"stats/{name}": (DATA / "broker" / name, 16 * MIB) for name in STATS}


def resolved(spec) -> dict:
    if isinstance(spec, Path) and spec.name.endswith(".stats.json"):
        return {**lc.workload.from_broker_stats(spec), "test_duration_minutes": 0.05}
    if isinstance(spec, Path):
        return {**lc.workload.resolve(spec), **OMB_SHORT}
    return spec


@pytest.fixture(scope="module")
def recorded() -> dict:
    found = json.loads(PINNED.read_text()) if PINNED.exists() else {}
    yield found
    if os.environ.get("LEDGERCACHE_REPIN") == "1":
        PINNED.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("case", sorted(CASES))
def test_behaviour_is_pinned(case, recorded):
    spec, cache_size = CASES[case]
    got = pins(resolved(spec), cache_size)
    if os.environ.get("LEDGERCACHE_REPIN") == "1":
        recorded[case] = got
        return
    assert case in recorded, f"{case} has no pin: run with LEDGERCACHE_REPIN=1 and commit tests/data/pinned.json"
    assert got == recorded[case], f"{case}: the lab's behaviour changed"


def test_every_case_is_pinned_and_every_pin_is_a_case():
    if os.environ.get("LEDGERCACHE_REPIN") == "1":
        pytest.skip("repinning")
    assert set(json.loads(PINNED.read_text())) == set(CASES)
