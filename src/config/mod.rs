//! Cache settings: Pulsar's broker settings for the entry cache, under snake_case names.

pub mod designs;
pub mod sources;

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// Which cache design to run. The entry cache manager implements the PIP-430 family; the other
/// designs exist for comparison in the replay lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Final PIP-430: FIFO removal queue with the expected-read and recently-accessed TTL extensions.
    Pip430,
    /// The same queue with both extensions off: plain FIFO with a TTL.
    Pip430Fifo,
    /// Pulsar before PIP-430: per-ledger caches, proportional size eviction.
    Legacy,
    /// PIP-174: one broker-wide ring of segments.
    Segmented,
    /// A global least-recently-used cache.
    Lru,
    /// The offline optimum (needs the future; replay only).
    Belady,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [
        Strategy::Pip430,
        Strategy::Pip430Fifo,
        Strategy::Legacy,
        Strategy::Segmented,
        Strategy::Lru,
        Strategy::Belady,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Pip430 => "pip430",
            Strategy::Pip430Fifo => "pip430-fifo",
            Strategy::Legacy => "legacy",
            Strategy::Segmented => "segmented",
            Strategy::Lru => "lru",
            Strategy::Belady => "belady",
        }
    }
}

impl FromStr for Strategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Strategy::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Strategy::ALL.iter().map(|s| s.name()).collect();
                Error::invalid(
                    "strategy",
                    format!("{s:?} is not one of {}", names.join(", ")),
                )
            })
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A setting's value as it arrives from a caller (Python keyword, broker.conf string).
#[derive(Debug, Clone, PartialEq)]
pub enum SettingValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// The deprecated `broker.conf` key that, when positive, sets the eviction interval instead of
/// `managedLedgerCacheEvictionIntervalMs`.
const EVICTION_FREQUENCY_KEY: &str = "managedLedgerCacheEvictionFrequency";

/// The `broker.conf` key of the cache size, whose default only the broker can compute.
pub const CACHE_SIZE_KEY: &str = "managedLedgerCacheSizeMB";

/// What reading a `broker.conf` did beyond the settings themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerConfReport {
    /// The broker keys applied.
    pub applied: Vec<String>,
    /// Keys a broker would not apply as written, each with why.
    pub warnings: Vec<String>,
    /// Keys written with an empty value: each keeps Pulsar's default.
    pub defaulted: Vec<String>,
    /// `managedLedgerCacheSizeMB` is empty or absent: the broker caches a fifth of its direct
    /// memory (applied only when the caller gave the direct memory).
    pub cache_size_is_brokers_default: bool,
}

/// Pulsar's default cache size for a JVM with `direct_memory_bytes` of direct memory: a fifth of
/// it in whole MiB, at least 64 MiB (`ServiceConfiguration.managedLedgerCacheSizeMB`).
pub fn default_cache_size_bytes(direct_memory_bytes: u64) -> u64 {
    ((direct_memory_bytes / 5) >> 20).max(64) << 20
}

/// The entry cache's settings. Build with [`CacheConfig::default`] and [`CacheConfig::set`], which
/// validates every value.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
    pub cache_size_bytes: u64,
    pub eviction_watermark: f64,
    pub eviction_trigger_threshold: f64,
    pub eviction_time_threshold_ms: u64,
    pub eviction_interval_ms: u64,
    pub eviction_by_expected_read_count: bool,
    pub extend_ttl_max_times: u32,
    pub extend_ttl_of_recently_accessed: bool,
    /// `None`: twice `eviction_time_threshold_ms`, as Pulsar documents it.
    pub continue_caching_after_last_active_cursor_leaves_ms: Option<u64>,
    pub eviction_by_mark_deleted_position: bool,
    pub copy_entries: bool,
    pub strategy: Strategy,
    /// Segments of the `segmented` strategy's ring (PIP-174); 0: as PR #15955 sizes it, one per
    /// GiB of cache and at least 2 (see [`CacheConfig::effective_segment_count`]).
    pub segment_count: u32,
    /// The broker's adaptive receive buffers (brokerAdaptiveRecvByteBufAllocator*Size) and
    /// BookKeeper's read buffers: what cached slices really retain when `copy_entries` is off.
    pub recv_buffer_min_bytes: u32,
    pub recv_buffer_initial_bytes: u32,
    pub recv_buffer_max_bytes: u32,
    pub storage_read_buffer_bytes: u32,
    /// Replay lab: how long a storage read takes, and whether reads carry cursor epochs (PIP-269)
    /// so that one completing after a seek is discarded instead of delivered out of order.
    pub storage_read_latency_ms: u64,
    pub cursor_epochs: bool,
    /// 4.0's caching of storage reads for cursors close together in backlog
    /// (managedLedgerMinimumBacklogCursorsForCaching, ...MinimumBacklogEntriesForCaching,
    /// ...MaxBacklogBetweenCursorsForCaching); off while the minimum number of cursors is 0.
    pub min_backlog_cursors_for_caching: u32,
    pub min_backlog_entries_for_caching: u64,
    pub max_backlog_between_cursors_for_caching: u64,
    /// A cursor with more entries than this to read is not active (4.0's
    /// managedLedgerCursorBackloggedThreshold; negative: never deactivated).
    pub cursor_backlogged_threshold: i64,
    /// How often the broker re-checks backlogged cursors (statsUpdateFrequencyInSecs).
    pub backlog_check_interval_ms: u64,
    /// Apply the continue-caching window after the last active cursor leaves. Pulsar computes the
    /// window but never hands it to its managed ledgers, so as shipped it is 0. `None`: applied in
    /// the library, not in the replay lab.
    pub apply_continue_caching_window: Option<bool>,
    /// Count the active cursors at or before a reader right (PIP-430's container as intended),
    /// or as Pulsar's `ActiveManagedCursorContainerImpl` does, whose counts drift after some
    /// moves. `None`: right in the library, Pulsar's in the replay lab.
    pub exact_cursor_counts: Option<bool>,
    /// Lab-only: every redelivery adds an expected read, not just Key_Shared hold-backs.
    pub expected_read_on_every_redelivery: bool,
    /// Replay lab: track the buffers cached slices retain (`peak_retained_bytes`). Off by
    /// default: the model costs the replay 1.5-1.7x its time (benches/replay_throughput.py) and
    /// never changes what a design caches, so a replay for hit ratios should not pay for it; off,
    /// `peak_retained_bytes` is null (not measured), and the reports say so. The command line's
    /// reports turn it on. Irrelevant with `copy_entries` (nothing to track).
    pub memory_model: bool,
    /// The reads-in-flight limiter (managedLedgerMaxReadsInFlightSizeInMB, in bytes; 0: off): a
    /// managed ledger's reads hold permits for their estimated size until their entries are
    /// released; see `cache::inflight_reads`.
    pub max_reads_in_flight_bytes: u64,
    /// How long a read waits for permits before it fails
    /// (managedLedgerMaxReadsInFlightPermitsAcquireTimeoutMillis; 0: no limit).
    pub reads_in_flight_acquire_timeout_ms: u64,
    /// How many reads may wait for permits; one more fails at once
    /// (managedLedgerMaxReadsInFlightPermitsAcquireQueueSize).
    pub reads_in_flight_acquire_queue_size: u32,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            // Pulsar's default managedLedgerCacheSizeMB is 1/5 of direct memory; a fixed 1 GiB here.
            cache_size_bytes: 1 << 30,
            eviction_watermark: 0.9,
            eviction_trigger_threshold: 0.98,
            eviction_time_threshold_ms: 1000,
            eviction_interval_ms: 10,
            eviction_by_expected_read_count: true,
            extend_ttl_max_times: 5,
            extend_ttl_of_recently_accessed: true,
            continue_caching_after_last_active_cursor_leaves_ms: None,
            eviction_by_mark_deleted_position: false,
            copy_entries: false,
            strategy: Strategy::Pip430,
            segment_count: 0,
            recv_buffer_min_bytes: 1024,
            recv_buffer_initial_bytes: 16384,
            recv_buffer_max_bytes: 1 << 20,
            storage_read_buffer_bytes: 64 << 10,
            storage_read_latency_ms: 0,
            cursor_epochs: true,
            min_backlog_cursors_for_caching: 0,
            min_backlog_entries_for_caching: 1000,
            max_backlog_between_cursors_for_caching: 1000,
            cursor_backlogged_threshold: 1000,
            backlog_check_interval_ms: 60_000,
            apply_continue_caching_window: None,
            exact_cursor_counts: None,
            expected_read_on_every_redelivery: false,
            memory_model: false,
            max_reads_in_flight_bytes: DEFAULT_MAX_READS_IN_FLIGHT_BYTES,
            reads_in_flight_acquire_timeout_ms: 60_000,
            reads_in_flight_acquire_queue_size: 50_000,
        }
    }
}

/// Pulsar master's default limit when `managedLedgerMaxReadsInFlightSizeInMB` is unset is 15% of
/// the JVM's direct memory; the default cache size here (1 GiB) is a broker's with 5 GiB of it
/// (a fifth), whose 15% is 768 MiB.
pub const DEFAULT_MAX_READS_IN_FLIGHT_BYTES: u64 = 768 << 20;

/// The `broker.conf` key of the reads-in-flight limit, whose default only the broker can compute.
pub const MAX_READS_IN_FLIGHT_KEY: &str = "managedLedgerMaxReadsInFlightSizeInMB";

/// Names accepted by [`CacheConfig::set`], in declaration order.
pub const SETTING_NAMES: [&str; 31] = [
    "cache_size_bytes",
    "eviction_watermark",
    "eviction_trigger_threshold",
    "eviction_time_threshold_ms",
    "eviction_interval_ms",
    "eviction_by_expected_read_count",
    "extend_ttl_max_times",
    "extend_ttl_of_recently_accessed",
    "continue_caching_after_last_active_cursor_leaves_ms",
    "eviction_by_mark_deleted_position",
    "copy_entries",
    "strategy",
    "segment_count",
    "recv_buffer_min_bytes",
    "recv_buffer_initial_bytes",
    "recv_buffer_max_bytes",
    "storage_read_buffer_bytes",
    "storage_read_latency_ms",
    "cursor_epochs",
    "min_backlog_cursors_for_caching",
    "min_backlog_entries_for_caching",
    "max_backlog_between_cursors_for_caching",
    "cursor_backlogged_threshold",
    "backlog_check_interval_ms",
    "apply_continue_caching_window",
    "exact_cursor_counts",
    "expected_read_on_every_redelivery",
    "memory_model",
    "max_reads_in_flight_bytes",
    "reads_in_flight_acquire_timeout_ms",
    "reads_in_flight_acquire_queue_size",
];

impl CacheConfig {
    /// Sets one setting by name, validating the value and its relation to the others. On error
    /// nothing changes.
    pub fn set(&mut self, key: &str, value: SettingValue) -> Result<()> {
        let mut next = self.clone();
        next.assign(key, value)?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Sets several settings at once: each value is checked, then the relations between all of
    /// them, so the order they come in does not matter. On error nothing changes.
    pub fn set_all<'a>(
        &mut self,
        settings: impl IntoIterator<Item = (&'a str, SettingValue)>,
    ) -> Result<()> {
        let mut next = self.clone();
        for (key, value) in settings {
            next.assign(key, value)?;
        }
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Sets one setting, checking only the value itself; `next` is unchanged on error.
    fn assign(&mut self, key: &str, value: SettingValue) -> Result<()> {
        let next = self;
        let name = SETTING_NAMES
            .iter()
            .copied()
            .find(|n| *n == key)
            .ok_or_else(|| Error::UnknownSetting {
                key: key.to_string(),
                hint: closest_name(key),
            })?;
        match name {
            "cache_size_bytes" => next.cache_size_bytes = non_negative(name, &value)?,
            "eviction_watermark" => next.eviction_watermark = fraction(name, &value)?,
            "eviction_trigger_threshold" => {
                next.eviction_trigger_threshold = fraction(name, &value)?
            }
            "eviction_time_threshold_ms" => {
                next.eviction_time_threshold_ms = non_negative(name, &value)?
            }
            "eviction_interval_ms" => {
                let v = non_negative(name, &value)?;
                if v == 0 {
                    return Err(Error::invalid("eviction_interval_ms", "must be at least 1"));
                }
                next.eviction_interval_ms = v;
            }
            "eviction_by_expected_read_count" => {
                next.eviction_by_expected_read_count = boolean(name, &value)?
            }
            "extend_ttl_max_times" => {
                let v = non_negative(name, &value)?;
                next.extend_ttl_max_times = u32::try_from(v)
                    .ok()
                    .filter(|v| *v <= u16::MAX as u32)
                    .ok_or_else(|| {
                        Error::invalid("extend_ttl_max_times", format!("{v} is above {}", u16::MAX))
                    })?;
            }
            "extend_ttl_of_recently_accessed" => {
                next.extend_ttl_of_recently_accessed = boolean(name, &value)?
            }
            "continue_caching_after_last_active_cursor_leaves_ms" => {
                next.continue_caching_after_last_active_cursor_leaves_ms = match value {
                    SettingValue::None => None,
                    ref v => Some(non_negative(name, v)?),
                }
            }
            "eviction_by_mark_deleted_position" => {
                next.eviction_by_mark_deleted_position = boolean(name, &value)?
            }
            "copy_entries" => next.copy_entries = boolean(name, &value)?,
            "strategy" => match &value {
                SettingValue::Str(s) => next.strategy = s.parse()?,
                other => {
                    return Err(Error::invalid(
                        "strategy",
                        format!("expected a string, got {other:?}"),
                    ))
                }
            },
            "recv_buffer_min_bytes"
            | "recv_buffer_initial_bytes"
            | "recv_buffer_max_bytes"
            | "storage_read_buffer_bytes" => {
                let v = non_negative(name, &value)?;
                if !(16..=1 << 30).contains(&v) {
                    return Err(Error::invalid(
                        name,
                        format!("must be in [16, 2^30] bytes, got {v}"),
                    ));
                }
                let v = v as u32;
                match name {
                    "recv_buffer_min_bytes" => next.recv_buffer_min_bytes = v,
                    "recv_buffer_initial_bytes" => next.recv_buffer_initial_bytes = v,
                    "recv_buffer_max_bytes" => next.recv_buffer_max_bytes = v,
                    _ => next.storage_read_buffer_bytes = v,
                }
            }
            "storage_read_latency_ms" => next.storage_read_latency_ms = non_negative(name, &value)?,
            "cursor_epochs" => next.cursor_epochs = boolean(name, &value)?,
            "memory_model" => next.memory_model = boolean(name, &value)?,
            "max_reads_in_flight_bytes" => {
                next.max_reads_in_flight_bytes = non_negative(name, &value)?
            }
            "reads_in_flight_acquire_timeout_ms" => {
                next.reads_in_flight_acquire_timeout_ms = non_negative(name, &value)?
            }
            "reads_in_flight_acquire_queue_size" => {
                let v = non_negative(name, &value)?;
                // A Java int in Pulsar.
                next.reads_in_flight_acquire_queue_size = u32::try_from(v)
                    .ok()
                    .filter(|v| *v <= i32::MAX as u32)
                    .ok_or_else(|| Error::invalid(name, format!("{v} is above {}", i32::MAX)))?;
            }
            "min_backlog_cursors_for_caching" => {
                let v = non_negative(name, &value)?;
                next.min_backlog_cursors_for_caching = u32::try_from(v)
                    .map_err(|_| Error::invalid(name, format!("{v} is above {}", u32::MAX)))?;
            }
            "min_backlog_entries_for_caching" => {
                next.min_backlog_entries_for_caching = non_negative(name, &value)?
            }
            "max_backlog_between_cursors_for_caching" => {
                next.max_backlog_between_cursors_for_caching = non_negative(name, &value)?
            }
            "cursor_backlogged_threshold" => match value {
                SettingValue::Int(i) => next.cursor_backlogged_threshold = i,
                ref other => {
                    return Err(Error::invalid(
                        name,
                        format!("expected an integer, got {}", describe(other)),
                    ))
                }
            },
            "backlog_check_interval_ms" => {
                let v = non_negative(name, &value)?;
                if v == 0 {
                    return Err(Error::invalid(name, "must be at least 1"));
                }
                next.backlog_check_interval_ms = v;
            }
            "apply_continue_caching_window" => {
                next.apply_continue_caching_window = match value {
                    SettingValue::None => None,
                    ref v => Some(boolean(name, v)?),
                }
            }
            "exact_cursor_counts" => {
                next.exact_cursor_counts = match value {
                    SettingValue::None => None,
                    ref v => Some(boolean(name, v)?),
                }
            }
            "expected_read_on_every_redelivery" => {
                next.expected_read_on_every_redelivery = boolean(name, &value)?
            }
            "segment_count" => {
                let v = non_negative(name, &value)?;
                if v > 1 << 16 {
                    return Err(Error::invalid(
                        "segment_count",
                        format!("must be in [0, 65536] (0: one per GiB, at least 2), got {v}"),
                    ));
                }
                next.segment_count = v as u32;
            }
            _ => unreachable!("every name in SETTING_NAMES is handled"),
        }
        Ok(())
    }

    /// Checks relations between settings.
    pub fn validate(&self) -> Result<()> {
        if !(self.recv_buffer_min_bytes <= self.recv_buffer_initial_bytes
            && self.recv_buffer_initial_bytes <= self.recv_buffer_max_bytes)
        {
            return Err(Error::invalid(
                "recv_buffer_initial_bytes",
                "receive buffer sizes must satisfy min <= initial <= max",
            ));
        }
        if self.eviction_watermark > self.eviction_trigger_threshold {
            return Err(Error::invalid(
                "eviction_watermark",
                format!(
                    "{} is above eviction_trigger_threshold {}; eviction would free nothing",
                    self.eviction_watermark, self.eviction_trigger_threshold
                ),
            ));
        }
        Ok(())
    }

    /// Reads Pulsar `broker.conf` entries (key, raw string value) as a broker would apply them;
    /// unrelated keys are ignored. Keys no Pulsar reads, and the extend-TTL keys a broker applies
    /// only when changed at run time, are not applied (the latter are with
    /// `extend_ttl_at_startup`); each such key, and a key Pulsar reads but never applies, gets a
    /// warning saying so.
    ///
    /// A key written with an empty value keeps Pulsar's default, as a broker's configuration loader
    /// does (`FieldParser.update` skips blank values). The cache size's default is a fifth of the
    /// JVM's direct memory, at least 64 MiB (`ServiceConfiguration.managedLedgerCacheSizeMB`):
    /// with `direct_memory_bytes` it is computed from it; without, the lab's default stays and a
    /// warning says so, and [`BrokerConfReport::cache_size_is_brokers_default`] tells the caller.
    pub fn from_broker_conf<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
        extend_ttl_at_startup: bool,
        direct_memory_bytes: Option<u64>,
    ) -> Result<(Self, BrokerConfReport)> {
        let mut config = CacheConfig::default();
        let mut report = BrokerConfReport {
            cache_size_is_brokers_default: true,
            ..BrokerConfReport::default()
        };
        let mut eviction_frequency = None;
        let mut cache_size_blank = false;
        let mut reads_in_flight_given = false;
        for (key, raw) in entries {
            let key = key.trim();
            if raw.trim().is_empty() {
                if key == CACHE_SIZE_KEY {
                    cache_size_blank = true;
                }
                if sources::by_broker_key(key).is_some() || key == EVICTION_FREQUENCY_KEY {
                    report.defaulted.push(key.to_string());
                }
                continue;
            }
            if key == EVICTION_FREQUENCY_KEY {
                let raw = raw.trim();
                let f: f64 = raw
                    .parse()
                    .ok()
                    .filter(|f: &f64| f.is_finite())
                    .ok_or_else(|| {
                        Error::invalid(
                            "eviction_interval_ms",
                            format!(
                                "{EVICTION_FREQUENCY_KEY}={raw}: not a number (passes a second)"
                            ),
                        )
                    })?;
                eviction_frequency = Some(f);
                continue;
            }
            if let Some((_, hint)) = sources::KEYS_PULSAR_DOES_NOT_HAVE
                .iter()
                .find(|(k, _)| *k == key)
            {
                report.warnings.push(format!(
                    "{key}: no Pulsar release reads this key, so a broker ignores it and so does \
                     the lab ({hint})"
                ));
                continue;
            }
            let Some((name, scale)) = sources::by_broker_key(key) else {
                continue;
            };
            let note = sources::of(name).map_or("", |s| s.note);
            match name {
                "extend_ttl_max_times" | "extend_ttl_of_recently_accessed"
                    if !extend_ttl_at_startup =>
                {
                    report.warnings.push(format!(
                        "{key}: ignored, as a broker does at start-up ({note}); pass \
                         extend_ttl_at_startup=True to apply it"
                    ));
                    continue;
                }
                "continue_caching_after_last_active_cursor_leaves_ms" => {
                    report.warnings.push(format!(
                        "{key}: {note}; the lab applies it only with apply_continue_caching_window=True"
                    ));
                }
                _ => {}
            }
            let raw = raw.trim();
            let value = parse_conf_value(name, key, raw, scale)?;
            config.assign(name, value).map_err(|e| match e {
                Error::InvalidArgument { reason, .. } => {
                    Error::invalid(name, format!("{key}={raw}: {reason}"))
                }
                other => other,
            })?;
            if name == "cache_size_bytes" {
                report.cache_size_is_brokers_default = false;
            }
            if name == "max_reads_in_flight_bytes" {
                reads_in_flight_given = true;
                let limit = config.max_reads_in_flight_bytes;
                if limit > 0 && limit < DISPATCHER_MAX_READ_SIZE_BYTES {
                    // ManagedLedgerClientFactory logs the same.
                    report.warnings.push(format!(
                        "{key}={raw}: below dispatcherMaxReadSizeBytes (5 MiB), so one read can                          wait for permits that never come free until it gets the whole limit; a                          broker warns of it"
                    ));
                }
            }
            report.applied.push(key.to_string());
        }
        if report.cache_size_is_brokers_default {
            match direct_memory_bytes {
                Some(direct) => {
                    config.cache_size_bytes = default_cache_size_bytes(direct);
                    report.applied.push(CACHE_SIZE_KEY.to_string());
                }
                None if cache_size_blank => report.warnings.push(format!(
                    "{CACHE_SIZE_KEY} is empty: a broker then caches up to a fifth of its JVM's \
                     direct memory (at least 64 MiB), which only the broker knows; the lab uses \
                     {} MiB: give the direct memory (-XX:MaxDirectMemorySize, or \
                     jvm_memory_direct_bytes_max in the broker's /metrics) or the cache size",
                    config.cache_size_bytes >> 20
                )),
                None => {}
            }
        }
        if let (false, Some(direct)) = (reads_in_flight_given, direct_memory_bytes) {
            // Master's default (`ManagedLedgerClientFactory`); 4.0's is 0 (off).
            config.max_reads_in_flight_bytes = default_max_reads_in_flight_bytes(direct);
            report.applied.push(MAX_READS_IN_FLIGHT_KEY.to_string());
        }
        // `ServiceConfiguration.getManagedLedgerCacheEvictionIntervalMs`: the deprecated frequency,
        // when positive, sets the interval (within 0.001..1000 passes a second); otherwise the
        // interval is capped at 1,000,000 ms.
        match eviction_frequency.filter(|f| *f > 0.0) {
            Some(f) => {
                let ms = (1000.0 / f.clamp(0.001, 1000.0)) as u64;
                config.eviction_interval_ms = ms;
                report.applied.push(EVICTION_FREQUENCY_KEY.to_string());
                report.warnings.push(format!(
                    "{EVICTION_FREQUENCY_KEY}: deprecated, but a broker still takes the eviction \
                     interval from it when it is positive: {ms} ms, whatever \
                     managedLedgerCacheEvictionIntervalMs says"
                ));
            }
            None => config.eviction_interval_ms = config.eviction_interval_ms.min(1_000_000),
        }
        // Relations are checked once all keys are in, so the order of lines does not matter.
        config.validate()?;
        Ok((config, report))
    }

    /// Reads a setting by name.
    pub fn get(&self, key: &str) -> Option<SettingValue> {
        Some(match key {
            "cache_size_bytes" => SettingValue::Int(self.cache_size_bytes as i64),
            "eviction_watermark" => SettingValue::Float(self.eviction_watermark),
            "eviction_trigger_threshold" => SettingValue::Float(self.eviction_trigger_threshold),
            "eviction_time_threshold_ms" => {
                SettingValue::Int(self.eviction_time_threshold_ms as i64)
            }
            "eviction_interval_ms" => SettingValue::Int(self.eviction_interval_ms as i64),
            "eviction_by_expected_read_count" => {
                SettingValue::Bool(self.eviction_by_expected_read_count)
            }
            "extend_ttl_max_times" => SettingValue::Int(self.extend_ttl_max_times as i64),
            "extend_ttl_of_recently_accessed" => {
                SettingValue::Bool(self.extend_ttl_of_recently_accessed)
            }
            "continue_caching_after_last_active_cursor_leaves_ms" => {
                match self.continue_caching_after_last_active_cursor_leaves_ms {
                    Some(v) => SettingValue::Int(v as i64),
                    None => SettingValue::None,
                }
            }
            "eviction_by_mark_deleted_position" => {
                SettingValue::Bool(self.eviction_by_mark_deleted_position)
            }
            "copy_entries" => SettingValue::Bool(self.copy_entries),
            "strategy" => SettingValue::Str(self.strategy.name().to_string()),
            "segment_count" => SettingValue::Int(self.segment_count as i64),
            "recv_buffer_min_bytes" => SettingValue::Int(self.recv_buffer_min_bytes as i64),
            "recv_buffer_initial_bytes" => SettingValue::Int(self.recv_buffer_initial_bytes as i64),
            "recv_buffer_max_bytes" => SettingValue::Int(self.recv_buffer_max_bytes as i64),
            "storage_read_buffer_bytes" => SettingValue::Int(self.storage_read_buffer_bytes as i64),
            "storage_read_latency_ms" => SettingValue::Int(self.storage_read_latency_ms as i64),
            "cursor_epochs" => SettingValue::Bool(self.cursor_epochs),
            "min_backlog_cursors_for_caching" => {
                SettingValue::Int(self.min_backlog_cursors_for_caching as i64)
            }
            "min_backlog_entries_for_caching" => {
                SettingValue::Int(self.min_backlog_entries_for_caching as i64)
            }
            "max_backlog_between_cursors_for_caching" => {
                SettingValue::Int(self.max_backlog_between_cursors_for_caching as i64)
            }
            "cursor_backlogged_threshold" => SettingValue::Int(self.cursor_backlogged_threshold),
            "backlog_check_interval_ms" => SettingValue::Int(self.backlog_check_interval_ms as i64),
            "apply_continue_caching_window" => match self.apply_continue_caching_window {
                Some(b) => SettingValue::Bool(b),
                None => SettingValue::None,
            },
            "exact_cursor_counts" => match self.exact_cursor_counts {
                Some(b) => SettingValue::Bool(b),
                None => SettingValue::None,
            },
            "expected_read_on_every_redelivery" => {
                SettingValue::Bool(self.expected_read_on_every_redelivery)
            }
            "memory_model" => SettingValue::Bool(self.memory_model),
            "max_reads_in_flight_bytes" => SettingValue::Int(self.max_reads_in_flight_bytes as i64),
            "reads_in_flight_acquire_timeout_ms" => {
                SettingValue::Int(self.reads_in_flight_acquire_timeout_ms as i64)
            }
            "reads_in_flight_acquire_queue_size" => {
                SettingValue::Int(self.reads_in_flight_acquire_queue_size as i64)
            }
            _ => return None,
        })
    }

    /// The size above which an insert triggers a size pass.
    pub fn trigger_bytes(&self) -> u64 {
        (self.cache_size_bytes as f64 * self.eviction_trigger_threshold) as u64
    }

    /// The size a size pass frees down to.
    pub fn watermark_bytes(&self) -> u64 {
        (self.cache_size_bytes as f64 * self.eviction_watermark) as u64
    }

    pub fn ttl_ns(&self) -> u64 {
        self.eviction_time_threshold_ms.saturating_mul(1_000_000)
    }

    /// How many times an entry that still expects reads may have its TTL extended; 0 when the
    /// expected-read extension is off (by setting or by the `pip430-fifo` strategy).
    pub fn effective_max_requeues(&self) -> u32 {
        if self.eviction_by_expected_read_count && self.strategy != Strategy::Pip430Fifo {
            self.extend_ttl_max_times
        } else {
            0
        }
    }

    pub fn effective_extend_recently_accessed(&self) -> bool {
        self.extend_ttl_of_recently_accessed && self.strategy != Strategy::Pip430Fifo
    }

    /// The `segmented` ring's segments: the setting, or PIP-174's sizing (one per GiB, at least 2).
    pub fn effective_segment_count(&self) -> u32 {
        match self.segment_count {
            0 => u32::try_from((self.cache_size_bytes >> 30).max(2))
                .unwrap_or(u32::MAX)
                .min(1 << 16),
            n => n,
        }
    }

    pub fn continue_caching_window_ms(&self) -> u64 {
        self.continue_caching_after_last_active_cursor_leaves_ms
            .unwrap_or(self.eviction_time_threshold_ms.saturating_mul(2))
    }
}

fn non_negative(name: &'static str, v: &SettingValue) -> Result<u64> {
    match v {
        SettingValue::Int(i) if *i >= 0 => Ok(*i as u64),
        SettingValue::Int(i) => Err(Error::invalid(name, format!("must be >= 0, got {i}"))),
        other => Err(Error::invalid(
            name,
            format!("expected an integer, got {}", describe(other)),
        )),
    }
}

fn fraction(name: &'static str, v: &SettingValue) -> Result<f64> {
    let f = match v {
        SettingValue::Float(f) => *f,
        SettingValue::Int(i) => *i as f64,
        other => {
            return Err(Error::invalid(
                name,
                format!("expected a number, got {}", describe(other)),
            ))
        }
    };
    if f.is_finite() && f > 0.0 && f <= 1.0 {
        Ok(f)
    } else {
        Err(Error::invalid(name, format!("must be in (0, 1], got {f}")))
    }
}

fn boolean(name: &'static str, v: &SettingValue) -> Result<bool> {
    match v {
        SettingValue::Bool(b) => Ok(*b),
        other => Err(Error::invalid(
            name,
            format!("expected a bool, got {}", describe(other)),
        )),
    }
}

fn describe(v: &SettingValue) -> String {
    match v {
        SettingValue::None => "None".into(),
        SettingValue::Bool(b) => format!("bool {b}"),
        SettingValue::Int(i) => format!("int {i}"),
        SettingValue::Float(f) => format!("float {f}"),
        SettingValue::Str(s) => format!("string {s:?}"),
    }
}

/// A `broker.conf` value (not blank) as the setting's type, parsed as Java parses the field (an
/// `int` key takes no unit: `4g` stops a broker too). Errors name the key and the value.
fn parse_conf_value(name: &'static str, key: &str, raw: &str, scale: u64) -> Result<SettingValue> {
    let fail = |what: &str| Error::invalid(name, format!("{key}={raw}: {what}"));
    let unit = if scale == 1 << 20 { " of MiB" } else { "" };
    Ok(match CacheConfig::default().get(name) {
        Some(SettingValue::Bool(_)) => match raw.to_ascii_lowercase().as_str() {
            "true" => SettingValue::Bool(true),
            "false" => SettingValue::Bool(false),
            _ => return Err(fail("not true or false")),
        },
        Some(SettingValue::Float(_)) => SettingValue::Float(
            raw.parse()
                .ok()
                .filter(|f: &f64| f.is_finite())
                .ok_or_else(|| fail("not a number"))?,
        ),
        // Integers, and the optional integer (None by default).
        _ => {
            let v: i64 = raw
                .parse()
                .map_err(|_| fail(&format!("not a whole number{unit}")))?;
            SettingValue::Int(
                v.checked_mul(scale as i64)
                    .ok_or_else(|| fail("too large"))?,
            )
        }
    })
}

fn closest_name(key: &str) -> Option<String> {
    // A broker.conf key names its setting exactly; its unit may differ (MiB for the size).
    if let Some((name, scale)) = sources::by_broker_key(key) {
        return Some(match scale {
            1 => name.to_string(),
            s => format!("{name}, in bytes: {key} x {s}"),
        });
    }
    let key_l = key.to_ascii_lowercase().replace('-', "_");
    SETTING_NAMES
        .iter()
        .map(|n| (edit_distance(&key_l, n), n))
        .filter(|(d, n)| *d <= 3.max(n.len() / 4))
        .min()
        .map(|(_, n)| n.to_string())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_pulsar() {
        let c = CacheConfig::default();
        assert_eq!(c.eviction_watermark, 0.9);
        assert_eq!(c.eviction_trigger_threshold, 0.98);
        assert_eq!(c.eviction_time_threshold_ms, 1000);
        assert_eq!(c.extend_ttl_max_times, 5);
        assert_eq!(c.continue_caching_window_ms(), 2000);
        for name in SETTING_NAMES {
            assert!(c.get(name).is_some(), "{name}");
        }
    }

    #[test]
    fn rejects_bad_values_and_leaves_config_intact() {
        let mut c = CacheConfig::default();
        assert!(matches!(
            c.set("cache_size_bytes", SettingValue::Int(-1)),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(c
            .set("eviction_watermark", SettingValue::Float(1.5))
            .is_err());
        assert!(
            c.set("eviction_watermark", SettingValue::Float(0.99))
                .is_err(),
            "above trigger"
        );
        assert!(c.set("strategy", SettingValue::Str("fifo".into())).is_err());
        let err = c.set("cache_size_byte", SettingValue::Int(1)).unwrap_err();
        assert!(err.to_string().contains("cache_size_bytes"), "{err}");
        assert_eq!(c, CacheConfig::default());
    }

    #[test]
    fn pip430_fifo_turns_both_extensions_off() {
        let mut c = CacheConfig::default();
        assert_eq!(c.effective_max_requeues(), 5);
        c.set("strategy", SettingValue::Str("pip430-fifo".into()))
            .unwrap();
        assert_eq!(c.effective_max_requeues(), 0);
        assert!(!c.effective_extend_recently_accessed());
    }

    #[test]
    fn reads_broker_conf_keys() {
        let (c, report) = CacheConfig::from_broker_conf(
            [
                ("managedLedgerCacheSizeMB", "64"),
                ("cacheEvictionByExpectedReadCount", "false"),
                ("managedLedgerCacheEvictionWatermark", "0.5"),
                ("brokerServicePort", "6650"),
                ("statsUpdateFrequencyInSecs", "30"),
            ],
            false,
            None,
        )
        .unwrap();
        assert_eq!(c.cache_size_bytes, 64 << 20);
        assert!(!c.eviction_by_expected_read_count);
        assert_eq!(c.eviction_watermark, 0.5);
        assert_eq!(c.backlog_check_interval_ms, 30_000);
        assert_eq!(report.applied.len(), 4);
        assert!(report.warnings.is_empty());
        assert!(
            CacheConfig::from_broker_conf([("managedLedgerCacheSizeMB", "lots")], false, None)
                .is_err()
        );
    }

    #[test]
    fn a_broker_key_suggests_its_setting() {
        let mut c = CacheConfig::default();
        let err =
            |c: &mut CacheConfig, k: &str| c.set(k, SettingValue::Int(1)).unwrap_err().to_string();
        assert_eq!(
            err(&mut c, "managedLedgerCacheSizeMB"),
            "unknown setting \"managedLedgerCacheSizeMB\" (did you mean \"cache_size_bytes, in bytes: \
             managedLedgerCacheSizeMB x 1048576\"?)"
        );
        assert!(
            err(&mut c, "managedLedgerCacheEvictionWatermark").contains("\"eviction_watermark\"")
        );
        assert!(err(&mut c, "cache_size_byte").contains("\"cache_size_bytes\""));
    }

    #[test]
    fn blank_values_keep_pulsars_defaults() {
        // Pulsar's stock broker.conf writes these keys empty.
        let keys = [
            ("managedLedgerCacheSizeMB", ""),
            ("managedLedgerCacheEvictionWatermark", " "),
            ("managedLedgerCacheEvictionFrequency", ""),
            ("cacheEvictionByMarkDeletedPosition", ""),
        ];
        let (c, report) = CacheConfig::from_broker_conf(keys, false, None).unwrap();
        assert_eq!(c, CacheConfig::default());
        assert_eq!(report.defaulted.len(), 4);
        assert!(report.cache_size_is_brokers_default);
        assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
        assert!(report.warnings[0].starts_with("managedLedgerCacheSizeMB is empty"));
        // With the direct memory, the cache is a fifth of it in whole MiB, at least 64 MiB.
        let (c, report) = CacheConfig::from_broker_conf(keys, false, Some(4 << 30)).unwrap();
        assert_eq!(c.cache_size_bytes, ((4 << 30) / 5) >> 20 << 20);
        assert!(report.warnings.is_empty());
        let (c, _) = CacheConfig::from_broker_conf([], false, Some(100 << 20)).unwrap();
        assert_eq!(c.cache_size_bytes, 64 << 20);
        // A size the file gives wins over the direct memory.
        let (c, report) = CacheConfig::from_broker_conf(
            [("managedLedgerCacheSizeMB", "512")],
            false,
            Some(1 << 40),
        )
        .unwrap();
        assert_eq!(c.cache_size_bytes, 512 << 20);
        assert!(!report.cache_size_is_brokers_default);
    }

    #[test]
    fn errors_name_the_key_and_the_value() {
        let err = |k: &'static str, v: &'static str| {
            CacheConfig::from_broker_conf([(k, v)], false, None)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("managedLedgerCacheSizeMB", "4g"),
            "invalid cache_size_bytes: managedLedgerCacheSizeMB=4g: not a whole number of MiB"
        );
        assert!(err("managedLedgerCacheEvictionWatermark", "NaN").contains("Watermark=NaN"));
        assert!(err("managedLedgerCacheEvictionWatermark", "1.5")
            .starts_with("invalid eviction_watermark: managedLedgerCacheEvictionWatermark=1.5: "));
        assert!(err("managedLedgerCacheSizeMB", "9223372036854775807").ends_with("too large"));
    }

    #[test]
    fn warns_on_keys_a_broker_does_not_apply() {
        let keys = [
            ("managedLedgerCacheEvictionTriggerThresholdPercent", "0.5"),
            ("brokerAdaptiveRecvByteBufAllocatorMaximumSize", "4096"),
            (
                "managedLedgerCacheEvictionExtendTTLOfRecentlyAccessed",
                "false",
            ),
            (
                "managedLedgerContinueCachingAddedEntriesAfterLastActiveCursorLeavesMillis",
                "500",
            ),
        ];
        let (c, report) = CacheConfig::from_broker_conf(keys, false, None).unwrap();
        assert_eq!(
            c.eviction_trigger_threshold, 0.98,
            "not a Pulsar key: not applied"
        );
        assert_eq!(c.recv_buffer_max_bytes, 1 << 20);
        assert!(c.extend_ttl_of_recently_accessed, "not applied at start-up");
        assert_eq!(
            c.continue_caching_after_last_active_cursor_leaves_ms,
            Some(500)
        );
        assert_eq!(report.warnings.len(), 4, "{:?}", report.warnings);
        assert!(report.warnings[0].starts_with("managedLedgerCacheEvictionTriggerThresholdPercent"));
        let (c, report) = CacheConfig::from_broker_conf(keys, true, None).unwrap();
        assert!(!c.extend_ttl_of_recently_accessed);
        assert_eq!(report.warnings.len(), 3);
    }

    #[test]
    fn every_setting_says_where_it_comes_from() {
        for (name, s) in SETTING_NAMES.iter().zip(sources::SETTINGS.iter()) {
            assert_eq!(*name, s.name);
        }
        assert_eq!(SETTING_NAMES.len(), sources::SETTINGS.len());
    }
}

/// Pulsar's default in master when `managedLedgerMaxReadsInFlightSizeInMB` is unset: 15% of the
/// JVM's direct memory, at least `dispatcherMaxReadSizeBytes` (5 MiB) so that one read always fits
/// (`ManagedLedgerClientFactory`).
pub fn default_max_reads_in_flight_bytes(direct_memory_bytes: u64) -> u64 {
    ((direct_memory_bytes as f64 * 0.15) as u64).max(DISPATCHER_MAX_READ_SIZE_BYTES)
}

/// `dispatcherMaxReadSizeBytes`'s default: the most one dispatcher read asks for.
pub const DISPATCHER_MAX_READ_SIZE_BYTES: u64 = 5 << 20;
