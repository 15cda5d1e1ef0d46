//! PIP-385's wire values at the ends of their types: the decoders take any bytes, a pause of
//! Java's "forever" saturates, and the limiter's resume time is computed, never walked to.

use ledgercache::broker::throttle::{
    CommandThrottleProducer, CommandThrottleProducerReceipt, FeatureFlags, Producer, SendOutcome,
    ThrottlingReason, TokenBucket,
};
use proptest::prelude::*;

mod support;

const MS: u64 = 1_000_000;

#[test]
fn a_pause_of_java_long_max_ms_throttles_forever() {
    // Before: now + pause * 10^6 wrapped round to a time already past, so nothing was throttled.
    let mut p = Producer::new("t", 1, 30_000).unwrap();
    let now = 1_000_000 * MS;
    let cmd = CommandThrottleProducer::new(
        1,
        1,
        ThrottlingReason::TopicProduceQuotaExceeded,
        i64::MAX as u64,
    );
    p.on_throttle(now, &cmd).unwrap();
    assert!(p.is_throttled(now));
    assert!(p.is_throttled(u64::MAX - 1));
    assert_eq!(p.throttled_until_ns(), u64::MAX);
    assert_eq!(
        p.send(now + 1).1,
        SendOutcome::Deferred { until_ns: u64::MAX }
    );
    for _ in 0..3 {
        p.on_throttle(now, &cmd).unwrap();
    }
    assert_eq!(p.throttled_times()[0].2, u64::MAX, "the counter saturates");
    // A send timeout of u64::MAX ms is forever too: nothing expires.
    let mut p = Producer::new("t", 1, u64::MAX).unwrap();
    p.send(5);
    assert!(p.expire(u64::MAX - 1).is_empty());
}

#[test]
fn a_slow_rate_resumes_at_a_computed_time() {
    // The resume time is computed from the debt, never walked to a step at a time.
    let mut b = TokenBucket::new(1, 0);
    assert!(!b.consume(0, u64::MAX));
    // A refill beyond u64 nanoseconds: never.
    assert_eq!(b.resume_at(0), u64::MAX);
    let mut b = TokenBucket::new(1, 0);
    b.consume(0, 1_000_001);
    // A debt of 10^6 tokens and the target (1 token) at 1/s: 10^6 + 1 seconds.
    assert_eq!(b.resume_at(0), 1_000_001 * 1_000_000_000);
    // At 10/s, a debt of 15 and the target of 1 token refill in 1.6 s, with no second mark.
    let mut b = TokenBucket::new(10, 0);
    b.consume(500 * MS, 25);
    assert_eq!(b.resume_at(500 * MS), 2_100 * MS);
}

proptest! {
    #![proptest_config(support::fixed_cases(256))]

    /// Any bytes decode to a command or an error, never a panic; a command decoded from arbitrary
    /// bytes re-encodes to a command that decodes the same.
    #[test]
    fn decoders_take_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..48)) {
        if let Ok(cmd) = CommandThrottleProducer::decode_bytes(&data) {
            prop_assert!(cmd.reason().is_ok());
            prop_assert_eq!(CommandThrottleProducer::decode_bytes(&cmd.encode_bytes()).unwrap(), cmd);
        }
        if let Ok(r) = CommandThrottleProducerReceipt::decode_bytes(&data) {
            prop_assert_eq!(CommandThrottleProducerReceipt::decode_bytes(&r.encode_bytes()).unwrap(), r);
        }
        let _ = FeatureFlags::decode_bytes(&data);
    }

    /// Every command round-trips, every proper prefix of its encoding is rejected (required
    /// fields are enforced), and handling it never throttles until a time already past.
    #[test]
    fn commands_round_trip_and_truncations_fail(
        request_id in any::<u64>(),
        producer_id in any::<u64>(),
        reason in 0usize..5,
        pause in any::<u64>(),
        now in any::<u64>(),
    ) {
        let cmd = CommandThrottleProducer::new(request_id, producer_id, ThrottlingReason::ALL[reason], pause);
        let bytes = cmd.encode_bytes();
        prop_assert_eq!(CommandThrottleProducer::decode_bytes(&bytes).unwrap(), cmd.clone());
        for cut in 0..bytes.len() {
            prop_assert!(CommandThrottleProducer::decode_bytes(&bytes[..cut]).is_err());
        }
        let mut p = Producer::new("t", producer_id, 30_000).unwrap();
        let receipt = p.on_throttle(now, &cmd).unwrap();
        prop_assert_eq!(receipt.request_id, request_id);
        prop_assert!(p.throttled_until_ns() >= now);
        prop_assert_eq!(p.is_throttled(now), pause > 0 && now < u64::MAX);
    }
}
