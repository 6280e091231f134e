"""The accounts a running broker serves (GET /accounts) are the numbers /metrics exposes, for
one process and a cluster over processes; POST /accounts/reset zeroes the counts, in place,
and keeps what the broker holds."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from prometheus_client.metrics_core import Metric

from nullbroker.app.accounts import Accounts, Group, PartitionLag
from nullbroker.app.accounts import GroupMember as Member
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.broker import Broker
from nullbroker.ops.http_endpoint import HttpRequest, accounts_handler, metrics_handler
from nullbroker.ops.report import ConsoleReporter, summary
from nullbroker.settings import Config
from nullbroker.stats import (
    BrokerStats,
    FetchCounters,
    GroupMember,
    GroupSnapshot,
    PartitionCounters,
)
from tests.support.broker_counts import (
    PROCESSES,
    fetched_from_metrics,
    metric_total,
    produced_from_metrics,
    requests_from_metrics,
    samples,
)
from tests.support.kio_calls import SESSION, answered, dispatch_of, fetch_frame

RECORDS = 1000
PARTITIONS = 2
TIMEOUT = 20.0

KEPT = {
    # What describes the broker now, not what it counted: a reset leaves these.
    "started_at",
    "_started_monotonic",
    "connections",
    "groups",
    "fetch_sessions_open",
    "read_budget_reserved",
    "other_processes_rss",
    "other_processes_peak_rss",
    "group_snapshots",
    "log_end_offsets",
    # What client instances pushed (KIP-714), read from the broker's state as it stands.
    "pushed_clients",
    "pushed_totals",
}


def every_count_set(stats: BrokerStats) -> None:
    """Give every field of `stats` a value that is not its initial one."""
    counters = stats.partition_counters("t", 0)
    counters.records, counters.bytes, counters.batches, counters.retained_bytes = 5, 500, 1, 50
    served = stats.fetch_counters("t", 0)
    served.records, served.bytes = 3, 300
    api = stats.api("Produce")
    api.requests = 2
    api.latency.observe(1_000)
    api.held.observe(2_000_000)
    stats.group_snapshots["g"] = GroupSnapshot("classic", "Stable", (), {("t", 0): 2})
    stats.log_end_offsets[("t", 0)] = 5
    for name, value in vars(stats).items():
        if isinstance(value, Counter):
            value["x"] += 1
        elif isinstance(value, int | float) and name not in ("started_at", "counts_since"):
            setattr(stats, name, value + 7)


def test_a_reset_zeroes_every_count_in_place_and_keeps_what_describes_the_broker() -> None:
    stats = BrokerStats()
    every_count_set(stats)
    held = {
        name: value for name, value in vars(stats).items() if not isinstance(value, int | float)
    }
    produced, fetched, api = (
        stats.produced[("t", 0)],
        stats.fetched[("t", 0)],
        stats.apis["Produce"],
    )
    kept = {name: getattr(stats, name) for name in KEPT}
    kept["groups"] = Counter(stats.groups)
    time.sleep(0.001)

    counted = stats.reset_counts()

    assert counted.produced[("t", 0)] == PartitionCounters(5, 500, 1, 50)
    assert counted.apis["Produce"].requests == 2 and counted.errors == Counter({"x": 1})
    # The same objects, which topics, the C lane and the faults hold, now at zero.
    for name, value in held.items():
        assert getattr(stats, name) is value, name
    assert stats.produced[("t", 0)] is produced and stats.apis["Produce"] is api
    assert produced == PartitionCounters(0, 0, 0, retained_bytes=50)
    assert stats.fetched[("t", 0)] is fetched and fetched == FetchCounters(0, 0)
    assert api.requests == 0 and api.latency.count == api.held.count == api.latency.sum_ns == 0
    assert {name: getattr(stats, name) for name in KEPT} == kept
    for name, value in vars(stats).items():
        if name in KEPT or name == "counts_since":
            continue
        if isinstance(value, Counter):
            assert value == Counter(), name
        elif isinstance(value, int):
            assert value == 0, name
    assert stats.counts_since > counted.counts_since


def test_a_groups_lag_runs_from_its_offsets_to_the_log_ends_of_the_partitions_leaders() -> None:
    # With --processes, the group's coordinator is one worker and a partition's leader
    # may be another: each keeps a copy of every partition, and only the leader's grows.
    coordinator, leader = BrokerStats(), BrokerStats()
    member = GroupMember("m-1", "reader", "/127.0.0.1")
    committed = {("t", 0): 3, ("t", 1): 5, ("deleted", 0): 1}
    coordinator.group_snapshots["g"] = GroupSnapshot("classic", "Stable", (member,), committed)
    coordinator.log_end_offsets = {("t", 0): 0, ("t", 1): 0}
    leader.log_end_offsets = {("t", 0): 10, ("t", 1): 5}
    cluster = BrokerStats()
    cluster.add(coordinator)
    cluster.add(leader)

    assert cluster.group_lags() == {"g": {("t", 0): (3, 7), ("t", 1): (5, 0)}}
    assert Accounts.from_json(summary(cluster)).groups.by_group == {
        "g": Group(
            protocol="classic",
            state="Stable",
            members=(Member(member_id="m-1", client_id="reader", client_host="/127.0.0.1"),),
            lag=7,
            partitions={
                "t": {
                    0: PartitionLag(committed=3, log_end=10, lag=7),
                    1: PartitionLag(committed=5, log_end=5, lag=0),
                }
            },
        )
    }


def test_the_console_line_after_a_reset_counts_from_zero() -> None:
    broker = Broker(Config())
    reporter = ConsoleReporter(broker.stats)
    dispatch = dispatch_of(broker)
    for _ in range(3):
        answered(dispatch.answer(fetch_frame("unknown", offset=0, max_wait_ms=0), SESSION))
    assert reporter.line(1.0) is not None
    broker.stats.reset_counts()
    answered(dispatch.answer(fetch_frame("unknown", offset=0, max_wait_ms=0), SESSION))
    line = reporter.line(1.0)
    assert line is not None and ", 1.0 requests/sec, " in line, line


async def test_accounts_are_read_with_get_and_reset_with_post_only() -> None:
    stats = BrokerStats()
    stats.partition_counters("t", 0).records = 4

    async def reset() -> object:
        return {"were": stats.reset_counts().produced[("t", 0)].records}

    handle = accounts_handler(lambda: {"records": stats.produced[("t", 0)].records}, reset,
                              metrics_handler(lambda: b"metrics\n"))  # fmt: skip
    get = await handle(HttpRequest(b"GET", "/accounts", "", b""))  # type: ignore[misc]
    assert (get.status, get.body, get.content_type) == (
        200,
        b'{"records": 4}\n',
        b"application/json",
    )
    assert (await handle(HttpRequest(b"POST", "/accounts", "", b""))).status == 405  # type: ignore[misc]
    assert (await handle(HttpRequest(b"GET", "/accounts/reset", "", b""))).status == 405  # type: ignore[misc]
    assert stats.produced[("t", 0)].records == 4
    reset_answer = await handle(HttpRequest(b"POST", "/accounts/reset/", "", b""))  # type: ignore[misc]
    assert reset_answer.body == b'{"were": 4}\n' and stats.produced[("t", 0)].records == 0
    assert (await handle(HttpRequest(b"GET", "/metrics", "", b""))).body == b"metrics\n"  # type: ignore[misc]


def produce_and_consume(bootstrap: str, group: str, records: int) -> list[int]:
    """Produce `records` to `orders` (idempotent, over both partitions), then read them all
    as a member of `group`, committing; both clients closed. The offsets delivered."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    delivered: list[int] = []
    for number in range(records):
        producer.produce(
            "orders",
            f"order {number}".encode(),
            partition=number % PARTITIONS,
            on_delivery=lambda error, message: delivered.append(message.offset()),
        )
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe(["orders"])
    read = 0
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
            else:
                read += 1
                at_end.discard(message.partition())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert read == records
    return delivered


def quiet_accounts(broker: RunningBroker) -> Accounts:
    """The accounts once every client connection has closed, so that nothing changes between
    this read and the next."""
    deadline = time.monotonic() + TIMEOUT
    while (accounts := broker.accounts()).connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert accounts.connections == 0
    return accounts


def by_label(families: list[Metric], name: str, label: str) -> dict[str, float]:
    return {dict(key)[label]: value for key, value in samples(families, name).items()}


def as_metrics_show(accounts: Accounts) -> dict[str, Any]:
    """The accounts, shaped as the same numbers read from /metrics are below."""
    return {
        "produced": {
            (topic, index): (counts.records, counts.bytes, counts.batches)
            for topic, entry in accounts.produced.topics.items()
            for index, counts in entry.partitions.items()
        },
        "fetched": {
            (topic, index): counts.records
            for topic, entry in accounts.fetched.topics.items()
            for index, counts in entry.partitions.items()
        },
        "fetched_bytes": accounts.fetched.bytes,
        "requests": dict(accounts.requests),
        "latency": {api: (h.count, h.sum) for api, h in accounts.request_latency.items()},
        "held": {api: (h.count, h.sum) for api, h in accounts.request_held.items()},
        "errors": dict(accounts.errors),
        "groups": dict(accounts.groups.by_state),
        "group_members": {
            name: len(group.members) for name, group in accounts.groups.by_group.items()
        },
        "group_lag": {
            (name, topic, str(index)): lag.lag
            for name, group in accounts.groups.by_group.items()
            for topic, partitions in group.partitions.items()
            for index, lag in partitions.items()
        },
        "rebalances": accounts.groups.rebalances,
        "connections": accounts.connections,
        "connections_total": accounts.connections_total,
        "fetch_requests": dict(accounts.fetch_requests),
        "faults": dict(accounts.faults),
    }


def from_metrics(families: list[Metric]) -> dict[str, Any]:
    def histogram(name: str) -> dict[str, tuple[int, float]]:
        counts = by_label(families, f"{name}_count", "api")
        sums = by_label(families, f"{name}_sum", "api")
        return {api: (int(count), sums[api]) for api, count in counts.items()}

    def counted(name: str, label: str) -> dict[str, int]:
        return {key: int(value) for key, value in by_label(families, name, label).items()}

    return {
        "produced": {
            key: (counts.records, counts.bytes, counts.batches)
            for key, counts in produced_from_metrics(families).items()
        },
        "fetched": fetched_from_metrics(families),
        "fetched_bytes": int(metric_total(families, "nullbroker_fetched_bytes_total")),
        "requests": requests_from_metrics(families),
        "latency": histogram("nullbroker_request_latency_seconds"),
        "held": histogram("nullbroker_request_held_seconds"),
        "errors": counted("nullbroker_errors_total", "error"),
        "groups": counted("nullbroker_groups", "state"),
        "group_members": counted("nullbroker_group_members", "group"),
        "group_lag": {
            tuple(dict(labels)[name] for name in ("group", "topic", "partition")): int(value)
            for labels, value in samples(families, "nullbroker_group_lag").items()
        },
        "rebalances": int(metric_total(families, "nullbroker_rebalances_total")),
        "connections": int(metric_total(families, "nullbroker_connections")),
        "connections_total": int(metric_total(families, "nullbroker_node_connections_total")),
        "fetch_requests": counted("nullbroker_fetch_requests_total", "kind"),
        "faults": counted("nullbroker_faults_total", "kind"),
    }


@pytest.mark.clients
@PROCESSES
def test_the_accounts_are_the_metrics_numbers_and_a_reset_zeroes_both(
    nullbroker_factory: StartBroker, processes: str
) -> None:
    broker = nullbroker_factory(
        "--brokers", processes, "--processes", processes, "--partitions", str(PARTITIONS),
        "--group-initial-rebalance-delay-ms", "0",
    )  # fmt: skip
    produce_and_consume(broker.bootstrap, "agree", RECORDS)
    accounts = quiet_accounts(broker)
    families = broker.scrape()

    assert as_metrics_show(accounts) == from_metrics(families)
    assert accounts.produced.topic("orders").records == RECORDS
    assert accounts.fetched.topic("orders").records >= RECORDS
    assert accounts.request_latency["Produce"].count == accounts.requests["Produce"]
    assert accounts.groups.rebalances >= 1 and accounts.groups.by_state["Empty"] == 1
    assert accounts.connections_total >= 3

    counted = broker.reset()
    assert counted.produced == accounts.produced and counted.requests == accounts.requests
    after = broker.accounts()
    assert as_metrics_show(after) == from_metrics(broker.scrape())
    assert after.produced.topic("orders").partitions == {
        index: type(counts)(records=0, bytes=0, batches=0)
        for index, counts in accounts.produced.topic("orders").partitions.items()
    }
    assert set(after.requests.values()) == {0} and after.requests_total == 0
    assert after.connections_total == after.groups.rebalances == 0
    assert after.groups.by_state == accounts.groups.by_state  # the group is still there
    assert after.counts_since > accounts.counts_since
    assert after.started_at == accounts.started_at

    # The topic kept its offsets: the next records are counted from zero, at offsets after
    # the first thousand.
    offsets = produce_and_consume(broker.bootstrap, "agree", 10)
    assert min(offsets) >= RECORDS // PARTITIONS
    final = quiet_accounts(broker)
    assert final.produced.topic("orders").records == 10
    # The group read every record: no lag, though with two processes its coordinator
    # and a partition's leader are in different workers (each keeps a copy of every
    # partition; only the leader's log grows).
    end = (RECORDS + 10) // PARTITIONS
    group = final.groups.by_group["agree"]
    assert (group.state, group.members, group.lag) == ("Empty", (), 0)
    assert group.partitions == {
        "orders": {index: PartitionLag(committed=end, log_end=end, lag=0) for index in (0, 1)}
    }
    assert as_metrics_show(final) == from_metrics(broker.scrape())
    summary = broker.stop()
    assert summary["produced"]["records"] == 10
    assert Accounts.from_json(summary).produced.topic("orders").records == 10
