"""The report: it leads with the answer, names designs as lc.designs() does, renders to one
self-contained HTML page with no Markdown left, and its plots keep legends and labels off the data."""

import base64
import itertools
import math
import re
from html.parser import HTMLParser

import pyarrow as pa
import pytest

import ledgercache as lc
from ledgercache import report, report_common, report_plots

pytest.importorskip("matplotlib")
pytest.importorskip("markdown")

LABELS = {d["name"]: d["label"] for d in lc.designs()}
BROKER = {d["name"] for d in lc.designs() if d["role"] == "broker"}
OTHERS = set(LABELS) - BROKER


@pytest.fixture(scope="module")
def replayed():
    trace = lc.workload.generate({**lc.workload.SCENARIOS["shared-overflow"], "testDurationMinutes": 0.3}, seed=2)
    configs = [
        lc.CacheConfig(cache_size_bytes=z, strategy=s)
        for z in (1 << 20, 4 << 20)
        for s in ("pip430", "legacy", "lru", "segmented")
    ]
    summary, series = lc.replay(trace, configs, with_timeseries=True)
    return summary, series


def _section(text, heading):
    start = text.index(heading)
    nxt = text.find("\n## ", start + len(heading))
    return text[start:] if nxt < 0 else text[start:nxt]


def _recommendations(text):
    return [line for line in text.splitlines() if line.startswith("> **Recommendation")]


def test_the_report_opens_with_pip430_against_pulsar_40_in_the_summarys_numbers(replayed, tmp_path):
    summary, series = replayed
    text = report.write_report(summary, series, tmp_path).read_text()
    assert text.index("## The answer") < text.index("every run") < text.index("## How the designs are simulated")
    answer = _section(text, "## The answer")
    assert LABELS["pip430"] in answer and LABELS["legacy"] in answer
    seconds = report.run_seconds(series)
    assert seconds and seconds > 1
    for r in summary.to_pylist():
        if r["strategy"] in ("pip430", "legacy"):
            misses = r["entries_read"] - r["hits"]
            cell = (
                f"{r['hit_ratio']:.3f}; {report_common.format_rate(misses / seconds)} reads/s "
                f"({report_common.format_mib_rate(r['storage_read_bytes'] / seconds)})"
            )
            assert cell in answer, cell
    # The difference, a second, at each size.
    by = {(r["strategy"], r["cache_size_bytes"]): r for r in summary.to_pylist()}
    for z in (1 << 20, 4 << 20):
        a, b = by["pip430", z], by["legacy", z]
        saved = (b["entries_read"] - b["hits"]) - (a["entries_read"] - a["hits"])
        assert f"| {report_common.format_size(z)} |" in answer
        assert f"{report_common.format_rate(abs(saved) / seconds)} reads/s" in answer
    assert len(_recommendations(answer)) == 1
    assert "stops gaining at" in answer and "MiB/s" in answer


def _summary(rows):
    keys = ("entries_read", "read_bytes", "hits", "storage_read_ops", "storage_read_bytes", "evicted_entries")
    return pa.Table.from_pylist(
        [
            {
                "strategy": s,
                "cache_size_bytes": z,
                **dict.fromkeys(keys, 0),
                "entries_read": 1000,
                "hits": hits,
                "read_bytes": 10_000,
                "storage_read_bytes": 10 * (1000 - hits),
            }
            for s, z, hits in rows
        ]
    )


SIZES = (16 << 20, 64 << 20, 256 << 20)


@pytest.mark.parametrize("target", [None, 0.5, 0.9, 0.99])
@pytest.mark.parametrize(
    "case",
    [
        # The references and the bound beat every broker design at every size.
        {
            "belady": (990, 999, 1000),
            "lru": (950, 990, 995),
            "segmented": (900, 980, 999),
            "pip430": (600, 700, 705),
            "pip430-fifo": (500, 500, 500),
            "legacy": (20, 20, 20),
        },
        # Only the references and the proposal run.
        {"belady": (990, 999, 1000), "lru": (950, 990, 995), "segmented": (100, 300, 900)},
        # Pulsar 4.0's cache alone.
        {"legacy": (100, 400, 910), "lru": (950, 990, 995)},
    ],
)
def test_the_recommendation_never_names_a_design_no_broker_runs(case, target, tmp_path):
    summary = _summary([(s, z, h) for s, hits in case.items() for z, h in zip(SIZES, hits, strict=True)])
    text = report.answer_markdown(summary, None, target)
    recs = _recommendations(text)
    assert len(recs) == 1
    for name in OTHERS:
        assert LABELS[name] not in recs[0], (name, recs[0])
    if BROKER & set(case):
        assert any(LABELS[name] in recs[0] for name in BROKER & set(case))
    else:
        assert "Recommendation: none" in recs[0]
    # The others are still in the report, as what they are.
    for name in OTHERS & set(case):
        assert LABELS[name] in text


def test_recommendation_picks_the_smallest_broker_size_that_reaches_the_target():
    summary = _summary(
        [("pip430", z, h) for z, h in zip(SIZES, (800, 945, 950), strict=True)]
        + [("legacy", z, h) for z, h in zip(SIZES, (100, 200, 300), strict=True)]
        + [("lru", z, h) for z, h in zip(SIZES, (950, 990, 995), strict=True)]
    )
    rec = _recommendations(report.answer_markdown(summary, None, 0.9))[0]
    assert f"{LABELS['pip430']} with a 64 MiB cache**, the smallest size run that reaches hit ratio 0.9" in rec
    rec = _recommendations(report.answer_markdown(summary, None, 0.948))[0]
    assert f"{LABELS['pip430']} with a 256 MiB cache**, the smallest size run that reaches hit ratio 0.948" in rec
    # Without a target: where it stops gaining, within 0.01 of its best (0.95).
    rec = _recommendations(report.answer_markdown(summary, None, None))[0]
    assert f"{LABELS['pip430']} with a 64 MiB cache**, where it stops gaining" in rec
    assert f"Against {LABELS['legacy']} at that size (hit ratio 0.200" in rec
    rec = _recommendations(report.answer_markdown(summary, None, 0.97))[0]
    assert "no design a broker runs reaches hit ratio 0.97" in rec and LABELS["lru"] not in rec
    assert f"closest is **{LABELS['pip430']} with a 64 MiB cache**" in rec


def test_labels_come_from_lc_designs(replayed, tmp_path, monkeypatch):
    summary, series = replayed
    text = report.write_report(summary, series, tmp_path / "real").read_text()
    for name in set(summary.column("strategy").to_pylist()):
        assert LABELS[name] in text
    # Relabel every design: the report, the HTML and the plots' legends follow, nothing else is left.
    fake = tuple(d | {"label": f"Design {d['name'].upper()}"} for d in lc.designs())
    monkeypatch.setattr(report_common, "_designs", lambda: fake)
    legends = []
    save = report_plots.save

    def recording_save(fig, path):
        legends.extend(t.get_text() for legend in fig.legends for t in legend.get_texts())
        return save(fig, path)

    monkeypatch.setattr(report_plots, "save", recording_save)
    out = tmp_path / "relabelled"
    text = report.write_report(summary, series, out).read_text()
    page = (out / "report.html").read_text()
    for name in set(summary.column("strategy").to_pylist()):
        assert f"Design {name.upper()}" in text and f"Design {name.upper()}" in page
        assert f"Design {name.upper()}" in legends
        assert LABELS[name] not in text and LABELS[name] not in page, LABELS[name]
    assert set(legends) <= {f"Design {n.upper()}" for n in LABELS}


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.skip = 0
        self.chunks = []
        self.refs = []
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("style", "script"):
            self.skip += 1
        self.refs += [(tag, k, v) for k, v in attrs if k in ("src", "href", "srcset", "data", "action", "poster")]

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.chunks.append(data)


def _parse(page):
    p = _Text()
    p.feed(page)
    return p


@pytest.fixture(scope="module")
def full_report(replayed, tmp_path_factory):
    """A report with everything: two scenarios (one named with Markdown's special characters), a
    target, the publish section."""
    summary, series = replayed
    odd = "my_trace*v2|x"
    summary2 = pa.concat_tables(
        [summary.append_column("scenario", pa.array([name] * summary.num_rows)) for name in ("shared-overflow", odd)]
    )
    series2 = pa.concat_tables(
        [series.append_column("scenario", pa.array([name] * series.num_rows)) for name in ("shared-overflow", odd)]
    )
    publish = lc.publish.compare_modes(lc.publish.noisy_neighbour(), lc.publish.noisy_neighbour_limiter())
    out = tmp_path_factory.mktemp("full")
    report.write_report(
        summary2, series2, out, title="ledgercache: cache designs compared", publish=publish, target_hit_ratio=0.9
    )
    return out, odd


def test_no_markdown_syntax_survives_in_the_html(full_report):
    out, odd = full_report
    page = (out / "report.html").read_text()
    text = "".join(_parse(page).chunks)
    assert "**" not in text and "`" not in text
    for line in text.splitlines():
        s = line.strip()
        assert not s.startswith("- "), line
        assert not s.startswith("#"), line
        assert "|---" not in s and "---|" not in s and not s.startswith("|"), line
        assert not re.match(r"!?\[[^\]]*\]\(", s), line
    assert "## " not in text and "&lt;" not in text
    assert odd in text  # the scenario's name as written, not as Markdown read it
    assert "The answer" in text and "Recommendation" in text
    tags = _parse(page).tags
    assert tags.count("table") >= 6 and "ul" in tags and "blockquote" in tags and "h2" in tags


def test_the_html_is_one_file_with_every_image_embedded(full_report):
    out, _ = full_report
    page = (out / "report.html").read_text()
    parsed = _parse(page)
    assert "link" not in parsed.tags and "iframe" not in parsed.tags
    for tag, attr, value in parsed.refs:
        assert value.startswith("data:") or (attr == "href" and value.startswith("#")), (tag, attr, value[:80])
    assert "url(" not in page and "@import" not in page
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 6
    imgs = re.findall(r'<img[^>]*title="([^"]+)"[^>]*src="data:image/png;base64,([^"]+)"', page)
    assert sorted(name for name, _ in imgs) == sorted(p.name for p in pngs)
    for name, data in imgs:
        assert base64.b64decode(data) == (out / name).read_bytes()
    assert "<style>" in page and page.count("<html") == 1


def test_html_page_renders_and_embeds_for_other_reports(tmp_path):
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    page = report.html_page(
        "# Your broker\n\n- one\n- two\n\n"
        + "\n".join(report.markdown_table(["design", "hit ratio"], [[report.design_label("pip430"), "0.5"]]))
        + "\n\n![plot](a.png)\n\n![gone](b.png)\n",
        "Your broker",
        tmp_path,
    )
    assert "<title>Your broker</title>" in page and "<li>one</li>" in page and "<td>PIP-430 (Pulsar 4.1+)</td>" in page
    assert 'title="a.png" src="data:image/png;base64,' in page
    assert 'src="b.png"' in page  # not there: left as written
    md = report.write_page(tmp_path, "# x\n\n![plot](a.png)", "x", stem="calibration")
    assert md.name == "calibration.md" and "data:image/png" in (tmp_path / "calibration.html").read_text()


def _capture(monkeypatch):
    figs = []

    def keep(fig, path):
        fig.canvas.draw()
        figs.append(fig)
        fig.savefig(path, dpi=100, bbox_inches="tight")
        return path

    monkeypatch.setattr(report_plots, "save", keep)
    return figs


def _overlap(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_plots_keep_the_legend_off_the_data_and_the_size_labels_apart(monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    sizes = [(16 << 20) << i for i in range(15)]  # 16 MiB to 256 GiB: fifteen sizes, every other labelled
    rows = [
        {
            "strategy": s,
            "cache_size_bytes": z,
            "hit_ratio": min(1.0, 0.1 * (i + 1) + k * 0.05),
            "reads": 100.0 / (i + 1),
        }
        for k, s in enumerate(LABELS)
        for i, z in enumerate(sizes)
    ]
    report.plot_by_size(rows, tmp_path / "a.png", title="t", target=0.9)
    report.plot_by_size(
        rows,
        tmp_path / "b.png",
        title="t",
        panels=(("hit_ratio", "hit ratio"), ("reads", "reads/s")),
        lines={"reads": (120.0, "no cache")},
    )
    for fig in figs:
        renderer = fig.canvas.get_renderer()
        assert fig.legends, "a legend"
        legend = fig.legends[0].get_window_extent(renderer)
        for ax in fig.axes:
            assert not _overlap(legend, ax.get_window_extent(renderer)), "legend over the axes"
            labels = [t for t in ax.get_xticklabels() if t.get_text()]
            assert {t.get_text() for t in labels} >= {"16 MiB", "256 GiB"}
            boxes = [t.get_window_extent(renderer) for t in labels]
            rotation = labels[0].get_rotation()
            if rotation == 0:
                assert not any(_overlap(a, b) for a, b in itertools.pairwise(boxes)), "tick labels collide"
            else:  # parallel slanted lines of text: apart when their distance exceeds the text's height
                height = labels[0].get_fontsize() * fig.dpi / 72
                gaps = [(b.x1 - a.x1) * math.sin(math.radians(rotation)) for a, b in itertools.pairwise(boxes)]
                assert min(gaps) > height, ("tick labels collide", gaps, height)
        assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == sorted(LABELS.values())
    target = [ln for ln in figs[0].axes[0].get_lines() if list(ln.get_ydata()) == [0.9, 0.9]]
    assert target, "a target line at 0.9"


def test_run_seconds_and_rates(replayed):
    summary, series = replayed
    seconds = report.run_seconds(series)
    assert seconds == max(series.column("second").to_pylist()) - min(series.column("second").to_pylist()) + 1
    assert report.run_seconds(None) is None
    assert report.run_seconds(series, "no-such-scenario") is None
    # Without a duration the answer gives totals over the run, never a rate.
    text = report.answer_markdown(summary, None)
    assert "reads/s" not in text and "MiB/s" not in text and " reads (" in text


def test_a_design_still_gaining_at_the_largest_size_says_so():
    summary = _summary([("pip430", z, h) for z, h in zip(SIZES, (500, 700, 900), strict=True)])
    text = report.answer_markdown(summary)
    assert "with at least 256 MiB" in _recommendations(text)[0] and "still gaining" in text
    assert f"{LABELS['pip430']} against {LABELS['legacy']}: not both replayed" in text


def test_the_terminal_ends_with_the_answer(tmp_path):
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgercache.cli",
            "compare",
            "--local",
            "seek-storm",
            "-o",
            str(tmp_path / "out"),
            "--cache-size",
            "8MiB",
            "--cache-size",
            "64MiB",
            "--duration-minutes",
            "0.1",
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    tail = r.stdout.strip().splitlines()[-3:]
    assert tail[0].startswith("The answer")
    assert tail[1].startswith("  seek-storm: ") and "Pulsar 4.0 cache there" in tail[1]
    labels = {d["label"] for d in lc.designs() if d["role"] == "broker"}
    assert any(tail[1].startswith(f"  seek-storm: {label} at ") for label in labels)
    assert tail[2].startswith("report: ")
