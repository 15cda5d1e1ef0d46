//! PIP-385's cases, each as the proposal describes it, and the client producers.

use ledgercache::broker::throttle::{
    Breach, BrokerAction, CommandThrottleProducer, PartitionedProducer, Producer, SendFailure,
    SendOutcome, ServerConnection, ThrottlingReason,
};

const MS: u64 = 1_000_000;

fn topic_breach() -> Breach {
    Breach {
        reason: ThrottlingReason::TopicProduceQuotaExceeded,
        pause_for_millis: 600,
        resume_at_ns: Some(1_000 * MS),
    }
}

fn sent(actions: &[BrokerAction]) -> Vec<CommandThrottleProducer> {
    actions
        .iter()
        .filter_map(|a| {
            if let BrokerAction::Send(c) = a {
                Some(c.clone())
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn receipt_in_time_no_connection_pause_and_only_the_producer_waits() {
    let mut conn = ServerConnection::new(true, 100);
    let mut hot = Producer::new("hot", 1, 30_000).unwrap();
    let mut cold = Producer::new("cold", 2, 30_000).unwrap();
    let actions = conn.on_breach(400 * MS, 1, topic_breach());
    let cmds = sent(&actions);
    assert_eq!(cmds.len(), 1);
    assert_eq!((cmds[0].producer_id, cmds[0].pause_for_millis), (1, 600));
    let receipt = hot.on_throttle(400 * MS, &cmds[0]).unwrap();
    assert!(conn.on_receipt(450 * MS, receipt.request_id));
    assert!(conn.poll(600 * MS).is_empty());
    assert!(!conn.is_paused(600 * MS));
    assert!(hot.is_throttled(600 * MS) && !cold.is_throttled(600 * MS));
    assert_eq!(
        hot.send(700 * MS).1,
        SendOutcome::Deferred {
            until_ns: 1_000 * MS
        }
    );
    assert_eq!(cold.send(700 * MS).1, SendOutcome::Sent);
    assert!(
        !hot.is_throttled(1_000 * MS),
        "cleared lazily once the pause has passed"
    );
    assert_eq!(
        hot.throttled_times(),
        vec![(ThrottlingReason::TopicProduceQuotaExceeded, "hot", 600)]
    );
}

#[test]
fn no_receipt_pauses_the_connection_after_the_wait() {
    let mut conn = ServerConnection::new(true, 100);
    let cmds = sent(&conn.on_breach(400 * MS, 1, topic_breach()));
    assert!(conn.poll(500 * MS).is_empty(), "still within 100 ms");
    assert!(!conn.is_paused(500 * MS));
    let late = conn.poll(501 * MS);
    assert_eq!(
        late,
        vec![BrokerAction::PauseConnection {
            until_ns: Some(1_000 * MS),
            reason: ThrottlingReason::TopicProduceQuotaExceeded
        }]
    );
    assert!(conn.is_paused(700 * MS) && !conn.is_paused(1_000 * MS));
    assert!(
        !conn.on_receipt(800 * MS, cmds[0].request_id),
        "a late receipt changes nothing"
    );
}

#[test]
fn connection_level_breaches_pause_and_inform() {
    for reason in [
        ThrottlingReason::ConnectionPendingMessagesBreach,
        ThrottlingReason::MessageBufferSizeBreach,
        ThrottlingReason::BrokerProduceQuotaExceeded,
    ] {
        let mut conn = ServerConnection::new(true, 100);
        let actions = conn.on_breach(
            0,
            5,
            Breach {
                reason,
                pause_for_millis: 0,
                resume_at_ns: None,
            },
        );
        let cmds = sent(&actions);
        assert_eq!(
            (
                cmds.len(),
                cmds[0].pause_for_millis,
                cmds[0].reason().unwrap()
            ),
            (1, 0, reason)
        );
        assert!(conn.is_paused(0), "{reason:?}: paused anyway");
        conn.resume();
        assert!(!conn.is_paused(0));
    }
}

#[test]
fn an_old_client_gets_no_command_and_the_old_behaviour() {
    let mut conn = ServerConnection::new(false, 100);
    let actions = conn.on_breach(400 * MS, 1, topic_breach());
    assert!(sent(&actions).is_empty());
    assert!(conn.is_paused(400 * MS));
    assert_eq!(conn.commands_sent, 0);
}

#[test]
fn a_timeout_while_throttled_names_the_reason() {
    let mut p = Producer::new("t", 1, 100).unwrap();
    let (s0, _) = p.send(0);
    let cmd = CommandThrottleProducer::new(
        9,
        1,
        ThrottlingReason::ResourceGroupProduceQuotaExceeded,
        500,
    );
    p.on_throttle(50 * MS, &cmd).unwrap();
    let (s1, outcome) = p.send(60 * MS);
    assert_eq!(outcome, SendOutcome::Deferred { until_ns: 550 * MS });
    let reason = ThrottlingReason::ResourceGroupProduceQuotaExceeded;
    assert_eq!(
        p.expire(120 * MS),
        vec![SendFailure::Throttled {
            sequence: s0,
            reason
        }]
    );
    assert_eq!(
        p.expire(200 * MS),
        vec![SendFailure::Throttled {
            sequence: s1,
            reason
        }]
    );
    assert!(p.expire(10_000 * MS).is_empty(), "each send fails once");
    let mut q = Producer::new("t", 2, 100).unwrap();
    let (s, _) = q.send(0);
    assert_eq!(
        q.expire(100 * MS),
        vec![SendFailure::TimedOut { sequence: s }]
    );
    assert!(
        q.on_throttle(0, &cmd).is_err(),
        "a command for another producer"
    );
}

#[test]
fn partitioned_round_robin_skips_throttled_partitions() {
    let mut pp = PartitionedProducer::new("orders", 3, 10, 30_000).unwrap();
    let cmd =
        CommandThrottleProducer::new(1, 11, ThrottlingReason::TopicProduceQuotaExceeded, 1000);
    pp.partition(1).unwrap().on_throttle(0, &cmd).unwrap();
    assert!(pp.is_throttled(0));
    let chosen: Vec<usize> = (0..4).map(|_| pp.send(MS).0).collect();
    assert_eq!(chosen, vec![0, 2, 0, 2]);
    assert!(!pp.is_throttled(2_000 * MS));
    let chosen: Vec<usize> = (0..3).map(|_| pp.send(2_000 * MS).0).collect();
    assert_eq!(chosen, vec![0, 1, 2]);
}
