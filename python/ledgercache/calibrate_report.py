"""How a :class:`~ledgercache.calibrate.Calibration` reads: in the terminal (the answer first, then
a top-N) and as a report (the same, then every table, plots).

Order, in both: what to check first (the stats and metrics disagree), the answer in plain words
(the design and size the broker runs, the lab's fit to it, and per design a broker can run what
to change, with its verdict against the fit), the fit's figures, the sweep, the references no
broker runs, the topics, the notes. Designs are named as operators know them (``lc.designs()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .broker_stats import _counted
from .report_common import MIB, _designs, design_label, md_escape
from .report_common import format_size as _size
from .report_html import markdown_table, write_page
from .report_plots import _pyplot, design_style, legend_below, save, size_axis

if TYPE_CHECKING:
    from .calibrate import Calibration

__all__ = ["BEHIND_SECONDS", "TOP_TOPICS", "headline", "render", "write"]

#: Topics the terminal lists (the report lists them all).
TOP_TOPICS = 10
#: A subscription whose backlog is more than this many seconds of publishing reads behind the tail.
BEHIND_SECONDS = 10


def _labels() -> dict[str, str]:
    return {d["name"]: design_label(d["name"]) for d in _designs()}


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v + 0.0:,.1f}".replace("-0.0", "0.0")


def _mbps(reads: float, entry_bytes: float) -> str:
    return f"{reads * entry_bytes / 1e6:,.2f} MB/s" if entry_bytes > 0 else "? MB/s"


def _table(markdown: bool, header: list[str], rows: list[list[str]]) -> list[str]:
    if markdown:
        return markdown_table([md_escape(x) for x in header], [[md_escape(x) for x in r] for r in rows])
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    fmt = lambda r: "  ".join(
        x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths, strict=True))
    )
    return [fmt(header)] + [fmt(r) for r in rows]


def _fit_words(c: Calibration) -> str:
    f = c.fit
    if f is None:
        return ""
    rel = f.relative_gap
    gap = f"{f.storage_reads_gap:+,.1f} reads/s" + (f" ({rel:+.0%})" if rel is not None else "")
    meaning = {
        "close": "close enough to act on",
        "rough": "rough: act on large differences only",
        "poor": "poor: the lab's model does not yet describe this broker; changes it suggests are withheld "
        "or qualified",
    }[f.quality]
    return (
        f"The lab predicts a hit ratio of {_ratio(f.predicted_hit_ratio)} where the broker observed "
        f"{_ratio(f.observed_hit_ratio)}, and {_rate(f.predicted_storage_reads)} storage reads/s where it "
        f"observed {_rate(f.observed_storage_reads)}: a gap of {gap}. Fit: {meaning}."
    )


def headline(c: Calibration, labels: dict[str, str]) -> str:
    """The answer in one sentence: the best change a broker can make that the fit supports, or why none."""
    cur = c.current
    now = f"{labels.get(cur.strategy, cur.strategy)} at {_size(cur.cache_size_bytes)}"
    acted = [r for r in c.recommendations if r["verdict"] in ("recommended", "qualified")]
    prefix = "First make the stats and the metrics agree (below); until then: " if c.mismatches else ""
    if c.current.reads_per_second == 0:
        return (
            f"{prefix}nothing to recommend: in the workload the stats describe, no subscription reads "
            f"(the broker's cache reads come from elsewhere; see the notes)"
        )
    if not acted:
        withheld = [r for r in c.recommendations if r["verdict"] == "withheld"]
        why = (
            "the lab withholds the changes it sees: " + withheld[0]["why"]
            if withheld
            else "no design a broker runs does better"
        )
        return f"{prefix}keep {now}: {why}."
    best = max(acted, key=lambda r: (r["storage_reads_saved_per_second"], -r["cache_size_bytes"]))
    saved = best["storage_reads_saved_per_second"]
    effect = (
        f"{_rate(saved)} fewer storage reads/s ({_mbps(saved, c.entry_bytes)})"
        if saved > 0.05
        else f"the same storage reads with {_size(cur.cache_size_bytes - best['cache_size_bytes'])} less memory"
    )
    word = "move to" if best["verdict"] == "recommended" else "consider (within twice the lab's error)"
    return f"{prefix}{word} {labels.get(best['strategy'], best['strategy'])} at {_size(best['cache_size_bytes'])}: {effect}."


def _answer(c: Calibration, labels: dict[str, str], bullet: str) -> list[str]:
    cur = c.current
    first = headline(c, labels)
    lines = [
        first[0].upper() + first[1:],
        "",
        f"The broker runs {labels.get(cur.strategy, cur.strategy)} with a {_size(cur.cache_size_bytes)} cache "
        f"({c.design_source}; size: {c.size_source}).",
        "",
        _fit_words(c),
        "",
    ]
    for r in c.recommendations:
        label = labels.get(r["strategy"], r["strategy"])
        saved = r["storage_reads_saved_per_second"]
        effect = (
            f"saves {_rate(saved)} storage reads/s ({_mbps(saved, c.entry_bytes)})"
            if saved > 0.05
            else f"costs {_rate(-saved)} more storage reads/s"
            if saved < -0.05
            else "the same storage reads"
        )
        lines.append(
            f"{bullet}{label} at {_size(r['cache_size_bytes'])}: hit ratio {_ratio(r['hit_ratio'])}, {effect} "
            f"against now. Verdict: {r['verdict']}: {r['why']}."
        )
    if not c.recommendations and c.current.reads_per_second > 0:
        lines.append("No design a broker can run was swept (add --strategy pip430 or legacy).")
    return lines


def _topic_rows(c: Calibration) -> list[dict[str, Any]]:
    """Topics ranked by the reads most likely to reach storage: dispatch of the subscriptions
    whose backlog is more than :data:`BEHIND_SECONDS` of publishing (their reads run behind the
    tail, where a cache holds least). The lab counts cache misses broker-wide, not per topic."""
    rows: list[dict[str, Any]] = []
    for t in c.stats.topics:
        behind = [s for s in t.subscriptions if s.msg_backlog > max(1.0, BEHIND_SECONDS * t.msg_rate_in)]
        rows.append(
            {
                "topic": t.name,
                "rate_in": t.msg_rate_in,
                "rate_out": t.msg_rate_out,
                "behind_rate": sum(s.msg_rate_out for s in behind),
                "backlog": sum(s.msg_backlog for s in t.subscriptions),
                "subs_behind": len(behind),
                "subs": len(t.subscriptions),
            }
        )
    rows.sort(key=lambda r: (-r["behind_rate"], -r["backlog"], r["topic"]))
    return rows


def render(
    c: Calibration, markdown: bool, top: int | None = TOP_TOPICS, plots: Sequence[tuple[str, str]] = ()
) -> list[str]:
    """The calibration as lines of text (``markdown=False``: for the terminal, ``top`` topics) or
    Markdown (every topic; ``plots`` as ``(title, file name)`` pairs to show)."""
    labels = _labels()
    h1 = (lambda s: f"# {s}") if markdown else (lambda s: s.upper())
    h = (lambda s: f"## {s}") if markdown else (lambda s: s + ":")
    bullet = "- " if markdown else "  * "
    lines: list[str] = []
    subs = sum(len(t.subscriptions) for t in c.stats.topics)
    lines += [h1("Your broker"), ""]
    if c.mismatches:
        lines += [h("Check first: the stats and the metrics disagree"), ""]
        lines += [bullet + m for m in c.mismatches] + [""]
    lines += [h("The answer"), "", *_answer(c, labels, bullet), ""]
    f = c.fit
    if f is not None:
        lines += [h("How well the lab fits this broker"), ""]
        lines += _table(
            markdown,
            ["", "observed (broker)", "predicted (lab)", "gap"],
            [
                [
                    "cache hit ratio",
                    _ratio(f.observed_hit_ratio),
                    _ratio(f.predicted_hit_ratio),
                    "-"
                    if f.observed_hit_ratio is None or f.predicted_hit_ratio is None
                    else f"{f.predicted_hit_ratio - f.observed_hit_ratio:+.3f}",
                ],
                [
                    "storage reads (entries/s)",
                    _rate(f.observed_storage_reads),
                    _rate(f.predicted_storage_reads),
                    f"{f.storage_reads_gap:+,.1f}"
                    + (f" ({f.relative_gap:+.0%})" if f.relative_gap is not None else ""),
                ],
                [
                    "cache reads (entries/s)",
                    _rate(c.observed.hits_rate + c.observed.misses_rate),
                    _rate(c.current.reads_per_second),
                    "",
                ],
            ],
        )
        lines += [
            "",
            f"{_counted(len(c.stats.topics), 'topic')}, {_counted(subs, 'subscription')}; simulated {c.window_seconds:.0f} s "
            f"after {c.spec.get('warmupDurationMinutes', 0.0) * 60:.0f} s of warm-up that builds the backlogs. "
            f"Settings: {c.settings_source}. Producer batching: {c.batching}."
            + (f" Broker version: {c.version}." if c.version else ""),
            "",
        ]
    lines += [h("Per design and cache size: hit ratio (storage reads/s)"), ""]
    designs = list(dict.fromkeys(p.strategy for p in c.sweep))
    sizes = sorted({p.cache_size_bytes for p in c.sweep})
    cell = {(p.strategy, p.cache_size_bytes): p for p in c.sweep}
    show = lambda d, s: (
        f"{_ratio(cell[d, s].hit_ratio)} ({_rate(cell[d, s].storage_reads_per_second)})" if (d, s) in cell else ""
    )
    lines += _table(
        markdown,
        ["cache size"] + [labels.get(d, d) for d in designs],
        [
            [_size(s) + (" (now)" if s == c.current.cache_size_bytes else "")] + [show(d, s) for d in designs]
            for s in sizes
        ],
    )
    if c.references:
        lines += ["", h("References no broker runs (for comparison only)"), ""]
        lines += [
            bullet + f"{labels.get(r['strategy'], r['strategy'])}: hit ratio {_ratio(r['hit_ratio'])} at "
            f"{_size(r['cache_size_bytes'])} ({_rate(r['storage_reads_saved_per_second'])} storage reads/s "
            f"fewer than now)"
            for r in c.references
        ]
    for title, name in plots:
        lines += ["", f"![{title}]({name})"]
    rows = _topic_rows(c)
    shown = rows if top is None else rows[:top]
    title = (
        "Topics, those reading furthest behind first"
        if top is None or len(rows) <= top
        else f"The {len(shown)} of {len(rows):,} topics reading furthest behind (every topic: the report)"
    )
    lines += ["", h(title), ""]
    lines += _table(
        markdown,
        [
            "topic",
            "publish msg/s",
            "dispatch msg/s",
            "dispatch behind the tail msg/s",
            "subscriptions behind",
            "backlog (entries)",
        ],
        [
            [
                r["topic"],
                _rate(r["rate_in"]),
                _rate(r["rate_out"]),
                _rate(r["behind_rate"]),
                f"{r['subs_behind']} of {r['subs']}",
                f"{r['backlog']:,}",
            ]
            for r in shown
        ],
    )
    if markdown:
        lines += [
            "",
            h(
                "The broker's stats beside the generated workload (messages/s; backlogs in entries, as "
                "Pulsar counts them)"
            ),
            "",
        ]
        lines += _table(
            markdown,
            ["topic", "subscription", "stats rate", "generated", "stats backlog", "generated"],
            [
                [
                    r["topic"],
                    r["subscription"] or "(publish)",
                    _rate(r["stats_rate"]),
                    _rate(r["generated_rate"]),
                    "" if r["stats_backlog"] is None else f"{r['stats_backlog']:,}",
                    "" if r["generated_backlog"] is None else f"{r['generated_backlog']:,}",
                ]
                for r in c.comparison_rows()
            ],
        )
    if c.notes:
        lines += ["", h("Notes"), ""] + [bullet + n for n in c.notes]
    return lines


def _plots(c: Calibration, out: Path) -> list[tuple[str, str]]:
    plt = _pyplot()
    designs = list(dict.fromkeys(p.strategy for p in c.sweep))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.4))
    for d in designs:
        runs = sorted(
            (p for p in c.sweep if p.strategy == d and p.hit_ratio is not None), key=lambda p: p.cache_size_bytes
        )
        xs = [p.cache_size_bytes / MIB for p in runs]  # size_axis places sizes in MiB
        ax1.plot(xs, [p.hit_ratio for p in runs], **design_style(d))
        ax2.plot(xs, [p.storage_reads_per_second for p in runs], **design_style(d))
    now = c.current.cache_size_bytes / MIB
    if c.observed.hit_ratio is not None:
        ax1.plot([now], [c.observed.hit_ratio], "k*", markersize=14, linestyle="none", label="observed (broker, now)")
    ax2.plot([now], [c.observed.misses_rate], "k*", markersize=14, linestyle="none", label="observed (broker, now)")
    sizes = sorted({p.cache_size_bytes for p in c.sweep} | {c.current.cache_size_bytes})
    for ax, ylabel in ((ax1, "cache hit ratio"), (ax2, "storage reads (entries/s)")):
        size_axis(ax, sizes)
        ax.axvline(now, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xlabel("cache size (dotted: the broker's now)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    if c.entry_bytes > 0:
        sec = ax2.secondary_yaxis(
            "right", functions=(lambda r: r * c.entry_bytes / 1e6, lambda m: m * 1e6 / c.entry_bytes)
        )
        sec.set_ylabel("MB/s read from storage")
    fig.suptitle("Your broker: each design over cache sizes, the broker's own figures as a star")
    legend_below(fig, [ax1, ax2], ncol=3)
    save(fig, out / "calibrate.png")
    return [("hit ratio and storage reads by cache size", "calibrate.png")]


def write(c: Calibration, out: Path) -> None:
    """Writes ``report.md``, ``report.html`` (one self-contained page, the plot embedded) and
    ``calibrate.png`` into ``out``."""

    plots = _plots(c, out)
    write_page(out, "\n".join(render(c, markdown=True, top=None, plots=plots)), title="Your broker")
