//! A consumer's acknowledgements on their way to the broker, as the Java client's
//! `PersistentAcknowledgmentsGroupingTracker` (master) sends them: an individual ack waits in
//! `pendingIndividualAcks` until a flush, which a timer runs every `acknowledgementsGroupTimeMicros`
//! from the consumer's creation, and an ack that brings the pending ones to
//! `maxAcknowledgmentGroupSize` runs at once. A group time of 0 sends every ack at once.
//!
//! Why it matters to a cache: a redelivery request (`redeliverUnacknowledgedMessages()`) does not
//! flush, so the rewind it causes re-reads the entries acknowledged since the last flush; the
//! client drops them as duplicates (`isDuplicate`) and gives their permits back.

use crate::broker::positions::acked::AckedRanges;
use crate::cache::position::Position;

/// `ConsumerConfigurationData.acknowledgementsGroupTimeMicros`' default: 100 ms.
pub const DEFAULT_GROUP_TIME_MS: u64 = 100;
/// `ConsumerConfigurationData.maxAcknowledgmentGroupSize`' default.
pub const DEFAULT_MAX_GROUP_SIZE: u64 = 1000;

/// The client's grouping settings.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grouping {
    /// Microseconds between the timer's flushes; 0 sends each ack at once.
    pub group_us: u64,
    /// Pending acks that make an ack flush at once.
    pub max_size: u64,
}

/// Entries are positions of ledger 0 (entry indices), as the generator's subscriptions keep them.
#[derive(Debug, Default)]
pub(super) struct PendingAcks {
    /// When the flush timer started (the consumer's creation).
    started_us: u64,
    /// The timer's firings accounted for: the pending acks are all younger than the last.
    ticks: u64,
    /// The entries acknowledged last, when they follow one another (`first..=last`): a consumer
    /// that keeps up adds one range a run. With a group time of 0 they are at the broker already,
    /// only not merged into its ranges yet.
    run: Option<(u64, u64)>,
    /// Older runs not sent yet.
    older: AckedRanges,
    /// Entries not sent yet (`pendingIndividualAcks.size()`).
    count: u64,
}

impl PendingAcks {
    /// A new consumer: nothing pending, its timer starting at `now_us`.
    pub(super) fn start(&mut self, now_us: u64) {
        *self = PendingAcks {
            started_us: now_us,
            ..PendingAcks::default()
        };
    }

    /// The consumer acknowledges entry `idx` at `at_us` (not before any earlier call's time):
    /// what the timer sent before then reaches `broker`, then the ack joins the pending ones,
    /// all of which are sent if they reach the group size.
    pub(super) fn ack(&mut self, at_us: u64, idx: u64, g: Grouping, broker: &mut AckedRanges) {
        if g.group_us > 0 {
            self.send_if_timer_fired(at_us, g, broker);
        }
        match &mut self.run {
            Some((_, last)) if last.checked_add(1) == Some(idx) => *last = idx,
            run => {
                if let Some((first, last)) = run.replace((idx, idx)) {
                    let to = if g.group_us == 0 {
                        &mut *broker
                    } else {
                        &mut self.older
                    };
                    to.insert(0, first as i64, last as i64);
                }
            }
        }
        self.count = self.count.saturating_add(1);
        if g.group_us > 0 && self.count >= g.max_size {
            self.send(broker);
        }
    }

    /// Brings the broker's view up to `now_us` (not before any ack's time): with a group time of
    /// 0 everything is there; else what the timer has flushed by then.
    pub(super) fn sent_by(&mut self, now_us: u64, g: Grouping, broker: &mut AckedRanges) {
        if g.group_us == 0 {
            self.send(broker);
        } else {
            self.send_if_timer_fired(now_us, g, broker);
        }
    }

    /// A flush whose time has come: every pending ack is older than the timer's last firing
    /// before `now_us` if that firing is new (an ack made after it would have counted it).
    fn send_if_timer_fired(&mut self, now_us: u64, g: Grouping, broker: &mut AckedRanges) {
        let ticks = now_us.saturating_sub(self.started_us) / g.group_us;
        if ticks > self.ticks {
            self.ticks = ticks;
            self.send(broker);
        }
    }

    /// Flushes: every pending ack reaches `broker` (also what a closing consumer does).
    pub(super) fn send(&mut self, broker: &mut AckedRanges) {
        if let Some((first, last)) = self.run.take() {
            broker.insert(0, first as i64, last as i64);
        }
        for (_, first, last) in self.older.iter() {
            broker.insert(0, first, last);
        }
        self.older.clear();
        self.count = 0;
    }

    /// Forgets what is pending (a seek: its `flushAndClean` has no connection to send on).
    pub(super) fn clear(&mut self) {
        self.run = None;
        self.older.clear();
        self.count = 0;
    }

    /// Whether entry `idx` is acknowledged and not sent yet: a redelivered copy of it is a
    /// duplicate the client drops.
    pub(super) fn holds(&self, idx: u64, g: Grouping) -> bool {
        g.group_us > 0
            && (matches!(self.run, Some((first, last)) if (first..=last).contains(&idx))
                || i64::try_from(idx).is_ok_and(|e| self.older.contains(Position::new(0, e))))
    }

    /// The lowest entry acknowledged but not at the broker yet: the broker's mark-delete
    /// position stays before it.
    pub(super) fn lowest(&self, g: Grouping) -> Option<u64> {
        if g.group_us == 0 {
            return None;
        }
        let older = self.older.iter().next().map(|(_, first, _)| first as u64);
        self.run
            .map(|(first, _)| first)
            .into_iter()
            .chain(older)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Grouping = Grouping {
        group_us: 100_000,
        max_size: 4,
    };

    fn at_broker(b: &AckedRanges) -> Vec<(i64, i64)> {
        b.iter().map(|(_, f, l)| (f, l)).collect()
    }

    #[test]
    fn acks_wait_for_the_timer_then_go_together() {
        let (mut p, mut b) = (PendingAcks::default(), AckedRanges::default());
        p.start(50_000);
        p.ack(60_000, 1, G, &mut b);
        p.ack(149_999, 3, G, &mut b);
        assert!(b.is_empty(), "no flush before 150 ms");
        assert!(p.holds(1, G) && p.holds(3, G) && !p.holds(2, G));
        assert_eq!(p.lowest(G), Some(1));
        p.sent_by(150_000, G, &mut b);
        assert_eq!(at_broker(&b), [(1, 1), (3, 3)]);
        assert!(!p.holds(3, G));
        assert_eq!(p.lowest(G), None);
        // The firing at 250 ms sends what came before it, not what came after.
        p.ack(240_000, 4, G, &mut b);
        p.ack(260_000, 9, G, &mut b);
        assert_eq!(at_broker(&b), [(1, 1), (3, 4)]);
        assert!(p.holds(9, G));
        p.sent_by(340_000, G, &mut b);
        assert!(p.holds(9, G), "the next firing is at 350 ms");
    }

    #[test]
    fn the_group_size_sends_at_once() {
        let (mut p, mut b) = (PendingAcks::default(), AckedRanges::default());
        p.start(0);
        for idx in [10, 11, 20, 21] {
            p.ack(1_000, idx, G, &mut b);
        }
        assert_eq!(at_broker(&b), [(10, 11), (20, 21)]);
        assert!(!p.holds(21, G));
    }

    #[test]
    fn a_group_time_of_zero_sends_each_ack() {
        let g = Grouping {
            group_us: 0,
            max_size: 1000,
        };
        let (mut p, mut b) = (PendingAcks::default(), AckedRanges::default());
        p.ack(5, 7, g, &mut b);
        assert!(!p.holds(7, g));
        assert_eq!(p.lowest(g), None);
        p.sent_by(5, g, &mut b);
        assert_eq!(at_broker(&b), [(7, 7)]);
    }
}
