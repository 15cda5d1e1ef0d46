//! The replay lab: one broker's trace through cache designs, measured.

pub mod engine;
pub mod memory;
mod plain_keys;
pub mod requests;
pub mod strategy;
pub mod trace;

pub use engine::{ReplayMetrics, Replayer};
pub use trace::{Event, Names, Op, TraceDecoder};

use crate::config::{CacheConfig, Strategy};
use crate::error::{Error, Result};
use arrow_array::RecordBatch;
use std::time::{Duration, Instant};
use strategy::{belady, CacheStrategy, Legacy, Lru, NoCache, Pip430, Segmented};

/// The replayer of `config`'s read flow over `strategy`, without the memory model.
fn bare_replayer(config: &CacheConfig, strategy: Box<dyn CacheStrategy>) -> Replayer {
    Replayer::new(strategy, config).with_read_latency(
        config.storage_read_latency_ms.saturating_mul(1_000_000),
        config.cursor_epochs,
    )
}

fn replayer(config: &CacheConfig, strategy: Box<dyn CacheStrategy>) -> Replayer {
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

/// The replayer for an online strategy; Belady's first pass is a recorder.
fn first_pass(config: &CacheConfig) -> Result<Replayer> {
    Ok(match config.strategy {
        Strategy::Pip430 | Strategy::Pip430Fifo => {
            replayer(config, Box::new(Pip430::new(config.clone())?))
        }
        Strategy::Lru => replayer(config, Box::new(Lru::new(config.cache_size_bytes))),
        // The recording pass caches nothing, so it has no buffers to model (and its measurements
        // give way to the deciding pass's).
        Strategy::Belady => bare_replayer(config, Box::new(NoCache)).recording(),
        Strategy::Legacy => replayer(config, Box::new(Legacy::new(config))),
        Strategy::Segmented => replayer(
            config,
            Box::new(Segmented::new(
                config.cache_size_bytes,
                config.effective_segment_count(),
            )),
        ),
    })
}

/// Replays decoded events under `config` (both passes for Belady).
pub fn replay(events: &[Event], names: &Names, config: &CacheConfig) -> Result<ReplayMetrics> {
    let mut r = first_pass(config)?;
    r.run(events, names)?;
    if let Some(future) = r.take_recording() {
        r = replayer(config, belady(config.cache_size_bytes, future));
        r.run(events, names)?;
    }
    Ok(r.finish())
}

/// Records the request stream of a trace (publishes and reads), batch by batch.
pub struct RequestRecorder {
    decoder: TraceDecoder,
    replayer: Replayer,
    events: Vec<Event>,
}

impl Default for RequestRecorder {
    fn default() -> Self {
        RequestRecorder {
            decoder: TraceDecoder::new(),
            replayer: Replayer::new(Box::new(NoCache), &request_log_config()).logging_requests(),
            events: Vec::new(),
        }
    }
}

/// The request stream is the reference designs' (every publish and read), so the recorder runs
/// their read flow.
fn request_log_config() -> CacheConfig {
    CacheConfig {
        strategy: Strategy::Lru,
        cache_size_bytes: 0,
        ..CacheConfig::default()
    }
}

impl RequestRecorder {
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

    pub fn finish(mut self) -> requests::RequestLog {
        self.replayer.take_requests().expect("logging was on")
    }
}

struct Run {
    config: CacheConfig,
    replayer: Replayer,
    /// Belady: the first pass (recording) is done and the second is running.
    second_pass: bool,
    busy: Duration,
}

/// How many events a [`Session`] replays between two calls of its interrupt check.
pub const CHECK_EVERY: usize = 16_384;

/// Replays a trace, fed batch by batch, under several configurations at once, each broker on its
/// own; the trace is decoded once and never held in memory whole. Belady needs the trace twice:
/// after the first feed, [`Session::needs_second_pass`] says whether to feed it again.
pub struct Session {
    decoder: TraceDecoder,
    configs: Vec<CacheConfig>,
    /// Per broker (decoder order), a run per configuration.
    runs: Vec<Vec<Run>>,
    events: Vec<Event>,
    by_broker: Vec<Vec<Event>>,
    second: bool,
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
        })
    }

    fn new_runs(&self) -> Result<Vec<Run>> {
        self.configs
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

    /// Decodes a batch and replays each broker's events under every configuration still running
    /// this pass.
    pub fn feed(&mut self, batch: &RecordBatch) -> Result<()> {
        self.feed_checked(batch, &mut || Ok(()))
    }

    /// [`Session::feed`], calling `check` every [`CHECK_EVERY`] events of each run: an error from
    /// it (an interrupt) ends the feed, so a long batch can be stopped.
    pub fn feed_checked(
        &mut self,
        batch: &RecordBatch,
        check: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        self.events.clear();
        self.decoder.decode(batch, &mut self.events)?;
        for list in &mut self.by_broker {
            list.clear();
        }
        // One broker so far (the common case): its events are the batch, no need to split.
        let single = self.decoder.brokers().count() == 1;
        let brokers = if single {
            1
        } else {
            for e in &self.events {
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
                return Err(Error::invalid(
                    "trace",
                    "the second pass holds a broker the first did not: feed the same trace",
                ));
            }
            let runs = self.new_runs()?;
            self.runs.push(runs);
        }
        for b in 0..brokers {
            let events = if single {
                &self.events
            } else {
                &self.by_broker[b]
            };
            if events.is_empty() {
                continue;
            }
            for run in &mut self.runs[b] {
                if self.second && !run.second_pass {
                    continue;
                }
                for chunk in events.chunks(CHECK_EVERY) {
                    check()?;
                    let start = Instant::now();
                    run.replayer.run(chunk, &self.decoder.names)?;
                    run.busy += start.elapsed();
                }
            }
        }
        Ok(())
    }

    pub fn needs_second_pass(&self) -> bool {
        !self.second && self.configs.iter().any(|c| c.strategy == Strategy::Belady)
    }

    /// Starts Belady's deciding pass: feed the same trace again.
    pub fn start_second_pass(&mut self) {
        self.second = true;
        self.decoder = TraceDecoder::new();
        for run in self.runs.iter_mut().flatten() {
            if let Some(future) = run.replayer.take_recording() {
                run.replayer = replayer(&run.config, belady(run.config.cache_size_bytes, future));
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
