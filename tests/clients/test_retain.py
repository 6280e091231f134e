"""The retention tail (`--retain BYTES`): produced batches kept as received and read back by
real clients at their offsets, the log start moving as the ring drops the oldest, and
Kafka's own kafka-e2e-latency checking every message it reads back."""

from __future__ import annotations

import datetime
import re
import subprocess

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from codec.batch_template import TemplateRecord, build_template
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.broker import Broker
from nullbroker.settings import Config
from nullbroker.sources.synthetic import compressor
from nullbroker.state.retained import RetainedBatches
from nullbroker.stats import PartitionCounters
from perf import java_perf
from tests.handlers.test_fetch import fetch_one, offsets_of
from tests.handlers.test_handlers import list_offsets
from tests.handlers.test_handlers import produce as produce_request
from tests.support.broker_counts import metric_total
from tests.support.kio_calls import call, record_batch, types


def test_batches_are_kept_with_their_offsets_and_the_oldest_dropped_past_the_capacity() -> None:
    counters = PartitionCounters()
    batch = record_batch(10)
    ring = RetainedBatches(capacity=3 * len(batch), counters=counters)
    starts = [ring.append(base, 10, memoryview(batch)) for base in range(0, 50, 10)]
    assert starts == [0, 0, 0, 10, 20]  # five batches, room for three
    assert counters.retained_bytes == 3 * len(batch)
    parts, count, size = ring.read(25, limit=10**6, first=True)
    assert [int.from_bytes(part[:8], "big") for part in parts] == [20, 30, 40]
    assert (count, size) == (25, 3 * len(batch))
    # As received, CRC intact, but for the leader epoch Kafka stamps (bytes 12-15, 0 here).
    assert all(bytes(part[8:12]) == batch[8:12] for part in parts)
    assert all(bytes(part[12:16]) == bytes(4) and part[16:] == batch[16:] for part in parts)
    # The first batch of a response goes even over the limit; later ones only within it.
    assert ring.read(20, limit=1, first=True)[1:] == (10, len(batch))
    assert ring.read(20, limit=1, first=False) == ([], 0, 0)
    assert ring.read(50, limit=10**6, first=True) == ([], 0, 0)


def test_the_newest_batch_is_kept_even_when_larger_than_the_capacity() -> None:
    counters = PartitionCounters()
    ring = RetainedBatches(capacity=10, counters=counters)
    batch = record_batch(3)
    assert ring.append(0, 3, batch) == 0
    assert ring.append(3, 3, batch) == 3
    assert counters.retained_bytes == len(batch)


def produce(broker: RunningBroker, topic: str, values: list[bytes]) -> None:
    # Batches of 16 KiB, as the Java client makes them: many, so the ring drops some.
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16384}
    )
    for index, value in enumerate(values):
        producer.produce(topic, value=value, key=str(index).encode())
    assert producer.flush(30) == 0


def read_all(broker: RunningBroker, topic: str, expected: int) -> dict[int, bytes]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "retain", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    read: dict[int, bytes] = {}
    try:
        for _ in range(300):
            for message in consumer.consume(1000, timeout=0.2):
                assert message.error() is None, message.error()
                assert message.offset() not in read
                read[message.offset()] = message.value()
            if len(read) >= expected:
                break
    finally:
        consumer.close()
    return read


@pytest.mark.clients
def test_a_consumer_reads_exactly_what_was_produced_and_the_log_start_follows_the_ring(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--retain", str(256 * 1024), "--partitions", "1")
    values = [f"value {index} ".encode() * 20 for index in range(3000)]  # ~0.5 MB in all
    produce(broker, "kept", values)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets"})
    low, high = consumer.get_watermark_offsets(TopicPartition("kept", 0), timeout=10)
    consumer.close()
    assert high == len(values)
    assert 0 < low < high, "the oldest batches were dropped and the log start moved"
    read = read_all(broker, "kept", high - low)
    assert read == {offset: values[offset] for offset in range(low, high)}
    retained = metric_total(broker.scrape(), "nullbroker_retained_bytes")
    assert 0 < retained <= 256 * 1024


def kafka_e2e_latency(broker: RunningBroker, messages: int) -> subprocess.CompletedProcess[str]:
    """Kafka's kafka-e2e-latency: messages of 200 bytes, acks=all, one at a time; it fails on
    any message read back unlike the one it sent."""
    missing = java_perf.missing()
    if missing:
        pytest.skip(missing)
    command = [str(java_perf.BIN / "kafka-e2e-latency"), broker.bootstrap, "e2e", str(messages)]
    return subprocess.run([*command, "all", "200"], capture_output=True, text=True, timeout=180)


@pytest.mark.clients
def test_kafka_e2e_latency_reads_back_every_message_it_sends(
    nullbroker_factory: StartBroker,
) -> None:
    result = kafka_e2e_latency(nullbroker_factory("--retain", str(1024 * 1024)), 300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Avg latency:" in result.stdout
    assert re.search(r"Percentiles: 50th = \d+, 99th = \d+, 99.9th = \d+", result.stdout)


@pytest.mark.clients
def test_without_retain_kafka_e2e_latency_sees_synthetic_values_and_fails(
    nullbroker_factory: StartBroker,
) -> None:
    assert kafka_e2e_latency(nullbroker_factory(), 5).returncode != 0


def test_a_batch_read_back_carries_the_leader_s_epoch_as_kafka_stamps_it() -> None:
    broker = Broker(Config(retain=1 << 20))
    batch = bytearray(record_batch(3))
    batch[12:16] = b"\xff" * 4  # -1, as Java and librdkafka producers send it (not in the CRC)
    produce_request(broker, "t", 0, batch)
    data = fetch_one(broker, broker.topics.get("t"), 16, 0, 0)
    assert bytes(data.records[12:16]) == bytes(4)  # Kafka's: epoch 0, a new topic's
    assert data.records[8:12] == batch[8:12] and data.records[16:] == batch[16:]
    ring = RetainedBatches(capacity=1 << 20, counters=PartitionCounters())
    ring.append(0, 3, batch, leader_epoch=7)  # on a cluster, after leaders moved
    assert int.from_bytes(ring.read(0, 1 << 20, True)[0][0][12:16], "big") == 7


def delete_records_below(broker: Broker, topic: str, offset: int) -> int:
    """DeleteRecords for partition 0 of `topic`; the new log start it answers."""
    t = types(21, 2)
    asked = t.DeleteRecordsPartition(partition_index=0, offset=offset)
    response = call(
        broker,
        21,
        2,
        topics=(t.DeleteRecordsTopic(name=topic, partitions=(asked,)),),
        timeout=datetime.timedelta(seconds=5),
    )
    (result,) = response.topics[0].partitions
    assert result.error_code is ErrorCode.none
    return int(result.low_watermark)


def test_delete_records_lets_go_of_the_retained_batches_wholly_below_the_new_log_start() -> None:
    broker = Broker(Config(retain=1 << 20))
    batch = record_batch(10)
    for _ in range(5):
        produce_request(broker, "t", 0, batch)
    counters = broker.stats.produced[("t", 0)]
    assert counters.retained_bytes == 5 * len(batch)

    # Offset 25 is inside the batch of 20-29: it stays, as Kafka serves it from there.
    assert delete_records_below(broker, "t", 25) == 25
    assert counters.retained_bytes == 3 * len(batch)
    data = fetch_one(broker, broker.topics.get("t"), 16, 0, 25)
    assert offsets_of(data.records) == list(range(20, 50))
    assert broker.stats.fetched[("t", 0)].records == 25

    assert delete_records_below(broker, "t", -1) == 50  # up to the high watermark
    assert counters.retained_bytes == 0


def produced_batch(start_ms: int, deltas: list[int], compression: str = "none") -> bytes:
    """A batch of records at `start_ms` plus each delta, compressed as asked."""
    records = [TemplateRecord(None, b"v", (), delta) for delta in deltas]
    template = build_template(records, compression, compressor(compression))
    return bytes(template.render(0, start_ms))


def test_list_offsets_by_time_searches_the_produced_timestamps_as_kafka_does() -> None:
    """With --retain, ListOffsets by timestamp answers the first record at or after the
    time, and max timestamp (-3) the record that has it, from the produced batches (a
    compressed one inflated), as Kafka searches its log (tests/oracle/test_differential_flows.py
    asks both); not the synthetic records' timestamps."""
    broker = Broker(Config(retain=1 << 20))
    start = 1_767_225_600_000
    produce_request(broker, "t", 0, produced_batch(start, [0, 1, 2]))
    produce_request(broker, "t", 0, produced_batch(start + 100, [0, 5, 10], "gzip"))

    def found(timestamp: int) -> tuple[int, int, int]:
        answer = list_offsets(broker, "t", 0, timestamp)
        return answer.offset, answer.timestamp, answer.leader_epoch

    assert found(start + 1) == (1, start + 1, 0)
    assert found(start + 104) == (4, start + 105, 0)  # inside the compressed batch
    assert found(start + 111) == (-1, -1, -1)
    assert found(-3) == (5, start + 110, 0)
    assert delete_records_below(broker, "t", 2) == 2
    assert found(start) == (2, start + 2, 0)  # none below the log start
