"""confluent_kafka.ShareConsumer (librdkafka's share consumer, KIP-932) and Kafka 4.4.0's own
KafkaShareConsumer (tests/clients/java/ShareMember.java) against nullbroker and against Apache
Kafka 4.4.0 (`kafka`), the same test on each: every record delivered and accepted once
by three members; a member releasing every tenth record and one killed while holding
records, every record still accepted once; records rejected or released past the delivery
limit archived. On nullbroker the broker's accounts (Accounts.share) must match what the
clients saw.

Every loop is bounded in records and time; no assertion is about time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

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
from perf.java_perf import CACHE
from perf.kafka_broker import KAFKA_VERSION, KafkaBroker
from tests.support.java_classes import compiled

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


@pytest.fixture(params=["nullbroker", "nullbroker-brokers-3-processes-2", "kafka-4.4.0"])
def target(request: pytest.FixtureRequest, nullbroker_factory: StartBroker) -> Iterator[Target]:
    if request.param.startswith("nullbroker"):
        cluster = ("--brokers", "3", "--processes", "2") if "processes" in request.param else ()
        broker = nullbroker_factory("--retain", str(64 << 20), *cluster)
        yield Target("nullbroker", broker.bootstrap, broker)
    else:
        kafka: KafkaBroker = request.getfixturevalue("kafka")
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


FATES = ["killed", "hung"]
"""What becomes of the member holding records: killed (its connections close, and the
broker gives its records back at once, as Kafka does on a disconnect), or hung (stopped, its
connections open: its locks run out after LOCK_MS). Either way the records are delivered
again, their delivery counted (as Kafka 4.4.0 counts it on a disconnect too)."""


def end_holder(pid: int, fate: str) -> None:
    os.kill(pid, signal.SIGKILL if fate == "killed" else signal.SIGSTOP)


def check_redelivery(
    target: Target,
    group: str,
    records: int,
    fate: str,
    held: set[int],
    held_again: dict[int, int],
    released: int,
    redelivered: int,
) -> None:
    """What the clients saw of the held records (`held_again`: the delivery count each was
    delivered with next) and, on nullbroker, the broker's counts of it.

    Each record comes back at most once: released at its first delivery, or given back by
    the member gone. So the records delivered again that nobody released (`redelivered -
    released`) are those the member gone held: the ones it printed and any its client had
    fetched ahead without handing them over yet (Kafka's Java client sends its next
    ShareFetch in the background as soon as the last completes, and now and then it acquires
    500 more records before the holder stops)."""
    assert set(held_again) == held
    assert set(held_again.values()) == {2}
    given_back = redelivered - released
    assert given_back >= len(held)
    if target.nullbroker is not None:
        share = target.nullbroker.accounts().share.by_group[group].totals
        assert share.accepted == records
        assert share.released == released
        assert share.redelivered == redelivered
        assert share.acquired == records + redelivered
        assert share.lock_timeouts == (0 if fate == "killed" else given_back)


@pytest.mark.parametrize("fate", FATES)
def test_releases_and_a_member_gone_holding_records_still_accept_each_record_once(
    target: Target, fate: str
) -> None:
    topic, group, records = unique("redeliver"), unique("redeliver-group"), 100_000
    prepare(target, topic, 1, records, group, share_record_lock_duration_ms=str(LOCK_MS))
    # The member that goes holding records joins first, so that it gets some.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, target.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = holder.stdout.readline() if holder.stdout else ""
        held = set(json.loads(line)) if line else set()
        end_holder(holder.pid, fate)
        assert held, "the holding member received nothing"
        releasing, accepting = (consumer(target, group, topic, explicit=True) for _ in range(2))
        accepted: Counter[int] = Counter()
        held_again: dict[int, int] = {}
        released = redelivered = 0
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(accepted) < records and time.monotonic() < deadline:
                for member in (releasing, accepting):
                    for message in member.poll(0.2):
                        assert message.error() is None, message.error()
                        offset, count = message.offset(), message.delivery_count()
                        redelivered += count > 1
                        if offset in held:
                            held_again.setdefault(offset, count)
                        if member is releasing and offset % 10 == 0 and count == 1:
                            member.acknowledge(message, AcknowledgeType.RELEASE)
                            released += 1
                        else:
                            member.acknowledge(message, AcknowledgeType.ACCEPT)
                            accepted[offset] += 1
                    member.commit_sync(30)
        finally:
            releasing.close()
            accepting.close()
    finally:
        holder.kill()
        holder.wait(30)
    assert len(accepted) == records and set(accepted.values()) == {1}
    assert released, "the releasing member released nothing"
    check_redelivery(target, group, records, fate, held, held_again, released, redelivered)


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


JAVA_MEMBER = Path(__file__).parent / "java" / "ShareMember.java"
JAVA_LIB = CACHE / KAFKA_VERSION / "lib"
Seen = tuple[int, int, int, str]
"""What a Java member printed of a record: partition, offset, delivery count, and what it
did: "A" accepted, "R" released, "H" held."""


@pytest.fixture(scope="session")
def java_member_classes() -> Path:
    """ShareMember.java compiled against Kafka 4.4.0's client, once per source text."""
    if not (JAVA_LIB / "kafka-clients-4.4.0.jar").exists():
        pytest.skip(
            f"Kafka {KAFKA_VERSION}'s jars are not provisioned (scripts/ensure-kafka-tools)"
        )
    return compiled(JAVA_MEMBER, JAVA_LIB, CACHE.parent / "java-share-member")


class JavaMember:
    """A KafkaShareConsumer in its own JVM, in one of ShareMember.java's roles; what it
    printed is collected as it prints it."""

    def __init__(self, classes: Path, target: Target, group: str, topic: str, role: str) -> None:
        self.process = subprocess.Popen(
            ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.logFile=System.err",
             "-cp", f"{classes}:{JAVA_LIB}/*", "ShareMember",
             target.bootstrap, group, topic, role, str(int(DEADLINE_S) + 60)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self._seen: list[Seen] = []
        self._lock = threading.Lock()
        self._printed = threading.Event()
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("["):
                with self._lock:
                    self._seen.extend(tuple(record) for record in json.loads(line))
                self._printed.set()

    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def first_poll(self) -> list[Seen]:
        """What the member printed first (waiting up to DEADLINE_S for it)."""
        self._printed.wait(DEADLINE_S)
        return self.seen()

    def stop(self) -> None:
        """Ask the member to commit and close, and wait until it has."""
        assert self.process.stdin is not None
        self.process.stdin.write("stop\n")
        self.process.stdin.close()
        assert self.process.wait(60) == 0, "the Java member failed"
        self._reader.join(10)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)
        self._reader.join(10)


def read_with(members: list[JavaMember], done: Callable[[list[Seen]], bool]) -> list[Seen]:
    """Wait until what the members saw, together, is `done` (or DEADLINE_S has passed), then
    stop them: every member's records, once they have all committed and closed."""
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not done([seen for member in members for seen in member.seen()]):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        for member in members:
            member.stop()
    return [seen for member in members for seen in member.seen()]


def test_three_java_members_each_record_delivered_and_accepted_once(
    target: Target, java_member_classes: Path
) -> None:
    topic, group, records = unique("java-once"), unique("java-once-group"), 100_000
    prepare(target, topic, 3, records, group)
    members = [JavaMember(java_member_classes, target, group, topic, "accept") for _ in range(3)]
    seen = read_with(members, lambda seen: len({(p, o) for p, o, _, _ in seen}) >= records)
    delivered = Counter((partition, offset) for partition, offset, _, _ in seen)
    assert len(delivered) == records
    assert set(delivered.values()) == {1}, "a record was delivered twice"
    assert {count for _, _, count, _ in seen} == {1}
    if target.nullbroker is not None:
        share = target.nullbroker.accounts().share.by_group[group].totals
        assert share.acquired == records and share.accepted == records
        assert share.redelivered == share.released == share.lock_timeouts == 0


@pytest.mark.parametrize("fate", FATES)
def test_java_releases_and_a_java_member_gone_holding_records_still_accept_each_record_once(
    target: Target, java_member_classes: Path, fate: str
) -> None:
    topic, group, records = unique("java-redeliver"), unique("java-redeliver-group"), 100_000
    prepare(target, topic, 1, records, group, share_record_lock_duration_ms=str(LOCK_MS))
    # The member that goes holding records joins first, so that it gets some.
    holder = JavaMember(java_member_classes, target, group, topic, "hold")
    try:
        held = {offset for _, offset, _, _ in holder.first_poll()}
        end_holder(holder.process.pid, fate)
        assert held, "the holding member received nothing"
        # The releasing member next, reading before the accepting one joins: one member
        # reads 100,000 records within a second or two, and the releasing one must get some.
        releasing = JavaMember(java_member_classes, target, group, topic, "release-tenth")
        releasing.first_poll()
        accepting = JavaMember(java_member_classes, target, group, topic, "accept-explicit")

        def every_record_accepted(seen: list[Seen]) -> bool:
            return len({offset for _, offset, _, action in seen if action == "A"}) >= records

        seen = read_with([releasing, accepting], every_record_accepted)
    finally:
        holder.kill()
    accepted = Counter(offset for _, offset, _, action in seen if action == "A")
    assert len(accepted) == records and set(accepted.values()) == {1}
    released = sum(action == "R" for _, _, _, action in seen)
    assert released, "the releasing member released nothing"
    held_again: dict[int, int] = {}
    for _, offset, count, _ in seen:
        if offset in held:
            held_again.setdefault(offset, count)
    redelivered = sum(count > 1 for _, _, count, _ in seen)
    check_redelivery(target, group, records, fate, held, held_again, released, redelivered)
