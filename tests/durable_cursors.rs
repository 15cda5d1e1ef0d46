//! Durable cursors of a `FileStorage` (issue 59, item 3): a cursor's mark-delete position and
//! individually acknowledged ranges survive reopening the managed ledger, `kill -9` of the
//! process, and a torn tail of the cursor log. Also the Pulsar recovery tests the API can state.
//! Child processes are this test binary run again on one `#[ignore]`d test, as in
//! `tests/file_storage.rs`.

use ledgercache::broker::ledger::{
    LedgerConfig, ManagedCursor, ManagedLedger, ReadOutcome, SkipMode, StartAt,
};
use ledgercache::broker::storage::{
    DurableCursor, FileOptions, FileStorage, Storage, StorageHandle, SyncPolicy,
};
use ledgercache::{CacheConfig, EntryCacheManager, Error, ManualClock, Payload, Position};
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const TOPIC: &str = "persistent://t/ns/durable";
const ROLE: &str = "LEDGERCACHE_TEST_CHILD";

/// Taken to spawn a child: until it has exec'd, the child holds copies of every descriptor this
/// process has open, among them the directory locks of the stores other tests hold, so a test
/// reopening its store in that window would find it locked. Opens take it shared.
static SPAWN: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn open_store(dir: &Path, options: FileOptions) -> ledgercache::Result<FileStorage> {
    let _spawning = SPAWN
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    FileStorage::open_with(dir, options)
}

struct Opened {
    store: Arc<FileStorage>,
    ml: ManagedLedger,
}

impl Opened {
    /// Closes the store so that the directory can be opened again (Pulsar's `factory2`).
    fn close(self) {
        self.store.close();
    }

    fn cursor(&self, name: &str) -> ManagedCursor {
        self.ml.open_cursor(name, StartAt::Latest, true).unwrap()
    }
}

fn open_sync(dir: &Path, max_entries_per_ledger: u64, sync: SyncPolicy) -> Opened {
    let options = FileOptions {
        sync,
        ..Default::default()
    };
    let store = Arc::new(open_store(dir, options).unwrap());
    let manager =
        EntryCacheManager::new(CacheConfig::default(), Arc::new(ManualClock::new(0)), false)
            .unwrap();
    let ml = ManagedLedger::open(
        TOPIC,
        &manager,
        StorageHandle::new(store.clone()),
        LedgerConfig {
            max_entries_per_ledger,
            min_rollover_ms: 0,
            ..Default::default()
        },
    )
    .unwrap();
    Opened { store, ml }
}

fn open(dir: &Path, max_entries_per_ledger: u64) -> Opened {
    open_sync(dir, max_entries_per_ledger, SyncPolicy::Never)
}

fn add(ml: &ManagedLedger, text: &str) -> Position {
    ml.add_entry(Payload::from(text.as_bytes().to_vec()))
        .unwrap()
}

fn read(c: &ManagedCursor, n: u64) -> Vec<(Position, String)> {
    match c.read_entries(n).unwrap() {
        ReadOutcome::Delivered(entries) => entries
            .into_iter()
            .map(|e| {
                let text = String::from_utf8(e.data().to_vec()).unwrap();
                e.release();
                (e.position(), text)
            })
            .collect(),
        ReadOutcome::Discarded => panic!("read discarded"),
    }
}

fn durable(store: &FileStorage, name: &str) -> Option<DurableCursor> {
    store
        .load_cursors(TOPIC)
        .unwrap()
        .into_iter()
        .find(|c| c.name == name)
}

/// ManagedCursorTest.cursorPersistence2: mark-delete positions of four cursors, one opened after
/// an entry, survive reopening; one never moved keeps its initial position.
#[test]
fn cursor_persistence_2() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let (c1, c2, c3) = (o.cursor("c1"), o.cursor("c2"), o.cursor("c3"));
    let p0 = c3.mark_delete_position().unwrap();
    let p1 = add(&o.ml, "dummy-entry-1");
    let c4 = o.cursor("c4");
    let p2 = add(&o.ml, "dummy-entry-2");
    let p3 = add(&o.ml, "dummy-entry-3");
    let p4 = add(&o.ml, "dummy-entry-4");
    let p5 = add(&o.ml, "dummy-entry-5");
    add(&o.ml, "dummy-entry-6");
    for p in [p1, p2, p3, p4, p5] {
        c1.mark_delete(p).unwrap();
    }
    c2.mark_delete(p1).unwrap();
    assert_eq!(c4.mark_delete_position().unwrap(), p1);
    drop((c1, c2, c3, c4));
    o.close();

    let o = open(dir.path(), 50_000);
    assert_eq!(o.ml.cursor_names(), ["c1", "c2", "c3", "c4"]);
    assert_eq!(o.cursor("c1").mark_delete_position().unwrap(), p5);
    assert_eq!(o.cursor("c2").mark_delete_position().unwrap(), p1);
    // p0 is the position before the first ledger existed; recovery places it before the first
    // entry, where the cursor was.
    let c3 = o.cursor("c3");
    assert_eq!(
        c3.mark_delete_position().unwrap(),
        Position::new(p1.ledger_id, -1)
    );
    assert!(c3.mark_delete_position().unwrap() >= p0);
    assert_eq!(c3.backlog().unwrap(), 6);
    assert_eq!(o.cursor("c4").mark_delete_position().unwrap(), p1);
}

/// ManagedCursorTest.cursorPersistenceWithLedgerForceRecovery: a mark-delete after reading two of
/// three entries survives reopening; the read after it does not move what is persisted.
#[test]
fn cursor_persistence_with_ledger_force_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    for i in 1..=3 {
        add(&o.ml, &format!("dummy-entry-{i}"));
    }
    let entries = read(&c1, 2);
    let p1 = entries[1].0;
    c1.mark_delete(p1).unwrap();
    assert_eq!(read(&c1, 1).len(), 1);
    drop(c1);
    o.close();

    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    assert_eq!(c1.mark_delete_position().unwrap(), p1);
    // Recovery reads from the entry after the mark-delete position.
    assert_eq!(c1.read_position().unwrap(), Position::new(p1.ledger_id, 2));
}

/// ManagedCursorTest.testClearBacklog (both halves): cleared backlogs stay cleared after
/// reopening, with one entry per ledger.
#[test]
fn clear_backlog_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 1);
    let c1 = o.cursor("c1");
    add(&o.ml, "dummy-entry-1");
    let c2 = o.cursor("c2");
    add(&o.ml, "dummy-entry-2");
    let c3 = o.cursor("c3");
    add(&o.ml, "dummy-entry-3");
    assert_eq!(c1.backlog().unwrap(), 3);
    c1.clear_backlog().unwrap();
    c3.clear_backlog().unwrap();
    let check = |c1: &ManagedCursor, c2: &ManagedCursor, c3: &ManagedCursor| {
        assert_eq!(c1.backlog().unwrap(), 0);
        assert_eq!(c2.backlog().unwrap(), 2);
        assert_eq!(c3.backlog().unwrap(), 0);
    };
    check(&c1, &c2, &c3);
    drop((c1, c2, c3));
    o.close();

    let o = open(dir.path(), 1);
    let (c1, c2, c3) = (o.cursor("c1"), o.cursor("c2"), o.cursor("c3"));
    check(&c1, &c2, &c3);
    assert!(read(&c1, 10).is_empty() && read(&c3, 10).is_empty());
    let texts: Vec<String> = read(&c2, 10).into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts, ["dummy-entry-2", "dummy-entry-3"]);
}

/// The state of ManagedCursorTest.testOutOfOrderDeletePersistence*: five individual acks with
/// holes; after reopening (with the store closed, or abandoned as a crash leaves it) the backlog
/// and the entries read skip exactly the acknowledged ones.
fn out_of_order_delete_persistence(close: bool) {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    let added: Vec<Position> = (0..20)
        .map(|i| add(&o.ml, &format!("dummy-entry-{i}")))
        .collect();
    for i in [2, 5, 7, 8, 9] {
        c1.ack(added[i]).unwrap();
    }
    assert_eq!(c1.backlog().unwrap(), 20 - 5);
    drop(c1);
    if close {
        o.close();
    } else {
        // A crash: nothing is closed or flushed; the lock goes with the (dropped) store.
        drop(o);
    }

    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    assert_eq!(c1.backlog().unwrap(), 20 - 5);
    let texts: Vec<String> = read(&c1, 20).into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts.len(), 20 - 5);
    assert_eq!(
        &texts[..5],
        [
            "dummy-entry-0",
            "dummy-entry-1",
            "dummy-entry-3",
            "dummy-entry-4",
            "dummy-entry-6"
        ]
    );
    assert!(read(&c1, 20).is_empty());
}

/// ManagedCursorTest.testOutOfOrderDeletePersistenceWithClose
#[test]
fn out_of_order_delete_persistence_with_close() {
    out_of_order_delete_persistence(true);
}

/// ManagedCursorTest.testOutOfOrderDeletePersistenceAfterCrash
#[test]
fn out_of_order_delete_persistence_after_crash() {
    out_of_order_delete_persistence(false);
}

/// ManagedLedgerTest.closeAndReopen: a cursor opened at the end after the first entry reads only
/// the second one after reopening.
#[test]
fn close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    add(&o.ml, "dummy-entry-1");
    drop(o.cursor("c1"));
    add(&o.ml, "dummy-entry-2");
    o.close();

    let o = open(dir.path(), 50_000);
    let c = o.cursor("c1");
    assert_eq!(o.ml.entry_count(), 2);
    let texts: Vec<String> = read(&c, 100).into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts, ["dummy-entry-2"]);
}

/// ManagedLedgerTest.differentSessions: a cursor opened before any entry keeps its backlog across
/// sessions and sees entries added after reopening.
#[test]
fn different_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c = o.cursor("c1");
    add(&o.ml, "dummy-entry-1");
    assert_eq!(c.backlog().unwrap(), 1);
    drop(c);
    o.close();

    let o = open(dir.path(), 50_000);
    assert_eq!(o.ml.entry_count(), 1);
    let c = o.cursor("c1");
    assert_eq!(c.backlog().unwrap(), 1);
    add(&o.ml, "dummy-entry-2");
    assert_eq!(c.backlog().unwrap(), 2);
    assert_eq!(read(&c, 10).len(), 2);
}

/// The ledger a reopen created: the last one, empty.
fn created(o: &Opened) -> i64 {
    let last = o.ml.ledgers().last().copied().unwrap();
    assert_eq!(last.entries, 0);
    last.id
}

/// ManagedCursorTest.testReopenMultipleTimes: the empty ledger a cursor's mark-delete position
/// was in is gone after a reopen (the reopen creates the next), so the recovered position moves
/// forward to the new ledger; the cursor closes and reopens again and again, with nothing to read.
#[test]
fn reopen_multiple_times() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    let mut md = c1.mark_delete_position().unwrap();
    c1.close().unwrap();
    o.close();
    for _ in 0..3 {
        let o = open(dir.path(), 50_000);
        let c1 = o.cursor("c1");
        let now = c1.mark_delete_position().unwrap();
        assert_ne!(now, md);
        assert!(now > md);
        assert_eq!(now, Position::new(created(&o), -1));
        assert_eq!(c1.backlog().unwrap(), 0);
        assert!(!c1.has_more_entries().unwrap());
        md = now;
        c1.close().unwrap();
        o.close();
    }
}

/// ManagedLedgerTest.testCursorRecoveryForEmptyLedgers: a cursor of a ledger that never had an
/// entry sits at the last confirmed entry `(L,-1)`; after a reopen the empty ledger is dropped,
/// the one the reopen creates is the only one, and the cursor sits at its `(L',-1)`.
#[test]
fn cursor_recovery_for_empty_ledgers() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    assert_eq!(o.ml.ledgers().len(), 1);
    assert_eq!(
        c1.mark_delete_position().unwrap(),
        Position::new(created(&o), -1)
    );
    c1.close().unwrap();
    o.close();

    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    assert_eq!(o.ml.ledgers().len(), 1);
    assert_eq!(
        c1.mark_delete_position().unwrap(),
        Position::new(created(&o), -1)
    );
}

/// ManagedCursorTest.cursorPersistence: c1's mark-delete position in the middle of a ledger is
/// recovered as it was; c2's, at the ledger's last entry, moves past it to `(L',-1)` of the
/// ledger the reopen creates (`maybeUpdateCursorBeforeTrimmingConsumedLedger`, apache/pulsar#25087),
/// as Pulsar's test asserts (`isGreaterThan(p2)`); the move is persisted.
#[test]
fn cursor_persistence() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    let c2 = o.cursor("c2");
    for i in 1..=6 {
        add(&o.ml, &format!("dummy-entry-{i}"));
    }
    let p1 = read(&c1, 3)[2].0;
    c1.mark_delete(p1).unwrap();
    let entries = read(&c1, 4);
    assert_eq!(entries.len(), 3);
    let p2 = entries[2].0;
    c2.mark_delete(p2).unwrap();
    drop((c1, c2));
    o.close();

    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    let c2 = o.cursor("c2");
    assert_eq!(c1.mark_delete_position().unwrap(), p1);
    let moved = Position::new(created(&o), -1);
    assert!(c2.mark_delete_position().unwrap() > p2);
    assert_eq!(c2.mark_delete_position().unwrap(), moved);
    assert_eq!(durable(&o.store, "c2").unwrap().mark_delete, moved);
    assert_eq!(c2.backlog().unwrap(), 0);
    assert_eq!(c1.backlog().unwrap(), 3);
}

/// The rollover half of `maybeUpdateCursorBeforeTrimmingConsumedLedger`: a cursor that
/// mark-deleted a ledger's last entry after the next ledger was created stays there until the
/// next ledger is created, then moves to `(next,-1)`; a reopen moves one the same way.
#[test]
fn a_consumed_ledger_moves_the_mark_delete_position_at_rollover() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 2);
    let c = o.cursor("c");
    let d = o.cursor("d");
    add(&o.ml, "a");
    let b = add(&o.ml, "b");
    c.mark_delete(b).unwrap();
    assert_eq!(c.mark_delete_position().unwrap(), b);
    let e = add(&o.ml, "e");
    assert_eq!(e.ledger_id, b.ledger_id + 1);
    assert_eq!(c.mark_delete_position().unwrap(), b);
    let f = add(&o.ml, "f");
    assert_eq!(
        c.mark_delete_position().unwrap(),
        Position::new(e.ledger_id, -1)
    );
    assert_eq!(
        durable(&o.store, "c").unwrap().mark_delete,
        Position::new(e.ledger_id, -1)
    );
    assert_eq!(c.read_position().unwrap(), e);
    d.mark_delete(f).unwrap();
    assert_eq!(d.mark_delete_position().unwrap(), f);
    drop((c, d));
    o.close();
    let o = open(dir.path(), 2);
    // The empty ledger after f's is dropped at open; d moves to the one the reopen creates.
    assert_eq!(o.ml.ledgers().len(), 3);
    assert_eq!(
        o.cursor("d").mark_delete_position().unwrap(),
        Position::new(created(&o), -1)
    );
    assert_eq!(
        o.cursor("c").mark_delete_position().unwrap(),
        Position::new(e.ledger_id, -1)
    );
}

/// A mark-delete position stored at `(L,-1)` of a ledger that is still empty when the broker
/// stops (what a `kill -9` right after a rollover leaves): the reopen drops `L` and recovers the
/// cursor at `(L',-1)` of the ledger it creates, with nothing skipped and nothing to read again.
/// The store keeps `(L,-1)` until the cursor next moves; both leave the same entries unacknowledged.
#[test]
fn a_mark_delete_position_in_a_dropped_empty_ledger_recovers_at_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 2);
    let c = o.cursor("c");
    add(&o.ml, "a");
    let b = add(&o.ml, "b");
    c.mark_delete(b).unwrap();
    drop(c);
    o.close();
    // The reopen moves the consumed cursor to the ledger it creates, and stores the move.
    let o = open(dir.path(), 2);
    let stored = Position::new(created(&o), -1);
    assert_eq!(durable(&o.store, "c").unwrap().mark_delete, stored);
    o.close();
    let o = open(dir.path(), 2);
    let ids: Vec<i64> = o.ml.ledgers().iter().map(|l| l.id).collect();
    assert!(!ids.contains(&stored.ledger_id), "{ids:?}");
    let c = o.cursor("c");
    assert_eq!(
        c.mark_delete_position().unwrap(),
        Position::new(created(&o), -1)
    );
    assert_eq!(durable(&o.store, "c").unwrap().mark_delete, stored);
    assert_eq!(c.backlog().unwrap(), 0);
    let next = add(&o.ml, "next");
    assert_eq!(read(&c, 5), [(next, "next".to_string())]);
}

/// ManagedCursorTest.testRecoverCursorAfterResetToLatestForNewEntry: a cursor reset to the
/// latest position of an empty ledger, `(L,-1)` / `(L,0)`, recovers there after an entry is added,
/// with that entry to read. Pulsar recovers the cursor in place (`recoverFromLedger`); here the
/// ledger is reopened, which recovers it the same way.
#[test]
fn recover_cursor_after_reset_to_latest_for_new_entry() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c = o.cursor("sub");
    assert_eq!(c.mark_delete_position().unwrap().entry_id, -1);
    assert_eq!(c.read_position().unwrap().entry_id, 0);
    assert_eq!(o.ml.last_position(), None);
    c.reset(Position::new(i64::MAX, i64::MAX)).unwrap();
    assert_eq!(c.mark_delete_position().unwrap().entry_id, -1);
    assert_eq!(c.read_position().unwrap().entry_id, 0);
    let md = c.mark_delete_position().unwrap();
    let rp = c.read_position().unwrap();
    add(&o.ml, "x");
    drop(c);
    o.close();

    let o = open(dir.path(), 50_000);
    let c = o.cursor("sub");
    assert_eq!(c.mark_delete_position().unwrap(), md);
    assert_eq!(c.read_position().unwrap(), rp);
    assert_eq!(c.entries_to_read().unwrap(), 1);
}

/// ManagedCursorTest.testRecoverCursorAfterResetToLatestForMultipleEntries: reset to the latest
/// after four entries, `(L,3)` / `(L,4)`; two more added; recovery keeps both positions, with the
/// two to read.
#[test]
fn recover_cursor_after_reset_to_latest_for_multiple_entries() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c = o.cursor("sub");
    assert_eq!(c.mark_delete_position().unwrap().entry_id, -1);
    assert_eq!(c.read_position().unwrap().entry_id, 0);
    c.reset(Position::new(i64::MAX, i64::MAX)).unwrap();
    assert_eq!(c.mark_delete_position().unwrap().entry_id, -1);
    for _ in 0..4 {
        add(&o.ml, "x");
    }
    c.reset(Position::new(i64::MAX, i64::MAX)).unwrap();
    assert_eq!(c.mark_delete_position().unwrap().entry_id, 3);
    assert_eq!(c.read_position().unwrap().entry_id, 4);
    assert_eq!(o.ml.last_position().unwrap().entry_id, 3);
    add(&o.ml, "y");
    add(&o.ml, "y");
    let md = c.mark_delete_position().unwrap();
    let rp = c.read_position().unwrap();
    drop(c);
    o.close();

    let o = open(dir.path(), 50_000);
    let c = o.cursor("sub");
    assert_eq!(c.mark_delete_position().unwrap(), md);
    assert_eq!(c.read_position().unwrap(), rp);
    assert_eq!(c.entries_to_read().unwrap(), 2);
}

/// ManagedLedgerTest.testReopenAndCleanup, its first half: a ledger with an entry and a cursor is
/// the only one; a reopen keeps it and creates the next. The second half deletes the managed
/// ledger, which the API has no call for (`docs/pulsar-tests.md`).
#[test]
fn reopen_and_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    drop(o.cursor("c1"));
    add(&o.ml, "data");
    assert_eq!(o.ml.ledgers().len(), 1);
    o.close();
    let o = open(dir.path(), 50_000);
    drop(o.cursor("c1"));
    assert_eq!(o.ml.ledgers().len(), 2);
    assert_eq!(o.ml.ledgers()[0].entries, 1);
}

/// ManagedLedgerTest.doubleOpen: Pulsar's factory hands the same managed ledger to a second
/// open; there is no factory here, and the store a second open would share is locked, so a
/// second `FileStorage` on the directory is refused, naming it (`docs/fidelity.md`).
#[test]
fn double_open() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let second = open_store(dir.path(), FileOptions::default());
    let err = second.err().expect("a second open of a locked store");
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
    o.close();
    assert!(open_store(dir.path(), FileOptions::default()).is_ok());
}

/// Recovery as `ManagedCursorImpl.recoveredCursor` does it: the read position is the entry after
/// the mark-delete position, whatever the cursor had read; a recovered cursor is listed at once,
/// inactive until opened; `open_cursor` ignores its start position; reset and skip persist.
#[test]
fn recovery_reads_from_after_the_mark_delete_position() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 4);
    let c = o.cursor("sub");
    let added: Vec<Position> = (0..10).map(|i| add(&o.ml, &format!("e{i}"))).collect();
    c.mark_delete(added[2]).unwrap();
    c.ack(added[4]).unwrap();
    assert_eq!(read(&c, 8).len(), 6);
    let r = o.cursor("reset");
    r.reset(added[7]).unwrap();
    let s = o.cursor("skipped");
    s.reset(added[0]).unwrap();
    s.skip(5, SkipMode::Exclude).unwrap();
    drop((c, r, s));
    o.close();

    let o = open(dir.path(), 4);
    assert_eq!(o.ml.cursor_names(), ["reset", "skipped", "sub"]);
    assert_eq!(o.ml.active_cursor_count(), 0);
    let c =
        o.ml.open_cursor("sub", StartAt::At(added[9]), true)
            .unwrap();
    assert_eq!(o.ml.active_cursor_count(), 1);
    assert_eq!(c.mark_delete_position().unwrap(), added[2]);
    assert_eq!(c.read_position().unwrap(), added[3]);
    let got: Vec<Position> = read(&c, 10).into_iter().map(|(p, _)| p).collect();
    let want: Vec<Position> = added[3..]
        .iter()
        .copied()
        .filter(|&p| p != added[4])
        .collect();
    assert_eq!(got, want);
    let r = o.cursor("reset");
    assert_eq!(r.mark_delete_position().unwrap(), added[6]);
    assert_eq!(r.backlog().unwrap(), 3);
    let s = o.cursor("skipped");
    assert_eq!(s.backlog().unwrap(), 5);
}

/// Pulsar's `deleteCursor`: a deleted cursor does not come back; a closed one does, where it was.
#[test]
fn deleted_cursors_stay_deleted_and_closed_ones_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let keep = o.cursor("keep");
    let gone = o.cursor("gone");
    let p = add(&o.ml, "x");
    add(&o.ml, "y");
    keep.mark_delete(p).unwrap();
    gone.mark_delete(p).unwrap();
    keep.close().unwrap();
    assert_eq!(o.ml.cursor_names(), ["gone"]);
    // Opened again in the same session: recovered from the store, not started afresh.
    let keep = o.ml.open_cursor("keep", StartAt::Earliest, true).unwrap();
    assert_eq!(keep.mark_delete_position().unwrap(), p);
    o.ml.delete_cursor("gone").unwrap();
    assert!(matches!(
        o.ml.delete_cursor("gone"),
        Err(Error::NotFound { .. })
    ));
    drop((keep, gone));
    o.close();

    let o = open(dir.path(), 50_000);
    assert_eq!(o.ml.cursor_names(), ["keep"]);
    let gone = o.ml.open_cursor("gone", StartAt::Earliest, true).unwrap();
    assert_eq!(gone.backlog().unwrap(), 2);
}

/// Cursor names are arbitrary strings: they are stored inside the records, never in file names.
#[test]
fn any_cursor_name_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "pulsar.dedup",
        "my-sub",
        "a/b:c%2F d",
        "../../etc",
        "ünï\u{0}code\n",
        "",
    ];
    let o = open(dir.path(), 50_000);
    let p = add(&o.ml, "x");
    add(&o.ml, "y");
    for n in names {
        o.ml.open_cursor(n, StartAt::Earliest, true)
            .unwrap()
            .mark_delete(p)
            .unwrap();
    }
    o.close();
    let o = open(dir.path(), 50_000);
    let mut want: Vec<String> = names.iter().map(std::string::ToString::to_string).collect();
    want.sort();
    assert_eq!(o.ml.cursor_names(), want);
    for n in names {
        assert_eq!(o.cursor(n).mark_delete_position().unwrap(), p, "{n:?}");
    }
    let files: Vec<String> = std::fs::read_dir(o.store.cursor_log_path(TOPIC).parent().unwrap())
        .unwrap()
        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        files
            .iter()
            .all(|f| f == "cursors.log" || f.ends_with(".seg")),
        "{files:?}"
    );
}

/// The log is rewritten when it grows large next to the live state: 20,000 acks leave a log a few
/// times the size of the state, and every ack is still there after reopening.
#[test]
fn the_log_is_compacted_and_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 1000);
    let c = o.cursor("c");
    let added: Vec<Position> = (0..10_000).map(|i| add(&o.ml, &format!("{i}"))).collect();
    let mut largest = 0;
    for (i, &p) in added.iter().enumerate() {
        // Every other entry on its own (holes stay), and the mark-delete position creeping on.
        if i % 2 == 1 {
            c.ack(p).unwrap();
        }
        if i % 10 == 0 && i >= 1000 {
            c.mark_delete(added[i - 1000]).unwrap();
        }
        largest = largest.max(o.store.cursor_log_len(TOPIC).unwrap());
    }
    let want = durable(&o.store, "c").unwrap();
    assert!(want.acked.len() > 400, "{}", want.acked.len());
    let backlog = c.backlog().unwrap();
    // Live state about 12 KiB; without rewrites the log would be about 400 KiB.
    assert!(largest < 100 * 1024, "log reached {largest} bytes");
    let md = c.mark_delete_position().unwrap();
    drop(c);
    o.close();
    let o = open(dir.path(), 1000);
    assert_eq!(durable(&o.store, "c").unwrap(), want);
    let c = o.cursor("c");
    assert_eq!(c.mark_delete_position().unwrap(), md);
    assert_eq!(c.backlog().unwrap(), backlog);
    assert!(!o
        .store
        .cursor_log_path(TOPIC)
        .with_extension("log.tmp")
        .exists());
}

/// Writes a cursor log through a ledger and returns the durable state after each call with the
/// log's length then.
fn logged_history(dir: &Path) -> Vec<(u64, Vec<DurableCursor>)> {
    let o = open(dir, 3);
    let added: Vec<Position> = (0..12).map(|i| add(&o.ml, &format!("{i}"))).collect();
    let mut history = vec![(0, Vec::new())];
    let mut snap = |o: &Opened| {
        history.push((
            o.store.cursor_log_len(TOPIC).unwrap(),
            o.store.load_cursors(TOPIC).unwrap(),
        ))
    };
    let a = o.ml.open_cursor("a", StartAt::Earliest, true).unwrap();
    snap(&o);
    let b = o.ml.open_cursor("b.sub", StartAt::Latest, true).unwrap();
    snap(&o);
    for i in [3, 5, 6, 9] {
        a.ack(added[i]).unwrap();
        snap(&o);
    }
    a.mark_delete(added[4]).unwrap();
    snap(&o);
    b.reset(added[2]).unwrap();
    snap(&o);
    o.ml.delete_cursor("b.sub").unwrap();
    snap(&o);
    a.ack(added[10]).unwrap();
    snap(&o);
    drop((a, b));
    o.close();
    history
}

fn reopen_with_log(bytes: &[u8]) -> ledgercache::Result<(Vec<DurableCursor>, usize)> {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), FileOptions::default()).unwrap();
    let path = store.cursor_log_path(TOPIC);
    store.close();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let store = open_store(dir.path(), FileOptions::default())?;
    let recovered = store.recovered().len();
    Ok((store.load_cursors(TOPIC)?, recovered))
}

/// Cutting the log at every byte offset: a reopen recovers the state after the last whole record
/// before the cut (a cut inside the file magic leaves no cursors), never fails or panics, and cuts
/// the torn bytes off so that the next writer appends after whole records.
#[test]
fn truncation_at_every_offset_recovers_the_last_whole_state() {
    let dir = tempfile::tempdir().unwrap();
    let history = logged_history(dir.path());
    let store = open_store(dir.path(), FileOptions::default()).unwrap();
    let bytes = std::fs::read(store.cursor_log_path(TOPIC)).unwrap();
    store.close();
    assert_eq!(bytes.len() as u64, history.last().unwrap().0);
    for cut in 0..=bytes.len() {
        let want = &history
            .iter()
            .rev()
            .find(|(len, _)| *len <= cut as u64)
            .unwrap()
            .1;
        let (got, recovered) =
            reopen_with_log(&bytes[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(&got, want, "cut at {cut}");
        // A 0-byte log is a crash right after creating it, like a 0-byte new segment.
        let whole = cut == 8 || (cut > 8 && history.iter().any(|(len, _)| *len == cut as u64));
        assert_eq!(recovered, usize::from(!whole), "cut at {cut}");
    }
    // A torn tail after a cut is gone: the next writer's record follows the whole ones.
    let (_, before) = &history[history.len() - 2];
    let cut = bytes.len() - 3;
    let d = tempfile::tempdir().unwrap();
    {
        let store = open_store(d.path(), FileOptions::default()).unwrap();
        let path = store.cursor_log_path(TOPIC);
        store.close();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &bytes[..cut]).unwrap();
    }
    let o = open(d.path(), 3);
    assert_eq!(&o.store.load_cursors(TOPIC).unwrap(), before);
    o.ml.open_cursor("late", StartAt::Latest, true).unwrap();
    o.close();
    let o = open(d.path(), 3);
    assert_eq!(o.ml.cursor_names(), ["a", "late"]);
}

/// Damage that is not a torn write: a flipped byte in any record but the last (or in any header)
/// is an error naming the log, at open of the managed ledger, and nothing is cut; a flipped byte in
/// the last record's payload is a torn page of its write, and the state before it is recovered.
#[test]
fn a_flipped_byte_before_the_last_record_is_an_error_naming_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let history = logged_history(dir.path());
    let store = open_store(dir.path(), FileOptions::default()).unwrap();
    let path = store.cursor_log_path(TOPIC);
    let bytes = std::fs::read(&path).unwrap();
    store.close();
    let last_start = history[history.len() - 2].0 as usize;
    let mut errors = 0;
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x5a;
        match reopen_with_log(&damaged) {
            Ok((got, _)) => {
                // Only a payload byte of the last record is a torn write.
                assert!(at >= last_start + 12, "flip at {at} was not detected");
                assert_eq!(got, history[history.len() - 2].1, "flip at {at}");
            }
            Err(e) => {
                errors += 1;
                let msg = e.to_string();
                assert!(matches!(e, Error::CorruptSegment { .. }), "{msg}");
                assert!(
                    msg.contains("cursors.log") && msg.contains("cursor log"),
                    "{msg}"
                );
            }
        }
    }
    assert!(errors >= last_start);
    // The managed ledger does not open over a damaged log, and says which file it is.
    let mut damaged = bytes.clone();
    damaged[10] ^= 1;
    std::fs::write(&path, &damaged).unwrap();
    let store = Arc::new(open_store(dir.path(), FileOptions::default()).unwrap());
    let manager =
        EntryCacheManager::new(CacheConfig::default(), Arc::new(ManualClock::new(0)), false)
            .unwrap();
    let err = ManagedLedger::open(
        TOPIC,
        &manager,
        StorageHandle::new(store.clone()),
        LedgerConfig::default(),
    )
    .err()
    .expect("a damaged cursor log is refused");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), damaged, "nothing was cut");
}

/// A read-only store restores the cursors and writes nothing.
#[test]
fn a_read_only_store_restores_cursors_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c = o.cursor("c");
    let p = add(&o.ml, "x");
    add(&o.ml, "y");
    c.mark_delete(p).unwrap();
    drop(c);
    let path = o.store.cursor_log_path(TOPIC);
    o.close();
    let before = std::fs::read(&path).unwrap();
    let options = FileOptions {
        read_only: true,
        create: false,
        ..Default::default()
    };
    let store = Arc::new(open_store(dir.path(), options).unwrap());
    let manager =
        EntryCacheManager::new(CacheConfig::default(), Arc::new(ManualClock::new(0)), false)
            .unwrap();
    let ml = ManagedLedger::open(
        TOPIC,
        &manager,
        StorageHandle::new(store.clone()),
        LedgerConfig::default(),
    )
    .unwrap();
    let c = ml.open_cursor("c", StartAt::Earliest, true).unwrap();
    assert_eq!(c.mark_delete_position().unwrap(), p);
    c.clear_backlog().unwrap();
    ml.open_cursor("new", StartAt::Earliest, true).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// `sync="always"`: the same state after reopening (the OS-crash half of the guarantee is the
/// fsync before each call returns, which a test in one machine cannot crash through).
#[test]
fn sync_always_persists_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let o = open_sync(dir.path(), 50_000, SyncPolicy::Always);
    let c = o.cursor("c");
    let added: Vec<Position> = (0..5).map(|i| add(&o.ml, &format!("{i}"))).collect();
    c.ack(added[3]).unwrap();
    c.mark_delete(added[1]).unwrap();
    let want = durable(&o.store, "c").unwrap();
    assert_eq!(want.acked, [(added[3].ledger_id, 3, 3)]);
    drop(c);
    o.close();
    let o = open_sync(dir.path(), 50_000, SyncPolicy::Always);
    assert_eq!(durable(&o.store, "c").unwrap(), want);
}

const CURSOR: &str = "sub/durable:1";

/// Child: adds entries, acknowledges some on their own and moves the mark-delete position, printing
/// `ack L E` / `md L E` after each call returns, until killed.
#[test]
#[ignore = "child process of kill_9_during_acks_loses_no_acknowledged_ack"]
fn ack_writer_child() {
    let dir = std::env::var(ROLE).expect("run by the parent test");
    let o = open(Path::new(&dir), 50);
    let c = o.ml.open_cursor(CURSOR, StartAt::Earliest, true).unwrap();
    let md = c.mark_delete_position().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(std::process::id() as u64);
    // Entries not yet under the mark-delete position.
    let mut open: VecDeque<Position> =
        o.ml.ledgers()
            .iter()
            .flat_map(|l| (0..l.entries as i64).map(move |e| Position::new(l.id, e)))
            .filter(|&p| p > md)
            .collect();
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        open.push_back(add(&o.ml, &format!("{i}")));
        // Acks of the entries in front move the mark-delete position over them: a mark-delete
        // there would be refused (before the mark-delete position), so they leave the choice.
        let md = c.mark_delete_position().unwrap();
        while open.front().is_some_and(|&q| q <= md) {
            open.pop_front();
        }
        if open.is_empty() {
            continue;
        }
        if i % 5 == 4 {
            let k = rng.random_range(0..open.len().div_ceil(2));
            let p = open[k];
            c.mark_delete(p).unwrap();
            writeln!(out, "md {} {}", p.ledger_id, p.entry_id).unwrap();
            open.drain(..=k);
        } else {
            let p = open[rng.random_range(0..open.len())];
            c.ack(p).unwrap();
            writeln!(out, "ack {} {}", p.ledger_id, p.entry_id).unwrap();
        }
        out.flush().unwrap();
    }
}

/// `kill -9` a process acknowledging at random times, 25 times over one store: after each kill the
/// store and the managed ledger reopen, and every acknowledgement the process printed (so whose
/// call had returned) is in the recovered cursor, as an acknowledged range or under its
/// mark-delete position. The log is rewritten many times along the way, so kills land in rewrites
/// too.
#[test]
fn kill_9_during_acks_loses_no_acknowledged_ack() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(59);
    let (mut acks, mut mds, mut torn) = (Vec::new(), Vec::new(), 0);
    let trials = 25;
    for trial in 0..trials {
        let spawning = SPAWN
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "ack_writer_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, path)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        drop(spawning);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(std::result::Result::ok)
                .filter_map(|l| {
                    let at = l.find("ack ").or_else(|| l.find("md "))?;
                    let f: Vec<&str> = l[at..].split(' ').collect();
                    let p = Position::new(f[1].parse().ok()?, f[2].parse().ok()?);
                    Some((f[0] == "md", p))
                })
                .collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_millis(rng.random_range(30..150)));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        // Killed while writing, not ended on its own: a child that failed (a refused ack) would
        // leave a test of nothing.
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "the writer ended before its kill: {status}"
        );
        for (md, p) in reader.join().unwrap() {
            if md {
                mds.push(p);
            } else {
                acks.push(p);
            }
        }
        let o = open(dir.path(), 50);
        torn += o
            .store
            .recovered()
            .iter()
            .filter(|r| r.path.ends_with("cursors.log"))
            .count();
        let Some(d) = durable(&o.store, CURSOR) else {
            // Killed before the cursor was created.
            assert!(
                acks.is_empty() && mds.is_empty(),
                "trial {trial}: the cursor is lost"
            );
            o.close();
            continue;
        };
        let c = o.ml.cursor(CURSOR).expect("the cursor is listed");
        // Recovery may move the mark-delete position over ledgers that hold no entry (an empty
        // ledger the kill left is dropped at open), never over an entry: both positions leave
        // the same entries unacknowledged.
        let first_entry_after = |md: Position| {
            o.ml.ledgers()
                .iter()
                .flat_map(|l| (0..l.entries as i64).map(move |e| Position::new(l.id, e)))
                .find(|&p| p > md)
        };
        let recovered = c.mark_delete_position().unwrap();
        assert_eq!(
            first_entry_after(recovered),
            first_entry_after(d.mark_delete),
            "trial {trial}: recovered at {recovered}, stored at {}",
            d.mark_delete
        );
        assert!(recovered >= d.mark_delete, "trial {trial}");
        for &p in &mds {
            assert!(d.mark_delete >= p, "trial {trial}: mark-delete to {p} lost");
        }
        for &p in &acks {
            let held = p <= d.mark_delete
                || d.acked
                    .iter()
                    .any(|&(l, f, e)| l == p.ledger_id && (f..=e).contains(&p.entry_id));
            assert!(held, "trial {trial}: ack of {p} lost");
        }
        o.close();
    }
    assert!(!mds.is_empty() && acks.len() > 100, "{} acks", acks.len());
    println!(
        "{trials} kills: {} acks and {} mark-deletes acknowledged, all recovered; {torn} torn \
         cursor records cut",
        acks.len(),
        mds.len()
    );
}

/// ManagedCursorTest.hasBacklogMatchesBacklogCountsAfterCursorRecovery: individual acks across
/// ledgers of two entries, with reopens between them; the backlog is right after each reopen and
/// reaches 0 when the last entry is acknowledged.
#[test]
fn backlog_counts_after_cursor_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 2);
    let c1 = o.cursor("c1");
    let p: Vec<Position> = (1..=4).map(|i| add(&o.ml, &format!("entry-{i}"))).collect();
    c1.ack(p[0]).unwrap();
    c1.ack(p[2]).unwrap();
    assert_eq!(c1.backlog().unwrap(), 2);
    drop(c1);
    o.close();
    let o = open(dir.path(), 2);
    let c1 = o.cursor("c1");
    assert_eq!(c1.backlog().unwrap(), 2);
    c1.ack(p[1]).unwrap();
    assert_eq!(c1.backlog().unwrap(), 1);
    drop(c1);
    o.close();
    let o = open(dir.path(), 2);
    let c1 = o.cursor("c1");
    assert_eq!(c1.backlog().unwrap(), 1);
    assert_eq!(c1.mark_delete_position().unwrap(), p[2]);
    c1.ack(p[3]).unwrap();
    assert_eq!(c1.backlog().unwrap(), 0);
}

/// ManagedCursorTest.testNumberOfEntriesWithReopen: cursors opened at the end before, between and
/// after two entries (one per ledger) have 2, 1 and 0 entries to read after reopening (read
/// here: the count is another helper's API).
#[test]
fn number_of_entries_with_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 1);
    o.cursor("c1");
    add(&o.ml, "dummy-entry-1");
    o.cursor("c2");
    add(&o.ml, "dummy-entry-2");
    o.cursor("c3");
    o.close();
    let o = open(dir.path(), 1);
    let counts: Vec<usize> = ["c1", "c2", "c3"]
        .iter()
        .map(|n| read(&o.cursor(n), 10).len())
        .collect();
    assert_eq!(counts, [2, 1, 0]);
}

/// ManagedCursorTest.cursorPersistenceAsyncMarkDeleteSameThread: 100 mark-deletes (here from four
/// threads at once, each position once); after reopening the mark-delete position is at least
/// the last (Pulsar's `isGreaterThanOrEqualTo`): the last entry consumed its ledger, so the reopen
/// moves it to `(L',-1)` of the ledger it creates (`maybeUpdateCursorBeforeTrimmingConsumedLedger`).
#[test]
fn concurrent_mark_deletes_persist_the_furthest() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let c1 = o.cursor("c1");
    let positions: Vec<Position> = (0..100).map(|_| add(&o.ml, "dummy-entry")).collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (c1, positions) = (c1.clone(), &positions);
            s.spawn(move || {
                for p in positions.iter().skip(t).step_by(4) {
                    // A thread that falls behind another's mark-delete is refused, as Pulsar
                    // refuses a mark-delete before the mark-delete position.
                    match c1.mark_delete(*p) {
                        Ok(()) | Err(Error::InvalidArgument { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    let last = *positions.last().unwrap();
    assert_eq!(c1.mark_delete_position().unwrap(), last);
    drop(c1);
    o.close();
    let o = open(dir.path(), 50_000);
    let recovered = o.cursor("c1").mark_delete_position().unwrap();
    assert!(recovered >= last);
    assert_eq!(recovered, Position::new(created(&o), -1));
}

/// ManagedCursorTest.testRecoverCursorAheadOfLastPosition: a persisted mark-delete position in a
/// ledger that does not exist, after the last one, is recovered as the last position, with
/// nothing to read.
#[test]
fn recover_cursor_ahead_of_last_position() {
    let dir = tempfile::tempdir().unwrap();
    let o = open(dir.path(), 50_000);
    let added: Vec<Position> = (0..11).map(|_| add(&o.ml, "e")).collect();
    let last = added[10];
    let ahead = DurableCursor {
        name: "my_test_cursor".into(),
        // Past the ledger the reopen creates (`last.ledger_id + 1`), in none that exists.
        mark_delete: Position::new(last.ledger_id + 5, -1),
        acked: vec![],
    };
    o.store
        .persist_cursor(
            TOPIC,
            &ledgercache::broker::storage::CursorUpdate::Full(&ahead),
        )
        .unwrap();
    o.close();
    let o = open(dir.path(), 50_000);
    let c = o.cursor("my_test_cursor");
    // Pulsar's test mocks the ledger's last position as (1,10); a real reopen creates the ledger
    // that takes appends and sets the last confirmed entry to (new,-1)
    // (`ManagedLedgerImpl.initializeBookKeeper`), which `recoveredCursor` clamps to, as here.
    let created = o.ml.ledgers().last().unwrap().id;
    assert!(created > last.ledger_id);
    assert_eq!(
        c.mark_delete_position().unwrap(),
        Position::new(created, -1)
    );
    assert_eq!(c.read_position().unwrap(), Position::new(created, 0));
    assert_eq!(c.backlog().unwrap(), 0);
    assert!(read(&c, 10).is_empty());
}
