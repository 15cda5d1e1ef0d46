"""The examples in the README and the package docstring run as written."""

import doctest
import pathlib
import re

import ledgercache

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def run_block(block: str, capsys) -> list[str]:
    exec(compile(block, "README.md", "exec"), {})
    return capsys.readouterr().out.splitlines()


def test_readme_first_example(capsys):
    assert run_block(BLOCKS[0], capsys) == ["b'hello' 2", "True 1"]


def test_readme_arrow_batch_example(capsys):
    assert run_block(BLOCKS[1], capsys) == ["10000 b'order-42' True"]


def test_readme_topic_life_example_matches_its_script(capsys):
    script = (ROOT / "examples" / "topic_life.py").read_text()
    assert BLOCKS[2].strip() in script
    assert run_block(BLOCKS[2], capsys) == [
        "hits=5000 misses=1000 storage_reads=2 entries_from_storage=1000 backlog(reporting)=2000"
    ]


def test_package_docstring_examples():
    for module in (ledgercache, ledgercache.protocol, ledgercache.workload):
        failures, tried = doctest.testmod(module, verbose=False)
        assert tried > 0 and failures == 0, module.__name__


def test_readme_replay_lab_example(capsys):
    out = run_block(BLOCKS[3], capsys)
    assert out[0].split() == ["strategy", "hit_ratio", "storage_read_ops"]
    assert [line.split()[1] for line in out[1:]] == [d["name"] for d in ledgercache.designs()]


def test_readme_streaming_workload_example(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    block = next(b for b in BLOCKS if "lc.workload.stream" in b)
    estimate, belady = run_block(block, capsys)
    assert estimate.startswith("~") and estimate.endswith(" events") and belady == "True"
    written = sum(b.num_rows for b in ledgercache.trace.batches(tmp_path / "fan-out.parquet"))
    assert 0.5 < written / float(estimate[1:].split()[0].replace(",", "")) < 2


def test_readme_publish_throttling_example(capsys):
    block = next(b for b in BLOCKS if "noisy_neighbour" in b)
    paused, told = run_block(block, capsys)
    assert paused.startswith("pause-connection cold p99 ms:") and float(paused.split()[-1]) > 100
    assert told == "throttle-producer cold p99 ms: 0.0"


def test_fidelity_names_only_tests_that_exist():
    """Every test docs/fidelity.md cites (the last column of its tables) is a test in the tree."""
    sources = "\n".join(
        p.read_text() for d in ("tests", "src") for p in (ROOT / d).rglob("*") if p.suffix in (".rs", ".py")
    )
    defined = set(re.findall(r"(?:fn|def) (\w+)", sources))
    cited = set()
    for line in (ROOT / "docs" / "fidelity.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 4 and not set(cells[-1]) <= set("-"):
            cited.update(n for n in re.findall(r"`(\w+)`", cells[-1]) if not n[0].isupper())
    assert len(cited) > 30
    assert sorted(cited - defined) == []


def test_fidelity_lists_every_setting():
    text = (ROOT / "docs" / "fidelity.md").read_text()
    missing = [r["name"] for r in ledgercache.CacheConfig.settings() if f"| `{r['name']}` |" not in text]
    assert missing == []


def pulsar_ported_names() -> list[str]:
    """`Class.method` of every row `docs/pulsar-tests.md` marks ported, under its `## Class (...)`."""
    names, cls = [], None
    for line in (ROOT / "docs" / "pulsar-tests.md").read_text().splitlines():
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
