"""Reports: a Markdown and an HTML page with a table per scenario and PNG plots (hit ratio against
cache size per strategy, cache bytes over time, storage read bytes saved), in one directory."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from . import _extras

__all__ = ["write_report", "comparison_text", "smallest_sizes", "sweep_text"]

MIB = 1 << 20


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "trace"


def _size(n: int) -> str:
    if n >= 1 << 30 and n % (1 << 28) == 0:
        return f"{n / (1 << 30):g} GiB"
    return f"{n / MIB:g} MiB" if n % (MIB // 4) == 0 else f"{n:,} B"


def _of_scenario(table: pa.Table, scenario: str) -> list[dict]:
    """The rows of one scenario (all rows when the table has no ``scenario`` column)."""
    if "scenario" not in table.column_names:
        return table.to_pylist() if scenario == "trace" else []
    return table.filter(pc.equal(table.column("scenario"), scenario)).to_pylist()


def _rows(summary: pa.Table, scenario: str) -> list[dict]:
    rows = _of_scenario(summary, scenario)
    # Several brokers: add them up per (strategy, cache size).
    merged: dict[tuple, dict] = {}
    for r in rows:
        key = (r["strategy"], r["cache_size_bytes"])
        m = merged.setdefault(key, {k: 0 for k in ("entries_read", "read_bytes", "hits", "storage_read_ops", "storage_read_bytes",
                                                   "evicted_entries", "invalidated_entries", "requeues", "peak_cache_bytes",
                                                   "peak_retained_bytes",
                                                   "out_of_order_deliveries")} | {"strategy": key[0], "cache_size_bytes": key[1]})
        for k in m:
            if k not in ("strategy", "cache_size_bytes"):
                m[k] += r.get(k, 0) or 0
    out = sorted(merged.values(), key=lambda m: (m["cache_size_bytes"], m["strategy"]))
    for m in out:
        m["hit_ratio"] = m["hits"] / m["entries_read"] if m["entries_read"] else 0.0
        m["saved_bytes"] = m["read_bytes"] - m["storage_read_bytes"]
    return out


COLUMNS = (
    ("strategy", "strategy", str),
    ("cache", "cache_size_bytes", _size),
    ("hit ratio", "hit_ratio", lambda v: f"{v:.3f}"),
    ("storage reads", "storage_read_ops", lambda v: f"{v:,}"),
    ("storage MiB", "storage_read_bytes", lambda v: f"{v / MIB:,.1f}"),
    ("saved MiB", "saved_bytes", lambda v: f"{v / MIB:,.1f}"),
    ("peak cache MiB", "peak_cache_bytes", lambda v: f"{v / MIB:,.1f}"),
    ("peak retained MiB", "peak_retained_bytes", lambda v: "-" if v is None else f"{v / MIB:,.1f}"),
    ("requeues", "requeues", lambda v: f"{v:,}"),
)


def comparison_text(summary: pa.Table) -> str:
    """The comparison as plain text, a table per scenario (what the CLI prints)."""
    out = []
    for scenario in _scenarios(summary):
        out.append(f"== {scenario}")
        rows = _rows(summary, scenario)
        cells = [[fmt(r[key]) for _, key, fmt in COLUMNS] for r in rows]
        # A list, so a scenario without rows still has widths (max of one int would fail).
        widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, (h, _, _) in enumerate(COLUMNS)]
        out.append("  ".join(h.rjust(w) for (h, _, _), w in zip(COLUMNS, widths)))
        out.extend("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells)
        out.append("")
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
        from .errors import InvalidArgumentError

        raise InvalidArgumentError(f"invalid target_hit_ratio: expected a ratio in [0, 1], got {target_hit_ratio!r}")
    out = []
    for scenario in _scenarios(summary):
        rows = _rows(summary, scenario)
        for strategy in sorted({r["strategy"] for r in rows}):
            runs = sorted((r for r in rows if r["strategy"] == strategy), key=lambda r: r["cache_size_bytes"])
            reached = next((r for r in runs if r["hit_ratio"] >= target_hit_ratio), None)
            at = reached or runs[-1]
            out.append({"scenario": scenario, "strategy": strategy,
                        "cache_size_bytes": reached["cache_size_bytes"] if reached else None,
                        "hit_ratio": at["hit_ratio"], "saved_bytes": at["saved_bytes"],
                        "largest_size_bytes": runs[-1]["cache_size_bytes"]})
    return out


SWEEP_COLUMNS = (
    ("strategy", "strategy", str),
    ("smallest cache", "cache_size_bytes", lambda v: "not reached" if v is None else _size(v)),
    ("hit ratio there", "hit_ratio", lambda v: f"{v:.3f}"),
    ("storage MiB saved there", "saved_bytes", lambda v: f"{v / MIB:,.1f}"),
    ("largest size run", "largest_size_bytes", _size),
)


def sweep_text(summary: pa.Table, target_hit_ratio: float) -> str:
    """:func:`smallest_sizes` as plain text, a table per scenario (what ``ledgercache sweep`` prints)."""
    rows = smallest_sizes(summary, target_hit_ratio)
    out = []
    for scenario in _scenarios(summary):
        out.append(f"== {scenario}: smallest cache with hit ratio >= {target_hit_ratio:g}")
        cells = [[fmt(r[key]) for _, key, fmt in SWEEP_COLUMNS] for r in rows if r["scenario"] == scenario]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _, _) in enumerate(SWEEP_COLUMNS)]
        out.append("  ".join(h.rjust(w) for (h, _, _), w in zip(SWEEP_COLUMNS, widths)))
        out.extend("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells)
        out.append("")
    return "\n".join(out)


def _scenarios(summary: pa.Table) -> list[str]:
    if "scenario" not in summary.column_names:
        return ["trace"]
    seen: list[str] = []
    for s in summary.column("scenario").to_pylist():
        if s not in seen:
            seen.append(s)
    return seen


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plots(rows: list[dict], series: pa.Table | None, scenario: str, out: Path) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    strategies = sorted({r["strategy"] for r in rows})
    sizes = sorted({r["cache_size_bytes"] for r in rows})
    slug = _slug(scenario)
    made = []

    fig, ax = plt.subplots(figsize=(6.4, 4))
    for s in strategies:
        pts = [(r["cache_size_bytes"] / MIB, r["hit_ratio"]) for r in rows if r["strategy"] == s]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
    ax.set_xscale("log", base=2)
    ax.set_xticks([z / MIB for z in sizes], [f"{z / MIB:g}" for z in sizes])
    ax.set_xlabel("cache size (MiB)")
    ax.set_ylabel("hit ratio")
    ax.set_title(f"{scenario}: hit ratio by cache size")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    name = f"hit-ratio-{slug}.png"
    _save(fig, out / name)
    made.append((name, "hit ratio by cache size"))

    fig, ax = plt.subplots(figsize=(6.4, 4))
    width = 0.8 / max(1, len(strategies))
    for i, s in enumerate(strategies):
        saved = [next((r["saved_bytes"] / MIB for r in rows if r["strategy"] == s and r["cache_size_bytes"] == z), 0) for z in sizes]
        ax.bar([j + i * width for j in range(len(sizes))], saved, width=width, label=s)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(sizes))], [_size(z) for z in sizes])
    ax.set_ylabel("storage read MiB saved")
    ax.set_title(f"{scenario}: storage reads saved by the cache")
    ax.legend(fontsize="small")
    name = f"storage-saved-{slug}.png"
    _save(fig, out / name)
    made.append((name, "storage read bytes saved"))

    if series is not None and series.num_rows:
        ts = _of_scenario(series, scenario)
        if ts:
            size = sizes[len(sizes) // 2]
            fig, ax = plt.subplots(figsize=(6.4, 4))
            for s in strategies:
                per_second: dict[int, int] = {}
                for r in ts:
                    if r["strategy"] == s and r["cache_size_bytes"] == size:
                        per_second[r["second"]] = per_second.get(r["second"], 0) + r["cache_bytes"]
                xs = sorted(per_second)
                ax.plot(xs, [per_second[x] / MIB for x in xs], label=s)
            ax.set_xlabel("trace second")
            ax.set_ylabel("cache MiB")
            ax.set_title(f"{scenario}: cache bytes over time ({_size(size)} cache)")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
            name = f"cache-bytes-{slug}.png"
            _save(fig, out / name)
            made.append((name, "cache bytes over time"))
    return made


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
    ("apply_continue_caching_window", "keep caching added entries for a while after the last active cursor leaves", (None, False)),
    ("exact_cursor_counts", "count the active cursors at or before a storage read right, not as Pulsar's container does", (None, False)),
    ("expected_read_on_every_redelivery", "add an expected read on every redelivery, not only on a Key_Shared hold-back", (False,)),
)


def _model_section(summary: pa.Table) -> list[str]:
    """How the designs were simulated, and every setting of these runs that departs from Pulsar."""
    import json

    lines = [
        "## How the designs are simulated",
        "",
        "Each design is Pulsar's code as shipped (see docs/fidelity.md): `legacy` is branch-4.0 (storage reads cached "
        "only for cursors close together in backlog, off by default; backlogged cursors inactive; the cache cleared when "
        "the last active cursor leaves; ranges served all or nothing), `pip430` is master (a redelivery read is never "
        "cached; only a Key_Shared hold-back adds an expected read), `segmented` is PIP-174's PR #15955 (cached on "
        "publish only, ranges all or nothing); `lru` and `belady` are reference designs that admit everything.",
        "",
    ]
    configs = [json.loads(c) for c in summary.column("config").to_pylist()] if "config" in summary.column_names else []
    for name, what, shipped in DEPARTURES:
        values = sorted({repr(c.get(name)) for c in configs if c.get(name) not in shipped})
        if values:
            lines.append(f"- **Not as Pulsar ships it:** `{name}` = {', '.join(values)} in some runs: {what}.")
        else:
            lines.append(f"- `{name}` is off in every run, as Pulsar ships it (on, it would {what}).")
    return lines + [""]


def _table(columns: tuple, rows: list[dict]) -> tuple[list[str], list[str]]:
    """A table as Markdown lines and as HTML lines."""
    md = ["| " + " | ".join(h for h, _, _ in columns) + " |", "|" + "---|" * len(columns)]
    md += ["| " + " | ".join(fmt(r[key]) for _, key, fmt in columns) + " |" for r in rows]
    body = ["<table border='1' cellspacing='0' cellpadding='4'>",
            "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in columns) + "</tr>"]
    body += ["<tr>" + "".join(f"<td>{html.escape(fmt(r[key]))}</td>" for _, key, fmt in columns) + "</tr>" for r in rows]
    body.append("</table>")
    return md, body


def _publish_section(publish: pa.Table, title: str) -> tuple[list[str], list[str]]:
    table_md, table_body = _table(PUBLISH_COLUMNS, publish.to_pylist())
    md = [f"## {title}", "",
          "Publish delays with the limiter in each mode. Topics under their quota that still wait are waiting for a "
          "neighbour on their connection.", "", *table_md, ""]
    return md, [f"<h2>{html.escape(title)}</h2>", *table_body]


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

    ``summary`` and ``series`` are what :func:`ledgercache.replay` returns (with timeseries), with
    an optional ``scenario`` column to group the tables and plots. ``publish`` adds a section of
    publish delays (:func:`ledgercache.publish.compare_modes`), modes side by side. With
    ``target_hit_ratio``, each scenario also gets the smallest cache per strategy that reaches it
    (:func:`smallest_sizes`). The plots need
    matplotlib (the ``lab`` extra): without it, :class:`~ledgercache.errors.MissingDependencyError`
    is raised before anything is written.
    """
    _extras.require("ledgercache.report.write_report", _extras.REPORT)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    smallest = smallest_sizes(summary, target_hit_ratio) if target_hit_ratio is not None else []
    model = _model_section(summary)
    md = [f"# {title}", "", *model]
    body = [f"<h1>{html.escape(title)}</h1>", f"<h2>{html.escape(model[0][3:])}</h2>",
            *(f"<p>{html.escape(line)}</p>" for line in model[2:] if line)]
    for scenario in _scenarios(summary):
        rows = _rows(summary, scenario)
        table_md, table_body = _table(COLUMNS, rows)
        md += [f"## {scenario}", "", *table_md, ""]
        body += [f"<h2>{html.escape(scenario)}</h2>", *table_body]
        if target_hit_ratio is not None:
            heading = f"Smallest cache with hit ratio >= {target_hit_ratio:g} (of the sizes run)"
            sweep_md, sweep_body = _table(SWEEP_COLUMNS, [r for r in smallest if r["scenario"] == scenario])
            md += [f"### {heading}", "", *sweep_md, ""]
            body += [f"<h3>{html.escape(heading)}</h3>", *sweep_body]
        for name, caption in _plots(rows, series, scenario, out):
            md += [f"![{caption}]({name})", ""]
            body.append(f"<p><img src='{name}' alt='{html.escape(caption)}'></p>")
    if publish is not None:
        section_md, section_body = _publish_section(publish, publish_title)
        md += section_md
        body += section_body
    (out / "report.md").write_text("\n".join(md))
    (out / "report.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>" + html.escape(title) + "</title></head><body>"
        + "\n".join(body) + "</body></html>"
    )
    return out / "report.md"
