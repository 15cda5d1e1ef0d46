//! ledgercache: Apache Pulsar's PIP-430 broker entry cache as a library.
//!
//! Three layers, whose imports run one way (`tests/layers.rs` checks it):
//!
//! - [`cache`]: the library core, Pulsar's entry cache (PIP-430's range cache, removal queue and
//!   manager, entries and their payloads, expected read counts, the reads-in-flight limiter);
//! - [`broker`]: what a broker builds around it (the managed ledger and its cursors, the cursor
//!   containers, the read flow, storage, the publish path's throttling), built on [`cache`];
//! - [`lab`]: the workload generator and the replay engine, built on both.
//!
//! [`config`] holds the settings all three read and [`error`] the one error type. The core is free
//! of Python; the PyO3 bindings live in `python` behind the `python` feature.

/// With the `mimalloc` feature (the Python wheel's build), every Rust allocation of the process
/// comes from mimalloc; see Cargo.toml for why.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod broker;
pub mod cache;
pub mod config;
pub mod error;
pub mod lab;

#[cfg(feature = "python")]
mod python;

pub use cache::clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use cache::entry::{CachedEntry, Payload, PayloadBuffer, PayloadGroup};
pub use cache::manager::{BatchEntry, EntryCache, EntryCacheManager, EntryInfo, SettledAccounting};
pub use cache::position::Position;
pub use cache::read_count::{ReadCount, ReadCountHandler};
pub use cache::stats::CacheStats;
pub use config::{CacheConfig, SettingValue, Strategy};
pub use error::{Error, Result};
