//! PyO3 bindings: the `ledgercache._native` extension module. Thin wrappers over the core; the
//! Python package `ledgercache` re-exports them with stubs and docs.

mod args;
mod arrow_batch;
mod arrow_import;
mod cache;
mod clock;
mod config;
mod cursors;
mod errors;
mod inflight;
mod ledger;
mod payload;
mod position;
mod replay;
mod storage;
mod throttle;
mod workload;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // Which global allocator the extension was built with (the `mimalloc` feature; checked by the tests).
    m.add(
        "_allocator",
        if cfg!(feature = "mimalloc") {
            "mimalloc"
        } else {
            "system"
        },
    )?;
    m.add_class::<position::PyPosition>()?;
    m.add_class::<clock::PyManualClock>()?;
    m.add_class::<clock::PySystemClock>()?;
    m.add_class::<config::PyCacheConfig>()?;
    m.add_class::<cache::PyEntryCacheManager>()?;
    m.add_class::<cache::PyEntryCache>()?;
    m.add_class::<cache::PyCachedEntry>()?;
    m.add_class::<cache::PyEntryInfo>()?;
    m.add_class::<inflight::PyInflightReadsLimiter>()?;
    m.add_class::<inflight::PyInflightReadsHandle>()?;
    m.add_class::<cursors::PyActiveCursorContainer>()?;
    m.add_class::<cursors::PyCursorHandle>()?;
    m.add_class::<cursors::PySlowestCursorHeap>()?;
    m.add_class::<storage::PyStorage>()?;
    m.add_class::<storage::PyMemoryStorage>()?;
    m.add_class::<storage::PyFileStorage>()?;
    m.add_class::<storage::PyCallableStorage>()?;
    m.add_class::<ledger::PyManagedLedger>()?;
    m.add_class::<ledger::PyManagedCursor>()?;
    m.add_class::<ledger::PyReadHandle>()?;
    m.add_class::<replay::PyReplaySession>()?;
    m.add_class::<replay::PyRequestRecorder>()?;
    m.add_function(wrap_pyfunction!(replay::summary_schema, m)?)?;
    m.add_function(wrap_pyfunction!(replay::series_schema, m)?)?;
    m.add_function(wrap_pyfunction!(replay::trace_format, m)?)?;
    m.add_class::<workload::PyWorkloadStream>()?;
    m.add_function(wrap_pyfunction!(workload::stream_workload, m)?)?;
    m.add_function(wrap_pyfunction!(workload::estimate_workload, m)?)?;
    m.add_function(wrap_pyfunction!(workload::check_workload, m)?)?;
    m.add_function(wrap_pyfunction!(workload::spec_keys, m)?)?;
    m.add_function(wrap_pyfunction!(config::read_broker_conf, m)?)?;
    m.add_function(wrap_pyfunction!(config::designs, m)?)?;
    m.add_class::<throttle::PyPublishRateLimiter>()?;
    m.add_class::<throttle::PyProducer>()?;
    m.add_class::<throttle::PyPartitionedProducer>()?;
    m.add_function(wrap_pyfunction!(throttle::encode_throttle_producer, m)?)?;
    m.add_function(wrap_pyfunction!(throttle::decode_throttle_producer, m)?)?;
    m.add_function(wrap_pyfunction!(
        throttle::encode_throttle_producer_receipt,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        throttle::decode_throttle_producer_receipt,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(throttle::supports_throttle_producer, m)?)?;
    m.add_function(wrap_pyfunction!(throttle::simulate_publishes, m)?)?;
    Ok(())
}
