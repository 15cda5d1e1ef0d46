//! The generator's output: the trace's rows, column by column.

use crate::cache::position::Position;
use std::ops::Range;

/// `reason` of a `redeliver` row: the entry's consumer had no permits, or its key already
/// waited in the replay queue (Key_Shared).
pub const REASON_HOLD_BACK: &str = "hold-back";
/// `reason` of a `redeliver` row: a consumer negatively acknowledged the entry.
pub const REASON_NACK: &str = "nack";
/// `reason` of a `redeliver` row: a read brought more messages than the consumers had permits
/// for (Shared).
pub const REASON_OVERFLOW: &str = "overflow";

/// The generated events, column by column (the trace format's columns).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct EventColumns {
    pub ts_us: Vec<i64>,
    pub broker: Vec<u32>,
    pub topic: Vec<u32>,
    pub op: Vec<&'static str>,
    pub cursor: Vec<Option<u32>>,
    pub ledger_id: Vec<Option<i64>>,
    pub entry_id: Vec<Option<i64>>,
    pub count: Vec<i32>,
    pub size: Vec<i32>,
    /// Messages in the entry (`add`); `None` elsewhere.
    pub messages: Vec<Option<i32>>,
    /// Why an entry was queued for redelivery (`redeliver`); `None` elsewhere.
    pub reason: Vec<Option<&'static str>>,
    pub broker_names: Vec<String>,
    pub topic_names: Vec<String>,
    pub cursor_names: Vec<String>,
}

/// One row, before it is placed (time, broker, topic).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Row {
    pub(super) op: &'static str,
    pub(super) cursor: Option<u32>,
    pub(super) idx: Option<u64>,
    pub(super) count: i32,
    pub(super) size: i32,
    pub(super) messages: Option<i32>,
    pub(super) reason: Option<&'static str>,
}

impl Row {
    pub(super) fn new(op: &'static str, cursor: Option<u32>, idx: Option<u64>) -> Self {
        Row {
            op,
            cursor,
            idx,
            ..Default::default()
        }
    }
}

impl EventColumns {
    pub fn len(&self) -> usize {
        self.ts_us.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts_us.is_empty()
    }

    pub(super) fn push(
        &mut self,
        ts: u64,
        broker: u32,
        topic: u32,
        row: Row,
        pos: Option<Position>,
    ) {
        self.ts_us.push(ts as i64);
        self.broker.push(broker);
        self.topic.push(topic);
        self.op.push(row.op);
        self.cursor.push(row.cursor);
        self.ledger_id.push(pos.map(|p| p.ledger_id));
        self.entry_id.push(pos.map(|p| p.entry_id));
        self.count.push(row.count);
        self.size.push(row.size);
        self.messages.push(row.messages);
        self.reason.push(row.reason);
    }

    /// Drops the rows (keeps the name tables and the capacity).
    pub(super) fn clear_rows(&mut self) {
        self.drain_front(self.len());
    }

    /// Drops the first `n` rows.
    pub(super) fn drain_front(&mut self, n: usize) {
        self.ts_us.drain(..n);
        self.broker.drain(..n);
        self.topic.drain(..n);
        self.op.drain(..n);
        self.cursor.drain(..n);
        self.ledger_id.drain(..n);
        self.entry_id.drain(..n);
        self.count.drain(..n);
        self.size.drain(..n);
        self.messages.drain(..n);
        self.reason.drain(..n);
    }

    /// Appends rows `r` of `other`.
    pub(super) fn extend_from(&mut self, other: &EventColumns, r: Range<usize>) {
        self.ts_us.extend_from_slice(&other.ts_us[r.clone()]);
        self.broker.extend_from_slice(&other.broker[r.clone()]);
        self.topic.extend_from_slice(&other.topic[r.clone()]);
        self.op.extend_from_slice(&other.op[r.clone()]);
        self.cursor.extend_from_slice(&other.cursor[r.clone()]);
        self.ledger_id
            .extend_from_slice(&other.ledger_id[r.clone()]);
        self.entry_id.extend_from_slice(&other.entry_id[r.clone()]);
        self.count.extend_from_slice(&other.count[r.clone()]);
        self.size.extend_from_slice(&other.size[r.clone()]);
        self.messages.extend_from_slice(&other.messages[r.clone()]);
        self.reason.extend_from_slice(&other.reason[r]);
    }

    pub(super) fn push_from(&mut self, other: &EventColumns, i: usize) {
        self.ts_us.push(other.ts_us[i]);
        self.broker.push(other.broker[i]);
        self.topic.push(other.topic[i]);
        self.op.push(other.op[i]);
        self.cursor.push(other.cursor[i]);
        self.ledger_id.push(other.ledger_id[i]);
        self.entry_id.push(other.entry_id[i]);
        self.count.push(other.count[i]);
        self.size.push(other.size[i]);
        self.messages.push(other.messages[i]);
        self.reason.push(other.reason[i]);
    }
}
