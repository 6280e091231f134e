"""Consumer groups of the new protocol (KIP-848, issue 14): the broker assigns and members
reconcile by heartbeat. confluent-kafka's and Kafka's Java consumers with
`group.protocol=consumer` read every offset of a topic once across members joining and
leaving, and resume from their commits; `kafka-consumer-groups` lists and describes the
group beside a classic one."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from nullbroker.consumer_groups import ConsumerGroups, Heartbeat
from tests.broker_process import BrokerProcess
from tests.conftest import StartBroker
from tests.kafka_tools import requires_kafka_tools, run_tool

PARTITIONS = 4
RECORDS = 1500  # a partition
GROWING = f"growing:partitions={PARTITIONS},records={RECORDS},rate=300,size=10"


def member(broker: BrokerProcess, group: str, **settings: str) -> Consumer:
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", **settings,
    })  # fmt: skip
    consumer.subscribe(["growing"])
    return consumer


@pytest.mark.clients
def test_members_joining_and_leaving_read_every_offset_once(start_broker: StartBroker) -> None:
    broker = start_broker("--source", GROWING)
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
    missing = [
        (partition, offset)
        for partition in range(PARTITIONS)
        for offset in range(RECORDS)
        if (partition, offset) not in seen
    ]
    assert missing == []
    assert [key for key, times in seen.items() if times > 1] == []


@pytest.mark.clients
def test_a_new_member_resumes_from_the_groups_commits(start_broker: StartBroker) -> None:
    broker = start_broker("--source", f"fixed:partitions={PARTITIONS},records=1000,size=10")
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
def test_kafka_tools_read_list_and_describe_consumer_groups(start_broker: StartBroker) -> None:
    broker = start_broker("--source", f"fixed:partitions={PARTITIONS},records=500,size=10")
    # Kafka's own consumer, with the new protocol, reads the whole topic.
    output = run_tool(
        "kafka-console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "fixed",
        "--group", "java-848", "--consumer-property", "group.protocol=consumer",
        "--from-beginning", "--max-messages", str(PARTITIONS * 500), "--timeout-ms", "30000",
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
    finally:
        consumer.close()
        classic.close()


def beat(member_id: str, epoch: int, owned: dict[str, frozenset[int]] | None) -> Heartbeat:
    return Heartbeat(
        group_id="g", member_id=member_id, member_epoch=epoch, instance_id=None,
        rebalance_timeout_ms=30000, subscribed=("t",) if epoch == 0 else None, assignor=None,
        owned=owned, client_id="c", client_host="/h",
    )  # fmt: skip


def test_a_partition_is_revoked_before_another_member_gets_it() -> None:
    groups = ConsumerGroups(lambda topic: 4 if topic == "t" else None)
    a, assigned = groups.heartbeat(beat("a", 0, None))
    assert assigned == {"t": frozenset({0, 1, 2, 3})} and a.epoch == 1
    # b joins: the target splits the partitions, but b gets none until a gives them up.
    b, assigned = groups.heartbeat(beat("b", 0, None))
    assert assigned == {} and b.epoch == 2
    a, assigned = groups.heartbeat(beat("a", 1, {"t": frozenset({0, 1, 2, 3})}))
    kept = assigned["t"]
    assert len(kept) == 2 and a.epoch == 1  # told to revoke two; its epoch waits
    b, assigned = groups.heartbeat(beat("b", 2, {}))
    assert assigned == {}  # still being revoked by a
    assert groups.groups["g"].state == "Reconciling"
    a, _ = groups.heartbeat(beat("a", 1, {"t": kept}))  # a has given them up
    assert a.epoch == 2
    b, assigned = groups.heartbeat(beat("b", 2, {}))
    assert assigned == {"t": frozenset({0, 1, 2, 3}) - kept} and b.epoch == 2
    assert groups.groups["g"].state == "Stable"
