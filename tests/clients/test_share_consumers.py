"""confluent_kafka.ShareConsumer (librdkafka's share consumer, KIP-932) against nullbroker and
against Apache Kafka 4.4.0 (`kafka_share`), the same test on each: every record delivered and
accepted once by three members; a member releasing every tenth record and one killed while
holding records, every record still accepted once; records rejected or released past the
delivery limit archived. On nullbroker the broker's accounts (Accounts.share) must match
what the clients saw.

Every loop is bounded in records and time; no assertion is about time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from perf.kafka_broker import KafkaBroker

DEADLINE_S = 120.0
"""Each reading loop stops by itself after this long (a failure, never a wait to pass)."""
LOCK_MS = 15_000
"""share.record.lock.duration.ms for the lock-timeout test: the least Kafka's broker allows
by default (group.share.min.record.lock.duration.ms); nullbroker is given the same."""


@dataclass
class Target:
    name: str
    bootstrap: str
    nullbroker: RunningBroker | None = None


@pytest.fixture(params=["nullbroker", "kafka-4.4.0"])
def target(request: pytest.FixtureRequest, nullbroker_factory: StartBroker) -> Iterator[Target]:
    if request.param == "nullbroker":
        broker = nullbroker_factory("--retain", str(64 << 20))
        yield Target("nullbroker", broker.bootstrap, broker)
    else:
        kafka: KafkaBroker = request.getfixturevalue("kafka_share")
        yield Target("kafka", kafka.bootstrap)


def unique(prefix: str) -> str:
    return f"share-{prefix}-{uuid.uuid4().hex[:8]}"


def prepare(target: Target, topic: str, partitions: int, records: int, group: str,
            **configs: str) -> None:  # fmt: skip
    """The topic with `records` records spread over its partitions, and the group's
    configs (share.auto.offset.reset=earliest, and `configs`: dots as underscores)."""
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 5})
    for index in range(records):
        producer.produce(topic, value=b"%d" % index, partition=index % partitions)
        if index % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    entries = [("share.auto.offset.reset", "earliest")]
    entries += [(name.replace("_", "."), value) for name, value in configs.items()]
    resource = ConfigResource(
        "group",
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in entries
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def consumer(target: Target, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    config = {"bootstrap.servers": target.bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    member = ShareConsumer(config)
    member.subscribe([topic])
    return member


def test_three_members_each_record_delivered_and_accepted_once(target: Target) -> None:
    topic, group, records = unique("once"), unique("once-group"), 100_000
    prepare(target, topic, 3, records, group)
    members = [consumer(target, group, topic) for _ in range(3)]
    seen: Counter[tuple[int, int]] = Counter()
    by_member = Counter()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(seen) < records and time.monotonic() < deadline:
            for index, member in enumerate(members):
                for message in member.poll(0.2):
                    assert message.error() is None, message.error()
                    seen[(message.partition(), message.offset())] += 1
                    by_member[index] += 1
        for member in members:
            member.commit_sync(30)  # the last poll's records, accepted
    finally:
        for member in members:
            member.close()
    assert len(seen) == records
    assert set(seen.values()) == {1}, "a record was delivered twice"
    if target.nullbroker is not None:
        share = target.nullbroker.accounts().share.by_group[group].totals
        assert share.acquired == records and share.accepted == records
        assert share.redelivered == share.released == share.lock_timeouts == 0
        assert target.nullbroker.accounts().fetched.topic(topic).records == records


HOLDER = """
import json, sys, time
from confluent_kafka import ShareConsumer
bootstrap, group, topic = sys.argv[1:4]
member = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                        "share.acknowledgement.mode": "explicit"})
member.subscribe([topic])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    held = [m.offset() for m in member.poll(0.5) if m.error() is None]
    if held:
        print(json.dumps(held), flush=True)
        time.sleep(600)  # holds them, acknowledging nothing, until it is killed
"""


def test_releases_and_a_killed_member_still_accept_each_record_once(target: Target) -> None:
    topic, group, records = unique("redeliver"), unique("redeliver-group"), 3_000
    prepare(target, topic, 1, records, group, share_record_lock_duration_ms=str(LOCK_MS))
    # The member that is killed holding records joins first, so that it gets some.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, target.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = holder.stdout.readline() if holder.stdout else ""
        held = json.loads(line) if line else []
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
    assert held, "the holding member received nothing"
    releasing, accepting = (consumer(target, group, topic, explicit=True) for _ in range(2))
    accepted: Counter[int] = Counter()
    released = redelivered = 0
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(accepted) < records and time.monotonic() < deadline:
            for member in (releasing, accepting):
                for message in member.poll(0.2):
                    assert message.error() is None, message.error()
                    offset = message.offset()
                    redelivered += message.delivery_count() > 1
                    if member is releasing and offset % 10 == 0 and message.delivery_count() == 1:
                        member.acknowledge(message, AcknowledgeType.RELEASE)
                        released += 1
                    else:
                        member.acknowledge(message, AcknowledgeType.ACCEPT)
                        accepted[offset] += 1
                member.commit_sync(30)
    finally:
        releasing.close()
        accepting.close()
    assert len(accepted) == records and set(accepted.values()) == {1}
    if target.nullbroker is not None:
        share = target.nullbroker.accounts().share.by_group[group].totals
        assert share.accepted == records
        assert share.released == released
        assert share.lock_timeouts == len(held)
        assert share.redelivered == redelivered
        assert share.acquired == records + redelivered


def test_rejected_and_too_often_released_records_are_archived(target: Target) -> None:
    topic, group, records = unique("archive"), unique("archive-group"), 20
    prepare(target, topic, 1, records, group, share_delivery_count_limit="2")
    member = consumer(target, group, topic, explicit=True)
    accepted: set[int] = set()
    deliveries: Counter[int] = Counter()
    deadline = time.monotonic() + DEADLINE_S

    def handle(messages: list[Message]) -> None:
        # Offset 0 rejected; offset 1 released at each delivery; the rest accepted.
        for message in messages:
            offset = message.offset()
            deliveries[offset] += 1
            if offset == 0:
                member.acknowledge(message, AcknowledgeType.REJECT)
            elif offset == 1:
                member.acknowledge(message, AcknowledgeType.RELEASE)
            else:
                member.acknowledge(message, AcknowledgeType.ACCEPT)
                accepted.add(offset)
        member.commit_sync(30)

    try:
        while (len(accepted) < records - 2 or deliveries[1] < 2) and time.monotonic() < deadline:
            handle(list(member.poll(0.5)))
        for _ in range(3):  # nothing more comes: both are archived
            handle(list(member.poll(0.5)))
    finally:
        member.close()
    assert deliveries[0] == 1 and deliveries[1] == 2
    assert accepted == set(range(2, records))
    if target.nullbroker is not None:
        share = target.nullbroker.accounts().share.by_group[group].totals
        assert (share.rejected, share.released, share.archived) == (1, 2, 2)
        assert share.accepted == records - 2
