"""The report's plots, one style for every report: designs named and coloured as everywhere
(:func:`ledgercache.designs`; the designs a broker runs in solid lines, the others dashed), cache
sizes in binary units on a log axis, the legend below the axes (it covers no data), a target
line where a target was given. Each helper writes one PNG and returns its path; they need
matplotlib (the ``lab`` extra)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .report_common import MIB, design_info, design_label, design_order, format_size, is_broker_design

__all__ = [
    "design_style",
    "size_axis",
    "legend_below",
    "save",
    "plot_by_size",
    "plot_over_time",
    "group_style",
    "plot_lifecycle",
    "plot_beside_reference",
    "EVENT_MARKS",
]

# Colours by strategy name, fixed so that every report draws a design in the same colour (LRU green, PIP-430 red, ...); a design without one gets a spare colour.
_COLOURS = {"belady": "C0", "legacy": "C1", "lru": "C2", "pip430": "C3", "pip430-fifo": "C4", "segmented": "C5"}
_SPARE = ("C6", "C7", "C8", "C9")


def _centred_note(ax, text: str) -> None:
    """A grey note in the middle of a panel that has nothing (or nothing distinct) to draw."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize="small", color="dimgrey")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def design_style(name: str) -> dict:
    """Matplotlib keyword arguments for a design's line: its label (:func:`ledgercache.designs`),
    colour, and a solid line for a design a broker runs, dashed for a proposal, dash-dotted for a
    reference, dotted for a bound."""
    colour = _COLOURS.get(name) or _SPARE[sum(map(ord, name)) % len(_SPARE)]
    broker = is_broker_design(name)
    role = design_info(name)["role"]
    dash = "-" if broker else {"reference": "-.", "bound": (0, (1, 1.5))}.get(role, "--")
    return {
        "label": design_label(name),
        "color": colour,
        "linestyle": dash,
        "linewidth": 2.2 if broker else 1.4,
        "marker": "o" if broker else "s",
        "markersize": 5 if broker else 4,
    }


def size_axis(ax, sizes: Sequence[int], axis: str = "x") -> None:
    """A log-2 axis of cache sizes labelled in binary units (``512 MiB``, ``2 GiB``); with more than
    six sizes the labels are rotated, with more than twelve every other one is shown (the largest always)."""
    sizes = sorted(set(sizes))
    step = 2 if len(sizes) > 12 else 1
    # Counted from the largest size, so the last label is shown and the gaps stay even.
    labels = [format_size(z) if (len(sizes) - 1 - i) % step == 0 else "" for i, z in enumerate(sizes)]
    set_scale, set_ticks = (ax.set_xscale, ax.set_xticks) if axis == "x" else (ax.set_yscale, ax.set_yticks)
    if len(sizes) > 1:
        set_scale("log", base=2)
    set_ticks([z / MIB for z in sizes], labels, minor=False)
    set_ticks([], minor=True)
    if axis == "x" and len(sizes) > 6:
        for t in ax.get_xticklabels():
            t.set_rotation(40)
            t.set_horizontalalignment("right")
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)("cache size")


def legend_below(fig, axes, ncol: int = 2) -> None:
    """One legend for the figure, below its axes (so it covers no data), broker designs first."""
    handles, labels, seen = [], [], set()
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in seen:
                seen.add(lab)
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(
            handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol, fontsize="small", frameon=False
        )


def _line_label(ax, y: float, text: str, colour: str) -> None:
    """A horizontal line's label in the margin right of the axes, where it covers no data."""
    ax.annotate(
        text,
        xy=(1.0, y),
        xycoords=("axes fraction", "data"),
        xytext=(4, 0),
        textcoords="offset points",
        ha="left",
        va="center",
        fontsize="small",
        color=colour,
    )


def save(fig, path: str | Path) -> Path:
    """Saves a figure as PNG (tight, so a legend below the axes is kept) and closes it."""
    plt = _pyplot()
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    return Path(path)


def plot_by_size(
    rows: Iterable[Mapping],
    path: str | Path,
    *,
    title: str,
    panels: Sequence[tuple[str, str]] = (("hit_ratio", "hit ratio"),),
    target: float | None = None,
    lines: Mapping[str, tuple[float, str]] | None = None,
    width: float = 6.4,
) -> Path:
    """One line per design of a value against cache size, a panel per ``(key, axis label)`` of
    ``panels``, side by side. ``rows`` are dicts with ``strategy``, ``cache_size_bytes`` and each
    panel's key. ``target`` draws a horizontal "target" line on the first panel; ``lines`` maps a
    panel's key to a horizontal reference line ``(value, label)`` (e.g. the reads with no cache)."""
    plt = _pyplot()
    rows = list(rows)
    sizes = sorted({r["cache_size_bytes"] for r in rows})
    fig, axes = plt.subplots(
        1, len(panels), figsize=(width if len(panels) == 1 else 5.4 * len(panels), 4.2), squeeze=False
    )
    axes = list(axes[0])
    for i, (ax, (key, ylabel)) in enumerate(zip(axes, panels, strict=True)):
        drawn = []
        for s in design_order(r["strategy"] for r in rows):
            pts = sorted((r["cache_size_bytes"], r[key]) for r in rows if r["strategy"] == s and r.get(key) is not None)
            if pts:
                ax.plot([p[0] / MIB for p in pts], [p[1] for p in pts], **design_style(s))
                drawn.append([round(p[1], 6) for p in pts])
        if len(drawn) > 1 and all(d == drawn[0] for d in drawn):
            _centred_note(ax, "every design the same here:\nthe lines lie on one another")
        if i == 0 and target is not None:
            ax.axhline(target, color="black", linestyle=":", linewidth=1.3)
            _line_label(ax, target, f"target\n{target:g}", "black")
        if lines and key in lines:
            value, label = lines[key]
            ax.axhline(value, color="grey", linestyle=":", linewidth=1.3)
            _line_label(ax, value, label, "dimgrey")
            ax.set_ylim(top=max(ax.get_ylim()[1], value * 1.12))
        size_axis(ax, sizes)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        if key == "hit_ratio":
            ax.set_ylim(0, 1.06)
        ax.grid(True, alpha=0.3)
        ax.ticklabel_format(axis="y", style="plain", useOffset=False) if key != "hit_ratio" else None
    fig.suptitle(title, fontsize="medium")
    legend_below(fig, axes, ncol=3 if len(panels) > 1 else 2)
    return save(fig, path)


def plot_over_time(
    series: Mapping[str, Sequence[tuple[float, float]]],
    path: str | Path,
    *,
    title: str,
    ylabel: str,
    limit: tuple[float, str] | None = None,
    xlabel: str = "trace second",
) -> Path:
    """One line per design (``series`` maps a strategy name to ``(x, y)`` points) over time;
    ``limit`` a horizontal line ``(value, label)`` such as the cache size."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for s in design_order(series):
        pts = sorted(series[s])
        style = design_style(s) | {"marker": None}
        ax.plot([p[0] for p in pts], [p[1] for p in pts], **style)
    if limit is not None:
        ax.axhline(limit[0], color="black", linestyle=":", linewidth=1.2)
        _line_label(ax, limit[0], limit[1], "black")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0, top=max([ax.get_ylim()[1]] + ([limit[0] * 1.08] if limit else [])))
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize="medium")
    legend_below(fig, [ax])
    return save(fig, path)


# Named configurations (a scenario's SCENARIO_CONFIGS) have no design colour: each gets one of these
# in the order the run lists them, so a report draws them alike in every plot.
_NAMED_COLOURS = ("C3", "C1", "C0", "C2", "C4", "C5", "C6", "C7", "C8", "C9")
# How a lifecycle event is marked on a time plot: (series column, label, colour, line style).
EVENT_MARKS = (
    ("unloads", "topic unloaded", "firebrick", "--"),
    ("loads", "topic loaded", "seagreen", "-."),
    ("reopens", "consumers reconnected", "dimgrey", ":"),
)


def group_style(name: str, names: Sequence[str]) -> dict:
    """A line's style for a group of runs: a design's own (:func:`design_style`), or for a named
    configuration a colour by its place in ``names``, solid."""
    if design_info(name)["role"] != "unknown":
        return design_style(name) | {"marker": None}
    i = list(names).index(name) if name in names else len(names)
    return {"label": name, "color": _NAMED_COLOURS[i % len(_NAMED_COLOURS)], "linestyle": "-", "linewidth": 1.8}


def plot_lifecycle(
    groups: Mapping[str, Mapping[int, Mapping[str, float | None]]],
    events: Mapping[str, Sequence[int]],
    path: str | Path,
    *,
    title: str,
    limit: tuple[float, str] | None = None,
    xlabel: str = "trace second",
) -> Path:
    """Runs over time with the broker's lifecycle events marked: per group (a design or a named
    configuration, in the mapping's order) and second, ``hit_ratio``, ``storage_reads`` (entries
    read from storage), ``cache_mib`` and ``time_to_warm`` (seconds; on event seconds only). Four
    panels: the hit ratio, the storage reads, the cached MiB (``limit``: the cache size line) and
    the time to warm after each event; ``events`` maps an :data:`EVENT_MARKS` column to the
    seconds it happened in, drawn as vertical lines on every panel."""
    plt = _pyplot()
    names = list(groups)
    panels = (
        ("hit_ratio", "hit ratio"),
        ("storage_reads", "storage reads (entries/s)"),
        ("cache_mib", "cached MiB"),
        ("time_to_warm", "time to warm (s)"),
    )
    fig, axes = plt.subplots(len(panels), 1, figsize=(9.6, 11.5), sharex=True)
    for ax, (key, ylabel) in zip(axes, panels, strict=True):
        drawn: dict[str, list[tuple[int, float]]] = {}
        for name in names:
            pts = sorted((s, v[key]) for s, v in groups[name].items() if v.get(key) is not None)
            if not pts:
                continue
            drawn[name] = [(x, round(float(y), 6)) for x, y in pts if y is not None]
            style = group_style(name, names)
            if key == "time_to_warm":
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    linestyle="none",
                    marker="o",
                    markersize=6,
                    color=style["color"],
                    label=style["label"],
                )
                for x, y in pts:
                    ax.annotate(f"{y:g}", (x, y), xytext=(3, 3), textcoords="offset points", fontsize="x-small")
            else:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], **style)
        for column, label, colour, dash in EVENT_MARKS:
            for i, second in enumerate(sorted(events.get(column, ()))):
                ax.axvline(
                    second, color=colour, linestyle=dash, linewidth=1.0, alpha=0.8, label=label if i == 0 else None
                )
        if key == "cache_mib" and limit is not None:
            ax.axhline(limit[0], color="black", linestyle=":", linewidth=1.2)
            _line_label(ax, limit[0], limit[1], "black")
        if key == "hit_ratio":
            ax.set_ylim(0, 1.06)
        elif key == "time_to_warm":
            # Whole seconds: an axis of at least one, so that 0 reads as "back within the second".
            ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1.1))
        else:
            ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], (limit[0] * 1.08) if key == "cache_mib" and limit else 0))
        _same_lines_note(ax, drawn, top=key != "hit_ratio")
        if key == "time_to_warm" and not drawn:
            _centred_note(ax, "no time to warm in these results\n(no event, or a replay without that column)")
        elif key == "time_to_warm" and all(y == 0 for pts in drawn.values() for _, y in pts):
            _centred_note(ax, "every event: back within 0.05 of its hit ratio by the next second\n(time to warm 0 s)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel(xlabel)
    fig.suptitle(title, fontsize="medium")
    legend_below(fig, list(axes), ncol=4)
    return save(fig, path)


def _same_lines_note(ax, drawn: Mapping[str, list[tuple[int, float]]], *, top: bool) -> None:
    """Names the groups whose lines are the same points, drawn under the last of them: otherwise
    a legend lists colours the panel does not show."""
    same: dict[tuple, list[str]] = {}
    for name, pts in drawn.items():
        same.setdefault(tuple(pts), []).append(name)
    alike = [names for names in same.values() if len(names) > 1]
    if not alike:
        return
    text = "\n".join("one line: " + ", ".join(names) for names in alike)
    ax.text(
        0.01,
        0.97 if top else 0.03,
        text,
        transform=ax.transAxes,
        va="top" if top else "bottom",
        ha="left",
        fontsize="x-small",
        color="0.3",
        bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.85},
    )


def plot_beside_reference(
    names: Sequence[str],
    bars: Mapping[str, Sequence[float | None]],
    path: str | Path,
    *,
    title: str,
    ylabel: str,
    colours: Mapping[str, str] | None = None,
) -> Path:
    """Grouped bars: per name (a named configuration) one bar per source (``bars`` maps a source,
    say "lab" or one of Pulsar's runs, to a value per name; None: not given, no bar). ``colours``
    fixes a source's colour across plots (by default the first red, the others greys)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.6, 4.4))
    width = 0.8 / max(1, len(bars))
    for j, (source, values) in enumerate(bars.items()):
        xs = [i + (j - (len(bars) - 1) / 2) * width for i in range(len(names))]
        colour = (colours or {}).get(source) or ("C3" if j == 0 else str(0.25 + 0.5 * (j - 1) / max(1, len(bars) - 2)))
        labelled = False
        for x, v in zip(xs, values, strict=True):
            if v is None:
                continue
            ax.bar(x, v, width=width * 0.95, color=colour, label=None if labelled else source)
            labelled = True
            ax.annotate(f"{v:.2f}", (x, v), xytext=(0, 2), textcoords="offset points", ha="center", fontsize="x-small")
    ax.set_xticks(range(len(names)), list(names))
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.1 * max([v for vs in bars.values() for v in vs if v is not None] + [1e-9]))
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(title, fontsize="medium")
    legend_below(fig, [ax], ncol=4)
    return save(fig, path)
