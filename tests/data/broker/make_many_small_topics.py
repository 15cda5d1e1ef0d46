"""Writes many-small-topics.stats.json and many-small-topics.metrics.txt beside this file.

    python tests/data/broker/make_many_small_topics.py

Deterministic (a seeded random.Random; no other input): 3 namespaces x 2 bundles, 10 topics a
bundle (60), each with one producer at 5-50 msg/s of 100-300 byte messages, batched 2 messages an
entry, and one Exclusive subscription; every seventh topic's consumer has fallen behind and has a
backlog. The shapes follow PersistentTopic.updateRates / StreamingStats (the dump) and
ManagedLedgerCacheMetrics / PrometheusMetricsGenerator.parseMetricsToPrometheusMetrics (the
metrics); see README.md. Rates carry three decimals, as SimpleTextOutputStream writes them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLUSTER = "prod-eu"
NAMESPACES = ["retail/web-events", "retail/inventory", "ops/audit"]
BUNDLES = ["0x00000000_0x80000000", "0x80000000_0xffffffff"]
TOPICS_PER_BUNDLE = 10
MESSAGES_PER_ENTRY = 2


def r3(x: float) -> float:
    return round(x, 3)


def build() -> tuple[dict, dict]:
    rng = random.Random(20260820)
    dump: dict = {}
    totals = {"entries_in": 0.0, "hit_entries": 0.0, "miss_entries": 0.0, "hit_bytes": 0.0, "miss_bytes": 0.0}
    index = 0
    for ns in NAMESPACES:
        dump[ns] = {}
        for bundle in BUNDLES:
            topics = {}
            for _ in range(TOPICS_PER_BUNDLE):
                name = f"persistent://{ns}/t-{index:02d}"
                rate = r3(rng.uniform(5, 50))
                size = rng.randint(100, 300)
                behind = index % 7 == 3
                backlog = rng.randint(20_000, 200_000) if behind else rng.randint(0, 2)
                out_rate = r3(rate * (1.6 if behind else 1.0))  # a lagging consumer reads faster than the tail
                entry_bytes = size * MESSAGES_PER_ENTRY
                entries_out = out_rate / MESSAGES_PER_ENTRY
                if behind:  # reads far behind the tail miss the cache
                    totals["miss_entries"] += entries_out
                    totals["miss_bytes"] += entries_out * entry_bytes
                else:
                    totals["hit_entries"] += entries_out
                    totals["hit_bytes"] += entries_out * entry_bytes
                totals["entries_in"] += rate / MESSAGES_PER_ENTRY
                topics[name] = {
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
                    "subscriptions": {
                        "sink": {
                            "consumers": [
                                {
                                    "address": f"/10.2.{index // 250}.{index % 250}:52000",
                                    "consumerName": f"sink-{index}",
                                    "availablePermits": rng.randint(400, 1000),
                                    "connectedSince": "2026-08-20T07:00:01.000Z",
                                    "msgRateOut": out_rate,
                                    "msgThroughputOut": r3(out_rate * size),
                                    "msgRateRedeliver": 0.0,
                                    "avgMessagesPerEntry": MESSAGES_PER_ENTRY,
                                    "messageAckRate": out_rate,
                                    "metadata": {},
                                }
                            ],
                            "msgBacklog": backlog,
                            "msgRateExpired": 0.0,
                            "msgRateOut": out_rate,
                            "messageAckRate": out_rate,
                            "msgThroughputOut": r3(out_rate * size),
                            "msgRateRedeliver": 0.0,
                            "numberOfEntriesSinceFirstNotAckedMessage": backlog + 1,
                            "totalNonContiguousDeletedMessagesRange": 0,
                            "type": "Exclusive",
                            "filterProcessedMsgCount": 0,
                            "filterAcceptedMsgCount": 0,
                            "filterRejectedMsgCount": 0,
                            "filterRescheduledMsgCount": 0,
                        },
                    },
                    "producerCount": 1,
                    "averageMsgSize": float(size),
                    "msgRateIn": rate,
                    "msgRateOut": out_rate,
                    "msgInCount": int(rate * 3600),
                    "bytesInCount": int(rate * 3600) * size,
                    "msgOutCount": int(out_rate * 3600),
                    "bytesOutCount": int(out_rate * 3600) * size,
                    "msgThroughputIn": r3(rate * size),
                    "msgThroughputOut": r3(out_rate * size),
                    "storageSize": int(rate * 3600 * 24) * size,
                    "backlogSize": backlog * size * MESSAGES_PER_ENTRY,
                    "pendingAddEntriesCount": 0,
                    "filteredEntriesCount": 0,
                }
                index += 1
            dump[ns][bundle] = {"persistent": topics}
    metrics = {
        "brk_ml_cache_entries": 41_280,
        "brk_ml_cache_evicted_entries_total": 10_950_412,
        "brk_ml_cache_evictions": 3,
        "brk_ml_cache_hits_rate": r3(totals["hit_entries"]),
        "brk_ml_cache_hits_throughput": r3(totals["hit_bytes"]),
        "brk_ml_cache_inserted_entries_total": 10_991_692,
        "brk_ml_cache_misses_rate": r3(totals["miss_entries"]),
        "brk_ml_cache_misses_throughput": r3(totals["miss_bytes"]),
        "brk_ml_cache_pool_active_allocations": 41_280,
        "brk_ml_cache_pool_active_allocations_huge": 0,
        "brk_ml_cache_pool_active_allocations_normal": 0,
        "brk_ml_cache_pool_active_allocations_small": 41_280,
        "brk_ml_cache_pool_allocated": 16_777_216,
        "brk_ml_cache_pool_used": 16_318_464,
        "brk_ml_cache_used_size": 16_318_464,
        "brk_ml_count": 60,
    }
    return dump, metrics


def java_number(value: float | int) -> str:
    """String.valueOf as the broker writes a Long or a Double: E notation from 10^7 on."""
    if isinstance(value, int):
        return str(value)
    if abs(value) >= 1e7:
        mantissa, exponent = f"{value:.15E}".split("E")
        return f"{mantissa.rstrip('0').rstrip('.') if '.' in mantissa else mantissa}E{int(exponent)}"
    return repr(float(value))


def prometheus_text(metrics: dict, namespaces: dict[str, int]) -> str:
    lines = []
    # NamespaceStatsAggregator's series come before generateBrokerBasicMetrics's.
    lines.append("# TYPE pulsar_topics_count gauge")
    lines += [f'pulsar_topics_count{{cluster="{CLUSTER}",namespace="{ns}"}} {n}' for ns, n in namespaces.items()]
    for name, value in metrics.items():  # a TreeMap: sorted by name
        prom = "pulsar_" + name[len("brk_") :]
        lines.append(f"# TYPE {prom} gauge")
        lines.append(f'{prom}{{cluster="{CLUSTER}"}} {java_number(value)}')
    return "\n".join(lines) + "\n"


def main() -> None:
    dump, metrics = build()
    (HERE / "many-small-topics.stats.json").write_text(json.dumps(dump, indent=2) + "\n")
    counts = {ns: sum(len(b["persistent"]) for b in bundles.values()) for ns, bundles in dump.items()}
    jvm = (
        "# TYPE jvm_memory_bytes_used gauge\n"
        f'jvm_memory_bytes_used{{cluster="{CLUSTER}",area="heap"}} 7.21420288E8\n'
        f'jvm_memory_bytes_used{{cluster="{CLUSTER}",area="nonheap"}} 1.4417464E8\n'
        "# TYPE jvm_threads_current gauge\n"
        f'jvm_threads_current{{cluster="{CLUSTER}"}} 211.0\n'
    )
    (HERE / "many-small-topics.metrics.txt").write_text(jvm + prometheus_text(metrics, counts))


if __name__ == "__main__":
    main()
