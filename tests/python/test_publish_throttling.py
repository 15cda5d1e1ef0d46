"""Publish throttling in the replay lab: moved adds, per-topic delays, the noisy neighbour."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import ledgercache as lc
from ledgercache import publish


def delays_by_topic(table: pa.Table) -> dict[str, dict]:
    return {r["topic"]: r for r in table.to_pylist()}


def test_noisy_neighbour_waits_only_when_the_connection_is_paused() -> None:
    trace = publish.noisy_neighbour(seconds=5)
    limiter = publish.noisy_neighbour_limiter()
    _, told = publish.throttle_publishes(trace, limiter, "throttle-producer")
    _, paused = publish.throttle_publishes(trace, limiter, "pause-connection")
    _, off = publish.throttle_publishes(trace, limiter, "off")
    told, paused, off = delays_by_topic(told), delays_by_topic(paused), delays_by_topic(off)
    assert told["cold"]["p99_ms"] == 0.0 and told["cold"]["under_quota"]
    assert paused["cold"]["p99_ms"] > 100.0 and paused["cold"]["under_quota"], "pause-connection holds the neighbour"
    assert told["hot"]["throttles"] > 0 and not told["hot"]["under_quota"]
    assert told["hot"]["p99_ms"] > 100.0, "the hot topic is held to its quota either way"
    assert off["hot"]["max_ms"] == 0.0 and off["cold"]["max_ms"] == 0.0
    assert told["hot"]["publishes"] == 1000 and told["cold"]["publishes"] == 250


def test_counts_by_reason_and_commands_depend_on_the_mode() -> None:
    trace = publish.noisy_neighbour(seconds=3)
    limiter = publish.noisy_neighbour_limiter()
    _, told = publish.throttle_publishes(trace, limiter, "throttle-producer")
    _, paused = publish.throttle_publishes(trace, limiter, "pause-connection")
    told, paused = publish.throttle_counts(told), publish.throttle_counts(paused)
    assert told["throttles"] == paused["throttles"] and set(told["throttles"]) == {"TopicProduceQuotaExceeded"}
    assert told["commands_sent"] == told["throttles"]["TopicProduceQuotaExceeded"] and told["connection_pauses"] == 0
    assert (
        paused["connection_pauses"] == paused["throttles"]["TopicProduceQuotaExceeded"] and paused["commands_sent"] == 0
    )
    with pytest.raises(lc.InvalidArgumentError):
        publish.throttle_counts(pa.table({"x": [1]}))


def test_moved_trace_keeps_each_topic_in_order_and_replays() -> None:
    trace = publish.noisy_neighbour(seconds=3)
    moved, _ = publish.throttle_publishes(trace, publish.noisy_neighbour_limiter(), "pause-connection")
    assert moved.num_rows == trace.num_rows
    ts = moved.column("ts_us").to_pylist()
    assert ts == sorted(ts)
    assert sum(moved.column("ts_us").to_pylist()) > sum(trace.column("ts_us").to_pylist())
    for topic in ("hot", "cold"):
        rows = moved.filter(pc.equal(moved.column("topic"), topic))
        ops = rows.column("op").to_pylist()
        # Every read still follows the add it read.
        assert ops[1::2] == ["add"] * (len(ops) // 2) and ops[2::2] == ["read"] * (len(ops) // 2)
    summary = lc.replay(
        trace,
        lc.CacheConfig(cache_size_bytes=1 << 20),
        publish_throttling="pause-connection",
        publish_limiter=publish.noisy_neighbour_limiter(),
    )
    assert summary.column("hits").to_pylist() == [moved.num_rows // 2 - 1]
    assert summary.column("discarded_reads").to_pylist() == [0]


def test_old_traces_without_producer_columns_stay_valid() -> None:
    trace = lc.workload.generate("tailing-fan-out", seed=1)
    trace = trace.slice(0, 20_000)
    assert "producer" not in trace.column_names
    limiter = lc.PublishRateLimiter()
    moved, delays = publish.throttle_publishes(trace, limiter, "throttle-producer")
    assert moved.num_rows == trace.num_rows
    assert pc.max(delays.column("max_ms")).as_py() == 0.0, "no limits, no delay"
    plain = lc.replay(trace, lc.CacheConfig(cache_size_bytes=1 << 20))
    shifted = lc.replay(trace, lc.CacheConfig(cache_size_bytes=1 << 20), publish_throttling="off")
    assert plain.column("hits").to_pylist() == shifted.column("hits").to_pylist()


def test_bad_input_is_a_clear_error() -> None:
    trace = publish.noisy_neighbour(seconds=1)
    with pytest.raises(lc.InvalidArgumentError, match="publish_throttling"):
        publish.throttle_publishes(trace, lc.PublishRateLimiter(), "pause")
    with pytest.raises(TypeError):
        publish.throttle_publishes(trace, object(), "off")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="publish_limiter"):
        lc.replay(trace, lc.CacheConfig(), publish_throttling="throttle-producer")
    bad = trace.set_column(trace.column_names.index("producer"), "producer", pa.array(["x"] * trace.num_rows))
    with pytest.raises(lc.InvalidArgumentError, match="producer"):
        publish.throttle_publishes(bad, lc.PublishRateLimiter(), "off")
    with pytest.raises(lc.InvalidArgumentError):
        publish.noisy_neighbour(seconds=0)


def test_report_puts_the_modes_side_by_side(tmp_path) -> None:
    trace = publish.noisy_neighbour(seconds=2)
    table = publish.compare_modes(trace, publish.noisy_neighbour_limiter())
    summary = lc.replay(trace, lc.CacheConfig(cache_size_bytes=1 << 20))
    path = lc.report.write_report(summary, None, tmp_path, publish=table)
    text = path.read_text()
    assert "publish throttling: noisy neighbour" in text
    assert "| pause-connection | cold |" in text and "| throttle-producer | cold |" in text


def test_trace_files_keep_their_producer_columns(tmp_path) -> None:
    from pyarrow import csv

    trace = publish.noisy_neighbour(seconds=1)
    path = tmp_path / "nn.csv"
    csv.write_csv(trace, path)
    from_file = delays_by_topic(
        publish.throttle_publishes(path, publish.noisy_neighbour_limiter(50), "pause-connection")[1]
    )
    in_memory = delays_by_topic(
        publish.throttle_publishes(trace, publish.noisy_neighbour_limiter(50), "pause-connection")[1]
    )
    assert from_file == in_memory
    assert from_file["cold"]["p99_ms"] > 100.0, "the CSV's connection column still puts both topics on one connection"
    moved, delays = publish.throttle_publishes(trace.slice(0, 0), lc.PublishRateLimiter(), "off")
    assert moved.num_rows == 0 and delays.num_rows == 0


def test_a_batch_is_charged_one_token_per_message() -> None:
    # "hot" publishes 200 entries/s against a quota of 100 msg/s: entries of one message breach it,
    # and so do entries of 10 messages at a tenth of the rate (20 entries, 200 messages a second).
    trace = publish.noisy_neighbour(seconds=3, hot_rate=20)
    is_hot_add = pc.and_(pc.equal(trace.column("topic"), "hot"), pc.equal(trace.column("op"), "add"))
    single = delays_by_topic(
        publish.throttle_publishes(trace, publish.noisy_neighbour_limiter(), "throttle-producer")[1]
    )
    assert single["hot"]["throttles"] == 0, "20 single-message entries a second are within 100 msg/s"
    batches = trace.append_column(
        "messages", pc.if_else(is_hot_add, pa.scalar(10, pa.int32()), pa.scalar(None, pa.int32()))
    )
    batched = delays_by_topic(
        publish.throttle_publishes(batches, publish.noisy_neighbour_limiter(), "throttle-producer")[1]
    )
    assert batched["hot"]["throttles"] > 0 and batched["hot"]["p99_ms"] > 100.0
    assert batched["cold"]["under_quota"], "a null count is one message"
    limiter = lc.PublishRateLimiter()
    limiter.set_topic_rate("t", messages_per_second=10)
    assert limiter.on_publish(0, "t", 1, 100, messages=4) is None
    assert limiter.on_publish(0, "t", 1, 100, messages=4) is None
    assert limiter.on_publish(0, "t", 1, 100, messages=4)["reason"] == "TopicProduceQuotaExceeded"
    with pytest.raises(lc.InvalidArgumentError, match="messages"):
        limiter.on_publish(0, "t", 1, 100, messages=-1)
    negative = batches.set_column(
        batches.column_names.index("messages"),
        "messages",
        pc.if_else(is_hot_add, pa.scalar(-1, pa.int32()), pa.scalar(None, pa.int32())),
    )
    with pytest.raises(lc.InvalidArgumentError, match="messages"):
        publish.throttle_publishes(negative, publish.noisy_neighbour_limiter(), "throttle-producer")
