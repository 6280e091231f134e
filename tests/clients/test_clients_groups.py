"""Consumer groups with real clients against `nullbroker serve`: membership, assignment,
rebalances and committed offsets (confluent-kafka, kafka-python, aiokafka, kcat).

The topics here hold no records: these tests are about the group, not about consuming.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KafkaPythonTopicPartition

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from tests.support.broker_counts import metric_total, samples

pytestmark = pytest.mark.clients

PARTITIONS = 4
TIMEOUT = 30.0
# Kafka's smallest session timeout, and frequent heartbeats: members notice a rebalance
# within a fraction of a second.
SESSION_MS = 6000
HEARTBEAT_MS = 200
NO_DELAY = ("--group-initial-rebalance-delay-ms", "0")


def start(nullbroker_factory: StartBroker, topic: str) -> RunningBroker:
    """A broker with no initial rebalance delay and `topic` created with four partitions
    (consumers do not create the topics they subscribe to)."""
    broker = nullbroker_factory(*NO_DELAY)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for created in admin.create_topics([NewTopic(topic, PARTITIONS)]).values():
        created.result(TIMEOUT)
    return broker


def confluent_consumer(broker: RunningBroker, group: str, name: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": name,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def owned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def poll_until(consumers: Iterable[Consumer], done: Callable[[], bool], what: str) -> None:
    """Poll every consumer (rebalances happen inside poll) until `done()`, within TIMEOUT."""
    consumers = list(consumers)
    deadline = time.monotonic() + TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {TIMEOUT} s")
        for consumer in consumers:
            consumer.poll(0.05)


@pytest.mark.every_connection_loop
def test_two_consumers_share_four_partitions_and_the_survivor_takes_all_when_one_leaves(
    nullbroker_factory: StartBroker,
) -> None:
    broker = start(nullbroker_factory, "orders")
    first = confluent_consumer(broker, "shared", "first")
    second = confluent_consumer(broker, "shared", "second")
    first.subscribe(["orders"])
    second.subscribe(["orders"])
    try:
        poll_until(
            [first, second],
            lambda: (
                bool(owned(first))
                and bool(owned(second))
                and owned(first) | owned(second) == set(range(PARTITIONS))
            ),
            "both members assigned",
        )
        assert not owned(first) & owned(second), "a partition is owned by one member only"
    finally:
        second.close()  # LeaveGroup: the group rebalances at once
    try:
        poll_until([first], lambda: owned(first) == set(range(PARTITIONS)), "survivor owns all")
    finally:
        first.close()
    families = broker.scrape()
    # At least: both members' generation, then the survivor's (the first may have had its own).
    assert metric_total(families, "nullbroker_rebalances_total") >= 2
    by_state = {
        dict(labels)["state"]: value
        for labels, value in samples(families, "nullbroker_groups").items()
    }
    assert by_state["Empty"] == 1 and by_state["Stable"] == 0
    summary = broker.stop()
    assert summary["groups"]["by_state"]["Empty"] == 1
    assert summary["groups"]["rebalances"] >= 2
    for api in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"):
        assert summary["requests"].get(api, 0) >= 1, api


def test_commits_are_read_back_by_committed_and_by_a_fresh_consumer_of_the_group(
    nullbroker_factory: StartBroker,
) -> None:
    broker = start(nullbroker_factory, "payments")
    member = confluent_consumer(broker, "billing", "member")
    member.subscribe(["payments"])
    wanted = {0: 5, 3: 9}
    try:
        poll_until([member], lambda: owned(member) == set(range(PARTITIONS)), "assigned")
        member.commit(
            offsets=[TopicPartition("payments", p, offset) for p, offset in wanted.items()],
            asynchronous=False,
        )
        asked = [TopicPartition("payments", p) for p in range(PARTITIONS)]
        committed = {tp.partition: tp.offset for tp in member.committed(asked, timeout=TIMEOUT)}
    finally:
        member.close()
    # librdkafka reports "no committed offset" as OFFSET_INVALID (-1001).
    assert committed == {0: 5, 1: -1001, 2: -1001, 3: 9}
    fresh = confluent_consumer(broker, "billing", "fresh")
    try:
        again = {tp.partition: tp.offset for tp in fresh.committed(asked, timeout=TIMEOUT)}
    finally:
        fresh.close()
    assert again == committed


def test_an_assigning_consumer_commits_outside_group_management(
    nullbroker_factory: StartBroker,
) -> None:
    # As Spark's executors do: assign() partitions, commit with no member id or generation.
    broker = start(nullbroker_factory, "events")
    consumer = confluent_consumer(broker, "spark-kafka-source-0", "executor")
    try:
        consumer.assign([TopicPartition("events", 2, 0)])
        consumer.commit(offsets=[TopicPartition("events", 2, 40)], asynchronous=False)
        (committed,) = consumer.committed([TopicPartition("events", 2)], timeout=TIMEOUT)
    finally:
        consumer.close()
    assert committed.offset == 40
    assert broker.stop()["groups"]["rebalances"] == 0


def test_admin_client_lists_describes_and_deletes_groups(nullbroker_factory: StartBroker) -> None:
    broker = start(nullbroker_factory, "audit")
    member = confluent_consumer(broker, "auditors", "member")
    member.subscribe(["audit"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        poll_until([member], lambda: bool(owned(member)), "assigned")
        listed = admin.list_consumer_groups().result(TIMEOUT)
        assert [group.group_id for group in listed.valid] == ["auditors"]
        (described,) = [
            future.result(TIMEOUT)
            for future in admin.describe_consumer_groups(["auditors"]).values()
        ]
        assert str(described.state).endswith("STABLE")
        assert [m.client_id for m in described.members] == ["member"]
        assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == set(
            range(PARTITIONS)
        )
        (deleting,) = admin.delete_consumer_groups(["auditors"]).values()
        with pytest.raises(KafkaException) as refused:
            deleting.result(TIMEOUT)
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        member.close()
    for future in admin.delete_consumer_groups(["auditors"]).values():
        future.result(TIMEOUT)
    assert admin.list_consumer_groups().result(TIMEOUT).valid == []


def test_kafka_python_consumer_joins_a_group_and_commits(nullbroker_factory: StartBroker) -> None:
    broker = start(nullbroker_factory, "clicks")
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="kafka-python",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        enable_auto_commit=False,
    )
    # The topic's metadata first: kafka-python 3.0 subscribed at once may join before it has
    # the partitions, assign none, rejoin when they arrive and then, now and then, never
    # apply the second SyncGroup's assignment (the broker's answer carries the partitions).
    assert consumer.partitions_for_topic("clicks") == set(range(PARTITIONS))
    consumer.subscribe(["clicks"])
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(consumer.assignment()) < PARTITIONS:
            assert time.monotonic() < deadline, "kafka-python was never assigned"
            consumer.poll(timeout_ms=50)
        partition = KafkaPythonTopicPartition("clicks", 1)
        consumer.commit({partition: OffsetAndMetadata(12, "", -1)})
        assert consumer.committed(partition) == 12
    finally:
        consumer.close()
    summary = broker.stop()
    assert summary["groups"]["rebalances"] >= 1
    assert summary["requests"]["OffsetCommit"] == 1


async def _aiokafka_joins_and_commits(bootstrap: str) -> tuple[int, int | None]:
    consumer = AIOKafkaConsumer(
        "views",
        bootstrap_servers=bootstrap,
        group_id="aiokafka",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        enable_auto_commit=False,
    )
    await asyncio.wait_for(consumer.start(), TIMEOUT)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not consumer.assignment():
            assert time.monotonic() < deadline, "aiokafka was never assigned"
            await asyncio.sleep(0.05)
        partition = AioTopicPartition("views", 2)
        await asyncio.wait_for(consumer.commit({partition: 21}), TIMEOUT)
        committed = await asyncio.wait_for(consumer.committed(partition), TIMEOUT)
        return len(consumer.assignment()), committed
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT)


def test_aiokafka_consumer_joins_a_group_and_commits(nullbroker_factory: StartBroker) -> None:
    # aiokafka needs an asyncio loop: a plain test running one (trio_mode takes `async def`).
    broker = start(nullbroker_factory, "views")
    assigned, committed = asyncio.run(_aiokafka_joins_and_commits(broker.bootstrap))
    assert (assigned, committed) == (PARTITIONS, 21)
    assert broker.stop()["groups"]["rebalances"] >= 1


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not on PATH")
def test_kcat_balanced_consumer_joins_gets_every_partition_and_leaves(
    nullbroker_factory: StartBroker,
) -> None:
    broker = start(nullbroker_factory, "logs")
    # -G: a balanced (group) consumer; -e: exit once every assigned partition is at its end.
    done = subprocess.run(
        [
            "kcat",
            "-b",
            broker.bootstrap,
            "-G",
            "kcat-group",
            "logs",
            "-e",
            "-q",
            "-X",
            f"session.timeout.ms={SESSION_MS}",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = broker.stop()
    requests: dict[str, Any] = summary["requests"]
    assert requests["JoinGroup"] >= 1 and requests["SyncGroup"] >= 1
    assert requests["LeaveGroup"] == 1
    assert summary["groups"]["by_state"] == {
        "CompletingRebalance": 0,
        "Empty": 1,
        "PreparingRebalance": 0,
        "Stable": 0,
    }
    assert summary["groups"]["rebalances"] >= 1
