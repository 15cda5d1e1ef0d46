//! ledgercache: Apache Pulsar's PIP-430 broker entry cache as a library.
//!
//! The core is free of Python; the PyO3 bindings live in [`python`] behind the `python` feature.

/// With the `mimalloc` feature (the Python wheel's build), every Rust allocation of the process
/// comes from mimalloc; see Cargo.toml for why.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod arrow_payload;
pub mod clock;
pub mod config;
pub mod cursors;
pub mod entry;
pub mod error;
mod fast_hash;
mod holders;
pub mod ledger;
pub mod manager;
mod pages;
mod payload;
pub mod position;
pub mod position_index;
mod prefetch;
mod range_cache;
pub mod read_count;
pub mod read_flow;
pub mod removal_queue;
pub mod replay;
pub mod stats;
pub mod storage;
pub mod throttle;
pub mod workload;

#[cfg(feature = "python")]
mod python;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use config::{CacheConfig, SettingValue, Strategy};
pub use entry::{CachedEntry, Payload, PayloadBuffer, PayloadGroup};
pub use error::{Error, Result};
pub use manager::{BatchEntry, EntryCache, EntryCacheManager, EntryInfo, SettledAccounting};
pub use position::Position;
pub use read_count::{ReadCount, ReadCountHandler};
pub use stats::CacheStats;
