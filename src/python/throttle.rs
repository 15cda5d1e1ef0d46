//! Bindings for publish throttling (PIP-385): the broker's `PublishRateLimiter`, the client's
//! `Producer` / `PartitionedProducer`, and the wire commands as bytes. Rates are plain keyword
//! arguments; reasons cross the boundary as their protocol names.

use super::args::{get_opt, Int};
use super::errors::{non_negative, raise, IntoPyResult};
use super::replay::import_batch;
use crate::broker::throttle::limiter::{Breach, PublishRateLimiter, Rate};
use crate::broker::throttle::producer::{PartitionedProducer, Producer, SendFailure, SendOutcome};
use crate::broker::throttle::protocol::{
    CommandThrottleProducer, CommandThrottleProducerReceipt, FeatureFlags, ThrottlingReason,
};
use crate::broker::throttle::publish_sim::{simulate, Publish, ThrottlingMode};
use arrow_array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::collections::HashMap;
use std::sync::Mutex;

/// A core object behind a lock that a panic elsewhere does not poison for Python callers.
pub struct Guarded<T>(Mutex<T>);

impl<T> Guarded<T> {
    fn new(value: T) -> Self {
        Guarded(Mutex::new(value))
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

fn rate(
    py: Python<'_>,
    messages_per_second: Option<f64>,
    bytes_per_second: Option<f64>,
) -> PyResult<Rate> {
    Rate::new(messages_per_second, bytes_per_second).py_err(py)
}

fn breach_dict<'py>(py: Python<'py>, b: Breach) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("reason", b.reason.name())?;
    d.set_item("pause_for_millis", b.pause_for_millis)?;
    d.set_item("resume_at_ns", b.resume_at_ns)?;
    Ok(d)
}

/// PublishRateLimiter(): one broker's publish quotas (topic, resource group, broker, connection).
#[pyclass(name = "PublishRateLimiter", module = "ledgercache", frozen)]
pub struct PyPublishRateLimiter(Guarded<PublishRateLimiter>);

#[pymethods]
impl PyPublishRateLimiter {
    #[new]
    fn new() -> Self {
        PyPublishRateLimiter(Guarded::new(PublishRateLimiter::new()))
    }

    /// The rate of every topic without one of its own (`None` = unlimited).
    #[pyo3(signature = (messages_per_second = None, bytes_per_second = None))]
    fn set_default_topic_rate(
        &self,
        py: Python<'_>,
        messages_per_second: Option<f64>,
        bytes_per_second: Option<f64>,
    ) -> PyResult<()> {
        let r = rate(py, messages_per_second, bytes_per_second)?;
        self.0.with(|l| l.set_default_topic_rate(r));
        Ok(())
    }

    #[pyo3(signature = (topic, messages_per_second = None, bytes_per_second = None))]
    fn set_topic_rate(
        &self,
        py: Python<'_>,
        topic: &str,
        messages_per_second: Option<f64>,
        bytes_per_second: Option<f64>,
    ) -> PyResult<()> {
        let r = rate(py, messages_per_second, bytes_per_second)?;
        self.0.with(|l| l.set_topic_rate(topic, r));
        Ok(())
    }

    #[pyo3(signature = (group, topics, messages_per_second = None, bytes_per_second = None))]
    fn set_resource_group(
        &self,
        py: Python<'_>,
        group: &str,
        topics: Vec<String>,
        messages_per_second: Option<f64>,
        bytes_per_second: Option<f64>,
    ) -> PyResult<()> {
        let r = rate(py, messages_per_second, bytes_per_second)?;
        self.0.with(|l| l.set_resource_group(group, r, &topics));
        Ok(())
    }

    #[pyo3(signature = (messages_per_second = None, bytes_per_second = None))]
    fn set_broker_rate(
        &self,
        py: Python<'_>,
        messages_per_second: Option<f64>,
        bytes_per_second: Option<f64>,
    ) -> PyResult<()> {
        let r = rate(py, messages_per_second, bytes_per_second)?;
        self.0.with(|l| l.set_broker_rate(r));
        Ok(())
    }

    /// `maxPendingPublishRequestsPerConnection`, `maxMessagePublishBufferSizeInMB` (as bytes, for
    /// the broker: each of its `num_io_threads` IO threads gets an equal share, over all its
    /// connections) and `numIOThreads` (None: keep it; 8 until set).
    #[pyo3(signature = (max_pending_publish_requests = None, max_publish_buffer_bytes = None, num_io_threads = None))]
    fn set_connection_limits(
        &self,
        py: Python<'_>,
        max_pending_publish_requests: Option<Int>,
        max_publish_buffer_bytes: Option<Int>,
        num_io_threads: Option<Int>,
    ) -> PyResult<()> {
        let max_pending_publish_requests = get_opt::<i64>(
            py,
            max_pending_publish_requests,
            "max_pending_publish_requests",
        )?;
        let max_publish_buffer_bytes =
            get_opt::<i64>(py, max_publish_buffer_bytes, "max_publish_buffer_bytes")?;
        let num_io_threads = get_opt::<i64>(py, num_io_threads, "num_io_threads")?;
        let threads = num_io_threads
            .map(|n| non_negative(py, "num_io_threads", n))
            .transpose()?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        let pending = max_pending_publish_requests
            .map(|v| non_negative(py, "max_pending_publish_requests", v))
            .transpose()?
            .map(|v| u32::try_from(v).unwrap_or(u32::MAX));
        let buffer = max_publish_buffer_bytes
            .map(|v| non_negative(py, "max_publish_buffer_bytes", v))
            .transpose()?;
        self.0
            .with(|l| l.set_connection_limits(pending, buffer, threads))
            .py_err(py)
    }

    /// Charges one publish (an entry of `messages` messages, `size` bytes); returns the breach it
    /// causes as a dict (`reason`, `pause_for_millis`, `resume_at_ns`), or `None` when it is
    /// within every quota.
    #[pyo3(signature = (now_ns, topic, connection, size, messages = Int::of(1)))]
    #[pyo3(text_signature = "(self, now_ns, topic, connection, size, messages=1)")]
    fn on_publish<'py>(
        &self,
        py: Python<'py>,
        now_ns: Int,
        topic: &str,
        connection: Int,
        size: Int,
        messages: Int,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        let connection: i64 = connection.get(py, "connection")?;
        let size: i64 = size.get(py, "size")?;
        let messages: i64 = messages.get(py, "messages")?;
        let (now, conn, size) = (
            non_negative(py, "now_ns", now_ns)?,
            non_negative(py, "connection", connection)?,
            non_negative(py, "size", size)?,
        );
        let messages = u32::try_from(messages).map_err(|_| {
            raise(
                py,
                "InvalidArgumentError",
                format!("messages must be in 0..={}, got {messages}", u32::MAX),
            )
        })?;
        self.0
            .with(|l| l.on_publish(now, topic, conn, messages, size))
            .map(|b| breach_dict(py, b))
            .transpose()
    }

    /// How long a publish stays pending after it is read (the bookies' add latency) when
    /// `simulate_publishes` replays through this limiter; 0 (the default) persists it at once.
    fn set_publish_persist_latency(&self, py: Python<'_>, latency_ns: Int) -> PyResult<()> {
        let latency_ns: i64 = latency_ns.get(py, "latency_ns")?;
        let latency = non_negative(py, "latency_ns", latency_ns)?;
        self.0.with(|l| l.set_persist_latency_ns(latency));
        Ok(())
    }

    /// A publish of `size` bytes on `connection` was persisted: it no longer counts as pending.
    fn on_publish_persisted(&self, py: Python<'_>, connection: Int, size: Int) -> PyResult<()> {
        let connection: i64 = connection.get(py, "connection")?;
        let size: i64 = size.get(py, "size")?;
        let (conn, size) = (
            non_negative(py, "connection", connection)?,
            non_negative(py, "size", size)?,
        );
        self.0.with(|l| l.on_publish_persisted(conn, size));
        Ok(())
    }

    /// Whether a connection has drained to half its limits after a connection-level breach.
    fn connection_recovered(&self, py: Python<'_>, connection: Int) -> PyResult<bool> {
        let connection: i64 = connection.get(py, "connection")?;
        let conn = non_negative(py, "connection", connection)?;
        Ok(self.0.with(|l| l.connection_recovered(conn)))
    }
}

fn failure_exception(py: Python<'_>, topic: &str, f: SendFailure) -> PyResult<Py<PyAny>> {
    let (class, sequence, reason) = match f {
        SendFailure::Throttled { sequence, reason } => {
            ("ProducerThrottledException", sequence, Some(reason.name()))
        }
        SendFailure::TimedOut { sequence } => ("ProducerSendTimeoutException", sequence, None),
    };
    let message = match reason {
        Some(r) => format!("send {sequence} on {topic} timed out while throttled: {r}"),
        None => format!("send {sequence} on {topic} timed out"),
    };
    let exc = raise(py, class, message).into_value(py).into_any();
    let bound = exc.bind(py);
    bound.setattr("sequence", sequence)?;
    bound.setattr("topic", topic)?;
    bound.setattr("reason", reason)?;
    Ok(exc)
}

fn outcome(o: SendOutcome) -> Option<u64> {
    match o {
        SendOutcome::Sent => None,
        SendOutcome::Deferred { until_ns } => Some(until_ns),
    }
}

fn on_throttle_bytes<'py>(
    py: Python<'py>,
    p: &mut Producer,
    now_ns: i64,
    command: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let now = non_negative(py, "now_ns", now_ns)?;
    let cmd = CommandThrottleProducer::decode_bytes(command).py_err(py)?;
    let receipt = p.on_throttle(now, &cmd).py_err(py)?;
    Ok(PyBytes::new(py, &receipt.encode_bytes()))
}

/// Producer(topic, producer_id, send_timeout_ms=30000): the client side of PIP-385 on a manual
/// timeline (every method takes the current time in nanoseconds).
#[pyclass(name = "Producer", module = "ledgercache", frozen)]
pub struct PyProducer(Guarded<Producer>);

#[pymethods]
impl PyProducer {
    #[new]
    #[pyo3(signature = (topic, producer_id, send_timeout_ms = Int::of(30_000)))]
    #[pyo3(text_signature = "(topic, producer_id, send_timeout_ms=30000)")]
    fn new(py: Python<'_>, topic: &str, producer_id: Int, send_timeout_ms: Int) -> PyResult<Self> {
        let producer_id: i64 = producer_id.get(py, "producer_id")?;
        let send_timeout_ms: i64 = send_timeout_ms.get(py, "send_timeout_ms")?;
        let id = non_negative(py, "producer_id", producer_id)?;
        let timeout = non_negative(py, "send_timeout_ms", send_timeout_ms)?;
        Ok(PyProducer(Guarded::new(
            Producer::new(topic, id, timeout).py_err(py)?,
        )))
    }

    #[getter]
    fn topic(&self) -> String {
        self.0.with(|p| p.topic().to_string())
    }

    #[getter]
    fn producer_id(&self) -> u64 {
        self.0.with(|p| p.producer_id())
    }

    /// Handles an encoded `CommandThrottleProducer`: pauses and returns the encoded receipt.
    fn on_throttle<'py>(
        &self,
        py: Python<'py>,
        now_ns: Int,
        command: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        self.0.with(|p| on_throttle_bytes(py, p, now_ns, command))
    }

    /// Whether the producer is throttled at `now_ns` (cleared lazily once the pause has passed).
    fn is_throttled(&self, py: Python<'_>, now_ns: Int) -> PyResult<bool> {
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        let now = non_negative(py, "now_ns", now_ns)?;
        Ok(self.0.with(|p| p.is_throttled(now)))
    }

    /// The reason of the throttle in force at `now_ns`, or `None`.
    fn throttle_reason(&self, py: Python<'_>, now_ns: Int) -> PyResult<Option<&'static str>> {
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        let now = non_negative(py, "now_ns", now_ns)?;
        Ok(self
            .0
            .with(|p| p.throttle_reason(now).map(ThrottlingReason::name)))
    }

    /// Sends one message: returns `(sequence, deferred_until_ns)`, the latter `None` if it went now.
    fn send(&self, py: Python<'_>, now_ns: Int) -> PyResult<(u64, Option<u64>)> {
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        let now = non_negative(py, "now_ns", now_ns)?;
        let (seq, o) = self.0.with(|p| p.send(now));
        Ok((seq, outcome(o)))
    }

    /// The broker persisted every send up to `sequence` (cumulative).
    fn acknowledge(&self, py: Python<'_>, sequence: Int) -> PyResult<()> {
        let sequence: i64 = sequence.get(py, "sequence")?;
        let s = non_negative(py, "sequence", sequence)?;
        self.0.with(|p| p.acknowledge(s));
        Ok(())
    }

    /// Sends that timed out by `now_ns`, as exception instances (not raised): a
    /// `ProducerThrottledException` carrying the reason when the timeout fell in a throttle, else a
    /// `ProducerSendTimeoutException`. Each send is reported once.
    fn expire(&self, py: Python<'_>, now_ns: Int) -> PyResult<Vec<Py<PyAny>>> {
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        let now = non_negative(py, "now_ns", now_ns)?;
        let (topic, failures) = self.0.with(|p| (p.topic().to_string(), p.expire(now)));
        failures
            .into_iter()
            .map(|f| failure_exception(py, &topic, f))
            .collect()
    }

    /// The counter `throttled_times{reason, topic}`: milliseconds throttled, keyed by (reason, topic).
    fn throttled_times(&self) -> HashMap<(&'static str, String), u64> {
        self.0.with(|p| {
            p.throttled_times()
                .into_iter()
                .map(|(r, t, ms)| ((r.name(), t.to_string()), ms))
                .collect()
        })
    }

    fn __repr__(&self) -> String {
        self.0.with(|p| {
            format!(
                "Producer(topic={:?}, producer_id={})",
                p.topic(),
                p.producer_id()
            )
        })
    }
}

/// PartitionedProducer(topic, partitions, first_producer_id=0, send_timeout_ms=30000): round robin
/// over `topic-partition-N` producers that skips throttled partitions.
#[pyclass(name = "PartitionedProducer", module = "ledgercache", frozen)]
pub struct PyPartitionedProducer(Guarded<PartitionedProducer>);

impl PyPartitionedProducer {
    /// Runs `f` on partition `partition`, or raises `InvalidArgumentError` if there is none.
    fn with_partition<R>(
        &self,
        py: Python<'_>,
        partition: usize,
        f: impl FnOnce(&mut Producer) -> PyResult<R>,
    ) -> PyResult<R> {
        self.0.with(|pp| match pp.partition(partition) {
            Some(p) => f(p),
            None => Err(raise(
                py,
                "InvalidArgumentError",
                format!("partition: no partition {partition}"),
            )),
        })
    }
}

#[pymethods]
impl PyPartitionedProducer {
    #[new]
    #[pyo3(signature = (topic, partitions, first_producer_id = Int::of(0), send_timeout_ms = Int::of(30_000)))]
    #[pyo3(text_signature = "(topic, partitions, first_producer_id=0, send_timeout_ms=30000)")]
    fn new(
        py: Python<'_>,
        topic: &str,
        partitions: Int,
        first_producer_id: Int,
        send_timeout_ms: Int,
    ) -> PyResult<Self> {
        let partitions: i64 = partitions.get(py, "partitions")?;
        let first_producer_id: i64 = first_producer_id.get(py, "first_producer_id")?;
        let send_timeout_ms: i64 = send_timeout_ms.get(py, "send_timeout_ms")?;
        let n = non_negative(py, "partitions", partitions)?;
        let n = u32::try_from(n).map_err(|_| {
            raise(
                py,
                "InvalidArgumentError",
                format!("partitions: too many ({n})"),
            )
        })?;
        let first = non_negative(py, "first_producer_id", first_producer_id)?;
        let timeout = non_negative(py, "send_timeout_ms", send_timeout_ms)?;
        Ok(PyPartitionedProducer(Guarded::new(
            PartitionedProducer::new(topic, n, first, timeout).py_err(py)?,
        )))
    }

    fn __len__(&self) -> usize {
        self.0.with(|p| p.len())
    }

    /// True if any partition is throttled at `now_ns`.
    fn is_throttled(&self, py: Python<'_>, now_ns: Int) -> PyResult<bool> {
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        let now = non_negative(py, "now_ns", now_ns)?;
        Ok(self.0.with(|p| p.is_throttled(now)))
    }

    /// Whether partition `partition` is throttled at `now_ns`.
    fn is_partition_throttled(
        &self,
        py: Python<'_>,
        partition: Int,
        now_ns: Int,
    ) -> PyResult<bool> {
        let partition: usize = partition.get(py, "partition")?;
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        let now = non_negative(py, "now_ns", now_ns)?;
        self.with_partition(py, partition, |p| Ok(p.is_throttled(now)))
    }

    /// Hands an encoded `CommandThrottleProducer` to partition `partition`; returns the receipt.
    fn on_throttle<'py>(
        &self,
        py: Python<'py>,
        partition: Int,
        now_ns: Int,
        command: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let partition: usize = partition.get(py, "partition")?;
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        self.with_partition(py, partition, |p| on_throttle_bytes(py, p, now_ns, command))
    }

    /// Sends one message: returns `(partition, sequence, deferred_until_ns)`.
    fn send(&self, py: Python<'_>, now_ns: Int) -> PyResult<(usize, u64, Option<u64>)> {
        let now_ns: i64 = now_ns.get(py, "now_ns")?;
        let now = non_negative(py, "now_ns", now_ns)?;
        let (p, seq, o) = self.0.with(|pp| pp.send(now));
        Ok((p, seq, outcome(o)))
    }
}

/// Encodes `CommandThrottleProducer` (field numbers as in PIP-385's PulsarApi.proto).
#[pyfunction]
pub fn encode_throttle_producer<'py>(
    py: Python<'py>,
    request_id: Int,
    producer_id: Int,
    reason: &str,
    pause_for_millis: Int,
) -> PyResult<Bound<'py, PyBytes>> {
    let request_id: i64 = request_id.get(py, "request_id")?;
    let producer_id: i64 = producer_id.get(py, "producer_id")?;
    let pause_for_millis: i64 = pause_for_millis.get(py, "pause_for_millis")?;
    let cmd = CommandThrottleProducer::new(
        non_negative(py, "request_id", request_id)?,
        non_negative(py, "producer_id", producer_id)?,
        ThrottlingReason::parse(reason).py_err(py)?,
        non_negative(py, "pause_for_millis", pause_for_millis)?,
    );
    Ok(PyBytes::new(py, &cmd.encode_bytes()))
}

/// Decodes `CommandThrottleProducer` into a dict; malformed bytes raise `InvalidArgumentError`.
#[pyfunction]
pub fn decode_throttle_producer<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let cmd = CommandThrottleProducer::decode_bytes(data).py_err(py)?;
    let d = PyDict::new(py);
    d.set_item("request_id", cmd.request_id)?;
    d.set_item("producer_id", cmd.producer_id)?;
    d.set_item("reason", cmd.reason().py_err(py)?.name())?;
    d.set_item("pause_for_millis", cmd.pause_for_millis)?;
    Ok(d)
}

#[pyfunction]
pub fn encode_throttle_producer_receipt<'py>(
    py: Python<'py>,
    request_id: Int,
) -> PyResult<Bound<'py, PyBytes>> {
    let request_id: i64 = request_id.get(py, "request_id")?;
    let r = CommandThrottleProducerReceipt {
        request_id: non_negative(py, "request_id", request_id)?,
    };
    Ok(PyBytes::new(py, &r.encode_bytes()))
}

/// Decodes `CommandThrottleProducerReceipt`; returns its request id.
#[pyfunction]
pub fn decode_throttle_producer_receipt(py: Python<'_>, data: &[u8]) -> PyResult<u64> {
    Ok(CommandThrottleProducerReceipt::decode_bytes(data)
        .py_err(py)?
        .request_id)
}

/// Whether encoded `FeatureFlags` advertise `supports_throttle_producer_commands`.
#[pyfunction]
pub fn supports_throttle_producer(py: Python<'_>, feature_flags: &[u8]) -> PyResult<bool> {
    Ok(FeatureFlags::decode_bytes(feature_flags)
        .py_err(py)?
        .throttle_producer_supported())
}

fn column<'a, T: 'static>(
    batch: &'a RecordBatch,
    name: &str,
) -> std::result::Result<&'a T, String> {
    batch
        .column_by_name(name)
        .ok_or_else(|| format!("column {name:?} is missing"))?
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| format!("column {name:?} has the wrong type"))
}

/// Replays the publishes of `batch` (columns `ts_us` int64, `topic` string, `producer` int64,
/// `connection` int64, `size` int32, optional `messages` int32 (null or absent: 1), in time
/// order) through a copy of `limiter` under `mode`.
/// Returns `accepted_at_us` (little-endian int64 bytes, one per row: when the broker read it),
/// `delays` (topic -> (publishes, p50, p99, max) in nanoseconds), `throttles` (reason -> count), `throttles_by_topic`,
/// `connection_pauses` and `commands_sent`.
#[pyfunction]
pub fn simulate_publishes<'py>(
    py: Python<'py>,
    limiter: &PyPublishRateLimiter,
    batch: &Bound<'py, PyAny>,
    mode: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let mode: ThrottlingMode = mode.parse().py_err(py)?;
    let batch = import_batch(batch)?;
    let bad = |m: String| {
        raise(
            py,
            "InvalidArgumentError",
            format!("invalid publishes: {m}"),
        )
    };
    let ts = column::<Int64Array>(&batch, "ts_us").map_err(bad)?;
    let topic = column::<StringArray>(&batch, "topic").map_err(bad)?;
    let producer = column::<Int64Array>(&batch, "producer").map_err(bad)?;
    let connection = column::<Int64Array>(&batch, "connection").map_err(bad)?;
    let size = column::<Int32Array>(&batch, "size").map_err(bad)?;
    let messages = match batch.column_by_name("messages") {
        Some(_) => Some(column::<Int32Array>(&batch, "messages").map_err(bad)?),
        None => None,
    };
    let mut publishes = Vec::with_capacity(batch.num_rows());
    let mut last = 0u64;
    for i in 0..batch.num_rows() {
        let nonneg = |v: i64, what: &str| {
            u64::try_from(v).map_err(|_| format!("row {i}: {what} must be >= 0, got {v}"))
        };
        if ts.is_null(i)
            || topic.is_null(i)
            || producer.is_null(i)
            || connection.is_null(i)
            || size.is_null(i)
        {
            return Err(bad(format!(
                "row {i}: a publish needs ts_us, topic, producer, connection and size"
            )));
        }
        let ts_ns = nonneg(ts.value(i), "ts_us")
            .and_then(|us| {
                us.checked_mul(1_000)
                    .ok_or_else(|| format!("row {i}: ts_us {us} is beyond u64 nanoseconds"))
            })
            .map_err(bad)?;
        if ts_ns < last {
            return Err(bad(format!("row {i}: ts_us goes back in time")));
        }
        last = ts_ns;
        publishes.push(Publish {
            ts_ns,
            topic: topic.value(i),
            producer: nonneg(producer.value(i), "producer").map_err(bad)?,
            connection: nonneg(connection.value(i), "connection").map_err(bad)?,
            // A trace without the column, or a null, is an entry of one message. Negative counts
            // are refused as Pulsar's token buckets refuse a negative charge.
            messages: match messages {
                Some(m) if m.is_valid(i) => u32::try_from(m.value(i))
                    .map_err(|_| format!("row {i}: messages must be >= 0, got {}", m.value(i)))
                    .map_err(bad)?,
                _ => 1,
            },
            bytes: nonneg(size.value(i) as i64, "size").map_err(bad)?,
        });
    }
    let limiter = limiter.0.with(|l| l.clone());
    let out = py.detach(|| simulate(&publishes, limiter, mode));
    let accepted: Vec<u8> = out
        .accepted_at_ns
        .iter()
        .flat_map(|ns| ((ns / 1_000) as i64).to_le_bytes())
        .collect();
    let d = PyDict::new(py);
    d.set_item("accepted_at_us", PyBytes::new(py, &accepted))?;
    let delays = PyDict::new(py);
    for (t, v) in &out.delays {
        let q = |q: f64| out.quantile(t, q).unwrap_or(0);
        delays.set_item(t, (v.len(), q(0.5), q(0.99), q(1.0)))?;
    }
    d.set_item("delays", delays)?;
    d.set_item("throttles", out.throttles.clone())?;
    d.set_item("throttles_by_topic", out.throttles_by_topic.clone())?;
    d.set_item("connection_pauses", out.connection_pauses)?;
    d.set_item("commands_sent", out.commands_sent)?;
    Ok(d)
}
