"""Transactions (issue 14): confluent-kafka's transactional producer commits and aborts;
read_committed consumers read exactly the committed records, read_uncommitted ones all of
them; a fenced producer gets librdkafka's fatal _FENCED; consume-transform-produce commits
exactly its input with send_offsets_to_transaction; a transaction past its timeout is
aborted by the broker. Kafka's own perf test with --transactional-id is in
test_java_tools.py.

The records a consumer reads are the broker's synthetic ones for the produced offsets (it
keeps nothing): the tests count them, by partition, and read their offsets."""

from __future__ import annotations

import re
import struct
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from codec import crc_matches
from codec.control_batch import as_transactional, control_batch
from codec.crc import crc32c
from codec.record_batch import read_batch_header
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.state.transactions import Marker, PartitionTransactions, Segment
from tests.support.broker_counts import samples
from tests.support.kafka_tools import requires_kafka_tools, run_tool

CLUSTER_SHAPES = {
    "one-process": (),
    "brokers-3-processes-2": ("--brokers", "3", "--processes", "2"),
}
"""A lone broker, and a cluster whose transaction coordinators, group coordinators and
partition leaders are spread over two processes (markers and KIP-890's checks go between
them: nullbroker.workers.inter_broker)."""
shapes = pytest.mark.parametrize("shape", CLUSTER_SHAPES.values(), ids=CLUSTER_SHAPES.keys())


def transactional(broker: RunningBroker, transactional_id: str, **settings: Any) -> Producer:
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id,
        "linger.ms": 5, **settings,
    })  # fmt: skip
    producer.init_transactions(30)
    return producer


def produce_in_transaction(producer: Producer, topic: str, records: int, commit: bool) -> None:
    producer.begin_transaction()
    for index in range(records):
        producer.produce(topic, value=b"v" * 50, partition=index % 2)
    # Sent before the end: librdkafka purges what it has not sent when it aborts.
    assert producer.flush(30) == 0
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def read_records(
    broker: RunningBroker, topic: str, isolation: str, partitions: int = 2
) -> list[tuple[int, bytes]]:
    """Every record's (offset, value) a consumer with `isolation` reads from the topic's
    start, until nothing more comes."""
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"reader-{isolation}",
        "isolation.level": isolation, "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, index, 0) for index in range(partitions)])
    records: list[tuple[int, bytes]] = []
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 30
    while time.monotonic() - quiet_since < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        records.append((message.offset(), message.value()))
        quiet_since = time.monotonic()
    consumer.close()
    return records


def read_all(broker: RunningBroker, topic: str, isolation: str) -> list[int]:
    """The offsets of every record read (see read_records)."""
    return [offset for offset, _ in read_records(broker, topic, isolation)]


@pytest.mark.clients
@shapes
def test_read_committed_reads_exactly_the_committed_records_and_read_uncommitted_all(
    nullbroker_factory: StartBroker,
    shape: tuple[str, ...],
) -> None:
    broker = nullbroker_factory("--partitions", "2", *shape)
    producer = transactional(broker, "orders")
    produce_in_transaction(producer, "orders", 100, commit=True)
    produce_in_transaction(producer, "orders", 50, commit=False)
    produce_in_transaction(producer, "orders", 30, commit=True)
    committed = read_all(broker, "orders", "read_committed")
    everything = read_all(broker, "orders", "read_uncommitted")
    assert len(committed) == 130
    assert len(everything) == 180
    # Per partition: 50 committed at 0-49, a marker at 50, 25 aborted at 51-75, a marker
    # at 76, 15 committed at 77-91, a marker at 92: each marker took one offset.
    assert sorted(set(committed)) == [*range(50), *range(77, 92)]
    assert sorted(set(everything)) == [*range(50), *range(51, 76), *range(77, 92)]
    families = list(broker.scrape())
    ended = samples(families, "nullbroker_transactions_total")
    assert ended[(("outcome", "committed"),)] == 2
    assert ended[(("outcome", "aborted"),)] == 1
    records = samples(families, "nullbroker_transactional_records_total")
    assert records[(("outcome", "committed"),)] == 130
    assert records[(("outcome", "aborted"),)] == 50


@pytest.mark.clients
@shapes
def test_with_retain_read_committed_reads_exactly_the_committed_values(
    nullbroker_factory: StartBroker,
    shape: tuple[str, ...],
) -> None:
    broker = nullbroker_factory("--partitions", "2", "--retain", "1000000", *shape)
    producer = transactional(broker, "kept")
    for round_, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        for index in range(20):
            producer.produce("kept", value=f"{round_}-{index}".encode(), partition=index % 2)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    # One more, left open: read_committed stops before it.
    producer.begin_transaction()
    producer.produce("kept", value=b"open", partition=0)
    assert producer.flush(30) == 0
    committed = [value for _, value in read_records(broker, "kept", "read_committed")]
    everything = [value for _, value in read_records(broker, "kept", "read_uncommitted")]
    written = [[f"{round_}-{index}".encode() for index in range(20)] for round_ in range(3)]
    assert sorted(committed) == sorted(written[0] + written[2])
    assert sorted(everything) == sorted([*written[0], *written[1], *written[2], b"open"])


@pytest.mark.clients
@shapes
def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(
    nullbroker_factory: StartBroker,
    shape: tuple[str, ...],
) -> None:
    broker = nullbroker_factory("--partitions", "2", *shape)
    producer = transactional(broker, "open")
    produce_in_transaction(producer, "open", 20, commit=True)
    producer.begin_transaction()
    for index in range(10):
        producer.produce("open", value=b"o", partition=index % 2)
    assert producer.flush(30) == 0
    # Open: read_committed stops at the last stable offset, read_uncommitted reads on.
    assert len(read_all(broker, "open", "read_committed")) == 20
    assert len(read_all(broker, "open", "read_uncommitted")) == 30
    producer.commit_transaction(30)
    assert len(read_all(broker, "open", "read_committed")) == 30


@pytest.mark.clients
@shapes
def test_a_newer_producer_of_the_same_id_fences_the_older(
    nullbroker_factory: StartBroker, shape: tuple[str, ...]
) -> None:
    broker = nullbroker_factory("--partitions", "2", *shape)
    older = transactional(broker, "fence-me")
    produce_in_transaction(older, "fenced", 10, commit=True)
    transactional(broker, "fence-me")  # the same id, again: the next epoch
    older.begin_transaction()
    older.produce("fenced", value=b"late", partition=0)
    with pytest.raises(KafkaException) as raised:
        older.commit_transaction(30)
    error: KafkaError = raised.value.args[0]
    assert error.code() == KafkaError._FENCED and error.fatal(), error


@pytest.mark.clients
@shapes
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_commits_exactly_its_input(
    nullbroker_factory: StartBroker, protocol: str, shape: tuple[str, ...]
) -> None:
    """With either group protocol: a KIP-848 group's transactional offsets were once
    dropped when the transaction committed, and the pipeline read its input again."""
    broker = nullbroker_factory(
        "--partitions", "2", "--source", "input:partitions=2,records=300,size=20",
        "--group-consumer-heartbeat-interval-ms", "1000", *shape,
    )  # fmt: skip
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "transformer",
        "group.protocol": protocol, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
    })  # fmt: skip
    consumer.subscribe(["input"])
    producer = transactional(broker, "transformer")
    consumed = 0
    deadline = time.monotonic() + 60
    while consumed < 600 and time.monotonic() < deadline:
        messages = consumer.consume(100, 1.0)
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            assert message.error() is None, message.error()
            producer.produce("output", value=message.value(), partition=message.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)
        consumed += len(messages)
    assert consumed == 600
    committed = consumer.committed([TopicPartition("input", 0), TopicPartition("input", 1)], 30)
    assert [partition.offset for partition in committed] == [300, 300]
    consumer.close()
    assert len(read_all(broker, "output", "read_committed")) == 600


@pytest.mark.clients
@shapes
def test_a_transaction_past_its_timeout_is_aborted_by_the_broker(
    nullbroker_factory: StartBroker,
    shape: tuple[str, ...],
) -> None:
    broker = nullbroker_factory("--partitions", "2", *shape)
    producer = transactional(broker, "slow", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    for index in range(10):
        producer.produce("slow", value=b"s", partition=index % 2)
    assert producer.flush(30) == 0
    families = broker.scrape_until(
        lambda families: (
            (("outcome", "aborted"),) in samples(families, "nullbroker_transactions_total")
        )
    )
    assert samples(families, "nullbroker_transactions_total")[(("outcome", "aborted"),)] == 1
    assert "aborted 1 transaction(s) open past their timeout" in broker.stderr_text()
    assert read_all(broker, "slow", "read_committed") == []
    # The producer that let it expire is fenced when it tries to commit.
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)


def test_a_partition_serves_each_producers_records_apart_with_markers_and_aborted_lists() -> None:
    log = PartitionTransactions()
    log.wrote(7, 0, 0, 10)  # producer 7, epoch 0: offsets 0-9
    log.wrote(8, 2, 10, 5)  # producer 8, epoch 2: offsets 10-14
    assert log.last_stable_offset(15) == 0
    log.end(15, Marker(7, 0, commit=False))
    assert log.last_stable_offset(16) == 10
    log.end(16, Marker(8, 2, commit=True))
    assert log.last_stable_offset(17) == 17
    assert list(log.segments(3, 20)) == [
        Segment(3, 10, None, (7, 0)),
        Segment(10, 15, None, (8, 2)),
        Segment(15, 16, Marker(7, 0, False)),
        Segment(16, 17, Marker(8, 2, True)),
        Segment(17, 20),  # written outside any transaction
    ]
    # A read_committed consumer is told which to drop: producer 7's, from offset 0.
    assert log.aborted_between(3, 17) == [(7, 0)]
    assert log.aborted_between(16, 17) == []


def test_a_transactional_batch_is_stamped_with_its_producer_and_a_valid_crc() -> None:
    header = bytearray(control_batch(5, -1, -1, True, 0))  # any valid batch
    header[21:23] = b"\x00\x00"  # not transactional, not control
    records = bytes(header[61:])
    del header[61:]
    struct.pack_into(">I", header, 17, crc32c(records, crc32c(bytes(header[21:]))))
    stamped = bytes(as_transactional(header, records, 4242, 7)) + records
    parsed = read_batch_header(stamped)
    assert parsed.is_transactional and not parsed.is_control
    assert (parsed.producer_id, parsed.producer_epoch) == (4242, 7)
    assert crc_matches(stamped, parsed)


def test_a_marker_is_a_transactional_control_batch_of_one_record() -> None:
    batch = control_batch(42, 1000, 3, True, 1_700_000_000_000)
    header = read_batch_header(batch)
    assert header.base_offset == 42 and header.length == len(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.record_count) == (1000, 3, 1)
    # The control record's key: version 0, type 1 (commit); an abort's type is 0.
    assert batch[-12:-8] == b"\x00\x00\x00\x01"
    assert control_batch(42, 1000, 3, False, 0)[-12:-8] == b"\x00\x00\x00\x00"


@pytest.mark.clients
@shapes
@requires_kafka_tools
def test_kafka_transactions_lists_and_describes_an_open_transaction_and_its_producers(
    nullbroker_factory: StartBroker, shape: tuple[str, ...]
) -> None:
    broker = nullbroker_factory("--partitions", "2", *shape)
    producer = transactional(broker, "open-txn")
    producer.begin_transaction()
    for index in range(10):
        producer.produce("watched", value=b"w", partition=index % 2)
    assert producer.flush(30) == 0

    def rows(*arguments: str) -> list[list[str]]:
        output = run_tool("kafka-transactions", "--bootstrap-server", broker.bootstrap, *arguments)
        return [line.split() for line in output.strip().splitlines()[1:]]

    [listed] = rows("list")
    assert listed[0] == "open-txn" and listed[3] == "Ongoing"
    producer_id = listed[2]
    [described] = rows("describe", "--transactional-id", "open-txn")
    assert described[1:5] == ["open-txn", producer_id, "0", "Ongoing"]
    assert sorted(described[-1].split(",")) == ["watched-0", "watched-1"]
    # Five records on partition 0 (sequences 0-4), in a transaction that began at offset 0.
    [state] = rows("describe-producers", "--topic", "watched", "--partition", "0")
    assert state[0] == producer_id and state[3] == "4" and state[5] == "0"
    producer.commit_transaction(30)
    [state] = rows("describe-producers", "--topic", "watched", "--partition", "0")
    assert state[5] == "None"  # none open now (the tool prints -1 so)


@pytest.mark.clients
@shapes
@requires_kafka_tools
def test_kafkas_console_consumer_reads_only_the_committed_records_when_read_committed(
    nullbroker_factory: StartBroker, shape: tuple[str, ...]
) -> None:
    """The Java consumer checks each batch's CRC (check.crcs) and drops an aborted
    transaction's batches by the Fetch response's list, as it does with Kafka."""
    broker = nullbroker_factory("--partitions", "2", *shape)
    producer = transactional(broker, "java-read")
    produce_in_transaction(producer, "java-read", 100, commit=True)
    produce_in_transaction(producer, "java-read", 50, commit=False)
    produce_in_transaction(producer, "java-read", 30, commit=True)
    # Each transaction wrote half its records to each partition, then its marker: committed
    # 0-49 (marker 50), aborted 51-75 (marker 76), committed 77-91 (marker 92).
    committed = [*range(0, 50), *range(77, 92)]
    every = sorted([*committed, *range(51, 76)])
    for isolation, offsets in (("read_committed", committed), ("read_uncommitted", every)):
        # It stops at the count, not after a quiet spell (which a loaded machine can stretch
        # past any timeout); the offsets show which records those were.
        output = run_tool(
            "kafka-console-consumer", "--bootstrap-server", broker.bootstrap,
            "--topic", "java-read", "--from-beginning", "--isolation-level", isolation,
            "--max-messages", str(2 * len(offsets)), "--timeout-ms", "120000",
            "--property", "print.partition=true", "--property", "print.offset=true",
        )  # fmt: skip
        read = sorted(
            (int(partition), int(offset))
            for partition, offset in re.findall(r"Partition:(\d+)\s+Offset:(\d+)", output)
        )
        assert read == [(partition, offset) for partition in (0, 1) for offset in offsets], (
            isolation,
            output[-2000:],
        )
