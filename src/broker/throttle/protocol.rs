//! PIP-385's binary protocol additions, with the field numbers the proposal gives: the broker's
//! `CommandThrottleProducer`, the client's `CommandThrottleProducerReceipt`, and the feature flag a
//! client sets when it understands them.

use crate::error::{Error, Result};
use prost::Message;

/// Why a producer is throttled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ThrottlingReason {
    TopicProduceQuotaExceeded = 0,
    ResourceGroupProduceQuotaExceeded = 1,
    ConnectionPendingMessagesBreach = 2,
    MessageBufferSizeBreach = 3,
    BrokerProduceQuotaExceeded = 4,
}

impl ThrottlingReason {
    pub const ALL: [ThrottlingReason; 5] = [
        ThrottlingReason::TopicProduceQuotaExceeded,
        ThrottlingReason::ResourceGroupProduceQuotaExceeded,
        ThrottlingReason::ConnectionPendingMessagesBreach,
        ThrottlingReason::MessageBufferSizeBreach,
        ThrottlingReason::BrokerProduceQuotaExceeded,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ThrottlingReason::TopicProduceQuotaExceeded => "TopicProduceQuotaExceeded",
            ThrottlingReason::ResourceGroupProduceQuotaExceeded => {
                "ResourceGroupProduceQuotaExceeded"
            }
            ThrottlingReason::ConnectionPendingMessagesBreach => "ConnectionPendingMessagesBreach",
            ThrottlingReason::MessageBufferSizeBreach => "MessageBufferSizeBreach",
            ThrottlingReason::BrokerProduceQuotaExceeded => "BrokerProduceQuotaExceeded",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|r| r.name()).collect();
                Error::invalid(
                    "reason",
                    format!("{s:?} is not one of {}", names.join(", ")),
                )
            })
    }

    /// Connection-level breaches pause the connection whatever the client answers.
    pub fn is_connection_level(self) -> bool {
        matches!(
            self,
            ThrottlingReason::ConnectionPendingMessagesBreach
                | ThrottlingReason::MessageBufferSizeBreach
                | ThrottlingReason::BrokerProduceQuotaExceeded
        )
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct CommandThrottleProducer {
    #[prost(uint64, required, tag = "1")]
    pub request_id: u64,
    #[prost(uint64, required, tag = "2")]
    pub producer_id: u64,
    #[prost(enumeration = "ThrottlingReason", required, tag = "4")]
    pub throttling_reason: i32,
    #[prost(uint64, required, tag = "5")]
    pub pause_for_millis: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct CommandThrottleProducerReceipt {
    #[prost(uint64, required, tag = "1")]
    pub request_id: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct FeatureFlags {
    #[prost(bool, optional, tag = "1", default = "false")]
    pub supports_auth_refresh: Option<bool>,
    #[prost(bool, optional, tag = "2", default = "false")]
    pub supports_broker_entry_metadata: Option<bool>,
    #[prost(bool, optional, tag = "3", default = "false")]
    pub supports_partial_producer: Option<bool>,
    #[prost(bool, optional, tag = "4", default = "false")]
    pub supports_topic_watchers: Option<bool>,
    #[prost(bool, optional, tag = "5", default = "false")]
    pub supports_get_partitioned_metadata_without_auto_creation: Option<bool>,
    #[prost(bool, optional, tag = "6", default = "false")]
    pub supports_throttle_producer_commands: Option<bool>,
}

impl CommandThrottleProducer {
    pub fn new(
        request_id: u64,
        producer_id: u64,
        reason: ThrottlingReason,
        pause_for_millis: u64,
    ) -> Self {
        CommandThrottleProducer {
            request_id,
            producer_id,
            throttling_reason: reason as i32,
            pause_for_millis,
        }
    }

    pub fn reason(&self) -> Result<ThrottlingReason> {
        ThrottlingReason::try_from(self.throttling_reason).map_err(|_| {
            Error::invalid(
                "data",
                format!("unknown throttling reason {}", self.throttling_reason),
            )
        })
    }

    pub fn encode_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// Decodes and checks the reason; malformed bytes are an error, never a panic.
    pub fn decode_bytes(data: &[u8]) -> Result<Self> {
        let cmd = Self::decode(data)
            .map_err(|e| Error::invalid("data", format!("not a CommandThrottleProducer: {e}")))?;
        require_fields(
            data,
            "CommandThrottleProducer",
            &[
                (1, "request_id"),
                (2, "producer_id"),
                (4, "throttling_reason"),
                (5, "pause_for_millis"),
            ],
        )?;
        cmd.reason()?;
        Ok(cmd)
    }
}

impl CommandThrottleProducerReceipt {
    pub fn encode_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    pub fn decode_bytes(data: &[u8]) -> Result<Self> {
        let receipt = Self::decode(data).map_err(|e| {
            Error::invalid("data", format!("not a CommandThrottleProducerReceipt: {e}"))
        })?;
        require_fields(data, "CommandThrottleProducerReceipt", &[(1, "request_id")])?;
        Ok(receipt)
    }
}

impl FeatureFlags {
    pub fn throttle_producer_supported(&self) -> bool {
        self.supports_throttle_producer_commands.unwrap_or(false)
    }

    pub fn decode_bytes(data: &[u8]) -> Result<Self> {
        Self::decode(data).map_err(|e| Error::invalid("data", format!("not FeatureFlags: {e}")))
    }
}

/// Fails unless every `required` field of the proto2 message is on the wire (prost fills absent
/// required fields with defaults, so `b""` would decode as a valid command).
fn require_fields(data: &[u8], message: &str, required: &[(u32, &str)]) -> Result<()> {
    let mut seen = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let key = prost::encoding::decode_varint(&mut rest)
            .map_err(|e| Error::invalid("data", format!("not a {message}: {e}")))?;
        let tag = (key >> 3) as u32;
        let skip = match key & 7 {
            0 => prost::encoding::decode_varint(&mut rest).map(|_| 0),
            1 => Ok(8),
            2 => prost::encoding::decode_varint(&mut rest),
            5 => Ok(4),
            w => {
                return Err(Error::invalid(
                    "data",
                    format!("not a {message}: wire type {w}"),
                ))
            }
        }
        .map_err(|e| Error::invalid("data", format!("not a {message}: {e}")))?;
        let skip = usize::try_from(skip)
            .ok()
            .filter(|n| *n <= rest.len())
            .ok_or_else(|| Error::invalid("data", format!("not a {message}: truncated")))?;
        rest = &rest[skip..];
        seen.push(tag);
    }
    match required.iter().find(|(tag, _)| !seen.contains(tag)) {
        Some((tag, name)) => Err(Error::invalid(
            "data",
            format!("not a {message}: required field {name} (field {tag}) is missing"),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_with_the_proposals_field_numbers() {
        let cmd =
            CommandThrottleProducer::new(7, 3, ThrottlingReason::MessageBufferSizeBreach, 250);
        let bytes = cmd.encode_bytes();
        // field 1 varint 7, field 2 varint 3, field 4 varint 3, field 5 varint 250
        assert_eq!(bytes, vec![0x08, 7, 0x10, 3, 0x20, 3, 0x28, 0xFA, 0x01]);
        assert_eq!(CommandThrottleProducer::decode_bytes(&bytes).unwrap(), cmd);
        let receipt = CommandThrottleProducerReceipt { request_id: 7 };
        assert_eq!(
            CommandThrottleProducerReceipt::decode_bytes(&receipt.encode_bytes()).unwrap(),
            receipt
        );
        let flags = FeatureFlags {
            supports_throttle_producer_commands: Some(true),
            ..Default::default()
        };
        assert_eq!(flags.encode_to_vec(), vec![0x30, 1]);
        assert!(FeatureFlags::decode_bytes(&flags.encode_to_vec())
            .unwrap()
            .throttle_producer_supported());
        assert!(!FeatureFlags::decode_bytes(&[])
            .unwrap()
            .throttle_producer_supported());
    }

    #[test]
    fn required_fields_are_enforced() {
        let full =
            CommandThrottleProducer::new(7, 3, ThrottlingReason::MessageBufferSizeBreach, 250)
                .encode_bytes();
        for cut in 0..full.len() {
            assert!(
                CommandThrottleProducer::decode_bytes(&full[..cut]).is_err(),
                "{cut} bytes of {}",
                full.len()
            );
        }
        let err = CommandThrottleProducer::decode_bytes(&[0x08, 7, 0x10, 3, 0x20, 3])
            .unwrap_err()
            .to_string();
        assert!(err.contains("pause_for_millis"), "{err}");
        assert!(CommandThrottleProducerReceipt::decode_bytes(&[]).is_err());
    }

    #[test]
    fn malformed_bytes_are_errors() {
        assert!(CommandThrottleProducer::decode_bytes(&[0x08]).is_err());
        assert!(
            CommandThrottleProducer::decode_bytes(&[0x20, 9]).is_err(),
            "unknown reason"
        );
        assert!(CommandThrottleProducerReceipt::decode_bytes(&[0xff, 0xff, 0xff]).is_err());
        assert!(ThrottlingReason::parse("TooManyCats").is_err());
        assert_eq!(
            ThrottlingReason::parse("BrokerProduceQuotaExceeded").unwrap(),
            ThrottlingReason::BrokerProduceQuotaExceeded
        );
    }
}
