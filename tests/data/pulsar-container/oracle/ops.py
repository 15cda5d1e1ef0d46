"""Writes the op sequences the oracles answer (deterministic: fixed seeds, Python's stdlib only).

usage: python3 ops.py OUT_DIR   (writes random-small.ops, random-tailing.ops, random-large.ops,
chm-order.ops)
"""

import random
import sys
from pathlib import Path


def java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def spread(s: str) -> int:
    h = java_hash(s)
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def container_ops(rng, names, positions, n, weights, forward=None):
    """Ops on cursors `names`; `positions()` draws a position, `forward(p)` a move ahead of p."""
    live = {}
    out = []
    kinds = list(weights)
    for _ in range(n):
        kind = rng.choices(kinds, [weights[k] for k in kinds])[0]
        name = rng.choice(names)
        if kind == "add":
            p = positions()
            live[name] = p
            out.append(f"add {name} {p[0]}:{p[1]}")
        elif kind == "update":
            p = forward(live[name]) if forward and name in live and rng.random() < 0.9 else positions()
            if name in live:
                live[name] = p
            out.append(f"update {name} {p[0]}:{p[1]}")
        elif kind == "remove":
            live.pop(name, None)
            out.append(f"remove {name}")
        elif kind == "count":
            out.append(f"count {name}")
        elif kind == "slowest":
            out.append("slowest")
        else:
            out.append("size")
    return out


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(430)
    small = ["a", "b", "c", "sub-1", "sub-2", "x9"]
    ops = container_ops(
        rng, small, lambda: (0, rng.randrange(8)), 3000, dict(add=12, update=40, remove=6, count=45, slowest=5, size=2)
    )
    (out_dir / "random-small.ops").write_text("\n".join(ops) + "\n")

    rng = random.Random(4301)
    tailing = [f"sub-{i}" for i in range(8)]
    ops = [f"add {n} 0:0" for n in tailing]
    # Readers that catch up with the last entry written and wait there together.
    end = [0]

    def publish_and_follow(p):
        if rng.random() < 0.3:
            end[0] += 1
        return (0, min(p[1] + rng.randint(1, 3), end[0]))

    ops += container_ops(
        rng,
        tailing,
        lambda: (0, max(0, end[0] - rng.randrange(40))),
        5000,
        dict(add=3, update=62, remove=3, count=28, slowest=3, size=1),
        forward=publish_and_follow,
    )
    (out_dir / "random-tailing.ops").write_text("\n".join(ops) + "\n")

    rng = random.Random(4302)
    words = ["analytics", "billing", "audit", "x", "sub", "reader", "replica", "backup"]
    large = [f"sub-{i}" for i in range(24)] + words + [f"{w}-{i}" for i, w in enumerate(words)]
    ops = container_ops(
        rng,
        large,
        lambda: (rng.randrange(4), rng.randrange(51)),
        5000,
        dict(add=15, update=45, remove=7, count=25, slowest=6, size=2),
    )
    (out_dir / "random-large.ops").write_text("\n".join(ops) + "\n")

    rng = random.Random(4303)
    keys = [f"sub-{i}" for i in range(200)] + [f"k{i}" for i in range(60)]
    # Twelve keys in one bin of any table up to 512 bins: they make a long bin, then a tree bin.
    colliding, i = [], 0
    target = spread("collide-0") & 511
    while len(colliding) < 12:
        k = f"collide-{i}"
        if spread(k) & 511 == target:
            colliding.append(k)
        i += 1
    keys += colliding
    live, ops, peak = set(), [], 0
    stays = set(colliding)
    for step in range(4000):
        grow = step < 1500 or (2500 <= step < 3200)
        k = rng.choice(colliding) if rng.random() < 0.1 else rng.choice(keys)
        # A colliding key, once put, stays: Java turns a tree bin back into a list on a removal
        # by its red-black tree's shape, which the lab only approximates (java_hash_map.rs).
        if k in live and k not in stays and (not grow or rng.random() < 0.3):
            live.discard(k)
            ops.append(f"remove {k}")
        else:
            live.add(k)
            ops.append(f"put {k}")
            peak = max(peak, len(live))
        if step % 40 == 0 or len(live) in (12, 24, 48, 96, 192):
            ops.append("order")
    ops.append("order")
    header = [
        f"# {sum(o == 'order' for o in ops)} orders; at most {peak} keys (tables of 16 to 512 bins);",
        f"# {len(colliding)} keys share one bin in every table up to 512 bins (a tree bin from 64),",
        "# put and never removed.",
    ]
    (out_dir / "chm-order.ops").write_text("\n".join(header + ops) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
