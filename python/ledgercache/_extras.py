"""Optional dependencies: the ``lab`` extra (``pip install "ledgercache[lab]"``).

The library needs only pyarrow and numpy. Spark jobs (:mod:`ledgercache.spark`) need pyspark and
pandas, reports (:func:`ledgercache.report.write_report`) need matplotlib and markdown; each checks for them before
it does any work and raises :class:`~ledgercache.errors.MissingDependencyError`, naming the extra.
"""

from __future__ import annotations

import importlib

from .errors import MissingDependencyError

LAB_INSTALL = 'pip install "ledgercache[lab]"'

SPARK = ("pyspark", "pandas")  # pandas: what Spark's mapInArrow checks for
REPORT = ("matplotlib", "markdown")


def require(what: str, modules: tuple[str, ...] | list[str]) -> None:
    """Imports each of ``modules``; raises one error naming every missing one and the lab extra."""
    absent: list[str] = []
    broken: list[str] = []
    for name in dict.fromkeys(modules):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            gone = exc.name if isinstance(exc, ModuleNotFoundError) else None
            if gone and (name == gone or name.startswith(gone + ".")):
                absent.append(name)
            else:  # installed, but it fails to import (one of its own dependencies is missing, ...)
                broken.append(f"{name} (fails to import: {exc})")
    if absent or broken:
        parts = ([f"{', '.join(absent)} (not installed)"] if absent else []) + broken
        raise MissingDependencyError(
            f"{what} needs {', '.join(parts)}; install the lab extra: {LAB_INSTALL}",
            missing=tuple(absent) + tuple(b.split(" ", 1)[0] for b in broken),
        )
