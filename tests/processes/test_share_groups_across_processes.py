"""Share groups on `--brokers 3 --processes 2`, where a group's coordinator is in one
process and the leaders holding its share partitions in both: DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups at the coordinator reach
every partition, as Kafka's coordinator reaches them through its share coordinator
(nullbroker.handlers.share.leaders); a share partition moves with its partition's
leadership, and a group's members with its coordinator. Real share consumers and Kafka's
own tools run on this cluster shape in tests/clients/test_share_consumers.py and
test_share_tools.py; here every partition's placement is known, so each answer is checked
whole."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from kio.schema.errors import ErrorCode

from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.cluster.nodes import Cluster
from tests.processes.test_faults import faults_url, http
from tests.processes.test_transactions_across_processes import (
    ask_until,
    coordinated_by,
    no_error,
    worker_of,
)
from tests.support.differential import request

TOPIC = "shared"
PARTITIONS = 6
RECORDS = 600
"""Each partition's, from the start (a declared source topic's log end)."""
COORDINATOR = 1
"""The node coordinating the group: the second process serves it alone."""

DEADLINE_S = 60.0
"""The consumer's reading stops by itself after this long (a failure, never a wait to pass)."""

pytestmark = pytest.mark.clients


METADATA = request(
    3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def address_of(metadata: Any, node_id: int) -> str:
    return next(f"{node.host}:{node.port}" for node in metadata.brokers if node.node_id == node_id)


def reset_request(group: str, topic: str, starts: dict[int, int]) -> Any:
    """AlterShareGroupOffsets: the group's share partitions of `topic` to start there."""
    partitions = [
        {"partition_index": index, "start_offset": start} for index, start in starts.items()
    ]
    return request(91, 0, group_id=group, topics=[{"topic_name": topic, "partitions": partitions}])


def started_at(described: Any, topic_name: str = TOPIC) -> dict[int, tuple[int, int]]:
    """Partition -> (start offset, lag) of the topic in a DescribeShareGroupOffsets answer,
    every partition without an error."""
    group = described.groups[0]
    assert group.error_code is ErrorCode.none, group
    found = {}
    for topic in group.topics:
        assert topic.topic_name == topic_name
        for partition in topic.partitions:
            assert partition.error_code is ErrorCode.none, partition
            found[partition.partition_index] = (partition.start_offset, partition.lag)
    return found


def describe(group: str, asked: bool, topic: str = TOPIC) -> Any:
    topics = [{"topic_name": topic, "partitions": list(range(PARTITIONS))}] if asked else None
    return request(90, 1, groups=[{"group_id": group, "topics": topics}])


async def test_a_share_groups_offsets_are_described_reset_and_deleted_on_every_leader(
    nullbroker_factory: StartBroker,
) -> None:
    leaders = Cluster(3).leaders(TOPIC, PARTITIONS)
    assert {worker_of(node) for node in leaders} == {0, 1}  # both processes lead some
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", "2",
        "--source", f"{TOPIC}:partitions={PARTITIONS},records={RECORDS},size=10",
    )  # fmt: skip
    group = coordinated_by(COORDINATOR, "offsets")
    listed = await ask_until(broker.bootstrap, METADATA, lambda _: True)
    coordinator = address_of(listed, COORDINATOR)
    starts = {index: 3 + index for index in range(PARTITIONS)}
    altered = await ask_until(coordinator, reset_request(group, TOPIC, starts), no_error)
    errors = [p.error_code for p in altered.responses[0].partitions]
    assert errors == [ErrorCode.none] * PARTITIONS
    expected = {index: (start, RECORDS - start) for index, start in starts.items()}
    for asked in (False, True):  # every partition the group holds, and those named
        described = await ask_until(coordinator, describe(group, asked), no_error_in)
        assert started_at(described) == expected

    # A share consumer reads from where the offsets were set, at each partition's leader.
    read = read_all(broker.bootstrap, group, sum(RECORDS - start for start in starts.values()))
    assert read == {index: list(range(start, RECORDS)) for index, start in starts.items()}
    read_whole = dict.fromkeys(range(PARTITIONS), (RECORDS, 0))
    described = await ask_until(
        coordinator, describe(group, False), lambda answer: started_at(answer) == read_whole
    )
    assert started_at(described) == read_whole

    deleted = await ask_until(
        coordinator, request(92, 0, group_id=group, topics=[{"topic_name": TOPIC}]), no_error
    )
    assert deleted.responses[0].error_code is ErrorCode.none
    assert started_at(await ask_until(coordinator, describe(group, False), no_error_in)) == {}
    named = started_at(await ask_until(coordinator, describe(group, True), no_error_in))
    assert named == dict.fromkeys(range(PARTITIONS), (-1, -1))

    # Reset again, then the group deleted: no process keeps its share partitions.
    ones = dict.fromkeys(range(PARTITIONS), 1)
    await ask_until(coordinator, reset_request(group, TOPIC, ones), no_error)
    assert len(started_at(await ask_until(coordinator, describe(group, False), no_error_in))) == 6
    gone = await ask_until(coordinator, request(42, 2, groups_names=[group]), lambda _: True)
    assert gone.results[0].error_code is ErrorCode.none
    assert started_at(await ask_until(coordinator, describe(group, False), no_error_in)) == {}


def read_all(bootstrap: str, group: str, records: int, topic: str = TOPIC) -> dict[int, list[int]]:
    """The offsets a share consumer of the group reads, by partition, once it has `records`
    (or DEADLINE_S has passed); each accepted."""
    member = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    member.subscribe([topic])
    read: dict[int, list[int]] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while sum(map(len, read.values())) < records and time.monotonic() < deadline:
            for message in member.poll(0.2):
                assert message.error() is None, message.error()
                read.setdefault(message.partition(), []).append(message.offset())
        member.commit_sync(30)
    finally:
        member.close()
    return {index: sorted(offsets) for index, offsets in sorted(read.items())}


def no_error_in(answer: Any) -> bool:
    return answer.groups[0].error_code is ErrorCode.none


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for _ in range(count):
        producer.produce(topic, value=b"v", partition=0)
    assert producer.flush(30) == 0


async def test_a_share_partition_moves_with_its_partition_to_another_process(
    nullbroker_factory: StartBroker,
) -> None:
    """A share group has read and accepted a partition's first records; the partition's
    leadership moves to the other process (`move` fault) and the group's share state with
    it: a share consumer then reads the records produced since, and none again."""
    broker = nullbroker_factory("--brokers", "3", "--processes", "2", "--partitions", "1")
    topic, group = "moving-share", coordinated_by(COORDINATOR, "moving")
    produce(broker.bootstrap, topic, 50)
    listed = await ask_until(broker.bootstrap, METADATA, lambda _: True)
    coordinator = address_of(listed, COORDINATOR)
    await ask_until(coordinator, reset_request(group, topic, {0: 0}), no_error)
    assert read_all(broker.bootstrap, group, 50, topic) == {0: list(range(50))}
    leader = Cluster(3).leader(topic, 0)
    to = next(node for node in (1, 2, 0) if worker_of(node) != worker_of(leader))
    assert http("POST", faults_url(broker), f"move:topic={topic},partition=0,to={to}")[0] == 201
    produce(broker.bootstrap, topic, 50)
    assert read_all(broker.bootstrap, group, 50, topic) == {0: list(range(50, 100))}
    described = await ask_until(
        coordinator,
        describe(group, False, topic),
        lambda answer: started_at(answer, topic) == {0: (100, 0)},
    )
    assert started_at(described, topic) == {0: (100, 0)}


async def test_a_share_groups_members_go_on_when_its_coordinator_moves_to_another_process(
    nullbroker_factory: StartBroker,
) -> None:
    """The node coordinating a share group goes down and the group moves to the other
    process with its members: a member's next heartbeat there keeps its id and epoch, as
    with Kafka's coordinator reading the group back from __consumer_offsets."""
    broker = nullbroker_factory("--brokers", "3", "--processes", "2", "--partitions", "3")
    group = coordinated_by(COORDINATOR, "members")
    produce(broker.bootstrap, "members-topic", 1)
    listed = await ask_until(broker.bootstrap, METADATA, lambda _: True)
    member_id = str(uuid.uuid4())

    def heartbeat(epoch: int) -> Any:
        return request(
            76, 1, group_id=group, member_id=member_id, member_epoch=epoch, rack_id=None,
            subscribed_topic_names=["members-topic"] if epoch == 0 else None,
        )  # fmt: skip

    joined = await ask_until(address_of(listed, COORDINATOR), heartbeat(0), no_error)
    assert http("POST", faults_url(broker), f"down:node={COORDINATOR},for=60s")[0] == 201
    after = Cluster(3)
    after.take_down(COORDINATOR, None)
    moved_to = after.coordinator(group)
    assert worker_of(moved_to) != worker_of(COORDINATOR)
    beat = await ask_until(address_of(listed, moved_to), heartbeat(joined.member_epoch), no_error)
    assert (beat.member_id, beat.member_epoch) == (member_id, joined.member_epoch)
    described = await ask_until(
        address_of(listed, moved_to), request(77, 1, group_ids=[group],
        include_authorized_operations=False), lambda _: True,
    )  # fmt: skip
    assert [m.member_id for m in described.groups[0].members] == [member_id]
