//! What a replay measures: the counters, the per-second series and the summary at the end.

use super::{CacheStrategy, Replayer};

/// What a replay measured.
///
/// [`MemoryModel`]: super::super::memory::MemoryModel
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
    /// Topics loaded (`load` rows that found the topic closed on this broker).
    pub loads: u64,
    /// Topics unloaded (`unload` rows that found the topic open).
    pub unloads: u64,
    /// Cursors opened again on this broker after a close or an unload (reconnects).
    pub reopens: u64,
    /// The trace's seconds on this broker, in order.
    pub per_second: Vec<PerSecond>,
}

/// One second of trace time on a broker (a second in which it saw an event).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerSecond {
    /// ts_us / 1e6, rounded down.
    pub second: i64,
    /// The cache's bytes at the end of the second.
    pub cache_bytes: u64,
    /// Entries read in the second, from the cache (hits) or from storage (misses).
    pub reads: u64,
    pub hits: u64,
    pub misses: u64,
    /// Storage reads issued in the second.
    pub storage_read_ops: u64,
    pub loads: u64,
    pub unloads: u64,
    pub reopens: u64,
}

impl PerSecond {
    fn new(second: i64) -> Self {
        PerSecond {
            second,
            ..PerSecond::default()
        }
    }

    /// A second with a load, an unload or a reopen on this broker.
    pub fn is_event(&self) -> bool {
        self.loads + self.unloads + self.reopens > 0
    }

    /// A second after which this broker's cache has something to warm up for: a topic loaded
    /// or a cursor reconnected. An unload alone only takes readers away (on a broker that lost
    /// all its topics, the next reads come when some come back, and timing from the unload
    /// would count the time away as cold).
    pub fn needs_warming(&self) -> bool {
        self.loads + self.reopens > 0
    }
}

/// Seconds with reads a baseline hit ratio is taken over (the last ones before an event second).
pub const WARM_BASELINE_SECONDS: usize = 5;
/// How far below its baseline a hit ratio still counts as back.
pub const WARM_TOLERANCE: f64 = 0.05;

/// The time-to-warm figures of a run's lifecycle events (see [`ReplayMetrics::times_to_warm`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Warmth {
    /// Seconds with a load, an unload or a reopen.
    pub events: u64,
    /// Mean and max time to warm over the event seconds that had a baseline; `None` without one.
    pub mean_seconds: Option<f64>,
    pub max_seconds: Option<f64>,
}

/// An event second waiting for its hit ratio to come back: ordered by the ratio that counts as
/// back (lowest first, the order a later second's ratio resolves them in).
#[derive(Debug, Clone, Copy)]
struct Waiting {
    back_at: f64,
    row: usize,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Waiting {}
impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Reversed: the max-heap pops the lowest ratio first.
        other
            .back_at
            .total_cmp(&self.back_at)
            .then(other.row.cmp(&self.row))
    }
}

impl ReplayMetrics {
    pub fn hit_ratio(&self) -> f64 {
        if self.entries_read == 0 {
            0.0
        } else {
            self.hits as f64 / self.entries_read as f64
        }
    }

    /// Per second of [`ReplayMetrics::per_second`]: on a second with a load or a reopen on this
    /// broker ([`PerSecond::needs_warming`]) that has a baseline, the whole seconds until the hit ratio is back;
    /// `None` elsewhere.
    ///
    /// The baseline ("where it was") is the reads-weighted hit ratio (their hits over their reads)
    /// of the last [`WARM_BASELINE_SECONDS`] seconds with reads before the event second; an event
    /// second with no second with reads before it has none. The hit ratio is back in the first
    /// later second with reads whose ratio is at least the baseline less [`WARM_TOLERANCE`]. The
    /// time to warm is the whole seconds from the end of the event second to the end of the last
    /// second with reads before that one, if it is later than the event second (it was cold):
    /// 0 if the next second with reads is already back; seconds without reads count only up to
    /// the last cold second (nothing was read in them to say the cache was cold). An event whose
    /// ratio is not back by the end of the run counts the seconds to the run's last second (a
    /// lower bound). Work: O(n log n) in the seconds, whatever the events.
    pub fn times_to_warm(&self) -> Vec<Option<f64>> {
        let rows = &self.per_second;
        let mut out = vec![None; rows.len()];
        let mut recent: std::collections::VecDeque<(u64, u64)> = Default::default();
        let mut waiting = std::collections::BinaryHeap::<Waiting>::new();
        let mut last_read_second: Option<i64> = None;
        for (i, s) in rows.iter().enumerate() {
            if s.reads > 0 {
                let ratio = s.hits as f64 / s.reads as f64;
                while let Some(w) = waiting.peek().copied().filter(|w| w.back_at <= ratio) {
                    waiting.pop();
                    let event = rows[w.row].second;
                    let cold_until = last_read_second.filter(|&c| c > event).unwrap_or(event);
                    out[w.row] = Some(seconds_between(event, cold_until));
                }
            }
            if s.needs_warming() {
                let (reads, hits) = recent.iter().fold((0u64, 0u64), |(r, h), &(sr, sh)| {
                    (r.saturating_add(sr), h.saturating_add(sh))
                });
                if reads > 0 {
                    let baseline = hits as f64 / reads as f64;
                    waiting.push(Waiting {
                        back_at: baseline - WARM_TOLERANCE,
                        row: i,
                    });
                }
            }
            if s.reads > 0 {
                if recent.len() == WARM_BASELINE_SECONDS {
                    recent.pop_front();
                }
                recent.push_back((s.reads, s.hits));
                last_read_second = Some(s.second);
            }
        }
        let end = rows.last().map_or(0, |s| s.second);
        for w in waiting {
            out[w.row] = Some(seconds_between(rows[w.row].second, end));
        }
        out
    }

    /// The run's event seconds and their mean and max time to warm
    /// ([`ReplayMetrics::times_to_warm`]).
    pub fn warmth(&self) -> Warmth {
        let events = self.per_second.iter().filter(|s| s.is_event()).count() as u64;
        let times: Vec<f64> = self.times_to_warm().into_iter().flatten().collect();
        let (mean_seconds, max_seconds) = if times.is_empty() {
            (None, None)
        } else {
            let sum: f64 = times.iter().sum();
            (
                Some(sum / times.len() as f64),
                times.iter().copied().reduce(f64::max),
            )
        };
        Warmth {
            events,
            mean_seconds,
            max_seconds,
        }
    }
}

/// Whole seconds from the end of second `from` to the end of second `to` (`to >= from`).
fn seconds_between(from: i64, to: i64) -> f64 {
    to.saturating_sub(from) as f64
}

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    pub(super) fn roll_second(&mut self, ts_us: i64) {
        let sec = ts_us.div_euclid(1_000_000);
        match self.second {
            Some(s) if s.second == sec => {}
            Some(mut s) => {
                s.cache_bytes = self.strategy.cached_bytes();
                self.metrics.per_second.push(s);
                self.second = Some(PerSecond::new(sec));
                if let Some(m) = &mut self.memory {
                    m.sample(self.strategy.as_mut());
                }
            }
            None => self.second = Some(PerSecond::new(sec)),
        }
    }

    /// The second in progress (there is one from the first event on).
    pub(super) fn this_second(&mut self) -> Option<&mut PerSecond> {
        self.second.as_mut()
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
        if let Some(mut s) = self.second.take() {
            s.cache_bytes = self.strategy.cached_bytes();
            self.metrics.per_second.push(s);
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
