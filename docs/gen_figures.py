"""The figures the docs quote, made by the docs build (`make docs` runs this before mkdocs).

For each scenario named below it generates the bundled scenario with seed 1 (as `make demo` does),
replays it in-process through every design at the scenario's own cache sizes
(`lc.workload.SCENARIO_CACHE_SIZES`) and writes a Markdown table of hit ratios and storage reads
a second to OUT_DIR/<scenario>.md, which the pages include (`--8<--`). A page therefore never quotes
a number this build did not compute.

Usage: python docs/gen_figures.py OUT_DIR
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import ledgercache as lc

SCENARIOS = ("shared-overflow", "failover-nacks")


def _size(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{n >> 20} MiB"


def table(scenario: str) -> str:
    sizes = lc.workload.SCENARIO_CACHE_SIZES[scenario]
    designs = lc.designs()
    configs = [lc.CacheConfig(cache_size_bytes=s, strategy=d["name"]) for d in designs for s in sizes]
    trace = lc.workload.generate(scenario, seed=1)
    seconds = (trace["ts_us"][-1].as_py() - trace["ts_us"][0].as_py()) / 1e6
    rows = {(r["strategy"], r["cache_size_bytes"]): r for r in lc.replay(trace, configs).to_pylist()}
    lines = [
        (
            f"Hit ratio (storage reads a second) by cache size; `{scenario}`, seed 1, "
            f"{trace.num_rows:,} events over {seconds:.0f} s, made by this build:"
        ),
        "",
        "| design | " + " | ".join(_size(s) for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for d in designs:
        cells = []
        for s in sizes:
            r = rows[(d["name"], s)]
            cells.append(f"{r['hit_ratio']:.3f} ({r['storage_read_ops'] / seconds:,.0f}/s)")
        lines.append(f"| {d['label']} (`{d['name']}`) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        started = time.monotonic()
        (out / f"{scenario}.md").write_text(table(scenario))
        print(f"docs figures: {scenario} in {time.monotonic() - started:.1f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
