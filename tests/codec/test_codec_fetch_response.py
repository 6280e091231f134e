"""codec.fetch_response writes Fetch responses byte-identical to kio's generic writer, with
the record batches handed on as they are."""

from __future__ import annotations

import datetime
import io
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from codec import ApiKey, RequestHeader, encode_response, encode_response_parts
from codec.apis import response_schema, response_writer
from codec.entities import make, response_module
from codec.fetch_response import (
    EMPTY_ABORTED,
    FetchPartition,
    FetchTopic,
    NodeEndpoint,
    fetch_response_parts,
    with_throttle,
)

VERSIONS = range(4, 19)
ERROR_CODES = [code.value for code in ErrorCode]
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Batches around the one-, two- and three-byte varint boundaries of a records length.
BATCHES = st.lists(st.binary(max_size=140) | st.integers(16_300, 16_500).map(bytearray), max_size=3)

partitions = st.builds(
    FetchPartition,
    partition=INT32,
    error_code=st.sampled_from(ERROR_CODES),
    high_watermark=INT64,
    last_stable_offset=INT64,
    log_start_offset=INT64,
    records=BATCHES,
    aborted=st.lists(st.tuples(INT64, INT64), max_size=3) | st.just(EMPTY_ABORTED),
    size=st.just(-1),
    # A leader is a node id (never -1 with -1, the field's default, which is not written).
    current_leader=st.none() | st.tuples(st.integers(0, 2**31 - 1), INT32),
).flatmap(
    # The records' size counted by the encoder (-1) or given by the caller, as the broker does.
    lambda partition: st.sampled_from(
        [partition, partition._replace(size=sum(map(len, partition.records)))]
    )
)


ENDPOINTS = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.text(max_size=20), INT32), max_size=3)


@st.composite
def fetch_responses(draw: st.DrawFn) -> tuple[int, list[FetchTopic], bool, list[NodeEndpoint]]:
    version = draw(st.sampled_from(VERSIONS))
    name: st.SearchStrategy[Any] = st.uuids() | st.none() if version >= 13 else st.text(max_size=30)
    topics = draw(st.lists(st.tuples(name, st.lists(partitions, max_size=4)), max_size=3))
    return version, topics, draw(st.booleans()), draw(ENDPOINTS)


def _aborted_listed(partition: FetchPartition, read_committed: bool) -> bool:
    """Whether the aborted transactions are a list (else null): as Kafka, a partition in
    error has null ones, unless it was set aside before reading (EMPTY_ABORTED); otherwise
    a read_committed consumer gets the list."""
    if partition.error_code != 0:
        if partition.aborted is EMPTY_ABORTED:
            return True
        return read_committed and bool(partition.aborted)
    return read_committed


def kio_encoding(
    version: int,
    topics: list[FetchTopic],
    read_committed: bool,
    throttle_ms: int = 0,
    endpoints: list[NodeEndpoint] | None = None,
) -> bytes:
    """The same response as a kio entity, written by kio's writer (which writes a tagged
    field only where its value is not the default, and the fields a version has)."""
    types = response_module(ApiKey.FETCH, version)
    leader_type = getattr(types, "LeaderIdAndEpoch", None)
    endpoint_type = getattr(types, "NodeEndpoint", None)
    body = make(
        types.FetchResponse,
        node_endpoints=tuple(
            make(endpoint_type, node_id=node_id, host=host, port=port, rack=None)
            for node_id, host, port in (endpoints or () if endpoint_type is not None else ())
        ),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            make(
                types.FetchableTopicResponse,
                topic=topic,
                topic_id=topic,
                partitions=tuple(
                    make(
                        types.PartitionData,
                        partition_index=partition.partition,
                        error_code=ErrorCode(partition.error_code),
                        high_watermark=partition.high_watermark,
                        last_stable_offset=partition.last_stable_offset,
                        log_start_offset=partition.log_start_offset,
                        aborted_transactions=tuple(
                            make(
                                types.AbortedTransaction,
                                producer_id=producer_id,
                                first_offset=first_offset,
                            )
                            for producer_id, first_offset in partition.aborted
                        )
                        if _aborted_listed(partition, read_committed)
                        else None,
                        preferred_read_replica=-1,
                        records=b"".join(partition.records),
                        **_leader(leader_type, partition.current_leader),
                    )
                    for partition in partitions
                ),
            )
            for topic, partitions in topics
        ),
    )
    buffer = io.BytesIO()
    response_writer(ApiKey.FETCH, version)(buffer, body)
    return buffer.getvalue()


def _leader(leader_type: Any, leader: tuple[int, int] | None) -> dict[str, Any]:
    """A partition's current_leader field, where there is one to tell (else its default)."""
    if leader is None or leader_type is None:
        return {}
    return {"current_leader": make(leader_type, leader_id=leader[0], leader_epoch=leader[1])}


@settings(max_examples=400, deadline=None)
@given(fetch_responses())
def test_the_fast_fetch_response_equals_kios_bytes(
    case: tuple[int, list[FetchTopic], bool, list[NodeEndpoint]],
) -> None:
    version, topics, read_committed, endpoints = case
    parts = fetch_response_parts(
        version, topics, read_committed=read_committed, node_endpoints=endpoints
    )
    assert b"".join(parts) == kio_encoding(version, topics, read_committed, endpoints=endpoints)


@settings(max_examples=200, deadline=None)
@given(fetch_responses(), st.integers(1, 2**31 - 1))
def test_a_throttled_fetch_response_is_kios_with_that_throttle_time(
    case: tuple[int, list[FetchTopic], bool, list[NodeEndpoint]], throttle_ms: int
) -> None:
    version, topics, read_committed, endpoints = case
    parts = with_throttle(
        fetch_response_parts(
            version, topics, read_committed=read_committed, node_endpoints=endpoints
        ),
        throttle_ms,
    )
    assert b"".join(parts) == kio_encoding(version, topics, read_committed, throttle_ms, endpoints)


def test_the_batches_are_handed_on_as_they_are_not_copied() -> None:
    batches = [bytearray(b"a" * 300), bytearray(b"b" * 200)]
    topic = ("t", [FetchPartition(0, 0, 10, 10, 0, batches)])
    for version in VERSIONS:
        named: FetchTopic = (uuid.uuid4(), topic[1]) if version >= 13 else topic
        parts = fetch_response_parts(version, [named])
        for batch in batches:
            assert any(part is batch for part in parts), version


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_response_joins_the_parts_into_one_frame_kio_reads(version: int) -> None:
    topic: FetchTopic = (
        uuid.uuid4() if version >= 13 else "t",
        [FetchPartition(3, 0, 10, 10, 0, [b"x" * 200, b"y" * 100])],
    )
    parts = fetch_response_parts(version, [topic])
    frame = encode_response(RequestHeader(ApiKey.FETCH, version, 42, None), parts)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header_size = 5 if version >= 12 else 4
    assert int.from_bytes(frame[4:8], "big") == 42
    body, size = entity_reader(response_schema(ApiKey.FETCH, version))(frame, 4 + header_size)
    assert 4 + header_size + size == len(frame)
    (partition,) = body.responses[0].partitions
    assert partition.records == b"x" * 200 + b"y" * 100


def test_the_frame_as_parts_holds_the_batches_themselves_and_joins_to_the_frame() -> None:
    batches = [bytearray(b"a" * 300), bytearray(b"b" * 200)]
    parts = fetch_response_parts(16, [(uuid.uuid4(), [FetchPartition(0, 0, 2, 2, 0, batches)])])
    header = RequestHeader(ApiKey.FETCH, 16, 9, None)
    frame_parts = encode_response_parts(header, parts)
    assert b"".join(frame_parts) == encode_response(header, parts)
    assert all(any(part is batch for part in frame_parts) for batch in batches)
    # Any other body is the one frame encode_response writes.
    assert encode_response_parts(header, b"body") == [encode_response(header, b"body")]


@pytest.mark.parametrize("version", [3, 19])
def test_versions_outside_4_to_18_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match="not served"):
        fetch_response_parts(version, [])
