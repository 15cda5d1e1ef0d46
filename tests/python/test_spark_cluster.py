"""ledgercache on a Spark cluster: a standalone master and one worker on 127.0.0.1, started from the
pyspark package, whose executors run their own virtual environment with the release wheel installed.

Run by ``make test-cluster`` (part of ``make test``), which builds the wheel and passes it in
``LEDGERCACHE_WHEEL``; by hand: ``.venv/bin/python -m pytest -m cluster tests/python/test_spark_cluster.py``
after ``make wheel``. Skipped, with the reason, where Java or the wheel is missing. Every process the
fixture starts (the master and the worker; the worker stops its executors) is stopped by its id,
also when a test fails; logs go to ``target/cluster/logs``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ledgercache as lc
from ledgercache import cli

# Starts a master, a worker and their JVMs, and builds an executor venv: slower than the default limit.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]
pyspark = pytest.importorskip("pyspark", reason="make venv installs pyspark; the cluster test needs it")

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "cluster"
EXECUTOR_VENV = ROOT / "target" / "cluster-venv"
SPARK_HOME = Path(pyspark.__file__).parent
SPEC = {**lc.workload.SCENARIOS["tailing-fan-out"], "brokers": 2, "testDurationMinutes": 0.1}
STRATEGIES = ("pip430", "lru", "belady")


def _java_missing() -> str | None:
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    if not java or not Path(java).exists():
        return "Java is not installed (no java on PATH or in JAVA_HOME): Spark's master and worker need Java 17"
    return None


def _wheel() -> Path:
    named = os.environ.get("LEDGERCACHE_WHEEL")
    if named:  # make test-cluster built it: it must be there
        assert Path(named).is_file(), f"LEDGERCACHE_WHEEL={named} is not a file"
        return Path(named)
    found = sorted(glob.glob(str(ROOT / "target" / "wheels" / "ledgercache-*.whl")))
    if not found:
        pytest.skip("no wheel in target/wheels: run `make wheel` first (make test-cluster does)")
    return Path(found[-1])


def _executor_python(wheel: Path) -> str:
    """A virtual environment of the executors' own, with the wheel (and what it declares: pyarrow,
    numpy) installed by pip: the driver's .venv is not on the executors' path."""
    python = EXECUTOR_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(EXECUTOR_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, str(wheel)], check=True)  # its dependencies
    subprocess.run([*pip, "--force-reinstall", "--no-deps", str(wheel)], check=True)  # this build, same version or not
    return str(python)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(log: Path, text: str, process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(
        f"{log.name}: no {text!r} within {seconds:.0f}s (exit {process.poll()}):\n"
        + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # the worker's shutdown hook stops its executors
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="module")
def cluster():
    reason = _java_missing()
    if reason:
        print(f"\ncluster test skipped: {reason}")
        pytest.skip(reason)
    python = _executor_python(_wheel())
    logs = WORK / "logs"
    shutil.rmtree(WORK, ignore_errors=True)
    logs.mkdir(parents=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(logs),
        "SPARK_WORKER_DIR": str(WORK / "work"),
    }
    env.pop("PYSPARK_PYTHON", None)  # the executors' Python comes with each application
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    started: list[subprocess.Popen] = []
    try:
        with open(logs / "master.log", "w") as out:
            master = subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(_free_port()),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=WORK,
            )
        started.append(master)
        _wait_for(logs / "master.log", "I have been elected leader", master, 120)
        with open(logs / "worker.log", "w") as out:
            worker = subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    master_url,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(_free_port()),
                    "--webui-port",
                    str(_free_port()),
                    "--cores",
                    "2",
                    "--memory",
                    "3g",
                    "--work-dir",
                    str(WORK / "work"),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=WORK,
            )
        started.append(worker)
        _wait_for(logs / "worker.log", "Successfully registered with master", worker, 120)
        yield {"master": master_url, "python": python, "env": env}
    finally:
        for process in reversed(started):
            _stop(process)


def _cli(cluster, *argv: str, submit: list[str] | None = None, cwd: Path) -> subprocess.CompletedProcess:
    """The ledgercache command as a user runs it against the cluster: directly, or through spark-submit."""
    env = {**cluster["env"], "PYSPARK_PYTHON": cluster["python"]}
    if submit is None:
        command = [sys.executable, "-m", "ledgercache.cli", *argv]
    else:
        job = cwd / "job.py"
        job.write_text("import sys\nimport ledgercache.cli\nsys.exit(ledgercache.cli.main())\n")
        command = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            *submit,
            "--conf",
            f"spark.pyspark.python={cluster['python']}",
            "--conf",
            f"spark.pyspark.driver.python={sys.executable}",
            str(job),
            *argv,
        ]
    r = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    (WORK / "logs" / f"cli-{argv[0]}-{time.monotonic_ns()}.log").write_text(r.stdout + "\n---\n" + r.stderr)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _in_process(configs: list) -> list[dict]:
    rows = lc.replay(lambda: lc.workload.generate(SPEC, seed=1), configs).drop_columns(["replay_seconds"]).to_pylist()
    return sorted(rows, key=lambda r: (r["broker"], r["strategy"], r["cache_size_bytes"]))


def test_generate_and_replay_on_the_cluster_equal_lc_replay(cluster, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    trace = tmp_path / "trace.parquet"
    r = _cli(
        cluster,
        "generate",
        "tailing-fan-out",
        "--brokers",
        "2",
        "--duration-minutes",
        "0.1",
        "--quiet",
        "--master",
        cluster["master"],
        "-o",
        str(trace),
        cwd=tmp_path,
    )
    assert f"spark: master {cluster['master']}" in r.stderr
    local = lc.workload.generate(SPEC, seed=1)
    written = pq.read_table(trace)
    assert written.num_rows == local.num_rows
    for b in ("broker-0", "broker-1"):
        assert written.filter(pa.compute.equal(written["broker"], b)).equals(
            local.filter(pa.compute.equal(local["broker"], b))
        )

    # spark-submit sets the master: the job runs there, and --master local[1] only warns.
    args = [a for s in STRATEGIES for a in ("--strategy", s)] + ["--cache-size", "1MiB", "--cache-size", "4MiB"]
    r = _cli(
        cluster,
        "replay",
        str(trace),
        "-o",
        str(tmp_path / "out"),
        *args,
        "--master",
        "local[1]",
        submit=["--master", cluster["master"]],
        cwd=tmp_path,
    )
    said = r.stdout + r.stderr  # spark-submit merges the driver's stderr into its stdout
    assert f"spark: master {cluster['master']}" in said and "'local[1]' is ignored" in said
    summary = pq.read_table(tmp_path / "out" / "summary.parquet").drop_columns(["replay_seconds"]).to_pylist()
    # The command line's runs measure what lc.replay's defaults leave out (cli.REPORT_SETTINGS).
    configs = [
        lc.CacheConfig(cache_size_bytes=z << 20, strategy=s, **cli.REPORT_SETTINGS) for z in (1, 4) for s in STRATEGIES
    ]
    assert sorted(summary, key=lambda r: (r["broker"], r["strategy"], r["cache_size_bytes"])) == _in_process(configs)


def test_executors_without_ledgercache_are_named(cluster):
    from pyspark.sql import SparkSession

    bare = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    with pytest.raises(lc.MissingDependencyError) as caught:
        lc.spark.cluster_session(cluster["master"], "bare-executors", python=bare, spark_driver_host="127.0.0.1")
    message = str(caught.value)
    assert bare in message and socket.gethostname() in message and "--archives" in message
    assert SparkSession.getActiveSession() is None, "the failed session is stopped"


def test_fanout_example_on_the_cluster(cluster, tmp_path):
    """The example as a user runs it against the cluster: its functions shipped, its storage shared."""
    env = {**cluster["env"], "PYSPARK_PYTHON": cluster["python"]}
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "spark_fanout.py"),
            "--master",
            cluster["master"],
            "--storage",
            str(tmp_path / "store"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("persistent://")]
    assert len(rows) == 8 and all(row[2] == "2000" for row in rows), r.stdout
    assert [row[3] for row in rows if row[1] == "sub-b"] == ["0"] * 4, r.stdout  # served from the worker's cache


@pytest.fixture(scope="module")
def session(cluster):
    """An application on the cluster with one executor core: one Python worker, reused by every task."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    spark = lc.spark.cluster_session(
        cluster["master"],
        "one-core",
        python=cluster["python"],
        spark_cores_max="1",
        spark_executor_cores="1",
        spark_driver_host="127.0.0.1",
    )
    yield spark
    spark.stop()


def test_executor_storage_refuses_a_directory_missing_on_the_executor(session, tmp_path):
    missing = str(tmp_path / "not-shared")

    def open_storage(batches):
        import ledgercache as lc

        for batch in batches:
            lc.spark.executor_storage(missing)
            yield batch

    # Spark wraps the executor's error in its own (a Py4J or PySpark exception): the text is what counts.
    with pytest.raises(Exception) as caught:  # noqa: PT011 -- Spark wraps the error in its own; the text below is checked
        session.range(1).mapInArrow(open_storage, "id long").collect()
    assert f"StorageError: executor_storage: {missing} does not exist on host {socket.gethostname()}" in str(
        caught.value
    )
    assert not os.path.exists(missing)


def _peak_rss_probe(spark, reset: bool) -> list[dict]:
    """Each Python worker of the (single-core) executor: its pid and peak RSS (VmHWM). With
    ``reset``, the peak is first set back to the current RSS (Linux clear_refs), so the next
    reading is the peak of what ran in between."""

    def probe(batches):
        import os
        import resource

        import pyarrow as pa

        for _ in batches:
            pass
        if reset:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
        yield pa.RecordBatch.from_pydict(
            {
                "pid": [os.getpid()],
                "hwm_kib": [int(status["VmHWM"].split()[0])],
                "maxrss_kib": [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss],
            }
        )

    return [
        r.asDict()
        for r in spark.range(1, numPartitions=1).mapInArrow(probe, "pid long, hwm_kib long, maxrss_kib long").collect()
    ]


def test_spark_replay_on_the_cluster_has_bounded_worker_memory(session, tmp_path):
    """Generates (lc.spark.generate, to Parquet) and replays a trace and one four times as long on
    one executor core: the Python worker's peak RSS must not grow with the trace."""
    configs = [lc.CacheConfig(cache_size_bytes=4 << 20, strategy=s) for s in ("pip430", "lru")]
    peaks = {}
    for minutes in (5.0, 20.0):
        spec = {**lc.workload.SCENARIOS["tailing-fan-out"], "brokers": 1, "testDurationMinutes": minutes}
        path = str(tmp_path / f"trace-{minutes}")
        before = _peak_rss_probe(session, reset=True)
        lc.spark.generate(session, spec, seed=1).write.parquet(path)
        generated = _peak_rss_probe(session, reset=True)
        rows = lc.spark.replay(session.read.parquet(path), configs).collect()
        replayed = _peak_rss_probe(session, reset=False)
        assert len({p["pid"] for p in before + generated + replayed}) == 1, "one reused Python worker"
        events = sum(b.num_rows for b in lc.trace.batches(path))
        assert len(rows) == 2 and rows[0]["events"] == events
        peaks[minutes] = {
            "events": events,
            "generate_kib": generated[0]["hwm_kib"],
            "replay_kib": replayed[0]["hwm_kib"],
            "trace_arrow_bytes": sum(b.nbytes for b in lc.trace.batches(path)),
        }
    print("\nPython worker peak RSS:", json.dumps(peaks))
    short, long = peaks[5.0], peaks[20.0]
    assert long["events"] > 3.5 * short["events"]
    # The long trace could not be held whole: its Arrow size is well over the worker's peak RSS.
    assert long["trace_arrow_bytes"] > 2 * (long["replay_kib"] << 10)
    for what in ("generate_kib", "replay_kib"):
        assert long[what] - short[what] < 48 << 10, f"{what}: {short[what]} KiB -> {long[what]} KiB"
