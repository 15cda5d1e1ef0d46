//! A consumer's negative acknowledgements waiting for their redelivery, as the Java client's
//! `NegativeAcksTracker` (master) keeps them: a nacked entry is due `negativeAckRedeliveryDelay`
//! after the nack, its due time rounded down to `2^negativeAckPrecisionBitCnt` ms; one timer per
//! consumer, started by a nack when none runs, redelivers everything due when it fires and is set
//! again for the earliest entry left.

use super::spec::WorkloadSpec;
use std::collections::BTreeMap;

/// The client's `MIN_NACK_DELAY_MS`: a shorter configured delay is raised to this.
pub const MIN_DELAY_MS: u64 = 100;
/// `ConsumerConfigurationData.negativeAckRedeliveryDelayMicros`' default: one minute.
pub const DEFAULT_DELAY_MS: u64 = 60_000;
/// `ConsumerConfigurationData.negativeAckPrecisionBitCnt`' default: due times in steps of 256 ms.
pub const PRECISION_BITS: u32 = 8;

#[derive(Debug, Default)]
pub(super) struct NegativeAcks {
    /// Entries by due time (milliseconds), in nack order within one.
    due: BTreeMap<u64, Vec<u64>>,
    /// When the timer fires (microseconds), if one runs.
    timer_us: Option<u64>,
}

impl NegativeAcks {
    /// Records a nack of entry `idx` made at `nacked_us` and learnt of at `now_us` (not before
    /// it), redelivered `delay_ms` later (already at least [`MIN_DELAY_MS`]). Returns when a timer
    /// must fire, if this nack started one: `delay_ms` after the nack, and not before `now_us`.
    pub(super) fn add(
        &mut self,
        nacked_us: u64,
        now_us: u64,
        idx: u64,
        delay_ms: u64,
    ) -> Option<u64> {
        let due_ms = (nacked_us / 1000).saturating_add(delay_ms) & (u64::MAX << PRECISION_BITS);
        self.due.entry(due_ms).or_default().push(idx);
        if self.timer_us.is_some() {
            return None;
        }
        let at = nacked_us
            .saturating_add(delay_ms.saturating_mul(1000))
            .max(now_us);
        self.timer_us = Some(at);
        Some(at)
    }

    /// Whether the timer set for `at_us` is still the one running (a cleared tracker's is not).
    pub(super) fn fires_at(&self, at_us: u64) -> bool {
        self.timer_us == Some(at_us)
    }

    /// The timer fires at `now_us`: takes every entry due by then, oldest due first, and returns
    /// them with when the timer fires next (for the earliest entry left), if anything is left.
    pub(super) fn fire(&mut self, now_us: u64) -> (Vec<u64>, Option<u64>) {
        let now_ms = now_us / 1000;
        let later = match now_ms.checked_add(1) {
            Some(next) => self.due.split_off(&next),
            None => BTreeMap::new(),
        };
        let taken = std::mem::replace(&mut self.due, later);
        // An entry due past the last representable microsecond is never redelivered.
        self.timer_us = self
            .due
            .first_key_value()
            .and_then(|(&due_ms, _)| due_ms.checked_mul(1000))
            .map(|due_us| due_us.max(now_us));
        (taken.into_values().flatten().collect(), self.timer_us)
    }

    /// Entries waiting.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.due.values().map(Vec::len).sum()
    }

    /// The lowest entry waiting, if any: it is not acknowledged yet.
    pub(super) fn lowest(&self) -> Option<u64> {
        self.due.values().flatten().copied().min()
    }

    /// The consumer closed: its waiting nacks are forgotten (a new consumer's broker state does
    /// not hold them, so the broker would ignore their redelivery).
    pub(super) fn clear(&mut self) {
        self.due.clear();
        self.timer_us = None;
    }
}

/// Share of entries of `n` messages nacked when each message is at `rate`: any of them nacks it
/// (the estimate's side of the draw a consumer makes as it processes an entry).
pub(super) fn entry_nacked(rate: f64, n: f64) -> f64 {
    1.0 - (1.0 - rate).powf(n)
}

impl WorkloadSpec {
    /// Share of the entries read whose nack is redelivered within the run: an entry of `n`
    /// messages is nacked if any of them is, and only the nacks older than the client's
    /// redelivery delay by the end of `seconds` are redelivered.
    pub(super) fn nacks_redelivered(&self, rate: f64, n: f64, seconds: f64) -> f64 {
        let nacked = entry_nacked(rate, n);
        if seconds <= 0.0 {
            return nacked;
        }
        let delay = self.nack_redelivery_delay_ms() as f64 / 1000.0;
        nacked * (1.0 - delay / seconds).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nack_is_due_its_delay_later_rounded_down_to_the_precision() {
        let mut n = NegativeAcks::default();
        // 1.3 s + 60 s = 61,300 ms, rounded down to a multiple of 256: 61,184 ms.
        assert_eq!(n.add(1_300_000, 1_300_000, 7, 60_000), Some(61_300_000));
        assert_eq!(n.lowest(), Some(7));
        // The timer fires at the first nack's time plus the delay (unrounded).
        assert!(n.fires_at(61_300_000));
        let (taken, next) = n.fire(61_300_000);
        assert_eq!((taken, next), (vec![7], None));
        assert_eq!(n.lowest(), None);
    }

    #[test]
    fn one_timer_runs_and_is_set_again_for_what_is_left() {
        let mut n = NegativeAcks::default();
        assert_eq!(n.add(0, 0, 1, 1_000), Some(1_000_000));
        // A later nack does not start a timer of its own.
        assert_eq!(n.add(500_000, 500_000, 2, 1_000), None);
        assert_eq!(n.add(900_000, 900_000, 3, 1_000), None);
        let (taken, next) = n.fire(1_000_000);
        // Entry 1 was due at 768 ms; 2 at 1,280 (1,500 rounded down); 3 at 1,792.
        assert_eq!((taken, next), (vec![1], Some(1_280_000)));
        assert!(n.fires_at(1_280_000) && !n.fires_at(1_000_000));
        assert_eq!(n.lowest(), Some(2));
        let (taken, next) = n.fire(1_280_000);
        assert_eq!((taken, next), (vec![2], Some(1_792_000)));
        let (taken, next) = n.fire(1_792_000);
        assert_eq!((taken, next), (vec![3], None));
    }

    #[test]
    fn nacks_due_together_are_redelivered_together_in_nack_order() {
        let mut n = NegativeAcks::default();
        n.add(0, 0, 9, 1_000);
        n.add(20_000, 20_000, 4, 1_000);
        // Both are due at 768 ms (1,000 and 1,020 rounded down to 256 ms steps).
        assert_eq!(n.fire(1_000_000), (vec![9, 4], None));
    }

    #[test]
    fn a_nack_learnt_of_late_is_due_from_when_it_was_made_and_its_timer_not_in_the_past() {
        let mut n = NegativeAcks::default();
        // Made at 0.9 s, learnt of at 1.2 s, 100 ms delay: due at 768 ms (1,000 rounded down),
        // the timer at 1.2 s rather than 1.0 s.
        assert_eq!(n.add(900_000, 1_200_000, 3, 100), Some(1_200_000));
        assert_eq!(n.fire(1_200_000), (vec![3], None));
    }

    #[test]
    fn a_cleared_tracker_forgets_its_nacks_and_its_timer() {
        let mut n = NegativeAcks::default();
        let at = n.add(0, 0, 5, 1_000).expect("a timer");
        n.clear();
        assert!(!n.fires_at(at));
        assert_eq!(n.lowest(), None);
        // The next nack starts a timer again.
        assert!(n.add(2_000_000, 2_000_000, 6, 1_000).is_some());
    }

    #[test]
    fn extreme_times_saturate_instead_of_wrapping_or_firing_forever() {
        let mut n = NegativeAcks::default();
        assert_eq!(
            n.add(u64::MAX - 5, u64::MAX - 5, 1, u64::MAX / 2),
            Some(u64::MAX)
        );
        // Due later than any time there is: nothing to take, and no timer at the same time again.
        assert_eq!(n.fire(u64::MAX), (vec![], None));
        assert_eq!(n.lowest(), Some(1));
    }
}
