//! Ledgers trimmed by retention: the generator writes a `delete` row for each ledger the broker
//! would delete, and the replay drops its entries from the cache
//! (`RangeEntryCacheImpl.invalidateAllEntries(ledgerId)`).
//!
//! Follows `ManagedLedgerImpl.internalTrimLedgers` (master and branch-4.0): the ledgers wholly
//! behind the slowest durable cursor's mark-delete position (every subscription here is durable;
//! without any, every closed ledger), oldest first, never the one taking appends, each deleted
//! while it has expired (`hasLedgerRetentionExpired`: older than `retention_time_minutes` since it
//! was closed, -1 never) or the managed ledger is over its size quota without it
//! (`isLedgerRetentionOverSizeQuota`: `retention_size_mb`, -1 never); the first ledger that is
//! neither stops the trim. With broker.conf's defaults (0 and 0) a ledger goes as soon as every
//! subscription has acknowledged it. A trim runs when a ledger is closed (`ledgerClosed`), when
//! the slowest mark-delete position moves and the moving cursor is in another ledger than the
//! slowest was (`onCursorMarkDeletePositionUpdated`), and every
//! `retention_check_interval_seconds` (`BrokerService.startConsumedLedgersMonitor`, first after
//! one interval). A subscription that opens later in the run (`start_seconds`, a catch-up reader)
//! holds every ledger from the start: it stands for one that already exists.

use super::events::Row;
use super::generate::{Sim, Task};
use crate::cache::position::Position;
use std::collections::VecDeque;

const MEGABYTE: u64 = 1024 * 1024;

/// Closed ledgers not deleted yet, in a run of ledgers alike: `count` ledgers from `first_id`,
/// each `entries_each` entries and `bytes_each` bytes, the first ending before entry
/// `first_end`, all closed at `closed_us`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Closed {
    pub(super) first_id: i64,
    pub(super) count: u64,
    pub(super) first_end: u64,
    pub(super) entries_each: u64,
    pub(super) bytes_each: u64,
    pub(super) closed_us: u64,
    /// Whether the trace has the ledgers (a `delete` row is written for them).
    pub(super) written: bool,
}

/// A partition's ledgers as retention sees them.
#[derive(Debug, Default)]
pub(super) struct Retention {
    pub(super) closed: VecDeque<Closed>,
    /// Bytes in the ledger taking appends.
    pub(super) open_bytes: u64,
    /// Bytes in the ledgers deleted.
    pub(super) deleted_bytes: u64,
}

impl Sim {
    /// Whether retention can ever delete a ledger (not both limits infinite).
    pub(super) fn retention_on(&self) -> bool {
        self.spec.retention_time_minutes >= 0.0 || self.spec.retention_size_mb >= 0.0
    }

    /// The periodic check's first tick, when it runs at all.
    pub(super) fn start_retention(&mut self) {
        let every = (self.spec.retention_check_interval_seconds * 1e6) as u64;
        if self.retention_on() && every > 0 {
            self.schedule(every, Task::Retention);
        }
    }

    /// `BrokerService.checkConsumedLedgers`: every partition is trimmed; the next tick follows.
    pub(super) fn retention_tick(&mut self, t: u64) {
        for p in 0..self.parts.len() {
            self.trim(t, p);
        }
        let every = (self.spec.retention_check_interval_seconds * 1e6) as u64;
        self.schedule(t.saturating_add(every), Task::Retention);
    }

    /// Whether no tick can delete anything until some other task runs: no closed ledger is
    /// behind every mark-delete position, so time passing changes nothing.
    pub(super) fn retention_is_quiet(&self) -> bool {
        (0..self.parts.len()).all(|p| {
            let slowest = self.slowest_held(p);
            self.parts[p]
                .retention
                .closed
                .front()
                .is_none_or(|c| c.first_end > slowest)
        })
    }

    /// An entry of `bytes` was added to partition `p` at `t`; if it filled its ledger, the ledger
    /// is closed (`ledgerClosed`) and a trim runs.
    pub(super) fn retention_added(&mut self, t: u64, p: usize, bytes: u64) {
        let on = self.retention_on();
        let part = &mut self.parts[p];
        part.retention.open_bytes = part.retention.open_bytes.saturating_add(bytes);
        if !part.ledgers.open.is_full() {
            return;
        }
        let first = *part.ledgers.starts.back().expect("a ledger");
        let bytes = std::mem::take(&mut part.retention.open_bytes);
        if !on {
            return;
        }
        let closed = Closed {
            first_id: part.ledgers.first_id + part.ledgers.starts.len() as i64 - 1,
            count: 1,
            first_end: part.published,
            entries_each: part.published - first,
            bytes_each: bytes,
            closed_us: t,
            written: true,
        };
        part.retention.closed.push_back(closed);
        self.trim(t, p);
    }

    /// The first entry some subscription of partition `p` has not acknowledged up to (its
    /// mark-delete position + 1; 0 for one not opened yet); `u64::MAX` without subscriptions.
    fn slowest_held(&self, p: usize) -> u64 {
        self.parts[p]
            .subs
            .iter()
            .map(|s| s.acked_upto.map_or(0, |a| a + 1))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Subscription `s`'s mark-delete position moved from `before` (entry indices): a trim runs
    /// when the slowest position changed and the moved cursor is now in another ledger than the
    /// slowest was (`onCursorMarkDeletePositionUpdated`).
    pub(super) fn mark_delete_moved(&mut self, t: u64, p: usize, s: usize, before: Option<u64>) {
        if !self.retention_on() || self.parts[p].retention.closed.is_empty() {
            return;
        }
        let part = &self.parts[p];
        let held = |i: usize, a: Option<u64>| if i == s { before } else { a };
        let previous = part
            .subs
            .iter()
            .enumerate()
            .map(|(i, x)| held(i, x.acked_upto).map_or(0, |a| a + 1))
            .min()
            .unwrap_or(u64::MAX);
        let current = self.slowest_held(p);
        let now = part.subs[s].acked_upto.unwrap_or(0);
        let ledger_of = |held: u64| part.ledgers.ledger_end(held.saturating_sub(1));
        if previous != current && ledger_of(previous) != part.ledgers.ledger_end(now) {
            self.trim(t, p);
        }
    }

    /// `internalTrimLedgers` on partition `p` at `t`: deletes the ledgers it would, oldest first,
    /// writing a `delete` row for each one the trace has.
    pub(super) fn trim(&mut self, t: u64, p: usize) {
        let slowest = self.slowest_held(p);
        let time_us = (self.spec.retention_time_minutes >= 0.0)
            .then_some((self.spec.retention_time_minutes * 60e6) as u64);
        let quota = (self.spec.retention_size_mb >= 0.0)
            .then_some((self.spec.retention_size_mb * MEGABYTE as f64) as u64);
        let part = &mut self.parts[p];
        let total = part
            .bytes_published
            .saturating_sub(part.retention.deleted_bytes);
        let mut to_delete = 0u64;
        let mut rows: Vec<i64> = Vec::new();
        while let Some(run) = part.retention.closed.front_mut() {
            if run.first_end > slowest {
                break;
            }
            let behind = ((slowest - run.first_end) / run.entries_each.max(1) + 1).min(run.count);
            let expired = time_us.is_some_and(|limit| t.saturating_sub(run.closed_us) > limit);
            // Over quota while total - (deleted so far + this one) >= quota, ledger by ledger.
            let over_quota = |q: u64| match total.checked_sub(to_delete.saturating_add(q)) {
                None => 0,
                Some(_) if run.bytes_each == 0 => behind,
                Some(room) => (room / run.bytes_each).min(behind),
            };
            let n = if expired {
                behind
            } else {
                quota.map_or(0, over_quota)
            };
            if run.written {
                rows.extend((0..n).map(|k| run.first_id + k as i64));
            }
            to_delete = to_delete.saturating_add(n.saturating_mul(run.bytes_each));
            run.first_id += n as i64;
            run.count -= n;
            run.first_end += n * run.entries_each;
            let stopped = n < behind;
            if run.count == 0 {
                part.retention.closed.pop_front();
            }
            if stopped || n == 0 {
                break;
            }
        }
        part.retention.deleted_bytes = part.retention.deleted_bytes.saturating_add(to_delete);
        let (broker, topic) = (part.broker, part.topic);
        for id in rows {
            let row = Row::new("delete", None, None);
            self.out
                .push(t, broker, topic, row, Some(Position::new(id, 0)));
        }
    }
}
