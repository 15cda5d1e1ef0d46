"""Durable cursors of a FileStorage (issue 59, item 3) from Python: a cursor's mark-delete position
and individually acknowledged entries survive reopening the managed ledger; deleted cursors stay
deleted. The kill -9, truncation and damage tests are in tests/durable_cursors.rs."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledgercache as lc

TOPIC = "persistent://t/n/durable"


def open_ledger(path, **kwargs):
    store = lc.FileStorage(path, **kwargs)
    manager = lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20), clock=lc.ManualClock())
    return store, lc.ManagedLedger(TOPIC, manager, store, max_entries_per_ledger=4)


def texts(cursor, n=100):
    out = []
    for e in cursor.read_entries(n):
        with e:
            out.append(e.data.decode())
    return out


def test_out_of_order_delete_persistence_with_close(tmp_path):
    # ManagedCursorTest.testOutOfOrderDeletePersistenceWithClose
    store, ml = open_ledger(tmp_path)
    c1 = ml.open_cursor("c1")
    added = [ml.add_entry(f"dummy-entry-{i}".encode()) for i in range(20)]
    for i in (2, 5, 7, 8, 9):
        c1.ack(added[i])
    assert c1.backlog == 20 - 5
    store.close()

    store, ml = open_ledger(tmp_path)
    assert ml.cursor_names() == ["c1"]
    c1 = ml.open_cursor("c1")
    assert c1.backlog == 20 - 5
    got = texts(c1, 20)
    assert len(got) == 15
    assert got[:5] == ["dummy-entry-0", "dummy-entry-1", "dummy-entry-3", "dummy-entry-4", "dummy-entry-6"]
    assert texts(c1) == []
    store.close()


def test_clear_backlog_and_mark_delete_survive_and_read_resumes_after_them(tmp_path):
    # ManagedCursorTest.testClearBacklog (the half after the reopen) and cursorPersistence2
    store, ml = open_ledger(tmp_path)
    cleared, marked, _fresh = (ml.open_cursor(n) for n in ("cleared", "marked", "pulsar.dedup"))
    ps = [ml.add_entry(f"e{i}".encode()) for i in range(6)]
    cleared.clear_backlog()
    marked.mark_delete(ps[3])
    store.close()

    store, ml = open_ledger(tmp_path, sync="always")
    assert ml.cursor_names() == ["cleared", "marked", "pulsar.dedup"]
    assert ml.open_cursor("cleared").backlog == 0
    marked = ml.open_cursor("marked", start="earliest")  # a recovered cursor keeps its position
    assert marked.mark_delete_position == ps[3]
    assert marked.read_position == ps[4]
    assert texts(marked) == ["e4", "e5"]
    assert ml.open_cursor("pulsar.dedup").backlog == 6
    store.close()


def test_deleted_cursor_stays_deleted(tmp_path):
    store, ml = open_ledger(tmp_path)
    c = ml.open_cursor("sub")
    ml.add_entry(b"x")
    c.clear_backlog()
    ml.delete_cursor("sub")
    with pytest.raises(lc.NotFoundError, match="sub"):
        ml.delete_cursor("sub")
    store.close()
    store, ml = open_ledger(tmp_path)
    assert ml.cursor_names() == []
    assert ml.open_cursor("sub", start="earliest").backlog == 1
    store.close()


def test_memory_storage_keeps_cursors_in_memory_only():
    store = lc.MemoryStorage()
    manager = lc.EntryCacheManager(lc.CacheConfig(), clock=lc.ManualClock())
    ml = lc.ManagedLedger(TOPIC, manager, store)
    ml.open_cursor("c").mark_delete(ml.add_entry(b"x"))
    again = lc.ManagedLedger(TOPIC, manager, store)
    assert again.cursor_names() == []


@settings(max_examples=25, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["ack", "mark_delete", "reopen", "add"]), st.integers(0, 40)),
        max_size=40,
    )
)
def test_random_acks_and_reopens_keep_exactly_the_acknowledged_entries(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("store")
    store, ml = open_ledger(path)
    c = ml.open_cursor("c", start="earliest")
    added = [ml.add_entry(f"{i}".encode()) for i in range(10)]
    acked: set[int] = set()
    for op, k in ops:
        if op == "add":
            added.append(ml.add_entry(f"{len(added)}".encode()))
        elif op == "reopen":
            store.close()
            store, ml = open_ledger(path)
            c = ml.open_cursor("c")
        elif op == "ack":
            c.ack(added[k % len(added)])
            acked.add(k % len(added))
        elif added[k % len(added)] < c.mark_delete_position:
            # Before the mark-delete position: refused, as Pulsar's markDelete refuses it.
            with pytest.raises(lc.InvalidArgumentError, match="before the mark-delete position"):
                c.mark_delete(added[k % len(added)])
        else:
            c.mark_delete(added[k % len(added)])
            acked.update(range(k % len(added) + 1))
        assert c.backlog == len(added) - len(acked)
    store.close()
    store, ml = open_ledger(path)
    c = ml.open_cursor("c")
    assert c.backlog == len(added) - len(acked)
    assert texts(c, 1000) == [str(i) for i in range(len(added)) if i not in acked]
    store.close()
