//! Settings changed while the manager runs: those a broker applies through its dynamic-config
//! listeners (`BrokerService.registerConfigurationListener`), with their effect there.

use super::{released_after, EntryCacheManager};
use crate::cache::entry::Payload;
use crate::cache::manager::Removed;
use crate::config::{sources, SettingValue};
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

/// The settings [`EntryCacheManager::update_config`] changes: the cache settings Pulsar master
/// declares `dynamic = true` and listens to. Every other setting is read once, when the broker
/// starts (`ManagedLedgerClientFactory` builds the factory's config from them).
pub const LIVE_SETTINGS: [&str; 5] = [
    // managedLedgerCacheSizeMB: RangeEntryCacheManagerImpl.updateCacheSizeAndThreshold
    "cache_size_bytes",
    // managedLedgerCacheEvictionWatermark: updateCacheEvictionWatermark
    "eviction_watermark",
    // managedLedgerCacheEvictionTimeThresholdMillis: ManagedLedgerFactoryImpl
    // .updateCacheEvictionTimeThreshold
    "eviction_time_threshold_ms",
    // ...ExtendTTLOfEntriesWithRemainingExpectedReadsMaxTimes: RangeCacheRemovalQueue
    // .setMaxRequeueCountWhenHasExpectedReads
    "extend_ttl_max_times",
    // ...ExtendTTLOfRecentlyAccessed: RangeCacheRemovalQueue.setExtendTTLOfRecentlyAccessed
    "extend_ttl_of_recently_accessed",
];

impl EntryCacheManager {
    /// Changes settings while the manager runs, as a broker's dynamic configuration does: only
    /// those in [`LIVE_SETTINGS`]; any other is refused (naming it: a broker reads it at start-up
    /// only, so it takes a new manager). The changes are checked together, against each other and
    /// the settings in force; on error nothing changes.
    ///
    /// Their effect is Pulsar's: the next passes use them (the removal queue's extensions, the
    /// time threshold); a cache size or watermark that leaves the cache above its trigger
    /// threshold evicts down to the new watermark at once: on the background evictor, woken as
    /// the next periodic task would be (Pulsar's runs every `managedLedgerCacheEvictionIntervalMs`),
    /// or without one, in this call, as an insert's size pass runs. A cache made while the size was
    /// 0 stays disabled (Pulsar handed it an `EntryCacheDisabled`); caches made after a change
    /// from 0 cache.
    pub fn update_config<'a>(
        &self,
        changes: impl IntoIterator<Item = (&'a str, SettingValue)>,
    ) -> Result<Removed> {
        released_after(|released| self.update_config_releasing(changes, released))
    }

    /// [`Self::update_config`], handing the evicted payloads to `released` (see
    /// [`Self::evict_expired_releasing`]).
    pub fn update_config_releasing<'a>(
        &self,
        changes: impl IntoIterator<Item = (&'a str, SettingValue)>,
        released: &mut Vec<Payload>,
    ) -> Result<Removed> {
        let changes: Vec<(&str, SettingValue)> = changes.into_iter().collect();
        let shared = &*self.shared;
        {
            // Between passes: a pass reads the settings once, at its start.
            let _between_passes = shared.queue.lock();
            let mut current = shared.current.write();
            let mut next = current.clone();
            for (key, value) in &changes {
                if !LIVE_SETTINGS.contains(key) {
                    // An unknown name gets its own error (with the closest name).
                    next.set(key, value.clone())?;
                    return Err(needs_restart(key));
                }
            }
            next.set_all(changes.iter().map(|(k, v)| (*k, v.clone())))?;
            shared
                .trigger_bytes
                .store(next.trigger_bytes(), Ordering::Relaxed);
            *current = next;
        }
        Ok(match &shared.wake_evictor {
            Some((flag, cv)) => {
                *flag.lock() = true;
                cv.notify_one();
                (0, 0)
            }
            None => shared.evict_to_watermark_if_over_threshold(&mut shared.queue.lock(), released),
        })
    }
}

fn needs_restart(key: &str) -> Error {
    let broker_key = sources::SETTINGS
        .iter()
        .find(|s| s.name == key)
        .and_then(|s| match s.source {
            sources::Source::Broker { key, .. } => Some(key),
            sources::Source::Lab => None,
        });
    let why = match broker_key {
        Some(k) => format!("a broker reads {k} only at start-up"),
        None => "it is fixed when the manager is made".to_string(),
    };
    Error::Unsupported(format!(
        "setting {key:?} cannot change while the manager runs ({why}): it needs a restart, a new \
         EntryCacheManager with it; the settings that change live are {}",
        LIVE_SETTINGS.join(", ")
    ))
}
