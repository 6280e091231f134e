"""Recorded consumer sessions replayed into an in-process Broker: Java 4.0's (consumer-perf,
and subscribe + commitSync), and the classic group consumers of librdkafka 2.16,
kafka-python 3.0, aiokafka 0.14 and kcat 1.7.

Each request frame decodes through codec.decode_request, and nullbroker's response to it
decodes with kio's reader for its API key and version and re-encodes to the same bytes.
The requests meet real state: their topics exist (source topics with records), the group
coordinator runs, and the session follows the protocol. A recorded frame that names what
only the recorded broker knew (the topic id librdkafka's mock cluster gave the topic, the
member id and generation the mock assigned) is sent with ours in their place: topic ids are
patched in the bytes (same length), member ids and generations by re-encoding the decoded
request with kio, checked first to re-encode to the recorded bytes unchanged.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_writer

from codec import decode_request
from codec.apis import request_schema, response_header_version, response_schema
from nullbroker.broker import Broker
from nullbroker.handlers import served_ranges
from nullbroker.settings import Config
from nullbroker.sources.synthetic import SourceSpec
from nullbroker.state.groups.model import GroupState
from tests.support.kio_calls import SESSION, answered, decode_response, dispatch_of, request_frame
from tests.support.vectors import Entry, entry_id, frame_bytes, requests

METADATA, JOIN_GROUP, SYNC_GROUP = 3, 11, 14
RECORDS = 200
PARTITIONS = 4
# No request waits long here: the join completes as soon as its only member joins, and every
# Fetch asks for records that exist. The ceiling only keeps a broken wake-up from hanging.
CEILING_S = 10.0


@dataclass(frozen=True)
class Scenario:
    """A recorded consumer session: its client and scenario in index.json, the topic it
    read, and the id librdkafka's mock cluster gave that topic."""

    client: str
    scenario: str
    topic: str
    recorded_topic_id: uuid.UUID | None = None

    def frames(self) -> list[Entry]:
        """The session's request frames in recording order, after the client's recorded
        Metadata requests (sampled from its producer runs: the request a consumer sends
        first, here auto-creating their topics)."""
        of_client = [entry for entry in requests() if entry["client"] == self.client]
        return [entry for entry in of_client if entry["api_key"] == METADATA] + [
            entry for entry in of_client if entry["scenario"] == self.scenario
        ]


SCENARIOS = [
    Scenario(
        "java-4.0",
        "consumer-perf",
        "perf-c",
        uuid.UUID("539608d9-f4e9-4e29-a0c9-c6b10a86ceb9"),
    ),
    Scenario("java-4.0", "consumer classic subscribe+commitSync", "jt"),
    Scenario(
        "librdkafka-2.16",
        "group consumer subscribe+commit",
        "ck",
        uuid.UUID("1451668b-3e02-4066-b9f8-f5c7dda54b03"),
    ),
    Scenario("kafka-python-3.0", "group consumer subscribe+commit", "kp"),
    Scenario("aiokafka-0.14", "group consumer subscribe+commit", "ak"),
    Scenario("kcat-1.7", "kcat -G group consumer (auto commit)", "kc"),
]
JAVA_APIS = {
    "Metadata",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "OffsetFetch",
    "OffsetCommit",
    "ListOffsets",
    "Fetch",
    "LeaveGroup",
}


def scenario_id(scenario: Scenario) -> str:
    return f"{scenario.client}: {scenario.scenario}"


def reencoded_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A size-prefixed response frame written by kio's writers."""
    header: Any = (
        ResponseHeaderV1(correlation_id=correlation_id)
        if response_header_version(api_key, version)
        else ResponseHeaderV0(correlation_id=correlation_id)
    )
    buffer = io.BytesIO()
    entity_writer(type(header))(buffer, header)
    entity_writer(response_schema(api_key, version))(buffer, body)
    payload = buffer.getvalue()
    return len(payload).to_bytes(4, "big") + payload


def error_codes(entity: Any) -> Iterator[ErrorCode]:
    """Every error code in a response entity, at any depth."""
    if isinstance(entity, ErrorCode):
        yield entity
    elif dataclasses.is_dataclass(entity) and not isinstance(entity, type):
        for item in dataclasses.fields(entity):
            yield from error_codes(getattr(entity, item.name))
    elif isinstance(entity, tuple):
        for item in entity:
            yield from error_codes(item)


@dataclass
class Replay:
    """A broker with the scenario's topic as a source, answering one session's frames, and
    what the group coordinator told the member so far."""

    broker: Broker
    scenario: Scenario
    member_id: str = ""
    generation: int = -1

    async def answer(self, entry: Entry, frame: bytes) -> tuple[Any, bytes]:
        """Send one request frame; the decoded response and the frame it came in."""
        request = decode_request(frame, served_ranges())
        header = request.header
        answer = dispatch_of(self.broker).answer(frame, SESSION)
        if inspect.isawaitable(answer):
            with trio.fail_after(CEILING_S):
                answer = await answer
        answer = answered(answer, f"{entry['file']} was not answered")
        correlation_id, response = decode_response(header.api_key, header.api_version, answer)
        assert correlation_id == entry["correlation_id"]
        return response, answer

    def ours(self, entry: Entry, frame: bytes) -> bytes:
        """The recorded frame with what only the recorded broker knew replaced by ours:
        the topic id, and the member id and generation the member was given."""
        recorded_id = self.scenario.recorded_topic_id
        if recorded_id is not None and recorded_id.bytes in frame:
            topic = self.broker.topics.get(self.scenario.topic)
            assert topic is not None
            frame = frame.replace(recorded_id.bytes, topic.id.bytes)
        body = decode_request(frame, served_ranges()).body
        if not getattr(body, "member_id", ""):
            return frame
        # Re-encoding is only a faithful stand-in for the recorded bytes if kio writes
        # the decoded request back unchanged.
        assert self.encode(entry, body) == frame
        changes: dict[str, Any] = {"member_id": self.member_id}
        for generation_field in ("generation_id", "generation_id_or_member_epoch"):
            if hasattr(body, generation_field):
                changes[generation_field] = self.generation
        if entry["api_key"] == SYNC_GROUP:
            changes["assignments"] = tuple(
                dataclasses.replace(assignment, member_id=self.member_id)
                for assignment in body.assignments
            )
        return self.encode(entry, dataclasses.replace(body, **changes))

    @staticmethod
    def encode(entry: Entry, body: Any) -> bytes:
        return request_frame(
            entry["api_key"],
            entry["api_version"],
            body,
            correlation_id=entry["correlation_id"],
            client_id=entry["client_id"],
        )


@dataclass(frozen=True)
class Exchange:
    """One request as sent (after patching) and the response it got, both decoded."""

    entry: Entry
    request: Any
    response: Any


def assert_round_trips(entry: Entry, response: Any, answer: bytes) -> None:
    """kio writes the response it read from nullbroker's answer back to the same bytes."""
    rewritten = reencoded_response(
        entry["api_key"], entry["api_version"], entry["correlation_id"], response
    )
    assert rewritten == answer, entry["file"]


async def replay(broker: Broker, scenario: Scenario) -> list[Exchange]:
    """Answer every frame of the session in order; each response must round-trip through
    kio and carry no error."""
    session = Replay(broker, scenario)
    answered: list[Exchange] = []
    for entry in scenario.frames():
        recorded = frame_bytes(entry)
        if entry["api_key"] == JOIN_GROUP:
            # A new member's first JoinGroup (v4+) is answered MEMBER_ID_REQUIRED with the
            # id to join with, as Kafka answers it; the client joins again with that id.
            body = decode_request(recorded, served_ranges()).body
            assert body.member_id == ""
            response, answer = await session.answer(entry, recorded)
            assert_round_trips(entry, response, answer)
            assert response.error_code is ErrorCode.member_id_required
            assert response.member_id
            session.member_id = response.member_id
            frame = session.encode(entry, dataclasses.replace(body, member_id=session.member_id))
        else:
            frame = session.ours(entry, recorded)
        new = entry["api_key"] == METADATA and any(
            wanted.name is not None and broker.topics.get(wanted.name) is None
            for wanted in decode_request(frame, served_ranges()).body.topics or ()
        )
        response, answer = await session.answer(entry, frame)
        assert_round_trips(entry, response, answer)
        # A topic a Metadata request creates is unknown in its answer, as Kafka's
        # (a client asks again); the recorded producers' topics are made so.
        allowed = {ErrorCode.none, ErrorCode.unknown_topic_or_partition} if new else set()
        assert set(error_codes(response)) <= {ErrorCode.none} | allowed, entry["file"]
        if entry["api_key"] == JOIN_GROUP:
            session.generation = response.generation_id
        request = decode_request(frame, served_ranges()).body
        answered.append(Exchange(entry, request, response))
    return answered


def scenario_broker(scenario: Scenario) -> Broker:
    return Broker(
        Config(
            partitions=PARTITIONS,
            sources=(SourceSpec(scenario.topic, partitions=PARTITIONS, records=RECORDS, size=100),),
            group_initial_rebalance_delay_ms=0,
        )
    )


# Each frame once: the Java sessions share the client's Metadata requests.
CONSUMER_FRAMES = list(
    {entry["file"]: entry for scenario in SCENARIOS for entry in scenario.frames()}.values()
)


def test_the_java_sessions_cover_every_api_a_java_consumer_sends() -> None:
    java = {entry["api_name"] for entry in CONSUMER_FRAMES if entry["client"] == "java-4.0"}
    assert java == JAVA_APIS


@pytest.mark.parametrize("entry", CONSUMER_FRAMES, ids=entry_id)
def test_each_recorded_consumer_request_decodes_with_nothing_left_over(entry: Entry) -> None:
    request = decode_request(frame_bytes(entry), served_ranges())
    header = request.header
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        entry["api_key"],
        entry["api_version"],
        entry["correlation_id"],
        entry["client_id"],
    )
    assert request.trailing_bytes == 0
    assert isinstance(request.body, request_schema(entry["api_key"], entry["api_version"]))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
async def test_a_recorded_consumer_session_gets_answers_that_round_trip_through_kio(
    scenario: Scenario, nursery: trio.Nursery
) -> None:
    broker = scenario_broker(scenario)
    await nursery.start(broker.groups.run)
    answered = await replay(broker, scenario)

    by_api: dict[str, list[Exchange]] = {}
    for exchange in answered:
        by_api.setdefault(exchange.entry["api_name"], []).append(exchange)
    # The member led its own generation and got back the assignment it sent.
    (join,) = by_api["JoinGroup"]
    joined = join.response
    assert joined.leader == joined.member_id
    assert [member.member_id for member in joined.members] == [joined.member_id]
    (sync,) = by_api["SyncGroup"]
    assert sync.response.assignment == sync.request.assignments[0].assignment
    # Every Fetch got records: the offsets the clients asked for exist in the source.
    for fetch in by_api.get("Fetch", []):
        for topic in fetch.response.responses:
            assert all(partition.records for partition in topic.partitions)
    # The group keeps what the member committed, and is empty once it left.
    group_id = join.request.group_id
    committed = {
        (topic.name, partition.partition_index): partition.committed_offset
        for commit in by_api["OffsetCommit"]
        for topic in commit.request.topics
        for partition in topic.partitions
    }
    kept = broker.groups.committed(group_id)
    assert kept is not None
    assert {
        (topic, partition): offset.offset
        for topic, partitions in kept.items()
        for partition, offset in partitions.items()
    } == committed
    group = broker.groups.group(group_id)
    assert group is not None and group.state is GroupState.EMPTY
