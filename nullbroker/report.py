"""What the broker tells its operator: the 5-second console line and the summary JSON."""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from .stats import BrokerStats, peak_rss_bytes, percentile_ns, rss_bytes

MIB = 1024 * 1024


@dataclass(slots=True)
class ConsoleReporter:
    """Builds one line per interval from the change in the broker's counters.

    Like kafka-producer-perf-test's lines: records/sec and MB/sec (MB = 2^20 bytes), plus
    requests/sec, broker-side request latency percentiles in microseconds, connections, RSS.
    """

    stats: BrokerStats
    _records: int = 0
    _bytes: int = 0
    _requests: int = 0
    _latency: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._latency = self.stats.latency_counts()

    def line(self, elapsed_seconds: float) -> str | None:
        """The line for the last `elapsed_seconds`, or None when no request came in."""
        stats = self.stats
        totals = stats.totals()
        requests = stats.requests_total()
        latency = stats.latency_counts()
        interval = [now - before for now, before in zip(latency, self._latency, strict=True)]
        records = totals.records - self._records
        produced_bytes = totals.bytes - self._bytes
        request_count = requests - self._requests
        self._records, self._bytes, self._requests = totals.records, totals.bytes, requests
        self._latency = latency
        if request_count == 0:
            return None
        seconds = max(elapsed_seconds, 1e-9)
        return (
            f"{records / seconds:.1f} records/sec ({produced_bytes / seconds / MIB:.2f} MB/sec), "
            f"{request_count / seconds:.1f} requests/sec, "
            f"{percentile_ns(interval, 0.50) / 1000:.0f} us p50, "
            f"{percentile_ns(interval, 0.99) / 1000:.0f} us p99 request latency, "
            f"{stats.connections} connections, {rss_bytes() / MIB:.1f} MiB RSS."
        )


def summary(stats: BrokerStats) -> dict[str, Any]:
    """Everything the broker counted, as one JSON-ready document."""
    topics: dict[str, Any] = {}
    for (topic, partition), counters in sorted(stats.produced.items()):
        entry = topics.setdefault(topic, {"records": 0, "bytes": 0, "batches": 0, "partitions": {}})
        entry["records"] += counters.records
        entry["bytes"] += counters.bytes
        entry["batches"] += counters.batches
        entry["partitions"][str(partition)] = {
            "records": counters.records,
            "bytes": counters.bytes,
            "batches": counters.batches,
        }
    fetched: dict[str, Any] = {"records": 0, "bytes": 0, "topics": {}}
    for (topic, partition), counters in sorted(stats.fetched.items()):
        entry = fetched["topics"].setdefault(topic, {"records": 0, "bytes": 0, "partitions": {}})
        for target in (fetched, entry):
            target["records"] += counters.records
            target["bytes"] += counters.bytes
        entry["partitions"][str(partition)] = {"records": counters.records, "bytes": counters.bytes}
    totals = stats.totals()
    return {
        "started_at": datetime.datetime.fromtimestamp(stats.started_at, datetime.UTC).isoformat(),
        "uptime_seconds": round(stats.uptime_seconds, 3),
        "produced": {
            "records": totals.records,
            "bytes": totals.bytes,
            "batches": totals.batches,
            "topics": topics,
        },
        "fetched": fetched,
        "requests": {api: api_stats.requests for api, api_stats in sorted(stats.apis.items())},
        "requests_total": stats.requests_total(),
        "errors": dict(sorted(stats.errors.items())),
        "connections_closed_on_error": dict(sorted(stats.protocol_errors.items())),
        "connections_total": stats.connections_total,
        "groups": {
            "by_state": dict(sorted(stats.groups.items())),
            "rebalances": stats.rebalances,
        },
        "peak_rss_bytes": peak_rss_bytes(),
    }


def write_summary(stats: BrokerStats, path: str) -> None:
    """Write the summary atomically: a reader never sees half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, suffix=".tmp") as file:
        json.dump(summary(stats), file, indent=2)
        file.write("\n")
    os.replace(file.name, path)
