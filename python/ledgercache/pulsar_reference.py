"""Pulsar's own published measurements, declared once: what a report sets beside the lab's numbers.

Each reference is a scenario of :data:`ledgercache.workload.SCENARIOS` measured on a real (test)
broker, with every run its author published, where it was published, and per named configuration
(:data:`ledgercache.workload.SCENARIO_CONFIGS`) the figures as printed. A figure the source does
not give (or that the copy we read cut off) is ``None``, never a guess.

``rolling-restart``: Pulsar's ``BrokerEntryCacheRollingRestartTest.testTailingReadsRollingRestart``
(pulsar-broker tests, master), run by its author Lari Hotari and published in the comments of
apache/pulsar#24623 ("Implement PIP-430 Pulsar Broker cache improvements"). Each row is the
average of the test's five invocations (``invocationCount = 5``), as the comment's DuckDB query
prints them. Its columns, as the test writes them to ``rolling_restarts_result_*.csv``:

- ``produced``: messages the producer sent in the test's 30 seconds;
- ``consumed``: messages the ten consumers received (one subscription each);
- ``bk_reads``: reads sent to (mock) BookKeeper (its read-handle interceptor counts them);
- ``bk_read_entries``: entries those reads returned;
- ``hit_percent``: ``100 * (consumed - bk_read_entries) / consumed``, the test's cache hit
  percentage (one message an entry: batching is off).
"""

from __future__ import annotations

from typing import Any

__all__ = ["REFERENCES", "hit_percent", "reference", "runs"]

_PR = "https://github.com/apache/pulsar/pull/24623"

_CONFIGS = ("PIP430", "PIP430disabled", "cacheEvictionByMarkDeletedPosition", "PR12258")


def _row(hits: float | None, produced=None, consumed=None, bk_reads=None, bk_read_entries=None) -> dict[str, Any]:
    return {
        "hit_percent": hits,
        "produced": produced,
        "consumed": consumed,
        "bk_reads": bk_reads,
        "bk_read_entries": bk_read_entries,
    }


REFERENCES: dict[str, dict[str, Any]] = {
    "rolling-restart": {
        "test": "BrokerEntryCacheRollingRestartTest.testTailingReadsRollingRestart",
        "source": f"{_PR} (comments by lhotari, 2025-08-21 and 2025-08-22)",
        "configs": _CONFIGS,
        # testTimeInSeconds: the seconds the producer publishes, over which the counts are taken.
        "seconds": 30,
        # Where and why the lab's numbers differ from the test's (the report prints these).
        "differences": (
            "The lab's consumers are a fluid model that storage reads do not slow: in Pulsar a configuration "
            "that misses slows its consumers, the outstanding deliveries reach 500,000 and the producer pauses "
            "(Pulsar 2025-08-22 i9: PIP430disabled produced 1.22 million messages, PIP430 1.52 million), so "
            "the worse configurations publish, and read, less there; in the lab each configuration replays "
            "the same trace.",
            "Pulsar's runs use mock BookKeeper with no read delay; its CPU cost still slows the test's "
            "consumers on one machine (its hit percentages vary from 72% to 99% between machines for "
            "PIP430), which the lab does not model.",
            "The restart's timing is the lab's estimate (a broker away 2 s, topics loaded 100 ms after their "
            "unload, consumers back 20-40 ms later); in the test it is whatever the in-process restart takes.",
            "The lab reports each broker's cache and adds the brokers up; the test counts reads over both "
            "brokers, as here. The test's consumers also drain for up to 5 s after the producer stops, which "
            "the lab's 30 s run leaves out.",
        ),
        "runs": (
            {
                "name": "2025-08-21",
                "machine": None,
                "url": _PR,
                "comment": "lhotari, 2025-08-21: 'The test now tests with 10 topic partitions, producer throughput "
                "of 50000msg/s and with 250MB cache size'",
                # The comment's text gives the four hit percentages; the copy of its table we could
                # read stops at the header, so its other columns are not given here.
                "figures": {
                    "PIP430": _row(98.4),
                    "PIP430disabled": _row(76.85),
                    "cacheEvictionByMarkDeletedPosition": _row(59.97),
                    "PR12258": _row(52.09),
                },
            },
            {
                "name": "2025-08-22 M3 Max",
                "machine": "MBP M3 Max",
                "url": _PR,
                "comment": "lhotari, 2025-08-22: 'One more test run to verify results. This test run was with "
                "commit 1c22404'",
                "figures": {
                    "PIP430": _row(98.68, 1549326.4, 15501082.6, 2223.2, 205249.2),
                    "PIP430disabled": _row(85.54, 1549479.8, 15514741.6, 35242.4, 2244187.0),
                    "cacheEvictionByMarkDeletedPosition": _row(53.62, 1546666.2, 15488789.2, 84173.0, 7178440.4),
                    "PR12258": _row(55.81, 1524838.2, 15278925.8, 70664.8, 6739906.4),
                },
            },
            {
                "name": "2025-08-22 i9",
                "machine": "Dell XPS 2019 i9-9980HK CPU @ 2.40GHz",
                "url": _PR,
                "comment": "lhotari, 2025-08-22, the same comment's second table",
                "figures": {
                    "PIP430": _row(72.28, 1518034.2, 15213392.6, 44556.2, 4192224.4),
                    "PIP430disabled": _row(25.79, 1224613.0, 12278182.8, 99706.4, 9163995.0),
                    "cacheEvictionByMarkDeletedPosition": _row(37.11, 1398036.4, 14010866.0, 95174.8, 8732727.4),
                    "PR12258": _row(51.55, 1510802.8, 15130023.2, 79476.8, 7317555.2),
                },
            },
        ),
    },
}


def reference(scenario: str) -> dict[str, Any] | None:
    """The published measurement of a scenario (:data:`REFERENCES`), or None when Pulsar published none."""
    return REFERENCES.get(scenario)


def runs(scenario: str) -> tuple[dict[str, Any], ...]:
    """The published runs of a scenario, oldest first (empty when none)."""
    ref = reference(scenario)
    return ref["runs"] if ref else ()


def hit_percent(consumed: float, storage_entries: float) -> float | None:
    """The test's cache hit percentage: ``100 * (consumed - storage_entries) / consumed`` (None
    without reads)."""
    return 100.0 * (consumed - storage_entries) / consumed if consumed else None
