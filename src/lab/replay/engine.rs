//! The replay engine: one broker's events through per-topic ledgers and cursors, with a cache
//! strategy deciding what stays in memory, on a clock driven by the trace's timestamps.
//!
//! Storage is simulated: it holds no payloads, only each entry's size while some cursor may still
//! read it (entries behind every cursor are forgotten, and a later seek back reads them at the
//! ledger's mean size), so memory follows the cache and the cursors, not the trace length.

use super::memory::MemoryModel;
use super::requests::RequestLog;
use super::strategy::{CacheStrategy, EntryKey, FutureReads};
use super::trace::{Event, Names, Op};
use crate::broker::ledger::cursor::{
    ack_individually, mark_delete_after_ledger_deleted, mark_delete_after_reset,
    mark_delete_allowed, mark_delete_over, read_position_after_mark_delete,
    read_position_after_read, read_position_past,
};
use crate::broker::positions::acked::{unacked_runs, AckedRanges, EntryRuns, Run};
use crate::broker::positions::layout::{Layout, LedgerInfo};
use crate::broker::read_flow::{
    plan_storage_reads, Context, CursorActivity, Invalidation, ReadFlow, ReadKind,
    StorageReadAdmission,
};
use crate::cache::fast_hash::{FastMap, FastSet};
use crate::cache::position::Position;
use crate::config::CacheConfig;
use crate::error::{Error, Result};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[path = "inflight.rs"]
mod inflight;

/// Why a replay stopped short of the events it was given.
#[derive(Debug)]
pub(crate) enum Stopped {
    Failed(Error),
    /// An event on a cursor its topic never opened; the error names the cursor, once the names
    /// are at hand ([`Stopped::named`]).
    UnknownCursor {
        row: u64,
        op: Op,
        cursor: u32,
    },
    /// An open of a cursor id that belongs to another topic: the error names both topics and the
    /// cursor ([`Stopped::named`]). (Only hand-built events can do this; [`Replay::run`] refuses
    /// them against their names before the engine, which knows an id's topic from its first open
    /// only.)
    CursorOfAnotherTopic {
        row: u64,
        cursor: u32,
        /// The topic the id belongs to: its names' topic ([`Replay::run`]), or the one that opened
        /// it first (the engine).
        of: u32,
        /// The row's topic.
        named_by: u32,
    },
}

impl From<Error> for Stopped {
    fn from(e: Error) -> Self {
        Stopped::Failed(e)
    }
}

impl Stopped {
    /// The error, with the cursor's name from `names` (which have interned every cursor of the
    /// events replayed so far).
    pub(crate) fn named(self, names: &Names) -> Error {
        let cursor_name = |id: u32| names.cursors.get(id as usize).map_or("?", |c| c.1.as_str());
        let topic_name = |id: u32| names.topics.get(id as usize).map_or("?", String::as_str);
        match self {
            Stopped::Failed(e) => e,
            Stopped::CursorOfAnotherTopic {
                row,
                cursor,
                of,
                named_by,
            } => Error::invalid(
                "trace",
                format!(
                    "row {row}: cursor {:?} (id {cursor}) is a cursor of topic {:?}, not of the \
                     row's topic {:?}",
                    cursor_name(cursor),
                    topic_name(of),
                    topic_name(named_by)
                ),
            ),
            Stopped::UnknownCursor { row, op, cursor } => {
                let cursor = cursor_name(cursor);
                Error::invalid(
                    "trace",
                    format!(
                        "row {row}: {:?} on cursor {cursor:?}, which was never opened",
                        op.name()
                    ),
                )
            }
        }
    }
}

/// The entries the trace added to one ledger, and the sizes of those a cursor may still read.
///
/// Both are kept as runs, never entry by entry across a gap: a trace that adds entry 0 and then
/// entry 2^40 holds two runs, not 2^40 slots. Only added entries exist for reads (see
/// [`Topic::runs_from`]).
#[derive(Debug, Default)]
struct LedgerEntries {
    /// First entry -> one past the last, of each run of added entries (one run unless the trace
    /// skipped entries).
    added: BTreeMap<i64, i64>,
    /// Sizes still known, as runs (first entry, sizes from it on), in entry order.
    sizes: VecDeque<(i64, VecDeque<u32>)>,
    total_bytes: u64,
    total_entries: u64,
}

impl LedgerEntries {
    /// Records an add; `entry` is below `i64::MAX` (the decoder checks it), so `entry + 1` fits.
    fn add(&mut self, entry: i64, size: u32) {
        let end = entry + 1;
        // The common add extends the last run by one: one map update instead of a search, a
        // removal and an insertion.
        if let Some(mut last) = self.added.last_entry() {
            if *last.get() == entry {
                *last.get_mut() = end;
                self.add_size(entry, size);
                return;
            }
        }
        let before = self
            .added
            .range(..=entry)
            .next_back()
            .map(|(&s, &e)| (s, e));
        match before {
            Some((_, e)) if e > entry => {} // added before (a re-add changes nothing)
            _ => {
                let start = match before {
                    Some((s, e)) if e == entry => s,
                    _ => entry,
                };
                let end = match self.added.remove(&end) {
                    Some(next_end) => next_end,
                    None => end,
                };
                self.added.insert(start, end);
            }
        }
        self.add_size(entry, size);
    }

    /// Records an added entry's size (see [`LedgerEntries::add`]).
    fn add_size(&mut self, entry: i64, size: u32) {
        let known_end = self.sizes.back().map(|(f, s)| f + s.len() as i64);
        match (known_end, self.sizes.back_mut()) {
            (Some(e), Some((_, s))) if e == entry => s.push_back(size),
            // Behind the known sizes: a re-add, or an add into an earlier gap; the size stays what
            // it was (or the mean).
            (Some(e), _) if e > entry => {}
            _ => self.sizes.push_back((entry, VecDeque::from([size]))),
        }
        self.total_bytes += u64::from(size);
        self.total_entries += 1;
    }

    /// The entry's size, or the ledger's mean size once it is forgotten (or was never added).
    fn size(&self, entry: i64) -> u32 {
        let i = self.sizes.partition_point(|(f, _)| *f <= entry);
        if let Some((first, s)) = i.checked_sub(1).and_then(|i| self.sizes.get(i)) {
            if let Some(&size) = usize::try_from(entry - first).ok().and_then(|k| s.get(k)) {
                return size;
            }
        }
        u32::try_from(
            self.total_bytes
                .checked_div(self.total_entries)
                .unwrap_or(0),
        )
        .unwrap_or(u32::MAX)
    }

    fn forget_before(&mut self, entry: i64) {
        while let Some((first, s)) = self.sizes.front_mut() {
            let end = *first + s.len() as i64;
            if end <= entry {
                self.sizes.pop_front();
                continue;
            }
            if *first < entry {
                s.drain(..(entry - *first) as usize);
                *first = entry;
            }
            break;
        }
    }

    fn contains(&self, entry: i64) -> bool {
        self.added
            .range(..=entry)
            .next_back()
            .is_some_and(|(_, &e)| entry < e)
    }

    /// Where the search for added entries at or after `from` starts: the start of the run holding
    /// `from`, else `from` itself.
    fn run_start(&self, from: i64) -> i64 {
        self.added
            .range(..=from)
            .next_back()
            .filter(|(_, &e)| from < e)
            .map(|(&s, _)| s)
            .unwrap_or(from)
    }

    /// Runs of added entries from `from` on, as (first, last) pairs, up to `*left` entries in all
    /// (decremented by what is taken).
    fn take(&self, ledger: i64, from: i64, left: &mut u64, out: &mut Vec<(i64, i64, i64)>) {
        let mut push = |s: i64, e: i64, left: &mut u64| {
            let take = u64::try_from(e - s).unwrap_or(0).min(*left);
            if take > 0 {
                out.push((ledger, s, s + take as i64 - 1));
                *left -= take;
            }
        };
        // A tailing read starts in the last run (most ledgers have only one): no search needed.
        if let Some((&s, &e)) = self.added.last_key_value() {
            if s <= from {
                push(from, e, left);
                return;
            }
        }
        let first_run = self.run_start(from);
        for (&s, &e) in self.added.range(first_run..) {
            if *left == 0 {
                break;
            }
            push(s.max(from), e, left);
        }
    }

    /// Runs of added entries with ids in `first..=last`, up to `left` entries (decremented).
    fn take_within(&self, ledger: i64, first: i64, last: i64, left: &mut u64, out: &mut Vec<Run>) {
        for (&s, &e) in self.added.range(self.run_start(first)..) {
            if *left == 0 || s > last {
                break;
            }
            let (lo, hi) = (s.max(first), (e - 1).min(last));
            if lo <= hi {
                let take = u64::try_from(hi - lo).unwrap_or(u64::MAX).min(*left - 1);
                out.push((ledger, lo, lo + take as i64));
                *left -= take + 1;
            }
        }
    }

    /// The first added entry at or after `entry`.
    fn first_at_or_after(&self, entry: i64) -> Option<i64> {
        if self.contains(entry) {
            return Some(entry);
        }
        self.added.range(entry..).next().map(|(&s, _)| s)
    }

    /// The last added entry.
    fn last(&self) -> Option<i64> {
        self.added.last_key_value().map(|(_, &e)| e - 1)
    }

    /// Added entries at or after `from`.
    fn count_from(&self, from: i64) -> u64 {
        let first_run = self.run_start(from);
        self.added
            .range(first_run..)
            .map(|(&s, &e)| u64::try_from(e - s.max(from)).unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }
}

impl EntryRuns for Topic {
    fn runs_from(&self, from: Position, n: u64, out: &mut Vec<Run>) {
        Topic::runs_from(self, from, n, out);
    }

    fn runs_within(&self, ledger: i64, first: i64, last: i64, n: u64, out: &mut Vec<Run>) {
        if let Some(l) = self.ledger(ledger) {
            l.take_within(ledger, first, last, &mut { n }, out);
        }
    }

    fn first_at_or_after(&self, p: Position) -> Option<Position> {
        self.entries.range(p.ledger_id..).find_map(|(&ledger, l)| {
            let from = if ledger == p.ledger_id {
                p.entry_id
            } else {
                i64::MIN
            };
            l.first_at_or_after(from).map(|e| Position::new(ledger, e))
        })
    }

    fn last_of(&self, ledger: i64) -> Option<i64> {
        self.ledger(ledger)?.last()
    }
}

#[derive(Debug)]
struct Cursor {
    /// The topic that opened it (a cursor id names one topic's cursor).
    topic: u32,
    read_position: Position,
    /// Has consumers (between `open` and `close`); whether it counts as active is the read flow's
    /// call (see [`CursorActivity`]).
    connected: bool,
    /// The last entry of the acknowledged prefix (the position before the first entry while
    /// nothing is acknowledged).
    mark_delete: Position,
    /// Entries acknowledged on their own past `mark_delete`: reads pass over them.
    acked: AckedRanges,
    replay: BTreeSet<Position>,
    /// Bumped by every seek and rewind (PIP-269's cursor epoch).
    epoch: u32,
    /// Highest position delivered since the last seek.
    delivered_high: Option<Position>,
    /// Set while reads of it that missed are under way (with read latency): the broker moves a
    /// cursor's read position when its read completes (`OpReadEntry.updateReadPosition`), so
    /// until then the read flow sees it where the first of them started, while the trace's next
    /// read starts where this one ends.
    hold: Option<Hold>,
}

/// The cursors this replayer opened, found by trace id. The decoder numbers cursors densely, each
/// id one topic's cursor ([`Names::cursors`]), so an event finds its cursor by two indexings (a read
/// looks its cursor up several times; in a hash map per topic that was a tenth of a replay's time).
/// The index by id holds 4 bytes a trace cursor; the cursors themselves are only those opened here
/// (a broker of a multi-broker replay opens its own topics' cursors, not the trace's).
#[derive(Debug, Default)]
struct CursorTable {
    /// By trace cursor id: where that cursor is in `opened`, or [`NOT_OPENED`].
    slot_of: Vec<u32>,
    opened: Vec<Cursor>,
}

/// No slot. A replayer opens at most one cursor per id and ids are below the number of names,
/// which the decoder's u32 ids keep below 2^32, so `opened` holds at most `u32::MAX` cursors, with
/// slots below this one.
const NOT_OPENED: u32 = u32::MAX;

impl CursorTable {
    /// Cursor `id` if `topic` opened it.
    #[inline]
    fn get(&self, topic: u32, id: u32) -> Option<&Cursor> {
        let slot = *self.slot_of.get(id as usize)?;
        self.opened.get(slot as usize).filter(|c| c.topic == topic)
    }

    #[inline]
    fn get_mut(&mut self, topic: u32, id: u32) -> Option<&mut Cursor> {
        let slot = *self.slot_of.get(id as usize)?;
        self.opened
            .get_mut(slot as usize)
            .filter(|c| c.topic == topic)
    }

    /// The cursor an event names, or what stops the replay if its topic never opened it.
    #[inline]
    fn of_event(&mut self, e: &Event) -> std::result::Result<&mut Cursor, Stopped> {
        self.get_mut(e.topic, e.cursor)
            .ok_or(Stopped::UnknownCursor {
                row: e.row,
                op: e.op,
                cursor: e.cursor,
            })
    }

    /// The cursor an open names, made by `new` if it is new. `named` is how many cursors the
    /// names hold (ids are below it), which bounds the index.
    fn open(
        &mut self,
        e: &Event,
        named: usize,
        new: impl FnOnce() -> Cursor,
    ) -> std::result::Result<&mut Cursor, Stopped> {
        let id = e.cursor as usize;
        if id >= named {
            return Err(Error::invalid(
                "trace",
                format!(
                    "row {}: cursor id {} is not among the {named} cursors named",
                    e.row, e.cursor
                ),
            )
            .into());
        }
        if self.slot_of.len() <= id {
            self.slot_of.resize(named, NOT_OPENED);
        }
        let slot = match self.slot_of[id] {
            NOT_OPENED => {
                // At most one cursor per id below `named`: the slot is below NOT_OPENED.
                self.slot_of[id] = self.opened.len() as u32;
                self.opened.push(new());
                self.opened.len() - 1
            }
            slot => slot as usize,
        };
        let c = &mut self.opened[slot];
        if c.topic != e.topic {
            return Err(Stopped::CursorOfAnotherTopic {
                row: e.row,
                cursor: e.cursor,
                of: c.topic,
                named_by: e.topic,
            });
        }
        Ok(c)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Cursor> {
        self.opened.iter_mut()
    }
}

/// Where the read flow sees a cursor while reads of it are under way, and how many.
#[derive(Debug, Clone, Copy)]
struct Hold {
    at: Position,
    reads: u32,
    /// The cursor's epoch when the hold began: a seek or rewind ends it.
    epoch: u32,
}

impl Cursor {
    /// The read position as the broker's read flow sees it (see [`Cursor::hold`]).
    fn broker_read_position(&self) -> Position {
        self.hold.map_or(self.read_position, |h| h.at)
    }
}

/// A read waiting for its storage read (reads that hit the cache complete at once).
struct InFlight {
    due_ns: u64,
    topic: u32,
    cursor: u32,
    epoch: u32,
    positions: Vec<Position>,
    replay: bool,
    /// Counted in its cursor's [`Hold`]: its delivery moves the cursor on.
    holds: bool,
    /// Its copies of cache hits, kept by the design until it is delivered
    /// ([`CacheStrategy::keep_read`]; 0: none).
    kept: u64,
    /// The reads-in-flight permits it asks for, and those it holds (see `inflight.rs`).
    permits: u64,
    held: Option<u64>,
}

/// A storage read under way (reads take time): what it returns is cached when it completes, as
/// `RangeEntryCacheImpl.readFromStorage` inserts in the read's completion.
struct PendingStorageRead {
    due_ns: u64,
    topic: u32,
    ledger: i64,
    /// The first entry id of the range it reads (its key among the ranges under way).
    first: i64,
    /// The entries it reads (ids and sizes), in order.
    entries: Vec<(i64, u32)>,
    /// The cursor whose read issued it, its epoch then, and where its read position was (where
    /// the broker has it when this completes: a read reads one part after the other).
    reader: u32,
    reader_epoch: u32,
    reader_at: Position,
    /// Whether its entries are cached, and with which expected-read count.
    admission: StorageReadAdmission,
    /// The entries each read that waits for it takes (each gets copies, as the reader does).
    joined: Vec<(i64, i64)>,
    /// Its ledger was deleted meanwhile: it caches nothing.
    dropped: bool,
}

struct Topic {
    layout: Layout,
    /// Per ledger of the layout: what the trace added to it.
    entries: BTreeMap<i64, LedgerEntries>,
    /// The ids of its cursors (in [`CursorTable`]). A hash set for the order it lists them in,
    /// the order ledger deletion moves them in: the order they had as the keys of the map that
    /// held them, which Pulsar's container's counts depend on.
    cursor_ids: FastSet<u32>,
    activity: CursorActivity,
}

impl Topic {
    /// A topic the trace first names at `now` (when the broker loads it, for the lab).
    fn new(flow: &ReadFlow, now: u64) -> Self {
        Topic {
            layout: Layout::default(),
            entries: BTreeMap::new(),
            cursor_ids: FastSet::default(),
            activity: CursorActivity::new(flow.cursor_tracking(), now),
        }
    }

    /// Entries from the cursor's read position to the end, less those it acknowledged on their
    /// own (`ManagedCursorImpl.getNumberOfEntries`); the read position is the broker's, which a
    /// read under way has not moved yet.
    fn backlog(&self, c: &Cursor) -> u64 {
        let from = self.layout.normalize(c.broker_read_position());
        let added =
            |ledger: i64, first: i64| self.entries.get(&ledger).map_or(0, |l| l.count_from(first));
        let all = self
            .entries
            .range(from.ledger_id..)
            .map(|(&ledger, l)| {
                l.count_from(if ledger == from.ledger_id {
                    from.entry_id
                } else {
                    i64::MIN
                })
            })
            .fold(0u64, u64::saturating_add);
        let acked = c
            .acked
            .iter()
            .filter(|&(ledger, _, last)| Position::new(ledger, last) >= from)
            .map(|(ledger, first, last)| {
                let first = if ledger == from.ledger_id {
                    first.max(from.entry_id)
                } else {
                    first
                };
                added(ledger, first).saturating_sub(added(ledger, last.saturating_add(1)))
            })
            .fold(0u64, u64::saturating_add);
        all.saturating_sub(acked)
    }

    /// Up to `n` added entries from `from` on, as (ledger, first, last) runs. Positions the trace
    /// never added (a gap, or entries before a ledger's first add) are not entries: a read passes
    /// over them as Pulsar's read past the last confirmed entry finds nothing, so a read's work is
    /// bounded by what the trace added, never by the positions or the count it names.
    /// Appends them to `out` (a buffer the caller reuses).
    fn runs_from(&self, from: Position, n: u64, out: &mut Vec<(i64, i64, i64)>) {
        let from = self.layout.normalize(from);
        let mut left = n;
        // A tailing read is in the topic's newest ledger: nothing after it, so no range search.
        if let Some(l) = self.newest(from.ledger_id) {
            l.take(from.ledger_id, from.entry_id, &mut left, out);
            return;
        }
        for (&ledger, l) in self.entries.range(from.ledger_id..) {
            if left == 0 {
                break;
            }
            let start = if ledger == from.ledger_id {
                from.entry_id
            } else {
                i64::MIN
            };
            l.take(ledger, start, &mut left, out);
        }
    }

    /// Whether the trace added the entry at `p` (and its ledger was not deleted).
    fn contains(&self, p: Position) -> bool {
        self.entries
            .get(&p.ledger_id)
            .is_some_and(|l| l.contains(p.entry_id))
    }

    /// Puts a cursor where the read flow tracks it, if it is active; returns whether the slowest
    /// active position changed.
    fn track(&mut self, flow: &ReadFlow, cursor: u32, c: &mut Cursor) -> bool {
        // An acknowledgement past where the broker has the read position moves it on at once
        // (`ManagedCursorImpl.setAcknowledgedPosition`), a read under way or not.
        if let Some(h) = &mut c.hold {
            h.at = read_position_after_mark_delete(h.at, c.mark_delete, &self.layout);
        }
        let at = flow.tracked_position(c.broker_read_position(), c.mark_delete);
        self.activity.moved(cursor, at)
    }

    /// The entries of `ledger` (for their sizes: a run of reads looks the ledger up once).
    fn ledger(&self, ledger: i64) -> Option<&LedgerEntries> {
        self.newest(ledger).or_else(|| self.entries.get(&ledger))
    }

    /// Ledger `ledger` if it is the topic's newest, where adds and nearly all reads go: found
    /// without a search of the tree.
    fn newest(&self, ledger: i64) -> Option<&LedgerEntries> {
        self.entries
            .last_key_value()
            .filter(|(&last, _)| last == ledger)
            .map(|(_, l)| l)
    }

    /// Drops sizes no cursor will read again (unless it seeks back).
    fn forget_read_entries(&mut self, topic: u32, cursors: &CursorTable) {
        let Some(low) = self
            .cursor_ids
            .iter()
            .filter_map(|&id| cursors.get(topic, id))
            .map(|c| {
                c.replay
                    .iter()
                    .next()
                    .copied()
                    .unwrap_or(c.read_position)
                    .min(c.read_position)
            })
            .min()
        else {
            return;
        };
        for (&ledger, entries) in self.entries.iter_mut() {
            if ledger < low.ledger_id {
                entries.forget_before(i64::MAX);
            } else if ledger == low.ledger_id {
                entries.forget_before(low.entry_id);
            }
        }
    }
}

/// What a replay measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayMetrics {
    pub events: u64,
    pub entries_read: u64,
    /// Bytes of all entries read (from the cache or from storage).
    pub read_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub storage_read_ops: u64,
    pub storage_read_bytes: u64,
    pub published_entries: u64,
    pub published_bytes: u64,
    /// Entries the design's eviction removed.
    pub evicted_entries: u64,
    /// Entries invalidated (cursors passed them, the last active cursor left) or whose ledger was
    /// deleted. A broker's `brk_ml_cache_evicted_entries_total` counts both kinds
    /// (`RangeEntryCacheManagerImpl.entriesRemoved`).
    pub invalidated_entries: u64,
    pub requeues: u64,
    pub peak_cache_bytes: u64,
    /// Bytes the cached entries' buffers really hold (see [`MemoryModel`]); the accounted size
    /// when entries are copied.
    pub peak_retained_bytes: u64,
    /// Deliveries below a position already delivered since the last seek: stale reads completing
    /// after a seek, without cursor epochs.
    pub out_of_order_deliveries: u64,
    /// Reads discarded on completion because their cursor's epoch moved on.
    pub discarded_reads: u64,
    /// Reads that waited for reads-in-flight permits (`max_reads_in_flight_bytes`).
    pub reads_waited_for_permits: u64,
    /// Reads that failed for want of permits: they waited past the timeout or found the queue full.
    pub reads_failed_for_permits: u64,
    /// (second of trace time, cache bytes at its end, reads, hits in it).
    pub per_second: Vec<(i64, u64, u64, u64)>,
}

impl ReplayMetrics {
    pub fn hit_ratio(&self) -> f64 {
        if self.entries_read == 0 {
            0.0
        } else {
            self.hits as f64 / self.entries_read as f64
        }
    }
}

pub struct Replayer<S: CacheStrategy + ?Sized = dyn CacheStrategy> {
    strategy: Box<S>,
    flow: ReadFlow,
    topics: Vec<Topic>,
    cursors: CursorTable,
    /// Records the read stream (for Belady's first pass).
    recorder: Option<FutureReads>,
    /// Records every publish and read (for exporting the request stream).
    requests: Option<RequestLog>,
    /// Tracks the buffers cached slices keep alive (off when entries are copied).
    memory: Option<MemoryModel>,
    /// Storage read latency: reads that miss deliver this much later.
    read_latency_ns: u64,
    cursor_epochs: bool,
    in_flight: VecDeque<InFlight>,
    inflight: inflight::LabInflight,
    /// Storage reads under way, in completion order (latency is constant), numbered in that order
    /// from `first_storage_read` (the front's number).
    storage_reads: VecDeque<PendingStorageRead>,
    first_storage_read: u64,
    /// The entry ranges of those (first -> (last, number)), per topic and ledger: where a new read
    /// looks for the ones it waits for. They never overlap (see [`plan_storage_reads`]), so a read
    /// finds them by its range.
    storage_read_ranges: FastMap<(u32, i64), BTreeMap<i64, (i64, u64)>>,
    /// Entry lists of completed storage reads, for the next ones.
    spare_entry_lists: Vec<Vec<(i64, u32)>>,
    eviction_interval_ns: u64,
    next_tick_ns: Option<u64>,
    /// The broker's stats task (backlogged cursors, cursors caching reads) runs next at this time.
    next_backlog_check_ns: Option<u64>,
    origin_us: Option<i64>,
    /// Replay time of the event being replayed.
    now: u64,
    metrics: ReplayMetrics,
    /// The trace second in progress: (second, reads, hits).
    second: Option<(i64, u64, u64)>,
    publishes_since_forget: u32,
    /// A read's runs of entries, kept between reads so that a read allocates nothing.
    runs: Vec<(i64, i64, i64)>,
    /// `read_run`'s missed entries (ids and sizes; one ledger of one topic), kept likewise. Ids
    /// only: a key copied whole out of here is loaded as wider words than it was stored with, and
    /// such a load waits for the stores to land.
    misses: Vec<(i64, u32)>,
    /// Where each contiguous run of `misses` ends (kept likewise).
    miss_run_ends: Vec<usize>,
    /// By cursor id, as far as the decoder has told: the hash of the cursor's name
    /// ([`Names::cursor_hashes`]).
    cursor_hashes: Vec<i32>,
}

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    /// A replayer of `config`'s read flow (as the lab runs it) over `strategy`.
    pub fn new(strategy: Box<S>, config: &CacheConfig) -> Self {
        let flow = ReadFlow::new(config, Context::Lab);
        Replayer {
            next_backlog_check_ns: flow.backlog_check_interval_ns(),
            flow,
            strategy,
            topics: Vec::new(),
            cursors: CursorTable::default(),
            recorder: None,
            requests: None,
            memory: None,
            read_latency_ns: 0,
            cursor_epochs: true,
            in_flight: VecDeque::new(),
            inflight: inflight::LabInflight::new(config),
            storage_reads: VecDeque::new(),
            first_storage_read: 0,
            storage_read_ranges: FastMap::default(),
            spare_entry_lists: Vec::new(),
            eviction_interval_ns: config.eviction_interval_ms.max(1).saturating_mul(1_000_000),
            next_tick_ns: None,
            origin_us: None,
            now: 0,
            metrics: ReplayMetrics::default(),
            second: None,
            publishes_since_forget: 0,
            runs: Vec::new(),
            misses: Vec::new(),
            miss_run_ends: Vec::new(),
            cursor_hashes: Vec::new(),
        }
    }

    /// Records every read (for [`super::strategy::Belady`]'s future).
    pub fn recording(mut self) -> Self {
        self.recorder = Some(FutureReads::default());
        self
    }

    pub fn take_recording(&mut self) -> Option<FutureReads> {
        self.recorder.take()
    }

    /// Reads that miss deliver `latency_ns` later; a seek meanwhile makes them stale, and stale reads
    /// are discarded (with cursor epochs) or delivered out of order (without).
    pub fn with_read_latency(mut self, latency_ns: u64, cursor_epochs: bool) -> Self {
        self.read_latency_ns = latency_ns;
        self.cursor_epochs = cursor_epochs;
        self
    }

    /// Models the buffers cached slices retain (see [`MemoryModel`]).
    pub fn with_memory_model(mut self, model: MemoryModel) -> Self {
        self.memory = Some(model.following(self.strategy.as_mut()));
        self
    }

    /// Logs every publish and read (see [`RequestLog`]).
    pub fn logging_requests(mut self) -> Self {
        self.requests = Some(RequestLog::default());
        self
    }

    pub fn take_requests(&mut self) -> Option<RequestLog> {
        self.requests.take()
    }

    #[inline]
    fn topic(&mut self, id: u32) -> &mut Topic {
        if self.topics.len() <= id as usize {
            self.add_topics_through(id);
        }
        &mut self.topics[id as usize]
    }

    /// Topics up to `id`, the first time an event names it (kept out of [`Self::topic`], which
    /// runs several times an event, so that its usual path is a bounds check inlined).
    #[cold]
    #[inline(never)]
    fn add_topics_through(&mut self, id: u32) {
        while self.topics.len() <= id as usize {
            self.topics.push(Topic::new(&self.flow, self.now));
        }
    }

    /// Nanoseconds of replay time at the event: since the first event's `ts_us` (a broker's time
    /// never goes back, the decoder checks). Replay time is kept in `u64` nanoseconds up to
    /// `i64::MAX` (292 years), so every periodic-task time derived from it fits.
    fn now_ns(&self, e: &Event) -> Result<u64> {
        let origin = self.origin_us.unwrap_or(e.ts_us);
        let since_us = e.ts_us.saturating_sub(origin).max(0);
        since_us
            .checked_mul(1_000)
            .and_then(|ns| u64::try_from(ns).ok())
            .ok_or_else(|| {
                Error::invalid(
                    "trace",
                    format!(
                        "row {}, column \"ts_us\": {} is more than 292 years after the first \
                         event ({origin})",
                        e.row, e.ts_us
                    ),
                )
            })
    }

    /// Runs the broker's periodic tasks due up to `now`, in time order: the eviction task every
    /// `eviction_interval_ms`, the stats task's cursor checks every `backlog_check_interval_ms`.
    ///
    /// The work is bounded by the state, not by the time that passed: between two events only the
    /// tasks change anything, so after the trace's time jumps (say by years) a task that can no
    /// longer change anything is not run once per interval but skipped to its first time after
    /// `now`. A second cursor check in one call finds the same cursors and backlogs as the first
    /// (ticks move no cursor), and an eviction tick on a cache that holds nothing removes nothing
    /// (a check only ever takes entries away); both are skipped, with the same result as running them.
    fn advance(&mut self, now: u64) {
        let interval = self.eviction_interval_ns;
        let mut tick = *self.next_tick_ns.get_or_insert(interval);
        let mut checked = false;
        loop {
            let check = self.next_backlog_check_ns.filter(|at| *at <= now);
            if tick <= now && check.is_none_or(|at| tick <= at) {
                let change = self.strategy.next_tick_change_ns();
                if tick < change {
                    // The ticks before `change` change nothing: on to the first at or after it
                    // (past `now` if it is later).
                    tick = first_after(tick, interval, (change - 1).min(now));
                    continue;
                }
                self.strategy.tick(tick);
                tick = tick.saturating_add(interval);
            } else if let Some(at) = check {
                let every = self.flow.backlog_check_interval_ns();
                if checked {
                    self.next_backlog_check_ns = every.map(|i| first_after(at, i, now));
                    continue;
                }
                checked = true;
                self.next_backlog_check_ns = every.map(|i| at.saturating_add(i));
                for t in 0..self.topics.len() as u32 {
                    self.check_backlogged(t, at, None);
                }
            } else {
                break;
            }
        }
        self.next_tick_ns = Some(tick);
    }

    fn roll_second(&mut self, ts_us: i64) {
        let sec = ts_us.div_euclid(1_000_000);
        match self.second {
            Some((s, _, _)) if s == sec => {}
            Some((s, reads, hits)) => {
                self.metrics
                    .per_second
                    .push((s, self.strategy.cached_bytes(), reads, hits));
                self.second = Some((sec, 0, 0));
                if let Some(m) = &mut self.memory {
                    m.sample(self.strategy.as_mut());
                }
            }
            None => self.second = Some((sec, 0, 0)),
        }
    }

    /// Replays events in order.
    pub fn run(&mut self, events: &[Event], names: &Names) -> Result<()> {
        Replay::run(self, events, names)
    }

    /// [`Replayer::run`] without the names at hand (they may be growing on another thread, see
    /// [`super::Session`]): a cursor the trace never opened comes back by id, to be named later.
    /// `cursor_hashes` is [`Names::cursor_hashes`] as far as the decoder has got, at least up to
    /// every cursor `events` names.
    pub(crate) fn run_unnamed(
        &mut self,
        events: &[Event],
        cursor_hashes: &[i32],
    ) -> std::result::Result<(), Stopped> {
        if let Some(new) = cursor_hashes.get(self.cursor_hashes.len()..) {
            self.cursor_hashes.extend_from_slice(new);
        }
        for e in events {
            let now = self.now_ns(e)?;
            self.origin_us.get_or_insert(e.ts_us);
            self.now = now;
            self.roll_second(e.ts_us);
            self.complete_due(now);
            self.advance(now);
            self.apply(e, now)?;
            // Only an event adds to the cache; ticks and invalidations only take away.
            let cached = self.strategy.cached_bytes();
            self.metrics.peak_cache_bytes = self.metrics.peak_cache_bytes.max(cached);
            self.metrics.events += 1;
        }
        Ok(())
    }

    /// The topic an event names (made if new) and the cursor it names, or what stops the replay
    /// if that topic never opened it.
    fn topic_and_cursor(
        &mut self,
        e: &Event,
    ) -> std::result::Result<(&mut Topic, &mut Cursor), Stopped> {
        self.topic(e.topic);
        let c = self.cursors.of_event(e)?;
        Ok((&mut self.topics[e.topic as usize], c))
    }

    /// The position of an op that needs one (the decoder never makes such an event without it).
    fn position_of(e: &Event) -> Result<Position> {
        e.position.ok_or_else(|| {
            Error::invalid(
                "trace",
                format!("row {}: {:?} needs a position", e.row, e.op.name()),
            )
        })
    }

    fn apply(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        match e.op {
            Op::Add => {
                let p = Self::position_of(e)?;
                // One past the entry: the ledger's end. Entry ids are 0..2^63-1, so that the end
                // (and every count of entries) fits.
                let end = p
                    .entry_id
                    .checked_add(1)
                    .and_then(|end| u64::try_from(end).ok())
                    .filter(|end| *end > 0)
                    .ok_or_else(|| {
                        Error::invalid(
                            "trace",
                            format!(
                                "row {}, column \"entry_id\": an add's entry must be in 0..={}, got {}",
                                e.row,
                                i64::MAX - 1,
                                p.entry_id
                            ),
                        )
                    })?;
                let t = self.topic(e.topic);
                match t.layout.ledgers.last_mut() {
                    Some(l) if l.id == p.ledger_id => {
                        l.entries = l.entries.max(end);
                        l.bytes = l.bytes.saturating_add(u64::from(e.size));
                    }
                    Some(l) if l.id > p.ledger_id => {
                        return Err(Error::invalid(
                            "trace",
                            format!(
                                "row {}: add to ledger {} after ledger {}",
                                e.row, p.ledger_id, l.id
                            ),
                        )
                        .into())
                    }
                    _ => t.layout.ledgers.push(LedgerInfo {
                        id: p.ledger_id,
                        entries: end,
                        bytes: u64::from(e.size),
                    }),
                }
                let newest = t.newest(p.ledger_id).is_some();
                let ledger = match t.entries.last_entry() {
                    Some(last) if newest => last.into_mut(),
                    _ => t.entries.entry(p.ledger_id).or_default(),
                };
                ledger.add(p.entry_id, e.size);
                let admitted = self
                    .flow
                    .on_add(&self.topics[e.topic as usize].activity, now);
                let key = EntryKey {
                    topic: e.topic,
                    position: p,
                };
                if let Some(log) = &mut self.requests {
                    log.record(e.ts_us, key, e.size, false);
                }
                let watch = match &mut self.memory {
                    Some(m) => m.on_publish(e.ts_us, e.topic, p, e.size),
                    None => None,
                };
                match (admitted, watch) {
                    // The entry starts a buffer the model follows: the design may watch it as it
                    // caches it, sparing the model a lookup at its next sample.
                    (Some(expected), Some(token)) => {
                        if self
                            .strategy
                            .insert_watched(now, key, e.size, expected, token)
                        {
                            if let Some(m) = &mut self.memory {
                                m.front_watched(token);
                            }
                        }
                    }
                    (Some(expected), None) => self.strategy.insert(now, key, e.size, expected),
                    (None, _) => {}
                }
                self.metrics.published_entries += 1;
                self.metrics.published_bytes += e.size as u64;
                self.publishes_since_forget += 1;
                if self.publishes_since_forget >= 4096 {
                    self.publishes_since_forget = 0;
                    for (id, t) in (0u32..).zip(&mut self.topics) {
                        t.forget_read_entries(id, &self.cursors);
                    }
                }
            }
            Op::Open => {
                // The table is bounded by the names (an id past them is refused).
                let named = self.cursor_hashes.len();
                self.topic(e.topic);
                let t = &mut self.topics[e.topic as usize];
                let start = match e.position {
                    Some(p) => t.layout.normalize(p),
                    None => t.layout.end(),
                };
                let mark_delete = t.layout.before(start);
                let c = self.cursors.open(e, named, || Cursor {
                    topic: e.topic,
                    read_position: start,
                    connected: false,
                    mark_delete,
                    acked: AckedRanges::default(),
                    replay: BTreeSet::new(),
                    epoch: 0,
                    delivered_high: None,
                    hold: None,
                })?;
                if e.position.is_some() {
                    c.read_position = start;
                }
                c.connected = true;
                // Inserted only if new: the set's insert makes room before it looks (the map
                // that held the cursors before made room only for a new key), so a re-open of a
                // topic whose set is full would grow it and change the order deletion moves the
                // cursors in.
                if !t.cursor_ids.contains(&e.cursor) {
                    t.cursor_ids.insert(e.cursor);
                }
                // Below `named`: `open` refused the id otherwise.
                t.activity
                    .name(e.cursor, self.cursor_hashes[e.cursor as usize]);
                self.check_backlogged(e.topic, now, Some(e.cursor));
            }
            Op::Close => {
                let (t, c) = self.topic_and_cursor(e)?;
                c.connected = false;
                // Its last consumer left: the dispatcher drops its replay queue
                // (`PersistentDispatcherMultipleConsumers.clearComponentsAfterRemovedAllConsumers`).
                c.replay.clear();
                if t.activity.deactivate(e.cursor, now) {
                    self.invalidate(e.topic);
                }
            }
            Op::Read => {
                let mut runs = std::mem::take(&mut self.runs);
                runs.clear();
                let (t, c) = self.topic_and_cursor(e)?;
                let (from, epoch) = (c.read_position, c.epoch);
                let skip_to =
                    unacked_runs(&c.acked, from, u64::from(e.count), &t.layout, t, &mut runs);
                let read_before = (self.metrics.entries_read, self.metrics.read_bytes);
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
                            permits: inflight::permits_for(
                                self.metrics.entries_read - read_before.0,
                                self.metrics.read_bytes - read_before.1,
                            ),
                            held: None,
                        },
                        missed,
                    );
                }
            }
            Op::Replay => {
                let p = Self::position_of(e)?;
                let (t, c) = self.topic_and_cursor(e)?;
                c.replay.remove(&p);
                let epoch = c.epoch;
                if t.contains(p) {
                    let read_before = (self.metrics.entries_read, self.metrics.read_bytes);
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
                            permits: inflight::permits_for(
                                self.metrics.entries_read - read_before.0,
                                self.metrics.read_bytes - read_before.1,
                            ),
                            held: None,
                        },
                        missed,
                    );
                }
            }
            Op::Redeliver => {
                let p = Self::position_of(e)?;
                let c = self.topic_and_cursor(e)?.1;
                if c.replay.insert(p) && self.flow.redelivery_adds_read(e.reason) {
                    self.strategy.add_expected_read(EntryKey {
                        topic: e.topic,
                        position: p,
                    });
                }
            }
            Op::Ack => {
                let p = Self::position_of(e)?;
                let (t, c) = self.topic_and_cursor(e)?;
                if !mark_delete_allowed(p, &t.layout) {
                    // A broker fails such a mark-delete: the cursor stays as it is.
                    return Ok(());
                }
                mark_delete_over(
                    &mut c.acked,
                    &mut c.replay,
                    &mut c.mark_delete,
                    &mut c.read_position,
                    p,
                    &t.layout,
                );
                self.cursor_moved(e.topic, e.cursor);
            }
            Op::IndividualAck => {
                let p = Self::position_of(e)?;
                let (t, c) = self.topic_and_cursor(e)?;
                let last = p.entry_id.saturating_add(i64::from(e.count.max(1)) - 1);
                ack_individually(
                    &mut c.acked,
                    &mut c.replay,
                    &mut c.mark_delete,
                    &mut c.read_position,
                    (p.ledger_id, p.entry_id, last),
                    &t.layout,
                );
                self.cursor_moved(e.topic, e.cursor);
            }
            Op::Rewind => {
                let (t, c) = self.topic_and_cursor(e)?;
                // `ManagedCursorImpl.rewind`: the dispatcher drops the reads under way
                // (`PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages`).
                c.read_position = t.layout.next_after(c.mark_delete);
                c.epoch = c.epoch.wrapping_add(1);
                c.delivered_high = None;
                c.hold = None;
                self.cursor_moved(e.topic, e.cursor);
            }
            Op::Seek => {
                let p = Self::position_of(e)?;
                let (t, c) = self.topic_and_cursor(e)?;
                let start = t.layout.normalize(p);
                let before_start = mark_delete_after_reset(start, &t.layout);
                // A seek is a reset (`ManagedCursorImpl.internalResetCursor`): the mark-delete
                // position goes to the entry before the new read position, back or forward.
                c.mark_delete = before_start;
                c.read_position = start;
                c.acked.clear();
                c.replay.clear();
                c.epoch = c.epoch.wrapping_add(1);
                c.delivered_high = None;
                c.hold = None;
                self.cursor_moved(e.topic, e.cursor);
            }
            Op::Delete => {
                let ledger = Self::position_of(e)?.ledger_id;
                let t = self.topic(e.topic);
                t.layout.ledgers.retain(|l| l.id != ledger);
                t.entries.remove(&ledger);
                let t = &self.topics[e.topic as usize];
                let ids: Vec<u32> = t.cursor_ids.iter().copied().collect();
                let layout = &t.layout;
                for &id in &ids {
                    let Some(c) = self.cursors.get_mut(e.topic, id) else {
                        continue;
                    };
                    c.read_position = layout.normalize(c.read_position);
                    if let Some(h) = &mut c.hold {
                        h.at = layout.normalize(h.at);
                    }
                    c.mark_delete = mark_delete_after_ledger_deleted(
                        c.mark_delete,
                        c.read_position,
                        ledger,
                        layout,
                    );
                    c.replay.retain(|p| p.ledger_id != ledger);
                    c.acked.remove_ledger(ledger);
                }
                // The lab caches nothing of a ledger that is gone, so its storage reads under way
                // are dropped (a broker deletes only ledgers every cursor has passed).
                for r in &mut self.storage_reads {
                    if (r.topic, r.ledger) == (e.topic, ledger) {
                        r.dropped = true;
                    }
                }
                self.storage_read_ranges.remove(&(e.topic, ledger));
                self.strategy.on_ledger_deleted(e.topic, ledger);
                for id in ids {
                    self.cursor_moved(e.topic, id);
                }
            }
        }
        Ok(())
    }

    /// A cursor's read or mark-delete position moved: the read flow tracks it there, and the
    /// designs that drop what the slowest cursor passed do so.
    fn cursor_moved(&mut self, topic: u32, cursor: u32) {
        // A flow that never asks where cursors are (the reference designs, the segmented ring)
        // would keep a position heap up to date on every read for nothing.
        if !self.flow.reads_cursor_positions() {
            return;
        }
        let Some(c) = self.cursors.get_mut(topic, cursor) else {
            return;
        };
        if self.topics[topic as usize].track(&self.flow, cursor, c) {
            self.invalidate(topic);
        }
    }

    fn invalidate(&mut self, topic: u32) {
        let t = &mut self.topics[topic as usize];
        match self.flow.invalidation(&mut t.activity) {
            Invalidation::Nothing => {}
            how => self.strategy.invalidate(topic, how),
        }
    }

    /// The broker's check of which cursors count as active and which cache their reads: for one
    /// cursor when a consumer connects, for every cursor of the topic on the stats task.
    fn check_backlogged(&mut self, topic: u32, now: u64, only: Option<u32>) {
        // In the order cursors were opened (the library's order too); each one that leaves
        // invalidates at once, as `setInactive` does.
        let mut ids: Vec<u32> = match only {
            Some(id) => vec![id],
            None => self.topics[topic as usize]
                .cursor_ids
                .iter()
                .copied()
                .collect(),
        };
        ids.sort_unstable();
        for &id in &ids {
            let t = &mut self.topics[topic as usize];
            let Some(c) = self.cursors.get(topic, id) else {
                continue;
            };
            if self.flow.active_with_backlog(c.connected, t.backlog(c)) {
                let at = self
                    .flow
                    .tracked_position(c.broker_read_position(), c.mark_delete);
                t.activity.activate(id, at);
            } else if t.activity.deactivate(id, now) {
                self.invalidate(topic);
            }
        }
        if only.is_none() {
            let t = &mut self.topics[topic as usize];
            let backlogs: Vec<(u32, u64)> = ids
                .iter()
                .filter_map(|&id| Some((id, t.backlog(self.cursors.get(topic, id)?))))
                .collect();
            for (id, on) in self
                .flow
                .cursors_caching_reads(&backlogs)
                .into_iter()
                .flatten()
            {
                t.activity.set_cache_read_entry(id, on);
            }
        }
    }

    /// One cursor reads `first..=end` of a ledger: first every hit from the cache, then each
    /// contiguous run of misses as one storage read (all of it, when the design serves ranges all
    /// or nothing and some entry is missing), as `RangeEntryCacheImpl` does within one ledger.
    /// Returns whether any entry missed (a storage read was needed).
    #[allow(clippy::too_many_arguments)]
    fn read_run(
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
            if let Some((_, reads, hits)) = &mut self.second {
                *reads += 1;
                *hits += hit as u64;
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
    fn complete_read(&mut self, mut read: InFlight, missed: bool) {
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
    fn complete_due(&mut self, now: u64) {
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
    fn dispatch(&mut self, mut read: InFlight) {
        let (kept, held, at) = (read.kept, read.held.take(), read.due_ns);
        self.deliver(read);
        if kept != 0 {
            self.strategy.release_kept(kept);
        }
        if let Some(permits) = held {
            self.release_permits(permits, at);
        }
    }

    fn deliver(&mut self, read: InFlight) {
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

    /// The storage reads of a missed run (entries of `ledger` and their sizes); the read flow
    /// decides whether what each returns is cached. Without read latency it is one storage read,
    /// cached at once. With it, the run waits for the storage reads under way that share entries
    /// with it and reads the rest itself (the rule in [`plan_storage_reads`]); what a storage read
    /// returns is cached when it completes.
    fn flush_misses(
        &mut self,
        topic: u32,
        ledger: i64,
        cursor: u32,
        kind: ReadKind,
        run: &[(i64, u32)],
        now: u64,
    ) {
        let (Some(&(first, _)), Some(&(last, _))) = (run.first(), run.last()) else {
            return;
        };
        if self.read_latency_ns == 0 {
            // It completes as it is issued, with the reader where it was.
            let admission = self.count_storage_read(topic, cursor, kind, run);
            let admitted =
                admission.on_completion(&mut self.topics[topic as usize].activity, cursor);
            self.cache_storage_read(now, topic, ledger, run, &[], admitted);
            return;
        }
        let under_way = self.storage_read_ranges.get(&(topic, ledger));
        // The one starting before the run that may reach into it, then those starting in it.
        let before = under_way.and_then(|m| m.range(..first).next_back());
        let within = under_way.into_iter().flat_map(|m| m.range(first..=last));
        let meeting = before.into_iter().chain(within);
        let plan = plan_storage_reads(
            meeting.map(|(&a, &(b, number))| (number, (a, b))),
            (first, last),
        );
        for (number, served) in plan.joined {
            // Numbered from the front, which is still there (`number` is under way).
            let at = number.wrapping_sub(self.first_storage_read) as usize;
            if let Some(r) = self.storage_reads.get_mut(at) {
                r.joined.push(served);
            }
        }
        // Where the reader is as this run is read: where the broker has it when each part
        // completes.
        let (reader_epoch, reader_at) = self
            .cursors
            .get(topic, cursor)
            .map_or((0, Position::new(ledger, first)), |c| {
                (c.epoch, c.read_position)
            });
        for (from, to) in plan.issued {
            let start = run.partition_point(|&(e, _)| e < from);
            let end = run.partition_point(|&(e, _)| e <= to);
            let part = &run[start..end];
            if part.is_empty() {
                continue;
            }
            let admission = self.count_storage_read(topic, cursor, kind, part);
            let mut entries = self.spare_entry_lists.pop().unwrap_or_default();
            entries.extend_from_slice(part);
            let number = self
                .first_storage_read
                .wrapping_add(self.storage_reads.len() as u64);
            self.storage_read_ranges
                .entry((topic, ledger))
                .or_default()
                .insert(from, (to, number));
            self.storage_reads.push_back(PendingStorageRead {
                due_ns: now.saturating_add(self.read_latency_ns),
                topic,
                ledger,
                first: from,
                entries,
                reader: cursor,
                reader_epoch,
                reader_at,
                admission,
                joined: Vec::new(),
                dropped: false,
            });
        }
    }

    /// Counts a storage read of `entries` as it is issued and asks the read flow whether what it
    /// returns is cached, as far as that is known now.
    fn count_storage_read(
        &mut self,
        topic: u32,
        cursor: u32,
        kind: ReadKind,
        entries: &[(i64, u32)],
    ) -> StorageReadAdmission {
        self.metrics.storage_read_ops += 1;
        self.metrics.storage_read_bytes +=
            entries.iter().map(|&(_, size)| size as u64).sum::<u64>();
        let activity = &self.topics[topic as usize].activity;
        self.flow.on_storage_read_issued(kind, activity, cursor)
    }

    /// Completes the first storage read under way, after the periodic tasks due before it: what it
    /// returned is cached, and the copies of its reader and of the reads that waited for it are
    /// released (they are dispatched).
    fn complete_storage_read(&mut self) {
        let Some(mut r) = self.storage_reads.pop_front() else {
            return;
        };
        self.first_storage_read = self.first_storage_read.wrapping_add(1);
        if r.dropped {
            return;
        }
        if let Entry::Occupied(mut ranges) = self.storage_read_ranges.entry((r.topic, r.ledger)) {
            ranges.get_mut().remove(&r.first);
            if ranges.get().is_empty() {
                ranges.remove();
            }
        }
        self.advance(r.due_ns);
        // The broker reads a read's parts one after the other, each once the one before completed
        // and moved the read position: its reader is where this part started.
        if let Some(h) = self
            .cursors
            .get_mut(r.topic, r.reader)
            .and_then(|c| c.hold.as_mut())
            .filter(|h| h.epoch == r.reader_epoch && h.at < r.reader_at)
        {
            h.at = r.reader_at;
            self.cursor_moved(r.topic, r.reader);
        }
        let activity = &mut self.topics[r.topic as usize].activity;
        let admitted = r.admission.on_completion(activity, r.reader);
        self.cache_storage_read(r.due_ns, r.topic, r.ledger, &r.entries, &r.joined, admitted);
        self.strategy.end_read();
        r.entries.clear();
        self.spare_entry_lists.push(r.entries);
        let cached = self.strategy.cached_bytes();
        self.metrics.peak_cache_bytes = self.metrics.peak_cache_bytes.max(cached);
    }

    /// What a storage read of `entries` (ids and sizes) of `ledger` returned at `now`: its buffers,
    /// and its entries if the read flow admitted them (with that expected-read count), each with a
    /// copy for its reader and for each read that waited for it (`joined`: the entries each takes;
    /// `PendingReadsManager` hands those copies sharing the entry's read counter).
    fn cache_storage_read(
        &mut self,
        now: u64,
        topic: u32,
        ledger: i64,
        entries: &[(i64, u32)],
        joined: &[(i64, i64)],
        admitted: Option<i32>,
    ) {
        if let Some(m) = &mut self.memory {
            m.on_storage_read(topic, ledger, entries);
        }
        if let Some(expected) = admitted {
            // How many reads take each entry, its reader's included: each read that waited adds
            // one over its range (a sweep, not a scan of the reads per entry).
            let mut starts = vec![0i64; entries.len() + 1];
            for &(a, b) in joined {
                let from = entries.partition_point(|&(e, _)| e < a);
                let to = entries.partition_point(|&(e, _)| e <= b);
                starts[from] += 1;
                starts[to] -= 1;
            }
            let mut waiting = 0i64;
            for (&(entry, size), &start) in entries.iter().zip(&starts) {
                waiting += start;
                let key = EntryKey {
                    topic,
                    position: Position::new(ledger, entry),
                };
                let copies = u32::try_from(waiting).map_or(u32::MAX, |w| w.saturating_add(1));
                self.strategy.insert_read(now, key, size, expected, copies);
            }
        }
    }

    /// Ends the replay and returns its measurements.
    pub fn finish(mut self) -> ReplayMetrics {
        // The trace ends here: storage reads still under way cache nothing, and the reads under
        // way are delivered (for the counts of stale and out-of-order deliveries) with no periodic
        // task after the last event and the cursors where they are.
        self.storage_reads.clear();
        for c in self.cursors.iter_mut() {
            c.hold = None;
        }
        while let Some(read) = self.in_flight.pop_front() {
            self.dispatch(read);
        }
        if let Some((s, reads, hits)) = self.second.take() {
            self.metrics
                .per_second
                .push((s, self.strategy.cached_bytes(), reads, hits));
        }
        self.metrics.peak_retained_bytes = match &mut self.memory {
            Some(m) => {
                m.sample(self.strategy.as_mut());
                m.peak_retained
            }
            None => self.metrics.peak_cache_bytes,
        };
        let c = self.strategy.counters();
        self.metrics.evicted_entries = c.evicted_entries;
        self.metrics.invalidated_entries = c.invalidated_entries;
        self.metrics.requeues = c.requeues;
        self.metrics
    }
}

/// A [`Replayer`] of any strategy, as a [`super::Session`] holds its runs: the engine is compiled
/// for each strategy, so that its calls into the strategy, several per event, are direct (and may
/// be inlined) rather than through a vtable, and only a batch of events is dispatched dynamically.
pub(crate) trait Replay: Send {
    fn run_unnamed(
        &mut self,
        events: &[Event],
        cursor_hashes: &[i32],
    ) -> std::result::Result<(), Stopped>;
    /// Replays events in order; a cursor the trace never opened is named from `names`.
    ///
    /// Events built by hand may open a cursor id on a topic other than the one `names` gives it
    /// (the decoder's events cannot): such an open is refused here, naming its row, before
    /// anything is replayed. The engine itself knows a cursor's topic from the id's first open
    /// only, and would blame the id's next open instead.
    fn run(&mut self, events: &[Event], names: &Names) -> Result<()> {
        for e in events.iter().filter(|e| e.op == Op::Open) {
            if let Some(&(owner, _)) = names.cursors.get(e.cursor as usize) {
                if owner != e.topic {
                    let refused = Stopped::CursorOfAnotherTopic {
                        row: e.row,
                        cursor: e.cursor,
                        of: owner,
                        named_by: e.topic,
                    };
                    return Err(refused.named(names));
                }
            }
        }
        self.run_unnamed(events, &names.cursor_hashes)
            .map_err(|s| s.named(names))
    }
    fn take_recording(&mut self) -> Option<FutureReads>;
    /// Logs every publish and read from now on (see [`RequestLog`]).
    fn log_requests(&mut self);
    fn take_requests(&mut self) -> Option<RequestLog>;
    fn finish(self: Box<Self>) -> ReplayMetrics;
}

impl<S: CacheStrategy + ?Sized> Replay for Replayer<S> {
    fn run_unnamed(
        &mut self,
        events: &[Event],
        cursor_hashes: &[i32],
    ) -> std::result::Result<(), Stopped> {
        Replayer::run_unnamed(self, events, cursor_hashes)
    }

    fn take_recording(&mut self) -> Option<FutureReads> {
        Replayer::take_recording(self)
    }

    fn log_requests(&mut self) {
        self.requests = Some(RequestLog::default());
    }

    fn take_requests(&mut self) -> Option<RequestLog> {
        Replayer::take_requests(self)
    }

    fn finish(self: Box<Self>) -> ReplayMetrics {
        Replayer::finish(*self)
    }
}

/// The first time after `now` of a task due at `at` and every `every` ns after (`at` itself if it
/// is after `now`), saturating at `u64::MAX` (never, as replay time stays below `i64::MAX`).
fn first_after(at: u64, every: u64, now: u64) -> u64 {
    if at > now {
        return at;
    }
    let every = every.max(1);
    let steps = (now - at) / every + 1;
    at.saturating_add(steps.saturating_mul(every))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::read_flow::RedeliveryReason;

    fn open_of(topic: u32, cursor: u32) -> Event {
        Event {
            row: u64::from(cursor),
            broker: 0,
            ts_us: 0,
            op: Op::Open,
            topic,
            cursor,
            position: None,
            count: 0,
            size: 0,
            reason: RedeliveryReason::Unspecified,
        }
    }

    fn cursor_of(topic: u32) -> Cursor {
        Cursor {
            topic,
            read_position: Position::new(0, 0),
            connected: false,
            mark_delete: Position::new(0, -1),
            acked: AckedRanges::default(),
            replay: BTreeSet::new(),
            epoch: 0,
            delivered_high: None,
            hold: None,
        }
    }

    /// A replayer of a multi-broker replay opens its own topics' cursors among all the trace's:
    /// it holds those, plus an index of 4 bytes a trace cursor, not a cursor slot for every one.
    #[test]
    fn the_table_holds_the_cursors_opened_not_every_cursor_named() {
        const NAMED: usize = 100_000;
        let mut table = CursorTable::default();
        for id in [99_999, 7, 50_000, 7] {
            let topic = id % 3;
            let c = table.open(&open_of(topic, id), NAMED, || cursor_of(topic));
            assert_eq!(c.map(|c| c.topic).ok(), Some(topic));
        }
        assert_eq!(
            table.opened.len(),
            3,
            "one cursor per id opened, a re-open adds none"
        );
        assert_eq!(table.slot_of.len(), NAMED);
        // The memory: an index entry per name, a cursor per open (a cursor per name was 15 MB).
        let held = table.slot_of.capacity() * std::mem::size_of::<u32>()
            + table.opened.capacity() * std::mem::size_of::<Cursor>();
        assert!(held <= NAMED * std::mem::size_of::<u32>() + 4 * std::mem::size_of::<Cursor>());
        for id in [99_999u32, 7, 50_000] {
            assert_eq!(table.get(id % 3, id).map(|c| c.topic), Some(id % 3));
            assert!(table.get(id % 3 + 1, id).is_none(), "another topic's id");
        }
        assert!(table.get(0, 0).is_none() && table.get(0, NAMED as u32).is_none());
        assert!(matches!(
            table.open(&open_of(1, 99_999), NAMED, || cursor_of(1)),
            Err(Stopped::CursorOfAnotherTopic {
                of: 0,
                named_by: 1,
                ..
            })
        ));
        assert_eq!(table.opened.len(), 3);
    }
}
