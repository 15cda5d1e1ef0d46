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
