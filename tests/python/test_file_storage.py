"""FileStorage's options and guarantees from Python: the directory lock (also across processes),
create=False, read-only opens, the sync policy argument, and add_entry after remove_cache."""

import os
import struct
import subprocess
import sys
import textwrap
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledgercache as lc

TOPIC = "persistent://t/n/s"


def fresh_manager():
    return lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=1 << 20), clock=lc.ManualClock())


def test_one_writer_per_directory(tmp_path):
    store = lc.FileStorage(tmp_path)
    with pytest.raises(lc.StorageError, match=f"{tmp_path}.*process {os.getpid()}"):
        lc.FileStorage(tmp_path)
    with pytest.raises(lc.StorageError, match="locked"):
        lc.FileStorage(tmp_path, read_only=True)
    del store
    readers = [lc.FileStorage(tmp_path, read_only=True) for _ in range(2)]
    with pytest.raises(lc.StorageError, match="open for reading"):
        lc.FileStorage(tmp_path)
    assert all(r.read_only for r in readers)


def test_close_releases_the_lock_at_once(tmp_path):
    with lc.FileStorage(tmp_path) as store:
        ml = lc.ManagedLedger(TOPIC, fresh_manager(), store)
        ml.add_entry(b"a")
    assert store.closed
    with pytest.raises(lc.ClosedError):
        ml.add_entry(b"b")
    with pytest.raises(lc.ClosedError):
        store.ledgers(TOPIC)
    again = lc.FileStorage(tmp_path)  # while `ml` and `store` are still referenced
    assert again.ledgers(TOPIC)[0][1] == 1


def test_a_second_process_is_refused_while_a_writer_holds_the_store(tmp_path):
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, ledgercache as lc
            s = lc.FileStorage({str(tmp_path)!r})
            lc.ManagedLedger("t", lc.EntryCacheManager(lc.CacheConfig()), s).add_entry(b"child")
            print("locked", flush=True)
            sys.stdin.read()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(lc.StorageError, match=f"{tmp_path}.*process {child.pid}"):
            lc.FileStorage(tmp_path)
    finally:
        child.stdin.close()
        assert child.wait(timeout=60) == 0
        child.stdout.close()  # an open pipe is a ResourceWarning, an error in the tests
    ml = lc.ManagedLedger("t", fresh_manager(), lc.FileStorage(tmp_path))
    assert ml.open_cursor("c", start="earliest").read_data(5) == [b"child"]


def test_create_false_refuses_a_missing_directory(tmp_path):
    missing = tmp_path / "elsewhere"
    for read_only in (False, True):
        with pytest.raises(lc.StorageError, match=str(missing)):
            lc.FileStorage(missing, create=False, read_only=read_only)
    assert not missing.exists()
    lc.FileStorage(missing)  # the default still creates it
    assert missing.is_dir()


def test_read_only_store_reads_and_refuses_writes(tmp_path):
    ml = lc.ManagedLedger(TOPIC, fresh_manager(), lc.FileStorage(tmp_path, sync="always"))
    ml.add_entries([b"a", b"b"])
    del ml
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.seg")}
    store = lc.FileStorage(tmp_path, create=False, read_only=True)
    ml = lc.ManagedLedger(TOPIC, fresh_manager(), store)
    assert ml.open_cursor("c", start="earliest").read_data(5) == [b"a", b"b"]
    with pytest.raises(lc.UnsupportedError, match="read-only"):
        ml.add_entry(b"c")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.seg")} == before


def test_sync_policy_is_checked(tmp_path):
    assert lc.FileStorage(tmp_path / "a").sync == "never"
    assert lc.FileStorage(tmp_path / "b", sync="always").sync == "always"
    with pytest.raises(ValueError, match="sync"):
        lc.FileStorage(tmp_path / "c", sync="sometimes")


def test_add_entry_after_remove_cache_stores_nothing(tmp_path):
    manager = fresh_manager()
    store = lc.FileStorage(tmp_path)
    ml = lc.ManagedLedger(TOPIC, manager, store)
    first = ml.add_entry(b"kept")
    manager.remove_cache(TOPIC)
    for _ in range(2):  # a retry does not store it either
        with pytest.raises(lc.ClosedError):
            ml.add_entry(b"refused")
    assert store.ledgers(TOPIC) == [(first.ledger_id, 1)]


def test_executor_storage_opens_read_only_without_creating(tmp_path):
    with pytest.raises(lc.StorageError, match="does not exist"):
        lc.spark.executor_storage(tmp_path / "not-shared")
    assert lc.spark.executor_storage(tmp_path).read_only


def test_read_data_delivers_the_entries_before_a_damaged_one(tmp_path):
    ml = lc.ManagedLedger(TOPIC, fresh_manager(), lc.FileStorage(tmp_path))
    ml.add_entries([f"entry-{i}".encode() for i in range(10)])
    del ml
    (seg,) = list(tmp_path.rglob("*.seg"))
    data = bytearray(seg.read_bytes())
    record = 12 + len(b"entry-0")
    data[8 + 6 * record + 12] ^= 0xFF  # the first payload byte of entry 6
    seg.write_bytes(bytes(data))
    ml = lc.ManagedLedger(TOPIC, lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=0)), lc.FileStorage(tmp_path))
    cursor = ml.open_cursor("c", start="earliest")
    assert cursor.read_data(100) == [f"entry-{i}".encode() for i in range(6)]
    with pytest.raises(lc.CorruptSegmentError, match=f"{seg}.*payload checksum.* at byte {8 + 6 * record}"):
        cursor.read_data(100)


@settings(max_examples=40, deadline=None, derandomize=True)  # fixed cases in CI
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.binary(max_size=200)),
            st.tuples(st.just("crash"), st.binary(min_size=1, max_size=40)),
            st.tuples(st.just("garbage"), st.binary(min_size=1, max_size=40)),
            st.tuples(st.just("reopen"), st.just(b"")),
        ),
        max_size=30,
    )
)
def test_random_adds_crashes_and_reopens_keep_every_acknowledged_entry(tmp_path_factory, ops):
    """A crash leaves part of a record after the last one (a torn write), which reopening cuts off;
    garbage there is damage, reported and kept. Neither loses or alters an acknowledged entry."""
    directory = tmp_path_factory.mktemp("store")

    def open_ledger():
        store = lc.FileStorage(directory)
        return lc.ManagedLedger(TOPIC, fresh_manager(), store, max_entries_per_ledger=4, min_rollover_ms=0), store

    (ml, store), acked = open_ledger(), []
    for op, data in ops:
        if op == "add":
            try:
                ml.add_entry(data)
                acked.append(data)
            except lc.CorruptSegmentError:
                assert store.damaged(), "appends are refused only after damage"
        else:
            del ml, store
            torn = b""
            if op != "reopen" and acked:
                last = max(directory.rglob("*.seg"), key=lambda p: int(p.stem))
                if op == "crash":  # what a killed writer leaves: a prefix of the record it wrote
                    head = struct.pack("<II", len(data), zlib.crc32(data))
                    record = head + struct.pack("<I", zlib.crc32(head)) + data
                    data = torn = record[: len(data) * 7 % len(record)]
                with open(last, "ab") as f:
                    f.write(data)
            ml, store = open_ledger()
            if op == "crash" and not store.damaged():
                assert bool(store.recovered) == bool(torn), "a torn write is cut off, nothing else is"
        got = ml.open_cursor(f"c{len(acked)}-{op}", start="earliest")
        read = []
        while True:
            try:
                chunk = got.read_data(100)
            except lc.CorruptSegmentError:
                break
            if not chunk:
                break
            read.extend(chunk)
        got.close()
        del got  # a cursor keeps its ledger, and so the store's lock, alive
        assert read[: len(acked)] == acked


def test_a_damaged_length_is_reported_to_the_reader_not_dropped(tmp_path):
    ml = lc.ManagedLedger(
        TOPIC, fresh_manager(), lc.FileStorage(tmp_path), max_entries_per_ledger=10, min_rollover_ms=0
    )
    ml.add_entries([f"entry-{i}".encode() for i in range(15)])  # ledgers of 10 and 5 entries
    del ml
    first = min(tmp_path.rglob("*.seg"), key=lambda p: int(p.stem))
    data = bytearray(first.read_bytes())
    record = 12 + len(b"entry-0")
    data[8 + 4 * record] ^= 0x01  # a length byte of entry 4
    first.write_bytes(bytes(data))
    store = lc.FileStorage(tmp_path)
    assert store.recovered == []
    ((_ledger_id, path, offset, reason),) = store.damaged()
    assert (path, offset) == (first, 8 + 4 * record) and "header checksum" in reason
    ml = lc.ManagedLedger(TOPIC, lc.EntryCacheManager(lc.CacheConfig(cache_size_bytes=0)), store)
    cursor = ml.open_cursor("c", start="earliest")
    assert cursor.read_data(100) == [f"entry-{i}".encode() for i in range(4)]
    with pytest.raises(lc.CorruptSegmentError, match=f"{first}.*at byte {8 + 4 * record}"):
        cursor.read_data(100)
    with pytest.raises(lc.CorruptSegmentError):
        cursor.read_data(100)  # it does not skip the damage by itself


def test_a_full_disk_fails_the_append_and_leaves_the_store_as_it_was(tmp_path):
    # RLIMIT_FSIZE stands in for a full disk: a write past it fails with EFBIG (SIGXFSZ ignored),
    # part-way through a record when the limit falls inside one.
    limit = 40_000
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import resource, signal, ledgercache as lc
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
            store = lc.FileStorage({str(tmp_path)!r})
            ml = lc.ManagedLedger({TOPIC!r}, lc.EntryCacheManager(lc.CacheConfig()), store)
            acked = 0
            for i in range(1000):
                try:
                    ml.add_entry(bytes([i % 251]) * 3000)
                except lc.StorageError as e:
                    print("refused", acked, e, flush=True)
                    break
                acked += 1
            # Later appends fail the same way, never half-written.
            for _ in range(3):
                try:
                    ml.add_entry(b"x" * 3000)
                    print("unexpected success")
                except lc.StorageError:
                    pass
        """),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith("refused "), child.stdout
    acked = int(child.stdout.split()[1])
    assert 0 < acked < 1000 and "unexpected" not in child.stdout
    store = lc.FileStorage(tmp_path)
    assert store.recovered == [], "a failed append was truncated back at once: nothing torn to cut at reopen"
    assert sum(n for _, n in store.ledgers(TOPIC)) == acked
    assert all(os.path.getsize(p) <= limit for p in tmp_path.rglob("*") if p.is_file())
    ml = lc.ManagedLedger(TOPIC, fresh_manager(), store)
    cursor = ml.open_cursor("c", start="earliest")
    got = []
    while len(got) < acked:
        batch = cursor.read_data(100)
        assert batch, f"only {len(got)} of {acked} acknowledged entries readable"
        got += batch
    assert got == [bytes([i % 251]) * 3000 for i in range(acked)]
    ml.add_entry(b"after")  # appends work again once there is room
