"""Group consumers reading source topics against `nullbroker serve`: every record once across
a group's members and its rebalances, and committed offsets picked up by the next consumer.

The members of the confluent-kafka group commit synchronously what they processed before
they poll again. librdkafka revokes partitions only inside a poll (confluent-kafka serves
rebalances through its rebalance callback there) and drops the fetched messages of the
partitions it revokes, so the next owner starts exactly after the last record processed and
committed: every (partition, offset) read exactly once across the members is deterministic,
not a race, once the group starts from committed offsets (see commit_the_start).
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas with importlib.resources calls that Python
    # deprecates: the library's business, not this test's.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sources.synthetic import RecordShape, key_pattern, value_pattern
from tests.clients.test_clients_consume import fetched_from_summary

pytestmark = pytest.mark.clients

TIMEOUT = 30.0
# Kafka's smallest session timeout and frequent heartbeats: members learn of a rebalance
# within a fraction of a second.
SESSION_MS = 6000
HEARTBEAT_MS = 100
NO_DELAY = ("--group-initial-rebalance-delay-ms", "0")
TOPIC = "src"
# Small consume batches keep the first member from draining its partitions while the
# second one is still joining: the leaver must leave part-way through.
BATCH = 200

Read = tuple[int, int]
"""(partition, offset) of one record a consumer processed."""


@dataclass(frozen=True)
class Source:
    """A bounded source topic as declared with --source, and what its records hold."""

    partitions: int
    records: int
    size: int
    key_size: int = 0
    headers: int = 0

    @property
    def flag(self) -> tuple[str, str]:
        return (
            "--source",
            f"{TOPIC}:partitions={self.partitions},records={self.records},size={self.size},"
            f"key-size={self.key_size},headers={self.headers}",
        )

    @cached_property
    def every_record(self) -> set[Read]:
        return {(p, o) for p in range(self.partitions) for o in range(self.records)}

    @cached_property
    def batch_records(self) -> int:
        return RecordShape(self.size, self.key_size, self.headers).batch_records

    def check(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """The key and value are the ones the record's offset defines (source.py)."""
        index = offset % self.batch_records
        assert value == value_pattern(index, self.size), offset
        assert key == key_pattern(index, self.key_size), offset

    def check_headers(self, offset: int, headers: list[tuple[str, bytes]] | None) -> None:
        index = offset % self.batch_records
        assert (headers or []) == [(f"h{h}", str(index).encode()) for h in range(self.headers)]


def assert_each_once(reads: Iterable[Read], expected: set[Read]) -> None:
    counts = Counter(reads)
    repeated = sorted(read for read, n in counts.items() if n > 1)
    assert not repeated, f"{len(repeated)} records read more than once, first {repeated[:5]}"
    missing = sorted(expected - set(counts))
    assert not missing, f"{len(missing)} records never read, first {missing[:5]}"
    assert set(counts) == expected


def next_offsets(reads: Iterable[Read], partitions: int) -> dict[int, int]:
    """Per partition, the offset after the last one read (0 where none was)."""
    after = dict.fromkeys(range(partitions), 0)
    for partition, offset in reads:
        after[partition] = max(after[partition], offset + 1)
    return after


def deadline_check(what: str) -> Callable[[], None]:
    """A callable that fails the test once TIMEOUT has passed: bounds every loop."""
    deadline = time.monotonic() + TIMEOUT

    def check() -> None:
        assert time.monotonic() < deadline, f"{what}: not within {TIMEOUT} s"

    return check


# confluent-kafka: a group of two, one leaving part-way


@dataclass
class Member:
    """A confluent-kafka group member that processes a batch, then commits it before it
    polls again."""

    consumer: Consumer
    source: Source
    read: list[Read] = field(default_factory=list)
    read_since_assigned: int = 0

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.read_since_assigned = 0

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def step(self) -> None:
        next_offsets: dict[int, int] = {}
        for message in self.consumer.consume(num_messages=BATCH, timeout=0.05):
            assert message.error() is None, message.error()
            self._process(message)
            next_offsets[message.partition()] = message.offset() + 1
        if next_offsets:
            committed = self.consumer.commit(
                offsets=[TopicPartition(TOPIC, p, o) for p, o in next_offsets.items()],
                asynchronous=False,
            )
            assert committed is not None
            assert [tp.error for tp in committed] == [None] * len(committed)

    def _process(self, message: Message) -> None:
        offset = message.offset()
        self.source.check(offset, message.key(), message.value())
        self.source.check_headers(offset, message.headers())
        self.read.append((message.partition(), offset))
        self.read_since_assigned += 1


def commit_the_start(broker: RunningBroker, group: str, source: Source) -> None:
    """Commit offset 0 for every partition from outside group management (generation -1,
    as Spark's executors commit), so members start from committed offsets.

    Without a committed offset librdkafka looks the start up with ListOffsets, and a
    member revoked while that lookup is in flight (the first member, when the second joins
    a moment later) retries it 500 ms later for partitions it no longer owns, fetches them
    and hands those stale records out once a later rebalance gives the partitions back:
    librdkafka's rd_kafka_toppar_handle_Offset, "outdated offset response". Records then
    repeat whatever the broker does; with committed offsets the lookup never happens.
    """
    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = committer.commit(
            offsets=[TopicPartition(TOPIC, p, 0) for p in range(source.partitions)],
            asynchronous=False,
        )
    finally:
        committer.close()
    assert committed is not None
    assert [tp.error for tp in committed] == [None] * source.partitions


def group_member(broker: RunningBroker, source: Source, name: str) -> Member:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "pair",
            "client.id": name,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    member = Member(consumer, source)
    consumer.subscribe([TOPIC], on_assign=member.on_assign)
    return member


def test_a_group_of_two_reads_every_record_once_and_the_survivor_finishes_after_one_leaves(
    nullbroker_factory: StartBroker,
) -> None:
    source = Source(partitions=4, records=5000, size=100, key_size=5, headers=1)
    broker = nullbroker_factory(*NO_DELAY, *source.flag)
    commit_the_start(broker, "pair", source)
    leaver = group_member(broker, source, "leaver")
    survivor = group_member(broker, source, "survivor")
    try:
        # Both members read (and commit) until they share the partitions and each has
        # processed records of its own share, the leaver about half of one partition's.
        check = deadline_check("two members sharing the topic")
        while not (
            leaver.owned()
            and survivor.owned()
            and leaver.owned() | survivor.owned() == set(range(source.partitions))
            and not leaver.owned() & survivor.owned()
            and leaver.read_since_assigned >= source.records // 2
            and survivor.read_since_assigned > 0
        ):
            check()
            leaver.step()
            survivor.step()
        left_behind = leaver.owned()
        read_before_leave = len(survivor.read)
        resume_at = next_offsets(leaver.read + survivor.read, source.partitions)
        # Everything the leaver processed is committed; close() revokes and sends LeaveGroup.
        leaver.consumer.close()
        check = deadline_check("the survivor reading the rest")
        while len(set(leaver.read) | set(survivor.read)) < len(source.every_record):
            check()
            survivor.step()
        assert survivor.owned() == set(range(source.partitions))
        asked = [TopicPartition(TOPIC, p) for p in range(source.partitions)]
        committed = survivor.consumer.committed(asked, timeout=TIMEOUT)
    finally:
        # close() again after the leaver's close() does nothing: this is cleanup on failure.
        leaver.consumer.close()
        survivor.consumer.close()

    assert_each_once(leaver.read + survivor.read, source.every_record)
    assert 0 < len(leaver.read) < len(source.every_record)
    assert {tp.partition: tp.offset for tp in committed} == dict.fromkeys(
        range(source.partitions), source.records
    )
    # The survivor took over the leaver's partitions exactly where the leaver's commits said.
    after_leave = survivor.read[read_before_leave:]
    for partition in left_behind:
        taken_over = [o for p, o in after_leave if p == partition]
        assert taken_over, f"the survivor read nothing of partition {partition}"
        assert taken_over == list(range(resume_at[partition], source.records)), partition

    summary = broker.stop()
    # Every start came from a committed offset: no lookup whose retry could misfire.
    assert "ListOffsets" not in summary["requests"]
    # At least the generation of both members, then the survivor's alone.
    assert summary["groups"]["rebalances"] >= 2
    assert summary["groups"]["by_state"]["Empty"] == 1
    assert summary["requests"]["LeaveGroup"] >= 2
    # Prefetched batches dropped at a rebalance are fetched again: at least every record.
    fetched = fetched_from_summary(summary)
    assert set(fetched) == {(TOPIC, p) for p in range(source.partitions)}
    assert all(records >= source.records for records in fetched.values())


# aiokafka reads and commits; a fresh consumer of the group resumes


def confluent_in_group(broker: RunningBroker, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )


def read_group_to_end(broker: RunningBroker, group: str, source: Source) -> list[Message]:
    """What a fresh confluent-kafka member of `group` reads from the committed offsets
    until it has seen the end of every partition."""
    fresh = confluent_in_group(broker, group)
    fresh.subscribe([TOPIC])
    messages: list[Message] = []
    at_end: set[int] = set()
    check = deadline_check("a fresh member reaching every partition's end")
    try:
        while at_end != set(range(source.partitions)):
            check()
            for message in fresh.consume(num_messages=1000, timeout=0.1):
                error = message.error()
                if error is None:
                    messages.append(message)
                    at_end.discard(message.partition())
                else:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition())
    finally:
        fresh.close()
    return messages


async def aiokafka_reads_and_commits(
    bootstrap: str, group: str, source: Source, stop_after: int
) -> tuple[list[Read], dict[int, int | None], dict[int, int]]:
    """An aiokafka group member reads records (each checked) until it has read
    `stop_after`, then commits its position: (what it read, the offsets committed as
    aiokafka reads them back, its positions)."""
    consumer = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await asyncio.wait_for(consumer.start(), TIMEOUT)
    read: list[Read] = []
    try:
        check = deadline_check("aiokafka reading")
        while len(read) < stop_after:
            check()
            batches = await consumer.getmany(timeout_ms=200, max_records=300)
            for records in batches.values():
                for record in records:
                    source.check(record.offset, record.key, record.value)
                    read.append((record.partition, record.offset))
        # commit() commits the positions: the next offset after each record returned.
        await asyncio.wait_for(consumer.commit(), TIMEOUT)
        partitions = [AioTopicPartition(TOPIC, p) for p in range(source.partitions)]
        committed = {
            tp.partition: await asyncio.wait_for(consumer.committed(tp), TIMEOUT)
            for tp in partitions
        }
        positions = {
            tp.partition: await asyncio.wait_for(consumer.position(tp), TIMEOUT)
            for tp in partitions
        }
    finally:
        await asyncio.wait_for(consumer.stop(), TIMEOUT)
    return read, committed, positions


def test_a_fresh_consumer_reads_nothing_after_aiokafka_read_and_committed_a_whole_topic(
    nullbroker_factory: StartBroker,
) -> None:
    source = Source(partitions=3, records=2000, size=64, key_size=4)
    broker = nullbroker_factory(*NO_DELAY, *source.flag)
    # aiokafka runs on asyncio: a plain test running a loop (trio_mode takes `async def`).
    read, committed, _ = asyncio.run(
        aiokafka_reads_and_commits(broker.bootstrap, "ai", source, len(source.every_record))
    )
    assert_each_once(read, source.every_record)
    assert committed == dict.fromkeys(range(source.partitions), source.records)

    assert read_group_to_end(broker, "ai", source) == []
    summary = broker.stop()
    assert summary["requests"]["OffsetCommit"] == 1
    # aiokafka's generation, then the fresh member's.
    assert summary["groups"]["rebalances"] >= 2
    assert summary["groups"]["by_state"]["Empty"] == 1
    assert summary["fetched"]["records"] >= len(source.every_record)


def test_a_fresh_consumer_reads_exactly_what_aiokafka_left_uncommitted(
    nullbroker_factory: StartBroker,
) -> None:
    source = Source(partitions=3, records=2000, size=64, key_size=4)
    broker = nullbroker_factory(*NO_DELAY, *source.flag)
    # Not a multiple of a partition's records: aiokafka stops inside a partition.
    stop_after = source.records + source.records // 4
    read, committed, positions = asyncio.run(
        aiokafka_reads_and_commits(broker.bootstrap, "ai", source, stop_after)
    )
    # aiokafka committed exactly what it returned; the rest is the fresh member's.
    resume_at = next_offsets(read, source.partitions)
    assert any(0 < offset < source.records for offset in resume_at.values())
    assert positions == resume_at
    read_from = {partition for partition, _ in read}
    assert {p: committed[p] for p in read_from} == {p: resume_at[p] for p in read_from}
    # Partitions it returned nothing of: committed at their start, or not at all.
    assert {committed[p] for p in set(resume_at) - read_from} <= {0, None}

    rest = read_group_to_end(broker, "ai", source)
    for message in rest:
        source.check(message.offset(), message.key(), message.value())
    resumed = [(m.partition(), m.offset()) for m in rest]
    assert_each_once(read + resumed, source.every_record)
    for partition in range(source.partitions):
        offsets = [o for p, o in resumed if p == partition]
        assert offsets == list(range(resume_at[partition], source.records)), partition
    broker.stop()


# kafka-python


def test_kafka_python_reads_a_topic_in_a_group_and_commits(nullbroker_factory: StartBroker) -> None:
    source = Source(partitions=2, records=2000, size=50)
    broker = nullbroker_factory(*NO_DELAY, *source.flag)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="kafka-python",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    read: list[Read] = []
    try:
        # kafka-python 3.0 drops a join that outlasts the poll() it started in: the member
        # never takes its assignment nor heartbeats again. Knowing the topic before it
        # subscribes spares it the second join that an assignment made without metadata
        # forces, and a long poll timeout (poll returns once records arrive) lets a join
        # finish inside one poll().
        assert consumer.partitions_for_topic(TOPIC) == set(range(source.partitions))
        consumer.subscribe([TOPIC])
        check = deadline_check("kafka-python reading the topic")
        while len(read) < len(source.every_record):
            check()
            for records in consumer.poll(timeout_ms=10_000, max_records=1000).values():
                for record in records:
                    source.check(record.offset, record.key, record.value)
                    read.append((record.partition, record.offset))
        consumer.commit()
        committed: dict[int, Any] = {
            p: consumer.committed(KafkaPythonPartition(TOPIC, p)) for p in range(source.partitions)
        }
    finally:
        consumer.close()
    assert_each_once(read, source.every_record)
    assert committed == dict.fromkeys(range(source.partitions), source.records)
    summary = broker.stop()
    assert summary["requests"]["OffsetCommit"] == 1
    assert summary["groups"]["by_state"]["Empty"] == 1
