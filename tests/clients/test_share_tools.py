"""Kafka 4.4.0's share-group tools against nullbroker and against Kafka 4.4.0 alike:
kafka-console-share-consumer reads records, kafka-share-groups lists, describes, resets and
deletes a share group, and the share-consumer perf test (ShareConsumerPerformance) reads a
topic whole and prints its summary."""

from __future__ import annotations

import re
import time

from tests.clients.test_share_consumers import Target, prepare, target, unique
from tests.support.kafka_tools import requires_kafka_tools, run_tool

pytestmark = requires_kafka_tools
__all__ = ["target"]

RECORDS = 3_000


def start_offsets(described: str, topic: str) -> dict[int, int]:
    """Partition -> START-OFFSET of `topic` from kafka-share-groups --describe."""
    offsets = {}
    for line in described.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == topic and fields[2].isdigit():
            offsets[int(fields[2])] = int(fields[3]) if fields[3] != "-" else -1
    return offsets


def described_until(
    server: tuple[str, ...],
    group: str,
    topic: str,
    expected: dict[int, int],
    patience_s: float = 60,
) -> dict[int, int]:
    """kafka-share-groups --describe's start offsets, asked again until they are `expected`
    (Kafka's share coordinator records them a while after the acknowledgements) or
    `patience_s` passes."""
    deadline = time.monotonic() + patience_s
    while True:
        described = run_tool("kafka-share-groups", *server, "--describe", "--group", group)
        offsets = start_offsets(described, topic)
        if offsets == expected or time.monotonic() > deadline:
            return offsets
        time.sleep(1)


def test_the_console_share_consumer_and_kafka_groups(target: Target) -> None:
    topic, group = unique("tools"), unique("tools-group")
    prepare(target, topic, 2, RECORDS, group)
    server = ("--bootstrap-server", target.bootstrap)
    read = run_tool(
        "kafka-console-share-consumer", *server, "--topic", topic, "--group", group,
        "--max-messages", str(RECORDS), "--timeout-ms", "60000",
    )  # fmt: skip
    assert sorted(int(value) for value in read.split()) == list(range(RECORDS))
    assert group in run_tool("kafka-share-groups", *server, "--list").split()
    half = {0: RECORDS // 2, 1: RECORDS // 2}
    described = described_until(server, group, topic, half, patience_s=10)
    if target.nullbroker is not None:
        assert described == half  # every record read was accepted
    else:
        # Kafka 4.4.0 was seen still describing start offset 0 a minute after the console
        # consumer exited (the acknowledgements of its last poll are written to
        # __share_group_state later, or not at all): only the partitions are checked.
        assert described.keys() == half.keys()
    run_tool(
        "kafka-share-groups", *server, "--reset-offsets", "--to-earliest", "--execute",
        "--group", group, "--topic", topic,
    )  # fmt: skip
    assert described_until(server, group, topic, {0: 0, 1: 0}) == {0: 0, 1: 0}
    again = run_tool(
        "kafka-console-share-consumer", *server, "--topic", topic, "--group", group,
        "--max-messages", "10", "--timeout-ms", "60000",
    )  # fmt: skip
    assert len(again.split()) == 10  # read again from the start
    run_tool("kafka-share-groups", *server, "--delete", "--group", group)
    assert group not in run_tool("kafka-share-groups", *server, "--list").split()


SUMMARY = re.compile(r"^\S+ \S+, \S+ \S+, [\d.]+, [\d.]+, [\d.]+, (?P<records>\d+), \d+$", re.M)


def test_the_share_consumer_perf_test_reads_a_topic_whole(target: Target) -> None:
    topic, group = unique("perf"), unique("perf-group")
    prepare(target, topic, 3, RECORDS, group)
    printed = run_tool(
        "kafka-share-consumer-perf-test", "--bootstrap-server", target.bootstrap,
        "--topic", topic, "--group", group, "--num-records", str(RECORDS), "--threads", "3",
        "--hide-header",
    )  # fmt: skip
    found = SUMMARY.search(printed)
    assert found is not None, printed
    assert int(found["records"]) >= RECORDS
