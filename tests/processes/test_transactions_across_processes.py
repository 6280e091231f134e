"""Transactions on a cluster of several processes (issue 43): the transaction coordinator,
the group coordinator and the partitions' leaders in different processes, which send each
other Kafka's own broker-to-broker requests (WriteTxnMarkers, KIP-890's AddPartitionsToTxn:
nullbroker.workers.inter_broker); and every one of them moved to the other process when a node
goes down in the middle of a run."""

from __future__ import annotations

import datetime
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.cluster.nodes import TRANSACTION_STATE_TOPIC, Cluster
from tests.processes.test_faults import faults_url, http
from tests.support.broker_counts import samples
from tests.support.differential import request
from tests.support.kafka_wire import FrameStream

PARTITIONS = 5
PER_PARTITION = 20_000
RECORDS = PARTITIONS * PER_PARTITION
DOWN = 1
"""The node taken down, served alone by the second process: it coordinates the pipeline's
transactional id and leads some of its partitions (node 0 stays up, as the controller)."""
STAYS_UP = 2
"""The node, served by the first process, that coordinates the pipeline's group throughout.
librdkafka's producer keeps a group coordinator that leaves the cluster's metadata in its
cache, and its send_offsets_to_transaction then waits on it for ever (seen with librdkafka
2.x on one process as on several); the group's coordinator moving is checked with
consumers alone (test_faults.py)."""


def coordinated_by(node: int, prefix: str, internal: str | None = None) -> str:
    """The first id `prefix`-N that `node` coordinates on a cluster of three nodes."""
    cluster = Cluster(3)
    for index in itertools.count():
        key = f"{prefix}-{index}"
        if (cluster.coordinator(key, internal) if internal else cluster.coordinator(key)) == node:
            return key
    raise AssertionError("unreachable")


def rewind_to_committed(consumer: Consumer) -> None:
    """After an aborted transaction: read again from the group's last committed offsets."""
    for partition in consumer.committed(consumer.assignment(), 30):
        consumer.seek(partition if partition.offset >= 0 else TopicPartition(
            partition.topic, partition.partition, 0
        ))  # fmt: skip


def read_committed_output(broker: RunningBroker) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "checker",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([TopicPartition("output", index, 0) for index in range(PARTITIONS)])
    values: list[bytes] = []
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() - quiet_since < 3 and time.monotonic() < deadline:
            for message in consumer.consume(5000, 0.5):
                assert message.error() is None, message.error()
                values.append(message.value())
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return values


@pytest.mark.clients
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_an_exactly_once_pipeline_outlives_its_coordinators_node_going_down(
    nullbroker_factory: StartBroker, protocol: str
) -> None:
    """confluent-kafka's consume-transform-produce with send_offsets_to_transaction over
    100,000 records on `--brokers 3 --processes 2`, its transaction coordinated by one process
    and its group by the other; a third of the way in, the node that coordinates its
    transactional id goes down for 3 s, and the transaction, with the partitions the node
    led, moves to the other process, and back when the node returns. A transaction that
    failed meanwhile would be aborted and its input read again from the committed offsets,
    as an exactly-once pipeline does; none may need to be. Read read_committed, the output
    holds every input record exactly once."""
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", "2", "--partitions", str(PARTITIONS),
        "--retain", str(16 << 20),  # the output's values, read back to check them
        "--group-initial-rebalance-delay-ms", "0", "--group-consumer-heartbeat-interval-ms", "1000",
        "--source", f"input:partitions={PARTITIONS},records={PER_PARTITION},size=20",
    )  # fmt: skip
    group = coordinated_by(STAYS_UP, f"pipeline-{protocol}")
    transactional_id = coordinated_by(DOWN, f"pipeline-{protocol}", TRANSACTION_STATE_TOPIC)
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": protocol,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    })  # fmt: skip
    consumer.subscribe(["input"])
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id,
        "linger.ms": 5,
    })  # fmt: skip
    producer.init_transactions(30)
    processed = aborted = committed = 0
    taken_down = False
    deadline = time.monotonic() + 300
    while processed < RECORDS and time.monotonic() < deadline:
        messages = consumer.consume(2000, 1.0)
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            assert message.error() is None, message.error()
            producer.produce(
                "output",
                value=f"{message.partition()}:{message.offset()}".encode(),
                partition=message.partition(),
            )
        try:
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
            )
            producer.commit_transaction(60)
        except KafkaException as raised:
            error: KafkaError = raised.args[0]
            assert error.txn_requires_abort(), error  # fatal errors fail the test
            producer.abort_transaction(60)
            rewind_to_committed(consumer)
            aborted += 1
            continue
        processed += len(messages)
        committed += 1
        if not taken_down and processed >= RECORDS // 3:
            assert http("POST", faults_url(broker), f"down:node={DOWN},for=3s")[0] == 201
            taken_down = True
    consumer.close()
    assert processed == RECORDS, f"processed {processed} of {RECORDS} ({aborted} aborted)"
    values = read_committed_output(broker)
    assert len(values) == RECORDS, f"{len(values) - RECORDS:+d} records, {aborted} aborted"
    expected = {f"{p}:{o}".encode() for p in range(PARTITIONS) for o in range(PER_PARTITION)}
    assert set(values) == expected
    # Nothing was lost as the transaction moved and came back: no transaction had to be
    # aborted, and the cluster counted each commit once.
    assert aborted == 0
    families = list(broker.scrape())
    ended = samples(families, "nullbroker_transactions_total")
    assert ended == {(("outcome", "committed"),): committed}
    # The markers went between the processes as Kafka's brokers send them.
    served = samples(families, "nullbroker_requests_total")
    assert served[(("api", "WriteTxnMarkers"),)] > 0


def worker_of(node: int, processes: int = 2) -> int:
    """The process that serves `node` (workers.processes: nodes dealt out in turn)."""
    return node % processes


@pytest.mark.clients
def test_a_partition_keeps_its_aborted_transactions_when_its_leader_moves_to_another_process(
    nullbroker_factory: StartBroker,
) -> None:
    """What a partition's log knows of its transactions (the aborted ones, a transaction
    still open) moves with its leadership to the other process: read_committed there reads
    the committed records only, and waits at the open transaction."""
    broker = nullbroker_factory("--brokers", "3", "--processes", "2", "--partitions", "1")
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": "moving", "linger.ms": 5,
    })  # fmt: skip
    producer.init_transactions(30)
    for count, commit in ((10, False), (5, True), (7, None)):
        producer.begin_transaction()
        for _ in range(count):
            producer.produce("moving", value=b"v", partition=0)
        assert producer.flush(30) == 0
        if commit is True:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
    leader = Cluster(3).leader("moving", 0)
    to = next(node for node in (1, 2, 0) if worker_of(node) != worker_of(leader))
    spec = f"move:topic=moving,partition=0,to={to}"
    assert http("POST", faults_url(broker), spec)[0] == 201
    assert read_count(broker, "moving") == 5  # held at the open transaction
    producer.commit_transaction(30)
    assert read_count(broker, "moving") == 12


def read_count(broker: RunningBroker, topic: str) -> int:
    """How many records a read_committed consumer reads from partition 0, until quiet."""
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "counter",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    count = 0
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() - quiet_since < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                count += 1
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return count


async def ask_until(
    address: str, payload: Any, done: Callable[[Any], bool], seconds: float = 30.0
) -> Any:
    """The answer to `payload` at `address` once `done(answer)`, asked again meanwhile (a
    coordinator that moved, or whose state is on its way, answers NOT_COORDINATOR)."""
    host, port = address.rsplit(":", 1)
    with trio.fail_after(seconds):
        while True:
            stream = FrameStream(await trio.open_tcp_stream(host, int(port)))
            try:
                answer = await stream.request(payload)
            finally:
                await stream.aclose()
            if done(answer):
                return answer
            await trio.sleep(0.1)


def no_error(answer: Any) -> bool:
    return answer.error_code is ErrorCode.none


@pytest.mark.clients
async def test_offsets_a_transaction_staged_move_with_their_group_and_commit_there(
    nullbroker_factory: StartBroker,
) -> None:
    """TxnOffsetCommit stages a group's offsets with its coordinator, in one process; that
    node goes down and the group moves to the other process, its staged offsets with it;
    EndTxn at the transaction's coordinator then sends the group's marker to the new
    coordinator, and the offsets are the group's there."""
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", "2",
        "--source", "input:partitions=1,records=100,size=20",
    )  # fmt: skip
    group = coordinated_by(DOWN, "staged")
    transactional_id = coordinated_by(STAYS_UP, "staged", TRANSACTION_STATE_TOPIC)
    metadata = request(
        3, 12, topics=None, allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )  # fmt: skip
    listed = await ask_until(broker.bootstrap, metadata, lambda _: True)
    nodes = {node.node_id: f"{node.host}:{node.port}" for node in listed.brokers}
    for key, key_type in ((group, 0), (transactional_id, 1)):
        await ask_until(
            broker.bootstrap,
            request(10, 4, key_type=key_type, coordinator_keys=[key]),
            lambda answer: answer.coordinators[0].error_code is ErrorCode.none,
        )
    coordinator = nodes[STAYS_UP]
    producer = await ask_until(
        coordinator,
        request(
            22, 5, transactional_id=transactional_id,
            transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1,
        ),
        no_error,
    )  # fmt: skip
    ids = {
        "transactional_id": transactional_id,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.producer_epoch,
    }
    await ask_until(coordinator, request(25, 4, **ids, group_id=group), no_error)
    staged = await ask_until(
        nodes[DOWN],
        request(
            28, 4, **ids, group_id=group, generation_id=-1, member_id="",
            group_instance_id=None,
            topics=[{"name": "input", "partitions": [{
                "partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                "committed_metadata": "staged",
            }]}],
        ),
        lambda _: True,
    )  # fmt: skip
    assert staged.topics[0].partitions[0].error_code is ErrorCode.none
    assert http("POST", faults_url(broker), f"down:node={DOWN},for=60s")[0] == 201
    after = Cluster(3)
    after.take_down(DOWN, None)
    moved_to = after.coordinator(group)
    assert worker_of(moved_to) != worker_of(DOWN)
    await ask_until(coordinator, request(26, 4, **ids, committed=True), no_error)
    fetched = await ask_until(
        nodes[moved_to],
        request(9, 8, groups=[{"group_id": group, "member_id": None, "member_epoch": -1,
                               "topics": [{"name": "input", "partition_indexes": [0]}]}],
                require_stable=True),
        lambda answer: answer.groups[0].error_code is ErrorCode.none,
    )  # fmt: skip
    partition = fetched.groups[0].topics[0].partitions[0]
    assert (partition.committed_offset, partition.metadata) == (42, "staged")
