"""What the broker tells its operator: the 5-second console line and the summary JSON."""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from ..stats import (
    SHARE_COUNTS,
    BrokerStats,
    ClientSnapshot,
    LatencyHistogram,
    ShareCounters,
    percentile_ns,
)

MIB = 1024 * 1024
PUSHED_TOTALS = ("series_kept", "dropped_series", "dropped_clients", "refused_payloads")


@dataclass(slots=True)
class ConsoleReporter:
    """Builds one line per interval from the change in the broker's counters.

    Like kafka-producer-perf-test's lines: records/sec and MB/sec (MB = 2^20 bytes) produced
    and fetched, requests/sec, the broker's own time per request (p50, p99, in microseconds;
    a held request's wait is not part of it), how many requests were held and their p99
    hold, connections, RSS. Fetched counts records share groups acquired too; once a share
    group exists, the line also says how many of those were acquired and accepted.
    """

    stats: BrokerStats
    _produced: tuple[int, int] = (0, 0)
    _fetched: tuple[int, int] = (0, 0)
    _shared: tuple[int, int] = (0, 0)
    _requests: int = 0
    _latency: list[int] = field(default_factory=list)
    _held: list[int] = field(default_factory=list)
    _counts_since: float = 0.0

    def __post_init__(self) -> None:
        self._latency = self.stats.latency_counts()
        self._held = self.stats.held_counts()
        self._counts_since = self.stats.counts_since

    def line(self, elapsed_seconds: float) -> str | None:
        """The line for the last `elapsed_seconds`, or None when no request came in."""
        stats = self.stats
        if stats.counts_since != self._counts_since:
            # The counts were reset (POST /accounts/reset): they start again from zero,
            # so the interval's change is what they hold now.
            self._counts_since = stats.counts_since
            self._produced = self._fetched = self._shared = (0, 0)
            self._requests = 0
            self._latency = [0] * len(self._latency)
            self._held = [0] * len(self._held)
        produced_totals = stats.totals()
        produced = (produced_totals.records, produced_totals.bytes)
        fetched = stats.fetched_totals()
        requests = stats.requests_total()
        latency = stats.latency_counts()
        held = stats.held_counts()
        latency_interval = _since(latency, self._latency)
        held_interval = _since(held, self._held)
        produced_records, produced_bytes = _since(produced, self._produced)
        fetched_records, fetched_bytes = _since(fetched, self._fetched)
        shared = (
            sum(share.acquired for share in stats.share.values()),
            sum(share.accepted for share in stats.share.values()),
        )
        acquired, accepted = _since(shared, self._shared)
        self._shared = shared
        request_count = requests - self._requests
        self._produced, self._fetched, self._requests = produced, fetched, requests
        self._latency, self._held = latency, held
        if request_count == 0:
            return None
        seconds = max(elapsed_seconds, 1e-9)
        held_count = sum(held_interval)
        held_part = f"{held_count} held"
        if held_count:
            held_part += f" (p99 {percentile_ns(held_interval, 0.99) / 1e6:.0f} ms)"
        return (
            f"{produced_records / seconds:.1f} records/sec "
            f"({produced_bytes / seconds / MIB:.2f} MB/sec) produced, "
            f"{fetched_records / seconds:.1f} records/sec "
            f"({fetched_bytes / seconds / MIB:.2f} MB/sec) fetched, "
            + (
                f"{acquired / seconds:.1f} records/sec share-acquired "
                f"({accepted / seconds:.1f} accepted), "
                if stats.share
                else ""
            )
            + f"{request_count / seconds:.1f} requests/sec, "
            f"{percentile_ns(latency_interval, 0.50) / 1000:.0f} us p50, "
            f"{percentile_ns(latency_interval, 0.99) / 1000:.0f} us p99 request latency, "
            f"{held_part}, "
            f"{stats.connections} connections, {stats.rss_bytes() / MIB:.1f} MiB RSS."
        )


def _since(now: Sequence[int], before: Sequence[int]) -> list[int]:
    return [current - previous for current, previous in zip(now, before, strict=True)]


def summary(stats: BrokerStats) -> dict[str, Any]:
    """Everything the broker counted, as one JSON-ready document: the summary written at
    shutdown, and the accounts served while it runs (GET /accounts on the metrics
    listener), read from the same numbers as /metrics."""
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
    apis = sorted(stats.apis.items())
    return {
        "started_at": _iso(stats.started_at),
        "counts_since": _iso(stats.counts_since),
        "uptime_seconds": round(stats.uptime_seconds, 3),
        "produced": {
            "records": totals.records,
            "bytes": totals.bytes,
            "batches": totals.batches,
            "topics": topics,
        },
        "fetched": fetched,
        "requests": {api: api_stats.requests for api, api_stats in apis},
        "requests_total": stats.requests_total(),
        "request_latency_seconds": {api: _histogram(api_stats.latency) for api, api_stats in apis},
        "held_requests": {
            api: api_stats.held.count for api, api_stats in apis if api_stats.held.count
        },
        "request_held_seconds": {
            api: _histogram(api_stats.held) for api, api_stats in apis if api_stats.held.count
        },
        "errors": dict(sorted(stats.errors.items())),
        "connections_closed_on_error": dict(sorted(stats.protocol_errors.items())),
        "connections": stats.connections,
        "connections_total": stats.connections_total,
        "groups": {
            "by_state": dict(sorted(stats.groups.items())),
            "rebalances": stats.rebalances,
            "by_group": _groups(stats),
        },
        "share": _share(stats),
        "clients": _clients(stats),
        "fetch_requests": dict(sorted(stats.fetch_requests.items())),
        "transactions": dict(sorted(stats.transactions.items())),
        "transactional_records": dict(sorted(stats.transactional_records.items())),
        "faults": dict(sorted(stats.faults.items())),
        "rss_bytes": stats.rss_bytes(),
        "peak_rss_bytes": stats.peak_rss_bytes(),
    }


def _groups(stats: BrokerStats) -> dict[str, Any]:
    """Each consumer group's state, members and lag, in all and per partition committed to
    (the numbers of /metrics' nullbroker_group_members and nullbroker_group_lag), and a
    streams group's epochs, tasks and rebalances (nullbroker_streams_group_*)."""
    groups = {}
    for group, lags in stats.group_lags().items():
        snapshot = stats.group_snapshots[group]
        partitions: dict[str, dict[str, Any]] = {}
        for (topic, index), (committed, lag) in lags.items():
            partitions.setdefault(topic, {})[str(index)] = {
                "committed": committed,
                "log_end": committed + lag,
                "lag": lag,
            }
        groups[group] = {
            "protocol": snapshot.protocol,
            "state": snapshot.state,
            "members": [
                {
                    "member_id": member.member_id,
                    "client_id": member.client_id,
                    "client_host": member.client_host,
                }
                for member in snapshot.members
            ],
            "lag": sum(lag for _, lag in lags.values()),
            "partitions": partitions,
        }
        if snapshot.streams is not None:
            groups[group]["streams"] = asdict(snapshot.streams)
    return groups


SENT_METRICS = ("org.apache.kafka.producer.record.send.total",)
"""What a producer pushes as its count of records sent (the Java client's; librdkafka
pushes none)."""


def _clients(stats: BrokerStats) -> dict[str, Any]:
    """The clients (KIP-714): the broker's own counts by client id, each client instance
    with what it pushed, and each producer's pushed count of records sent beside the
    broker's count for its client id (`agreement`)."""
    client_ids = sorted(stats.client_records.keys() | stats.client_fetched.keys())
    return {
        "by_client_id": {
            client_id: {
                "produced_records": stats.client_records[client_id],
                "fetched_records": stats.client_fetched[client_id],
            }
            for client_id in client_ids
        },
        "instances": [_pushed(client) for client in stats.pushed_clients],
        "agreement": _agreement(stats),
        **{name: stats.pushed_totals[name] for name in PUSHED_TOTALS},
        "cpu_seconds": stats.pushed_totals["cpu_ns"] / 1e9,
    }


def _pushed(client: ClientSnapshot) -> dict[str, Any]:
    return {
        "instance_id": client.instance_id,
        "client_id": client.client_id,
        "software_name": client.software_name,
        "software_version": client.software_version,
        "address": client.address,
        "first_push": _iso(client.first_push_ms / 1000),
        "last_push": _iso(client.last_push_ms / 1000),
        "pushes": client.pushes,
        "payload_bytes": client.payload_bytes,
        "interval_ms": client.interval_ms,
        "ended": client.ended,
        "resource": dict(client.resource),
        "metrics": {name: _number(value) for name, value in client.metrics.items()},
        "series": [
            {"name": name, "kind": kind, "attributes": dict(attributes), "value": _number(value)}
            for name, kind, attributes, value in client.series
        ],
    }


def _number(value: float) -> float | None:
    """A pushed value as JSON can hold it: a Java client pushes NaN for an average of
    nothing yet (request latency before its first request), which is null here."""
    return value if math.isfinite(value) else None


def _agreement(stats: BrokerStats) -> list[dict[str, Any]]:
    """Per client id whose instances pushed a count of records sent: that count (summed
    over its instances), the records the broker appended for the client id, whether every
    instance has ended (its count is final: a running one pushes what it sent up to its
    last push), and how many ended with no closing push (closed or silent: what they sent
    after their last push is missing from the count)."""
    pushed: dict[str, list[tuple[float, str]]] = {}
    for client in stats.pushed_clients:
        metrics = client.metrics
        for name in SENT_METRICS:
            if name in metrics:
                pushed.setdefault(client.client_id, []).append((metrics[name], client.ended))
    rows = []
    for client_id, counts in sorted(pushed.items()):
        sent = round(sum(count for count, _ in counts))
        counted = stats.client_records[client_id]
        rows.append(
            {
                "client_id": client_id,
                "metric": SENT_METRICS[0],
                "pushed": sent,
                "counted": counted,
                "instances": len(counts),
                "final": all(ended for _, ended in counts),
                "agrees": sent == counted,
                "without_closing_push": sum(ended not in ("", "terminated") for _, ended in counts),
            }
        )
    return rows


def _share(stats: BrokerStats) -> dict[str, Any]:
    """Share groups' records (KIP-932): totals, and per group, topic and partition (the
    numbers of /metrics' nullbroker_share_* series)."""
    totals = ShareCounters()
    by_group: dict[str, Any] = {}
    for (group, topic, partition), counters in sorted(stats.share.items()):
        totals.add(counters)
        entry = by_group.setdefault(group, {"totals": ShareCounters(), "partitions": {}})
        entry["totals"].add(counters)
        entry["partitions"].setdefault(topic, {})[str(partition)] = _share_counts(counters)
    for entry in by_group.values():
        entry["totals"] = _share_counts(entry["totals"])
    return {"totals": _share_counts(totals), "by_group": by_group}


def _share_counts(counters: ShareCounters) -> dict[str, int]:
    return {
        **{name: getattr(counters, name) for name in SHARE_COUNTS},
        "in_flight": counters.in_flight,
        "start_offset": counters.start_offset,
    }


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat()


def _histogram(histogram: LatencyHistogram) -> dict[str, float]:
    """A latency histogram as its count, sum and p50 and p99 (read from the buckets, within
    25 %), in seconds: /metrics exposes the same count and sum."""
    return {
        "count": histogram.count,
        "sum": histogram.sum_ns / 1e9,
        "p50": percentile_ns(histogram.counts, 0.50) / 1e9,
        "p99": percentile_ns(histogram.counts, 0.99) / 1e9,
    }


def check_summary_writable(path: str) -> None:
    """Raise OSError now if the summary could not be written at shutdown: the folder is
    missing or not writable. The summary is the run's result, so it must not be found
    unwritable only after the whole run."""
    with _temporary_beside(path):
        pass


def write_summary(stats: BrokerStats, path: str) -> None:
    """Write the summary atomically: a reader never sees half a file."""
    import json  # here, at shutdown: a broker without --summary-json never needs it

    with _temporary_beside(path) as file:
        json.dump(summary(stats), file, indent=2)
        file.write("\n")
        file.flush()
        # mkstemp makes the file 0600; a result is for others to read too, as any file
        # the user's umask would give them.
        os.chmod(file.name, 0o666 & ~_umask())
        os.replace(file.name, path)


@contextlib.contextmanager
def _temporary_beside(path: str) -> Iterator[IO[str]]:
    """A temporary file in `path`'s folder (so that os.replace is atomic), removed on the
    way out unless it was moved into place."""
    directory = os.path.dirname(os.path.abspath(path))
    file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - removed below unless replaced
        "w", dir=directory, delete=False, prefix=".nullbroker-summary-", suffix=".tmp"
    )
    try:
        with file:
            yield file
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(file.name)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
