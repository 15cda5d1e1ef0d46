"""PIP-385's wire commands as bytes (protobuf, the field numbers of Pulsar's ``PulsarApi.proto``).

>>> from ledgercache import protocol
>>> data = protocol.encode_throttle_producer(7, 3, "TopicProduceQuotaExceeded", 250)
>>> protocol.decode_throttle_producer(data)["pause_for_millis"]
250

Malformed bytes and unknown reasons raise :class:`~ledgercache.errors.InvalidArgumentError`.
"""

from __future__ import annotations

from ._native import (
    decode_throttle_producer,
    decode_throttle_producer_receipt,
    encode_throttle_producer,
    encode_throttle_producer_receipt,
    supports_throttle_producer,
)

THROTTLING_REASONS = (
    "TopicProduceQuotaExceeded",
    "ResourceGroupProduceQuotaExceeded",
    "ConnectionPendingMessagesBreach",
    "MessageBufferSizeBreach",
    "BrokerProduceQuotaExceeded",
)
"""The ``ThrottlingReason`` enum, in protocol order (values 0..4)."""

__all__ = [
    "THROTTLING_REASONS",
    "decode_throttle_producer",
    "decode_throttle_producer_receipt",
    "encode_throttle_producer",
    "encode_throttle_producer_receipt",
    "supports_throttle_producer",
]
