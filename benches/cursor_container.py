"""The active cursor container through Python: a seek and a count per op (random forward seeks of
1..99 entries, as benches/cursor_container.rs), at 100 and 100,000 cursors, through cursor handles
(`CursorHandle.update` / `count_at_or_before`: the name looked up once) and by name. Prints the
per-op cost at each size and the 100,000/100 ratio of the handle path beside the goal (<= 2: flat
in the number of cursors), the same for the by-name path, and, as the anchor, the same loop over a
`dict` (Python's own cost of touching 100,000 names). Run: .venv/bin/python benches/cursor_container.py"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import ledgercache as lc

OPS = 200_000
GOAL_RATIO = 2.0

# Runs the ops on a fresh container (or dict) of the given names; returns the time the ops took.
Run = Callable[[list[str], list[tuple[str, lc.Position]]], float]


def workload(n: int) -> tuple[list[str], list[tuple[str, lc.Position]]]:
    """The names, and the ops: which cursor moves where, made before the clock starts."""
    rng = random.Random(1)
    names = [f"subscription-{i}" for i in range(n)]
    at = list(range(n))
    moves = []
    for _ in range(OPS):
        i = rng.randrange(n)
        at[i] += rng.randrange(1, 100)
        moves.append((i, at[i]))
    # The positions are made in a pass of their own, in the order the ops use them, as a caller
    # makes each op's position when it comes. Made in the loop above, each would take the memory
    # of the number it replaces in `at`, scattered over all the cursors' numbers: the ops would
    # then read their positions in random order among 100,000 cursors (not among 100), a cost of
    # this bench's setup that grows with the cursors and is not the container's.
    ops = [(names[i], lc.Position(0, entry)) for i, entry in moves]
    return names, ops


def per_op_ns(n: int, run: Run, rounds: int = 5) -> float:
    names, ops = workload(n)
    return min(run(names, ops) for _ in range(rounds)) / OPS * 1e9


def container(names: list[str]) -> lc.ActiveCursorContainer:
    c = lc.ActiveCursorContainer()
    for i, name in enumerate(names):
        c.add(name, lc.Position(0, i))
    c.count_at_or_before(names[0])
    return c


def timed_by_name(update: Callable, count: Callable, ops: list[tuple[str, lc.Position]]) -> float:
    """Seconds for the ops through a by-name `update` and `count` (the container's or a dict's)."""
    start = time.perf_counter()
    for name, position in ops:
        update(name, position)
        count(name)
    return time.perf_counter() - start


def by_name(names: list[str], ops: list[tuple[str, lc.Position]]) -> float:
    c = container(names)
    return timed_by_name(c.update, c.count_at_or_before, ops)


def by_handle(names: list[str], ops: list[tuple[str, lc.Position]]) -> float:
    c = container(names)
    # A caller keeps each cursor's handle with the cursor: the ops carry handles, not names.
    handles = {name: c.cursor(name) for name in names}
    handle_ops = [(handles[name], position) for name, position in ops]
    start = time.perf_counter()
    for handle, position in handle_ops:
        handle.update(position)
        handle.count_at_or_before()
    return time.perf_counter() - start


def plain_dict(names: list[str], ops: list[tuple[str, lc.Position]]) -> float:
    d = {name: lc.Position(0, i) for i, name in enumerate(names)}
    return timed_by_name(d.__setitem__, d.get, ops)


def main() -> None:
    small, large = per_op_ns(100, by_handle), per_op_ns(100_000, by_handle)
    n_small, n_large = per_op_ns(100, by_name), per_op_ns(100_000, by_name)
    d_small, d_large = per_op_ns(100, plain_dict), per_op_ns(100_000, plain_dict)
    ratio = large / small
    print(
        f"cursor container from Python, seek + count through CursorHandle: {small:.0f} ns/op at "
        f"100 cursors, {large:.0f} at 100,000: ratio {ratio:.2f} (goal <= {GOAL_RATIO}: "
        f"{'met' if ratio <= GOAL_RATIO else 'NOT met'})"
    )
    print(f"  by name: {n_small:.0f} and {n_large:.0f} ns/op, ratio {n_large / n_small:.2f}")
    print(
        f"  anchor, the same loop over a dict by name: {d_small:.0f} and {d_large:.0f} ns/op, "
        f"ratio {d_large / d_small:.2f}"
    )


if __name__ == "__main__":
    main()
