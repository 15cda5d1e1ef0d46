//! The broker's settings: those with a `broker.conf` key (they configure a Pulsar broker, and the
//! library's manager): their values, Pulsar's defaults that only a broker can compute, and the
//! reading of a `broker.conf`. Which settings these are is [`super::sources::SETTINGS`]'s call.

use super::{
    boolean, describe, fraction, non_negative, not_of_layer, sources, CacheConfig, SettingValue,
};
use crate::error::{Error, Result};

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

/// Pulsar master's default limit when `managedLedgerMaxReadsInFlightSizeInMB` is unset is 15% of
/// the JVM's direct memory; the default cache size here (1 GiB) is a broker's with 5 GiB of it
/// (a fifth), whose 15% is 768 MiB.
pub const DEFAULT_MAX_READS_IN_FLIGHT_BYTES: u64 = 768 << 20;

/// The `broker.conf` key of the reads-in-flight limit, whose default only the broker can compute.
pub const MAX_READS_IN_FLIGHT_KEY: &str = "managedLedgerMaxReadsInFlightSizeInMB";

/// Pulsar's default in master when `managedLedgerMaxReadsInFlightSizeInMB` is unset: 15% of the
/// JVM's direct memory, at least `dispatcherMaxReadSizeBytes` (5 MiB) so that one read always fits
/// (`ManagedLedgerClientFactory`).
pub fn default_max_reads_in_flight_bytes(direct_memory_bytes: u64) -> u64 {
    ((direct_memory_bytes as f64 * 0.15) as u64).max(DISPATCHER_MAX_READ_SIZE_BYTES)
}

/// `dispatcherMaxReadSizeBytes`'s default: the most one dispatcher read asks for.
pub const DISPATCHER_MAX_READ_SIZE_BYTES: u64 = 5 << 20;

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

impl CacheConfig {
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

    /// Sets one of the broker's settings, checking only the value itself (`name` is one of them).
    pub(super) fn assign_broker(&mut self, name: &'static str, value: SettingValue) -> Result<()> {
        match name {
            "cache_size_bytes" => self.cache_size_bytes = non_negative(name, &value)?,
            "eviction_watermark" => self.eviction_watermark = fraction(name, &value)?,
            "eviction_time_threshold_ms" => {
                self.eviction_time_threshold_ms = non_negative(name, &value)?
            }
            "eviction_interval_ms" => {
                let v = non_negative(name, &value)?;
                if v == 0 {
                    return Err(Error::invalid("eviction_interval_ms", "must be at least 1"));
                }
                self.eviction_interval_ms = v;
            }
            "eviction_by_expected_read_count" => {
                self.eviction_by_expected_read_count = boolean(name, &value)?
            }
            "extend_ttl_max_times" => {
                let v = non_negative(name, &value)?;
                self.extend_ttl_max_times = u32::try_from(v)
                    .ok()
                    .filter(|v| u16::try_from(*v).is_ok())
                    .ok_or_else(|| {
                        Error::invalid("extend_ttl_max_times", format!("{v} is above {}", u16::MAX))
                    })?;
            }
            "extend_ttl_of_recently_accessed" => {
                self.extend_ttl_of_recently_accessed = boolean(name, &value)?
            }
            "continue_caching_after_last_active_cursor_leaves_ms" => {
                self.continue_caching_after_last_active_cursor_leaves_ms = match value {
                    SettingValue::None => None,
                    ref v => Some(non_negative(name, v)?),
                }
            }
            "eviction_by_mark_deleted_position" => {
                self.eviction_by_mark_deleted_position = boolean(name, &value)?
            }
            "copy_entries" => self.copy_entries = boolean(name, &value)?,
            "max_reads_in_flight_bytes" => {
                self.max_reads_in_flight_bytes = non_negative(name, &value)?
            }
            "reads_in_flight_acquire_timeout_ms" => {
                self.reads_in_flight_acquire_timeout_ms = non_negative(name, &value)?
            }
            "reads_in_flight_acquire_queue_size" => {
                let v = non_negative(name, &value)?;
                // A Java int in Pulsar.
                self.reads_in_flight_acquire_queue_size = u32::try_from(v)
                    .ok()
                    .filter(|v| i32::try_from(*v).is_ok())
                    .ok_or_else(|| Error::invalid(name, format!("{v} is above {}", i32::MAX)))?;
            }
            "min_backlog_cursors_for_caching" => {
                let v = non_negative(name, &value)?;
                self.min_backlog_cursors_for_caching = u32::try_from(v)
                    .map_err(|_| Error::invalid(name, format!("{v} is above {}", u32::MAX)))?;
            }
            "min_backlog_entries_for_caching" => {
                self.min_backlog_entries_for_caching = non_negative(name, &value)?
            }
            "max_backlog_between_cursors_for_caching" => {
                self.max_backlog_between_cursors_for_caching = non_negative(name, &value)?
            }
            "cursor_backlogged_threshold" => match value {
                SettingValue::Int(i) => self.cursor_backlogged_threshold = i,
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
                self.backlog_check_interval_ms = v;
            }
            _ => return Err(not_of_layer(name, "broker")),
        }
        Ok(())
    }

    /// Reads one of the broker's settings.
    pub(super) fn get_broker(&self, key: &str) -> Option<SettingValue> {
        Some(match key {
            "cache_size_bytes" => SettingValue::Int(self.cache_size_bytes as i64),
            "eviction_watermark" => SettingValue::Float(self.eviction_watermark),
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
}
