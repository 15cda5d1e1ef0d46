//! The trace format's columns, declared once: the generator's batches (`workload::trace_schema`)
//! and Python's `lc.trace.SCHEMA`, `OPTIONAL`, `OPS` and `REASONS` are built from here.

use super::trace::Op;
use crate::broker::read_flow::RedeliveryReason;
use arrow_schema::{DataType, Field, Schema};

/// A trace column's value type (as written to files; a string column may be dictionary-encoded
/// with int32 keys on the way into the engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceType {
    Int64,
    Int32,
    Utf8,
}

impl TraceType {
    /// The Arrow type's name as pyarrow spells it.
    pub fn name(self) -> &'static str {
        match self {
            TraceType::Int64 => "int64",
            TraceType::Int32 => "int32",
            TraceType::Utf8 => "string",
        }
    }
}

/// One column of the trace format.
#[derive(Debug, Clone, Copy)]
pub struct TraceColumn {
    pub name: &'static str,
    pub kind: TraceType,
    /// A trace may leave it out: readers fill it with nulls.
    pub optional: bool,
    pub doc: &'static str,
}

const fn column(name: &'static str, kind: TraceType, doc: &'static str) -> TraceColumn {
    TraceColumn {
        name,
        kind,
        optional: false,
        doc,
    }
}

/// The trace's columns, in their order.
pub const TRACE_COLUMNS: [TraceColumn; 11] = [
    column(
        "ts_us",
        TraceType::Int64,
        "time of the event in microseconds; non-decreasing within a broker",
    ),
    column("broker", TraceType::Utf8, "the broker that saw it"),
    column("topic", TraceType::Utf8, "the topic (managed ledger)"),
    column("op", TraceType::Utf8, "the event (one of OPS)"),
    column(
        "cursor",
        TraceType::Utf8,
        "the subscription's cursor; null for add, delete, unload and load",
    ),
    column(
        "ledger_id",
        TraceType::Int64,
        "ledger of the position (add, replay, redeliver, ack, individual_ack, seek, delete; open \
         at a position; null: the end; load: the ledger found in storage, null: none)",
    ),
    column("entry_id", TraceType::Int64, "entry of the position"),
    column(
        "count",
        TraceType::Int32,
        "entries asked for by a read (from the cursor's read position); entries an \
         individual_ack acknowledges from its position (null or 0: one); entries a load found \
         from its position",
    ),
    column(
        "size",
        TraceType::Int32,
        "bytes of an add (the whole entry: with producer batching, all its messages); a load's \
         mean entry size",
    ),
    TraceColumn {
        name: "messages",
        kind: TraceType::Int32,
        optional: true,
        doc: "messages in the entry of an add (a batch); null or absent means 1",
    },
    TraceColumn {
        name: "reason",
        kind: TraceType::Utf8,
        optional: true,
        doc: "why a redeliver queued the entry (one of REASONS); null elsewhere or when unknown",
    },
];

/// The `op` column's values, in [`Op`]'s order.
pub const OPS: [&str; Op::NAMES.len()] = Op::NAMES;

/// The `reason` column's values.
pub fn reasons() -> impl Iterator<Item = &'static str> {
    RedeliveryReason::NAMES.iter().map(|(name, _)| *name)
}

/// The trace's Arrow schema, every column nullable; `dictionary_strings` encodes the string
/// columns as dictionaries with int32 keys (what the generator makes and the engine reads fastest).
pub fn arrow_schema(dictionary_strings: bool) -> Schema {
    Schema::new(
        TRACE_COLUMNS
            .iter()
            .map(|c| {
                let data_type = match c.kind {
                    TraceType::Int64 => DataType::Int64,
                    TraceType::Int32 => DataType::Int32,
                    TraceType::Utf8 if dictionary_strings => {
                        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
                    }
                    TraceType::Utf8 => DataType::Utf8,
                };
                Field::new(c.name, data_type, true)
            })
            .collect::<Vec<_>>(),
    )
}
