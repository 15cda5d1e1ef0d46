"""The answer a report opens with, per scenario: which design a broker should run and at what cache
size, PIP-430 against Pulsar 4.0's cache at each size, where each design stops gaining (or the
smallest size that reaches a target hit ratio) and the storage reads each saves a second.

Only designs a broker runs (role ``broker`` in :func:`ledgercache.designs`) are ever recommended;
the proposal, the reference and the bound are shown as what they are."""

from __future__ import annotations

from collections.abc import Sequence

from .report_common import (
    design_info,
    design_label,
    design_order,
    format_mib_rate,
    format_rate,
    format_size,
    is_broker_design,
    md_escape,
)
from .report_html import markdown_table

__all__ = ["PLATEAU", "Rates", "design_points", "recommend", "answer_lines", "overview_lines"]

PLATEAU = 0.01  # a design "stops gaining" at the smallest size within this of its best hit ratio

_KIND = {
    "broker": "broker",
    "proposal": "proposal, not in Pulsar",
    "reference": "reference, no broker runs it",
    "bound": "bound, no cache can beat it",
    "unknown": "not a known design",
}


class Rates:
    """Counts over a run as rates: a second when the run's duration is known, else over the run."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds if seconds and seconds > 0 else None

    def reads(self, n: float) -> str:
        return f"{format_rate(n / self.seconds)} reads/s" if self.seconds else f"{n:,.0f} reads"

    def mib(self, n: float) -> str:
        return format_mib_rate(n / self.seconds) if self.seconds else f"{n / (1 << 20):,.1f} MiB"

    def both(self, reads: float, nbytes: float) -> str:
        return f"{self.reads(reads)} ({self.mib(nbytes)})"


def design_points(rows: Sequence[dict], target: float | None = None) -> list[dict]:
    """Per design (in :func:`ledgercache.designs` order): its runs by size, its best hit ratio,
    ``plateau`` (the run at the smallest size within :data:`PLATEAU` of its best), ``still_gaining``
    (that run is the largest size and the one before was further below) and, with ``target``,
    ``reached`` (the run at the smallest size whose hit ratio reaches it, or None)."""
    out = []
    for s in design_order(r["strategy"] for r in rows):
        runs = sorted((r for r in rows if r["strategy"] == s), key=lambda r: r["cache_size_bytes"])
        best = max(r["hit_ratio"] for r in runs)
        plateau = next(r for r in runs if r["hit_ratio"] >= best - PLATEAU)
        out.append(
            {
                "strategy": s,
                "runs": runs,
                "best": best,
                "plateau": plateau,
                "still_gaining": (
                    len(runs) > 1
                    and plateau is runs[-1]
                    and runs[-2]["hit_ratio"] < best - PLATEAU
                    and best < 1 - PLATEAU / 10
                ),
                "reached": None if target is None else next((r for r in runs if r["hit_ratio"] >= target), None),
            }
        )
    return out


def recommend(points: Sequence[dict], target: float | None = None) -> dict | None:
    """The run to recommend among the designs a broker runs (None when none was run): with
    ``target``, the smallest size that reaches it (the higher hit ratio on a tie), else the design
    with the best hit ratio at the size where it stops gaining. ``reached`` says whether the target
    was met."""
    broker = [p for p in points if is_broker_design(p["strategy"])]
    if not broker:
        return None
    if target is not None:
        hits = [p["reached"] for p in broker if p["reached"] is not None]
        if hits:
            run = min(hits, key=lambda r: (r["cache_size_bytes"], -r["hit_ratio"]))
            return {"run": run, "reached": True}
    best = max(broker, key=lambda p: (round(p["best"], 3), -p["plateau"]["cache_size_bytes"]))
    return {"run": best["plateau"], "reached": target is None, "still_gaining": best["still_gaining"]}


def _at(rows: Sequence[dict], strategy: str, size: int) -> dict | None:
    return next((r for r in rows if r["strategy"] == strategy and r["cache_size_bytes"] == size), None)


def _versus(rows: Sequence[dict], run: dict, rates: Rates) -> str:
    """The recommended run against Pulsar 4.0's cache (or PIP-430 when 4.0's is recommended)."""
    other = "pip430" if run["strategy"] == "legacy" else "legacy"
    o = _at(rows, other, run["cache_size_bytes"])
    if o is None:
        return ""
    diff_reads, diff_bytes = o["misses"] - run["misses"], o["storage_read_bytes"] - run["storage_read_bytes"]
    theirs = f"hit ratio {o['hit_ratio']:.3f}, {rates.both(o['misses'], o['storage_read_bytes'])} from storage"
    if (
        abs(diff_reads) <= 0.005 * max(o["misses"], run["misses"], 1)
        and abs(o["hit_ratio"] - run["hit_ratio"]) < 0.0005
    ):
        return (
            f" {design_label(other)} does as well at that size ({theirs}): here the design matters less than the size."
        )
    verb = "saves" if diff_reads >= 0 else "costs"
    return (
        f" Against {design_label(other)} at that size ({theirs}) it {verb} "
        f"{rates.both(abs(diff_reads), abs(diff_bytes))} of storage reads."
    )


def _recommendation(rows: Sequence[dict], points: Sequence[dict], target: float | None, rates: Rates) -> list[str]:
    rec = recommend(points, target)
    if rec is None:
        return [
            "> **Recommendation: none.** No design a broker runs was replayed here "
            "(add `--strategy pip430 --strategy legacy`)."
        ]
    run = rec["run"]
    name, size = run["strategy"], format_size(run["cache_size_bytes"])
    label = design_label(name)
    largest = format_size(max(r["cache_size_bytes"] for r in rows))
    there = (
        f"Hit ratio {run['hit_ratio']:.3f}; {rates.both(run['misses'], run['storage_read_bytes'])} from storage, "
        f"{rates.mib(run['saved_bytes'])} served from the cache."
    )
    settings = design_info(name)["broker_settings"]
    run_as = f" Broker: {settings}." if settings else ""
    stops = f"A larger cache adds less than {PLATEAU:g} to its hit ratio."
    if target is not None and rec["reached"]:
        head = (
            f"**Recommendation: {label} with a {size} cache**, the smallest size run that reaches hit ratio "
            f"{target:g}. {there}"
        )
    elif target is not None:
        head = (
            f"**Recommendation: no design a broker runs reaches hit ratio {target:g}** at the sizes run (up to "
            f"{largest}). The closest is **{label} with a {size} cache**. {there}"
            + (
                " It is still gaining at the largest size: run larger sizes."
                if rec.get("still_gaining")
                else f" It stops gaining there (a larger cache adds less than {PLATEAU:g}): a larger cache will "
                "not reach the target."
            )
        )
    elif rec.get("still_gaining"):
        head = (
            f"**Recommendation: {label} with at least {size}** (the largest size run: it is still gaining "
            f"there; run larger sizes to find where it stops). {there}"
        )
    else:
        head = f"**Recommendation: {label} with a {size} cache**, where it stops gaining. {there}"
        if run["cache_size_bytes"] < max(r["cache_size_bytes"] for r in rows if r["strategy"] == name):
            head += " " + stops
        if run["cache_size_bytes"] == min(r["cache_size_bytes"] for r in rows) and len(rows) > 1:
            head += " It is the smallest size run: a smaller cache may do as well."
    return ["> " + head + _versus(rows, run, rates) + run_as]


def _pip430_vs_40(rows: Sequence[dict], rates: Rates) -> list[str]:
    a, b = "pip430", "legacy"
    sizes = sorted({r["cache_size_bytes"] for r in rows if r["strategy"] in (a, b)})
    pairs = [(z, x, y) for z in sizes if (x := _at(rows, a, z)) is not None and (y := _at(rows, b, z)) is not None]
    la, lb = design_label(a), design_label(b)
    if not pairs:
        return [f"{la} against {lb}: not both replayed here (add `--strategy {a} --strategy {b}`).", ""]

    def cell(r: dict) -> str:
        return f"{r['hit_ratio']:.3f}; {rates.both(r['misses'], r['storage_read_bytes'])}"

    def saved(x: dict, y: dict) -> str:
        d_reads, d_bytes = y["misses"] - x["misses"], y["storage_read_bytes"] - x["storage_read_bytes"]
        return ("" if d_reads >= 0 else "−") + rates.both(abs(d_reads), abs(d_bytes))

    unit = "a second (MiB/s)" if rates.seconds else "over the run (MiB)"
    return [
        f"{la} against {lb}, hit ratio and storage reads {unit} at each size:",
        "",
        *markdown_table(
            ["cache size", la, lb, f"storage reads {la} saves"],
            [[format_size(z), cell(x), cell(y), saved(x, y)] for z, x, y in pairs],
        ),
        "",
    ]


def _per_design(points: Sequence[dict], target: float | None, rates: Rates) -> list[str]:
    header = ["design", "kind"]
    if target is not None:
        header.append(f"reaches {target:g} at")
    header += ["stops gaining at", "hit ratio there", "storage reads there", "served from cache there"]
    body = []
    for p in points:
        r, info = p["plateau"], design_info(p["strategy"])
        row = [md_escape(info["label"]), _KIND.get(info["role"], info["role"])]
        if target is not None:
            row.append(
                "not reached"
                if p["reached"] is None
                else f"{format_size(p['reached']['cache_size_bytes'])} ({p['reached']['hit_ratio']:.3f})"
            )
        stop = format_size(r["cache_size_bytes"]) + (" (still gaining)" if p["still_gaining"] else "")
        row += [
            stop,
            f"{r['hit_ratio']:.3f}",
            rates.both(r["misses"], r["storage_read_bytes"]),
            rates.mib(r["saved_bytes"]),
        ]
        body.append(row)
    what = (
        f"Each design: the smallest size that reaches hit ratio {target:g}, and "
        if target is not None
        else "Each design: "
    )
    return [
        what + f"where it stops gaining (its hit ratio within {PLATEAU:g} of its best), with its storage "
        "reads there. Only the designs marked broker run on a Pulsar broker.",
        "",
        *markdown_table(header, body, align="ll" + "r" * (len(header) - 2)),
        "",
    ]


def _references(points: Sequence[dict]) -> list[str]:
    others = [p for p in points if not is_broker_design(p["strategy"])]
    if not others:
        return []
    parts = []
    for p in others:
        lo, hi = min(r["hit_ratio"] for r in p["runs"]), p["best"]
        span = f"{lo:.3f}" if abs(hi - lo) < 0.0005 else f"{lo:.3f} to {hi:.3f}"
        parts.append(f"{design_label(p['strategy'])} {span}")
    return [
        "For comparison only (no Pulsar broker runs these), hit ratios over the same sizes: " + "; ".join(parts) + ".",
        "",
    ]


def answer_lines(
    scenario: str, rows: Sequence[dict], seconds: float | None, target: float | None, heading: str = "###"
) -> list[str]:
    """The Markdown of one scenario's answer: the recommendation, PIP-430 against Pulsar 4.0 at
    each size, each design's plateau (and target size), the references."""
    if not rows:
        return [f"{heading} {md_escape(scenario)}", "", "No runs.", ""]
    rates = Rates(seconds)
    points = design_points(rows, target)
    return [
        f"{heading} {md_escape(scenario)}",
        "",
        *_recommendation(rows, points, target, rates),
        "",
        *_pip430_vs_40(rows, rates),
        *_per_design(points, target, rates),
        *_references(points),
    ]


def overview_lines(per_scenario: Sequence[tuple[str, Sequence[dict], float | None]], target: float | None) -> list[str]:
    """A table of every scenario's recommendation (reports of several scenarios open with it)."""
    body = []
    for scenario, rows, seconds in per_scenario:
        rates = Rates(seconds)
        if any(r.get("config_name") is not None for r in rows):
            # Named configurations: the best of them, its own section sets them side by side.
            best = max(rows, key=lambda r: (round(r["hit_ratio"], 4), -r["misses"]))
            body.append(
                [
                    md_escape(scenario),
                    f"{md_escape(best['config_name'])} ({design_label(best['strategy'])}), "
                    f"{format_size(best['cache_size_bytes'])}",
                    f"{best['hit_ratio']:.3f}",
                    rates.both(best["misses"], best["storage_read_bytes"]),
                    "not run (named configurations)",
                    "",
                ]
            )
            continue
        rec = recommend(design_points(rows, target), target) if rows else None
        if rec is None:
            body.append([md_escape(scenario), "no broker design run", "", "", ""])
            continue
        run = rec["run"]
        o = None if run["strategy"] == "legacy" else _at(rows, "legacy", run["cache_size_bytes"])
        vs = (
            "(recommended)"
            if run["strategy"] == "legacy"
            else "not run"
            if o is None
            else f"{o['hit_ratio']:.3f}; {rates.both(o['misses'], o['storage_read_bytes'])}"
        )
        size = format_size(run["cache_size_bytes"])
        if target is not None and not rec["reached"]:
            size += f" (does not reach {target:g})"
        elif rec.get("still_gaining"):
            size += " (still gaining)"
        saved = (
            ""
            if o is None
            else ("" if o["misses"] >= run["misses"] else "−")
            + rates.both(abs(o["misses"] - run["misses"]), abs(o["storage_read_bytes"] - run["storage_read_bytes"]))
        )
        body.append(
            [
                md_escape(scenario),
                f"{design_label(run['strategy'])}, {size}",
                f"{run['hit_ratio']:.3f}",
                rates.both(run["misses"], run["storage_read_bytes"]),
                vs,
                saved,
            ]
        )
    legacy = design_label("legacy")
    return [
        *markdown_table(
            [
                "scenario",
                "run this (design, cache size)",
                "hit ratio",
                "storage reads",
                f"{legacy} at that size",
                f"storage reads saved against {legacy}",
            ],
            body,
            align="llrrrr",
        ),
        "",
    ]
