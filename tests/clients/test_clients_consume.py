"""Real consumers against `nullbroker serve`: source topics and produced topics read back.

Partitions are assigned (assign(), not subscribe()): these tests need no group coordinator.
A source record's content follows from its offset (nullbroker/sources/synthetic.py's docstring), so
every record read is checked, and the broker's fetched counts are compared with what the
consumers read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas with importlib.resources calls that Python
    # deprecates: the library's business, not this test's.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sources.synthetic import RecordShape, key_pattern, value_pattern
from tests.support.broker_counts import fetch_kinds, fetched_from_metrics, samples

pytestmark = pytest.mark.clients

TIMEOUT = 30.0
# The criteria: a streaming source grows at its rate within 5 % over 10 s, and
# three consumers idling at the log end for 5 s cost the broker under 0.5 s of CPU.
RATE = 500
RATE_WINDOW_S = 10.0
RATE_TOLERANCE = 0.05
IDLE_CONSUMERS = 3
IDLE_WINDOW_S = 5.0
IDLE_CPU_LIMIT_S = 0.5


def consumer(broker: RunningBroker, **settings: object) -> Consumer:
    """A confluent-kafka consumer for assign(): no group, no commits."""
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "nullbroker-tests",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **settings,
        }
    )


@dataclass
class Consumed:
    """What a consumer read: every message, and which partitions it saw the end of."""

    messages: list[Message] = field(default_factory=list)
    at_end: set[tuple[str, int]] = field(default_factory=set)
    seconds: float = 0.0

    def offsets(self, topic: str, partition: int) -> list[int]:
        return [
            m.offset() for m in self.messages if (m.topic(), m.partition()) == (topic, partition)
        ]


def consume_to_end(reader: Consumer, partitions: Iterable[tuple[str, int]]) -> Consumed:
    """Consume until every one of `partitions` reported its end (enable.partition.eof),
    bounded by TIMEOUT; a partition that reports an end is read again if records follow."""
    wanted = set(partitions)
    consumed = Consumed()
    started = time.monotonic()
    deadline = started + TIMEOUT
    while not wanted <= consumed.at_end:
        assert time.monotonic() < deadline, f"ends not reached: {wanted - consumed.at_end}"
        for message in reader.consume(num_messages=10_000, timeout=0.5):
            error = message.error()
            where = (message.topic(), message.partition())
            if error is None:
                consumed.messages.append(message)
                consumed.at_end.discard(where)
            else:
                assert error.code() == KafkaError._PARTITION_EOF, error
                consumed.at_end.add(where)
    consumed.seconds = time.monotonic() - started
    return consumed


def assert_each_offset_once(consumed: Consumed, topic: str, partition: int, end: int) -> None:
    offsets = consumed.offsets(topic, partition)
    assert len(offsets) == end, f"{topic}/{partition}: read {len(offsets)} records, not {end}"
    assert offsets == list(range(end)), f"{topic}/{partition}: offsets out of order or repeated"


def read_whole_topic(broker: RunningBroker, topic: str, partitions: int, records: int) -> Consumed:
    """Every record of a source topic of `records` per partition, checked to be each offset
    once."""
    reader = consumer(broker)
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    try:
        consumed = consume_to_end(reader, [(topic, p) for p in range(partitions)])
    finally:
        reader.close()
    for partition in range(partitions):
        assert_each_offset_once(consumed, topic, partition, records)
    return consumed


def assert_source_records(
    messages: Iterable[Message], shape: RecordShape, size: int, key_size: int, headers: int
) -> None:
    """Each record is the one its offset defines; its timestamp is the first record's plus
    one millisecond per offset (a source without a rate)."""
    first_timestamp: dict[int, int] = {}
    for message in messages:
        offset = message.offset()
        index = offset % shape.batch_records
        assert message.value() == value_pattern(index, size), offset
        assert message.key() == key_pattern(index, key_size), offset
        expected_headers = [(f"h{h}", str(index).encode()) for h in range(headers)]
        assert (message.headers() or []) == expected_headers, offset
        _, timestamp = message.timestamp()
        base = first_timestamp.setdefault(message.partition(), timestamp - offset)
        assert timestamp == base + offset, offset


def fetched_from_summary(summary: dict[str, object]) -> dict[tuple[str, int], int]:
    fetched = summary["fetched"]
    assert isinstance(fetched, dict)
    return {
        (topic, int(partition)): counts["records"]
        for topic, entry in fetched["topics"].items()
        for partition, counts in entry["partitions"].items()
    }


def test_a_consumer_reads_every_record_of_a_bounded_source_once_and_the_broker_counts_it(
    nullbroker_factory: StartBroker,
) -> None:
    partitions, records, size, key_size, headers = 3, 20_000, 120, 6, 2
    broker = nullbroker_factory(
        "--source",
        f"src:partitions={partitions},records={records},size={size},"
        f"key-size={key_size},headers={headers}",
    )
    reader = consumer(broker)
    reader.assign([TopicPartition("src", p, OFFSET_BEGINNING) for p in range(partitions)])
    try:
        consumed = consume_to_end(reader, [("src", p) for p in range(partitions)])
    finally:
        reader.close()

    for partition in range(partitions):
        assert_each_offset_once(consumed, "src", partition, records)
    shape = RecordShape(size=size, key_size=key_size, headers=headers)
    assert_source_records(consumed.messages, shape, size, key_size, headers)
    print(
        f"confluent-kafka read {len(consumed.messages)} records of {size} bytes in "
        f"{consumed.seconds:.2f} s: {len(consumed.messages) / consumed.seconds:,.0f} records/s"
    )

    # Each record was read once, so the broker's fetched counts are exactly the records.
    expected = {("src", p): records for p in range(partitions)}
    assert fetched_from_metrics(broker.scrape()) == expected
    summary = broker.stop()
    assert fetched_from_summary(summary) == expected
    fetched = summary["fetched"]
    assert fetched["records"] == partitions * records
    assert fetched["topics"]["src"]["records"] == partitions * records
    assert fetched["bytes"] == fetched["topics"]["src"]["bytes"] > partitions * records * size
    assert summary["errors"] == {}
    assert "Produce" not in summary["requests"]


def test_compressed_source_topics_are_decompressed_by_the_consumer(
    nullbroker_factory: StartBroker,
) -> None:
    codecs = ["gzip", "snappy", "lz4", "zstd"]
    records, size = 3_000, 200
    broker = nullbroker_factory(
        *(
            flag
            for codec in codecs
            for flag in (
                "--source",
                f"{codec}-topic:partitions=1,records={records},size={size},compression={codec}",
            )
        )
    )
    reader = consumer(broker)
    reader.assign([TopicPartition(f"{codec}-topic", 0, OFFSET_BEGINNING) for codec in codecs])
    try:
        consumed = consume_to_end(reader, [(f"{codec}-topic", 0) for codec in codecs])
    finally:
        reader.close()

    shape = RecordShape(size=size)
    for codec in codecs:
        assert_each_offset_once(consumed, f"{codec}-topic", 0, records)
    assert_source_records(consumed.messages, shape, size, 0, 0)
    summary = broker.stop()
    # The batches went out compressed: far fewer bytes than the values they carry.
    for codec in codecs:
        served = summary["fetched"]["topics"][f"{codec}-topic"]
        assert served["records"] == records
        assert served["bytes"] < records * size / 2, codec


def test_a_payload_file_topic_serves_the_files_records_by_offset_as_json_a_client_parses(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    # 97 records (prime) of about 1 KiB: batches of 15 run through the file 15 times over.
    payloads = [
        json.dumps({"id": n, "user": f"u{n % 7}", "note": "x" * (900 + n)}).encode()
        for n in range(97)
    ]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(payloads) + b"\n")
    records = 2_000
    broker = nullbroker_factory(
        "--source", f"events:partitions=2,records={records},key-size=4,payload-file={path}"
    )  # fmt: skip
    consumed = read_whole_topic(broker, "events", 2, records)

    for message in consumed.messages:
        assert message.value() == payloads[message.offset() % len(payloads)]
        assert json.loads(message.value())["id"] == message.offset() % len(payloads)
    assert broker.stop()["fetched"]["topics"]["events"]["records"] == 2 * records


def kafka_python_consumer(broker: RunningBroker) -> KafkaConsumer:
    """A kafka-python consumer for assign(): no group, no commits."""
    return KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=int(TIMEOUT * 1000),
    )


def test_kafka_python_reads_exactly_the_offset_range_it_seeks_to(
    nullbroker_factory: StartBroker,
) -> None:
    size, first, end = 64, 1_234, 3_456
    broker = nullbroker_factory("--source", f"src:partitions=2,records=5000,size={size}")
    reader = kafka_python_consumer(broker)
    read: list[tuple[int, int, bytes]] = []
    try:
        partition = KafkaPythonPartition("src", 1)
        reader.assign([partition])
        reader.seek(partition, first)
        deadline = time.monotonic() + TIMEOUT
        while not read or read[-1][1] < end - 1:
            assert time.monotonic() < deadline, f"stopped at {read[-1][1] if read else None}"
            for batch in reader.poll(timeout_ms=500, max_records=500).values():
                read.extend(
                    (record.partition, record.offset, record.value)
                    for record in batch
                    if record.offset < end
                )
    finally:
        reader.close()

    # Nothing before the offset sought, though the broker's first batch starts earlier;
    # nothing from the other partition; every offset up to `end` once.
    assert [offset for _, offset, _ in read] == list(range(first, end))
    assert {partition for partition, _, _ in read} == {1}
    per_batch = RecordShape(size=size).batch_records
    assert all(value == value_pattern(offset % per_batch, size) for _, offset, value in read)


def test_kafka_python_reads_every_record_once_through_an_incremental_fetch_session(
    nullbroker_factory: StartBroker,
) -> None:
    partitions, records = 2, 30_000
    broker = nullbroker_factory(
        "--source", f"src:partitions={partitions},records={records},size=100"
    )
    reader = kafka_python_consumer(broker)
    offsets: dict[int, list[int]] = {partition: [] for partition in range(partitions)}
    try:
        reader.assign([KafkaPythonPartition("src", p) for p in range(partitions)])
        reader.seek_to_beginning()
        deadline = time.monotonic() + TIMEOUT
        while sum(map(len, offsets.values())) < partitions * records:
            assert time.monotonic() < deadline, {p: len(o) for p, o in offsets.items()}
            for batch in reader.poll(timeout_ms=500, max_records=5000).values():
                for record in batch:
                    offsets[record.partition].append(record.offset)
    finally:
        reader.close()
    assert offsets == {partition: list(range(records)) for partition in range(partitions)}
    families = broker.scrape()
    assert fetched_from_metrics(families) == {("src", p): records for p in range(partitions)}
    kinds = fetch_kinds(families)
    print(f"kafka-python's Fetch requests: {kinds}")
    assert kinds.get("incremental", 0) > kinds.get("full", 0) >= 1
    summary = broker.stop()
    assert summary["errors"] == {}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not on PATH")
def test_kcat_reads_a_whole_source_topic_to_its_end(nullbroker_factory: StartBroker) -> None:
    partitions, records = 4, 2_500
    broker = nullbroker_factory(
        "--source", f"src:partitions={partitions},records={records},size=80"
    )
    command = ["kcat", "-b", broker.bootstrap, "-C", "-t", "src", "-o", "beginning"]
    # -e: exit once every partition's end is reached; a "partition offset value-size" line
    # per record.
    command += ["-e", "-f", "%p %o %S\\n"]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == partitions * records
    read = Counter((int(p), int(o)) for p, o, _ in (line.split() for line in lines))
    assert set(read) == {(p, o) for p in range(partitions) for o in range(records)}
    assert set(read.values()) == {1}
    assert {line.split()[2] for line in lines} == {"80"}
    summary = broker.stop()
    assert summary["fetched"]["records"] == partitions * records


@pytest.mark.every_connection_loop
def test_records_produced_are_read_back_at_their_offsets_with_synthetic_values(
    nullbroker_factory: StartBroker,
) -> None:
    partitions, count, record_size = 2, 4_000, 64
    broker = nullbroker_factory(
        "--partitions", str(partitions), "--produced-record-size", str(record_size)
    )
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(count):
        producer.produce("written", value=b"x" * 300, key=b"k", partition=i % partitions)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    producer.close()

    reader = consumer(broker)
    reader.assign([TopicPartition("written", p, 0) for p in range(partitions)])
    try:
        consumed = consume_to_end(reader, [("written", p) for p in range(partitions)])
    finally:
        reader.close()

    assert len(consumed.messages) == count
    for partition in range(partitions):
        assert_each_offset_once(consumed, "written", partition, count // partitions)
    # What comes back is the synthetic stand-in of --produced-record-size, not what was sent.
    per_batch = RecordShape(size=record_size).batch_records
    for message in consumed.messages:
        assert message.value() == value_pattern(message.offset() % per_batch, record_size)
        assert message.key() is None
    summary = broker.stop()
    assert summary["produced"]["records"] == count
    assert fetched_from_summary(summary) == {
        ("written", p): count // partitions for p in range(partitions)
    }


@dataclass(frozen=True)
class LogEnd:
    """A partition's log end as the broker answered it, and when (midway between asking
    and hearing back, with how long that took)."""

    offset: int
    at: float
    uncertainty: float


def log_end(watcher: Consumer, topic: str, partition: int) -> LogEnd:
    """The most precisely timed of three ListOffsets answers: the one with the shortest
    round trip, so the moment the broker read its clock is known best."""
    samples_taken = []
    for _ in range(3):
        asked = time.monotonic()
        _, high = watcher.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=TIMEOUT, cached=False
        )
        answered = time.monotonic()
        samples_taken.append(LogEnd(high, (asked + answered) / 2, answered - asked))
    return min(samples_taken, key=lambda sample: sample.uncertainty)


@pytest.mark.every_connection_loop
def test_a_streaming_source_grows_at_its_rate_and_a_follower_sees_every_offset_once(
    nullbroker_factory: StartBroker,
) -> None:
    partitions = 2
    broker = nullbroker_factory("--source", f"ticks:partitions={partitions},rate={RATE},size=50")
    # The watcher asks for log ends on its own connection, so its answers never queue
    # behind the follower's fetches held at the log end.
    watcher = consumer(broker)
    follower = consumer(broker)
    follower.assign([TopicPartition("ticks", p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: dict[int, list[int]] = defaultdict(list)
    try:
        first = [log_end(watcher, "ticks", p) for p in range(partitions)]
        while time.monotonic() < first[0].at + RATE_WINDOW_S:
            for message in follower.consume(num_messages=10_000, timeout=0.2):
                if message.error() is None:
                    seen[message.partition()].append(message.offset())
        last = [log_end(watcher, "ticks", p) for p in range(partitions)]
        # The follower catches up with the log end it was last told of, then stops.
        deadline = time.monotonic() + TIMEOUT
        while any(len(seen[p]) < last[p].offset for p in range(partitions)):
            assert time.monotonic() < deadline, "the follower fell behind the source"
            for message in follower.consume(num_messages=10_000, timeout=0.2):
                if message.error() is None:
                    seen[message.partition()].append(message.offset())
    finally:
        follower.close()
        watcher.close()

    for partition in range(partitions):
        grown = last[partition].offset - first[partition].offset
        interval = last[partition].at - first[partition].at
        ratio = grown / (RATE * interval)
        print(
            f"partition {partition}: {grown} records in {interval:.3f} s "
            f"(±{first[partition].uncertainty + last[partition].uncertainty:.4f} s): "
            f"{grown / interval:.1f} records/s, {ratio:.4f} of the rate"
        )
        assert abs(ratio - 1) < RATE_TOLERANCE, f"partition {partition} grew at {ratio:.3f}x"
        assert seen[partition] == list(range(len(seen[partition]))), "a gap or a repeat"
        assert len(seen[partition]) >= last[partition].offset


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` so far, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name (field 2) may hold spaces; the fields after it are plain.
        fields = stat.read().rsplit(")", 1)[1].split()
    user, system = int(fields[11]), int(fields[12])
    return (user + system) / os.sysconf("SC_CLK_TCK")


def test_consumers_idling_at_the_log_end_cost_the_broker_almost_no_cpu(
    nullbroker_factory: StartBroker,
) -> None:
    partitions, records = 3, 1_000
    broker = nullbroker_factory(
        "--source", f"idle:partitions={partitions},records={records},size=100"
    )
    readers = [consumer(broker) for _ in range(IDLE_CONSUMERS)]
    try:
        for reader in readers:
            reader.assign([TopicPartition("idle", p, OFFSET_BEGINNING) for p in range(partitions)])
        for reader in readers:
            consumed = consume_to_end(reader, [("idle", p) for p in range(partitions)])
            assert len(consumed.messages) == partitions * records
        fetches_before = fetch_requests(broker)
        cpu_before = cpu_seconds(broker.process.pid)
        # Every consumer keeps polling at the log end: librdkafka sends a Fetch as soon as
        # the last one is answered, so only the broker holding them keeps this cheap.
        idle_until = time.monotonic() + IDLE_WINDOW_S
        while time.monotonic() < idle_until:
            for reader in readers:
                for message in reader.consume(num_messages=100, timeout=0.05):
                    assert message.error() is not None, "no records exist past the log end"
        cpu_used = cpu_seconds(broker.process.pid) - cpu_before
        fetches = fetch_requests(broker) - fetches_before
    finally:
        for reader in readers:
            reader.close()
    print(
        f"{IDLE_CONSUMERS} consumers idle for {IDLE_WINDOW_S} s: {fetches} Fetch requests, "
        f"{cpu_used:.3f} s of broker CPU"
    )
    assert fetches > 0, "the consumers did not fetch while idle"
    assert cpu_used < IDLE_CPU_LIMIT_S


def fetch_requests(broker: RunningBroker) -> int:
    return int(
        sum(
            value
            for labels, value in samples(broker.scrape(), "nullbroker_requests_total").items()
            if dict(labels)["api"] == "Fetch"
        )
    )
