"""Reports that lead with the answer: a Markdown page (``report.md``) and the same page as one
self-contained HTML file (``report.html``, styled, its plots embedded), with PNG plots beside them.

Each report opens with the answer per scenario (which design a broker should run at what cache size,
PIP-430 against Pulsar 4.0's cache at each size, where each design stops gaining or the smallest size
that reaches a target, storage reads a second and MiB/s), then the detail: every run's numbers,
the plots, how the designs are simulated. Designs are named as :func:`ledgercache.designs` names them.

Other reports reuse the parts: :func:`html_page` / :func:`write_page` (Markdown to one styled HTML
page with embedded images), :func:`plot_by_size` and :func:`plot_over_time` (the plots, in the
report's style), :func:`design_label`, :func:`format_size` and :func:`markdown_table`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from . import _extras
from .errors import InvalidArgumentError
from .report_answer import Rates, _at, answer_lines, design_points, overview_lines, recommend
from .report_common import (
    MIB,
    broker_designs,
    design_info,
    design_label,
    design_order,
    format_mib_rate,
    format_rate,
    format_size,
    md_escape,
)
from .report_html import CSS, html_page, markdown_table, write_page
from .report_plots import (
    EVENT_MARKS,
    design_style,
    legend_below,
    plot_by_size,
    plot_lifecycle,
    plot_over_time,
    size_axis,
)
from .report_reference import is_named, named_answer_lines, named_answer_text, named_plots

__all__ = [
    "write_report",
    "comparison_text",
    "smallest_sizes",
    "sweep_text",
    "answer_markdown",
    "answer_text",
    "run_seconds",
    "html_page",
    "write_page",
    "markdown_table",
    "plot_by_size",
    "plot_over_time",
    "design_style",
    "size_axis",
    "legend_below",
    "design_label",
    "format_size",
    "CSS",
    "REQUIRES",
]

# What write_report imports: matplotlib for the plots, Python-Markdown for the HTML page.
REQUIRES = ("matplotlib", "markdown")

_size = format_size  # the name other modules (calibrate) import


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "trace"


def _of_scenario(table: pa.Table, scenario: str) -> list[dict]:
    """The rows of one scenario (all rows when the table has no ``scenario`` column)."""
    if "scenario" not in table.column_names:
        return table.to_pylist() if scenario == "trace" else []
    return table.filter(pc.equal(table.column("scenario"), scenario)).to_pylist()


_SUMMED = (
    "entries_read",
    "read_bytes",
    "hits",
    "storage_read_ops",
    "storage_read_bytes",
    "evicted_entries",
    "invalidated_entries",
    "requeues",
    "peak_cache_bytes",
    "peak_retained_bytes",
    "out_of_order_deliveries",
)


def _rows(summary: pa.Table, scenario: str) -> list[dict]:
    """One row per (design, cache size, named configuration), brokers added up, in size then
    :func:`ledgercache.designs` order (named configurations in the order the run lists them), with
    ``hit_ratio``, ``misses`` (entries read from storage), ``saved_bytes`` (bytes the cache served),
    ``config_name`` (None for unnamed runs), ``brokers`` and ``cache`` (the size, "2 x 250 MiB" for
    two brokers' caches) and the time to warm over the brokers' lifecycle events
    (``lifecycle_events``, ``mean_time_to_warm_seconds``, ``max_time_to_warm_seconds``; None when
    the summary has no such columns or no event had a hit ratio to come back to)."""
    merged: dict[tuple, dict] = {}
    warm: dict[tuple, list[tuple[float, int]]] = {}
    for r in _of_scenario(summary, scenario):
        key = (r["strategy"], r["cache_size_bytes"], r.get("config_name"))
        m = merged.setdefault(
            key,
            {
                "strategy": key[0],
                "cache_size_bytes": key[1],
                "config_name": key[2],
                **dict.fromkeys(_SUMMED),
                "lifecycle_events": None,
                "max_time_to_warm_seconds": None,
                "brokers": 0,
            },
        )
        m["brokers"] += 1
        for k in _SUMMED:
            if r.get(k) is not None:
                m[k] = (m[k] or 0) + r[k]
        if r.get("lifecycle_events") is not None:
            m["lifecycle_events"] = (m["lifecycle_events"] or 0) + r["lifecycle_events"]
        if r.get("max_time_to_warm_seconds") is not None:
            m["max_time_to_warm_seconds"] = max(m["max_time_to_warm_seconds"] or 0.0, r["max_time_to_warm_seconds"])
        if r.get("mean_time_to_warm_seconds") is not None:
            # Each broker's mean over its own events: weighted by them when added up.
            warm.setdefault(key, []).append((r["mean_time_to_warm_seconds"], max(1, r.get("lifecycle_events") or 1)))
    order = {s: i for i, s in enumerate(design_order(k[0] for k in merged))}
    named = {n: i for i, n in enumerate(dict.fromkeys(k[2] for k in merged if k[2] is not None))}
    out = sorted(
        merged.values(),
        key=lambda m: (m["cache_size_bytes"], order[m["strategy"]], named.get(m["config_name"], -1)),
    )
    for key, m in merged.items():
        pairs = warm.get(key)
        m["mean_time_to_warm_seconds"] = sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None
    for m in out:
        for k in _SUMMED:
            if k != "peak_retained_bytes" and m[k] is None:
                m[k] = 0
        m["hit_ratio"] = m["hits"] / m["entries_read"] if m["entries_read"] else 0.0
        m["misses"] = m["entries_read"] - m["hits"]
        m["saved_bytes"] = m["read_bytes"] - m["storage_read_bytes"]
        # Beside peak cache bytes added up over the brokers, the size they add up to.
        size = format_size(m["cache_size_bytes"])
        m["cache"] = f"{m['brokers']} x {size}" if m["brokers"] > 1 else size
    return out


def run_seconds(series: pa.Table | None, scenario: str = "trace") -> float | None:
    """How long a scenario's run is, in trace seconds (from the per-second series; None without one):
    what the report's rates (storage reads a second, MiB/s) divide by."""
    if series is None or series.num_rows == 0 or "second" not in series.column_names:
        return None
    if "scenario" in series.column_names:
        series = series.filter(pc.equal(series.column("scenario"), scenario))
    elif scenario != "trace":
        return None
    if series.num_rows == 0:
        return None
    lo, hi = pc.min_max(series.column("second")).values()
    return float(hi.as_py() - lo.as_py() + 1)


def _with_rates(rows: list[dict], seconds: float | None) -> list[dict]:
    d = seconds or None
    for r in rows:
        r["storage_reads_per_second"] = r["misses"] / d if d else None
        r["storage_bytes_per_second"] = r["storage_read_bytes"] / d if d else None
        r["saved_bytes_per_second"] = r["saved_bytes"] / d if d else None
    return rows


def _mib(v) -> str:
    return "-" if v is None else f"{v / MIB:,.1f}"


def _per_s(v) -> str:
    return "-" if v is None else format_rate(v)


def _mib_s(v) -> str:
    return "-" if v is None else format_mib_rate(v).removesuffix(" MiB/s")


# (header, key, format). "storage reads" are entries read from storage (cache misses), as a broker's
# pulsar_ml_cache_misses_rate counts them; "read requests" the range reads that fetched them.
COLUMNS = (
    ("design", "strategy", lambda v: md_escape(design_label(v))),
    ("strategy", "strategy", str),
    ("cache", "cache", str),  # the brokers' caches: "2 x 250 MiB"
    ("hit ratio", "hit_ratio", lambda v: f"{v:.3f}"),
    ("storage read requests", "storage_read_ops", lambda v: f"{v:,}"),
    ("storage reads/s", "storage_reads_per_second", _per_s),
    ("storage MiB/s", "storage_bytes_per_second", _mib_s),
    ("saved MiB/s", "saved_bytes_per_second", _mib_s),
    ("storage MiB", "storage_read_bytes", _mib),  # the run's total: in the text table (no duration there)
    ("peak cache MiB", "peak_cache_bytes", _mib),
    ("peak retained MiB", "peak_retained_bytes", _mib),
    ("requeues", "requeues", lambda v: f"{v:,}"),
)
_TEXT_COLUMNS = tuple(
    c for c in COLUMNS if c[1] not in ("storage_reads_per_second", "storage_bytes_per_second", "saved_bytes_per_second")
)
_REPORT_COLUMNS = tuple(c for c in COLUMNS if c[1] != "storage_read_bytes")


def _seconds(v) -> str:
    return "-" if v is None else f"{v:.1f}"


# Shown only where the rows have them: the configuration's name (a scenario's named settings), and
# the time to warm after the broker's lifecycle events (restarts, topic moves, reconnects).
CONFIG_COLUMN = ("configuration", "config_name", lambda v: "-" if v is None else md_escape(v))
WARM_COLUMNS = (
    ("lifecycle events", "lifecycle_events", lambda v: "-" if v is None else f"{v:,}"),
    ("mean time to warm (s)", "mean_time_to_warm_seconds", _seconds),
    ("max time to warm (s)", "max_time_to_warm_seconds", _seconds),
)


def _columns(base: tuple, rows: list[dict]) -> tuple:
    """``base`` with the configuration's name first when a row has one, and the time to warm last
    when a row had a lifecycle event."""
    named = any(r.get("config_name") is not None for r in rows)
    events = any(r.get("lifecycle_events") for r in rows)
    return ((CONFIG_COLUMN,) if named else ()) + base + (WARM_COLUMNS if events else ())


def _text_table(columns: tuple, rows: list[dict]) -> list[str]:
    cells = [[fmt(r[key]).replace("\\", "") for _, key, fmt in columns] for r in rows]
    # A list, so a table without rows still has widths (max of one int would fail).
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, (h, _, _) in enumerate(columns)]
    first = lambda i, text, w: text.ljust(w) if i == 0 else text.rjust(w)
    return ["  ".join(first(i, h, w) for i, ((h, _, _), w) in enumerate(zip(columns, widths, strict=True)))] + [
        "  ".join(first(i, c, w) for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in cells
    ]


def retained_note(summary: pa.Table) -> str | None:
    """What "peak retained MiB" leaves out of these runs: None when every run measured it, else
    which runs did not (``memory_model`` off, :class:`ledgercache.CacheConfig`'s default) and how to."""
    if "peak_retained_bytes" not in summary.column_names or summary.num_rows == 0:
        return None
    unmeasured = summary.column("peak_retained_bytes").null_count
    if unmeasured == 0:
        return None
    which = "no run" if unmeasured == summary.num_rows else f"{unmeasured:,} of {summary.num_rows:,} runs do not"
    verb = "measures" if unmeasured == summary.num_rows else "measure"
    return (
        f"peak retained MiB: {which} {verb} the buffers cached entries keep allocated (`memory_model` off, "
        "lc.replay's default, for speed); replay with `memory_model=True` (`--set memory_model=true`) to "
        "measure them."
    )


def comparison_text(summary: pa.Table) -> str:
    """The comparison as plain text, a table per scenario (what the CLI prints)."""
    out = []
    for scenario in _scenarios(summary):
        rows = _rows(summary, scenario)
        out += [f"== {scenario}", *_text_table(_columns(_TEXT_COLUMNS, rows), rows), ""]
    note = retained_note(summary)
    if note:
        out += [note.replace("`", ""), ""]
    return "\n".join(out)


def smallest_sizes(summary: pa.Table, target_hit_ratio: float) -> list[dict]:
    """Per scenario and strategy, the smallest cache size of the runs whose hit ratio reaches
    ``target_hit_ratio``: rows with ``scenario``, ``strategy``, ``cache_size_bytes`` (None when no
    size reached it), ``hit_ratio`` and ``saved_bytes`` at that size (else at the largest size run),
    and ``largest_size_bytes`` (the largest size run).

    Sizes are only the ones replayed: "the smallest" means the smallest of those, so a finer
    ``--sizes`` grid gives a tighter answer.
    """
    if not 0.0 <= target_hit_ratio <= 1.0:
        raise InvalidArgumentError(f"invalid target_hit_ratio: expected a ratio in [0, 1], got {target_hit_ratio!r}")
    out = []
    for scenario in _scenarios(summary):
        rows = _rows(summary, scenario)
        for strategy in design_order(r["strategy"] for r in rows):
            runs = sorted((r for r in rows if r["strategy"] == strategy), key=lambda r: r["cache_size_bytes"])
            reached = next((r for r in runs if r["hit_ratio"] >= target_hit_ratio), None)
            at = reached or runs[-1]
            out.append(
                {
                    "scenario": scenario,
                    "strategy": strategy,
                    "cache_size_bytes": reached["cache_size_bytes"] if reached else None,
                    "hit_ratio": at["hit_ratio"],
                    "saved_bytes": at["saved_bytes"],
                    "storage_read_bytes": at["storage_read_bytes"],
                    "misses": at["misses"],
                    "largest_size_bytes": runs[-1]["cache_size_bytes"],
                }
            )
    return out


SWEEP_COLUMNS = (
    ("design", "strategy", lambda v: md_escape(design_label(v))),
    ("strategy", "strategy", str),
    ("smallest cache", "cache_size_bytes", lambda v: "not reached" if v is None else format_size(v)),
    ("hit ratio there", "hit_ratio", lambda v: f"{v:.3f}"),
    ("storage reads/s there", "storage_reads_per_second", _per_s),
    ("saved MiB/s there", "saved_bytes_per_second", _mib_s),
    ("storage MiB saved there", "saved_bytes", _mib),
    ("largest size run", "largest_size_bytes", format_size),
)


def sweep_text(summary: pa.Table, target_hit_ratio: float) -> str:
    """:func:`smallest_sizes` as plain text, a table per scenario (what ``ledgercache sweep`` prints)."""
    rows = smallest_sizes(summary, target_hit_ratio)
    columns = tuple(c for c in SWEEP_COLUMNS if not c[0].endswith("/s there"))
    out = []
    for scenario in _scenarios(summary):
        out.append(f"== {scenario}: smallest cache with hit ratio >= {target_hit_ratio:g}")
        out += [*_text_table(columns, [r for r in rows if r["scenario"] == scenario]), ""]
    return "\n".join(out)


def _scenarios(summary: pa.Table) -> list[str]:
    if "scenario" not in summary.column_names:
        return ["trace"]
    seen: list[str] = []
    for s in summary.column("scenario").to_pylist():
        if s not in seen:
            seen.append(s)
    return seen


def _plots(
    rows: list[dict], series: pa.Table | None, scenario: str, seconds: float | None, out: Path, target: float | None
) -> list[tuple[str, str]]:
    """The scenario's PNGs in ``out``: (file name, caption)."""
    slug = _slug(scenario)
    ts = _of_scenario(series, scenario) if series is not None and series.num_rows else []
    if is_named(rows):
        # Named configurations at a size or two: bars beside Pulsar's figures, then time.
        made = named_plots(rows, scenario, out, slug)
        return made + (_lifecycle_plot(rows, ts, scenario, out, slug) if ts else [])
    made = []
    name = f"hit-ratio-{slug}.png"
    plot_by_size(rows, out / name, title=f"{scenario}: hit ratio by cache size", target=target)
    made.append((name, f"{scenario}: hit ratio by cache size" + (f", target {target:g}" if target is not None else "")))

    d, unit = (seconds, "/s") if seconds else (1.0, " over the run")
    pts = [
        {
            "strategy": r["strategy"],
            "cache_size_bytes": r["cache_size_bytes"],
            "reads": r["misses"] / d,
            "mib": r["storage_read_bytes"] / d / MIB,
        }
        for r in rows
    ]
    first = rows[0]
    name = f"storage-reads-{slug}.png"
    plot_by_size(
        pts,
        out / name,
        title=f"{scenario}: storage reads by cache size (fewer is better; the gap to "
        f"'no cache' is what the cache saves)",
        panels=(("reads", f"storage reads{unit} (entries)"), ("mib", f"storage MiB{unit}")),
        lines={
            "reads": (first["entries_read"] / d, f"no cache\n{format_rate(first['entries_read'] / d)}"),
            "mib": (first["read_bytes"] / d / MIB, f"no cache\n{format_rate(first['read_bytes'] / d / MIB)}"),
        },
    )
    made.append((name, f"{scenario}: storage reads{unit} and MiB{unit} by cache size"))

    if ts and any(r.get(c) for r in ts for c, _, _, _ in EVENT_MARKS):
        made += _lifecycle_plot(rows, ts, scenario, out, slug)
    if ts:
        sizes = sorted({r["cache_size_bytes"] for r in rows})
        size = sizes[len(sizes) // 2]
        lines: dict[str, dict[int, int]] = {}
        for r in ts:
            if r["cache_size_bytes"] == size:
                per_second = lines.setdefault(r["strategy"], {})
                per_second[r["second"]] = per_second.get(r["second"], 0) + r["cache_bytes"]
        name = f"cache-bytes-{slug}.png"
        plot_over_time(
            {s: [(x, v / MIB) for x, v in p.items()] for s, p in lines.items()},
            out / name,
            title=f"{scenario}: bytes cached over time ({format_size(size)} cache)",
            ylabel="cached MiB",
            limit=(size / MIB, f"cache size\n{format_size(size)}"),
        )
        made.append((name, f"{scenario}: bytes cached over time, {format_size(size)} cache"))
    return made


def _lifecycle_plot(rows: list[dict], ts: list[dict], scenario: str, out: Path, slug: str) -> list[tuple[str, str]]:
    """Hit ratio, storage reads, cached bytes and time to warm over time at the scenario's middle
    size, per named configuration (else per design), brokers added up, lifecycle events marked."""
    sizes = sorted({r["cache_size_bytes"] for r in rows})
    size = sizes[len(sizes) // 2]
    named = any(r.get("config_name") is not None for r in ts)
    order = [r["config_name"] if named else r["strategy"] for r in rows if r["cache_size_bytes"] == size]
    sums: dict[str, dict[int, dict]] = {}
    for r in ts:
        if r["cache_size_bytes"] != size:
            continue
        group = r["config_name"] if named else r["strategy"]
        at = sums.setdefault(group, {}).setdefault(r["second"], {"reads": 0, "hits": 0, "misses": 0, "bytes": 0})
        at["reads"] += r["reads"]
        at["hits"] += r["hits"]
        # H1's per-second `misses` (entries read from storage); older series: reads the cache did not serve.
        at["misses"] += r["misses"] if r.get("misses") is not None else r["reads"] - r["hits"]
        at["bytes"] += r["cache_bytes"]
        for column, _, _, _ in EVENT_MARKS:
            at[column] = at.get(column, 0) + (r.get(column) or 0)
        if r.get("time_to_warm_seconds") is not None:
            at["warm"] = max(at.get("warm", 0.0), r["time_to_warm_seconds"])
    groups = {
        g: {
            second: {
                "hit_ratio": v["hits"] / v["reads"] if v["reads"] else None,
                "storage_reads": v["misses"],
                "cache_mib": v["bytes"] / MIB,
                "time_to_warm": v.get("warm"),
            }
            for second, v in sums[g].items()
        }
        for g in dict.fromkeys(order)
        if g in sums
    }
    events: dict[str, list[int]] = {}
    for column, _, _, _ in EVENT_MARKS:
        # The trace's events: the same in every run, so any group's seconds say when they were.
        events[column] = sorted({second for g in sums.values() for second, v in g.items() if v.get(column)})
    brokers = len({r["broker"] for r in ts})
    name = f"lifecycle-{slug}.png"
    plot_lifecycle(
        groups,
        events,
        out / name,
        title=f"{scenario}: over time, {format_size(size)} cache, brokers added up (vertical lines: lifecycle events)",
        # The brokers' bytes are added up: so are their caches.
        limit=(
            brokers * size / MIB,
            f"cache size\n{brokers} x {format_size(size)}" if brokers > 1 else f"cache size\n{format_size(size)}",
        ),
    )
    return [
        (
            name,
            f"{scenario}: hit ratio, storage reads a second, bytes cached and the time to warm after each "
            f"lifecycle event, {format_size(size)} cache",
        )
    ]


PUBLISH_COLUMNS = (
    ("mode", "mode", str),
    ("topic", "topic", str),
    ("publishes", "publishes", str),
    ("p50 delay (ms)", "p50_ms", lambda v: f"{v:.1f}"),
    ("p99 delay (ms)", "p99_ms", lambda v: f"{v:.1f}"),
    ("max delay (ms)", "max_ms", lambda v: f"{v:.1f}"),
    ("own throttles", "throttles", str),
    ("under quota", "under_quota", lambda v: "yes" if v else "no"),
)


# The lab's settings that change how a design behaves from how Pulsar ships it: (setting, what it
# does, the value that models Pulsar as shipped).
DEPARTURES = (
    (
        "apply_continue_caching_window",
        "keep caching added entries for a while after the last active cursor leaves",
        (None, False),
    ),
    (
        "exact_cursor_counts",
        "count the active cursors at or before a storage read right, not as Pulsar's container does",
        (None, False),
    ),
    (
        "expected_read_on_every_redelivery",
        "add an expected read on every redelivery, not only on a Key_Shared hold-back",
        (False,),
    ),
)


def _model_section(summary: pa.Table) -> list[str]:
    """How the designs were simulated, and every setting of these runs that departs from Pulsar."""

    run = set(summary.column("strategy").to_pylist()) if "strategy" in summary.column_names else set()
    rows = [
        [
            md_escape(design_info(s)["label"]),
            f"`{s}`",
            md_escape(design_info(s)["models"]),
            md_escape(design_info(s)["broker_settings"] or "no broker runs it"),
            md_escape(design_info(s).get("follows", "")),
        ]
        for s in design_order(run)
    ]
    lines = [
        "## How the designs are simulated",
        "",
        "Each design is simulated as Pulsar's code ships it (docs/fidelity.md). The strategy is the name "
        "`--strategy` takes.",
        "",
        *markdown_table(["design", "strategy", "what it models", "on a broker", "as simulated"], rows, align="lllwl"),
        "",
    ]
    configs = [json.loads(c) for c in summary.column("config").to_pylist()] if "config" in summary.column_names else []
    for name, what, shipped in DEPARTURES:
        values = sorted({repr(c.get(name)) for c in configs if c.get(name) not in shipped})
        if values:
            lines.append(f"- **Not as Pulsar ships it:** `{name}` = {', '.join(values)} in some runs: {what}.")
        else:
            lines.append(f"- `{name}` is off in every run, as Pulsar ships it (on, it would {what}).")
    note = retained_note(summary)
    if note:
        lines.append(f"- **Not measured:** {note}")
    return [*lines, ""]


def _table(columns: tuple, rows: list[dict]) -> list[str]:
    """A Markdown table of ``columns`` (header, key, format): text columns left, numbers right."""
    align = "".join("l" if key in ("strategy", "mode", "topic", "config_name") else "r" for _, key, _ in columns)
    return markdown_table([h for h, _, _ in columns], [[fmt(r[key]) for _, key, fmt in columns] for r in rows], align)


def answer_markdown(summary: pa.Table, series: pa.Table | None = None, target_hit_ratio: float | None = None) -> str:
    """The answer a report opens with, as Markdown: with several scenarios a table of each one's
    recommendation, then per scenario the recommendation (only designs a broker runs), PIP-430
    against Pulsar 4.0's cache at each size, where each design stops gaining (and, with
    ``target_hit_ratio``, the smallest size that reaches it) and the storage reads each saves, a
    second when ``series`` gives the run's duration (:func:`run_seconds`)."""
    scenarios = [(s, _rows(summary, s), run_seconds(series, s)) for s in _scenarios(summary)]
    seconds = sorted({d for _, _, d in scenarios if d})
    span = (
        ""
        if not seconds
        else f", averaged over each scenario's {seconds[0]:g} s run"
        if len(seconds) == 1
        else f", averaged over each scenario's run ({seconds[0]:g}-{seconds[-1]:g} s)"
    )
    lines = [
        "## The answer",
        "",
        "Which cache design a broker should run, and at what size, per scenario. Recommendations are among the "
        f"designs a Pulsar broker runs ({', '.join(d['label'] for d in broker_designs())}); "
        "the others are shown for comparison. Hit ratio: the share of entries read that the cache served. "
        "Storage reads: entries read from BookKeeper (cache misses, what a broker's "
        f"`pulsar_ml_cache_misses_rate` counts) and their MiB{span}.",
        "",
    ]
    if target_hit_ratio is not None:
        lines += [
            f"Target hit ratio: {target_hit_ratio:g}. Sizes are the ones replayed: a finer `--sizes` grid "
            "gives a tighter answer.",
            "",
        ]
    if len(scenarios) > 1:
        lines += overview_lines(scenarios, target_hit_ratio)
    for scenario, rows, d in scenarios:
        lines += (
            named_answer_lines(scenario, rows, d)
            if is_named(rows)
            else answer_lines(scenario, rows, d, target_hit_ratio)
        )
    return "\n".join(lines)


def answer_text(summary: pa.Table, series: pa.Table | None = None, target_hit_ratio: float | None = None) -> str:
    """The answer in plain lines for the terminal (what ``compare``, ``sweep`` and ``demo`` print
    last): per scenario the design and size to run (:func:`answer_markdown`'s choice) beside Pulsar
    4.0's cache at that size."""

    lines = ["The answer (only designs a Pulsar broker runs are recommended; the report has the detail):"]
    for scenario in _scenarios(summary):
        rows, rates = _rows(summary, scenario), Rates(run_seconds(series, scenario))
        if is_named(rows):
            lines += named_answer_text(scenario, rows, rates)
            continue
        rec = recommend(design_points(rows, target_hit_ratio), target_hit_ratio) if rows else None
        if rec is None:
            lines.append(f"  {scenario}: no design a broker runs was replayed")
            continue
        run = rec["run"]
        size = format_size(run["cache_size_bytes"])
        why = (
            f"does not reach {target_hit_ratio:g}"
            if target_hit_ratio is not None and not rec["reached"]
            else f"reaches {target_hit_ratio:g}"
            if target_hit_ratio is not None
            else "still gaining at the largest size"
            if rec.get("still_gaining")
            else "where it stops gaining"
        )
        line = (
            f"  {scenario}: {design_label(run['strategy'])} at {size} ({why}): hit ratio {run['hit_ratio']:.3f}, "
            f"{rates.both(run['misses'], run['storage_read_bytes'])} from storage"
        )
        other = None if run["strategy"] == "legacy" else _at(rows, "legacy", run["cache_size_bytes"])
        if other is not None:
            line += (
                f"; {design_label('legacy')} there {other['hit_ratio']:.3f}, "
                f"{rates.both(other['misses'], other['storage_read_bytes'])}"
            )
        lines.append(line)
    return "\n".join(lines)


def _publish_section(publish: pa.Table, title: str) -> list[str]:
    return [
        f"## {md_escape(title)}",
        "",
        "Publish delays with the limiter in each mode. Topics under their quota that still wait are waiting for a "
        "neighbour on their connection.",
        "",
        *_table(PUBLISH_COLUMNS, publish.to_pylist()),
        "",
    ]


def write_report(
    summary: pa.Table,
    series: pa.Table | None,
    out_dir: str | Path,
    title: str = "ledgercache replay report",
    publish: pa.Table | None = None,
    publish_title: str = "publish throttling: noisy neighbour",
    target_hit_ratio: float | None = None,
) -> Path:
    """Writes ``report.md``, ``report.html`` and the PNGs into ``out_dir``; returns the Markdown path.

    The report opens with the answer (:func:`answer_markdown`), then per scenario every run's
    numbers and the plots (hit ratio by cache size, storage reads a second and MiB/s by cache
    size, bytes cached over time), then how the designs are simulated. ``report.html`` is one
    self-contained page (:func:`html_page`: styled, the plots embedded).

    ``summary`` and ``series`` are what :func:`ledgercache.replay` returns (with timeseries), with
    an optional ``scenario`` column to group the tables and plots; the series gives each run's
    duration, which the rates divide by (without it, totals over the run). ``publish`` adds a
    section of publish delays (:func:`ledgercache.publish.compare_modes`), modes side by side. With
    ``target_hit_ratio``, each scenario also gets the smallest cache per design that reaches it
    (:func:`smallest_sizes`), and the hit ratio plots a target line. Needs matplotlib and markdown
    (the ``lab`` extra): without them, :class:`~ledgercache.errors.MissingDependencyError` is
    raised before anything is written.
    """
    _extras.require("ledgercache.report.write_report", REQUIRES)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    smallest = smallest_sizes(summary, target_hit_ratio) if target_hit_ratio is not None else []
    md = [f"# {md_escape(title)}", "", answer_markdown(summary, series, target_hit_ratio), ""]
    for scenario in _scenarios(summary):
        seconds = run_seconds(series, scenario)
        rows = _with_rates(_rows(summary, scenario), seconds)
        md += [f"## {md_escape(scenario)}: every run", ""]
        for name, caption in _plots(rows, series, scenario, seconds, out, target_hit_ratio) if rows else []:
            md += [f"![{md_escape(caption)}]({name})", ""]
        md += [*_table(_columns(_REPORT_COLUMNS if seconds else COLUMNS, rows), rows), ""]
        if target_hit_ratio is not None:
            mine = _with_rates([r for r in smallest if r["scenario"] == scenario], seconds)
            md += [
                f"### Smallest cache with hit ratio >= {target_hit_ratio:g} (of the sizes run)",
                "",
                *_table(SWEEP_COLUMNS, mine),
                "",
            ]
    if publish is not None:
        md += _publish_section(publish, publish_title)
    md += _model_section(summary)
    return write_page(out, "\n".join(md), title)
