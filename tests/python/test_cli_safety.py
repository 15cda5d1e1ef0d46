"""The command line never loses data: output directories, file modes, killed runs; and the inputs
it reads without surprises (sizes, traces for compare/sweep, misspelt scenarios, replay progress)."""

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import ledgercache as lc
from ledgercache import cli

REPLAY = ["--strategy", "lru", "--cache-size", "2MiB"]


def run_cli(*args, cwd=None, umask=None):
    return subprocess.run(
        [sys.executable, "-m", "ledgercache.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        preexec_fn=None if umask is None else (lambda: os.umask(umask)),
    )


def one_line_error(r, *fragments):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledgercache: error: "), r.stderr
    for fragment in fragments:
        assert fragment in lines[0], r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def small_trace():
    return lc.workload.generate("seek-storm", seed=1).slice(0, 3000)


@pytest.fixture
def trace_csv(tmp_path, small_trace):
    path = tmp_path / "trace.csv"
    lc.trace.write(small_trace, path)
    return path


def contents(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


# --- output directories -------------------------------------------------------------------------


def test_replay_into_the_directory_holding_the_trace_keeps_the_trace(tmp_path, trace_csv):
    (tmp_path / "notes.txt").write_text("mine")
    before = contents(tmp_path)
    r = run_cli("replay", "trace.csv", "-o", ".", *REPLAY, cwd=tmp_path)
    one_line_error(r, "did not write", "notes.txt", "trace.csv", "--force")
    assert contents(tmp_path) == before and not any(p.name.startswith(".") for p in tmp_path.iterdir())

    r = run_cli("replay", "trace.csv", "-o", ".", *REPLAY, "--force", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    after = contents(tmp_path)
    assert {k: after[k] for k in before} == before  # the trace and the notes, byte for byte
    assert set(after) == set(before) | {"summary.parquet", "summary.csv", "timeseries.parquet", cli.MANIFEST}
    assert pq.read_table(tmp_path / "summary.parquet").column("strategy").to_pylist() == ["lru"]

    # The outputs are ours now, but the trace and the notes are not: a rerun still needs --force.
    one_line_error(run_cli("replay", "trace.csv", "-o", ".", *REPLAY, cwd=tmp_path), "--force")
    r = run_cli(
        "replay", "trace.csv", "-o", ".", "--strategy", "pip430", "--cache-size", "2MiB", "--force", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert pq.read_table(tmp_path / "summary.parquet").column("strategy").to_pylist() == ["pip430"]
    assert (tmp_path / "trace.csv").read_bytes() == before["trace.csv"]


def test_foreign_files_refuse_the_directory_and_force_keeps_them(tmp_path, trace_csv):
    out = tmp_path / "results"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "data.bin").write_bytes(b"\x00" * 10)
    (out / ".hidden").write_text("dotfile")
    (out / "README").write_text("theirs")
    one_line_error(run_cli("replay", str(trace_csv), "-o", str(out), *REPLAY), str(out), "--force")
    assert sorted(p.name for p in out.iterdir()) == [".hidden", "README", "sub"]

    r = run_cli("replay", str(trace_csv), "-o", str(out), *REPLAY, "--force")
    assert r.returncode == 0, r.stderr
    assert (out / "README").read_text() == "theirs" and (out / ".hidden").read_text() == "dotfile"
    assert (out / "sub" / "data.bin").read_bytes() == b"\x00" * 10
    assert (out / "summary.parquet").exists()


def test_a_foreign_file_under_an_output_name_is_never_replaced(tmp_path, trace_csv):
    out = tmp_path / "results"
    out.mkdir()
    (out / "summary.csv").write_text("my own summary")
    for force in ([], ["--force"]):
        one_line_error(run_cli("replay", str(trace_csv), "-o", str(out), *REPLAY, *force), "summary.csv", "move them")
        assert (out / "summary.csv").read_text() == "my own summary"
        assert [p.name for p in out.iterdir()] == ["summary.csv"]


def test_rerun_over_our_own_output_replaces_it_and_an_edited_output_is_theirs(tmp_path, trace_csv):
    out = tmp_path / "results"
    assert run_cli("replay", str(trace_csv), "-o", str(out), *REPLAY).returncode == 0
    r = run_cli("replay", str(trace_csv), "-o", str(out), "--strategy", "pip430", "--cache-size", "4MiB")
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out / "summary.parquet").column("cache_size_bytes").to_pylist() == [4 << 20]
    assert sorted(p.name for p in out.iterdir()) == sorted([cli.MANIFEST, *cli.REPLAY_OUTPUTS])
    # Copied elsewhere (new mtimes, same bytes), it is still ours.
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in out.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    assert run_cli("replay", str(trace_csv), "-o", str(copy), *REPLAY).returncode == 0
    # Edited by hand, it is the user's: not replaced, with or without --force.
    with open(out / "summary.csv", "a") as f:
        f.write("my note\n")
    one_line_error(run_cli("replay", str(trace_csv), "-o", str(out), *REPLAY, "--force"), "summary.csv")
    assert (out / "summary.csv").read_text().endswith("my note\n")


def test_files_an_earlier_run_wrote_and_this_one_does_not_are_removed_only_if_unchanged(tmp_path):
    out = tmp_path / "out"

    def writes(*names):
        return lambda stage: [(stage / n).write_text(n) for n in names]

    cli.write_outputs(out, writes("a.png", "b.png", "c.png"))
    (out / "c.png").write_text("edited")  # now the user's
    (out / "mine.txt").write_text("mine")
    with pytest.raises(cli.CliError, match="did not write"):
        cli.write_outputs(out, writes("a.png"))
    cli.write_outputs(out, writes("a.png"), force=True)
    assert sorted(p.name for p in out.iterdir()) == sorted([cli.MANIFEST, "a.png", "c.png", "mine.txt"])
    assert (out / "c.png").read_text() == "edited"


def test_an_output_that_is_a_file_or_inside_the_trace_directory_is_refused(tmp_path, small_trace):
    lc.trace.write(small_trace, tmp_path / "t.parquet")
    (tmp_path / "out.txt").write_text("keep")
    one_line_error(run_cli("replay", "t.parquet", "-o", "out.txt", *REPLAY, "--force", cwd=tmp_path), "is a file")
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    lc.trace.write(small_trace, dataset / "part-0.parquet")
    one_line_error(
        run_cli("replay", str(dataset), "-o", str(dataset / "r"), *REPLAY, "--force"), "inside the trace directory"
    )
    assert (tmp_path / "out.txt").read_text() == "keep"
    assert [p.name for p in dataset.iterdir()] == ["part-0.parquet"]


def test_broker_dump_refuses_a_directory_of_other_files(tmp_path):
    (tmp_path / "stats.json").write_text("{}")  # someone's real broker's dump
    one_line_error(
        run_cli(
            "broker-dump",
            "tailing-fan-out",
            "-o",
            str(tmp_path),
            "--cache-size",
            "16MiB",
            "--duration-minutes",
            "0.05",
            "--force",
        ),
        "stats.json",
    )
    assert (tmp_path / "stats.json").read_text() == "{}"


# --- modes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)])
def test_outputs_follow_the_umask(tmp_path, trace_csv, umask, file_mode, dir_mode):
    out = tmp_path / "new"
    assert run_cli("replay", str(trace_csv), "-o", str(out), *REPLAY, umask=umask).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == dir_mode
    for p in out.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == file_mode, p.name
    # Replacing files in an existing directory, and generate's single file.
    assert run_cli("replay", str(trace_csv), "-o", str(out), *REPLAY, umask=umask).returncode == 0
    assert {stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {file_mode}
    trace = tmp_path / "gen.parquet"
    r = run_cli("generate", "seek-storm", "-o", str(trace), "--duration-minutes", "0.02", "--quiet", umask=umask)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(trace.stat().st_mode) == file_mode


# --- killed runs ---------------------------------------------------------------------------------

# Runs the CLI in a child that stops at a chosen point (writes `reached`, then sleeps) to be killed.
KILLABLE = """
import os, sys, time
from pathlib import Path
from ledgercache import cli
reached = Path(sys.argv[1])

def stop():
    reached.write_text("here")
    time.sleep(120)

point = sys.argv[2]
if point == "fill":  # a file half written in the stage directory
    import pyarrow.csv as pcsv
    def write_csv(table, path, **kw):
        with open(path, "w") as f:
            f.write("half a li")
            f.flush()
        stop()
    pcsv.write_csv = write_csv
elif point == "commit":  # one output moved into place, the others not yet
    real = os.replace
    def replace(src, dst):
        real(src, dst)
        if Path(dst).name == "summary.parquet":
            stop()
    os.replace = replace
elif point == "generate":  # the trace half written
    real_advance = cli.Progress.advance
    def advance(self, n, label=""):
        real_advance(self, n, label)
        stop()
    cli.Progress.advance = advance
sys.exit(cli.main(sys.argv[3:]))
"""


def run_until_killed(tmp_path, point, *argv):
    reached = tmp_path / "reached"
    # The context closes the stderr pipe (an open one is a ResourceWarning, an error in the tests).
    with subprocess.Popen(
        [sys.executable, "-c", KILLABLE, str(reached), point, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        deadline = time.monotonic() + 120
        while not reached.exists():
            if child.poll() is not None:
                raise AssertionError(f"the run ended before {point}: {child.stderr.read()}")
            assert time.monotonic() < deadline, f"never reached {point}"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    reached.unlink()


@pytest.mark.parametrize("point", ["fill", "commit"])
def test_a_killed_replay_leaves_whole_files_and_a_directory_the_next_run_takes(tmp_path, trace_csv, point):
    out = tmp_path / "results"
    assert (
        run_cli("replay", str(trace_csv), "-o", str(out), "--strategy", "lru", "--cache-size", "1MiB").returncode == 0
    )
    old = contents(out)
    run_until_killed(
        tmp_path, point, "replay", str(trace_csv), "-o", str(out), "--strategy", "lru", "--cache-size", "8MiB"
    )
    now = contents(out)
    assert set(now) == set(old)
    # Killed in the commit, the files moved (in name order) up to summary.parquet are whole and new, the
    # others whole and old; killed before it, all are old.
    moved = {"summary.csv", "summary.parquet"} if point == "commit" else set()
    for name in cli.REPLAY_OUTPUTS:
        if name not in moved:
            assert now[name] == old[name], name
    for name in moved:
        assert now[name] != old[name]
    if moved:
        assert pq.read_table(out / "summary.parquet").column("cache_size_bytes").to_pylist() == [8 << 20]
    leftovers = [p for p in out.iterdir() if p.name.startswith(cli.STAGE_PREFIX)]
    assert len(leftovers) == 1 and leftovers[0].is_dir()
    # The next run, without --force, takes the directory as its own and reports the leftover.
    r = run_cli("replay", str(trace_csv), "-o", str(out), "--strategy", "lru", "--cache-size", "4MiB")
    assert r.returncode == 0, r.stderr
    assert f"{leftovers[0]} was left by an interrupted run" in r.stderr
    assert pq.read_table(out / "summary.parquet").column("cache_size_bytes").to_pylist() == [4 << 20]


def test_a_killed_generate_leaves_the_old_trace(tmp_path):
    trace = tmp_path / "trace.parquet"
    assert run_cli("generate", "seek-storm", "-o", str(trace), "--duration-minutes", "0.02", "--quiet").returncode == 0
    old = trace.read_bytes()
    run_until_killed(tmp_path, "generate", "generate", "seek-storm", "-o", str(trace), "--duration-minutes", "0.3")
    assert trace.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == ["trace.parquet"]


# --- sizes ---------------------------------------------------------------------------------------


def test_a_bare_number_is_refused_and_the_parsed_sizes_are_printed(tmp_path, trace_csv):
    one_line_error(
        run_cli("replay", str(trace_csv), "-o", "r", "--cache-size", "4096", cwd=tmp_path),
        "'4096'",
        "4096B for bytes, or 4096MiB",
    )
    assert not (tmp_path / "r").exists()
    r = run_cli(
        "replay",
        str(trace_csv),
        "-o",
        "r",
        "--strategy",
        "lru",
        "--cache-size",
        "32MiB",
        "--cache-size",
        "128m",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "cache sizes: 32 MiB, 128 MiB\n" in r.stdout
    assert pq.read_table(tmp_path / "r" / "summary.parquet").column("cache_size_bytes").to_pylist() == [
        32 << 20,
        128 << 20,
    ]


def test_gb_means_gib_everywhere_sizes_are_read(tmp_path):
    r = run_cli(
        "broker-dump", "tailing-fan-out", "-o", str(tmp_path / "b"), "--cache-size", "1GB", "--duration-minutes", "0.05"
    )
    assert r.returncode == 0, r.stderr
    assert "cache size: 1 GiB" in r.stdout
    assert (tmp_path / "b" / "broker.conf").read_text() == "managedLedgerCacheSizeMB=1024\n"
    r = run_cli("generate", "seek-storm", "-o", str(tmp_path / "t.parquet"), "--memory-budget", "8")
    assert r.returncode == 2 and "invalid memory budget '8': a number needs a unit: write 8B for bytes" in r.stderr


def test_set_takes_sizes_for_byte_settings():
    configs = cli._configs(lc, ["lru"], [1 << 20], ["storage_read_buffer_bytes=64KiB"])
    assert configs[0].storage_read_buffer_bytes == 64 << 10
    configs = cli._configs(lc, ["lru"], [1 << 20], ["storage_read_buffer_bytes=65536"])
    assert configs[0].storage_read_buffer_bytes == 65536  # the key says bytes


# --- traces for compare and sweep; misspelt scenarios; progress -----------------------------------


def test_compare_and_sweep_take_trace_files(tmp_path, small_trace):
    lc.trace.write(small_trace, tmp_path / "a.parquet")
    lc.trace.write(small_trace, tmp_path / "b.csv")
    r = run_cli(
        "compare",
        "a.parquet",
        "b.csv",
        "-o",
        "cmp",
        "--local",
        "--quiet",
        "--strategy",
        "lru",
        "--cache-size",
        "2MiB",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    summary = pq.read_table(tmp_path / "cmp" / "summary.parquet").to_pylist()
    assert sorted(row["scenario"] for row in summary) == ["a", "b"]
    assert summary[0]["hits"] == summary[1]["hits"]  # the same trace, read from Parquet and from CSV
    expected = lc.replay(small_trace, [lc.CacheConfig(cache_size_bytes=2 << 20, strategy="lru")]).to_pylist()[0]
    assert summary[0]["hits"] == expected["hits"]
    r = run_cli(
        "sweep",
        "a.parquet",
        "-o",
        "sw",
        "--local",
        "--quiet",
        "--strategy",
        "lru",
        "--sizes",
        "1MiB:4MiB",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "cache sizes: 1 MiB, 2 MiB, 4 MiB" in r.stdout
    assert "smallest cache with hit ratio >= 0.9" in r.stdout


def test_a_trace_without_its_suffix_is_named_and_a_missing_one_is_not_a_spec(tmp_path, small_trace):
    lc.trace.write(small_trace, tmp_path / "a.parquet")
    (tmp_path / "a.parquet").rename(tmp_path / "trace.data")
    one_line_error(
        run_cli("compare", "trace.data", "-o", "cmp", "--local", cwd=tmp_path),
        "trace.data is a Parquet file",
        ".parquet suffix",
    )
    one_line_error(
        run_cli("compare", "missing.parquet", "-o", "cmp", "--local", cwd=tmp_path),
        "trace missing.parquet does not exist",
    )
    one_line_error(run_cli("generate", "trace.parquet", "-o", "t.csv", cwd=tmp_path), "is a trace, not a spec")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.data"]


def test_a_misspelt_scenario_or_setting_gets_a_suggestion(tmp_path):
    one_line_error(
        run_cli("compare", "shared-overflw", "-o", "cmp", "--local", cwd=tmp_path),
        "shared-overflw does not exist",
        "did you mean shared-overflow?",
    )
    one_line_error(run_cli("generate", "seek_storm", "-o", "t.parquet", cwd=tmp_path), "did you mean seek-storm?")
    (tmp_path / "w.yaml").write_text("topics: 1\nproducerRat: 10\n")
    one_line_error(
        run_cli("generate", "w.yaml", "-o", "t.parquet", cwd=tmp_path),
        "w.yaml",
        "'producerRat'",
        "did you mean producerRate?",
    )
    # A value the generator refuses names the file it came from, and the key.
    (tmp_path / "w.yaml").write_text("topics: 1\nproducerRate: -5\n")
    one_line_error(run_cli("generate", "w.yaml", "-o", "t.parquet", cwd=tmp_path), "invalid spec w.yaml: producerRate")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.yaml"]


def test_replay_shows_progress_in_events(tmp_path, small_trace):
    lc.trace.write(small_trace, tmp_path / "t.parquet")
    r = run_cli(
        "replay",
        "t.parquet",
        "-o",
        "r",
        "--strategy",
        "lru",
        "--strategy",
        "belady",
        "--cache-size",
        "1MiB",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    # belady's second pass reads the trace again: twice the events.
    assert (
        last.startswith(f"[{2 * small_trace.num_rows:,}/~{2 * small_trace.num_rows:,} events]") and "replayed" in last
    )
    quiet = run_cli(
        "replay", "t.parquet", "-o", "r", "--strategy", "lru", "--cache-size", "1MiB", "--quiet", cwd=tmp_path
    )
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_a_killed_run_into_a_new_directory_leaves_no_directory(tmp_path, trace_csv):
    runs = tmp_path / "runs"
    out = runs / "results"
    run_until_killed(tmp_path, "fill", "replay", str(trace_csv), "-o", str(out), *REPLAY)
    assert not out.exists()  # a new directory appears whole, or not at all
    (stage,) = list(runs.iterdir())
    assert stage.name.startswith(f"{cli.STAGE_PREFIX}results.") and stage.is_dir()
    # Named as ledgercache's, the leftover does not make its directory someone else's (no --force needed),
    # and is not removed: another run could be writing into it.
    r = run_cli("replay", str(trace_csv), "-o", str(runs), *REPLAY)
    assert r.returncode == 0 and f"{stage} was left by an interrupted run" in r.stderr, r.stderr
    assert stage.is_dir() and (runs / "summary.parquet").exists()


def test_a_workload_setting_given_to_set_says_it_belongs_in_a_spec_file(tmp_path):
    # `--set` takes cache settings; a reader knob from the lab's docs used to fail as an "unknown
    # setting" without saying where it goes.
    r = run_cli(
        "compare",
        "catch-up-under-pressure",
        "--local",
        "-o",
        str(tmp_path / "out"),
        "--set",
        "brokerDeduplicationEnabled=1",
    )
    one_line_error(r, "--set brokerDeduplicationEnabled: a workload setting", "spec file")
    with pytest.raises(cli.CliError, match=r"^--set replication_clusters: a workload setting"):
        cli._configs(lc, ["lru"], [1 << 20], ["replication_clusters=1"])
    # A cache setting still goes through, and a key neither knows still gets the cache's message.
    assert cli._configs(lc, ["lru"], [1 << 20], ["eviction_interval_ms=10"])[0].eviction_interval_ms == 10
    with pytest.raises(lc.LedgerCacheError, match='unknown setting "no_such_key"'):
        cli._configs(lc, ["lru"], [1 << 20], ["no_such_key=1"])


def test_stats_with_nothing_to_simulate_are_refused_naming_the_file(tmp_path):
    # apache/pulsar#19248's partitioned-stats: a replicated topic with every rate 0 and no
    # subscription. The refusal names the file, as the reader's own errors do.
    stats = tmp_path / "partitioned-stats.json"
    stats.write_text(
        '{"persistent://tenant1/ns1/topic1": {"msgRateIn": 0.0, "msgRateOut": 0.0, "subscriptions": {},'
        ' "replication": {"Cluster-2": {"connected": false}}, "metadata": {"partitions": 1}, "partitions": {}}}'
    )
    r = run_cli("generate", "--from-stats", str(stats), "-o", str(tmp_path / "t.parquet"))
    one_line_error(r, str(stats), "no persistent topic publishes or has a subscription")
    assert not (tmp_path / "t.parquet").exists()
