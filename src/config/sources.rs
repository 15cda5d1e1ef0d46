//! Where each setting comes from: a `broker.conf` key that Pulsar reads (and which Pulsar lines
//! read it), or the lab alone. An operator can apply only the first kind, so the lab says which is
//! which: in [`SETTINGS`], in `CacheConfig.settings()` from Python, in `docs/fidelity.md`, and in
//! the warnings [`super::CacheConfig::from_broker_conf`] gives for keys a broker does not apply.

/// Where a setting comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `key` in `broker.conf`, read by the Pulsar lines named in `read_by`; `scale` turns its unit
    /// into ours.
    Broker {
        key: &'static str,
        read_by: &'static str,
        scale: u64,
    },
    /// The lab's own: no broker reads it.
    Lab,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    pub source: Source,
    /// What Pulsar does with it, when that is not simply what the name says.
    pub note: &'static str,
}

impl Setting {
    /// Which layer of the settings it belongs to: "broker" (a `broker.conf` key: it configures a
    /// broker or the library's manager, see `config/broker.rs`) or "lab" (`config/lab.rs`).
    pub const fn layer(&self) -> &'static str {
        match self.source {
            Source::Broker { .. } => "broker",
            Source::Lab => "lab",
        }
    }
}

/// The settings of one layer ([`Setting::layer`]), in [`SETTINGS`] order.
pub fn of_layer(layer: &str) -> impl Iterator<Item = &'static Setting> + '_ {
    SETTINGS.iter().filter(move |s| s.layer() == layer)
}

const BOTH: &str = "4.0, master";
const MASTER: &str = "master (4.1+)";

const fn broker(
    name: &'static str,
    key: &'static str,
    read_by: &'static str,
    note: &'static str,
) -> Setting {
    Setting {
        name,
        source: Source::Broker {
            key,
            read_by,
            scale: 1,
        },
        note,
    }
}

const fn lab(name: &'static str, note: &'static str) -> Setting {
    Setting {
        name,
        source: Source::Lab,
        note,
    }
}

/// Every setting, in [`super::SETTING_NAMES`] order.
pub const SETTINGS: [Setting; 31] = [
    Setting {
        name: "cache_size_bytes",
        source: Source::Broker {
            key: "managedLedgerCacheSizeMB",
            read_by: BOTH,
            scale: 1 << 20,
        },
        note: "",
    },
    broker("eviction_watermark", "managedLedgerCacheEvictionWatermark", BOTH, ""),
    lab(
        "eviction_trigger_threshold",
        "Pulsar fixes it at 0.98 (RangeEntryCacheManagerImpl); PIP-430 proposed a key that was never added",
    ),
    broker(
        "eviction_time_threshold_ms",
        "managedLedgerCacheEvictionTimeThresholdMillis",
        BOTH,
        "",
    ),
    broker("eviction_interval_ms", "managedLedgerCacheEvictionIntervalMs", BOTH, ""),
    broker(
        "eviction_by_expected_read_count",
        "cacheEvictionByExpectedReadCount",
        MASTER,
        "",
    ),
    broker(
        "extend_ttl_max_times",
        "managedLedgerCacheEvictionExtendTTLOfEntriesWithRemainingExpectedReadsMaxTimes",
        MASTER,
        "applied only when changed at run time (dynamic configuration); at start-up the broker uses the default 5",
    ),
    broker(
        "extend_ttl_of_recently_accessed",
        "managedLedgerCacheEvictionExtendTTLOfRecentlyAccessed",
        MASTER,
        "applied only when changed at run time (dynamic configuration); at start-up the broker uses the default true",
    ),
    broker(
        "continue_caching_after_last_active_cursor_leaves_ms",
        "managedLedgerContinueCachingAddedEntriesAfterLastActiveCursorLeavesMillis",
        MASTER,
        "read into the factory config but never handed to the managed ledgers: as shipped the window is 0 (see apply_continue_caching_window)",
    ),
    broker(
        "eviction_by_mark_deleted_position",
        "cacheEvictionByMarkDeletedPosition",
        BOTH,
        "only without cacheEvictionByExpectedReadCount",
    ),
    broker("copy_entries", "managedLedgerCacheCopyEntries", BOTH, ""),
    lab("strategy", "the cache design to simulate"),
    lab("segment_count", "PIP-174's ring (PR #15955, not merged); 0 sizes it as that PR does"),
    lab(
        "recv_buffer_min_bytes",
        "the broker's Netty receive buffers; PIP-430 proposed brokerAdaptiveRecvByteBufAllocator* keys that were never added",
    ),
    lab("recv_buffer_initial_bytes", "as recv_buffer_min_bytes"),
    lab("recv_buffer_max_bytes", "as recv_buffer_min_bytes"),
    lab("storage_read_buffer_bytes", "BookKeeper's read buffers, for the memory model"),
    lab("storage_read_latency_ms", "simulated storage read time"),
    lab("cursor_epochs", "PIP-269 (proposed, not merged)"),
    broker(
        "min_backlog_cursors_for_caching",
        "managedLedgerMinimumBacklogCursorsForCaching",
        BOTH,
        "only without cacheEvictionByExpectedReadCount",
    ),
    broker(
        "min_backlog_entries_for_caching",
        "managedLedgerMinimumBacklogEntriesForCaching",
        BOTH,
        "only without cacheEvictionByExpectedReadCount",
    ),
    broker(
        "max_backlog_between_cursors_for_caching",
        "managedLedgerMaxBacklogBetweenCursorsForCaching",
        BOTH,
        "only without cacheEvictionByExpectedReadCount",
    ),
    broker(
        "cursor_backlogged_threshold",
        "managedLedgerCursorBackloggedThreshold",
        BOTH,
        "only without cacheEvictionByExpectedReadCount",
    ),
    Setting {
        name: "backlog_check_interval_ms",
        source: Source::Broker {
            key: "statsUpdateFrequencyInSecs",
            read_by: BOTH,
            scale: 1000,
        },
        note: "the stats task that re-checks backlogged cursors",
    },
    lab(
        "apply_continue_caching_window",
        "ours: None applies the window in the library and not in the lab (Pulsar as shipped)",
    ),
    lab(
        "exact_cursor_counts",
        "ours: None counts right in the library and as Pulsar's container does (its drift included) in the lab",
    ),
    lab(
        "expected_read_on_every_redelivery",
        "ours: Pulsar adds an expected read only for a Key_Shared hold-back",
    ),
    lab(
        "memory_model",
        "the lab's model of the buffers cached slices retain; off: peak_retained_bytes is not measured (null), hit ratios unchanged",
    ),
    Setting {
        name: "max_reads_in_flight_bytes",
        source: Source::Broker {
            key: "managedLedgerMaxReadsInFlightSizeInMB",
            read_by: BOTH,
            scale: 1 << 20,
        },
        note: "0 turns it off; unset, master limits to 15% of direct memory (at least dispatcherMaxReadSizeBytes), 4.0 to nothing (0); the lab's reads wait only with storage_read_latency_ms",
    },
    broker(
        "reads_in_flight_acquire_timeout_ms",
        "managedLedgerMaxReadsInFlightPermitsAcquireTimeoutMillis",
        BOTH,
        "a read that waited this long fails; the dispatcher reads again after dispatcherReadFailureBackoffInitialTimeInMs",
    ),
    broker(
        "reads_in_flight_acquire_queue_size",
        "managedLedgerMaxReadsInFlightPermitsAcquireQueueSize",
        BOTH,
        "a read that finds this many waiting fails at once",
    ),
];

/// The setting a `broker.conf` key sets, and the factor from its unit to ours.
pub fn by_broker_key(key: &str) -> Option<(&'static str, u64)> {
    SETTINGS.iter().find_map(|s| match s.source {
        Source::Broker { key: k, scale, .. } if k == key => Some((s.name, scale)),
        _ => None,
    })
}

pub fn of(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// `broker.conf` keys that look like cache settings but that no Pulsar reads, and what to use.
pub const KEYS_PULSAR_DOES_NOT_HAVE: [(&str, &str); 4] = [
    (
        "managedLedgerCacheEvictionTriggerThresholdPercent",
        "the trigger is fixed at 0.98; set eviction_trigger_threshold to study other values",
    ),
    (
        "brokerAdaptiveRecvByteBufAllocatorMinimumSize",
        "set recv_buffer_min_bytes to study it",
    ),
    (
        "brokerAdaptiveRecvByteBufAllocatorInitialSize",
        "set recv_buffer_initial_bytes to study it",
    ),
    (
        "brokerAdaptiveRecvByteBufAllocatorMaximumSize",
        "set recv_buffer_max_bytes to study it",
    ),
];
