//! A read's life: it is started for a cursor (its positions, and permits from the reads-in-flight
//! limiter: it reads now, waits for them, or fails), served one step at a time from the cache and
//! from storage (see `storage_reads`), and finalized: delivered, or discarded if its cursor's
//! epoch moved on. Its outcome stays in the ledger, with its permits, until it is taken or the
//! read is discarded.

use super::cursor::read_position_after_read;
use super::{ManagedCursor, ManagedLedger, State, MAX_ENTRIES_PER_READ};
use crate::broker::positions::acked::unacked_runs;
use crate::broker::positions::layout::Layout;
use crate::broker::read_flow::ReadKind;
use crate::cache::entry::CachedEntry;
use crate::cache::inflight_reads::{Admission, ReadPermits, ReadsLimiter};
use crate::cache::position::Position;
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::sync::Arc;

/// A read of `positions` asks the reads-in-flight limiter for permits, estimated from the
/// average entry of the first position's ledger: its permits, whether it reads now, or why it
/// fails (see [`ReadPermits::acquire`]).
pub(super) fn admit(
    limiter: &Arc<ReadsLimiter>,
    layout: &Layout,
    positions: &[Position],
    now_only: bool,
) -> (Option<ReadPermits>, bool, Option<Error>) {
    let average = positions
        .first()
        .and_then(|p| layout.get(p.ledger_id))
        .filter(|l| l.entries > 0 && l.bytes > 0)
        .map(|l| l.bytes / l.entries);
    match ReadPermits::acquire(limiter, positions.len() as u64, average, !now_only) {
        Ok((permits, Admission::Go(_))) => (Some(permits), true, None),
        Ok((permits, Admission::Wait)) => (Some(permits), false, None),
        Err(e) => (None, false, Some(e)),
    }
}

/// What a completed read produced.
#[derive(Debug)]
pub enum ReadOutcome {
    /// The entries, in position order; each consumes one expected read when released.
    Delivered(Vec<CachedEntry>),
    /// The cursor's epoch moved on while the read was in flight; nothing was delivered.
    Discarded,
}

/// Identifies a started read until its result is taken. It is a plain id: the read, and the
/// reads-in-flight permits it holds, stay in the ledger until [`ManagedLedger::take_read`] takes
/// its outcome, so a caller who drops the id without taking the outcome must call
/// [`ManagedLedger::discard_read`], or later reads wait for permits that never come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadId(u64);

pub(super) struct ReadOp {
    pub(super) cursor: u32,
    pub(super) kind: ReadKind,
    pub(super) epoch: u32,
    pub(super) positions: Vec<Position>,
    pub(super) entries: Vec<Option<CachedEntry>>,
    pub(super) waiting: usize,
    pub(super) retried: bool,
    pub(super) outcome: Option<Result<ReadOutcome>>,
    /// The runs not read yet, in order: a sequential read reads one ledger's run at a time.
    pub(super) units: VecDeque<(i64, i64, i64)>,
    /// The runs of the step under way: what a failed sub-read falls back to reading whole.
    pub(super) step: Vec<(i64, i64, i64)>,
    /// Its storage reads complete at once and join no storage read that completes later.
    pub(super) now_only: bool,
    /// A storage read of the step under way failed after the retry (not the first step's).
    pub(super) step_failed: bool,
    /// Where a sequential read whose last window was all acknowledged leaves its cursor.
    pub(super) skip_to: Option<Position>,
    /// Its reads-in-flight permits (given back when the read is taken), or its place in their
    /// queue.
    pub(super) permits: Option<ReadPermits>,
}

/// Where `p` is among a read's positions. They are in position order without repeats (a
/// sequential read's runs, a replay read's queue order), so a read of `n` entries costs
/// `O(n log n)` to fill, not `O(n^2)`.
pub(super) fn slot_of(positions: &[Position], p: Position) -> Option<usize> {
    positions.binary_search(&p).ok()
}

impl ManagedLedger {
    /// Completes every storage read due by now, in (completion time, start) order; returns how many
    /// reads finished.
    pub fn poll(&self) -> usize {
        let mut st = self.inner.state.lock();
        let failed = self.start_permitted(&mut st);
        failed + self.complete_due(&mut st, self.inner.clock.now_ns())
    }

    /// Starts the reads whose permits came, from when they came, and fails those that waited
    /// past the timeout; returns how many failed.
    fn start_permitted(&self, st: &mut State) -> usize {
        let mut waiting: Vec<u64> = st
            .ops
            .iter()
            .filter(|(_, op)| op.permits.as_ref().is_some_and(ReadPermits::is_waiting))
            .map(|(id, _)| *id)
            .collect();
        // In the order they were started (the map's order is arbitrary).
        waiting.sort_unstable();
        let mut failed = 0;
        for id in waiting {
            let op = st.ops.get_mut(&id).expect("a waiting read");
            match op.permits.as_mut().and_then(ReadPermits::poll) {
                Some(Ok(at)) => self.continue_read(st, id, at),
                Some(Err(e)) => {
                    op.outcome = Some(Err(e));
                    failed += 1;
                }
                None => {}
            }
        }
        failed
    }

    /// Whether a started read has finished.
    pub fn is_read_done(&self, id: ReadId) -> bool {
        self.inner
            .state
            .lock()
            .ops
            .get(&id.0)
            .is_some_and(|op| op.outcome.is_some())
    }

    /// The outcome of a finished read (taken: a second call returns `None`); `None` while it runs.
    pub fn take_read(&self, id: ReadId) -> Option<Result<ReadOutcome>> {
        let mut st = self.inner.state.lock();
        st.ops.get(&id.0)?.outcome.as_ref()?;
        st.ops.remove(&id.0).and_then(|op| op.outcome)
    }

    /// Forgets a started read, finished or not, whose outcome nobody will take: its permits go
    /// back to the reads-in-flight limiter (or its place in their queue is given up), and the
    /// storage reads it waits for complete for the other reads waiting on them. Returns whether
    /// the read was there (it was not if its outcome was taken or it was discarded before).
    pub fn discard_read(&self, id: ReadId) -> bool {
        let op = self.inner.state.lock().ops.remove(&id.0);
        // Dropped after the ledger's lock is let go: its entries release their expected reads
        // into the cache and its permits go back to the limiter, neither of which needs the ledger.
        op.is_some()
    }

    /// Reads in flight (started, not finished).
    pub fn reads_in_flight(&self) -> usize {
        self.inner
            .state
            .lock()
            .ops
            .values()
            .filter(|op| op.outcome.is_none())
            .count()
    }

    /// A replay read of positions that hold no entry fails, as Pulsar's `asyncReplayEntries` fails
    /// reading a ledger that does not exist: the error names them, and they leave the replay queue
    /// so that the next replay read proceeds. Looks at the `n` unacknowledged positions the read
    /// would take (acknowledged ones are passed over, as Pulsar filters them before reading).
    fn drop_missing_replays(st: &mut State, cursor: u32, n: u64) -> Result<()> {
        let State {
            cursors, layout, ..
        } = st;
        let Some(c) = cursors.get_mut(cursor as usize).and_then(Option::as_mut) else {
            return Ok(());
        };
        let missing: Vec<Position> = c
            .replay
            .iter()
            .filter(|p| !c.is_acked(**p))
            .take(usize::try_from(n).unwrap_or(usize::MAX))
            .filter(|p| !layout.contains(**p))
            .copied()
            .collect();
        let Some(first) = missing.first() else {
            return Ok(());
        };
        for p in &missing {
            c.replay.remove(p);
        }
        let why = match layout.get(first.ledger_id) {
            Some(_) => "past the ledger's last entry",
            None => "its ledger does not exist (deleted, or never created)",
        };
        Err(Error::not_found(
            "entry",
            format!(
                "{first} in the replay queue of cursor {:?}: {why}; {} position(s) with no entry left the queue, read again to replay the rest",
                c.name,
                missing.len()
            ),
        ))
    }

    /// Starts a read for `cursor`. With `now_only`, its storage reads complete at once (latency is
    /// not simulated) and it joins no in-flight read that completes later.
    fn start_read(&self, cursor: u32, kind: ReadKind, n: u64, now_only: bool) -> Result<ReadId> {
        // A read holds a slot per entry it returns: capped, so that a count a caller means as
        // "all of them" costs what the entries cost, not what `n` says (a store can declare
        // ledgers of 2**63 entries).
        let n = n.min(MAX_ENTRIES_PER_READ);
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        if kind == ReadKind::Replay {
            Self::drop_missing_replays(&mut st, cursor, n)?;
        }
        let c = st
            .cursors
            .get(cursor as usize)
            .and_then(|c| c.as_ref())
            .ok_or_else(|| Error::not_found("cursor", cursor))?;
        if inner.config.cursor_epochs && c.epoch_increase_running {
            return Err(Error::CursorModifying(c.name.clone()));
        }
        let epoch = c.epoch;
        let (positions, units, skip_to): (Vec<Position>, VecDeque<_>, _) = match kind {
            ReadKind::Sequential => {
                let layout = &st.layout;
                let mut runs = Vec::new();
                let skip_to = unacked_runs(&c.acked, c.read_position, n, layout, layout, &mut runs);
                let positions = runs
                    .iter()
                    .flat_map(|&(l, first, last)| (first..=last).map(move |e| Position::new(l, e)))
                    .collect();
                (positions, runs.into(), skip_to)
            }
            ReadKind::Replay => {
                let positions: Vec<Position> = c
                    .replay
                    .iter()
                    .filter(|p| !c.is_acked(**p))
                    .take(usize::try_from(n).unwrap_or(usize::MAX))
                    .copied()
                    .collect();
                // Pulsar's `asyncReplayEntries` reads each position on its own.
                let units = positions
                    .iter()
                    .map(|p| (p.ledger_id, p.entry_id, p.entry_id))
                    .collect();
                (positions, units, None)
            }
        };
        let (permits, go, failed) = admit(&inner.limiter, &st.layout, &positions, now_only);
        let op_id = st.next_op;
        st.next_op += 1;
        st.ops.insert(
            op_id,
            ReadOp {
                cursor,
                kind,
                epoch,
                entries: (0..positions.len()).map(|_| None).collect(),
                positions,
                waiting: 0,
                retried: false,
                outcome: failed.map(Err),
                units,
                step: Vec::new(),
                now_only,
                step_failed: false,
                skip_to,
                permits,
            },
        );
        if go {
            let now = self.inner.clock.now_ns();
            self.continue_read(&mut st, op_id, now);
        }
        Ok(ReadId(op_id))
    }

    /// Takes a read on once its step under way has all its entries: issues the next step, or
    /// finalizes the read when none is left. A sequential read reads one ledger's run at a time and
    /// moves its cursor's read position past each before reading the next (Pulsar's `OpReadEntry`
    /// sets the read position when a ledger's entries arrive, then `checkReadCompletion` reads the
    /// next ledger), so the next ledger's lookup sees what this one's storage reads cached or
    /// evicted, and its storage read counts the cursors at or before the moved reader. A replay read
    /// issues all its positions at once, as `asyncReplayEntries` does.
    ///
    /// `now` is when the step before completed: the next ledger's read starts then, so a read
    /// spanning ledgers completes in one poll once the clock has passed all of their latencies.
    pub(super) fn continue_read(&self, st: &mut State, op_id: u64, now: u64) {
        loop {
            let op = st.ops.get_mut(&op_id).expect("continuing a known read");
            if op.waiting > 0 || op.outcome.is_some() {
                return;
            }
            if let Some(&(ledger, _, last)) = op.step.last() {
                let through = Position::new(ledger, last);
                let read =
                    slot_of(&op.positions, through).expect("a step reads requested positions");
                if op.step_failed {
                    // A later ledger's storage read failed: the read delivers the ledgers before
                    // it, as `OpReadEntry.internalReadEntriesFailed` completes with the entries
                    // it has (the first ledger's failure fails the read).
                    let first = op.step.first().map(|&(l, f, _)| Position::new(l, f));
                    if let Some(from) = first.and_then(|f| slot_of(&op.positions, f)) {
                        op.entries[from..].iter_mut().for_each(|e| *e = None);
                    }
                    op.units.clear();
                } else if !op.entries[..=read].iter().all(Option::is_some) {
                    // A storage read came back short: the read ends at the gap (see `finalize`).
                    op.units.clear();
                } else if op.kind == ReadKind::Sequential && !op.units.is_empty() {
                    self.read_past(st, op_id, through);
                }
            }
            let op = st.ops.get_mut(&op_id).expect("continuing a known read");
            if op.units.is_empty() {
                self.finalize(st, op_id);
                return;
            }
            let step: Vec<_> = match op.kind {
                ReadKind::Sequential => op.units.pop_front().into_iter().collect(),
                ReadKind::Replay => op.units.drain(..).collect(),
            };
            op.retried = false;
            // One for issuing: the step cannot finish while its units are being issued.
            op.waiting += 1;
            for &unit in &step {
                self.read_unit(st, op_id, unit, now);
            }
            let op = st.ops.get_mut(&op_id).expect("continuing a known read");
            op.step = step;
            op.waiting -= 1;
        }
    }

    /// Between the ledgers of a sequential read: its cursor's read position moves past `through`,
    /// the last entry read so far. A read that its cursor's epoch outdated reads no further (it
    /// will be discarded); without epochs it moves the cursor as a broker's read does.
    fn read_past(&self, st: &mut State, op_id: u64, through: Position) {
        let State {
            cursors,
            layout,
            ops,
            ..
        } = &mut *st;
        let op = ops.get_mut(&op_id).expect("known read");
        let cursor = op.cursor;
        let Some(c) = cursors.get_mut(cursor as usize).and_then(Option::as_mut) else {
            // Closed: `finalize` reports it.
            op.units.clear();
            return;
        };
        if self.inner.config.cursor_epochs && c.is_epoch_outdated(op.epoch) {
            op.units.clear();
            return;
        }
        c.read_through(through, layout);
        self.track(st, cursor);
    }

    /// Reads one run of a read: its cached entries from the cache, then each contiguous gap as one
    /// storage read (the whole run when the design serves ranges all or nothing and something is
    /// missing).
    fn read_unit(
        &self,
        st: &mut State,
        op_id: u64,
        (ledger, first, last): (i64, i64, i64),
        now: u64,
    ) {
        let inner = &*self.inner;
        let (from, to) = (Position::new(ledger, first), Position::new(ledger, last));
        let found = if inner.flow.all_or_nothing_ranges() {
            inner
                .cache
                .get_range_if_complete(from, to)
                .unwrap_or_default()
        } else {
            inner.cache.get_range(from, to)
        };
        let op = st.ops.get_mut(&op_id).expect("reading for a known read");
        let (cursor, kind, now_only) = (op.cursor, op.kind, op.now_only);
        let base = slot_of(&op.positions, from).expect("unit start is requested");
        let mut gaps = Vec::new();
        let mut found = found.into_iter().peekable();
        let mut gap_start: Option<i64> = None;
        for e in first..=last {
            let slot = base + (e - first) as usize;
            if found.peek().is_some_and(|x| x.position().entry_id == e) {
                op.entries[slot] = found.next();
                if let Some(g) = gap_start.take() {
                    gaps.push((g, e - 1));
                }
            } else if gap_start.is_none() {
                gap_start = Some(e);
            }
        }
        if let Some(g) = gap_start {
            gaps.push((g, last));
        }
        for (first, last) in gaps {
            self.read_from_storage(st, op_id, cursor, kind, ledger, first, last, now, now_only);
        }
    }

    /// Delivers a read whose entries are all in, or discards it if its cursor's epoch moved on.
    fn finalize(&self, st: &mut State, op_id: u64) {
        let inner = &*self.inner;
        let op = st.ops.get_mut(&op_id).expect("finalizing a known read");
        let (cursor, kind, epoch) = (op.cursor, op.kind, op.epoch);
        let (wanted, skip_to) = (op.positions.len(), op.skip_to);
        // Every entry is in unless a storage read came back short (it found damage after its
        // first entry, see `Storage::read`): then the entries before the gap are delivered, and
        // the cursor's next read starts at the damaged entry and reports it.
        let entries: Vec<CachedEntry> = op.entries.iter_mut().map_while(Option::take).collect();
        let layout = st.layout.clone();
        let Some(c) = st.cursors.get_mut(cursor as usize).and_then(Option::as_mut) else {
            st.ops.get_mut(&op_id).expect("known").outcome =
                Some(Err(Error::not_found("cursor", cursor)));
            return;
        };
        let outcome = if inner.config.cursor_epochs && c.is_epoch_outdated(epoch) {
            c.discarded_reads += 1;
            ReadOutcome::Discarded
        } else {
            if let (ReadKind::Sequential, Some(last)) = (kind, entries.last()) {
                c.read_through(last.position(), &layout);
            }
            if let (Some(to), true) = (skip_to, entries.len() == wanted) {
                c.read_position = read_position_after_read(c.read_position, to, c.mark_delete);
            }
            for e in &entries {
                c.record_delivery(e.position(), kind == ReadKind::Replay);
                if kind == ReadKind::Replay {
                    c.replay.remove(&e.position());
                }
            }
            ReadOutcome::Delivered(entries)
        };
        if matches!(outcome, ReadOutcome::Delivered(_)) && kind == ReadKind::Sequential {
            self.track(st, cursor);
        }
        st.ops.get_mut(&op_id).expect("known").outcome = Some(Ok(outcome));
    }
}

impl ManagedCursor {
    /// Reads up to `n` entries from the read position and completes at once (storage latency is
    /// not simulated); advances the read position. An empty list at the end of the ledger. At most
    /// [`MAX_ENTRIES_PER_READ`] entries, whatever `n` (each read variant alike).
    pub fn read_entries(&self, n: u64) -> Result<ReadOutcome> {
        self.read_now(ReadKind::Sequential, n)
    }

    /// Starts a read of up to `n` entries; it completes when its storage reads do (see
    /// [`ManagedLedger::poll`]).
    pub fn read_entries_async(&self, n: u64) -> Result<ReadId> {
        self.ledger
            .start_read(self.id, ReadKind::Sequential, n, false)
    }

    /// Reads up to `n` entries of the replay queue, lowest first, at once.
    pub fn read_replay(&self, n: u64) -> Result<ReadOutcome> {
        self.read_now(ReadKind::Replay, n)
    }

    pub fn read_replay_async(&self, n: u64) -> Result<ReadId> {
        self.ledger.start_read(self.id, ReadKind::Replay, n, false)
    }

    fn read_now(&self, kind: ReadKind, n: u64) -> Result<ReadOutcome> {
        let id = self.ledger.start_read(self.id, kind, n, true)?;
        let l = &self.ledger;
        {
            let mut st = l.inner.state.lock();
            let now = l.inner.clock.now_ns();
            l.complete_due(&mut st, now);
        }
        l.take_read(id)
            .expect("a read that does not wait for time completes at once")
    }
}
