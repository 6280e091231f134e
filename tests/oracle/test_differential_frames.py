"""Each client's recorded session (tests/vectors/frames, copied from ../shared/frames) replayed
to Kafka 4.1.1 and to nullbroker alike (tests/support/differential.py), with its names and ids
rewritten per broker: topics, groups and transactional ids renamed for this test, topic ids,
producer ids and epochs, member ids and generations, fetch session ids and telemetry
subscription ids taken from each broker's own answers, client-telemetry instance ids chosen
afresh (tests/oracle/client_metrics_steps.py says why the pair's nullbroker has no
subscription of its own)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from crc32c import crc32c
from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader

from tests.oracle.client_metrics_steps import without_default_subscription
from tests.support.differential import Pair, Side, create_topic, error_codes, pair, request, unique
from tests.support.kafka_wire import FRAMES

pytestmark = pytest.mark.differential
__all__ = ["pair"]

CLIENTS = ("aiokafka-0.14", "java-4.0", "kafka-python-3.0", "kcat-1.7", "librdkafka-2.16")
PARTITIONS = 4
"""The recording mock's topics had 4 partitions; the replay's are created alike."""
MAX_WAIT = datetime.timedelta(milliseconds=100)
"""A recorded Fetch waits at most this long here, to keep the replay short."""
SKIPPED = {18, 17}
"""ApiVersions (compared by tests/oracle/test_api_versions_as_kafka.py) and SaslHandshake (a PLAIN
listener only; the recording's came from a SASL one)."""

TOPIC_FIELDS = {"topic", "topic_names", "subscribed_topic_names"}
GROUP_FIELDS = {"group_id", "groups_names", "group_ids", "groups", "transactional_id", "key"}
GROUP_LISTS = {"coordinator_keys", "transactional_ids"}
TELEMETRY_REQUESTS = {"GetTelemetrySubscriptionsRequest", "PushTelemetryRequest"}


@dataclasses.dataclass
class Recorded:
    file: str
    api_key: int
    version: int
    body: Any
    response_file: str | None = None


def recorded_requests(client: str) -> list[Recorded]:
    """A client's request frames in the order it sent them, decoded by kio."""
    index = json.loads((FRAMES / "index.json").read_text())
    found = []
    for entry in sorted(index, key=lambda entry: entry["file"]):
        if entry["client"] != client or entry["direction"] != "request":
            continue
        frame = (FRAMES / entry["file"]).read_bytes()
        header_type = RequestHeaderV2 if entry["request_header_version"] == 2 else RequestHeaderV1
        _, offset = entity_reader(header_type)(frame, 0)
        schema = load_request_schema(entry["api_key"], entry["api_version"])
        body, _ = entity_reader(schema)(memoryview(frame), offset)
        found.append(
            Recorded(
                entry["file"],
                entry["api_key"],
                entry["api_version"],
                body,
                entry.get("response_file"),
            )
        )
    return found


FETCH_SESSION_VERSION = 7


def recorded_session_id(recorded: Recorded) -> int:
    """The fetch session id the recording's broker answered a Fetch with (0: none; the
    librdkafka mock the frames were recorded against keeps no sessions)."""
    if recorded.response_file is None or recorded.version < FETCH_SESSION_VERSION:
        return 0
    frame = (FRAMES / recorded.response_file).read_bytes()
    header = 4 + (1 if recorded.version >= 12 else 0)  # correlation id, tagged fields
    (session_id,) = struct.unpack_from(">i", frame, header + 4 + 2)  # throttle, error
    return session_id  # type: ignore[no-any-return]


def recorded_topic_ids(client: str) -> dict[uuid.UUID, str]:
    """The mock's topic ids, by the Metadata answers it gave (Fetch v13+ names topics by id)."""
    index = json.loads((FRAMES / "index.json").read_text())
    ids: dict[uuid.UUID, str] = {}
    for entry in index:
        if entry["client"] != client or entry["direction"] != "response":
            continue
        if entry["api_key"] != 3:
            continue
        frame = (FRAMES / entry["file"]).read_bytes()
        schema = load_response_schema(3, entry["api_version"])
        offset = 4 + (1 if schema.__header_schema__.__version__ >= 1 else 0)
        try:
            body, _ = entity_reader(schema)(memoryview(frame), offset)
        except Exception:  # the mock's malformed answers (frames/README, Caveats)
            continue
        for topic in body.topics:
            if getattr(topic, "topic_id", None) and topic.name:
                ids[topic.topic_id] = topic.name
    return ids


class Rewriter:
    """Renames what a recording names and swaps in what each broker gave."""

    def __init__(self, client: str) -> None:
        self.prefix = unique(client.split("-")[0])
        self.topic_ids = recorded_topic_ids(client)
        self.topics: set[str] = set()
        self.instance_id: uuid.UUID | None = None
        """The client-telemetry instance id the replay names (KIP-714): a fresh one, the same
        to both brokers, for each GetTelemetrySubscriptions the client sent with the zero id
        (so that both answer for the same instance, and its subscription ids compare)."""

    def rename(self, name: str | None) -> str | None:
        return None if not name else f"{self.prefix}-{name}"

    def topic(self, name: str | None) -> str | None:
        renamed = self.rename(name)
        if renamed is not None:
            self.topics.add(renamed)
        return renamed

    def entity(self, value: Any, side: Side | None, group: str | None = None) -> Any:
        """`value` rewritten for `side` (None: only collect the topics it names)."""
        changes: dict[str, Any] = {}
        for entity_field in dataclasses.fields(value):
            name = entity_field.name
            inner = getattr(value, name)
            if name in ("group_id", "transactional_id") and isinstance(inner, str):
                group = self.rename(inner)
            changes[name] = self.field(type(value).__name__, name, inner, side, group)
        return dataclasses.replace(value, **changes)

    def field(self, owner: str, name: str, inner: Any, side: Side | None, group: str | None) -> Any:
        if dataclasses.is_dataclass(inner):
            return self.entity(inner, side, group)
        if isinstance(inner, tuple):
            if name in TOPIC_FIELDS:
                return tuple(self.topic(entry) for entry in inner)
            if name in GROUP_FIELDS | GROUP_LISTS and all(isinstance(e, str) for e in inner):
                return tuple(self.rename(entry) for entry in inner)
            return tuple(self.field(owner, name, entry, side, group) for entry in inner)
        if name in TOPIC_FIELDS or (name == "name" and "Topic" in owner):
            return self.topic(inner)
        if name in GROUP_FIELDS and isinstance(inner, str):
            return self.rename(inner)
        if side is None:
            return inner
        if name == "topic_id" and inner and inner.int:
            recorded = self.topic_ids.get(inner)
            renamed = self.rename(recorded) if recorded else None
            return side.learned.get(("topic_id", renamed), uuid.UUID(int=0))
        if name == "producer_id" and inner >= 0:
            return side.learned.get("replayed producer_id", inner)
        if name == "producer_epoch" and inner >= 0:
            return side.learned.get("replayed producer_epoch", inner)
        if name == "member_id" and inner and group is not None and "Heartbeat" not in owner:
            return side.learned.get(("member", group), inner)
        if name in ("generation_id", "generation_id_or_member_epoch") and inner >= 0:
            return side.learned.get(("generation", group), inner)
        if name == "member_epoch" and inner > 0:
            return side.learned.get(("epoch", group), inner)
        if (
            name == "resource_name"
            and owner.startswith("DescribeConfigsResource")
            and inner.isdigit()
        ):
            return str(side.learned["node_id"])  # a broker's configs: this broker's own
        if name == "session_id" and inner and owner == "FetchRequest":
            return side.learned.get(("fetch session", inner), inner)
        if name == "client_instance_id" and owner in TELEMETRY_REQUESTS:
            return self.instance_id
        if name == "subscription_id" and owner == "PushTelemetryRequest":
            return side.learned.get("telemetry subscription", inner)
        if name == "max_wait":
            return min(inner, MAX_WAIT)
        if name == "records" and inner:
            return with_producer(inner, side)
        return inner


def with_producer(records: bytes, side: Side) -> bytes:
    """Record batches with this broker's producer id and epoch, their CRCs taken again."""
    producer_id = side.learned.get("replayed producer_id")
    if producer_id is None:
        return records
    epoch = side.learned["replayed producer_epoch"]
    out = bytearray(records)
    offset = 0
    while offset + 61 <= len(out):
        (length,) = struct.unpack_from(">i", out, offset + 8)
        (recorded,) = struct.unpack_from(">q", out, offset + 43)
        if recorded >= 0:
            struct.pack_into(">qh", out, offset + 43, producer_id, epoch)
            end = offset + 12 + length
            struct.pack_into(">I", out, offset + 17, crc32c(bytes(out[offset + 21 : end])))
        offset += 12 + length
    return bytes(out)


TRANSIENT = {6, 14, 15, 16, 51}
"""NOT_LEADER_OR_FOLLOWER, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR and CONCURRENT_TRANSACTIONS: Kafka's while a new topic's leaders settle, its
internal topics load or a transaction ends; clients retry them, and so does the replay (on
both brokers)."""


def settled(answer: Any) -> bool:
    return not TRANSIENT & set(error_codes(answer))


def replayable(pair: Pair, recorded: Recorded) -> bool:
    if recorded.api_key in SKIPPED or recorded.version not in pair.versions(recorded.api_key):
        return False
    # acks=0 gets no answer.
    return not (recorded.api_key == 0 and recorded.body.acks == 0) and not session_wide(recorded)


def session_wide(recorded: Recorded) -> bool:
    """What lists the whole Kafka, which the session's other tests share: every group,
    transaction or topic, and a broker's own configs (its ports, its folders)."""
    body = recorded.body
    if recorded.api_key in (16, 66):
        return True
    if recorded.api_key == 3 and body.topics is None:
        return True
    return recorded.api_key == 32 and any(
        resource.resource_type != 2 for resource in body.resources
    )


def steps(pair: Pair, client: str) -> Iterator[tuple[Recorded, Rewriter]]:
    rewriter = Rewriter(client)
    for recorded in recorded_requests(client):
        if replayable(pair, recorded):
            rewriter.entity(recorded.body, None)
            yield recorded, rewriter


async def replay(pair: Pair, client: str) -> None:
    replayed = list(steps(pair, client))
    assert replayed, f"nothing of {client}'s session is served by both brokers"
    rewriter = replayed[0][1]
    for side, node_id in zip(pair.sides, pair.identities["node"], strict=True):
        side.learned["node_id"] = node_id
    for topic in sorted(rewriter.topics):
        await create_topic(pair, topic, partitions=PARTITIONS)
    for recorded, _ in replayed:
        await replay_one(pair, rewriter, recorded)


async def replay_one(pair: Pair, rewriter: Rewriter, recorded: Recorded) -> None:
    body = recorded.body
    if recorded.api_key == 11 and body.member_id and recorded.version >= 4:
        await learn_member_id(pair, rewriter, body)
    if recorded.api_key == 71 and body.client_instance_id is None:
        rewriter.instance_id = uuid.uuid4()
    answers = await pair.step(lambda side: rewriter.entity(body, side), until=settled)
    for side in pair.sides:
        answer = answers[side]
        group = rewriter.rename(getattr(body, "group_id", None))
        if recorded.api_key == 22 and answer.error_code == 0:
            side.learned["replayed producer_id"] = answer.producer_id
            side.learned["replayed producer_epoch"] = answer.producer_epoch
        elif recorded.api_key == 11 and answer.member_id:
            side.learned["member", group] = answer.member_id
            side.learned["generation", group] = answer.generation_id
        elif recorded.api_key == 68 and answer.member_epoch >= 0:
            side.learned["epoch", group] = answer.member_epoch
        elif recorded.api_key == 71 and answer.error_code == 0:
            # The client's pushes name the subscription it was given: each broker's own.
            side.learned["telemetry subscription"] = answer.subscription_id
        elif recorded.api_key == 1 and (recorded_id := recorded_session_id(recorded)):
            # The client's next fetches name the session it was given: each broker's own.
            side.learned["fetch session", recorded_id] = answer.session_id


async def learn_member_id(pair: Pair, rewriter: Rewriter, body: Any) -> None:
    """The recording kept the JoinGroup that carried the mock's member id (KIP-394): each
    broker is asked for its own first, as the client did."""
    first = dataclasses.replace(body, member_id="")
    answers = await pair.step(lambda side: rewriter.entity(first, side), until=settled)
    group = rewriter.rename(body.group_id)
    for side in pair.sides:
        side.learned["member", group] = answers[side].member_id


KNOWN_BY_CLIENT: dict[str, tuple[str, ...]] = {
    "aiokafka-0.14": (),
    "java-4.0": (),
    "kafka-python-3.0": (),
    "kcat-1.7": (),
    "librdkafka-2.16": (),
}
"""The known differences each recorded session meets (tests/support/differential_allowed.py)."""


@pytest.mark.parametrize("client", CLIENTS)
async def test_recorded_session_answers_as_kafka_does(pair: Pair, client: str) -> None:
    await without_default_subscription(pair)  # the session Kafka's subscriptions: none
    await replay(pair, client)
    pair.check(*KNOWN_BY_CLIENT[client])


def test_recorded_fetch_session_ids_are_read_from_the_responses() -> None:
    fetches = [r for c in CLIENTS for r in recorded_requests(c) if r.api_key == 1]
    assert fetches and all(r.response_file for r in fetches)
    # The mock the frames were recorded against opened none: every id is 0 (no mapping).
    assert {recorded_session_id(r) for r in fetches} == {0}


def test_topic_names_of_a_recording_are_found() -> None:
    rewriter = Rewriter("kcat-1.7")
    for recorded in recorded_requests("kcat-1.7"):
        rewriter.entity(recorded.body, None)
    assert rewriter.topics, "the replay would create no topic"
    assert request  # the harness's builder stays importable beside the replay
