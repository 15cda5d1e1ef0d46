"""The broker's life in the workload generator, from Python: the knobs under both spellings."""

import pyarrow.compute as pc
import pytest

import ledgercache as lc

KNOBS = {
    "rollingRestartIntervalSeconds": 5,
    "rollingRestartCount": 2,
    "brokerRestartSeconds": 2,
    "topicLoadDelayMs": 50,
    "reconnectDelayMinMs": 20,
    "reconnectDelayMaxMs": 40,
    "bundleMovesPerMinute": 3,
    "reconnectStormEverySeconds": 4,
    "producerPauseOutstandingDeliveries": 100000,
}
BASE = {"brokers": 2, "partitionsPerTopic": 2, "producerRate": 2000, "testDurationMinutes": 0.25}


def test_generate_takes_the_lifecycle_knobs_in_camel_and_snake_case():
    camel = lc.workload.generate({**BASE, **KNOBS}, seed=1)
    snake = lc.workload.generate({**BASE, **{lc.workload._snake(k): v for k, v in KNOBS.items()}}, seed=1)
    assert camel.equals(snake)
    ops = camel.column("op").to_pylist()
    # The rolling restarts at 5 and 10 s, bundle moves, and storms write their rows.
    assert ops.count("unload") >= 3 and ops.count("load") >= 3 and ops.count("close") >= 2
    assert not camel.equals(lc.workload.generate(BASE, seed=1))
    unloads = camel.filter(pc.equal(camel.column("op"), "unload"))
    assert {5_000_000, 10_000_000} <= set(unloads.column("ts_us").to_pylist())


def test_lifecycle_knobs_are_checked_by_name():
    with pytest.raises(lc.InvalidArgumentError, match="rollingRestartIntervalSeconds"):
        lc.workload.generate({**BASE, "rollingRestartIntervalSeconds": 0.5})
    with pytest.raises(lc.InvalidArgumentError, match="reconnectDelayMinMs"):
        lc.workload.generate({**BASE, "reconnectDelayMinMs": 300, "reconnectDelayMaxMs": 200})
    estimate = lc.workload.estimate({**BASE, **KNOBS})
    assert estimate["events"] > lc.workload.estimate(BASE)["events"]
