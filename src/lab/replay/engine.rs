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
use crate::broker::read_flow::{Context, ReadFlow};
use crate::cache::fast_hash::FastMap;
use crate::config::CacheConfig;
use crate::error::Result;
use cursors::{Cursor, CursorTable};
use reads::InFlight;
use std::collections::{BTreeMap, VecDeque};
use storage_reads::PendingStorageRead;
use topic::Topic;

mod cursor_ops;
mod cursors;
mod decode;
mod inflight;
mod lifecycle;
mod metrics;
mod publish;
mod reads;
mod stopped;
mod storage_reads;
mod topic;

pub use metrics::{PerSecond, ReplayMetrics, Warmth, WARM_BASELINE_SECONDS, WARM_TOLERANCE};
pub(crate) use stopped::Stopped;

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
    /// The trace second in progress.
    second: Option<PerSecond>,
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

    /// One handler per op of the trace ([`Op`]).
    fn apply(&mut self, e: &Event, now: u64) -> std::result::Result<(), Stopped> {
        match e.op {
            Op::Add => self.on_add(e, now),
            Op::Open => self.on_open(e, now),
            Op::Close => self.on_close(e, now),
            Op::Read => self.on_read(e, now),
            Op::Replay => self.on_replay(e, now),
            Op::Redeliver => self.on_redeliver(e),
            Op::Ack => self.on_ack(e),
            Op::IndividualAck => self.on_individual_ack(e),
            Op::Rewind => self.on_rewind(e),
            Op::Seek => self.on_seek(e),
            Op::Delete => self.on_delete(e),
            Op::Unload => self.on_unload(e, now),
            Op::Load => self.on_load(e, now),
        }
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
