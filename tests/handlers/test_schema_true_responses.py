"""Every response the handlers build holds to the schema as the Java client reads it.

The Java client trusts the schema: a field that is not nullable is never null, and it does
not check. So for each served API and version, requests are answered through Dispatch.answer
and checked twice, field by field against kio's schema (whose nullability matches Kafka's
JSON `nullableVersions`, version by version):

- the entity each handler returns, before it is encoded: no None where the field is not
  nullable. This walk is independent of the encoder's own check (codec.writers refuses
  such a None), so each checks the other;
- the bytes Dispatch.answer sends, read back by kio's reader (which reads a null array or
  string as None, whatever the schema says): no null on the wire either. This covers the
  hand-written Produce and Fetch encoders and the answers of held requests too.

The requests are the recorded ones, replayed client by client in the order they were sent
(so topics and groups exist when later requests name them), and ones hypothesis generates
from kio's request types, their names, ids and partitions drawn mostly from what the broker
holds so that success paths are reached as well as error paths.

A few fields are nullable in the schema but dereferenced by the Java client all the same
(JAVA_DEREFERENCES); they must not be None either.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import types
import typing
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial._introspect import is_optional
from kio.serial.errors import OutOfBoundValue
from kio.static.primitive import i32Timedelta

from codec import ProtocolError, decode_request
from codec.apis import request_schema, response_schema
from codec.errors import ResponseSchemaError
from nullbroker.broker import Broker, Handler
from nullbroker.handlers import served_ranges
from nullbroker.sessions import Session
from nullbroker.settings import Config
from nullbroker.sources.synthetic import SourceSpec
from tests.codec.test_codec_roundtrip import values
from tests.handlers.test_handlers import produce
from tests.net.test_connection import METADATA_V12, assert_answers, serving
from tests.support.kafka_wire import size_prefix
from tests.support.kio_calls import (
    SESSION,
    answered,
    decode_response,
    dispatch_of,
    record_batch,
    request_frame,
)
from tests.support.kio_calls import types as request_types
from tests.support.vectors import Entry, frame_bytes, requests

FETCH, METADATA, JOIN_GROUP, SYNC_GROUP = 1, 3, 11, 14
# Mock time: held requests (JoinGroup, SyncGroup) end at their timeouts in an instant.
PATIENCE_SECONDS = 600
DESCRIBE_TRANSACTIONS = 65

JAVA_DEREFERENCES = {
    # KafkaAdminClient.describeTopics calls .stream() on both (Kafka sends []).
    ("DescribeTopicPartitionsResponsePartition", "eligible_leader_replicas"),
    ("DescribeTopicPartitionsResponsePartition", "last_known_elr"),
}

SERVED = [
    (key, version)
    for key, versions in served_ranges().items()
    for version in range(versions.min_version, versions.max_version + 1)
]

PRODUCED_TOPIC = "t"
SOURCE_TOPIC = "src"
NEW_TOPIC = "fresh"  # a valid name no topic has yet
EMPTY_GROUP = "g"  # committed offsets, no members
STABLE_GROUP = "s"  # one member, generation 1
CONFIG_NAMES = ("retention.ms", "cleanup.policy", "log.retention.ms", "min.insync.replicas")


def nulls_the_java_client_would_trip_on(entity: Any, path: str = "") -> Iterator[str]:
    """The paths of every None in `entity` where kio's schema (or the Java client's use of
    it) allows none. A tagged field counts too: None is not its default."""
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        where = f"{path}{type(entity).__name__}.{field.name}"
        if value is None:
            if not is_optional(field) or (type(entity).__name__, field.name) in JAVA_DEREFERENCES:
                yield where
            continue
        if dataclasses.is_dataclass(value):
            yield from nulls_the_java_client_would_trip_on(value, where + " > ")
        elif isinstance(value, tuple):
            for index, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    yield from nulls_the_java_client_would_trip_on(item, f"{where}[{index}] > ")


# The broker, its handlers walked


def assert_entity_schema_true(key: int, version: int, body: Any) -> None:
    """A handler's answer, before encoding: the response type of its version, no None where
    not allowed. Pre-encoded answers (Produce's bytes, Fetch's buffers) are left to the
    check of what goes on the wire."""
    if not dataclasses.is_dataclass(body):
        return
    assert type(body) is response_schema(key, version)
    assert list(nulls_the_java_client_would_trip_on(body)) == [], f"handler of {key} v{version}"


def walked(handler: Handler) -> Handler:
    """`handler`, with every entity it answers (at once or after a wait) walked."""

    def answer(broker: Broker, request: Any, session: Session) -> Any:
        key, version = request.header.api_key, request.header.api_version
        body = handler(broker, request, session)
        if isinstance(body, Coroutine):
            return _walked_later(key, version, body)
        assert_entity_schema_true(key, version, body)
        return body

    return answer


async def _walked_later(key: int, version: int, pending: Coroutine[Any, Any, Any]) -> Any:
    body = await pending
    assert_entity_schema_true(key, version, body)
    return body


def checked_broker() -> Broker:
    """A broker (a produced topic, a source topic) whose handlers are walked."""
    broker = Broker(
        Config(
            partitions=2,
            group_initial_rebalance_delay_ms=0,
            sources=(SourceSpec(SOURCE_TOPIC, partitions=2, records=50, size=20),),
        )
    )
    broker.topics.create(PRODUCED_TOPIC)
    dispatch_of(broker).handlers = {
        key: walked(handler) for key, handler in dispatch_of(broker).handlers.items()
    }
    return broker


async def respond(broker: Broker, frame: bytes) -> Any:
    """The response entity to a request frame, as kio reads Dispatch.answer's bytes, after
    checking that they hold no null where the schema has none (None: no response, or the
    connection closed)."""
    header = decode_request(frame, broker.served).header
    try:
        answer = dispatch_of(broker).answer(frame, SESSION)
    except ProtocolError:
        return None  # the connection closes (a refused acks=0 Produce): no answer to check
    if isinstance(answer, Coroutine):
        with trio.fail_after(PATIENCE_SECONDS):
            answer = await answer
    if answer is None:
        return None
    try:
        _, response = decode_response(header.api_key, header.api_version, answered(answer))
    except OutOfBoundValue as error:
        # kio reads no timestamp before 1970, and DescribeTransactions says -1 for a
        # transaction never begun, as Kafka does (the Java client reads it). The entity
        # was checked before it was encoded (`walked`); here it is checked once.
        if header.api_key == DESCRIBE_TRANSACTIONS and "negative timestamp" in str(error):
            return None
        raise
    nulls = list(nulls_the_java_client_would_trip_on(response))
    assert nulls == [], f"on the wire, {header.api_name} v{header.api_version}"
    return response


async def with_coordinator(broker: Broker, frames: Sequence[bytes]) -> list[Any]:
    """Every frame answered in turn, the group coordinator's timers running."""
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.groups.run)
        responses = [await respond(broker, frame) for frame in frames]
        nursery.cancel_scope.cancel()
    return responses


def run(broker: Broker, frames: Sequence[bytes]) -> list[Any]:
    return trio.run(
        with_coordinator, broker, frames, clock=trio.testing.MockClock(autojump_threshold=0)
    )


# Recorded requests


def without_wait(frame: bytes, broker: Broker) -> bytes:
    """A Fetch frame asking for no wait: a held Fetch ends by the wall clock, which mock
    time does not move (its answer is built as an unheld one is). Other frames as they are."""
    request = decode_request(frame, broker.served)
    if request.header.api_key != FETCH:
        return frame
    body = dataclasses.replace(request.body, max_wait=datetime.timedelta(0))
    return request_frame(
        FETCH,
        request.header.api_version,
        body,
        correlation_id=request.header.correlation_id,
        client_id=request.header.client_id or "",
    )


def recorded_clients() -> dict[str, list[Entry]]:
    """Each recorded client's served requests, in the order it sent them."""
    clients: dict[str, list[Entry]] = {}
    for entry in requests():
        frame = frame_bytes(entry)
        if (int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")) in SERVED:
            clients.setdefault(entry["client"], []).append(entry)
    return clients


@pytest.mark.parametrize("client", sorted(recorded_clients()))
def test_responses_to_a_recorded_clients_requests_hold_to_the_schema(client: str) -> None:
    broker = checked_broker()
    frames = [without_wait(frame_bytes(entry), broker) for entry in recorded_clients()[client]]
    run(broker, frames)


def test_recorded_requests_reach_the_success_paths() -> None:
    # The replay is meant to build state as the clients did: the admin client's
    # DescribeTopicPartitions (the one that found null ELR lists) must find its topic.
    broker = checked_broker()
    entries = recorded_clients()["java-4.0"]
    responses = run(broker, [without_wait(frame_bytes(entry), broker) for entry in entries])
    (described,) = (
        response
        for entry, response in zip(entries, responses, strict=True)
        if entry["api_key"] == 75
    )
    assert [topic.error_code for topic in described.topics] == [0]
    assert described.topics[0].partitions


# Generated requests


def prepared(broker: Broker) -> list[bytes]:
    """Records in the produced topic, and the requests that give the broker committed
    offsets and a stable group."""
    produce(broker, PRODUCED_TOPIC, 0, record_batch(3))
    commit = request_types(8, 8)
    join = request_types(JOIN_GROUP, 0)
    return [
        request_frame(
            8,
            8,
            commit.OffsetCommitRequest(
                group_id=EMPTY_GROUP,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=(
                    commit.OffsetCommitRequestTopic(
                        name=PRODUCED_TOPIC,
                        partitions=(
                            commit.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=1,
                                committed_leader_epoch=-1,
                                committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            ),
        ),
        request_frame(
            JOIN_GROUP,
            0,
            join.JoinGroupRequest(
                group_id=STABLE_GROUP,
                session_timeout=datetime.timedelta(seconds=10),
                member_id="",
                protocol_type="consumer",
                protocols=(join.JoinGroupRequestProtocol(name="range", metadata=b""),),
            ),
        ),
    ]


def stable_group(broker: Broker) -> None:
    """The prepared requests answered, and the stable group's leader's assignment synced."""
    *_, joined = run(broker, prepared(broker))
    sync = request_types(SYNC_GROUP, 0)
    (synced,) = run(
        broker,
        [
            request_frame(
                SYNC_GROUP,
                0,
                sync.SyncGroupRequest(
                    group_id=STABLE_GROUP,
                    generation_id=joined.generation_id,
                    member_id=joined.member_id,
                    assignments=(
                        sync.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b""),
                    ),
                ),
            )
        ],
    )
    assert synced.error_code == 0


def known_topic_ids(broker: Broker) -> list[uuid.UUID]:
    topics = (broker.topics.get(name) for name in (PRODUCED_TOPIC, SOURCE_TOPIC))
    return [topic.id for topic in topics if topic is not None]


def steered(name: str, hint: Any, topic_ids: list[uuid.UUID]) -> st.SearchStrategy[Any]:
    """Values of field `name`, mostly ones the broker knows (topics, groups, partitions,
    configs), so requests reach the success paths; sometimes anything of the type."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = (arg for arg in typing.get_args(hint) if arg is not type(None))
        return st.none() | steered(name, inner, topic_ids)
    if origin is tuple:
        (item, _ellipsis) = typing.get_args(hint)
        items = st.lists(steered(name, item, topic_ids), max_size=2).map(tuple)
        # CreateTopics with explicit assignments is refused unless they are consistent.
        return st.just(()) | items if name == "assignments" else items
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return steered_entities(hint, topic_ids)
    known = _known_values(name, hint, topic_ids)
    return values(hint) if known is None else st.sampled_from(known) | values(hint)


# Numbers that pass a handler's checks (or just fail one), by field name.
KNOWN_NUMBERS = {
    "partition": [-1, 0, 1, 2],
    "partition_index": [-1, 0, 1, 2],
    "partition_indexes": [-1, 0, 1, 2],
    "partitions": [-1, 0, 1, 2],
    "offset": [-2, -1, 0, 1, 3, 1000],
    "committed_offset": [-2, -1, 0, 1, 3, 1000],
    "timestamp": [-2, -1, 0, 1, 3, 1000],
    "acks": [-1, 0, 1],
    "generation_id": [-1, 1],
    "generation_id_or_member_epoch": [-1, 1],
    "num_partitions": [-1, 1, 3],
    "replication_factor": [-1, 1],
    "count": [1, 3, 4],
    "isolation_level": [0, 1],
    "endpoint_type": [1, 2],
    "resource_type": [2, 4, 16],
    "config_operation": [0, 1, 2, 3],
}


def _known_values(name: str, hint: Any, topic_ids: list[uuid.UUID]) -> list[Any] | None:
    if hint is uuid.UUID and name == "topic_id":
        return list(topic_ids)
    if isinstance(hint, type) and issubclass(hint, str):
        if name in ("name", "topic", "topic_name", "topic_names", "resource_name"):
            return [PRODUCED_TOPIC, SOURCE_TOPIC, NEW_TOPIC, "", "0", *CONFIG_NAMES]
        if name in ("group_id", "groups", "groups_names", "key", "coordinator_keys"):
            return [EMPTY_GROUP, STABLE_GROUP]
        if name in ("configuration_keys",):
            return list(CONFIG_NAMES)
        if name == "value":
            return ["1000", "delete", "compact", "-1"]
    if isinstance(hint, type) and issubclass(hint, int) and not issubclass(hint, bool):
        return KNOWN_NUMBERS.get(name)
    if hint is i32Timedelta and name in ("session_timeout", "rebalance_timeout"):
        return [datetime.timedelta(seconds=10)]
    if isinstance(hint, type) and issubclass(hint, bytes) and name == "records":
        return [record_batch(2)]
    return None


def steered_entities(entity_type: type, topic_ids: list[uuid.UUID]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(entity_type)
    return st.builds(
        entity_type,
        **{
            field.name: steered(field.name, hints[field.name], topic_ids)
            for field in dataclasses.fields(entity_type)
        },
    )


@pytest.mark.parametrize(("key", "version"), SERVED)
def test_responses_to_generated_requests_hold_to_the_schema(key: int, version: int) -> None:
    schema = request_schema(key, version)
    template = checked_broker()
    topic_ids = known_topic_ids(template)

    @settings(
        max_examples=20,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(body=steered_entities(schema, topic_ids))
    def answer(body: Any) -> None:
        broker = checked_broker()
        stable_group(broker)
        if key == FETCH:  # held, it would end by the wall clock (see without_wait)
            body = dataclasses.replace(body, max_wait=datetime.timedelta(0))
        run(broker, [request_frame(key, version, body)])

    answer()


# The encoder's refusal, as a connection meets it


async def test_a_response_the_schema_forbids_costs_only_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A handler bug of this kind is refused by the encoder; the connection it happened on
    # is closed as an InternalError, logged once with the field named, and the broker and
    # its other connections go on.
    caplog.set_level(logging.INFO, logger="nullbroker")
    broker = Broker(Config())
    metadata = dispatch_of(broker).handlers[METADATA]

    def without_brokers(broker: Broker, request: Any, session: Session) -> Any:
        return dataclasses.replace(metadata(broker, request, session), brokers=None)

    async with serving(broker) as bystander, serving(broker) as victim:
        dispatch_of(broker).handlers = {**dispatch_of(broker).handlers, METADATA: without_brokers}
        await victim.client.send(size_prefix(METADATA_V12))
        assert await victim.client.is_closed_by_peer()
        await victim.wait_ended()
        dispatch_of(broker).handlers = {**dispatch_of(broker).handlers, METADATA: metadata}
        await bystander.client.send(size_prefix(METADATA_V12))
        assert_answers([await bystander.client.receive_frame()], [METADATA_V12])
    assert broker.stats.protocol_errors == {"InternalError": 1}
    (line,) = [record for record in caplog.records if record.name == "nullbroker"]
    assert line.exc_info is not None
    assert isinstance(line.exc_info[1], ResponseSchemaError)
    assert "MetadataResponse.brokers is not nullable" in str(line.exc_info[1])
