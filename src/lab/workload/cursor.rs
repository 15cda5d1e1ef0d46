//! A subscription as the broker keeps it: its cursor (read position, mark-delete position, what
//! was acknowledged on its own), its reads, and what comes and goes around it (connects, churn,
//! seeks, the once-a-second acknowledgements), whatever its dispatcher.

use super::consumer::Consumer;
use super::dispatch::Dispatcher;
use super::events::Row;
use super::generate::{Sim, Task};
use super::spec::SubscriptionType;
use super::topology::SubStart;
use crate::broker::positions::acked::{unacked_runs, AckedRanges};
use crate::broker::positions::layout::{Layout, LedgerInfo};
use crate::cache::position::Position;

pub(super) struct Sub {
    pub(super) cursor: u32,
    pub(super) kind: SubscriptionType,
    /// The cursor's read position (an entry index).
    pub(super) read_idx: u64,
    pub(super) active: bool,
    pub(super) consumers: Vec<Consumer>,
    /// Its dispatcher, and what that alone keeps.
    pub(super) dispatcher: Dispatcher,
    pub(super) scheduled: Option<u64>,
    pub(super) acked_upto: Option<u64>,
    /// A normal read parked at the end of the topic: (entries asked for, when the cursor looks
    /// for new entries again; after that, it is woken by the next entry).
    pub(super) waiting: Option<(u64, u64)>,
    /// The first unacknowledged entry when the last consumer left.
    pub(super) rewind_to: u64,
    /// Entries its consumers acknowledged on their own past the mark-delete position that the
    /// trace has (`individual_ack` rows): its reads pass over them. Entry indices as positions
    /// of ledger 0.
    pub(super) acked: AckedRanges,
    /// Acknowledged on their own (at the broker), not in the trace yet: written before the next
    /// rewind, or before a read that would reach them (acknowledgements a client sent after a
    /// rewind), the only times they change what a read reads.
    pub(super) pending_acks: AckedRanges,
    /// Whether it can ever rewind (its consumers come and go, or nacks rewind it), so that what
    /// its consumers acknowledge on their own is worth keeping for the trace.
    pub(super) rewinds: bool,
    /// Share of delivered messages negatively acknowledged.
    pub(super) redelivery_rate: f64,
    /// How the cursor starts.
    pub(super) start: SubStart,
    /// One of OMB's consumers, paused to build a backlog ([`BacklogTest`]).
    pub(super) pauses_for_backlog: bool,
    /// Its consumers process nothing (OMB's paused worker holds each message listener), so they
    /// free no permits and send no FLOW; the broker sends until their permits run out.
    pub(super) paused: bool,
    /// Messages its consumers processed (OMB's `messagesReceived`).
    pub(super) received: u64,
    /// Its cursor was opened (a subscription starting late opens at its start).
    pub(super) opened: bool,
    /// Its consumers lost their connection (an unload or a storm) and have not reconnected.
    pub(super) away: bool,
    /// When they reconnect, once planned (a `Reconnect` task at another time is stale).
    pub(super) reconnect_at: Option<u64>,
    /// The topic was unloaded since the cursor last opened: the next open starts it afresh, at
    /// its first unacknowledged entry, with what was acknowledged on its own.
    pub(super) forgotten: bool,
}

/// `RangeEntryCacheImpl.BOOKKEEPER_READ_OVERHEAD_PER_ENTRY`: the bytes a storage read costs per
/// entry beyond its payload, in Pulsar's estimate of how many entries a read's byte cap holds.
pub(super) const BOOKKEEPER_READ_OVERHEAD_PER_ENTRY: u64 = 64;

impl Sim {
    /// The first entry nobody has acknowledged: the oldest entry a consumer holds (in its receiver
    /// queue or negatively acknowledged) or in the replay queue, else the read position: the
    /// mark-delete position never passes an entry still to be acknowledged (`ManagedCursorImpl`
    /// moves it over the acknowledged prefix only).
    pub(super) fn first_unacked(&self, p: usize, s: usize) -> u64 {
        let sub = &self.parts[p].subs[s];
        let single = sub.kind.has_single_active_consumer();
        let grouping = self.grouping;
        sub.consumers
            .iter()
            .filter_map(|c| c.oldest_held(!single, grouping))
            .chain(sub.dispatcher.lowest_held())
            .min()
            .unwrap_or(sub.read_idx)
            .min(sub.read_idx)
    }

    /// The cursor reads again from `first`, the first unacknowledged entry (`ManagedCursorImpl
    /// .rewind`): the trace gets the acknowledgements the broker has by then (the mark-delete
    /// position, then what was acknowledged on its own past it), then the `rewind`.
    pub(super) fn rewind(&mut self, t: u64, p: usize, s: usize, first: u64) {
        self.write_acks(t, p, s, first);
        self.emit_cursor(t, p, s, "rewind", None);
        self.parts[p].subs[s].read_idx = first;
    }

    /// Writes the mark-delete position (the entry before `first`, the first unacknowledged one) if
    /// the trace is behind it; what it passes is acknowledged, whatever the trace has of it.
    pub(super) fn write_mark_delete(&mut self, t: u64, p: usize, s: usize, first: u64) {
        let Sub {
            consumers,
            pending_acks,
            acked,
            acked_upto,
            ..
        } = &mut self.parts[p].subs[s];
        for c in consumers.iter_mut() {
            c.acks.sent_by(t, self.grouping, pending_acks);
        }
        if first > 0 && acked_upto.is_none_or(|a| a < first - 1) {
            let before = acked_upto.replace(first - 1);
            let md = Position::new(0, first as i64 - 1);
            pending_acks.remove_through(md);
            acked.remove_through(md);
            self.emit_cursor(t, p, s, "ack", Some(first - 1));
            self.mark_delete_moved(t, p, s, before);
        }
    }

    /// Writes the mark-delete position ([`Sim::write_mark_delete`]) and the entries acknowledged on
    /// their own past it that the trace does not have yet ([`Sim::write_individual_acks`]).
    pub(super) fn write_acks(&mut self, t: u64, p: usize, s: usize, first: u64) {
        self.write_mark_delete(t, p, s, first);
        self.write_individual_acks(t, p, s);
    }

    /// Writes the entries the broker has as acknowledged on their own and the trace does not,
    /// one `individual_ack` row per run within a ledger.
    pub(super) fn write_individual_acks(&mut self, t: u64, p: usize, s: usize) {
        let pending_acks = &mut self.parts[p].subs[s].pending_acks;
        let runs: Vec<_> = pending_acks.iter().collect();
        pending_acks.clear();
        let cursor = self.parts[p].subs[s].cursor;
        for (_, lo, hi) in runs {
            self.parts[p].subs[s].acked.insert(0, lo, hi);
            let (mut lo, hi) = (lo as u64, hi as u64);
            while lo <= hi {
                let end = self.parts[p]
                    .ledgers
                    .ledger_end(lo)
                    .min(hi + 1)
                    .min(lo + i32::MAX as u64);
                let row = Row {
                    count: (end - lo) as i32,
                    ..Row::new("individual_ack", Some(cursor), Some(lo))
                };
                self.emit(t, p, row);
                lo = end;
            }
        }
    }

    /// Entries a read may ask for under `dispatcher_max_read_size_bytes`, estimated from the
    /// average entry size plus BookKeeper's read overhead per entry, as
    /// `EntryCountEstimator.estimateEntryCountByBytesSize` estimates.
    pub(super) fn read_cap(&self, p: usize) -> u64 {
        let part = &self.parts[p];
        if part.published == 0 || part.bytes_published == 0 {
            return u64::MAX;
        }
        let average = (part.bytes_published / part.published).max(1);
        (self.spec.dispatcher_max_read_size_bytes / (average + BOOKKEEPER_READ_OVERHEAD_PER_ENTRY))
            .max(1)
    }

    /// A normal read of `n` entries from the read position: the entries it reads, passing over
    /// those acknowledged on their own (as the trace's replay reads them, [`unacked_runs`]).
    pub(super) fn read_entries(&mut self, t: u64, p: usize, s: usize, n: u64) -> Vec<u64> {
        let first = self.parts[p].subs[s].read_idx;
        // Acknowledgements a client sent after a rewind, of entries the rewound cursor has yet to
        // reach: the read passes over them, so the trace gets them first.
        let sent_ahead = self.parts[p].subs[s]
            .pending_acks
            .last()
            .is_some_and(|(_, _, last)| last >= first as i64);
        if sent_ahead {
            self.write_individual_acks(t, p, s);
        }
        let cursor = self.parts[p].subs[s].cursor;
        let row = Row {
            count: n as i32,
            ..Row::new("read", Some(cursor), None)
        };
        self.emit(t, p, row);
        let published = self.parts[p].published;
        let sub = &mut self.parts[p].subs[s];
        if sub.acked.is_empty() {
            sub.read_idx += n;
            self.entries_read += n;
            return (first..first + n).collect();
        }
        // Entry indices as the positions of one ledger: which entries a read passes over does
        // not depend on where the ledgers end.
        let layout = Layout {
            ledgers: vec![LedgerInfo {
                id: 0,
                entries: published,
                bytes: 0,
            }],
        };
        let mut runs = Vec::new();
        let skip_to = unacked_runs(
            &sub.acked,
            Position::new(0, first as i64),
            n,
            &layout,
            &layout,
            &mut runs,
        );
        let read: Vec<u64> = runs
            .iter()
            .flat_map(|&(_, a, b)| a as u64..=b as u64)
            .collect();
        sub.read_idx = match (skip_to, read.last()) {
            (Some(to), _) => to.entry_id as u64,
            (None, Some(&last)) => last + 1,
            (None, None) => first,
        };
        self.entries_read += read.len() as u64;
        read
    }

    /// Parks a normal read at the end of the topic: the cursor looks again after
    /// `managed_ledger_new_entries_check_delay_in_millis`, then waits to be woken by an entry.
    pub(super) fn park(&mut self, t: u64, p: usize, s: usize, entries: u64) {
        let delay = (self.spec.managed_ledger_new_entries_check_delay_ms * 1000.0) as u64;
        self.parts[p].subs[s].waiting = Some((entries, t.saturating_add(delay)));
    }

    /// The parked read, when entries have come and the cursor has looked for them.
    pub(super) fn parked_read(&mut self, t: u64, p: usize, s: usize) -> Option<Vec<u64>> {
        let (asked, check_at) = self.parts[p].subs[s].waiting?;
        let available = self.parts[p].published - self.parts[p].subs[s].read_idx;
        if available == 0 {
            return None;
        }
        if t < check_at {
            self.schedule_dispatch(check_at, p, s);
            return None;
        }
        self.parts[p].subs[s].waiting = None;
        Some(self.read_entries(t, p, s, asked.min(available)))
    }

    /// (total permits, permits of the first consumer that has any), as Pulsar's multi-consumer
    /// dispatcher counts them.
    pub(super) fn permit_summary(sub: &Sub) -> (i64, i64) {
        let total = sub.consumers.iter().map(|c| c.permits).sum();
        let first = sub
            .consumers
            .iter()
            .map(|c| c.permits)
            .find(|&x| x > 0)
            .unwrap_or(0);
        (total, first)
    }

    pub(super) fn schedule_dispatch(&mut self, at: u64, p: usize, s: usize) {
        let sub = &mut self.parts[p].subs[s];
        if sub.scheduled.is_some_and(|x| x <= at) {
            return;
        }
        if at <= self.end_us {
            sub.scheduled = Some(at);
        }
        self.schedule(at, Task::Dispatch(p as u32, s as u32));
    }

    /// The subscription's consumers are created: their acknowledgement timers start.
    pub(super) fn start_consumers(&mut self, t: u64, p: usize, s: usize) {
        let sub = &mut self.parts[p].subs[s];
        sub.consumers.iter_mut().for_each(|c| c.acks.start(t));
    }

    /// The subscription's consumers connect: each sends FLOW for its whole receiver queue.
    pub(super) fn connect(&mut self, t: u64, p: usize, s: usize) {
        let permits = self.spec.receiver_queue_size as i64;
        let failover_delay = (self.spec.active_consumer_failover_delay_ms * 1000.0) as u64;
        let sub = &mut self.parts[p].subs[s];
        sub.active = true;
        sub.waiting = None;
        sub.consumers.iter_mut().for_each(|c| c.connect(t, permits));
        if let Dispatcher::Single(st) = &mut sub.dispatcher {
            st.resume_at = if sub.kind == SubscriptionType::Failover {
                t.saturating_add(failover_delay)
            } else {
                t
            };
        }
        self.schedule_dispatch(t, p, s);
    }

    /// The subscription's consumers close: they flush their acknowledgements, the cursor is
    /// closed and will rewind to the first unacknowledged entry, the replay queue is dropped.
    pub(super) fn close_consumers(&mut self, t: u64, p: usize, s: usize) {
        self.consume(t, p, s);
        // Closing consumers flush their acknowledgements.
        let Sub {
            consumers,
            pending_acks,
            ..
        } = &mut self.parts[p].subs[s];
        consumers.iter_mut().for_each(|c| c.acks.send(pending_acks));
        let first = self.first_unacked(p, s);
        self.emit_cursor(t, p, s, "close", None);
        let sub = &mut self.parts[p].subs[s];
        sub.active = false;
        sub.waiting = None;
        sub.rewind_to = first;
        sub.consumers.iter_mut().for_each(Consumer::close);
        // The last consumer left: the replay queue is dropped.
        sub.dispatcher.clear_replay();
    }

    /// A consumer joins a subscription without consumers: the cursor rewinds to the first
    /// unacknowledged entry (opens there afresh, after its topic moved) and the replay queue goes.
    pub(super) fn open_at_first_unacked(&mut self, t: u64, p: usize, s: usize) {
        let first = self.parts[p].subs[s].rewind_to;
        if self.parts[p].subs[s].forgotten {
            self.reopen(t, p, s, first);
        } else {
            self.emit_cursor(t, p, s, "open", None);
            self.rewind(t, p, s, first);
        }
        self.parts[p].subs[s].dispatcher.clear_replay();
    }

    pub(super) fn churn(&mut self, t: u64, p: usize, s: usize) {
        if self.parts[p].subs[s].active {
            self.close_consumers(t, p, s);
            // Saturating: a huge knob means "never" (past the end), not a time that wraps around.
            let back = t.saturating_add((self.spec.churn_downtime_seconds * 1e6) as u64);
            self.schedule(back, Task::Churn(p as u32, s as u32));
        } else {
            self.open_at_first_unacked(t, p, s);
            self.start_consumers(t, p, s);
            self.connect(t, p, s);
            let next = t.saturating_add(self.rng.exp(60e6 / self.spec.churn_per_minute) as u64);
            self.schedule(next, Task::Churn(p as u32, s as u32));
        }
    }

    pub(super) fn seek(&mut self, t: u64, p: usize, s: usize) {
        self.consume(t, p, s);
        let part = &self.parts[p];
        let back = (self.spec.seek_back_seconds * 1e6 / part.interval_us) as u64;
        let at = part
            .first_message(part.subs[s].read_idx)
            .saturating_sub(back);
        let to = part.entry_of_message(at).max(self.stored_floor(p, s));
        self.emit_cursor(t, p, s, "seek", Some(to));
        let sub = &mut self.parts[p].subs[s];
        sub.read_idx = to;
        sub.rewind_to = to;
        sub.acked_upto = to.checked_sub(1);
        sub.waiting = None;
        sub.dispatcher.clear_replay();
        // A reset forgets what was acknowledged on its own (`internalResetCursor`).
        sub.acked.clear();
        sub.pending_acks.clear();
        if let Some(nacked) = sub.dispatcher.nacked_mut() {
            nacked.clear();
        }
        // The acknowledgements the clients had not sent are dropped too: the reset disconnects
        // the consumers before it replies (`PersistentSubscription.resetCursor`), so the flush
        // at the reply (`flushAndClean`) has no connection to send them on.
        sub.consumers.iter_mut().for_each(|c| c.acks.clear());
        // The clients keep their waiting nacks. On Exclusive and Failover the timer still asks for
        // everything unacknowledged (a rewind). On Shared and Key_Shared the broker redelivers
        // only positions the reconnected consumer was sent and holds unacknowledged
        // (`Consumer.redeliverUnacknowledgedMessages`); they are forgotten here.
        if !sub.kind.has_single_active_consumer() {
            sub.consumers.iter_mut().for_each(|c| c.nacks.clear());
        }
        if sub.active {
            // A reset cursor disconnects the consumers, which come straight back.
            self.connect(t, p, s);
        }
        let next = t.saturating_add(self.rng.exp(60e6 / self.spec.seeks_per_minute) as u64);
        self.schedule(next, Task::Seek(p as u32, s as u32));
    }

    pub(super) fn ack(&mut self, t: u64, p: usize, s: usize) {
        if self.parts[p].subs[s].active {
            if self.consume(t, p, s) {
                self.schedule_dispatch(t, p, s);
            }
            let first = self.first_unacked(p, s);
            self.write_mark_delete(t, p, s, first);
        }
        self.schedule(t + 1_000_000, Task::Ack(p as u32, s as u32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingValue;
    use crate::lab::workload::spec::WorkloadSpec;

    /// A reset reconnects the consumers, whose clients keep their `NegativeAcksTracker`: on
    /// Exclusive its timer still rewinds the cursor when the nacks are due; on Shared the
    /// reconnected consumers hold none of those positions, so the broker would ignore them.
    #[test]
    fn waiting_nacks_outlive_a_reset_on_exclusive_only() {
        for (kind, kept) in [("Exclusive", true), ("Shared", false)] {
            let mut spec = WorkloadSpec::default();
            for (k, v) in [
                ("subscription_type", SettingValue::Str(kind.into())),
                ("redelivery_rate", SettingValue::Float(0.01)),
                ("producer_rate", SettingValue::Float(2000.0)),
                ("negative_ack_redelivery_delay_ms", SettingValue::Int(5000)),
                ("seeks_per_minute", SettingValue::Float(12.0)),
                ("test_duration_minutes", SettingValue::Float(1.0)),
            ] {
                spec.set(k, &v).unwrap();
            }
            let (mut sim, _) = Sim::new(&spec, 4, 0);
            let waiting = |sim: &Sim| -> usize {
                let sub = &sim.parts[0].subs[0];
                sub.consumers.iter().map(|c| c.nacks.len()).sum()
            };
            let mut seeks_with_nacks = 0;
            loop {
                let before = waiting(&sim);
                let rows = sim.out.len();
                let more = sim.step();
                if sim.out.op[rows..].contains(&"seek") && before > 0 {
                    seeks_with_nacks += 1;
                    assert_eq!(waiting(&sim) >= before, kept, "{kind}");
                }
                if !more {
                    break;
                }
            }
            assert!(seeks_with_nacks > 0, "{kind}");
        }
    }
}
