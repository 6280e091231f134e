"""Fetch through Dispatch.answer, in-process: which batches a response holds, its limits and
errors, the fetched counters, long-polling at the log end, and Java's recorded requests."""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import io
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from kio.records.readers import read_batch
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_writer

from codec import ApiKey, decode_request, iter_batches
from codec.apis import response_schema
from codec.entities import make
from nullbroker.broker import Broker
from nullbroker.handlers import served_ranges
from nullbroker.settings import Config
from nullbroker.sources.synthetic import SourceSpec, key_pattern, value_pattern
from nullbroker.state.topics import Topic
from tests.handlers.test_handlers import list_offsets, produce
from tests.support.kio_calls import (
    SESSION,
    answered,
    call,
    decode_response,
    dispatch_of,
    record_batch,
    request_frame,
    types,
)
from tests.support.vectors import by_file, frame_bytes

# Version 4 (the oldest served), 11 (sessions, rack), 12 (first flexible), 13 (topic ids),
# 16 (Java 4.0's), 18 (the newest).
VERSIONS = [4, 11, 12, 13, 16, 18]
BY_NAME = [v for v in VERSIONS if v < 13]
BY_ID = [v for v in VERSIONS if v >= 13]
RECORDS = 5_000
MIB = 1024 * 1024
# Fetch waits are short and no assertion depends on them; the ceilings only keep a broken
# wake-up from hanging the run.
SHORT_WAIT_MS = 200
CEILING_S = 10.0

PartitionAsk = tuple[int, int, int]
"""(partition, fetch offset, partition_max_bytes)."""


def source_broker(**spec: Any) -> tuple[Broker, Topic]:
    """A broker with one bounded source topic `src` (5000 records, 100-byte values, 4-byte
    keys, one header, 2 partitions unless `spec` says otherwise)."""
    settings = {"partitions": 2, "records": RECORDS, "size": 100, "key_size": 4, "headers": 1}
    settings.update(spec)
    b = Broker(Config(sources=(SourceSpec("src", **settings),)))
    topic = b.topics.get("src")
    assert topic is not None
    return b, topic


def fetch_request(
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[PartitionAsk]]],
    *,
    max_bytes: int = 50 * MIB,
    min_bytes: int = 1,
    max_wait_ms: int = 0,
) -> Any:
    """A Fetch request entity naming topics by name before v13 and by id from v13."""
    t = types(ApiKey.FETCH, version)
    return make(
        t.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=tuple(
            make(
                t.FetchTopic,
                topic=topic,
                topic_id=topic,
                partitions=tuple(
                    make(
                        t.FetchPartition,
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=partition_max_bytes,
                    )
                    for partition, offset, partition_max_bytes in partitions
                ),
            )
            for topic, partitions in topics
        ),
        forgotten_topics_data=(),
    )


def topic_key(topic: Topic, version: int) -> str | uuid.UUID:
    return topic.id if version >= 13 else topic.name


def fetch(
    b: Broker,
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[PartitionAsk]]],
    **limits: int,
) -> Any:
    """A Fetch answered at once (max_wait 0 unless asked): the decoded response."""
    answer = answered(
        dispatch_of(b).answer(
            request_frame(ApiKey.FETCH, version, fetch_request(version, topics, **limits)), SESSION
        ),
        "this fetch should have been answered at once",
    )
    correlation_id, response = decode_response(ApiKey.FETCH, version, answer)
    assert correlation_id == 7
    return response


def fetch_one(
    b: Broker,
    topic: Topic,
    version: int,
    partition: int,
    offset: int,
    partition_max_bytes: int = MIB,
    **limits: int,
) -> Any:
    """The one partition's data from a Fetch of `offset`."""
    asked = [(topic_key(topic, version), [(partition, offset, partition_max_bytes)])]
    response = fetch(b, version, asked, **limits)
    # Fetch v4 has no top-level error code (v7 added it with sessions), nor log_start_offset
    # per partition (v5): tests read both with getattr and the value they would have.
    assert getattr(response, "error_code", ErrorCode.none) is ErrorCode.none
    assert len(response.responses) == 1
    return response.responses[0].partitions[0]


def records_of(data: bytes) -> list[Any]:
    """Every record in a records field, decoded by kio's reader (uncompressed batches)."""
    records = []
    position = 0
    while position < len(data):
        batch, size = read_batch(data, position)
        records.extend(batch.records)
        position += size
    return records


def offsets_of(data: bytes) -> list[int]:
    return [record.offset for record in records_of(data)]


async def answer_async(b: Broker, frame: bytes) -> bytes:
    """The response frame to a request that may be held: awaited if the broker waits."""
    answer = dispatch_of(b).answer(frame, SESSION)
    if inspect.isawaitable(answer):
        answer = await answer
    return answered(answer)


# What a response holds


@pytest.mark.parametrize("version", VERSIONS)
def test_records_start_at_the_batch_holding_the_fetch_offset_and_run_contiguously(
    version: int,
) -> None:
    b, topic = source_broker()
    per_batch = topic.records.batch_records
    offset = 2 * per_batch + 17
    data = fetch_one(b, topic, version, 1, offset)
    assert (data.error_code, data.high_watermark) == (ErrorCode.none, RECORDS)
    records = records_of(data.records)
    # KIP-74: whole batches, so the first one starts before the offset asked for.
    assert records[0].offset == 2 * per_batch
    assert [r.offset for r in records] == list(range(2 * per_batch, 2 * per_batch + len(records)))
    assert len(records) % per_batch == 0 or records[-1].offset == RECORDS - 1
    for record in records:
        index = record.offset % per_batch
        assert record.value == value_pattern(index, 100)
        assert record.key == key_pattern(index, 4)
        assert [(h.key, h.value) for h in record.headers] == [(b"h0", str(index).encode())]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_fetch_reaching_the_log_end_ends_with_a_short_batch(version: int) -> None:
    b, topic = source_broker()
    per_batch = topic.records.batch_records
    data = fetch_one(b, topic, version, 0, RECORDS - 3)
    batches = iter_batches(data.records)
    assert len(batches) == 1
    assert batches[0].base_offset == RECORDS - RECORDS % per_batch
    assert offsets_of(data.records)[-1] == RECORDS - 1


@pytest.mark.parametrize("version", VERSIONS)
def test_partition_max_bytes_stops_before_the_batch_that_would_exceed_it(version: int) -> None:
    b, topic = source_broker()
    batch_bytes = len(topic.records.template(topic.records.batch_records))
    data = fetch_one(
        b, topic, version, 0, 0, partition_max_bytes=3 * batch_bytes + batch_bytes // 2
    )
    assert [h.base_offset for h in iter_batches(data.records)] == [
        i * topic.records.batch_records for i in range(3)
    ]
    assert len(data.records) == 3 * batch_bytes


@pytest.mark.parametrize("version", VERSIONS)
def test_max_bytes_caps_the_whole_response_across_partitions(version: int) -> None:
    b, topic = source_broker()
    batch_bytes = len(topic.records.template(topic.records.batch_records))
    response = fetch(
        b,
        version,
        [(topic_key(topic, version), [(0, 0, MIB), (1, 0, MIB)])],
        max_bytes=2 * batch_bytes + batch_bytes // 2,
    )
    first, second = response.responses[0].partitions
    assert len(iter_batches(first.records)) == 2
    # What is left of max_bytes holds no whole batch: the second partition gets none, with
    # no error, and a client asks for it again.
    assert (second.error_code, second.records) == (ErrorCode.none, b"")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_first_batch_is_sent_even_when_it_exceeds_both_limits(version: int) -> None:
    """KIP-74: a consumer must progress even with limits smaller than one batch."""
    b, topic = source_broker()
    response = fetch(
        b,
        version,
        [(topic_key(topic, version), [(0, 10, 100), (1, 10, 100)])],
        max_bytes=100,
    )
    first, second = response.responses[0].partitions
    assert offsets_of(first.records) == list(range(topic.records.batch_records))
    assert second.records == b""


def test_limits_apply_across_topics_in_request_order() -> None:
    b = Broker(
        Config(
            sources=(
                SourceSpec("a", records=RECORDS, size=100),
                SourceSpec("b", records=RECORDS, size=100),
            )
        )
    )
    a = b.topics.get("a")
    assert a is not None
    batch_bytes = len(a.records.template(a.records.batch_records))
    response = fetch(b, 12, [("a", [(0, 0, MIB)]), ("b", [(0, 0, MIB)])], max_bytes=3 * batch_bytes)
    assert len(response.responses[0].partitions[0].records) == 3 * batch_bytes
    assert response.responses[1].partitions[0].records == b""


@pytest.mark.parametrize("version", VERSIONS)
def test_a_produced_topic_serves_a_synthetic_record_for_every_offset_produced(
    version: int,
) -> None:
    b = Broker(Config(produced_record_size=40))
    produce(b, "written", 0, record_batch(7))
    produce(b, "written", 0, record_batch(5))
    topic = b.topics.get("written")
    assert topic is not None
    records = records_of(fetch_one(b, topic, version, 0, 0).records)
    assert [r.offset for r in records] == list(range(12))
    per_batch = topic.records.batch_records
    assert [r.value for r in records] == [value_pattern(o % per_batch, 40) for o in range(12)]
    assert all(r.key is None and r.headers == () for r in records)


# Errors and the log's ends


def delete_records_below(b: Broker, topic: str, partition: int, offset: int) -> Any:
    t = types(ApiKey.DELETE_RECORDS, 2)
    return call(
        b,
        ApiKey.DELETE_RECORDS,
        2,
        topics=(
            t.DeleteRecordsTopic(
                name=topic,
                partitions=(t.DeleteRecordsPartition(partition_index=partition, offset=offset),),
            ),
        ),
        timeout=datetime.timedelta(seconds=5),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_offsets_below_the_log_start_or_above_the_log_end_are_out_of_range(version: int) -> None:
    b, topic = source_broker()
    delete_records_below(b, "src", 0, 1000)
    below = fetch_one(b, topic, version, 0, 999)
    above = fetch_one(b, topic, version, 0, RECORDS + 1)
    for data in (below, above):
        assert data.error_code is ErrorCode.offset_out_of_range
        # As Kafka (tests/oracle/test_differential_apis.py): a partition in error tells no offsets.
        assert (getattr(data, "log_start_offset", -1), data.high_watermark) == (-1, -1)
        assert data.last_stable_offset == -1 and data.aborted_transactions is None
        assert data.records == b""
    at_start = fetch_one(b, topic, version, 0, 1000)
    assert at_start.error_code is ErrorCode.none
    assert offsets_of(at_start.records)[-1] >= 1000
    # The other partition keeps its whole log.
    assert fetch_one(b, topic, version, 1, 0).error_code is ErrorCode.none
    assert b.stats.errors["offset_out_of_range"] == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_at_the_log_end_records_are_empty_not_null(version: int) -> None:
    """librdkafka rejects a flexible response whose records field is null."""
    b, topic = source_broker()
    data = fetch_one(b, topic, version, 0, RECORDS)
    assert data.error_code is ErrorCode.none
    assert data.records is not None
    assert data.records == b""
    assert data.high_watermark == RECORDS


@pytest.mark.parametrize("version", BY_NAME)
def test_an_unknown_topic_or_partition_by_name_is_reported_per_partition(version: int) -> None:
    b, _ = source_broker()
    response = fetch(b, version, [("src", [(0, 0, MIB), (2, 0, MIB)]), ("nope", [(0, 0, MIB)])])
    known, unknown_partition = response.responses[0].partitions
    (unknown_topic,) = response.responses[1].partitions
    assert known.error_code is ErrorCode.none and known.records
    for data in (unknown_partition, unknown_topic):
        assert data.error_code is ErrorCode.unknown_topic_or_partition
        assert (data.high_watermark, data.records) == (-1, b"")
        assert getattr(data, "log_start_offset", -1) == -1
    # A Fetch never creates a topic.
    assert b.topics.get("nope") is None


@pytest.mark.parametrize("version", BY_ID)
def test_an_unknown_topic_id_or_partition_is_reported_per_partition(version: int) -> None:
    b, topic = source_broker()
    stranger = uuid.UUID("00000000-0000-4000-8000-000000000001")
    response = fetch(b, version, [(topic.id, [(5, 0, MIB)]), (stranger, [(0, 0, MIB)])])
    # As Kafka 4.1.1 lists partitions it sets aside: an unknown topic id's before an
    # unknown partition's, whatever the request's order.
    assert response.responses[0].topic_id == stranger
    assert response.responses[0].partitions[0].error_code is ErrorCode.unknown_topic_id
    assert response.responses[1].topic_id == topic.id
    assert response.responses[1].partitions[0].error_code is ErrorCode.unknown_topic_or_partition


async def test_an_error_is_answered_at_once_even_with_max_wait() -> None:
    b, _ = source_broker()
    body = fetch_request(12, [("nope", [(0, 0, MIB)])], max_wait_ms=60_000)
    answer = answered(
        dispatch_of(b).answer(request_frame(ApiKey.FETCH, 12, body), SESSION),
        "an error is news: nothing to wait for",
    )
    _, response = decode_response(ApiKey.FETCH, 12, answer)
    assert response.responses[0].partitions[0].error_code is ErrorCode.unknown_topic_or_partition


# Kafka 4.1.1 (checked): a partition of an unknown topic (by id or by name) or an unknown
# index is set aside and the rest waits max_wait_ms (a deleted topic's partition beside a
# live one: answered after 1003 ms of 1000); an offset out of range is answered at once.
STRANGER = uuid.UUID("00000000-0000-4000-8000-000000000001")


@pytest.mark.parametrize(
    ("version", "unknown"),
    [(16, (STRANGER, [(0, 0, MIB)])), (12, ("nope", [(0, 0, MIB)])), (16, None)],
    ids=["unknown topic id", "unknown topic name", "unknown partition"],
)
async def test_an_unknown_topic_or_partition_is_set_aside_while_the_others_wait(
    version: int, unknown: tuple[str | uuid.UUID, Sequence[PartitionAsk]] | None
) -> None:
    b = Broker(Config())
    produce(b, "t", 0, record_batch(3))
    topic = b.topics.get("t")
    assert topic is not None
    at_end: PartitionAsk = (0, 3, MIB)
    asked = [(topic_key(topic, version), [at_end] if unknown else [at_end, (5, 0, MIB)])]
    if unknown is not None:
        asked.append(unknown)
    body = fetch_request(version, asked, max_wait_ms=60_000)
    responses: list[Any] = []

    async def consumer() -> None:
        frame = await answer_async(b, request_frame(ApiKey.FETCH, version, body))
        responses.append(decode_response(ApiKey.FETCH, version, frame)[1])

    with trio.fail_after(CEILING_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer)
            await trio.testing.wait_all_tasks_blocked()
            assert responses == [], "the partition at the log end is still waited on"
            produce(b, "t", 0, record_batch(2))
    partitions = [p for t in responses[0].responses for p in t.partitions]
    assert [p.error_code for p in partitions] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition if unknown is None or version < 13
        else ErrorCode.unknown_topic_id,
    ]  # fmt: skip
    assert offsets_of(partitions[0].records) == [0, 1, 2, 3, 4]


async def test_a_held_fetch_beside_an_unknown_topic_returns_after_max_wait() -> None:
    b = Broker(Config())
    produce(b, "t", 0, record_batch(3))
    topic = b.topics.get("t")
    assert topic is not None
    asked = [(topic.id, [(0, 3, MIB)]), (STRANGER, [(0, 0, MIB)])]
    body = fetch_request(16, asked, max_wait_ms=SHORT_WAIT_MS)
    answer = dispatch_of(b).answer(request_frame(ApiKey.FETCH, 16, body), SESSION)
    assert inspect.isawaitable(answer), "a deleted topic's partition must not end the wait"
    started = trio.current_time()
    with trio.fail_after(CEILING_S):
        frame = answered(await answer)
    assert trio.current_time() - started >= SHORT_WAIT_MS / 1000 * 0.9
    unknown = decode_response(ApiKey.FETCH, 16, frame)[1].responses[1].partitions[0]
    assert unknown.error_code is ErrorCode.unknown_topic_id


async def test_an_offset_out_of_range_beside_a_partition_at_the_log_end_is_answered_at_once() -> (
    None
):
    b, topic = source_broker()
    asked = [(topic.id, [(0, RECORDS, MIB), (1, RECORDS + 5, MIB)])]
    body = fetch_request(16, asked, max_wait_ms=60_000)
    answer = answered(
        dispatch_of(b).answer(request_frame(ApiKey.FETCH, 16, body), SESSION),
        "a failed read ends the wait",
    )
    errors = [
        p.error_code for p in decode_response(ApiKey.FETCH, 16, answer)[1].responses[0].partitions
    ]
    assert errors == [ErrorCode.none, ErrorCode.offset_out_of_range]


@pytest.mark.parametrize("version", [12, 13, 16])
@pytest.mark.parametrize("names_a_topic", [False, True], ids=["no topics", "no partitions"])
async def test_a_fetch_naming_no_partition_is_answered_at_once(
    version: int, names_a_topic: bool
) -> None:
    # A Java consumer closing its fetch session sends one; held, its close() would take
    # fetch.max.wait.ms.
    b, topic = source_broker()
    topics = [(topic_key(topic, version), [])] if names_a_topic else []
    body = fetch_request(version, topics, max_wait_ms=60_000)
    answer = answered(
        dispatch_of(b).answer(request_frame(ApiKey.FETCH, version, body), SESSION),
        "nothing asked: nothing to wait for",
    )
    _, response = decode_response(ApiKey.FETCH, version, answer)
    assert response.error_code is ErrorCode.none
    assert all(not topic.partitions for topic in response.responses)


# Accounts


def test_fetched_counters_count_records_at_or_after_the_fetch_offset_and_batch_bytes() -> None:
    b, topic = source_broker()
    per_batch = topic.records.batch_records
    offset = per_batch + 40
    data = fetch_one(b, topic, 16, 1, offset, partition_max_bytes=MIB)
    served = offsets_of(data.records)
    assert served[0] < offset, "the first batch reaches back before the fetch offset"
    counters = b.stats.fetched[("src", 1)]
    assert counters.records == sum(1 for o in served if o >= offset)
    assert counters.bytes == len(data.records)
    assert b.stats.fetched[("src", 0)].records == 0

    # Served twice, counted twice: the counters say what was sent, not what exists.
    fetch_one(b, topic, 16, 1, offset, partition_max_bytes=MIB)
    assert counters.records == 2 * sum(1 for o in served if o >= offset)

    # Nothing is counted for an error or an empty log end.
    before = (counters.records, counters.bytes)
    fetch_one(b, topic, 16, 1, RECORDS + 5)
    fetch_one(b, topic, 16, 1, RECORDS)
    assert (counters.records, counters.bytes) == before


def test_reading_a_partition_in_successive_fetches_counts_each_record_once() -> None:
    b, topic = source_broker(partitions=1, records=1234)
    position, seen = 0, []
    for _ in range(100):
        if position == 1234:
            break
        data = fetch_one(b, topic, 16, 0, position, partition_max_bytes=3000)
        seen.extend(o for o in offsets_of(data.records) if o >= position)
        position = seen[-1] + 1
    assert seen == list(range(1234))
    assert b.stats.fetched[("src", 0)].records == 1234


# Held at the log end


async def held_until_produced(b: Broker, frame: bytes, topic: str, count: int) -> bytes:
    """The response to a Fetch held at the log end, woken by `count` records produced to
    partition 0 of `topic` on another task once the Fetch is parked."""
    responses: list[bytes] = []

    async def consumer() -> None:
        responses.append(await answer_async(b, frame))

    with trio.fail_after(CEILING_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer)
            await trio.testing.wait_all_tasks_blocked()
            assert responses == [], "at the log end the fetch must be held"
            produce(b, topic, 0, record_batch(count))
    return responses[0]


async def test_a_held_fetch_returns_when_a_produce_arrives() -> None:
    b = Broker(Config())
    produce(b, "t", 0, record_batch(3))
    topic = b.topics.get("t")
    assert topic is not None
    body = fetch_request(16, [(topic.id, [(0, 3, MIB)])], max_wait_ms=60_000)
    frame = await held_until_produced(b, request_frame(ApiKey.FETCH, 16, body), "t", 2)
    (data,) = decode_response(ApiKey.FETCH, 16, frame)[1].responses[0].partitions
    assert data.high_watermark == 5
    # Synthetic batches are aligned at multiples of batch_records: the one holding offset 3
    # starts at 0 and now reaches the new log end.
    assert offsets_of(data.records) == [0, 1, 2, 3, 4]
    assert b.stats.fetched[("t", 0)].records == 2
    assert b.stats.apis["Fetch"].requests == 1


async def test_a_held_fetch_returns_empty_after_max_wait_without_data() -> None:
    b = Broker(Config())
    produce(b, "t", 0, record_batch(3))
    body = fetch_request(12, [("t", [(0, 3, MIB)])], max_wait_ms=SHORT_WAIT_MS)
    answer = dispatch_of(b).answer(request_frame(ApiKey.FETCH, 12, body), SESSION)
    assert inspect.isawaitable(answer), "at the log end the fetch must be held"
    with trio.fail_after(CEILING_S):
        frame = answered(await answer)
    (data,) = decode_response(ApiKey.FETCH, 12, frame)[1].responses[0].partitions
    assert (data.error_code, data.records, data.high_watermark) == (ErrorCode.none, b"", 3)
    assert b.stats.fetched[("t", 0)].records == 0


async def test_a_held_fetch_below_min_bytes_returns_what_there_is_after_max_wait() -> None:
    b, topic = source_broker(partitions=1, records=10)
    body = fetch_request(16, [(topic.id, [(0, 0, MIB)])], min_bytes=MIB, max_wait_ms=SHORT_WAIT_MS)
    with trio.fail_after(CEILING_S):
        frame = await answer_async(b, request_frame(ApiKey.FETCH, 16, body))
    (data,) = decode_response(ApiKey.FETCH, 16, frame)[1].responses[0].partitions
    assert offsets_of(data.records) == list(range(10))


async def test_a_held_fetch_on_a_growing_source_returns_with_its_next_records() -> None:
    b, topic = source_broker(partitions=1, records=None, rate=50.0)
    end = list_offsets(b, "src", 0, -1).offset
    body = fetch_request(16, [(topic.id, [(0, end, MIB)])], max_wait_ms=60_000)
    with trio.fail_after(CEILING_S):
        frame = await answer_async(b, request_frame(ApiKey.FETCH, 16, body))
    (data,) = decode_response(ApiKey.FETCH, 16, frame)[1].responses[0].partitions
    served = offsets_of(data.records)
    assert served and served[-1] >= end
    assert data.high_watermark > end


# Java 4.0's recorded Fetch v16 requests

JAVA_FETCHES = [f"java-4.0/{n:03d}-Fetch-v16-request.bin" for n in (23, 24, 25)]
# The topic id librdkafka's mock cluster gave the recorded topic (4 partitions).
RECORDED_TOPIC_ID = uuid.UUID("539608d9-f4e9-4e29-a0c9-c6b10a86ceb9")


def encode_response_frame(version: int, correlation_id: int, body: Any) -> bytes:
    """A size-prefixed Fetch response frame written by kio (response header v1: flexible)."""
    buffer = io.BytesIO()
    entity_writer(ResponseHeaderV1)(buffer, ResponseHeaderV1(correlation_id=correlation_id))
    entity_writer(response_schema(ApiKey.FETCH, version))(buffer, body)
    payload = buffer.getvalue()
    return len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize("file", JAVA_FETCHES)
def test_java_fetch_v16_requests_get_responses_kio_round_trips_byte_for_byte(file: str) -> None:
    entry = by_file()[file]
    recorded = frame_bytes(entry)
    # Topic ids come from the topic's name here, so the recorded id cannot be recreated:
    # the same request, byte for byte, names the id of a topic that exists instead.
    b, topic = source_broker(partitions=4, records=200)
    assert recorded.count(RECORDED_TOPIC_ID.bytes) == 1
    frame = recorded.replace(RECORDED_TOPIC_ID.bytes, topic.id.bytes)

    answer = answered(
        dispatch_of(b).answer(frame, SESSION), "every partition has data: no reason to wait"
    )
    correlation_id, response = decode_response(ApiKey.FETCH, 16, answer)
    assert correlation_id == entry["correlation_id"]
    assert encode_response_frame(16, correlation_id, response) == answer

    # The recorded request asks for a fetch session (epoch 0): one is opened.
    assert response.error_code is ErrorCode.none and response.session_id > 0
    (topic_response,) = response.responses
    assert topic_response.topic_id == topic.id
    per_batch = topic.records.batch_records
    request = decode_request(frame, served_ranges())
    asked = {p.partition: p.fetch_offset for t in request.body.topics for p in t.partitions}
    assert [p.partition_index for p in topic_response.partitions] == [0, 1, 2, 3]
    for data in topic_response.partitions:
        offset = asked[data.partition_index]
        assert (data.error_code, data.high_watermark) == (ErrorCode.none, 200)
        assert offsets_of(data.records) == list(range(offset - offset % per_batch, 200))


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 13])
def test_a_topic_named_by_the_zero_id_is_unknown_with_a_session_or_without(version: int) -> None:
    """As Kafka 4.4 answers (tests/oracle/test_differential_apis.py): a partition of the zero
    topic id is UNKNOWN_TOPIC_ID, in a Fetch that opens a session (epoch 0: the session is
    opened) as in a sessionless one (epoch -1), where the topic has one partition asked;
    with two, Kafka's fetch session cache fails the opening with UNKNOWN_SERVER_ERROR."""
    b, _ = source_broker()
    asked = fetch_request(version, [(uuid.UUID(int=0), [(0, 0, MIB)])])
    for session_epoch, opened in ((0, True), (-1, False)):
        frame = request_frame(
            ApiKey.FETCH, version, dataclasses.replace(asked, session_epoch=session_epoch)
        )
        _, response = decode_response(
            ApiKey.FETCH, version, answered(dispatch_of(b).answer(frame, SESSION))
        )
        assert response.error_code == ErrorCode.none
        assert (response.session_id > 0) is opened
        assert [p.error_code for t in response.responses for p in t.partitions] == [
            ErrorCode.unknown_topic_id
        ]
    # Two partitions of it fail the session's opening, as in Kafka 4.4 (and 4.1).
    two = fetch_request(version, [(uuid.UUID(int=0), [(0, 0, MIB), (1, 0, MIB)])])
    frame = request_frame(ApiKey.FETCH, version, dataclasses.replace(two, session_epoch=0))
    _, response = decode_response(
        ApiKey.FETCH, version, answered(dispatch_of(b).answer(frame, SESSION))
    )
    assert (response.error_code, response.session_id, response.responses) == (
        ErrorCode.unknown_server_error,
        0,
        (),
    )
