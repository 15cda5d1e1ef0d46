"""The examples in the README and the package docstring run as written."""

import doctest
import pathlib
import re

import ledgercache

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_readme_python_example_runs(capsys):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out.split("\n")
    assert out[0] == "b'hello' 2"
    assert out[1] == "True 1"


def test_package_docstring_examples():
    failures, tried = doctest.testmod(ledgercache, verbose=False)
    assert tried > 0 and failures == 0
