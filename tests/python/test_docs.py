"""The examples in the README, the docs pages and the package docstring run as written, and the
docs' lists (fidelity.md's tests, pulsar-tests.md's ports, the site's nav) cannot rot."""

import doctest
import json
import pathlib
import re

import pytest
import yaml

import ledgercache

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)


# Where each example lives: the README keeps one per kind of user; the pages keep the rest of what
# the README used to hold. A needle names an example by a line only it has.
README = ROOT / "README.md"
LIBRARY = DOCS / "library.md"
LAB = DOCS / "lab.md"
FIRST, ARROW, TOPIC_LIFE = "expected_reads=2)", "def cache_and_read", "topic.open_cursor"
LAB_REPLAY, STREAM, THROTTLE, SPARK = "pip430-fifo", "lc.workload.stream", "noisy_neighbour", "lc.spark.replay"
OPERATOR, RESTARTS = DOCS / "operator.md", "rollingRestartIntervalSeconds"
EXAMPLES = {
    README: (FIRST, TOPIC_LIFE, LAB_REPLAY, SPARK),
    LIBRARY: (FIRST, ARROW, TOPIC_LIFE),
    LAB: (LAB_REPLAY, STREAM, THROTTLE),
    OPERATOR: (RESTARTS,),
}


def block(path: pathlib.Path, needle: str) -> str:
    found = [b for b in python_blocks(path) if needle in b]
    assert len(found) == 1, f"{path.name}: {len(found)} python blocks hold {needle!r}"
    return found[0]


def run_block(path: pathlib.Path, needle: str, capsys) -> list[str]:
    exec(compile(block(path, needle), path.name, "exec"), {})
    return capsys.readouterr().out.splitlines()


def test_every_python_block_of_the_readme_and_the_pages_is_run_by_a_test():
    pages = [README, *sorted(DOCS.rglob("*.md"))]
    untested = [
        (p.name, b.splitlines()[0])
        for p in pages
        for b in python_blocks(p)
        if not any(n in b for n in EXAMPLES.get(p, ()))
    ]
    assert untested == []


def test_readme_is_a_five_minute_read():
    assert len(README.read_text().splitlines()) <= 250


@pytest.mark.parametrize("path", [README, LIBRARY], ids=lambda p: p.name)
def test_first_example(capsys, path):
    assert run_block(path, FIRST, capsys) == ["b'hello' 2", "True 1"]


def test_arrow_batch_example(capsys):
    assert run_block(LIBRARY, ARROW, capsys) == ["10000 b'order-42' True"]


@pytest.mark.parametrize("path", [README, LIBRARY], ids=lambda p: p.name)
def test_topic_life_example_matches_its_script(capsys, path):
    script = (ROOT / "examples" / "topic_life.py").read_text()
    assert block(path, TOPIC_LIFE).strip() in script
    assert run_block(path, TOPIC_LIFE, capsys) == [
        "hits=5000 misses=1000 storage_reads=2 entries_from_storage=1000 backlog(reporting)=2000"
    ]


def test_package_docstring_examples():
    for module in (ledgercache, ledgercache.protocol, ledgercache.workload):
        failures, tried = doctest.testmod(module, verbose=False)
        assert tried > 0 and failures == 0, module.__name__


@pytest.mark.parametrize("path", [README, LAB], ids=lambda p: p.name)
def test_replay_lab_example(capsys, path):
    out = run_block(path, LAB_REPLAY, capsys)
    assert out[0].split() == ["strategy", "hit_ratio", "storage_read_ops"]
    assert [line.split()[1] for line in out[1:]] == [d["name"] for d in ledgercache.designs()]


def test_streaming_workload_example(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    estimate, belady = run_block(LAB, STREAM, capsys)
    assert estimate.startswith("~") and estimate.endswith(" events") and belady == "True"
    written = sum(b.num_rows for b in ledgercache.trace.batches(tmp_path / "fan-out.parquet"))
    assert 0.5 < written / float(estimate[1:].split()[0].replace(",", "")) < 2


def test_operator_restarts_example(capsys, tmp_path, monkeypatch):
    # The operator's guide: a broker's stats with restarts and moves added, as a spec file that
    # `ledgercache compare` takes; the trace it gives has the topics unloaded and loaded.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stats.json").write_text((ROOT / "tests/data/broker/one-topic.stats.json").read_text())
    run_block(OPERATOR, RESTARTS, capsys)
    spec = json.loads((tmp_path / "restarts.json").read_text())
    assert (spec["brokers"], spec["rollingRestartIntervalSeconds"], spec["bundleMovesPerMinute"]) == (2, 60, 6)
    ops = set(ledgercache.workload.generate({**spec, "testDurationMinutes": 1.5}, seed=1)["op"].to_pylist())
    assert {"unload", "load"} <= ops, ops


def test_publish_throttling_example(capsys):
    paused, told = run_block(LAB, THROTTLE, capsys)
    assert paused.startswith("pause-connection cold p99 ms:") and float(paused.split()[-1]) > 100
    assert told == "throttle-producer cold p99 ms: 0.0"


def test_readme_pyspark_example_equals_the_in_process_replay(capsys):
    """The README's Spark example prints what lc.replay gives on the same trace."""
    pytest.importorskip("pyspark")
    namespace: dict = {}
    exec(compile(block(README, SPARK), "README.md", "exec"), namespace)
    printed = [line.split() for line in capsys.readouterr().out.splitlines()]
    try:
        local = ledgercache.replay(ledgercache.workload.generate(namespace["spec"], seed=1), namespace["configs"])
    finally:
        namespace["spark"].stop()
    expected = sorted(
        zip(local["broker"].to_pylist(), local["strategy"].to_pylist(), local["hit_ratio"].to_pylist(), strict=True)
    )
    assert [(b, s, float(h)) for b, s, h in printed] == expected
    assert len(expected) >= 2 and all(0 < h <= 1 for _, _, h in expected)


def test_fidelity_names_only_tests_that_exist():
    """Every test docs/fidelity.md cites (the last column of its tables) is a test in the tree."""
    sources = "\n".join(
        p.read_text() for d in ("tests", "src") for p in (ROOT / d).rglob("*") if p.suffix in (".rs", ".py")
    )
    defined = set(re.findall(r"(?:fn|def) (\w+)", sources))
    cited = set()
    for line in (DOCS / "fidelity.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 4 and not set(cells[-1]) <= set("-"):
            cited.update(n for n in re.findall(r"`(\w+)`", cells[-1]) if not n[0].isupper())
    assert len(cited) > 30
    assert sorted(cited - defined) == []


def test_fidelity_lists_every_setting():
    text = (DOCS / "fidelity.md").read_text()
    missing = [r["name"] for r in ledgercache.CacheConfig.settings() if f"| `{r['name']}` |" not in text]
    assert missing == []


def pulsar_ported_names() -> list[str]:
    """`Class.method` of every row `docs/pulsar-tests.md` marks ported, under its `## Class (...)`."""
    names, cls = [], None
    for line in (DOCS / "pulsar-tests.md").read_text().splitlines():
        header = re.match(r"## (\w+) \(", line)
        if header:
            cls = header.group(1)
            continue
        row = re.match(r"\| `(\w+)` \| (ported[^|]*)\|", line)
        if row and cls:
            names.append(f"{cls}.{row.group(1)}")
    return names


def test_every_pulsar_test_the_list_calls_ported_is_named_in_a_test():
    # The list in docs/pulsar-tests.md cannot rot: a port it claims names its Java class and method
    # (`Class.method`) in a test file of the tree.
    names = pulsar_ported_names()
    assert len(names) > 100
    files = [*(ROOT / "tests").rglob("*.rs"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "src").rglob("*.rs")]
    text = "\n".join(f.read_text() for f in files)
    missing = [n for n in names if not re.search(re.escape(n) + r"\b", text)]
    assert missing == []


def nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for v in nav.values() for p in nav_pages(v)]
    return [p for item in nav for p in nav_pages(item)]


def test_the_site_lists_every_page_and_every_page_it_lists_exists():
    nav = nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages


def test_readme_links_point_at_files_that_exist():
    targets = re.findall(r"\]\(((?:docs/|CHANGELOG)[^)#]*)", README.read_text())
    assert targets and [t for t in targets if not (ROOT / t).exists()] == []
