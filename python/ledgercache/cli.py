"""The ``ledgercache`` command: generate traces, replay them, compare cache designs, run the demo.

Errors print one line (``ledgercache: error: ...``) and exit with status 2; outputs are written to a
temporary place first and moved into place only when complete, so a failed or killed run leaves no
half-written file under an output's name. No command deletes or moves a file it did not write: an
output directory holding other files is refused unless ``--force`` (then they stay beside the
outputs), and only the files its manifest lists (:data:`MANIFEST`) are replaced. ``generate`` and ``replay`` need only the library; Spark runs (``--spark`` or
``--master``, and ``compare``/``demo`` without ``--local``) and reports (``compare``, ``demo``) need the ``lab`` extra
(``pip install "ledgercache[lab]"``), checked before anything is computed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

import ledgercache as lc

from . import __version__, _extras, calibrate_report
from ._native import designs as _designs

# The designs, in the registry's order (src/config/designs.rs).
ALL_STRATEGIES = tuple(d["name"] for d in _designs())
# Those whose replay reads the trace twice (the progress bar counts both passes).
TWO_PASS_STRATEGIES = frozenset(d["name"] for d in _designs() if d["reads_trace_twice"])
# Cache sizes for a trace or spec file that names none: a broker's cache, from a small one to a big
# one (Pulsar's default is a fifth of the direct memory). Bundled scenarios have their own
# (ledgercache.workload.SCENARIO_CACHE_SIZES).
DEFAULT_SIZES = ("32MiB", "128MiB", "512MiB", "2GiB")
# `ledgercache sweep`'s grid and target when none is given.
SWEEP_SIZES = "16MiB:4GiB"
SWEEP_TARGET = 0.9
# Sizes a --sizes grid may hold at most: each size is a replay of the whole trace per strategy.
MAX_GRID_SIZES = 64


class CliError(Exception):
    """A problem to report in one line."""


# Size units, any case. As the JVM reads -Xmx4g and Pulsar its ...MB keys (managedLedgerCacheSizeMB),
# k/m/g/t and KB/MB/GB/TB are binary, the same as KiB/MiB/GiB/TiB: a broker's "4GB" is 4 GiB, and a
# size copied from its settings means here what it means there.
_UNIT_SHIFT = {"b": 0}
for _shift, _letter in ((10, "k"), (20, "m"), (30, "g"), (40, "t")):
    _UNIT_SHIFT.update({_letter: _shift, _letter + "b": _shift, _letter + "ib": _shift})
_SIZE_NAMES = (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10))


def parse_size(text: str, what: str = "cache size") -> int:
    """Bytes from a size such as ``512MiB``, ``4g``, ``4GB`` (binary, as Pulsar and the JVM read
    them) or ``4096B``. A bare number is refused: ``4096`` read as bytes once made a 4 KiB cache of
    what was meant as 4096 MiB. ``what`` names the flag in the error."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m:
        raise CliError(f"invalid {what} {text!r}: use a number and a unit, e.g. 16MiB, 4GiB or 4096B")
    number, unit = m.group(1), m.group(2).lower()
    if not unit:
        raise CliError(f"invalid {what} {text!r}: a number needs a unit: write {number}B for bytes, or {number}MiB")
    if unit not in _UNIT_SHIFT:
        raise CliError(
            f"invalid {what} {text!r}: unknown unit {m.group(2)!r}: use B, KiB, MiB, GiB or TiB "
            f"(k/m/g/t and KB/MB/GB/TB are binary too)"
        )
    whole, _, fraction = number.partition(".")
    # Exact integer arithmetic (no float rounding of 1.1TiB); a fraction of a byte is dropped.
    return (int(whole + fraction) << _UNIT_SHIFT[unit]) // 10 ** len(fraction)


def format_size(n: int) -> str:
    """A size as the commands print what they parsed: ``512 MiB``, ``1.5 GiB``, or bytes when no
    binary unit says it exactly (to two decimals)."""
    for name, shift in _SIZE_NAMES:
        if n >= 1 << shift and (n * 100) % (1 << shift) == 0:
            return f"{n / (1 << shift):g} {name}"
    return f"{n:,} B"


def sizes_line(sizes: Iterable[int], label: str = "cache sizes") -> str:
    """The line a command prints with the sizes it parsed, so a unit read otherwise than meant shows."""
    return f"{label}: {', '.join(format_size(z) for z in sizes)}"


def parse_grid(text: str) -> list[int]:
    """``MIN:MAX`` or ``MIN:MAX:FACTOR``: sizes from MIN, each FACTOR (default 2) times the one
    before, up to MAX (included when the steps land on it)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise CliError(f"invalid --sizes {text!r}: use MIN:MAX or MIN:MAX:FACTOR, e.g. 16MiB:4GiB")
    low, high = (parse_size(part, f"--sizes {text!r}: size") for part in parts[:2])
    try:
        factor = float(parts[2]) if len(parts) == 3 else 2.0
    except ValueError:
        factor = 0.0
    if not factor > 1.0 or not math.isfinite(factor):
        raise CliError(f"invalid --sizes {text!r}: the factor must be a number above 1")
    if not 0 < low <= high:
        raise CliError(f"invalid --sizes {text!r}: MIN must be above 0 and at most MAX")
    sizes = [low]
    while sizes[-1] * factor <= high * (1 + 1e-9):
        sizes.append(round(sizes[-1] * factor))
        if len(sizes) > MAX_GRID_SIZES:
            raise CliError(f"invalid --sizes {text!r}: more than {MAX_GRID_SIZES} sizes; use a larger factor")
    return sizes


class Progress:
    """A progress bar on stderr (a line per step when stderr is not a terminal).

    Counted in steps (:meth:`step`), or in units such as events (:meth:`advance`, with ``unit``):
    then ``total`` may be an estimate, the bar stops at full until :meth:`finish`, and without a
    terminal a line is written every tenth of the total (or 10 seconds) instead of every step.
    """

    def __init__(self, total: int, quiet: bool = False, unit: str = "") -> None:
        self.total, self.done, self.quiet, self.start = total, 0, quiet, time.monotonic()
        self.unit, self.tty = unit, sys.stderr.isatty()
        self.shown_at, self.shown_done = self.start, 0

    def step(self, label: str) -> None:
        self.advance(1, label)

    def advance(self, n: int, label: str = "") -> None:
        self.done += n
        if self.quiet:
            return
        now = time.monotonic()
        if self.unit:
            if self.done >= self.total:
                return  # an estimate fell short: finish() shows the end
            due = now - self.shown_at >= (0.2 if self.tty else 10.0) or self.done - self.shown_done >= self.total / 10
            if not due:
                return
        self.shown_at, self.shown_done = now, self.done
        self._show(label, now)

    def finish(self, label: str = "") -> None:
        """Counted in units: the final line (the total becomes what was done)."""
        if self.quiet:
            return
        self.total = self.done
        self._show(label, time.monotonic(), final=True)

    def _show(self, label: str, now: float, final: bool = False) -> None:
        elapsed = now - self.start
        count = f"{self.done:,}/~{self.total:,} {self.unit}" if self.unit else f"{self.done}/{self.total}"
        if self.unit and self.done > 0 and self.done < self.total:
            left = elapsed * (self.total - self.done) / self.done
            count += f", ~{left:.0f}s left"
        if self.tty:
            width = 30
            filled = min(width, int(width * self.done / max(1, self.total)))
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {count} {elapsed:5.1f}s {label[:40]:<40}")
            if final or (not self.unit and self.done >= self.total):
                sys.stderr.write("\n")
        else:
            sys.stderr.write(f"[{count}] {elapsed:.1f}s {label}\n")
        sys.stderr.flush()


# The file in an output directory that lists what ledgercache wrote there (each file's size, mtime
# and SHA-256): what a later run may replace or remove. Everything else in the directory is the
# user's and is never touched.
MANIFEST = ".ledgercache-outputs.json"
# Outputs are written into a directory of this prefix inside the output directory (beside it when
# the directory is new), then moved into place file by file. One left by a killed run is only
# reported, never removed: another run may be writing into it right now.
STAGE_PREFIX = ".ledgercache-tmp."


_UMASK: list[int] = []


def _umask() -> int:
    """The process's umask: from /proc on Linux, else by setting it and setting it back (which a
    thread creating a file at that moment would see: so it is read once, and main() reads it first,
    before Spark starts its threads)."""
    if not _UMASK:
        try:
            with open("/proc/self/status") as f:
                _UMASK.append(next(int(line.split()[1], 8) for line in f if line.startswith("Umask:")))
        except (OSError, StopIteration, ValueError, IndexError):
            mask = os.umask(0o022)
            os.umask(mask)
            _UMASK.append(mask)
    return _UMASK[0]


def _follow_umask(path: Path, directory: bool = False) -> None:
    """mkstemp makes files 0600 and mkdtemp directories 0700; outputs get what open() and mkdir()
    would give them under the user's umask instead."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def _signature(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": _sha256(path)}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_manifest(out: Path) -> dict[str, list[dict]]:
    """Each file a run wrote into ``out``, with the signatures it may have (several while a commit
    is under way). A missing or unreadable manifest lists nothing: then nothing counts as ours."""

    try:
        files = json.loads((out / MANIFEST).read_text()).get("files", {})
        return {
            name: list(sigs)
            for name, sigs in files.items()
            if isinstance(name, str) and "/" not in name and isinstance(sigs, list)
        }
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _write_manifest(out: Path, files: dict[str, list[dict]]) -> None:
    text = json.dumps(
        {
            "written_by": f"ledgercache {__version__}",
            "note": "the files ledgercache wrote here; it replaces or removes only these",
            "files": files,
        },
        indent=1,
        sort_keys=True,
    )
    _atomic_file(out / MANIFEST, lambda tmp: Path(tmp).write_text(text + "\n"))


def _unchanged(path: Path, sigs: list[dict]) -> bool:
    """Whether ``path`` is a file as ledgercache left it: same size, and same mtime or, when it was
    copied or touched since, same content."""
    try:
        st = path.lstat()
    except OSError:
        return False

    if not stat.S_ISREG(st.st_mode):
        return False
    matching = [g for g in sigs if isinstance(g, dict) and g.get("size") == st.st_size]
    if any(g.get("mtime_ns") == st.st_mtime_ns for g in matching):
        return True
    return bool(matching) and _sha256(path) in {g.get("sha256") for g in matching}


def _survey(out: Path) -> tuple[dict[str, list[dict]], list[str], list[str]]:
    """What ``out`` holds: ledgercache's own files (unchanged since it wrote them, with their
    signatures), everyone else's names, and stage directories left by killed runs."""
    manifest = _read_manifest(out)
    ours: dict[str, list[dict]] = {}
    theirs, leftovers = [], []
    for entry in sorted(os.listdir(out)):
        if entry == MANIFEST or out / entry in _OWN_STAGES:
            continue
        if entry.startswith(STAGE_PREFIX) and (out / entry).is_dir():
            leftovers.append(entry)
        elif entry in manifest and _unchanged(out / entry, manifest[entry]):
            ours[entry] = manifest[entry]
        else:
            theirs.append(entry)
    return ours, theirs, leftovers


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


_NOTED: set[Path] = set()  # leftover stage directories already reported
_OWN_STAGES: set[Path] = set()  # this process's stage directories (not leftovers)


def check_output_dir(out: Path, force: bool, names: Iterable[str] = ()) -> None:
    """Refuses an output directory a run could not write into without touching someone else's files,
    before the run computes anything: a file in place of the directory; files ledgercache did not
    write (or changed since), unless ``force``; and, even with ``force``, one of them under a name
    the run writes (``names``)."""
    out = Path(out).absolute()
    if out.exists() and not out.is_dir():
        raise CliError(
            f"-o {out} is a file; the output is a directory: name a new directory "
            f"(ledgercache never replaces a file with its outputs)"
        )
    if not out.exists():
        return
    _, theirs, leftovers = _survey(out)
    clash = [n for n in names if n in theirs]
    if clash:
        raise CliError(
            f"-o {out} holds {_some(clash)}, which ledgercache did not write (or which changed since "
            f"it did), under a name it writes: move them away or choose another directory "
            f"(--force never replaces them)"
        )
    if theirs and not force:
        raise CliError(
            f"-o {out} holds files ledgercache did not write ({_some(theirs)}): choose a new or empty "
            f"directory, or add --force to write beside them (they are kept)"
        )
    for entry in leftovers:
        if out / entry in _NOTED:
            continue
        _NOTED.add(out / entry)
        print(
            f"ledgercache: note: {out / entry} was left by an interrupted run; delete it if no other run "
            f"is writing to {out}",
            file=sys.stderr,
        )


def write_outputs(out: Path, fill: Callable[[Path], None], force: bool = False) -> Path:
    """Writes a run's output files into directory ``out`` without losing anyone's data.

    ``fill`` writes the files (flat, no subdirectories) into a stage directory. A new ``out`` is
    the stage renamed into place, whole. An existing one gets each file by ``os.replace``, so a
    file under its final name is always complete (the old one, or the new one); files of an
    earlier run that this run does not write are removed, if unchanged since. Nothing else in
    ``out`` is touched: files ledgercache did not write refuse the run (:func:`check_output_dir`),
    or with ``force`` stay beside the outputs. The manifest (:data:`MANIFEST`) records what was
    written; during the commit it lists the old and the new signature of each file, so a run
    killed half-way leaves a directory the next run still recognises as its own.
    """
    out = Path(out).absolute()
    check_output_dir(out, force)
    fresh = not out.exists()
    if fresh:
        out.parent.mkdir(parents=True, exist_ok=True)
    # Beside a new directory the stage's name says whose it is: a killed run's is a leftover there too.
    stage = Path(
        tempfile.mkdtemp(prefix=STAGE_PREFIX + (f"{out.name}." if fresh else ""), dir=out.parent if fresh else out)
    )
    _OWN_STAGES.add(stage)
    try:
        _follow_umask(stage, directory=True)
        fill(stage)
        new = {}
        for path in sorted(stage.iterdir()):
            if not path.is_file() or path.name == MANIFEST or path.name.startswith(STAGE_PREFIX):
                raise CliError(f"internal: {path.name} is not an output file")  # fill writes flat files only
            _follow_umask(path)
            new[path.name] = _signature(path)
        if fresh:
            _write_manifest(stage, {name: [sig] for name, sig in new.items()})
            try:
                os.rename(stage, out)  # fails if a non-empty out appeared meanwhile: then file by file
                return out
            except OSError:
                (stage / MANIFEST).unlink()
                check_output_dir(out, force)
        _commit(stage, out, new, force)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        _OWN_STAGES.discard(stage)
    return out


def _commit(stage: Path, out: Path, new: dict[str, dict], force: bool) -> None:
    """Moves the staged files into the existing ``out`` (see :func:`write_outputs`)."""
    check_output_dir(out, force, new)  # again: files may have appeared while the run computed
    ours, _, _ = _survey(out)
    stale = [name for name in ours if name not in new]
    # First the manifest names both the old and the new form of each file: a kill between the
    # replacements below leaves files this manifest still calls ours.
    _write_manifest(out, {**{n: ours[n] for n in stale}, **{n: [*ours.get(n, []), sig] for n, sig in new.items()}})
    for name in new:
        os.replace(stage / name, out / name)
    for name in stale:
        (out / name).unlink(missing_ok=True)  # an earlier run's output, unchanged since: ours to remove
    _write_manifest(out, {n: [sig] for n, sig in new.items()})


def _atomic_file(out: Path, write: Callable[[Path], Any]) -> Path:
    """Writes a file under a temporary name beside ``out`` and renames it into place: ``out`` is
    the old file or the whole new one, never part of one. The new file follows the umask."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _follow_umask(tmp)
        write(tmp)
        _follow_umask(tmp)  # a writer may have made the file anew
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def parse_memory(text: str) -> int:
    """``--memory-budget``: a size such as 8GiB (argparse reports a bad one in one line)."""
    try:
        n = parse_size(text, "memory budget")
    except CliError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"invalid memory budget {text!r}: must be at least 1 byte")
    return n


def _sizes(lc, args, scenario: str | None) -> list[int]:
    """The cache sizes to replay at: --cache-size, else the --sizes grid, else the scenario's own,
    else DEFAULT_SIZES."""
    if args.cache_size:
        return [parse_size(z) for z in args.cache_size]
    if getattr(args, "sizes", None):
        return parse_grid(args.sizes)
    if scenario in lc.workload.SCENARIO_CACHE_SIZES:
        return list(lc.workload.SCENARIO_CACHE_SIZES[scenario])
    return [parse_size(z) for z in DEFAULT_SIZES]


# What the command line's reports measure beyond the library's defaults: the buffers cached slices
# retain ("peak retained MiB"), which lc.replay leaves off for speed. `--set memory_model=false` drops it.
REPORT_SETTINGS: dict[str, Any] = {"memory_model": True}


def _not_a_workload_setting(lc, key: str) -> None:
    """``--set`` takes cache settings; a workload's (``brokerDeduplicationEnabled``,
    ``replicationClusters``, ...) belongs in a spec file, which the cache settings would otherwise
    reject as an unknown setting without saying where it goes."""
    cache_settings = lc.CacheConfig().to_dict()
    snake = lc.workload._snake(key)
    if key not in cache_settings and snake not in cache_settings and snake in lc.workload.KNOWN:
        raise CliError(
            f"--set {key}: a workload setting, not a cache one (--set takes CacheConfig settings); "
            f"put it in a spec file (a .yaml or .json mapping; a bundled scenario's settings are "
            f"lc.workload.SCENARIOS[NAME]) and name that file instead of the scenario"
        )


def _configs(lc, strategies: Iterable[str], sizes: Iterable[int], settings: Iterable[str]) -> list:
    extra: dict[str, Any] = dict(REPORT_SETTINGS)
    for item in settings:
        if "=" not in item:
            raise CliError(f"invalid --set {item!r}: use key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        _not_a_workload_setting(lc, key)
        value = lc.workload.scalar(raw)
        if key.endswith("_bytes") and isinstance(value, str):
            # The key says bytes, so a bare number is bytes here; a size with a unit reads as --cache-size's.
            value = parse_size(value, f"--set {key}")
        extra[key] = value
    return [lc.CacheConfig(cache_size_bytes=z, strategy=s, **extra) for z in sizes for s in strategies]


def _named_configs(lc, args, scenario: str, sizes: Iterable[int]) -> tuple[list, list[str | None]]:
    """The configurations to replay a scenario under, and each one's name: a scenario with named
    configurations (``lc.workload.SCENARIO_CONFIGS``) is replayed under those at each size, unless
    ``--strategy`` or ``--set`` say otherwise; other runs are unnamed (None)."""
    named = lc.workload.SCENARIO_CONFIGS.get(scenario) if getattr(args, "named_configs", False) else None
    if named and not args.strategy and not args.set:
        pairs = [(n, z) for z in sizes for n in named]
        configs = [lc.CacheConfig(cache_size_bytes=z, **{**REPORT_SETTINGS, **named[n]}) for n, z in pairs]
        return configs, [n for n, _ in pairs]
    configs = _configs(lc, args.strategy or ALL_STRATEGIES, sizes, args.set or ())
    return configs, [None] * len(configs)


def _with_config_names(summary: pa.Table, series: pa.Table, configs: list, names: list[str | None]) -> tuple:
    """``summary`` and ``series`` with a ``config_name`` column: the name of each row's configuration
    (None for unnamed runs). A summary row is matched by its configuration (its ``config``), a
    series row by its ``config_index`` (its place among its broker's configurations)."""
    by_config = {json.dumps(c.to_dict(), sort_keys=True): n for c, n in zip(configs, names, strict=True)}
    summary_names = [
        by_config.get(json.dumps(json.loads(c), sort_keys=True)) for c in summary.column("config").to_pylist()
    ]
    series_names = [
        names[i] if i is not None and 0 <= i < len(names) else None for i in series.column("config_index").to_pylist()
    ]
    return (
        summary.append_column("config_name", pa.array(summary_names, pa.string())),
        series.append_column("config_name", pa.array(series_names, pa.string())),
    )


def _session(args):
    # A master that spark-submit set wins over --master (lc.spark.session warns if they differ).
    spark = lc.spark.session("ledgercache-cli", master=args.master, cores=args.cores)
    print(f"spark: master {spark.sparkContext.master}", file=sys.stderr, flush=True)
    return spark


def _uses_spark(args) -> bool:
    """``--master`` implies Spark; with ``--local`` (compare, demo) it is a contradiction."""
    if hasattr(args, "local"):
        if args.local and args.master:
            raise CliError(f"--local and --master {args.master} contradict each other: choose one")
        return not args.local
    return bool(args.spark or args.master)


def _megabytes(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def estimate_line(estimate: dict) -> str:
    """The estimate ``ledgercache generate`` prints before it starts."""
    seconds = estimate["seconds"]
    took = f"{seconds:,.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    return (
        f"estimate: ~{estimate['events']:,.0f} events ({estimate['messages']:,.0f} messages in "
        f"~{estimate['entries']:,.0f} entries), ~{_megabytes(estimate['parquet_bytes'])} of Parquet, ~{took}"
    )


def rate_line(estimate: dict) -> str | None:
    """The line saying the producer rate was capped at what the brokers ingest, if it was."""
    if estimate.get("capped_by") is None:
        return None
    asked = (
        "producerRate 0 (find the maximum sustainable rate)"
        if estimate["requested_rate"] == 0
        else f"producerRate {estimate['requested_rate']:,.0f} msg/s is above what the brokers ingest"
    )
    knob = "brokerIngestBytesPerSecond" if estimate["capped_by"] == "bytes" else "brokerIngestMessagesPerSecond"
    return f"rate: {asked}: simulating {estimate['producer_rate']:,.0f} msg/s, the saturated brokers' rate ({knob})"


def backlog_line(estimate: dict) -> str | None:
    """The line saying how OMB's backlog test stretches the run, if the spec has one."""
    start = estimate.get("backlog_start_seconds")
    if start is None:
        return None
    if not estimate.get("backlog_built"):
        return (
            f"backlog: consumers pause after the warm-up and consumerBacklogSizeGB is not built within "
            f"backlogMaxWaitMinutes: they never resume (~{estimate['simulated_seconds']:,.0f}s; "
            f"--backlog-max-wait-minutes)"
        )
    line = (
        f"backlog: consumers pause after the warm-up and resume at ~{start:,.0f}s, once consumerBacklogSizeGB "
        f"is built; the test runs until it drains, then testDurationMinutes more: ~{estimate['simulated_seconds']:,.0f}s"
    )
    if estimate.get("backlog_wait_capped"):
        line += " (not drained within backlogMaxWaitMinutes: the lab stops waiting then; --backlog-max-wait-minutes)"
    return line


def _check_disk(estimate: dict, out: Path) -> None:
    """Refuses a trace file estimated not to fit on the output's disk, before writing any."""
    free = shutil.disk_usage(out.parent if out.parent.exists() else Path.cwd()).free
    need = estimate["parquet_bytes"] if out.suffix == ".parquet" else estimate["events"] * 40
    if need > free:
        raise CliError(
            f"the trace needs ~{_megabytes(need)} and {out.parent} has {_megabytes(free)} free: "
            f"shorten it with --duration-minutes"
        )


def cmd_generate(args) -> None:
    if (args.spec is None) == (args.from_stats is None):
        raise CliError("name a scenario or spec file, or a broker's stats dump with --from-stats (one of them)")
    if args.from_stats is not None and args.warmup_minutes is not None:
        raise CliError("--warmup-minutes does not go with --from-stats: the warm-up is what builds the stats' backlogs")
    # From stats, the test's length goes into the conversion: backlogs are fitted to the run's end.
    source: Any = args.spec
    if args.from_stats is not None:
        stats = lc.broker_stats.read(args.from_stats)
        try:
            source, notes = lc.broker_workload.workload_and_notes(
                stats, test_duration_minutes=args.duration_minutes or 2.0
            )
        except lc.InvalidArgumentError as e:
            raise lc.InvalidArgumentError(f"{args.from_stats}: {e}") from None
        # What the reader repaired and what the workload cannot give, as calibrate says them.
        for note in lc.calibrate.merge_notes(list(stats.notes) + notes):
            print(f"note: {note}", file=sys.stderr)
    label = args.spec if args.spec is not None else f"workload from {args.from_stats}"
    with _naming_spec(lc, label):
        _generate(lc, args, _spec_with(lc, source, args))


def _generate(lc, args, spec: dict) -> None:
    if args.memory_budget is None:
        args.memory_budget = lc.workload.DEFAULT_MEMORY_BUDGET
    else:
        print(sizes_line([args.memory_budget], "memory budget"), flush=True)
    estimate = lc.workload.estimate(spec)
    print(estimate_line(estimate), flush=True)
    for line in (rate_line(estimate), backlog_line(estimate)):
        if line:
            print(line, flush=True)
    # What the simulation needs in memory is refused first: it does not depend on where the trace goes.
    lc.workload.check(spec, broker=0 if _uses_spark(args) else None, memory_budget=args.memory_budget)
    if Path(args.output).is_dir():
        raise CliError(
            f"-o {args.output} is a directory: name the trace file to write, e.g. {Path(args.output) / 'trace.parquet'}"
        )
    _check_disk(estimate, Path(args.output).resolve())
    progress = Progress(max(1, int(estimate["events"])), quiet=args.quiet, unit="events")
    out = Path(args.output).resolve()
    if _uses_spark(args):
        # One task per broker writes its part (streamed); the parts, broker after broker, are then
        # copied into the output batch by batch.
        spark = _session(args)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=f".{out.name}.spark.", dir=out.parent) as parts:
                frame = lc.spark.generate(spark, spec, seed=args.seed, memory_budget=args.memory_budget)
                frame.write.parquet(str(Path(parts) / "trace"))
                path = _atomic_file(
                    out,
                    lambda tmp: lc.trace.write(
                        Path(parts) / "trace", tmp, on_batch=lambda b: progress.advance(b.num_rows)
                    ),
                )
        finally:
            spark.stop()
    else:
        # Generated batch by batch as it is written: memory holds the simulation and a row group.
        reader = lc.workload.stream(spec, seed=args.seed, memory_budget=args.memory_budget)
        path = _atomic_file(
            out, lambda tmp: lc.trace.write(reader, tmp, on_batch=lambda b: progress.advance(b.num_rows))
        )
    progress.finish("written")
    print(f"wrote {progress.done:,} events to {path}")


@contextlib.contextmanager
def _naming_spec(lc, name: str):
    """Adds which spec an error is about. The generator says "invalid spec: KEY: ..." of the settings
    it was handed, and the CLI hands it settings already resolved from a file or a scenario (with
    the flags' overrides), so the file's or the scenario's name would be lost."""
    try:
        yield
    except lc.InvalidArgumentError as e:
        message = str(e)
        if not message.startswith("invalid spec:") or name in message:
            raise
        label = (
            f"scenario {name}"
            if name in lc.workload.SCENARIOS
            else name
            if name.startswith("workload ")
            else f"spec {name}"
        )
        raise type(e)(message.replace("invalid spec:", f"invalid {label}:", 1)) from None


def _spec_with(lc, spec: Any, args) -> dict:
    settings = lc.workload.resolve(spec, driver=getattr(args, "driver", None))
    if getattr(args, "brokers", None):
        settings["brokers"] = args.brokers
    if getattr(args, "duration_minutes", None):
        settings["test_duration_minutes"] = args.duration_minutes
    if getattr(args, "warmup_minutes", None) is not None:
        settings["warmup_duration_minutes"] = args.warmup_minutes
    if getattr(args, "backlog_max_wait_minutes", None) is not None:
        settings["backlog_max_wait_minutes"] = args.backlog_max_wait_minutes
    return settings


# Trace files as lc.trace reads them (a directory is a Parquet dataset), and the bytes they start with.
TRACE_SUFFIXES = (".parquet", ".arrow", ".feather", ".ipc", ".arrows", ".csv")
_TRACE_MAGIC = ((b"PAR1", "Parquet", ".parquet"), (b"ARROW1", "Arrow IPC", ".arrow"))


def _is_trace(lc, name: str) -> bool:
    """Whether ``compare``/``sweep`` take ``name`` as a trace to replay (not a spec to generate):
    a trace file's suffix, or a directory (a Parquet dataset). A file with a trace's magic bytes
    but another suffix is refused with the rename that makes it readable."""
    if name in lc.workload.SCENARIOS:
        return False
    path = Path(name)
    if path.suffix.lower() in TRACE_SUFFIXES or path.is_dir():
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    for magic, kind, suffix in _TRACE_MAGIC:
        if head.startswith(magic):
            raise CliError(f"{name} is a {kind} file: name it with a {suffix} suffix to replay it as a trace")
    return False


def _trace_events(path: Path) -> tuple[int, bool]:
    """The events a trace file holds, and whether that is exact: Parquet says in its footer; for
    CSV and Arrow files an estimate from the size (the progress bar says "~")."""

    try:
        if path.is_dir() or path.suffix.lower() == ".parquet":
            files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
            return sum(pq.ParquetFile(f).metadata.num_rows for f in files), True
        per_event = 40 if path.suffix.lower() == ".csv" else 30
        return max(1, path.stat().st_size // per_event), False
    except Exception:  # an unreadable file: the replay itself reports it, in one line
        return 1, False


def _replay_file(lc, path: Path, configs: list, quiet: bool, label: str = "replayed") -> tuple:
    """``lc.replay(path, configs, with_timeseries=True)`` with a progress bar in events: the batches
    are counted as the engine takes them (twice over when belady needs a second pass)."""
    events, _ = _trace_events(path)
    passes = 2 if any(c.strategy in TWO_PASS_STRATEGIES for c in configs) else 1
    progress = Progress(max(1, events * passes), quiet=quiet, unit="events")
    summary, series = lc.replay(
        path, configs, with_timeseries=True, on_batch=lambda batch: progress.advance(batch.num_rows)
    )
    progress.finish(label)
    return summary, series


def _replay(lc, args, trace: Any, configs: list, spark) -> tuple:
    if spark is not None:
        if isinstance(trace, (str, Path)) and not (Path(trace).is_dir() or Path(trace).suffix.lower() == ".parquet"):
            # Spark reads Parquet only: a CSV or Arrow file goes through a temporary Parquet copy.
            df = lc.spark.trace_frame(spark, lambda path=str(trace): path)
        else:
            df = lc.spark.trace_frame(spark, str(trace) if isinstance(trace, Path) else trace)
        summary_df, series = lc.spark.replay(df, configs, with_timeseries=True, config_groups=args.config_groups)
        return summary_df.toArrow(), series
    if isinstance(trace, (str, Path)):
        return _replay_file(lc, Path(trace), configs, quiet=getattr(args, "quiet", False), label=f"replayed {trace}")
    return lc.replay(trace, configs, with_timeseries=True)


def _check_not_inside(out: Path, trace: Path) -> None:
    """A directory trace is every .parquet file under it: outputs written there would join it."""
    out, trace = Path(out).resolve(), trace.resolve()
    if trace.is_dir() and (out == trace or trace in out.parents):
        raise CliError(
            f"-o {out} is inside the trace directory {trace}: its .parquet outputs would become part of "
            f"the trace; choose a directory outside it"
        )


REPLAY_OUTPUTS = ("summary.parquet", "summary.csv", "timeseries.parquet")


def cmd_replay(args) -> None:
    sizes = _sizes(lc, args, None)
    configs = _configs(lc, args.strategy or ALL_STRATEGIES, sizes, args.set or ())
    source = Path(args.trace)
    if not source.exists():
        raise CliError(f"trace {source} does not exist")
    out = Path(args.output)
    _check_not_inside(out, source)
    # Refused before the replay: an hour's replay should not end in "that directory is not yours".
    check_output_dir(out, args.force, REPLAY_OUTPUTS)
    print(sizes_line(sizes), flush=True)
    spark = _session(args) if _uses_spark(args) else None
    try:
        summary, series = _replay(lc, args, source if spark is None else str(source), configs, spark)
    finally:
        if spark is not None:
            spark.stop()
    if summary.num_rows == 0:
        # Checked before writing: an empty summary is no answer to "which design saves the most".
        raise CliError(f"trace {source} has no events: nothing to replay (no outputs written)")

    def fill(tmp: Path) -> None:
        pq.write_table(summary, tmp / "summary.parquet")
        pcsv.write_csv(summary, tmp / "summary.csv")
        pq.write_table(series, tmp / "timeseries.parquet")

    out = write_outputs(out, fill, force=args.force)
    print(lc.report.comparison_text(summary))
    print(f"wrote summary.parquet, summary.csv and timeseries.parquet to {out}")


REPORT_OUTPUTS = ("summary.parquet", "timeseries.parquet", "report.md", "report.html")


def _label(name: str) -> str:
    return Path(name).stem if Path(name).suffix else Path(name).name if Path(name).is_dir() else name


def compare(args, scenarios: list[str], with_throttling: bool = False) -> None:
    out = Path(args.output)
    # Everything a name can get wrong is found before anything runs: a misspelt scenario, a spec's
    # bad key, a missing trace, an output directory that is not ours.
    plan: list[tuple[str, dict | None, list[int]]] = []
    for name in scenarios:
        if _is_trace(lc, name):
            if not Path(name).exists():
                raise CliError(f"trace {name} does not exist")
            _check_not_inside(out, Path(name))
            plan.append((name, None, _sizes(lc, args, None)))
        else:
            with _naming_spec(lc, name):
                named_spec = _spec_with(lc, name, args)
            plan.append((name, named_spec, _sizes(lc, args, name)))
    check_output_dir(out, args.force, REPORT_OUTPUTS + (("publish_delays.parquet",) if with_throttling else ()))
    if len({tuple(z) for _, _, z in plan}) == 1:
        print(sizes_line(plan[0][2]), flush=True)
    else:
        for name, _, sizes in plan:
            print(sizes_line(sizes, f"cache sizes ({_label(name)})"), flush=True)
    memory_budget = getattr(args, "memory_budget", None)
    if memory_budget is not None:
        print(sizes_line([memory_budget], "memory budget"), flush=True)
    progress = Progress(2 * len(plan) + 1, quiet=args.quiet)
    spark = _session(args) if _uses_spark(args) else None
    summaries, serieses = [], []
    try:
        for name, spec, sizes in plan:
            configs, names = _named_configs(lc, args, name, sizes)
            if spec is None:
                trace: Any = Path(name)  # a trace file: replayed as it is
                progress.step(f"read {name}")
            else:
                with _naming_spec(lc, name):
                    if spark is not None:
                        trace = lc.spark.generate(spark, spec, seed=args.seed, memory_budget=memory_budget).cache()
                        trace.count()
                    else:
                        trace = lc.workload.generate(
                            spec, seed=args.seed, memory_budget=memory_budget or lc.workload.DEFAULT_MEMORY_BUDGET
                        )
                progress.step(f"generated {name}")
            # A series row names its configuration by its index in its group of configurations:
            # named configurations are replayed in one group, so that the index is the name's.
            named_args = argparse.Namespace(**{**vars(args), "config_groups": 1}) if any(names) else args
            summary, series = _replay(lc, named_args, trace, configs, spark)
            summary, series = _with_config_names(summary, series, configs, names)
            label = _label(name)
            summaries.append(summary.append_column("scenario", pa.array([label] * summary.num_rows, pa.string())))
            serieses.append(series.append_column("scenario", pa.array([label] * series.num_rows, pa.string())))
            progress.step(f"replayed {name}")
    finally:
        if spark is not None:
            spark.stop()
    summary = pa.concat_tables(summaries)
    series = pa.concat_tables(serieses)
    publish = None
    if with_throttling:
        publish = lc.publish.compare_modes(lc.publish.noisy_neighbour(), lc.publish.noisy_neighbour_limiter())

    def fill(tmp: Path) -> None:
        pq.write_table(summary, tmp / "summary.parquet")
        pq.write_table(series, tmp / "timeseries.parquet")
        if publish is not None:
            pq.write_table(publish, tmp / "publish_delays.parquet")
        lc.report.write_report(summary, series, tmp, title=args.title, publish=publish, target_hit_ratio=target)

    target = getattr(args, "target_hit_ratio", None)
    out = write_outputs(out, fill, force=args.force)
    progress.step("report")
    print(lc.report.comparison_text(summary))
    if target is not None:
        print(lc.report.sweep_text(summary, target))
    if publish is not None:
        for r in publish.to_pylist():
            print(f"publish {r['mode']:<18} {r['topic']:<6} p99 {r['p99_ms']:9.1f} ms  own throttles {r['throttles']}")
    # Last, where the terminal leaves it in view: the answer.
    print()
    print(lc.report.answer_text(summary, series, target))
    print(f"report: {out / 'report.html'} (and report.md, PNG plots, summary.parquet, timeseries.parquet)")


def cmd_compare(args) -> None:
    args.named_configs = True
    compare(args, args.spec or list(lc.workload.SCENARIOS), with_throttling=args.with_throttling or not args.spec)


def cmd_sweep(args) -> None:
    if not 0.0 <= args.target_hit_ratio <= 1.0:
        raise CliError(f"invalid --target-hit-ratio {args.target_hit_ratio:g}: use a ratio in [0, 1]")
    if not args.cache_size and not args.sizes:
        args.sizes = SWEEP_SIZES
    if args.sizes:
        parse_grid(args.sizes)  # a bad grid fails before anything is generated
    compare(args, args.spec or list(lc.workload.SCENARIOS))


def cmd_demo(args) -> None:
    # Each scenario at its own sizes (SCENARIO_CACHE_SIZES), every strategy, or its named
    # configurations where it has them (SCENARIO_CONFIGS).
    args.strategy, args.cache_size, args.sizes, args.set, args.named_configs = None, None, None, [], True
    compare(args, list(lc.workload.SCENARIOS), with_throttling=True)


def cmd_calibrate(args) -> None:
    sizes = (
        parse_grid(args.sizes)
        if args.sizes
        else ([parse_size(z) for z in args.cache_size] if args.cache_size else None)
    )
    if sizes:
        print(sizes_line(sizes), flush=True)
    current = parse_size(args.current_cache_size, "--current-cache-size") if args.current_cache_size else None
    if current is not None:
        print(sizes_line([current], "current cache size"), flush=True)
    if args.output:
        check_output_dir(Path(args.output).absolute(), args.force)  # before minutes of replay, not after
    labels = dict(_key_value(x, "--label") for x in args.label) if args.label else None
    metrics = lc.metrics.read(args.metrics, labels=labels)
    stats = lc.broker_stats.read(args.stats)
    # Files of different brokers or times would give a confident prediction of the wrong broker:
    # said before minutes of replay, and again at the top of the answer.
    for line in lc.calibrate.cross_check(stats, metrics):
        print(f"ledgercache: check first: {line}", file=sys.stderr, flush=True)
    progress = Progress(1, quiet=args.quiet)
    result = lc.calibrate.calibrate(
        stats,
        metrics,
        broker_conf=args.broker_conf,
        design=args.design,
        designs=args.strategy or lc.calibrate.DESIGNS,
        sizes=sizes,
        margin=args.margin,
        seed=args.seed,
        test_duration_minutes=args.duration_minutes,
        max_backlog_minutes=args.max_backlog_minutes,
        current_cache_size=current,
    )
    progress.step("replayed")
    print(result.text())
    if args.output:
        out = write_outputs(Path(args.output), lambda stage: calibrate_report.write(result, stage), args.force)
        print(f"report: {out / 'report.html'} (and report.md, calibrate.png)")


def _key_value(item: str, flag: str) -> tuple[str, str]:
    if "=" not in item:
        raise CliError(f"invalid {flag} {item!r}: use key=value")
    key, value = item.split("=", 1)
    return key.strip(), value.strip()


def cmd_broker_dump(args) -> None:
    out = Path(args.output)
    check_output_dir(out, args.force, ("stats.json", "metrics.txt", "broker.conf"))
    with _naming_spec(lc, args.spec):
        spec = _spec_with(lc, args.spec, args)
        config = lc.CacheConfig(cache_size_bytes=parse_size(args.cache_size), strategy=args.strategy)
        print(sizes_line([config.cache_size_bytes], "cache size"), flush=True)
        stats, metrics = lc.broker_workload.dump(spec, config, seed=args.seed)

    def fill(tmp: Path) -> None:
        lc.broker_stats.write(stats, tmp / "stats.json")
        # A broker of the release that runs the design, so that calibrate infers it back.
        version = {d["name"]: d["release"] for d in _designs() if d["release"]}.get(args.strategy)
        lc.metrics.write_prometheus(
            metrics,
            tmp / "metrics.txt",
            version=version,
            topic_rates=[(t.name, t.namespace, t.msg_rate_in, t.msg_rate_out) for t in stats.topics],
        )
        # The synthetic broker's cache size, as its broker.conf would say it (managedLedgerCacheSizeMB).
        (tmp / "broker.conf").write_text(f"managedLedgerCacheSizeMB={max(1, config.cache_size_bytes >> 20)}\n")

    out = write_outputs(out, fill, force=args.force)
    print(
        f"wrote {out / 'stats.json'} ({len(stats.topics)} topics), {out / 'broker.conf'} and {out / 'metrics.txt'} "
        f"(hit ratio {metrics.hit_ratio if metrics.hit_ratio is not None else 0:.3f} under {args.strategy} at "
        f"{format_size(config.cache_size_bytes)})"
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ledgercache", description="Replay message-log traffic through cache designs.")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, spark_default: bool) -> None:
        sp.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
        sp.add_argument("--cores", default="*", help="local Spark cores (default: all)")
        sp.add_argument(
            "--master",
            metavar="URL",
            help="Spark master: local[N], spark://host:port, yarn, k8s://... (implies Spark; a master "
            "set by spark-submit wins). On a cluster every path given must be one the executors "
            "see, and their Python (PYSPARK_PYTHON) must have ledgercache installed",
        )
        if spark_default:
            sp.add_argument("--local", action="store_true", help="replay in this process instead of on Spark")
        else:
            sp.add_argument("--spark", action="store_true", help="run on Spark (local unless --master names a cluster)")

    def sweep(sp) -> None:
        sp.add_argument(
            "--strategy",
            action="append",
            choices=ALL_STRATEGIES,
            help="a strategy (repeatable; default: all, except that compare replays a scenario with named "
            "configurations, such as rolling-restart, under those unless --strategy or --set is given)",
        )
        sp.add_argument(
            "--cache-size",
            action="append",
            help="a cache size such as 512MiB or 4g (binary units, as Pulsar reads them; 4096B for bytes) (repeatable; default: a bundled scenario's own sizes, "
            f"else {', '.join(DEFAULT_SIZES)})",
        )
        sp.add_argument(
            "--sizes",
            metavar="MIN:MAX[:FACTOR]",
            help="a grid of cache sizes from MIN to MAX, each FACTOR (default 2) times the one before",
        )
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="another CacheConfig setting (repeatable)")
        sp.add_argument(
            "--config-groups", type=int, default=1, help="Spark: split the configurations over this many task groups"
        )

    def force(sp) -> None:
        sp.add_argument(
            "--force",
            action="store_true",
            help="write into an output directory that holds other files (they are kept; only "
            "ledgercache's own earlier outputs are replaced)",
        )

    def omb_flags(sp) -> None:
        sp.add_argument(
            "--driver",
            help="an OMB Pulsar driver file (driver-pulsar/pulsar.yaml-style); OMB workload "
            "files default to OMB's own pulsar.yaml values",
        )
        sp.add_argument("--warmup-minutes", type=float, help="override warmupDurationMinutes (OMB files: 1)")
        sp.add_argument(
            "--backlog-max-wait-minutes",
            type=float,
            help="override backlogMaxWaitMinutes: how long the lab waits for consumerBacklogSizeGB "
            "to build and drain (default 240)",
        )
        sp.add_argument(
            "--memory-budget",
            type=parse_memory,
            help="memory a workload's simulation may take, e.g. 8GiB (default 4GiB)",
        )

    g = sub.add_parser("generate", help="generate a trace from a scenario, an OMB workload file or a broker's stats")
    g.add_argument(
        "spec",
        nargs="?",
        help=f"a scenario ({', '.join(__import__('ledgercache').workload.SCENARIOS)}) or a .yaml/.json spec",
    )
    g.add_argument(
        "--from-stats",
        metavar="STATS_JSON",
        help="a broker's stats dump (pulsar-admin broker-stats topics, topics stats): its topics as the workload",
    )
    g.add_argument("-o", "--output", required=True, help="trace file (.parquet, .arrow or .csv)")
    g.add_argument("--brokers", type=int, help="override the number of brokers")
    g.add_argument("--duration-minutes", type=float, help="override testDurationMinutes")
    omb_flags(g)
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    common(g, spark_default=False)
    g.set_defaults(run=cmd_generate)

    r = sub.add_parser("replay", help="replay a trace under cache configurations")
    r.add_argument("trace", help="trace file (.parquet, .arrow or .csv) or directory of .parquet files")
    r.add_argument("-o", "--output", required=True, help="output directory")
    force(r)
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep(r)
    common(r, spark_default=False)
    r.set_defaults(run=cmd_replay)

    c = sub.add_parser("compare", help="generate, replay and report scenarios side by side")
    c.add_argument("spec", nargs="*", help="scenarios, spec files or trace files (default: all bundled scenarios)")
    c.add_argument("-o", "--output", required=True, help="report directory")
    force(c)
    c.add_argument("--brokers", type=int, help="override the number of brokers")
    c.add_argument("--duration-minutes", type=float, help="override testDurationMinutes")
    omb_flags(c)
    c.add_argument("--title", default="ledgercache: cache designs compared")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.add_argument(
        "--target-hit-ratio",
        type=float,
        help="also report, per design, the smallest cache size run that reaches this hit ratio",
    )
    c.add_argument(
        "--with-throttling",
        action="store_true",
        help="add the publish-throttling scenario, both modes side by side (default when no spec is named)",
    )
    sweep(c)
    common(c, spark_default=True)
    c.set_defaults(run=cmd_compare)

    w = sub.add_parser("sweep", help="the smallest cache reaching a target hit ratio, per design, over a grid of sizes")
    w.add_argument("spec", nargs="*", help="scenarios, spec files or trace files (default: all bundled scenarios)")
    w.add_argument("-o", "--output", required=True, help="report directory")
    force(w)
    w.add_argument(
        "--target-hit-ratio",
        type=float,
        default=SWEEP_TARGET,
        help=f"the hit ratio a design must reach (default {SWEEP_TARGET})",
    )
    w.add_argument("--brokers", type=int, help="override the number of brokers")
    w.add_argument("--duration-minutes", type=float, help="override testDurationMinutes")
    omb_flags(w)
    w.add_argument("--title", default="ledgercache: cache size sweep")
    w.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep(w)
    common(w, spark_default=True)
    w.set_defaults(run=cmd_sweep)

    k = sub.add_parser(
        "calibrate",
        help="your broker: the lab's prediction beside its cache metrics, then a sweep and a recommendation",
    )
    k.add_argument(
        "--stats", required=True, help="the broker's stats dump (pulsar-admin broker-stats topics > stats.json)"
    )
    k.add_argument(
        "--metrics",
        required=True,
        help="the broker's Prometheus metrics (curl http://broker:8080/metrics/ > metrics.txt)",
    )
    k.add_argument(
        "--broker-conf",
        help="the broker's broker.conf (its cache and dispatcher settings; an empty value is Pulsar's default)",
    )
    k.add_argument(
        "--current-cache-size",
        metavar="SIZE",
        help="the broker's cache size (e.g. 2GiB), where its broker.conf leaves managedLedgerCacheSizeMB "
        "empty (a fifth of the direct memory) and the metrics lack jvm_memory_direct_bytes_max",
    )
    k.add_argument(
        "--design",
        choices=ALL_STRATEGIES,
        help="the design the broker runs (default: from its version in the metrics, pulsar_version_info: "
        "legacy before 4.1, else pip430)",
    )
    k.add_argument(
        "--strategy",
        action="append",
        choices=ALL_STRATEGIES,
        help="a design to sweep (repeatable; default: all but belady)",
    )
    k.add_argument(
        "--cache-size", action="append", help="a cache size to sweep (repeatable; default: 1/8 to 4x the current size)"
    )
    k.add_argument("--sizes", metavar="MIN:MAX[:FACTOR]", help="a grid of cache sizes to sweep")
    k.add_argument(
        "--margin",
        type=float,
        default=0.01,
        help="recommend the smallest cache within this of a design's best hit ratio (default 0.01)",
    )
    k.add_argument(
        "--duration-minutes", type=float, default=2.0, help="test minutes simulated after the warm-up (default 2)"
    )
    k.add_argument(
        "--max-backlog-minutes",
        type=float,
        default=10.0,
        help="a backlog is simulated as at most this many minutes of lag (default 10)",
    )
    k.add_argument(
        "--label", action="append", metavar="KEY=VALUE", help="pick the metrics series with this label (repeatable)"
    )
    k.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    k.add_argument(
        "-o", "--output", help="also write the report (report.html, report.md, calibrate.png) into this directory"
    )
    k.add_argument(
        "--force",
        action="store_true",
        help="write into an output directory that holds other files (they are left alone)",
    )
    k.add_argument("--quiet", action="store_true", help="no progress line")
    k.set_defaults(run=cmd_calibrate, spark=False, master=None)

    b = sub.add_parser(
        "broker-dump", help="a synthetic broker: the stats dump, metrics and broker.conf of a broker running a workload"
    )
    b.add_argument("spec", help="a scenario or a .yaml/.json spec")
    b.add_argument("-o", "--output", required=True, help="directory for stats.json, metrics.txt and broker.conf")
    force(b)
    b.add_argument("--cache-size", default="1GiB", help="the synthetic broker's cache size (default 1GiB)")
    b.add_argument(
        "--strategy", default="pip430", choices=ALL_STRATEGIES, help="the synthetic broker's design (default pip430)"
    )
    b.add_argument("--duration-minutes", type=float, help="override testDurationMinutes")
    b.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    b.set_defaults(run=cmd_broker_dump, spark=False, master=None)

    d = sub.add_parser(
        "demo",
        help="all bundled scenarios, all strategies, each at its broker-sized caches, on Spark (local by default)",
    )
    d.add_argument("-o", "--output", default="demo-report", help="report directory (default: demo-report)")
    force(d)
    d.add_argument("--title", default="ledgercache demo: cache designs on the bundled scenarios")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.add_argument("--brokers", type=int, help=argparse.SUPPRESS)
    d.add_argument("--duration-minutes", type=float, help="override testDurationMinutes of every scenario")
    d.add_argument("--config-groups", type=int, default=2, help=argparse.SUPPRESS)
    common(d, spark_default=True)
    d.set_defaults(run=cmd_demo)
    return p


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    # Spark wraps Python worker errors in a Java stack trace: keep the Python message.
    for line in text.splitlines():
        m = re.search(
            r"(?:LedgerCacheError|InvalidArgumentError|ResourceLimitError|ValueError|StorageError|UnsupportedError|TypeError): (.*)",
            line,
        )
        if m:
            return m.group(1).strip()
    return text.splitlines()[0][:500]


def _needs(args) -> tuple[str, ...]:
    """The optional modules (the ``lab`` extra) a command needs: matplotlib and markdown for a report, pyspark
    and pandas for a Spark run. Checked before the command computes anything."""

    spark = _uses_spark(args)
    report = args.command in ("compare", "sweep", "demo") or (args.command == "calibrate" and bool(args.output))
    return (_extras.REPORT if report else ()) + (_extras.SPARK if spark else ())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _umask()
    try:
        _extras.require(f"ledgercache {args.command}", _needs(args))
        args.run(args)
    except KeyboardInterrupt:
        print("ledgercache: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one clear line, not a stack trace
        if os.environ.get("LEDGERCACHE_DEBUG"):
            raise
        print(f"ledgercache: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
