"""The ledgercache command and the report."""

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import ledgercache as lc
from ledgercache import cli

SMALL = ["--duration-minutes", "0.2"]


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ledgercache.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_generate_replay_compare_write_what_they_promise(tmp_path):
    trace = tmp_path / "trace.parquet"
    r = run_cli("generate", "seek-storm", "-o", str(trace), *SMALL)
    assert r.returncode == 0, r.stderr
    assert pq.read_table(trace).schema == lc.trace.SCHEMA
    out = tmp_path / "replayed"
    r = run_cli("replay", str(trace), "-o", str(out), "--strategy", "pip430", "--strategy", "lru", "--cache-size", "2MiB")
    assert r.returncode == 0, r.stderr
    assert {p.name for p in out.iterdir()} == {"summary.parquet", "summary.csv", "timeseries.parquet"}
    summary = pq.read_table(out / "summary.parquet")
    assert summary.column("strategy").to_pylist() == ["pip430", "lru"]
    assert "hit ratio" in r.stdout
    report = tmp_path / "report"
    r = run_cli("compare", "key-shared-slow-consumer", "-o", str(report), "--local", "--quiet", "--cache-size", "1MiB",
                "--cache-size", "4MiB", "--strategy", "pip430", "--strategy", "pip430-fifo", "--with-throttling", *SMALL)
    assert r.returncode == 0, r.stderr
    names = {p.name for p in report.iterdir()}
    assert {"report.md", "report.html", "summary.parquet", "timeseries.parquet", "publish_delays.parquet"} <= names
    delays = pq.read_table(report / "publish_delays.parquet")
    assert sorted(set(delays.column("mode").to_pylist())) == ["pause-connection", "throttle-producer"]
    assert "| throttle-producer | cold | 500 | 0.0 | 0.0 | 0.0 | 0 | yes |" in (report / "report.md").read_text()
    assert "publish throttle-producer  cold   p99       0.0 ms" in r.stdout
    assert any(n.startswith("hit-ratio-") and n.endswith(".png") for n in names)


@pytest.mark.parametrize(
    "args, message",
    [
        (["replay", "missing.parquet", "-o", "out"], "does not exist"),
        (["replay", "bad.parquet", "-o", "out"], "'size' is missing"),
        (["replay", "trace.parquet", "-o", "out", "--cache-size", "lots"], "invalid cache size"),
        (["compare", "no-such-scenario", "-o", "out", "--local"], "does not exist"),
        (["replay", "trace.parquet", "-o", "out", "--set", "nonsense=1"], "nonsense"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing_behind(tmp_path, args, message):
    lc.trace.write(lc.workload.generate("seek-storm", seed=1).slice(0, 2000), tmp_path / "trace.parquet")
    pq.write_table(lc.workload.generate("seek-storm", seed=1).slice(0, 10).drop_columns(["size"]), tmp_path / "bad.parquet")
    before = set(tmp_path.iterdir())
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledgercache: error:") and message in lines[0], r.stderr
    assert set(tmp_path.iterdir()) == before, "nothing half-done in the output directory"


def test_unknown_strategy_is_rejected_by_the_parser():
    r = run_cli("replay", "t.parquet", "-o", "out", "--strategy", "fifo")
    assert r.returncode != 0 and "invalid choice" in r.stderr


def test_report_tables_hold_the_replay_numbers_and_pngs_are_real(tmp_path):
    trace = lc.workload.generate({**lc.workload.SCENARIOS["shared-overflow"], "testDurationMinutes": 0.3}, seed=2)
    configs = [lc.CacheConfig(cache_size_bytes=z, strategy=s) for z in (1 << 20, 4 << 20) for s in ("pip430", "lru")]
    summary, series = lc.replay(trace, configs, with_timeseries=True)
    path = lc.report.write_report(summary, series, tmp_path)
    text = path.read_text()
    for r in summary.to_pylist():
        assert f"| {r['strategy']} | {r['cache_size_bytes'] >> 20} MiB | {r['hit_ratio']:.3f} | {r['storage_read_ops']:,} |" in text
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == 3
    import matplotlib.image as mpimg

    for png in pngs:
        assert png.stat().st_size > 10_000
        img = mpimg.imread(png)
        assert img.shape[0] > 200 and img.shape[1] > 300 and img.std() > 0.01, png.name
        assert png.name in text and png.name in (tmp_path / "report.html").read_text()


def test_size_parsing():
    assert cli.parse_size("16MiB") == 16 << 20
    assert cli.parse_size("64MB") == 64_000_000
    assert cli.parse_size("1024") == 1024
    with pytest.raises(cli.CliError):
        cli.parse_size("12 parsecs")


def test_report_says_which_runs_depart_from_pulsar_as_shipped(tmp_path):
    trace = lc.workload.generate({**lc.workload.SCENARIOS["tailing-fan-out"], "testDurationMinutes": 0.05}, seed=1)
    shipped = lc.CacheConfig(cache_size_bytes=1 << 20)
    summary = lc.replay(trace, [shipped])
    text = lc.report.write_report(summary, None, tmp_path / "a").read_text()
    assert "## How the designs are simulated" in text
    assert "`apply_continue_caching_window` is off in every run, as Pulsar ships it" in text
    summary = lc.replay(trace, [shipped, shipped.replace(apply_continue_caching_window=True)])
    text = lc.report.write_report(summary, None, tmp_path / "b").read_text()
    assert "**Not as Pulsar ships it:** `apply_continue_caching_window` = True" in text
    assert "How the designs are simulated" in (tmp_path / "b" / "report.html").read_text()
