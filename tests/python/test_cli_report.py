"""The ledgercache command and the report."""

import subprocess
import sys

import pyarrow as pa
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
    r = run_cli(
        "replay", str(trace), "-o", str(out), "--strategy", "pip430", "--strategy", "lru", "--cache-size", "2MiB"
    )
    assert r.returncode == 0, r.stderr
    assert {p.name for p in out.iterdir()} == {"summary.parquet", "summary.csv", "timeseries.parquet", cli.MANIFEST}
    summary = pq.read_table(out / "summary.parquet")
    assert summary.column("strategy").to_pylist() == ["pip430", "lru"]
    assert "hit ratio" in r.stdout
    # The command line's reports measure what lc.replay's default leaves out.
    assert summary.column("peak_retained_bytes").null_count == 0 and "not measure" not in r.stdout
    report = tmp_path / "report"
    r = run_cli(
        "compare",
        "key-shared-slow-consumer",
        "-o",
        str(report),
        "--local",
        "--quiet",
        "--cache-size",
        "1MiB",
        "--cache-size",
        "4MiB",
        "--strategy",
        "pip430",
        "--strategy",
        "pip430-fifo",
        "--with-throttling",
        *SMALL,
    )
    assert r.returncode == 0, r.stderr
    names = {p.name for p in report.iterdir()}
    assert {"report.md", "report.html", "summary.parquet", "timeseries.parquet", "publish_delays.parquet"} <= names
    delays = pq.read_table(report / "publish_delays.parquet")
    assert sorted(set(delays.column("mode").to_pylist())) == ["pause-connection", "throttle-producer"]
    assert "| throttle-producer | cold | 500 | 0.0 | 0.0 | 0.0 | 0 | yes |" in (report / "report.md").read_text()
    assert "publish throttle-producer  cold   p99       0.0 ms" in r.stdout
    assert any(n.startswith("hit-ratio-") and n.endswith(".png") for n in names)
    assert "Not measured" not in (report / "report.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
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
    pq.write_table(
        lc.workload.generate("seek-storm", seed=1).slice(0, 10).drop_columns(["size"]), tmp_path / "bad.parquet"
    )
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
        assert (
            f"| {r['strategy']} | {r['cache_size_bytes'] >> 20} MiB | {r['hit_ratio']:.3f} | {r['storage_read_ops']:,} |"
            in text
        )
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == 3
    import matplotlib.image as mpimg

    for png in pngs:
        assert png.stat().st_size > 10_000
        img = mpimg.imread(png)
        assert img.shape[0] > 200 and img.shape[1] > 300 and img.std() > 0.01, png.name
        assert png.name in text and png.name in (tmp_path / "report.html").read_text()


def test_size_parsing():
    # Binary whatever the spelling, as Pulsar's ...MB keys and the JVM's -Xmx read them.
    assert cli.parse_size("16MiB") == 16 << 20
    assert cli.parse_size("64MB") == 64 << 20
    for text in ("4GB", "4g", "4G", "4GiB", "4gib", "4 gb"):
        assert cli.parse_size(text) == 4 << 30, text
    assert cli.parse_size("1.5GiB") == 3 << 29
    assert cli.parse_size("4096B") == cli.parse_size("4096b") == 4096
    with pytest.raises(cli.CliError, match=r"write 1024B for bytes, or 1024MiB"):
        cli.parse_size("1024")  # once 1 KiB, silently
    with pytest.raises(cli.CliError, match="unknown unit 'parsecs'"):
        cli.parse_size("12 parsecs")
    assert [cli.format_size(n) for n in (4096, 32 << 20, 3 << 29, 1 << 40, 1_153_433)] == [
        "4 KiB",
        "32 MiB",
        "1.5 GiB",
        "1 TiB",
        "1,153,433 B",
    ]


def test_report_says_which_runs_depart_from_pulsar_as_shipped(tmp_path):
    trace = lc.workload.generate({**lc.workload.SCENARIOS["tailing-fan-out"], "testDurationMinutes": 0.05}, seed=1)
    shipped = lc.CacheConfig(cache_size_bytes=1 << 20)
    summary = lc.replay(trace, [shipped])
    text = lc.report.write_report(summary, None, tmp_path / "a").read_text()
    assert "## How the designs are simulated" in text
    assert "`apply_continue_caching_window` is off in every run, as Pulsar ships it" in text
    assert "`exact_cursor_counts` is off in every run, as Pulsar ships it" in text
    summary = lc.replay(trace, [shipped, shipped.replace(apply_continue_caching_window=True, exact_cursor_counts=True)])
    text = lc.report.write_report(summary, None, tmp_path / "b").read_text()
    assert "**Not as Pulsar ships it:** `apply_continue_caching_window` = True" in text
    assert "**Not as Pulsar ships it:** `exact_cursor_counts` = True" in text
    assert "How the designs are simulated" in (tmp_path / "b" / "report.html").read_text()


def test_size_grid_parsing():
    assert cli.parse_grid("16MiB:128MiB") == [16 << 20, 32 << 20, 64 << 20, 128 << 20]
    assert cli.parse_grid("1GiB:4GiB:4") == [1 << 30, 4 << 30]
    assert cli.parse_grid("100B:250B:1.5") == [100, 150, 225]
    assert cli.parse_grid("1g:4GB:4") == [1 << 30, 4 << 30]
    for bad in (
        "16MiB",
        "4GiB:1GiB",
        "0B:1MiB",
        "1MiB:2MiB:1",
        "1MiB:2MiB:x",
        "1MiB:2MiB:nan",
        "1B:1TiB:1.01",
        "100:250B",
    ):
        with pytest.raises(cli.CliError):
            cli.parse_grid(bad)


def _summary(rows):
    keys = ("entries_read", "read_bytes", "hits", "storage_read_ops", "storage_read_bytes", "evicted_entries")
    return pa.Table.from_pylist(
        [
            {
                "strategy": s,
                "cache_size_bytes": z,
                **dict.fromkeys(keys, 0),
                "entries_read": 100,
                "hits": hits,
                "read_bytes": 1000,
                "storage_read_bytes": 10 * (100 - hits),
            }
            for s, z, hits in rows
        ]
    )


def test_smallest_sizes_is_the_first_size_run_that_reaches_the_target():
    summary = _summary(
        [
            ("lru", 1 << 20, 50),
            ("lru", 4 << 20, 91),
            ("lru", 2 << 20, 89),
            ("lru", 8 << 20, 99),
            ("pip430", 1 << 20, 95),
            ("pip430", 2 << 20, 96),
            ("legacy", 1 << 20, 10),
            ("legacy", 8 << 20, 20),
        ]
    )
    rows = {r["strategy"]: r for r in lc.report.smallest_sizes(summary, 0.9)}
    assert rows["lru"]["cache_size_bytes"] == 4 << 20 and rows["lru"]["hit_ratio"] == pytest.approx(0.91)
    assert rows["lru"]["saved_bytes"] == 1000 - 90
    assert rows["pip430"]["cache_size_bytes"] == 1 << 20
    assert rows["legacy"]["cache_size_bytes"] is None and rows["legacy"]["largest_size_bytes"] == 8 << 20
    assert rows["legacy"]["hit_ratio"] == pytest.approx(0.2)
    text = lc.report.sweep_text(summary, 0.9)
    assert "not reached" in text and "4 MiB" in text
    with pytest.raises(lc.InvalidArgumentError):
        lc.report.smallest_sizes(summary, 1.5)


def test_sweep_reports_the_smallest_size_per_design(tmp_path):
    out = tmp_path / "sweep"
    r = run_cli(
        "sweep",
        "catch-up-under-pressure",
        "-o",
        str(out),
        "--local",
        "--quiet",
        "--sizes",
        "8MiB:512MiB:4",
        "--strategy",
        "lru",
        "--strategy",
        "legacy",
        "--target-hit-ratio",
        "0.9",
        "--duration-minutes",
        "0.5",
    )
    assert r.returncode == 0, r.stderr
    summary = pq.read_table(out / "summary.parquet")
    assert sorted(set(summary.column("cache_size_bytes").to_pylist())) == [8 << 20, 32 << 20, 128 << 20, 512 << 20]
    expected = lc.report.smallest_sizes(summary, 0.9)
    text = (out / "report.md").read_text()
    assert "### Smallest cache with hit ratio >= 0.9" in text
    for row in expected:
        size = "not reached" if row["cache_size_bytes"] is None else lc.report._size(row["cache_size_bytes"])
        assert f"| {row['strategy']} | {size} | {row['hit_ratio']:.3f} |" in text
    assert "smallest cache with hit ratio >= 0.9" in r.stdout


def test_compare_runs_each_bundled_scenario_at_its_own_sizes(tmp_path):
    out = tmp_path / "cmp"
    r = run_cli(
        "compare",
        "tailing-fan-out",
        "seek-storm",
        "-o",
        str(out),
        "--local",
        "--quiet",
        "--strategy",
        "lru",
        "--duration-minutes",
        "0.05",
    )
    assert r.returncode == 0, r.stderr
    summary = pq.read_table(out / "summary.parquet").to_pylist()
    for name in ("tailing-fan-out", "seek-storm"):
        sizes = sorted({row["cache_size_bytes"] for row in summary if row["scenario"] == name})
        assert sizes == list(lc.workload.SCENARIO_CACHE_SIZES[name])
