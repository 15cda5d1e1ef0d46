//! The workload generator: an OpenMessaging Benchmark workload plus Pulsar knobs, simulated into
//! the events a broker sees (the replay trace format).

mod generate;
mod rng;
mod selector;
mod spec;

pub use generate::{
    generate, generate_broker, EventColumns, REASON_HOLD_BACK, REASON_NACK, REASON_OVERFLOW,
};
pub use rng::Rng;
pub use selector::{murmur3_32, sticky_key_hash, ConsistentHashRing, NO_KEY, STICKY_KEY_HASH_MAX};
pub use spec::{KeyDistributor, SubscriptionType, WorkloadSpec, SPEC_NAMES};

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use std::sync::Arc;

impl EventColumns {
    /// The events as a trace record batch (the columns of the trace format, with the optional
    /// `messages` and `reason` columns last).
    pub fn to_record_batch(&self) -> RecordBatch {
        let names = |ids: &[u32], table: &[String]| {
            StringArray::from_iter_values(ids.iter().map(|&i| table[i as usize].as_str()))
        };
        let cursors = StringArray::from_iter(
            self.cursor
                .iter()
                .map(|c| c.map(|i| self.cursor_names[i as usize].as_str())),
        );
        RecordBatch::try_from_iter(vec![
            (
                "ts_us",
                Arc::new(Int64Array::from(self.ts_us.clone())) as ArrayRef,
            ),
            (
                "broker",
                Arc::new(names(&self.broker, &self.broker_names)) as ArrayRef,
            ),
            (
                "topic",
                Arc::new(names(&self.topic, &self.topic_names)) as ArrayRef,
            ),
            (
                "op",
                Arc::new(StringArray::from_iter_values(self.op.iter().copied())) as ArrayRef,
            ),
            ("cursor", Arc::new(cursors) as ArrayRef),
            (
                "ledger_id",
                Arc::new(Int64Array::from(self.ledger_id.clone())) as ArrayRef,
            ),
            (
                "entry_id",
                Arc::new(Int64Array::from(self.entry_id.clone())) as ArrayRef,
            ),
            (
                "count",
                Arc::new(Int32Array::from(self.count.clone())) as ArrayRef,
            ),
            (
                "size",
                Arc::new(Int32Array::from(self.size.clone())) as ArrayRef,
            ),
            (
                "messages",
                Arc::new(Int32Array::from(self.messages.clone())) as ArrayRef,
            ),
            (
                "reason",
                Arc::new(StringArray::from(self.reason.clone())) as ArrayRef,
            ),
        ])
        .expect("columns have equal lengths")
    }
}
