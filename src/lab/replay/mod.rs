//! The replay lab: one broker's trace through cache designs, measured.

pub mod engine;
pub mod memory;
mod plain_keys;
pub mod requests;
pub mod strategy;
pub mod summary;
#[cfg(test)]
mod toy_design;
pub mod trace;
pub mod trace_schema;

use engine::{Replay, Stopped};
pub use engine::{ReplayMetrics, Replayer};
pub use trace::{Event, Names, Op, TraceDecoder};

use crate::config::{CacheConfig, Strategy};
use crate::error::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::RecordBatch;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use strategy::{belady, first_pass, CacheStrategy, FutureReads};

/// The replayer of `config`'s read flow over `strategy`, without the memory model.
pub(crate) fn bare_replayer<S: CacheStrategy + ?Sized>(
    config: &CacheConfig,
    strategy: Box<S>,
) -> Replayer<S> {
    Replayer::new(strategy, config).with_read_latency(
        config.storage_read_latency_ms.saturating_mul(1_000_000),
        config.cursor_epochs,
    )
}

pub(crate) fn replayer<S: CacheStrategy + ?Sized>(
    config: &CacheConfig,
    strategy: Box<S>,
) -> Replayer<S> {
    let r = bare_replayer(config, strategy);
    if config.copy_entries || !config.memory_model {
        return r;
    }
    r.with_memory_model(memory::MemoryModel::new(
        config.recv_buffer_min_bytes,
        config.recv_buffer_initial_bytes,
        config.recv_buffer_max_bytes,
        config.storage_read_buffer_bytes,
    ))
}

/// Belady's deciding pass, over the reads its first pass recorded.
fn second_pass(config: &CacheConfig, future: FutureReads) -> Box<dyn Replay> {
    Box::new(replayer(config, belady(config.cache_size_bytes, future)))
}

/// Replays decoded events under `config` (both passes for Belady).
pub fn replay(events: &[Event], names: &Names, config: &CacheConfig) -> Result<ReplayMetrics> {
    let mut r = first_pass(config)?;
    r.run(events, names)?;
    if let Some(future) = r.take_recording() {
        r = second_pass(config, future);
        r.run(events, names)?;
    }
    Ok(r.finish())
}

/// Records the request stream of a trace (publishes and reads), batch by batch, as the replay
/// under one configuration touches the cache: a range read takes its hits before its misses, so
/// the order within a read depends on the design and its size. Belady needs the trace twice
/// ([`RequestRecorder::needs_second_pass`]); its deciding pass is the one logged.
pub struct RequestRecorder {
    config: CacheConfig,
    decoder: TraceDecoder,
    replayer: Box<dyn Replay>,
    second: bool,
    events: Vec<Event>,
}

impl Default for RequestRecorder {
    /// A cache that holds nothing: every read misses, so each read's entries come in their order.
    fn default() -> Self {
        Self::new(&request_log_config()).expect("the default recorder's configuration is valid")
    }
}

/// The reference designs' read flow over a cache that holds nothing.
fn request_log_config() -> CacheConfig {
    CacheConfig {
        strategy: Strategy::Lru,
        cache_size_bytes: 0,
        ..CacheConfig::default()
    }
}

impl RequestRecorder {
    /// Records the stream the replay under `config` sees (its memory model left out: it measures
    /// buffers and changes no hit).
    pub fn new(config: &CacheConfig) -> Result<Self> {
        let config = CacheConfig {
            memory_model: false,
            ..config.clone()
        };
        let mut replayer = first_pass(&config)?;
        // A two-pass design's first pass only records the reads; its deciding pass is the stream.
        if !config.strategy.design().reads_trace_twice {
            replayer.log_requests();
        }
        Ok(RequestRecorder {
            config,
            decoder: TraceDecoder::new(),
            replayer,
            second: false,
            events: Vec::new(),
        })
    }

    pub fn feed(&mut self, batch: &RecordBatch) -> Result<()> {
        self.feed_checked(batch, &mut || Ok(()))
    }

    /// [`RequestRecorder::feed`], calling `check` every [`CHECK_EVERY`] events (see
    /// [`Session::feed_checked`]).
    pub fn feed_checked(
        &mut self,
        batch: &RecordBatch,
        check: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        self.events.clear();
        self.decoder.decode(batch, &mut self.events)?;
        for chunk in self.events.chunks(CHECK_EVERY) {
            check()?;
            self.replayer.run(chunk, &self.decoder.names)?;
        }
        Ok(())
    }

    /// A two-pass design (Belady): the trace was fed once and must be fed again (its deciding pass
    /// is the stream).
    pub fn needs_second_pass(&self) -> bool {
        !self.second && self.config.strategy.design().reads_trace_twice
    }

    /// Starts Belady's deciding pass: feed the same trace again.
    pub fn start_second_pass(&mut self) {
        self.second = true;
        self.decoder = TraceDecoder::new();
        if let Some(future) = self.replayer.take_recording() {
            self.replayer = second_pass(&self.config, future);
            self.replayer.log_requests();
        }
    }

    pub fn finish(mut self) -> requests::RequestLog {
        self.replayer.take_requests().unwrap_or_default()
    }
}

struct Run {
    config: CacheConfig,
    replayer: Box<dyn Replay>,
    /// Belady: the first pass (recording) is done and the second is running.
    second_pass: bool,
    busy: Duration,
}

/// How many events a [`Session`] replays between two calls of its interrupt check.
pub const CHECK_EVERY: usize = 16_384;

/// With decoding ahead, how many rows of a batch are decoded at a time: the engine replays one
/// slice while the next is decoded. Large enough that the hand-over costs nothing per row, small
/// enough that the slices in flight stay in the CPU's caches.
pub const DECODE_SLICE_ROWS: usize = 4_096;

/// How many decoded slices may wait for the replay (one more is being decoded), as long as they
/// hold at most [`DECODE_AHEAD_ROWS`] rows. The decoder is about three times as fast as the
/// replay, but on a shared machine its thread is sometimes held up for milliseconds; with one
/// slice waiting, the replay then waited for it (9% of its time on a 6 M-event trace of the
/// replay bench, against 4% with sixteen).
pub const DECODE_AHEAD_SLICES: usize = 16;

/// How many decoded rows may be out (waiting for the replay or being replayed) before the decoder
/// waits: 4 MiB of events. Slices can be much longer than [`DECODE_SLICE_ROWS`] (a batch with a
/// long dictionary), so slices alone would not bound the memory; two slices may be out whatever
/// their length, so that even a slice over the budget is decoded while the one before replays.
pub const DECODE_AHEAD_ROWS: usize = DECODE_AHEAD_SLICES * DECODE_SLICE_ROWS;

/// Replays a trace, fed batch by batch, under several configurations at once, each broker on its
/// own; the trace is decoded once and never held in memory whole. Belady needs the trace twice:
/// after the first feed, [`Session::needs_second_pass`] says whether to feed it again.
///
/// By default a batch of more than one slice ([`DECODE_SLICE_ROWS`] rows, more for a batch with
/// long dictionaries) is decoded on a second thread, up to [`DECODE_AHEAD_SLICES`] slices and
/// [`DECODE_AHEAD_ROWS`] rows ahead of the replay ([`Session::decode_ahead`]). The decoder and
/// each replay still see the events in trace order, so the results, and the error a bad batch
/// ends with, are the same either way.
pub struct Session {
    decoder: TraceDecoder,
    configs: Vec<CacheConfig>,
    /// Per broker (decoder order), a run per configuration.
    runs: Vec<Vec<Run>>,
    events: Vec<Event>,
    by_broker: Vec<Vec<Event>>,
    second: bool,
    decode_ahead: bool,
}

/// What a [`Session`] replays decoded events with: everything but the decoder, so that the decoder
/// can work on another thread meanwhile.
struct Replays<'s> {
    configs: &'s [CacheConfig],
    runs: &'s mut Vec<Vec<Run>>,
    by_broker: &'s mut Vec<Vec<Event>>,
    second: bool,
}

/// Why [`Replays::replay`] stopped, ranked as the one-thread path meets them: it checks the brokers
/// of the whole batch first, then replays broker by broker.
enum Failure {
    /// `check` asked to stop (an interrupt): ends the feed at once.
    Interrupted(Error),
    /// The batch cannot be replayed at all (a broker the first pass did not have).
    Batch(Stopped),
    /// A broker's replay failed.
    Broker(usize, Stopped),
}

impl Failure {
    fn into_stopped(self) -> Stopped {
        match self {
            Failure::Interrupted(e) => Stopped::Failed(e),
            Failure::Batch(s) | Failure::Broker(_, s) => s,
        }
    }
}

impl Replays<'_> {
    /// Replays `events` (decoded while the decoder had seen `brokers` brokers, and the cursor
    /// name hashes of [`Names::cursor_hashes`] so far) under every configuration still running
    /// this pass, each broker's events on their own, the brokers numbered `below` and up left
    /// out.
    fn replay(
        &mut self,
        events: &[Event],
        cursor_hashes: &[i32],
        brokers: usize,
        below: usize,
        check: &mut dyn FnMut() -> Result<()>,
    ) -> std::result::Result<(), Failure> {
        for list in self.by_broker.iter_mut() {
            list.clear();
        }
        // One broker so far (the common case): its events are the batch, no need to split.
        let single = brokers == 1;
        let brokers = if single {
            1
        } else {
            for e in events {
                let b = e.broker as usize;
                while self.by_broker.len() <= b {
                    self.by_broker.push(Vec::new());
                }
                self.by_broker[b].push(*e);
            }
            self.by_broker.len()
        };
        while self.runs.len() < brokers {
            if self.second {
                return Err(Failure::Batch(
                    Error::invalid(
                        "trace",
                        "the second pass holds a broker the first did not: feed the same trace",
                    )
                    .into(),
                ));
            }
            let runs = new_runs(self.configs).map_err(|e| Failure::Batch(e.into()))?;
            self.runs.push(runs);
        }
        for b in 0..brokers.min(below) {
            let events = if single { events } else { &self.by_broker[b] };
            if events.is_empty() {
                continue;
            }
            for run in &mut self.runs[b] {
                if self.second && !run.second_pass {
                    continue;
                }
                for chunk in events.chunks(CHECK_EVERY) {
                    check().map_err(Failure::Interrupted)?;
                    let start = Instant::now();
                    let replayed = run.replayer.run_unnamed(chunk, cursor_hashes);
                    run.busy += start.elapsed();
                    replayed.map_err(|s| Failure::Broker(b, s))?;
                }
            }
        }
        Ok(())
    }
}

fn new_runs(configs: &[CacheConfig]) -> Result<Vec<Run>> {
    configs
        .iter()
        .map(|config| {
            Ok(Run {
                replayer: first_pass(config)?,
                config: config.clone(),
                second_pass: false,
                busy: Duration::ZERO,
            })
        })
        .collect()
}

impl Session {
    pub fn new(configs: Vec<CacheConfig>) -> Result<Self> {
        for c in &configs {
            first_pass(c)?; // reject what cannot run before any work
        }
        Ok(Session {
            decoder: TraceDecoder::new(),
            configs,
            runs: Vec::new(),
            events: Vec::new(),
            by_broker: Vec::new(),
            second: false,
            decode_ahead: true,
        })
    }

    /// Whether a large batch is decoded on a second thread while the replay runs (the default),
    /// or decoded whole on the feeding thread before it replays. The results are the same.
    pub fn decode_ahead(mut self, on: bool) -> Self {
        self.decode_ahead = on;
        self
    }

    /// Decodes a batch and replays each broker's events under every configuration still running
    /// this pass.
    pub fn feed(&mut self, batch: &RecordBatch) -> Result<()> {
        self.feed_checked(batch, &mut || Ok(()))
    }

    /// [`Session::feed`], calling `check` at most [`CHECK_EVERY`] events of each run apart
    /// (decoding ahead, also at every slice): an error from it (an interrupt) ends the feed, so a
    /// long batch can be stopped.
    ///
    /// An error in the batch ends the feed with the same error either way (see
    /// [`replay_slices`]), but not the same state: decoding on the feeding thread, a bad row
    /// stops the feed before any of the batch is replayed; decoding ahead, the slices before it
    /// have been.
    pub fn feed_checked(
        &mut self,
        batch: &RecordBatch,
        check: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        if !(self.decode_ahead && batch.num_rows() > slice_rows(batch)) {
            return self.feed_here(batch, check);
        }
        let mut once = Some(batch.clone());
        let mut source = move |_: &FeedStatus| once.take().map(Ok::<_, std::convert::Infallible>);
        self.feed_all(&mut source, check).map_err(|e| match e {
            FeedError::Replay(e) => e,
            FeedError::Source(never) => match never {},
        })
    }

    /// Feeds every batch `batches` gives, in order, until it gives `None`: what
    /// [`Session::feed_checked`] of each would do, with the same results and the same error, but
    /// decoding ahead (when on) runs on across the batches, so the decoder thread also takes the
    /// next batch from `batches` (and whatever work that is for the source) while the engine
    /// replays the current one. An error of the source ends the feed as [`FeedError::Source`],
    /// after every batch before it has been replayed.
    ///
    /// As with a feed per batch, a batch that fails is the last one replayed; decoding ahead, the
    /// source may have given the next batches already (up to [`DECODE_AHEAD_SLICES`] and one, if
    /// they are short; an error it gave then is not reported).
    /// Once the feed stops taking batches (a failure, an interrupt), the source is not called
    /// again, and a call waiting for its next batch sees [`FeedStatus::stopped`]: the feed returns
    /// when that call does.
    pub fn feed_all<E: Send>(
        &mut self,
        batches: &mut Batches<'_, E>,
        check: &mut dyn FnMut() -> Result<()>,
    ) -> std::result::Result<(), FeedError<E>> {
        if self.decode_ahead {
            let (decoder, mut replays) = self.parts();
            if let Some(replayed) = pipeline(decoder, &mut replays, batches, check) {
                return replayed.map_err(|stop| match stop {
                    Stop::Source(e) => FeedError::Source(e),
                    Stop::Replay(s) => FeedError::Replay(s.named(&self.decoder.names)),
                });
            }
        }
        let status = FeedStatus::default();
        while let Some(batch) = batches(&status) {
            let batch = batch.map_err(FeedError::Source)?;
            self.feed_here(&batch, check).map_err(FeedError::Replay)?;
        }
        Ok(())
    }

    /// Decodes `batch` whole on this thread, then replays it.
    fn feed_here(
        &mut self,
        batch: &RecordBatch,
        check: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        let decoded = self.decoder.decode(batch, &mut events);
        let brokers = self.decoder.brokers().count();
        let replayed = decoded.map_err(Stopped::from).and_then(|()| {
            let (decoder, mut replays) = self.parts();
            replays
                .replay(
                    &events,
                    &decoder.names.cursor_hashes,
                    brokers,
                    usize::MAX,
                    check,
                )
                .map_err(Failure::into_stopped)
        });
        self.events = events;
        replayed.map_err(|s| s.named(&self.decoder.names))
    }

    /// The decoder, and what replays the events it decodes: apart, so that each can work on
    /// its own thread.
    fn parts(&mut self) -> (&mut TraceDecoder, Replays<'_>) {
        let replays = Replays {
            configs: &self.configs,
            runs: &mut self.runs,
            by_broker: &mut self.by_broker,
            second: self.second,
        };
        (&mut self.decoder, replays)
    }

    /// Whether batches are decoded on a second thread ([`Session::decode_ahead`]).
    pub fn decodes_ahead(&self) -> bool {
        self.decode_ahead
    }

    pub fn needs_second_pass(&self) -> bool {
        !self.second
            && self
                .configs
                .iter()
                .any(|c| c.strategy.design().reads_trace_twice)
    }

    /// Starts Belady's deciding pass: feed the same trace again.
    pub fn start_second_pass(&mut self) {
        self.second = true;
        self.decoder = TraceDecoder::new();
        for run in self.runs.iter_mut().flatten() {
            if let Some(future) = run.replayer.take_recording() {
                run.replayer = second_pass(&run.config, future);
                run.second_pass = true;
            }
        }
    }

    /// Per broker (by name) and configuration: the measurements and the time the replay took.
    pub fn finish(self) -> Vec<(String, CacheConfig, ReplayMetrics, Duration)> {
        let brokers: Vec<String> = self.decoder.brokers().map(str::to_string).collect();
        let mut out: Vec<_> = self
            .runs
            .into_iter()
            .enumerate()
            .flat_map(|(b, runs)| {
                let broker = brokers.get(b).cloned().unwrap_or_default();
                runs.into_iter()
                    .map(move |r| (broker.clone(), r.config, r.replayer.finish(), r.busy))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// How many rows of `batch` to decode at a time when decoding ahead: [`DECODE_SLICE_ROWS`], or
/// four times the longest dictionary of its columns if that is more. Each slice of a dictionary
/// column sets up a table as long as its dictionary, so a slice much shorter than the dictionary
/// would make decoding a batch cost its rows times its dictionary's length.
fn slice_rows(batch: &RecordBatch) -> usize {
    let longest_dictionary = batch
        .columns()
        .iter()
        .filter_map(|c| c.as_any_dictionary_opt())
        .map(|d| d.values().len())
        .max()
        .unwrap_or(0);
    DECODE_SLICE_ROWS.max(longest_dictionary.saturating_mul(4))
}

/// The batches [`Session::feed_all`] takes: the next one, or its source's error; `None` at the end.
/// Each call is told whether the feed still takes batches ([`FeedStatus`]).
pub type Batches<'a, E> =
    dyn FnMut(&FeedStatus) -> Option<std::result::Result<RecordBatch, E>> + Send + 'a;

/// What [`Session::feed_all`] tells its source at each call: whether the feed has stopped taking
/// batches (a batch failed, or an interrupt came), so that a source that waits for its next batch
/// can give up and return `None` instead of holding the feed up.
#[derive(Debug, Default)]
pub struct FeedStatus(AtomicBool);

impl FeedStatus {
    pub fn stopped(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn stop(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Why [`Session::feed_all`] ended early.
#[derive(Debug)]
pub enum FeedError<E> {
    /// The batches' source failed (its error, as it came).
    Source(E),
    /// A batch could not be replayed.
    Replay(Error),
}

/// What the decoding thread hands the replay, in trace order.
enum Decoded<E> {
    /// A slice of a batch: its events, the brokers the decoder had seen by its end, whether it
    /// ends its batch, and the hashes of the cursor names it interned
    /// ([`Names::cursor_hashes`] from where the last slice's ended).
    Slice(Vec<Event>, usize, bool, Vec<i32>),
    /// The batch cannot be decoded (a column, or a row of the slice that would come here).
    Failed(Error),
    /// The source failed before the next batch.
    Source(E),
}

/// Why [`pipeline`] stopped: the source's error, or the replay's (a cursor still to be named).
enum Stop<E> {
    Source(E),
    Replay(Stopped),
}

/// How long the replay waits for a slice before it runs the interrupt check, when the source is
/// slow to give the next batch (a trace generated or read as it goes); also how often a source
/// that waits should look at [`FeedStatus::stopped`].
pub const CHECK_WHILE_WAITING: Duration = Duration::from_millis(50);

/// Decodes the batches of `batches` on a second thread, a slice at a time, up to
/// [`DECODE_AHEAD_SLICES`] + 1 slices ahead of the replay and within [`DECODE_AHEAD_ROWS`]
/// ([`decode_slices`]), and replays them in order on this one ([`replay_slices`]).
/// `None` if the OS refuses the thread (at a memory limit, say), before anything was taken from
/// `batches`: the caller then does the work on its own thread, with the same results.
fn pipeline<E: Send>(
    decoder: &mut TraceDecoder,
    replays: &mut Replays<'_>,
    batches: &mut Batches<'_, E>,
    check: &mut dyn FnMut() -> Result<()>,
) -> Option<std::result::Result<(), Stop<E>>> {
    let status = FeedStatus::default();
    std::thread::scope(|scope| {
        let (decoded_tx, decoded_rx) =
            std::sync::mpsc::sync_channel::<Decoded<E>>(DECODE_AHEAD_SLICES);
        let (spent_tx, spent_rx) = std::sync::mpsc::channel::<Vec<Event>>();
        let listening = &status;
        std::thread::Builder::new()
            .name("ledgercache-decode".into())
            .spawn_scoped(scope, move || {
                decode_slices(decoder, batches, listening, decoded_tx, spent_rx)
            })
            .ok()?;
        let replayed = replay_slices(replays, decoded_rx, spent_tx, check);
        // The receiver is gone now, which stops the decoder at its next slice, and the status
        // stops it before its next batch (and tells the source), so that the scope's join does
        // not wait for the rest of the source.
        status.stop();
        Some(replayed)
    })
}

/// The decoding thread of [`pipeline`]: takes the batches one by one and decodes each a slice at
/// a time (see [`slice_rows`]), into vectors the replay hands back, until the batches end, one
/// fails, or the replay stops listening.
fn decode_slices<E>(
    decoder: &mut TraceDecoder,
    batches: &mut Batches<'_, E>,
    status: &FeedStatus,
    decoded: std::sync::mpsc::SyncSender<Decoded<E>>,
    spent: std::sync::mpsc::Receiver<Vec<Event>>,
) {
    // The decoder's cursor name hashes sent along with earlier slices (the first sends those of
    // earlier feeds too).
    let mut hashes_sent = 0;
    let mut out = SlicesOut::default();
    // Checked before each batch as well as at each send: a batch of no rows sends nothing.
    while let Some(batch) = (!status.stopped()).then(|| batches(status)).flatten() {
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                let _ = decoded.send(Decoded::Source(e));
                return;
            }
        };
        // Decoding the batch whole would find these before any row's error.
        if let Err(e) = TraceDecoder::check_columns(&batch) {
            let _ = decoded.send(Decoded::Failed(e));
            return;
        }
        let (rows, slice_rows) = (batch.num_rows(), slice_rows(&batch));
        // Every batch sends at least one slice, a batch of no rows an empty one, so that the
        // decoder stays at most DECODE_AHEAD_SLICES ahead of the replay over a run of empty
        // batches too, rather than taking them as fast as the source gives them while the replay
        // is busy (with the slice that fails its batch, say).
        let mut offset = 0;
        loop {
            let len = slice_rows.min(rows - offset);
            if !out.make_room(len, &spent, status) {
                return;
            }
            let mut events = out.spare.pop().unwrap_or_default();
            events.clear();
            let slice = match decoder.decode(&batch.slice(offset, len), &mut events) {
                Ok(()) => {
                    let hashes = &decoder.names.cursor_hashes;
                    let new_hashes = hashes[hashes_sent..].to_vec();
                    hashes_sent = hashes.len();
                    Decoded::Slice(
                        events,
                        decoder.brokers().count(),
                        offset + len == rows,
                        new_hashes,
                    )
                }
                Err(e) => Decoded::Failed(e),
            };
            let failed = matches!(slice, Decoded::Failed(_));
            if decoded.send(slice).is_err() || failed {
                return;
            }
            out.sent(len);
            offset += len;
            if offset == rows {
                break;
            }
        }
    }
}

/// The slices the decoder has sent that the replay has not handed back yet (waiting or being
/// replayed), and the vectors it has handed back, to decode into again.
#[derive(Default)]
struct SlicesOut {
    slices: usize,
    rows: usize,
    spare: Vec<Vec<Event>>,
}

impl SlicesOut {
    fn sent(&mut self, rows: usize) {
        self.slices += 1;
        self.rows += rows;
    }

    fn handed_back(&mut self, events: Vec<Event>) {
        // The replay hands each slice's vector back as it came, rows included.
        self.slices = self.slices.saturating_sub(1);
        self.rows = self.rows.saturating_sub(events.len());
        self.spare.push(events);
    }

    /// Takes back the vectors the replay has handed back, and waits for more while a slice of
    /// `rows` rows would put more than [`DECODE_AHEAD_ROWS`] out (unless fewer than two are out);
    /// false if the replay has stopped meanwhile.
    fn make_room(
        &mut self,
        rows: usize,
        spent: &std::sync::mpsc::Receiver<Vec<Event>>,
        status: &FeedStatus,
    ) -> bool {
        use std::sync::mpsc::RecvTimeoutError;
        while let Ok(events) = spent.try_recv() {
            self.handed_back(events);
        }
        while self.slices >= 2 && self.rows.saturating_add(rows) > DECODE_AHEAD_ROWS {
            match spent.recv_timeout(CHECK_WHILE_WAITING) {
                Ok(events) => self.handed_back(events),
                Err(RecvTimeoutError::Timeout) if !status.stopped() => {}
                Err(_) => return false,
            }
        }
        true
    }
}

/// The next item from the decoding thread, running `check` while it is slow to come; `None`
/// when the decoder has finished.
fn next_decoded<E>(
    decoded: &std::sync::mpsc::Receiver<Decoded<E>>,
    check: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<Decoded<E>>> {
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        match decoded.recv_timeout(CHECK_WHILE_WAITING) {
            Ok(item) => return Ok(Some(item)),
            Err(RecvTimeoutError::Disconnected) => return Ok(None),
            Err(RecvTimeoutError::Timeout) => check()?,
        }
    }
}

/// The replaying side of [`pipeline`]: replays the slices in the order they were decoded, and
/// hands their vectors back for the next slices.
///
/// A failure ends the feed with the error the one-thread path would give, which decodes a whole
/// batch before it replays any of it, and replays it broker by broker: so after a failure the rest
/// of its batch is still decoded (a bad row anywhere in it wins), and a broker's failure lets the
/// brokers before it go on replaying (the earliest broker's wins). The feed ends with that batch:
/// the next batches are neither replayed nor looked at. A batch's column errors come before its
/// first slice, and the source's error after the batches before it. Only an interrupt ends the
/// feed at once, whatever error the rest of the batch holds.
fn replay_slices<E>(
    replays: &mut Replays<'_>,
    decoded: std::sync::mpsc::Receiver<Decoded<E>>,
    spent: std::sync::mpsc::Sender<Vec<Event>>,
    check: &mut dyn FnMut() -> Result<()>,
) -> std::result::Result<(), Stop<E>> {
    let interrupted = |e: Error| Stop::Replay(e.into());
    let mut failed: Option<Failure> = None;
    let mut cursor_hashes: Vec<i32> = Vec::new();
    while let Some(item) = next_decoded(&decoded, check).map_err(interrupted)? {
        let (events, brokers, ends_batch) = match item {
            Decoded::Slice(events, brokers, ends_batch, new_hashes) => {
                cursor_hashes.extend(new_hashes);
                (events, brokers, ends_batch)
            }
            Decoded::Failed(e) => return Err(Stop::Replay(e.into())),
            Decoded::Source(e) => return Err(Stop::Source(e)),
        };
        check().map_err(interrupted)?;
        // After a broker's failure a later slice may still bring a broker the first pass did not
        // have, which the one-thread path reports first: `replay` checks that before replaying.
        if !matches!(failed, Some(Failure::Batch(_))) {
            let below = match failed {
                Some(Failure::Broker(b, _)) => b,
                _ => usize::MAX,
            };
            match replays.replay(&events, &cursor_hashes, brokers, below, check) {
                Ok(()) => {}
                Err(Failure::Interrupted(e)) => return Err(interrupted(e)),
                Err(f) => failed = Some(f),
            }
        }
        // The decoder may have finished already; then the vector is simply dropped.
        let _ = spent.send(events);
        if ends_batch {
            if let Some(f) = failed {
                return Err(Stop::Replay(f.into_stopped()));
            }
        }
    }
    // A failed batch ends with its last slice, unless the decoder stopped first.
    failed.map_or(Ok(()), |f| Err(Stop::Replay(f.into_stopped())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int32Type;
    use arrow_array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
    use std::sync::Arc;

    fn batch_with_dictionary(values: usize, rows: usize) -> RecordBatch {
        let names: Vec<String> = (0..values).map(|i| format!("c{i}")).collect();
        let keys = Int32Array::from_iter_values((0..rows).map(|r| (r % values.max(1)) as i32));
        let column = DictionaryArray::<Int32Type>::try_new(
            keys,
            Arc::new(StringArray::from_iter_values(&names)),
        )
        .unwrap();
        let plain = StringArray::from_iter_values((0..rows).map(|_| "t"));
        RecordBatch::try_from_iter([
            ("topic", Arc::new(plain) as ArrayRef),
            ("cursor", Arc::new(column) as ArrayRef),
        ])
        .unwrap()
    }

    #[test]
    fn slices_are_never_much_shorter_than_a_dictionary() {
        let short = batch_with_dictionary(10, 100_000);
        assert_eq!(slice_rows(&short), DECODE_SLICE_ROWS);
        // Each slice sets up a table as long as the dictionary: 4,096-row slices of a 50,000-name
        // dictionary would cost 12 table entries per row.
        let long = batch_with_dictionary(50_000, 300_000);
        assert_eq!(slice_rows(&long), 200_000);
    }
}
