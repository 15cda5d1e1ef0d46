"""`ledgercache calibrate` of a broker with many small topics (issue 58 item 7): wall time and peak
RSS at 1,000 topics beside the goal (60 s, 1 GiB on a 2-core machine) and beside an anchor measured
in the same run: `lc.workload.stream` of the same spec, consumed in full (the generator alone, the
floor of any calibration: it has to produce the trace at least once).

The input is tests/data/broker/make_many_small_topics.py's broker, parametrised by the topic count:
topics over 3 namespaces x 2 bundles, each with one producer at 5-50 msg/s of 100-300 byte messages
batched 2 to an entry, one Exclusive subscription (every third topic a second, Shared with two
consumers), every seventh topic's first subscription behind with a backlog of 20,000-200,000
entries (read at 1.6 times the publish rate); the metrics give the cache's hits and misses as those
subscriptions read, the broker's version (4.1: PIP-430) and 2 GiB of direct memory (a 409.6 MiB
cache, the default fifth), and the broker.conf is Pulsar 4.1's as shipped.

Each calibration runs in its own process (`ledgercache calibrate`, as a user runs it) under
`/usr/bin/time -v` where it exists (else the child's ru_maxrss), so its peak RSS is its own.
Run: .venv/bin/python benches/calibrate.py [topics ...]   (default 1000)
     .venv/bin/python benches/calibrate.py --write N DIR   (only write the three input files)
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROKER_CONF = ROOT / "tests" / "data" / "broker" / "pulsar-4.1.broker.conf"
GOAL_SECONDS = 60.0
GOAL_RSS = 1 << 30
CLUSTER = "prod-eu"
NAMESPACES = ["retail/web-events", "retail/inventory", "ops/audit"]
BUNDLES = ["0x00000000_0x80000000", "0x80000000_0xffffffff"]
MESSAGES_PER_ENTRY = 2
DIRECT_MEMORY = 2 << 30


def r3(x: float) -> float:
    return round(x, 3)


def _consumer(name: str, index: int, rate: float, size: int, rng: random.Random) -> dict:
    return {
        "address": f"/10.2.{index // 250}.{index % 250}:52000",
        "consumerName": name,
        "availablePermits": rng.randint(400, 1000),
        "connectedSince": "2026-08-20T07:00:01.000Z",
        "msgRateOut": r3(rate),
        "msgThroughputOut": r3(rate * size),
        "msgRateRedeliver": 0.0,
        "avgMessagesPerEntry": MESSAGES_PER_ENTRY,
        "messageAckRate": r3(rate),
        "metadata": {},
    }


def build(topics: int) -> tuple[dict, str]:
    """The stats dump and the Prometheus text of a broker with ``topics`` topics."""
    rng = random.Random(20260820 + topics)
    dump: dict = {ns: {b: {"persistent": {}} for b in BUNDLES} for ns in NAMESPACES}
    hits = misses = hit_bytes = miss_bytes = rate_in = rate_out = 0.0
    for index in range(topics):
        ns = NAMESPACES[index % len(NAMESPACES)]
        bundle = BUNDLES[(index // len(NAMESPACES)) % len(BUNDLES)]
        name = f"persistent://{ns}/t-{index:04d}"
        rate = r3(rng.uniform(5, 50))
        size = rng.randint(100, 300)
        subs = {}
        out_total = 0.0
        for k in range(2 if index % 3 == 1 else 1):
            behind = k == 0 and index % 7 == 3
            backlog = rng.randint(20_000, 200_000) if behind else rng.randint(0, 2)
            out = r3(rate * (1.6 if behind else 1.0))  # a lagging consumer reads faster than the tail
            entries = out / MESSAGES_PER_ENTRY
            if behind:  # reads far behind the tail miss the cache
                misses += entries
                miss_bytes += entries * size * MESSAGES_PER_ENTRY
            else:
                hits += entries
                hit_bytes += entries * size * MESSAGES_PER_ENTRY
            shared = k == 1
            consumers = (
                [_consumer(f"etl-{index}-{c}", index, out / 2, size, rng) for c in range(2)]
                if shared
                else [_consumer(f"sink-{index}", index, out, size, rng)]
            )
            subs["etl" if shared else "sink"] = {
                "consumers": consumers,
                "msgBacklog": backlog,
                "msgRateExpired": 0.0,
                "msgRateOut": out,
                "messageAckRate": out,
                "msgThroughputOut": r3(out * size),
                "msgRateRedeliver": 0.0,
                "numberOfEntriesSinceFirstNotAckedMessage": backlog + 1,
                "totalNonContiguousDeletedMessagesRange": 0,
                "type": "Shared" if shared else "Exclusive",
                "filterProcessedMsgCount": 0,
                "filterAcceptedMsgCount": 0,
                "filterRejectedMsgCount": 0,
                "filterRescheduledMsgCount": 0,
                **({"unackedMessages": 0, "blockedSubscriptionOnUnackedMsgs": False} if shared else {}),
            }
            out_total += out
        rate_in += rate
        rate_out += out_total
        dump[ns][bundle]["persistent"][name] = {
            "publishers": [
                {
                    "msgRateIn": rate,
                    "msgThroughputIn": r3(rate * size),
                    "averageMsgSize": float(size),
                    "address": f"/10.1.{index // 250}.{index % 250}:41000",
                    "producerId": 0,
                    "producerName": f"{CLUSTER}-{index}-0",
                    "connectedSince": "2026-08-20T07:00:00.000Z",
                    "metadata": {},
                }
            ],
            "replication": {},
            "subscriptions": subs,
            "producerCount": 1,
            "averageMsgSize": float(size),
            "msgRateIn": rate,
            "msgRateOut": r3(out_total),
            "msgInCount": int(rate * 3600),
            "bytesInCount": int(rate * 3600) * size,
            "msgOutCount": int(out_total * 3600),
            "bytesOutCount": int(out_total * 3600) * size,
            "msgThroughputIn": r3(rate * size),
            "msgThroughputOut": r3(out_total * size),
            "storageSize": int(rate * 3600 * 24) * size,
            "backlogSize": sum(s["msgBacklog"] for s in subs.values()) * size * MESSAGES_PER_ENTRY,
            "pendingAddEntriesCount": 0,
            "filteredEntriesCount": 0,
        }
    series = {
        "jvm_memory_direct_bytes_max": (f'{{cluster="{CLUSTER}"}}', float(DIRECT_MEMORY)),
        "pulsar_version_info": (f'{{cluster="{CLUSTER}",version="4.1.0",commit="0"}}', 1.0),
        "pulsar_ml_cache_hits_rate": (f'{{cluster="{CLUSTER}"}}', r3(hits)),
        "pulsar_ml_cache_hits_throughput": (f'{{cluster="{CLUSTER}"}}', r3(hit_bytes)),
        "pulsar_ml_cache_misses_rate": (f'{{cluster="{CLUSTER}"}}', r3(misses)),
        "pulsar_ml_cache_misses_throughput": (f'{{cluster="{CLUSTER}"}}', r3(miss_bytes)),
        "pulsar_ml_cache_used_size": (f'{{cluster="{CLUSTER}"}}', float(DIRECT_MEMORY // 5 // 2)),
        "pulsar_ml_count": (f'{{cluster="{CLUSTER}"}}', float(topics)),
        "pulsar_rate_in": (f'{{cluster="{CLUSTER}"}}', r3(rate_in)),
        "pulsar_rate_out": (f'{{cluster="{CLUSTER}"}}', r3(rate_out)),
    }
    text = "".join(f"# TYPE {name} gauge\n{name}{labels} {value!r}\n" for name, (labels, value) in series.items())
    return dump, text


def write(topics: int, directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    dump, text = build(topics)
    stats, metrics = directory / f"broker-{topics}.stats.json", directory / f"broker-{topics}.metrics.txt"
    stats.write_text(json.dumps(dump))
    metrics.write_text(text)
    return stats, metrics


def measured(argv: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in bytes and stdout of ``argv`` run in a child process."""
    timer = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)
    start = time.perf_counter()
    if timer:
        done = subprocess.run([timer, "-v", *argv], capture_output=True, text=True, check=False)
    else:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    rss = 0
    if timer:
        for line in done.stderr.splitlines():
            if "Maximum resident set size" in line:
                rss = int(line.split(":")[1]) * 1024
    if not rss:
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return wall, rss, done.stdout


ANCHOR = """
import sys, time, resource
import ledgercache as lc
from ledgercache import broker_workload as bw
from ledgercache import calibrate as cal
from ledgercache import metrics
stats = lc.broker_stats.read(sys.argv[1])
observed = metrics.read(sys.argv[2])
conf = dict(lc._native.read_broker_conf(sys.argv[3]))
settings = {**cal.batching_from(stats, observed.cache), **lc.workload.settings_from_broker_conf(conf)}
spec, _ = bw.workload_and_notes(stats, settings=settings)
start = time.perf_counter()
rows = sum(b.num_rows for b in lc.workload.stream(spec, 1))
print(f"{rows} {time.perf_counter() - start:.3f}")
"""


def main() -> None:
    if sys.argv[1:2] == ["--write"]:
        for path in write(int(sys.argv[2]), Path(sys.argv[3])):
            print(path)
        return
    counts = [int(a) for a in sys.argv[1:]] or [1000]
    python = sys.executable
    cli = str(Path(python).with_name("ledgercache"))
    with tempfile.TemporaryDirectory() as tmp:
        for topics in counts:
            stats, metrics = write(topics, Path(tmp))
            wall, rss, out = measured([python, "-c", ANCHOR, str(stats), str(metrics), str(BROKER_CONF)])
            rows, generate = out.split()
            awall, arss = wall, rss
            wall, rss, out = measured(
                [
                    cli,
                    "calibrate",
                    "--stats",
                    str(stats),
                    "--metrics",
                    str(metrics),
                    "--broker-conf",
                    str(BROKER_CONF),
                    "--quiet",
                ]
            )
            met = wall <= GOAL_SECONDS and rss <= GOAL_RSS
            print(
                f"calibrate, {topics:,} topics: {wall:.1f} s, peak RSS {rss / (1 << 20):,.0f} MiB "
                f"(goal <= {GOAL_SECONDS:g} s and <= {GOAL_RSS >> 20:,} MiB: {'met' if met else 'NOT met'}); "
                f"anchor, generating its trace once ({int(rows):,} events): {float(generate):.1f} s "
                f"({awall:.1f} s and {arss / (1 << 20):,.0f} MiB with start-up and reading the stats): "
                f"calibrate takes {wall / float(generate):.1f}x the generation"
            )


if __name__ == "__main__":
    main()
