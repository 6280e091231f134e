"""The Produce lane (nullbroker/handlers/_produce_lane.c) against the Python path it stands beside.

The same requests go to two brokers, one answering Produce through the lane and one with
the lane off: every answer must be the same bytes and both brokers must be left in the
same state (offsets, counters, producers' sequences, accounts). The lane must also take
the common request itself, or it would be proven equal by never answering.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec import ApiKey, ProtocolError, native
from codec.crc import crc32c
from nullbroker.broker import Broker
from nullbroker.sessions import Session
from nullbroker.settings import Config
from nullbroker.sources.synthetic import SourceSpec
from tests.handlers.test_lane_contract import accounts
from tests.support.broker_counts import metric_total
from tests.support.kafka_wire import record_batch
from tests.support.kio_calls import (
    SESSION,
    call,
    decode_response,
    dispatch_of,
    request_frame,
    types,
)

TOPIC, OTHER, SOURCE = "lane", "other", "src"
OTHER_MAX_BYTES = len(record_batch(3))
CRC_AT, ATTRIBUTES_AT, MAX_TIMESTAMP_AT = 17, 21, 35
FIRST_TIMESTAMP_MS = 1_735_689_600_000
"""OTHER's max.message.bytes: a batch of 3 records is exactly at it, one of 4 is over."""
PARTITIONS = 3
PRODUCERS = 2
UNKNOWN_TOPIC_ID = uuid.UUID(int=12345)

pytestmark = pytest.mark.skipif(
    dispatch_of(Broker(Config())).produce_lane is None,
    reason="NULLBROKER_NATIVE=off" if not native.switched_on() else "the Produce lane is not built",
)


def twin_brokers(
    verify_crc: bool = False, warm: bool = True, nodes: int = 1
) -> tuple[Broker, Broker]:
    """A broker answering through the lane, and one whose Python path answers everything;
    each with the same topics and the same producers (`warm`: who have written a first
    batch to every partition)."""
    pair = []
    for lane in (True, False):
        broker = Broker(
            Config(
                partitions=PARTITIONS,
                verify_crc=verify_crc,
                brokers=nodes,
                sources=(SourceSpec(SOURCE, partitions=1, records=10),),
            )
        )
        for name in (TOPIC, OTHER):
            broker.topics.get_or_auto_create(name)
        limit_batches(broker, OTHER, OTHER_MAX_BYTES)
        for _ in range(PRODUCERS):
            call(broker, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None,
                 transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                 producer_epoch=-1)  # fmt: skip
        # Each producer's first batch on each partition: the Python path's, whichever broker.
        for producer in range(PRODUCERS if warm else 0):
            for name in (TOPIC, OTHER):
                for index in range(PARTITIONS):
                    batch = record_batch(1, producer_id=1000 + producer, producer_epoch=0,
                                         base_sequence=0)  # fmt: skip
                    frame = produce_frame(broker, 9, [(name, index, batch)])
                    dispatch_of(broker).answer(frame, session(broker.cluster.leader(name, index)))
        if not lane:
            dispatch_of(broker).produce_lane = None
        pair.append(broker)
    return pair[0], pair[1]


def limit_batches(broker: Broker, topic: str, max_bytes: int) -> None:
    """Set the topic's max.message.bytes, as a client does (IncrementalAlterConfigs)."""
    t = types(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    config = t.AlterableConfig(name="max.message.bytes", config_operation=0, value=str(max_bytes))
    resource = t.AlterConfigsResource(resource_type=2, resource_name=topic, configs=(config,))
    (result,) = call(
        broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False
    ).responses
    assert result.error_code == 0


def produce_frame(
    broker: Broker,
    version: int,
    batches: list[tuple[str, int, bytes | None]],
    *,
    acks: int = -1,
    transactional_id: str | None = None,
    correlation_id: int = 7,
) -> bytes:
    """A Produce request frame (no size prefix) carrying (topic, partition, records)."""
    t = types(ApiKey.PRODUCE, version)
    topics: dict[str, list[Any]] = {}
    for name, index, records in batches:
        topics.setdefault(name, []).append(t.PartitionProduceData(index=index, records=records))
    topic_data = []
    for name, partitions in topics.items():
        if version >= 13:
            topic = broker.topics.get(name)
            topic_id = topic.id if topic is not None else UNKNOWN_TOPIC_ID
            topic_data.append(
                t.TopicProduceData(topic_id=topic_id, partition_data=tuple(partitions))
            )
        else:
            topic_data.append(t.TopicProduceData(name=name, partition_data=tuple(partitions)))
    body = t.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=tuple(topic_data),
    )
    return request_frame(ApiKey.PRODUCE, version, body, correlation_id=correlation_id)


def state(broker: Broker) -> dict[str, Any]:
    """Everything a Produce request may change: the partitions, the producers' sequences and
    every field of the accounts, the latencies' values aside (the two paths take different
    times; their counts must agree)."""
    return {
        "partitions": {
            (topic.name, partition.index): (
                partition.log_start_offset,
                partition.log_end_offset,
                partition.produced.records,
                partition.produced.bytes,
                partition.produced.batches,
            )
            for topic in broker.topics
            for partition in topic.partitions
        },
        "sequences": {
            key: (value.epoch, value.last_sequence, value.last_timestamp, list(value.recent))
            for key, value in broker.producers.sequences_table().items()
        },
        "accounts": accounts(broker),
    }


def answer(broker: Broker, frame: bytes, node: int = 0) -> Any:
    return dispatch_of(broker).answer(frame, session(node))


def outcome(broker: Broker, frame: bytes, node: int) -> Any:
    """The answer, or the kind of error that closes the connection (acks=0 refused)."""
    try:
        return answer(broker, frame, node)
    except ProtocolError as error:
        return type(error).__name__


def session(node: int) -> Session:
    """A connection to `node` of the cluster."""
    return dataclasses.replace(SESSION, node_id=node)


def next_sequence(broker: Broker, producer_id: int, topic: str, partition: int) -> int:
    sequences = broker.producers.sequences_table().get((producer_id, topic, partition))
    return 0 if sequences is None else (sequences.last_sequence + 1) % 2**31


Corruption = Callable[[bytearray], None]


def _put(offset: int, fmt: str, value: int) -> Corruption:
    return lambda batch: struct.pack_into(fmt, batch, offset, value)


def _set_attribute(bit: int) -> Corruption:
    def corrupt(batch: bytearray) -> None:
        (attributes,) = struct.unpack_from(">h", batch, 21)
        struct.pack_into(">h", batch, 21, attributes | bit)

    return corrupt


CORRUPTIONS: dict[str, Corruption] = {
    "crc": lambda batch: batch.__setitem__(17, batch[17] ^ 0xFF),
    "magic": _put(16, ">b", 1),
    "length": lambda batch: struct.pack_into(">i", batch, 8, len(batch) - 12 + 1),
    "record count": _put(57, ">i", 99),
    "no records": _put(57, ">i", 0),
    "transactional": _set_attribute(0x10),
    "control": _set_attribute(0x20),
    "truncated": lambda batch: batch.__delitem__(slice(40, None)),
}


@st.composite
def batch_spec(draw: st.DrawFn, clean: bool) -> dict[str, Any]:
    """A batch to send: in a clean request, one the lane should take (the common case);
    otherwise anything, from a retry to a corrupt header."""
    if clean:
        return {
            "topic": draw(st.sampled_from([TOPIC, OTHER])),
            "partition": draw(st.sampled_from(range(PARTITIONS))),
            "count": draw(st.integers(1, 4)),
            "producer": draw(st.sampled_from([None, 0, 1])),
            "epoch": 0,
            "sequence": "next",
            "corruption": None,
            "null": False,
        }
    return {
        "topic": draw(st.sampled_from([TOPIC, TOPIC, OTHER, SOURCE, "unknown-topic"])),
        "partition": draw(st.sampled_from([0, 1, 2, 3, -1])),
        "count": draw(st.integers(1, 4)),
        "producer": draw(st.sampled_from([None, 0, 1])),
        "epoch": draw(st.sampled_from([0, 0, 1, -1])),
        "sequence": draw(st.sampled_from(["next", "next", "again", "gap", "0"])),
        "corruption": draw(st.sampled_from([None] * 4 + sorted(CORRUPTIONS))),
        "null": draw(st.integers(0, 20)) == 0,
    }


def build_batch(broker: Broker, spec: dict[str, Any], sent: dict[Any, bytes]) -> bytes | None:
    """A batch for `spec`, its sequences read from the broker's state; "again" resends the
    last batch of that producer on that partition (a retry), if there was one, as it was
    before any corruption."""
    if spec["null"]:
        return None
    key = (spec["producer"], spec["topic"], spec["partition"])
    if spec["producer"] is None:
        data = bytearray(record_batch(spec["count"]))
    elif spec["sequence"] == "again" and key in sent:
        data = bytearray(sent[key])
    else:
        producer_id = 1000 + spec["producer"]
        sequence = {
            "0": 0,
            "gap": next_sequence(broker, producer_id, spec["topic"], spec["partition"]) + 1,
        }.get(
            spec["sequence"], next_sequence(broker, producer_id, spec["topic"], spec["partition"])
        )
        data = bytearray(
            record_batch(
                spec["count"],
                producer_id=producer_id,
                producer_epoch=spec["epoch"],
                base_sequence=sequence,
            )
        )
        # A max timestamp of its own per batch: DescribeProducers shows the last one, which
        # both paths must keep.
        struct.pack_into(">q", data, MAX_TIMESTAMP_AT, FIRST_TIMESTAMP_MS + sequence)
        struct.pack_into(">I", data, CRC_AT, crc32c(bytes(data[ATTRIBUTES_AT:])))
    sent[key] = bytes(data)  # a retry resends it as it was, uncorrupted
    if spec["corruption"] is not None:
        CORRUPTIONS[spec["corruption"]](data)
    return bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), verify_crc=st.booleans(), nodes=st.sampled_from([1, 1, 3]))
def test_the_lane_answers_as_the_python_path_and_leaves_the_same_state(
    data: st.DataObject, verify_crc: bool, nodes: int
) -> None:
    lane, python = twin_brokers(verify_crc, nodes=nodes)
    sent: dict[Any, bytes] = {}
    for step in range(data.draw(st.integers(1, 12), label="requests")):
        version = data.draw(st.sampled_from([3, 5, 7, 8, 9, 10, 11, 12, 13]))
        clean = data.draw(st.booleans(), label="clean")
        specs = data.draw(
            st.lists(
                batch_spec(clean),
                min_size=1,
                max_size=4,
                unique_by=(lambda s: (s["topic"], s["partition"])) if clean else None,
            )
        )
        acks = data.draw(st.sampled_from([-1, 1] if clean else [-1, 1, 0]))
        transactional_id = data.draw(st.sampled_from([None] if clean else [None, "tx"]))
        batches = [(s["topic"], s["partition"], build_batch(lane, s, sent)) for s in specs]
        frames = [
            produce_frame(
                broker,
                version,
                batches,
                acks=acks,
                transactional_id=transactional_id,
                correlation_id=step,
            )
            for broker in (lane, python)
        ]
        assert frames[0] == frames[1]
        node = data.draw(st.integers(0, nodes - 1), label="node")
        assert outcome(lane, frames[0], node) == outcome(python, frames[1], node)
        assert state(lane) == state(python)


def test_the_lane_takes_the_common_request_itself() -> None:
    lane, python = twin_brokers(warm=False)
    assert dispatch_of(lane).produce_lane is not None
    sequence = 0
    for version in (3, 3, 7, 9, 12, 13):
        batches = [
            (TOPIC, 1, record_batch(3, producer_id=1000, producer_epoch=0,
                                    base_sequence=sequence)),
            (OTHER, 0, record_batch(2)),
        ]  # fmt: skip
        frame = produce_frame(lane, version, batches)
        expected = answer(python, frame)
        if sequence == 0:
            assert dispatch_of(lane).produce_lane.answer(frame, 0) is None, (
                "a first batch is Python's"
            )
            assert answer(lane, frame) == expected
        else:
            assert dispatch_of(lane).produce_lane.answer(frame, 0) == expected
        assert state(lane) == state(python)
        sequence += 3


def test_answer_prefix_answers_the_leading_produce_frames_and_stops_at_any_other() -> None:
    lane, python = twin_brokers()
    assert dispatch_of(lane).produce_lane is not None
    common = [
        produce_frame(lane, 9, [(TOPIC, 0, record_batch(2))], correlation_id=n) for n in (1, 2)
    ]
    unknown = produce_frame(lane, 9, [("unknown-topic", 0, record_batch(2))], correlation_id=3)
    after = produce_frame(lane, 9, [(TOPIC, 0, record_batch(2))], correlation_id=4)
    read = b"".join(struct.pack(">i", len(frame)) + frame for frame in [*common, unknown, after])
    consumed, answers = dispatch_of(lane).produce_lane.answer_prefix(memoryview(read), 0)
    assert consumed == sum(4 + len(frame) for frame in common)
    assert answers == b"".join(answer(python, frame) for frame in common)
    # A frame cut short by the read's end is left whole to the Python path.
    cut = memoryview(read[: 4 + len(common[0]) + 10])
    consumed, answers = dispatch_of(lane).produce_lane.answer_prefix(cut, 0)
    assert consumed == 4 + len(common[0])
    assert answers == answer(python, common[0])
    assert state(lane) == state(python)


@pytest.mark.clients
def test_a_client_that_reads_its_acks_late_gets_every_one_in_order(nullbroker_factory: Any) -> None:
    """Over a socket: the C reader answers Produce requests as they come; while the client
    reads nothing its answers back up until the socket takes no more, and the rest go by
    the Python way and trio, in order, none lost, none twice."""
    broker = nullbroker_factory("--partitions", "1")
    count = 150_000  # 7.5 MiB of answers: more than the sockets hold (tcp_wmem at most 4 MiB)
    records = record_batch(1)
    frames = [
        produce_frame(Broker(Config()), 9, [(TOPIC, 0, records)], correlation_id=n)
        for n in range(2)
    ]
    # The same request but for its correlation id (bytes 4-7): the first is written whole.
    head, tail = frames[0][:4], frames[0][8:]
    stream = b"".join(
        struct.pack(">i", len(frames[0])) + head + struct.pack(">i", n) + tail for n in range(count)
    )
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(60)
        sock.connect((host, int(port)))
        sender = threading.Thread(target=sock.sendall, args=(stream,))
        sender.start()
        time.sleep(1.0)  # the broker answers meanwhile, and its answers back up
        for expected in range(count):
            (size,) = struct.unpack(">i", receive_exactly(sock, 4))
            answer = receive_exactly(sock, size)
            (correlation_id,) = struct.unpack_from(">i", answer)
            assert correlation_id == expected
        sender.join()
    produced = metric_total(broker.scrape(), "nullbroker_produced_records_total")
    assert produced == count


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"closed after {len(data)} of {size} bytes"
        data += chunk
    return bytes(data)


def test_a_batch_over_max_message_bytes_is_left_to_the_python_path_which_refuses_it() -> None:
    lane, python = twin_brokers(warm=False)
    assert dispatch_of(lane).produce_lane is not None
    at_limit = produce_frame(lane, 9, [(OTHER, 0, record_batch(3))])
    assert dispatch_of(lane).produce_lane.answer(at_limit, 0) is not None, (
        "a batch at the limit is the lane's"
    )
    answer(python, at_limit)
    over = produce_frame(lane, 9, [(TOPIC, 0, record_batch(1)), (OTHER, 1, record_batch(4))])
    assert dispatch_of(lane).produce_lane.answer(over, 0) is None
    refused = answer(lane, over)
    assert refused == answer(python, over)
    assert state(lane) == state(python)
    assert state(lane)["accounts"][("errors",)] == {"message_too_large": 1}
    assert lane.topics.get(OTHER).partitions[1].log_end_offset == 0


def test_a_retry_of_a_batch_the_lane_took_gets_the_batch_s_max_timestamp() -> None:
    """The lane takes a batch and records it; its retry, which the Python path answers, gets
    the batch's max timestamp as log_append_time, as from Kafka (and as when the Python path
    took the batch)."""
    lane, python = twin_brokers()
    assert dispatch_of(lane).produce_lane is not None
    batch = bytearray(record_batch(2, producer_id=1000, producer_epoch=0, base_sequence=1))
    struct.pack_into(">q", batch, MAX_TIMESTAMP_AT, FIRST_TIMESTAMP_MS + 42)
    first = produce_frame(lane, 9, [(TOPIC, 0, bytes(batch))])
    log_end = lane.topics.get(TOPIC).partitions[0].log_end_offset
    assert dispatch_of(lane).produce_lane.answer(first, 0) is not None, (
        "the lane's: the producer's next batch"
    )
    answer(python, first)
    retry = produce_frame(lane, 9, [(TOPIC, 0, bytes(batch))], correlation_id=8)
    assert dispatch_of(lane).produce_lane.answer(retry, 0) is None, "a duplicate is Python's"
    answered = answer(lane, retry)
    assert answered == answer(python, retry)
    (result,) = decode_response(ApiKey.PRODUCE, 9, answered)[1].responses[0].partition_responses
    assert (result.base_offset, result.log_append_time) == (
        log_end,
        datetime.datetime.fromtimestamp((FIRST_TIMESTAMP_MS + 42) / 1000, tz=datetime.UTC),
    )
    assert state(lane) == state(python)
