//! Cache designs the replay engine compares, behind one trait. The engine decides what happens
//! (publishes, reads, redeliveries, who is active); a strategy decides what stays in memory.

mod belady;
mod farthest_first;
mod largest_key_first;
mod legacy;
mod lru;
mod no_cache;
mod pip430;
mod segmented;

/// The replayer for a design: its strategy, over the read flow its registry entry names. A new
/// design is built here; Belady's first pass is a recorder.
pub(crate) fn first_pass(config: &CacheConfig) -> Result<Box<dyn Replay>> {
    Ok(match config.strategy {
        Strategy::Pip430 | Strategy::Pip430Fifo => {
            Box::new(replayer(config, Box::new(Pip430::new(config.clone())?)))
        }
        Strategy::Lru => Box::new(replayer(
            config,
            Box::new(Lru::new(config.cache_size_bytes)),
        )),
        // The recording pass caches nothing, so it has no buffers to model (and its measurements
        // give way to the deciding pass's).
        Strategy::Belady => Box::new(bare_replayer(config, Box::new(NoCache)).recording()),
        Strategy::Legacy => Box::new(replayer(config, Box::new(Legacy::new(config)))),
        Strategy::Segmented => Box::new(replayer(
            config,
            Box::new(Segmented::new(
                config.cache_size_bytes,
                config.effective_segment_count(),
            )),
        )),
        // A registry entry without a replayer here: `every_design_builds` fails first.
        other => {
            return Err(crate::error::Error::invalid(
                "strategy",
                format!("{other} has no replayer"),
            ))
        }
    })
}

/// Entry `entry` of ledger 1 of topic 0, for the strategies' tests.
#[cfg(test)]
fn test_key(entry: i64) -> EntryKey {
    EntryKey {
        topic: 0,
        position: Position::new(1, entry),
    }
}

#[cfg(test)]
#[test]
fn every_design_builds() {
    for strategy in Strategy::ALL {
        let mut config = CacheConfig::default();
        config
            .set(
                "strategy",
                crate::config::SettingValue::Str(strategy.name().into()),
            )
            .unwrap();
        assert!(first_pass(&config).is_ok(), "{strategy}");
    }
}

/// A small deterministic generator for the strategies' and the memory model's randomized tests.
#[cfg(test)]
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

pub use belady::{belady, FutureReads};
pub use legacy::Legacy;
pub use lru::Lru;
pub use no_cache::NoCache;
pub use pip430::Pip430;
pub use segmented::Segmented;

use super::engine::Replay;
use super::{bare_replayer, replayer};
use crate::broker::read_flow::Invalidation;
use crate::cache::position::Position;
use crate::config::{CacheConfig, Strategy};
use crate::error::Result;

/// An entry of a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryKey {
    pub topic: u32,
    pub position: Position,
}

/// Counters a strategy keeps of its own decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StrategyCounters {
    /// Entries the design's eviction removed (time, size, or the design's own rule).
    pub evicted_entries: u64,
    /// Entries removed because the read flow invalidated them (cursors passed them, the last
    /// active cursor left) or their ledger was deleted.
    pub invalidated_entries: u64,
    pub requeues: u64,
}

/// A cache design: what stays in memory. What is offered to it (which publishes and storage reads,
/// with how many expected reads, and what is invalidated) is the read flow's call
/// ([`crate::broker::read_flow`]), the same for every design of one flow.
pub trait CacheStrategy: Send {
    /// Caches an entry (if the design has room or makes it) that still expects `expected_reads`
    /// reads; designs without read counters ignore the count.
    fn insert(&mut self, now_ns: u64, key: EntryKey, size: u32, expected_reads: i32);
    /// [`CacheStrategy::insert`] of the first entry of a buffer the memory model follows: if the
    /// design caches it as a new entry, it watches it as [`CacheStrategy::watch_removal`] would
    /// with `token` and returns true, so that the model need not look it up at its next sample
    /// (while the entry is hot here, it would be cold then). A design that returns false (the
    /// default, or the entry not cached anew) has the buffer checked by a lookup.
    fn insert_watched(
        &mut self,
        now_ns: u64,
        key: EntryKey,
        size: u32,
        expected_reads: i32,
        _token: u32,
    ) -> bool {
        self.insert(now_ns, key, size, expected_reads);
        false
    }
    /// Caches an entry a storage read returned: `expected_reads` counts the `copies` handed out
    /// with it (the reader's and one for each read that waited for the storage read), which are
    /// released at [`CacheStrategy::end_read`].
    fn insert_read(
        &mut self,
        now_ns: u64,
        key: EntryKey,
        size: u32,
        expected_reads: i32,
        _copies: u32,
    ) {
        self.insert(now_ns, key, size, expected_reads);
    }
    /// A cursor wants the entry; true if the cache serves it. The delivered copy is released at
    /// [`CacheStrategy::end_read`], when the read is dispatched.
    fn read(&mut self, now_ns: u64, key: EntryKey) -> bool;
    /// The read in progress is dispatched: its copies are released (each consumes a read).
    fn end_read(&mut self) {}
    /// The read in progress waits for storage: its copies are kept, unreleased, until
    /// [`CacheStrategy::release_kept`] with what this returns (0: nothing kept), as a broker holds
    /// the cache hits of a read until its storage part completes and the read is dispatched.
    fn keep_read(&mut self) -> u64 {
        self.end_read();
        0
    }
    /// The read whose copies were kept as `kept` is dispatched (or discarded): they are released.
    fn release_kept(&mut self, _kept: u64) {}
    /// One more read will come for the entry (a Key_Shared hold-back).
    fn add_expected_read(&mut self, _key: EntryKey) {}
    /// Drops entries the read flow says no active cursor will read.
    fn invalidate(&mut self, _topic: u32, _how: Invalidation) {}
    /// A ledger was deleted.
    fn on_ledger_deleted(&mut self, topic: u32, ledger: i64);
    /// The broker's periodic eviction task ran at `now_ns`.
    fn tick(&mut self, _now_ns: u64) {}
    /// Whether [`CacheStrategy::tick`] would change nothing now and at any later time until the
    /// next insert: true for designs without a periodic task; the others say so when they hold
    /// nothing. Lets the replay skip the ticks of a long quiet stretch of trace time.
    fn tick_is_idle(&self) -> bool {
        true
    }
    /// The earliest time at which a tick could change something, if only ticks and cursor checks
    /// (which only take entries away) happen until then; `u64::MAX`: not before the next insert.
    /// The replay jumps over the ticks before it, so that a quiet stretch costs work by what is
    /// cached, not by its length over the tick interval (a TTL of years with an entry cached).
    /// May be early (a tick then changes nothing), never late.
    fn next_tick_change_ns(&self) -> u64 {
        if self.tick_is_idle() {
            u64::MAX
        } else {
            0
        }
    }
    fn cached_bytes(&self) -> u64;
    fn counters(&self) -> StrategyCounters;
    /// Whether the entry is cached (no side effects).
    fn contains(&self, key: EntryKey) -> bool;
    /// A hint that [`CacheStrategy::contains`] will soon be asked about `key`: a design may start
    /// loading what that lookup reads, so that a loop asking about many keys (the memory model's
    /// sample) waits for several at once instead of one after the other. No effect on results.
    fn prefetch_lookup(&self, _key: EntryKey) {}
    /// Starts noting the removal of the entries the memory model asks to watch
    /// ([`CacheStrategy::watch_removal`]), however they leave the cache (evicted, invalidated,
    /// deleted), for [`CacheStrategy::take_removed`], so that the model can check only the
    /// buffers whose first entry left; false for designs that do not (the model then checks
    /// every buffer).
    fn report_removals(&mut self) -> bool {
        false
    }
    /// Once reporting: if `key` is cached, the memory model wants to hear when it leaves (it is
    /// the front entry of a live buffer), by `token` (the buffer), so that it finds the buffer
    /// without a map of its own: a design keeps the token with the entry where it can. Returns
    /// the token the removal will be reported by: `token`, or the one an earlier call gave while
    /// the entry stayed cached and watched (a front shared by two buffers); `None` if `key` is
    /// not cached, as [`CacheStrategy::contains`] says, so that a check and its watch are one
    /// lookup. A design may report only the entries it was asked to watch, since the removal of
    /// any other concerns no buffer's front.
    fn watch_removal(&mut self, _key: EntryKey, _token: u32) -> Option<u32> {
        None
    }
    /// The model stops following the design: `key`'s removal is no longer wanted, and a later
    /// [`CacheStrategy::watch_removal`] of it gives the token of that call.
    fn unwatch(&mut self, _key: EntryKey) {}
    /// Moves the tokens of the watched entries that left since the last call into `out` (once
    /// reporting).
    fn take_removed(&mut self, _out: &mut Vec<u32>) {}
}

/// The tokens of the watched entries (see [`CacheStrategy::watch_removal`]) of a design that
/// notes removals by key, having no place for a token beside its entries.
#[derive(Default)]
pub(crate) struct WatchTokens(crate::cache::fast_hash::FastMap<EntryKey, u32>);

impl WatchTokens {
    /// Watches `key`, which the design says is cached; the token its removal is reported by.
    pub fn watch(&mut self, key: EntryKey, token: u32) -> u32 {
        *self.0.entry(key).or_insert(token)
    }

    pub fn unwatch(&mut self, key: EntryKey) {
        self.0.remove(&key);
    }

    /// The tokens of the watched entries among `gone`, the keys the design removed, into `out`.
    pub fn take(&mut self, gone: impl IntoIterator<Item = EntryKey>, out: &mut Vec<u32>) {
        out.extend(gone.into_iter().filter_map(|key| self.0.remove(&key)));
    }
}
