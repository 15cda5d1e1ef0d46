"""The ``ledgercache`` command: generate traces, replay them, compare cache designs, run the demo.

Errors print one line (``ledgercache: error: ...``) and exit with status 2; outputs are written to a
temporary place first and moved into place only when complete, so a failed run leaves nothing
half-done behind. ``generate`` and ``replay`` need only the library; Spark runs (``--spark`` or
``--master``, and ``compare``/``demo`` without ``--local``) and reports (``compare``, ``demo``) need the ``lab`` extra
(``pip install "ledgercache[lab]"``), checked before anything is computed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ALL_STRATEGIES = ("pip430", "pip430-fifo", "legacy", "segmented", "lru", "belady")
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


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)?\s*", text, re.I)
    if not m:
        raise CliError(f"invalid cache size {text!r}: use bytes or a unit, e.g. 16MiB")
    number, unit = float(m.group(1)), (m.group(2) or "").upper().rstrip("B")
    scale = {"": 1, "K": 1e3, "KI": 1 << 10, "M": 1e6, "MI": 1 << 20, "G": 1e9, "GI": 1 << 30, "T": 1e12, "TI": 1 << 40}
    if unit not in scale:
        raise CliError(f"invalid cache size {text!r}: unknown unit")
    return int(number * scale[unit])


def parse_grid(text: str) -> list[int]:
    """``MIN:MAX`` or ``MIN:MAX:FACTOR``: sizes from MIN, each FACTOR (default 2) times the one
    before, up to MAX (included when the steps land on it)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise CliError(f"invalid --sizes {text!r}: use MIN:MAX or MIN:MAX:FACTOR, e.g. 16MiB:4GiB")
    low, high = parse_size(parts[0]), parse_size(parts[1])
    try:
        factor = float(parts[2]) if len(parts) == 3 else 2.0
    except ValueError:
        factor = 0.0
    if not factor > 1.0 or factor != factor or factor == float("inf"):
        raise CliError(f"invalid --sizes {text!r}: the factor must be a number above 1")
    if not 0 < low <= high:
        raise CliError(f"invalid --sizes {text!r}: MIN must be above 0 and at most MAX")
    sizes = [low]
    while sizes[-1] * factor <= high * (1 + 1e-9):
        sizes.append(int(round(sizes[-1] * factor)))
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


def _atomic_dir(out: Path, fill: Callable[[Path], None]) -> Path:
    """Fills a fresh temporary directory beside ``out``, then moves it into place."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        fill(tmp)
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _atomic_file(out: Path, write: Callable[[Path], Any]) -> Path:
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def parse_memory(text: str) -> int:
    """``--memory-budget``: a size such as 8GiB (argparse reports a bad one in one line)."""
    try:
        n = parse_size(text)
    except CliError as e:
        raise argparse.ArgumentTypeError(str(e).replace("cache size", "memory budget")) from None
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


def _configs(lc, strategies: Iterable[str], sizes: Iterable[int], settings: Iterable[str]) -> list:
    extra: dict[str, Any] = {}
    for item in settings:
        if "=" not in item:
            raise CliError(f"invalid --set {item!r}: use key=value")
        key, raw = item.split("=", 1)
        extra[key.strip()] = lc.workload.scalar(raw)
    return [lc.CacheConfig(cache_size_bytes=z, strategy=s, **extra) for z in sizes for s in strategies]


def _session(args):
    import ledgercache as lc

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
    return (f"estimate: ~{estimate['events']:,.0f} events ({estimate['messages']:,.0f} messages in "
            f"~{estimate['entries']:,.0f} entries), ~{_megabytes(estimate['parquet_bytes'])} of Parquet, ~{took}")


def rate_line(estimate: dict) -> str | None:
    """The line saying the producer rate was capped at what the brokers ingest, if it was."""
    if estimate.get("capped_by") is None:
        return None
    asked = ("producerRate 0 (find the maximum sustainable rate)" if estimate["requested_rate"] == 0
             else f"producerRate {estimate['requested_rate']:,.0f} msg/s is above what the brokers ingest")
    knob = "brokerIngestBytesPerSecond" if estimate["capped_by"] == "bytes" else "brokerIngestMessagesPerSecond"
    return f"rate: {asked}: simulating {estimate['producer_rate']:,.0f} msg/s, the saturated brokers' rate ({knob})"


def backlog_line(estimate: dict) -> str | None:
    """The line saying how OMB's backlog test stretches the run, if the spec has one."""
    start = estimate.get("backlog_start_seconds")
    if start is None:
        return None
    if not estimate.get("backlog_built"):
        return (f"backlog: consumers pause after the warm-up and consumerBacklogSizeGB is not built within "
                f"backlogMaxWaitMinutes: they never resume (~{estimate['simulated_seconds']:,.0f}s; "
                f"--backlog-max-wait-minutes)")
    line = (f"backlog: consumers pause after the warm-up and resume at ~{start:,.0f}s, once consumerBacklogSizeGB "
            f"is built; the test runs until it drains, then testDurationMinutes more: ~{estimate['simulated_seconds']:,.0f}s")
    if estimate.get("backlog_wait_capped"):
        line += " (not drained within backlogMaxWaitMinutes: the lab stops waiting then; --backlog-max-wait-minutes)"
    return line


def _check_disk(estimate: dict, out: Path) -> None:
    """Refuses a trace file estimated not to fit on the output's disk, before writing any."""
    free = shutil.disk_usage(out.parent if out.parent.exists() else Path.cwd()).free
    need = estimate["parquet_bytes"] if out.suffix == ".parquet" else estimate["events"] * 40
    if need > free:
        raise CliError(f"the trace needs ~{_megabytes(need)} and {out.parent} has {_megabytes(free)} free: "
                       f"shorten it with --duration-minutes")


def cmd_generate(args) -> None:
    import ledgercache as lc

    if (args.spec is None) == (args.from_stats is None):
        raise CliError("name a scenario or spec file, or a broker's stats dump with --from-stats (one of them)")
    if args.from_stats is not None and args.warmup_minutes is not None:
        raise CliError("--warmup-minutes does not go with --from-stats: the warm-up is what builds the stats' backlogs")
    # From stats, the test's length goes into the conversion: backlogs are fitted to the run's end.
    source = args.spec if args.spec is not None else lc.workload.from_broker_stats(
        args.from_stats, test_duration_minutes=args.duration_minutes or 2.0)
    spec = _spec_with(lc, source, args)
    estimate = lc.workload.estimate(spec)
    print(estimate_line(estimate), flush=True)
    for line in (rate_line(estimate), backlog_line(estimate)):
        if line:
            print(line, flush=True)
    # What the simulation needs in memory is refused first: it does not depend on where the trace goes.
    lc.workload.check(spec, broker=0 if _uses_spark(args) else None, memory_budget=args.memory_budget)
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
                path = _atomic_file(out, lambda tmp: lc.trace.write(
                    Path(parts) / "trace", tmp, on_batch=lambda b: progress.advance(b.num_rows)))
        finally:
            spark.stop()
    else:
        # Generated batch by batch as it is written: memory holds the simulation and a row group.
        reader = lc.workload.stream(spec, seed=args.seed, memory_budget=args.memory_budget)
        path = _atomic_file(out, lambda tmp: lc.trace.write(reader, tmp, on_batch=lambda b: progress.advance(b.num_rows)))
    progress.finish("written")
    print(f"wrote {progress.done:,} events to {path}")


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


def _replay(lc, args, trace: Any, configs: list, spark) -> tuple:
    if spark is not None:
        df = trace if not isinstance(trace, (str, Path)) else spark.read.parquet(str(trace))
        summary_df, series = lc.spark.replay(df, configs, with_timeseries=True, config_groups=args.config_groups)
        return summary_df.toArrow(), series
    return lc.replay(trace, configs, with_timeseries=True)


def cmd_replay(args) -> None:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    import ledgercache as lc

    configs = _configs(lc, args.strategy or ALL_STRATEGIES, _sizes(lc, args, None), args.set or ())
    source = Path(args.trace)
    if not source.exists():
        raise CliError(f"trace {source} does not exist")
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

    out = _atomic_dir(Path(args.output), fill)
    print(lc.report.comparison_text(summary))
    print(f"wrote summary.parquet, summary.csv and timeseries.parquet to {out}")


def compare(args, scenarios: list[str], with_throttling: bool = False) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import ledgercache as lc

    progress = Progress(2 * len(scenarios) + 1, quiet=args.quiet)
    spark = _session(args) if _uses_spark(args) else None
    summaries, serieses = [], []
    try:
        for name in scenarios:
            spec = _spec_with(lc, name, args)
            configs = _configs(lc, args.strategy or ALL_STRATEGIES, _sizes(lc, args, name), args.set or ())
            if spark is not None:
                trace = lc.spark.generate(spark, spec, seed=args.seed,
                                           memory_budget=getattr(args, "memory_budget", None)).cache()
                trace.count()
            else:
                trace = lc.workload.generate(spec, seed=args.seed,
                                              memory_budget=getattr(args, "memory_budget", 4 << 30))
            progress.step(f"generated {name}")
            summary, series = _replay(lc, args, trace, configs, spark)
            label = Path(name).stem if Path(name).suffix else name
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
    out = _atomic_dir(Path(args.output), fill)
    progress.step("report")
    print(lc.report.comparison_text(summary))
    if target is not None:
        print(lc.report.sweep_text(summary, target))
    if publish is not None:
        for r in publish.to_pylist():
            print(f"publish {r['mode']:<18} {r['topic']:<6} p99 {r['p99_ms']:9.1f} ms  own throttles {r['throttles']}")
    print(f"report: {out / 'report.md'} (and report.html, PNG plots, summary.parquet, timeseries.parquet)")


def cmd_compare(args) -> None:
    import ledgercache as lc

    compare(args, args.spec or list(lc.workload.SCENARIOS), with_throttling=args.with_throttling or not args.spec)


def cmd_sweep(args) -> None:
    import ledgercache as lc

    if not 0.0 <= args.target_hit_ratio <= 1.0:
        raise CliError(f"invalid --target-hit-ratio {args.target_hit_ratio:g}: use a ratio in [0, 1]")
    if not args.cache_size and not args.sizes:
        args.sizes = SWEEP_SIZES
    if args.sizes:
        parse_grid(args.sizes)  # a bad grid fails before anything is generated
    compare(args, args.spec or list(lc.workload.SCENARIOS))


def cmd_demo(args) -> None:
    import ledgercache as lc

    # Each scenario at its own sizes (SCENARIO_CACHE_SIZES), every strategy.
    args.strategy, args.cache_size, args.sizes, args.set = list(ALL_STRATEGIES), None, None, []
    compare(args, list(lc.workload.SCENARIOS), with_throttling=True)


def cmd_calibrate(args) -> None:
    import ledgercache as lc

    sizes = parse_grid(args.sizes) if args.sizes else ([parse_size(z) for z in args.cache_size] if args.cache_size else None)
    progress = Progress(1, quiet=args.quiet)
    result = lc.calibrate.calibrate(
        args.stats, args.metrics, broker_conf=args.broker_conf, design=args.design,
        designs=args.strategy or lc.calibrate.DESIGNS, sizes=sizes, margin=args.margin, seed=args.seed,
        test_duration_minutes=args.duration_minutes, max_backlog_minutes=args.max_backlog_minutes,
        labels=dict(_key_value(x, "--label") for x in args.label) if args.label else None)
    progress.step("replayed")
    print(result.text())
    if args.output:
        out = Path(args.output)
        path = _atomic_file(out / "report.md", lambda tmp: Path(tmp).write_text(result.markdown() + "\n"))
        print(f"report: {path}")


def _key_value(item: str, flag: str) -> tuple[str, str]:
    if "=" not in item:
        raise CliError(f"invalid {flag} {item!r}: use key=value")
    key, value = item.split("=", 1)
    return key.strip(), value.strip()


def cmd_broker_dump(args) -> None:
    import ledgercache as lc

    spec = _spec_with(lc, args.spec, args)
    config = lc.CacheConfig(cache_size_bytes=parse_size(args.cache_size), strategy=args.strategy)
    stats, metrics = lc.broker_workload.dump(spec, config, seed=args.seed)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    lc.broker_stats.write(stats, out / "stats.json")
    lc.metrics.write_prometheus(metrics, out / "metrics.txt")
    # The synthetic broker's cache size, as its broker.conf would say it (managedLedgerCacheSizeMB).
    (out / "broker.conf").write_text(f"managedLedgerCacheSizeMB={max(1, config.cache_size_bytes >> 20)}\n")
    print(f"wrote {out / 'stats.json'} ({len(stats.topics)} topics), {out / 'broker.conf'} and {out / 'metrics.txt'} "
          f"(hit ratio {metrics.hit_ratio if metrics.hit_ratio is not None else 0:.3f} under {args.strategy} at {args.cache_size})")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ledgercache", description="Replay message-log traffic through cache designs.")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, spark_default: bool) -> None:
        sp.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
        sp.add_argument("--cores", default="*", help="local Spark cores (default: all)")
        sp.add_argument("--master", metavar="URL",
                        help="Spark master: local[N], spark://host:port, yarn, k8s://... (implies Spark; a master "
                             "set by spark-submit wins). On a cluster every path given must be one the executors "
                             "see, and their Python (PYSPARK_PYTHON) must have ledgercache installed")
        if spark_default:
            sp.add_argument("--local", action="store_true", help="replay in this process instead of on Spark")
        else:
            sp.add_argument("--spark", action="store_true", help="run on Spark (local unless --master names a cluster)")

    def sweep(sp) -> None:
        sp.add_argument("--strategy", action="append", choices=ALL_STRATEGIES, help="a strategy (repeatable; default: all)")
        sp.add_argument("--cache-size", action="append",
                        help="a cache size such as 512MiB (repeatable; default: a bundled scenario's own sizes, "
                             f"else {', '.join(DEFAULT_SIZES)})")
        sp.add_argument("--sizes", metavar="MIN:MAX[:FACTOR]",
                        help="a grid of cache sizes from MIN to MAX, each FACTOR (default 2) times the one before")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="another CacheConfig setting (repeatable)")
        sp.add_argument("--config-groups", type=int, default=1, help="Spark: split the configurations over this many task groups")

    def omb_flags(sp) -> None:
        sp.add_argument("--driver", help="an OMB Pulsar driver file (driver-pulsar/pulsar.yaml-style); OMB workload "
                        "files default to OMB's own pulsar.yaml values")
        sp.add_argument("--warmup-minutes", type=float, help="override warmupDurationMinutes (OMB files: 1)")
        sp.add_argument("--backlog-max-wait-minutes", type=float,
                        help="override backlogMaxWaitMinutes: how long the lab waits for consumerBacklogSizeGB "
                        "to build and drain (default 240)")
        sp.add_argument("--memory-budget", type=parse_memory, default=4 << 30,
                        help="memory a workload's simulation may take, e.g. 8GiB (default 4GiB)")

    g = sub.add_parser("generate", help="generate a trace from a scenario, an OMB workload file or a broker's stats")
    g.add_argument("spec", nargs="?", help=f"a scenario ({', '.join(__import__('ledgercache').workload.SCENARIOS)}) or a .yaml/.json spec")
    g.add_argument("--from-stats", metavar="STATS_JSON",
                   help="a broker's stats dump (pulsar-admin broker-stats topics, topics stats): its topics as the workload")
    g.add_argument("-o", "--output", required=True, help="trace file (.parquet, .arrow or .csv)")
    g.add_argument("--brokers", type=int, help="override the number of brokers")
    g.add_argument("--duration-minutes", type=float, help="override testDurationMinutes")
    omb_flags(g)
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    common(g, spark_default=False)
    g.set_defaults(run=cmd_generate)

    r = sub.add_parser("replay", help="replay a trace under cache configurations")
    r.add_argument("trace", help="trace file or directory")
    r.add_argument("-o", "--output", required=True, help="output directory")
    sweep(r)
    common(r, spark_default=False)
    r.set_defaults(run=cmd_replay)

    c = sub.add_parser("compare", help="generate, replay and report scenarios side by side")
    c.add_argument("spec", nargs="*", help="scenarios or spec files (default: all bundled scenarios)")
    c.add_argument("-o", "--output", required=True, help="report directory")
    c.add_argument("--brokers", type=int, help="override the number of brokers")
    c.add_argument("--duration-minutes", type=float, help="override testDurationMinutes")
    omb_flags(c)
    c.add_argument("--title", default="ledgercache: cache designs compared")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.add_argument("--target-hit-ratio", type=float,
                   help="also report, per design, the smallest cache size run that reaches this hit ratio")
    c.add_argument("--with-throttling", action="store_true",
                   help="add the publish-throttling scenario, both modes side by side (default when no spec is named)")
    sweep(c)
    common(c, spark_default=True)
    c.set_defaults(run=cmd_compare)

    w = sub.add_parser("sweep", help="the smallest cache reaching a target hit ratio, per design, over a grid of sizes")
    w.add_argument("spec", nargs="*", help="scenarios or spec files (default: all bundled scenarios)")
    w.add_argument("-o", "--output", required=True, help="report directory")
    w.add_argument("--target-hit-ratio", type=float, default=SWEEP_TARGET,
                   help=f"the hit ratio a design must reach (default {SWEEP_TARGET})")
    w.add_argument("--brokers", type=int, help="override the number of brokers")
    w.add_argument("--duration-minutes", type=float, help="override testDurationMinutes")
    omb_flags(w)
    w.add_argument("--title", default="ledgercache: cache size sweep")
    w.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep(w)
    common(w, spark_default=True)
    w.set_defaults(run=cmd_sweep)

    k = sub.add_parser("calibrate", help="your broker: the lab's prediction beside its cache metrics, then a sweep and a recommendation")
    k.add_argument("--stats", required=True, help="the broker's stats dump (pulsar-admin broker-stats topics > stats.json)")
    k.add_argument("--metrics", required=True, help="the broker's Prometheus metrics (curl http://broker:8080/metrics/ > metrics.txt)")
    k.add_argument("--broker-conf", help="the broker's broker.conf (its cache settings; default: the lab's, a 1 GiB cache)")
    k.add_argument("--design", choices=ALL_STRATEGIES,
                   help="the design the broker runs (default pip430, as on Pulsar's master; legacy for Pulsar 4.0)")
    k.add_argument("--strategy", action="append", choices=ALL_STRATEGIES, help="a design to sweep (repeatable; default: all but belady)")
    k.add_argument("--cache-size", action="append", help="a cache size to sweep (repeatable; default: 1/8 to 4x the current size)")
    k.add_argument("--sizes", metavar="MIN:MAX[:FACTOR]", help="a grid of cache sizes to sweep")
    k.add_argument("--margin", type=float, default=0.01, help="recommend the smallest cache within this of a design's best hit ratio (default 0.01)")
    k.add_argument("--duration-minutes", type=float, default=2.0, help="test minutes simulated after the warm-up (default 2)")
    k.add_argument("--max-backlog-minutes", type=float, default=10.0,
                   help="a backlog is simulated as at most this many minutes of lag (default 10)")
    k.add_argument("--label", action="append", metavar="KEY=VALUE", help="pick the metrics series with this label (repeatable)")
    k.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    k.add_argument("-o", "--output", help="also write the report (report.md, section 'Your broker') into this directory")
    k.add_argument("--quiet", action="store_true", help="no progress line")
    k.set_defaults(run=cmd_calibrate, spark=False, master=None)

    b = sub.add_parser("broker-dump", help="a synthetic broker: the stats dump, metrics and broker.conf of a broker running a workload")
    b.add_argument("spec", help="a scenario or a .yaml/.json spec")
    b.add_argument("-o", "--output", required=True, help="directory for stats.json, metrics.txt and broker.conf")
    b.add_argument("--cache-size", default="1GiB", help="the synthetic broker's cache size (default 1GiB)")
    b.add_argument("--strategy", default="pip430", choices=ALL_STRATEGIES, help="the synthetic broker's design (default pip430)")
    b.add_argument("--duration-minutes", type=float, help="override testDurationMinutes")
    b.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    b.set_defaults(run=cmd_broker_dump, spark=False, master=None)

    d = sub.add_parser("demo", help="all bundled scenarios, all strategies, each at its broker-sized caches, on Spark (local by default)")
    d.add_argument("-o", "--output", default="demo-report", help="report directory (default: demo-report)")
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
        m = re.search(r"(?:LedgerCacheError|InvalidArgumentError|ResourceLimitError|ValueError|StorageError|UnsupportedError|TypeError): (.*)", line)
        if m:
            return m.group(1).strip()
    return text.splitlines()[0][:500]


def _needs(args) -> tuple[str, ...]:
    """The optional modules (the ``lab`` extra) a command needs: matplotlib for a report, pyspark
    and pandas for a Spark run. Checked before the command computes anything."""
    from . import _extras

    spark = _uses_spark(args)
    report = args.command in ("compare", "sweep", "demo")
    return (_extras.REPORT if report else ()) + (_extras.SPARK if spark else ())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from . import _extras

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
