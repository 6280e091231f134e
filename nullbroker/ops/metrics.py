"""Prometheus exposition of the broker's accounts, built only when scraped."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ..stats import LATENCY_BOUNDS_NS, PROMETHEUS_BOUNDS_NS, BrokerStats
from .client_series import client_families


class BrokerCollector(Collector):
    """Reads BrokerStats at scrape time; the hot path never touches prometheus_client."""

    def __init__(self, stats: BrokerStats | Callable[[], BrokerStats]) -> None:
        # A callable gives the accounts as of each scrape: a cluster's supervisor sums its
        # workers' anew each time (nullbroker.workers.processes).
        self._stats = stats if callable(stats) else lambda: stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        labels = ["topic", "partition"]
        records = CounterMetricFamily(
            "nullbroker_produced_records", "Records accepted by Produce.", labels=labels
        )
        produced_bytes = CounterMetricFamily(
            "nullbroker_produced_bytes", "Record-batch bytes accepted by Produce.", labels=labels
        )
        batches = CounterMetricFamily(
            "nullbroker_produced_batches", "Record batches accepted by Produce.", labels=labels
        )
        retained = GaugeMetricFamily(
            "nullbroker_retained_bytes",
            "Bytes of produced batches held for Fetch (--retain).",
            labels=labels,
        )
        compaction_dropped = CounterMetricFamily(
            "nullbroker_compaction_dropped_records",
            "Records of a compacted topic let go of while still the latest of their key "
            "(--retain too small for its keys).",
            labels=labels,
        )
        for (topic, partition), counters in sorted(stats.produced.items()):
            key = [topic, str(partition)]
            records.add_metric(key, counters.records)
            produced_bytes.add_metric(key, counters.bytes)
            batches.add_metric(key, counters.batches)
            retained.add_metric(key, counters.retained_bytes)
            if counters.compaction_dropped:
                compaction_dropped.add_metric(key, counters.compaction_dropped)
        yield from (records, produced_bytes, batches, retained, compaction_dropped)

        fetched_records = CounterMetricFamily(
            "nullbroker_fetched_records",
            "Records served by Fetch at or after each fetch offset.",
            labels=labels,
        )
        fetched_bytes = CounterMetricFamily(
            "nullbroker_fetched_bytes", "Record-batch bytes served by Fetch.", labels=labels
        )
        for (topic, partition), fetched in sorted(stats.fetched.items()):
            key = [topic, str(partition)]
            fetched_records.add_metric(key, fetched.records)
            fetched_bytes.add_metric(key, fetched.bytes)
        yield from (fetched_records, fetched_bytes)

        requests = CounterMetricFamily(
            "nullbroker_requests", "Requests answered, by API.", labels=["api"]
        )
        latency = HistogramMetricFamily(
            "nullbroker_request_latency_seconds",
            "Broker time per request (decode, handle, encode; a held request's wait excluded), "
            "by API.",
            labels=["api"],
        )
        held = HistogramMetricFamily(
            "nullbroker_request_held_seconds",
            "How long held requests waited (Fetch at the log end, JoinGroup, SyncGroup), by API.",
            labels=["api"],
        )
        for api, api_stats in sorted(stats.apis.items()):
            requests.add_metric([api], api_stats.requests)
            latency.add_metric(
                [api], _cumulative_buckets(api_stats.latency.counts), api_stats.latency.sum_ns / 1e9
            )
            if api_stats.held.sum_ns or any(api_stats.held.counts):
                held.add_metric(
                    [api], _cumulative_buckets(api_stats.held.counts), api_stats.held.sum_ns / 1e9
                )
        yield from (requests, latency, held)

        yield _counter(
            "nullbroker_errors", "Error codes answered, by Kafka error name.", "error", stats.errors
        )

        yield _counter(
            "nullbroker_connections_closed_on_error",
            "Connections closed on an error, by reason: a request that broke the protocol (the "
            "codec error), a reset or a close partway through a request by the client, or an "
            "internal error.",
            "reason",
            stats.protocol_errors,
        )

        yield GaugeMetricFamily(
            "nullbroker_connections", "Open client connections.", value=stats.connections
        )
        authentications = CounterMetricFamily(
            "nullbroker_authentications",
            "SASL authentications, by mechanism and result (succeeded, failed).",
            labels=["mechanism", "result"],
        )
        for (mechanism, result), count in sorted(stats.authentications.items()):
            authentications.add_metric([mechanism, result], count)
        yield authentications
        yield _counter(
            "nullbroker_connections_refused",
            "Connections closed on arrival for a limit: max_connections_per_ip.",
            "limit",
            stats.connections_refused,
        )
        yield CounterMetricFamily(
            "nullbroker_connections_closed_idle",
            "Connections closed for reading nothing for --idle-timeout-ms.",
            value=stats.connections_idle_closed,
        )
        yield GaugeMetricFamily(
            "nullbroker_read_budget_reserved_bytes",
            "Bytes reserved by large requests being read (--max-buffered-bytes).",
            value=stats.read_budget_reserved,
        )
        yield CounterMetricFamily(
            "nullbroker_read_budget_waits",
            "Times a connection stopped reading until the read budget had room for its "
            "request (--max-buffered-bytes).",
            value=stats.read_budget_waits,
        )
        yield _counter(
            "nullbroker_faults",
            "Faults applied (--fault, POST /faults), by kind: latency (answers delayed), "
            "error (answers with an injected error), down, move, throttle (answers with a "
            "throttle time), connections_reset, connections_refused.",
            "kind",
            stats.faults,
        )
        yield _counter(
            "nullbroker_node_connections",
            "Client connections accepted, by the node of the cluster they reached (--brokers).",
            "node",
            stats.node_connections,
        )

        yield _counter(
            "nullbroker_transactions",
            "Transactions ended, by outcome: committed, aborted (a transaction past its "
            "timeout is aborted by the broker).",
            "outcome",
            stats.transactions,
        )
        yield _counter(
            "nullbroker_transactional_records",
            "Records written in transactions, by the outcome of their transaction.",
            "outcome",
            stats.transactional_records,
        )

        yield _counter(
            "nullbroker_node_requests",
            "Requests read, by the node of the cluster they were sent to (--brokers).",
            "node",
            stats.node_requests,
        )

        groups = GaugeMetricFamily(
            "nullbroker_groups", "Consumer groups, by state.", labels=["state"]
        )
        for state, count in sorted(stats.groups.items()):
            groups.add_metric([state], count)
        yield groups
        yield from _group_members_and_lag(stats)
        yield from _streams_groups(stats)
        yield from _share_groups(stats)
        yield from client_families(stats)
        yield _counter(
            "nullbroker_fetch_requests",
            "Fetch requests by kind (KIP-227): sessionless, full (asking for a fetch session), "
            "incremental (in one).",
            "kind",
            stats.fetch_requests,
        )
        yield _counter(
            "nullbroker_fetch_session_events",
            "Fetch sessions opened, closed by their client, and evicted for a new one.",
            "event",
            stats.fetch_sessions,
        )
        yield GaugeMetricFamily(
            "nullbroker_fetch_sessions",
            "Fetch sessions kept, over every node (at most --fetch-session-cache-slots each).",
            value=stats.fetch_sessions_open,
        )
        yield CounterMetricFamily(
            "nullbroker_rebalances",
            "Consumer group join phases completed with members (new generations).",
            value=stats.rebalances,
        )


def _group_members_and_lag(stats: BrokerStats) -> Iterator[Metric]:
    members = GaugeMetricFamily(
        "nullbroker_group_members", "Members of each consumer group.", labels=["group"]
    )
    lag = GaugeMetricFamily(
        "nullbroker_group_lag",
        "Records from each consumer group's committed offset to the log end, per partition "
        "it committed to.",
        labels=["group", "topic", "partition"],
    )
    for group, lags in stats.group_lags().items():
        members.add_metric([group], len(stats.group_snapshots[group].members))
        for (topic, partition), (_, records) in lags.items():
            lag.add_metric([group, topic, str(partition)], records)
    yield from (members, lag)


_TASK_KINDS = (("active", "active_tasks"), ("standby", "standby_tasks"),
               ("warmup", "warmup_tasks"))  # fmt: skip
_STREAMS_EPOCHS = (
    ("nullbroker_streams_group_topology_epoch", "topology_epoch", "The epoch of each streams "
     "group's topology (-1 until a member gives it one)."),
    ("nullbroker_streams_group_epoch", "epoch", "Each streams group's epoch: it moves with "
     "every change of its members or of the topics its topology reads."),
    ("nullbroker_streams_group_assignment_epoch", "assignment_epoch", "The group epoch each "
     "streams group's target assignment was made at."),
)  # fmt: skip


def _streams_groups(stats: BrokerStats) -> Iterator[Metric]:
    """Streams groups' own numbers (KIP-1071), each series by group: a group's members and
    lag are nullbroker_group_members' and nullbroker_group_lag's, as for every group."""
    tasks = GaugeMetricFamily(
        "nullbroker_streams_group_tasks",
        "Tasks assigned to each streams group's members, by kind: active, standby, warmup.",
        labels=["group", "kind"],
    )
    rebalances = CounterMetricFamily(
        "nullbroker_streams_group_rebalances",
        "Target assignments made for each streams group since it was created.",
        labels=["group"],
    )
    epochs = [
        (GaugeMetricFamily(name, documentation, labels=["group"]), field)
        for name, field, documentation in _STREAMS_EPOCHS
    ]
    for group, snapshot in sorted(stats.group_snapshots.items()):
        streams = snapshot.streams
        if streams is None:
            continue
        for kind, field in _TASK_KINDS:
            tasks.add_metric([group, kind], getattr(streams, field))
        rebalances.add_metric([group], streams.rebalances)
        for family, field in epochs:
            family.add_metric([group], getattr(streams, field))
    yield from (tasks, rebalances)
    yield from (family for family, _ in epochs)


_SHARE_COUNTERS = (
    ("nullbroker_share_records_acquired", "acquired", "Records a share group's members "
     "acquired (each delivery, the first and the next), per group and partition (KIP-932)."),
    ("nullbroker_share_records_redelivered", "redelivered", "Acquisitions of a record "
     "delivered before (delivery count above one)."),
    ("nullbroker_share_records_archived", "archived", "Records archived without being "
     "accepted: rejected, or released or timed out at share.delivery.count.limit."),
    ("nullbroker_share_lock_timeouts", "lock_timeouts", "Records whose acquisition lock ran "
     "out before they were acknowledged."),
)  # fmt: skip
_ACKNOWLEDGED = (("accept", "accepted"), ("release", "released"), ("reject", "rejected"),
                 ("renew", "renewed"))  # fmt: skip


def _share_groups(stats: BrokerStats) -> Iterator[Metric]:
    """Share groups' records (stats.share), each series by group, topic and partition."""
    labels = ["group", "topic", "partition"]
    counters = [
        (CounterMetricFamily(name, documentation, labels=labels), field)
        for name, field, documentation in _SHARE_COUNTERS
    ]
    acknowledged = CounterMetricFamily(
        "nullbroker_share_records_acknowledged",
        "Records a share group's members acknowledged, by type: accept, release, reject, "
        "renew (KIP-1222).",
        labels=[*labels, "type"],
    )
    in_flight = GaugeMetricFamily(
        "nullbroker_share_records_in_flight",
        "Records acquired and not yet acknowledged, per share group and partition.",
        labels=labels,
    )
    start = GaugeMetricFamily(
        "nullbroker_share_start_offset",
        "The share-partition start offset: every record below it is done.",
        labels=labels,
    )
    for (group, topic, partition), share in sorted(stats.share.items()):
        key = [group, topic, str(partition)]
        for family, field in counters:
            family.add_metric(key, getattr(share, field))
        for kind, field in _ACKNOWLEDGED:
            acknowledged.add_metric([*key, kind], getattr(share, field))
        in_flight.add_metric(key, share.in_flight)
        start.add_metric(key, share.start_offset)
    yield from (family for family, _ in counters)
    yield from (acknowledged, in_flight, start)


def _counter(
    name: str, documentation: str, label: str, counts: Mapping[Any, int]
) -> CounterMetricFamily:
    """A counter with one label, a sample per key of `counts`, in key order."""
    family = CounterMetricFamily(name, documentation, labels=[label])
    for key, count in sorted(counts.items()):
        family.add_metric([str(key)], count)
    return family


def _cumulative_buckets(counts: list[int]) -> list[tuple[str, float]]:
    exposed = set(PROMETHEUS_BOUNDS_NS)
    buckets = []
    cumulative = 0
    for bound, count in zip(LATENCY_BOUNDS_NS, counts, strict=False):
        cumulative += count
        if bound in exposed:
            buckets.append((repr(bound / 1e9), float(cumulative)))
    buckets.append(("+Inf", float(sum(counts))))
    return buckets


def make_registry(stats: BrokerStats | Callable[[], BrokerStats]) -> CollectorRegistry:
    """A registry with the broker's metrics and the process metrics (CPU, RSS, fds)."""
    registry = CollectorRegistry()
    registry.register(BrokerCollector(stats))
    ProcessCollector(registry=registry)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """Prometheus text format 0.0.4 of everything in the registry."""
    return generate_latest(registry)
