//! The lab: the workload generator (OMB workloads and a broker's stats simulated into a trace) and
//! the replay engine (a trace replayed under each cache design). Nothing in [`crate::cache`] or
//! [`crate::broker`] imports it.

pub mod replay;
pub mod workload;
