//! A publish-rate token bucket with the semantics of Pulsar's `AsyncTokenBucket` as
//! `PublishRateLimiterImpl.updateTokenBuckets` builds it (`FinalRateAsyncTokenBucket` with the
//! builder's defaults, master):
//!
//! - whole tokens; `rate` tokens a second, a capacity of one second's worth (`rate`), starting full;
//! - a publish takes its tokens even when that overdraws the bucket, and throttles when the balance
//!   left is not above zero (`consumeTokensAndCheckIfContainsTokens` is `balance > 0`), so the
//!   publish that takes the last token already throttles;
//! - tokens are added lazily and only in steps: not before 16 ms have passed since the last
//!   addition (`DEFAULT_ADD_TOKENS_RESOLUTION_NANOS`), or the time one token takes when that is
//!   longer; the nanoseconds left over from a step are carried into the next, so slow rates do not
//!   drift;
//! - a throttled publisher resumes once the debt and a small target are refilled: 1% of the
//!   capacity, at least one token (`calculateThrottlingDuration`,
//!   `DEFAULT_TARGET_FILL_FACTOR_AFTER_THROTTLING`), with no alignment to seconds. Pulsar's
//!   unthrottling task (`PublishRateLimiterImpl.unthrottleQueuedProducers`) checks again when that
//!   time comes and waits once more if the stepwise refill has not got there yet;
//!   [`TokenBucket::resume_at`] follows those checks.
//!
//! Pulsar's clock is monotonic; ours can be asked about an earlier time than it last saw (publishes
//! of different connections are accepted out of order): such a call adds no tokens.

const SECOND_NS: u128 = 1_000_000_000;

/// `AsyncTokenBucket.DEFAULT_ADD_TOKENS_RESOLUTION_NANOS`.
pub const ADD_TOKENS_RESOLUTION_NS: u64 = 16_000_000;

/// The share of the capacity a throttled publisher waits to have back, beyond its debt
/// (`FinalRateAsyncTokenBucket.DEFAULT_TARGET_FILL_FACTOR_AFTER_THROTTLING`, as a divisor).
const TARGET_AFTER_THROTTLING_DIVISOR: u64 = 100;

/// A bound on the unthrottling checks [`TokenBucket::resume_at`] follows; a handful suffice (the
/// first check refills all but at most a token, the next ones the rest), this only keeps a
/// pathological rate from looping long.
const MAX_UNTHROTTLE_CHECKS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBucket {
    rate: u64,
    capacity: i64,
    /// Tokens a throttled publisher waits for beyond its debt (at least 1).
    target_after_throttling: i64,
    nanos_for_one_token: u64,
    tokens: i64,
    last_ns: u64,
    remainder_ns: u64,
}

impl TokenBucket {
    /// A full bucket at `now_ns`: `rate` tokens a second, at least 1 (Pulsar has no bucket at all
    /// for a rate of 0) and at most `i64::MAX` (Pulsar's rates are Java longs; the bound also keeps
    /// the refill's products within 128 bits).
    pub fn new(rate_per_second: u64, now_ns: u64) -> Self {
        let capacity = i64::try_from(rate_per_second).unwrap_or(i64::MAX).max(1);
        let rate = capacity as u64;
        TokenBucket {
            rate,
            capacity,
            target_after_throttling: (capacity / TARGET_AFTER_THROTTLING_DIVISOR as i64).max(1),
            nanos_for_one_token: (SECOND_NS / u128::from(rate)) as u64,
            tokens: capacity,
            last_ns: now_ns,
            remainder_ns: 0,
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The latest time at which no tokens can be added yet: the next addition needs a time after
    /// it (`AsyncTokenBucket.calculateNewTokensSinceLastUpdate`'s minimum increment).
    fn no_refill_until(&self) -> i128 {
        let min_increment = if self.nanos_for_one_token > ADD_TOKENS_RESOLUTION_NS {
            i128::from(self.nanos_for_one_token) - i128::from(self.remainder_ns) - 1
        } else {
            i128::from(ADD_TOKENS_RESOLUTION_NS)
        };
        i128::from(self.last_ns) + min_increment
    }

    fn refill(&mut self, now_ns: u64) {
        if now_ns < self.last_ns || i128::from(now_ns) <= self.no_refill_until() {
            return;
        }
        let elapsed = u128::from(now_ns - self.last_ns) + u128::from(self.remainder_ns);
        let rate = u128::from(self.rate);
        let new_tokens = elapsed * rate / SECOND_NS;
        // What the added tokens took, rounded down; the rest is carried to the next addition.
        let used = new_tokens * SECOND_NS / rate;
        self.remainder_ns = u64::try_from(elapsed - used).unwrap_or(u64::MAX);
        self.last_ns = now_ns;
        let new_tokens = i64::try_from(new_tokens).unwrap_or(i64::MAX);
        self.tokens = self.tokens.saturating_add(new_tokens).min(self.capacity);
    }

    /// Takes `n` tokens at `now_ns`; returns false if the publish throttles (no token left).
    pub fn consume(&mut self, now_ns: u64, n: u64) -> bool {
        self.refill(now_ns);
        self.tokens = self
            .tokens
            .saturating_sub(i64::try_from(n).unwrap_or(i64::MAX));
        self.tokens > 0
    }

    /// Tokens left at `now_ns` (negative: owed).
    pub fn tokens(&mut self, now_ns: u64) -> i64 {
        self.refill(now_ns);
        self.tokens
    }

    /// How long a throttled publisher waits from `now_ns` for the debt and the target to be
    /// refilled, by the rate alone (0 when they are there already).
    pub fn throttling_duration_ns(&mut self, now_ns: u64) -> u64 {
        self.refill(now_ns);
        if self.tokens >= self.target_after_throttling {
            return 0;
        }
        let needed = (i128::from(self.target_after_throttling) - i128::from(self.tokens)) as u128;
        u64::try_from(needed * SECOND_NS / u128::from(self.rate)).unwrap_or(u64::MAX)
    }

    /// When a publisher throttled at `now_ns` resumes: Pulsar's unthrottling task checks after
    /// [`Self::throttling_duration_ns`] and, while the stepwise refill has not reached the target,
    /// waits the duration it then computes and checks again. See [`resume_at`].
    pub fn resume_at(&mut self, now_ns: u64) -> u64 {
        resume_at(&mut [self], now_ns)
    }
}

/// When publishers throttled at `now_ns` by any of `buckets` resume: the first of the unthrottling
/// checks (the first at `now_ns` plus the longest throttling duration of the buckets, each next one
/// the longest duration later) at which every bucket has its debt and target back. Each check adds
/// the tokens due, as Pulsar's do; checks at which no bucket can add any change nothing and are
/// skipped over at once.
pub fn resume_at(buckets: &mut [&mut TokenBucket], now_ns: u64) -> u64 {
    let mut at = now_ns;
    for _ in 0..MAX_UNTHROTTLE_CHECKS {
        let wait = buckets
            .iter_mut()
            .map(|b| b.throttling_duration_ns(at))
            .max()
            .unwrap_or(0);
        if wait == 0 {
            return at;
        }
        // Checks that no bucket can refill at see the same balances and wait the same again: go to
        // the first one after some bucket's next possible refill.
        let refill_after = buckets
            .iter()
            .map(|b| b.no_refill_until())
            .min()
            .unwrap_or(i128::MIN);
        let steps = if i128::from(at) + i128::from(wait) > refill_after {
            1
        } else {
            (refill_after - i128::from(at)) / i128::from(wait) + 1
        };
        match u64::try_from(i128::from(at) + steps * i128::from(wait)) {
            Ok(next) => at = next,
            Err(_) => return u64::MAX,
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn throttles_at_the_last_token_and_resumes_when_the_debt_and_one_token_are_back() {
        let mut b = TokenBucket::new(10, 0);
        let admitted = (0..15).take_while(|_| b.consume(100 * MS, 1)).count();
        assert_eq!(
            admitted, 9,
            "the 10th publish takes the last token and throttles"
        );
        // Balance 0 at 0.1 s; the target is max(1, 10 / 100) = 1 token: 100 ms, not the next second.
        assert_eq!(b.resume_at(100 * MS), 200 * MS);
        assert_eq!(b.tokens(200 * MS), 1);
        // A debt of 15 tokens and the target: 1.6 s.
        let mut b = TokenBucket::new(10, 0);
        b.consume(500 * MS, 25);
        assert_eq!(b.resume_at(500 * MS), 2_100 * MS);
    }

    #[test]
    fn the_target_is_a_hundredth_of_the_capacity() {
        // 1 MB/s: capacity 1,000,000 bytes, target 10,000 bytes (10 ms); a debt of 20,000 bytes
        // and the target take 30 ms.
        let mut b = TokenBucket::new(1_000_000, 0);
        assert!(!b.consume(0, 1_020_000));
        assert_eq!(b.throttling_duration_ns(0), 30 * MS);
        assert_eq!(b.resume_at(0), 30 * MS);
    }

    #[test]
    fn tokens_come_in_steps_of_the_resolution() {
        // 1000 msg/s: one token a millisecond, but none are added until more than 16 ms passed
        // since the last addition.
        let mut b = TokenBucket::new(1000, 0);
        assert!(!b.consume(0, 1000));
        assert_eq!(
            b.tokens(16 * MS),
            0,
            "16 ms is not more than the resolution"
        );
        assert_eq!(b.tokens(16 * MS + 1), 16);
        // Throttled at 16 ms + 1 ns with no token left, it waits for the target, 1000 / 100 = 10
        // tokens (10 ms). The check at 26 ms + 1 ns is within the resolution of the last addition
        // and adds nothing, so it waits 10 ms more: the check at 36 ms + 1 ns adds 20 tokens.
        assert!(!b.consume(16 * MS + 1, 16));
        assert_eq!(b.resume_at(16 * MS + 1), 36 * MS + 1);
        assert_eq!(b.tokens(36 * MS + 1), 20);
    }

    #[test]
    fn a_rate_that_does_not_divide_a_second_resumes_on_a_later_check() {
        // 3/s: a token is 333,333,333 ns by the rounded-down duration, but that many nanoseconds
        // add no whole token (999,999,999 / 1e9); the nanoseconds carry over and the next check,
        // one token's duration later, adds it.
        let mut b = TokenBucket::new(3, 0);
        assert!(!b.consume(0, 3));
        assert_eq!(b.throttling_duration_ns(0), 333_333_333);
        assert_eq!(b.resume_at(0), 666_666_666);
        assert_eq!(b.tokens(666_666_666), 1);
    }

    #[test]
    fn extreme_rates_and_debts_do_not_overflow() {
        let mut b = TokenBucket::new(u64::MAX, 0);
        assert_eq!(b.rate(), i64::MAX as u64);
        assert!(
            !b.consume(u64::MAX, u64::MAX - 1),
            "a full bucket, all taken"
        );
        assert_eq!(b.resume_at(u64::MAX), u64::MAX);
        let mut b = TokenBucket::new(1, 0);
        assert!(!b.consume(0, u64::MAX));
        assert_eq!(b.resume_at(0), u64::MAX);
        let mut b = TokenBucket::new(0, 10);
        assert!(!b.consume(5, 1), "an earlier time adds nothing");
    }
}
