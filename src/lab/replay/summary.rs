//! The replay's results as tables: the summary (a row per broker and configuration) and the
//! per-second series, each declared once here (name, Arrow type, doc and where its value comes
//! from). The Python bindings hand out the batches built here and export the declarations as
//! `lc.replay.SUMMARY_SCHEMA` / `SERIES_SCHEMA`, so the report, the command line and the docs read
//! the columns from one place: a new column is one entry in [`SUMMARY`].

use super::engine::{PerSecond, ReplayMetrics};
use crate::config::CacheConfig;
use crate::error::{Error, Result};
use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A column's Arrow type: the three the tables use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Utf8,
    Int64,
    Float64,
}

impl Kind {
    fn data_type(self) -> DataType {
        match self {
            Kind::Utf8 => DataType::Utf8,
            Kind::Int64 => DataType::Int64,
            Kind::Float64 => DataType::Float64,
        }
    }
}

/// One cell, before it goes into its column's builder.
pub enum Value<'a> {
    Str(&'a str),
    /// Null where the value was not measured.
    Int(Option<u64>),
    I64(i64),
    Float(f64),
    /// Null where there is nothing to measure.
    MaybeFloat(Option<f64>),
}

/// One replay's results, as [`Session::finish`](super::Session::finish) gives them, with the
/// configuration's settings as JSON (the bindings write it the way `CacheConfig.to_dict` reads).
pub struct Run {
    pub broker: String,
    pub config: CacheConfig,
    pub metrics: ReplayMetrics,
    pub took: Duration,
    pub config_json: String,
}

/// One second of a run's series: the engine's counts of it, with its place and time to warm.
pub struct Second {
    /// The run's place among its broker's configurations.
    pub config_index: u64,
    pub counts: PerSecond,
    pub time_to_warm_seconds: Option<f64>,
}

/// A column: its name, type, what it means, and its value in a row: a run and, for the series,
/// one of its seconds (`S`).
pub struct Column<S> {
    pub name: &'static str,
    pub kind: Kind,
    /// Whether the value can be missing (not measured).
    pub nullable: bool,
    pub doc: &'static str,
    pub value: for<'a> fn(&'a Run, &'a S) -> Value<'a>,
}

const fn int<S>(
    name: &'static str,
    doc: &'static str,
    value: for<'a> fn(&'a Run, &'a S) -> Value<'a>,
) -> Column<S> {
    Column {
        name,
        kind: Kind::Int64,
        nullable: false,
        doc,
        value,
    }
}

/// The summary's columns, in their order.
pub const SUMMARY: &[Column<()>] = &[
    Column {
        name: "broker",
        kind: Kind::Utf8,
        nullable: false,
        doc: "the broker whose events were replayed (the trace's `broker` column)",
        value: |r, _| Value::Str(&r.broker),
    },
    Column {
        name: "strategy",
        kind: Kind::Utf8,
        nullable: false,
        doc: "the design (`lc.designs()` names them)",
        value: |r, _| Value::Str(r.config.strategy.name()),
    },
    int("cache_size_bytes", "the cache's size", |r, _| {
        Value::Int(Some(r.config.cache_size_bytes))
    }),
    int("events", "trace events replayed", |r, _| {
        Value::Int(Some(r.metrics.events))
    }),
    int(
        "entries_read",
        "entries the cursors read, from the cache or from storage",
        |r, _| Value::Int(Some(r.metrics.entries_read)),
    ),
    int(
        "read_bytes",
        "bytes of all entries read (from the cache or from storage)",
        |r, _| Value::Int(Some(r.metrics.read_bytes)),
    ),
    int("hits", "entries read from the cache", |r, _| {
        Value::Int(Some(r.metrics.hits))
    }),
    int("misses", "entries read from storage", |r, _| {
        Value::Int(Some(r.metrics.misses))
    }),
    Column {
        name: "hit_ratio",
        kind: Kind::Float64,
        nullable: false,
        doc: "hits / entries_read (0 without reads)",
        value: |r, _| Value::Float(r.metrics.hit_ratio()),
    },
    int(
        "storage_read_ops",
        "reads sent to storage (BookKeeper)",
        |r, _| Value::Int(Some(r.metrics.storage_read_ops)),
    ),
    int("storage_read_bytes", "bytes read from storage", |r, _| {
        Value::Int(Some(r.metrics.storage_read_bytes))
    }),
    int("published_entries", "entries published", |r, _| {
        Value::Int(Some(r.metrics.published_entries))
    }),
    int("published_bytes", "bytes published", |r, _| {
        Value::Int(Some(r.metrics.published_bytes))
    }),
    int(
        "evicted_entries",
        "entries the design's eviction removed",
        |r, _| Value::Int(Some(r.metrics.evicted_entries)),
    ),
    int(
        "invalidated_entries",
        "entries invalidated (cursors passed them, the last active cursor left) or whose ledger \
         was deleted; a broker's brk_ml_cache_evicted_entries_total counts these and \
         evicted_entries both",
        |r, _| Value::Int(Some(r.metrics.invalidated_entries)),
    ),
    int(
        "requeues",
        "entries PIP-430 moved back in its removal queue (TTL extended)",
        |r, _| Value::Int(Some(r.metrics.requeues)),
    ),
    int(
        "peak_cache_bytes",
        "the most bytes the cache accounted for at once",
        |r, _| Value::Int(Some(r.metrics.peak_cache_bytes)),
    ),
    Column {
        name: "peak_retained_bytes",
        kind: Kind::Int64,
        nullable: true,
        doc: "the most bytes the cached entries' buffers really held at once; null when not \
              measured (entries sliced from buffers with the memory model off)",
        value: |r, _| {
            let measured = r.config.copy_entries || r.config.memory_model;
            Value::Int(measured.then_some(r.metrics.peak_retained_bytes))
        },
    },
    int(
        "out_of_order_deliveries",
        "deliveries below a position already delivered since the last seek (stale reads \
         completing after a seek, without cursor epochs)",
        |r, _| Value::Int(Some(r.metrics.out_of_order_deliveries)),
    ),
    int(
        "discarded_reads",
        "reads discarded on completion because their cursor's epoch moved on",
        |r, _| Value::Int(Some(r.metrics.discarded_reads)),
    ),
    int(
        "reads_waited_for_permits",
        "reads that waited for reads-in-flight permits (max_reads_in_flight_bytes)",
        |r, _| Value::Int(Some(r.metrics.reads_waited_for_permits)),
    ),
    int(
        "reads_failed_for_permits",
        "reads that failed for want of permits (waited past the timeout or found the queue full)",
        |r, _| Value::Int(Some(r.metrics.reads_failed_for_permits)),
    ),
    int(
        "lifecycle_events",
        "event seconds: trace seconds with a load, an unload or a reopen on this broker (see the \
         series' loads, unloads, reopens)",
        |r, _| Value::Int(Some(r.metrics.warmth().events)),
    ),
    Column {
        name: "mean_time_to_warm_seconds",
        kind: Kind::Float64,
        nullable: true,
        doc: WARM_SUMMARY_DOC,
        value: |r, _| Value::MaybeFloat(r.metrics.warmth().mean_seconds),
    },
    Column {
        name: "max_time_to_warm_seconds",
        kind: Kind::Float64,
        nullable: true,
        doc: "the longest of the series' time_to_warm_seconds (as mean_time_to_warm_seconds \
              counts them); null without a load or reopen second with a baseline",
        value: |r, _| Value::MaybeFloat(r.metrics.warmth().max_seconds),
    },
    Column {
        name: "replay_seconds",
        kind: Kind::Float64,
        nullable: false,
        doc: "wall-clock seconds the replay of this configuration took",
        value: |r, _| Value::Float(r.took.as_secs_f64()),
    },
    Column {
        name: "config",
        kind: Kind::Utf8,
        nullable: false,
        doc: "the configuration's settings as JSON (lc.CacheConfig(**json.loads(...)) rebuilds it)",
        value: |r, _| Value::Str(&r.config_json),
    },
];

const WARM_SUMMARY_DOC: &str = "the mean of the series' time_to_warm_seconds, over the seconds \
     with a load or a reopen and a baseline; an event whose hit ratio is not back by the \
     run's end counts the seconds to its last second; null without a load or reopen second with a baseline";

/// The per-second series' columns, in their order.
pub const SERIES: &[Column<Second>] = &[
    Column {
        name: "broker",
        kind: Kind::Utf8,
        nullable: false,
        doc: "the broker",
        value: |r, _| Value::Str(&r.broker),
    },
    Column {
        name: "strategy",
        kind: Kind::Utf8,
        nullable: false,
        doc: "the design",
        value: |r, _| Value::Str(r.config.strategy.name()),
    },
    int("cache_size_bytes", "the cache's size", |r, _| {
        Value::Int(Some(r.config.cache_size_bytes))
    }),
    int(
        "config_index",
        "the run's place among its broker's configurations (its row among the broker's summary rows)",
        |_, s| Value::Int(Some(s.config_index)),
    ),
    Column {
        name: "second",
        kind: Kind::Int64,
        nullable: false,
        doc: "the second of trace time (ts_us / 1e6, rounded down)",
        value: |_, s| Value::I64(s.counts.second),
    },
    int("cache_bytes", "the cache's bytes at the end of the second", |_, s| {
        Value::Int(Some(s.counts.cache_bytes))
    }),
    int("reads", "entries read in the second", |_, s| Value::Int(Some(s.counts.reads))),
    int("hits", "entries read from the cache in the second", |_, s| {
        Value::Int(Some(s.counts.hits))
    }),
    Column {
        name: "hit_ratio",
        kind: Kind::Float64,
        nullable: false,
        doc: "hits / reads in the second (0 without reads)",
        value: |_, s| {
            Value::Float(if s.counts.reads == 0 {
                0.0
            } else {
                s.counts.hits as f64 / s.counts.reads as f64
            })
        },
    },
    int(
        "misses",
        "entries read from storage in the second",
        |_, s| Value::Int(Some(s.counts.misses)),
    ),
    int(
        "storage_read_ops",
        "storage reads issued in the second",
        |_, s| Value::Int(Some(s.counts.storage_read_ops)),
    ),
    int(
        "loads",
        "topics loaded in the second (load rows that found the topic closed on this broker)",
        |_, s| Value::Int(Some(s.counts.loads)),
    ),
    int(
        "unloads",
        "topics unloaded in the second (unload rows that found the topic open)",
        |_, s| Value::Int(Some(s.counts.unloads)),
    ),
    int(
        "reopens",
        "cursors opened in the second that this broker had open before and that had no consumer \
         (closed, or forgotten by their topic's unload): reconnects",
        |_, s| Value::Int(Some(s.counts.reopens)),
    ),
    Column {
        name: "time_to_warm_seconds",
        kind: Kind::Float64,
        nullable: true,
        doc: "on a second with a load or a reopen (an unload alone has nothing to warm) with a baseline, whole seconds from its \
              end to the end of the last second with reads, after it, whose hit ratio was still \
              below the baseline less 0.05 (0 if the next second with reads is already back); the \
              baseline is the reads-weighted hit ratio of the last 5 seconds with reads before \
              the event second; not back by the run's end: the seconds to its last second; null \
              elsewhere and without a baseline",
        value: |_, s| Value::MaybeFloat(s.time_to_warm_seconds),
    },
];

/// The Arrow schema of `columns`, each field's doc in its metadata under "doc".
pub fn schema<S>(columns: &[Column<S>]) -> Schema {
    Schema::new(
        columns
            .iter()
            .map(|c| {
                Field::new(c.name, c.kind.data_type(), c.nullable)
                    .with_metadata(HashMap::from([("doc".to_string(), c.doc.to_string())]))
            })
            .collect::<Vec<_>>(),
    )
}

enum Builder {
    Utf8(StringBuilder),
    Int64(Int64Builder),
    Float64(Float64Builder),
}

/// A table with `columns` of `rows` (each the index of its run in `runs`, and its own part). A
/// count past `i64::MAX` is an error, not a wrapped number.
fn batch<S>(columns: &[Column<S>], runs: &[Run], rows: &[(usize, S)]) -> Result<RecordBatch> {
    let mut builders: Vec<Builder> = columns
        .iter()
        .map(|c| match c.kind {
            Kind::Utf8 => Builder::Utf8(StringBuilder::with_capacity(rows.len(), 0)),
            Kind::Int64 => Builder::Int64(Int64Builder::with_capacity(rows.len())),
            Kind::Float64 => Builder::Float64(Float64Builder::with_capacity(rows.len())),
        })
        .collect();
    for (run, part) in rows {
        let Some(run) = runs.get(*run) else { continue };
        for (c, b) in columns.iter().zip(builders.iter_mut()) {
            match (b, (c.value)(run, part)) {
                (Builder::Utf8(b), Value::Str(s)) => b.append_value(s),
                (Builder::Int64(b), Value::Int(v)) => {
                    let v = v
                        .map(|v| {
                            i64::try_from(v).map_err(|_| {
                                Error::Unsupported(format!(
                                    "column {}: {v} is past the largest Arrow int64",
                                    c.name
                                ))
                            })
                        })
                        .transpose()?;
                    b.append_option(v)
                }
                (Builder::Int64(b), Value::I64(v)) => b.append_value(v),
                (Builder::Float64(b), Value::Float(v)) => b.append_value(v),
                (Builder::Float64(b), Value::MaybeFloat(v)) => b.append_option(v),
                _ => {
                    return Err(Error::Unsupported(format!(
                        "column {}: its value does not match its declared type",
                        c.name
                    )))
                }
            }
        }
    }
    let arrays: Vec<ArrayRef> = builders
        .into_iter()
        .map(|b| -> ArrayRef {
            match b {
                Builder::Utf8(mut b) => Arc::new(b.finish()),
                Builder::Int64(mut b) => Arc::new(b.finish()),
                Builder::Float64(mut b) => Arc::new(b.finish()),
            }
        })
        .collect();
    RecordBatch::try_new(Arc::new(schema(columns)), arrays)
        .map_err(|e| Error::Unsupported(format!("the results table: {e}")))
}

/// The summary and the series of `runs` (in the order [`Session::finish`](super::Session::finish)
/// gives them: by broker, each broker's configurations in order).
pub fn tables(runs: &[Run]) -> Result<(RecordBatch, RecordBatch)> {
    let mut seconds = Vec::new();
    let mut index = 0u64;
    for (i, run) in runs.iter().enumerate() {
        let same_broker = i > 0 && runs[i - 1].broker == run.broker;
        index = if same_broker { index + 1 } else { 0 };
        let warm = run.metrics.times_to_warm();
        for (p, time_to_warm_seconds) in run.metrics.per_second.iter().zip(warm) {
            let s = Second {
                config_index: index,
                counts: *p,
                time_to_warm_seconds,
            };
            seconds.push((i, s));
        }
    }
    let each: Vec<(usize, ())> = (0..runs.len()).map(|i| (i, ())).collect();
    Ok((batch(SUMMARY, runs, &each)?, batch(SERIES, runs, &seconds)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::replay::engine::PerSecond;

    fn second(second: i64, cache_bytes: u64, reads: u64, hits: u64) -> PerSecond {
        PerSecond {
            second,
            cache_bytes,
            reads,
            hits,
            misses: reads - hits,
            ..PerSecond::default()
        }
    }

    fn run(broker: &str, metrics: ReplayMetrics, memory_model: bool) -> Run {
        Run {
            broker: broker.into(),
            config: CacheConfig {
                memory_model,
                copy_entries: false,
                ..CacheConfig::default()
            },
            metrics,
            took: Duration::from_millis(5),
            config_json: "{}".into(),
        }
    }

    #[test]
    fn rows_follow_the_declaration_and_series_rows_name_their_run() {
        let metrics = ReplayMetrics {
            entries_read: 4,
            hits: 1,
            per_second: vec![second(0, 10, 2, 1), second(1, 20, 2, 0)],
            ..ReplayMetrics::default()
        };
        let runs = [
            run("a", metrics.clone(), true),
            run("a", metrics.clone(), false),
            run("b", metrics, false),
        ];
        let (summary, series) = tables(&runs).unwrap();
        assert_eq!(summary.schema().as_ref(), &schema(SUMMARY));
        assert_eq!(summary.num_rows(), 3);
        let retained = summary.column_by_name("peak_retained_bytes").unwrap();
        assert_eq!(
            retained.null_count(),
            2,
            "not measured without the memory model"
        );
        let index = series.column_by_name("config_index").unwrap();
        let index = index
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap();
        assert_eq!(index.values().to_vec(), vec![0, 0, 1, 1, 0, 0]);
        let ratio = series.column_by_name("hit_ratio").unwrap();
        let ratio = ratio
            .as_any()
            .downcast_ref::<arrow_array::Float64Array>()
            .unwrap();
        assert_eq!(ratio.value(0), 0.5);
        assert_eq!(ratio.value(1), 0.0);
    }

    #[test]
    fn a_count_past_int64_is_an_error_not_a_wrapped_number() {
        let metrics = ReplayMetrics {
            events: u64::MAX,
            ..ReplayMetrics::default()
        };
        let err = tables(&[run("a", metrics, true)]).unwrap_err();
        assert!(err.to_string().contains("column events"), "{err}");
    }

    #[test]
    fn every_column_is_documented_once() {
        for columns in [
            SUMMARY.iter().map(|c| (c.name, c.doc)).collect::<Vec<_>>(),
            SERIES.iter().map(|c| (c.name, c.doc)).collect(),
        ] {
            let mut names: Vec<_> = columns.iter().map(|(n, _)| *n).collect();
            assert!(columns.iter().all(|(_, doc)| !doc.is_empty()));
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), columns.len());
        }
    }
}
