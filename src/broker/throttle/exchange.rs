//! The throttle exchange of PIP-385 on one client connection, broker side.
//!
//! On a breach the broker, if the client set `supports_throttle_producer_commands`, sends
//! `ThrottleProducer`. For a topic or resource-group quota it then waits up to
//! `receipt_wait_ms` (Pulsar's throttleProducerReceiptWaitTimeMillis, 100) for the receipt: with
//! it, only that producer waits (it pauses itself); without it, the broker pauses reading the whole
//! connection until the quota resumes, as before. A connection-level breach pauses the connection
//! anyway, and the command only tells the client why. A client without the flag gets no command
//! and the old behaviour.

use super::limiter::Breach;
use super::protocol::{CommandThrottleProducer, ThrottlingReason};
use crate::cache::fast_hash::FastMap;

/// What the broker does about a breach.
#[derive(Debug, Clone, PartialEq)]
pub enum BrokerAction {
    /// Send this command to the client.
    Send(CommandThrottleProducer),
    /// Stop reading the connection until the given time (`None`: until the connection recovers).
    PauseConnection {
        until_ns: Option<u64>,
        reason: ThrottlingReason,
    },
}

#[derive(Debug, Clone, Copy)]
struct AwaitedReceipt {
    deadline_ns: u64,
    resume_at_ns: Option<u64>,
    reason: ThrottlingReason,
}

#[derive(Debug)]
pub struct ServerConnection {
    supports_throttle: bool,
    receipt_wait_ns: u64,
    next_request_id: u64,
    awaited: FastMap<u64, AwaitedReceipt>,
    paused_until: Option<Option<u64>>,
    pub pauses: u64,
    pub commands_sent: u64,
}

impl ServerConnection {
    pub fn new(client_supports_throttle: bool, receipt_wait_ms: u64) -> Self {
        ServerConnection {
            supports_throttle: client_supports_throttle,
            receipt_wait_ns: receipt_wait_ms.saturating_mul(1_000_000),
            next_request_id: 1,
            awaited: FastMap::default(),
            paused_until: None,
            pauses: 0,
            commands_sent: 0,
        }
    }

    fn pause(&mut self, until_ns: Option<u64>, reason: ThrottlingReason) -> BrokerAction {
        self.pauses += 1;
        self.paused_until = Some(match (self.paused_until, until_ns) {
            (Some(Some(a)), Some(b)) => Some(a.max(b)),
            (Some(None), _) | (_, None) => None,
            (_, Some(b)) => Some(b),
        });
        BrokerAction::PauseConnection { until_ns, reason }
    }

    /// The actions a breach by `producer_id` at `now_ns` calls for.
    pub fn on_breach(
        &mut self,
        now_ns: u64,
        producer_id: u64,
        breach: Breach,
    ) -> Vec<BrokerAction> {
        let until = breach.resume_at_ns;
        if !self.supports_throttle {
            return vec![self.pause(until, breach.reason)];
        }
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        self.commands_sent += 1;
        let send = BrokerAction::Send(CommandThrottleProducer::new(
            request_id,
            producer_id,
            breach.reason,
            breach.pause_for_millis,
        ));
        if breach.reason.is_connection_level() {
            return vec![send, self.pause(until, breach.reason)];
        }
        self.awaited.insert(
            request_id,
            AwaitedReceipt {
                deadline_ns: now_ns.saturating_add(self.receipt_wait_ns),
                resume_at_ns: until,
                reason: breach.reason,
            },
        );
        vec![send]
    }

    /// The client's receipt: no pause for that request. False for an unknown or late receipt.
    pub fn on_receipt(&mut self, now_ns: u64, request_id: u64) -> bool {
        match self.awaited.get(&request_id) {
            Some(a) if a.deadline_ns >= now_ns => {
                self.awaited.remove(&request_id);
                true
            }
            _ => false,
        }
    }

    /// Pauses the connection for every receipt that did not come in time.
    pub fn poll(&mut self, now_ns: u64) -> Vec<BrokerAction> {
        let mut late: Vec<(u64, AwaitedReceipt)> = self
            .awaited
            .iter()
            .filter(|(_, a)| a.deadline_ns < now_ns)
            .map(|(r, a)| (*r, *a))
            .collect();
        late.sort_by_key(|(r, _)| *r);
        late.into_iter()
            .map(|(r, a)| {
                self.awaited.remove(&r);
                self.pause(a.resume_at_ns, a.reason)
            })
            .collect()
    }

    /// Whether the broker is not reading this connection at `now_ns`.
    pub fn is_paused(&mut self, now_ns: u64) -> bool {
        match self.paused_until {
            Some(Some(t)) if t <= now_ns => {
                self.paused_until = None;
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Ends a pause that waits for the connection to recover (connection-level breaches).
    pub fn resume(&mut self) {
        self.paused_until = None;
    }
}
