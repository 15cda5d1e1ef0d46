"""Publish throttling from Python (PIP-385): the limiter, the producers, the wire commands."""

from __future__ import annotations

import pytest

import ledgercache as lc
from ledgercache import protocol

MS = 1_000_000


def test_topic_quota_throttles_at_the_last_token_and_resumes_when_one_is_back() -> None:
    limiter = lc.PublishRateLimiter()
    limiter.set_topic_rate("t", messages_per_second=10)
    breaches = [limiter.on_publish(100 * MS, "t", 1, 10) for _ in range(9)]
    assert breaches == [None] * 9
    # The 10th publish takes the last token: Pulsar throttles when none is left
    # (AsyncTokenBucket.consumeTokensAndCheckIfContainsTokens is balance > 0).
    breach = limiter.on_publish(100 * MS, "t", 1, 10)
    assert breach is not None
    assert breach["reason"] == "TopicProduceQuotaExceeded"
    # It resumes when the debt (none) and the target, max(1, 10 / 100) = 1 token, are refilled:
    # 100 ms at 10/s (AsyncTokenBucket.calculateThrottlingDuration); before, the rest of the second.
    assert breach["pause_for_millis"] == 100
    assert breach["resume_at_ns"] == 200 * MS
    # Another topic on the same broker is not charged.
    assert limiter.on_publish(100 * MS, "other", 1, 10) is None


def test_connection_breach_has_no_pause_and_recovers_at_half() -> None:
    limiter = lc.PublishRateLimiter()
    limiter.set_connection_limits(max_pending_publish_requests=4)
    assert all(limiter.on_publish(0, "t", 7, 1) is None for _ in range(3))
    # ServerCnx pauses when the pending requests reach the limit (the 4th), not past it.
    breach = limiter.on_publish(0, "t", 7, 1)
    assert breach == {"reason": "ConnectionPendingMessagesBreach", "pause_for_millis": 0, "resume_at_ns": None}
    assert not limiter.connection_recovered(7)
    limiter.on_publish_persisted(7, 1)
    assert not limiter.connection_recovered(7)
    limiter.on_publish_persisted(7, 1)
    assert limiter.connection_recovered(7), "4 / 2 pending"


def test_publish_buffer_is_shared_out_per_io_thread_and_pending_waits_for_persistence() -> None:
    limiter = lc.PublishRateLimiter()
    limiter.set_connection_limits(max_publish_buffer_bytes=4000, num_io_threads=2)
    assert limiter.on_publish(0, "t", 1, 1500) is None
    assert limiter.on_publish(0, "t", 2, 1500) is None, "connection 2 is on the other thread"
    assert limiter.on_publish(0, "t", 3, 600)["reason"] == "MessageBufferSizeBreach", "1 and 3 share 2000 bytes"
    assert not limiter.connection_recovered(1) and limiter.connection_recovered(2)
    with pytest.raises(lc.InvalidArgumentError, match="num_io_threads"):
        limiter.set_connection_limits(num_io_threads=0)
    # A refused call changes nothing: two threads still share the 4000 bytes (one would take 2500).
    limiter = lc.PublishRateLimiter()
    limiter.set_connection_limits(max_publish_buffer_bytes=4000, num_io_threads=2)
    with pytest.raises(lc.InvalidArgumentError, match="max_pending_publish_requests"):
        limiter.set_connection_limits(max_pending_publish_requests=0, num_io_threads=1)
    assert limiter.on_publish(0, "t", 1, 2500)["reason"] == "MessageBufferSizeBreach"
    # Thread state follows the connections, not the setting: a huge thread count costs nothing.
    huge = lc.PublishRateLimiter()
    huge.set_connection_limits(max_publish_buffer_bytes=1 << 62, num_io_threads=2**40)
    assert all(huge.on_publish(0, "t", c, 100) is None for c in range(1000))
    # In the simulation a publish is pending until persisted: 10 ms after it is read.
    trace = lc.publish.noisy_neighbour(seconds=1)
    limiter = lc.PublishRateLimiter()
    limiter.set_connection_limits(max_pending_publish_requests=2)
    _, delays = lc.publish.throttle_publishes(trace, limiter, "pause-connection")
    assert lc.publish.throttle_counts(delays)["throttles"] == {}
    limiter.set_publish_persist_latency(10 * MS)
    _, delays = lc.publish.throttle_publishes(trace, limiter, "pause-connection")
    assert lc.publish.throttle_counts(delays)["throttles"]["ConnectionPendingMessagesBreach"] > 0
    with pytest.raises(lc.InvalidArgumentError, match="latency_ns"):
        limiter.set_publish_persist_latency(-1)


@pytest.mark.parametrize("rate", [-1.0, 0.0, 0.5, 1.5, 2.0**53 + 2, float("nan"), float("inf")])
def test_bad_rates_are_rejected_without_changing_the_limits(rate: float) -> None:
    # Pulsar's rates are whole numbers: its token buckets count whole tokens.
    limiter = lc.PublishRateLimiter()
    limiter.set_topic_rate("t", messages_per_second=2)
    with pytest.raises(lc.InvalidArgumentError, match="messages_per_second"):
        limiter.set_topic_rate("t", messages_per_second=rate)
    assert limiter.on_publish(0, "t", 1, 1) is None
    assert limiter.on_publish(0, "t", 1, 1)["reason"] == "TopicProduceQuotaExceeded"


def test_commands_round_trip_and_bad_bytes_are_clear_errors() -> None:
    for value, reason in enumerate(protocol.THROTTLING_REASONS):
        data = protocol.encode_throttle_producer(11, 3, reason, 250)
        assert protocol.decode_throttle_producer(data) == {
            "request_id": 11,
            "producer_id": 3,
            "reason": reason,
            "pause_for_millis": 250,
        }
        # Field 4 (the reason) is a varint with tag byte 0x20.
        assert bytes([0x20, value]) in data
    receipt = protocol.encode_throttle_producer_receipt(11)
    assert protocol.decode_throttle_producer_receipt(receipt) == 11
    with pytest.raises(lc.InvalidArgumentError, match="not one of"):
        protocol.encode_throttle_producer(1, 1, "SlowDown", 0)
    with pytest.raises(lc.InvalidArgumentError):
        protocol.decode_throttle_producer(b"\xff\xff\xff")
    unknown_reason = bytes([0x08, 1, 0x10, 1, 0x20, 9, 0x28, 0])
    with pytest.raises(lc.InvalidArgumentError, match="unknown throttling reason"):
        protocol.decode_throttle_producer(unknown_reason)
    # FeatureFlags field 6 is supports_throttle_producer_commands.
    assert protocol.supports_throttle_producer(b"\x30\x01")
    assert not protocol.supports_throttle_producer(b"")
    assert not protocol.supports_throttle_producer(b"\x28\x01")


def test_producer_pauses_defers_and_names_the_reason_on_timeout() -> None:
    producer = lc.Producer("orders", producer_id=3, send_timeout_ms=100)
    seq0, deferred = producer.send(0)
    assert deferred is None
    command = protocol.encode_throttle_producer(9, 3, "TopicProduceQuotaExceeded", 500)
    receipt = producer.on_throttle(50 * MS, command)
    assert protocol.decode_throttle_producer_receipt(receipt) == 9
    assert producer.is_throttled(60 * MS)
    assert producer.throttle_reason(60 * MS) == "TopicProduceQuotaExceeded"
    seq1, deferred = producer.send(60 * MS)
    assert deferred == 550 * MS
    failures = producer.expire(200 * MS)
    assert [type(f) for f in failures] == [lc.ProducerThrottledException] * 2
    assert [f.sequence for f in failures] == [seq0, seq1]
    assert failures[0].reason == "TopicProduceQuotaExceeded"
    assert isinstance(failures[0], TimeoutError)
    with pytest.raises(lc.ProducerThrottledException, match="TopicProduceQuotaExceeded"):
        raise failures[0]
    assert not producer.is_throttled(550 * MS), "cleared lazily once the pause has passed"
    assert producer.throttled_times() == {("TopicProduceQuotaExceeded", "orders"): 500}

    plain = lc.Producer("orders", producer_id=4, send_timeout_ms=100)
    plain.send(0)
    (failure,) = plain.expire(100 * MS)
    assert type(failure) is lc.ProducerSendTimeoutException and failure.reason is None


def test_producer_rejects_bad_input_and_keeps_its_state() -> None:
    producer = lc.Producer("t", producer_id=1)
    other = protocol.encode_throttle_producer(1, 2, "TopicProduceQuotaExceeded", 500)
    with pytest.raises(lc.InvalidArgumentError, match="producer"):
        producer.on_throttle(0, other)
    with pytest.raises(lc.InvalidArgumentError):
        producer.on_throttle(0, b"\x08")
    assert not producer.is_throttled(0)
    with pytest.raises(lc.InvalidArgumentError):
        producer.send(-1)
    with pytest.raises(lc.InvalidArgumentError):
        lc.Producer("t", producer_id=1, send_timeout_ms=0)


def test_partitioned_producer_skips_throttled_partitions() -> None:
    pp = lc.PartitionedProducer("orders", 3, first_producer_id=10)
    assert len(pp) == 3
    command = protocol.encode_throttle_producer(1, 11, "TopicProduceQuotaExceeded", 1000)
    pp.on_throttle(1, 0, command)
    assert pp.is_partition_throttled(1, MS) and pp.is_throttled(MS)
    assert [pp.send(MS)[0] for _ in range(4)] == [0, 2, 0, 2]
    assert [pp.send(2_000 * MS)[0] for _ in range(3)] == [0, 1, 2]
    with pytest.raises(lc.InvalidArgumentError, match="partition"):
        pp.is_partition_throttled(5, 0)
    with pytest.raises(lc.InvalidArgumentError):
        lc.PartitionedProducer("orders", 0)
    # The count is bounded before anything is made (10**8 partitions aborted on a failed
    # allocation).
    with pytest.raises(lc.InvalidArgumentError, match="partitions: at most 100000"):
        lc.PartitionedProducer("orders", 10**8)


def test_resource_group_and_broker_quotas_name_their_reason() -> None:
    limiter = lc.PublishRateLimiter()
    limiter.set_resource_group("tenant-a", ["a1", "a2"], messages_per_second=4)
    assert [limiter.on_publish(0, t, 1, 1) for t in ("a1", "a2", "a1")] == [None] * 3
    # The group's 4th message takes its last token; one token back takes a quarter second.
    breach = limiter.on_publish(0, "a2", 1, 1)
    assert breach == {"reason": "ResourceGroupProduceQuotaExceeded", "pause_for_millis": 250, "resume_at_ns": 250 * MS}
    assert limiter.on_publish(0, "b", 1, 1) is None, "a topic outside the group is not charged"
    assert limiter.on_publish(250 * MS, "a1", 1, 1)["pause_for_millis"] == 250, "the refilled token is taken: none left"

    broker = lc.PublishRateLimiter()
    broker.set_broker_rate(bytes_per_second=1000)
    assert broker.on_publish(0, "x", 1, 600) is None
    breach = broker.on_publish(0, "y", 2, 600)
    assert breach["reason"] == "BrokerProduceQuotaExceeded" and breach["pause_for_millis"] == 0


def test_decoders_refuse_empty_and_truncated_commands():
    # prost fills absent proto2 required fields with defaults; the decoders check they are there.
    for data in (b"", b"\x08\x07"):
        with pytest.raises(lc.InvalidArgumentError, match="required field"):
            lc.protocol.decode_throttle_producer(data)
    with pytest.raises(lc.InvalidArgumentError, match="required field"):
        lc.protocol.decode_throttle_producer_receipt(b"")
    full = lc.protocol.encode_throttle_producer(7, 3, "TopicProduceQuotaExceeded", 250)
    for cut in range(len(full)):
        with pytest.raises(lc.InvalidArgumentError):
            lc.protocol.decode_throttle_producer(full[:cut])
