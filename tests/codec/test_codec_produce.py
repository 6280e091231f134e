"""codec.produce's hand-written Produce response is byte-identical to kio's generic writer."""

from __future__ import annotations

import datetime
import io
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from codec.apis import response_writer
from codec.entities import make, response_module
from codec.produce import (
    PartitionResult,
    TopicResults,
    encode_produce_response_body,
    with_throttle,
)

ERROR_CODES = [code.value for code in ErrorCode]
ONE_MS = datetime.timedelta(milliseconds=1)
INT64 = st.integers(-(2**63), 2**63 - 1)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
LAST_DATETIME_MS = int((datetime.datetime.max.replace(tzinfo=datetime.UTC) - EPOCH) // ONE_MS)

partition_results = st.builds(
    PartitionResult,
    partition=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from(ERROR_CODES),
    base_offset=INT64,
    log_start_offset=INT64,
    error_message=st.none() | st.text(max_size=40),
    # -1, or a time kio can write (a datetime): a retry's recorded batch timestamp
    log_append_time=st.just(-1) | st.integers(0, LAST_DATETIME_MS),
)


@st.composite
def produce_responses(draw: st.DrawFn) -> tuple[int, list[TopicResults]]:
    version = draw(st.integers(3, 13))
    name = st.uuids() if version >= 13 else st.text(min_size=1, max_size=30)
    topics = draw(st.lists(st.tuples(name, st.lists(partition_results, max_size=4)), max_size=4))
    return version, topics


def kio_encoding(version: int, topics: list[TopicResults], throttle_ms: int = 0) -> bytes:
    types = response_module(0, version)
    body: Any = make(
        types.ProduceResponse,
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        responses=tuple(
            make(
                types.TopicProduceResponse,
                name=None if isinstance(topic, uuid.UUID) else topic,
                topic_id=topic if isinstance(topic, uuid.UUID) else None,
                partition_responses=tuple(
                    make(
                        types.PartitionProduceResponse,
                        index=result.partition,
                        error_code=ErrorCode(result.error_code),
                        base_offset=result.base_offset,
                        log_append_time=None
                        if result.log_append_time == -1
                        else EPOCH + result.log_append_time * ONE_MS,
                        log_start_offset=result.log_start_offset,
                        record_errors=(),
                        # Versions before 8 have no error message to carry.
                        error_message=result.error_message,
                    )
                    for result in partitions
                ),
            )
            for topic, partitions in topics
        ),
    )
    buffer = io.BytesIO()
    response_writer(0, version)(buffer, body)
    return buffer.getvalue()


@settings(max_examples=300, deadline=None)
@given(produce_responses())
def test_the_fast_produce_response_equals_kios_bytes(case: tuple[int, list[TopicResults]]) -> None:
    version, topics = case
    assert encode_produce_response_body(version, topics) == kio_encoding(version, topics)


@settings(max_examples=200, deadline=None)
@given(produce_responses(), st.integers(1, 2**31 - 1))
def test_a_throttled_produce_response_is_kios_with_that_throttle_time(
    case: tuple[int, list[TopicResults]], throttle_ms: int
) -> None:
    version, topics = case
    throttled = with_throttle(encode_produce_response_body(version, topics), version, throttle_ms)
    assert throttled == kio_encoding(version, topics, throttle_ms)


def test_every_produce_version_is_covered_with_a_typical_response() -> None:
    for version in range(3, 14):
        topic: str | uuid.UUID = uuid.uuid5(uuid.NAMESPACE_DNS, "t") if version >= 13 else "t"
        topics: list[TopicResults] = [(topic, [PartitionResult(0, 0, 42, 0)])]
        assert encode_produce_response_body(version, topics) == kio_encoding(version, topics)
