//! The publish path with producer throttling (PIP-385): rate limits, the throttle exchange between
//! broker and client, and the client's producers.

pub mod exchange;
pub mod limiter;
pub mod producer;
pub mod protocol;
pub mod publish_sim;
pub mod token_bucket;

pub use exchange::{BrokerAction, ServerConnection};
pub use limiter::{Breach, PublishRateLimiter, Rate};
pub use producer::{PartitionedProducer, Producer, SendFailure, SendOutcome};
pub use protocol::{
    CommandThrottleProducer, CommandThrottleProducerReceipt, FeatureFlags, ThrottlingReason,
};
pub use token_bucket::TokenBucket;
