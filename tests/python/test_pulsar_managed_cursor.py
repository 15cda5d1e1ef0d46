"""Pulsar's ManagedCursorTest (managed-ledger, master) as our API states it.

Each test names the Java method it follows. Pulsar's `delete(p)` is our `ack(p)`, `markDelete` our
`mark_delete`, `getNumberOfEntries` our `entries_to_read`, `getNumberOfEntriesInBacklog` our `backlog`,
`resetCursor` our `reset`, `skipEntries(n, mode)` our `skip(n, individually_acked=mode)`. Pulsar's
ManagedLedgerConfig has no minimum rollover time (0): so do these ledgers. Ledger ids are the store's
(Pulsar's mock BookKeeper starts at 3, ours at 1): positions are compared through the ids the ledger
hands out, never as literals. docs/pulsar-tests.md lists what is ported and what is left out.
"""

import random

import pytest

import ledgercache as lc

P = lc.Position


@pytest.fixture
def factory():
    """Opens managed ledgers as Pulsar's tests do (`factory.open(name, config)`)."""
    manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20), clock=lc.ManualClock())
    storage = lc.MemoryStorage()

    def open_ledger(name="my_test_ledger", max_entries_per_ledger=50_000):
        return lc.ManagedLedger(
            name, manager, storage, max_entries_per_ledger=max_entries_per_ledger, min_rollover_ms=0
        )

    return open_ledger


def data(entries):
    out = []
    for e in entries:
        out.append(e.data)
        e.release()
    return out


def test_read_from_empty_ledger(factory):
    # ManagedCursorTest.readFromEmptyLedger
    ledger = factory()
    c1 = ledger.open_cursor("c1")
    ((first_ledger, _, _),) = ledger.ledgers
    assert c1.read_entries(10) == []
    ledger.add_entry(b"test")
    assert len(data(c1.read_entries(10))) == 1
    assert c1.read_entries(10) == []
    # Pulsar's toString: ackPos=L:-1, readPos=L:1 with L the ledger opened with the managed ledger.
    assert c1.mark_delete_position == P(first_ledger, -1)
    assert c1.read_position == P(first_ledger, 1)


def test_read_twice(factory):
    # ManagedCursorTest.readTwice
    ledger = factory(max_entries_per_ledger=1)
    c1, c2 = ledger.open_cursor("c1"), ledger.open_cursor("c2")
    ledger.add_entry(b"entry-1")
    ledger.add_entry(b"entry-2")
    assert len(data(c1.read_entries(2))) == 2
    assert c1.read_entries(2) == []
    assert len(data(c2.read_entries(2))) == 2
    assert c2.read_entries(2) == []


def test_number_of_entries(factory):
    # ManagedCursorTest.testNumberOfEntries
    ledger = factory(max_entries_per_ledger=2)
    c1 = ledger.open_cursor("c1")
    ledger.add_entry(b"dummy-entry-1")
    c2 = ledger.open_cursor("c2")
    ledger.add_entry(b"dummy-entry-2")
    c3 = ledger.open_cursor("c3")
    ledger.add_entry(b"dummy-entry-3")
    c4 = ledger.open_cursor("c4")
    ledger.add_entry(b"dummy-entry-4")
    c5 = ledger.open_cursor("c5")
    for c, n in [(c1, 4), (c2, 3), (c3, 2), (c4, 1), (c5, 0)]:
        assert c.entries_to_read == n
        assert c.has_more_entries() == (n > 0)
    entries = c1.read_entries(2)
    c1.mark_delete(entries[1].position)
    data(entries)
    assert c1.entries_to_read == 2


def test_number_of_entries_in_backlog(factory):
    # ManagedCursorTest.testNumberOfEntriesInBacklog
    ledger = factory(max_entries_per_ledger=2)
    c1 = ledger.open_cursor("c1")
    p1 = ledger.add_entry(b"dummy-entry-1")
    c2 = ledger.open_cursor("c2")
    ledger.add_entry(b"dummy-entry-2")
    c3 = ledger.open_cursor("c3")
    p3 = ledger.add_entry(b"dummy-entry-3")
    c4 = ledger.open_cursor("c4")
    p4 = ledger.add_entry(b"dummy-entry-4")
    c5 = ledger.open_cursor("c5")
    assert [c.backlog for c in (c1, c2, c3, c4, c5)] == [4, 3, 2, 1, 0]
    data(c1.read_entries(2))
    assert (c1.entries_to_read, c1.backlog) == (2, 4)
    c1.mark_delete(p1)
    assert (c1.entries_to_read, c1.backlog) == (2, 3)
    c1.ack(p3)
    assert (c1.entries_to_read, c1.backlog) == (1, 2)
    c1.mark_delete(p4)
    assert (c1.entries_to_read, c1.backlog) == (0, 0)


def test_number_of_entries_with_reopen(tmp_path):
    # ManagedCursorTest.testNumberOfEntriesWithReopen. Cursors do not survive a reopen here (yet):
    # the positions they had are given back to them, which is what Pulsar's recovery restores.
    manager = lc.EntryCacheManager(lc.CacheConfig())
    ledger = lc.ManagedLedger("t", manager, lc.FileStorage(tmp_path), max_entries_per_ledger=1, min_rollover_ms=0)
    c1 = ledger.open_cursor("c1")
    ledger.add_entry(b"dummy-entry-1")
    c2 = ledger.open_cursor("c2")
    ledger.add_entry(b"dummy-entry-2")
    c3 = ledger.open_cursor("c3")
    saved = {c.name: c.read_position for c in (c1, c2, c3)}
    del c1, c2, c3, ledger
    ledger = lc.ManagedLedger("t", manager, lc.FileStorage(tmp_path), max_entries_per_ledger=1, min_rollover_ms=0)
    cursors = [ledger.open_cursor(name, start=saved[name]) for name in ("c1", "c2", "c3")]
    assert [c.entries_to_read for c in cursors] == [2, 1, 0]
    assert [c.has_more_entries() for c in cursors] == [True, True, False]


def test_mark_delete_across_ledgers(factory):
    # ManagedCursorTest.markDeleteAcrossLedgers: a cursor opened on a reopened managed ledger sits in
    # the ledger the reopen created, and an ack of the first entry moves its mark-delete there.
    ml1 = factory()
    mc1 = ml1.open_cursor("c1")
    ((l1, _, _),) = ml1.ledgers
    assert (mc1.mark_delete_position, mc1.read_position) == (P(l1, -1), P(l1, 0))
    mc1.close()
    del mc1, ml1
    ml2 = factory()
    mc2 = ml2.open_cursor("c1")
    pos = ml2.add_entry(b"dummy-entry-1")
    assert pos.ledger_id > l1
    assert data(mc2.read_entries(1)) == [b"dummy-entry-1"]
    mc2.ack(pos)
    assert mc2.mark_delete_position == pos
    assert mc2.read_position == P(pos.ledger_id, pos.entry_id + 1)


def test_reset_cursor(factory):
    # ManagedCursorTest.testResetCursor
    ledger = factory("my_test_move_cursor_ledger", max_entries_per_ledger=10)
    cursor = ledger.open_cursor("trc1")
    ps = ledger.add_entries([b"dummy-entry-1", b"dummy-entry-2", b"dummy-entry-3", b"dummy-entry-4"])
    reset_position = P(ps[-1].ledger_id, ps[-1].entry_id - 2)
    cursor.reset(reset_position)
    assert cursor.read_position == reset_position


def test_reset_cursor1(factory):
    # ManagedCursorTest.testResetCursor1. Pulsar's EARLIEST is the first ledger's (L,-1) as read
    # position; ours is (L,0): a read position here is always one an entry is (or will be) written at.
    ledger = factory("my_test_move_cursor_ledger", max_entries_per_ledger=2)
    cursor = ledger.open_cursor("trc1")
    ps = ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 11)])
    actual_earliest, last_in_prev, first_in_next, last = ps[0], ps[3], ps[4], ps[9]
    cursor.reset(P(actual_earliest.ledger_id, -1))
    assert cursor.read_position == P(actual_earliest.ledger_id, 0)
    cursor.reset(P(last_in_prev.ledger_id, last_in_prev.entry_id + 1))
    assert cursor.read_position == first_in_next
    # A ledger past the last: the current (empty) ledger's first position, as Pulsar's.
    cursor.reset(P(last.ledger_id + 2, 0))
    last_pos = P(last.ledger_id + 1, 0)
    assert ledger.ledgers[-1][:2] == (last.ledger_id + 1, 0)
    assert cursor.read_position == last_pos
    assert cursor.mark_delete_position == last


def test_seek_position(factory):
    # ManagedCursorTest.seekPosition, ManagedCursorTest.seekPosition2
    ledger = factory(max_entries_per_ledger=10)
    cursor = ledger.open_cursor("c1")
    ps = ledger.add_entries([b"dummy-entry-1", b"dummy-entry-2", b"dummy-entry-3", b"dummy-entry-4"])
    cursor.seek(P(ps[-1].ledger_id, ps[-1].entry_id - 1))
    assert cursor.read_position == ps[2]
    ledger2 = factory("l2", max_entries_per_ledger=2)
    cursor2 = ledger2.open_cursor("c1")
    ps2 = ledger2.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 7)])
    cursor2.seek(ps2[2])
    assert cursor2.read_position == ps2[2]


def test_seek_position3(factory):
    # ManagedCursorTest.seekPosition3: seeking past a ledger's end lands on the next ledger's first.
    ledger = factory(max_entries_per_ledger=2)
    cursor = ledger.open_cursor("c1")
    ps = ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 7)])
    seek_position, entry5, entry6 = ps[3], ps[4], ps[5]
    cursor.seek(seek_position)
    assert cursor.read_position == seek_position
    assert data(cursor.read_entries(1)) == [b"dummy-entry-4"]
    cursor.seek(P(entry5.ledger_id, entry5.entry_id + 1))
    assert cursor.read_position == entry6
    assert data(cursor.read_entries(1)) == [b"dummy-entry-6"]


def test_seek_position4(factory):
    # ManagedCursorTest.seekPosition4
    ledger = factory()
    cursor = ledger.open_cursor("c1")
    p1, p2, *_ = ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 7)])
    cursor.mark_delete(p1)
    assert (cursor.mark_delete_position, cursor.read_position) == (p1, p2)
    data(cursor.read_entries(2))
    cursor.seek(p2)
    assert (cursor.mark_delete_position, cursor.read_position) == (p1, p2)


def test_seek_at_or_before_the_mark_delete_position(factory):
    # ManagedCursorImpl.seek(position, force): without force, a position at or before the mark-delete
    # position moves the read position to the entry after it; with force it goes there.
    ledger = factory(max_entries_per_ledger=3)
    cursor = ledger.open_cursor("c1")
    ps = ledger.add_entries([f"e{i}".encode() for i in range(7)])
    cursor.mark_delete(ps[4])
    cursor.seek(ps[1])
    assert cursor.read_position == ps[5]
    assert data(cursor.read_entries(1)) == [b"e5"]
    cursor.seek(ps[4])
    assert cursor.read_position == ps[5]
    cursor.seek(ps[1], force=True)
    assert cursor.read_position == ps[1]
    assert data(cursor.read_entries(2)) == [b"e1", b"e2"], "acknowledged entries, read again"
    assert cursor.mark_delete_position == ps[4]


def test_rewind(factory):
    # ManagedCursorTest.rewind
    ledger = factory(max_entries_per_ledger=2)
    c1 = ledger.open_cursor("c1")
    p1, p2, _p3, p4 = ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 5)])
    assert (c1.entries_to_read, c1.backlog) == (4, 4)
    c1.mark_delete(p1)
    assert (c1.entries_to_read, c1.backlog) == (3, 3)
    assert len(data(c1.read_entries(10))) == 3
    assert (c1.entries_to_read, c1.backlog) == (0, 3)
    c1.rewind()
    assert (c1.entries_to_read, c1.backlog) == (3, 3)
    c1.mark_delete(p2)
    assert (c1.entries_to_read, c1.backlog) == (2, 2)
    assert len(data(c1.read_entries(10))) == 2
    assert (c1.entries_to_read, c1.backlog) == (0, 2)
    c1.rewind()
    assert c1.entries_to_read == 2
    c1.mark_delete(p4)
    assert (c1.entries_to_read, c1.backlog) == (0, 0)
    c1.rewind()
    assert c1.entries_to_read == 0
    ledger.add_entry(b"dummy-entry-5")
    assert c1.entries_to_read == 1
    ledger.add_entry(b"dummy-entry-6")
    assert c1.entries_to_read == 2


def test_mark_delete_skipping_message(factory):
    # ManagedCursorTest.markDeleteSkippingMessage
    ledger = factory(max_entries_per_ledger=10)
    cursor = ledger.open_cursor("c1")
    p1, p2, _, p4 = ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 5)])
    assert cursor.entries_to_read == 4
    cursor.mark_delete(p1)
    assert cursor.has_more_entries()
    assert cursor.entries_to_read == 3
    assert cursor.read_position == p2
    assert data(cursor.read_entries(1)) == [b"dummy-entry-2"]
    cursor.mark_delete(p4)
    assert not cursor.has_more_entries()
    assert cursor.entries_to_read == 0
    assert cursor.read_position == P(p4.ledger_id, p4.entry_id + 1)


def test_removing_cursor(factory):
    # ManagedCursorTest.removingCursor (the last part, trimming consumed ledgers, is Pulsar's
    # background trimmer: ours deletes ledgers only when asked)
    ledger = factory(max_entries_per_ledger=1)
    cursor = ledger.open_cursor("c1")
    ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 7)])
    assert cursor.entries_to_read == 6
    assert ledger.entry_count == 6
    cursor.close()
    cursor = ledger.open_cursor("c1")
    assert cursor.entries_to_read == 0


def test_unordered_mark_delete(factory):
    # ManagedCursorTest.unorderedMarkDelete
    ledger = factory()
    c1 = ledger.open_cursor("c1")
    p1 = ledger.add_entry(b"entry-1")
    p2 = ledger.add_entry(b"entry-2")
    c1.mark_delete(p2)
    with pytest.raises(lc.InvalidArgumentError, match="position"):
        c1.mark_delete(p1)
    assert c1.mark_delete_position == p2


def test_single_delete(factory):
    # ManagedCursorTest.testSingleDelete
    ledger = factory(max_entries_per_ledger=3)
    cursor = ledger.open_cursor("c1")
    p1, p2, p3, p4, p5, p6 = ledger.add_entries([f"entry{i}".encode() for i in range(1, 7)])
    p0 = cursor.mark_delete_position
    cursor.ack(p4)
    assert cursor.mark_delete_position == p0
    cursor.ack(p1)
    assert cursor.mark_delete_position == p1
    cursor.ack(p3)
    cursor.ack(p3)
    assert cursor.mark_delete_position == p1
    cursor.ack(p2)
    assert cursor.mark_delete_position == p4
    cursor.ack(p5)
    assert cursor.mark_delete_position == p5
    cursor.close()
    with pytest.raises(lc.UnknownCursorError):
        cursor.ack(p6)


def test_filtering_read_entries(factory):
    # ManagedCursorTest.testFilteringReadEntries
    ledger = factory(max_entries_per_ledger=3)
    cursor = ledger.open_cursor("c1")
    ps = ledger.add_entries([f"entry{i}".encode() for i in range(1, 7)])
    assert (cursor.entries_to_read, cursor.backlog) == (6, 6)
    assert len(data(cursor.read_entries(3))) == 3
    assert (cursor.entries_to_read, cursor.backlog) == (3, 6)
    cursor.ack(ps[4])
    assert (cursor.entries_to_read, cursor.backlog) == (2, 5)
    assert len(data(cursor.read_entries(3))) == 2
    assert (cursor.entries_to_read, cursor.backlog) == (0, 5)


def test_reading_all_filtered_entries(factory):
    # ManagedCursorTest.testReadingAllFilteredEntries
    ledger = factory(max_entries_per_ledger=3)
    ledger.open_cursor("c1")
    c2 = ledger.open_cursor("c2")
    _, p2, p3, p4, p5 = ledger.add_entries([f"entry{i}".encode() for i in range(1, 6)])
    data(c2.read_entries(1))
    c2.ack(p2)
    c2.ack(p3)
    entries = c2.read_entries(2)
    assert [e.position for e in entries] == [p4, p5]
    data(entries)


def test_counting_with_deleted_entries(factory):
    # ManagedCursorTest.testCountingWithDeletedEntries
    ledger = factory(max_entries_per_ledger=2)
    cursor = ledger.open_cursor("c1")
    p1, _, _, _, p5, p6, p7, p8 = ledger.add_entries([f"entry{i}".encode() for i in range(1, 9)])
    assert (cursor.entries_to_read, cursor.backlog) == (8, 8)
    cursor.ack(p8)
    assert (cursor.entries_to_read, cursor.backlog) == (7, 7)
    cursor.ack(p1)
    assert (cursor.entries_to_read, cursor.backlog) == (6, 6)
    for p in (p7, p6, p5):
        cursor.ack(p)
    assert (cursor.entries_to_read, cursor.backlog) == (3, 3)


def test_mark_delete_twice(factory):
    # ManagedCursorTest.testMarkDeleteTwice
    ledger = factory(max_entries_per_ledger=2)
    cursor = ledger.open_cursor("c1")
    p1 = ledger.add_entry(b"entry1")
    cursor.mark_delete(p1)
    cursor.mark_delete(p1)
    assert cursor.mark_delete_position == p1


def test_skip_entries(factory):
    # ManagedCursorTest.testSkipEntries
    ledger = factory(max_entries_per_ledger=2)
    c1 = ledger.open_cursor("c1")
    pos = c1.read_position
    c1.skip(1, individually_acked="exclude")
    assert c1.read_position == pos
    ledger.add_entry(b"dummy-entry-1")
    pos = ledger.add_entry(b"dummy-entry-2")
    assert len(ledger.ledgers) == 2, "the full ledger and the one created when it closed"
    c1.skip(1, individually_acked="exclude")
    assert c1.entries_to_read == 1
    c1.skip(1, individually_acked="exclude")
    assert c1.entries_to_read == 0
    current = ledger.ledgers[-1][0]
    assert c1.read_position == P(current, 0)
    assert c1.mark_delete_position == pos
    for _ in range(6):
        pos = ledger.add_entry(b"dummy-entry")
    c1.skip(5, individually_acked="exclude")
    assert c1.entries_to_read == 1
    c1.skip(10, individually_acked="exclude")
    assert c1.entries_to_read == 0
    assert not c1.has_more_entries()
    assert c1.read_position.entry_id == 0
    assert c1.mark_delete_position >= pos


def test_skip_entries_with_individual_deleted_messages(factory):
    # ManagedCursorTest.testSkipEntriesWithIndividualDeletedMessages
    ledger = factory("testSkipEntriesWithIndividualDeletedMessages", max_entries_per_ledger=5)
    c1 = ledger.open_cursor("c1")
    _pos1, pos2, _pos3, pos4, pos5 = ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 6)])
    assert ledger.ledgers[-1][0] > pos5.ledger_id
    c1.ack(pos2)
    c1.ack(pos4)
    c1.skip(3, individually_acked="exclude")
    assert c1.entries_to_read == 0
    assert c1.read_position == P(pos5.ledger_id + 1, 0)
    assert c1.mark_delete_position == pos5
    _pos6, pos7, _pos8, pos9, pos10 = ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(1, 6)])
    assert ledger.ledgers[-1][0] > pos10.ledger_id
    c1.ack(pos7)
    c1.ack(pos9)
    c1.skip(4, individually_acked="include")
    assert c1.entries_to_read == 1
    assert c1.read_position == pos10
    assert c1.mark_delete_position == pos9


def test_skip_rejects_an_unknown_mode(factory):
    # ManagedCursor.IndividualDeletedEntries has two values.
    c = factory().open_cursor("c1")
    with pytest.raises(lc.InvalidArgumentError, match="individually_acked"):
        c.skip(1, individually_acked="all")  # type: ignore[arg-type]


def test_clear_backlog(factory):
    # ManagedCursorTest.testClearBacklog (the reopen half needs durable cursors: left out)
    ledger = factory(max_entries_per_ledger=1)
    c1 = ledger.open_cursor("c1")
    ledger.add_entry(b"dummy-entry-1")
    c2 = ledger.open_cursor("c2")
    ledger.add_entry(b"dummy-entry-2")
    c3 = ledger.open_cursor("c3")
    ledger.add_entry(b"dummy-entry-3")
    assert (c1.backlog, c1.entries_to_read, c1.has_more_entries()) == (3, 3, True)
    c1.clear_backlog()
    c3.clear_backlog()
    assert (c1.backlog, c1.entries_to_read, c1.has_more_entries()) == (0, 0, False)
    assert (c2.backlog, c2.entries_to_read, c2.has_more_entries()) == (2, 2, True)
    assert (c3.backlog, c3.entries_to_read, c3.has_more_entries()) == (0, 0, False)


def test_delete_single_message_twice(factory):
    # ManagedCursorTest.deleteSingleMessageTwice
    ledger = factory()
    c1 = ledger.open_cursor("c1")
    p1, p2, p3, p4 = ledger.add_entries([f"entry-{i}".encode() for i in range(1, 5)])
    assert (c1.backlog, c1.entries_to_read) == (4, 4)
    for p, after, left in [(p1, p2, 3), (p2, p3, 2), (p3, p4, 1)]:
        for _ in range(2):
            c1.ack(p)
            assert (c1.backlog, c1.entries_to_read) == (left, left)
            assert (c1.mark_delete_position, c1.read_position) == (p, after)
    for _ in range(2):
        c1.ack(p4)
        assert (c1.backlog, c1.entries_to_read) == (0, 0)
        assert (c1.mark_delete_position, c1.read_position) == (p4, P(p4.ledger_id, p4.entry_id + 1))


def test_has_backlog_accounts_for_individually_deleted_messages(factory):
    # ManagedCursorTest.hasBacklogAccountsForIndividuallyDeletedMessages (hasBacklog is backlog > 0)
    ledger = factory(max_entries_per_ledger=2)
    c1 = ledger.open_cursor("c1")
    p1, p2, p3 = ledger.add_entries([b"entry-1", b"entry-2", b"entry-3"])
    assert c1.backlog == 3
    c1.ack(p1)
    c1.ack(p3)
    assert c1.backlog == 1
    c1.ack(p2)
    assert c1.backlog == 0


def test_has_backlog_returns_false_for_empty_and_caught_up_cursor(factory):
    # ManagedCursorTest.hasBacklogReturnsFalseForEmptyAndCaughtUpCursor
    ledger = factory()
    c1 = ledger.open_cursor("c1")
    assert c1.backlog == 0
    p1 = ledger.add_entry(b"entry-1")
    assert c1.backlog == 1
    c1.mark_delete(p1)
    assert c1.backlog == 0


def test_has_backlog_tracks_entries_across_ledger_rollovers(factory):
    # ManagedCursorTest.hasBacklogTracksEntriesAcrossLedgerRollovers
    ledger = factory(max_entries_per_ledger=1)
    c1 = ledger.open_cursor("c1")
    p1, p2, p3 = ledger.add_entries([b"entry-1", b"entry-2", b"entry-3"])
    assert len({p.ledger_id for p in (p1, p2, p3)}) == 3
    c1.mark_delete(p1)
    c1.ack(p3)
    assert c1.backlog == 1
    c1.ack(p2)
    assert c1.backlog == 0
    assert c1.mark_delete_position == p3


def test_has_backlog_matches_backlog_counts_after_reset_cursor(factory):
    # ManagedCursorTest.hasBacklogMatchesBacklogCountsAfterResetCursor
    ledger = factory(max_entries_per_ledger=2)
    c1 = ledger.open_cursor("c1")
    p1, p2, p3, p4 = ledger.add_entries([f"entry-{i}".encode() for i in range(1, 5)])
    c1.mark_delete(p4)
    assert c1.backlog == 0
    c1.reset(p2)
    assert c1.backlog == 3
    c1.ack(p3)
    assert c1.backlog == 2
    c1.ack(p2)
    assert c1.backlog == 1
    c1.ack(p4)
    assert c1.backlog == 0
    c1.reset(p1)
    assert c1.backlog == 4


def test_individually_deleted_messages(factory):
    # ManagedCursorTest.testIndividuallyDeletedMessages, ManagedCursorTest.testIndividuallyDeletedMessages1,
    # ManagedCursorTest.testIndividuallyDeletedMessages2, ManagedCursorTest.testIndividuallyDeletedMessages3:
    # acknowledgements that the mark-delete position reaches leave no ranges behind.
    for acks, mark in [((1, 2), 3), ((1,), 3), ((1, 2, 0), None), ((1, 2), 0)]:
        ledger = factory(f"testIndividuallyDeletedMessages-{acks}-{mark}")
        c1 = ledger.open_cursor("c1")
        ledger.add_entries([f"entry-{i}".encode() for i in range(5)])
        entries = c1.read_entries(4)
        for i in acks:
            c1.ack(entries[i].position)
        if mark is not None:
            c1.mark_delete(entries[mark].position)
        data(entries)
        assert c1.individually_acked == []


def test_individually_acked_ranges(factory):
    # ManagedCursorImpl.getIndividuallyDeletedMessagesSet: ranges past the mark-delete position.
    # Pulsar prints them open-closed, "[(L:0..L:2]]"; ours are (first, last), both inclusive.
    ledger = factory(max_entries_per_ledger=4)
    c1 = ledger.open_cursor("c1")
    ps = ledger.add_entries([f"e{i}".encode() for i in range(8)])
    for i in (1, 2, 5, 7):
        c1.ack(ps[i])
    assert c1.individually_acked == [(ps[1], ps[2]), (ps[5], ps[5]), (ps[7], ps[7])]
    c1.ack(ps[0])
    assert c1.mark_delete_position == ps[2]
    assert c1.individually_acked == [(ps[5], ps[5]), (ps[7], ps[7])]


def test_get_last_individual_deleted_range(factory):
    # ManagedCursorTest.testGetLastIndividualDeletedRange
    ledger = factory("test_last_individual_deleted")
    c1 = ledger.open_cursor("c1")
    md = c1.mark_delete_position
    ledger.add_entries([f"entry{i}".encode() for i in range(10)])
    at = [P(md.ledger_id, md.entry_id + k) for k in (1, 2, 5, 6, 8)]
    for p in at[:4]:
        c1.ack(p)
    assert c1.individually_acked[-1] == (at[2], at[3])
    c1.ack(at[4])
    assert c1.individually_acked[-1] == (at[4], at[4])


def test_replay_entries(factory):
    # ManagedCursorTest.testReplayEntries: replaying a position with no entry fails the read.
    ledger = factory()
    c1 = ledger.open_cursor("c1")
    p1, p2, p3, _ = ledger.add_entries([b"entry1", b"entry2", b"entry3", b"entry4"])
    assert c1.read_replay(10) == []
    c1.add_to_replay([p1, p3], reason="nack")
    assert sorted(data(c1.read_replay(10))) == [b"entry1", b"entry3"]
    invalid = P(100, 100)
    c1.add_to_replay([p1, p3, invalid], reason="nack")
    with pytest.raises(lc.NotFoundError, match="100:100"):
        c1.read_replay(10)
    assert c1.replay_queue == [p1, p3], "the position with no entry left the queue; the others wait"
    c1.mark_delete(p2)
    assert data(c1.read_replay(10)) == [b"entry3"]


def test_replay_past_the_end_fails_naming_the_position(factory):
    # ManagedLedgerImpl.asyncReadEntry of a position past the last entry fails the replay read.
    ledger = factory()
    c1 = ledger.open_cursor("c1")
    ps = ledger.add_entries([b"a", b"b"])
    past = P(ps[1].ledger_id, 7)
    c1.add_to_replay([ps[0], past])
    with pytest.raises(lc.NotFoundError, match=f"{past.ledger_id}:7.*past the ledger's last entry"):
        c1.read_replay(10)
    assert data(c1.read_replay(10)) == [b"a"]


def test_out_of_order_acks(factory):
    # ManagedCursorTest.outOfOrderAcks
    ledger = factory("outOfOrderAcks")
    c1 = ledger.open_cursor("c1")
    positions = ledger.add_entries([b"entry"] * 10)
    assert c1.backlog == 10
    for k, i in enumerate((3, 2, 1, 0), start=1):
        c1.ack(positions[i])
        assert c1.backlog == 10 - k


def test_random_order_acks(factory):
    # ManagedCursorTest.randomOrderAcks
    ledger = factory("outOfOrderAcks")
    c1 = ledger.open_cursor("c1")
    positions = ledger.add_entries([b"entry"] * 10)
    random.Random(7).shuffle(positions)
    to_delete = 10
    for p in positions:
        assert c1.backlog == to_delete
        c1.ack(p)
        to_delete -= 1
        assert c1.backlog == to_delete


def test_invalid_mark_delete(factory):
    # ManagedCursorTest.testInvalidMarkDelete
    ledger = factory()
    cursor = ledger.open_cursor("c1")
    read_position, mark_delete = cursor.read_position, cursor.mark_delete_position
    ledger.add_entries([f"dummy-entry-{i}".encode() for i in range(20)])
    position = P(100, 100)
    with pytest.raises(lc.InvalidArgumentError, match="past the last entry"):
        cursor.mark_delete(position)
    assert (cursor.read_position, cursor.mark_delete_position) == (read_position, mark_delete)
    with pytest.raises(lc.InvalidArgumentError, match="past the last entry"):
        cursor.ack(position)
    assert (cursor.read_position, cursor.mark_delete_position) == (read_position, mark_delete)


def test_open_cursor_with_null_initial_position(factory):
    # ManagedCursorTest.testOpenCursorWithNullInitialPosition: latest, at the last confirmed entry.
    ledger = factory("testOpenCursorWithNullInitialPosition")
    ps = ledger.add_entries([bytes([i]) for i in range(1, 6)])
    cursor = ledger.open_cursor("c_testOpenCursorWithNullInitialPosition", None)
    assert cursor.mark_delete_position == ps[-1] == ledger.last_position


def test_close_cursor(factory):
    # ManagedCursorTest.testCloseCursor (the cursor ledger it closes is Pulsar's persistence)
    ledger = factory()
    c1 = ledger.open_cursor("c1")
    ledger.add_entries([bytes([i]) for i in range(1, 6)])
    rp = c1.read_position
    c1.ack(rp)
    c1.ack(P(rp.ledger_id, rp.entry_id + 3))
    assert c1.backlog == 3


def test_read_entries_with_max_count_beyond_what_is_there(factory):
    # Issue 59: a read asking for far more than there is costs only what is there (n = 2**31
    # aborted on a 32 GiB allocation).
    ledger = factory("testReadEntriesWithSkip")
    cursor = ledger.open_cursor("c", start="earliest")
    ledger.add_entries([bytes(16)] * 20)
    assert len(cursor.read_data(2**63)) == 20
    assert cursor.read_position.entry_id == 20


def test_has_backlog_skips_deleted_ranges_through_last_position(factory):
    # ManagedCursorTest.hasBacklogSkipsDeletedRangesThroughLastPosition (Pulsar adds the range to the
    # set directly; ours acknowledges the entries)
    ledger = factory(max_entries_per_ledger=10)
    c1 = ledger.open_cursor("c1")
    p1, p2, p3 = ledger.add_entries([b"entry-1", b"entry-2", b"entry-3"])
    c1.mark_delete(p1)
    c1.ack(p3)
    c1.ack(p2)
    assert c1.backlog == 0
    assert c1.mark_delete_position == p3


def test_has_backlog_matches_backlog_counts_through_mixed_acknowledgements(factory):
    # ManagedCursorTest.hasBacklogMatchesBacklogCountsThroughMixedAcknowledgements
    ledger = factory(max_entries_per_ledger=2)
    c1 = ledger.open_cursor("c1")
    assert c1.backlog == 0
    p1, p2, p3, p4, p5, p6 = ledger.add_entries([f"entry-{i}".encode() for i in range(1, 7)])
    assert c1.backlog == 6
    for p in (p2, p4, p6):
        c1.ack(p)
    assert c1.backlog == 3
    c1.mark_delete(p1)
    assert c1.backlog == 2 and c1.mark_delete_position == p2
    c1.ack(p5)
    assert c1.backlog == 1
    c1.ack(p3)
    assert c1.backlog == 0 and c1.individually_acked == []


def test_delete_messages_check_mark_delete(factory):
    # ManagedCursorTest.deleteMessagesCheckhMarkDelete
    ledger = factory()
    c1 = ledger.open_cursor("c1")
    total = 1000
    positions = ledger.add_entries([f"entry-{i}".encode() for i in range(total)])
    assert c1.entries_to_read == total
    deleted = 0
    for i in range(0, total, 3):
        c1.ack(positions[i])
        deleted += 1
    assert c1.backlog == c1.entries_to_read == total - deleted
    assert (c1.mark_delete_position, c1.read_position) == (positions[0], positions[1])
    for i in range(total // 2):
        if i % 3:
            c1.ack(positions[i])
            deleted += 1
    mark = total // 2 - 1
    assert c1.backlog == c1.entries_to_read == total - deleted
    assert (c1.mark_delete_position, c1.read_position) == (positions[mark], positions[mark + 1])


def test_always_inactive(factory):
    # ManagedCursorTest.testAlwaysInactive, as far as ours goes: a cursor without consumers
    # (active=False) does not count as active; Pulsar's setAlwaysInactive has no counterpart.
    ledger = factory("testAlwaysInactive")
    cursor = ledger.open_cursor("c1")
    assert cursor.active
    cursor.active = False
    assert not cursor.active
