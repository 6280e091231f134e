"""codec.produce's hand-written Produce request decoder reads what kio's reader reads, and
refuses malformed payloads with UndecodableRequest without ever allocating for a hostile
length: it runs in the broker's process, where kio 0.6.5's reader could be made to abort it.
"""

from __future__ import annotations

import io
import struct
import tracemalloc
import uuid
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from codec import KAFKA_4_RANGES, ApiKey, UndecodableRequest, decode_header, decode_request
from codec.apis import request_reader, request_schema
from codec.entities import make, request_module
from codec.messages import request_check
from codec.produce import ProduceRequestView, decode_produce_request
from nullbroker.broker import Broker
from nullbroker.settings import Config
from tests.support import vectors
from tests.support.kafka_wire import request_header, unsigned_varint
from tests.support.kio_calls import (
    SESSION,
    decode_response,
    dispatch_of,
    record_batch,
    request_frame,
)
from tests.support.produce_views import ONE_MS, ZERO_UUID, as_kio_request

VERSIONS = range(3, 14)
# A hostile length must not cost memory: far below what any count in these tests implies.
ALLOCATION_LIMIT = 64 * 1024

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
# Lengths around the one-, two- and three-byte varint boundaries (127, 16383).
RECORDS = (
    st.none()
    | st.binary(max_size=300)
    | st.integers(16_000, 16_500).map(lambda size: bytes(range(256)) * (size // 256))
)


def encode_body(version: int, body: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(request_schema(ApiKey.PRODUCE, version))(buffer, body)
    return buffer.getvalue()


@st.composite
def produce_requests(draw: st.DrawFn) -> tuple[int, bytes]:
    """A Produce request payload of any version, built and encoded by kio."""
    version = draw(st.integers(3, 13))
    types = request_module(ApiKey.PRODUCE, version)
    topic = st.uuids() | st.just(ZERO_UUID) if version >= 13 else st.text(max_size=20)
    body = make(
        types.ProduceRequest,
        transactional_id=draw(st.none() | st.text(max_size=20)),
        acks=draw(INT16),
        timeout=draw(INT32) * ONE_MS,
        topic_data=tuple(
            make(
                types.TopicProduceData,
                name=name,
                topic_id=name,
                partition_data=tuple(
                    types.PartitionProduceData(index=index, records=records)
                    for index, records in draw(st.lists(st.tuples(INT32, RECORDS), max_size=4))
                ),
            )
            for name in draw(st.lists(topic, max_size=3))
        ),
    )
    return version, encode_body(version, body)


def assert_same(version: int, ours: ProduceRequestView, kios: Any) -> None:
    """The fast decoder's view holds what kio's entity holds, records as zero-copy views."""
    assert as_kio_request(version, ours) == kios
    for topic in ours.topic_data:
        if version >= 13:
            assert topic.name is None and topic.topic_id is not None  # even the zero UUID
        else:
            assert topic.topic_id is None
        for partition in topic.partition_data:
            assert partition.records is None or isinstance(partition.records, memoryview)


def kio_decode(frame: bytes | memoryview, offset: int, version: int) -> tuple[Any, int]:
    # Only ever on well-formed payloads: kio 0.6.5 trusts lengths.
    decoded: tuple[Any, int] = request_reader(ApiKey.PRODUCE, version)(
        memoryview(frame).toreadonly(), offset
    )
    return decoded


# --- equal to kio ---------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(request=produce_requests(), before=st.binary(max_size=8), after=st.binary(max_size=8))
def test_the_fast_decoder_reads_what_kio_reads(
    request: tuple[int, bytes], before: bytes, after: bytes
) -> None:
    version, payload = request
    frame = before + payload + after
    expected, kio_size = kio_decode(frame, len(before), version)
    ours, size = decode_produce_request(frame, len(before), version)
    assert size == kio_size == len(payload), "bytes after the payload are not the payload's"
    assert_same(version, ours, expected)


def one_partition_request(
    version: int,
    records: bytes | None = b"batch",
    *,
    transactional_id: str | None = None,
    topic: str | uuid.UUID = "t",
) -> tuple[Any, bytes]:
    """A request for partition 0 of one topic, as kio's entity and as encoded by kio. In
    flexible versions the payload's last three bytes are the partition's, the topic's and
    the request's (empty) tagged-field sections."""
    types = request_module(ApiKey.PRODUCE, version)
    if version >= 13 and isinstance(topic, str):
        topic = uuid.uuid5(uuid.NAMESPACE_DNS, topic)
    body = make(
        types.ProduceRequest,
        transactional_id=transactional_id,
        acks=-1,
        timeout=30_000 * ONE_MS,
        topic_data=(
            make(
                types.TopicProduceData,
                name=topic,
                topic_id=topic,
                partition_data=(types.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )
    return body, encode_body(version, body)


def test_every_version_decodes_a_typical_request() -> None:
    for version in VERSIONS:
        body, payload = one_partition_request(version, record_batch(3), transactional_id="txn")
        ours, size = decode_produce_request(payload, 0, version)
        assert size == len(payload)
        assert_same(version, ours, body)


def test_records_are_a_zero_copy_slice_of_the_frame() -> None:
    frame = vectors.frame_bytes("java-4.0/042-Produce-v10-request.bin")
    view = memoryview(frame).toreadonly()
    _, offset = decode_header(view)
    ours, _ = decode_produce_request(view, offset, 10)
    for partition in ours.topic_data[0].partition_data:
        assert partition.records is not None
        assert partition.records.obj is frame
        assert partition.records.readonly


PRODUCE_FRAMES = [entry for entry in vectors.requests() if entry["api_key"] == ApiKey.PRODUCE]


@pytest.mark.parametrize("entry", PRODUCE_FRAMES, ids=vectors.entry_id)
def test_every_recorded_produce_request_decodes_as_kio_decodes_it(
    entry: vectors.Entry,
) -> None:
    frame = vectors.frame_bytes(entry)
    version = entry["api_version"]
    _, offset = decode_header(frame)
    expected, kio_size = kio_decode(frame, offset, version)
    ours, size = decode_produce_request(frame, offset, version)
    assert size == kio_size == len(frame) - offset
    assert_same(version, ours, expected)
    assert ours.acks == entry["produce"]["acks"]
    assert ours.transactional_id == entry["produce"]["transactional_id"]

    request = decode_request(memoryview(frame).toreadonly(), KAFKA_4_RANGES)
    assert isinstance(request.body, ProduceRequestView)
    assert request.trailing_bytes == 0
    assert_same(version, request.body, expected)


# --- tagged fields ----------------------------------------------------------------------------


def tag_section(*fields: tuple[int, bytes]) -> bytes:
    return unsigned_varint(len(fields)) + b"".join(
        unsigned_varint(tag) + unsigned_varint(len(data)) + data for tag, data in fields
    )


TAG_SECTIONS = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.binary(max_size=200)), max_size=3)


@settings(max_examples=100, deadline=None)
@given(
    version=st.integers(9, 13),
    partition_tags=TAG_SECTIONS,
    topic_tags=TAG_SECTIONS,
    request_tags=TAG_SECTIONS,
)
def test_unknown_tagged_fields_are_skipped_by_their_size(
    version: int,
    partition_tags: list[tuple[int, bytes]],
    topic_tags: list[tuple[int, bytes]],
    request_tags: list[tuple[int, bytes]],
) -> None:
    # Kafka skips tags it does not know; kio 0.6.5 refuses them, so compare with the same
    # payload without them.
    _, plain = one_partition_request(version)
    assert plain.endswith(b"\x00\x00\x00")
    tagged = (
        plain[:-3]
        + tag_section(*partition_tags)
        + tag_section(*topic_tags)
        + tag_section(*request_tags)
    )
    ours, size = decode_produce_request(tagged + b"after", 0, version)
    assert size == len(tagged)
    assert ours == decode_produce_request(plain, 0, version)[0]


# --- malformed payloads -------------------------------------------------------------------------


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


HUGE_COMPACT = unsigned_varint(2**34 + 1)  # kio reads varints of up to 35 bits
# Payload starts: a null transactional id, acks and timeout; then a legacy topic "t".
LEGACY = i16(-1) + i16(-1) + i32(30_000)
LEGACY_T = LEGACY + i32(1) + i16(1) + b"t"
FLEXIBLE = b"\x00" + i16(-1) + i32(30_000)
FLEXIBLE_T = FLEXIBLE + b"\x02" + b"\x02t"  # one topic (compact count 2), named "t"
NOT_NULLABLE = r"is null \(not nullable\)"


def malformed(version: int, payload: bytes, message: str, name: str) -> Any:
    return pytest.param(version, payload, message, id=name)


MALFORMED = [
    # hostile counts and lengths: each would ask for gigabytes
    malformed(7, LEGACY + i32(2**31 - 1), "topic count 2147483647", "legacy-topics-2**31-1"),
    malformed(7, LEGACY_T + i32(2**31 - 1), "partition count", "legacy-partitions-2**31-1"),
    malformed(7, LEGACY_T + i32(1) + i32(0) + i32(2**31 - 1), "records length", "legacy-records"),
    malformed(7, LEGACY + i32(1) + i16(2**15 - 1) + i32(0), "topic name length", "legacy-name"),
    malformed(7, i16(2**15 - 1) + b"txn", "transactional id length", "legacy-txn-32767"),
    malformed(10, FLEXIBLE + HUGE_COMPACT, "topic count 17179869184", "compact-topics-2**34"),
    malformed(10, FLEXIBLE_T + HUGE_COMPACT, "partition count", "compact-partitions-2**34"),
    malformed(10, FLEXIBLE_T + b"\x02" + i32(0) + HUGE_COMPACT, "records length", "records-2**34"),
    malformed(10, FLEXIBLE + b"\x02" + HUGE_COMPACT, "topic name length", "name-2**34"),
    malformed(10, HUGE_COMPACT, "transactional id length", "txn-2**34"),
    malformed(13, FLEXIBLE + unsigned_varint(2**31), "topic count", "v13-topics-2**31-1"),
    malformed(10, FLEXIBLE + b"\x01" + HUGE_COMPACT, "tagged field count", "tags-2**34"),
    malformed(10, FLEXIBLE + b"\x01\x01\x00" + HUGE_COMPACT, "tagged field length", "tag-2**34"),
    malformed(10, FLEXIBLE + b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes", "6-byte-varint"),
    # negative lengths and counts
    malformed(7, i16(-2), "transactional id length -2 is negative", "legacy-txn-negative"),
    malformed(7, LEGACY + i32(-2), r"topic array is negative \(-2\)", "legacy-topics-negative"),
    malformed(7, LEGACY + i32(1) + i16(-2) + i32(0), "name length -2 is", "legacy-name-negative"),
    malformed(7, LEGACY_T + i32(-2), r"partition array is negative \(-2\)", "partitions-negative"),
    malformed(7, LEGACY_T + i32(1) + i32(0) + i32(-2), "records length -2", "records-negative"),
    # null where the schema allows none
    malformed(7, LEGACY + i32(-1), "topic array " + NOT_NULLABLE, "legacy-null-topic-array"),
    malformed(10, FLEXIBLE + b"\x00", "topic array " + NOT_NULLABLE, "compact-null-topic-array"),
    malformed(13, FLEXIBLE + b"\x00", "topic array " + NOT_NULLABLE, "v13-null-topic-array"),
    malformed(7, LEGACY + i32(1) + i16(-1) + i32(0), "null topic name", "legacy-null-name"),
    malformed(10, FLEXIBLE + b"\x02\x00\x01\x00", "null topic name", "compact-null-name"),
    malformed(7, LEGACY_T + i32(-1), "partition array " + NOT_NULLABLE, "legacy-null-partitions"),
    malformed(
        10, FLEXIBLE_T + b"\x00\x00\x00", "partition array " + NOT_NULLABLE, "null-partitions"
    ),
    # not text
    malformed(7, LEGACY + i32(1) + i16(1) + b"\xff" + i32(0), "not UTF-8", "legacy-name-not-utf-8"),
    malformed(10, b"\x02\xff" + i16(-1) + i32(0) + b"\x01\x00", "not UTF-8", "txn-not-utf-8"),
    # too short
    malformed(7, b"", "ends inside", "legacy-empty"),
    malformed(10, b"", "ends inside", "flexible-empty"),
    malformed(
        13,
        # two topics: the first holds one partition of ten bytes, the second is cut short
        FLEXIBLE + b"\x03" + bytes(16) + b"\x02" + i32(0) + b"\x0b" + bytes(12) + bytes(15),
        "ends inside a topic id",
        "v13-short-topic-id",
    ),
]


@pytest.mark.parametrize(("version", "payload", "message"), MALFORMED)
def test_malformed_payloads_are_refused_without_allocating(
    version: int, payload: bytes, message: str
) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(UndecodableRequest, match=message) as refused:
            decode_produce_request(payload, 0, version)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < ALLOCATION_LIMIT
    assert str(refused.value).startswith(f"Produce v{version} body does not decode: ")


@pytest.mark.parametrize("version", [2, 14, -1])
def test_versions_outside_3_to_13_are_refused(version: int) -> None:
    with pytest.raises(UndecodableRequest, match="reads v3-v13"):
        decode_produce_request(one_partition_request(9)[1], 0, version)


TRUNCATED_FRAMES = [
    "aiokafka-0.14/025-Produce-v7-request.bin",  # transactional, 4 partitions
    "kafka-python-3.0/009-Produce-v9-request.bin",
    "java-4.0/042-Produce-v10-request.bin",  # transactional, 4 partitions
    "librdkafka-2.16/010-Produce-v10-request.bin",
]


@pytest.mark.parametrize("file", TRUNCATED_FRAMES)
def test_a_recorded_request_cut_at_any_byte_is_refused(file: str) -> None:
    frame = memoryview(vectors.frame_bytes(file)).toreadonly()
    _, offset = decode_header(frame)
    version = vectors.by_file()[file]["api_version"]
    for end in range(offset, len(frame)):
        with pytest.raises(UndecodableRequest):
            decode_produce_request(frame[:end], offset, version)


@st.composite
def mutated_produce_frames(draw: st.DrawFn) -> bytes:
    entry = draw(st.sampled_from(PRODUCE_FRAMES))
    original = vectors.frame_bytes(entry)
    _, offset = decode_header(original)
    frame = bytearray(original)
    # Mostly the structure before the first records, where the lengths and counts are.
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(offset, min(len(frame) - 1, offset + 80)))
        frame[position] = draw(st.integers(0, 255))
    return bytes(frame)


@settings(max_examples=500, deadline=None)
@given(frame=mutated_produce_frames())
@example(frame=request_header(ApiKey.PRODUCE, 10, 1) + FLEXIBLE + HUGE_COMPACT)
def test_any_bytes_decode_as_kio_decodes_them_or_are_refused(frame: bytes) -> None:
    header, offset = decode_header(frame)
    version = header.api_version
    try:
        ours, size = decode_produce_request(frame, offset, version)
    except UndecodableRequest:
        ours = None
    view = memoryview(frame).toreadonly()
    try:
        # The lead's structure check makes kio safe to call on these bytes.
        request_check(ApiKey.PRODUCE, version)(view, offset, len(view))
        expected, kio_size = kio_decode(view, offset, version)
    except Exception:  # kio refuses: unknown tags, or a refusal of our own is expected
        return
    assert ours is not None, "kio decodes this payload, the fast decoder must too"
    assert size == kio_size
    assert_same(version, ours, expected)


def test_a_hostile_produce_request_is_refused_in_process() -> None:
    # The request that would make kio 0.6.5's reader allocate 128 GiB and abort.
    frame = request_header(ApiKey.PRODUCE, 10, 1) + FLEXIBLE + HUGE_COMPACT
    with pytest.raises(UndecodableRequest, match="topic count 17179869184"):
        decode_request(memoryview(frame).toreadonly(), KAFKA_4_RANGES)


# --- through the broker -------------------------------------------------------------------


def produce(broker: Broker, version: int, topic: str | uuid.UUID, records: bytes) -> Any:
    """The topic response to a request for partition 0 of `topic`, answered by `broker`."""
    body, _ = one_partition_request(version, records, topic=topic)
    answer = dispatch_of(broker).answer(request_frame(ApiKey.PRODUCE, version, body), SESSION)
    assert answer is not None
    _, response = decode_response(ApiKey.PRODUCE, version, answer)
    (topic_response,) = response.responses
    return topic_response


def test_a_zero_topic_id_is_answered_unknown_topic_id() -> None:
    # kio reads the zero UUID as None, which the Produce response cannot carry; the fast
    # decoder keeps the UUID, so the broker answers as Kafka does.
    topic = produce(Broker(Config()), 13, ZERO_UUID, record_batch(1))
    assert topic.topic_id is None  # kio's reading of the zero UUID the broker echoed
    assert topic.partition_responses[0].error_code is ErrorCode.unknown_topic_id


def test_the_null_sink_checks_the_crc_of_records_handed_over_as_a_memoryview() -> None:
    broker = Broker(Config(verify_crc=True))
    batch = record_batch(3)
    corrupt = batch[:-1] + bytes([batch[-1] ^ 0xFF])
    answers = [
        produce(broker, 10, "t", records).partition_responses[0].error_code
        for records in (batch, corrupt)
    ]
    assert answers == [ErrorCode.none, ErrorCode.corrupt_message]
    assert broker.stats.produced[("t", 0)].records == 3
