"""codec.share_fetch_response writes ShareFetch responses byte-identical to kio's generic
writer, with the record batches handed on as they are."""

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

from codec import ApiKey, RequestHeader, encode_response
from codec.apis import response_schema, response_writer
from codec.entities import make, response_module
from codec.share_fetch_response import (
    NodeEndpoint,
    ShareFetchTopic,
    SharePartitionAnswer,
    share_fetch_response_parts,
)
from tests.codec.test_codec_fetch_response import BATCHES, ENDPOINTS, INT32, INT64

VERSIONS = (1, 2)
ERROR_CODES = st.sampled_from([code.value for code in ErrorCode])
INT16 = st.integers(-(2**15), 2**15 - 1)

partitions = st.builds(
    SharePartitionAnswer,
    partition=INT32,
    error_code=ERROR_CODES,
    acknowledge_error_code=ERROR_CODES,
    current_leader=st.tuples(INT32, INT32),
    records=BATCHES,
    acquired=st.lists(st.tuples(INT64, INT64, INT16), max_size=140),
)


@st.composite
def share_fetch_responses(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "version": draw(st.sampled_from(VERSIONS)),
        "topics": draw(
            st.lists(
                st.tuples(st.uuids() | st.none(), st.lists(partitions, max_size=4)), max_size=3
            )
        ),
        "lock_ms": draw(INT32),
        "error_code": draw(ERROR_CODES),
        "error_message": draw(st.none() | st.text(max_size=30)),
        "throttle_time_ms": draw(st.integers(0, 2**31 - 1)),
        "node_endpoints": draw(ENDPOINTS),
    }


def kio_encoding(
    version: int,
    topics: list[ShareFetchTopic],
    lock_ms: int,
    error_code: int,
    error_message: str | None,
    throttle_time_ms: int,
    node_endpoints: list[NodeEndpoint],
) -> bytes:
    """The same response as a kio entity, written by kio's writer."""
    types = response_module(ApiKey.SHARE_FETCH, version)
    body = make(
        types.ShareFetchResponse,
        throttle_time=datetime.timedelta(milliseconds=throttle_time_ms),
        error_code=ErrorCode(error_code),
        error_message=error_message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=tuple(
            make(
                types.ShareFetchableTopicResponse,
                topic_id=topic_id,
                partitions=tuple(
                    make(
                        types.PartitionData,
                        partition_index=answer.partition,
                        error_code=ErrorCode(answer.error_code),
                        error_message=None,
                        acknowledge_error_code=answer.acknowledge_error_code,
                        acknowledge_error_message=None,
                        current_leader=make(
                            types.LeaderIdAndEpoch,
                            leader_id=answer.current_leader[0],
                            leader_epoch=answer.current_leader[1],
                        ),
                        records=b"".join(answer.records),
                        acquired_records=tuple(
                            make(
                                types.AcquiredRecords,
                                first_offset=first,
                                last_offset=last,
                                delivery_count=count,
                            )
                            for first, last, count in answer.acquired
                        ),
                    )
                    for answer in partitions
                ),
            )
            for topic_id, partitions in topics
        ),
        node_endpoints=tuple(
            make(types.NodeEndpoint, node_id=node_id, host=host, port=port, rack=None)
            for node_id, host, port in node_endpoints
        ),
    )
    buffer = io.BytesIO()
    response_writer(ApiKey.SHARE_FETCH, version)(buffer, body)
    return buffer.getvalue()


@settings(max_examples=400, deadline=None)
@given(share_fetch_responses())
def test_the_hand_written_share_fetch_response_equals_kios_bytes(case: dict[str, Any]) -> None:
    version, topics = case.pop("version"), case.pop("topics")
    parts = share_fetch_response_parts(version, topics, **case)
    assert b"".join(parts) == kio_encoding(version, topics, **case)


def test_the_batches_are_handed_on_as_they_are_not_copied() -> None:
    batches = [bytearray(b"a" * 300), bytearray(b"b" * 200)]
    answer = SharePartitionAnswer(0, records=batches, acquired=[(0, 9, 1)])
    for version in VERSIONS:
        parts = share_fetch_response_parts(version, [(uuid.uuid4(), [answer])], lock_ms=30_000)
        for batch in batches:
            assert any(part is batch for part in parts), version


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_response_joins_the_parts_into_one_frame_kio_reads(version: int) -> None:
    topic_id = uuid.uuid4()
    answer = SharePartitionAnswer(3, records=[b"x" * 200, b"y" * 100], acquired=[(5, 7, 2)])
    parts = share_fetch_response_parts(version, [(topic_id, [answer])], lock_ms=15_000)
    frame = encode_response(RequestHeader(ApiKey.SHARE_FETCH, version, 42, None), parts)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 42
    body, size = entity_reader(response_schema(ApiKey.SHARE_FETCH, version))(frame, 4 + 5)
    assert 4 + 5 + size == len(frame)
    assert body.acquisition_lock_timeout == datetime.timedelta(milliseconds=15_000)
    (partition,) = body.responses[0].partitions
    assert body.responses[0].topic_id == topic_id
    assert partition.records == b"x" * 200 + b"y" * 100
    (run,) = partition.acquired_records
    assert (run.first_offset, run.last_offset, run.delivery_count) == (5, 7, 2)


def test_versions_not_served_are_refused() -> None:
    with pytest.raises(ValueError, match="v0"):
        share_fetch_response_parts(0, [], lock_ms=0)
