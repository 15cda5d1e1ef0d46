//! The broker read flow: the rules that decide what enters and leaves a topic's cache as entries
//! are published, read, redelivered and passed by cursors. The library's managed ledger (`broker::ledger`) and the
//! replay lab's engine both ask these rules, so the two cannot drift; each cache design brings the
//! flow of the Pulsar code it models (see `docs/fidelity.md`):
//!
//! - [`Flow::ExpectedReads`] — Pulsar master with PIP-430 (`cacheEvictionByExpectedReadCount`):
//!   an added entry expects a read per active cursor; a storage read is cached with the number of
//!   active cursors at or before the reader, and not at all when that is 0; a redelivery read
//!   (`asyncReplayEntries`) is never cached; partial range hits are served.
//! - [`Flow::ActiveCursors`] — Pulsar 4.0 (and master with the expected-read count off): an added
//!   entry is cached while a cursor is active; a storage read only for a cursor that
//!   `checkCursorsToCacheEntries` marked (never with its defaults); entries behind the slowest
//!   active cursor are dropped, all of them when the last one leaves; cursors with a backlog over
//!   `managedLedgerCursorBackloggedThreshold` are deactivated; a range is served from the cache only
//!   when all of it is there.
//! - [`Flow::SegmentedRing`] — PIP-174's only code (PR #15955): cached on add, never on a miss,
//!   ranges all or nothing.
//! - [`Flow::AdmitAll`] — the reference designs (LRU, Belady): every publish and every storage read
//!   is admitted, so their numbers compare with libCacheSim's.

mod activity;
mod pending_reads;

pub use activity::{CursorActivity, CursorTracking};
pub use pending_reads::{plan_storage_reads, EntryRange, StorageReadPlan};

use crate::cache::position::Position;
use crate::config::designs::ReadRule;
use crate::config::CacheConfig;

/// Which rules a design follows (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    ExpectedReads,
    ActiveCursors,
    SegmentedRing,
    AdmitAll,
}

/// Who drives the flow: the library keeps the improvements Pulsar reads but never wires; the lab
/// models Pulsar as shipped unless a setting says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Library,
    Lab,
}

/// How a storage read was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// A cursor reads on from its read position.
    Sequential,
    /// A redelivery read of positions in the cursor's replay queue (`asyncReplayEntries`).
    Replay,
}

/// Whether a storage read's entries are cached, as far as it is known when the read is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageReadAdmission {
    /// `Some(expected reads)` to cache them (counting the reader's own copy), `None` not to.
    Decided(Option<i32>),
    /// Cached with the number of active cursors at or before the reader, counted when the read
    /// completes (none: not cached).
    CountAtCompletion,
}

impl StorageReadAdmission {
    /// The storage read completed: `Some(expected reads)` to cache what it returned, `None` to
    /// deliver it uncached. `activity` is the reader's topic's, with the reader where the broker
    /// sees it at that moment (not yet moved past the read).
    pub fn on_completion(self, activity: &mut CursorActivity, reader: u32) -> Option<i32> {
        match self {
            StorageReadAdmission::Decided(admitted) => admitted,
            StorageReadAdmission::CountAtCompletion => {
                let n = activity.count_at_or_before(reader);
                (n > 0).then(|| clamp_i32(n))
            }
        }
    }
}

/// Why a position went (back) into a cursor's replay queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedeliveryReason {
    /// Key_Shared held a read entry back because its key's consumer could not take it yet.
    HoldBack,
    /// The consumer negatively acknowledged it (or its ack timed out).
    Nack,
    /// A Shared read brought more messages than the consumers had permits for.
    Overflow,
    /// The trace does not say.
    Unspecified,
}

impl RedeliveryReason {
    pub const NAMES: [(&'static str, RedeliveryReason); 3] = [
        ("hold-back", RedeliveryReason::HoldBack),
        ("nack", RedeliveryReason::Nack),
        ("overflow", RedeliveryReason::Overflow),
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::NAMES.iter().find(|(n, _)| *n == s).map(|(_, r)| *r)
    }
}

/// What a cursor's move means for the cached entries of its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalidation {
    Nothing,
    /// Drop the entries before this position.
    Before(Position),
    /// Drop every entry of the topic.
    All,
}

/// When a connected cursor counts as active, by its backlog (`PersistentTopic.checkBackloggedCursor`
/// with `managedLedgerCursorBackloggedThreshold`). The two branches differ at the threshold and for
/// a negative one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BacklogRule {
    /// Whatever its backlog: no check (PIP-430, the other designs), or master with a negative
    /// threshold.
    Always,
    /// 4.0 with a negative threshold: `getNumberOfEntries() < threshold` never holds.
    Never,
    /// 4.0: fewer entries than the threshold.
    Below(u64),
    /// master with the expected-read count off: at most the threshold.
    AtMost(u64),
}

impl BacklogRule {
    fn new(flow: Flow, config: &CacheConfig) -> Self {
        let threshold = u64::try_from(config.cursor_backlogged_threshold).ok();
        match (flow, config.strategy.design().read_rule, threshold) {
            (Flow::ActiveCursors, ReadRule::Legacy, Some(t)) => BacklogRule::Below(t),
            (Flow::ActiveCursors, ReadRule::Legacy, None) => BacklogRule::Never,
            (Flow::ActiveCursors, _, Some(t)) => BacklogRule::AtMost(t),
            _ => BacklogRule::Always,
        }
    }

    fn allows(self, backlog: u64) -> bool {
        match self {
            BacklogRule::Always => true,
            BacklogRule::Never => false,
            BacklogRule::Below(t) => backlog < t,
            BacklogRule::AtMost(t) => backlog <= t,
        }
    }
}

/// The read-flow rules of one design under one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadFlow {
    pub flow: Flow,
    continue_caching_window_ns: u64,
    exact_cursor_counts: bool,
    every_redelivery_counts: bool,
    track_mark_delete: bool,
    backlog_rule: BacklogRule,
    backlog_check_interval_ns: u64,
    min_backlog_cursors_for_caching: u32,
    min_backlog_entries_for_caching: u64,
    max_backlog_between_cursors_for_caching: u64,
}

impl ReadFlow {
    pub fn new(config: &CacheConfig, context: Context) -> Self {
        let flow = match config.strategy.design().read_rule {
            ReadRule::Pip430 if config.eviction_by_expected_read_count => Flow::ExpectedReads,
            ReadRule::Pip430 | ReadRule::Legacy => Flow::ActiveCursors,
            ReadRule::SegmentedRing => Flow::SegmentedRing,
            ReadRule::AdmitAll => Flow::AdmitAll,
        };
        let window_applies = config
            .apply_continue_caching_window
            .unwrap_or(context == Context::Library);
        ReadFlow {
            flow,
            continue_caching_window_ns: if window_applies && flow == Flow::ExpectedReads {
                config
                    .continue_caching_window_ms()
                    .saturating_mul(1_000_000)
            } else {
                0
            },
            exact_cursor_counts: config
                .exact_cursor_counts
                .unwrap_or(context == Context::Library),
            every_redelivery_counts: config.expected_read_on_every_redelivery,
            track_mark_delete: flow == Flow::ActiveCursors
                && config.eviction_by_mark_deleted_position,
            backlog_rule: BacklogRule::new(flow, config),
            backlog_check_interval_ns: config.backlog_check_interval_ms.saturating_mul(1_000_000),
            min_backlog_cursors_for_caching: config.min_backlog_cursors_for_caching,
            min_backlog_entries_for_caching: config.min_backlog_entries_for_caching,
            max_backlog_between_cursors_for_caching: config.max_backlog_between_cursors_for_caching,
        }
    }

    /// Whether the design keeps read counters on its entries.
    pub fn counts_reads(&self) -> bool {
        self.flow == Flow::ExpectedReads
    }

    /// What keeps the active cursors: a counting container where entries get read counters
    /// (Pulsar's or ours, by `exact_cursor_counts`), else the slowest-cursor heap.
    pub fn cursor_tracking(&self) -> CursorTracking {
        match (self.counts_reads(), self.exact_cursor_counts) {
            (false, _) => CursorTracking::Slowest,
            (true, true) => CursorTracking::ExactCounts,
            (true, false) => CursorTracking::PulsarCounts,
        }
    }

    /// An entry was published: `Some(expected reads)` to cache it, `None` to leave it out.
    pub fn on_add(&self, activity: &CursorActivity, now_ns: u64) -> Option<i32> {
        let active = activity.active_count();
        match self.flow {
            Flow::AdmitAll => Some(0),
            Flow::ExpectedReads if active > 0 => Some(clamp_i32(active)),
            Flow::ExpectedReads => activity
                .last_left_ns()
                .is_some_and(|left| now_ns.saturating_sub(left) < self.continue_caching_window_ns)
                .then_some(0),
            Flow::ActiveCursors | Flow::SegmentedRing => (active > 0).then_some(0),
        }
    }

    /// A storage read is issued for `reader`: whether what it returns is cached, decided now or,
    /// for the expected-read count, when it completes ([`StorageReadAdmission::on_completion`]).
    ///
    /// PIP-430 hands the storage read a supplier of the count
    /// (`opReadEntry.cursor::getNumberOfCursorsAtSamePositionOrBefore`), which
    /// `RangeEntryCacheImpl.readFromStorage` calls in the read's completion, when other cursors
    /// may have moved and the reader has not yet (`OpReadEntry` moves it after); 4.0 passes
    /// `isCacheReadEntry()`, evaluated as the read is issued.
    pub fn on_storage_read_issued(
        &self,
        kind: ReadKind,
        activity: &CursorActivity,
        reader: u32,
    ) -> StorageReadAdmission {
        match (self.flow, kind) {
            (Flow::AdmitAll, _) => StorageReadAdmission::Decided(Some(0)),
            (_, ReadKind::Replay) | (Flow::SegmentedRing, _) => StorageReadAdmission::Decided(None),
            (Flow::ExpectedReads, ReadKind::Sequential) => StorageReadAdmission::CountAtCompletion,
            (Flow::ActiveCursors, ReadKind::Sequential) => {
                StorageReadAdmission::Decided(activity.cache_read_entry(reader).then_some(0))
            }
        }
    }

    /// Whether a redelivery adds an expected read to the cached entry.
    pub fn redelivery_adds_read(&self, reason: RedeliveryReason) -> bool {
        self.flow == Flow::ExpectedReads
            && (reason == RedeliveryReason::HoldBack || self.every_redelivery_counts)
    }

    /// Whether the flow ever asks where active cursors are (the slowest one, or how many are at
    /// or before a reader). The others only ask whether cursors are active.
    pub fn reads_cursor_positions(&self) -> bool {
        matches!(self.flow, Flow::ExpectedReads | Flow::ActiveCursors)
    }

    /// Whether a range read is served from the cache only when every entry of it is cached.
    pub fn all_or_nothing_ranges(&self) -> bool {
        matches!(self.flow, Flow::ActiveCursors | Flow::SegmentedRing)
    }

    /// The position a cursor is tracked at: its read position, or (4.0's
    /// `cacheEvictionByMarkDeletedPosition`) its mark-delete position itself, so that the
    /// invalidation keeps the last acknowledged entry (`activateCursor`,
    /// `onCursorMarkDeletePositionUpdated`, `invalidateEntries` removing up to it exclusive).
    pub fn tracked_position(&self, read_position: Position, mark_delete: Position) -> Position {
        if self.track_mark_delete {
            mark_delete
        } else {
            read_position
        }
    }

    /// What the cache drops after the slowest active cursor moved or an active cursor left (4.0's
    /// `invalidateEntriesUpToSlowestReaderPosition`).
    pub fn invalidation(&self, activity: &mut CursorActivity) -> Invalidation {
        if self.flow != Flow::ActiveCursors {
            return Invalidation::Nothing;
        }
        match activity.slowest() {
            Some(p) => Invalidation::Before(p),
            None if activity.active_count() == 0 => Invalidation::All,
            None => Invalidation::Nothing,
        }
    }

    /// Whether a cursor with consumers and this backlog (entries from its read position to the end)
    /// counts as active (`checkBackloggedCursor`: 4.0's rule for `legacy`, master's for PIP-430's
    /// cache with the expected-read count off; master skips it under PIP-430).
    pub fn active_with_backlog(&self, connected: bool, backlog: u64) -> bool {
        connected && self.backlog_rule.allows(backlog)
    }

    /// How often the broker re-checks backlogged cursors and which cursors cache their reads (the
    /// stats task, `statsUpdateFrequencyInSecs`); `None` when the design has nothing to check.
    pub fn backlog_check_interval_ns(&self) -> Option<u64> {
        (self.flow == Flow::ActiveCursors && self.backlog_check_interval_ns > 0)
            .then_some(self.backlog_check_interval_ns)
    }

    /// 4.0's `checkCursorsToCacheEntries`: given every cursor's backlog, the cursors whose storage
    /// reads are cached: those with a backlog of at least `min_backlog_entries_for_caching` that
    /// have at least `min_backlog_cursors_for_caching` other cursors within
    /// `max_backlog_between_cursors_for_caching` entries of it. Off (nothing changes) while the
    /// minimum number of cursors is 0, Pulsar's default.
    pub fn cursors_caching_reads(&self, backlogs: &[(u32, u64)]) -> Option<Vec<(u32, bool)>> {
        if self.flow != Flow::ActiveCursors || self.min_backlog_cursors_for_caching == 0 {
            return None;
        }
        Some(
            backlogs
                .iter()
                .map(|&(id, backlog)| {
                    let near = if backlog < self.min_backlog_entries_for_caching {
                        0
                    } else {
                        backlogs
                            .iter()
                            .filter(|&&(other, b)| {
                                other != id
                                    && backlog.abs_diff(b)
                                        <= self.max_backlog_between_cursors_for_caching
                            })
                            .count()
                    };
                    (id, near >= self.min_backlog_cursors_for_caching as usize)
                })
                .collect(),
        )
    }
}

fn clamp_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingValue;

    fn flow(strategy: &str, context: Context) -> ReadFlow {
        let mut c = CacheConfig::default();
        c.set("strategy", SettingValue::Str(strategy.into()))
            .unwrap();
        ReadFlow::new(&c, context)
    }

    #[test]
    fn legacy_never_caches_storage_reads_by_default() {
        // ManagedLedgerImpl.checkCursorsToCacheEntries returns at once while
        // managedLedgerMinimumBacklogCursorsForCaching is 0, so isCacheReadEntry stays false.
        let f = flow("legacy", Context::Lab);
        let mut a = CursorActivity::new(CursorTracking::Slowest, 0);
        a.activate(1, Position::new(1, 0));
        assert_eq!(
            f.on_storage_read_issued(ReadKind::Sequential, &a, 1),
            StorageReadAdmission::Decided(None)
        );
        assert!(f.cursors_caching_reads(&[(1, 5000), (2, 5000)]).is_none());
    }

    #[test]
    fn replay_reads_are_never_cached_except_by_reference_designs() {
        // RangeEntryCacheImpl.asyncReadEntry(lh, position, ...) supplies an expected read count of 0.
        let mut a = CursorActivity::new(CursorTracking::ExactCounts, 0);
        a.activate(1, Position::new(1, 0));
        for s in ["pip430", "legacy", "segmented"] {
            assert_eq!(
                flow(s, Context::Lab).on_storage_read_issued(ReadKind::Replay, &a, 1),
                StorageReadAdmission::Decided(None)
            );
        }
        assert_eq!(
            flow("lru", Context::Lab).on_storage_read_issued(ReadKind::Replay, &a, 1),
            StorageReadAdmission::Decided(Some(0))
        );
    }

    #[test]
    fn the_expected_read_count_of_a_storage_read_is_taken_when_it_completes() {
        // The supplier RangeEntryCacheImpl.readFromStorage calls in the read's completion: a
        // cursor that passes the reader meanwhile is not counted, and a reader that left by then
        // caches nothing.
        let f = flow("pip430", Context::Lab);
        let mut a = CursorActivity::new(CursorTracking::ExactCounts, 0);
        for (cursor, entry) in [(1, 10), (2, 5), (3, 8)] {
            a.activate(cursor, Position::new(1, entry));
        }
        let issued = f.on_storage_read_issued(ReadKind::Sequential, &a, 1);
        assert_eq!(issued, StorageReadAdmission::CountAtCompletion);
        assert_eq!(issued.on_completion(&mut a, 1), Some(3));
        a.moved(2, Position::new(1, 20));
        assert_eq!(issued.on_completion(&mut a, 1), Some(2));
        a.deactivate(1, 0);
        assert_eq!(issued.on_completion(&mut a, 1), None);
    }

    #[test]
    fn only_hold_backs_add_a_read() {
        let f = flow("pip430", Context::Lab);
        assert!(f.redelivery_adds_read(RedeliveryReason::HoldBack));
        assert!(!f.redelivery_adds_read(RedeliveryReason::Nack));
        assert!(!f.redelivery_adds_read(RedeliveryReason::Overflow));
        assert!(!f.redelivery_adds_read(RedeliveryReason::Unspecified));
    }

    #[test]
    fn continue_caching_window_is_library_only_by_default() {
        let mut a = CursorActivity::new(CursorTracking::ExactCounts, 0);
        a.activate(1, Position::new(1, 0));
        a.deactivate(1, 1_000);
        assert_eq!(flow("pip430", Context::Library).on_add(&a, 2_000), Some(0));
        assert_eq!(flow("pip430", Context::Lab).on_add(&a, 2_000), None);
    }

    #[test]
    fn backlogged_cursor_caching_groups() {
        let mut c = CacheConfig::default();
        c.set("strategy", SettingValue::Str("legacy".into()))
            .unwrap();
        c.set("min_backlog_cursors_for_caching", SettingValue::Int(1))
            .unwrap();
        let f = ReadFlow::new(&c, Context::Lab);
        let got = f
            .cursors_caching_reads(&[(1, 5000), (2, 6000), (3, 50_000), (4, 10)])
            .unwrap();
        assert_eq!(got, vec![(1, true), (2, true), (3, false), (4, false)]);
        assert!(f.active_with_backlog(true, 999));
        assert!(!f.active_with_backlog(true, 1000));
        assert!(!f.active_with_backlog(false, 0));
    }
}
