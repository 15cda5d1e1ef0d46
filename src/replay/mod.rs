//! The replay lab: one broker's trace through a cache design, measured.

pub mod engine;
pub mod strategy;
pub mod trace;

pub use engine::{ReplayMetrics, Replayer};
pub use trace::{Event, Names, Op, TraceDecoder};

use crate::config::{CacheConfig, Strategy};
use crate::error::{Error, Result};
use strategy::{Belady, CacheStrategy, Lru, Pip430};

/// Replays decoded events under `config` and returns the measurements. Belady needs the future, so
/// it replays twice: once to record the read stream, once to decide with it.
pub fn replay(events: &[Event], names: &Names, config: &CacheConfig) -> Result<ReplayMetrics> {
    let interval = config.eviction_interval_ms;
    let grace = if config.eviction_by_expected_read_count {
        config.continue_caching_window_ms()
    } else {
        0
    };
    let make = |s: Box<dyn CacheStrategy>| Replayer::new(s, interval, grace);
    let strategy: Box<dyn CacheStrategy> = match config.strategy {
        Strategy::Pip430 | Strategy::Pip430Fifo => {
            let mut s = Pip430::new(config.clone())?;
            s.set_topic_names(&names.topics);
            Box::new(s)
        }
        Strategy::Lru => Box::new(Lru::new(config.cache_size_bytes)),
        Strategy::Belady => {
            let mut recorder = make(Box::new(Lru::new(0))).recording();
            recorder.run(events, names)?;
            let future = recorder.take_recording().expect("recording was on");
            Box::new(Belady::new(config.cache_size_bytes, future))
        }
        Strategy::Legacy | Strategy::Segmented => return Err(Error::Unsupported(format!(
            "strategy {:?} is not in the replay engine yet; use pip430, pip430-fifo, lru or belady",
            config.strategy.name()
        ))),
    };
    let mut r = make(strategy);
    r.run(events, names)?;
    Ok(r.finish())
}
