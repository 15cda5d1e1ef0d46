//! Cache settings: Pulsar's broker settings for the entry cache, under snake_case names.

mod broker;
pub mod designs;
mod lab;
pub mod sources;

pub use broker::{
    default_cache_size_bytes, default_max_reads_in_flight_bytes, BrokerConfReport, CACHE_SIZE_KEY,
    DEFAULT_MAX_READS_IN_FLIGHT_BYTES, DISPATCHER_MAX_READ_SIZE_BYTES, MAX_READS_IN_FLIGHT_KEY,
};

use crate::error::{Error, Result};
use sources::Source;
use std::fmt;
use std::str::FromStr;

/// Which cache design to run: an entry of the registry of designs ([`designs::DESIGNS`]), where
/// each design is declared once (its name, label, read rule, role). The entry cache manager runs
/// the PIP-430 family; the other designs exist for comparison in the replay lab. The designs are
/// named by the constants next to their entries (`Strategy::Pip430`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Strategy(u8);

impl Strategy {
    /// Every design, in the registry's order.
    pub const ALL: [Strategy; designs::DESIGNS.len()] = {
        let mut all = [Strategy(0); designs::DESIGNS.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = Strategy(i as u8);
            i += 1;
        }
        all
    };

    /// The name `CacheConfig(strategy=...)` takes.
    pub fn name(self) -> &'static str {
        self.design().name
    }

    /// This design's entry in the registry.
    pub fn design(self) -> &'static designs::Design {
        &designs::DESIGNS[usize::from(self.0)]
    }

    /// The name an operator knows this design by.
    pub fn label(self) -> &'static str {
        self.design().label
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
        let name = SETTING_NAMES
            .iter()
            .copied()
            .find(|n| *n == key)
            .ok_or_else(|| Error::UnknownSetting {
                key: key.to_string(),
                hint: closest_name(key),
            })?;
        match sources::of(name).map(|s| s.source) {
            Some(Source::Broker { .. }) => self.assign_broker(name, value),
            _ => self.assign_lab(name, value),
        }
    }

    /// Checks relations between settings.
    pub fn validate(&self) -> Result<()> {
        self.validate_lab()?;
        // The one relation across the layers: the broker's watermark below the lab's trigger.
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

    /// Reads a setting by name.
    pub fn get(&self, key: &str) -> Option<SettingValue> {
        match sources::of(key)?.source {
            Source::Broker { .. } => self.get_broker(key),
            Source::Lab => self.get_lab(key),
        }
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

/// A name handed to the wrong layer's setter (the layers split [`SETTING_NAMES`] between them).
fn not_of_layer(name: &str, layer: &str) -> Error {
    Error::UnknownSetting {
        key: name.to_string(),
        hint: Some(format!("{name} is not one of the {layer}'s settings")),
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

    /// Each setting is set and read by its own layer's file only (`broker.rs` for those with a
    /// `broker.conf` key, `lab.rs` for the rest), and round-trips through it.
    #[test]
    fn each_layer_sets_and_reads_its_own_settings() {
        let defaults = CacheConfig::default();
        for s in &sources::SETTINGS {
            let value = defaults.get(s.name).expect("every setting reads back");
            let broker = s.layer() == "broker";
            let mut c = CacheConfig::default();
            assert_eq!(
                c.assign_broker(s.name, value.clone()).is_ok(),
                broker,
                "{}",
                s.name
            );
            assert_eq!(
                c.assign_lab(s.name, value.clone()).is_ok(),
                !broker,
                "{}",
                s.name
            );
            assert_eq!(c.get_broker(s.name).is_some(), broker, "{}", s.name);
            assert_eq!(c.get_lab(s.name).is_some(), !broker, "{}", s.name);
            assert_eq!(
                c, defaults,
                "{}: a default set again changes nothing",
                s.name
            );
        }
        let lab: Vec<_> = sources::of_layer("lab").map(|s| s.name).collect();
        for name in [
            "strategy",
            "segment_count",
            "memory_model",
            "exact_cursor_counts",
        ] {
            assert!(lab.contains(&name), "{name}");
        }
        assert_eq!(
            lab.len() + sources::of_layer("broker").count(),
            SETTING_NAMES.len()
        );
    }

    #[test]
    fn every_setting_says_where_it_comes_from() {
        for (name, s) in SETTING_NAMES.iter().zip(sources::SETTINGS.iter()) {
            assert_eq!(*name, s.name);
        }
        assert_eq!(SETTING_NAMES.len(), sources::SETTINGS.len());
    }
}
