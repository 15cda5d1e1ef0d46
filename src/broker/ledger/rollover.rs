//! When a ledger is closed and the next one started: one rule for the library's managed ledger and
//! the workload generator.

/// Pulsar's ledger rollover (`ManagedLedgerImpl.currentLedgerIsFull`, asked as each entry is
/// added; when it says full, that entry is the ledger's last and the next ledger is created as
/// soon as the close completes). A ledger is full once it holds `max_entries` entries or
/// `max_bytes` bytes, or is `max_age_ms` old, and in every case only once it is older than
/// `min_age_ms` (broker.conf: `managedLedgerMaxEntriesPerLedger` 50000,
/// `managedLedgerMaxSizePerLedgerMbytes` 2048, `managedLedgerMaxLedgerRolloverTimeMinutes` 240,
/// `managedLedgerMinLedgerRolloverTimeMinutes` 10).
///
/// A `max_bytes` or `max_age_ms` of 0 is no limit (Pulsar would find every ledger full at once),
/// and a `min_age_ms` of 0 no minimum (as Pulsar's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rollover {
    pub max_entries: u64,
    pub max_bytes: u64,
    pub min_age_ms: u64,
    pub max_age_ms: u64,
}

/// Pulsar's defaults (`broker.conf`).
pub const MAX_ENTRIES: u64 = 50_000;
pub const MAX_BYTES: u64 = 2048 * 1024 * 1024;
pub const MIN_AGE_MS: u64 = 10 * 60 * 1000;
pub const MAX_AGE_MS: u64 = 240 * 60 * 1000;

impl Default for Rollover {
    fn default() -> Self {
        Rollover {
            max_entries: MAX_ENTRIES,
            max_bytes: MAX_BYTES,
            min_age_ms: MIN_AGE_MS,
            max_age_ms: MAX_AGE_MS,
        }
    }
}

impl Rollover {
    /// Whether a ledger holding `entries` entries of `bytes` bytes, `age_ms` after it was created,
    /// is full: the entry that brought it there is its last.
    pub fn is_full(&self, entries: u64, bytes: u64, age_ms: u64) -> bool {
        let quota = entries >= self.max_entries || (self.max_bytes > 0 && bytes >= self.max_bytes);
        let aged = self.max_age_ms > 0 && age_ms >= self.max_age_ms;
        (quota || aged) && (self.min_age_ms == 0 || age_ms > self.min_age_ms)
    }
}

/// The ledger taking appends, as far as rolling over goes: when it was created, what it holds,
/// and whether the last entry added found it full. Pulsar creates the next ledger as soon as a
/// full one is closed, so the next ledger's age counts from that entry; the next append goes to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenLedger {
    created_us: u64,
    entries: u64,
    bytes: u64,
    full: bool,
}

impl OpenLedger {
    /// A ledger created at `now_us`; `closed` says the next append starts a new one (a broker
    /// opening a managed ledger starts a new ledger, the ones before it closed).
    pub fn new(now_us: u64, closed: bool) -> Self {
        OpenLedger {
            created_us: now_us,
            entries: 0,
            bytes: 0,
            full: closed,
        }
    }

    /// Whether the next append starts a new ledger.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Entries in the ledger taking appends (0 right after a full one: the next one is empty).
    pub fn entries(&self) -> u64 {
        if self.full {
            0
        } else {
            self.entries
        }
    }

    /// An entry of `bytes` was appended at `now_us`: to a new ledger if the one before was full.
    /// Asks `rule` whether the ledger is full now.
    pub fn added(&mut self, rule: &Rollover, bytes: u64, now_us: u64) {
        if self.full {
            *self = OpenLedger::new(self.created_us, false);
        }
        self.entries += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        let age_ms = now_us.saturating_sub(self.created_us) / 1000;
        if rule.is_full(self.entries, self.bytes, age_ms) {
            self.full = true;
            self.created_us = now_us;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_rolls_only_after_the_minimum_time() {
        let r = Rollover::default();
        assert!(!r.is_full(MAX_ENTRIES, 0, MIN_AGE_MS));
        assert!(r.is_full(MAX_ENTRIES, 0, MIN_AGE_MS + 1));
        assert!(!r.is_full(MAX_ENTRIES - 1, MAX_BYTES - 1, MAX_AGE_MS - 1));
        assert!(r.is_full(1, MAX_BYTES, MIN_AGE_MS + 1));
        assert!(r.is_full(1, 0, MAX_AGE_MS));
        let no_minimum = Rollover { min_age_ms: 0, ..r };
        assert!(no_minimum.is_full(MAX_ENTRIES, 0, 0));
        assert!(!no_minimum.is_full(MAX_ENTRIES - 1, 0, 0));
        let no_limits = Rollover {
            max_bytes: 0,
            max_age_ms: 0,
            ..no_minimum
        };
        assert!(!no_limits.is_full(1, u64::MAX, u64::MAX));
    }

    #[test]
    fn the_next_ledger_is_young_from_the_entry_that_filled_the_last() {
        let rule = Rollover {
            max_entries: 2,
            ..Rollover::default()
        };
        let mut l = OpenLedger::new(0, false);
        l.added(&rule, 1, 0);
        l.added(&rule, 1, 0);
        assert!(!l.is_full(), "younger than the minimum");
        let filled_at = (MIN_AGE_MS + 1) * 1000;
        l.added(&rule, 1, filled_at);
        assert!(l.is_full());
        assert_eq!(l.entries(), 0);
        l.added(&rule, 1, filled_at + 1);
        l.added(&rule, 1, filled_at + MIN_AGE_MS * 1000);
        assert!(
            !l.is_full(),
            "the new ledger is not older than the minimum yet"
        );
        assert_eq!(l.entries(), 2);
        l.added(&rule, 1, filled_at + MIN_AGE_MS * 1000 + 1000);
        assert!(l.is_full());
    }
}
