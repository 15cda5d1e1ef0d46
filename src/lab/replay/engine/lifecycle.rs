//! A topic's life on a broker: unloaded (closed) and loaded (its managed ledger opened).

use super::{CacheStrategy, Replayer};
use crate::lab::replay::engine::Stopped;
use crate::lab::replay::trace::Event;

impl<S: CacheStrategy + ?Sized> Replayer<S> {
    pub(super) fn on_unload(&mut self, _e: &Event, _now: u64) -> std::result::Result<(), Stopped> {
        Ok(())
    }

    pub(super) fn on_load(&mut self, _e: &Event, _now: u64) -> std::result::Result<(), Stopped> {
        Ok(())
    }
}
