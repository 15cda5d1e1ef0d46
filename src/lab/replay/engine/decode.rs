//! From a decoded trace row to what its op needs: replay time, a position, an add's entry.

use super::super::trace::Event;
use super::{CacheStrategy, Replayer};
use crate::cache::position::Position;
use crate::error::{Error, Result};

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    /// Nanoseconds of replay time at the event: since the first event's `ts_us` (a broker's time
    /// never goes back, the decoder checks). Replay time is kept in `u64` nanoseconds up to
    /// `i64::MAX` (292 years), so every periodic-task time derived from it fits.
    pub(super) fn now_ns(&self, e: &Event) -> Result<u64> {
        let origin = self.origin_us.unwrap_or(e.ts_us);
        let since_us = e.ts_us.saturating_sub(origin).max(0);
        since_us
            .checked_mul(1_000)
            .and_then(|ns| u64::try_from(ns).ok())
            .ok_or_else(|| {
                Error::invalid(
                    "trace",
                    format!(
                        "row {}, column \"ts_us\": {} is more than 292 years after the first \
                         event ({origin})",
                        e.row, e.ts_us
                    ),
                )
            })
    }

    /// The position of an op that needs one (the decoder never makes such an event without it).
    pub(super) fn position_of(e: &Event) -> Result<Position> {
        e.position.ok_or_else(|| {
            Error::invalid(
                "trace",
                format!("row {}: {:?} needs a position", e.row, e.op.name()),
            )
        })
    }

    /// An add's position and the ledger's end after it (one past the entry). Entry ids are
    /// 0..2^63-1, so that the end (and every count of entries) fits.
    pub(super) fn add_of(e: &Event) -> Result<(Position, u64)> {
        let p = Self::position_of(e)?;
        let end = p
            .entry_id
            .checked_add(1)
            .and_then(|end| u64::try_from(end).ok())
            .filter(|end| *end > 0)
            .ok_or_else(|| {
                Error::invalid(
                    "trace",
                    format!(
                        "row {}, column \"entry_id\": an add's entry must be in 0..={}, got {}",
                        e.row,
                        i64::MAX - 1,
                        p.entry_id
                    ),
                )
            })?;
        Ok((p, end))
    }
}
