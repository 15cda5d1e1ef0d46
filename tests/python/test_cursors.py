"""ActiveCursorContainer and SlowestCursorHeap from Python, with a model-based test."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledgercache as lc

P = lc.Position


def test_counts_and_tail_moves():
    c = lc.ActiveCursorContainer()
    for i, e in enumerate([1, 2, 3, 4, 5, 5], start=1):
        c.add(f"c{i}", P(0, e))
    c.update("c6", P(0, 9))
    assert [c.count_at_or_before(f"c{i}") for i in range(1, 7)] == [1, 2, 3, 4, 5, 6]
    c2 = lc.ActiveCursorContainer()
    for i in range(1, 7):
        c2.add(f"c{i}", P(0, i))
    c2.update("c6", P(0, 5))
    assert [c2.count_at_or_before(f"c{i}") for i in range(1, 7)] == [1, 2, 3, 4, 6, 6]


def test_untracked_unknown_and_errors():
    c = lc.ActiveCursorContainer()
    c.add("a", P(1, 1))
    c.add("b", None)
    assert len(c) == 2 and "b" in c and "z" not in c
    assert c.count_at_or_before("b") == 0
    assert c.count_at_or_before("z") == 0
    assert c.slowest_position() == P(1, 1)
    with pytest.raises(lc.UnknownCursorError):
        c.update("z", P(1, 1))
    with pytest.raises(KeyError):
        c.remove("z")
    with pytest.raises(TypeError):
        c.add("a", (1, 2))
    c.remove("a")
    assert c.slowest_position() is None and len(c) == 1


def test_handles_skip_the_name_and_go_stale_on_removal():
    c = lc.ActiveCursorContainer()
    a = c.add("a", P(0, 5))
    b = c.add("b", P(0, 1))
    assert isinstance(a, lc.CursorHandle) and a.name == "a" and repr(a) == "CursorHandle('a')"
    assert a.count_at_or_before() == 2 and b.count_at_or_before() == 1
    b.update(P(0, 9))
    assert a.count_at_or_before() == 1 and c.count_at_or_before("b") == 2
    # A handle by name, and `add` of an existing name: the same cursor.
    assert c.cursor("b").count_at_or_before() == 2
    assert c.add("a", P(0, 10)).count_at_or_before() == 2 and c.position_of("a") == P(0, 10)
    b.update(None)
    assert b.count_at_or_before() == 0 and a.count_at_or_before() == 1
    with pytest.raises(lc.UnknownCursorError):
        c.cursor("z")
    # Removed: the handle is stale, even once the name is back (a new cursor).
    c.remove("a")
    assert a.count_at_or_before() == 0
    with pytest.raises(lc.UnknownCursorError, match='"a" was removed'):
        a.update(P(0, 1))
    fresh = c.add("a", P(0, 3))
    assert a.count_at_or_before() == 0 and fresh.count_at_or_before() == 1
    with pytest.raises(lc.UnknownCursorError):
        a.update(P(0, 1))
    assert c.position_of("a") == P(0, 3)
    with pytest.raises(TypeError):
        a.update((0, 1))
    with pytest.raises(TypeError):
        lc.CursorHandle()
    # A handle keeps its container alive.
    h = lc.ActiveCursorContainer().add("x", P(1, 1))
    assert h.count_at_or_before() == 1


names = st.sampled_from([f"c{i}" for i in range(8)])
positions = st.one_of(st.none(), st.builds(P, st.integers(0, 2), st.integers(0, 6)))
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), names, positions),
        st.tuples(st.just("update"), names, positions),
        st.tuples(st.just("remove"), names, st.none()),
        st.tuples(st.just("count"), names, st.none()),
        st.tuples(st.just("slowest"), st.none(), st.none()),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_container_matches_a_sorted_list(ops):
    c = lc.ActiveCursorContainer()
    heap = lc.SlowestCursorHeap()
    model: dict[str, lc.Position | None] = {}
    handles: dict[str, lc.CursorHandle] = {}
    for op, name, pos in ops:
        if op == "add":
            handles[name] = c.add(name, pos)
            heap.add(name, pos)
            model[name] = pos
        elif op == "update":
            if name in model:
                # Half the cursors move through their handle, half by name.
                if name[-1] in "02468":
                    handles[name].update(pos)
                else:
                    c.update(name, pos)
                heap.update(name, pos)
                model[name] = pos
            else:
                with pytest.raises(lc.UnknownCursorError):
                    c.update(name, pos)
        elif op == "remove":
            if name in model:
                c.remove(name)
                heap.remove(name)
                del model[name]
                assert handles.pop(name).count_at_or_before() == 0
        elif op == "count":
            mine = model.get(name)
            expected = 0 if mine is None else sum(1 for p in model.values() if p is not None and p <= mine)
            assert c.count_at_or_before(name) == expected
            if name in model:
                assert c.cursor(name).count_at_or_before() == expected
        tracked = [p for p in model.values() if p is not None]
        slowest = min(tracked) if tracked else None
        if op == "slowest":
            assert c.slowest_position() == slowest
        assert heap.slowest_position() == slowest
        assert len(c) == len(model) == len(heap)
