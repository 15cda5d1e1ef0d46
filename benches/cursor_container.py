"""The active cursor container through Python: a seek and a count per op (random forward seeks of
1..99 entries, as benches/cursor_container.rs), at 100 and 100,000 cursors, by name. Prints the
per-op cost at each size and the 100,000/100 ratio beside the goal (<= 2: flat in the number of
cursors), and, as the anchor, the same loop over a `dict` (Python's own cost of touching 100,000
names). Run: .venv/bin/python benches/cursor_container.py"""

from __future__ import annotations

import random
import time
from typing import Callable

import ledgercache as lc

OPS = 200_000
GOAL_RATIO = 2.0


def workload(n: int) -> tuple[list[str], list[tuple[str, lc.Position]]]:
    """The names, and the ops: which cursor moves where, made before the clock starts."""
    rng = random.Random(1)
    names = [f"subscription-{i}" for i in range(n)]
    at = list(range(n))
    ops = []
    for _ in range(OPS):
        i = rng.randrange(n)
        at[i] += rng.randrange(1, 100)
        ops.append((names[i], lc.Position(0, at[i])))
    return names, ops


def per_op_ns(n: int, make: Callable[[list[str]], tuple[Callable, Callable]], rounds: int = 5) -> float:
    names, ops = workload(n)
    best = float("inf")
    for _ in range(rounds):
        update, count = make(names)
        start = time.perf_counter()
        for name, position in ops:
            update(name, position)
            count(name)
        best = min(best, time.perf_counter() - start)
    return best / OPS * 1e9


def container(names: list[str]) -> tuple[Callable, Callable]:
    c = lc.ActiveCursorContainer()
    for i, name in enumerate(names):
        c.add(name, lc.Position(0, i))
    c.count_at_or_before(names[0])
    return c.update, c.count_at_or_before


def plain_dict(names: list[str]) -> tuple[Callable, Callable]:
    d = {name: lc.Position(0, i) for i, name in enumerate(names)}
    return d.__setitem__, d.get


def main() -> None:
    small, large = per_op_ns(100, container), per_op_ns(100_000, container)
    d_small, d_large = per_op_ns(100, plain_dict), per_op_ns(100_000, plain_dict)
    ratio = large / small
    print(
        f"cursor container from Python, seek + count by name: {small:.0f} ns/op at 100 cursors, "
        f"{large:.0f} at 100,000: ratio {ratio:.2f} (goal <= {GOAL_RATIO}: "
        f"{'met' if ratio <= GOAL_RATIO else 'NOT met'}); anchor, the same loop over a dict: "
        f"{d_small:.0f} and {d_large:.0f} ns/op, ratio {d_large / d_small:.2f}"
    )


if __name__ == "__main__":
    main()
