//! The bytes an entry takes as the broker stores and caches it: the payloads plus what the Java
//! client and `Commands.serializeMetadataAndPayload` wrap around them. `RangeEntryCacheImpl
//! .insert` charges the cache the entry's full length, so a cache sized by payloads alone comes
//! out too small for small messages (each message of a batch carries its own metadata too).
//!
//! Layout of a stored entry (`Commands.serializeMetadataAndPayload`, checksum `Crc32c`):
//! magic (2) + checksum (4) + metadata size (4) + `MessageMetadata` + payload. The payload of a
//! batch of n > 1 messages is, per message, a 4-byte size + `SingleMessageMetadata` + its bytes
//! (`Commands.serializeSingleMessageInBatchWithPayload`); a batch of one is sent as a plain
//! message (`BatchMessageContainerImpl.createOpSendMsg`, `getCompressedBatchMetadataAndPayload`).
//!
//! The fields are those the Java client sets without compression, encryption, schema or
//! properties (OMB's producers): `ProducerImpl.updateMessageMetadata` (producer_name,
//! publish_time, uncompressed_size), `updateMessageMetadataSequenceId` (sequence_id),
//! `TypedMessageBuilderImpl.key` (partition_key, partition_key_b64_encoded), and for a batch
//! `Commands.initBatchMessageMetadata` and `BatchMessageContainerImpl.createOpSendMsg`
//! (num_messages_in_batch, highest_sequence_id; uncompressed_size only when compressed). Field
//! numbers: `PulsarApi.proto`.

use super::generate::Sim;
use super::spec::KeyDistributor;

/// Magic (2), CRC32C checksum (4) and the metadata's 4-byte size.
pub(super) const ENTRY_HEADER_BYTES: u64 = 2 + 4 + 4;

/// The publish time's milliseconds: any date from 2005 to 2109 takes a 6-byte varint, so the
/// exact clock does not change a size.
const PUBLISH_TIME_MS: u64 = 1_735_689_600_000;

/// Bytes of `v` as a protobuf varint.
pub(super) fn varint_len(v: u64) -> u64 {
    // 7 bits a byte; 0 still takes one.
    u64::from((64 - v.max(1).leading_zeros()).div_ceil(7))
}

/// A field's tag (field number and wire type) as a varint.
fn tag_len(field: u32) -> u64 {
    varint_len(u64::from(field) << 3)
}

fn varint_field(field: u32, v: u64) -> u64 {
    tag_len(field) + varint_len(v)
}

fn bytes_field(field: u32, len: u64) -> u64 {
    (tag_len(field) + varint_len(len)).saturating_add(len)
}

/// The sum of `varint_len(s)` for `s` in `first..first + n`, by varint length class (a batch can
/// hold many messages; its size costs no work per message).
pub(super) fn varint_len_sum(first: u64, n: u64) -> u64 {
    let end = first.saturating_add(n);
    let mut total = 0u64;
    let mut lo = first;
    while lo < end {
        let len = varint_len(lo);
        // The first value needing one more byte (none past 9 bytes within u64 but 2^63).
        let next = 1u64.checked_shl(7 * len as u32).unwrap_or(u64::MAX);
        let hi = next.min(end);
        total += (hi - lo) * len;
        lo = hi;
    }
    total
}

/// What an entry's metadata depends on.
#[derive(Debug, Clone, Copy)]
pub(super) struct EntryShape {
    /// Length of the producer's name.
    pub producer_name_len: u64,
    /// The sequence id of the entry's first message (the producer's count of messages before it).
    pub first_sequence_id: u64,
    /// Messages in the entry.
    pub messages: u64,
    /// Payload bytes of each message.
    pub message_size: u64,
    /// Length of each message's key (`None`: not keyed).
    pub key_len: Option<u64>,
}

/// `partition_key` and `partition_key_b64_encoded` (false) of a keyed message: fields 6 and 13 of
/// `MessageMetadata`, 2 and 6 of `SingleMessageMetadata`.
fn key_fields(key_len: Option<u64>, key_field: u32, b64_field: u32) -> u64 {
    key_len.map_or(0, |k| {
        bytes_field(key_field, k).saturating_add(varint_field(b64_field, 0))
    })
}

/// The `MessageMetadata` bytes of the entry.
pub(super) fn message_metadata_len(e: &EntryShape) -> u64 {
    let common = bytes_field(1, e.producer_name_len)
        .saturating_add(varint_field(2, e.first_sequence_id) + varint_field(3, PUBLISH_TIME_MS))
        .saturating_add(key_fields(e.key_len, 6, 13));
    if e.messages <= 1 {
        common.saturating_add(varint_field(9, e.message_size))
    } else {
        let highest = e.first_sequence_id.saturating_add(e.messages - 1);
        common.saturating_add(varint_field(11, e.messages) + varint_field(24, highest))
    }
}

/// The stored entry's length: header, metadata and payload (with each batched message's size
/// prefix and `SingleMessageMetadata`).
pub(super) fn entry_len(e: &EntryShape) -> u64 {
    let payloads = e.messages.saturating_mul(e.message_size);
    let mut len = ENTRY_HEADER_BYTES
        .saturating_add(message_metadata_len(e))
        .saturating_add(payloads);
    if e.messages > 1 {
        // Per message: 4-byte size, payload_size (3), the sequence_id's tag (8), the key's
        // fields (2, 6); the sequence ids' varints are summed apart.
        let fixed = (4 + varint_field(3, e.message_size) + tag_len(8))
            .saturating_add(key_fields(e.key_len, 2, 6));
        len = len
            .saturating_add(e.messages.saturating_mul(fixed))
            .saturating_add(varint_len_sum(e.first_sequence_id, e.messages));
    }
    len
}

/// The producer name a broker gives a producer that names none (`BrokerService
/// .generateUniqueProducerName`: `<cluster>-<broker>-<counter>`), for the lab's producer of
/// partition `partition` on broker `broker`; only its length matters.
pub(super) fn producer_name_len(broker: u32, partition: u64) -> u64 {
    // "pulsar-" + broker + "-" + counter.
    7 + decimal_digits(u64::from(broker)) + 1 + decimal_digits(partition)
}

/// Decimal digits of `v`.
fn decimal_digits(v: u64) -> u64 {
    u64::from(v.checked_ilog10().unwrap_or(0)) + 1
}

/// OMB's keys: `KeyDistributor.KEY_BYTE_SIZE` (7) random bytes in unpadded base64url: 10
/// characters.
pub(super) const OMB_KEY_BYTES: u64 = 10;

impl Sim {
    /// The stored length of partition `p`'s next entry, of `n` messages: with `message_metadata`
    /// off, the payloads alone (as before the knob).
    pub(super) fn entry_bytes(&self, p: usize, n: u64) -> u64 {
        let part = &self.parts[p];
        let payloads = n.saturating_mul(part.message_size);
        if !self.spec.readers.message_metadata {
            return payloads;
        }
        let keyed = self.spec.key_distributor != KeyDistributor::NoKey;
        entry_len(&EntryShape {
            producer_name_len: producer_name_len(part.broker, u64::from(part.topic)),
            // One producer a partition (a partitioned producer's per-partition `ProducerImpl`),
            // numbering its messages from 0 (`msgIdGenerator`).
            first_sequence_id: part.messages_published,
            messages: n,
            message_size: part.message_size,
            key_len: keyed.then_some(OMB_KEY_BYTES),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(messages: u64, size: u64, first: u64, key: Option<u64>) -> EntryShape {
        EntryShape {
            producer_name_len: 12,
            first_sequence_id: first,
            messages,
            message_size: size,
            key_len: key,
        }
    }

    #[test]
    fn varints_by_hand() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(16_383), 2);
        assert_eq!(varint_len(16_384), 3);
        assert_eq!(varint_len(PUBLISH_TIME_MS), 6);
        assert_eq!(varint_len(u64::MAX), 10);
        // 120..130: 8 of 1 byte, 2 of 2.
        assert_eq!(varint_len_sum(120, 10), 8 + 2 * 2);
        assert_eq!(varint_len_sum(u64::MAX - 1, 5), 10);
        let slow: u64 = (16_000..17_000).map(varint_len).sum();
        assert_eq!(varint_len_sum(16_000, 1000), slow);
    }

    #[test]
    fn one_message_of_100_bytes() {
        // MessageMetadata: producer_name 1 + 1 + 12 = 14, sequence_id 5: 1 + 1 = 2,
        // publish_time 1 + 6 = 7, uncompressed_size 100: 1 + 1 = 2 -> 25.
        // Entry: 2 + 4 + 4 + 25 + 100 = 135.
        let e = shape(1, 100, 5, None);
        assert_eq!(message_metadata_len(&e), 25);
        assert_eq!(entry_len(&e), 135);
        // uncompressed_size 1000 takes 2 bytes: 136 + 900.
        assert_eq!(entry_len(&shape(1, 1000, 5, None)), 1036);
    }

    #[test]
    fn a_batch_of_ten_100_byte_messages() {
        // MessageMetadata: producer_name 14, sequence_id 200 (2 bytes) 1 + 2 = 3, publish_time 7,
        // num_messages_in_batch 1 + 1 = 2, highest_sequence_id 209: tag 24 << 3 = 192 (2 bytes)
        // + 2 = 4 -> 30.
        // Each message: size 4 + payload_size 1 + 1 = 2 + sequence_id 1 + 2 = 3 -> 9, + 100.
        // Entry: 10 + 30 + 10 x 109 = 1130 (payloads alone: 1000, 13% more).
        let e = shape(10, 100, 200, None);
        assert_eq!(message_metadata_len(&e), 30);
        assert_eq!(entry_len(&e), 1130);
    }

    #[test]
    fn keyed_messages_carry_their_key_twice_in_a_batch_of_one_and_per_message_in_a_batch() {
        // Plain message with a 7-byte key: + partition_key 1 + 1 + 7 = 9 + b64 flag 2 = 11.
        assert_eq!(entry_len(&shape(1, 100, 5, Some(7))), 135 + 11);
        // A batch of 2 from sequence 0: MessageMetadata 14 + 2 + 7 + 11 (first key) + 2 +
        // highest 1: 2 + 1 = 3 -> 39; each message 4 + 2 + 11 + 2 (sequence 0 or 1) = 19 + 100.
        let e = shape(2, 100, 0, Some(7));
        assert_eq!(message_metadata_len(&e), 39);
        assert_eq!(entry_len(&e), 10 + 39 + 2 * 119);
    }

    #[test]
    fn producer_names_and_huge_values_do_not_overflow() {
        assert_eq!(producer_name_len(0, 0), "pulsar-0-0".len() as u64);
        assert_eq!(producer_name_len(12, 345), "pulsar-12-345".len() as u64);
        let e = shape(u64::MAX, u64::MAX, u64::MAX, Some(u64::MAX));
        assert_eq!(entry_len(&e), u64::MAX);
    }
}
