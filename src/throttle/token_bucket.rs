//! A publish-rate token bucket as Pulsar's PIP-322 limiter uses it: `rate` tokens per second, up to
//! one second's worth saved; a publish takes its tokens even when that overdraws the bucket, which
//! then throttles until the next whole second of the clock, when reads resume (lazily) if the
//! refill has covered the debt.

const SECOND_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    rate: f64,
    tokens: f64,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket at `now_ns`.
    pub fn new(rate_per_second: f64, now_ns: u64) -> Self {
        TokenBucket {
            rate: rate_per_second,
            tokens: rate_per_second,
            last_ns: now_ns,
        }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            let elapsed = (now_ns - self.last_ns) as f64 / SECOND_NS as f64;
            self.tokens = (self.tokens + elapsed * self.rate).min(self.rate);
            self.last_ns = now_ns;
        }
    }

    /// Takes `n` tokens; returns false if the bucket is overdrawn afterwards (the quota is breached).
    pub fn consume(&mut self, now_ns: u64, n: f64) -> bool {
        self.refill(now_ns);
        self.tokens -= n;
        self.tokens >= 0.0
    }

    /// Tokens left (negative: owed).
    pub fn tokens(&mut self, now_ns: u64) -> f64 {
        self.refill(now_ns);
        self.tokens
    }

    /// When a throttled publisher may resume: the next whole second, or later if the debt needs
    /// more than that to refill.
    pub fn resume_at(&mut self, now_ns: u64) -> u64 {
        self.refill(now_ns);
        let next_second = |t: u64| (t / SECOND_NS).saturating_add(1).saturating_mul(SECOND_NS);
        let at = next_second(now_ns);
        if self.tokens < 0.0 && self.rate > 0.0 {
            // The first second mark at or after the debt is refilled, computed at once (a tiny
            // rate's debt can take longer than u64 nanoseconds: the cast saturates, never loops).
            let refilled_at =
                now_ns.saturating_add((-self.tokens / self.rate * SECOND_NS as f64).ceil() as u64);
            if refilled_at > at {
                return next_second(refilled_at - 1);
            }
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_one_second_of_burst_then_resumes_at_the_next_second() {
        let mut b = TokenBucket::new(10.0, 0);
        let admitted = (0..15).take_while(|_| b.consume(100_000_000, 1.0)).count();
        assert_eq!(admitted, 10, "the 11th publish overdraws the bucket");
        assert_eq!(b.resume_at(100_000_000), SECOND_NS);
        // Overdrawn by 1 at 0.1 s: 0.1 s refills it, so the next second mark is enough.
        assert!(b.tokens(SECOND_NS) > 0.0);
        // A debt larger than a second's refill waits for a later second mark.
        let mut b = TokenBucket::new(10.0, 0);
        b.consume(500_000_000, 25.0);
        assert_eq!(b.resume_at(500_000_000), 2 * SECOND_NS);
    }
}
