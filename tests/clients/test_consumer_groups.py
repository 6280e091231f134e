"""Consumer groups of the new protocol (KIP-848, issue 14): the broker assigns and members
reconcile by heartbeat. confluent-kafka's consumers with `group.protocol=consumer` read
every offset of a topic once across members joining and leaving, and resume from their
commits; Kafka's Java consumers read as they read from Kafka 4.1.1 (none lost; some read
twice where Kafka refuses a commit too); `kafka-consumer-groups` lists and describes the
group beside a classic one."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Container, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.state.groups.consumer import (
    STATIC_LEAVE_EPOCH,
    ConsumerGroups,
    Heartbeat,
    HeartbeatError,
    java_hash_map_order,
)
from perf.java_perf import BIN
from perf.kafka_broker import KafkaBroker
from tests.support.kafka_tools import requires_kafka_tools, run_tool

PARTITIONS = 4
RECORDS = 1500  # a partition
GROWING = f"growing:partitions={PARTITIONS},records={RECORDS},rate=300,size=10"
JAVA_RATE = 150
"""Records/s a partition for the Java consumers: they start in 5-10 s, and the topic
still grows when they read it, so partitions move between members mid-way."""
# Partitions move between members at heartbeats: 1 s rather than Kafka's 5 s.
FAST_HEARTBEATS = ("--group-consumer-heartbeat-interval-ms", "1000")


def member(broker: RunningBroker, group: str, **settings: str) -> Consumer:
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", **settings,
    })  # fmt: skip
    consumer.subscribe(["growing"])
    return consumer


@pytest.mark.clients
def test_members_joining_and_leaving_read_every_offset_once(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--source", GROWING, *FAST_HEARTBEATS)
    seen: dict[tuple[int, int], int] = {}
    lock = threading.Lock()
    errors: list[object] = []

    def read(join_after: float, leave_after: float) -> None:
        time.sleep(join_after)
        consumer = member(broker, "joining")
        while time.monotonic() - started < leave_after:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error())
                continue
            with lock:
                key = (message.partition(), message.offset())
                seen[key] = seen.get(key, 0) + 1
        consumer.close()  # commits what it read, then leaves the group

    # The topic grows for 5 s: one member, then three, then the last alone.
    started = time.monotonic()
    threads = [threading.Thread(target=read, args=window) for window in ((0, 3), (1, 7), (2.5, 9))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert unread(seen) == []
    assert [key for key, times in seen.items() if times > 1] == []


def unread(reads: Container[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (partition, offset)s of the topic not in `reads`: lost by the group."""
    return [
        (partition, offset)
        for partition in range(PARTITIONS)
        for offset in range(RECORDS)
        if (partition, offset) not in reads
    ]


@pytest.mark.clients
def test_a_new_member_resumes_from_the_groups_commits(nullbroker_factory: StartBroker) -> None:
    broker = nullbroker_factory("--source", f"fixed:partitions={PARTITIONS},records=1000,size=10")
    first = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "resuming",
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })  # fmt: skip
    first.subscribe(["fixed"])
    read = 0
    deadline = time.monotonic() + 30
    while read < 2000 and time.monotonic() < deadline:
        message = first.poll(0.2)
        if message is not None and message.error() is None:
            read += 1
    first.commit(asynchronous=False)
    wanted = [TopicPartition("fixed", partition) for partition in range(PARTITIONS)]
    committed = {p.partition: p.offset for p in first.committed(wanted, 10)}
    first.close()
    assert read >= 2000 and any(offset > 0 for offset in committed.values()), committed

    second = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "resuming",
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
    })  # fmt: skip
    second.subscribe(["fixed"])
    # Each partition read on from where the group had committed (from the start where it
    # had not), none read again. A partition read to its end has nothing more to give.
    expected = {p: max(offset, 0) for p, offset in committed.items() if offset < 1000}
    firsts: dict[int, int] = {}
    deadline = time.monotonic() + 30
    while firsts.keys() != expected.keys() and time.monotonic() < deadline:
        message = second.poll(0.2)
        if message is not None and message.error() is None:
            firsts.setdefault(message.partition(), message.offset())
    second.close()
    assert firsts == expected


@pytest.mark.clients
@requires_kafka_tools
def test_kafka_tools_read_list_and_describe_consumer_groups(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--source", f"fixed:partitions={PARTITIONS},records=500,size=10")
    # Kafka's own consumer, with the new protocol, reads the whole topic.
    output = run_tool(
        "kafka-console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "fixed",
        "--group", "java-848", "--command-property", "group.protocol=consumer",
        "--from-beginning", "--max-messages", str(PARTITIONS * 500), "--timeout-ms", "120000",
    )  # fmt: skip
    assert len(output.splitlines()) == PARTITIONS * 500
    # A member of the new protocol, and a classic group beside it.
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "live-848",
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.subscribe(["fixed"])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "classic"})
    classic.assign([TopicPartition("fixed", 0, 0)])
    classic.commit(offsets=[TopicPartition("fixed", 0, 7)], asynchronous=False)
    try:
        listed = run_tool(
            "kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--list", "--type"
        )
        rows = {line.split()[0]: line.split()[1:] for line in listed.splitlines()[1:]}
        assert rows["live-848"][0].lower() == "consumer", listed
        assert rows["java-848"][0].lower() == "consumer", listed
        assert rows["classic"][0].lower() == "classic", listed
        described = run_tool(
            "kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe",
            "--group", "live-848", "--members",
        )  # fmt: skip
        [member_row] = [line for line in described.splitlines() if line.startswith("live-848")]
        assert member_row.split()[-1] == str(PARTITIONS), described  # it owns all four
        state = run_tool(
            "kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe",
            "--group", "live-848", "--state",
        )  # fmt: skip
        [state_row] = [line for line in state.splitlines() if line.startswith("live-848")]
        assert state_row.split()[-3:] == ["uniform", "Stable", "1"], state
        # The classic group beside it, described by the same tool: its commit.
        classic_rows = run_tool(
            "kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe",
            "--group", "classic",
        )  # fmt: skip
        [row] = [line.split() for line in classic_rows.splitlines() if line.startswith("classic")]
        assert row[1:4] == ["fixed", "0", "7"], classic_rows
    finally:
        consumer.close()
        classic.close()


@pytest.mark.clients
@requires_kafka_tools
def test_kafka_tools_delete_a_consumer_groups_offsets_and_then_the_group(
    nullbroker_factory: StartBroker,
) -> None:
    """`kafka-consumer-groups --delete` and `--delete-offsets` on a group of the new
    protocol print what they print against Kafka 4.1.1: refused while a member subscribes,
    done once the group is empty (they once said the group did not exist, and its offsets
    stayed). The tool exits 0 either way: its output tells."""
    broker = nullbroker_factory(
        "--source", f"fixed:partitions={PARTITIONS},records=100,size=10", *FAST_HEARTBEATS
    )  # fmt: skip

    def tool(*arguments: str) -> str:
        return run_tool("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, *arguments)

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "erasable",
        "group.protocol": "consumer", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe(["fixed"])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.commit(
        offsets=[TopicPartition("fixed", partition, 5) for partition in range(PARTITIONS)],
        asynchronous=False,
    )
    try:
        assert "GroupNotEmptyException" in tool("--delete", "--group", "erasable")
        refused = tool("--delete-offsets", "--group", "erasable", "--topic", "fixed")
        assert refused.count("GroupSubscribedToTopicException") == PARTITIONS, refused
    finally:
        consumer.close()
    deleted = tool("--delete-offsets", "--group", "erasable", "--topic", "fixed:0")
    assert "Request succeeded for deleting offsets from group erasable." in deleted, deleted
    described = tool("--describe", "--group", "erasable")
    rows = [line.split() for line in described.splitlines() if line.startswith("erasable")]
    assert sorted(row[2] for row in rows) == [str(p) for p in range(1, PARTITIONS)], described
    gone = tool("--delete", "--group", "erasable")
    assert "Deletion of requested consumer groups ('erasable') was successful." in gone, gone
    assert "erasable" not in tool("--list").split()
    assert "Group erasable not found." in tool("--describe", "--group", "erasable")


def beat(member_id: str, epoch: int, owned: dict[str, frozenset[int]] | None) -> Heartbeat:
    return Heartbeat(
        group_id="g", member_id=member_id, member_epoch=epoch, instance_id=None,
        rebalance_timeout_ms=30000, subscribed=("t",) if epoch == 0 else None, assignor=None,
        owned=owned, client_id="c", client_host="/h",
    )  # fmt: skip


def test_a_partition_is_revoked_before_another_member_gets_it() -> None:
    groups = ConsumerGroups(lambda topic: 4 if topic == "t" else None)
    a, assigned = groups.heartbeat(beat("a", 0, None))
    # A new group's first member is at epoch 2, as in Kafka 4.4.
    assert assigned == {"t": frozenset({0, 1, 2, 3})} and a.epoch == 2
    # b joins: the target splits the partitions, but b gets none until a gives them up.
    b, assigned = groups.heartbeat(beat("b", 0, None))
    assert assigned == {} and b.epoch == 3
    a, assigned = groups.heartbeat(beat("a", 2, {"t": frozenset({0, 1, 2, 3})}))
    kept = assigned["t"]
    assert len(kept) == 2 and a.epoch == 2  # told to revoke two; its epoch waits
    b, assigned = groups.heartbeat(beat("b", 3, {}))
    # Still being revoked by a: b's assignment has not changed, and Kafka sends it only to a
    # member joining, one whose partitions changed, or one that sent everything it has.
    assert assigned is None
    _, assigned = groups.heartbeat(replace(beat("b", 3, {}), subscribed=("t",)))
    assert assigned == {}
    assert groups.groups["g"].state == "Reconciling"
    a, _ = groups.heartbeat(beat("a", 2, {"t": kept}))  # a has given them up
    assert a.epoch == 3
    b, assigned = groups.heartbeat(beat("b", 3, {}))
    assert assigned == {"t": frozenset({0, 1, 2, 3}) - kept} and b.epoch == 3
    assert groups.groups["g"].state == "Stable"


def test_the_uniform_assignment_keeps_what_members_have_as_kafka_s_does() -> None:
    """Kafka's uniform assignor: a member keeps its partitions up to its share, the members
    first in Kafka's HashMap order of their ids taking one more (here "a", then "b")."""
    groups = ConsumerGroups(lambda topic: 3 if topic == "t" else None)
    groups.heartbeat(beat("b", 0, None))
    assert groups.groups["g"].target == {"b": {"t": frozenset({0, 1, 2})}}
    groups.heartbeat(beat("a", 0, None))
    assert groups.groups["g"].target == {"a": {"t": frozenset({1, 2})}, "b": {"t": frozenset({0})}}
    groups.heartbeat(beat("c", 0, None))  # one each: b keeps 0, a keeps 1, c takes 2
    assert groups.groups["g"].target == {
        "a": {"t": frozenset({1})},
        "b": {"t": frozenset({0})},
        "c": {"t": frozenset({2})},
    }


def test_member_ids_in_the_order_a_java_hash_map_gives_them() -> None:
    # Checked with Java 17: "Aa" and "BB" share a hash (and a bucket), kept as put.
    assert java_hash_map_order(["b", "a", "BB", "Aa"]) == ["BB", "Aa", "a", "b"]
    keys = [*(f"m{index}" for index in range(13)), "zz"]  # 14 keys: a table of 32
    expected = ["zz", *(f"m{index}" for index in range(10)), "m11", "m10", "m12"]
    assert java_hash_map_order(keys) == expected


def test_a_static_member_that_comes_back_takes_over_its_partitions_without_a_rebalance() -> None:
    groups = ConsumerGroups(lambda topic: 4)
    first, assigned = groups.heartbeat(replace(beat("a", 0, None), instance_id="i1"))
    epoch = groups.groups["g"].epoch
    # Leaving with -2: gone for a while, its partitions kept for its instance.
    groups.heartbeat(replace(beat("a", STATIC_LEAVE_EPOCH, None), instance_id="i1"))
    assert groups.groups["g"].members["a"].left_static
    back, again = groups.heartbeat(replace(beat("a2", 0, None), instance_id="i1"))
    assert again == assigned and back.epoch == first.epoch
    assert groups.groups["g"].epoch == epoch and list(groups.groups["g"].members) == ["a2"]
    # While an instance is a member, another member of that instance id is refused.
    with pytest.raises(HeartbeatError) as refused:
        groups.heartbeat(replace(beat("a3", 0, None), instance_id="i1"))
    assert refused.value.code is ErrorCode.unreleased_instance_id


def test_a_regex_subscription_takes_in_topics_created_later() -> None:
    topics = {"orders-1": 2, "orders-2": 1, "other": 3}
    groups = ConsumerGroups(topics.get, lambda: list(topics))
    subscribing = replace(beat("a", 0, None), subscribed=None, regex="orders-.*")
    _, assigned = groups.heartbeat(subscribing)
    assert assigned == {"orders-1": frozenset({0, 1}), "orders-2": frozenset({0})}
    topics["orders-3"] = 2
    member = groups.groups["g"].members["a"]
    _, assigned = groups.heartbeat(beat("a", member.epoch, assigned))
    assert assigned is not None and assigned["orders-3"] == frozenset({0, 1})
    with pytest.raises(HeartbeatError) as refused:
        groups.heartbeat(replace(beat("b", 0, None), subscribed=None, regex="("))
    assert refused.value.code is ErrorCode.invalid_regular_expression


@pytest.mark.clients
def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--source", f"fixed:partitions={PARTITIONS},records=100,size=10")
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "moving"})
    committed = [TopicPartition("fixed", partition, 10 * (partition + 1)) for partition in range(4)]
    classic.commit(offsets=committed, asynchronous=False)
    classic.close()
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "moving",
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.subscribe(["fixed"])
    firsts: dict[int, int] = {}
    deadline = time.monotonic() + 30
    while len(firsts) < PARTITIONS and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            firsts.setdefault(message.partition(), message.offset())
    positions = sorted((p.partition, p.offset) for p in consumer.position(consumer.assignment()))
    consumer.close()  # commits its positions
    assert firsts == {0: 10, 1: 20, 2: 30, 3: 40}
    # Empty again, it becomes a classic group for a classic member, offsets and all.
    back = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "moving",
        "enable.auto.commit": False,
    })  # fmt: skip
    back.subscribe(["fixed"])
    deadline = time.monotonic() + 30
    while len(back.assignment()) < PARTITIONS and time.monotonic() < deadline:
        back.poll(0.2)
    wanted = [TopicPartition("fixed", partition) for partition in range(PARTITIONS)]
    assert [(p.partition, p.offset) for p in back.committed(wanted, 10)] == positions
    back.close()


@dataclass(frozen=True)
class GrowingTopic:
    """A topic of PARTITIONS partitions that grows to RECORDS records a partition at
    JAVA_RATE records/s a partition, on one of the two brokers."""

    bootstrap: str
    name: str
    group: str


@pytest.fixture(params=["nullbroker", "kafka"])
def growing_topic(request: pytest.FixtureRequest) -> Iterator[GrowingTopic]:
    """nullbroker's growing source (1 s heartbeats), or a topic of Kafka 4.1.1 (the session's,
    5 s heartbeats: it allows no less) that a producer fills at the same pace."""
    group = f"java-joining-{uuid.uuid4().hex[:8]}"
    if request.param == "nullbroker":
        nullbroker_factory: StartBroker = request.getfixturevalue("nullbroker_factory")
        yield GrowingTopic(
            nullbroker_factory(
                "--source", GROWING.replace("rate=300", f"rate={JAVA_RATE}"), *FAST_HEARTBEATS
            ).bootstrap,
            "growing",
            group,
        )
        return
    kafka: KafkaBroker = request.getfixturevalue("kafka")
    topic = f"growing-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = threading.Thread(target=grow, args=(kafka.bootstrap, topic))
    producer.start()
    yield GrowingTopic(kafka.bootstrap, topic, group)
    producer.join()


def grow(bootstrap: str, topic: str) -> None:
    """RECORDS records a partition, JAVA_RATE a second (a tenth every 0.1 s)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for _ in range(RECORDS * 10 // JAVA_RATE):
        for partition in range(PARTITIONS):
            for _ in range(JAVA_RATE // 10):
                producer.produce(topic, b"0123456789", partition=partition)
        producer.poll(0)
        time.sleep(0.1)
    assert producer.flush(30) == 0


@dataclass(frozen=True)
class Commit:
    """An offsets_committed event of the verifiable consumer, one partition of it."""

    timestamp: int
    partition: int
    offset: int
    error: str | None


def commits(events: list[dict[str, Any]]) -> list[Commit]:
    """Every partition's commits, as the consumers printed them, in time order."""
    return sorted(
        (
            Commit(event["timestamp"], offset["partition"], offset["offset"], event.get("error"))
            for event in events
            if event["name"] == "offsets_committed"
            for offset in event["offsets"]
        ),
        key=lambda commit: commit.timestamp,
    )


def assert_read_as_kafka_reads(
    ranges: list[tuple[int, int, int, int]], events: list[dict[str, Any]]
) -> None:
    """What Kafka 4.1.1 does with this group: no offset is lost, commits never go back, and
    an offset is read twice only after a commit of it was refused with STALE_MEMBER_EPOCH
    (the heartbeat moving its member on crossed it; the Java consumer does not retry it):
    the next owner then starts from the group's commit when it was refused."""
    assert all(last - first + 1 == count for _, first, last, count in ranges), ranges
    reads = Counter(
        (partition, offset)
        for partition, first, last, _ in ranges
        for offset in range(first, last + 1)
    )
    assert unread(reads) == []
    every = commits(events)
    refused = [commit for commit in every if commit.error is not None]
    assert all("stale member epoch" in (commit.error or "") for commit in refused), refused
    taken = [commit for commit in every if commit.error is None]
    for partition in range(PARTITIONS):
        offsets = [commit.offset for commit in taken if commit.partition == partition]
        assert offsets == sorted(offsets), (partition, offsets)
    read_again = [
        (partition, offset)
        for (partition, offset), times in reads.items()
        if times > 1
        and not any(
            commit.partition == partition
            and last_taken_before(taken, commit) <= offset < commit.offset
            for commit in refused
        )
    ]
    assert read_again == [], refused


def last_taken_before(taken: list[Commit], refused: Commit) -> int:
    """The group's commit of `refused`'s partition when it was refused: where the next
    owner starts from (commits taken later, the next owner's, do not count)."""
    return max(
        (
            commit.offset
            for commit in taken
            if commit.partition == refused.partition and commit.timestamp <= refused.timestamp
        ),
        default=0,
    )


@pytest.mark.clients
@requires_kafka_tools
def test_java_members_joining_and_leaving_read_as_they_read_from_kafka(
    growing_topic: GrowingTopic,
) -> None:
    """Kafka's verifiable consumer (which commits what it read after every poll), three
    of them with `--group-protocol consumer`: one that leaves after 1,500 records, two
    that join later and are stopped once the group has read the whole growing topic. The
    same on nullbroker and on Kafka."""
    ranges: list[tuple[int, int, int, int]] = []  # partition, first, last, count
    events: list[dict[str, Any]] = []  # the others: commits, assignments
    lock = threading.Lock()

    def verifier(*options: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [str(BIN / "kafka-verifiable-consumer"), "--bootstrap-server", growing_topic.bootstrap,
             "--topic", growing_topic.name, "--group-id", growing_topic.group,
             "--group-protocol", "consumer", *options],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

        def collect() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                if not line.startswith("{"):
                    continue
                event = json.loads(line)
                with lock:
                    if event["name"] != "records_consumed":
                        events.append(event)
                    else:
                        ranges.extend(
                            (part["partition"], part["minOffset"], part["maxOffset"], part["count"])
                            for part in event["partitions"]
                        )

        threading.Thread(target=collect, daemon=True).start()
        return process

    def distinct_offsets_read() -> int:
        with lock:
            return len({
                (partition, offset)
                for partition, first, last, _ in ranges
                for offset in range(first, last + 1)
            })  # fmt: skip

    leaving = verifier("--max-messages", "1500")
    time.sleep(1)
    joining = [verifier()]
    time.sleep(1.5)
    joining.append(verifier())
    deadline = time.monotonic() + 60
    while distinct_offsets_read() < PARTITIONS * RECORDS and time.monotonic() < deadline:
        time.sleep(0.2)
    for process in [leaving, *joining]:
        process.terminate()  # the verifiable consumer closes, and leaves the group
        process.wait(30)
    with lock:
        assert_read_as_kafka_reads(ranges, events)
