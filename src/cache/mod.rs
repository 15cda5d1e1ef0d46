//! The library core: Pulsar's broker entry cache. It imports nothing from [`crate::broker`] or
//! [`crate::lab`].

pub mod arrow_payload;
pub mod clock;
pub mod entry;
pub(crate) mod fast_hash;
pub(crate) mod holders;
pub mod inflight_reads;
pub mod manager;
pub(crate) mod pages;
pub(crate) mod payload;
pub mod position;
pub mod position_index;
pub(crate) mod prefetch;
pub(crate) mod range_cache;
pub mod read_count;
pub mod removal_queue;
pub mod stats;
