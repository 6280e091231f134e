"""The fixed frame set that perf/codec_bench.py replays.

Recorded frames come from tests/vectors/frames (real clients against librdkafka's mock; see
its README). The set covers what a broker decodes and encodes most: ApiVersions, Metadata,
Produce (about 15 and 16 records of 1 KiB per batch from Java and kcat, one batch of 9 from
librdkafka, in every compression the recordings have), Fetch requests and responses carrying
1 KiB records, the classic group APIs, ListOffsets and InitProducerId.

Three things were never recorded and are built here with kio's generic writers, marked
`client="built"`:
- CreateTopics: no client sent it to the mock (its controller id is not one of its brokers);
  built as Java 4.0's Admin sends it (v7) with a broker's answer.
- Produce with 1 record: every recorded Produce holds 4 or more records per batch; built as
  Java's idempotent producer sends it (v10, one 1 KiB record of random A-Z), with its answer.
  Uncompressed only: kio keeps `records` as opaque bytes, so decoding a compressed batch costs
  the same as an uncompressed one of its size, and the recorded sets cover the codecs.

Two recorded Metadata responses (v12 from Java, v13 from librdkafka) end with one stray zero
byte, a quirk of the mock (tests/codec/test_codec_frames.py lists it); they are used without it,
so that current Metadata versions are measured too.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, cast

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from codec.apis import (
    api_name,
    request_header_version,
    response_header_version,
    response_schema,
)
from codec.entities import request_module, response_module
from codec.messages import encode_request
from tests.support.vectors import by_file, frame_bytes

Direction = Literal["request", "response"]


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of the set: its bytes (no size prefix) and what they are."""

    file: str
    """Path under tests/vectors/frames, or `built/<name>.bin` for a frame built here."""
    client: str
    api: str
    api_key: int
    version: int
    direction: Direction
    correlation_id: int
    data: bytes
    note: str

    @property
    def header_version(self) -> int:
        if self.direction == "request":
            return request_header_version(self.api_key, self.version)
        return response_header_version(self.api_key, self.version)


@dataclass(frozen=True, slots=True)
class Pick:
    """A recorded request (and by default its response) taken into the set."""

    request_file: str
    note: str
    with_response: bool = True
    response_trailing_bytes: int = 0
    """Stray bytes the mock wrote after the response body, cut off before use."""


_PRODUCE_JAVA = "Java producer-perf, 1 KiB random A-Z, ~15 records per 16 KiB batch"
_PRODUCE_RDKAFKA = "librdkafka, 1 batch of 9 text-like 1 KiB records"

PICKS: tuple[Pick, ...] = (
    # ApiVersions: the retry after KIP-511, librdkafka's v3 and its v0 fallback.
    Pick("java-4.0/001-ApiVersions-v4-request.bin", "Java's first ApiVersions", False),
    Pick("java-4.0/002-ApiVersions-v2-request.bin", "Java's retry after the v0 fallback"),
    Pick("librdkafka-2.16/001-ApiVersions-v3-request.bin", "librdkafka's first", False),
    Pick("librdkafka-2.16/002-ApiVersions-v0-request.bin", "librdkafka's retry"),
    # Metadata: current versions (stray byte cut) and the old ones kcat and aiokafka use.
    Pick("java-4.0/003-Metadata-v12-request.bin", "Java producer, 1 topic", True, 1),
    Pick("librdkafka-2.16/003-Metadata-v13-request.bin", "librdkafka producer", True, 1),
    Pick("kcat-1.7/004-Metadata-v4-request.bin", "kcat -L, all topics"),
    Pick("aiokafka-0.14/003-Metadata-v5-request.bin", "aiokafka producer"),
    # Produce, in every compression recorded.
    Pick("java-4.0/007-Produce-v10-request.bin", f"{_PRODUCE_JAVA}, none, 2 partitions"),
    Pick("java-4.0/008-Produce-v10-request.bin", f"{_PRODUCE_JAVA}, gzip, 2 partitions"),
    Pick("java-4.0/012-Produce-v10-request.bin", f"{_PRODUCE_JAVA}, snappy, 4 partitions"),
    Pick("java-4.0/014-Produce-v10-request.bin", f"{_PRODUCE_JAVA}, lz4, 4 partitions"),
    Pick("java-4.0/015-Produce-v10-request.bin", f"{_PRODUCE_JAVA}, zstd, 4 partitions"),
    Pick("kcat-1.7/008-Produce-v7-request.bin", "kcat, 1 batch of 16 records of 1 KiB, none"),
    Pick("librdkafka-2.16/042-Produce-v10-request.bin", f"{_PRODUCE_RDKAFKA}, none"),
    Pick("librdkafka-2.16/010-Produce-v10-request.bin", f"{_PRODUCE_RDKAFKA}, gzip"),
    Pick("librdkafka-2.16/016-Produce-v10-request.bin", f"{_PRODUCE_RDKAFKA}, snappy"),
    Pick("librdkafka-2.16/018-Produce-v10-request.bin", f"{_PRODUCE_RDKAFKA}, lz4"),
    Pick("librdkafka-2.16/019-Produce-v10-request.bin", f"{_PRODUCE_RDKAFKA}, zstd"),
    # Fetch: responses full of 1 KiB records, and an empty one at the log end.
    Pick("java-4.0/023-Fetch-v16-request.bin", "Java consumer-perf, 1 KiB records"),
    Pick("java-4.0/025-Fetch-v16-request.bin", "Java consumer-perf at the log end"),
    Pick("librdkafka-2.16/029-Fetch-v16-request.bin", "librdkafka consumer, 1 KiB records"),
    Pick("kcat-1.7/014-Fetch-v11-request.bin", "kcat -C, 1 KiB records"),
    Pick("kafka-python-3.0/017-Fetch-v12-request.bin", "kafka-python, 1 KiB records"),
    Pick("aiokafka-0.14/015-Fetch-v11-request.bin", "aiokafka, 1 KiB records"),
    # The classic group APIs, from Java's consumer-perf and librdkafka's group consumer.
    Pick("java-4.0/018-FindCoordinator-v3-request.bin", "Java consumer-perf"),
    Pick("java-4.0/019-JoinGroup-v5-request.bin", "Java consumer-perf"),
    Pick("java-4.0/020-SyncGroup-v3-request.bin", "Java consumer-perf"),
    Pick("java-4.0/021-OffsetFetch-v6-request.bin", "Java consumer-perf"),
    Pick("java-4.0/026-OffsetCommit-v9-request.bin", "Java consumer-perf"),
    Pick("java-4.0/027-LeaveGroup-v1-request.bin", "Java consumer-perf"),
    Pick("java-4.0/051-Heartbeat-v3-request.bin", "Java consumer"),
    Pick("java-4.0/056-ListGroups-v5-request.bin", "Java Admin", False),
    Pick("java-4.0/057-DescribeGroups-v5-request.bin", "Java Admin", False),
    Pick("java-4.0/058-DeleteGroups-v2-request.bin", "Java Admin", False),
    Pick("librdkafka-2.16/022-FindCoordinator-v2-request.bin", "librdkafka group consumer"),
    Pick("librdkafka-2.16/023-JoinGroup-v5-request.bin", "librdkafka group consumer"),
    Pick("librdkafka-2.16/024-SyncGroup-v3-request.bin", "librdkafka group consumer"),
    Pick("librdkafka-2.16/025-Heartbeat-v3-request.bin", "librdkafka group consumer"),
    Pick("librdkafka-2.16/026-OffsetFetch-v6-request.bin", "librdkafka group consumer"),
    Pick("librdkafka-2.16/030-OffsetCommit-v9-request.bin", "librdkafka group consumer"),
    Pick("librdkafka-2.16/033-LeaveGroup-v1-request.bin", "librdkafka group consumer"),
    # ListOffsets and InitProducerId.
    Pick("java-4.0/022-ListOffsets-v7-request.bin", "Java consumer-perf"),
    Pick("librdkafka-2.16/027-ListOffsets-v7-request.bin", "librdkafka consumer"),
    Pick("kcat-1.7/012-ListOffsets-v2-request.bin", "kcat -C"),
    Pick("java-4.0/004-InitProducerId-v4-request.bin", "Java idempotent producer"),
    Pick("librdkafka-2.16/020-InitProducerId-v4-request.bin", "librdkafka idempotent producer"),
    Pick("aiokafka-0.14/007-InitProducerId-v0-request.bin", "aiokafka idempotent producer"),
)


def fixed_set() -> list[Frame]:
    """Every frame of the set, recorded ones first, each request before its response."""
    return [*_recorded(), *_built()]


@cache
def _recorded() -> tuple[Frame, ...]:
    entries = by_file()
    frames: list[Frame] = []
    for pick in PICKS:
        request = entries[pick.request_file]
        frames.append(_recorded_frame(request, frame_bytes(request), pick.note))
        if pick.with_response:
            response = entries[request["response_file"]]
            data = frame_bytes(response)
            note = pick.note
            if pick.response_trailing_bytes:
                data = data[: -pick.response_trailing_bytes]
                note = f"{note} (mock's {pick.response_trailing_bytes} stray byte cut)"
            frame = _recorded_frame(response, data, note)
            if frame.api_key == _PRODUCE:
                frame = _without_log_append_time(frame)
            frames.append(frame)
    return tuple(frames)


def _without_log_append_time(frame: Frame) -> Frame:
    """The mock answers Produce with a log append time of 1234 ms; a broker whose topics use
    CreateTime (Kafka's default, and nullbroker's) answers -1, and codec's Produce encoder
    writes -1. Re-encoded by kio with -1, so that both encoders can answer it exactly."""
    body = kio_decode_response(frame)
    responses = tuple(
        dataclasses.replace(
            topic,
            partition_responses=tuple(
                dataclasses.replace(partition, log_append_time=None)
                for partition in topic.partition_responses
            ),
        )
        for topic in body.responses
    )
    data = kio_encode_response(
        frame.api_key,
        frame.version,
        frame.correlation_id,
        dataclasses.replace(body, responses=responses),
    )
    if data == frame.data:
        return frame
    return dataclasses.replace(
        frame, data=data, note=f"{frame.note} (mock's log append time set to -1)"
    )


def _recorded_frame(entry: dict[str, Any], data: bytes, note: str) -> Frame:
    return Frame(
        file=entry["file"],
        client=entry["client"],
        api=entry["api_name"],
        api_key=entry["api_key"],
        version=entry["api_version"],
        direction=entry["direction"],
        correlation_id=entry["correlation_id"],
        data=data,
        note=note,
    )


# -- kio's generic path, also used to build the frames nobody recorded ----------------------


def kio_decode_response(frame: Frame) -> Any:
    """The body entity of a response frame, read by kio (codec decodes no responses: a
    broker never reads one)."""
    header_type = ResponseHeaderV1 if frame.header_version else ResponseHeaderV0
    _header, header_size = entity_reader(header_type)(frame.data, 0)
    body, body_size = entity_reader(response_schema(frame.api_key, frame.version))(
        frame.data, header_size
    )
    if header_size + body_size != len(frame.data):
        raise ValueError(f"{frame.file}: {len(frame.data) - header_size - body_size} bytes left")
    return body


def kio_encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A response frame (no size prefix) written by kio's generic writers."""
    header_type = (
        ResponseHeaderV1 if response_header_version(api_key, version) else ResponseHeaderV0
    )
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header_type(correlation_id=i32(correlation_id)))
    entity_writer(response_schema(api_key, version))(buffer, body)
    return buffer.getvalue()


# -- the frames built here ------------------------------------------------------------------

_CREATE_TOPICS = 19
_PRODUCE = 0
_JAVA_CLIENT_ID = "perf-producer-client"
_RECORD_SIZE = 1024


@cache
def _built() -> tuple[Frame, ...]:
    return (*_create_topics(), *_produce_one_record())


def _built_pair(
    name: str, api_key: int, version: int, client_id: str, request: Any, response: Any, note: str
) -> tuple[Frame, Frame]:
    correlation_id = 7

    def frame(direction: Direction, data: bytes) -> Frame:
        return Frame(
            file=f"built/{name}-v{version}-{direction}.bin",
            client="built",
            api=api_name(api_key),
            api_key=api_key,
            version=version,
            direction=direction,
            correlation_id=correlation_id,
            data=data,
            note=note,
        )

    return (
        frame("request", encode_request(request, correlation_id, client_id)),
        frame("response", kio_encode_response(api_key, version, correlation_id, response)),
    )


def _create_topics() -> tuple[Frame, Frame]:
    """CreateTopics v7 as Java 4.0's Admin sends it (one topic, 4 partitions, default
    replication, no configs) and a broker's success answer."""
    version = 7
    request_types = request_module(_CREATE_TOPICS, version)
    response_types = response_module(_CREATE_TOPICS, version)
    request = request_types.CreateTopicsRequest(
        topics=(
            request_types.CreatableTopic(
                name="perf",
                num_partitions=4,
                replication_factor=-1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=datetime.timedelta(seconds=30),
        validate_only=False,
    )
    response = response_types.CreateTopicsResponse(
        throttle_time=datetime.timedelta(0),
        topics=(
            response_types.CreatableTopicResult(
                name="perf",
                topic_id=uuid.UUID("5a1e7c3b-0f6d-4b8e-9a2c-1d3e5f7a9b0c"),
                error_code=ErrorCode.none,
                error_message=None,
                topic_config_error_code=0,
                num_partitions=4,
                replication_factor=1,
                configs=None,
            ),
        ),
    )
    return _built_pair(
        "CreateTopics",
        _CREATE_TOPICS,
        version,
        "adminclient-1",
        request,
        response,
        "not recorded: built with kio as Java 4.0's Admin sends it",
    )


def _produce_one_record() -> tuple[Frame, Frame]:
    """Produce v10 with one idempotent batch of one 1 KiB record, and its answer."""
    version = 10
    value = bytes(random.Random(0).choices(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=_RECORD_SIZE))
    batch = io.BytesIO()
    write_new_batch(
        batch,
        NewRecordBatch(
            producer_id=i64(1000),
            producer_epoch=i16(0),
            base_sequence=i32(0),
            attributes=i16(0),
            records=(
                Record(
                    attributes=i8(0),
                    timestamp=cast(
                        TZAwareMicros, datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
                    ),
                    offset=i64(0),
                    key=None,
                    value=value,
                    headers=(),
                ),
            ),
        ),
    )
    request_types = request_module(_PRODUCE, version)
    response_types = response_module(_PRODUCE, version)
    request = request_types.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            request_types.TopicProduceData(
                name="perf",
                partition_data=(
                    request_types.PartitionProduceData(index=0, records=batch.getvalue()),
                ),
            ),
        ),
    )
    response = response_types.ProduceResponse(
        responses=(
            response_types.TopicProduceResponse(
                name="perf",
                partition_responses=(
                    response_types.PartitionProduceResponse(
                        index=0,
                        error_code=ErrorCode.none,
                        base_offset=0,
                        log_append_time=None,
                        log_start_offset=0,
                        record_errors=(),
                        error_message=None,
                        current_leader=response_types.LeaderIdAndEpoch(
                            leader_id=-1, leader_epoch=-1
                        ),
                    ),
                ),
            ),
        ),
        throttle_time=datetime.timedelta(0),
        node_endpoints=(),
    )
    return _built_pair(
        "Produce-1-record",
        _PRODUCE,
        version,
        _JAVA_CLIENT_ID,
        request,
        response,
        "not recorded: built with kio, Java idempotent producer, 1 record of 1 KiB, none",
    )
