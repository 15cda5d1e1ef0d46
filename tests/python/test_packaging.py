"""Packaging: the imports match the declared dependencies, and what needs the ``lab`` extra says so
before it does any work. (CI's `make wheel-check` installs the built wheel into a bare virtual
environment as well; this file checks the same promises from the source tree.)"""

import ast
import importlib.metadata
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ledgercache as lc
from ledgercache import _extras

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(lc.__file__).resolve().parent
LAB_MODULES = ("pyspark", "pandas", "matplotlib", "markdown")
tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower().replace("_", "-") for r in requirements}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Third-party top-level modules each file imports at import time, and inside functions."""
    eager: dict[str, set[str]] = {}
    lazy: dict[str, set[str]] = {}

    def visit(node: ast.AST, in_function: bool, path: str) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("ledgercache", "__future__"):
                    (lazy if in_function else eager).setdefault(top, set()).add(path)
            visit(child, nested, path)

    for path in sorted(PACKAGE.glob("*.py")):
        visit(ast.parse(path.read_text()), False, path.name)
    return eager, lazy


def _distribution(module: str) -> str:
    dists = importlib.metadata.packages_distributions().get(module, [module])
    return dists[0].lower().replace("_", "-")


def test_modules_imported_at_import_time_are_declared_dependencies():
    eager, _ = _imports()
    declared = _names(_project()["dependencies"])
    assert eager, "the AST walk found no imports at all"
    undeclared = {m: sorted(files) for m, files in eager.items() if _distribution(m) not in declared}
    assert not undeclared, f"imported at `import ledgercache` time but not in [project] dependencies: {undeclared}"


def test_lazy_imports_are_declared_and_checked_for_with_a_clear_error():
    _, lazy = _imports()
    project = _project()
    core = _names(project["dependencies"])
    lab = _names(project["optional-dependencies"]["lab"])
    undeclared = {m: sorted(f) for m, f in lazy.items() if _distribution(m) not in core | lab}
    assert not undeclared, f"imported inside functions but declared nowhere: {undeclared}"
    lab_only = {m for m in lazy if _distribution(m) not in core}
    assert lab_only <= set(_extras.SPARK + _extras.REPORT), "a lab module without a MissingDependencyError check"
    assert set(LAB_MODULES) <= {_distribution(m) for m in _extras.SPARK + _extras.REPORT}
    assert {"pyspark", "pandas", "matplotlib", "markdown"} <= lab


BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):  # as if these were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
"""


def run_without(blocked, code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter in which the ``blocked`` modules cannot be imported."""
    script = f"BLOCKED = {tuple(blocked)!r}\n{BLOCK}\n{textwrap.dedent(code)}"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_import_ledgercache_loads_no_lab_module(tmp_path):
    """Without pyspark, pandas and matplotlib, the library imports and replays; a report says what it needs."""
    r = run_without(
        LAB_MODULES,
        f"""
        import ledgercache as lc
        trace = lc.workload.generate({{"producerRate": 100, "testDurationMinutes": 0.05}}, seed=1)
        summary = lc.replay(trace, lc.CacheConfig(cache_size_bytes=1 << 20))
        assert summary.num_rows == 1, summary
        loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({LAB_MODULES!r}))
        assert not loaded, loaded
        try:
            lc.report.write_report(summary, None, "never-written")
        except lc.MissingDependencyError as e:
            print(e)
        """,
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []
    assert r.stdout.strip() == (
        "ledgercache.report.write_report needs matplotlib, markdown (not installed); install the lab extra: "
        'pip install "ledgercache[lab]"'
    )


def test_import_ledgercache_with_the_lab_installed_loads_no_lab_module():
    """pyarrow imports pandas (when installed) at its first conversion of Python objects, a fifth of
    a second: nothing the library does at import time converts, so `import ledgercache` stays light
    where the lab extra is installed too."""
    code = f"import sys, ledgercache; print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(LAB_MODULES)!r}))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("argv", "blocked", "needs"),
    [
        (["compare", "seek-storm", "--local"], ["matplotlib"], "matplotlib (not installed)"),
        (["compare", "seek-storm"], ["pyspark", "pandas"], "pyspark, pandas (not installed)"),
        (["compare", "seek-storm"], ["matplotlib", "pandas"], "matplotlib, pandas (not installed)"),
        (["demo"], ["matplotlib"], "matplotlib (not installed)"),
        (["demo"], ["markdown"], "markdown (not installed)"),
        (["calibrate", "--stats", "s.json", "--metrics", "m.txt"], ["markdown"], "markdown (not installed)"),
        (["generate", "seek-storm", "--spark"], ["pyspark"], "pyspark (not installed)"),
        (["replay", "trace.parquet", "--spark"], ["pandas"], "pandas (not installed)"),
    ],
)
def test_cli_without_the_lab_extra_fails_first_in_one_line_naming_it(tmp_path, argv, blocked, needs):
    r = run_without(
        blocked,
        f"""
        import ledgercache as lc
        from ledgercache import cli

        def no_work(*args, **kwargs):
            raise AssertionError("computed before checking for the lab extra")

        lc.workload.generate = lc.replay = lc.spark.generate = lc.spark.replay = no_work
        sys.exit(cli.main({[*argv, "-o", "out"]!r}))
        """,
        tmp_path,
    )
    assert r.returncode == 2, r.stderr
    assert (
        r.stderr
        == f'ledgercache: error: ledgercache {argv[0]} needs {needs}; install the lab extra: pip install "ledgercache[lab]"\n'
    )
    assert list(tmp_path.iterdir()) == []


def test_cli_commands_without_spark_or_report_need_no_lab_module(tmp_path):
    r = run_without(
        LAB_MODULES,
        """
        from ledgercache import cli
        assert cli.main(["generate", "seek-storm", "-o", "trace.parquet", "--duration-minutes", "0.05"]) == 0
        assert cli.main(["replay", "trace.parquet", "-o", "r", "--strategy", "lru", "--cache-size", "1MiB"]) == 0
        """,
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r" / "summary.parquet").exists()
    assert "hit ratio" in r.stdout


def test_an_installed_but_broken_lab_module_is_named_with_its_import_error(monkeypatch):
    import importlib

    real = importlib.import_module

    def fake(name, package=None):
        if name == "matplotlib":
            raise ModuleNotFoundError("No module named 'kiwisolver'", name="kiwisolver")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(
        lc.MissingDependencyError, match=r"matplotlib \(fails to import: No module named 'kiwisolver'\)"
    ) as e:
        _extras.require("the report", _extras.REPORT)
    assert isinstance(e.value, ImportError) and e.value.missing == ("matplotlib",)


def test_the_extension_allocates_with_mimalloc() -> None:
    """The wheel's build (pyproject's maturin features) makes mimalloc the extension's allocator:
    the eviction benchmark's owned payloads are freed at about half glibc's cost. A build without
    the feature would still pass every other test, so this one says which was built."""
    from ledgercache import _native

    assert "mimalloc" in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["maturin"]["features"]
    assert _native._allocator == "mimalloc"
