//! The reads-in-flight limiter in the replay lab (`max_reads_in_flight_bytes`, see
//! [`crate::cache::inflight_reads`]): a read takes permits for its estimated size when the trace
//! issues it and gives them back when it is delivered (Pulsar releases them once the entries are
//! handed to the consumer). Without permits it waits; delivered later by as long as it waited. A
//! read that waits past `reads_in_flight_acquire_timeout_ms`, or finds
//! `reads_in_flight_acquire_queue_size` reads waiting, fails: nothing is delivered (the
//! dispatcher reads again after its read-failure backoff, and those reads are the trace's later
//! ones).
//!
//! Only reads that take time hold permits for a while: without `storage_read_latency_ms` every
//! read is delivered as it is issued, takes and gives back its permits at once, and nothing
//! changes (the limiter is not consulted then). What the lab departs from (see
//! `docs/fidelity.md`): a waiting read's cache lookups and storage reads happen when the trace
//! issues it, only its delivery waits; its estimate is the size of the entries it reads plus
//! Pulsar's 64 bytes each, where Pulsar takes the ledger's average entry size.
//!
//! A child module of the engine, for its private state: the engine's hooks stay one line each.

use super::reads::InFlight;
use super::{CacheStrategy, Replayer};
use crate::cache::fast_hash::FastMap;
use crate::cache::inflight_reads::READ_OVERHEAD_PER_ENTRY;
use crate::cache::inflight_reads::{Acquire, Handle, InflightReadsLimiter, Ticket};
use crate::config::CacheConfig;

pub(super) struct LabInflight {
    limiter: InflightReadsLimiter,
    /// Reads waiting for permits, with whether they wait for storage too.
    waiting: FastMap<Ticket, (InFlight, bool)>,
}

impl LabInflight {
    pub(super) fn new(config: &CacheConfig) -> Self {
        LabInflight {
            limiter: InflightReadsLimiter::new(
                config.max_reads_in_flight_bytes,
                config.reads_in_flight_acquire_queue_size as usize,
                config.reads_in_flight_acquire_timeout_ms,
            ),
            waiting: FastMap::default(),
        }
    }

    fn is_on(&self) -> bool {
        !self.limiter.is_disabled()
    }
}

/// The permits a read of `entries` entries of `bytes` in all asks for.
pub(super) fn permits_for(entries: u64, bytes: u64) -> u64 {
    entries
        .saturating_mul(READ_OVERHEAD_PER_ENTRY)
        .saturating_add(bytes)
}

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    /// Whether reads go through the limiter: it is on and reads take time.
    pub(super) fn limits_reads(&self) -> bool {
        self.read_latency_ns > 0 && self.inflight.is_on()
    }

    /// A read issued at `read.due_ns` (waiting for storage if `missed`) asks for its permits.
    pub(super) fn admit_read(&mut self, mut read: InFlight, missed: bool) {
        let at = read.due_ns;
        match self.inflight.limiter.acquire(read.permits, at) {
            Acquire::Granted(h) => {
                read.held = Some(h.permits);
                if let Some(permits) = self.start_admitted(read, missed) {
                    self.release_permits(permits, at);
                }
            }
            Acquire::Queued(ticket) => {
                self.metrics.reads_waited_for_permits += 1;
                self.inflight.waiting.insert(ticket, (read, missed));
            }
            Acquire::Refused(_) => self.fail_read(read),
        }
    }

    /// A read that has its permits, from `read.due_ns`: delivered once its storage read
    /// completes, or now if it hit; then the permits it gives back now are returned, for the
    /// caller to release (a loop, not a recursion: each release may start many waiting reads).
    fn start_admitted(&mut self, mut read: InFlight, missed: bool) -> Option<u64> {
        if missed {
            read.due_ns = read.due_ns.saturating_add(self.read_latency_ns);
            // Reads that waited are due after reads issued later that did not.
            let at = self.in_flight.partition_point(|r| r.due_ns <= read.due_ns);
            self.in_flight.insert(at, read);
            None
        } else {
            let held = read.held.take();
            self.dispatch(read);
            held
        }
    }

    /// A delivered read gives its permits back at `at`; the reads waiting for them start.
    pub(super) fn release_permits(&mut self, permits: u64, at: u64) {
        let mut releases = vec![permits];
        while let Some(permits) = releases.pop() {
            let handle = Handle {
                permits,
                created_ns: at,
                success: true,
            };
            for (ticket, h) in self.inflight.limiter.release(handle, at) {
                releases.extend(self.settle(ticket, h, at));
            }
        }
    }

    /// Fails the waiting reads that have waited the timeout by `now` (Pulsar's scheduled check).
    pub(super) fn expire_permits(&mut self, now: u64) {
        let due = self.inflight.limiter.next_timeout_ns();
        if due.is_none_or(|at| at > now) {
            return;
        }
        for (ticket, h) in self.inflight.limiter.check_timeouts(now) {
            // A timed-out read gets no permits, so gives none back.
            self.settle(ticket, h, now);
        }
    }

    /// Reads of `topic` waiting for permits are discarded (the topic was unloaded), their copies
    /// of cache hits released. Their tickets stay queued, as a closed topic's acquires stay in
    /// Pulsar's limiter, and give back at once what they are granted ([`Self::settle`]).
    pub(super) fn discard_waiting_reads(&mut self, topic: u32) {
        let mut tickets: Vec<Ticket> = self
            .inflight
            .waiting
            .iter()
            .filter(|(_, (r, _))| r.topic == topic)
            .map(|(&t, _)| t)
            .collect();
        tickets.sort_unstable();
        for t in tickets {
            if let Some((r, _)) = self.inflight.waiting.remove(&t) {
                if r.kept != 0 {
                    self.strategy.release_kept(r.kept);
                }
            }
        }
    }

    /// A waiting read got its permits (or failed) at `at`; the permits it gives back at once.
    fn settle(&mut self, ticket: Ticket, h: Handle, at: u64) -> Option<u64> {
        let Some((mut read, missed)) = self.inflight.waiting.remove(&ticket) else {
            // Discarded while it waited (its topic was unloaded).
            return h.success.then_some(h.permits);
        };
        if h.success {
            read.held = Some(h.permits);
            read.due_ns = at;
            self.start_admitted(read, missed)
        } else {
            self.fail_read(read);
            None
        }
    }

    /// A read that got no permits (`TooManyRequestsException`): nothing is delivered; its cursor's
    /// hold on the read flow and its copies of cache hits end.
    fn fail_read(&mut self, mut read: InFlight) {
        self.metrics.reads_failed_for_permits += 1;
        read.positions.clear();
        let current = self
            .cursors
            .get(read.topic, read.cursor)
            .is_some_and(|c| c.epoch == read.epoch);
        if current {
            self.dispatch(read);
        } else if read.kept != 0 {
            // A seek since ended its hold; a stale read is not counted as discarded: it failed.
            self.strategy.release_kept(read.kept);
        }
    }
}
