//! The workload generator: an OpenMessaging Benchmark workload plus Pulsar knobs, simulated into
//! the events a broker sees (the replay trace format).

mod ack_grouping;
mod backlog;
mod consumer;
mod cursor;
mod dispatch;
mod estimate;
mod events;
mod footprint;
mod generate;
mod initial_backlog;
mod lifecycle;
mod metadata;
mod negative_acks;
mod producer;
mod readers;
mod retention;
mod rng;
mod selector;
mod spec;
mod stream;
mod topology;

pub use estimate::{Estimate, Ingest};
pub use footprint::{human_bytes, Footprint, DEFAULT_MEMORY_BUDGET};
pub use generate::{
    generate, generate_broker, generate_broker_counting_reads, EventColumns, REASON_HOLD_BACK,
    REASON_NACK, REASON_OVERFLOW,
};
pub use rng::Rng;
pub use selector::{murmur3_32, sticky_key_hash, ConsistentHashRing, NO_KEY, STICKY_KEY_HASH_MAX};
pub use spec::{
    DetailValue, KeyDistributor, Readers, StoredBacklog, SubscriptionDetail, SubscriptionType,
    TopicDetail, TopicReaders, WorkloadSpec, DEFAULT_BROKER_INGEST_BYTES_PER_SECOND,
    DEFAULT_BROKER_INGEST_MESSAGES_PER_SECOND, MAX_ENTRY_BYTES, SHAPE_SETTINGS, SPEC_NAMES,
    SUBSCRIPTION_KEYS, TOPIC_KEYS,
};
pub use stream::{trace_schema, TraceBatches, TraceStream, DEFAULT_BATCH_ROWS};

use arrow_array::RecordBatch;

impl EventColumns {
    /// The events as one trace record batch (the columns of the trace format, with the optional
    /// `messages` and `reason` columns last; string columns dictionary-encoded, see
    /// [`trace_schema`]). For long traces, [`TraceStream`] makes batches as it goes instead.
    pub fn to_record_batch(&self) -> RecordBatch {
        stream::Encoder::new(&self.broker_names, &self.topic_names, &self.cursor_names)
            .batch(self, 0..self.len())
    }
}
