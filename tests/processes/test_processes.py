"""A cluster spread over processes (`--brokers N --processes P`): every worker sees the same
topics, whichever node was asked to change them; producers are counted exactly over all of
them; /metrics, the console line and the summary cover the whole cluster; SIGTERM drains
every worker; a worker that dies stops the cluster; a killed supervisor takes its workers
with it."""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.errors import ErrorCode

from codec import ApiKey
from nullbroker.app.configuration import checked
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.cluster.nodes import Cluster
from nullbroker.settings import Config, ConfigError
from nullbroker.state.producers import FIRST_PRODUCER_ID, ProducerRegistry
from nullbroker.stats import BrokerStats
from tests.processes.test_cluster import node_ports
from tests.processes.test_faults import faults_url, http
from tests.support.broker_counts import produced_from_metrics, samples
from tests.support.kafka_wire import FrameStream, decode_response
from tests.support.kio_calls import types

WORKERS = re.compile(r"^processes: (?P<count>\d+) workers, (?P<rest>.*)$")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"brokers": 3, "processes": "4"}, "must be 'auto' or a number from 1 to the brokers' 3"),
        ({"brokers": 3, "processes": "0"}, "got '0'"),
        ({"brokers": 3, "processes": "two"}, "got 'two'"),
    ],
)
def test_a_process_count_that_cannot_be_served_is_refused(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        checked(Config(**settings))


def test_auto_gives_one_process_per_core_and_at_most_one_per_node() -> None:
    assert Config(brokers=64, processes="auto").process_count == os.cpu_count()
    assert Config(brokers=1, processes="auto").process_count == 1
    assert Config(brokers=3, processes="2").process_count == 2


def test_workers_hand_out_producer_ids_no_other_worker_does() -> None:
    workers = [ProducerRegistry(FIRST_PRODUCER_ID + worker, 3) for worker in range(3)]
    ids = [registry.init_producer()[0] for registry in workers for _ in range(50)]
    assert len(set(ids)) == len(ids) and min(ids) == FIRST_PRODUCER_ID


def test_accounts_add_up_over_workers() -> None:
    first, second = BrokerStats(), BrokerStats()
    first.partition_counters("t", 0).records = 5
    second.partition_counters("t", 0).records = 7
    second.partition_counters("t", 1).bytes = 100
    first.api("Produce").requests, second.api("Produce").requests = 2, 3
    first.api("Produce").latency.observe(10_000)
    second.api("Produce").latency.observe(20_000)
    second.errors["out_of_order_sequence_number"] = 1
    total = BrokerStats()
    total.add(first)
    total.add(second)
    assert total.produced[("t", 0)].records == 12 and total.produced[("t", 1)].bytes == 100
    produce = total.api("Produce")
    assert produce.requests == 5 and produce.latency.count == 2
    assert produce.latency.sum_ns == 30_000
    assert total.errors == {"out_of_order_sequence_number": 1}


def running(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def worker_pids(broker: RunningBroker) -> list[int]:
    line = broker.wait_for_line(WORKERS, 10)
    return [int(pid) for pid in re.findall(r"\(pid (\d+)\)", line)]


async def topic_ids_at(port: int, topics: list[str]) -> dict[str, tuple[Any, int]]:
    """Each topic's id and partition count, as the node at `port` answers Metadata v12
    (without creating anything)."""
    request_types = types(ApiKey.METADATA, 12)
    request = request_types.MetadataRequest(
        topics=tuple(request_types.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    stream = FrameStream(await trio.open_tcp_stream("127.0.0.1", port))
    try:
        await stream.send_request(request)
        _, body = decode_response(await stream.receive_frame(), ApiKey.METADATA, 12)
    finally:
        await stream.stream.aclose()
    return {
        topic.name: (topic.topic_id, len(topic.partitions))
        for topic in body.topics
        if topic.error_code == ErrorCode.none
    }


@pytest.mark.clients
async def test_topic_changes_reach_every_process_before_they_are_answered(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--brokers", "3", "--processes", "2", "--partitions", "4")
    ports = node_ports(broker)
    assert len(worker_pids(broker)) == 2
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("made", num_partitions=6)]).values():
        assert future.result(30) is None
    for port in ports:  # the answer came after every worker had the topic
        assert (await topic_ids_at(port, ["made"]))["made"][1] == 6
    for future in admin.create_partitions([NewPartitions("made", 9)]).values():
        assert future.result(30) is None
    seen = [await topic_ids_at(port, ["made"]) for port in ports]
    assert all(view == seen[0] for view in seen) and seen[0]["made"][1] == 9
    for future in admin.delete_topics(["made"]).values():
        assert future.result(30) is None
    assert [await topic_ids_at(port, ["made"]) for port in ports] == [{}] * len(ports)


@pytest.mark.clients
def test_two_processes_count_exactly_and_report_once_for_the_cluster(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", "2", "--partitions", "6", "--report-interval", "0.5"
    )  # fmt: skip
    pids = worker_pids(broker)
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5,
    })  # fmt: skip
    records = 9000
    for index in range(records):
        # An auto-created topic (Metadata, through the supervisor) and a second one. Every
        # partition named, so that every node gets records: librdkafka's sticky partitioner
        # may leave a node's partitions out of a short burst, and connects only where it sends.
        producer.produce(
            "first" if index % 2 else "second", value=b"x" * 100, partition=index // 2 % 6
        )
        producer.poll(0)
    assert producer.flush(30) == 0

    families = list(broker.scrape())
    produced = produced_from_metrics(families)
    assert sum(counts.records for counts in produced.values()) == records
    for topic in ("first", "second"):
        written = {
            index for (name, index), counts in produced.items() if name == topic and counts.records
        }
        assert written == set(range(6)), topic
    nodes = samples(families, "nullbroker_node_connections_total")
    assert {dict(labels)["node"] for labels in nodes} == {"0", "1", "2"}
    # Every node answered requests, in both workers, and the cluster's sum says so.
    requests = samples(families, "nullbroker_node_requests_total")
    assert {dict(labels)["node"] for labels, count in requests.items() if count} == {"0", "1", "2"}
    line = broker.wait_for_line(re.compile(r"records/sec .* produced"), 10)
    assert "MiB RSS" in line

    summary = broker.stop()
    assert summary["produced"]["records"] == records
    assert summary["produced"]["topics"]["first"]["records"] == records // 2
    assert summary["requests"]["Produce"] > 0 and summary["errors"] == {}
    assert not any(running(pid) for pid in pids)  # every worker drained and exited


@pytest.mark.clients
def test_a_worker_that_dies_stops_the_cluster(nullbroker_factory: StartBroker) -> None:
    broker = nullbroker_factory("--brokers", "2", "--processes", "2")
    pids = worker_pids(broker)
    os.kill(pids[1], signal.SIGKILL)
    assert broker.process.wait(timeout=30) == 1
    assert f"worker 1 (pid {pids[1]}) has gone; stopping the cluster" in broker.stderr_text()
    assert not running(pids[0])


@pytest.mark.clients
def test_a_killed_supervisor_takes_its_workers_with_it(nullbroker_factory: StartBroker) -> None:
    broker = nullbroker_factory("--brokers", "2", "--processes", "2")
    pids = worker_pids(broker)
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(timeout=10)
    deadline = time.monotonic() + 30
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(running(pid) for pid in pids), "workers outlived their supervisor"


@pytest.mark.clients
def test_retained_batches_move_with_their_partition_to_the_other_process(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", "2", "--partitions", "1", "--retain", "1000000"
    )  # fmt: skip
    topic = "kept"
    leader = Cluster(3).leader(topic, 0)
    elsewhere = next(node for node in range(3) if node % 2 != leader % 2)  # the other worker
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})

    def send(first: int, last: int) -> None:
        for index in range(first, last):
            producer.produce(topic, value=f"v{index}".encode())
        assert producer.flush(30) == 0

    send(0, 100)
    assert (
        http("POST", faults_url(broker), f"move:topic={topic},partition=0,to={elsewhere}")[0] == 201
    )
    send(100, 150)  # to the new leader, in the other process
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while len(read) < 150 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append((message.offset(), message.value()))
    finally:
        consumer.close()
    # What the old leader kept came with the partition: every record, as produced.
    assert read == [(offset, f"v{offset}".encode()) for offset in range(150)]


async def test_the_first_find_coordinator_makes_consumer_offsets_in_every_process(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", "2", "--offsets-topic-partitions", "5"
    )
    ports = node_ports(broker)
    request_types = types(ApiKey.FIND_COORDINATOR, 4)
    stream = FrameStream(await trio.open_tcp_stream("127.0.0.1", ports[1]))
    try:
        await stream.send_request(
            request_types.FindCoordinatorRequest(key_type=0, coordinator_keys=("g",))
        )
        _, body = decode_response(await stream.receive_frame(), ApiKey.FIND_COORDINATOR, 4)
    finally:
        await stream.stream.aclose()
    assert body.coordinators[0].error_code is ErrorCode.none
    seen = [await topic_ids_at(port, ["__consumer_offsets"]) for port in ports]
    assert all(view == seen[0] for view in seen) and seen[0]["__consumer_offsets"][1] == 5
