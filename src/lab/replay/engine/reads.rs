//! The read ops (sequential reads and replays): cache lookups, and delivery when a read completes.

use super::super::trace::Event;
use super::cursors::Hold;
use super::inflight;
use super::{CacheStrategy, EntryKey, Replayer, Stopped};
use crate::broker::ledger::cursor::{read_position_after_read, read_position_past};
use crate::broker::positions::acked::unacked_runs;
use crate::broker::read_flow::ReadKind;
use crate::cache::position::Position;

/// The most entries one `read` row takes. Before `load` rows, a read's entries were bounded by the
/// trace's `add` rows; one `load` row can bring 2^31 entries, and a read of them all would read
/// them one by one (and list its misses: 32 GB). A broker's dispatcher reads far fewer at once
/// (`dispatcherMaxReadBatchSize`, 100 by default).
pub(super) const MAX_READ_ENTRIES: u64 = 1 << 20;

/// A read waiting for its storage read (reads that hit the cache complete at once).
pub(super) struct InFlight {
    pub(super) due_ns: u64,
    pub(super) topic: u32,
    pub(super) cursor: u32,
    pub(super) epoch: u32,
    pub(super) positions: Vec<Position>,
    pub(super) replay: bool,
    /// Counted in its cursor's [`Hold`]: its delivery moves the cursor on.
    pub(super) holds: bool,
    /// Its copies of cache hits, kept by the design until it is delivered
    /// ([`CacheStrategy::keep_read`]; 0: none).
    pub(super) kept: u64,
    /// The reads-in-flight permits it asks for, and those it holds (see `inflight.rs`).
    pub(super) permits: u64,
    pub(super) held: Option<u64>,
}

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    /// A read of `count` entries from the read position (acknowledged ones passed over).
    pub(super) fn on_read(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        let mut runs = std::mem::take(&mut self.runs);
        runs.clear();
        let (t, c) = self.topic_and_cursor(e)?;
        let (from, epoch) = (c.read_position, c.epoch);
        let count = u64::from(e.count).min(MAX_READ_ENTRIES);
        let skip_to = unacked_runs(&c.acked, from, count, &t.layout, t, &mut runs);
        let read_before = self.read_so_far();
        let mut missed = false;
        // Without read latency nothing is ever in flight, so deliveries are in order and
        // need no tracking.
        let track = self.read_latency_ns > 0;
        let mut positions = Vec::new();
        // Where the cursor is as each run starts: only this loop moves it meanwhile.
        let mut before = from;
        for &(ledger, first, end) in &runs {
            let run_missed = self.read_run(
                e.topic,
                e.cursor,
                ReadKind::Sequential,
                ledger,
                first,
                end,
                now,
            );
            missed |= run_missed;
            if track {
                positions.extend((first..=end).map(|x| Position::new(ledger, x)));
            }
            // The read position moves past each ledger's entries before the next ledger is
            // read and before the read is delivered (`OpReadEntry.updateReadPosition`), so
            // the next ledger's storage read counts the cursors at or before the new
            // position; a part that waits for storage moves it when it completes, so the
            // read flow sees the cursor where that part started until the read is
            // delivered.
            let (t, c) = self.topic_and_cursor(e)?;
            if track && run_missed && c.hold.is_none() {
                c.hold = Some(Hold {
                    at: before,
                    reads: 0,
                    epoch,
                });
            }
            c.read_position = read_position_past(
                c.read_position,
                Position::new(ledger, end),
                c.mark_delete,
                &t.layout,
            );
            before = c.read_position;
            self.cursor_moved(e.topic, e.cursor);
        }
        if let Some(to) = skip_to {
            // Its last window was all acknowledged: the read position moves past it.
            let c = self.cursors.of_event(e)?;
            c.read_position = read_position_after_read(c.read_position, to, c.mark_delete);
            self.cursor_moved(e.topic, e.cursor);
        }
        self.runs = runs;
        let holds = track && missed;
        let kept = if holds {
            self.strategy.keep_read()
        } else {
            self.strategy.end_read();
            0
        };
        if holds {
            let c = self.cursors.of_event(e)?;
            if let Some(h) = &mut c.hold {
                h.reads = h.reads.saturating_add(1);
            }
        }
        // Untracked (no latency), a read is delivered as it starts with no positions to
        // check: there is nothing to complete.
        if track {
            self.complete_read(
                InFlight {
                    due_ns: now,
                    topic: e.topic,
                    cursor: e.cursor,
                    epoch,
                    positions,
                    replay: false,
                    holds,
                    kept,
                    permits: self.permits_since(read_before),
                    held: None,
                },
                missed,
            );
        }
        Ok(())
    }

    /// The entries and bytes read so far, to size the permits of the read that starts now.
    fn read_so_far(&self) -> (u64, u64) {
        (self.metrics.entries_read, self.metrics.read_bytes)
    }

    /// The permits a read holds: what it read since `before` ([`Self::read_so_far`]).
    fn permits_since(&self, before: (u64, u64)) -> u64 {
        inflight::permits_for(
            self.metrics.entries_read - before.0,
            self.metrics.read_bytes - before.1,
        )
    }

    /// A read of one entry from the replay queue.
    pub(super) fn on_replay(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        let p = Self::position_of(e)?;
        let (t, c) = self.topic_and_cursor(e)?;
        c.replay.remove(&p);
        let epoch = c.epoch;
        if t.contains(p) {
            let read_before = self.read_so_far();
            let missed = self.read_run(
                e.topic,
                e.cursor,
                ReadKind::Replay,
                p.ledger_id,
                p.entry_id,
                p.entry_id,
                now,
            );
            self.strategy.end_read();
            self.complete_read(
                InFlight {
                    due_ns: now,
                    topic: e.topic,
                    cursor: e.cursor,
                    epoch,
                    positions: vec![p],
                    replay: true,
                    holds: false,
                    kept: 0,
                    permits: self.permits_since(read_before),
                    held: None,
                },
                missed,
            );
        }
        Ok(())
    }

    /// One cursor reads `first..=end` of a ledger: first every hit from the cache, then each
    /// contiguous run of misses as one storage read (all of it, when the design serves ranges all
    /// or nothing and some entry is missing), as `RangeEntryCacheImpl` does within one ledger.
    /// Returns whether any entry missed (a storage read was needed).
    #[allow(
        clippy::too_many_arguments,
        reason = "a run of a read: its cursor, range, kind and timing, each used once"
    )]
    pub(super) fn read_run(
        &mut self,
        topic: u32,
        cursor: u32,
        kind: ReadKind,
        ledger: i64,
        first: i64,
        end: i64,
        now: u64,
    ) -> bool {
        // A run of one entry is served or missed by its own read: no separate check first.
        let whole_run_missing = self.flow.all_or_nothing_ranges()
            && first < end
            && !(first..=end).all(|entry| {
                self.strategy.contains(EntryKey {
                    topic,
                    position: Position::new(ledger, entry),
                })
            });
        self.misses.clear();
        self.miss_run_ends.clear();
        let log_ts_us = self.origin_us.unwrap_or(0) + (now / 1_000) as i64;
        let mut after_hit = true;
        let entries = self.topics[topic as usize].ledger(ledger);
        for entry in first..=end {
            let key = EntryKey {
                topic,
                position: Position::new(ledger, entry),
            };
            if let Some(r) = &mut self.recorder {
                r.record(key);
            }
            let size = entries.map_or(0, |l| l.size(entry));
            self.metrics.entries_read += 1;
            self.metrics.read_bytes += size as u64;
            let hit = !whole_run_missing && self.strategy.read(now, key);
            if let Some(s) = &mut self.second {
                s.reads += 1;
                s.hits += u64::from(hit);
                s.misses += u64::from(!hit);
            }
            if hit {
                self.metrics.hits += 1;
                // The logged stream touches the cache as the read does: its hits as it finds them,
                // then its misses, which storage reads and the design caches (below), so that a
                // simulator that inserts on a miss sees this design's order. (With read latency
                // they are cached later, other events between; the log keeps them together.)
                if let Some(log) = &mut self.requests {
                    log.record(log_ts_us, key, size, true);
                }
            } else {
                self.metrics.misses += 1;
                if after_hit && !self.misses.is_empty() {
                    self.miss_run_ends.push(self.misses.len());
                }
                self.misses.push((entry, size));
            }
            after_hit = hit;
        }
        if let Some(log) = &mut self.requests {
            for &(entry, size) in &self.misses {
                let key = EntryKey {
                    topic,
                    position: Position::new(ledger, entry),
                };
                log.record(log_ts_us, key, size, true);
            }
        }
        if self.misses.is_empty() {
            return false;
        }
        self.miss_run_ends.push(self.misses.len());
        // Taken out while the storage reads are planned (which needs the whole replayer), then
        // put back for the next read.
        let (misses, ends) = (
            std::mem::take(&mut self.misses),
            std::mem::take(&mut self.miss_run_ends),
        );
        let mut start = 0;
        for &end in &ends {
            self.flush_misses(topic, ledger, cursor, kind, &misses[start..end], now);
            start = end;
        }
        self.misses = misses;
        self.miss_run_ends = ends;
        true
    }

    /// Delivers a read now, or when its storage read completes if it missed and reads take time.
    pub(super) fn complete_read(&mut self, mut read: InFlight, missed: bool) {
        if self.limits_reads() {
            self.admit_read(read, missed);
        } else if missed && self.read_latency_ns > 0 {
            read.due_ns = read.due_ns.saturating_add(self.read_latency_ns);
            self.in_flight.push_back(read);
        } else if !read.positions.is_empty() {
            // A read delivered as it starts is never stale (its epoch was just read), so one that
            // carries no positions to check (reads are tracked only with latency) changes nothing.
            self.deliver(read);
        }
    }

    /// Completes, in the order of their times, the storage reads due by `now` and delivers the
    /// reads due by then, each after the periodic tasks due before it; a storage read completes
    /// before a read due at the same time (Pulsar counts and caches its entries before it calls
    /// the reads waiting for it back). Latency is constant, so each kind is due in the order it
    /// was issued.
    pub(super) fn complete_due(&mut self, now: u64) {
        loop {
            let storage = self.storage_reads.front().map(|r| r.due_ns);
            let delivery = self.in_flight.front().map(|r| r.due_ns);
            // Reads waiting for permits time out before what completes after their timeout.
            self.expire_permits(
                storage
                    .into_iter()
                    .chain(delivery)
                    .min()
                    .unwrap_or(now)
                    .min(now),
            );
            match (storage, delivery) {
                (Some(s), d) if s <= now && d.is_none_or(|d| s <= d) => {
                    self.complete_storage_read()
                }
                (_, Some(d)) if d <= now => {
                    let read = self.in_flight.pop_front().expect("checked");
                    self.advance(d);
                    self.dispatch(read);
                }
                _ => return,
            }
        }
    }

    /// Delivers a read that waited for storage; dispatched or discarded, its copies are released.
    pub(super) fn dispatch(&mut self, mut read: InFlight) {
        let (kept, held, at) = (read.kept, read.held.take(), read.due_ns);
        self.deliver(read);
        if kept != 0 {
            self.strategy.release_kept(kept);
        }
        if let Some(permits) = held {
            self.release_permits(permits, at);
        }
    }

    pub(super) fn deliver(&mut self, read: InFlight) {
        let epochs = self.cursor_epochs;
        let t = &mut self.topics[read.topic as usize];
        let Some(c) = self.cursors.get_mut(read.topic, read.cursor) else {
            return;
        };
        // The last of the cursor's reads under way completed: the read flow sees it where the
        // trace's reads have taken it (a seek or rewind since ended the hold already).
        let mut moved = false;
        if let Some(h) = c
            .hold
            .as_mut()
            .filter(|h| read.holds && h.epoch == read.epoch)
        {
            h.reads = h.reads.saturating_sub(1);
            if h.reads == 0 {
                c.hold = None;
            } else if let Some(&last) = read.positions.last() {
                // Later reads are still under way: the broker has the cursor past this one.
                h.at = read_position_past(h.at, last, c.mark_delete, &t.layout);
            }
            moved = true;
        }
        if read.epoch != c.epoch {
            if epochs {
                self.metrics.discarded_reads += 1;
                return;
            }
            // Without epochs a stale sequential read moves the read position forward again (the
            // entries the seek went back to are skipped) and delivers what it read.
            if let (false, Some(&last)) = (read.replay, read.positions.last()) {
                c.read_position =
                    read_position_past(c.read_position, last, c.mark_delete, &t.layout);
                moved = true;
            }
        }
        for p in read.positions {
            match c.delivered_high {
                Some(high) if p < high => {
                    if !read.replay {
                        self.metrics.out_of_order_deliveries += 1;
                    }
                }
                _ => c.delivered_high = Some(p),
            }
        }
        if moved {
            self.cursor_moved(read.topic, read.cursor);
        }
    }
}
