//! Time sources. Everything that reads time takes a [`Clock`], so tests and replays run on a
//! [`ManualClock`] and are deterministic.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// A monotonic time source in nanoseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ns(&self) -> u64;
}

pub type SharedClock = Arc<dyn Clock>;

/// The system monotonic clock, counted from the first time any `SystemClock` is read in this process.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        // +1 so that "never" (0) is distinguishable from the first reading.
        ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
    }
}

/// A clock that moves only when told to. Shared by reference: clones see the same time.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    pub fn new(start_ns: u64) -> Self {
        ManualClock {
            now: AtomicU64::new(start_ns),
        }
    }

    /// Moves the clock forward by `ns` (stopping at the end of time rather than wrapping); returns
    /// the new time.
    pub fn advance_ns(&self, ns: u64) -> u64 {
        let before = self
            .now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(ns))
            })
            .expect("the update always succeeds");
        before.saturating_add(ns)
    }

    pub fn advance_ms(&self, ms: u64) -> u64 {
        self.advance_ns(ms.saturating_mul(1_000_000))
    }

    /// Moves the clock forward by `ns`, or fails (leaving it unchanged) if that passes the
    /// largest time a clock holds; `what` names the argument in the error.
    pub fn checked_advance_ns(&self, ns: u64, what: &'static str) -> crate::error::Result<u64> {
        self.now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_add(ns))
            .map(|before| before + ns)
            .map_err(|now| {
                crate::error::Error::invalid(
                    what,
                    format!("moving the clock {ns} ns past {now} ns overflows it"),
                )
            })
    }

    /// Moves the clock to `ns` if that is not in the past; returns the clock's time afterwards.
    pub fn advance_to(&self, ns: u64) -> u64 {
        // A clock already there is only read: a replay moves it before every read of the cache,
        // mostly to the time it already shows, and an atomic read-modify-write costs far more.
        let now = self.now.load(Ordering::Acquire);
        if now >= ns {
            return now;
        }
        self.now.fetch_max(ns, Ordering::AcqRel).max(ns)
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Acquire)
    }
}

pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_forward_when_told() {
        let c = ManualClock::new(5);
        assert_eq!(c.now_ns(), 5);
        assert_eq!(c.advance_ms(2), 2_000_005);
        assert_eq!(c.advance_to(10), 2_000_005);
        assert_eq!(c.advance_to(3_000_000), 3_000_000);
    }

    #[test]
    fn a_manual_clock_never_goes_backwards() {
        let c = ManualClock::new(10);
        assert_eq!(
            c.advance_ns(u64::MAX),
            u64::MAX,
            "saturates instead of wrapping"
        );
        assert_eq!(c.now_ns(), u64::MAX);
        let c = ManualClock::new(10);
        assert!(c.checked_advance_ns(u64::MAX, "ns").is_err());
        assert_eq!(c.now_ns(), 10, "a refused advance changes nothing");
        assert_eq!(c.checked_advance_ns(5, "ns").unwrap(), 15);
    }

    #[test]
    fn system_clock_is_monotonic() {
        let c = SystemClock;
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(a >= 1 && b >= a);
    }
}
