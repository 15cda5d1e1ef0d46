//! The reads-in-flight limiter (Pulsar master's `InflightReadsLimiter`, configured by
//! `managedLedgerMaxReadsInFlightSizeInMB`, `...PermitsAcquireTimeoutMillis` and
//! `...PermitsAcquireQueueSize`): a managed ledger's read takes permits for its estimated size
//! before it reads the cache or storage, and gives them back once its entries are released (handed
//! to the consumer). Without permits the read queues; a queued read that waited longer than the
//! timeout fails (`TooManyRequestsException`, and the dispatcher reads again after its read-failure
//! backoff); with the queue full it fails at once.
//!
//! Time is explicit (the caller's clock), and so are Pulsar's scheduled timeout checks
//! ([`InflightReadsLimiter::check_timeouts`]): the limiter is a state machine that the library
//! and the replay lab drive each in their own time. Where Pulsar calls a queued read's callback,
//! the limiter returns its ticket with the handle it gets.

use crate::cache::clock::SharedClock;
use crate::cache::fast_hash::FastMap;
pub use crate::config::{
    default_max_reads_in_flight_bytes, CacheConfig, DISPATCHER_MAX_READ_SIZE_BYTES,
};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

/// What Pulsar adds to an entry's estimated size for BookKeeper's overhead
/// (`RangeEntryCacheImpl.BOOKKEEPER_READ_OVERHEAD_PER_ENTRY`).
pub const READ_OVERHEAD_PER_ENTRY: u64 = 64;

/// The entry size Pulsar assumes before a ledger has any (`DEFAULT_ESTIMATED_ENTRY_SIZE`).
pub const DEFAULT_ESTIMATED_ENTRY_SIZE: u64 = 10 * 1024;

/// The estimated size of a read of `entries` entries of a ledger whose entries average
/// `average_entry_bytes` (`None`: the ledger has none yet), as `RangeEntryCacheImpl
/// .getEstimatedEntrySize` makes it. Saturates instead of wrapping.
pub fn estimated_read_bytes(entries: u64, average_entry_bytes: Option<u64>) -> u64 {
    let per_entry = average_entry_bytes
        .map_or(DEFAULT_ESTIMATED_ENTRY_SIZE, |a| a.max(1))
        .saturating_add(READ_OVERHEAD_PER_ENTRY);
    entries.saturating_mul(per_entry)
}

/// Permits held by a read (Pulsar's `InflightReadsLimiter.Handle`). A failed handle holds none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    pub permits: u64,
    /// When the read asked for them.
    pub created_ns: u64,
    pub success: bool,
}

/// A queued read, to tell which one a grant or a timeout is for.
pub type Ticket = u64;

/// What [`InflightReadsLimiter::acquire`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// The permits are the read's (`Optional.of(handle)`); with the limiter disabled, a handle of
    /// none.
    Granted(Handle),
    /// Queued: the ticket comes back with its handle from [`InflightReadsLimiter::release`] or
    /// [`InflightReadsLimiter::check_timeouts`] (`Optional.empty()` and a callback later).
    Queued(Ticket),
    /// The queue is full: the read fails now (a handle with `success` false).
    Refused(Handle),
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    ticket: Ticket,
    permits: u64,
    created_ns: u64,
}

/// Counts of what the limiter did, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterCounts {
    /// Permits granted, at once or after queueing (Pulsar's acquire-count metric).
    pub acquired: u64,
    pub released: u64,
    /// Reads that queued for permits.
    pub queued: u64,
    /// Queued reads that timed out.
    pub timed_out: u64,
    /// Reads refused because the queue was full.
    pub refused: u64,
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct InflightReadsLimiter {
    /// 0: disabled.
    max_bytes: u64,
    remaining: u64,
    /// 0: queued reads never time out.
    timeout_ns: u64,
    queue_limit: usize,
    queue: VecDeque<Queued>,
    next_ticket: Ticket,
    counts: LimiterCounts,
}

impl InflightReadsLimiter {
    /// A limiter of `max_bytes` (0 disables it), queueing at most `queue_limit` reads, each for at
    /// most `timeout_ms` (0: no timeout, as Pulsar schedules no check then).
    pub fn new(max_bytes: u64, queue_limit: usize, timeout_ms: u64) -> Self {
        InflightReadsLimiter {
            max_bytes,
            remaining: max_bytes,
            timeout_ns: timeout_ms.saturating_mul(1_000_000),
            queue_limit,
            queue: VecDeque::new(),
            next_ticket: 0,
            counts: LimiterCounts::default(),
        }
    }

    pub fn is_disabled(&self) -> bool {
        self.max_bytes == 0
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Permits free now (Pulsar's `getRemainingBytes`).
    pub fn remaining_bytes(&self) -> u64 {
        self.remaining
    }

    /// Reads waiting for permits.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn counts(&self) -> LimiterCounts {
        self.counts
    }

    /// Asks for `permits` at `now_ns`. A read asking for more than the whole limit gets the whole
    /// limit once every permit is free, so that it never waits forever.
    pub fn acquire(&mut self, permits: u64, now_ns: u64) -> Acquire {
        let handle = Handle {
            permits,
            created_ns: now_ns,
            success: true,
        };
        if self.is_disabled() {
            return Acquire::Granted(Handle {
                permits: 0,
                ..handle
            });
        }
        if let Some(granted) = self.take(permits, now_ns) {
            return Acquire::Granted(granted);
        }
        if self.queue.len() >= self.queue_limit {
            self.counts.refused += 1;
            return Acquire::Refused(Handle {
                permits: 0,
                success: false,
                ..handle
            });
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.queue.push_back(Queued {
            ticket,
            permits,
            created_ns: now_ns,
        });
        self.counts.queued += 1;
        Acquire::Queued(ticket)
    }

    /// The permits, if they can be had now.
    fn take(&mut self, permits: u64, created_ns: u64) -> Option<Handle> {
        let permits = if self.remaining >= permits {
            permits
        } else if permits > self.max_bytes && self.remaining == self.max_bytes {
            self.max_bytes
        } else {
            return None;
        };
        self.remaining -= permits;
        self.counts.acquired += 1;
        Some(Handle {
            permits,
            created_ns,
            success: true,
        })
    }

    /// Gives `handle`'s permits back at `now_ns`, then hands permits to the queued reads in order
    /// while the first can have them; a queued read found timed out on the way fails. Returns the
    /// queued reads this settled, each with its handle (failed: `success` false).
    pub fn release(&mut self, handle: Handle, now_ns: u64) -> Vec<(Ticket, Handle)> {
        let mut settled = Vec::new();
        if self.is_disabled() {
            return settled;
        }
        // Saturating: a handle given back twice (Pulsar does not check) cannot wrap the count.
        self.remaining = self.remaining.saturating_add(handle.permits);
        self.counts.released += 1;
        while let Some(&q) = self.queue.front() {
            let age = now_ns.saturating_sub(q.created_ns);
            if self.timeout_ns > 0 && age > self.timeout_ns {
                self.queue.pop_front();
                settled.push((q.ticket, self.timed_out(q)));
            } else if let Some(granted) = self.take(q.permits, q.created_ns) {
                self.queue.pop_front();
                settled.push((q.ticket, granted));
            } else {
                break;
            }
        }
        settled
    }

    fn timed_out(&mut self, q: Queued) -> Handle {
        self.counts.timed_out += 1;
        Handle {
            permits: 0,
            created_ns: q.created_ns,
            success: false,
        }
    }

    /// Pulsar's scheduled timeout check at `now_ns`: fails the queued reads, from the front, that
    /// have waited the timeout or longer.
    pub fn check_timeouts(&mut self, now_ns: u64) -> Vec<(Ticket, Handle)> {
        let mut settled = Vec::new();
        if self.timeout_ns == 0 {
            return settled;
        }
        while let Some(&q) = self.queue.front() {
            if now_ns.saturating_sub(q.created_ns) < self.timeout_ns {
                break;
            }
            self.queue.pop_front();
            settled.push((q.ticket, self.timed_out(q)));
        }
        settled
    }

    /// Takes the queued read `ticket` out of the queue (its reader gave up); false if it is not
    /// queued.
    pub fn cancel(&mut self, ticket: Ticket) -> bool {
        match self.queue.iter().position(|q| q.ticket == ticket) {
            Some(i) => {
                self.queue.remove(i);
                true
            }
            None => false,
        }
    }

    /// When the first queued read times out, if one is queued and reads time out.
    pub fn next_timeout_ns(&self) -> Option<u64> {
        let q = self.queue.front()?;
        (self.timeout_ns > 0).then(|| q.created_ns.saturating_add(self.timeout_ns))
    }
}

/// The limiter the managed ledgers of one [`crate::EntryCacheManager`] share, as the caches of
/// Pulsar's `RangeEntryCacheManagerImpl` share one: each ledger takes what was settled for its own
/// waiting reads when it polls, so a release never reaches into another ledger.
#[derive(Debug)]
pub struct ReadsLimiter {
    clock: SharedClock,
    state: Mutex<Shared>,
}

#[derive(Debug)]
struct Shared {
    limiter: InflightReadsLimiter,
    /// Queued reads settled (granted or failed) and not yet taken by their ledger, with when.
    settled: FastMap<Ticket, (Handle, u64)>,
}

impl Shared {
    fn settle(&mut self, settled: Vec<(Ticket, Handle)>, at: u64) {
        for (ticket, handle) in settled {
            self.settled.insert(ticket, (handle, at));
        }
    }
}

impl ReadsLimiter {
    pub fn new(config: &CacheConfig, clock: SharedClock) -> Arc<Self> {
        Arc::new(ReadsLimiter {
            clock,
            state: Mutex::new(Shared {
                limiter: InflightReadsLimiter::new(
                    config.max_reads_in_flight_bytes,
                    config.reads_in_flight_acquire_queue_size as usize,
                    config.reads_in_flight_acquire_timeout_ms,
                ),
                settled: FastMap::default(),
            }),
        })
    }

    /// Permits free now, reads waiting, and the counts (see [`InflightReadsLimiter`]).
    pub fn snapshot(&self) -> (u64, u64, usize, LimiterCounts) {
        let st = self.state.lock();
        let l = &st.limiter;
        (l.max_bytes(), l.remaining_bytes(), l.queued(), l.counts())
    }

    fn release(&self, handle: Handle) {
        let now = self.clock.now_ns();
        let mut st = self.state.lock();
        let settled = st.limiter.release(handle, now);
        st.settle(settled, now);
    }
}

/// A read's permits (held until it is dropped: the library's read holds them until its outcome
/// is taken, its entries handed over), or its place in the queue.
#[derive(Debug)]
pub struct ReadPermits {
    limiter: Arc<ReadsLimiter>,
    state: PermitState,
}

#[derive(Debug, Clone, Copy)]
enum PermitState {
    Held(Handle),
    Waiting(Ticket),
    Done,
}

/// Where a read stands with the limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It may read (from this time on).
    Go(u64),
    /// It waits for permits.
    Wait,
}

impl ReadPermits {
    /// A read of `entries` entries of a ledger whose entries average `average_entry_bytes` asks
    /// for permits. A read that may not wait (`can_wait` false: it completes within the call, and
    /// nothing can free permits meanwhile) fails instead of queueing.
    pub fn acquire(
        limiter: &Arc<ReadsLimiter>,
        entries: u64,
        average_entry_bytes: Option<u64>,
        can_wait: bool,
    ) -> Result<(Self, Admission)> {
        let permits = estimated_read_bytes(entries, average_entry_bytes);
        let now = limiter.clock.now_ns();
        let acquired = limiter.state.lock().limiter.acquire(permits, now);
        let mut this = ReadPermits {
            limiter: limiter.clone(),
            state: PermitState::Done,
        };
        match acquired {
            Acquire::Granted(h) => {
                this.state = PermitState::Held(h);
                Ok((this, Admission::Go(now)))
            }
            Acquire::Queued(ticket) => {
                this.state = PermitState::Waiting(ticket);
                if can_wait {
                    Ok((this, Admission::Wait))
                } else {
                    // Dropping `this` takes it out of the queue.
                    Err(too_many(
                        permits,
                        entries,
                        "a read that completes at once cannot wait",
                    ))
                }
            }
            Acquire::Refused(_) => Err(too_many(
                permits,
                entries,
                "reads_in_flight_acquire_queue_size reads wait already",
            )),
        }
    }

    pub fn is_waiting(&self) -> bool {
        matches!(self.state, PermitState::Waiting(_))
    }

    /// A waiting read's turn, checked at the limiter's clock (timeouts first): `Some(Ok(at))` it
    /// may read from `at`, `Some(Err)` it failed, `None` it still waits.
    pub fn poll(&mut self) -> Option<Result<u64>> {
        let PermitState::Waiting(ticket) = self.state else {
            return None;
        };
        let now = self.limiter.clock.now_ns();
        let mut st = self.limiter.state.lock();
        let expired = st.limiter.check_timeouts(now);
        st.settle(expired, now);
        let (handle, at) = st.settled.remove(&ticket)?;
        drop(st);
        if handle.success {
            self.state = PermitState::Held(handle);
            Some(Ok(at))
        } else {
            self.state = PermitState::Done;
            Some(Err(too_many(
                handle.permits,
                0,
                "it waited reads_in_flight_acquire_timeout_ms",
            )))
        }
    }
}

impl Drop for ReadPermits {
    fn drop(&mut self) {
        match self.state {
            PermitState::Held(h) => self.limiter.release(h),
            PermitState::Waiting(ticket) => {
                let settled = {
                    let mut st = self.limiter.state.lock();
                    if st.limiter.cancel(ticket) {
                        None
                    } else {
                        st.settled.remove(&ticket)
                    }
                };
                // Granted meanwhile: given back.
                if let Some((h, _)) = settled.filter(|(h, _)| h.success) {
                    self.limiter.release(h);
                }
            }
            PermitState::Done => {}
        }
    }
}

/// Pulsar's `TooManyRequestsException` for a read without permits.
fn too_many(permits: u64, entries: u64, why: &str) -> Error {
    let size = if entries > 0 {
        format!("estimated read size {permits} bytes for {entries} entries")
    } else {
        "the read".to_string()
    };
    Error::ResourceLimit(format!(
        "couldn't acquire enough permits on the max reads in flight limiter for {size}: {why} \
         (check max_reads_in_flight_bytes, reads_in_flight_acquire_timeout_ms and \
         reads_in_flight_acquire_queue_size)"
    ))
}

#[cfg(test)]
mod tests {
    //! InflightReadsLimiterTest (Pulsar master), in explicit time.
    use super::*;

    const QUEUE: usize = 10_000;
    const TIMEOUT_MS: u64 = 100;
    const MS: u64 = 1_000_000;

    fn granted(a: Acquire) -> Handle {
        match a {
            Acquire::Granted(h) => h,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    fn queued(a: Acquire) -> Ticket {
        match a {
            Acquire::Queued(t) => t,
            other => panic!("expected to queue, got {other:?}"),
        }
    }

    /// InflightReadsLimiterTest.testDisabled (0 disables; Pulsar's -1 is not a u64).
    #[test]
    fn disabled() {
        let mut l = InflightReadsLimiter::new(0, QUEUE, TIMEOUT_MS);
        assert!(l.is_disabled());
        let h = granted(l.acquire(1 << 40, 0));
        assert!(h.success);
        assert!(l.release(h, 0).is_empty());
        assert!(!InflightReadsLimiter::new(1, QUEUE, TIMEOUT_MS).is_disabled());
    }

    /// InflightReadsLimiterTest.testBasicAcquireRelease
    #[test]
    fn basic_acquire_release() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        assert_eq!(l.remaining_bytes(), 100);
        let h = granted(l.acquire(100, 0));
        assert!(h.success);
        assert_eq!((h.permits, l.remaining_bytes()), (100, 0));
        l.release(h, 0);
        assert_eq!(l.remaining_bytes(), 100);
    }

    /// InflightReadsLimiterTest.testNotEnoughPermits
    #[test]
    fn not_enough_permits() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        let h = granted(l.acquire(100, 0));
        let t2 = queued(l.acquire(100, 0));
        assert_eq!(l.remaining_bytes(), 0);
        let settled = l.release(h, 0);
        assert_eq!(settled.len(), 1);
        assert_eq!(settled[0].0, t2);
        assert!(settled[0].1.success);
        l.release(settled[0].1, 0);
        assert_eq!(l.remaining_bytes(), 100);
    }

    /// InflightReadsLimiterTest.testAcquireTimeout
    #[test]
    fn acquire_timeout() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        granted(l.acquire(100, 0));
        let t2 = queued(l.acquire(100, 0));
        assert_eq!(l.next_timeout_ns(), Some(TIMEOUT_MS * MS));
        assert!(l.check_timeouts(TIMEOUT_MS * MS - 1).is_empty());
        let settled = l.check_timeouts((TIMEOUT_MS + 100) * MS);
        assert_eq!(settled.len(), 1);
        assert_eq!(settled[0].0, t2);
        assert!(!settled[0].1.success);
        assert_eq!(l.counts().timed_out, 1);
    }

    /// InflightReadsLimiterTest.testMultipleQueuedEntriesWithExceptionInFirstCallback (a
    /// callback's exception is the caller's here: both queued reads get their permits).
    #[test]
    fn multiple_queued_entries() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        let h1 = granted(l.acquire(100, 0));
        let t2 = queued(l.acquire(50, 0));
        let t3 = queued(l.acquire(50, 0));
        let settled = l.release(h1, 0);
        assert_eq!(settled.iter().map(|s| s.0).collect::<Vec<_>>(), [t2, t3]);
        assert!(settled.iter().all(|s| s.1.success));
        assert_eq!(l.remaining_bytes(), 0);
        l.release(settled[1].1, 0);
        assert_eq!(l.remaining_bytes(), 50);
        l.release(settled[0].1, 0);
        assert_eq!(l.remaining_bytes(), 100);
    }

    /// InflightReadsLimiterTest.testMultipleQueuedEntriesWithTimeoutAndExceptionInFirstCallback
    #[test]
    fn multiple_queued_entries_time_out() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        let h1 = granted(l.acquire(100, 0));
        let t2 = queued(l.acquire(50, 0));
        let t3 = queued(l.acquire(50, 50 * MS));
        let first = l.check_timeouts((TIMEOUT_MS + 100) * MS);
        assert_eq!(first.len(), 2, "both waited past the timeout by then");
        assert_eq!((first[0].0, first[1].0), (t2, t3));
        assert!(first.iter().all(|s| !s.1.success));
        assert_eq!(l.remaining_bytes(), 0);
        assert!(l.release(h1, (TIMEOUT_MS + 100) * MS).is_empty());
        assert_eq!(l.remaining_bytes(), 100);
    }

    /// InflightReadsLimiterTest.testMultipleQueuedEntriesWithTimeoutsThatAreTimedOutWhenPermitsAreAvailable:
    /// no timeout check ran (Pulsar's executor is a mock), so a release finds the timed-out reads.
    #[test]
    fn timed_out_entries_found_by_a_release() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        let h1 = granted(l.acquire(100, 0));
        let t2 = queued(l.acquire(50, 0));
        let t3 = queued(l.acquire(50, 0));
        let later = (TIMEOUT_MS + 100) * MS;
        let t4 = queued(l.acquire(50, later));
        let t5 = queued(l.acquire(100, later));
        let settled = l.release(h1, later);
        assert_eq!(
            settled
                .iter()
                .map(|(t, h)| (*t, h.success))
                .collect::<Vec<_>>(),
            [(t2, false), (t3, false), (t4, true)]
        );
        assert_eq!(l.remaining_bytes(), 50);
        let settled5 = l.release(settled[2].1, later);
        assert_eq!(settled5.len(), 1);
        assert_eq!(settled5[0].0, t5);
        assert!(settled5[0].1.success);
        l.release(settled5[0].1, later);
        assert_eq!(l.remaining_bytes(), 100);
    }

    /// InflightReadsLimiterTest.testQueueSizeLimitReached
    #[test]
    fn queue_size_limit_reached() {
        let mut l = InflightReadsLimiter::new(100, 4, TIMEOUT_MS);
        assert!(granted(l.acquire(100, 0)).success);
        for _ in 0..4 {
            queued(l.acquire(50, 0));
        }
        match l.acquire(50, 0) {
            Acquire::Refused(h) => assert!(!h.success),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(l.counts().refused, 1);
    }

    /// InflightReadsLimiterTest.testAcquireExceedingMaxReadsInFlightSize, both data-provider cases.
    #[test]
    fn acquire_exceeding_max_reads_in_flight_size() {
        for first_in_queue in [true, false] {
            let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
            let h1 = granted(l.acquire(100, 0));
            if !first_in_queue {
                queued(l.acquire(50, 0));
            }
            let big = queued(l.acquire(200, 0));
            let settled = l.release(h1, 0);
            let mut rest = settled.as_slice();
            if !first_in_queue {
                assert_eq!(rest[0].1.permits, 50);
                assert!(rest[0].1.success);
                let more = l.release(rest[0].1, 0);
                rest = &rest[1..];
                assert!(rest.is_empty());
                assert_eq!(more.len(), 1);
                assert_eq!(more[0].0, big);
                assert_eq!(more[0].1.permits, 100);
                l.release(more[0].1, 0);
            } else {
                assert_eq!(rest.len(), 1);
                assert_eq!((rest[0].0, rest[0].1.permits), (big, 100));
                l.release(rest[0].1, 0);
            }
            assert_eq!(l.remaining_bytes(), 100);
        }
    }

    /// InflightReadsLimiterTest.testAcquireExceedingMaxReadsWhenAllPermitsAvailable
    #[test]
    fn acquire_exceeding_max_when_all_permits_available() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        let h = granted(l.acquire(200, 0));
        assert!(h.success);
        assert_eq!((h.permits, l.remaining_bytes()), (100, 0));
        l.release(h, 0);
        assert_eq!(l.remaining_bytes(), 100);
    }

    fn acquired_released(l: &InflightReadsLimiter) -> (u64, u64) {
        (l.counts().acquired, l.counts().released)
    }

    /// InflightReadsLimiterTest.testAcquireReleaseCountMetrics, as counts.
    #[test]
    fn acquire_release_counts() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        let h1 = granted(l.acquire(50, 0));
        assert_eq!(acquired_released(&l), (1, 0));
        let h2 = granted(l.acquire(50, 0));
        assert_eq!(acquired_released(&l), (2, 0));
        queued(l.acquire(50, 0));
        assert_eq!(acquired_released(&l), (2, 0));
        let settled = l.release(h1, 0);
        assert!(settled[0].1.success);
        assert_eq!(acquired_released(&l), (3, 1));
        l.release(h2, 0);
        assert_eq!(acquired_released(&l), (3, 2));
        l.release(settled[0].1, 0);
        assert_eq!(acquired_released(&l), (3, 3));
    }

    /// InflightReadsLimiterTest.testAcquireCountMetricsExceedingMax, as counts.
    #[test]
    fn acquire_counts_exceeding_max() {
        let mut l = InflightReadsLimiter::new(100, QUEUE, TIMEOUT_MS);
        let h1 = granted(l.acquire(200, 0));
        assert_eq!(h1.permits, 100);
        assert_eq!(acquired_released(&l), (1, 0));
        queued(l.acquire(200, 0));
        assert_eq!(acquired_released(&l), (1, 0));
        let settled = l.release(h1, 0);
        assert_eq!((settled[0].1.success, settled[0].1.permits), (true, 100));
        assert_eq!(acquired_released(&l), (2, 1));
        l.release(settled[0].1, 0);
        assert_eq!(acquired_released(&l), (2, 2));
    }

    #[test]
    fn estimates_as_pulsar() {
        assert_eq!(estimated_read_bytes(3, None), 3 * (10 * 1024 + 64));
        assert_eq!(estimated_read_bytes(2, Some(0)), 2 * 65);
        assert_eq!(estimated_read_bytes(u64::MAX, Some(u64::MAX)), u64::MAX);
        assert_eq!(
            default_max_reads_in_flight_bytes(1 << 30),
            ((1u64 << 30) as f64 * 0.15) as u64
        );
        assert_eq!(default_max_reads_in_flight_bytes(0), 5 << 20);
    }
}
