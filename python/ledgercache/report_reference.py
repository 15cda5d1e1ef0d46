"""A scenario replayed under named configurations (:data:`ledgercache.workload.SCENARIO_CONFIGS`),
set beside what Pulsar published for it (:mod:`ledgercache.pulsar_reference`): the answer's table,
the order of the configurations in the lab and in each of Pulsar's runs, where and why the lab
differs, the lines the terminal prints and the bars of the report."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from . import pulsar_reference
from .report_answer import Rates
from .report_common import design_label, format_size, md_escape
from .report_html import markdown_table
from .report_plots import plot_beside_reference

__all__ = ["is_named", "named_answer_lines", "named_answer_text", "named_plots", "lab_order", "pulsar_order"]


def is_named(rows: Sequence[dict]) -> bool:
    """Whether a scenario's rows are runs of named configurations."""
    return any(r.get("config_name") is not None for r in rows)


def _by_size(rows: Sequence[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in rows:
        if r.get("config_name") is not None:
            out.setdefault(r["cache_size_bytes"], []).append(r)
    return out


def lab_order(runs: Sequence[dict]) -> list[str]:
    """The named configurations of runs at one size, best hit ratio first (fewer storage reads first on a tie)."""
    return [r["config_name"] for r in sorted(runs, key=lambda r: (-round(r["hit_ratio"], 4), r["misses"]))]


def _chain(order: list[str], key: dict[str, float]) -> str:
    """``A > B = C``: the order, with ``=`` between neighbours whose values are the same."""
    out = md_escape(order[0]) if order else ""
    for a, b in itertools.pairwise(order):
        out += (" = " if key[a] == key[b] else " > ") + md_escape(b)
    return out


def pulsar_order(run: dict) -> list[str]:
    """The configurations of one of Pulsar's published runs, best hit percentage first."""
    figures = run["figures"]
    return sorted(
        (n for n in figures if figures[n]["hit_percent"] is not None), key=lambda n: -figures[n]["hit_percent"]
    )


def _fewest(values: dict[str, float | None]) -> str | None:
    given = {n: v for n, v in values.items() if v is not None}
    return min(given, key=lambda n: given[n]) if given else None


def _first_and_fewest(order: list[str], reads: dict[str, float | None], tied: bool = False) -> str:
    fewest = _fewest(reads)
    if not order:
        return "no figures"
    if tied:
        return "no configuration first: the best are tied"
    if fewest is None:
        return f"{order[0]} first (storage reads not given)"
    if fewest == order[0]:
        return f"{order[0]} first, with the fewest storage reads"
    return f"{order[0]} first; the fewest storage reads: {fewest}"


def _percent(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _count(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def named_answer_lines(scenario: str, rows: Sequence[dict], seconds: float | None, heading: str = "###") -> list[str]:
    """The Markdown answer of a scenario run under named configurations: per size, the
    configurations side by side (the lab's hit ratio and storage reads, Pulsar's published hit
    percentages and BookKeeper reads), the order of each, and where and why the lab differs."""
    ref = pulsar_reference.reference(scenario)
    runs = pulsar_reference.runs(scenario)
    with_reads = [run for run in runs if any(f["bk_read_entries"] is not None for f in run["figures"].values())]
    rates = Rates(seconds)
    lines = [f"{heading} {md_escape(scenario)}", ""]
    if ref is not None:
        lines += [
            f"Replayed under the configurations of Pulsar's `{ref['test']}`, each as the test sets the broker "
            f"(all four run {design_label('pip430')}: master's broker), "
            f"beside the figures its author published ({ref['source']}; averages of five runs). Pulsar's hit "
            "percentage is 100 x (consumed - entries read from BookKeeper) / consumed; the lab's hit ratio is the "
            "same measure (entries read from the cache over entries read). Storage reads are entries read from "
            "storage over the whole run, read requests the reads that fetched them (Pulsar's `bk_read_entries` "
            "and `bk_reads`).",
            "",
        ]
    for size, group in sorted(_by_size(rows).items()):
        header = ["configuration", "lab hit ratio", "lab hit %", "lab storage reads", "lab read requests"]
        header += [f"Pulsar {md_escape(run['name'])} hit %" for run in runs]
        header += [f"Pulsar {md_escape(run['name'])} bk_read_entries" for run in with_reads]
        body = []
        for r in group:
            name = r["config_name"]
            row = [
                md_escape(name),
                f"{r['hit_ratio']:.3f}",
                f"{100 * r['hit_ratio']:.2f}",
                f"{r['misses']:,}",
                f"{r['storage_read_ops']:,}",
            ]
            row += [_percent(run["figures"].get(name, {}).get("hit_percent")) for run in runs]
            row += [_count(run["figures"].get(name, {}).get("bk_read_entries")) for run in with_reads]
            body.append(row)
        span = f", over the lab's {seconds:g} s run" if seconds else ""
        theirs = f" (Pulsar's: {ref['seconds']} s)" if ref is not None and seconds else ""
        lines += [
            f"Cache {format_size(size)} (each broker's){span}{theirs}:",
            "",
            *markdown_table(header, body, align="l" + "r" * (len(header) - 1)),
            "",
        ]
        order = lab_order(group)
        lab_reads = {r["config_name"]: r["misses"] for r in group}
        lab_hits = {r["config_name"]: round(r["hit_ratio"], 3) for r in group}
        tied = len(order) > 1 and lab_hits[order[0]] == lab_hits[order[1]]
        lines.append(
            f"- **The lab:** {_chain(order, lab_hits)} by hit ratio: "
            f"{md_escape(_first_and_fewest(order, lab_reads, tied))} ({rates.reads(lab_reads[order[0]])} from "
            "storage for the first)."
        )
        strict = len(set(lab_hits.values())) == len(lab_hits)
        for run in runs:
            p_order = pulsar_order(run)
            reads = {n: f["bk_read_entries"] for n, f in run["figures"].items()}
            hits = {n: f["hit_percent"] for n, f in run["figures"].items()}
            same = " (the lab's order)" if strict and [n for n in order if n in p_order] == p_order else ""
            lines.append(
                f"- **Pulsar {md_escape(run['name'])}:** {_chain(p_order, hits)}{same}: "
                f"{md_escape(_first_and_fewest(p_order, reads))}."
            )
        lines.append("")
    if ref is not None and ref.get("differences"):
        lines += ["**Where and why the lab differs.** " + " ".join(ref["differences"]), ""]
    return lines


def named_answer_text(scenario: str, rows: Sequence[dict], rates: Rates) -> list[str]:
    """The terminal's lines for a scenario run under named configurations: each one's hit ratio
    and storage reads at each size, the lab's order and Pulsar's."""
    out = []
    for size, group in sorted(_by_size(rows).items()):
        order = lab_order(group)
        each = ", ".join(
            f"{r['config_name']} {r['hit_ratio']:.3f} ({rates.reads(r['misses'])})"
            for r in sorted(group, key=lambda r: order.index(r["config_name"]))
        )
        out.append(f"  {scenario} ({format_size(size)}): {each}")
        for run in pulsar_reference.runs(scenario):
            figures = run["figures"]
            out.append(
                f"    Pulsar {run['name']}: "
                + ", ".join(f"{n} {figures[n]['hit_percent']:.2f}%" for n in pulsar_order(run))
            )
    return out


def named_plots(rows: Sequence[dict], scenario: str, out: Path, slug: str) -> list[tuple[str, str]]:
    """Bars of each named configuration's hit percentage, and storage reads where Pulsar gives
    them, the lab's beside each of Pulsar's runs (the scenario's smallest size)."""
    sizes = _by_size(rows)
    if not sizes:
        return []
    size = min(sizes)
    group = sizes[size]
    names = [r["config_name"] for r in group]
    runs = pulsar_reference.runs(scenario)
    made = []
    # Each source in the same colour in both plots: the lab red, Pulsar's runs greys, oldest darkest.
    colours = {"lab": "C3"} | {
        f"Pulsar {run['name']}": str(0.25 + 0.5 * i / max(1, len(runs) - 1)) for i, run in enumerate(runs)
    }
    hits: dict[str, list[float | None]] = {"lab": [100 * r["hit_ratio"] for r in group]}
    for run in runs:
        hits[f"Pulsar {run['name']}"] = [run["figures"].get(n, {}).get("hit_percent") for n in names]
    name = f"named-hit-{slug}.png"
    plot_beside_reference(
        names,
        hits,
        out / name,
        title=f"{scenario}: hit % per configuration ({format_size(size)} cache)",
        ylabel="hit %",
        colours=colours,
    )
    made.append((name, f"{scenario}: hit percentage per configuration, the lab beside Pulsar's published runs"))
    reads: dict[str, list[float | None]] = {"lab": [float(r["misses"]) for r in group]}
    for run in runs:
        values = [run["figures"].get(n, {}).get("bk_read_entries") for n in names]
        if any(v is not None for v in values):
            reads[f"Pulsar {run['name']}"] = values
    name = f"named-storage-reads-{slug}.png"
    plot_beside_reference(
        names,
        {k: [None if v is None else v / 1e6 for v in vs] for k, vs in reads.items()},
        out / name,
        title=f"{scenario}: entries read from storage over the run, millions (fewer is better)",
        ylabel="storage reads (million entries)",
        colours=colours,
    )
    made.append((name, f"{scenario}: entries read from storage per configuration, the lab beside Pulsar's runs"))
    return made
